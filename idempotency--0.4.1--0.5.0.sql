/* idempotency--0.4.1--0.5.0.sql: release 0.5.0 closes every path to a second
   fresh for one key (fences that never repeat, a commit refused while a claim
   is unfinished, reads under the namespace lock, serialization failures under
   REPEATABLE READ) and the security findings against 0.4.1 (lock tags keyed
   with a secret, administration that stalls no other namespace, replay
   windows the caller cannot lengthen, requests scrubbed when store_request
   goes off). */

\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.5.0'" to load this file. \quit

-- The store -------------------------------------------------------------------

-- Fences: every claim of a key (a fresh begin or a takeover) draws one, and
-- the transitions may require it. They never repeat, so a worker holding an
-- old one cannot finish a record taken over, or forgotten and begun again, or
-- purged and begun again. They start above every int4, so an attempt number
-- passed where the fence belongs is recognised and refused.
CREATE SEQUENCE idem_fence_seq AS bigint START 4294967296 MINVALUE 4294967296 NO CYCLE;
SELECT pg_catalog.pg_extension_config_dump('@extschema@.idem_fence_seq', '');
REVOKE ALL ON SEQUENCE idem_fence_seq FROM PUBLIC;

ALTER TABLE idempotency_record ADD COLUMN fence bigint;

-- The store's C code is the table's only writer and keeps its rules where it
-- writes; CHECK constraints were compiled again by every statement that
-- wrote the table, and were most of the cost of a begin and a commit
-- (docs/performance.md).
ALTER TABLE idempotency_record
    DROP CONSTRAINT idempotency_record_status_check,
    DROP CONSTRAINT idempotency_record_request_hash_check,
    DROP CONSTRAINT idempotency_record_outcome_check;
ALTER TYPE idem_outcome ADD ATTRIBUTE fence bigint;

-- The key that lock tags are keyed with: a role that reads pg_locks sees 64
-- bits of HMAC-SHA256(secret, namespace, key), against which it can test no
-- guess, and with which it can make no two keys collide. Only the owner reads
-- it. Not dumped: a restored database draws its own.
CREATE TABLE idem_lock_secret (
    secret bytea NOT NULL CONSTRAINT idem_lock_secret_size_check CHECK (pg_catalog.octet_length(secret) = 32)
);
CREATE UNIQUE INDEX idem_lock_secret_one_row ON idem_lock_secret ((true));
REVOKE ALL ON idem_lock_secret FROM PUBLIC;
-- Two random UUIDs are 32 bytes with 244 random bits (pg_strong_random).
INSERT INTO idem_lock_secret
SELECT pg_catalog.decode(pg_catalog.replace(pg_catalog.gen_random_uuid()::text OPERATOR(pg_catalog.||)
                                            pg_catalog.gen_random_uuid()::text, '-', ''), 'hex');

-- idem_begin and the transitions move to entry points that a library older
-- than 0.5.0 does not have: a session still running the old library fails
-- with "could not find function" instead of misreading the new outcome.
CREATE OR REPLACE FUNCTION idem_begin(namespace text, key text, request jsonb, replay_window interval DEFAULT NULL)
RETURNS @extschema@.idem_outcome
AS 'MODULE_PATHNAME', 'idem_begin_0_5'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
-- (No SET search_path any more, for it and the transitions: every statement
-- the C functions run names its objects with their schema, and the pin cost
-- more than a tenth of a fresh cycle: docs/performance.md.)

-- The transitions take the fence instead of the attempt number, which
-- repeats for a key once its record is forgotten or purged. (Replaced, not
-- overloaded: with defaults, both would match a call with three arguments.)
DROP FUNCTION idem_commit_typed(text, text, anyelement);
DROP FUNCTION idem_commit(text, text, jsonb, integer);
DROP FUNCTION idem_fail_permanent(text, text, jsonb, integer);
DROP FUNCTION idem_fail_transient(text, text, integer);

CREATE FUNCTION idem_commit(namespace text, key text, result jsonb, fence bigint DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_commit_0_5'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_commit(text, text, jsonb, bigint) IS
'Records the result of an in-progress operation for replay (only while it is still the claim that drew fence, when given)';

CREATE FUNCTION idem_fail_permanent(namespace text, key text, error jsonb, fence bigint DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_fail_permanent_0_5'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_fail_permanent(text, text, jsonb, bigint) IS
'Records a permanent error ({"class_tag", "message", "cause"?}) of an in-progress operation for replay';

CREATE FUNCTION idem_fail_transient(namespace text, key text, fence bigint DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_fail_transient_0_5'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_fail_transient(text, text, bigint) IS
'Forgets an in-progress operation so that the next idem_begin is fresh';

CREATE FUNCTION idem_commit_typed(namespace text, key text, result anyelement, fence bigint DEFAULT NULL)
RETURNS void
LANGUAGE sql VOLATILE PARALLEL UNSAFE
AS $$ SELECT @extschema@.idem_commit(namespace, key, pg_catalog.to_jsonb(result), fence) $$;

COMMENT ON FUNCTION idem_commit_typed(text, text, anyelement, bigint) IS
'idem_commit for a value of any type, recorded as to_jsonb(result)';

-- Purging never deletes an in_progress record whose lease still runs (its
-- worker may yet finish it), however old its replay window. (SECURITY
-- DEFINER again: CREATE OR REPLACE resets what it does not state.)
CREATE OR REPLACE FUNCTION idem_purge(batch_size integer DEFAULT 10000, max_batches integer DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    total bigint := 0;
    batches integer := 0;
    n bigint;
    default_lease interval;
BEGIN
    IF batch_size IS NULL OR batch_size < 1 THEN
        RAISE EXCEPTION 'invalid purge batch size'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('batch_size must be a positive integer, not %s.', coalesce(batch_size::text, 'NULL'));
    END IF;
    IF max_batches < 1 THEN
        RAISE EXCEPTION 'invalid purge batch count'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('max_batches must be a positive integer or NULL, not %s.', max_batches);
    END IF;
    -- The default lease is the library's setting. Read it once the library
    -- is loaded (calling any of its functions loads it): before, a value set
    -- in the session is a placeholder that any role may have set.
    PERFORM @extschema@.idem_stats_count_purged(0);
    default_lease := coalesce(nullif(current_setting('idempotency.in_progress_lease', true), ''), '0')::interval;
    LOOP
        -- A lease is a length of time, as begin counts it (extract(epoch)),
        -- not a calendar interval added in the purger's time zone.
        WITH doomed AS (
            SELECT r.ctid FROM @extschema@.idempotency_record r
            WHERE r.expires_at < now()
              AND (r.status <> 'in_progress'
                   OR extract(epoch FROM now() - r.updated_at)
                      >= extract(epoch FROM coalesce((SELECT c.in_progress_lease FROM @extschema@.idem_namespace_config c
                                                      WHERE c.namespace = r.namespace), default_lease)))
            ORDER BY r.expires_at
            LIMIT batch_size
            FOR UPDATE OF r SKIP LOCKED)
        DELETE FROM @extschema@.idempotency_record r USING doomed d WHERE r.ctid = d.ctid;
        GET DIAGNOSTICS n = ROW_COUNT;
        total := total + n;
        batches := batches + 1;
        EXIT WHEN n < batch_size OR batches = max_batches;
    END LOOP;
    PERFORM @extschema@.idem_stats_count_purged(total);
    RETURN total;
END;
$$;

-- The registry ----------------------------------------------------------------

-- Administration that must see every record of one namespace locks that
-- namespace only (0.4 locked the whole table in SHARE mode, and one tenant's
-- open transaction then stalled every other namespace's begins).
DROP FUNCTION idem_lock_records_for_admin();

CREATE FUNCTION idem_lock_namespace(namespace text)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_lock_namespace'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

REVOKE ALL ON FUNCTION idem_lock_namespace(text) FROM PUBLIC;

COMMENT ON FUNCTION idem_lock_namespace(text) IS
'Internal: waits for the transactions that began keys in a namespace and keeps new ones out until this transaction ends';

-- As in 0.4.1, and: the namespace lock instead of the table lock; switching
-- store_request off removes the requests that records kept.
CREATE OR REPLACE FUNCTION idem_namespace_configure(
    namespace text,
    replay_window interval DEFAULT NULL,
    in_progress_lease interval DEFAULT NULL,
    store_request boolean DEFAULT NULL,
    hash_keys boolean DEFAULT false,
    max_payload_bytes integer DEFAULT NULL)
RETURNS @extschema@.idem_namespace_config
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
SET IntervalStyle = postgres
AS $$
DECLARE
    ns ALIAS FOR namespace;
    old @extschema@.idem_namespace_config;
    saved @extschema@.idem_namespace_config;
    records bigint;
    keeps_requests boolean :=
        coalesce(store_request, nullif(current_setting('idempotency.store_request', true), '')::boolean, true);
    default_lease interval;
BEGIN
    PERFORM @extschema@.idem_parse(ns, 'k');   -- raises 22023 for a NULL or invalid namespace
    -- (Read once idem_parse has loaded the library: see idem_purge.)
    default_lease := coalesce(nullif(current_setting('idempotency.in_progress_lease', true), ''), '0')::interval;
    IF replay_window <= interval '0' OR strpos(replay_window::text, '-') > 0
       OR replay_window >= interval '10000 years' THEN
        RAISE EXCEPTION 'invalid idempotency replay window'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('The replay window must be positive and under 10000 years, and no part of it negative, not %s.', replay_window);
    END IF;
    IF in_progress_lease < interval '0' OR strpos(in_progress_lease::text, '-') > 0
       OR in_progress_lease >= interval '100 years' THEN
        RAISE EXCEPTION 'invalid idempotency in-progress lease'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('The lease must be 0 (never taken over) or positive and under 100 years, and no part of it negative, not %s.', in_progress_lease);
    END IF;
    IF hash_keys IS NULL THEN
        RAISE EXCEPTION 'hash_keys must not be null'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'hash_keys is true or false; it has no GUC to follow.';
    END IF;
    IF max_payload_bytes < 1 THEN
        RAISE EXCEPTION 'invalid idempotency payload limit'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('max_payload_bytes must be a positive number of bytes or NULL, not %s.', max_payload_bytes);
    END IF;
    -- The row lock orders concurrent configures of one namespace.
    SELECT * INTO old FROM @extschema@.idem_namespace_config c WHERE c.namespace = ns FOR UPDATE;
    IF coalesce(old.hash_keys, false) <> hash_keys OR NOT keeps_requests
       OR (coalesce(old.in_progress_lease, default_lease) > interval '0'
           AND coalesce(in_progress_lease, default_lease) = interval '0') THEN
        -- Wait for the transactions that began keys in this namespace (they
        -- read the old settings) and hold off new ones until this
        -- transaction ends; then every record is visible to the statements
        -- below, which READ COMMITTED gives a new snapshot.
        PERFORM @extschema@.idem_lock_namespace(ns);
    END IF;
    IF coalesce(old.hash_keys, false) <> hash_keys THEN
        SELECT count(*) INTO records FROM @extschema@.idempotency_record r WHERE r.namespace = ns;
        IF records > 0 THEN
            RAISE EXCEPTION 'cannot change hash_keys of idempotency namespace "%"', ns
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = format('The namespace has %s record%s, stored with hash_keys %s; they would no longer be found.',
                                      records, CASE WHEN records = 1 THEN '' ELSE 's' END, CASE WHEN coalesce(old.hash_keys, false) THEN 'on' ELSE 'off' END),
                      HINT = 'Use a new namespace, or wait until its records have expired and been purged.';
        END IF;
    END IF;
    IF coalesce(old.in_progress_lease, default_lease) > interval '0'
       AND coalesce(in_progress_lease, default_lease) = interval '0' THEN
        SELECT count(*) INTO records FROM @extschema@.idempotency_record r
        WHERE r.namespace = ns AND r.status = 'in_progress';
        IF records > 0 THEN
            RAISE EXCEPTION 'cannot remove the in-progress lease of idempotency namespace "%"', ns
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = format('The namespace has %s record%s in progress, claimed under the lease; without one, nothing could take %s over until %s replay window%s ended.',
                                      records, CASE WHEN records = 1 THEN '' ELSE 's' END, CASE WHEN records = 1 THEN 'it' ELSE 'them' END,
                                      CASE WHEN records = 1 THEN 'its' ELSE 'their' END, CASE WHEN records = 1 THEN '' ELSE 's' END),
                      HINT = 'Let the records in progress be finished or taken over, or end them with idem_fail_transient; then remove the lease.';
        END IF;
    END IF;
    IF NOT keeps_requests THEN
        -- Requests kept while store_request was on are removed, not just
        -- hidden (idem_begin hides them too, from the moment it is off).
        UPDATE @extschema@.idempotency_record r SET request_payload = NULL
        WHERE r.namespace = ns AND r.request_payload IS NOT NULL;
        GET DIAGNOSTICS records = ROW_COUNT;
        IF records > 0 THEN
            RAISE NOTICE 'idempotency: removed the stored request from % record% of namespace "%"',
                records, CASE WHEN records = 1 THEN '' ELSE 's' END, ns;
        END IF;
    END IF;
    INSERT INTO @extschema@.idem_namespace_config AS c
        (namespace, replay_window, in_progress_lease, store_request, hash_keys, max_payload_bytes)
    VALUES (ns, replay_window, in_progress_lease, store_request, hash_keys, max_payload_bytes)
    ON CONFLICT ON CONSTRAINT idem_namespace_config_pkey DO UPDATE SET
        replay_window = excluded.replay_window,
        in_progress_lease = excluded.in_progress_lease,
        store_request = excluded.store_request,
        hash_keys = excluded.hash_keys,
        max_payload_bytes = excluded.max_payload_bytes,
        configured_at = now()
    RETURNING * INTO saved;
    RETURN saved;
END;
$$;

-- As in 0.4.0, with the namespace lock instead of the table lock.
CREATE OR REPLACE FUNCTION idem_namespace_drop(namespace text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ns ALIAS FOR namespace;
    records bigint;
BEGIN
    PERFORM @extschema@.idem_parse(ns, 'k');
    PERFORM FROM @extschema@.idem_namespace_config c WHERE c.namespace = ns FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM @extschema@.idem_lock_namespace(ns);
    SELECT count(*) INTO records FROM @extschema@.idempotency_record r WHERE r.namespace = ns;
    IF records > 0 THEN
        RAISE EXCEPTION 'cannot drop idempotency namespace "%"', ns
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('The namespace has %s record%s.', records, CASE WHEN records = 1 THEN '' ELSE 's' END),
                  HINT = 'Wait until they have expired and been purged.';
    END IF;
    DELETE FROM @extschema@.idem_namespace_config c WHERE c.namespace = ns;
    RETURN true;
END;
$$;

-- Typed use -------------------------------------------------------------------

-- As in 0.2.0, and: a domain over a composite type decodes as that
-- composite (0.4 read the domain's own typrelid, found none, and answered
-- ID001 for a value of that very type).
CREATE OR REPLACE FUNCTION idem_result(outcome @extschema@.idem_outcome, template anyelement)
RETURNS anyelement
LANGUAGE plpgsql STABLE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    typ regtype := pg_typeof(template);
    base oid := typ;
    stored jsonb := (outcome).result;
    why text;
    decoded ALIAS FOR $0;
    composite boolean;
    anonymous boolean;
    hint constant text := 'The type changed since the result was recorded. Decode it as jsonb, or use a new namespace for the new type.';
BEGIN
    IF stored IS NULL OR jsonb_typeof(stored) = 'null' THEN
        RETURN NULL;
    END IF;
    LOOP   -- a domain decodes as its base type, and is then checked as itself
        EXIT WHEN (SELECT t.typtype <> 'd' FROM pg_type t WHERE t.oid = base);
        base := (SELECT t.typbasetype FROM pg_type t WHERE t.oid = base);
    END LOOP;
    SELECT t.typtype = 'p' OR (t.typtype = 'c' AND t.typrelid = 0), t.typrelid <> 0
        INTO STRICT anonymous, composite FROM pg_type t WHERE t.oid = base;
    IF anonymous THEN
        RAISE EXCEPTION 'idem_result needs a named type, not %', typ
            USING ERRCODE = 'datatype_mismatch',
                  DETAIL = 'Pass a NULL of the type to decode into, for example NULL::my_result.';
    END IF;
    why := @extschema@.idem_shape_mismatch(stored, typ);
    IF why IS NOT NULL THEN
        RAISE EXCEPTION 'incompatible stored state: the stored result does not fit type %', typ
            USING ERRCODE = 'ID001', DETAIL = why,
                  HINT = hint;
    END IF;
    BEGIN
        -- Dynamic SQL for composites too: a cached jsonb_populate_record
        -- keeps the row type it first saw for the rest of the transaction,
        -- so a type altered in that transaction would decode half-filled.
        IF composite THEN
            EXECUTE 'SELECT r.* FROM pg_catalog.jsonb_populate_record($1, $2) r'
                INTO decoded USING template, stored;
        ELSE
            EXECUTE format('SELECT v FROM pg_catalog.jsonb_to_record($1) AS r(v %s)', typ)
                INTO decoded USING jsonb_build_object('v', stored);
        END IF;
    EXCEPTION WHEN data_exception OR integrity_constraint_violation THEN
        GET STACKED DIAGNOSTICS why = MESSAGE_TEXT;
        RAISE EXCEPTION 'incompatible stored state: the stored result does not fit type %', typ
            USING ERRCODE = 'ID001', DETAIL = 'A stored value does not convert: ' || why || '.',
                  HINT = hint;
    END;
    RETURN decoded;
END;
$$;

-- HTTP ----------------------------------------------------------------------

-- The Idempotency-Key header as the IETF draft defines it (a quoted
-- Structured Field String), an optional documentation URI for the problems
-- (the draft's Link rel="describedby"), and no exception block in
-- idem_http_key, which is PARALLEL SAFE and so must run in a parallel worker.
-- idem_http_response is no longer STRICT: with the new docs_uri argument
-- NULL by default, STRICT would answer NULL to every call.
DROP FUNCTION idem_http_key(text, text);
DROP FUNCTION idem_http_response(@extschema@.idem_outcome, integer);
DROP FUNCTION idem_http_problem(integer, text, text);

-- The key in an Idempotency-Key header, as the IETF draft defines the field
-- (a Structured Field String, "8e03978e-...") or as a bare value
-- (8e03978e-...): the same key either way. reason says why a header holds
-- no key (NULL when there is no header). Answers, never raises, for a bad
-- header: it is the client's mistake.
CREATE FUNCTION idem_header_key(namespace text, header text, OUT key text, OUT reason text)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_header_key'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION idem_header_key(text, text) IS
'The key in an Idempotency-Key header (quoted sf-string or bare), or why it holds none';

-- An RFC 9457 problem-details body. type is docs_uri when the service
-- documents its problems there, else about:blank; title is the status's
-- reason phrase; code carries the machine-readable error code. docs_uri
-- also goes into a Link header, so only printable ASCII without spaces,
-- quotes or angle brackets is accepted.
CREATE FUNCTION idem_http_problem(status integer, code text, detail text, docs_uri text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF docs_uri ~ '[^!-~]|[<>"]' OR docs_uri = '' THEN
        RAISE EXCEPTION 'invalid problem documentation URI'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'docs_uri becomes the problem''s type and a Link header: printable ASCII without spaces, quotes or angle brackets, such as https://example.com/problems/idempotency.';
    END IF;
    RETURN jsonb_strip_nulls(jsonb_build_object(
        'type', coalesce(docs_uri, 'about:blank'),
        'title', CASE status
            WHEN 400 THEN 'Bad Request' WHEN 401 THEN 'Unauthorized' WHEN 402 THEN 'Payment Required'
            WHEN 403 THEN 'Forbidden' WHEN 404 THEN 'Not Found' WHEN 409 THEN 'Conflict'
            WHEN 410 THEN 'Gone' WHEN 412 THEN 'Precondition Failed' WHEN 422 THEN 'Unprocessable Content'
            WHEN 429 THEN 'Too Many Requests' WHEN 500 THEN 'Internal Server Error'
            WHEN 502 THEN 'Bad Gateway' WHEN 503 THEN 'Service Unavailable' END,
        'status', status,
        'detail', detail,
        'code', code));
END;
$$;

COMMENT ON FUNCTION idem_http_problem(integer, text, text, text) IS
'An RFC 9457 problem-details body (type docs_uri, or about:blank) with a code member';

-- The Idempotency-Key header of a request, checked: key is set when the
-- header holds a valid key; otherwise key is NULL and status, headers and
-- body are the 400 response (MISSING_IDEMPOTENCY_KEY when the header is
-- absent or NULL, INVALID_IDEMPOTENCY_KEY with the reason otherwise). With
-- docs_uri, the problem's type is that URI and a Link header (rel
-- "describedby") points there, as the draft shows. An invalid namespace is
-- the caller's bug, not the client's, and raises idem_parse's error.
CREATE FUNCTION idem_http_key(namespace text, header text, docs_uri text DEFAULT NULL,
                              OUT key text, OUT status integer, OUT headers jsonb, OUT body jsonb)
RETURNS record
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    reason text;
BEGIN
    SELECT h.key, h.reason INTO key, reason FROM @extschema@.idem_header_key(namespace, header) h;
    IF key IS NULL THEN
        status := 400;
        body := @extschema@.idem_http_problem(400,
            CASE WHEN reason IS NULL THEN 'MISSING_IDEMPOTENCY_KEY' ELSE 'INVALID_IDEMPOTENCY_KEY' END,
            coalesce(reason, 'This request needs an Idempotency-Key header.'), docs_uri);
        headers := jsonb_build_object('Content-Type', 'application/problem+json')
                   || CASE WHEN docs_uri IS NULL THEN '{}'
                           ELSE jsonb_build_object('Link', format('<%s>; rel="describedby"', docs_uri)) END;
    END IF;
END;
$$;

COMMENT ON FUNCTION idem_http_key(text, text, text) IS
'Checks an Idempotency-Key header: the key, or the 400 problem response';

-- The HTTP response for an outcome that needs no work: a replay, a request
-- in flight or a reused key. A replayed result recorded as
-- {"status": s, "headers": {...}, "body": b} replays status s, its headers
-- and body b; any other result replays as 200 with the result as the body.
-- A replayed error is 422 with a problem body: its class_tag as the code,
-- its message as the detail. Every replay adds Idempotency-Replayed: true.
-- in_flight is 409 with Retry-After; mismatch is 422 and never carries the
-- recorded request, which may be another client's; both are of type
-- docs_uri, with a Link header, when it is given. A fresh outcome has no
-- response yet: that is an error.
CREATE FUNCTION idem_http_response(outcome @extschema@.idem_outcome, retry_after integer DEFAULT 1,
                                   docs_uri text DEFAULT NULL,
                                   OUT status integer, OUT headers jsonb, OUT body jsonb)
RETURNS record
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    problem constant jsonb := jsonb_build_object('Content-Type', 'application/problem+json')
        || CASE WHEN docs_uri IS NULL THEN '{}'
                ELSE jsonb_build_object('Link', format('<%s>; rel="describedby"', docs_uri)) END;
    replayed constant jsonb := '{"Idempotency-Replayed": "true"}';
    recorded jsonb;   -- the status a replayed result recorded
BEGIN
    IF outcome IS NOT DISTINCT FROM NULL THEN
        RETURN;   -- NULL in, NULL out, as when the function was STRICT
    END IF;
    IF retry_after IS NULL OR retry_after < 0 THEN
        RAISE EXCEPTION 'invalid Retry-After'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('retry_after must be zero or more seconds, not %s.', coalesce(retry_after::text, 'NULL'));
    END IF;
    CASE outcome.kind
    WHEN 'prior_result' THEN
        IF jsonb_typeof(outcome.result) = 'object' AND outcome.result ? 'status' AND outcome.result ? 'body' THEN
            recorded := outcome.result -> 'status';
            body := outcome.result -> 'body';
            headers := CASE WHEN jsonb_typeof(outcome.result -> 'headers') = 'object'
                            THEN outcome.result -> 'headers' ELSE '{}' END || replayed;
        ELSE
            recorded := '200';
            body := outcome.result;
            headers := replayed;
        END IF;
    WHEN 'prior_error' THEN
        status := 422;
        body := @extschema@.idem_http_problem(422, outcome.error ->> 'class_tag', outcome.error ->> 'message');
        headers := jsonb_build_object('Content-Type', 'application/problem+json') || replayed;
    WHEN 'in_flight' THEN
        status := 409;
        body := @extschema@.idem_http_problem(409, 'IDEMPOTENCY_REQUEST_IN_PROGRESS',
            'A request with this idempotency key is still being processed; retry after the time in Retry-After.',
            docs_uri);
        headers := problem || jsonb_build_object('Retry-After', retry_after::text);
    WHEN 'mismatch' THEN
        status := 422;
        body := @extschema@.idem_http_problem(422, 'IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST',
            'This idempotency key was already used with a different request.', docs_uri);
        headers := problem;
    WHEN 'fresh' THEN
        RAISE EXCEPTION 'a fresh outcome has no HTTP response yet'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'idem_http_response answers replays, requests in flight and reused keys.',
                  HINT = 'Do the work, record it with idem_commit or idem_fail_permanent, and answer with what you recorded.';
    ELSE
        RAISE EXCEPTION 'invalid idempotency outcome'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Its kind is NULL; pass the row idem_begin returned.';
    END CASE;
    IF recorded IS NOT NULL THEN
        IF NOT (jsonb_typeof(recorded) = 'number' AND recorded::numeric BETWEEN 100 AND 599
                AND recorded::numeric = trunc(recorded::numeric)) THEN
            RAISE EXCEPTION 'invalid recorded HTTP status'
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = format('The recorded status %s is not an integer from 100 to 599.', recorded);
        END IF;
        status := recorded::numeric;
    END IF;
END;
$$;

COMMENT ON FUNCTION idem_http_response(@extschema@.idem_outcome, integer, text) IS
'The HTTP status, headers and body for a replay, a request in flight or a reused key';

-- Ownership of the schema -------------------------------------------------------

-- A schema created before the extension by another role lets that role drop
-- the store with DROP SCHEMA ... CASCADE. New installations refuse such a
-- schema; an existing one is reported here.
-- Records that 0.4.1's idem_http_key made from a quoted header keep the
-- double quotes in their key, where 0.5.0 finds the string inside them: a
-- retry of such a request would begin again. Each finished record still in
-- its replay window is copied to the key 0.5.0 finds in the same header
-- (unless a record has that key already). What cannot be copied is
-- reported: records in progress (a copy would be a second claim that no
-- worker holds) and the records of namespaces that hash their keys (whose
-- keys cannot be read), with a warning (a notice would not be shown: an
-- extension script runs with client_min_messages at warning at least).
-- docs/operations.md says what to do about them.
DO $quoted$
DECLARE
    candidates bigint;
    copied bigint;
    unreadable bigint;
    running bigint;
    hashed bigint;
BEGIN
    WITH quoted AS (
        SELECT r.*, h.key AS new_key
        FROM @extschema@.idempotency_record r
        CROSS JOIN LATERAL @extschema@.idem_header_key(r.namespace, r.key_value) h
        WHERE r.key_value OPERATOR(pg_catalog.~~) '"%' AND r.expires_at OPERATOR(pg_catalog.>) pg_catalog.now()
          AND h.key IS DISTINCT FROM r.key_value),
    inserted AS (
        INSERT INTO @extschema@.idempotency_record
            (namespace, key_value, status, request_hash, request_payload, result_payload, error_payload,
             created_at, updated_at, expires_at, attempt)
        SELECT q.namespace, q.new_key, q.status, q.request_hash, q.request_payload, q.result_payload, q.error_payload,
               q.created_at, q.updated_at, q.expires_at, q.attempt
        FROM quoted q
        WHERE q.status OPERATOR(pg_catalog.<>) 'in_progress' AND q.new_key IS NOT NULL
        ON CONFLICT (namespace, key_value) DO NOTHING
        RETURNING 1)
    SELECT (SELECT pg_catalog.count(*) FROM quoted q
            WHERE q.status OPERATOR(pg_catalog.<>) 'in_progress' AND q.new_key IS NOT NULL),
           (SELECT pg_catalog.count(*) FROM inserted),
           (SELECT pg_catalog.count(*) FROM quoted q WHERE q.new_key IS NULL),
           (SELECT pg_catalog.count(*) FROM quoted q
            WHERE q.status OPERATOR(pg_catalog.=) 'in_progress' AND q.new_key IS NOT NULL)
    INTO candidates, copied, unreadable, running;
    SELECT pg_catalog.count(*) INTO hashed
    FROM @extschema@.idempotency_record r JOIN @extschema@.idem_namespace_config c USING (namespace)
    WHERE c.hash_keys AND r.expires_at OPERATOR(pg_catalog.>) pg_catalog.now();
    IF candidates OPERATOR(pg_catalog.>) copied OR unreadable OPERATOR(pg_catalog.>) 0
       OR running OPERATOR(pg_catalog.>) 0 OR hashed OPERATOR(pg_catalog.>) 0 THEN
        RAISE WARNING 'idempotency 0.5.0: records that may come from quoted Idempotency-Key headers were not carried over'
            USING DETAIL = pg_catalog.format('Not copied: %s in progress, %s whose key without quotes another record already has, '
                                             '%s whose quoted key 0.5.0 refuses, and %s of namespaces that hash their keys (which cannot be read). '
                                             '0.4.1''s idem_http_key kept the double quotes of a quoted header in the key, 0.5.0''s does not: '
                                             'a retry of such a request made before the update begins a new attempt, gets the other record''s answer, or a 400.',
                                             running, candidates OPERATOR(pg_catalog.-) copied, unreadable, hashed),
                  HINT = 'See "To 0.5.0" in docs/operations.md: until those records end, take keys from quoted headers as 0.4.1 did.';
    END IF;
END;
$quoted$;

DO $check$
DECLARE
    schema_owner regrole := (SELECT n.nspowner::regrole FROM pg_catalog.pg_namespace n
                             WHERE n.oid = '@extschema@'::pg_catalog.regnamespace);
    extension_owner regrole := (SELECT e.extowner::regrole FROM pg_catalog.pg_extension e
                                WHERE e.extname = 'idempotency');
BEGIN
    IF schema_owner OPERATOR(pg_catalog.<>) extension_owner
       AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) schema_owner) THEN
        RAISE WARNING 'idempotency 0.5.0: schema @extschema@ is owned by role %, not by the extension''s owner %', schema_owner, extension_owner
            USING DETAIL = 'Its owner can drop the store with DROP SCHEMA ... CASCADE.',
                  HINT = format('ALTER SCHEMA @extschema@ OWNER TO %s, unless that role is meant to own it.', extension_owner);
    END IF;
END;
$check$;

-- Privileges ----------------------------------------------------------------

-- What this script granted or revoked stays out of pg_init_privs but for
-- the owner's, PUBLIC's and pg_monitor's entries (docs/internals.md).
UPDATE pg_catalog.pg_init_privs i
SET initprivs = ARRAY(
    SELECT item FROM pg_catalog.unnest(i.initprivs) item
    WHERE (SELECT x.grantee = x.grantor OR x.grantee = 0 OR x.grantee = 'pg_monitor'::pg_catalog.regrole
           FROM pg_catalog.aclexplode(ARRAY[item]) x LIMIT 1))
WHERE i.privtype = 'e'
  AND ((i.classoid = 'pg_catalog.pg_namespace'::pg_catalog.regclass AND i.objoid = '@extschema@'::pg_catalog.regnamespace)
       OR (i.classoid, i.objoid) IN (
           SELECT d.classid, d.objid FROM pg_catalog.pg_depend d
           WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'
             AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'idempotency')));

-- From PostgreSQL 17 the roles named in pg_init_privs are recorded in
-- pg_shdepend too, and editing pg_init_privs (above, and in 0.4.0 to
-- 0.4.1) leaves those records behind: DROP ROLE of a role the 0.3.0 to
-- 0.4.0 update migrated then fails with "initial privileges for schema
-- idempotency depend on it". Remove the records of the extension's objects
-- that name a role no longer in their initial privileges (none before 17).
DELETE FROM pg_catalog.pg_shdepend d
WHERE d.deptype = 'i'
  AND d.dbid = (SELECT db.oid FROM pg_catalog.pg_database db WHERE db.datname = pg_catalog.current_database())
  AND ((d.classid = 'pg_catalog.pg_namespace'::pg_catalog.regclass AND d.objid = '@extschema@'::pg_catalog.regnamespace)
       OR (d.classid, d.objid) IN (
           SELECT dep.classid, dep.objid FROM pg_catalog.pg_depend dep
           WHERE dep.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND dep.deptype = 'e'
             AND dep.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'idempotency')))
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_init_privs i, pg_catalog.aclexplode(i.initprivs) x
                  WHERE i.classoid = d.classid AND i.objoid = d.objid AND i.objsubid = d.objsubid
                    AND d.refobjid IN (x.grantee, x.grantor));
