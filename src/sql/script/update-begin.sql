-- script/update-begin.sql: the start of a plain script that updates the
-- portable edition in place (idempotency-portable-FROM-to-TO.sql). One
-- transaction; it runs only over the release it updates from, as the role
-- that installed it, and refuses anything else.
\set ON_ERROR_STOP 1
BEGIN;
DO $installed$
DECLARE
    found text;
BEGIN
    IF pg_catalog.to_regclass('idempotency_internal.idem_script_version') IS NULL THEN
        RAISE EXCEPTION 'the idempotency store is not installed by a plain script in database %', pg_catalog.current_database()
            USING ERRCODE = 'undefined_object',
                  HINT = 'Install it with idempotency-portable-@version@.sql; an extension updates with ALTER EXTENSION idempotency UPDATE.';
    END IF;
    LOCK TABLE idempotency_internal.idem_script_version IN EXCLUSIVE MODE;   -- one update at a time
    SELECT v.version INTO found FROM idempotency_internal.idem_script_version v;
    IF found IS DISTINCT FROM '@from@' THEN
        RAISE EXCEPTION 'this script updates the idempotency store from release @from@, not %', found
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = pg_catalog.format('Run the update scripts from %s to @version@ in order.', found);
    END IF;
END;
$installed$;
SET LOCAL search_path = idempotency;
