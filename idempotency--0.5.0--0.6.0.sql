/* idempotency--0.5.0--0.6.0.sql: release 0.6.0: fences drawn at random, so
   that no copy of the database (a restored dump, point-in-time recovery, a
   promoted standby, a logical replica) can repeat one; the store's settings
   never taken from a session, so that nothing one client of a pooled
   connection sets reaches another's record; idem_begin's in_flight_wait
   argument; and the smaller findings of the review of 0.5.0. */

\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.6.0'" to load this file. \quit

-- The store -------------------------------------------------------------------

-- Fences are drawn at random by the library from 0.6.0 on: a sequence's
-- position travels with every copy of the database, and a copy then drew
-- the fences the original had already handed out. The sequence stays, as
-- the install script makes it (see there), but is no longer one of the
-- tables pg_dump dumps (pg_extension.extconfig): recreated, which takes it
-- off that list (taken out of the extension first: a dropped member stays
-- on it).
ALTER EXTENSION idempotency DROP SEQUENCE idem_fence_seq;
DROP SEQUENCE idem_fence_seq;
CREATE SEQUENCE idem_fence_seq AS bigint START 4294967296 MINVALUE 4294967296 NO CYCLE;
REVOKE ALL ON SEQUENCE idem_fence_seq FROM PUBLIC;

-- idem_begin takes the in-flight wait per call: the setting of that name is
-- no longer taken from a session. A new symbol: a session still running an
-- older library fails cleanly (it would ignore the argument). Dropped and
-- created again, they keep the privileges an operator gave the old ones:
-- noted here (for this transaction), given back below.
SELECT pg_catalog.set_config('idem_update.begin_acl',
                             coalesce((SELECT p.proacl::text FROM pg_catalog.pg_proc p
                                       WHERE p.oid = '@extschema@.idem_begin(text,text,jsonb,interval)'::pg_catalog.regprocedure), ''),
                             true),
       pg_catalog.set_config('idem_update.begin_typed_acl',
                             coalesce((SELECT p.proacl::text FROM pg_catalog.pg_proc p
                                       WHERE p.oid = '@extschema@.idem_begin_typed(text,text,anyelement,interval)'::pg_catalog.regprocedure), ''),
                             true);
DROP FUNCTION idem_begin_typed(text, text, anyelement, interval);
DROP FUNCTION idem_begin(text, text, jsonb, interval);

-- replay_window and in_flight_wait, when given, are this call's (the
-- settings of those names are never taken from a session: see
-- docs/api.md). Every claim (a fresh begin or a takeover) draws a fence at
-- random from [2^32, 2^63), so two claims of one key, in this database or
-- in any copy of it, have the same fence with negligible probability.
CREATE FUNCTION idem_begin(namespace text, key text, request jsonb, replay_window interval DEFAULT NULL,
                           in_flight_wait interval DEFAULT NULL)
RETURNS @extschema@.idem_outcome
AS 'MODULE_PATHNAME', 'idem_begin_0_6'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_begin(text, text, jsonb, interval, interval) IS
'Starts an idempotent operation: fresh (go ahead), in_flight, prior_result, prior_error or mismatch';

CREATE FUNCTION idem_begin_typed(namespace text, key text, request anyelement, replay_window interval DEFAULT NULL,
                                 in_flight_wait interval DEFAULT NULL)
RETURNS @extschema@.idem_outcome
LANGUAGE sql VOLATILE PARALLEL UNSAFE
AS $$ SELECT @extschema@.idem_begin(namespace, key, pg_catalog.to_jsonb(request), replay_window, in_flight_wait) $$;

COMMENT ON FUNCTION idem_begin_typed(text, text, anyelement, interval, interval) IS
'idem_begin for a value of any type, fingerprinted as to_jsonb(request)';

-- The privileges the old functions had (NULL: the defaults, as a new
-- installation has): each grantee's EXECUTE again, and PUBLIC's taken away
-- when it did not have it. The initial privileges end as a new
-- installation's (none recorded), so that a dump keeps the operator's.
DO $acl$
DECLARE
    f record;
    x record;
BEGIN
    FOR f IN SELECT * FROM (VALUES
            ('@extschema@.idem_begin(text,text,jsonb,interval,interval)', 'idem_update.begin_acl'),
            ('@extschema@.idem_begin_typed(text,text,anyelement,interval,interval)', 'idem_update.begin_typed_acl'))
            AS v(fn, setting)
    LOOP
        CONTINUE WHEN coalesce(pg_catalog.current_setting(f.setting, true), '') = '';
        IF NOT EXISTS (SELECT FROM pg_catalog.aclexplode(pg_catalog.current_setting(f.setting)::pg_catalog.aclitem[]) a
                       WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE') THEN
            EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f.fn);
        END IF;
        FOR x IN SELECT a.grantee, a.is_grantable
                 FROM pg_catalog.aclexplode(pg_catalog.current_setting(f.setting)::pg_catalog.aclitem[]) a
                 WHERE a.privilege_type = 'EXECUTE' AND a.grantee <> 0
                   AND a.grantee <> (SELECT p.proowner FROM pg_catalog.pg_proc p WHERE p.oid = f.fn::pg_catalog.regprocedure)
        LOOP
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I%s', f.fn,
                                      (SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid = x.grantee),
                                      CASE WHEN x.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
        END LOOP;
        DELETE FROM pg_catalog.pg_init_privs i
        WHERE i.classoid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND i.objoid = f.fn::pg_catalog.regprocedure;
    END LOOP;
END;
$acl$;

-- Stores the service owns ----------------------------------------------------

ALTER TABLE idem_namespace_config ADD COLUMN store regclass, ADD COLUMN store_name text;
-- The grantee's name as the grant was made: a node under Citus compares it
-- with what the OID names there (idem_distribute_registry).
ALTER TABLE idem_namespace_grant ADD COLUMN grantee_name text;
UPDATE idem_namespace_grant g SET grantee_name = r.rolname FROM pg_catalog.pg_roles r WHERE r.oid = g.grantee;

-- idem_grant records the grantee's name too.
CREATE OR REPLACE FUNCTION idem_grant(namespace text, role regrole)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ns ALIAS FOR namespace;
    granted boolean;
    role_name name;
BEGIN
    PERFORM @extschema@.idem_parse(ns, 'k');
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must not be null'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = 'Name the role that may use the namespace.';
    ELSIF role = 0 THEN
        RAISE EXCEPTION 'cannot grant an idempotency namespace to PUBLIC'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A namespace is granted to a role; make the roles that should use it members of that role.';
    ELSIF NOT EXISTS (SELECT FROM pg_roles r WHERE r.oid = role) THEN
        RAISE EXCEPTION 'role with OID % does not exist', role::oid USING ERRCODE = 'undefined_object';
    END IF;
    INSERT INTO @extschema@.idem_namespace_config (namespace) VALUES (ns) ON CONFLICT DO NOTHING;
    -- (With the role's name, which a node under Citus checks: idem_distribute_registry.)
    role_name := (SELECT r.rolname FROM pg_roles r WHERE r.oid = role);
    INSERT INTO @extschema@.idem_namespace_grant (namespace, grantee, grantee_name)
    VALUES (ns, role, role_name) ON CONFLICT DO NOTHING;
    granted := FOUND;
    EXECUTE format('GRANT USAGE ON SCHEMA @extschema@ TO %s', role);
    RETURN granted;
END;
$$;


-- A namespace's records may live in a table the service owns instead of
-- idempotency_record (idem_bind_store): created by idem_create_store or by
-- the service's own migration (docs/api.md gives the definition), with the
-- first twelve columns of idempotency_record, in its order, and a unique
-- index on (namespace, key_value). The store reads and writes it as the
-- table's owner.

-- Creates such a table, owned by the caller, with the primary key and the
-- expires_at index purge uses, and no privileges for PUBLIC. store is a
-- schema-qualified table name ('app.idem_records').
CREATE FUNCTION idem_create_store(store text)
RETURNS regclass
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    parts text[];
    qualified text;
BEGIN
    IF store IS NULL THEN
        RAISE EXCEPTION 'idempotency store name must not be null'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = 'Pass a schema-qualified table name, such as ''app.idem_records''.';
    END IF;
    parts := parse_ident(store);   -- raises 22023 for a malformed name
    IF array_length(parts, 1) <> 2 THEN
        RAISE EXCEPTION 'invalid idempotency store name: %', store
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A store''s name is schema-qualified (schema.table), so that it never depends on the search_path.';
    END IF;
    qualified := format('%I.%I', parts[1], parts[2]);
    EXECUTE format($ddl$CREATE TABLE %s (
        namespace       text COLLATE "C" NOT NULL,
        key_value       text COLLATE "C" NOT NULL,
        status          text NOT NULL,
        request_hash    bytea NOT NULL,
        request_payload jsonb,
        result_payload  jsonb,
        error_payload   jsonb,
        created_at      timestamptz NOT NULL,
        updated_at      timestamptz NOT NULL,
        expires_at      timestamptz NOT NULL,
        attempt         integer NOT NULL DEFAULT 1,
        fence           bigint,
        PRIMARY KEY (namespace, key_value))$ddl$, qualified);
    EXECUTE format('CREATE INDEX ON %s (expires_at)', qualified);
    EXECUTE format('REVOKE ALL ON %s FROM PUBLIC', qualified);
    RETURN qualified::regclass;
END;
$$;

COMMENT ON FUNCTION idem_create_store(text) IS
'Creates a table, owned by the caller, that a namespace can be bound to as its store';

-- Internal: what is wrong with a table as a store (NULL: nothing), and for
-- a table of an older store's shape, the ALTER TABLE that adds what it lacks.
CREATE FUNCTION idem_store_problem(store regclass, OUT problem text, OUT fix text)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_store_problem'
LANGUAGE C STABLE PARALLEL SAFE;

-- Internal: one chunk of purge from a store (NULL: the extension's table),
-- and the requests a namespace's records kept there removed, both as the
-- store table's owner: a delete or an update run as the extension's owner
-- would run that table's triggers with the extension owner's rights.
CREATE FUNCTION idem_store_purge(store regclass, batch_size integer)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idem_store_purge'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION idem_store_forget_requests(store regclass, namespace text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idem_store_forget_requests'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Internal: how many records (or, with in_progress_only, records in
-- progress) a namespace has in a store (NULL: the extension's table; 0 for
-- one that was dropped), and idem_namespace_stats's figures for a store:
-- both read the store as its owner, never as the extension's.
CREATE FUNCTION idem_store_count(store regclass, namespace text, in_progress_only boolean DEFAULT false)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idem_store_count'
LANGUAGE C STABLE PARALLEL UNSAFE;

CREATE FUNCTION idem_store_stats(store regclass)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'idem_store_stats'
LANGUAGE C STABLE PARALLEL UNSAFE;

REVOKE ALL ON FUNCTION idem_store_problem(regclass), idem_store_purge(regclass, integer),
                       idem_store_forget_requests(regclass, text), idem_store_count(regclass, text, boolean),
                       idem_store_stats(regclass)
    FROM PUBLIC;

-- Binds a namespace to a store: from now on its records are kept there, and
-- NULL binds it to the extension's table again. Binding needs the
-- privileges of the table's owner (the store writes the table with them),
-- and a table of a store's shape. The namespace's lock waits for its
-- begins; a namespace with records in its current store cannot move (its
-- retries would begin again): bind a new namespace, or copy the records over
-- first (docs/api.md).
CREATE FUNCTION idem_bind_store(namespace text, store regclass)
RETURNS regclass
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ns ALIAS FOR namespace;
    target regclass := nullif(store, '@extschema@.idempotency_record'::regclass);
    owner_role regrole;
    current_store regclass;
    problem text;
    fix text;
    routing text;
    target_name text;
    records bigint;
BEGIN
    PERFORM @extschema@.idem_parse(ns, 'k');
    IF target IS NOT NULL THEN
        SELECT t.relowner::regrole INTO owner_role FROM pg_class t WHERE t.oid = target;
        IF NOT pg_has_role(current_user, owner_role, 'USAGE') THEN
            RAISE EXCEPTION 'permission denied to bind idempotency namespace "%" to %', ns, target
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = format('Binding a store needs the privileges of its owner, %s: the store reads and writes the table as that role.', owner_role);
        END IF;
        IF target::oid IN (SELECT d.objid FROM pg_depend d
                           WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
                             AND d.refobjid = (SELECT e.oid FROM pg_extension e WHERE e.extname = 'idempotency')) THEN
            RAISE EXCEPTION 'cannot bind idempotency namespace "%" to %', ns, target
                USING ERRCODE = 'invalid_parameter_value', DETAIL = 'It is one of the extension''s own tables.';
        END IF;
        SELECT p.problem, p.fix INTO problem, fix FROM @extschema@.idem_store_problem(target) p;
        IF problem IS NOT NULL THEN
            RAISE EXCEPTION 'cannot bind idempotency namespace "%" to %', ns, target
                USING ERRCODE = 'invalid_table_definition', DETAIL = problem,
                      HINT = coalesce(fix, 'idem_create_store makes a table of a store''s shape; docs/api.md gives its definition.');
        END IF;
        routing := @extschema@.idem_store_distribution(target);
        IF routing = 'other' THEN
            RAISE EXCEPTION 'cannot bind idempotency namespace "%" to %', ns, target
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = 'Citus keeps it as a reference, local, single-shard, range or append table, or distributes it by another column than key_value or namespace.',
                      HINT = 'Distribute it with create_distributed_table(table, ''key_value'') or (table, ''namespace'') (docs/scale-out.md).';
        END IF;
        IF routing IS NULL AND @extschema@.idem_store_distribution('@extschema@.idem_namespace_config') IS NOT NULL THEN
            RAISE EXCEPTION 'cannot bind idempotency namespace "%" to %', ns, target
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = 'The registry is distributed by Citus (idem_distribute_registry), so every node reads the binding, and this table is on the coordinator only.',
                      HINT = 'Distribute the table first: SELECT create_distributed_table(''' || target::text || ''', ''key_value'') (docs/scale-out.md).';
        END IF;
        IF routing IS NOT NULL AND @extschema@.idem_store_distribution('@extschema@.idem_namespace_config') IS NULL THEN
            RAISE EXCEPTION 'cannot bind idempotency namespace "%" to %', ns, target
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = 'The store is distributed by Citus, and its calls run on the nodes of its shards, which read the registry too: it is on the coordinator only.',
                      HINT = 'Run SELECT idempotency.idem_distribute_registry() on the coordinator first.';
        END IF;
        IF routing = 'key_value' AND (SELECT c.hash_keys FROM @extschema@.idem_namespace_config c WHERE c.namespace = ns) THEN
            RAISE EXCEPTION 'cannot bind idempotency namespace "%" to %', ns, target
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = 'The namespace hashes its keys, and the store is distributed by key_value: a hashed key would be kept in the shard of its hash, not in the shard the key routes the call to.',
                      HINT = 'Distribute the store by namespace, or bind a namespace without hash_keys.';
        END IF;
    END IF;
    INSERT INTO @extschema@.idem_namespace_config (namespace) VALUES (ns) ON CONFLICT DO NOTHING;
    SELECT c.store INTO current_store FROM @extschema@.idem_namespace_config c WHERE c.namespace = ns FOR UPDATE;
    IF current_store IS NOT DISTINCT FROM target THEN
        RETURN target;
    END IF;
    -- Wait for the begins under way in the namespace, and keep new ones out
    -- until this transaction ends: then no record appears in the old store
    -- after it was counted.
    PERFORM @extschema@.idem_lock_namespace(ns);
    IF current_store IS NULL OR EXISTS (SELECT FROM pg_class t WHERE t.oid = current_store) THEN
        records := @extschema@.idem_store_count(current_store, ns);
        IF records > 0 THEN
            RAISE EXCEPTION 'cannot change the store of idempotency namespace "%"', ns
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = format('The namespace has %s record%s in %s; bound to another store, its retries would begin again.',
                                      records, CASE WHEN records = 1 THEN '' ELSE 's' END,
                                      coalesce(current_store, '@extschema@.idempotency_record'::regclass)),
                      HINT = 'Bind a new namespace, wait until the records have expired and been purged, or move them in the transaction that binds, as docs/api.md shows.';
        END IF;
    END IF;
    target_name := (SELECT format('%I.%I', n.nspname, t.relname) FROM pg_class t
                    JOIN pg_namespace n ON n.oid = t.relnamespace WHERE t.oid = target);
    UPDATE @extschema@.idem_namespace_config c
    SET store = target, configured_at = now(), store_name = target_name
    WHERE c.namespace = ns;
    RETURN target;
END;
$$;

COMMENT ON FUNCTION idem_bind_store(text, regclass) IS
'Keeps a namespace''s records in a table the service owns (NULL: the extension''s table)';

REVOKE ALL ON FUNCTION idem_bind_store(text, regclass) FROM PUBLIC;

-- A grant to a dropped role is left out of dumps (see idempotency--0.6.0.sql).
SELECT pg_catalog.pg_extension_config_dump('@extschema@.idem_namespace_grant',
    'WHERE EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) grantee)');

-- A table a namespace is bound to cannot be dropped (DROP TABLE, DROP
-- SCHEMA ... CASCADE, DROP OWNED): the namespace's records would go with it
-- and its retries begin again, and the registry would keep an OID that a
-- later table, or a restored dump, could give another table. Bind the
-- namespace elsewhere first. (The store calls still refuse a store that is
-- gone, for a drop made with event triggers off.)
CREATE FUNCTION idem_refuse_dropping_a_store()
RETURNS event_trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    bound record;
BEGIN
    IF to_regclass('@extschema@.idem_namespace_config') IS NULL THEN
        RETURN;   -- the registry itself is being replaced (a Citus conversion)
    END IF;
    -- On a Citus worker a drop is the coordinator's, relayed: the
    -- coordinator has checked it, and a query of the registry (a reference
    -- table) inside Citus's relayed command would be refused.
    IF EXISTS (SELECT FROM pg_extension e WHERE e.extname = 'citus') THEN
        IF (SELECT l.groupid FROM pg_dist_local_group l) <> 0 THEN
            RETURN;
        END IF;
    END IF;
    SELECT c.namespace, d.object_identity INTO bound
    FROM pg_event_trigger_dropped_objects() d
    JOIN @extschema@.idem_namespace_config c ON c.store::oid OPERATOR(pg_catalog.=) d.objid
    WHERE d.classid OPERATOR(pg_catalog.=) 'pg_class'::regclass AND d.objsubid OPERATOR(pg_catalog.=) 0
    ORDER BY c.namespace LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'cannot drop table %: idempotency namespace "%" is bound to it', bound.object_identity, bound.namespace
            USING ERRCODE = 'dependent_objects_still_exist',
                  DETAIL = 'The namespace''s records are kept there; dropped, its retries would begin again.',
                  HINT = 'Bind the namespace to another store with idem_bind_store, or drop the namespace with idem_namespace_drop once its records are gone.';
    END IF;
END;
$$;

REVOKE ALL ON FUNCTION idem_refuse_dropping_a_store() FROM PUBLIC;

CREATE EVENT TRIGGER idem_refuse_dropping_a_store ON sql_drop
    EXECUTE FUNCTION @extschema@.idem_refuse_dropping_a_store();

-- Citus ------------------------------------------------------------------------

-- How Citus distributes a table: NULL (it does not), 'key_value' or
-- 'namespace' (hash-distributed by that column), 'other'. What
-- pg_dist_partition already tells every role.
CREATE FUNCTION idem_store_distribution(store regclass)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_store_distribution'
LANGUAGE C STABLE PARALLEL SAFE;

-- Takes the namespace's lock in ExclusiveLock for an update of its row
-- that leaves configured_at as it was: idem_lock_namespace makes one under
-- Citus, where this runs on every node's placement of the registry, so
-- that a change that must see every record waits for the namespace's
-- begins on every node.
CREATE FUNCTION idem_namespace_config_locked()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idem_namespace_config_locked'
LANGUAGE C;

REVOKE ALL ON FUNCTION idem_namespace_config_locked() FROM PUBLIC;

CREATE TRIGGER idem_namespace_config_locked
    BEFORE UPDATE OR DELETE ON @extschema@.idem_namespace_config
    FOR EACH ROW EXECUTE FUNCTION @extschema@.idem_namespace_config_locked();

-- Makes the registry (idem_namespace_config, idem_namespace_grant) Citus
-- reference tables, so that every node reads the same bindings, settings
-- and grants, and every change reaches every node in its transaction; run
-- again, it writes every row again. Rows are written one by one with their
-- roles and tables by name: Citus copies a table's existing rows, and the
-- rows it places on a node added later, by OID, and OIDs differ between
-- nodes. Run it on the coordinator, once Citus has its workers, and again
-- after adding a node.
CREATE FUNCTION idem_distribute_registry()
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
                       ' store_request, hash_keys, max_payload_bytes, configured_at, store, store_name)'
                       ' VALUES (%L, %L, %L, %L, %L, %L, %L, %L::pg_catalog.regclass, %L)',
                       c.namespace, c.replay_window, c.in_progress_lease, c.store_request, c.hash_keys,
                       c.max_payload_bytes, c.configured_at, c.store::text,
                       (SELECT format('%I.%I', n.nspname, t.relname) FROM pg_class t
                        JOIN pg_namespace n ON n.oid = t.relnamespace WHERE t.oid = c.store));
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

REVOKE ALL ON FUNCTION idem_distribute_registry() FROM PUBLIC;

-- Creates the functions through which a service calls a store Citus
-- distributes, in the store's schema and owned by the caller, and
-- distributes them with the store: Citus runs each call on the node of the
-- shard that its key (or namespace) routes to, inside a transaction block
-- too (force_delegation). <table>_begin, <table>_commit,
-- <table>_fail_permanent and <table>_fail_transient take the arguments of
-- idem_begin, idem_commit, idem_fail_permanent and idem_fail_transient.
CREATE FUNCTION idem_create_entry_points(store regclass)
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
                  HINT = 'Distribute it first: SELECT create_distributed_table(''' || store::text || ''', ''key_value'') (docs/scale-out.md).';
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
             'text,text,bigint', 'void', 'PERFORM @extschema@.idem_fail_transient(namespace, key, fence);'))
            AS v(operation, arguments, types, returns, body)
    LOOP
        EXECUTE format('CREATE FUNCTION %I.%I(%s) RETURNS %s LANGUAGE plpgsql VOLATILE AS %L',
                       schema_name, table_name || '_' || f.operation, f.arguments, f.returns,
                       'BEGIN ' || f.body || ' END');
        made := format('%I.%I(%s)', schema_name, table_name || '_' || f.operation, f.types)::regprocedure;
        PERFORM create_distributed_function(made,
                                            CASE routing WHEN 'key_value' THEN 'key' ELSE 'namespace' END,
                                            colocate_with := store::text, force_delegation := true);
        RETURN NEXT made;
    END LOOP;
END;
$$;

COMMENT ON FUNCTION idem_create_entry_points(regclass) IS
'Creates a Citus-distributed store''s functions, delegated to the node of each call''s shard';


CREATE OR REPLACE FUNCTION idem_namespace_drop(namespace text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ns ALIAS FOR namespace;
    records bigint;
BEGIN
    PERFORM @extschema@.idem_parse(ns, 'k');
    PERFORM FROM @extschema@.idem_namespace_config c WHERE c.namespace = ns FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM @extschema@.idem_lock_namespace(ns);
    records := @extschema@.idem_store_count((SELECT c.store FROM @extschema@.idem_namespace_config c WHERE c.namespace = ns), ns);
    IF records > 0 THEN
        RAISE EXCEPTION 'cannot drop idempotency namespace "%"', ns
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('The namespace has %s record%s.', records, CASE WHEN records = 1 THEN '' ELSE 's' END),
                  HINT = 'Wait until they have expired and been purged.';
    END IF;
    -- (Explicitly: the registry as Citus reference tables has no foreign key.)
    DELETE FROM @extschema@.idem_namespace_grant g WHERE g.namespace = ns;
    DELETE FROM @extschema@.idem_namespace_config c WHERE c.namespace = ns;
    RETURN true;
END;
$$;

-- The registry with its grants, and each namespace's store.
CREATE OR REPLACE VIEW idem_namespaces AS
SELECT c.namespace, c.replay_window, c.in_progress_lease, c.store_request, c.hash_keys,
       c.max_payload_bytes,
       ARRAY(SELECT g.grantee FROM @extschema@.idem_namespace_grant g
             WHERE g.namespace = c.namespace ORDER BY g.grantee::text) AS grantees,
       c.configured_at, c.store
FROM @extschema@.idem_namespace_config c;

-- Purging every store ------------------------------------------------------------

CREATE OR REPLACE FUNCTION idem_purge(batch_size integer DEFAULT 10000, max_batches integer DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    total bigint := 0;
    batches integer := 0;
    n bigint;
    store regclass;
    problem text;
BEGIN
    IF batch_size IS NULL OR batch_size < 1 THEN
        RAISE EXCEPTION 'invalid purge batch size'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('batch_size must be a positive integer, not %s.', coalesce(batch_size::text, 'NULL'));
    END IF;
    IF max_batches < 1 THEN
        RAISE EXCEPTION 'invalid purge batch count'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('max_batches must be a positive integer or NULL, not %s.', max_batches);
    END IF;
    -- The extension's table first, then every table a namespace is bound to
    -- (one that was dropped has nothing left to purge). Each chunk is deleted
    -- by idem_store_purge, as its table's owner, under the server's lease
    -- and each namespace's.
    FOR store IN
        SELECT NULL::regclass
        UNION ALL
        (SELECT DISTINCT c.store FROM @extschema@.idem_namespace_config c
         WHERE c.store IS NOT NULL AND EXISTS (SELECT FROM pg_class t WHERE t.oid = c.store) ORDER BY 1)
    LOOP
        -- A store that can no longer be used (its shape changed) is
        -- skipped, so that the others are still purged.
        problem := (SELECT p.problem FROM @extschema@.idem_store_problem(store) p);
        IF problem IS NOT NULL THEN
            RAISE WARNING 'idempotency: cannot purge %: %', store, problem;
            CONTINUE;
        END IF;
        LOOP
            n := @extschema@.idem_store_purge(store, batch_size);
            total := total + n;
            IF n > 0 THEN
                batches := batches + 1;   -- max_batches counts the chunks that deleted something
            END IF;
            EXIT WHEN n < batch_size OR batches = max_batches;
        END LOOP;
        EXIT WHEN batches = max_batches;
    END LOOP;
    PERFORM @extschema@.idem_stats_count_purged(total);
    RETURN total;
END;
$$;

CREATE OR REPLACE PROCEDURE idem_purge_batches(batch_size integer DEFAULT 10000)
LANGUAGE plpgsql
AS $$
DECLARE
    n bigint;
    batches integer := 0;
    total bigint := 0;
BEGIN
    LOOP
        n := @extschema@.idem_purge(batch_size, 1);
        COMMIT;
        EXIT WHEN n OPERATOR(pg_catalog.=) 0;   -- every store is purged (one chunk may end a store, not all)
        total := total OPERATOR(pg_catalog.+) n;
        batches := batches OPERATOR(pg_catalog.+) 1;
    END LOOP;
    RAISE NOTICE 'idempotency: purged % expired records in % batches', total, batches;
END;
$$;

-- Statistics per namespace and store ----------------------------------------------

-- One row per namespace and store, counted from each table (full scans: for
-- an operator or a monitoring job once a minute, not for every request). An
-- in_progress row is visible here only once the transaction that began it
-- has committed without finishing it: an abandoned or long-running
-- operation. Reads the stores namespaces are bound to as the extension's
-- owner (a read runs no trigger).
CREATE FUNCTION idem_namespace_stats_rows(
    OUT namespace text, OUT in_progress bigint, OUT committed bigint, OUT failed bigint,
    OUT oldest_in_progress_age interval, OUT expired bigint, OUT row_bytes bigint, OUT store regclass)
RETURNS SETOF record
LANGUAGE plpgsql STABLE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t regclass;
    figures jsonb;
    problem text;
BEGIN
    FOR t IN
        SELECT NULL::regclass
        UNION ALL
        (SELECT DISTINCT c.store FROM @extschema@.idem_namespace_config c
         WHERE c.store IS NOT NULL AND EXISTS (SELECT FROM pg_class r WHERE r.oid = c.store) ORDER BY 1)
    LOOP
        -- A store that can no longer be used (its shape changed) shows no rows.
        problem := (SELECT p.problem FROM @extschema@.idem_store_problem(t) p);
        IF problem IS NOT NULL THEN
            RAISE WARNING 'idempotency: cannot read %: %', t, problem;
            CONTINUE;
        END IF;
        figures := @extschema@.idem_store_stats(t);   -- read as the store's owner
        RETURN QUERY
            SELECT s.namespace, s.in_progress, s.committed, s.failed, s.oldest_in_progress_age, s.expired,
                   s.row_bytes, t
            FROM jsonb_to_recordset(figures) AS s(namespace text, in_progress bigint, committed bigint, failed bigint,
                                                  oldest_in_progress_age interval, expired bigint, row_bytes bigint);
    END LOOP;
END;
$$;

REVOKE ALL ON FUNCTION idem_namespace_stats_rows() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_namespace_stats_rows() TO pg_monitor;

CREATE OR REPLACE VIEW idem_namespace_stats AS
SELECT namespace COLLATE "C" AS namespace, in_progress, committed, failed, oldest_in_progress_age, expired,
       row_bytes, store
FROM @extschema@.idem_namespace_stats_rows();

-- The registry ---------------------------------------------------------------

-- Internal: raises 55P02 when this session's values for the store's
-- settings were refused when the library loaded, leaving the built-in
-- defaults in place of the configured values (docs/api.md, Settings); the
-- registry functions that read a setting call it first.
CREATE FUNCTION idem_trusted_settings()
RETURNS void
AS 'MODULE_PATHNAME', 'idem_trusted_settings'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

REVOKE ALL ON FUNCTION idem_trusted_settings() FROM PUBLIC;


-- Reads store_request only once the library is loaded (before, a session's
-- own placeholder could be read instead of the server's setting), and
-- counts and scrubs the records in the namespace's store.
CREATE OR REPLACE FUNCTION idem_namespace_configure(
    namespace text,
    replay_window interval DEFAULT NULL,
    in_progress_lease interval DEFAULT NULL,
    store_request boolean DEFAULT NULL,
    hash_keys boolean DEFAULT false,
    max_payload_bytes integer DEFAULT NULL)
RETURNS @extschema@.idem_namespace_config
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
SET IntervalStyle = postgres
AS $$
DECLARE
    ns ALIAS FOR namespace;
    old @extschema@.idem_namespace_config;
    saved @extschema@.idem_namespace_config;
    records bigint;
    keeps_requests boolean;
    default_lease interval;
BEGIN
    PERFORM @extschema@.idem_parse(ns, 'k');   -- raises 22023 for a NULL or invalid namespace
    -- The settings are read once idem_parse has loaded the library (before,
    -- a value a session set is a placeholder any role may set), and only if
    -- the session's values were not refused when it loaded.
    PERFORM @extschema@.idem_trusted_settings();
    keeps_requests :=
        coalesce(store_request, nullif(current_setting('idempotency.store_request', true), '')::boolean, true);
    default_lease := coalesce(nullif(current_setting('idempotency.in_progress_lease', true), ''), '0')::interval;
    IF replay_window <= interval '0' OR strpos(replay_window::text, '-') > 0
       OR replay_window >= interval '10000 years' THEN
        RAISE EXCEPTION 'invalid idempotency replay window'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('The replay window must be positive and under 10000 years, and no part of it negative, not %s.', replay_window);
    END IF;
    IF in_progress_lease < interval '0' OR strpos(in_progress_lease::text, '-') > 0
       OR in_progress_lease >= interval '100 years' THEN
        RAISE EXCEPTION 'invalid idempotency in-progress lease'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('The lease must be 0 (never taken over) or positive and under 100 years, and no part of it negative, not %s.', in_progress_lease);
    END IF;
    IF hash_keys IS NULL THEN
        RAISE EXCEPTION 'hash_keys must not be null'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'hash_keys is true or false; it has no GUC to follow.';
    END IF;
    IF max_payload_bytes < 1 THEN
        RAISE EXCEPTION 'invalid idempotency payload limit'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('max_payload_bytes must be a positive number of bytes or NULL, not %s.', max_payload_bytes);
    END IF;
    -- The row lock orders concurrent configures of one namespace.
    SELECT * INTO old FROM @extschema@.idem_namespace_config c WHERE c.namespace = ns FOR UPDATE;
    IF hash_keys AND @extschema@.idem_store_distribution(old.store) = 'key_value' THEN
        RAISE EXCEPTION 'idempotency namespace "%" cannot hash its keys in a store distributed by key', ns
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = format('Its store, %s, is distributed by key_value: a hashed key would be kept in the shard of its hash, not in the shard the key routes the call to.', old.store),
                  HINT = 'Distribute the store by namespace, or use another namespace for hashed keys.';
    END IF;
    IF coalesce(old.hash_keys, false) <> hash_keys OR NOT keeps_requests
       OR (coalesce(old.in_progress_lease, default_lease) > interval '0'
           AND coalesce(in_progress_lease, default_lease) = interval '0') THEN
        -- Wait for the transactions that began keys in this namespace (they
        -- read the old settings) and hold off new ones until this
        -- transaction ends; then every record is visible to the statements
        -- below, which READ COMMITTED gives a new snapshot.
        PERFORM @extschema@.idem_lock_namespace(ns);
    END IF;
    IF coalesce(old.hash_keys, false) <> hash_keys THEN
        records := @extschema@.idem_store_count(old.store, ns);
        IF records > 0 THEN
            RAISE EXCEPTION 'cannot change hash_keys of idempotency namespace "%"', ns
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = format('The namespace has %s record%s, stored with hash_keys %s; they would no longer be found.',
                                      records, CASE WHEN records = 1 THEN '' ELSE 's' END, CASE WHEN coalesce(old.hash_keys, false) THEN 'on' ELSE 'off' END),
                      HINT = 'Use a new namespace, or wait until its records have expired and been purged.';
        END IF;
    END IF;
    IF coalesce(old.in_progress_lease, default_lease) > interval '0'
       AND coalesce(in_progress_lease, default_lease) = interval '0' THEN
        records := @extschema@.idem_store_count(old.store, ns, in_progress_only => true);
        IF records > 0 THEN
            RAISE EXCEPTION 'cannot remove the in-progress lease of idempotency namespace "%"', ns
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = format('The namespace has %s record%s in progress, claimed under the lease; without one, nothing could take %s over until %s replay window%s ended.',
                                      records, CASE WHEN records = 1 THEN '' ELSE 's' END, CASE WHEN records = 1 THEN 'it' ELSE 'them' END,
                                      CASE WHEN records = 1 THEN 'its' ELSE 'their' END, CASE WHEN records = 1 THEN '' ELSE 's' END),
                      HINT = 'Let the records in progress be finished or taken over, or end them with idem_fail_transient; then remove the lease.';
        END IF;
    END IF;
    IF NOT keeps_requests THEN
        -- Requests kept while store_request was on are removed, not just
        -- hidden (idem_begin hides them too, from the moment it is off).
        records := @extschema@.idem_store_forget_requests(old.store, ns);
        IF records > 0 THEN
            RAISE NOTICE 'idempotency: removed the stored request from % record% of namespace "%"',
                records, CASE WHEN records = 1 THEN '' ELSE 's' END, ns;
        END IF;
    END IF;
    INSERT INTO @extschema@.idem_namespace_config AS c
        (namespace, replay_window, in_progress_lease, store_request, hash_keys, max_payload_bytes, configured_at)
    VALUES (ns, replay_window, in_progress_lease, store_request, hash_keys, max_payload_bytes, now())
    ON CONFLICT ON CONSTRAINT idem_namespace_config_pkey DO UPDATE SET
        replay_window = excluded.replay_window,
        in_progress_lease = excluded.in_progress_lease,
        store_request = excluded.store_request,
        hash_keys = excluded.hash_keys,
        max_payload_bytes = excluded.max_payload_bytes,
        configured_at = excluded.configured_at   -- not now(): Citus wants no function in DO UPDATE SET
    RETURNING * INTO saved;
    RETURN saved;
END;
$$;

COMMENT ON FUNCTION idem_namespace_configure(text, interval, interval, boolean, boolean, integer) IS
'Registers a namespace or replaces its settings; a NULL setting follows its GUC';

-- Settings --------------------------------------------------------------------

-- The store's settings set for databases and roles. in_progress_lease is
-- server-wide from 0.6.0 on (every session must agree on which claims may
-- outlive their transaction): a database's or role's value makes the store
-- refuse to run in the sessions it applies to, until it is removed.
-- replay_window and in_flight_wait were settable by any role in 0.5.0
-- (ALTER ROLE itself SET ...): from 0.6.0 a database's or role's value
-- counts as a superuser's, so each is named, to be kept only if an
-- operator meant it.
DO $settings$
DECLARE
    s record;
BEGIN
    FOR s IN
        SELECT CASE WHEN x.setrole = 0 AND x.setdatabase = 0 THEN 'ALTER ROLE ALL'
                    WHEN x.setrole = 0 THEN 'ALTER DATABASE ' || pg_catalog.quote_ident(d.datname)
                    ELSE 'ALTER ROLE ' || pg_catalog.quote_ident(r.rolname)
                         || coalesce(' IN DATABASE ' || pg_catalog.quote_ident(d.datname), '') END AS statement,
               pg_catalog.split_part(c, '=', 1) AS name
        FROM pg_catalog.pg_db_role_setting x
        LEFT JOIN pg_catalog.pg_database d ON d.oid = x.setdatabase
        LEFT JOIN pg_catalog.pg_roles r ON r.oid = x.setrole,
             pg_catalog.unnest(x.setconfig) c
        WHERE c LIKE 'idempotency.%'
        ORDER BY 1, 2
    LOOP
        IF s.name = 'idempotency.in_progress_lease' THEN
            RAISE WARNING 'idempotency.in_progress_lease is set by "% SET", which 0.6.0 no longer allows', s.statement
                USING DETAIL = 'The lease is server-wide now: the store refuses to run in the sessions that value applies to, whose lease it cannot trust.',
                      HINT = pg_catalog.format('Remove it (%s RESET idempotency.in_progress_lease); set the lease in postgresql.conf, or for the namespace with idem_namespace_configure.', s.statement);
        ELSIF s.name IN ('idempotency.replay_window', 'idempotency.in_flight_wait') THEN
            RAISE WARNING '% is set by "% SET"', s.name, s.statement
                USING DETAIL = 'Release 0.5.0 let any role set it for itself; from 0.6.0 only a superuser does, and this value applies to every session it names, behind a connection pool to every client of that role.',
                      HINT = pg_catalog.format('Keep it only if an operator meant it; otherwise %s RESET %s.', s.statement, s.name);
        END IF;
    END LOOP;
END;
$settings$;

-- Privileges ----------------------------------------------------------------

-- What this script granted or revoked stays out of pg_init_privs but for
-- the owner's, PUBLIC's and pg_monitor's entries (docs/internals.md).
UPDATE pg_catalog.pg_init_privs i
SET initprivs = ARRAY(
    SELECT item FROM pg_catalog.unnest(i.initprivs) item
    WHERE (SELECT x.grantee = x.grantor OR x.grantee = 0 OR x.grantee = 'pg_monitor'::pg_catalog.regrole
           FROM pg_catalog.aclexplode(ARRAY[item]) x LIMIT 1))
WHERE i.privtype = 'e'
  AND ((i.classoid = 'pg_catalog.pg_namespace'::pg_catalog.regclass AND i.objoid = '@extschema@'::pg_catalog.regnamespace)
       OR (i.classoid, i.objoid) IN (
           SELECT d.classid, d.objid FROM pg_catalog.pg_depend d
           WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'
             AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'idempotency')));

-- From PostgreSQL 17 the roles named in pg_init_privs are recorded in
-- pg_shdepend too, and editing pg_init_privs (above) leaves those records
-- behind: a role that ALTER DEFAULT PRIVILEGES named when the extension was
-- created could not be dropped ("initial privileges for ... depend on it").
-- Remove the records of the extension's objects that name a role no longer
-- in their initial privileges (none before 17).
DELETE FROM pg_catalog.pg_shdepend d
WHERE d.deptype = 'i'
  AND d.dbid = (SELECT db.oid FROM pg_catalog.pg_database db WHERE db.datname = pg_catalog.current_database())
  AND ((d.classid = 'pg_catalog.pg_namespace'::pg_catalog.regclass AND d.objid = '@extschema@'::pg_catalog.regnamespace)
       OR (d.classid, d.objid) IN (
           SELECT dep.classid, dep.objid FROM pg_catalog.pg_depend dep
           WHERE dep.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND dep.deptype = 'e'
             AND dep.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'idempotency')))
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_init_privs i, pg_catalog.aclexplode(i.initprivs) x
                  WHERE i.classoid = d.classid AND i.objoid = d.objid AND i.objsubid = d.objsubid
                    AND d.refobjid IN (x.grantee, x.grantor));
