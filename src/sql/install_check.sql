-- The schema must be the installer's own (or a superuser's, who could do
-- anything its owner can: pg_dump creates the schema and gives it to its
-- owner before CREATE EXTENSION, and another superuser may restore that)
-- and empty: a schema that another role created first would let that role
-- drop the store (DROP SCHEMA ... CASCADE), and objects already in it would
-- sit among the extension's. (CREATE EXTENSION creates the schema for the
-- installer when it is missing.)
DO $check$
DECLARE
    schema_owner regrole := (SELECT n.nspowner::regrole FROM pg_catalog.pg_namespace n
                             WHERE n.oid = '@extschema@'::pg_catalog.regnamespace);
    present text := (SELECT o.name FROM (
                         SELECT c.relname::text AS name FROM pg_catalog.pg_class c
                         WHERE c.relnamespace = '@extschema@'::pg_catalog.regnamespace
                         UNION ALL
                         SELECT p.proname::text FROM pg_catalog.pg_proc p
                         WHERE p.pronamespace = '@extschema@'::pg_catalog.regnamespace
                         UNION ALL
                         SELECT t.typname::text FROM pg_catalog.pg_type t
                         WHERE t.typnamespace = '@extschema@'::pg_catalog.regnamespace
                           AND t.typrelid = 0 AND t.typelem = 0) o
                     LIMIT 1);
BEGIN
    IF schema_owner OPERATOR(pg_catalog.<>) current_user::regrole
       AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) schema_owner) THEN
        RAISE EXCEPTION 'schema "@extschema@" is owned by role %, not by %', schema_owner, current_user
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'Its owner could drop the extension''s objects (DROP SCHEMA ... CASCADE) or change their privileges.',
                  HINT = 'Drop or rename that schema, or have its owner hand it over (ALTER SCHEMA ... OWNER TO), then run CREATE EXTENSION again.';
    END IF;
    IF present IS NOT NULL THEN
        RAISE EXCEPTION 'schema "@extschema@" is not empty'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = pg_catalog.format('It already holds "%s" (and maybe more); the extension needs a schema of its own.', present),
                  HINT = 'Drop or rename that schema, then run CREATE EXTENSION again.';
    END IF;
END;
$check$;
