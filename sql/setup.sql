-- setup: installs the extension for the pg_regress tests that follow, the
-- way an existing user gets it: the first release, then ALTER EXTENSION
-- UPDATE through every upgrade script. Checks what it installed and where.
CREATE EXTENSION idempotency VERSION '0.1.0';
ALTER EXTENSION idempotency UPDATE TO '0.3.0';
-- A 0.3.0 deployment as its docs said: an application role with privileges
-- on the table, and a reading role. 0.4.0 moves the first to namespace
-- grants, and warns about the second.
CREATE ROLE regress_idem_app03;
CREATE ROLE regress_idem_reader03;
GRANT USAGE ON SCHEMA idempotency TO regress_idem_app03, regress_idem_reader03;
GRANT SELECT, INSERT, UPDATE, DELETE ON idempotency.idempotency_record TO regress_idem_app03;
GRANT SELECT ON idempotency.idempotency_record TO regress_idem_reader03;
SELECT kind FROM idempotency.idem_begin('legacy-a', 'k', '{}');
SELECT kind FROM idempotency.idem_begin('legacy-b', 'k', '{}');
ALTER EXTENSION idempotency UPDATE;
SELECT namespace, grantees FROM idempotency.idem_namespaces ORDER BY namespace;
SELECT r.rolname, has_table_privilege(r.oid, 'idempotency.idempotency_record', 'SELECT') AS table_access,
       has_function_privilege(r.oid, 'idempotency.idem_purge(integer, integer)', 'EXECUTE') AS may_purge
FROM pg_roles r WHERE r.rolname LIKE 'regress_idem_%03' ORDER BY 1;
SET ROLE regress_idem_app03;
SELECT kind FROM idempotency.idem_begin('legacy-a', 'k', '{}');
RESET ROLE;
-- pg_dump writes out what the update granted: no grant to an operator role
-- is left among the extension's initial privileges (0.4.1).
SELECT count(*) AS operator_roles_in_init_privs
FROM pg_init_privs i, aclexplode(i.initprivs) x
WHERE x.grantee IN ('regress_idem_app03'::regrole, 'regress_idem_reader03'::regrole);
DELETE FROM idempotency.idempotency_record;
SELECT idempotency.idem_namespace_drop(n) FROM unnest(ARRAY['legacy-a', 'legacy-b']) n;
DROP OWNED BY regress_idem_app03, regress_idem_reader03;
DROP ROLE regress_idem_app03, regress_idem_reader03;
SELECT extname, extversion, extnamespace::regnamespace AS schema,
       extconfig::regclass[] AS dumped_tables
FROM pg_extension WHERE extname = 'idempotency';
-- Every function, with its volatility, strictness and parallel safety.
SELECT p.oid::regprocedure AS function, p.provolatile AS volatile,
       p.proisstrict AS strict, p.proparallel AS parallel
FROM pg_proc p
WHERE p.pronamespace = 'idempotency'::regnamespace
ORDER BY p.oid::regprocedure::text;
-- The table: no privileges for PUBLIC; applications use the functions.
SELECT relname, relacl IS NULL OR NOT aclcontains(relacl, makeaclitem(0, relowner, 'SELECT', false)) AS public_cannot_read
FROM pg_class WHERE oid = 'idempotency.idempotency_record'::regclass;
-- Later test files in this database find the functions without qualification.
ALTER DATABASE :"DBNAME" SET search_path = idempotency, public;
