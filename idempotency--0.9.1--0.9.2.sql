/* idempotency--0.9.1--0.9.2.sql: release 0.9.2. One service's store can
   no longer stop another's purge or hide another's statistics: each
   store's purge chunk and statistics read runs in a subtransaction of its
   own, bounded by idempotency.maintenance_timeout, and a store that fails
   or runs too long is reported in a WARNING, counted in
   idem_stats.stores_skipped and skipped (idem_store_purge and
   idem_store_stats answer NULL for it). The library's claims finish while
   an index is built on the extension's table, and a batch answers each key
   as single begins do. */

\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.9.2'" to load this file. \quit

-- How many times purge or the statistics skipped a store (NULL unless preloaded).
CREATE FUNCTION @extschema@.idem_stats_stores_skipped()
RETURNS bigint
AS 'MODULE_PATHNAME', 'idem_stats_stores_skipped'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.idem_stats_stores_skipped() IS
'Cumulative count of stores purge or the statistics skipped because they failed or ran too long (NULL unless preloaded)';

-- Executable by anyone: a role an operator let read idem_stats (with
-- EXECUTE on the functions behind it) reads the new column too, and a count
-- of skipped stores says nothing about anyone's records.

-- stores_skipped, at the end: the view is replaced in place, so what
-- operators granted on it stays.
CREATE OR REPLACE VIEW @extschema@.idem_stats AS
SELECT c.*, pg_catalog.pg_total_relation_size('@extschema@.idempotency_record'::pg_catalog.regclass) AS table_bytes,
       (SELECT pg_catalog.count(*) FROM pg_catalog.pg_locks l
        WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory' AND l.objsubid OPERATOR(pg_catalog.=) 18756 AND l.granted
          AND l.database OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database d
                                                 WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
       ) AS held_key_locks,
       @extschema@.idem_stats_released_keys() AS released_keys,
       r.takeovers, r.recovery_points,
       @extschema@.idem_stats_stores_skipped() AS stores_skipped
FROM @extschema@.idem_stats_counters() c, @extschema@.idem_stats_recovery() r;

-- A store whose chunk idem_store_purge skipped (NULL) is left for the next
-- purge; the others go on. Every property restated (a replacement keeps
-- none it does not name).
CREATE OR REPLACE FUNCTION @extschema@.idem_purge(batch_size integer DEFAULT 10000, max_batches integer DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    total bigint := 0;
    batches integer := 0;
    n bigint;
    store regclass;
    problem text;
BEGIN
    IF batch_size IS NULL OR batch_size < 1 THEN
        RAISE EXCEPTION 'invalid purge batch size'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('batch_size must be a positive integer, not %s.', coalesce(batch_size::text, 'NULL'));
    END IF;
    IF max_batches < 1 THEN
        RAISE EXCEPTION 'invalid purge batch count'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('max_batches must be a positive integer or NULL, not %s.', max_batches);
    END IF;
    -- The extension's table first, then every table a namespace is bound to
    -- (one that was dropped has nothing left to purge). Each chunk is deleted
    -- by idem_store_purge, as its table's owner, under the server's lease
    -- and each namespace's, in a subtransaction of its own: a store whose
    -- chunk fails or runs past idempotency.maintenance_timeout answers NULL
    -- (reported in a WARNING), and the others are still purged.
    FOR store IN
        SELECT NULL::regclass
        UNION ALL
        (SELECT DISTINCT c.store FROM @extschema@.idem_namespace_config c
         WHERE c.store IS NOT NULL AND EXISTS (SELECT FROM pg_class t WHERE t.oid = c.store) ORDER BY 1)
    LOOP
        -- A store that can no longer be used (its shape changed) is
        -- skipped, so that the others are still purged.
        problem := (SELECT p.problem FROM @extschema@.idem_store_problem(store) p);
        IF problem IS NOT NULL THEN
            RAISE WARNING 'idempotency: cannot purge %: %', store, problem;
            CONTINUE;
        END IF;
        LOOP
            n := @extschema@.idem_store_purge(store, batch_size);
            EXIT WHEN n IS NULL;
            total := total + n;
            IF n > 0 THEN
                batches := batches + 1;   -- max_batches counts the chunks that deleted something
            END IF;
            EXIT WHEN n < batch_size OR batches = max_batches;
        END LOOP;
        EXIT WHEN batches = max_batches;
    END LOOP;
    PERFORM @extschema@.idem_stats_count_purged(total);
    RETURN total;
END;
$$;

COMMENT ON FUNCTION @extschema@.idem_purge(integer, integer) IS
'Deletes expired records in chunks inside the current transaction; returns how many';

-- The new function gets the grants above and no more: what ALTER DEFAULT
-- PRIVILEGES of the installing role added is taken back (docs/security.md).
-- Revoking through the script keeps the initial privileges exact, with no
-- edit of a system catalog.
DO $defaults$
DECLARE
    x record;
BEGIN
    FOR x IN
        SELECT DISTINCT a.privilege_type, r.rolname
        FROM pg_catalog.pg_proc p
        CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) a
        JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
        WHERE p.oid = '@extschema@.idem_stats_stores_skipped()'::pg_catalog.regprocedure
          AND a.grantee <> p.proowner
    LOOP
        EXECUTE pg_catalog.format('REVOKE %s ON FUNCTION @extschema@.idem_stats_stores_skipped() FROM %I',
                                  x.privilege_type, x.rolname);
    END LOOP;
END;
$defaults$;
