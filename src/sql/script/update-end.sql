-- script/update-end.sql: the end of a plain script's update: the version
-- table says the release it reached, then the transaction ends.
UPDATE idempotency_internal.idem_script_version SET version = '@version@', updated_at = pg_catalog.now();
COMMIT;
