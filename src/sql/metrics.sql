-- metrics.sql: idem_metrics, what a monitoring stack reads (docs/
-- operations.md, "Metrics for Prometheus"): the counters of each namespace
-- (idem_namespace_counters, native; the portable edition has none) and the
-- figures each store's table gives, in both editions.

-- Each store's records per namespace, read as the store's owner in a
-- subtransaction of its own (idem_store_stats, as idem_namespace_stats
-- reads them): full scans, for a monitoring job once a minute.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_metrics_figures(
    OUT namespace text, OUT store regclass, OUT in_progress bigint, OUT committed bigint, OUT failed bigint,
    OUT oldest_in_progress_idle interval, OUT taken_over bigint, OUT expired bigint,
    OUT oldest_expired_age interval, OUT row_bytes bigint)
RETURNS SETOF record
LANGUAGE plpgsql STABLE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t regclass;
    figures jsonb;
BEGIN
    FOR t IN
        SELECT NULL::regclass
        UNION ALL
        (SELECT DISTINCT c.store FROM @extschema@.idem_namespace_config c
         WHERE c.store IS NOT NULL AND EXISTS (SELECT FROM pg_class r WHERE r.oid = c.store) ORDER BY 1)
    LOOP
        -- A store that can no longer be used shows no rows (its store row says why).
        CONTINUE WHEN (SELECT p.problem FROM idempotency_internal.idem_store_problem(t) p) IS NOT NULL;
        figures := idempotency_internal.idem_store_stats(t);
        RETURN QUERY
            SELECT s.namespace, coalesce(t, '@extschema@.idempotency_record'::regclass), s.in_progress, s.committed,
                   s.failed, s.oldest_in_progress_idle, s.taken_over, s.expired, s.oldest_expired_age, s.row_bytes
            FROM jsonb_to_recordset(figures) AS s(namespace text, in_progress bigint, committed bigint, failed bigint,
                                                  oldest_in_progress_idle interval, taken_over bigint, expired bigint,
                                                  oldest_expired_age interval, row_bytes bigint);
    END LOOP;
END;
$$;

-- Each store (the extension's table, and every table a namespace is bound
-- to): its table's and its indexes' bytes, and what keeps it from being
-- used (NULL: nothing).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_metrics_stores(
    OUT store regclass, OUT table_bytes bigint, OUT index_bytes bigint, OUT problem text)
RETURNS SETOF record
LANGUAGE sql STABLE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT s.store, pg_table_size(s.store), pg_indexes_size(s.store),
           (SELECT p.problem FROM idempotency_internal.idem_store_problem(nullif(s.store, '@extschema@.idempotency_record'::regclass)) p)
    FROM (SELECT '@extschema@.idempotency_record'::regclass AS store
          UNION
          SELECT c.store FROM @extschema@.idem_namespace_config c
          WHERE c.store IS NOT NULL AND EXISTS (SELECT FROM pg_class r WHERE r.oid = c.store)) s
$$;

-- The metrics, one row per scope:
--   'namespace': one per namespace (registered, counted, or with records),
--     at most idempotency.tracked_namespaces of them (those the counters
--     keep apart first, then the registered, then those with the most
--     records), the rest summed under '_other';
--   'store': one per store, with its sizes and problem;
--   'database': one, with what concerns the server (counters_on,
--     stats_reset, stores_skipped).
-- Columns a scope does not fill are NULL; so are the counters of a
-- namespace they do not keep apart (counted under '_other'), and all of
-- them when they are off (the library not preloaded, or the portable
-- edition). Ages and the lease are in seconds. docs/operations.md describes every column.
CREATE OR REPLACE VIEW idem_metrics AS
WITH counters AS MATERIALIZED (
    SELECT * FROM idempotency_internal.idem_namespace_counters()
), figures AS MATERIALIZED (
    SELECT f.namespace, pg_catalog.sum(f.in_progress) AS in_progress, pg_catalog.sum(f.committed) AS committed,
           pg_catalog.sum(f.failed) AS failed, pg_catalog.max(f.oldest_in_progress_idle) AS oldest_in_progress_idle,
           pg_catalog.sum(f.taken_over) AS taken_over, pg_catalog.sum(f.expired) AS expired,
           pg_catalog.max(f.oldest_expired_age) AS oldest_expired_age, pg_catalog.sum(f.row_bytes) AS row_bytes
    FROM idempotency_internal.idem_metrics_figures() f
    GROUP BY f.namespace
), candidates AS (
    SELECT x.namespace, pg_catalog.min(x.priority) AS priority
    FROM (SELECT c.namespace, 0 AS priority FROM counters c
          UNION ALL SELECT r.namespace, 1 FROM @extschema@.idem_namespace_config r
          UNION ALL SELECT f.namespace, 2 FROM figures f) x
    GROUP BY x.namespace
), labelled AS (
    SELECT c.namespace,
           CASE WHEN c.namespace OPERATOR(pg_catalog.=) '_other'
                  OR pg_catalog.row_number() OVER (
                         ORDER BY c.namespace OPERATOR(pg_catalog.=) '_other', c.priority, coalesce(f.in_progress + f.committed + f.failed, 0) DESC, c.namespace)
                     OPERATOR(pg_catalog.>) coalesce(nullif(
                         pg_catalog.current_setting('idempotency.tracked_namespaces', true), '')::integer, 1000)
                THEN '_other' ELSE c.namespace END AS label
    FROM candidates c LEFT JOIN figures f ON f.namespace OPERATOR(pg_catalog.=) c.namespace
), names AS (
    -- A store as labels name it: schema-qualified whatever the search_path.
    SELECT c.oid AS store, pg_catalog.format('%I.%I', s.nspname, c.relname) AS name
    FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace s ON s.oid OPERATOR(pg_catalog.=) c.relnamespace
    WHERE c.oid OPERATOR(pg_catalog.=) '@extschema@.idempotency_record'::regclass
       OR c.oid IN (SELECT r.store FROM @extschema@.idem_namespace_config r)
), namespaces AS (
    SELECT l.label AS namespace,
           CASE WHEN l.label OPERATOR(pg_catalog.<>) '_other'
                THEN pg_catalog.max(coalesce(r.store, '@extschema@.idempotency_record'::regclass)::oid) END AS store,
           pg_catalog.sum(c.begins_fresh) AS begins_fresh, pg_catalog.sum(c.begins_in_flight) AS begins_in_flight,
           pg_catalog.sum(c.begins_prior_result) AS begins_prior_result,
           pg_catalog.sum(c.begins_prior_error) AS begins_prior_error,
           pg_catalog.sum(c.begins_mismatch) AS begins_mismatch, pg_catalog.sum(c.commits) AS commits,
           pg_catalog.sum(c.permanent_failures) AS permanent_failures,
           pg_catalog.sum(c.transient_failures) AS transient_failures, pg_catalog.sum(c.waits) AS waits,
           pg_catalog.sum(c.wait_seconds) AS wait_seconds, pg_catalog.sum(c.takeovers) AS takeovers,
           pg_catalog.sum(c.recovery_points) AS recovery_points, pg_catalog.sum(c.released_keys) AS released_keys,
           pg_catalog.sum(c.purged_rows) AS purged_rows,
           coalesce(pg_catalog.sum(c.open_claims), 0) AS open_claims,
           pg_catalog.min(c.oldest_open_claim_at) AS oldest_open_claim_at,
           CASE WHEN l.label OPERATOR(pg_catalog.<>) '_other'
                THEN pg_catalog.max(coalesce(r.in_progress_lease, d.in_progress_lease, interval '0')) END AS lease,
           coalesce(pg_catalog.sum(f.in_progress), 0) AS in_progress, coalesce(pg_catalog.sum(f.committed), 0) AS committed,
           coalesce(pg_catalog.sum(f.failed), 0) AS failed, pg_catalog.max(f.oldest_in_progress_idle) AS oldest_in_progress_idle,
           coalesce(pg_catalog.sum(f.taken_over), 0) AS taken_over, coalesce(pg_catalog.sum(f.expired), 0) AS expired,
           pg_catalog.max(f.oldest_expired_age) AS oldest_expired_age, coalesce(pg_catalog.sum(f.row_bytes), 0) AS row_bytes
    FROM labelled l
    LEFT JOIN counters c ON c.namespace OPERATOR(pg_catalog.=) l.namespace
    LEFT JOIN figures f ON f.namespace OPERATOR(pg_catalog.=) l.namespace
    LEFT JOIN @extschema@.idem_namespace_config r ON r.namespace OPERATOR(pg_catalog.=) l.namespace
    LEFT JOIN (SELECT x.in_progress_lease FROM @extschema@.idem_defaults x LIMIT 1) d ON true
    GROUP BY l.label
)
SELECT 'namespace'::text AS scope, n.namespace COLLATE "C" AS namespace,
       (SELECT x.name FROM names x WHERE x.store OPERATOR(pg_catalog.=) n.store) AS store,
       n.begins_fresh::bigint, n.begins_in_flight::bigint, n.begins_prior_result::bigint,
       n.begins_prior_error::bigint, n.begins_mismatch::bigint, n.commits::bigint, n.permanent_failures::bigint,
       n.transient_failures::bigint, n.waits::bigint, n.wait_seconds::double precision, n.takeovers::bigint,
       n.recovery_points::bigint, n.released_keys::bigint, n.purged_rows::bigint,
       (n.open_claims + n.in_progress)::bigint AS claims_in_flight,
       CASE WHEN n.oldest_open_claim_at IS NOT NULL OR n.oldest_in_progress_idle IS NOT NULL
            THEN GREATEST(pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) n.oldest_open_claim_at),
                          pg_catalog.date_part('epoch', n.oldest_in_progress_idle), 0) END AS oldest_claim_age_seconds,
       pg_catalog.date_part('epoch', n.lease) AS lease_seconds,
       n.in_progress::bigint AS records_in_progress, n.committed::bigint AS records_committed,
       n.failed::bigint AS records_failed, n.taken_over::bigint AS records_taken_over,
       n.expired::bigint AS expired_records,
       pg_catalog.date_part('epoch', n.oldest_expired_age) AS oldest_expired_age_seconds,
       n.row_bytes::bigint AS record_bytes,
       NULL::bigint AS store_table_bytes, NULL::bigint AS store_index_bytes, NULL::text AS store_problem,
       NULL::bigint AS stores_skipped, NULL::boolean AS counters_on, NULL::timestamptz AS stats_reset
FROM namespaces n
UNION ALL
SELECT 'store', NULL, (SELECT x.name FROM names x WHERE x.store OPERATOR(pg_catalog.=) s.store),
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       s.table_bytes, s.index_bytes, s.problem, NULL, NULL, NULL
FROM idempotency_internal.idem_metrics_stores() s
UNION ALL
SELECT 'database', NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, idempotency_internal.idem_stats_stores_skipped(), c.counters_on, c.stats_reset
FROM idempotency_internal.idem_stats_counters() c;

COMMENT ON VIEW idem_metrics IS
'What a monitoring stack reads: per namespace, per store and for the database (docs/operations.md, "Metrics for Prometheus")';
