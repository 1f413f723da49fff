-- citus.sql: stores Citus distributes: the registry as reference tables,
-- and the entry points Citus delegates (what Citus says of a table is each
-- edition's idem_store_distribution).

-- Makes the registry (idem_namespace_config, idem_namespace_grant) Citus
-- reference tables, so that every node reads the same bindings, settings
-- and grants, and every change reaches every node in its transaction; run
-- again, it writes every row again. Rows are written one by one with their
-- roles and tables by name: Citus copies a table's existing rows, and the
-- rows it places on a node added later, by OID, and OIDs differ between
-- nodes. Run it on the coordinator, once Citus has its workers, and again
-- after adding a node.
CREATE OR REPLACE FUNCTION idem_distribute_registry()
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    configs @extschema@.idem_namespace_config[];
    grants @extschema@.idem_namespace_grant[];
    c @extschema@.idem_namespace_config;
    g @extschema@.idem_namespace_grant;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_extension e WHERE e.extname = 'citus') THEN
        RAISE EXCEPTION 'Citus is not installed in this database'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'idem_distribute_registry makes the idempotency registry Citus reference tables.';
    END IF;
    IF (SELECT l.groupid FROM pg_dist_local_group l) <> 0 THEN
        RAISE EXCEPTION 'idem_distribute_registry runs on the Citus coordinator'
            USING ERRCODE = 'feature_not_supported';
    END IF;
    configs := ARRAY(SELECT c0 FROM @extschema@.idem_namespace_config c0 ORDER BY c0.namespace);
    grants := ARRAY(SELECT g0 FROM @extschema@.idem_namespace_grant g0 ORDER BY g0.namespace, g0.grantee::text);
    DELETE FROM @extschema@.idem_namespace_grant;
    DELETE FROM @extschema@.idem_namespace_config;
    IF @extschema@.idem_store_distribution('@extschema@.idem_namespace_config') IS NULL THEN
        -- A reference table cannot be referenced by a local one while it is
        -- made: the foreign key goes (idem_namespace_drop deletes the
        -- grants itself). The registry's triggers then exist on every
        -- node's placement, where they tell that node's backends.
        ALTER TABLE @extschema@.idem_namespace_grant DROP CONSTRAINT IF EXISTS idem_namespace_grant_namespace_fkey;
        PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
        PERFORM create_reference_table('@extschema@.idem_namespace_config');
        PERFORM create_reference_table('@extschema@.idem_namespace_grant');
    END IF;
    FOREACH c IN ARRAY configs LOOP
        EXECUTE format('INSERT INTO @extschema@.idem_namespace_config (namespace, replay_window, in_progress_lease,'
                       ' store_request, hash_keys, max_payload_bytes, configured_at, store, store_name,'
                       ' fingerprint_ignore)'
                       ' VALUES (%L, %L, %L, %L, %L, %L, %L, %L::pg_catalog.regclass, %L, %L::pg_catalog.text[])',
                       c.namespace, c.replay_window, c.in_progress_lease, c.store_request, c.hash_keys,
                       c.max_payload_bytes, c.configured_at, c.store::text,
                       (SELECT format('%I.%I', n.nspname, t.relname) FROM pg_class t
                        JOIN pg_namespace n ON n.oid = t.relnamespace WHERE t.oid = c.store),
                       c.fingerprint_ignore);
    END LOOP;
    FOREACH g IN ARRAY grants LOOP
        CONTINUE WHEN g.grantee::text ~ '^[0-9]+$';   -- a dropped role's: never handed on
        EXECUTE format('INSERT INTO @extschema@.idem_namespace_grant (namespace, grantee, granted_at, grantee_name)'
                       ' VALUES (%L, %L::pg_catalog.regrole, %L, %L)', g.namespace, g.grantee::text, g.granted_at,
                       (SELECT r.rolname FROM pg_roles r WHERE r.oid = g.grantee));
    END LOOP;
END;
$$;

COMMENT ON FUNCTION idem_distribute_registry() IS
'Makes the idempotency registry Citus reference tables (or writes their rows again, by name)';


-- Creates the functions through which a service calls a store Citus
-- distributes, in the store's schema and owned by the caller, and
-- distributes them with the store: Citus runs each call on the node of the
-- shard that its key (or namespace) routes to, inside a transaction block
-- too (force_delegation). <table>_begin, <table>_commit,
-- <table>_fail_permanent, <table>_fail_transient, <table>_extend_lease and
-- <table>_record_point take the arguments of the idem_ functions of those
-- names (the last two since 0.9.0); on a store distributed by namespace,
-- <table>_begin_batch those of idem_begin_batch (0.8.0). Those that exist
-- are kept: called again after an update, it makes the ones the new
-- release adds.
CREATE OR REPLACE FUNCTION idem_create_entry_points(store regclass)
RETURNS SETOF regprocedure
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    routing text := @extschema@.idem_store_distribution(store);
    schema_name text;
    table_name text;
    f record;
    made regprocedure;
BEGIN
    IF store IS NULL THEN
        RAISE EXCEPTION 'idempotency store must not be null' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF routing IS NULL OR routing = 'other' THEN
        RAISE EXCEPTION '% is not a store Citus distributes by key_value or by namespace', store
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'A store is hash-distributed by key_value or by namespace, with one copy of each shard.',
                  HINT = 'Distribute it first: SELECT create_distributed_table(''' || store::text || ''', ''key_value'') with citus.shard_replication_factor = 1 (docs/scale-out.md).';
    END IF;
    SELECT n.nspname, t.relname INTO schema_name, table_name
    FROM pg_class t JOIN pg_namespace n ON n.oid = t.relnamespace WHERE t.oid = store;
    IF octet_length(table_name || '_fail_permanent') > 63 THEN
        RAISE EXCEPTION 'the name of store % is too long for its entry points', store
            USING ERRCODE = 'name_too_long',
                  DETAIL = format('%s would be longer than 63 bytes, which PostgreSQL would shorten: two entry points could get one name.',
                                  table_name || '_fail_permanent'),
                  HINT = 'Give the table a name of at most 48 bytes (ALTER TABLE ... RENAME TO).';
    END IF;
    FOR f IN
        SELECT * FROM (VALUES
            ('begin', 'namespace text, key text, request jsonb, replay_window interval DEFAULT NULL, in_flight_wait interval DEFAULT NULL',
             'text,text,jsonb,interval,interval', '@extschema@.idem_outcome',
             'RETURN @extschema@.idem_begin(namespace, key, request, replay_window, in_flight_wait);'),
            ('commit', 'namespace text, key text, result jsonb, fence bigint DEFAULT NULL',
             'text,text,jsonb,bigint', 'void', 'PERFORM @extschema@.idem_commit(namespace, key, result, fence);'),
            ('fail_permanent', 'namespace text, key text, error jsonb, fence bigint DEFAULT NULL',
             'text,text,jsonb,bigint', 'void', 'PERFORM @extschema@.idem_fail_permanent(namespace, key, error, fence);'),
            ('fail_transient', 'namespace text, key text, fence bigint DEFAULT NULL',
             'text,text,bigint', 'void', 'PERFORM @extschema@.idem_fail_transient(namespace, key, fence);'),
            -- A holder's heartbeat and recovery point (0.9.0).
            ('extend_lease', 'namespace text, key text, fence bigint',
             'text,text,bigint', 'timestamptz', 'RETURN @extschema@.idem_extend_lease(namespace, key, fence);'),
            ('record_point', 'namespace text, key text, fence bigint, point text, state jsonb DEFAULT NULL',
             'text,text,bigint,text,jsonb', 'timestamptz',
             'RETURN @extschema@.idem_record_point(namespace, key, fence, point, state);'),
            -- 1.0.0's recovery point, the fence last.
            ('save_point', 'namespace text, key text, point text, state jsonb, fence bigint',
             'text,text,text,jsonb,bigint', 'timestamptz',
             'RETURN @extschema@.idem_save_point(namespace, key, point, state, fence);'),
            -- A batch's keys are on one node only in a store distributed by
            -- namespace (one tenant's keys); it answers an array, so that
            -- Citus delegates the call as it delegates the others.
            ('begin_batch', 'namespace text, keys text[], requests jsonb[], replay_window interval DEFAULT NULL, in_flight_wait interval DEFAULT NULL',
             'text,text[],jsonb[],interval,interval', '@extschema@.idem_outcome[]',
             'RETURN ARRAY(SELECT o FROM @extschema@.idem_begin_batch(namespace, keys, requests, replay_window, in_flight_wait) o);'))
            AS v(operation, arguments, types, returns, body)
        WHERE v.operation <> 'begin_batch' OR routing = 'namespace'
    LOOP
        -- One made before (by an earlier release, which made fewer) is kept,
        -- and distributed again; any other function of that name is refused.
        made := to_regprocedure(format('%I.%I(%s)', schema_name, table_name || '_' || f.operation, f.types));
        IF made IS NULL THEN
            EXECUTE format('CREATE FUNCTION %I.%I(%s) RETURNS %s LANGUAGE plpgsql VOLATILE AS %L',
                           schema_name, table_name || '_' || f.operation, f.arguments, f.returns,
                           'BEGIN ' || f.body || ' END');
            made := format('%I.%I(%s)', schema_name, table_name || '_' || f.operation, f.types)::regprocedure;
        ELSIF NOT EXISTS (SELECT FROM pg_proc p
                          WHERE p.oid = made AND p.proowner = (SELECT r.oid FROM pg_roles r WHERE r.rolname = current_user)
                            AND p.prorettype = f.returns::regtype
                            AND p.prolang = (SELECT l.oid FROM pg_language l WHERE l.lanname = 'plpgsql')
                            AND p.prosrc = 'BEGIN ' || f.body || ' END') THEN
            RAISE EXCEPTION 'function % already exists and is not the entry point idem_create_entry_points makes', made
                USING ERRCODE = 'duplicate_function',
                      DETAIL = 'It has another owner, return type, language or body: calls to it would not reach the store.',
                      HINT = 'Called by another role than the one that made the entry points (a superuser too)? Call it as that role (SET ROLE). Otherwise drop or rename it, then call idem_create_entry_points again.';
        END IF;
        PERFORM create_distributed_function(made,
                                            CASE routing WHEN 'key_value' THEN 'key' ELSE 'namespace' END,
                                            colocate_with := store::text, force_delegation := true);
        RETURN NEXT made;
    END LOOP;
END;
$$;

COMMENT ON FUNCTION idem_create_entry_points(regclass) IS
'Creates a Citus-distributed store''s functions, delegated to the node of each call''s shard';
