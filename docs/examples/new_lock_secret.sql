-- new_lock_secret.sql: a new lock secret for the portable edition's plain
-- script, after pg_dump --exclude-table-data=idempotency_internal.idem_lock_secret
-- and pg_restore (docs/managed.md, "Dump, restore, and moving between editions"): the secret keys the
-- lock tags and the proofs of who calls, so a copy of it must not travel
-- with a dump. Run as the store's owner; it replaces any secret there.
BEGIN;
DELETE FROM idempotency_internal.idem_lock_secret;
INSERT INTO idempotency_internal.idem_lock_secret
SELECT pg_catalog.decode(pg_catalog.replace(pg_catalog.gen_random_uuid()::text OPERATOR(pg_catalog.||)
                                            pg_catalog.gen_random_uuid()::text, '-', ''), 'hex');
COMMIT;
