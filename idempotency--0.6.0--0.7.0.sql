/* idempotency--0.6.0--0.7.0.sql: release 0.7.0: a fresh attempt in a
   namespace without a lease writes its record once (the library: the claim is
   the key's lock, held to the transaction's end; nothing here changes the
   table), a replay answered without locks, the direct purge; and what
   operators need to see claims that no row shows: idem_key_state, the per-key
   locks held now in idem_stats, and in idem_namespace_stats how long the
   oldest expired record has waited for purge; idem_purge_batches pauses
   after each chunk for idempotency.purge_pause. */

\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.7.0'" to load this file. \quit

-- Statistics -----------------------------------------------------------------

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
       ) AS held_key_locks
FROM @extschema@.idem_stats_counters() c;

COMMENT ON VIEW idem_stats IS
'Cumulative counters (counters_on false unless preloaded), the size of the store, the per-key locks held now';

-- idem_namespace_stats gains oldest_expired_age, so its function's result
-- changes: both are made again. SELECT on the view that an operator granted
-- is noted here and given back below (not as the extension's own initial
-- privileges, which pg_dump leaves out).
SELECT pg_catalog.set_config('idem_update.namespace_stats_acl',
                             coalesce((SELECT c.relacl::text FROM pg_catalog.pg_class c
                                       WHERE c.oid = '@extschema@.idem_namespace_stats'::pg_catalog.regclass), ''),
                             true);
DROP VIEW idem_namespace_stats;
DROP FUNCTION idem_namespace_stats_rows();

-- One row per namespace and store, counted from each table (full scans: for
-- an operator or a monitoring job once a minute, not for every request). An
-- in_progress row is visible here only once the transaction that began it
-- has committed without finishing it: an abandoned or long-running
-- operation. Reads the stores namespaces are bound to as the extension's
-- owner (a read runs no trigger).
CREATE FUNCTION idem_namespace_stats_rows(
    OUT namespace text, OUT in_progress bigint, OUT committed bigint, OUT failed bigint,
    OUT oldest_in_progress_age interval, OUT expired bigint, OUT oldest_expired_age interval,
    OUT row_bytes bigint, OUT store regclass)
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
        problem := (SELECT p.problem FROM @extschema@.idem_store_problem(t) p);
        IF problem IS NOT NULL THEN
            RAISE WARNING 'idempotency: cannot read %: %', t, problem;
            CONTINUE;
        END IF;
        figures := @extschema@.idem_store_stats(t);   -- read as the store's owner
        RETURN QUERY
            SELECT s.namespace, s.in_progress, s.committed, s.failed, s.oldest_in_progress_age, s.expired,
                   s.oldest_expired_age, s.row_bytes, t
            FROM jsonb_to_recordset(figures) AS s(namespace text, in_progress bigint, committed bigint, failed bigint,
                                                  oldest_in_progress_age interval, expired bigint,
                                                  oldest_expired_age interval, row_bytes bigint);
    END LOOP;
END;
$$;

REVOKE ALL ON FUNCTION idem_namespace_stats_rows() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_namespace_stats_rows() TO pg_monitor;

CREATE VIEW idem_namespace_stats AS
SELECT namespace COLLATE "C" AS namespace, in_progress, committed, failed, oldest_in_progress_age, expired,
       oldest_expired_age, row_bytes, store
FROM @extschema@.idem_namespace_stats_rows();

COMMENT ON VIEW idem_namespace_stats IS
'Rows per namespace by status, the oldest committed in_progress row, expired rows not yet purged and how long the oldest has waited, bytes';

REVOKE ALL ON idem_namespace_stats FROM PUBLIC;
GRANT SELECT ON idem_namespace_stats TO pg_monitor;

DO $restore$
DECLARE
    installed pg_catalog.aclitem[] := (SELECT c.relacl FROM pg_catalog.pg_class c
                                       WHERE c.oid = '@extschema@.idem_namespace_stats'::pg_catalog.regclass);
    x record;
BEGIN
    IF coalesce(pg_catalog.current_setting('idem_update.namespace_stats_acl', true), '') = '' THEN
        RETURN;
    END IF;
    FOR x IN SELECT a.grantee, a.privilege_type, a.is_grantable
             FROM pg_catalog.aclexplode(pg_catalog.current_setting('idem_update.namespace_stats_acl')::pg_catalog.aclitem[]) a
             WHERE (a.grantee, a.privilege_type) NOT IN (SELECT i.grantee, i.privilege_type
                                                         FROM pg_catalog.aclexplode(installed) i)
    LOOP
        EXECUTE pg_catalog.format('GRANT %s ON @extschema@.idem_namespace_stats TO %s%s', x.privilege_type,
                                  CASE WHEN x.grantee = 0 THEN 'PUBLIC'
                                       ELSE pg_catalog.quote_ident((SELECT r.rolname FROM pg_catalog.pg_roles r
                                                                    WHERE r.oid = x.grantee)) END,
                                  CASE WHEN x.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
    -- A GRANT in an extension's script is recorded as its initial privilege:
    -- the view's are the script's own, as a new installation has them.
    UPDATE pg_catalog.pg_init_privs i SET initprivs = installed
    WHERE i.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass
      AND i.objoid = '@extschema@.idem_namespace_stats'::pg_catalog.regclass AND i.objsubid = 0;
END;
$restore$;

-- Purging ---------------------------------------------------------------------

-- The same, committing after every chunk, for pg_cron and operators purging
-- millions of rows: no lock or snapshot is held longer than one chunk, and
-- idempotency.purge_pause spaces the chunks out so that requests running
-- meanwhile keep the cores and the WAL. CALL it outside an explicit
-- transaction block. A procedure that commits
-- cannot pin search_path with SET, so its operators are schema-qualified.
CREATE OR REPLACE PROCEDURE idem_purge_batches(batch_size integer DEFAULT 10000)
LANGUAGE plpgsql
AS $$
DECLARE
    n bigint;
    batches integer := 0;
    total bigint := 0;
    pause text;
BEGIN
    LOOP
        n := @extschema@.idem_purge(batch_size, 1);
        COMMIT;
        EXIT WHEN n OPERATOR(pg_catalog.=) 0;   -- every store is purged (one chunk may end a store, not all)
        total := total OPERATOR(pg_catalog.+) n;
        batches := batches OPERATOR(pg_catalog.+) 1;
        -- idempotency.purge_pause (read after the chunk: the library that
        -- defines it is loaded by then), e.g. '10ms'.
        pause := pg_catalog.current_setting('idempotency.purge_pause', true);
        IF pause OPERATOR(pg_catalog.<>) '0' THEN
            PERFORM pg_catalog.pg_sleep(pg_catalog.date_part('epoch', pause::pg_catalog.interval));
        END IF;
    END LOOP;
    RAISE NOTICE 'idempotency: purged % expired records in % batches', total, batches;
END;
$$;

-- Operators -------------------------------------------------------------------

-- What an operator sees of one key: its record, or a claim a transaction
-- holds by the key's lock alone (a namespace without a lease), which no
-- row shows. state: absent, held (by the lock, no row), in_flight (a
-- transaction is writing its row), in_progress (a row: a claim under a
-- lease, or abandoned), committed or failed; holder_pid: the backend of a
-- held or in_flight key (NULL for a prepared transaction). Reads the
-- server's lock table: for an operator, not for every request. It names
-- the backends working on a key, so only the extension's owner may run it
-- (and grant it).
CREATE FUNCTION idem_key_state(namespace text, key text,
    OUT state text, OUT holder_pid integer, OUT attempt integer, OUT claimed_at timestamptz,
    OUT expires_at timestamptz, OUT request_hash bytea)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_key_state'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_key_state(text, text) IS
'One key''s state (absent, held, in_flight, in_progress, committed, failed) and the backend holding it';

REVOKE ALL ON FUNCTION idem_key_state(text, text) FROM PUBLIC;
