-- metrics: idem_metrics, what a monitoring stack reads. pg_regress does not
-- preload the library, so the counters are off here (NULL) and what is
-- shown comes from the tables: the shape of the view, its three scopes,
-- the figures of each namespace and store, and who may read it.
-- test/t/015_metrics.pl runs with the counters on.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
RESET client_min_messages;
SET search_path = public, idempotency;
DELETE FROM idempotency_record;

-- The columns, in order, with their types: the contract of the exporters'
-- collector files (monitoring/).
SELECT a.attnum, a.attname, format_type(a.atttypid, a.atttypmod)
FROM pg_attribute a WHERE a.attrelid = 'idem_metrics'::regclass AND a.attnum > 0 ORDER BY a.attnum;

-- Nothing stored yet: the extension's table as a store, and the database
-- row, which says the counters are off.
SELECT scope, namespace, store, store_table_bytes > 0 AS has_table, store_index_bytes > 0 AS has_indexes,
       store_problem, stores_skipped, counters_on, stats_reset
FROM idem_metrics ORDER BY scope;

-- Records of every kind in three namespaces: one registered with a lease
-- (a claim committed unfinished, so in flight; one taken over), one
-- following the defaults (an expired record waiting for purge), one
-- registered with no records.
SELECT namespace FROM idem_namespace_configure('m-leased', in_progress_lease => '10 minutes');
SELECT namespace FROM idem_namespace_configure('m-idle');
INSERT INTO idempotency_record
    (namespace, key_value, status, request_hash, request_payload, result_payload, error_payload,
     created_at, updated_at, expires_at, attempt)
VALUES
    ('m-leased', 'a', 'in_progress', idem_request_hash('{}'), '{}', NULL, NULL,
     now() - interval '3 hours', now() - interval '20 minutes', now() + interval '1 day', 2),
    ('m-leased', 'b', 'committed', idem_request_hash('{}'), '{}', '{"id": 1}', NULL, now(), now(), now() + interval '1 day', 1),
    ('m-plain', 'c', 'committed', idem_request_hash('{}'), '{}', '{"id": 2}', NULL, now(), now(), now() - interval '2 hours', 1),
    ('m-plain', 'd', 'failed', idem_request_hash('{}'), '{}', NULL, '{"class_tag": "X", "message": "m"}', now(), now(), now() + interval '1 day', 1);
-- A claim of this transaction, in a namespace without a lease: held by the
-- key's lock, no row shows it, and without the counters nothing counts it.
BEGIN;
SELECT kind FROM idem_begin('m-plain', 'open', '{}');
SELECT claims_in_flight FROM idem_metrics WHERE namespace = 'm-plain';
ROLLBACK;
-- The lease of a namespace without its own is the defaults'.
SELECT replay_window FROM idem_namespace_defaults(in_progress_lease => '30 seconds');

-- Per namespace: the store as labels name it; the claim in flight and how
-- long since its holder was last heard of (its updated_at: 20 minutes,
-- longer than its lease); the lease, the namespace's or the defaults';
-- records by status, taken over, expired, how long the oldest expired one
-- has waited for purge (2 hours), bytes. Counters: NULL.
SELECT namespace, store, claims_in_flight,
       oldest_claim_age_seconds BETWEEN 1200 AND 1300 AS idle_20min, lease_seconds,
       records_in_progress, records_committed, records_failed, records_taken_over, expired_records,
       oldest_expired_age_seconds BETWEEN 7200 AND 7300 AS purge_lag_2h, record_bytes > 0 AS has_bytes,
       begins_fresh, commits, waits, wait_seconds, takeovers, purged_rows
FROM idem_metrics WHERE scope = 'namespace' ORDER BY namespace;

-- Purge empties the lag.
SELECT idem_purge();
SELECT namespace, expired_records, oldest_expired_age_seconds FROM idem_metrics
WHERE namespace = 'm-plain';

-- A bound store: its own row, with its sizes; a store that can no longer be
-- used says why, and its namespaces' records are not read.
CREATE SCHEMA metrics_svc;
SELECT idem_create_store('metrics_svc.records');
SELECT idem_bind_store('m-bound', 'metrics_svc.records');
BEGIN;
SELECT kind FROM idem_begin('m-bound', 'k', '{}');
SELECT idem_commit('m-bound', 'k', '{}');
COMMIT;
SELECT scope, namespace, store, records_committed, store_table_bytes > 0 AS sized, store_problem
FROM idem_metrics WHERE store = 'metrics_svc.records' ORDER BY scope;
ALTER TABLE metrics_svc.records DROP COLUMN recovery_state;
SELECT scope, store, records_committed, store_problem IS NOT NULL AS unusable FROM idem_metrics
WHERE store = 'metrics_svc.records' ORDER BY scope;

-- Who may read it: pg_monitor's members, and no other role without a grant.
CREATE ROLE regress_metrics_watcher;
CREATE ROLE regress_metrics_app;
GRANT pg_monitor TO regress_metrics_watcher;
GRANT USAGE ON SCHEMA idempotency TO regress_metrics_app;
SET ROLE regress_metrics_watcher;
SELECT scope, count(*) FROM idem_metrics GROUP BY scope ORDER BY scope;
SET ROLE regress_metrics_app;
SELECT count(*) FROM idem_metrics;
SELECT count(*) FROM idempotency_internal.idem_metrics_figures();
SELECT count(*) FROM idempotency_internal.idem_namespace_counters();
RESET ROLE;

-- Clean up.
DELETE FROM metrics_svc.records;
SELECT idem_bind_store('m-bound', NULL);
DROP SCHEMA metrics_svc CASCADE;
DELETE FROM idempotency_record;
SELECT idem_namespace_drop(n) FROM unnest(ARRAY['m-leased', 'm-idle', 'm-bound']) n;
SELECT replay_window FROM idem_namespace_defaults(in_progress_lease => '0');
DROP ROLE regress_metrics_watcher;
REVOKE USAGE ON SCHEMA idempotency FROM regress_metrics_app;
DROP ROLE regress_metrics_app;
