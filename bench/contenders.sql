-- contenders.sql: the stores the benchmark compares, each on a table of the
-- same shape as idempotency.idempotency_record. Loaded by bench/bench.py
-- into a fresh database.
--   extension  the idempotency extension
--   ceiling    bare statements, no validation, no hashing (bench/scripts/ceiling_*)
--   plpgsql    what a competent user writes instead: regex validation,
--              sha256(convert_to(jsonb::text, 'UTF8')), an advisory lock for
--              in-flight; the same outcomes as the extension
--   client     the same SQL sent statement by statement from a Python client
--              that hashes and validates itself (bench/client_side.py)
CREATE EXTENSION IF NOT EXISTS idempotency;

CREATE SCHEMA bench;
-- What the contention scenario counts: one row per begin, and one business
-- row per fresh (written in the same transaction as the commit).
CREATE TABLE bench.tally (contender text NOT NULL, round integer NOT NULL, kind text NOT NULL);
CREATE TABLE bench.business (contender text NOT NULL, round integer NOT NULL, key_value text NOT NULL);
-- Payloads for the fingerprint scenario.
CREATE TABLE bench.payloads (id integer PRIMARY KEY, label text NOT NULL, payload jsonb NOT NULL);

CREATE SCHEMA ceiling;
CREATE SCHEMA plpgsql;
CREATE SCHEMA client;
DO $$
DECLARE s text;
BEGIN
    FOREACH s IN ARRAY ARRAY['ceiling', 'plpgsql', 'client'] LOOP
        EXECUTE format($t$
            CREATE TABLE %I.record (LIKE idempotency.idempotency_record INCLUDING ALL)$t$, s);
    END LOOP;
END;
$$;

-- The PL/pgSQL store. Same rules as the extension where a user would write
-- them: namespace and key checked with regular expressions, fingerprint of
-- jsonb's text form, a transaction-level advisory lock so a second caller
-- answers in_flight instead of waiting.
CREATE TYPE plpgsql.outcome AS (kind text, result jsonb, error jsonb, recorded_request jsonb,
                                recorded_hash bytea, submitted_hash bytea);

CREATE FUNCTION plpgsql.idem_begin(ns text, raw_key text, request jsonb, replay_window interval DEFAULT '24 hours')
RETURNS plpgsql.outcome LANGUAGE plpgsql AS $$
DECLARE
    k text := btrim(raw_key, E' \t\n\r\f\v');
    h bytea;
    r plpgsql.record;
    o plpgsql.outcome;
BEGIN
    IF ns IS NULL OR ns !~ '^[a-z0-9_-]{1,64}$' THEN
        RAISE EXCEPTION 'invalid idempotency namespace' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF k IS NULL OR k = '' OR length(k) > 255 OR k ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'invalid idempotency key' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF request IS NULL THEN
        RAISE EXCEPTION 'idempotency request must not be null' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    h := sha256(convert_to(request::text, 'UTF8'));
    o.submitted_hash := h;
    -- A recorded answer first, without the lock: a transaction-level
    -- advisory lock lasts until commit, so taking it for a replay would make
    -- concurrent replays of one key answer in_flight to each other.
    SELECT * INTO r FROM plpgsql.record WHERE namespace = ns AND key_value = k;
    IF NOT FOUND THEN
        IF NOT pg_try_advisory_xact_lock(hashtextextended(ns || ':' || k, 0)) THEN
            o.kind := 'in_flight';
            RETURN o;
        END IF;
        INSERT INTO plpgsql.record (namespace, key_value, status, request_hash, request_payload,
                                    created_at, updated_at, expires_at)
        VALUES (ns, k, 'in_progress', h, request, now(), now(), now() + replay_window)
        ON CONFLICT DO NOTHING;
        IF FOUND THEN
            o.kind := 'fresh';
            RETURN o;
        END IF;
        SELECT * INTO r FROM plpgsql.record WHERE namespace = ns AND key_value = k;
    END IF;
    IF r.request_hash <> h THEN
        o.kind := 'mismatch';
        o.recorded_request := r.request_payload;
        o.recorded_hash := r.request_hash;
    ELSIF r.status = 'committed' THEN
        o.kind := 'prior_result';
        o.result := r.result_payload;
    ELSIF r.status = 'failed' THEN
        o.kind := 'prior_error';
        o.error := r.error_payload;
    ELSE
        o.kind := 'in_flight';
    END IF;
    RETURN o;
END;
$$;

CREATE FUNCTION plpgsql.idem_commit(ns text, raw_key text, result jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF result IS NULL THEN
        RAISE EXCEPTION 'idempotency result must not be null' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE plpgsql.record SET status = 'committed', result_payload = result, updated_at = now()
    WHERE namespace = ns AND key_value = btrim(raw_key, E' \t\n\r\f\v') AND status = 'in_progress';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cannot commit an idempotency record that is not in progress'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
END;
$$;
