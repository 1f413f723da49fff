-- script/begin.sql: the start of the portable edition's plain script. One
-- transaction: a script that fails leaves nothing behind. An installation
-- already there (or a schema of the same name) is refused; a later
-- release's update script updates it in place (docs/managed.md).
\set ON_ERROR_STOP 1
BEGIN;
DO $installed$
BEGIN
    IF pg_catalog.to_regclass('idempotency_internal.idem_script_version') IS NOT NULL THEN
        RAISE EXCEPTION 'the idempotency store is already installed in database %', pg_catalog.current_database()
            USING ERRCODE = 'duplicate_object',
                  DETAIL = pg_catalog.format('Release %s of the %s edition was installed by a plain script, by role %s, which owns it.',
                      (SELECT v.version FROM idempotency_internal.idem_script_version v),
                      (SELECT v.edition FROM idempotency_internal.idem_script_version v),
                      (SELECT c.relowner::pg_catalog.regrole FROM pg_catalog.pg_class c
                       WHERE c.oid = 'idempotency_internal.idem_script_version'::pg_catalog.regclass)),
                  HINT = 'Run the update script of the release you want (idempotency-portable-FROM-to-TO.sql).';
    END IF;
END;
$installed$;
CREATE SCHEMA idempotency;
-- What the script makes goes there, as CREATE EXTENSION places an extension's.
SET LOCAL search_path = idempotency;
