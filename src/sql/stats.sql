-- stats.sql: the views operators read (idem_stats, idem_namespace_stats),
-- over the counters (each edition's idempotency_internal.idem_stats_counters)
-- and each store's figures.

-- 0.9's name for them, deprecated: the view idem_stats shows them.
CREATE OR REPLACE FUNCTION idem_stats_counters(
\ir stats_counters.columns.sql
RETURNS record
LANGUAGE sql VOLATILE STRICT PARALLEL SAFE
AS $$ SELECT * FROM idempotency_internal.idem_stats_counters() $$;

COMMENT ON FUNCTION idem_stats_counters() IS
'Deprecated: read the view idem_stats; removed in 2.0';

-- held_key_locks: the store's per-key locks granted now in this database,
-- which counts the claims held by their lock alone (no row shows them; a
-- namespace without a lease), plus any begin between its look and its answer.
-- Their tags are keyed to name no namespace, so the count is per database.
CREATE OR REPLACE VIEW idem_stats AS
SELECT c.*, pg_catalog.pg_total_relation_size('@extschema@.idempotency_record'::pg_catalog.regclass) AS table_bytes,
       (SELECT pg_catalog.count(*) FROM pg_catalog.pg_locks l
        WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory' AND l.objsubid OPERATOR(pg_catalog.=) 18756 AND l.granted
          AND l.database OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database d
                                                 WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
       ) AS held_key_locks,
       idempotency_internal.idem_stats_released_keys() AS released_keys,
       r.takeovers, r.recovery_points,
       idempotency_internal.idem_stats_stores_skipped() AS stores_skipped
FROM idempotency_internal.idem_stats_counters() c, idempotency_internal.idem_stats_recovery() r;

COMMENT ON VIEW idem_stats IS
'Cumulative counters (counters_on false unless preloaded), the size of the store, the per-key locks held now, keys released, takeovers and recovery points';

-- One row per namespace and store, counted from each table (full scans: for
-- an operator or a monitoring job once a minute, not for every request). An
-- in_progress row is visible here only once the transaction that began it
-- has committed without finishing it: an abandoned or long-running
-- operation. Reads each store as its owner, in a subtransaction of its own
-- (idem_store_stats): a store that fails or runs past
-- idempotency.maintenance_timeout is skipped with a WARNING.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_namespace_stats_figures(
    OUT namespace text, OUT in_progress bigint, OUT committed bigint, OUT failed bigint,
    OUT oldest_in_progress_age interval, OUT expired bigint, OUT row_bytes bigint, OUT store regclass,
    OUT oldest_expired_age interval)
RETURNS SETOF record
LANGUAGE plpgsql STABLE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t regclass;
    figures jsonb;
    problem text;
BEGIN
    FOR t IN
        SELECT NULL::regclass
        UNION ALL
        (SELECT DISTINCT c.store FROM @extschema@.idem_namespace_config c
         WHERE c.store IS NOT NULL AND EXISTS (SELECT FROM pg_class r WHERE r.oid = c.store) ORDER BY 1)
    LOOP
        -- A store that can no longer be used (its shape changed) shows no rows.
        problem := (SELECT p.problem FROM idempotency_internal.idem_store_problem(t) p);
        IF problem IS NOT NULL THEN
            RAISE WARNING 'idempotency: cannot read %: %', t, problem;
            CONTINUE;
        END IF;
        figures := idempotency_internal.idem_store_stats(t);   -- read as the store's owner
        RETURN QUERY
            SELECT s.namespace, s.in_progress, s.committed, s.failed, s.oldest_in_progress_age, s.expired,
                   s.row_bytes, t, s.oldest_expired_age
            FROM jsonb_to_recordset(figures) AS s(namespace text, in_progress bigint, committed bigint, failed bigint,
                                                  oldest_in_progress_age interval, expired bigint, row_bytes bigint,
                                                  oldest_expired_age interval);
    END LOOP;
END;
$$;

CREATE OR REPLACE VIEW idem_namespace_stats AS
SELECT namespace COLLATE "C" AS namespace, in_progress, committed, failed, oldest_in_progress_age, expired,
       row_bytes, store, oldest_expired_age
FROM idempotency_internal.idem_namespace_stats_figures();

COMMENT ON VIEW idem_namespace_stats IS
'Rows per namespace by status, the oldest committed in_progress row, expired rows not yet purged and how long the oldest has waited, bytes';
