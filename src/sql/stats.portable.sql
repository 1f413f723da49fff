-- stats.portable.sql: the counters behind idem_stats, which the portable
-- edition does not keep (no shared memory without a library): counters_on
-- is false and every counter NULL, as in the library when it is not
-- preloaded. The views (stats.sql) are the API.

CREATE OR REPLACE FUNCTION idempotency_internal.idem_stats_counters(
\ir stats_counters.columns.sql
RETURNS record
LANGUAGE sql VOLATILE STRICT PARALLEL SAFE
AS $$ SELECT false, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint,
             NULL::bigint, NULL::bigint, NULL::bigint, NULL::timestamptz $$;

COMMENT ON FUNCTION idempotency_internal.idem_stats_counters() IS
'Cumulative counters of begin outcomes, transitions, waits and purged rows (NULL unless preloaded)';

-- Without counters there is nothing to reset (55000, as the library says).
CREATE OR REPLACE FUNCTION idem_stats_reset()
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL SAFE
AS $$
#variable_conflict use_variable
BEGIN
    RAISE EXCEPTION 'idempotency counters are off'
        USING ERRCODE = 'object_not_in_prerequisite_state',
              DETAIL = 'The portable edition keeps no counters (they live in the shared memory of the native edition''s library).';
END;
$$;

COMMENT ON FUNCTION idem_stats_reset() IS
'Sets the counters of idem_stats back to zero';

CREATE OR REPLACE FUNCTION idempotency_internal.idem_stats_count_purged(rows bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL SAFE
AS $$
BEGIN
    RETURN;   -- no counters to add to
END;
$$;

COMMENT ON FUNCTION idempotency_internal.idem_stats_count_purged(bigint) IS
'Adds to the purged_rows counter (called by idem_purge)';

CREATE OR REPLACE FUNCTION idempotency_internal.idem_stats_released_keys()
RETURNS bigint
LANGUAGE sql VOLATILE STRICT PARALLEL SAFE
AS $$ SELECT NULL::bigint $$;

COMMENT ON FUNCTION idempotency_internal.idem_stats_released_keys() IS
'Cumulative count of keys idem_release_key released (NULL unless preloaded)';

CREATE OR REPLACE FUNCTION idempotency_internal.idem_stats_recovery(OUT takeovers bigint, OUT recovery_points bigint)
RETURNS record
LANGUAGE sql VOLATILE STRICT PARALLEL SAFE
AS $$ SELECT NULL::bigint, NULL::bigint $$;

COMMENT ON FUNCTION idempotency_internal.idem_stats_recovery() IS
'Cumulative counts of takeovers and of recovery points recorded (NULLs unless preloaded)';

CREATE OR REPLACE FUNCTION idempotency_internal.idem_stats_stores_skipped()
RETURNS bigint
LANGUAGE sql VOLATILE STRICT PARALLEL SAFE
AS $$ SELECT NULL::bigint $$;

COMMENT ON FUNCTION idempotency_internal.idem_stats_stores_skipped() IS
'Cumulative count of stores purge or the statistics skipped because they failed or ran too long (NULL unless preloaded)';
