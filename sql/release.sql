-- release: idem_release_key, an operator's release of one key. Its record
-- is deleted and the next begin answers fresh; it says what the record was
-- (NULL: none). Refused (55006) while a transaction holds the key or while
-- a claim's lease runs; only the extension's owner may run it. Concurrent
-- holders: test/isolation/specs/held_claims.spec; the counter and the log
-- line: test/t/004_counters.pl.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
RESET client_min_messages;
SET search_path = public, idempotency;
DELETE FROM idempotency_record;

-- A committed result a bug recorded: released, and the key is fresh again.
BEGIN;
SELECT kind FROM idem_begin('ops', 'poisoned', '{"n": 1}');
SELECT idem_commit('ops', 'poisoned', '{"bug": true}');
COMMIT;
SELECT idem_release_key('ops', 'poisoned');
SELECT count(*) AS records FROM idempotency_record WHERE namespace = 'ops';
BEGIN;
SELECT kind FROM idem_begin('ops', 'poisoned', '{"n": 1}');
ROLLBACK;
-- From PL/pgSQL too (the log line then leaves out the caller's context).
BEGIN;
SELECT kind FROM idem_begin('ops', 'from-plpgsql', '{}');
SELECT idem_commit('ops', 'from-plpgsql', '{}');
COMMIT;
DO $$ BEGIN RAISE NOTICE 'released: %', idempotency.idem_release_key('ops', 'from-plpgsql'); END $$;
-- A failure, and a key without a record (NULL, nothing done).
BEGIN;
SELECT kind FROM idem_begin('ops', 'failed', '{}');
SELECT idem_fail_permanent('ops', 'failed', '{"class_tag": "E", "message": "m"}');
COMMIT;
SELECT idem_release_key('ops', 'failed');
SELECT idem_release_key('ops', 'never-seen') IS NULL AS nothing_to_release;

-- This transaction's own claim, held by its lock: refused, the claim stays.
BEGIN;
SELECT kind FROM idem_begin('ops', 'mine', '{}');
SELECT idem_release_key('ops', 'mine');
ROLLBACK;
-- A claim under a lease, its own row: refused too.
SELECT namespace FROM idem_namespace_configure('ops-leased', in_progress_lease => '1 hour');
BEGIN;
SELECT kind FROM idem_begin('ops-leased', 'mine', '{}');
SELECT idem_release_key('ops-leased', 'mine');
ROLLBACK;

-- A record this transaction finished: released, a begin later in the
-- transaction would answer fresh again and do the work twice. Refused.
BEGIN;
SELECT kind FROM idem_begin('ops', 'done-here', '{}');
SELECT idem_commit('ops', 'done-here', '{}');
SELECT idem_release_key('ops', 'done-here');
ROLLBACK;

-- An in_progress record is released only when a begin would take it over:
-- refused while its lease runs, released once it has run out (claimed two
-- hours ago). Without a lease (an older release's leftover, or a lease
-- since removed) a begin answers in_flight until the record's window ends:
-- refused until then, released after.
INSERT INTO idempotency_record
    (namespace, key_value, status, request_hash, request_payload, created_at, updated_at, expires_at)
VALUES ('ops-leased', 'working', 'in_progress', idem_request_hash('{}'), '{}', now(), now(), now() + interval '1 day'),
       ('ops-leased', 'gone', 'in_progress', idem_request_hash('{}'), '{}', now() - interval '2 hours',
        now() - interval '2 hours', now() + interval '1 day'),
       ('ops', 'left-over', 'in_progress', idem_request_hash('{}'), '{}', now() - interval '2 days',
        now() - interval '2 days', now() - interval '1 day'),
       ('ops', 'left-in-window', 'in_progress', idem_request_hash('{}'), '{}', now() - interval '1 hour',
        now() - interval '1 hour', now() + interval '1 day');
\set VERBOSITY sqlstate
SELECT idem_release_key('ops-leased', 'working');
\set VERBOSITY terse
SELECT idem_release_key('ops-leased', 'working');
\set VERBOSITY default
SELECT idem_release_key('ops-leased', 'gone');
SELECT idem_release_key('ops', 'left-over');
SELECT kind FROM idem_begin('ops', 'left-in-window', '{}');
\set VERBOSITY terse
SELECT idem_release_key('ops', 'left-in-window');
\set VERBOSITY default
SELECT key_value FROM idempotency_record WHERE namespace LIKE 'ops%' ORDER BY key_value;

-- A hash_keys namespace is released by the caller's key.
SELECT namespace FROM idem_namespace_configure('ops-hashed', hash_keys => true);
BEGIN;
SELECT kind FROM idem_begin('ops-hashed', 'secret-key', '{}');
SELECT idem_commit('ops-hashed', 'secret-key', '{}');
COMMIT;
SELECT idem_release_key('ops-hashed', 'secret-key');

-- Bad input: NULL in, NULL out; a bad key as a begin refuses it; nothing
-- in a read-only transaction.
SELECT idem_release_key(NULL, 'k') IS NULL AS null_namespace, idem_release_key('ops', NULL) IS NULL AS null_key;
SELECT idem_release_key('ops', '   ');
BEGIN READ ONLY;
SELECT idem_release_key('ops', 'working');
ROLLBACK;

-- Who may: the owner, and whom it grants; that role still needs the
-- namespace's grant.
CREATE ROLE regress_idem_operator;
SELECT has_function_privilege('regress_idem_operator', 'idem_release_key(text,text)', 'EXECUTE') AS may_release,
       has_function_privilege('pg_monitor', 'idem_release_key(text,text)', 'EXECUTE') AS monitor_may;
GRANT USAGE ON SCHEMA idempotency TO regress_idem_operator;
SET ROLE regress_idem_operator;
SELECT idempotency.idem_release_key('ops', 'x');
RESET ROLE;
GRANT EXECUTE ON FUNCTION idem_release_key(text, text) TO regress_idem_operator;
SELECT namespace FROM idem_namespace_configure('ops-private');
SET ROLE regress_idem_operator;
SELECT idempotency.idem_release_key('ops-private', 'x');
RESET ROLE;
SELECT idem_grant('ops-private', 'regress_idem_operator');
SET ROLE regress_idem_operator;
SELECT idempotency.idem_release_key('ops-private', 'x') IS NULL AS released_nothing;
RESET ROLE;
SELECT idem_namespace_drop('ops-private');
REVOKE ALL ON FUNCTION idem_release_key(text, text) FROM regress_idem_operator;
REVOKE USAGE ON SCHEMA idempotency FROM regress_idem_operator;
DROP ROLE regress_idem_operator;
-- idem_stats has the counter (NULL here: not preloaded).
SELECT released_keys FROM idem_stats;
DELETE FROM idempotency_record;
SELECT idem_namespace_drop(n) FROM unnest(ARRAY['ops-leased', 'ops-hashed']) n;
