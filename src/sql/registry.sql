-- registry.sql: namespaces as configuration and access boundary: their
-- settings, the defaults of those that set none, their grants.

-- Registers a namespace, or replaces its settings: every call states them
-- all, and a NULL (an omitted argument) follows idem_defaults. Refuses to change
-- hash_keys while the namespace has records, which would hide them, and to
-- remove its lease while a record claimed under it is in progress.
-- IntervalStyle is pinned so that a negative part always prints with '-'.
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
    ns text COLLATE "C" := namespace;   -- read byte for byte, whatever collation the caller's argument has
    old @extschema@.idem_namespace_config;
    saved @extschema@.idem_namespace_config;
    records bigint;
    keeps_requests boolean;
    default_lease interval;
BEGIN
    PERFORM @extschema@.idem_parse(ns, 'k');   -- raises 22023 for a NULL or invalid namespace
    SELECT d.store_request, d.in_progress_lease INTO keeps_requests, default_lease FROM @extschema@.idem_defaults d;
    keeps_requests := coalesce(store_request, keeps_requests, true);
    default_lease := coalesce(default_lease, interval '0');
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
                  DETAIL = 'hash_keys is true or false; it has no default to follow.';
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
        records := idempotency_internal.idem_store_count(old.store, ns);
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
        records := idempotency_internal.idem_store_count(old.store, ns, in_progress_only => true);
        IF records > 0 THEN
            RAISE EXCEPTION 'cannot remove the in-progress lease of idempotency namespace "%"', ns
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = format('The namespace has %s record%s in progress, claimed under the lease; without one, nothing could take %s over until %s replay window%s ended.',
                                      records, CASE WHEN records = 1 THEN '' ELSE 's' END, CASE WHEN records = 1 THEN 'it' ELSE 'them' END,
                                      CASE WHEN records = 1 THEN 'its' ELSE 'their' END, CASE WHEN records = 1 THEN '' ELSE 's' END),
                      HINT = 'Let the records in progress be finished or taken over, or end them with idem_fail_transient (a first attempt without a recovery point) or idem_release_key; then remove the lease.';
        END IF;
    END IF;
    IF NOT keeps_requests THEN
        -- Requests kept while store_request was on are removed, not just
        -- hidden (idem_begin hides them too, from the moment it is off).
        records := idempotency_internal.idem_store_forget_requests(old.store, ns);
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
'Registers a namespace or replaces its settings; a NULL setting follows idem_defaults';

-- Namespace ns's lock, as idem_lock_namespace takes it, for a change of
-- every namespace's defaults: waiting at most 100 ms, so that a change
-- never holds one namespace's begins behind another's open transaction.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_lock_namespace_briefly(ns text)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
SET lock_timeout = '100ms'
AS $$
BEGIN
    PERFORM @extschema@.idem_lock_namespace(ns);
EXCEPTION WHEN lock_not_available THEN
    RAISE EXCEPTION 'could not change the defaults of idempotency namespaces'
        USING ERRCODE = 'lock_not_available',
              DETAIL = format('Namespace "%s", which follows the defaults, has a transaction in progress that began a key.', ns),
              HINT = 'Retry. The change waits at most 100 ms for each namespace, so that no other namespace''s begins wait behind it.';
END;
$$;

-- The settings of namespaces that set none: replaces the row of
-- idem_defaults, every call stating them all (a NULL keeps the current
-- value). Shortening the default lease to none is refused while a record
-- claimed under it is in progress, as for a namespace; turning
-- store_request off removes the requests that namespaces without a
-- setting of their own kept. IntervalStyle pinned as above.
CREATE OR REPLACE FUNCTION idem_namespace_defaults(
    replay_window interval DEFAULT NULL,
    in_progress_lease interval DEFAULT NULL,
    store_request boolean DEFAULT NULL,
    max_payload_bytes integer DEFAULT NULL,
    in_flight_wait interval DEFAULT NULL,
    require_registered boolean DEFAULT NULL)
RETURNS @extschema@.idem_defaults
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
SET IntervalStyle = postgres
AS $$
DECLARE
    old @extschema@.idem_defaults;
    saved @extschema@.idem_defaults;
    ns text;
    records bigint;
BEGIN
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
    IF max_payload_bytes < 1 THEN
        RAISE EXCEPTION 'invalid idempotency payload limit'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('max_payload_bytes must be a positive number of bytes, not %s.', max_payload_bytes);
    END IF;
    IF in_flight_wait < interval '0' OR strpos(in_flight_wait::text, '-') > 0
       OR in_flight_wait > interval '2147483647 milliseconds' THEN
        RAISE EXCEPTION 'invalid idempotency in-flight wait'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('in_flight_wait must be zero or positive, at most 2147483647 ms (about 24.8 days), and no part of it negative, not %s.', in_flight_wait);
    END IF;
    -- The row, made with the built-in defaults if there is none yet.
    INSERT INTO @extschema@.idem_defaults DEFAULT VALUES ON CONFLICT DO NOTHING;
    SELECT * INTO old FROM @extschema@.idem_defaults d FOR UPDATE;
    -- The namespaces that follow the defaults: registered ones without a
    -- setting of their own, and unregistered ones (their records are in the
    -- extension's table). Each is locked as idem_namespace_configure locks
    -- one, waiting briefly (a busy one fails the change, to be retried),
    -- so that no namespace's begins wait behind another's transaction.
    FOR ns IN
        SELECT c.namespace FROM @extschema@.idem_namespace_config c
        WHERE (old.in_progress_lease > interval '0' AND idem_namespace_defaults.in_progress_lease = interval '0'
               AND c.in_progress_lease IS NULL)
           OR (old.store_request AND idem_namespace_defaults.store_request IS FALSE AND c.store_request IS NULL)
        UNION
        SELECT DISTINCT r.namespace FROM @extschema@.idempotency_record r
        WHERE NOT EXISTS (SELECT FROM @extschema@.idem_namespace_config c WHERE c.namespace = r.namespace)
          AND ((old.in_progress_lease > interval '0' AND idem_namespace_defaults.in_progress_lease = interval '0'
                AND r.status = 'in_progress')
               OR (old.store_request AND idem_namespace_defaults.store_request IS FALSE
                   AND r.request_payload IS NOT NULL))
        ORDER BY 1
    LOOP
        PERFORM idempotency_internal.idem_lock_namespace_briefly(ns);
        IF old.in_progress_lease > interval '0' AND in_progress_lease = interval '0' THEN
            records := idempotency_internal.idem_store_count(
                (SELECT c.store FROM @extschema@.idem_namespace_config c WHERE c.namespace = ns), ns, in_progress_only => true);
            IF records > 0 THEN
                RAISE EXCEPTION 'cannot remove the default in-progress lease'
                    USING ERRCODE = 'object_not_in_prerequisite_state',
                          DETAIL = format('Namespace "%s", which has no lease of its own, has %s record%s in progress, claimed under the default lease.',
                                          ns, records, CASE WHEN records = 1 THEN '' ELSE 's' END),
                          HINT = 'Let the records in progress be finished or taken over, or give the namespace a lease of its own; then remove the default.';
            END IF;
        END IF;
        -- One store's failure (its owner's trigger, say) is its own: the
        -- others are scrubbed, and its records' requests are never shown
        -- while store_request is off.
        IF old.store_request AND store_request IS FALSE THEN
            BEGIN
                PERFORM idempotency_internal.idem_store_forget_requests(
                    (SELECT c.store FROM @extschema@.idem_namespace_config c WHERE c.namespace = ns), ns);
            EXCEPTION WHEN OTHERS THEN
                RAISE WARNING 'idempotency: the store of namespace "%" kept its requests', ns
                    USING DETAIL = SQLERRM,
                          HINT = 'Fix the store, then run idem_namespace_configure(namespace, store_request => false) for it.';
            END;
        END IF;
    END LOOP;
    UPDATE @extschema@.idem_defaults d SET
        replay_window = coalesce(idem_namespace_defaults.replay_window, d.replay_window),
        in_progress_lease = coalesce(idem_namespace_defaults.in_progress_lease, d.in_progress_lease),
        store_request = coalesce(idem_namespace_defaults.store_request, d.store_request),
        max_payload_bytes = coalesce(idem_namespace_defaults.max_payload_bytes, d.max_payload_bytes),
        in_flight_wait = coalesce(idem_namespace_defaults.in_flight_wait, d.in_flight_wait),
        require_registered = coalesce(idem_namespace_defaults.require_registered, d.require_registered),
        configured_at = now()
    RETURNING * INTO saved;
    RETURN saved;
END;
$$;

COMMENT ON FUNCTION idem_namespace_defaults(interval, interval, boolean, integer, interval, boolean) IS
'The settings of namespaces that set none; a NULL argument keeps the current value';

-- What a namespace's request fingerprint leaves out: the members and array
-- elements that RFC 6901 JSON Pointers name (a trace id, a timestamp, a
-- client nonce), so that retries differing only there replay; everywhere
-- else a difference is still a mismatch, and the request is kept whole.
-- NULL or an empty array: the whole request. Registers the namespace if
-- needed. A change is refused while the namespace has records: each was
-- fingerprinted under the pointers then in force, and under others a retry
-- of it would answer mismatch, or another request replay its answer.
CREATE OR REPLACE FUNCTION idem_namespace_fingerprint(namespace text, ignore text[])
RETURNS @extschema@.idem_namespace_config
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ns text COLLATE "C" := namespace;   -- read byte for byte, whatever collation the caller's argument has
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
    records := idempotency_internal.idem_store_count(old.store, ns);
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

-- Unregisters a namespace and its grants. Refused while it has records: they
-- were written under its settings (hash_keys above all).
CREATE OR REPLACE FUNCTION idem_namespace_drop(namespace text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ns text COLLATE "C" := namespace;   -- read byte for byte, whatever collation the caller's argument has
    records bigint;
BEGIN
    PERFORM @extschema@.idem_parse(ns, 'k');
    PERFORM FROM @extschema@.idem_namespace_config c WHERE c.namespace = ns FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM @extschema@.idem_lock_namespace(ns);
    records := idempotency_internal.idem_store_count((SELECT c.store FROM @extschema@.idem_namespace_config c WHERE c.namespace = ns), ns);
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

COMMENT ON FUNCTION idem_namespace_drop(text) IS
'Unregisters a namespace without records, with its grants; false when it was not registered';

-- Lets role (and its members) use namespace: begin, commit and fail on its
-- keys. Registers the namespace with default settings if needed, and grants
-- USAGE on this schema, without which no function here can be called.
CREATE OR REPLACE FUNCTION idem_grant(namespace text, role regrole)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ns text COLLATE "C" := namespace;   -- read byte for byte, whatever collation the caller's argument has
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

COMMENT ON FUNCTION idem_grant(text, regrole) IS
'Lets a role use a namespace (registering it if needed); false when it already could';

-- Takes the use of namespace away from role. USAGE on the schema stays: the
-- role may hold other namespaces.
CREATE OR REPLACE FUNCTION idem_revoke(namespace text, role regrole)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ns text COLLATE "C" := namespace;   -- read byte for byte, whatever collation the caller's argument has
BEGIN
    PERFORM @extschema@.idem_parse(ns, 'k');
    IF role IS NULL THEN
        RAISE EXCEPTION 'role must not be null'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = 'Name the role to take the namespace from.';
    END IF;
    DELETE FROM @extschema@.idem_namespace_grant g WHERE g.namespace = ns AND g.grantee = role;
    RETURN FOUND;
END;
$$;

COMMENT ON FUNCTION idem_revoke(text, regrole) IS
'Takes the use of a namespace from a role; false when it had no grant';
