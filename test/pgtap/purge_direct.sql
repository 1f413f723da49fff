-- purge_direct: purging a store whose table is exactly as installed
-- (src/pg/purge.cpp: its expires_at index in order, each record deleted
-- without a row lock first) against what the statement it replaced did.
-- Chunks of one transaction resume where the last stopped, across records
-- that share one expires_at, and start again after a savepoint rolled one
-- back; the leases are kept; a record this transaction locked is deleted,
-- as FOR UPDATE SKIP LOCKED took it; no row-lock WAL record is written
-- (15+, pg_walinspect); the heap and both indexes stay consistent
-- (amcheck); and a bound table with a trigger is still purged through SQL,
-- which fires it. Records held by other transactions: the isolation spec
-- purge_direct.spec.
BEGIN;
SET search_path = idempotency, public;
SELECT plan(17);
CREATE EXTENSION IF NOT EXISTS amcheck;

-- n committed records of namespace ns in table t, all expired at the same
-- microsecond (ties in the expires_at index), keys prefix || 1..n.
CREATE FUNCTION pg_temp.expired(t regclass, ns text, n integer, prefix text DEFAULT 'k') RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format($f$INSERT INTO %s (namespace, key_value, status, request_hash, request_payload, result_payload,
                                     created_at, updated_at, expires_at)
                      SELECT %L, %L || g, 'committed', idempotency.idem_request_hash('{}'), '{}', '{"ok": true}',
                             now() - interval '2 days', now() - interval '2 days', now() - interval '1 day'
                      FROM generate_series(1, %s) g$f$, t, ns, prefix, n);
END $$;
CREATE FUNCTION pg_temp.left_in(ns text) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM idempotency.idempotency_record WHERE namespace = ns $$;

-- Other files' expired records would count in the chunks: none here.
DELETE FROM idempotency_record WHERE expires_at < now();

-- 25 records with one expires_at, in chunks of 10 in one transaction.
SELECT pg_temp.expired('idempotency_record', 'pd-ties', 25);
SELECT is(ARRAY[idempotency_internal.idem_store_purge(NULL, 10), idempotency_internal.idem_store_purge(NULL, 10), idempotency_internal.idem_store_purge(NULL, 10),
                idempotency_internal.idem_store_purge(NULL, 10)], '{10,10,5,0}'::bigint[],
          'chunks of one transaction resume among records that share an expires_at');
SELECT is(pg_temp.left_in('pd-ties'), 0::bigint, 'every one of them is gone');

-- A chunk rolled back to a savepoint deleted nothing: the next one finds its records.
SELECT pg_temp.expired('idempotency_record', 'pd-savepoint', 6);
-- (Results inside a savepoint that is rolled back are kept in psql
-- variables: pgTAP's own record of a test would be rolled back with it.)
SAVEPOINT chunk;
SELECT idempotency_internal.idem_store_purge(NULL, 4) AS in_savepoint \gset
ROLLBACK TO SAVEPOINT chunk;
SELECT is(:in_savepoint::bigint, 4::bigint, 'a chunk inside a savepoint');
SELECT is(idempotency_internal.idem_store_purge(NULL, 10), 6::bigint, 'after the rollback the next chunk finds all six again');

-- A record this transaction locked goes, as FOR UPDATE SKIP LOCKED took it.
SELECT pg_temp.expired('idempotency_record', 'pd-own-lock', 3);
SELECT key_value FROM idempotency_record WHERE namespace = 'pd-own-lock' AND key_value IN ('k1', 'k2') FOR UPDATE;
SELECT key_value FROM idempotency_record WHERE namespace = 'pd-own-lock' AND key_value = 'k3' FOR KEY SHARE;
SELECT is(idempotency_internal.idem_store_purge(NULL, 10), 3::bigint, 'records this transaction locked (FOR UPDATE, FOR KEY SHARE) are purged');

-- Leases: a namespace's own, else the server's (0 here: in_progress
-- records go once expired). The lease runs from updated_at.
SELECT namespace FROM idem_namespace_configure('pd-lease', in_progress_lease => '1 hour');
INSERT INTO idempotency_record (namespace, key_value, status, request_hash, request_payload, created_at, updated_at,
                                expires_at)
VALUES ('pd-lease', 'running', 'in_progress', idem_request_hash('{}'), '{}', now() - interval '2 hours',
        now() - interval '10 minutes', now() - interval '1 minute'),
       ('pd-lease', 'abandoned', 'in_progress', idem_request_hash('{}'), '{}', now() - interval '3 hours',
        now() - interval '2 hours', now() - interval '1 minute'),
       ('pd-lease', 'not-expired', 'committed', idem_request_hash('{}'), '{}', now(), now(), now() + interval '1 hour'),
       ('pd-nolease', 'in-progress', 'in_progress', idem_request_hash('{}'), '{}', now() - interval '1 hour',
        now() - interval '1 second', now() - interval '1 minute');
SELECT pg_temp.expired('idempotency_record', 'pd-lease', 2, 'done');
SELECT is(idem_purge(2), 4::bigint, 'idem_purge: the committed, the abandoned and the unleased in_progress ones');
SELECT is((SELECT array_agg(key_value ORDER BY key_value) FROM idempotency_record WHERE namespace LIKE 'pd-%'),
          '{not-expired,running}'::text[], 'kept: the record under its running lease and the unexpired one');

-- WAL: one delete record per purged row, no row-lock record.
SELECT pg_temp.expired('idempotency_record', 'pd-wal', 20);
SELECT EXISTS (SELECT FROM pg_available_extensions WHERE name = 'pg_walinspect') AS walinspect \gset
\if :walinspect
CREATE EXTENSION IF NOT EXISTS pg_walinspect;
SELECT pg_current_wal_insert_lsn() AS wal_start \gset
SELECT is(idempotency_internal.idem_store_purge(NULL, 100), 20::bigint, 'a chunk purges the 20');
SELECT pg_current_wal_insert_lsn() AS wal_end \gset
SELECT pg_switch_wal() IS NOT NULL AS flushed;
SELECT is((SELECT count(*) FROM pg_get_wal_records_info(:'wal_start', :'wal_end')
           WHERE resource_manager = 'Heap' AND record_type LIKE 'LOCK%'), 0::bigint,
          'no row-lock WAL record');
SELECT is((SELECT count(*) FROM pg_get_wal_records_info(:'wal_start', :'wal_end')
           WHERE resource_manager = 'Heap' AND record_type LIKE 'DELETE%'), 20::bigint,
          'one delete WAL record per purged row');
\else
SELECT is(idempotency_internal.idem_store_purge(NULL, 100), 20::bigint, 'a chunk purges the 20');
SELECT skip('pg_walinspect is not available (PostgreSQL 14 and older)', 2);
\endif

-- amcheck: every heap tuple in both indexes, and the heap itself sound.
SELECT lives_ok($$SELECT bt_index_check(i.indexrelid, heapallindexed => true) FROM pg_index i
                  WHERE i.indrelid = 'idempotency.idempotency_record'::regclass$$,
                'both indexes hold every heap tuple after the purges (bt_index_check, heapallindexed)');
SELECT EXISTS (SELECT FROM pg_proc WHERE proname = 'verify_heapam') AS heapam \gset
\if :heapam
SELECT is((SELECT count(*) FROM verify_heapam('idempotency.idempotency_record')), 0::bigint,
          'verify_heapam finds nothing wrong');
\else
SELECT skip('verify_heapam is not available (PostgreSQL 13)', 1);
\endif

-- A bound table exactly as idem_create_store makes it is purged directly
-- too; once it has a trigger, through the statement, which fires it.
CREATE SCHEMA pd_app;
SELECT idem_create_store('pd_app.records');
SELECT idem_bind_store('pd-bound', 'pd_app.records');
SELECT pg_temp.expired('pd_app.records', 'pd-bound', 5);
SELECT is(idempotency_internal.idem_store_purge('pd_app.records', 3), 3::bigint, 'a bound store as made: a chunk of 3');
SELECT is(idempotency_internal.idem_store_purge('pd_app.records', 3), 2::bigint, 'and the rest');
CREATE TABLE pd_app.deleted (key_value text);
CREATE FUNCTION pd_app.note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO pd_app.deleted VALUES (OLD.key_value); RETURN OLD; END $$;
CREATE TRIGGER note BEFORE DELETE ON pd_app.records FOR EACH ROW EXECUTE FUNCTION pd_app.note();
SELECT pg_temp.expired('pd_app.records', 'pd-bound', 4, 't');
SELECT is(idempotency_internal.idem_store_purge('pd_app.records', 10), 4::bigint, 'with a trigger: purged through the statement');
SELECT is((SELECT count(*) FROM pd_app.deleted), 4::bigint, 'which fired the trigger for each record');

-- A read-only transaction refuses the purge, as the executor refused its DELETE.
CREATE FUNCTION pg_temp.error_of(statement text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE statement;
    RETURN 'no error';
EXCEPTION WHEN others THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END;
$$;
SAVEPOINT read_only;
SET LOCAL transaction_read_only = on;
SELECT pg_temp.error_of($$SELECT idempotency_internal.idem_store_purge(NULL, 10)$$) AS read_only_error \gset
ROLLBACK TO SAVEPOINT read_only;
SELECT is(:'read_only_error'::text, '25006: cannot execute DELETE in a read-only transaction',
          'a read-only transaction cannot purge');

SELECT * FROM finish();
ROLLBACK;
