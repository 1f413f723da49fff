-- setup: installs the extension for the pg_regress tests that follow, the
-- way an existing user gets it: the first release, then ALTER EXTENSION
-- UPDATE through every upgrade script. Checks what it installed and where.
CREATE EXTENSION idempotency VERSION '0.1.0';
ALTER EXTENSION idempotency UPDATE;
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
