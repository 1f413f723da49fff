/* idempotency--0.4.0--0.4.1.sql: release 0.4.1 makes pg_dump keep the
   privileges that earlier updates granted to, or found held by, operator
   roles, and gives bad input to three functions a clear error. */

\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.4.1'" to load this file. \quit

-- Bad input, found by sql/bad_input.sql ---------------------------------------

-- A replay window of 10,000 years or more is refused: idem_begin would
-- otherwise fail with PostgreSQL's "timestamp out of range" on every
-- record of the namespace. (And "1 record", not "1 records".)
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
BEGIN
    PERFORM @extschema@.idem_parse(ns, 'k');   -- raises 22023 for a NULL or invalid namespace
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
    IF coalesce(old.hash_keys, false) <> hash_keys THEN
        -- Counting must see every record, in flight ones included: wait for
        -- the transactions writing the table, and hold off new ones until
        -- this transaction ends. A snapshot older than that wait could miss
        -- records, hence READ COMMITTED only.
        PERFORM @extschema@.idem_lock_records_for_admin();
        SELECT count(*) INTO records FROM @extschema@.idempotency_record r WHERE r.namespace = ns;
        IF records > 0 THEN
            RAISE EXCEPTION 'cannot change hash_keys of idempotency namespace "%"', ns
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = format('The namespace has %s record%s, stored with hash_keys %s; they would no longer be found.',
                                      records, CASE WHEN records = 1 THEN '' ELSE 's' END, CASE WHEN coalesce(old.hash_keys, false) THEN 'on' ELSE 'off' END),
                      HINT = 'Use a new namespace, or wait until its records have expired and been purged.';
        END IF;
    END IF;
    INSERT INTO @extschema@.idem_namespace_config AS c
        (namespace, replay_window, in_progress_lease, store_request, hash_keys, max_payload_bytes)
    VALUES (ns, replay_window, in_progress_lease, store_request, hash_keys, max_payload_bytes)
    ON CONFLICT ON CONSTRAINT idem_namespace_config_pkey DO UPDATE SET
        replay_window = excluded.replay_window,
        in_progress_lease = excluded.in_progress_lease,
        store_request = excluded.store_request,
        hash_keys = excluded.hash_keys,
        max_payload_bytes = excluded.max_payload_bytes,
        configured_at = now()
    RETURNING * INTO saved;
    RETURN saved;
END;
$$;

-- PUBLIC (a regrole of 0, as '-' reads) or an OID that is no role is
-- refused clearly, instead of the GRANT's syntax error.
CREATE OR REPLACE FUNCTION idem_grant(namespace text, role regrole)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ns ALIAS FOR namespace;
    granted boolean;
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
    INSERT INTO @extschema@.idem_namespace_grant (namespace, grantee) VALUES (ns, role) ON CONFLICT DO NOTHING;
    granted := FOUND;
    EXECUTE format('GRANT USAGE ON SCHEMA @extschema@ TO %s', role);
    RETURN granted;
END;
$$;

-- A NULL type, or an OID that is no type, raised nothing and looped
-- forever; a NULL path printed "At : ".
CREATE OR REPLACE FUNCTION idem_shape_mismatch(value jsonb, typ regtype, path text DEFAULT '$')
RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    base oid := typ;
    t record;
    attr record;
    found_kind text := jsonb_typeof(value);
    name text;
    why text;
    i integer := 0;
    element jsonb;
BEGIN
    IF typ IS NULL THEN
        RAISE EXCEPTION 'typ must not be null'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = 'Name the type the value should have the shape of.';
    END IF;
    path := coalesce(path, '$');
    IF found_kind IS NULL OR found_kind = 'null' THEN
        RETURN NULL;
    END IF;
    LOOP   -- a domain has the shape of its base type
        SELECT typtype, typbasetype, typrelid, typelem, typcategory INTO t FROM pg_type WHERE oid = base;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'type with OID % does not exist', base USING ERRCODE = 'undefined_object';
        END IF;
        EXIT WHEN t.typtype <> 'd';
        base := t.typbasetype;
    END LOOP;
    IF base IN ('json'::regtype, 'jsonb'::regtype) THEN
        RETURN NULL;
    ELSIF t.typrelid <> 0 THEN
        IF found_kind <> 'object' THEN
            RETURN format('At %s: type %s needs a JSON object, the stored value is a JSON %s.', path, base::regtype, found_kind);
        END IF;
        SELECT a.attname INTO name FROM pg_attribute a
        WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped AND NOT value ? a.attname
        ORDER BY a.attnum LIMIT 1;
        IF FOUND THEN
            RETURN format('At %s: field "%s" of type %s is missing from the stored value.', path, name, base::regtype);
        END IF;
        SELECT k INTO name FROM jsonb_object_keys(value) k
        WHERE NOT EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = t.typrelid AND a.attnum > 0
                          AND NOT a.attisdropped AND a.attname = k)
        ORDER BY k COLLATE "C" LIMIT 1;
        IF FOUND THEN
            RETURN format('At %s: the stored value has field "%s", which type %s does not have.', path, name, base::regtype);
        END IF;
        FOR attr IN SELECT a.attname, a.atttypid FROM pg_attribute a
                    WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum LOOP
            why := @extschema@.idem_shape_mismatch(value -> attr.attname::text, attr.atttypid::regtype,
                                                   path || '.' || attr.attname);
            IF why IS NOT NULL THEN
                RETURN why;
            END IF;
        END LOOP;
        RETURN NULL;
    ELSIF t.typcategory = 'A' AND t.typelem <> 0 THEN
        IF found_kind <> 'array' THEN
            RETURN format('At %s: type %s needs a JSON array, the stored value is a JSON %s.', path, base::regtype, found_kind);
        END IF;
        FOR element IN SELECT e FROM jsonb_array_elements(value) e LOOP
            -- A nested JSON array is the next dimension of the same array type.
            why := @extschema@.idem_shape_mismatch(element,
                       CASE WHEN jsonb_typeof(element) = 'array' THEN base ELSE t.typelem END::regtype,
                       path || '[' || i || ']');
            IF why IS NOT NULL THEN
                RETURN why;
            END IF;
            i := i + 1;
        END LOOP;
        RETURN NULL;
    ELSIF found_kind IN ('object', 'array') THEN
        RETURN format('At %s: type %s needs a JSON string, number or boolean, the stored value is a JSON %s.', path, base::regtype, found_kind);
    END IF;
    RETURN NULL;
END;
$$;

-- Privileges -----------------------------------------------------------------

-- PostgreSQL records the whole privilege list of any object an extension
-- script grants or revokes on as that object's initial privileges
-- (pg_init_privs), and pg_dump writes only what differs from them. The
-- 0.2.0 -> 0.3.0 update granted on the schema, so it swallowed any USAGE an
-- operator had granted before; the 0.3.0 -> 0.4.0 update granted USAGE and
-- EXECUTE on the purge functions to the roles it migrated. A dump then left
-- those roles without them, and they failed with "permission denied for
-- schema idempotency" after a restore.
--
-- Here every initial privilege list of the schema and of the extension's
-- members keeps only what the scripts themselves mean: the owner's own
-- entries, PUBLIC's and pg_monitor's. Every other entry is an operator's
-- grant, which pg_dump will now write out. Nothing changes who can do what.
-- (Any later script that grants or revokes ends with this same statement.)
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
