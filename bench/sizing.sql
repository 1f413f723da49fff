-- sizing.sql: bytes per record and index size per million keys, measured.
--   psql -X -d DB -v rows=1000000 -f bench/sizing.sql
-- Loads :rows committed records in a scratch namespace, shaped as
-- idem_begin + idem_commit leave them (a 36-character key, the benchmark's
-- 120-byte request and 40-byte result), vacuums, reports the sizes of the
-- heap and of each index divided by the rows, and deletes the rows again.
-- Run it on a server with an empty idempotency_record table: sizes are of
-- the whole relations.
\set ON_ERROR_STOP 1
SELECT count(*) = 0 AS table_was_empty FROM idempotency.idempotency_record \gset
\if :table_was_empty
\else
\echo 'idempotency_record is not empty: sizes would include its rows'
\quit
\endif
INSERT INTO idempotency.idempotency_record
SELECT 'sizing', gen_random_uuid()::text, 'committed',
       idempotency.idem_request_hash(r), r, '{"payment_id": 7, "status": "captured"}', NULL,
       now(), now(), now() + interval '1 day' + i * interval '1 millisecond'  -- distinct, as in real traffic
FROM generate_series(1, :rows) i,
     LATERAL (SELECT jsonb_build_object('amount', i, 'currency', 'EUR', 'customer', 'c-42',
                 'items', '[{"sku": "a-1", "qty": 2}, {"sku": "b-7", "qty": 1}]'::jsonb) AS r) req;
VACUUM ANALYZE idempotency.idempotency_record;
SELECT c.relname AS relation,
       pg_size_pretty(pg_relation_size(c.oid)) AS size,
       round(pg_relation_size(c.oid)::numeric / :rows, 1) AS bytes_per_record,
       pg_size_pretty(pg_relation_size(c.oid) * 1000000 / :rows) AS per_million_records
FROM pg_class c
WHERE c.oid = 'idempotency.idempotency_record'::regclass
   OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = 'idempotency.idempotency_record'::regclass)
UNION ALL
SELECT 'total (with TOAST and free-space maps)', pg_size_pretty(pg_total_relation_size('idempotency.idempotency_record')),
       round(pg_total_relation_size('idempotency.idempotency_record')::numeric / :rows, 1),
       pg_size_pretty(pg_total_relation_size('idempotency.idempotency_record') * 1000000 / :rows)
ORDER BY 1;
SELECT round(avg(pg_column_size(r.*)), 1) AS avg_tuple_bytes FROM idempotency.idempotency_record r;
DELETE FROM idempotency.idempotency_record WHERE namespace = 'sizing';
VACUUM idempotency.idempotency_record;
