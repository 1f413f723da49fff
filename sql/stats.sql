-- stats: idem_namespace_stats counts the table per namespace; idem_stats
-- reports the counters, which are off here because pg_regress does not
-- preload the library (test/t/004_counters.pl runs with them on).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
RESET client_min_messages;
SET search_path = public, idempotency;
DELETE FROM idempotency_record;

-- Without preloading: counters_on is false, every counter NULL; the size is there.
SELECT counters_on, begin_fresh, begin_in_flight, begin_prior_result, begin_prior_error, begin_mismatch,
       commits, permanent_failures, transient_failures, waits, purged_rows, stats_reset,
       table_bytes > 0 AS has_size
FROM idem_stats;
SELECT idem_stats_reset();
-- Purging still works (and has nothing to count).
SELECT idem_purge();

-- Per namespace: live rows by status; an in_progress row whose transaction
-- committed without finishing it, with its age; expired rows not yet purged.
INSERT INTO idempotency_record
    (namespace, key_value, status, request_hash, request_payload, result_payload, error_payload,
     created_at, updated_at, expires_at)
VALUES
    ('payments', 'a', 'committed', idem_request_hash('{}'), '{}', '{"id": 1}', NULL, now(), now(), now() + interval '1 day'),
    ('payments', 'b', 'committed', idem_request_hash('{}'), '{}', '{"id": 2}', NULL, now(), now(), now() - interval '1 hour'),
    ('payments', 'c', 'failed', idem_request_hash('{}'), '{}', NULL, '{"class_tag": "X", "message": "m"}', now(), now(), now() + interval '1 day'),
    ('payments', 'd', 'in_progress', idem_request_hash('{}'), '{}', NULL, NULL, now() - interval '3 hours', now(), now() + interval '1 day'),
    ('webhooks', 'e', 'committed', idem_request_hash('{}'), '{}', '{"ok": true}', NULL, now(), now(), now() + interval '1 day');
-- oldest_expired_age: how long the longest-expired record has waited for
-- purge ('b' expired an hour ago); NULL where nothing has expired.
SELECT namespace, in_progress, committed, failed,
       oldest_in_progress_age BETWEEN interval '3 hours' AND interval '4 hours' AS stuck_3h,
       expired, oldest_expired_age BETWEEN interval '1 hour' AND interval '2 hours' AS purge_lag_1h,
       row_bytes > 0 AS has_bytes
FROM idem_namespace_stats ORDER BY namespace;
-- Rows an open transaction has begun are not stuck, and not visible to others;
-- here the view sees this transaction's own. A claim in a namespace without
-- a lease writes no row until it is finished (it is the key's lock): the
-- view counts none of those.
BEGIN;
SELECT kind FROM idem_begin('webhooks', 'f', '{}');
SELECT namespace, in_progress FROM idem_namespace_stats WHERE namespace = 'webhooks';
-- idem_stats counts the key locks granted now: this transaction's claim.
SELECT held_key_locks FROM idem_stats;
SELECT namespace FROM idem_namespace_configure('webhooks-leased', in_progress_lease => '1 hour');
SELECT kind FROM idem_begin('webhooks-leased', 'f', '{}');
SELECT namespace, in_progress, oldest_in_progress_age < interval '1 minute' AS young
FROM idem_namespace_stats WHERE namespace = 'webhooks-leased';
ROLLBACK;
SELECT held_key_locks FROM idem_stats;

-- idem_key_state: one key as an operator sees it. A claim held by the key's
-- lock alone, which no row shows, is 'held' by this backend, with its
-- attempt, claim time, window end and request hash; a finished record by its
-- status; a key no one has claimed 'absent'; a claim under a lease is a row.
BEGIN;
SELECT kind FROM idem_begin('webhooks', 'g', '{"n": 1}');
SELECT state, holder_pid = pg_backend_pid() AS mine, attempt, claimed_at BETWEEN now() AND clock_timestamp() AS claimed_now,
       expires_at > now() AS in_window, request_hash = idem_request_hash('{"n": 1}') AS same_request
FROM idem_key_state('webhooks', 'g');
SELECT idem_commit('webhooks', 'g', '{"ok": 1}');
SELECT state, holder_pid, attempt FROM idem_key_state('webhooks', 'g');
COMMIT;
SELECT state, holder_pid IS NULL AS no_holder, attempt, expires_at > now() AS in_window,
       request_hash = idem_request_hash('{"n": 1}') AS same_request
FROM idem_key_state('webhooks', 'g');
SELECT k.key, s.state, s.attempt, s.expires_at < now() AS expired
FROM unnest(ARRAY['a', 'b', 'c', 'd', 'nobody']) k(key), idem_key_state('payments', k.key) s;
BEGIN;
SELECT namespace FROM idem_namespace_configure('webhooks-leased', in_progress_lease => '1 hour');
SELECT kind FROM idem_begin('webhooks-leased', 'h', '{}');
SELECT state, holder_pid IS NULL AS no_holder, attempt FROM idem_key_state('webhooks-leased', 'h');
ROLLBACK;
-- A key as a hash_keys namespace stores it (the hex SHA-256) is found by the
-- key the caller passes; NULL in, NULL out; a bad key is refused as begin
-- refuses it.
BEGIN;
SELECT namespace FROM idem_namespace_configure('webhooks-hashed', hash_keys => true);
SELECT kind FROM idem_begin('webhooks-hashed', 'secret-key', '{}');
SELECT idem_commit('webhooks-hashed', 'secret-key', '{}');
SELECT state FROM idem_key_state('webhooks-hashed', 'secret-key');
ROLLBACK;
SELECT * FROM idem_key_state(NULL, 'k');
SELECT * FROM idem_key_state('webhooks', '   ');

-- Who may read: monitoring roles (pg_monitor), not PUBLIC; resetting is for superusers.
CREATE ROLE regress_idem_nobody;
CREATE ROLE regress_idem_monitor IN ROLE pg_monitor;
SELECT r.rolname,
       has_table_privilege(r.rolname, 'idem_stats', 'SELECT') AS stats,
       has_table_privilege(r.rolname, 'idem_namespace_stats', 'SELECT') AS namespace_stats,
       has_function_privilege(r.rolname, 'idem_stats_reset()', 'EXECUTE') AS reset,
       has_function_privilege(r.rolname, 'idem_key_state(text,text)', 'EXECUTE') AS key_state
FROM pg_roles r WHERE r.rolname IN ('regress_idem_nobody', 'regress_idem_monitor') ORDER BY r.rolname;
SET ROLE regress_idem_nobody;
SELECT * FROM idempotency.idem_namespace_stats;
SELECT * FROM idempotency.idem_key_state('webhooks', 'g');
RESET ROLE;
SET ROLE regress_idem_monitor;
SELECT namespace, committed FROM idem_namespace_stats ORDER BY namespace;
SELECT counters_on FROM idem_stats;
SELECT * FROM idem_key_state('webhooks', 'g');
RESET ROLE;
DROP ROLE regress_idem_nobody;
DROP ROLE regress_idem_monitor;
DELETE FROM idempotency_record;
