/* idempotency--0.8.0--0.9.0.sql: release 0.9.0, the fingerprint a
   namespace agrees on. A namespace may name, as RFC 6901 JSON Pointers, the
   members and array elements its request fingerprint leaves out (a trace
   id, a timestamp, a client nonce): idem_namespace_fingerprint, refused
   while the namespace has records. The registry gains fingerprint_ignore
   (nullable, no rewrite), idem_namespaces shows it at its end, and
   idem_canonical and idem_request_hash take the pointers too. idem_begin
   and idem_begin_batch get new entry points: a session still running an
   older library is refused (42883) rather than fingerprinting whole
   requests in a namespace that ignores parts of them. On Citus,
   idem_create_entry_points also makes <table>_extend_lease and
   <table>_record_point: heartbeats and recovery points on a distributed
   store. */

\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.9.0'" to load this file. \quit

-- The same two with the members and elements that RFC 6901 JSON Pointers
-- name left out, as a namespace whose fingerprint ignores them makes it
-- (idem_namespace_fingerprint). NULL pointers leave nothing out.
CREATE FUNCTION idem_canonical(payload jsonb, ignore text[])
RETURNS text
AS 'MODULE_PATHNAME', 'idem_canonical_ignoring'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION idem_canonical(jsonb, text[]) IS
'Canonical JSON text of a value without the parts JSON Pointers name';

CREATE FUNCTION idem_request_hash(payload jsonb, ignore text[])
RETURNS bytea
AS 'MODULE_PATHNAME', 'idem_request_hash_ignoring'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION idem_request_hash(jsonb, text[]) IS
'Request fingerprint of a value without the parts JSON Pointers name';

-- The store ------------------------------------------------------------------

-- The new entry points (see above).
CREATE OR REPLACE FUNCTION idem_begin(namespace text, key text, request jsonb, replay_window interval DEFAULT NULL,
                           in_flight_wait interval DEFAULT NULL)
RETURNS @extschema@.idem_outcome
AS 'MODULE_PATHNAME', 'idem_begin_0_9'
LANGUAGE C VOLATILE PARALLEL UNSAFE;


CREATE OR REPLACE FUNCTION idem_begin_batch(namespace text, keys text[], requests jsonb[], replay_window interval DEFAULT NULL,
                                 in_flight_wait interval DEFAULT NULL)
RETURNS SETOF @extschema@.idem_outcome
AS 'MODULE_PATHNAME', 'idem_begin_batch_0_9'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 100;


-- The registry ---------------------------------------------------------------

-- Nullable, without a default: no rewrite, every namespace as it was.
-- (IF NOT EXISTS: under Citus, the coordinator's update alters the registry,
-- a reference table, on every node before each node runs this script.)
ALTER TABLE idem_namespace_config ADD COLUMN IF NOT EXISTS fingerprint_ignore text[];

-- What a namespace's request fingerprint leaves out: the members and array
-- elements that RFC 6901 JSON Pointers name (a trace id, a timestamp, a
-- client nonce), so that retries differing only there replay; everywhere
-- else a difference is still a mismatch, and the request is kept whole.
-- NULL or an empty array: the whole request. Registers the namespace if
-- needed. A change is refused while the namespace has records: each was
-- fingerprinted under the pointers then in force, and under others a retry
-- of it would answer mismatch, or another request replay its answer.
CREATE FUNCTION idem_namespace_fingerprint(namespace text, ignore text[])
RETURNS @extschema@.idem_namespace_config
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ns ALIAS FOR namespace;
    old @extschema@.idem_namespace_config;
    saved @extschema@.idem_namespace_config;
    wanted text[];
    records bigint;
BEGIN
    PERFORM @extschema@.idem_parse(ns, 'k');   -- raises 22023 for a NULL or invalid namespace
    -- Raises 22023 for a pointer that is not one (or names the whole
    -- request), for more than 64 different ones or a multidimensional
    -- array, 22004 for a NULL one: each named by its place in ignore.
    PERFORM @extschema@.idem_request_hash('null'::jsonb, ignore);
    -- Kept sorted and without repeats, so that a change is a change.
    wanted := nullif(ARRAY(SELECT d.p FROM (SELECT DISTINCT u.p COLLATE "C" AS p FROM unnest(ignore) u(p)) d
                           ORDER BY d.p), '{}');
    INSERT INTO @extschema@.idem_namespace_config (namespace) VALUES (ns) ON CONFLICT DO NOTHING;
    -- The row lock orders concurrent changes of one namespace.
    SELECT * INTO old FROM @extschema@.idem_namespace_config c WHERE c.namespace = ns FOR UPDATE;
    IF old.fingerprint_ignore IS NOT DISTINCT FROM wanted THEN
        RETURN old;
    END IF;
    -- Wait for the transactions that began keys under the old pointers and
    -- hold off new ones until this transaction ends; then every record is
    -- visible to the count below.
    PERFORM @extschema@.idem_lock_namespace(ns);
    records := @extschema@.idem_store_count(old.store, ns);
    IF records > 0 THEN
        RAISE EXCEPTION 'cannot change what the fingerprint of idempotency namespace "%" ignores', ns
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('The namespace has %s record%s, fingerprinted %s; under other pointers a retry of %s would answer mismatch, or another request replay %s answer.',
                                  records, CASE WHEN records = 1 THEN '' ELSE 's' END,
                                  CASE WHEN old.fingerprint_ignore IS NULL THEN 'whole' ELSE 'without ' || array_to_string(old.fingerprint_ignore, ', ') END,
                                  CASE WHEN records = 1 THEN 'it' ELSE 'one' END, 'its'),
                  HINT = 'Use a new namespace, or wait until its records have expired and been purged.';
    END IF;
    UPDATE @extschema@.idem_namespace_config c SET fingerprint_ignore = wanted, configured_at = now()
    WHERE c.namespace = ns
    RETURNING * INTO saved;
    RETURN saved;
END;
$$;

COMMENT ON FUNCTION idem_namespace_fingerprint(text, text[]) IS
'Names the parts of a request (RFC 6901 JSON Pointers) that a namespace''s fingerprint ignores';

REVOKE ALL ON FUNCTION idem_namespace_fingerprint(text, text[]) FROM PUBLIC;

-- The registry's rows are written again with the new column.
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

-- Stores on Citus -------------------------------------------------------------

-- idem_bind_store: a table whose shards have several copies is refused (its
-- DETAIL says so). idem_create_entry_points: the two new entry points.

-- Binds a namespace to a store: from now on its records are kept there, and
-- NULL binds it to the extension's table again. Binding needs the
-- privileges of the table's owner (the store writes the table with them),
-- and a table of a store's shape. The namespace's lock waits for its
-- begins; a namespace with records in its current store cannot move (its
-- retries would begin again): bind a new namespace, or copy the records over
-- first (docs/api.md).
CREATE OR REPLACE FUNCTION idem_bind_store(namespace text, store regclass)
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

-- The registry with its grants, one row per registered namespace.
CREATE OR REPLACE VIEW idem_namespaces AS
SELECT c.namespace, c.replay_window, c.in_progress_lease, c.store_request, c.hash_keys,
       c.max_payload_bytes,
       ARRAY(SELECT g.grantee FROM @extschema@.idem_namespace_grant g
             WHERE g.namespace = c.namespace ORDER BY g.grantee::text) AS grantees,
       c.configured_at, c.store, c.fingerprint_ignore
FROM @extschema@.idem_namespace_config c;

-- Privileges ------------------------------------------------------------------

-- The objects this update makes get the grants the script gives them (the
-- owner's, PUBLIC's, and pg_monitor's on the views and the functions behind
-- them) and no more. ALTER DEFAULT PRIVILEGES of the installing role (EXECUTE on its
-- functions, SELECT on its tables, for an application role or for
-- pg_monitor, say) would add others, and
-- that role could then read every namespace's records and the lock secret,
-- run what only the owner may (idem_key_state, idem_release_key, the
-- purge, the registry functions): they are taken back here, privilege by privilege
-- (docs/security.md).
DO $defaults$
DECLARE
    x record;
BEGIN
    FOR x IN
        SELECT DISTINCT o.kind, o.name, a.privilege_type, r.rolname
        FROM pg_catalog.pg_depend d
        CROSS JOIN LATERAL (
            SELECT 'ROUTINE' AS kind, p.oid::pg_catalog.regprocedure::text AS name, p.proowner AS owner, p.proacl AS acl
            FROM pg_catalog.pg_proc p
            WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND p.oid = d.objid
            UNION ALL
            SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, c.oid::pg_catalog.regclass::text,
                   c.relowner, c.relacl
            FROM pg_catalog.pg_class c
            WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND c.oid = d.objid
            UNION ALL
            SELECT 'TYPE', t.oid::pg_catalog.regtype::text, t.typowner, t.typacl
            FROM pg_catalog.pg_type t
            WHERE d.classid = 'pg_catalog.pg_type'::pg_catalog.regclass AND t.oid = d.objid
            ) o
        CROSS JOIN LATERAL pg_catalog.aclexplode(o.acl) a
        JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
        WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'
          AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'idempotency')
          AND a.grantee <> o.owner
          -- pg_monitor keeps what this script grants it
          AND NOT (a.grantee = 'pg_monitor'::pg_catalog.regrole
                   AND ((a.privilege_type = 'SELECT'
                         AND d.objid IN ('@extschema@.idem_stats'::pg_catalog.regclass,
                                         '@extschema@.idem_namespace_stats'::pg_catalog.regclass,
                                         '@extschema@.idem_namespaces'::pg_catalog.regclass))
                        OR (a.privilege_type = 'EXECUTE'
                            AND d.objid IN ('@extschema@.idem_stats_counters()'::pg_catalog.regprocedure,
                                            '@extschema@.idem_stats_released_keys()'::pg_catalog.regprocedure,
                                            '@extschema@.idem_stats_recovery()'::pg_catalog.regprocedure,
                                            '@extschema@.idem_namespace_stats_figures()'::pg_catalog.regprocedure))))
          AND d.objid IN ('@extschema@.idem_canonical(jsonb,text[])'::pg_catalog.regprocedure,
                          '@extschema@.idem_request_hash(jsonb,text[])'::pg_catalog.regprocedure,
                          '@extschema@.idem_namespace_fingerprint(text,text[])'::pg_catalog.regprocedure)
    LOOP
        EXECUTE pg_catalog.format('REVOKE %s ON %s %s FROM %I', x.privilege_type, x.kind, x.name, x.rolname);
    END LOOP;
END;
$defaults$;

-- Whoever may configure a namespace (EXECUTE on idem_namespace_configure,
-- granted by the owner) may say what its fingerprint ignores too: the same
-- grants on idem_namespace_fingerprint (ordinary grants, kept by pg_dump).
DO $administrators$
DECLARE
    x record;
BEGIN
    FOR x IN
        SELECT DISTINCT CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(r.rolname) END AS grantee,
               a.is_grantable
        FROM pg_catalog.pg_proc p
        CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) a
        LEFT JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
        WHERE p.oid = '@extschema@.idem_namespace_configure(text,interval,interval,boolean,boolean,integer)'::pg_catalog.regprocedure
          AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION @extschema@.idem_namespace_fingerprint(text, text[]) TO %s%s',
                                  x.grantee, CASE WHEN x.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
    -- PUBLIC's and pg_monitor's grants (the cleanup below keeps their
    -- entries) are the user's, not initial privileges.
    UPDATE pg_catalog.pg_init_privs i
    SET initprivs = ARRAY(SELECT item FROM pg_catalog.unnest(i.initprivs) item
                          WHERE (SELECT e.grantee NOT IN (0, 'pg_monitor'::pg_catalog.regrole)
                                 FROM pg_catalog.aclexplode(ARRAY[item]) e LIMIT 1))
    WHERE i.privtype = 'e' AND i.classoid = 'pg_catalog.pg_proc'::pg_catalog.regclass
      AND i.objoid = '@extschema@.idem_namespace_fingerprint(text,text[])'::pg_catalog.regprocedure;
END;
$administrators$;

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
