-- store: idem_begin, idem_commit, idem_fail_permanent, idem_fail_transient
-- and idem_purge inside the caller's transaction; every outcome, every
-- transition, every error, and "nothing changed" after each error.
CREATE TEMP VIEW records AS
SELECT namespace, key_value, status, result_payload, error_payload,
       expires_at - created_at AS replay_window, octet_length(request_hash) AS hash_bytes, request_payload
FROM idempotency_record ORDER BY namespace, key_value;

-- fresh inserts an in_progress row with the default 24-hour window.
BEGIN;
SELECT kind, result, error, recorded_request, recorded_hash,
       submitted_hash = idem_request_hash('{"amount": 100}') AS hash_ok
FROM idem_begin('payments', 'order-1', '{"amount": 100}');
SELECT * FROM records;
-- Beginning one's own in-progress key again: in_flight.
SELECT kind FROM idem_begin('payments', 'order-1', '{"amount": 100}');
SELECT idem_commit('payments', 'order-1', '{"payment_id": 7, "status": "captured"}');
-- The same request replays the result; key order and spacing do not matter.
SELECT kind, result FROM idem_begin('payments', 'order-1', '{ "amount" : 100 }');
-- Another request under the same key is a mismatch carrying the recorded request.
SELECT kind, result, recorded_request, recorded_hash = idem_request_hash('{"amount": 100}') AS recorded_ok,
       submitted_hash = idem_request_hash('{"amount": 999}') AS submitted_ok
FROM idem_begin('payments', 'order-1', '{"amount": 999}');
-- The key is trimmed as idem_parse trims it.
SELECT kind FROM idem_begin('payments', '  order-1  ', '{"amount": 100}');
SELECT status, result_payload FROM records;
COMMIT;

-- A permanent failure replays as prior_error.
SELECT kind FROM idem_begin('payments', 'order-2', '{"amount": 5}');
SELECT idem_fail_permanent('payments', 'order-2', '{"class_tag": "CardDeclined", "message": "card declined", "cause": "insufficient funds"}');
SELECT kind, error FROM idem_begin('payments', 'order-2', '{"amount": 5}');

-- A transient failure forgets the attempt: the next begin is fresh.
SELECT kind FROM idem_begin('payments', 'order-3', '{"amount": 5}');
SELECT idem_fail_transient('payments', 'order-3');
SELECT count(*) AS rows_for_order_3 FROM idempotency_record WHERE key_value = 'order-3';
SELECT kind FROM idem_begin('payments', 'order-3', '{"amount": 5}');

-- Namespaces are separate keyspaces.
SELECT kind FROM idem_begin('refunds', 'order-1', '{"amount": 999}');

-- Rolling back the caller's transaction removes every row these functions wrote.
BEGIN;
SELECT kind FROM idem_begin('payments', 'order-4', '{"amount": 1}');
SELECT idem_commit('payments', 'order-4', '{"ok": true}');
ROLLBACK;
SELECT count(*) AS rows_for_order_4 FROM idempotency_record WHERE key_value = 'order-4';

-- An explicit window, and the idempotency.replay_window setting.
SELECT kind FROM idem_begin('payments', 'order-5', '{}', '15 minutes');
SET idempotency.replay_window = '2h';
SELECT kind FROM idem_begin('payments', 'order-6', '{}');
RESET idempotency.replay_window;
SELECT key_value, replay_window FROM records WHERE key_value IN ('order-5', 'order-6');

-- Errors. Each leaves the table as it was.
CREATE TEMP TABLE before AS SELECT * FROM idempotency_record;
SELECT idem_begin(NULL, 'k', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_begin('Payments', 'k', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_begin('payments', NULL, '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_begin('payments', '   ', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_begin('payments', repeat('k', 256), '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_begin('payments', E'bad\nkey', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_begin('payments', 'k', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_begin('payments', 'k', '{}', '0 seconds');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_begin('payments', 'k', '{}', '-1 day');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_commit('payments', 'never-begun', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_commit('payments', 'order-1', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_commit('payments', 'order-2', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_commit('payments', 'order-3', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_fail_permanent('payments', 'order-1', '{"class_tag": "X", "message": "m"}');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_fail_permanent('payments', 'order-3', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_fail_permanent('payments', 'order-3', '"declined"');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_fail_permanent('payments', 'order-3', '[1]');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_fail_permanent('payments', 'order-3', '{"message": "m"}');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_fail_permanent('payments', 'order-3', '{"class_tag": "X"}');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_fail_permanent('payments', 'order-3', '{"class_tag": 42, "message": "m"}');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_fail_permanent('payments', 'order-3', '{"class_tag": "X", "message": "m", "cause": {"nested": true}}');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_fail_permanent('payments', 'order-3', '{"class_tag": "X", "message": "m", "stack": "..."}');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_fail_transient('payments', 'order-1');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_fail_transient('payments', 'order-2');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_fail_transient('payments', 'never-begun');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_purge(0);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_purge(10, 0);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS changed_rows FROM (
  (SELECT * FROM idempotency_record EXCEPT SELECT * FROM before)
  UNION ALL
  (SELECT * FROM before EXCEPT SELECT * FROM idempotency_record)) d;

-- Expired rows still replay until purged; purge counts what it deletes.
UPDATE idempotency_record SET expires_at = now() - interval '1 second'
WHERE key_value IN ('order-1', 'order-2');
SELECT kind, result FROM idem_begin('payments', 'order-1', '{"amount": 100}');
SELECT idem_purge(1) AS purged;
SELECT idem_purge() AS purged_again;
SELECT kind FROM idem_begin('payments', 'order-1', '{"amount": 100}');
SELECT idem_fail_transient('payments', 'order-1');

-- Do not write (idem_begin(...)).*: PostgreSQL expands it into one call per
-- column, so begin runs six times and the columns come from different calls.
-- Write SELECT * FROM idem_begin(...) instead.
BEGIN;
SELECT (idem_begin('payments', 'order-7', '{}')).kind AS first_call,
       (idem_begin('payments', 'order-7', '{}')).kind AS second_call;
ROLLBACK;
