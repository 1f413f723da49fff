-- update_keys: records that 0.4.1 made from quoted Idempotency-Key headers
-- still answer their retries after the update to 0.5.0. 0.4.1's
-- idem_http_key took the field value with its double quotes as the key;
-- 0.5.0's takes the string inside them, so without the update's copies a
-- retry sent before the update and again after it would answer fresh: a
-- second effect for one request.
\set SHOW_CONTEXT never
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idempotency;
RESET client_min_messages;
SET search_path = public, idempotency;
CREATE EXTENSION idempotency VERSION '0.4.1';
SELECT namespace FROM idem_namespace_configure('hashed', hash_keys => true);

-- 0.4.1: a client that follows the draft, one that sends the key bare, a
-- recorded error, one in flight under a lease, and a hashed namespace.
SELECT namespace FROM idem_namespace_configure('leased', in_progress_lease => '1 hour');
BEGIN;
SELECT h.key AS key_041 FROM idem_http_key('payments', '"8e03978e-40d5"') h \gset
SELECT :'key_041' AS key_in_041;
SELECT kind FROM idem_begin('payments', :'key_041', '{"amount": 100}');
SELECT idem_commit('payments', :'key_041', '{"status": 201, "body": {"payment": 1}}');
SELECT kind FROM idem_begin('payments', (SELECT key FROM idem_http_key('payments', 'bare-1')), '{"amount": 5}');
SELECT idem_commit('payments', 'bare-1', '{"payment": 2}');
SELECT kind FROM idem_begin('payments', (SELECT key FROM idem_http_key('payments', '"declined-1"')), '{"amount": 7}');
SELECT idem_fail_permanent('payments', '"declined-1"', '{"class_tag": "Declined", "message": "no funds"}');
SELECT kind FROM idem_begin('leased', (SELECT key FROM idem_http_key('leased', '"running-1"')), '{"job": 1}');
SELECT kind FROM idem_begin('hashed', (SELECT key FROM idem_http_key('hashed', '"h-1"')), '{"amount": 9}');
SELECT idem_commit('hashed', '"h-1"', '{"payment": 3}');
COMMIT;
-- Two clients whose keys only 0.4.1 told apart (bare ord-77 and quoted
-- "ord-77"), and a quoted key that 0.5.0 refuses (blank inside the quotes).
BEGIN;
SELECT kind FROM idem_begin('payments', (SELECT key FROM idem_http_key('payments', 'ord-77')), '{"amount": 100}');
SELECT idem_commit('payments', 'ord-77', '{"payment": "A-1"}');
SELECT kind FROM idem_begin('payments', (SELECT key FROM idem_http_key('payments', '"ord-77"')), '{"amount": 100}');
SELECT idem_commit('payments', '"ord-77"', '{"payment": "B-9"}');
SELECT kind FROM idem_begin('payments', (SELECT key FROM idem_http_key('payments', '"   "')), '{"amount": 5}');
SELECT idem_commit('payments', '"   "', '{"payment": "C-3"}');
COMMIT;
-- A record past its replay window has no retries left to answer.
BEGIN;
SELECT kind FROM idem_begin('payments', (SELECT key FROM idem_http_key('payments', '"old-1"')), '{"amount": 1}');
SELECT idem_commit('payments', '"old-1"', '{}');
COMMIT;
UPDATE idempotency_record SET expires_at = now() - interval '1 second' WHERE key_value = '"old-1"';

-- The update copies each finished record of a quoted key still in its
-- window to the key 0.5.0 finds in the same header, and warns of what it
-- could not copy: the in-progress one, "ord-77" (its key without quotes is
-- the other client's), "   " and the hashed one.
ALTER EXTENSION idempotency UPDATE TO '0.5.0';
SELECT namespace, key_value, status, result_payload, error_payload
FROM idempotency_record ORDER BY namespace, key_value;

-- The client's retry, same header, same request: a replay, not fresh.
SELECT h.key AS key_050 FROM idem_http_key('payments', '"8e03978e-40d5"') h \gset
SELECT :'key_050' AS key_in_050;
BEGIN;
SELECT kind, result FROM idem_begin('payments', :'key_050', '{"amount": 100}');
ROLLBACK;
-- The error replays too, and the old keys answer as they did.
BEGIN;
SELECT kind, error FROM idem_begin('payments', (SELECT key FROM idem_http_key('payments', '"declined-1"')), '{"amount": 7}');
SELECT kind FROM idem_begin('payments', '"8e03978e-40d5"', '{"amount": 100}');
SELECT kind FROM idem_begin('payments', 'bare-1', '{"amount": 5}');
ROLLBACK;

SET client_min_messages = warning;
DROP EXTENSION idempotency;
RESET client_min_messages;
CREATE EXTENSION idempotency;
