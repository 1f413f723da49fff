-- parallel: the functions labelled PARALLEL SAFE run in parallel workers.
-- None may start a subtransaction (a PL/pgSQL exception block), which a
-- worker cannot do; each is then called in a plan forced to run in a worker.
-- A function added as PARALLEL SAFE changes the first list below: give it a
-- call in the query after it. (idem_stats_reset needs the library
-- preloaded; test/t/004_counters.pl calls it in a parallel plan.)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
RESET client_min_messages;
SET search_path = public, idempotency;
SELECT p.oid::regprocedure AS parallel_safe, l.lanname AS language,
       p.prosrc ~* '\mexception\s+when\M' AS has_exception_block
FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
WHERE p.pronamespace IN ('idempotency'::regnamespace, 'idempotency_internal'::regnamespace) AND p.proparallel = 's'
ORDER BY p.oid::regprocedure::text;

-- (Not a temporary table: those are never read by workers.)
CREATE TABLE parallel_inputs AS SELECT g FROM generate_series(1, 4) g;
ANALYZE parallel_inputs;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
-- force_parallel_mode was renamed debug_parallel_query in PostgreSQL 16.
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
                       THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END, 'on', false) AS forced;
-- The calls are made in the worker, below the Gather.
EXPLAIN (VERBOSE, COSTS OFF) SELECT (idem_http_key('parallel', g::text)).key FROM parallel_inputs;
SELECT g,
       idem_mint('parallel', ARRAY['p', g::text]) = idem_mint('parallel', ARRAY['p', g::text]) AS mint,
       idem_parse('parallel', ' k' || g || ' ') AS parse,
       idem_canonical(jsonb_build_object('b', g, 'a', 1)) AS canonical,
       octet_length(idem_request_hash(jsonb_build_object('g', g))) AS hash_bytes,
       idempotency_internal.idem_shape_mismatch(jsonb_build_object('g', g), 'integer') AS shape,
       (idem_header_key('parallel', '"k' || g || '"')).key AS header_key,
       (idem_http_key('parallel', '"k' || g)).status AS bad_header_status,
       idem_http_problem(400, 'C' || g, 'd') ->> 'code' AS problem,
       (idem_http_response(jsonb_populate_record(NULL::idem_outcome, '{"kind": "in_flight"}'), g)).status AS in_flight,
       (idem_stats_counters()).counters_on AS counters,
       idempotency_internal.idem_stats_count_purged(0) IS NULL AS counted,
       (idempotency_internal.idem_store_problem('parallel_inputs'::regclass)).problem IS NOT NULL AS not_a_store,
       idem_store_distribution('parallel_inputs'::regclass) IS NULL AS not_distributed
FROM parallel_inputs ORDER BY g;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
                       THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END, 'off', false) AS forced;
DROP TABLE parallel_inputs;
