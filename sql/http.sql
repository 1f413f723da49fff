-- http: idem_http_key and idem_http_response, the last mile from a header
-- and an outcome to an HTTP status, headers and an RFC 9457 body.

-- The Idempotency-Key header: a valid key, or the 400 response.
SELECT * FROM idem_http_key('payments', '  7d1c-44a0  ');
SELECT * FROM idem_http_key('payments', NULL);
SELECT * FROM idem_http_key('payments', '   ');
SELECT * FROM idem_http_key('payments', E'7d1c\n44a0');
SELECT key, status, body ->> 'code' AS code, body ->> 'detail' AS detail
FROM idem_http_key('payments', repeat('k', 256));
SELECT length(key) AS key_length, status FROM idem_http_key('payments', repeat('k', 255));
-- An invalid namespace is the service's bug, not the client's: an error.
SELECT * FROM idem_http_key('Payments', 'k');
SELECT * FROM idem_http_key(NULL, 'k');

-- Replays of recorded results, errors; a request in flight; a reused key.
BEGIN;
SELECT kind FROM idem_begin('payments', 'created', '{"amount": 100}');
SELECT idem_commit('payments', 'created', '{"status": 201, "headers": {"Location": "/payments/7"}, "body": {"payment_id": 7}}');
SELECT kind FROM idem_begin('payments', 'plain', '{"amount": 100}');
SELECT idem_commit('payments', 'plain', '{"payment_id": 8}');
SELECT kind FROM idem_begin('payments', 'refused', '{"amount": -5}');
SELECT idem_fail_permanent('payments', 'refused', '{"class_tag": "InvalidAmount", "message": "amount must be positive"}');
SELECT kind FROM idem_begin('payments', 'odd', '{"amount": 100}');
SELECT idem_commit('payments', 'odd', '{"status": 700, "body": null}');
COMMIT;

-- A recorded {"status", "headers", "body"} replays as recorded, plus Idempotency-Replayed.
SELECT r.* FROM idem_begin('payments', 'created', '{"amount": 100}') o, idem_http_response(o) r;
-- Any other result replays as 200 with the result as the body.
SELECT r.* FROM idem_begin('payments', 'plain', '{"amount": 100}') o, idem_http_response(o) r;
-- A recorded error replays as 422 with a problem body.
SELECT r.* FROM idem_begin('payments', 'refused', '{"amount": -5}') o, idem_http_response(o) r;
-- A reused key: 422, and the recorded request is not in the response.
SELECT r.* FROM idem_begin('payments', 'created', '{"amount": 999}') o, idem_http_response(o) r;
-- In flight: 409 with Retry-After (the default 1 second, or as given).
SELECT r.* FROM idem_http_response(ROW('in_flight', NULL, NULL, NULL, NULL, NULL, NULL, NULL)::idem_outcome) r;
SELECT headers ->> 'Retry-After' AS retry_after
FROM idem_http_response(ROW('in_flight', NULL, NULL, NULL, NULL, NULL, NULL, NULL)::idem_outcome, 30);
-- NULL in, NULL out.
SELECT r.* FROM idem_http_response(NULL::idem_outcome) r;

-- Errors, and the records are unchanged after each.
CREATE TEMP TABLE before AS SELECT * FROM idempotency_record;
SELECT r.* FROM idem_begin('payments', 'new', '{"amount": 1}') o, idem_http_response(o) r;
SELECT r.* FROM idem_begin('payments', 'odd', '{"amount": 100}') o, idem_http_response(o) r;
SELECT * FROM idem_http_response(ROW('in_flight', NULL, NULL, NULL, NULL, NULL, NULL, NULL)::idem_outcome, -1);
SELECT * FROM idem_http_response(ROW(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::idem_outcome);
SELECT * FROM idem_http_response(ROW('prior_result', '{"status": 201.5, "body": 1}', NULL, NULL, NULL, NULL, NULL, NULL)::idem_outcome);
SELECT * FROM idem_http_response(ROW('prior_result', '{"status": "201", "body": 1}', NULL, NULL, NULL, NULL, NULL, NULL)::idem_outcome);
SELECT (SELECT count(*) FROM idempotency_record) AS records,
       (SELECT count(*) FROM (SELECT * FROM idempotency_record EXCEPT SELECT * FROM before) changed) AS changed;
DELETE FROM idempotency_record;
