-- settings: one source per setting (1.0.0). A namespace's settings come
-- from the registry, and those of namespaces that set none from
-- idem_defaults (idem_namespace_defaults); a call passes replay_window and
-- in_flight_wait, which may only narrow what its namespace allows. The
-- server settings that said the defaults until 0.9 still exist for a 0.9
-- schema not yet updated, and still refuse a session (55P02: a session's
-- value outlives its transaction and would reach the next client of a
-- pooled connection), but a 1.0 schema reads none of them.
-- track_counters, which shapes only the counters, stays settable.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
RESET client_min_messages;
-- The sessions after each \c find the functions through the database's search_path.
ALTER DATABASE :"DBNAME" SET search_path = public, idempotency;
\c
DELETE FROM idempotency_record;
DELETE FROM idem_namespace_config;
SELECT namespace FROM idem_namespace_configure('settings');

-- Every form of setting from a session is refused, and the value stays.
SET idempotency.replay_window = '1s';
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SET LOCAL idempotency.in_flight_wait = '3s';
ROLLBACK;
SELECT set_config('idempotency.store_request', 'off', false);
SET idempotency.max_payload_bytes = 32;
SET idempotency.require_registered_namespace = on;
SET idempotency.in_progress_lease = '5min';
\echo :LAST_ERROR_SQLSTATE
CREATE FUNCTION pg_temp.short_window() RETURNS interval LANGUAGE sql
SET idempotency.replay_window = '1s' AS $$ SELECT current_setting('idempotency.replay_window')::interval $$;
SELECT name, setting, source FROM pg_settings
WHERE name LIKE 'idempotency.%' AND name <> 'idempotency.track_counters' ORDER BY name;
SET idempotency.track_counters = off;
RESET idempotency.track_counters;

-- A role that is not a superuser is refused as before, by PostgreSQL.
CREATE ROLE regress_idem_settings;
SET ROLE regress_idem_settings;
SET idempotency.replay_window = '1h';
RESET ROLE;
DROP ROLE regress_idem_settings;

-- in_progress_lease is server-wide: not per database or role either.
SELECT current_database() AS db \gset
ALTER DATABASE :"db" SET idempotency.in_progress_lease = '5min';

-- What a superuser sets for the database no longer reaches a record: the
-- defaults are the registry's.
ALTER DATABASE :"db" SET idempotency.replay_window = '2h';
ALTER DATABASE :"db" SET idempotency.store_request = off;
\c
LOAD 'idempotency';
BEGIN;
SELECT kind FROM idem_begin('settings', 'by-database', '{"card": "4111"}');
SELECT idem_commit('settings', 'by-database', '{}');
COMMIT;
SELECT key_value, expires_at - created_at AS replay_window, request_payload IS NULL AS request_dropped
FROM idempotency_record WHERE namespace = 'settings';

-- idem_namespace_defaults sets them, for every namespace that sets none.
SELECT replay_window, in_progress_lease, store_request, max_payload_bytes, in_flight_wait, require_registered
FROM idem_namespace_defaults(replay_window => '2h', store_request => false, max_payload_bytes => 64,
                             in_flight_wait => '10ms', require_registered => true);
BEGIN;
SELECT kind FROM idem_begin('settings', 'by-defaults', '{"card": "4111"}');
SELECT idem_commit('settings', 'by-defaults', '{}');
COMMIT;
SELECT key_value, expires_at - created_at AS replay_window, request_payload IS NULL AS request_dropped
FROM idempotency_record WHERE namespace = 'settings' AND key_value = 'by-defaults';
SELECT kind FROM idem_begin('settings', 'large', jsonb_build_object('text', repeat('x', 100)));
SELECT kind FROM idem_begin('unregistered', 'k', '{}');
\echo :LAST_ERROR_SQLSTATE
-- A NULL argument keeps the value; a bad one is refused and changes nothing.
SELECT replay_window FROM idem_namespace_defaults();
SELECT idem_namespace_defaults(replay_window => '-1 hour');
SELECT idem_namespace_defaults(in_progress_lease => '100 years');
SELECT idem_namespace_defaults(max_payload_bytes => 0);
SELECT idem_namespace_defaults(in_flight_wait => '25 days');
\echo :LAST_ERROR_SQLSTATE
SELECT replay_window, store_request, max_payload_bytes FROM idem_defaults;
SELECT replay_window FROM idem_namespace_defaults(replay_window => '24h', store_request => true,
    max_payload_bytes => 16777216, in_flight_wait => '0', require_registered => false);

-- A session that set a value before the library was loaded gets a warning
-- when it loads, and the database's value (which a 1.0 schema reads no more).
\c
SET idempotency.replay_window = '1s';
BEGIN;
SELECT kind FROM idem_begin('settings', 'set-before-load', '{}');
SHOW idempotency.replay_window;
ROLLBACK;

ALTER DATABASE :"db" RESET idempotency.replay_window;
ALTER DATABASE :"db" RESET idempotency.store_request;
\c

-- idem_namespace_configure reads the default store_request from
-- idem_defaults: a value the session SET is refused, and the namespace's
-- requests are kept (switching store_request off would remove them).
SELECT namespace FROM idem_namespace_configure('kept', store_request => NULL);
BEGIN;
SELECT kind FROM idem_begin('kept', 'k-1', '{"card": "4111"}');
SELECT idem_commit('kept', 'k-1', '{}');
COMMIT;
\c
SET idempotency.store_request = off;
SELECT store_request FROM idem_namespace_configure('kept');
SELECT count(request_payload) AS requests_kept FROM idempotency_record WHERE namespace = 'kept';
\c

-- A call passes its own window and in-flight wait. The wait must be zero or
-- more in every part, and at most 2147483647 ms, as the setting.
BEGIN;
SELECT kind FROM idem_begin('settings', 'by-call', '{}', replay_window => '3h', in_flight_wait => '0');
SELECT kind FROM idem_begin_typed('settings', 'typed-by-call', 42, '4h', '1s');
SELECT idem_commit('settings', k, '{}') FROM unnest(ARRAY['by-call', 'typed-by-call']) k;
COMMIT;
SELECT key_value, expires_at - created_at AS replay_window FROM idempotency_record
WHERE namespace = 'settings' AND key_value LIKE '%by-call' ORDER BY 1;
SELECT kind FROM idem_begin('settings', 'w', '{}', in_flight_wait => '-1 second');
SELECT kind FROM idem_begin('settings', 'w', '{}', in_flight_wait => '1 day -1 hour');
SELECT kind FROM idem_begin('settings', 'w', '{}', in_flight_wait => '25 days');
\echo :LAST_ERROR_SQLSTATE

-- The defaults' guard and scrub cover unregistered namespaces too, which
-- follow the defaults as much as registered ones do: the default lease is
-- not removed under an unregistered namespace's claim, and switching
-- store_request off removes the requests it kept.
SELECT in_progress_lease FROM idem_namespace_defaults(in_progress_lease => '1 hour');
SELECT kind FROM idem_begin('unregistered', 'job', '{"a": 1}');
SELECT in_progress_lease FROM idem_namespace_defaults(in_progress_lease => '0');
DELETE FROM idempotency_record WHERE namespace = 'unregistered';
BEGIN;
SELECT kind FROM idem_begin('unregistered', 'pay', '{"card": "4111"}');
SELECT idem_commit('unregistered', 'pay', '{}');
COMMIT;
SELECT store_request FROM idem_namespace_defaults(store_request => false, in_progress_lease => '0');
SELECT namespace, request_payload FROM idempotency_record WHERE namespace = 'unregistered';
SELECT store_request FROM idem_namespace_defaults(store_request => true);
SELECT kind, recorded_request FROM idem_begin('unregistered', 'pay', '{"card": "other"}');
DELETE FROM idempotency.idem_defaults;

DELETE FROM idempotency_record;
SELECT idem_namespace_drop('settings'), idem_namespace_drop('kept');
ALTER DATABASE :"DBNAME" RESET search_path;
