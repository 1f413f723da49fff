-- contenders.sql: the stores the benchmark compares, each on the table a
-- user would create for it. Loaded by bench/bench.py into a fresh database.
--   extension    the idempotency extension
--   ceiling      bare statements, no validation, no hashing (bench/scripts/ceiling_*),
--                on a plain table: the columns, primary key and expires_at index, nothing else
--   lean         (in-backend and instructions only) the cheapest bare statements when
--                the caller reads first: a replay is one SELECT, a fresh key SELECT + a plain
--                INSERT (a concurrent duplicate raises 23505) + UPDATE
--   constrained  the same statements on the same table with the CHECK constraints
--                a careful user adds (status, hash length, payload per status)
--   plpgsql      what a competent user writes instead: regex validation,
--                sha256(convert_to(jsonb::text, 'UTF8')), an advisory lock for
--                in-flight; the same outcomes as the extension, on a plain table
--   client       the same SQL sent statement by statement from a Python client
--                that hashes and validates itself (bench/client_side.py)
-- The tables are written out here, not copied from the extension's, so that
-- nothing the extension does to its own table shapes its baselines.
CREATE EXTENSION IF NOT EXISTS idempotency;

CREATE SCHEMA bench;
-- What the contention scenario counts: one row per begin, and one business
-- row per fresh (written in the same transaction as the commit).
CREATE TABLE bench.tally (contender text NOT NULL, round integer NOT NULL, kind text NOT NULL);
CREATE TABLE bench.business (contender text NOT NULL, round integer NOT NULL, key_value text NOT NULL);
-- Payloads for the fingerprint scenario.
CREATE TABLE bench.payloads (id integer PRIMARY KEY, label text NOT NULL, payload jsonb NOT NULL);

CREATE SCHEMA ceiling;
CREATE SCHEMA constrained;
CREATE SCHEMA plpgsql;
CREATE SCHEMA client;
DO $$
DECLARE s text;
BEGIN
    FOREACH s IN ARRAY ARRAY['ceiling', 'constrained', 'plpgsql', 'client'] LOOP
        EXECUTE format($t$
            CREATE TABLE %I.record (
                namespace       text COLLATE "C" NOT NULL,
                key_value       text COLLATE "C" NOT NULL,
                status          text NOT NULL,
                request_hash    bytea NOT NULL,
                request_payload jsonb,
                result_payload  jsonb,
                error_payload   jsonb,
                created_at      timestamptz NOT NULL,
                updated_at      timestamptz NOT NULL,
                expires_at      timestamptz NOT NULL,
                attempt         integer NOT NULL DEFAULT 1,
                fence           bigint,
                PRIMARY KEY (namespace, key_value));
            CREATE INDEX ON %I.record (expires_at)$t$, s, s);
    END LOOP;
END;
$$;
ALTER TABLE constrained.record
    ADD CHECK (status IN ('in_progress', 'committed', 'failed')),
    ADD CHECK (octet_length(request_hash) = 32),
    ADD CHECK (CASE status
                   WHEN 'in_progress' THEN result_payload IS NULL AND error_payload IS NULL
                   WHEN 'committed'   THEN result_payload IS NOT NULL AND error_payload IS NULL
                   WHEN 'failed'      THEN result_payload IS NULL AND error_payload IS NOT NULL
               END);

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

-- The committed keys 1..nkeys of namespace 'replay' that the replay and
-- mismatch scenarios read, for the extension, ceiling (lean reads its table),
-- constrained and plpgsql, each request hashed the way that contender hashes
-- it. bench.py (which adds the client's) and bench/instructions load them.
-- (req and res: idem_begin's output has columns named request and result.)
CREATE PROCEDURE bench.load_replay(nkeys integer, req jsonb, res jsonb)
LANGUAGE sql AS $$
    SELECT count(*) FROM generate_series(1, nkeys) i,
           LATERAL idempotency.idem_begin('replay', i::text, req) o,
           LATERAL idempotency.idem_commit('replay', i::text, res) c;
    INSERT INTO ceiling.record SELECT 'replay', i::text, 'committed', ('\x' || repeat('00', 32))::bytea, req, res, NULL,
           now(), now(), now() + interval '1 day' FROM generate_series(1, nkeys) i;
    INSERT INTO constrained.record SELECT * FROM ceiling.record;
    INSERT INTO plpgsql.record SELECT 'replay', i::text, 'committed', sha256(convert_to(req::text, 'UTF8')),
           req, res, NULL, now(), now(), now() + interval '1 day' FROM generate_series(1, nkeys) i;
$$;

-- The in-backend scenario: n cycles of one contender inside one procedure,
-- with no client, protocol or socket in the way; each cycle is its own
-- transaction (COMMIT), as each request is. Returns the seconds taken.
-- fresh: begin + commit of key base + i; replay and mismatch: a begin of
-- one of the nkeys committed keys of namespace 'replay' with its request or
-- another. The bare statements are the ceiling's (bench/scripts/ceiling_*).
CREATE PROCEDURE bench.cycles(contender text, scenario text, n integer, base bigint, nkeys integer,
                              INOUT seconds float8 DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
    started timestamptz := clock_timestamp();
    request jsonb := '{"amount": 100, "currency": "EUR", "customer": "c-42", "items": [{"sku": "a-1", "qty": 2}, {"sku": "b-7", "qty": 1}]}';
    other jsonb := '{"amount": 101, "currency": "EUR", "customer": "c-42", "items": [{"sku": "a-1", "qty": 2}, {"sku": "b-7", "qty": 1}]}';
    result jsonb := '{"payment_id": 7, "status": "captured"}';
    k text;
    r record;
BEGIN
    FOR i IN 1..n LOOP
        k := CASE scenario WHEN 'fresh' THEN (base + i)::text ELSE (i % nkeys + 1)::text END;
        IF contender = 'extension' THEN
            IF scenario = 'fresh' THEN
                PERFORM idempotency.idem_begin('inbackend', k, request);
                PERFORM idempotency.idem_commit('inbackend', k, result);
            ELSE
                PERFORM idempotency.idem_begin('replay', k, CASE scenario WHEN 'replay' THEN request ELSE other END);
            END IF;
        ELSIF contender = 'plpgsql' THEN
            IF scenario = 'fresh' THEN
                PERFORM plpgsql.idem_begin('inbackend', k, request);
                PERFORM plpgsql.idem_commit('inbackend', k, result);
            ELSE
                PERFORM plpgsql.idem_begin('replay', k, CASE scenario WHEN 'replay' THEN request ELSE other END);
            END IF;
        ELSIF contender = 'ceiling' THEN
            IF scenario = 'fresh' THEN
                INSERT INTO ceiling.record (namespace, key_value, status, request_hash, request_payload, created_at, updated_at, expires_at)
                VALUES ('inbackend', k, 'in_progress', '\x0000000000000000000000000000000000000000000000000000000000000000', request, now(), now(), now() + interval '1 day')
                ON CONFLICT DO NOTHING;
                UPDATE ceiling.record SET status = 'committed', result_payload = result, updated_at = now()
                WHERE namespace = 'inbackend' AND key_value = k AND status = 'in_progress';
            ELSE
                INSERT INTO ceiling.record (namespace, key_value, status, request_hash, request_payload, created_at, updated_at, expires_at)
                VALUES ('replay', k, 'in_progress', '\x0000000000000000000000000000000000000000000000000000000000000000', request, now(), now(), now() + interval '1 day')
                ON CONFLICT DO NOTHING;
                SELECT status, request_hash, request_payload, result_payload, error_payload INTO r
                FROM ceiling.record WHERE namespace = 'replay' AND key_value = k;
            END IF;
        ELSIF contender = 'lean' THEN
            -- Read first, write only what is missing: a replay is one SELECT;
            -- a fresh key is the SELECT, a plain INSERT (a concurrent
            -- duplicate raises 23505, which the caller must handle) and the
            -- UPDATE.
            SELECT status, request_hash, request_payload, result_payload, error_payload INTO r
            FROM ceiling.record WHERE namespace = CASE scenario WHEN 'fresh' THEN 'inbackend' ELSE 'replay' END
                                  AND key_value = k;
            IF scenario = 'fresh' THEN
                INSERT INTO ceiling.record (namespace, key_value, status, request_hash, request_payload, created_at, updated_at, expires_at)
                VALUES ('inbackend', k, 'in_progress', '\x0000000000000000000000000000000000000000000000000000000000000000', request, now(), now(), now() + interval '1 day');
                UPDATE ceiling.record SET status = 'committed', result_payload = result, updated_at = now()
                WHERE namespace = 'inbackend' AND key_value = k AND status = 'in_progress';
            END IF;
        ELSIF contender = 'constrained' THEN
            IF scenario = 'fresh' THEN
                INSERT INTO constrained.record (namespace, key_value, status, request_hash, request_payload, created_at, updated_at, expires_at)
                VALUES ('inbackend', k, 'in_progress', '\x0000000000000000000000000000000000000000000000000000000000000000', request, now(), now(), now() + interval '1 day')
                ON CONFLICT DO NOTHING;
                UPDATE constrained.record SET status = 'committed', result_payload = result, updated_at = now()
                WHERE namespace = 'inbackend' AND key_value = k AND status = 'in_progress';
            ELSE
                INSERT INTO constrained.record (namespace, key_value, status, request_hash, request_payload, created_at, updated_at, expires_at)
                VALUES ('replay', k, 'in_progress', '\x0000000000000000000000000000000000000000000000000000000000000000', request, now(), now(), now() + interval '1 day')
                ON CONFLICT DO NOTHING;
                SELECT status, request_hash, request_payload, result_payload, error_payload INTO r
                FROM constrained.record WHERE namespace = 'replay' AND key_value = k;
            END IF;
        ELSE
            RAISE EXCEPTION 'unknown contender %', contender;
        END IF;
        COMMIT;
    END LOOP;
    seconds := extract(epoch FROM clock_timestamp() - started);
END;
$$;
