-- default_privileges: a role that ALTER DEFAULT PRIVILEGES named when the
-- extension was created can be dropped later. From PostgreSQL 17 the roles
-- of initial privileges are recorded in pg_shdepend too; the install
-- script's edit of pg_init_privs (docs/internals.md) left those records
-- behind, and DROP ROLE failed ("initial privileges ... depend on it").
SELECT current_database() AS regress_db \gset
CREATE ROLE regress_idem_default;
CREATE DATABASE regress_idem_defaults;
\c regress_idem_defaults
ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO regress_idem_default;
ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO regress_idem_default;
SET client_min_messages = warning;
CREATE EXTENSION idempotency;
RESET client_min_messages;
-- The extension's initial privileges name only its owner, PUBLIC and pg_monitor.
SELECT count(*) AS initial_privileges_of_the_role
FROM pg_init_privs i, aclexplode(i.initprivs) x WHERE x.grantee = 'regress_idem_default'::regrole;
ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM regress_idem_default;
ALTER DEFAULT PRIVILEGES REVOKE SELECT ON TABLES FROM regress_idem_default;
DROP OWNED BY regress_idem_default;
DROP ROLE regress_idem_default;
\c :regress_db
DROP DATABASE regress_idem_defaults;
