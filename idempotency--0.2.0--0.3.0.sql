/* idempotency--0.2.0--0.3.0.sql: release 0.3.0 adds statistics and the
   mapping from outcomes to HTTP responses. */

\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.3.0'" to load this file. \quit

-- Statistics ---------------------------------------------------------------

-- The cumulative counters (kept in shared memory when the library is in
-- shared_preload_libraries). With counters_on false every other column is
-- NULL. Counts include calls whose transaction later rolled back.
CREATE FUNCTION idem_stats_counters(
    OUT counters_on boolean,
    OUT begin_fresh bigint,
    OUT begin_in_flight bigint,
    OUT begin_prior_result bigint,
    OUT begin_prior_error bigint,
    OUT begin_mismatch bigint,
    OUT commits bigint,
    OUT permanent_failures bigint,
    OUT transient_failures bigint,
    OUT waits bigint,
    OUT purged_rows bigint,
    OUT stats_reset timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_stats_counters'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idem_stats_counters() IS
'Cumulative counters of begin outcomes, transitions, waits and purged rows (NULL unless preloaded)';

CREATE FUNCTION idem_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'idem_stats_reset'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idem_stats_reset() IS
'Sets the counters of idem_stats back to zero';

-- Internal: idem_purge reports the rows it deleted here.
CREATE FUNCTION idem_stats_count_purged(rows bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_stats_count_purged'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idem_stats_count_purged(bigint) IS
'Internal: adds to the purged_rows counter (called by idem_purge)';

-- The counters and the size of the table with its indexes and TOAST.
CREATE VIEW idem_stats AS
SELECT c.*, pg_catalog.pg_total_relation_size('@extschema@.idempotency_record'::pg_catalog.regclass) AS table_bytes
FROM @extschema@.idem_stats_counters() c;

COMMENT ON VIEW idem_stats IS
'Cumulative counters (counters_on false unless preloaded) and the size of the store';

-- One row per namespace, counted from the table (a full scan: for an
-- operator or a monitoring job once a minute, not for every request). An
-- in_progress row is visible here only once the transaction that began it
-- has committed without finishing it: an abandoned or long-running operation.
CREATE VIEW idem_namespace_stats AS
SELECT namespace,
       count(*) FILTER (WHERE status = 'in_progress') AS in_progress,
       count(*) FILTER (WHERE status = 'committed') AS committed,
       count(*) FILTER (WHERE status = 'failed') AS failed,
       pg_catalog.now() - min(created_at) FILTER (WHERE status = 'in_progress') AS oldest_in_progress_age,
       count(*) FILTER (WHERE expires_at < pg_catalog.now()) AS expired,
       sum(pg_catalog.pg_column_size(r.*))::bigint AS row_bytes
FROM @extschema@.idempotency_record r
GROUP BY namespace;

COMMENT ON VIEW idem_namespace_stats IS
'Rows per namespace by status, the oldest committed in_progress row, expired rows not yet purged, bytes';

-- What is stored is not for every role: monitoring roles read the views,
-- superusers reset the counters.
REVOKE ALL ON idem_stats, idem_namespace_stats FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_stats_counters(), idem_stats_reset() FROM PUBLIC;
GRANT USAGE ON SCHEMA @extschema@ TO pg_monitor;
GRANT SELECT ON idem_stats, idem_namespace_stats TO pg_monitor;
GRANT EXECUTE ON FUNCTION idem_stats_counters() TO pg_monitor;

-- idem_purge as in 0.2.0, now adding what it deleted to purged_rows.
CREATE OR REPLACE FUNCTION idem_purge(batch_size integer DEFAULT 10000, max_batches integer DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    total bigint := 0;
    batches integer := 0;
    n bigint;
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
    LOOP
        WITH doomed AS (
            SELECT ctid FROM @extschema@.idempotency_record
            WHERE expires_at < now()
            ORDER BY expires_at
            LIMIT batch_size
            FOR UPDATE SKIP LOCKED)
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

-- HTTP ----------------------------------------------------------------------

-- An RFC 9457 problem-details body. type is about:blank, so title is the
-- status's reason phrase; code carries the machine-readable error code.
CREATE FUNCTION idem_http_problem(status integer, code text, detail text)
RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT jsonb_strip_nulls(jsonb_build_object(
    'type', 'about:blank',
    'title', CASE status
        WHEN 400 THEN 'Bad Request' WHEN 401 THEN 'Unauthorized' WHEN 402 THEN 'Payment Required'
        WHEN 403 THEN 'Forbidden' WHEN 404 THEN 'Not Found' WHEN 409 THEN 'Conflict'
        WHEN 410 THEN 'Gone' WHEN 412 THEN 'Precondition Failed' WHEN 422 THEN 'Unprocessable Content'
        WHEN 429 THEN 'Too Many Requests' WHEN 500 THEN 'Internal Server Error'
        WHEN 502 THEN 'Bad Gateway' WHEN 503 THEN 'Service Unavailable' END,
    'status', status,
    'detail', detail,
    'code', code))
$$;

COMMENT ON FUNCTION idem_http_problem(integer, text, text) IS
'An RFC 9457 problem-details body (type about:blank) with a code member';

-- The Idempotency-Key header of a request, checked: key is set when the
-- header holds a valid key; otherwise key is NULL and status, headers and
-- body are the 400 response (MISSING_IDEMPOTENCY_KEY when the header is
-- absent or NULL, INVALID_IDEMPOTENCY_KEY with the reason when it is blank,
-- too long or holds control characters). An invalid namespace is the
-- caller's bug, not the client's, and raises idem_parse's error.
CREATE FUNCTION idem_http_key(namespace text, header text,
                              OUT key text, OUT status integer, OUT headers jsonb, OUT body jsonb)
RETURNS record
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    reason text;
BEGIN
    PERFORM @extschema@.idem_parse(namespace, 'k');   -- raises for an invalid namespace
    BEGIN
        key := @extschema@.idem_parse(namespace, header);
    EXCEPTION WHEN invalid_parameter_value OR character_not_in_repertoire THEN
        GET STACKED DIAGNOSTICS reason = PG_EXCEPTION_DETAIL;
        status := 400;
        headers := '{"Content-Type": "application/problem+json"}';
        body := @extschema@.idem_http_problem(400, 'INVALID_IDEMPOTENCY_KEY', reason);
        RETURN;
    END;
    IF key IS NULL THEN
        status := 400;
        headers := '{"Content-Type": "application/problem+json"}';
        body := @extschema@.idem_http_problem(400, 'MISSING_IDEMPOTENCY_KEY',
                                              'This request needs an Idempotency-Key header.');
    END IF;
END;
$$;

COMMENT ON FUNCTION idem_http_key(text, text) IS
'Checks an Idempotency-Key header: the key, or the 400 problem response';

-- The HTTP response for an outcome that needs no work: a replay, a request
-- in flight or a reused key. A replayed result recorded as
-- {"status": s, "headers": {...}, "body": b} replays status s, its headers
-- and body b; any other result replays as 200 with the result as the body.
-- A replayed error is 422 with a problem body: its class_tag as the code,
-- its message as the detail. Every replay adds Idempotency-Replayed: true. in_flight is 409 with Retry-After;
-- mismatch is 422 and never carries the recorded request, which may be
-- another client's. A fresh outcome has no response yet: that is an error.
CREATE FUNCTION idem_http_response(outcome @extschema@.idem_outcome, retry_after integer DEFAULT 1,
                                   OUT status integer, OUT headers jsonb, OUT body jsonb)
RETURNS record
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    problem constant jsonb := '{"Content-Type": "application/problem+json"}';
    replayed constant jsonb := '{"Idempotency-Replayed": "true"}';
    recorded jsonb;   -- the status a replayed result recorded
BEGIN
    IF retry_after < 0 THEN
        RAISE EXCEPTION 'invalid Retry-After'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('retry_after must be zero or more seconds, not %s.', retry_after);
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
        headers := problem || replayed;
    WHEN 'in_flight' THEN
        status := 409;
        body := @extschema@.idem_http_problem(409, 'IDEMPOTENCY_REQUEST_IN_PROGRESS',
            'A request with this idempotency key is still being processed; retry after the time in Retry-After.');
        headers := problem || jsonb_build_object('Retry-After', retry_after::text);
    WHEN 'mismatch' THEN
        status := 422;
        body := @extschema@.idem_http_problem(422, 'IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST',
            'This idempotency key was already used with a different request.');
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

COMMENT ON FUNCTION idem_http_response(@extschema@.idem_outcome, integer) IS
'The HTTP status, headers and body for a replay, a request in flight or a reused key';
