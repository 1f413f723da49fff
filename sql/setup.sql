-- setup: installs the extension for the pg_regress tests that follow, and
-- checks what it installed and where.
CREATE EXTENSION idempotency;
SELECT extname, extversion, extnamespace::regnamespace AS schema
FROM pg_extension WHERE extname = 'idempotency';
-- Every function, with its volatility, strictness and parallel safety.
SELECT p.oid::regprocedure AS function, p.provolatile AS volatile,
       p.proisstrict AS strict, p.proparallel AS parallel
FROM pg_proc p
WHERE p.pronamespace = 'idempotency'::regnamespace
ORDER BY 1::text;
-- Later test files in this database find the functions without qualification.
ALTER DATABASE :"DBNAME" SET search_path = idempotency, public;
