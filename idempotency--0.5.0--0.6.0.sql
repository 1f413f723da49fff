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
-- the fences the original had already handed out. A session still running
-- 0.5.0's library fails to claim (the sequence is gone) until it reconnects.
-- Out of the extension first, which also takes it off the list of what
-- pg_dump dumps (pg_extension.extconfig): a dropped member stays there.
ALTER EXTENSION idempotency DROP SEQUENCE idem_fence_seq;
DROP SEQUENCE idem_fence_seq;

-- idem_begin takes the in-flight wait per call: the setting of that name is
-- no longer taken from a session. A new symbol: a session still running an
-- older library fails cleanly (it would ignore the argument).
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

-- The registry ---------------------------------------------------------------

-- Reads store_request only once the library is loaded: before, a session's
-- own placeholder could be read instead of the server's setting.
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
    -- The settings are read once idem_parse has loaded the library: before,
    -- a value a session set is a placeholder any role may set (see idem_purge).
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
        SELECT count(*) INTO records FROM @extschema@.idempotency_record r WHERE r.namespace = ns;
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
        SELECT count(*) INTO records FROM @extschema@.idempotency_record r
        WHERE r.namespace = ns AND r.status = 'in_progress';
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
        UPDATE @extschema@.idempotency_record r SET request_payload = NULL
        WHERE r.namespace = ns AND r.request_payload IS NOT NULL;
        GET DIAGNOSTICS records = ROW_COUNT;
        IF records > 0 THEN
            RAISE NOTICE 'idempotency: removed the stored request from % record% of namespace "%"',
                records, CASE WHEN records = 1 THEN '' ELSE 's' END, ns;
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

-- Settings --------------------------------------------------------------------

-- idempotency.in_progress_lease is server-wide from 0.6.0 on (every session
-- must agree on which claims may outlive their transaction): a value set
-- for a database or a role is refused when the library loads, with a
-- WARNING, and the server's value does not apply in those sessions until
-- the value is removed. Say which to remove.
DO $settings$
DECLARE
    s record;
BEGIN
    FOR s IN
        SELECT CASE WHEN x.setrole = 0 AND x.setdatabase = 0 THEN 'ALTER ROLE ALL'
                    WHEN x.setrole = 0 THEN 'ALTER DATABASE ' || pg_catalog.quote_ident(d.datname)
                    ELSE 'ALTER ROLE ' || pg_catalog.quote_ident(r.rolname)
                         || coalesce(' IN DATABASE ' || pg_catalog.quote_ident(d.datname), '') END AS statement
        FROM pg_catalog.pg_db_role_setting x
        LEFT JOIN pg_catalog.pg_database d ON d.oid = x.setdatabase
        LEFT JOIN pg_catalog.pg_roles r ON r.oid = x.setrole
        WHERE EXISTS (SELECT FROM pg_catalog.unnest(x.setconfig) c WHERE c LIKE 'idempotency.in\_progress\_lease=%')
    LOOP
        RAISE WARNING 'idempotency.in_progress_lease is set by "% SET", which 0.6.0 no longer allows', s.statement
            USING DETAIL = 'The lease is server-wide now: sessions it applies to ignore that value, with a warning, and the server''s lease with it.',
                  HINT = format('Remove it (%s RESET idempotency.in_progress_lease); set the lease in postgresql.conf, or for the namespace with idem_namespace_configure.', s.statement);
    END LOOP;
END;
$settings$;

-- Privileges ----------------------------------------------------------------

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
