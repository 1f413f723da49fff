-- registry: idem_namespace_configure, idem_namespace_drop, idem_grant,
-- idem_revoke and the idem_namespaces view; settings applied by the store
-- (replay window, store_request, hash_keys, max_payload_bytes,
-- require_registered_namespace); every error with its message and detail.
-- Access between roles is tested in test/pgtap/namespace_access.sql.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
RESET client_min_messages;
SET search_path = public, idempotency;
DELETE FROM idempotency_record;
DELETE FROM idem_namespace_config;
CREATE ROLE regress_idem_app;

-- Registering: omitted settings are NULL and follow their GUCs.
SELECT namespace, replay_window, in_progress_lease, store_request, hash_keys, max_payload_bytes
FROM idem_namespace_configure('orders', replay_window => '2 days', max_payload_bytes => 4096);
-- Configuring again replaces every setting.
SELECT namespace, replay_window, in_progress_lease, store_request, hash_keys, max_payload_bytes
FROM idem_namespace_configure('orders', in_progress_lease => '5 minutes', store_request => false);
SELECT idem_grant('orders', 'regress_idem_app') AS granted, idem_grant('orders', 'regress_idem_app') AS again;
-- Granting registers an unregistered namespace with the defaults.
SELECT idem_grant('webhooks', 'regress_idem_app');
SELECT namespace, replay_window, in_progress_lease, store_request, hash_keys, max_payload_bytes, grantees
FROM idem_namespaces ORDER BY namespace;
SELECT has_schema_privilege('regress_idem_app', 'idempotency', 'USAGE') AS schema_usage;
SELECT idem_revoke('webhooks', 'regress_idem_app') AS revoked, idem_revoke('webhooks', 'regress_idem_app') AS again;

-- The store follows the namespace: its replay window (an argument may be
-- shorter, never longer), and no recorded request when store_request is off.
BEGIN;
SELECT kind, attempt FROM idem_begin('orders', 'o-1', '{"sku": 1}');
SELECT kind FROM idem_begin('orders', 'o-2', '{"sku": 1}', interval '1 hour');
SELECT key_value, expires_at - created_at AS window, request_payload FROM idempotency_record
WHERE namespace = 'orders' ORDER BY key_value;
SELECT idem_commit('orders', 'o-1', '{"id": 1}');
-- A mismatch carries both hashes and no request.
SELECT kind, recorded_request, recorded_hash = idem_request_hash('{"sku": 1}') AS recorded,
       submitted_hash = idem_request_hash('{"sku": 2}') AS submitted
FROM idem_begin('orders', 'o-1', '{"sku": 2}');
ROLLBACK;
SELECT replay_window FROM idem_namespace_configure('short', replay_window => '1 hour');
BEGIN;
SELECT kind FROM idem_begin('short', 's-1', '{}', interval '10 minutes');
SELECT kind FROM idem_begin('short', 's-2', '{}', interval '9999 years');
ROLLBACK;
SELECT count(*) AS records FROM idempotency_record WHERE namespace = 'short';

-- Switching store_request off removes the requests records kept (and a
-- mismatch never shows one while it is off).
SELECT store_request FROM idem_namespace_configure('kept', store_request => true);
BEGIN;
SELECT o.kind FROM unnest(ARRAY['k-1', 'k-2']) k, idem_begin('kept', k, jsonb_build_object('card', '4111 1111 1111 1111')) o;
SELECT idem_commit('kept', k, '{"ok": true}') FROM unnest(ARRAY['k-1', 'k-2']) k;
COMMIT;
SELECT count(request_payload) AS requests_kept FROM idempotency_record WHERE namespace = 'kept';
SELECT store_request FROM idem_namespace_configure('kept', store_request => false);
SELECT count(request_payload) AS requests_kept FROM idempotency_record WHERE namespace = 'kept';
SELECT kind, recorded_request FROM idem_begin('kept', 'k-1', '{"card": "other"}');
-- (The GUC idempotency.store_request, for namespaces that set nothing, is
-- in sql/settings.sql.)

-- hash_keys: the table holds the key's SHA-256 (computed here by PostgreSQL's
-- own sha256()), never the key; the key still works for every call.
SELECT hash_keys FROM idem_namespace_configure('users', hash_keys => true);
BEGIN;
SELECT kind FROM idem_begin('users', 'signup:ann@example.com', '{"plan": "pro"}');
SELECT idem_commit('users', 'signup:ann@example.com', '{"user": 7}');
SELECT key_value = encode(sha256(convert_to('signup:ann@example.com', 'UTF8')), 'hex') AS hashed,
       strpos(key_value, 'ann') = 0 AS no_raw_key
FROM idempotency_record WHERE namespace = 'users';
COMMIT;
SELECT kind, result FROM idem_begin('users', 'signup:ann@example.com', '{"plan": "pro"}');
SELECT idem_commit('users', 'signup:ann@example.com', '{"user": 8}');
-- Messages name a key by the start of its SHA-256: here, of the stored value.
SELECT 'sha256:' || left(key_value, 12) || '...' AS label FROM idempotency_record WHERE namespace = 'users';
-- hash_keys cannot change under existing records, either way.
SELECT idem_namespace_configure('users', hash_keys => false);
BEGIN;
SELECT kind FROM idem_begin('plain', 'k', '{}');
SELECT idem_commit('plain', 'k', '{}');
COMMIT;
SELECT idem_namespace_configure('plain', hash_keys => true);
SELECT namespace, hash_keys FROM idem_namespaces WHERE namespace IN ('users', 'plain') ORDER BY 1;

-- max_payload_bytes: requests, results and errors over the limit are
-- refused before anything is written (sizes are the jsonb's bytes).
SELECT max_payload_bytes FROM idem_namespace_configure('tiny', max_payload_bytes => 64);
SELECT kind FROM idem_begin('tiny', 'big', jsonb_build_object('text', repeat('x', 100)));
SELECT count(*) AS records FROM idempotency_record WHERE namespace = 'tiny';
BEGIN;
SELECT kind, fence FROM idem_begin('tiny', 'small', '{"n": 1}') \gset
\echo :kind
SAVEPOINT s;
SELECT idem_commit('tiny', 'small', jsonb_build_object('text', repeat('x', 100)));
ROLLBACK TO SAVEPOINT s;
SELECT idem_fail_permanent('tiny', 'small', jsonb_build_object('class_tag', 'E', 'message', repeat('x', 100)));
ROLLBACK TO SAVEPOINT s;
-- Nothing was written: without a lease the claim is the key's lock until
-- it is finished, and it still is.
SELECT count(*) AS records FROM idempotency_record WHERE namespace = 'tiny';
SELECT kind FROM idem_begin('tiny', 'small', '{"n": 1}');
-- The fence fences a transition: only the claim that holds the record may
-- finish or forget it (test/isolation/specs/lease_takeover.spec has the race).
SELECT idem_commit('tiny', 'small', '{}', 0);
ROLLBACK TO SAVEPOINT s;
SELECT idem_commit('tiny', 'small', '{}', 2);
ROLLBACK TO SAVEPOINT s;
SELECT idem_fail_transient('tiny', 'small', :fence - 1);
ROLLBACK TO SAVEPOINT s;
SELECT idem_commit('tiny', 'small', '{"n": 1}', :fence);
COMMIT;
SELECT status, result_payload FROM idempotency_record WHERE namespace = 'tiny';
-- (The GUCs idempotency.max_payload_bytes, for unregistered namespaces,
-- and idempotency.require_registered_namespace are in sql/settings.sql.)
BEGIN;
SELECT kind FROM idem_begin('orders', 'o-3', '{"sku": 3}');
SELECT idem_commit('orders', 'o-3', '{}');
COMMIT;

-- Bad settings and arguments: a clear error, and the registry unchanged.
SELECT idem_namespace_configure(NULL);
SELECT idem_namespace_configure('Orders');
SELECT idem_namespace_configure('orders', replay_window => '0');
SELECT idem_namespace_configure('orders', replay_window => '1 day -1 hour');
SELECT idem_namespace_configure('orders', in_progress_lease => '-1 second');
SELECT idem_namespace_configure('orders', hash_keys => NULL);
SELECT idem_namespace_configure('orders', max_payload_bytes => 0);
SELECT idem_grant('orders', NULL);
SELECT idem_grant('orders', 'regress_idem_no_such_role');
SELECT idem_grant('Orders', 'regress_idem_app');
SELECT idem_revoke('orders', NULL);
SELECT namespace, replay_window, in_progress_lease, store_request, hash_keys, max_payload_bytes, grantees
FROM idem_namespaces ORDER BY namespace;

-- A grant to a role that is dropped never passes to a new role of the same
-- name (the registry keeps the role's OID), and pg_dump leaves it out, so
-- that a restore cannot hand it to whichever role has that OID there.
CREATE ROLE regress_idem_gone;
GRANT USAGE ON SCHEMA idempotency TO regress_idem_gone;
SELECT idem_grant('orders', 'regress_idem_gone');
REVOKE USAGE ON SCHEMA idempotency FROM regress_idem_gone;
DROP ROLE regress_idem_gone;
CREATE ROLE regress_idem_gone;
GRANT USAGE ON SCHEMA idempotency TO regress_idem_gone;
SET ROLE regress_idem_gone;
SELECT kind FROM idem_begin('orders', 'k', '{}');
RESET ROLE;
SELECT count(*) AS grants_to_a_dropped_role FROM idem_namespace_grant
WHERE namespace = 'orders' AND grantee::text ~ '^[0-9]+$';
SELECT c.condition AS grant_dump_filter
FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS c(config, condition)
WHERE e.extname = 'idempotency' AND c.config = 'idem_namespace_grant'::regclass \gset
SELECT grantee AS dumped_grantee FROM idem_namespace_grant :grant_dump_filter AND namespace = 'orders';
REVOKE USAGE ON SCHEMA idempotency FROM regress_idem_gone;
DROP ROLE regress_idem_gone;
DELETE FROM idem_namespace_grant WHERE grantee::text ~ '^[0-9]+$';

-- Changing hash_keys or store_request, or dropping, must see every record:
-- READ COMMITTED only.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT idem_namespace_configure('hashed-later', hash_keys => true);
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT idem_namespace_configure('kept', store_request => false);
ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT idem_namespace_drop('tiny');
ROLLBACK;

-- A lease cannot be removed while a claim made under it is in progress:
-- nothing could take that claim over until its replay window ended.
SELECT namespace FROM idem_namespace_configure('batch', in_progress_lease => '1 hour');
BEGIN;
SELECT kind, fence AS job_fence FROM idem_begin('batch', 'job-1', '{}') \gset
COMMIT;
SELECT idem_namespace_configure('batch');
SELECT in_progress_lease FROM idem_namespaces WHERE namespace = 'batch';
-- (Its holder ends it with the claim's fence: without one, a transition
-- acts only on a claim of its own transaction.)
SELECT idem_fail_transient('batch', 'job-1');
SELECT idem_fail_transient('batch', 'job-1', :job_fence);
SELECT namespace, in_progress_lease FROM idem_namespace_configure('batch');

-- Dropping: refused while records exist; grants go with the namespace.
SELECT idem_namespace_drop('users');
DELETE FROM idempotency_record WHERE namespace = 'orders';
SELECT idem_namespace_drop('orders') AS dropped, idem_namespace_drop('orders') AS again;
SELECT count(*) AS grants_left FROM idem_namespace_grant WHERE namespace = 'orders';

-- Administration is the owner's: PUBLIC may not call it.
SELECT p.proname, has_function_privilege('regress_idem_app', p.oid, 'EXECUTE') AS app_may_call
FROM pg_proc p WHERE p.pronamespace IN ('idempotency'::regnamespace, 'idempotency_internal'::regnamespace)
  AND p.proname IN ('idem_namespace_configure', 'idem_namespace_drop', 'idem_grant', 'idem_revoke',
                    'idem_purge', 'idem_purge_batches', 'idem_namespace_changed', 'idem_lock_namespace')
ORDER BY 1;
SELECT has_table_privilege('regress_idem_app', 'idem_namespaces', 'SELECT') AS app_reads_registry,
       has_table_privilege('pg_monitor', 'idem_namespaces', 'SELECT') AS monitor_reads_registry;
SELECT idempotency_internal.idem_namespace_changed();

DELETE FROM idempotency_record;
DELETE FROM idem_namespace_config;
DROP OWNED BY regress_idem_app;
DROP ROLE regress_idem_app;
