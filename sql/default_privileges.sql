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
-- pg_monitor and the schema too: a monitoring role must not get the records,
-- the lock secret or the owner's functions, nor anyone CREATE on the schema.
ALTER DEFAULT PRIVILEGES GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO pg_monitor;
ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO pg_monitor;
ALTER DEFAULT PRIVILEGES GRANT USAGE, CREATE ON SCHEMAS TO regress_idem_default;
SET client_min_messages = warning;
CREATE EXTENSION idempotency;
RESET client_min_messages;
-- What a role may do on the extension's objects (the function's privileges
-- and the table's and views').
CREATE FUNCTION pg_temp.granted_to(role regrole) RETURNS TABLE (object text, privilege text) LANGUAGE sql AS $$
    SELECT pg_describe_object(d.classid, d.objid, 0), a.privilege_type
    FROM pg_depend d
    CROSS JOIN LATERAL (SELECT proacl AS acl FROM pg_proc WHERE d.classid = 'pg_proc'::regclass AND oid = d.objid
                        UNION ALL
                        SELECT relacl FROM pg_class WHERE d.classid = 'pg_class'::regclass AND oid = d.objid) o
    CROSS JOIN LATERAL aclexplode(o.acl) a
    WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
      AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idempotency')
      AND a.grantee = role
    ORDER BY 1, 2 $$;
-- What pg_monitor may, and the schema's privileges: as without the defaults.
SELECT * FROM pg_temp.granted_to('pg_monitor');
SELECT a.grantee::regrole AS schema_grantee, a.privilege_type
FROM pg_namespace n, aclexplode(n.nspacl) a
WHERE n.nspname = 'idempotency' AND a.grantee <> n.nspowner ORDER BY 1, 2;
-- The extension's initial privileges name only its owner, PUBLIC and pg_monitor.
SELECT count(*) AS initial_privileges_of_the_role
FROM pg_init_privs i, aclexplode(i.initprivs) x WHERE x.grantee = 'regress_idem_default'::regrole;
-- Nor do its objects' privileges: the role the defaults name can neither
-- read the records nor run what only the owner may (0.6.0 gave it SELECT on
-- idempotency_record and EXECUTE on idem_lock_secret, idem_purge, ...).
SELECT * FROM pg_temp.granted_to('regress_idem_default');
SELECT has_table_privilege('regress_idem_default', 'idempotency.idempotency_record', 'SELECT') AS reads_records,
       has_function_privilege('regress_idem_default', 'idempotency.idem_key_state(text,text)', 'EXECUTE') AS key_state;
-- A schema made beforehand, CREATE in it granted down a chain: taken back
-- from all but its owner (CASCADE), each named in a WARNING.
SET client_min_messages = error;
DROP EXTENSION idempotency;
RESET client_min_messages;
GRANT CREATE ON SCHEMA idempotency TO regress_idem_default WITH GRANT OPTION;
SET ROLE regress_idem_default;
GRANT CREATE ON SCHEMA idempotency TO PUBLIC;
RESET ROLE;
CREATE EXTENSION idempotency;
SELECT a.grantee::regrole AS schema_grantee, a.privilege_type
FROM pg_namespace n, aclexplode(n.nspacl) a
WHERE n.nspname = 'idempotency' AND a.grantee <> n.nspowner ORDER BY 1, 2;
-- An update under the same defaults gives its new objects nothing either
-- (idem_key_state, the figures behind idem_namespace_stats).
-- (0.4.0's update warns, on some majors, that the role the defaults name
-- reads the records: what this test then takes back.)
SET client_min_messages = error;
DROP EXTENSION idempotency;
CREATE EXTENSION idempotency VERSION '0.6.0';
RESET client_min_messages;
REVOKE ALL ON idempotency.idempotency_record FROM regress_idem_default;
REVOKE ALL ON ALL ROUTINES IN SCHEMA idempotency FROM regress_idem_default;
REVOKE ALL ON ALL TABLES IN SCHEMA idempotency FROM regress_idem_default;
ALTER EXTENSION idempotency UPDATE;
SELECT * FROM pg_temp.granted_to('regress_idem_default');
SELECT count(*) AS initial_privileges_of_the_role
FROM pg_init_privs i, aclexplode(i.initprivs) x WHERE x.grantee = 'regress_idem_default'::regrole;
ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM regress_idem_default;
ALTER DEFAULT PRIVILEGES REVOKE SELECT ON TABLES FROM regress_idem_default;
ALTER DEFAULT PRIVILEGES REVOKE ALL ON TABLES FROM pg_monitor;
ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM pg_monitor;
ALTER DEFAULT PRIVILEGES REVOKE USAGE, CREATE ON SCHEMAS FROM regress_idem_default;
DROP OWNED BY regress_idem_default;
DROP ROLE regress_idem_default;
\c :regress_db
DROP DATABASE regress_idem_defaults;
