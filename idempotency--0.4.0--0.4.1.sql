/* idempotency--0.4.0--0.4.1.sql: release 0.4.1 makes pg_dump keep the
   privileges that earlier updates granted to, or found held by, operator
   roles. */

\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.4.1'" to load this file. \quit

-- PostgreSQL records the whole privilege list of any object an extension
-- script grants or revokes on as that object's initial privileges
-- (pg_init_privs), and pg_dump writes only what differs from them. The
-- 0.2.0 -> 0.3.0 update granted on the schema, so it swallowed any USAGE an
-- operator had granted before; the 0.3.0 -> 0.4.0 update granted USAGE and
-- EXECUTE on the purge functions to the roles it migrated. A dump then left
-- those roles without them, and they failed with "permission denied for
-- schema idempotency" after a restore.
--
-- Here every initial privilege list of the schema and of the extension's
-- members keeps only what the scripts themselves mean: the owner's own
-- entries, PUBLIC's and pg_monitor's. Every other entry is an operator's
-- grant, which pg_dump will now write out. Nothing changes who can do what.
-- (Any later script that grants or revokes ends with this same statement.)
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
