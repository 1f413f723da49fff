-- stats: idem_namespace_stats counts the table per namespace; idem_stats
-- reports the counters, which are off here because pg_regress does not
-- preload the library (test/t/004_counters.pl runs with them on).
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
SELECT namespace, in_progress, committed, failed,
       oldest_in_progress_age BETWEEN interval '3 hours' AND interval '4 hours' AS stuck_3h,
       expired, row_bytes > 0 AS has_bytes
FROM idem_namespace_stats ORDER BY namespace;
-- Rows an open transaction has begun are not stuck, and not visible to others;
-- here the view sees this transaction's own. A claim in a namespace without
-- a lease writes no row until it is finished (it is the key's lock): the
-- view counts none of those.
BEGIN;
SELECT kind FROM idem_begin('webhooks', 'f', '{}');
SELECT namespace, in_progress FROM idem_namespace_stats WHERE namespace = 'webhooks';
SELECT namespace FROM idem_namespace_configure('webhooks-leased', in_progress_lease => '1 hour');
SELECT kind FROM idem_begin('webhooks-leased', 'f', '{}');
SELECT namespace, in_progress, oldest_in_progress_age < interval '1 minute' AS young
FROM idem_namespace_stats WHERE namespace = 'webhooks-leased';
ROLLBACK;

-- Who may read: monitoring roles (pg_monitor), not PUBLIC; resetting is for superusers.
CREATE ROLE regress_idem_nobody;
CREATE ROLE regress_idem_monitor IN ROLE pg_monitor;
SELECT r.rolname,
       has_table_privilege(r.rolname, 'idem_stats', 'SELECT') AS stats,
       has_table_privilege(r.rolname, 'idem_namespace_stats', 'SELECT') AS namespace_stats,
       has_function_privilege(r.rolname, 'idem_stats_reset()', 'EXECUTE') AS reset
FROM pg_roles r WHERE r.rolname IN ('regress_idem_nobody', 'regress_idem_monitor') ORDER BY r.rolname;
SET ROLE regress_idem_nobody;
SELECT * FROM idempotency.idem_namespace_stats;
RESET ROLE;
SET ROLE regress_idem_monitor;
SELECT namespace, committed FROM idem_namespace_stats ORDER BY namespace;
SELECT counters_on FROM idem_stats;
RESET ROLE;
DROP ROLE regress_idem_nobody;
DROP ROLE regress_idem_monitor;
DELETE FROM idempotency_record;
