-- squat: the extension's schema must be its installer's own. A role allowed
-- to create schemas in the database could otherwise create "idempotency"
-- first, let CREATE EXTENSION fill it, and later drop the store with DROP
-- SCHEMA ... CASCADE (as the owner of the schema, it may). CREATE EXTENSION
-- refuses a schema another role owns (but a superuser), or one that is not
-- empty; an existing installation in such a schema is reported when it is
-- updated.
\set SHOW_CONTEXT never
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idempotency;
DROP SCHEMA IF EXISTS idempotency;
RESET client_min_messages;
CREATE ROLE regress_squatter;
GRANT CREATE ON DATABASE :"DBNAME" TO regress_squatter;
SET ROLE regress_squatter;
CREATE SCHEMA idempotency;
RESET ROLE;
CREATE EXTENSION idempotency;
\echo :LAST_ERROR_SQLSTATE
-- The same schema, handed to the installer but not empty.
ALTER SCHEMA idempotency OWNER TO CURRENT_USER;
CREATE TABLE idempotency.left_behind (id integer);
CREATE EXTENSION idempotency;
\echo :LAST_ERROR_SQLSTATE
DROP TABLE idempotency.left_behind;
SELECT count(*) AS extensions FROM pg_extension WHERE extname = 'idempotency';
-- What the check is for: 0.4.1's scripts (reached here through the update
-- path, which has no check) install into the squatter's schema, and the
-- squatter drops the store.
ALTER SCHEMA idempotency OWNER TO regress_squatter;
CREATE EXTENSION idempotency VERSION '0.4.1';
SET ROLE regress_squatter;
SET client_min_messages = warning;
DROP SCHEMA idempotency CASCADE;
RESET client_min_messages;
RESET ROLE;
SELECT count(*) AS extensions FROM pg_extension WHERE extname = 'idempotency';
-- An installation made that way is reported when it is updated.
SET ROLE regress_squatter;
CREATE SCHEMA idempotency;
RESET ROLE;
CREATE EXTENSION idempotency VERSION '0.4.1';
ALTER EXTENSION idempotency UPDATE;
SET client_min_messages = warning;
DROP EXTENSION idempotency;
DROP SCHEMA idempotency;
RESET client_min_messages;
REVOKE CREATE ON DATABASE :"DBNAME" FROM regress_squatter;
DROP ROLE regress_squatter;
-- An empty schema of another superuser is no squat (a superuser can do
-- anything a schema's owner can): it is what a dump restored by another
-- superuser holds, since pg_dump creates the schema and gives it to its
-- owner before CREATE EXTENSION.
CREATE ROLE regress_other_superuser SUPERUSER;
CREATE SCHEMA idempotency;
ALTER SCHEMA idempotency OWNER TO regress_other_superuser;
CREATE EXTENSION idempotency WITH SCHEMA idempotency;
SELECT extversion FROM pg_extension WHERE extname = 'idempotency';
SET client_min_messages = warning;
DROP EXTENSION idempotency;
DROP SCHEMA idempotency;
RESET client_min_messages;
DROP ROLE regress_other_superuser;
-- Where nothing stands in the way, CREATE EXTENSION creates the schema.
CREATE EXTENSION idempotency;
SELECT nspowner = (SELECT oid FROM pg_roles WHERE rolname = current_user) AS installer_owns_schema
FROM pg_namespace WHERE nspname = 'idempotency';
