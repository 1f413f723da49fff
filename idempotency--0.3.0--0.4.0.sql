/* idempotency--0.3.0--0.4.0.sql: release 0.4.0 makes the namespace the unit
   of configuration and of access: a registry of namespace settings, grants of
   a namespace to roles, hashed keys, unrecorded requests, payload limits and
   in-progress leases. */

\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.4.0'" to load this file. \quit

-- The registry ---------------------------------------------------------------

-- One row per registered namespace. A NULL setting follows its GUC
-- (idempotency.replay_window, .in_progress_lease, .store_request,
-- .max_payload_bytes). hash_keys has no GUC: it decides how keys are looked
-- up, so it may change only while the namespace has no records.
CREATE TABLE idem_namespace_config (
    namespace         text COLLATE "C" PRIMARY KEY,
    replay_window     interval,
    in_progress_lease interval,
    store_request     boolean,
    hash_keys         boolean NOT NULL DEFAULT false,
    max_payload_bytes integer,
    configured_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT idem_namespace_config_replay_window_check CHECK (replay_window > interval '0'),
    CONSTRAINT idem_namespace_config_lease_check
        CHECK (in_progress_lease >= interval '0' AND in_progress_lease < interval '100 years'),
    CONSTRAINT idem_namespace_config_max_payload_bytes_check CHECK (max_payload_bytes > 0)
);

-- Which roles may use a namespace (and, through membership, their members).
-- regrole: pg_dump writes role names, so a restore maps them to the new OIDs.
CREATE TABLE idem_namespace_grant (
    namespace  text COLLATE "C" NOT NULL
        REFERENCES idem_namespace_config ON DELETE CASCADE,
    grantee    regrole NOT NULL,
    granted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, grantee)
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.idem_namespace_config', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.idem_namespace_grant', '');
REVOKE ALL ON idem_namespace_config, idem_namespace_grant FROM PUBLIC;

-- Every backend caches what it read from the two tables; any change to them,
-- through the functions below or by hand, tells every backend to forget it
-- (at the changing transaction's commit, or its rollback for its own cache).
CREATE FUNCTION idem_namespace_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idem_namespace_changed'
LANGUAGE C;

REVOKE ALL ON FUNCTION idem_namespace_changed() FROM PUBLIC;

CREATE TRIGGER idem_namespace_config_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON idem_namespace_config
    FOR EACH STATEMENT EXECUTE FUNCTION idem_namespace_changed();
CREATE TRIGGER idem_namespace_grant_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON idem_namespace_grant
    FOR EACH STATEMENT EXECUTE FUNCTION idem_namespace_changed();

-- For the registry functions that must count a namespace's records: waits
-- for every transaction writing idempotency_record and keeps new writers
-- out until the caller's transaction ends. Refused outside READ COMMITTED,
-- where the count's snapshot could predate the wait.
CREATE FUNCTION idem_lock_records_for_admin()
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'changing hash_keys or dropping an idempotency namespace needs READ COMMITTED'
            USING ERRCODE = 'invalid_transaction_state',
                  DETAIL = format('This transaction is %s; its snapshot could miss records committed since it began.',
                                  current_setting('transaction_isolation'));
    END IF;
    LOCK TABLE @extschema@.idempotency_record IN SHARE MODE;
END;
$$;

REVOKE ALL ON FUNCTION idem_lock_records_for_admin() FROM PUBLIC;

-- Registers a namespace, or replaces its settings: every call states them
-- all, and a NULL (an omitted argument) follows the GUC. Refuses to change
-- hash_keys while the namespace has records, which would hide them.
-- IntervalStyle is pinned so that a negative part always prints with '-'.
CREATE FUNCTION idem_namespace_configure(
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
    IF replay_window <= interval '0' OR strpos(replay_window::text, '-') > 0 THEN
        RAISE EXCEPTION 'invalid idempotency replay window'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('The replay window must be positive, and no part of it negative, not %s.', replay_window);
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
                      DETAIL = format('The namespace has %s records, stored with hash_keys %s; they would no longer be found.',
                                      records, CASE WHEN coalesce(old.hash_keys, false) THEN 'on' ELSE 'off' END),
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

COMMENT ON FUNCTION idem_namespace_configure(text, interval, interval, boolean, boolean, integer) IS
'Registers a namespace or replaces its settings; a NULL setting follows its GUC';

-- Unregisters a namespace and its grants. Refused while it has records: they
-- were written under its settings (hash_keys above all).
CREATE FUNCTION idem_namespace_drop(namespace text)
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
    PERFORM @extschema@.idem_lock_records_for_admin();
    SELECT count(*) INTO records FROM @extschema@.idempotency_record r WHERE r.namespace = ns;
    IF records > 0 THEN
        RAISE EXCEPTION 'cannot drop idempotency namespace "%"', ns
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('The namespace has %s records.', records),
                  HINT = 'Wait until they have expired and been purged.';
    END IF;
    DELETE FROM @extschema@.idem_namespace_config c WHERE c.namespace = ns;
    RETURN true;
END;
$$;

COMMENT ON FUNCTION idem_namespace_drop(text) IS
'Unregisters a namespace without records, with its grants; false when it was not registered';

-- Lets role (and its members) use namespace: begin, commit and fail on its
-- keys. Registers the namespace with default settings if needed, and grants
-- USAGE on this schema, without which no function here can be called.
CREATE FUNCTION idem_grant(namespace text, role regrole)
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
    END IF;
    INSERT INTO @extschema@.idem_namespace_config (namespace) VALUES (ns) ON CONFLICT DO NOTHING;
    INSERT INTO @extschema@.idem_namespace_grant (namespace, grantee) VALUES (ns, role) ON CONFLICT DO NOTHING;
    granted := FOUND;
    EXECUTE format('GRANT USAGE ON SCHEMA @extschema@ TO %s', role);
    RETURN granted;
END;
$$;

COMMENT ON FUNCTION idem_grant(text, regrole) IS
'Lets a role use a namespace (registering it if needed); false when it already could';

-- Takes the use of namespace away from role. USAGE on the schema stays: the
-- role may hold other namespaces.
CREATE FUNCTION idem_revoke(namespace text, role regrole)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ns ALIAS FOR namespace;
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

-- Administration is for the extension's owner (or whoever it grants).
REVOKE ALL ON FUNCTION idem_namespace_configure(text, interval, interval, boolean, boolean, integer),
                       idem_namespace_drop(text), idem_grant(text, regrole), idem_revoke(text, regrole)
    FROM PUBLIC;

-- The registry with its grants, one row per registered namespace.
CREATE VIEW idem_namespaces AS
SELECT c.namespace, c.replay_window, c.in_progress_lease, c.store_request, c.hash_keys,
       c.max_payload_bytes,
       ARRAY(SELECT g.grantee FROM @extschema@.idem_namespace_grant g
             WHERE g.namespace = c.namespace ORDER BY g.grantee::text) AS grantees,
       c.configured_at
FROM @extschema@.idem_namespace_config c;

REVOKE ALL ON idem_namespaces FROM PUBLIC;
GRANT SELECT ON idem_namespaces TO pg_monitor;

-- The store ------------------------------------------------------------------

-- attempt counts takeovers of an expired in-progress lease; with
-- store_request off the request is not kept.
ALTER TABLE idempotency_record ADD COLUMN attempt integer NOT NULL DEFAULT 1;
ALTER TABLE idempotency_record ALTER COLUMN request_payload DROP NOT NULL;

-- attempt is set on fresh (1, or more after a takeover); age on in_flight
-- (how long ago the holder began).
ALTER TYPE idem_outcome ADD ATTRIBUTE attempt integer;
ALTER TYPE idem_outcome ADD ATTRIBUTE age interval;

-- The store functions check the caller's namespace grant, then reach the
-- table as its owner. Their search_path is pinned: nothing the caller put on
-- theirs can stand in for an operator, function or cast they use.
ALTER FUNCTION idem_begin(text, text, jsonb, interval) SET search_path = pg_catalog, pg_temp;

-- The transitions take the attempt that idem_begin answered with fresh: when
-- given, they act only while the record is still that attempt's, so a caller
-- whose lease ran out cannot finish or forget a record another has taken
-- over. (Replaced, not overloaded: with a default, both would match a call
-- with three arguments.)
DROP FUNCTION idem_commit(text, text, jsonb);
DROP FUNCTION idem_fail_permanent(text, text, jsonb);
DROP FUNCTION idem_fail_transient(text, text);

CREATE FUNCTION idem_commit(namespace text, key text, result jsonb, attempt integer DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_commit'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION idem_commit(text, text, jsonb, integer) IS
'Records the result of an in-progress operation for replay (only while it is still attempt, when given)';

CREATE FUNCTION idem_fail_permanent(namespace text, key text, error jsonb, attempt integer DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_fail_permanent'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION idem_fail_permanent(text, text, jsonb, integer) IS
'Records a permanent error ({"class_tag", "message", "cause"?}) of an in-progress operation for replay';

CREATE FUNCTION idem_fail_transient(namespace text, key text, attempt integer DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_fail_transient'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION idem_fail_transient(text, text, integer) IS
'Forgets an in-progress operation so that the next idem_begin is fresh';

-- Purging crosses namespaces: it runs as the owner, for the roles the owner
-- grants it to (the pg_cron job's, an operator's), not for PUBLIC.
ALTER FUNCTION idem_purge(integer, integer) SECURITY DEFINER;
REVOKE ALL ON FUNCTION idem_purge(integer, integer) FROM PUBLIC;
REVOKE ALL ON PROCEDURE idem_purge_batches(integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_stats_count_purged(bigint) FROM PUBLIC;

-- Roles that 0.3.0 let write the table (its docs asked operators to grant
-- application roles SELECT, INSERT, UPDATE, DELETE) keep exactly what they
-- could do, through the functions: every namespace that has records now if
-- they could insert, and purging if they could delete. Their privileges on
-- the table itself are revoked: from now on no application role touches it.
-- A role that could only read keeps that, with a warning.
DO $migrate$
DECLARE
    app record;
    namespaces text[];
BEGIN
    SELECT array_agg(DISTINCT r.namespace) INTO namespaces FROM @extschema@.idempotency_record r;
    FOR app IN
        SELECT a.grantee::regrole AS role,
               bool_or(a.privilege_type = 'INSERT') AS could_insert,
               bool_or(a.privilege_type = 'DELETE') AS could_delete,
               bool_or(a.privilege_type <> 'SELECT') AS could_write
        FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
        WHERE c.oid = '@extschema@.idempotency_record'::regclass
          AND a.grantee <> c.relowner AND a.grantee <> 0
        GROUP BY a.grantee
    LOOP
        IF NOT app.could_write THEN
            RAISE WARNING 'idempotency 0.4.0: role % can read every namespace''s records in idempotency_record', app.role
                USING HINT = 'Revoke it, and grant pg_monitor for idem_namespace_stats, unless that is intended.';
            CONTINUE;
        END IF;
        IF app.could_insert AND namespaces IS NOT NULL THEN
            PERFORM @extschema@.idem_grant(n, app.role) FROM unnest(namespaces) n;
        END IF;
        IF app.could_delete THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION @extschema@.idem_purge(integer, integer) TO %s', app.role);
            EXECUTE format('GRANT EXECUTE ON PROCEDURE @extschema@.idem_purge_batches(integer) TO %s', app.role);
        END IF;
        EXECUTE format('REVOKE ALL ON @extschema@.idempotency_record FROM %s', app.role);
        RAISE NOTICE 'idempotency 0.4.0: role % now uses % namespace(s) through idem_grant instead of the table%',
            app.role, CASE WHEN app.could_insert THEN coalesce(array_length(namespaces, 1), 0) ELSE 0 END,
            CASE WHEN app.could_delete THEN ', and may purge' ELSE '' END;
    END LOOP;
END;
$migrate$;
