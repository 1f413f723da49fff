-- tenant_stores: one service's store cannot stop another's purge or hide
-- another's statistics. Two services each own a store; the hostile one
-- makes its own table fail in every way its owner can (a trigger that
-- raises, a deferred trigger, row security whose policy raises, its own
-- privileges revoked, a trigger that sleeps). Purge and the statistics
-- skip that store with a WARNING naming it and the SQLSTATE, undo only its
-- part, and go on with the others; a store that runs past
-- idempotency.maintenance_timeout is cancelled and skipped the same way.
-- A store whose shape its owner broke can still be unbound.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
RESET client_min_messages;
SET search_path = idempotency, public;
CREATE ROLE regress_idem_good;
CREATE ROLE regress_idem_evil;
CREATE SCHEMA good AUTHORIZATION regress_idem_good;
CREATE SCHEMA evil AUTHORIZATION regress_idem_evil;
GRANT USAGE ON SCHEMA idempotency TO regress_idem_good, regress_idem_evil;
SET ROLE regress_idem_good;
SELECT idem_create_store('good.store');
SET ROLE regress_idem_evil;
SELECT idem_create_store('evil.store');
RESET ROLE;
SELECT idem_bind_store('good-ns', 'good.store'), idem_bind_store('evil-ns', 'evil.store');
SELECT idem_grant('good-ns', 'regress_idem_good'), idem_grant('evil-ns', 'regress_idem_evil');

-- Expired records everywhere: 3 in the extension's table, 3 in each store.
CREATE SEQUENCE pg_temp.fills;
CREATE FUNCTION pg_temp.expired(ns text, round bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..3 LOOP
        PERFORM idem_begin(ns, round || '-' || i, '{}', replay_window => '1 millisecond');
        PERFORM idem_commit(ns, round || '-' || i, '{}');
    END LOOP;
END;
$$;
CREATE FUNCTION pg_temp.fill() RETURNS text LANGUAGE sql AS $$
    SELECT pg_temp.expired('own-ns', nextval('pg_temp.fills'));
    SET LOCAL ROLE regress_idem_good;
    SELECT pg_temp.expired('good-ns', currval('pg_temp.fills'));
    SET LOCAL ROLE regress_idem_evil;
    SELECT pg_temp.expired('evil-ns', currval('pg_temp.fills'));
    SELECT 'filled';
$$;
GRANT USAGE ON SEQUENCE pg_temp.fills TO PUBLIC;
CREATE FUNCTION pg_temp.left_over() RETURNS TABLE (own bigint, good bigint, evil bigint) LANGUAGE sql AS $$
    SELECT (SELECT count(*) FROM idempotency_record WHERE namespace = 'own-ns'),
           (SELECT count(*) FROM good.store), (SELECT count(*) FROM evil.store)
$$;
BEGIN; SELECT pg_temp.fill(); COMMIT;
SELECT pg_sleep(0.01);
SELECT * FROM pg_temp.left_over();

-- A trigger of the evil store's owner that raises on DELETE.
SET ROLE regress_idem_evil;
CREATE FUNCTION evil.no() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no purge here'; END $$;
CREATE TRIGGER no BEFORE DELETE ON evil.store FOR EACH ROW EXECUTE FUNCTION evil.no();
RESET ROLE;
-- idem_purge purges the extension's table and the good store, and skips
-- the evil one (undoing nothing else).
SELECT idem_purge();
SELECT * FROM pg_temp.left_over();
-- idem_purge_batches (the pg_cron job) goes past it too, chunk by chunk.
BEGIN; SELECT pg_temp.fill(); COMMIT;
SELECT pg_sleep(0.01);
SET client_min_messages = warning;   -- the procedure's NOTICE says how many
CALL idem_purge_batches(1);
RESET client_min_messages;
SELECT * FROM pg_temp.left_over();
SET ROLE regress_idem_evil;
DROP TRIGGER no ON evil.store;
RESET ROLE;

-- A deferred trigger would fail the whole transaction at COMMIT, past any
-- subtransaction; but the store's statements run as a security-restricted
-- operation, in which PostgreSQL refuses to queue one: the purge's own
-- statement fails, and the store is skipped like the others.
SET ROLE regress_idem_evil;
CREATE CONSTRAINT TRIGGER no_later AFTER DELETE ON evil.store DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION evil.no();
RESET ROLE;
BEGIN; SELECT pg_temp.fill(); COMMIT;
SELECT pg_sleep(0.01);
SELECT idem_purge();
SELECT * FROM pg_temp.left_over();
SET ROLE regress_idem_evil;
DROP TRIGGER no_later ON evil.store;
RESET ROLE;

-- Row security forced on the owner, with a policy whose function raises:
-- the statistics show every other store, to pg_monitor too, and purge
-- purges them.
BEGIN; SELECT pg_temp.fill(); COMMIT;
SET ROLE regress_idem_evil;
CREATE FUNCTION evil.deny(text) RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no reading here'; END $$;
ALTER TABLE evil.store ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY deny ON evil.store USING (evil.deny(namespace));
RESET ROLE;
SELECT namespace, committed, store FROM idem_namespace_stats WHERE namespace LIKE '%-ns' ORDER BY namespace;
SET ROLE pg_monitor;
SELECT namespace, committed, store FROM idem_namespace_stats WHERE namespace LIKE '%-ns' ORDER BY namespace;
RESET ROLE;
SELECT idem_purge();
SET ROLE regress_idem_evil;
DROP POLICY deny ON evil.store;
ALTER TABLE evil.store NO FORCE ROW LEVEL SECURITY, DISABLE ROW LEVEL SECURITY;
RESET ROLE;

-- The owner revokes its own privileges on its table.
SET ROLE regress_idem_evil;
REVOKE DELETE, SELECT ON evil.store FROM regress_idem_evil;
RESET ROLE;
BEGIN; SELECT pg_temp.fill(); COMMIT;
SELECT pg_sleep(0.01);
SELECT idem_purge();
SELECT namespace, committed, store FROM idem_namespace_stats WHERE namespace LIKE '%-ns' ORDER BY namespace;
SELECT * FROM pg_temp.left_over();
SET ROLE regress_idem_evil;
GRANT DELETE, SELECT ON evil.store TO regress_idem_evil;
RESET ROLE;

-- A trigger that sleeps is cancelled after idempotency.maintenance_timeout;
-- the others are purged meanwhile.
SET ROLE regress_idem_evil;
CREATE FUNCTION evil.slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(30); RETURN OLD; END $$;
CREATE TRIGGER slow BEFORE DELETE ON evil.store FOR EACH ROW EXECUTE FUNCTION evil.slow();
RESET ROLE;
SET idempotency.maintenance_timeout = '200ms';
BEGIN; SELECT pg_temp.fill(); COMMIT;
SELECT pg_sleep(0.01);
SELECT clock_timestamp() AS started \gset
SELECT idem_purge();
SELECT clock_timestamp() - :'started' < interval '10 seconds' AS cancelled_in_time;
SELECT * FROM pg_temp.left_over();
-- A cancel the session is sent is the session's: it is not taken for the
-- store's and stops the purge.
SET idempotency.maintenance_timeout = 0;
SET statement_timeout = '300ms';
\set VERBOSITY terse
SELECT idem_purge();
\set VERBOSITY default
RESET statement_timeout;
RESET idempotency.maintenance_timeout;

-- Clean up.
SET ROLE regress_idem_evil;
DROP TRIGGER slow ON evil.store;
RESET ROLE;
SELECT idem_purge() >= 0 AS purged;
DELETE FROM idempotency_record WHERE namespace = 'own-ns';

-- A BEFORE UPDATE or DELETE trigger of the owner's that returns NULL skips
-- the store's own change: the transition says so, rather than blaming
-- another transaction.
SET ROLE regress_idem_good;
CREATE FUNCTION good.skip() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER skip BEFORE UPDATE OR DELETE ON good.store FOR EACH ROW EXECUTE FUNCTION good.skip();
BEGIN;
SELECT kind FROM idem_begin('good-ns', 'skipped', '{}');
SELECT idem_commit('good-ns', 'skipped', '{}');
ROLLBACK;
BEGIN;
SELECT fence FROM idem_begin('good-ns', 'skipped', '{}') \gset
SELECT idem_fail_permanent('good-ns', 'skipped', '{"class_tag": "E", "message": "m"}', :fence);
ROLLBACK;
BEGIN;
SELECT kind FROM idem_begin('good-ns', 'skipped', '{}');
SELECT idem_fail_transient('good-ns', 'skipped');
ROLLBACK;
DROP TRIGGER skip ON good.store;
RESET ROLE;

-- The owner breaks its store's shape: its records can no longer be used,
-- and an operator can still unbind the namespace once it has none there
-- (counted through SQL as the owner, whatever the shape), then drop the
-- table. With records it is refused, as for any store.
BEGIN;
SET LOCAL ROLE regress_idem_evil;
SELECT kind FROM idem_begin('evil-ns', 'kept', '{}');
SELECT idem_commit('evil-ns', 'kept', '{}');
COMMIT;
SET ROLE regress_idem_evil;
ALTER TABLE evil.store SET UNLOGGED;
RESET ROLE;
SELECT problem FROM idempotency_internal.idem_store_problem('evil.store');
SELECT idem_bind_store('evil-ns', NULL);
SET ROLE regress_idem_evil;
DELETE FROM evil.store;
RESET ROLE;
SELECT idem_bind_store('evil-ns', NULL);
SET ROLE regress_idem_evil;
DROP TABLE evil.store;
RESET ROLE;
SELECT idem_bind_store(ns, NULL) IS NULL AND idem_namespace_drop(ns) FROM unnest(ARRAY['good-ns', 'evil-ns']) ns;
SELECT idem_namespace_drop('own-ns');
DROP SCHEMA good CASCADE;
DROP SCHEMA evil CASCADE;
DROP OWNED BY regress_idem_good, regress_idem_evil;
DROP ROLE regress_idem_good, regress_idem_evil;
