-- bound_store: namespaces bound to a table the service owns (0.6.0). Making
-- such a table and binding it (who may, which tables, which shapes); every
-- outcome and transition kept there and nothing in the extension's table;
-- both ways of writing (directly, and through SQL once the service adds a
-- trigger, which then runs as the table's owner, never as the extension's);
-- the claim guard, a lease and its takeover, hash_keys, grants, purge and
-- stats per store; a store that loses its shape or is dropped; moving a
-- namespace between stores.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
RESET client_min_messages;
SET search_path = idempotency, public;
CREATE ROLE regress_idem_svc;     -- the service: owns the store
CREATE ROLE regress_idem_app;     -- its application role: owns nothing
CREATE ROLE regress_idem_other;   -- another service
CREATE SCHEMA app AUTHORIZATION regress_idem_svc;
GRANT USAGE ON SCHEMA idempotency TO regress_idem_svc, regress_idem_app, regress_idem_other;
GRANT USAGE ON SCHEMA app TO regress_idem_other;
GRANT CREATE ON SCHEMA app TO regress_idem_other;
-- What earlier tests left in the extension's table: a bound namespace adds nothing there.
SELECT count(*) AS extensions_table_before FROM idempotency_record \gset

-- idem_create_store makes the table, owned by its caller, with its primary
-- key, the index purge uses, and no privileges for anyone else.
SET ROLE regress_idem_svc;
SELECT idem_create_store('app.records');
RESET ROLE;
SELECT relowner::regrole AS owner,
       (SELECT count(*) FROM aclexplode(relacl) a WHERE a.grantee <> relowner) AS privileges_of_others
FROM pg_class WHERE oid = 'app.records'::regclass;
SELECT indexdef FROM pg_indexes WHERE schemaname = 'app' AND tablename = 'records' ORDER BY 1;
SELECT idem_create_store(NULL);
SELECT idem_create_store('records');
SELECT idem_create_store('app."records');
SELECT idem_create_store('app.records');
\echo :LAST_ERROR_SQLSTATE

-- Binding needs the privileges of the table's owner: the store reads and
-- writes it as that role.
GRANT EXECUTE ON FUNCTION idem_bind_store(text, regclass) TO regress_idem_other;
SET ROLE regress_idem_other;
SELECT idem_bind_store('svc', 'app.records');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
REVOKE EXECUTE ON FUNCTION idem_bind_store(text, regclass) FROM regress_idem_other;
SELECT idem_bind_store('svc', 'app.records');
SELECT idem_bind_store('svc', 'app.records');   -- again: nothing changes
SELECT namespace, store FROM idem_namespaces WHERE namespace = 'svc';
SELECT idem_bind_store(NULL, 'app.records');
SELECT idem_bind_store('bad namespace!', 'app.records');

-- Tables that are not a store's shape, and the extension's own.
CREATE TABLE app.short (namespace text COLLATE "C" NOT NULL, key_value text COLLATE "C" NOT NULL);
SELECT idem_bind_store('other', 'app.short');
-- No columns at all: every column named, none "too".
CREATE TABLE app.empty ();
SELECT idem_bind_store('other', 'app.empty');
DROP TABLE app.empty;
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE app.typed (LIKE app.records INCLUDING ALL);
ALTER TABLE app.typed ALTER COLUMN attempt TYPE bigint;
SELECT idem_bind_store('other', 'app.typed');
CREATE TABLE app.unkeyed (LIKE app.records);
SELECT idem_bind_store('other', 'app.unkeyed');
CREATE VIEW app.a_view AS SELECT * FROM app.records;
SELECT idem_bind_store('other', 'app.a_view');
SELECT idem_bind_store('other', 'idem_namespace_config');
-- A store made before 0.6.0's columns (the 0.3 table's ten): the hint gives
-- the ALTER TABLE, and once it has run the table binds.
CREATE TABLE app.older (LIKE app.records INCLUDING ALL);
ALTER TABLE app.older DROP COLUMN recovery_state, DROP COLUMN recovery_point, DROP COLUMN fence, DROP COLUMN attempt;
CREATE TABLE app.old_shape (LIKE app.older INCLUDING ALL);
SELECT idem_bind_store('other', 'app.old_shape');
ALTER TABLE app.old_shape ADD COLUMN attempt integer NOT NULL DEFAULT 1, ADD COLUMN fence bigint, ADD COLUMN recovery_point text, ADD COLUMN recovery_state jsonb;
SELECT idem_bind_store('other', 'app.old_shape');
-- A column dropped keeps its place: the table can no longer be a store.
SELECT idem_bind_store('other', 'app.older');
SELECT idem_bind_store('other', NULL);
SELECT namespace, store FROM idem_namespaces WHERE namespace = 'other';
SELECT idem_namespace_drop('other');

-- The application role holds the namespace, not the table: it reads
-- nothing of the table, and the store works for it.
SELECT idem_grant('svc', 'regress_idem_app');
SET ROLE regress_idem_app;
SELECT count(*) FROM app.records;
BEGIN;
SELECT kind, attempt, fence > 4294967295 AS fenced FROM idem_begin('svc', 'pay-1', '{"amount": 5}');
SELECT idem_commit('svc', 'pay-1', '{"charge": "ch_1"}');
SELECT kind FROM idem_begin('svc', 'pay-2', '{"amount": 6}');
SELECT idem_fail_permanent('svc', 'pay-2', '{"class_tag": "declined", "message": "card declined"}');
SELECT kind FROM idem_begin('svc', 'pay-3', '{"amount": 7}');
SELECT idem_fail_transient('svc', 'pay-3');
SELECT kind FROM idem_begin_typed('svc', 'pay-4', 8);
SELECT idem_commit_typed('svc', 'pay-4', 42);
COMMIT;
SELECT kind, result FROM idem_begin('svc', 'pay-1', '{"amount": 5}');
SELECT kind, error FROM idem_begin('svc', 'pay-2', '{"amount": 6}');
SELECT kind, recorded_request FROM idem_begin('svc', 'pay-1', '{"amount": 9}');
SELECT idem_result(o, NULL::integer) FROM idem_begin_typed('svc', 'pay-4', 8) o;
SELECT (idem_http_response(o)).status FROM idem_begin('svc', 'pay-1', '{"amount": 5}') o;
-- The claim guard holds on a bound store too.
BEGIN;
SELECT kind FROM idem_begin('svc', 'unfinished', '{}');
COMMIT;
RESET ROLE;
SELECT key_value, status, request_payload, result_payload, error_payload, attempt FROM app.records ORDER BY key_value;
SELECT count(*) - :extensions_table_before AS added_to_the_extensions_table FROM idempotency_record;

-- Another service with no grant: refused before anything is read.
SET ROLE regress_idem_other;
SELECT kind FROM idem_begin('svc', 'pay-1', '{"amount": 5}');
RESET ROLE;

-- A lease, its takeover and fences, on the bound store.
SELECT namespace, store FROM idem_namespace_configure('svc', in_progress_lease => '1 minute');
BEGIN;
SELECT fence AS first_fence FROM idem_begin('svc', 'job', '{"job": 1}') \gset
COMMIT;
UPDATE app.records SET updated_at = updated_at - interval '1 hour' WHERE key_value = 'job';
BEGIN;
SELECT kind, attempt, fence <> :first_fence AS new_fence FROM idem_begin('svc', 'job', '{"job": 1}');
SELECT idem_commit('svc', 'job', '{"done": true}', :first_fence);
ROLLBACK;
SELECT key_value, status, attempt FROM app.records WHERE key_value = 'job';

-- hash_keys: a bound namespace stores only the key's SHA-256.
SELECT namespace, store FROM idem_namespace_configure('svc-hashed', hash_keys => true);
SELECT idem_bind_store('svc-hashed', 'app.records');
BEGIN;
SELECT kind FROM idem_begin('svc-hashed', 'customer@example.com', '{}');
SELECT idem_commit('svc-hashed', 'customer@example.com', '{}');
COMMIT;
SELECT key_value = encode(sha256(convert_to('customer@example.com', 'UTF8')), 'hex') AS hashed
FROM app.records WHERE namespace = 'svc-hashed';

-- A trigger the service adds: the writes go through SQL so that it fires,
-- as the table's owner whoever calls (and never as the extension's owner).
CREATE TABLE app.audit (op text, key_value text, status text, by_role name);
ALTER TABLE app.audit OWNER TO regress_idem_svc;
CREATE FUNCTION app.audit_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO app.audit SELECT TG_OP, r.key_value, r.status, current_user
  FROM (SELECT (CASE TG_OP WHEN 'DELETE' THEN OLD ELSE NEW END).*) r;
  RETURN NULL;
END $$;
ALTER FUNCTION app.audit_record() OWNER TO regress_idem_svc;
CREATE TRIGGER audit AFTER INSERT OR UPDATE OR DELETE ON app.records
  FOR EACH ROW EXECUTE FUNCTION app.audit_record();
SET ROLE regress_idem_app;
BEGIN;
SELECT kind FROM idem_begin('svc', 'audited', '{}');
SELECT idem_commit('svc', 'audited', '{}');
SELECT kind FROM idem_begin('svc', 'audited-2', '{}');
SELECT idem_fail_transient('svc', 'audited-2');
COMMIT;
RESET ROLE;
-- Purge, from any store, also as its owner.
ALTER TABLE app.records DISABLE TRIGGER audit;
UPDATE app.records SET expires_at = now() - interval '1 second' WHERE key_value IN ('audited', 'pay-2');
ALTER TABLE app.records ENABLE TRIGGER audit;
SELECT idem_purge();
SELECT op, key_value, status, by_role FROM app.audit ORDER BY op DESC, key_value;
DROP TRIGGER audit ON app.records;

-- What the owner attaches to the store runs as the owner in a restricted
-- context: it resolves no name through the caller's search_path (a
-- caller's lower() would run with the owner's rights), and no setting it
-- changes outlives the statement (a search_path left for the caller's next
-- statement would run the owner's functions with the caller's rights).
CREATE SCHEMA hostile AUTHORIZATION regress_idem_app;
SET ROLE regress_idem_app;
CREATE FUNCTION hostile.lower(text) RETURNS text LANGUAGE plpgsql AS
  $$BEGIN RAISE EXCEPTION 'the caller''s lower() ran as %', current_user; END$$;
RESET ROLE;
CREATE FUNCTION app.normalize() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM lower(NEW.key_value);
  PERFORM set_config('search_path', 'app', false);
  RETURN NEW;
END $$;
ALTER FUNCTION app.normalize() OWNER TO regress_idem_svc;
CREATE TRIGGER normalize BEFORE INSERT OR UPDATE ON app.records FOR EACH ROW EXECUTE FUNCTION app.normalize();
SET ROLE regress_idem_app;
SET search_path = hostile, idempotency, public, pg_catalog;
BEGIN;
SELECT kind FROM idem_begin('svc', 'restricted', '{}');
SELECT idem_commit('svc', 'restricted', '{}');
COMMIT;
SHOW search_path;
SET search_path = idempotency, public;
RESET ROLE;
DROP TRIGGER normalize ON app.records;
DROP SCHEMA hostile CASCADE;

-- Counting a store's records and its stats read it as its owner too,
-- never as the extension's: a policy of the owner's sees who reads.
SET ROLE regress_idem_svc;
SELECT idem_create_store('app.watched');
CREATE FUNCTION app.reader() RETURNS boolean LANGUAGE plpgsql AS
  $$BEGIN RAISE NOTICE 'app.watched read as %', current_user; RETURN true; END$$;
RESET ROLE;
SELECT idem_bind_store('watched', 'app.watched');
BEGIN;
SELECT kind FROM idem_begin('watched', 'k', '{}');
SELECT idem_commit('watched', 'k', '{}');
COMMIT;
ALTER TABLE app.watched ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY watched ON app.watched USING (app.reader());
SELECT namespace, committed FROM idem_namespace_stats WHERE namespace = 'watched';
SELECT namespace FROM idem_namespace_configure('watched', hash_keys => true);
DELETE FROM app.watched;
SELECT idem_namespace_drop('watched');
DROP TABLE app.watched;

-- Tables that would lose or mix records cannot be stores: unlogged or
-- temporary ones (a crash or the session's end loses committed records),
-- one in an inheritance tree (statements reach the other tables' rows),
-- one whose key index compares keys by something else than their bytes.
CREATE UNLOGGED TABLE app.unlogged (LIKE app.records INCLUDING ALL);
SELECT idem_bind_store('other', 'app.unlogged');
CREATE TEMP TABLE temporary_store (LIKE app.records INCLUDING ALL);
SELECT idem_bind_store('other', 'temporary_store');
CREATE TABLE app.parent (LIKE app.records INCLUDING ALL);
CREATE TABLE app.archive () INHERITS (app.parent);
SELECT idem_bind_store('other', 'app.parent');
SELECT idem_bind_store('other', 'app.archive');
CREATE COLLATION app.case_insensitive (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE app.ci_keyed (LIKE app.records);
CREATE UNIQUE INDEX ON app.ci_keyed (namespace COLLATE app.case_insensitive, key_value COLLATE app.case_insensitive);
SELECT idem_bind_store('other', 'app.ci_keyed');
-- A bound store that gets an inheritance child refuses until it is gone.
CREATE TABLE app.kid () INHERITS (app.records);
SELECT kind FROM idem_begin('svc', 'pay-1', '{"amount": 5}');
DROP TABLE app.kid;
SELECT kind, result FROM idem_begin('svc', 'pay-1', '{"amount": 5}');
SELECT idem_namespace_drop('other');

-- Stats list each namespace with its store.
SELECT namespace, in_progress, committed, failed, expired, store FROM idem_namespace_stats
WHERE store IS NOT NULL ORDER BY namespace;

-- Moving a namespace that has records would make its retries begin again:
-- refused. Copying the records and deleting them from the old store in the
-- transaction that binds moves it.
SET ROLE regress_idem_svc;
SELECT idem_create_store('app.records_v2');
RESET ROLE;
SELECT idem_bind_store('svc', 'app.records_v2');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_bind_store('svc', NULL);
SELECT idem_namespace_drop('svc');
BEGIN;
SELECT idem_lock_namespace('svc');
WITH moved AS (DELETE FROM app.records WHERE namespace = 'svc' RETURNING *)
INSERT INTO app.records_v2 SELECT * FROM moved;
SELECT idem_bind_store('svc', 'app.records_v2');
COMMIT;
SELECT kind, result FROM idem_begin('svc', 'pay-1', '{"amount": 5}');

-- A store that loses its shape refuses every call (and writes nothing
-- anywhere else) until it is fixed.
ALTER TABLE app.records_v2 ALTER COLUMN status TYPE varchar(20);
SELECT kind FROM idem_begin('svc', 'pay-1', '{"amount": 5}');
-- Purge skips it, with a warning, and purges the other stores.
SELECT idem_purge() >= 0 AS purged;
ALTER TABLE app.records_v2 ALTER COLUMN status TYPE text;
SELECT kind FROM idem_begin('svc', 'pay-1', '{"amount": 5}');
-- A bound store cannot be dropped, alone or with its schema.
DROP TABLE app.records_v2;
\echo :LAST_ERROR_SQLSTATE
DROP SCHEMA app CASCADE;
SELECT count(*) AS still_there FROM app.records_v2;
-- With the event trigger disabled (a superuser can) the drop goes through:
-- the calls then refuse the missing store; purge and stats go on without
-- it, and the namespace can be bound again (its records went with it).
ALTER EVENT TRIGGER idem_refuse_dropping_a_store DISABLE;
DROP TABLE app.records_v2;
ALTER EVENT TRIGGER idem_refuse_dropping_a_store ENABLE;
SELECT kind FROM idem_begin('svc', 'pay-1', '{"amount": 5}');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_purge();
SELECT namespace, store FROM idem_namespace_stats WHERE store IS NOT NULL ORDER BY namespace;
SELECT idem_bind_store('svc', 'app.records');
SELECT kind FROM idem_begin('svc', 'pay-1', '{"amount": 5}');
SELECT count(*) - :extensions_table_before AS added_to_the_extensions_table FROM idempotency_record;

-- A BEFORE INSERT trigger that skips the store's own INSERT: the claim is
-- refused, not answered fresh without a record (twice, for one key).
CREATE FUNCTION app.skip_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
ALTER FUNCTION app.skip_insert() OWNER TO regress_idem_svc;
CREATE TRIGGER skip_insert BEFORE INSERT ON app.records FOR EACH ROW EXECUTE FUNCTION app.skip_insert();
BEGIN;
SELECT kind FROM idem_begin('svc', 'skipped-1', '{"amount": 5}');
ROLLBACK;
SELECT count(*) AS skipped_rows FROM app.records WHERE key_value = 'skipped-1';
DROP TRIGGER skip_insert ON app.records;
-- The extension's own table made unlogged: a crash would lose committed
-- records, and their retries begin again. Refused as a bound store is.
ALTER TABLE idempotency_record SET UNLOGGED;
BEGIN;
SELECT kind FROM idem_begin('own-unlogged', 'k1', '{}');
ROLLBACK;
ALTER TABLE idempotency_record SET LOGGED;
BEGIN;
SELECT kind FROM idem_begin('own-unlogged', 'k1', '{}');
ROLLBACK;
-- The same for the finished record of a claim held by its lock, on the
-- extension's table: a trigger added in the claiming transaction sends
-- idem_commit through SQL, which must not pass a skipped insert as done.
BEGIN;
SELECT kind FROM idem_begin('own-skip', 'k1', '{"a": 1}');
CREATE FUNCTION pg_temp.skip_finished() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER skip_finished BEFORE INSERT ON idempotency_record FOR EACH ROW EXECUTE FUNCTION pg_temp.skip_finished();
SELECT idem_commit('own-skip', 'k1', '{"ok": true}');
ROLLBACK;

DELETE FROM app.records;
SELECT idem_namespace_drop('svc'), idem_namespace_drop('svc-hashed');
DROP SCHEMA app CASCADE;   -- nothing is bound any more
REVOKE ALL ON SCHEMA idempotency FROM regress_idem_svc, regress_idem_app, regress_idem_other;
DROP ROLE regress_idem_svc, regress_idem_app, regress_idem_other;
