-- stats.native.sql: the counters behind idem_stats, kept in shared memory
-- when the library is in shared_preload_libraries (src/pg/stats.cpp).
-- Plumbing, in idempotency_internal; the views (stats.sql) are the API.

-- The cumulative counters. With counters_on false every other column is
-- NULL. Counts include calls whose transaction later rolled back.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_stats_counters(
\ir stats_counters.columns.sql
RETURNS record
AS 'MODULE_PATHNAME', 'idem_stats_counters'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idempotency_internal.idem_stats_counters() IS
'Cumulative counters of begin outcomes, transitions, waits and purged rows (NULL unless preloaded)';

CREATE OR REPLACE FUNCTION idem_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'idem_stats_reset'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idem_stats_reset() IS
'Sets the counters of idem_stats and idem_metrics back to zero';

-- idem_purge reports the rows it deleted here.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_stats_count_purged(rows bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_stats_count_purged'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idempotency_internal.idem_stats_count_purged(bigint) IS
'Adds to the purged_rows counter (called by idem_purge)';

-- How many keys idem_release_key released (NULL unless preloaded).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_stats_released_keys()
RETURNS bigint
AS 'MODULE_PATHNAME', 'idem_stats_released_keys'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idempotency_internal.idem_stats_released_keys() IS
'Cumulative count of keys idem_release_key released (NULL unless preloaded)';

-- How many begins took an abandoned claim over, and how many recovery
-- points holders recorded (NULLs unless preloaded).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_stats_recovery(OUT takeovers bigint, OUT recovery_points bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_stats_recovery'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idempotency_internal.idem_stats_recovery() IS
'Cumulative counts of takeovers and of recovery points recorded (NULLs unless preloaded)';

-- How many times purge or the statistics skipped a store (NULL unless preloaded).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_stats_stores_skipped()
RETURNS bigint
AS 'MODULE_PATHNAME', 'idem_stats_stores_skipped'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idempotency_internal.idem_stats_stores_skipped() IS
'Cumulative count of stores purge or the statistics skipped because they failed or ran too long (NULL unless preloaded)';
