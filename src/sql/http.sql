-- http.sql: an Idempotency-Key header checked, and an outcome turned into
-- its HTTP status, headers and RFC 9457 body.

-- An RFC 9457 problem-details body. type is docs_uri when the service
-- documents its problems there, else about:blank; title is the status's
-- reason phrase; code carries the machine-readable error code. docs_uri
-- also goes into a Link header, so only printable ASCII without spaces,
-- quotes or angle brackets is accepted.
CREATE OR REPLACE FUNCTION idem_http_problem(status integer, code text, detail text, docs_uri text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF docs_uri COLLATE "C" ~ '[^!-~]|[<>"]' OR docs_uri = '' THEN
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
CREATE OR REPLACE FUNCTION idem_http_key(namespace text, header text, docs_uri text DEFAULT NULL,
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
-- in_flight is 409 with Retry-After: the seconds from now (the clock:
-- VOLATILE) until the holder's claim may be taken over (rounded up, at
-- least 1) when the outcome says when that is, else retry_after; mismatch is 422 and never carries the
-- recorded request, which may be another client's; both are of type
-- docs_uri, with a Link header, when it is given. A fresh outcome has no
-- response yet: that is an error.
CREATE OR REPLACE FUNCTION idem_http_response(outcome @extschema@.idem_outcome, retry_after integer DEFAULT 1,
                                   docs_uri text DEFAULT NULL,
                                   OUT status integer, OUT headers jsonb, OUT body jsonb)
RETURNS record
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
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
        headers := problem || jsonb_build_object('Retry-After', CASE
            WHEN outcome.lease_ends_at IS NULL THEN retry_after::text
            ELSE greatest(1, ceil(extract(epoch FROM outcome.lease_ends_at - clock_timestamp())))::bigint::text
            END);
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
