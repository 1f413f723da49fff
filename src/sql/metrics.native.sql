-- metrics.native.sql: the per-namespace counters behind idem_metrics, kept
-- in shared memory when the library is in shared_preload_libraries
-- (src/pg/namespace_stats.cpp). Plumbing, in idempotency_internal; the
-- view (metrics.sql) is the API. The portable edition defines the same
-- function in SQL, returning no rows: it has no counters.

-- One row per namespace of the current database that the counters keep
-- apart (at most idempotency.tracked_namespaces of all databases), and
-- "_other" for the rest of them, when the counters are on; no rows when
-- they are off. Counts since the server started or idem_stats_reset(),
-- including calls whose transaction rolled back. open_claims and
-- oldest_open_claim_at: the fresh claims of transactions still open (each
-- backend shows those of its first four namespaces), and when the
-- statement that made the oldest of them started.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_namespace_counters(
\ir namespace_counters.columns.sql
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idem_namespace_counters'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION idempotency_internal.idem_namespace_counters() IS
'Per-namespace counters and the claims of open transactions (no rows unless preloaded)';
