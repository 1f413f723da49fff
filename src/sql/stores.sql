-- stores.sql: keeping a namespace's records in a table the service owns.


-- A namespace's records may live in a table the service owns instead of
-- idempotency_record (idem_bind_store): created by idem_create_store or by
-- the service's own migration (docs/api.md gives the definition), with the
-- first twelve columns of idempotency_record, in its order (and the two
-- recovery columns next, for recovery points), and a unique index on
-- (namespace, key_value). The store reads and writes it as the table's
-- owner.

-- Creates such a table, owned by the caller, with the primary key and the
-- expires_at index purge uses, and no privileges for PUBLIC. store is a
-- schema-qualified table name ('app.idem_records').
CREATE OR REPLACE FUNCTION idem_create_store(store text)
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
        recovery_point  text,
        recovery_state  jsonb,
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

-- begins; a namespace with records in its current store cannot move (its
-- retries would begin again): bind a new namespace, or copy the records over
-- first (docs/api.md).
CREATE OR REPLACE FUNCTION idem_bind_store(namespace text, store regclass)
RETURNS regclass
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ns text COLLATE "C" := namespace;   -- read byte for byte, whatever collation the caller's argument has
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
        IF target::oid IN (SELECT d.objid FROM pg_depend d WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
                             AND d.refobjid = (SELECT e.oid FROM pg_extension e WHERE e.extname = 'idempotency'))
           OR (NOT EXISTS (SELECT FROM pg_extension e WHERE e.extname = 'idempotency') AND (SELECT t.relnamespace::regnamespace::text FROM pg_class t WHERE t.oid = target) IN ('idempotency', 'idempotency_internal')) THEN   -- the extension's own tables (the plain script's: its two schemas')
            RAISE EXCEPTION 'cannot bind idempotency namespace "%" to %', ns, target
                USING ERRCODE = 'invalid_parameter_value', DETAIL = 'It is one of the extension''s own tables.';
        END IF;
        SELECT p.problem, p.fix INTO problem, fix FROM idempotency_internal.idem_store_problem(target) p;
        IF problem IS NOT NULL THEN
            RAISE EXCEPTION 'cannot bind idempotency namespace "%" to %', ns, target
                USING ERRCODE = 'invalid_table_definition', DETAIL = problem,
                      HINT = coalesce(fix, 'idem_create_store makes a table of a store''s shape; docs/api.md gives its definition.');
        END IF;
        routing := @extschema@.idem_store_distribution(target);
        IF routing = 'other' THEN
            RAISE EXCEPTION 'cannot bind idempotency namespace "%" to %', ns, target
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = 'Citus keeps it as a reference, local, single-shard, range or append table, distributes it by another column than key_value or namespace, or keeps several copies of its shards (citus.shard_replication_factor above 1), each of which would answer a key.',
                      HINT = 'Distribute it with create_distributed_table(table, ''key_value'') or (table, ''namespace'') with citus.shard_replication_factor = 1; a table with replicated shards: alter_distributed_table(table, colocate_with := ''none'') with that setting (docs/scale-out.md).';
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
        records := idempotency_internal.idem_store_count(current_store, ns);
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

-- A table a namespace is bound to cannot be dropped (DROP TABLE, DROP
-- SCHEMA ... CASCADE, DROP OWNED): the namespace's records would go with it
-- and its retries begin again, and the registry would keep an OID that a
-- later table, or a restored dump, could give another table. Bind the
-- namespace elsewhere first. (The store calls still refuse a store that is
-- gone, for a drop made with event triggers off.)
CREATE OR REPLACE FUNCTION idempotency_internal.idem_refuse_dropping_a_store()
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
