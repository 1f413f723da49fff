-- http: idem_http_key and idem_http_response, the last mile from a header
-- and an outcome to an HTTP status, headers and an RFC 9457 body.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
RESET client_min_messages;
SET search_path = public, idempotency;
-- An empty store, whatever ran before in this database.
DELETE FROM idempotency_record;

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
SELECT r.* FROM idem_http_response(jsonb_populate_record(NULL::idem_outcome, '{"kind": "in_flight"}')) r;
SELECT headers ->> 'Retry-After' AS retry_after
FROM idem_http_response(jsonb_populate_record(NULL::idem_outcome, '{"kind": "in_flight"}'), 30);
-- NULL in, NULL out.
SELECT r.* FROM idem_http_response(NULL::idem_outcome) r;

-- Errors, and the records are unchanged after each.
CREATE TEMP TABLE before AS SELECT * FROM idempotency_record;
SELECT r.* FROM idem_begin('payments', 'new', '{"amount": 1}') o, idem_http_response(o) r;
SELECT r.* FROM idem_begin('payments', 'odd', '{"amount": 100}') o, idem_http_response(o) r;
SELECT * FROM idem_http_response(jsonb_populate_record(NULL::idem_outcome, '{"kind": "in_flight"}'), -1);
SELECT * FROM idem_http_response(jsonb_populate_record(NULL::idem_outcome, '{}'));
SELECT * FROM idem_http_response(jsonb_populate_record(NULL::idem_outcome, '{"kind": "prior_result", "result": {"status": 201.5, "body": 1}}'));
SELECT * FROM idem_http_response(jsonb_populate_record(NULL::idem_outcome, '{"kind": "prior_result", "result": {"status": "201", "body": 1}}'));
SELECT (SELECT count(*) FROM idempotency_record) AS records,
       (SELECT count(*) FROM (SELECT * FROM idempotency_record EXCEPT SELECT * FROM before) changed) AS changed;
DELETE FROM idempotency_record;

-- The field as the IETF draft defines it: a Structured Field String. The
-- draft's example, quoted as the draft sends it and bare as Stripe-style
-- clients do, is one key, so one record.
SELECT * FROM idem_http_key('payments', '"8e03978e-40d5-43e8-bc93-6894a57f9324"');
SELECT * FROM idem_http_key('payments', '8e03978e-40d5-43e8-bc93-6894a57f9324');
BEGIN;
SELECT o.kind FROM idem_http_key('payments', '"8e03978e-40d5-43e8-bc93-6894a57f9324"') h,
                   idem_begin('payments', h.key, '{"amount": 100}') o;
SELECT idem_commit('payments', '8e03978e-40d5-43e8-bc93-6894a57f9324', '{"payment_id": 9}');
COMMIT;
SELECT o.kind, o.result FROM idem_http_key('payments', '8e03978e-40d5-43e8-bc93-6894a57f9324') h,
                             idem_begin('payments', h.key, '{"amount": 100}') o;
SELECT count(*) AS records FROM idempotency_record WHERE key_value LIKE '8e03978e%';
-- Escapes and white space around the string; what a quoted value may not
-- hold is a 400 whose detail says which rule failed. Only a value that
-- starts with a double quote is a string: tokens, byte sequences and
-- anything else are bare keys, taken literally, but never a list of them
-- (a retry through a proxy that joined a repeated field) nor a value with a
-- quote inside.
SELECT h.n, k.key, k.status, k.body ->> 'detail' AS detail
FROM (VALUES (1, '  "abc"  '), (2, '"a\"b\\c"'), (3, '"abc'), (4, '"a\nb"'), (5, '"ab' || chr(233) || '"'),
             (6, '"a' || chr(9) || 'b"'), (7, '"abc"def'), (8, '"abc", "abc"'), (9, '"abc";v=1'), (10, '""'),
             (11, 'abc'), (12, ':YWJj:'), (13, 'abc;v=1'), (14, '"' || repeat('k', 256) || '"'),
             (15, '8e03978e, 8e03978e'), (16, 'a"b'), (17, chr(160) || '"abc"')) h(n, header),
     idem_http_key('payments', h.header) k
ORDER BY h.n;

-- The draft's error scenarios, with the documentation link a service
-- configures (the problem's type, and Link: rel="describedby").
-- A missing header: 400.
SELECT * FROM idem_http_key('payments', NULL, 'https://developer.example.com/idempotency');
-- A retry while the first request is still being processed: 409.
BEGIN;
SELECT kind FROM idem_begin('payments', 'outstanding', '{"amount": 1}');
SELECT r.* FROM idem_begin('payments', 'outstanding', '{"amount": 1}') o,
                idem_http_response(o, 1, 'https://developer.example.com/idempotency') r;
ROLLBACK;
-- The key reused with another payload: 422.
SELECT r.* FROM idem_begin('payments', '8e03978e-40d5-43e8-bc93-6894a57f9324', '{"amount": 200}') o,
                idem_http_response(o, 1, 'https://developer.example.com/idempotency') r;
-- The URI goes into a header: nothing that could end it or start another.
SELECT * FROM idem_http_key('payments', NULL, E'https://example.com/x>\r\nSet-Cookie: a=b');
SELECT * FROM idem_http_key('payments', NULL, '');
SELECT * FROM idem_http_response(jsonb_populate_record(NULL::idem_outcome, '{"kind": "in_flight"}'), NULL);
DELETE FROM idempotency_record;
