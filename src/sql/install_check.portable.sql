-- install_check.portable.sql: in the pg_tle extension's script only. Once
-- pgtle.install_extension has registered the extension in a database, any
-- role with CREATE there may run CREATE EXTENSION idempotency, and would
-- own the store: its functions read every namespace's records as that
-- role. The role that creates it must be one pg_tle trusts to install
-- extensions (a member of pgtle_admin), as the native edition needs a
-- superuser.
DO $check$
BEGIN
    IF pg_catalog.to_regrole('pgtle_admin') IS NOT NULL
       AND NOT pg_catalog.pg_has_role(current_user, 'pgtle_admin', 'MEMBER') THEN
        RAISE EXCEPTION 'permission denied to create extension "idempotency"'
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'The role that creates it owns the store and reads every namespace''s records; it must be a member of pgtle_admin.',
                  HINT = 'Create it as the role that installed it with pgtle.install_extension, or grant pgtle_admin to the role that is to own it.';
    END IF;
END;
$check$;
