/* idempotency--0.6.0--0.7.0.sql: release 0.7.0. The library writes less:
   a fresh attempt in a namespace without a lease writes its record once (the
   claim is the key's lock, held to the transaction's end), a replay takes no
   lock, the purge deletes in expires_at order without the executor; nothing
   here changes the table. Operators get what they need to see claims that no
   row shows: idem_key_state, held_key_locks in idem_stats, and
   oldest_expired_age in idem_namespace_stats (how far purge lags); an
   operator's release of a key (idem_release_key, counted in idem_stats);
   a holder's heartbeat for a claim under a lease (idem_extend_lease);
   idem_purge_batches pauses after each chunk for idempotency.purge_pause.
   idem_begin keeps its entry point: a session still running the 0.6.0
   library goes on working (test/t/013_mixed_libraries.pl). */

\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.7.0'" to load this file. \quit

-- Statistics -----------------------------------------------------------------

-- How many keys idem_release_key released (NULL unless preloaded).
CREATE FUNCTION idem_stats_released_keys()
RETURNS bigint
AS 'MODULE_PATHNAME', 'idem_stats_released_keys'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idem_stats_released_keys() IS
'Cumulative count of keys idem_release_key released (NULL unless preloaded)';

REVOKE ALL ON FUNCTION idem_stats_released_keys() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_stats_released_keys() TO pg_monitor;

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
       @extschema@.idem_stats_released_keys() AS released_keys
FROM @extschema@.idem_stats_counters() c;

COMMENT ON VIEW idem_stats IS
'Cumulative counters (counters_on false unless preloaded), the size of the store, the per-key locks held now, keys released';

-- A store's figures gain oldest_expired_age: a new entry point, so that a
-- session still running an older library is refused (42883) instead of
-- showing it as NULL, which would read as nothing expired.
CREATE OR REPLACE FUNCTION idem_store_stats(store regclass)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'idem_store_stats_0_7'
LANGUAGE C STABLE PARALLEL UNSAFE;

-- idem_namespace_stats gains oldest_expired_age at its end, from a new
-- function; the view is replaced in place, so what was granted on it stays.
-- One row per namespace and store, counted from each table (full scans: for
-- an operator or a monitoring job once a minute, not for every request). An
-- in_progress row is visible here only once the transaction that began it
-- has committed without finishing it: an abandoned or long-running
-- operation. Reads the stores namespaces are bound to as the extension's
-- owner (a read runs no trigger).
CREATE FUNCTION idem_namespace_stats_figures(
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
        problem := (SELECT p.problem FROM @extschema@.idem_store_problem(t) p);
        IF problem IS NOT NULL THEN
            RAISE WARNING 'idempotency: cannot read %: %', t, problem;
            CONTINUE;
        END IF;
        figures := @extschema@.idem_store_stats(t);   -- read as the store's owner
        RETURN QUERY
            SELECT s.namespace, s.in_progress, s.committed, s.failed, s.oldest_in_progress_age, s.expired,
                   s.row_bytes, t, s.oldest_expired_age
            FROM jsonb_to_recordset(figures) AS s(namespace text, in_progress bigint, committed bigint, failed bigint,
                                                  oldest_in_progress_age interval, expired bigint, row_bytes bigint,
                                                  oldest_expired_age interval);
    END LOOP;
END;
$$;

REVOKE ALL ON FUNCTION idem_namespace_stats_figures() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_namespace_stats_figures() TO pg_monitor;

CREATE OR REPLACE VIEW idem_namespace_stats AS
SELECT namespace COLLATE "C" AS namespace, in_progress, committed, failed, oldest_in_progress_age, expired,
       row_bytes, store, oldest_expired_age
FROM @extschema@.idem_namespace_stats_figures();

COMMENT ON VIEW idem_namespace_stats IS
'Rows per namespace by status, the oldest committed in_progress row, expired rows not yet purged and how long the oldest has waited, bytes';

DROP FUNCTION idem_namespace_stats_rows();

-- Purging ---------------------------------------------------------------------

-- The same, committing after every chunk, for pg_cron and operators purging
-- millions of rows: no lock is held longer than one chunk, nor a snapshot
-- longer than a chunk or a pause, and idempotency.purge_pause (at most 10 s)
-- spaces the chunks out so that requests running meanwhile keep the cores
-- and the WAL. CALL it outside an explicit transaction block. A procedure that commits
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

-- An operator's release of one key: its record is deleted, so that the next
-- begin of the key answers fresh (a result a bug recorded), without waiting
-- for purge or writing to the table. Returns the status the record had
-- (NULL: the key had none). Refused (55006) while a transaction holds the
-- key (a claim held by its lock, a row being written, this transaction's
-- own claim) or while an in_progress record's lease runs; counted in
-- idem_stats.released_keys and logged with the roles that did it. Only the
-- extension's owner may run it (and grant it); the caller must also be
-- granted the namespace.
CREATE FUNCTION idem_release_key(namespace text, key text)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_release_key'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_release_key(text, text) IS
'Deletes one key''s record (refused while a transaction or a lease holds it); returns the status it had';

REVOKE ALL ON FUNCTION idem_release_key(text, text) FROM PUBLIC;

-- A holder's heartbeat: the lease of its claim (a namespace with an
-- in_progress_lease) runs again from now, so that a long operation is not
-- taken over while it still works. Fenced as the transitions are; returns
-- the new end of the lease.
CREATE FUNCTION idem_extend_lease(namespace text, key text, fence bigint)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'idem_extend_lease'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_extend_lease(text, text, bigint) IS
'A heartbeat of a claim under a lease: its lease runs again from now (fenced); returns the new end';

-- Privileges ------------------------------------------------------------------

-- The objects this update makes get the grants the script gives them (the
-- owner's, PUBLIC's, and pg_monitor's on the views and the functions behind
-- them) and no more. ALTER DEFAULT PRIVILEGES of the installing role (EXECUTE on its
-- functions, SELECT on its tables, for an application role or for
-- pg_monitor, say) would add others, and
-- that role could then read every namespace's records and the lock secret,
-- run what only the owner may (idem_key_state, idem_release_key, the
-- purge): they are taken back here, privilege by privilege
-- (docs/security.md).
DO $defaults$
DECLARE
    x record;
BEGIN
    FOR x IN
        SELECT DISTINCT o.kind, o.name, a.privilege_type, r.rolname
        FROM pg_catalog.pg_depend d
        CROSS JOIN LATERAL (
            SELECT 'ROUTINE' AS kind, p.oid::pg_catalog.regprocedure::text AS name, p.proowner AS owner, p.proacl AS acl
            FROM pg_catalog.pg_proc p
            WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND p.oid = d.objid
            UNION ALL
            SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, c.oid::pg_catalog.regclass::text,
                   c.relowner, c.relacl
            FROM pg_catalog.pg_class c
            WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND c.oid = d.objid
            UNION ALL
            SELECT 'TYPE', t.oid::pg_catalog.regtype::text, t.typowner, t.typacl
            FROM pg_catalog.pg_type t
            WHERE d.classid = 'pg_catalog.pg_type'::pg_catalog.regclass AND t.oid = d.objid
            ) o
        CROSS JOIN LATERAL pg_catalog.aclexplode(o.acl) a
        JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
        WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'
          AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'idempotency')
          AND a.grantee <> o.owner
          -- pg_monitor keeps what this script grants it
          AND NOT (a.grantee = 'pg_monitor'::pg_catalog.regrole
                   AND ((a.privilege_type = 'SELECT'
                         AND d.objid IN ('@extschema@.idem_stats'::pg_catalog.regclass,
                                         '@extschema@.idem_namespace_stats'::pg_catalog.regclass,
                                         '@extschema@.idem_namespaces'::pg_catalog.regclass))
                        OR (a.privilege_type = 'EXECUTE'
                            AND d.objid IN ('@extschema@.idem_stats_counters()'::pg_catalog.regprocedure,
                                            '@extschema@.idem_stats_released_keys()'::pg_catalog.regprocedure,
                                            '@extschema@.idem_namespace_stats_figures()'::pg_catalog.regprocedure))))
          AND d.objid IN ('@extschema@.idem_key_state(text,text)'::pg_catalog.regprocedure,
                          '@extschema@.idem_release_key(text,text)'::pg_catalog.regprocedure,
                          '@extschema@.idem_extend_lease(text,text,bigint)'::pg_catalog.regprocedure,
                          '@extschema@.idem_stats_released_keys()'::pg_catalog.regprocedure,
                          '@extschema@.idem_namespace_stats_figures()'::pg_catalog.regprocedure)
    LOOP
        EXECUTE pg_catalog.format('REVOKE %s ON %s %s FROM %I', x.privilege_type, x.kind, x.name, x.rolname);
    END LOOP;
END;
$defaults$;

-- What this script granted or revoked stays out of pg_init_privs but for
-- the owner's, PUBLIC's and pg_monitor's entries (docs/internals.md).
UPDATE pg_catalog.pg_init_privs i
SET initprivs = ARRAY(
    SELECT item FROM pg_catalog.unnest(i.initprivs) item
    WHERE (SELECT x.grantee = x.grantor OR x.grantee = 0 OR x.grantee = 'pg_monitor'::pg_catalog.regrole
           FROM pg_catalog.aclexplode(ARRAY[item]) x LIMIT 1))
WHERE i.privtype = 'e'
  AND ((i.classoid = 'pg_catalog.pg_namespace'::pg_catalog.regclass AND i.objoid = '@extschema@'::pg_catalog.regnamespace)
       OR (i.classoid, i.objoid) IN (
           SELECT d.classid, d.objid FROM pg_catalog.pg_depend d
           WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'
             AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'idempotency')));

-- From PostgreSQL 17 the roles named in pg_init_privs are recorded in
-- pg_shdepend too, and editing pg_init_privs (above) leaves those records
-- behind: a role that ALTER DEFAULT PRIVILEGES named when the extension was
-- created could not be dropped ("initial privileges for ... depend on it").
-- Remove the records of the extension's objects that name a role no longer
-- in their initial privileges (none before 17).
DELETE FROM pg_catalog.pg_shdepend d
WHERE d.deptype = 'i'
  AND d.dbid = (SELECT db.oid FROM pg_catalog.pg_database db WHERE db.datname = pg_catalog.current_database())
  AND ((d.classid = 'pg_catalog.pg_namespace'::pg_catalog.regclass AND d.objid = '@extschema@'::pg_catalog.regnamespace)
       OR (d.classid, d.objid) IN (
           SELECT dep.classid, dep.objid FROM pg_catalog.pg_depend dep
           WHERE dep.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND dep.deptype = 'e'
             AND dep.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'idempotency')))
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_init_privs i, pg_catalog.aclexplode(i.initprivs) x
                  WHERE i.classoid = d.classid AND i.objoid = d.objid AND i.objsubid = d.objsubid
                    AND d.refobjid IN (x.grantee, x.grantor));
