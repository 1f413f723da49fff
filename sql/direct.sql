-- direct: with idempotency_record as the install scripts make it, begin,
-- commit and the failures write its rows through heapam and the btree
-- access method (src/pg/write.cpp), not through SQL. This checks that the
-- rows and both indexes are what SQL would have left (amcheck, with every
-- heap tuple looked up in each index), across HOT and non-HOT updates,
-- TOASTed payloads, a key forgotten and begun again, and a rolled-back
-- claim; and that anything an operator adds to the table (a trigger, a
-- CHECK constraint, an index) sends the writes back through SQL, which
-- honours it, in a session that wrote directly before and after.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
CREATE EXTENSION IF NOT EXISTS amcheck;
RESET client_min_messages;
SET search_path = public, idempotency;
-- An empty store, whatever ran before in this database.
DELETE FROM idempotency_record;

CREATE FUNCTION public.indexes_hold_every_row() RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  i regclass;
BEGIN
  FOR i IN SELECT indexrelid::regclass FROM pg_index WHERE indrelid = 'idempotency.idempotency_record'::regclass LOOP
    PERFORM bt_index_parent_check(i, heapallindexed => true);
  END LOOP;
  RETURN true;
END $$;

-- A namespace without a lease writes a claim once, when it is finished
-- (its claim is the key's lock until then): the writes checked here, which
-- claim, update and delete rows, are those of a namespace with a lease (and
-- of claims past a transaction's share of the lock table). The one write is
-- checked at the end.
SELECT namespace FROM idem_namespace_configure('direct', in_progress_lease => '1 hour');

-- 300 claims with 1 kB requests fill their pages, so the commits cannot
-- stay on the page (not HOT: each gets new index entries).
-- (The statistics of this backend's transactions are read as differences
-- inside one transaction block, since they are flushed only when idle.)
CREATE VIEW public.writes AS SELECT n_tup_ins, n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables
WHERE relid = 'idempotency.idempotency_record'::regclass;
BEGIN;
SELECT n_tup_ins AS ins0, n_tup_upd AS upd0, n_tup_hot_upd AS hot0 FROM public.writes \gset
SELECT count(*) AS fresh
FROM generate_series(1, 300) g, idem_begin('direct', 'k' || g, jsonb_build_object('g', g, 'pad', repeat('x', 1000))) b
WHERE b.kind = 'fresh';
SELECT count(*) AS committed
FROM generate_series(1, 300) g, LATERAL (SELECT idem_commit('direct', 'k' || g, jsonb_build_object('r', g))) c;
SELECT n_tup_ins - :ins0 AS inserted, n_tup_upd - :upd0 AS updated, n_tup_hot_upd - :hot0 < 10 AS few_hot
FROM public.writes;
COMMIT;
SELECT public.indexes_hold_every_row();

-- Each replays its own result, found through the primary key.
SELECT count(*) FILTER (WHERE b.kind = 'prior_result' AND b.result = jsonb_build_object('r', g)) AS replayed
FROM generate_series(1, 300) g, idem_begin('direct', 'k' || g, jsonb_build_object('g', g, 'pad', repeat('x', 1000))) b;

-- Payloads large enough to be TOASTed, in the request and in the result,
-- and a permanent failure.
BEGIN;
SELECT n_tup_upd AS upd0, n_tup_hot_upd AS hot0 FROM public.writes \gset
SELECT kind FROM idem_begin('direct', 'big', jsonb_build_object('pad', (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 4000) g)));
SELECT idem_commit('direct', 'big', jsonb_build_object('pad', (SELECT string_agg(md5((-g)::text), '') FROM generate_series(1, 4000) g)));
SELECT kind FROM idem_begin('direct', 'error', '{}');
SELECT idem_fail_permanent('direct', 'error', '{"class_tag": "declined", "message": "card declined"}');
-- These pages had room: the updates were HOT (no index entries).
SELECT n_tup_upd - :upd0 AS updated, n_tup_hot_upd - :hot0 AS hot FROM public.writes;
COMMIT;
SELECT kind, result = jsonb_build_object('pad', (SELECT string_agg(md5((-g)::text), '') FROM generate_series(1, 4000) g)) AS same_result
FROM idem_begin('direct', 'big', jsonb_build_object('pad', (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 4000) g)));
SELECT kind, error FROM idem_begin('direct', 'error', '{}');
-- The TOASTed request the commit carried over to the new version is whole.
SELECT request_payload = jsonb_build_object('pad', (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 4000) g)) AS same_request,
       (SELECT pg_relation_size(reltoastrelid) > 0 FROM pg_class WHERE oid = 'idempotency.idempotency_record'::regclass) AS toasted
FROM idempotency_record WHERE namespace = 'direct' AND key_value = 'big';

-- Forgotten and begun again in one transaction, and a claim rolled back:
-- the dead versions stay in the indexes until vacuum, and nothing else.
BEGIN;
SELECT kind FROM idem_begin('direct', 'again', '{"n": 1}');
SELECT idem_fail_transient('direct', 'again');
SELECT kind FROM idem_begin('direct', 'again', '{"n": 2}');
SELECT idem_commit('direct', 'again', '{"second": true}');
COMMIT;
BEGIN;
SELECT kind FROM idem_begin('direct', 'rolled-back', '{}');
ROLLBACK;
SELECT key_value, status, request_payload, result_payload FROM idempotency_record
WHERE namespace = 'direct' AND key_value IN ('again', 'rolled-back');
SELECT public.indexes_hold_every_row();

-- A trigger an operator adds sees every write (they go through SQL); once
-- it is dropped, the same session writes directly again.
CREATE TABLE public.audit (op text, key_value text, status text);
CREATE FUNCTION public.audit_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.audit SELECT TG_OP, r.key_value, r.status FROM (SELECT (CASE TG_OP WHEN 'DELETE' THEN OLD ELSE NEW END).*) r;
  RETURN NULL;
END $$;
CREATE TRIGGER audit AFTER INSERT OR UPDATE OR DELETE ON idempotency_record
  FOR EACH ROW EXECUTE FUNCTION public.audit_record();
BEGIN;
SELECT kind FROM idem_begin('direct', 'audited', '{}');
SELECT idem_commit('direct', 'audited', '{}');
SELECT kind FROM idem_begin('direct', 'audited-2', '{}');
SELECT idem_fail_transient('direct', 'audited-2');
COMMIT;
-- On this path too a transition without a fence acts only on its own
-- transaction's claim (one made in a savepoint counts): another's, committed
-- under a lease, needs its fence.
SELECT namespace FROM idem_namespace_configure('direct-lease', in_progress_lease => '1 hour');
BEGIN;
SAVEPOINT s;
SELECT kind FROM idem_begin('direct-lease', 'own', '{}');
RELEASE SAVEPOINT s;
SELECT idem_commit('direct-lease', 'own', '{}');
SELECT fence AS leased_fence FROM idem_begin('direct-lease', 'leased', '{}') \gset
COMMIT;
SELECT idem_commit('direct-lease', 'leased', '{}');
SELECT idem_fail_transient('direct-lease', 'leased');
SELECT idem_commit('direct-lease', 'leased', '{}', :leased_fence);
SELECT key_value, status FROM idempotency_record WHERE namespace = 'direct-lease' ORDER BY 1;
DELETE FROM idempotency_record WHERE namespace = 'direct-lease';
SELECT idem_namespace_drop('direct-lease');
DROP TRIGGER audit ON idempotency_record;
BEGIN;
SELECT kind FROM idem_begin('direct', 'unaudited', '{}');
SELECT idem_commit('direct', 'unaudited', '{}');
COMMIT;
SELECT * FROM public.audit;

-- A CHECK constraint is honoured while it exists (NOT VALID: it holds for
-- the rows written from now on).
ALTER TABLE idempotency_record ADD CONSTRAINT no_failures CHECK (status <> 'failed') NOT VALID;
BEGIN;
SELECT kind FROM idem_begin('direct', 'checked', '{}');
SAVEPOINT s;
\set VERBOSITY terse
SELECT idem_fail_permanent('direct', 'checked', '{"class_tag": "declined", "message": "card declined"}');
\set VERBOSITY default
ROLLBACK TO s;
SELECT status FROM idempotency_record WHERE namespace = 'direct' AND key_value = 'checked';
ALTER TABLE idempotency_record DROP CONSTRAINT no_failures;
SELECT idem_fail_permanent('direct', 'checked', '{"class_tag": "declined", "message": "card declined"}');
COMMIT;
SELECT status FROM idempotency_record WHERE namespace = 'direct' AND key_value = 'checked';

-- An index an operator adds gets an entry for every row written while it
-- exists, and the writes are direct again once it is gone.
CREATE INDEX record_status_idx ON idempotency_record (status);
BEGIN;
SELECT kind FROM idem_begin('direct', 'indexed', '{}');
SELECT idem_commit('direct', 'indexed', '{}');
COMMIT;
SELECT public.indexes_hold_every_row();
SELECT key_value FROM idempotency_record WHERE status = 'committed' AND key_value LIKE 'i%';
DROP INDEX record_status_idx;
BEGIN;
SELECT kind FROM idem_begin('direct', 'unindexed', '{}');
SELECT idem_commit('direct', 'unindexed', '{}');
COMMIT;
SELECT public.indexes_hold_every_row();

-- Column defaults an operator sets never apply: a claim names every column,
-- written directly or through SQL (while an index the operator added
-- exists), so both write the same row.
ALTER TABLE idempotency_record ALTER COLUMN attempt SET DEFAULT 7,
    ALTER COLUMN result_payload SET DEFAULT '{"default": true}', ALTER COLUMN fence SET DEFAULT 1;
BEGIN;
SELECT kind, attempt FROM idem_begin('direct', 'default-direct', '{}');
SELECT key_value, attempt, result_payload, fence > 4294967295 AS fenced FROM idempotency_record
WHERE namespace = 'direct' AND key_value LIKE 'default-%';
ROLLBACK;
CREATE INDEX record_status_idx ON idempotency_record (status);
BEGIN;
SELECT kind, attempt FROM idem_begin('direct', 'default-sql', '{}');
SELECT key_value, attempt, result_payload, fence > 4294967295 AS fenced FROM idempotency_record
WHERE namespace = 'direct' AND key_value LIKE 'default-%';
ROLLBACK;
DROP INDEX record_status_idx;
ALTER TABLE idempotency_record ALTER COLUMN attempt SET DEFAULT 1,
    ALTER COLUMN result_payload DROP DEFAULT, ALTER COLUMN fence DROP DEFAULT;

-- A publication that publishes updates of a table without a replica
-- identity: the commit is refused as UPDATE refuses it (a subscriber could
-- not apply it), and nothing changes.
SET client_min_messages = error;
CREATE PUBLICATION direct_pub FOR TABLE idempotency.idempotency_record;
RESET client_min_messages;
ALTER TABLE idempotency_record REPLICA IDENTITY NOTHING;
BEGIN;
SELECT kind FROM idem_begin('direct', 'published', '{}');
SAVEPOINT s;
SELECT idem_commit('direct', 'published', '{}');
ROLLBACK TO s;
SELECT idem_fail_transient('direct', 'published');
ROLLBACK TO s;
SELECT status FROM idempotency_record WHERE namespace = 'direct' AND key_value = 'published';
ROLLBACK;
ALTER TABLE idempotency_record REPLICA IDENTITY DEFAULT;
DROP PUBLICATION direct_pub;

-- Keys looked up in the index's own collation: an operator who gives the
-- key an ICU collation (the index is rebuilt in its order) still has every
-- record found, by begin and by commit.
DELETE FROM idempotency_record WHERE namespace = 'direct';
BEGIN;
SELECT count(*) AS fresh FROM generate_series(1, 500) g, idem_begin('direct', CASE WHEN g % 2 = 0 THEN 'A' ELSE 'a' END || g, '{}') b WHERE b.kind = 'fresh';
SELECT count(*) AS committed FROM generate_series(1, 500) g, LATERAL (SELECT idem_commit('direct', CASE WHEN g % 2 = 0 THEN 'A' ELSE 'a' END || g, '{}')) c;
COMMIT;
ALTER TABLE idempotency_record ALTER COLUMN key_value TYPE text COLLATE "en-x-icu";
BEGIN;
SELECT b.kind, count(*) FROM generate_series(1, 500) g, idem_begin('direct', CASE WHEN g % 2 = 0 THEN 'A' ELSE 'a' END || g, '{}') b GROUP BY 1 ORDER BY 1;
SELECT count(*) AS fresh FROM generate_series(501, 700) g, idem_begin('direct', CASE WHEN g % 2 = 0 THEN 'A' ELSE 'a' END || g, '{}') b WHERE b.kind = 'fresh';
SELECT count(*) AS committed FROM generate_series(501, 700) g, LATERAL (SELECT idem_commit('direct', CASE WHEN g % 2 = 0 THEN 'A' ELSE 'a' END || g, '{}')) c;
COMMIT;
ALTER TABLE idempotency_record ALTER COLUMN key_value TYPE text COLLATE "C";
SELECT public.indexes_hold_every_row();

DELETE FROM idempotency_record WHERE namespace = 'direct';
SELECT namespace FROM idem_namespace_configure('direct');

-- One write per fresh attempt: without a lease a claim is the key's lock,
-- and each finished attempt inserts its record once (no update, no dead
-- version); a transient failure writes nothing. The records are whole and
-- every index holds them. Past a quarter of max_locks_per_transaction
-- claims in one transaction (16 with its default of 64; 32 from PostgreSQL
-- 19, whose default is 128), the rest are written as rows, as with a lease,
-- so the shared lock table cannot fill.
CREATE TEMP TABLE held_fences (key_value text, fence bigint);
CREATE VIEW public.writes_and_deletes AS SELECT n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_xact_user_tables
WHERE relid = 'idempotency.idempotency_record'::regclass;
BEGIN;
SELECT n_tup_ins AS ins0, n_tup_upd AS upd0, n_tup_del AS del0 FROM public.writes_and_deletes \gset
INSERT INTO held_fences SELECT 'h' || g, b.fence
FROM generate_series(1, 12) g, idem_begin('direct', 'h' || g, jsonb_build_object('g', g, 'pad', repeat('x', 1000))) b;
SELECT count(*) AS rows_while_held FROM idempotency_record WHERE namespace = 'direct';
SELECT count(*) AS committed FROM generate_series(1, 6) g, LATERAL (SELECT idem_commit('direct', 'h' || g, jsonb_build_object('r', g),
  (SELECT fence FROM held_fences WHERE key_value = 'h' || g))) c;
SELECT count(*) AS failed FROM generate_series(7, 9) g, LATERAL (SELECT idem_fail_permanent('direct', 'h' || g,
  '{"class_tag": "declined", "message": "card declined"}')) c;
SELECT count(*) AS forgotten FROM generate_series(10, 12) g, LATERAL (SELECT idem_fail_transient('direct', 'h' || g)) c;
SELECT n_tup_ins - :ins0 AS inserted, n_tup_upd - :upd0 AS updated, n_tup_del - :del0 AS deleted FROM public.writes_and_deletes;
COMMIT;
SELECT count(*) FILTER (WHERE r.status = 'committed' AND r.result_payload = jsonb_build_object('r', substr(r.key_value, 2)::int)) AS committed,
       count(*) FILTER (WHERE r.status = 'failed') AS failed,
       bool_and(r.attempt = 1 AND r.fence = f.fence AND r.created_at <= r.updated_at
                AND r.expires_at = r.created_at + interval '1 day'
                AND r.request_payload ->> 'g' = substr(r.key_value, 2)) AS whole
FROM idempotency_record r JOIN held_fences f USING (key_value) WHERE r.namespace = 'direct';
SELECT public.indexes_hold_every_row();
BEGIN;
SELECT count(*) = current_setting('max_locks_per_transaction')::int / 4 + 4 AS all_fresh
FROM generate_series(1, current_setting('max_locks_per_transaction')::int / 4 + 4) g, idem_begin('direct', 'past' || g, '{}') b
WHERE b.kind = 'fresh';
SELECT count(*) AS written_as_rows FROM idempotency_record WHERE namespace = 'direct' AND status = 'in_progress';
ROLLBACK;
DELETE FROM idempotency_record WHERE namespace = 'direct';
DROP TABLE held_fences;
DROP VIEW public.writes_and_deletes;
DROP TABLE public.audit;
DROP FUNCTION public.audit_record();
DROP FUNCTION public.indexes_hold_every_row();
DROP VIEW public.writes;
