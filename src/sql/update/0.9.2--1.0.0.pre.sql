-- update/0.9.2--1.0.0.pre.sql: what the update to 1.0.0 changes before it
-- (re)creates every function and view from the sources: the plumbing moves
-- to idempotency_internal, the defaults move into idem_defaults, and what
-- 1.0.0 no longer has goes. No system catalog is written.

-- Load the library first: until then a value a session set for one of its
-- settings is a placeholder any role may set, and defaults.sql reads them.
SELECT @extschema@.idem_parse('update', 'k');

\ir ../schema.sql

-- The plumbing moves, with its grants.
ALTER FUNCTION @extschema@.idem_namespace_changed() SET SCHEMA idempotency_internal;
ALTER FUNCTION @extschema@.idem_namespace_config_locked() SET SCHEMA idempotency_internal;
ALTER FUNCTION @extschema@.idem_refuse_dropping_a_store() SET SCHEMA idempotency_internal;
ALTER FUNCTION @extschema@.idem_store_problem(regclass) SET SCHEMA idempotency_internal;
ALTER FUNCTION @extschema@.idem_store_purge(regclass, integer) SET SCHEMA idempotency_internal;
ALTER FUNCTION @extschema@.idem_store_forget_requests(regclass, text) SET SCHEMA idempotency_internal;
ALTER FUNCTION @extschema@.idem_store_count(regclass, text, boolean) SET SCHEMA idempotency_internal;
ALTER FUNCTION @extschema@.idem_store_stats(regclass) SET SCHEMA idempotency_internal;
ALTER FUNCTION @extschema@.idem_shape_mismatch(jsonb, regtype, text) SET SCHEMA idempotency_internal;
ALTER FUNCTION @extschema@.idem_stats_counters() SET SCHEMA idempotency_internal;
ALTER FUNCTION @extschema@.idem_stats_released_keys() SET SCHEMA idempotency_internal;
ALTER FUNCTION @extschema@.idem_stats_recovery() SET SCHEMA idempotency_internal;
ALTER FUNCTION @extschema@.idem_stats_stores_skipped() SET SCHEMA idempotency_internal;
ALTER FUNCTION @extschema@.idem_stats_count_purged(bigint) SET SCHEMA idempotency_internal;
ALTER FUNCTION @extschema@.idem_namespace_stats_figures() SET SCHEMA idempotency_internal;
ALTER TABLE @extschema@.idem_lock_secret SET SCHEMA idempotency_internal;

-- Gone in 1.0.0: the settings check of the registry functions (they read
-- idem_defaults now), and the fence sequence 0.5.0 used (dumps from before
-- 0.9 restore once their source is updated to 0.9.x first).
DROP FUNCTION @extschema@.idem_trusted_settings();
DROP SEQUENCE @extschema@.idem_fence_seq;

\ir ../defaults.sql
-- The row, with the values of the server settings that said these defaults
-- until 1.0.0, as they stand where the update runs (the server's, this
-- database's and this role's; a session cannot set them), in their base
-- units, when any differs from the built-in default: an installation keeps
-- the defaults it ran with. Other databases' and roles' values are named
-- below.
INSERT INTO @extschema@.idem_defaults (replay_window, in_progress_lease, store_request, max_payload_bytes, in_flight_wait,
                           require_registered)
SELECT coalesce(pg_catalog.make_interval(secs => s.replay_window), interval '24 hours'),
       coalesce(pg_catalog.make_interval(secs => s.in_progress_lease), interval '0'),
       coalesce(s.store_request, true),
       coalesce(s.max_payload_bytes, 16777216),
       coalesce(pg_catalog.make_interval(secs => s.in_flight_wait / 1000.0), interval '0'),
       coalesce(s.require_registered, false)
FROM (SELECT pg_catalog.max(g.setting) FILTER (WHERE g.name OPERATOR(pg_catalog.=) 'idempotency.replay_window')::pg_catalog.float8 AS replay_window,
             pg_catalog.max(g.setting) FILTER (WHERE g.name OPERATOR(pg_catalog.=) 'idempotency.in_progress_lease')::pg_catalog.float8 AS in_progress_lease,
             pg_catalog.max(g.setting) FILTER (WHERE g.name OPERATOR(pg_catalog.=) 'idempotency.store_request')::boolean AS store_request,
             pg_catalog.max(g.setting) FILTER (WHERE g.name OPERATOR(pg_catalog.=) 'idempotency.max_payload_bytes')::integer AS max_payload_bytes,
             pg_catalog.max(g.setting) FILTER (WHERE g.name OPERATOR(pg_catalog.=) 'idempotency.in_flight_wait')::pg_catalog.float8 AS in_flight_wait,
             pg_catalog.max(g.setting) FILTER (WHERE g.name OPERATOR(pg_catalog.=) 'idempotency.require_registered_namespace')::boolean AS require_registered
      FROM pg_catalog.pg_settings g WHERE g.name OPERATOR(pg_catalog.~~) 'idempotency.%') s
WHERE (s.replay_window, s.in_progress_lease, s.store_request, s.max_payload_bytes, s.in_flight_wait, s.require_registered)
      IS DISTINCT FROM (86400::pg_catalog.float8, 0::pg_catalog.float8, true, 16777216, 0::pg_catalog.float8, false);
CREATE TRIGGER idem_defaults_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.idem_defaults
    FOR EACH STATEMENT EXECUTE FUNCTION idempotency_internal.idem_namespace_changed();

-- Values of those settings that other databases or roles set are named:
-- they no longer apply, and the namespaces they meant want them as their
-- own settings (idem_namespace_configure) or in idem_defaults.
DO $settings$
DECLARE
    x record;
BEGIN
    FOR x IN
        SELECT coalesce('database ' || pg_catalog.quote_ident(d.datname), 'every database')
               || coalesce(', role ' || pg_catalog.quote_ident(r.rolname), '') AS place, c.setting
        FROM pg_catalog.pg_db_role_setting s
        CROSS JOIN LATERAL pg_catalog.unnest(s.setconfig) c(setting)
        LEFT JOIN pg_catalog.pg_database d ON d.oid = s.setdatabase
        LEFT JOIN pg_catalog.pg_roles r ON r.oid = s.setrole
        WHERE c.setting ~ '^idempotency\.(replay_window|in_flight_wait|store_request|max_payload_bytes|in_progress_lease|require_registered_namespace)='
        ORDER BY 1, 2
    LOOP
        RAISE WARNING 'idempotency 1.0.0: % sets % , which no longer applies', x.place, x.setting
            USING DETAIL = 'From 1.0.0 a namespace''s settings come from the registry: idem_namespace_configure for one namespace, idem_namespace_defaults for those that set none.',
                  HINT = 'Move the value there, then remove it with ALTER DATABASE / ALTER ROLE ... RESET.';
    END LOOP;
END;
$settings$;
