-- metrics.portable.sql: the per-namespace counters behind idem_metrics,
-- which the portable edition does not keep (no shared memory without a
-- library): the function metrics.native.sql defines in C, in SQL,
-- returning no rows, so that the view (metrics.sql) shows every counter
-- NULL and only what the store's tables give (docs/managed.md,
-- differences).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_namespace_counters(
\ir namespace_counters.columns.sql
RETURNS SETOF record
LANGUAGE sql VOLATILE STRICT PARALLEL RESTRICTED
AS $$ SELECT NULL::text, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
             NULL::bigint, NULL::bigint, NULL::bigint, NULL::double precision, NULL::bigint, NULL::bigint,
             NULL::bigint, NULL::bigint, NULL::bigint, NULL::timestamptz
      WHERE false $$;

COMMENT ON FUNCTION idempotency_internal.idem_namespace_counters() IS
'Per-namespace counters and the claims of open transactions (no rows unless preloaded)';
