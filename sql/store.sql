-- store: idem_begin, idem_commit, idem_fail_permanent, idem_fail_transient
-- and idem_purge inside the caller's transaction; every outcome, every
-- transition, every error, and "nothing changed" after each error.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
RESET client_min_messages;
SET search_path = public, idempotency;
-- An empty store, whatever ran before in this database.
DELETE FROM idempotency_record;
CREATE TEMP VIEW records AS
SELECT namespace, key_value, status, result_payload, error_payload,
       expires_at - created_at AS replay_window, octet_length(request_hash) AS hash_bytes, request_payload
FROM idempotency_record ORDER BY namespace, key_value;

-- fresh claims the key. In a namespace without a lease the claim is the
-- key's lock, held to the end of the transaction: no row is written until
-- the attempt is finished, and then only the finished record, with the
-- default 24-hour window.
BEGIN;
SELECT kind, result, error, recorded_request, recorded_hash,
       submitted_hash = idem_request_hash('{"amount": 100}') AS hash_ok
FROM idem_begin('payments', 'order-1', '{"amount": 100}');
SELECT * FROM records;
SELECT mode, granted FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 18756 AND pid = pg_backend_pid();
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
SELECT status, result_payload, replay_window, request_payload FROM records;
COMMIT;

-- A permanent failure replays as prior_error.
BEGIN;
SELECT kind FROM idem_begin('payments', 'order-2', '{"amount": 5}');
SELECT idem_fail_permanent('payments', 'order-2', '{"class_tag": "CardDeclined", "message": "card declined", "cause": "insufficient funds"}');
COMMIT;
SELECT kind, error FROM idem_begin('payments', 'order-2', '{"amount": 5}');

-- A transient failure forgets the attempt: the next begin is fresh.
BEGIN;
SELECT kind FROM idem_begin('payments', 'order-3', '{"amount": 5}');
SELECT idem_fail_transient('payments', 'order-3');
COMMIT;
SELECT count(*) AS rows_for_order_3 FROM idempotency_record WHERE key_value = 'order-3';
BEGIN;
SELECT kind FROM idem_begin('payments', 'order-3', '{"amount": 5}');
-- Namespaces are separate keyspaces.
SELECT kind FROM idem_begin('refunds', 'order-1', '{"amount": 999}');
SELECT idem_commit('refunds', 'order-1', '{"refund_id": 1}');
SELECT idem_fail_transient('payments', 'order-3');
COMMIT;

-- A claim does not outlive its transaction. Committed unfinished, the
-- record would answer in_flight to every retry with no work behind it, so
-- COMMIT fails (25000) and takes the transaction's other writes with it.
CREATE TEMP TABLE payments_made (key text);
BEGIN;
SELECT kind FROM idem_begin('payments', 'order-8', '{"amount": 8}');
INSERT INTO payments_made VALUES ('order-8');
COMMIT;
\echo :LAST_ERROR_SQLSTATE
SELECT (SELECT count(*) FROM idempotency_record WHERE key_value = 'order-8') AS records,
       (SELECT count(*) FROM payments_made) AS payments;
-- The same for a begin in autocommit mode (no transaction block), which
-- commits when its statement ends.
SELECT kind FROM idem_begin('payments', 'order-8', '{"amount": 8}');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS records FROM idempotency_record WHERE key_value = 'order-8';
-- Replays need no transaction block.
SELECT kind FROM idem_begin('payments', 'order-2', '{"amount": 5}');
-- One statement that begins and finishes works in autocommit mode.
CREATE FUNCTION pg_temp.pay(k text) RETURNS idem_kind LANGUAGE plpgsql AS $$
DECLARE
    o idem_outcome := idem_begin('payments', k, '{"amount": 9}');
BEGIN
    IF o.kind = 'fresh' THEN
        INSERT INTO payments_made VALUES (k);
        PERFORM idem_commit('payments', k, jsonb_build_object('paid', k), o.fence);
    END IF;
    RETURN o.kind;
END;
$$;
SELECT pg_temp.pay('order-9') AS first, pg_temp.pay('order-9') AS second;
-- A savepoint rolled back takes its claim with it; a finish rolled back
-- leaves the claim open again.
BEGIN;
SAVEPOINT s;
SELECT kind FROM idem_begin('payments', 'order-10', '{}');
ROLLBACK TO SAVEPOINT s;
SELECT kind FROM idem_begin('payments', 'order-11', '{}');
SAVEPOINT t;
SELECT idem_commit('payments', 'order-11', '{"ok": true}');
ROLLBACK TO SAVEPOINT t;
COMMIT;
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS records FROM idempotency_record WHERE key_value IN ('order-10', 'order-11');
BEGIN;
SELECT kind FROM idem_begin('payments', 'order-11', '{}');
SAVEPOINT t;
SELECT idem_commit('payments', 'order-11', '{"ok": true}');
RELEASE SAVEPOINT t;
COMMIT;
SELECT status FROM idempotency_record WHERE key_value = 'order-11';
-- A WITH HOLD cursor survives its transaction: COMMIT runs it to its end
-- and keeps its rows before the claim guard can refuse. A claim made in one
-- (when fetched, or as COMMIT runs it, directly or through a PL/pgSQL loop)
-- is a claim like any other; when COMMIT is refused for it, the cursors the
-- transaction declared are closed with the rollback, and no row survives to
-- report a claim that was rolled back.
BEGIN;
DECLARE held CURSOR WITH HOLD FOR SELECT kind, fence IS NOT NULL AS fenced FROM idem_begin('payments', 'order-14', '{}');
FETCH held;
COMMIT;
\echo :LAST_ERROR_SQLSTATE
FETCH ALL held;
BEGIN;
DECLARE held CURSOR WITH HOLD FOR SELECT kind, fence IS NOT NULL AS fenced FROM idem_begin('payments', 'order-14', '{}');
COMMIT;
\echo :LAST_ERROR_SQLSTATE
FETCH ALL held;
CREATE FUNCTION pg_temp.claims_in_a_loop(k text) RETURNS SETOF idem_kind LANGUAGE plpgsql AS $$
DECLARE
    o record;
BEGIN
    FOR o IN SELECT kind FROM idem_begin('payments', k, '{}') LOOP
        RETURN NEXT o.kind;
    END LOOP;
END;
$$;
BEGIN;
DECLARE held CURSOR WITH HOLD FOR SELECT * FROM pg_temp.claims_in_a_loop('order-14');
COMMIT;
\echo :LAST_ERROR_SQLSTATE
FETCH ALL held;
SELECT count(*) AS records FROM idempotency_record WHERE key_value = 'order-14';
-- A cursor declared in an earlier transaction is not the refused one's: it stays.
BEGIN;
DECLARE earlier CURSOR WITH HOLD FOR SELECT 1 AS still_open;
COMMIT;
BEGIN;
SELECT kind FROM idem_begin('payments', 'order-14', '{}');
COMMIT;
FETCH ALL earlier;
CLOSE earlier;
-- A claim finished inside the cursor, or a replay, commits as usual.
BEGIN;
DECLARE held CURSOR WITH HOLD FOR SELECT pg_temp.pay('order-15') AS paid;
COMMIT;
FETCH ALL held;
CLOSE held;
BEGIN;
DECLARE held CURSOR WITH HOLD FOR SELECT kind FROM idem_begin('payments', 'order-11', '{}');
COMMIT;
FETCH ALL held;
CLOSE held;

-- Fences: fresh carries one; a transition given another, or an attempt
-- number in its place, changes nothing.
BEGIN;
-- The fence comes from the outcome: in a namespace without a lease no row
-- holds it until the attempt is finished.
SELECT attempt, fence > 4294967295 AS fence_is_bigint, fence FROM idem_begin('payments', 'order-12', '{}') \gset
\echo :attempt :fence_is_bigint
SAVEPOINT s;
SELECT idem_commit('payments', 'order-12', '{}', 1);
ROLLBACK TO SAVEPOINT s;
SELECT idem_commit('payments', 'order-12', '{}', :fence + 1);
ROLLBACK TO SAVEPOINT s;
SELECT idem_fail_transient('payments', 'order-12', :fence + 1);
ROLLBACK TO SAVEPOINT s;
SELECT idem_commit('payments', 'order-12', '{"fenced": true}', :fence);
COMMIT;
SELECT status, result_payload FROM idempotency_record WHERE key_value = 'order-12';

-- Rolling back the caller's transaction removes every row these functions wrote.
BEGIN;
SELECT kind FROM idem_begin('payments', 'order-4', '{"amount": 1}');
SELECT idem_commit('payments', 'order-4', '{"ok": true}');
ROLLBACK;
SELECT count(*) AS rows_for_order_4 FROM idempotency_record WHERE key_value = 'order-4';

-- An explicit window, and the default (idempotency.replay_window, which
-- sql/settings.sql sets for a role).
BEGIN;
SELECT kind FROM idem_begin('payments', 'order-5', '{}', '15 minutes');
SELECT kind FROM idem_begin('payments', 'order-6', '{}');
SELECT idem_commit('payments', k, '{}') FROM unnest(ARRAY['order-5', 'order-6']) k;
COMMIT;
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
BEGIN;
SELECT kind FROM idem_begin('payments', 'order-1', '{"amount": 100}');
SELECT idem_fail_transient('payments', 'order-1');
COMMIT;

-- Do not write (idem_begin(...)).*: PostgreSQL expands it into one call per
-- column, so begin runs six times and the columns come from different calls.
-- Write SELECT * FROM idem_begin(...) instead.
BEGIN;
SELECT (idem_begin('payments', 'order-7', '{}')).kind AS first_call,
       (idem_begin('payments', 'order-7', '{}')).kind AS second_call;
ROLLBACK;

-- A replay (or mismatch) of a finished record is final and takes neither
-- the namespace's lock nor the key's: no advisory lock is held after it. A
-- begin that may write holds its namespace's lock to the end.
BEGIN;
SELECT kind FROM idem_begin('payments', 'replay-lock', '{}');
SELECT idem_commit('payments', 'replay-lock', '{"ok": true}');
COMMIT;
BEGIN;
SELECT kind FROM idem_begin('payments', 'replay-lock', '{}');
SELECT kind FROM idem_begin('payments', 'replay-lock', '{"other": 1}');
SELECT count(*) AS advisory_locks FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
SELECT kind FROM idem_begin('payments', 'replay-lock-2', '{}');
SELECT mode, count(*) AS advisory_locks FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() GROUP BY mode;
ROLLBACK;

-- A claim without a lease reopened by a rollback to a savepoint is the claim
-- it was: the same request, fence and kind, even after the key was failed
-- transiently and claimed again (with another request, or as a row past the
-- transaction's share of held claims) inside the savepoint.
BEGIN;
SELECT fence AS first_fence FROM idem_begin('payments', 'reopened', '{"a": 1}') \gset
SAVEPOINT s;
SELECT idem_fail_transient('payments', 'reopened');
SELECT kind FROM idem_begin('payments', 'reopened', '{"a": 2}');
ROLLBACK TO SAVEPOINT s;
SELECT kind FROM idem_begin('payments', 'reopened', '{"a": 1}');
SELECT kind FROM idem_begin('payments', 'reopened', '{"a": 2}');
SAVEPOINT t;
SELECT idem_fail_transient('payments', 'reopened');
SELECT count(*) FILTER (WHERE b.kind = 'fresh') = current_setting('max_locks_per_transaction')::int / 4 - 1 AS share_filled
FROM generate_series(1, current_setting('max_locks_per_transaction')::int / 4 - 1) g, idem_begin('payments', 'filler-' || g, '{}') b;
SELECT count(*) = current_setting('max_locks_per_transaction')::int / 4 AS share_held
FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 18756 AND pid = pg_backend_pid();
SELECT kind FROM idem_begin('payments', 'reopened', '{"a": 1}');
SELECT count(*) AS written_as_row FROM idempotency_record WHERE key_value = 'reopened' AND status = 'in_progress';
ROLLBACK TO SAVEPOINT t;
SELECT kind FROM idem_begin('payments', 'reopened', '{"a": 1}');
SELECT idem_commit('payments', 'reopened', '{"r": 1}', :first_fence);
COMMIT;
SELECT request_payload, fence = :first_fence AS first_fence FROM idempotency_record WHERE key_value = 'reopened';

-- The registry's checks for records count this transaction's claims without
-- a row: hash_keys cannot be switched, nor the namespace dropped or bound
-- elsewhere, under them. A namespace that stops keeping requests before such
-- a claim is finished records none.
SELECT namespace FROM idem_namespace_configure('admin-held');
BEGIN;
SELECT kind FROM idem_begin('admin-held', 'k', '{"secret": "card-4242"}');
SAVEPOINT s;
SELECT hash_keys FROM idem_namespace_configure('admin-held', hash_keys => true);
ROLLBACK TO SAVEPOINT s;
SELECT idem_namespace_drop('admin-held');
ROLLBACK TO SAVEPOINT s;
SELECT store_request FROM idem_namespace_configure('admin-held', store_request => false);
SELECT idem_commit('admin-held', 'k', '{"ok": true}');
COMMIT;
SELECT status, request_payload FROM idempotency_record WHERE namespace = 'admin-held';
DELETE FROM idempotency_record WHERE namespace = 'admin-held';
SELECT idem_namespace_drop('admin-held');
