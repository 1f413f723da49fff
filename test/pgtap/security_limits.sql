-- security_limits: what docs/security.md says the extension does not
-- protect, and where its controls stop, each shown as it is. Granting
-- EXECUTE on an administration function gives nothing (they run with the
-- caller's privileges and fail closed), except on idem_purge; the lock
-- secret is the owner's; members of pg_read_all_data and pg_write_all_data
-- (PostgreSQL 14 and later) read and write the table; the table's size and
-- write counts are public through PostgreSQL's statistics views.
BEGIN;
SELECT plan(10);

CREATE ROLE regress_tap_admin_ish;
CREATE ROLE regress_tap_nobody;
GRANT USAGE ON SCHEMA idempotency TO regress_tap_admin_ish, regress_tap_nobody;
GRANT EXECUTE ON FUNCTION idempotency.idem_namespace_configure(text, interval, interval, boolean, boolean, integer),
                          idempotency.idem_grant(text, regrole), idempotency.idem_purge(integer, integer)
    TO regress_tap_admin_ish;
SELECT idempotency.idem_namespace_configure('limits');

SET ROLE regress_tap_admin_ish;
SELECT throws_ok($$SELECT idempotency.idem_namespace_configure('limits', hash_keys => true)$$, '42501', NULL,
                 'EXECUTE on idem_namespace_configure alone changes nothing: it fails closed');
SELECT throws_ok($$SELECT idempotency.idem_grant('limits', 'regress_tap_nobody')$$, '42501', NULL,
                 'EXECUTE on idem_grant alone grants nothing');
SELECT lives_ok($$SELECT idempotency.idem_purge()$$, 'EXECUTE on idem_purge (SECURITY DEFINER) lets a role purge');
RESET ROLE;
SELECT is((SELECT hash_keys FROM idempotency.idem_namespaces WHERE namespace = 'limits'), false,
          '  and the namespace is as it was');

SET ROLE regress_tap_nobody;
SELECT throws_ok($$SELECT secret FROM idempotency_internal.idem_lock_secret$$, '42501', NULL,
                 'the lock secret is the owner''s');
SELECT throws_ok($$SELECT count(*) FROM idempotency.idempotency_record$$, '42501', NULL,
                 'a role with no grant cannot read the table');
-- PostgreSQL's statistics are public: any role sees how large the store is
-- and how many rows were written.
SELECT ok((SELECT n_tup_ins IS NOT NULL FROM pg_stat_user_tables
           WHERE relid = 'idempotency.idempotency_record'::regclass),
          'but any role reads the table''s write counts in pg_stat_user_tables');
SELECT ok(pg_total_relation_size('idempotency.idempotency_record') > 0, '  and its size');
RESET ROLE;

-- pg_read_all_data and pg_write_all_data bypass every privilege, the
-- store's included (they exist from PostgreSQL 14).
SELECT current_setting('server_version_num')::int >= 140000 AS has_data_roles \gset
\if :has_data_roles
CREATE ROLE regress_tap_reader IN ROLE pg_read_all_data;
CREATE ROLE regress_tap_writer IN ROLE pg_write_all_data;
SET ROLE regress_tap_reader;
SELECT lives_ok($$SELECT count(*) FROM idempotency.idempotency_record$$,
                'a member of pg_read_all_data reads every namespace''s records');
RESET ROLE;
SET ROLE regress_tap_writer;
SELECT lives_ok($$DELETE FROM idempotency.idempotency_record WHERE false$$,
                'a member of pg_write_all_data may write the table');
RESET ROLE;
\else
SELECT pass('pg_read_all_data does not exist before PostgreSQL 14');
SELECT pass('pg_write_all_data does not exist before PostgreSQL 14');
\endif

SELECT * FROM finish();
ROLLBACK;
