/* idempotency--0.7.0--0.8.0.sql: release 0.8.0, recovery points for work
   that spans several transactions. A holder records how far its work got
   (idem_record_point: a phase and its state, with its fence); a begin that
   takes an abandoned claim over says so (fresh with takeover true) and
   answers the last recovery point, so the new attempt resumes after it;
   in_flight and fresh answers say when the lease ends, and
   idem_http_response turns that into Retry-After. The table gains the two
   recovery columns (nullable, no rewrite), idem_outcome four columns at its
   end, idem_stats the takeovers and recovery points counted. idem_begin
   gets a new entry point: a session still running an older library is
   refused (42883) rather than answering a takeover as a bare fresh. */

\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.8.0'" to load this file. \quit

-- The store ------------------------------------------------------------------

ALTER TYPE idem_outcome ADD ATTRIBUTE lease_ends_at timestamptz;
ALTER TYPE idem_outcome ADD ATTRIBUTE takeover boolean;
ALTER TYPE idem_outcome ADD ATTRIBUTE recovery_point text;
ALTER TYPE idem_outcome ADD ATTRIBUTE recovery_state jsonb;

-- Nullable columns without a default: no rewrite, every record intact.
ALTER TABLE idempotency_record ADD COLUMN recovery_point text, ADD COLUMN recovery_state jsonb;

CREATE OR REPLACE FUNCTION idem_begin(namespace text, key text, request jsonb, replay_window interval DEFAULT NULL,
                           in_flight_wait interval DEFAULT NULL)
RETURNS @extschema@.idem_outcome
AS 'MODULE_PATHNAME', 'idem_begin_0_8'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- idem_fail_transient refuses a record whose work may have had effects
-- (taken over, or with a recovery point): a new entry point, so that a
-- session still running an older library is refused rather than forgets it.
CREATE OR REPLACE FUNCTION idem_fail_transient(namespace text, key text, fence bigint DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_fail_transient_0_8'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Removing a lease with records in progress: the hint names the ways to
-- end them that 0.8.0 leaves (idem_fail_transient refuses some).
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
                      HINT = 'Let the records in progress be finished or taken over, or end them with idem_fail_transient (a first attempt without a recovery point) or idem_release_key; then remove the lease.';
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

-- Many keys of one namespace in one call (a queue consumer's batch): each
-- key begun as idem_begin begins it, with the request at the same place in
-- requests, one outcome per key in the keys' order (use WITH ORDINALITY). A
-- key given twice is begun twice, the second time after the first. The keys
-- are begun in the order of their bytes, so two batches with keys in common
-- cannot deadlock; in_flight_wait bounds the whole call. At most 10000 keys.
CREATE FUNCTION idem_begin_batch(namespace text, keys text[], requests jsonb[], replay_window interval DEFAULT NULL,
                                 in_flight_wait interval DEFAULT NULL)
RETURNS SETOF @extschema@.idem_outcome
AS 'MODULE_PATHNAME', 'idem_begin_batch'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 100;

COMMENT ON FUNCTION idem_begin_batch(text, text[], jsonb[], interval, interval) IS
'idem_begin for many keys of one namespace: one outcome per key, in the keys'' order';

-- The entry points of a store distributed by namespace include a batch begin.
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
             'text,text,bigint', 'void', 'PERFORM @extschema@.idem_fail_transient(namespace, key, fence);'),
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
                      HINT = 'Drop or rename it, then call idem_create_entry_points again.';
        END IF;
        PERFORM create_distributed_function(made,
                                            CASE routing WHEN 'key_value' THEN 'key' ELSE 'namespace' END,
                                            colocate_with := store::text, force_delegation := true);
        RETURN NEXT made;
    END LOOP;
END;
$$;

-- A holder's recovery point: the phase its work has completed (point) and
-- what a later attempt needs to resume after it (state, say the payment
-- provider's charge id), recorded with the claim in the caller's
-- transaction. A begin that takes the claim over answers them, so the new
-- attempt resumes after the point instead of doing the phase again. A
-- heartbeat too: the lease runs again from now. Fenced as the transitions
-- are; returns the new end of the lease.
CREATE FUNCTION idem_record_point(namespace text, key text, fence bigint, point text, state jsonb DEFAULT NULL)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'idem_record_point'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_record_point(text, text, bigint, text, jsonb) IS
'Records how far a claim''s work got (a phase and its state), answered to a begin that takes it over; a heartbeat too';

-- The HTTP response for an outcome that needs no work: a replay, a request
-- in flight or a reused key. A replayed result recorded as
-- {"status": s, "headers": {...}, "body": b} replays status s, its headers
-- and body b; any other result replays as 200 with the result as the body.
-- A replayed error is 422 with a problem body: its class_tag as the code,
-- its message as the detail. Every replay adds Idempotency-Replayed: true.
-- in_flight is 409 with Retry-After: the seconds from now (the clock:
-- VOLATILE) until the holder's claim may be taken over (rounded up, at
-- least 1) when the outcome says when that is, else retry_after; mismatch is 422 and never carries the
-- recorded request, which may be another client's; both are of type
-- docs_uri, with a Link header, when it is given. A fresh outcome has no
-- response yet: that is an error.
CREATE OR REPLACE FUNCTION idem_http_response(outcome @extschema@.idem_outcome, retry_after integer DEFAULT 1,
                                   docs_uri text DEFAULT NULL,
                                   OUT status integer, OUT headers jsonb, OUT body jsonb)
RETURNS record
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    problem constant jsonb := jsonb_build_object('Content-Type', 'application/problem+json')
        || CASE WHEN docs_uri IS NULL THEN '{}'
                ELSE jsonb_build_object('Link', format('<%s>; rel="describedby"', docs_uri)) END;
    replayed constant jsonb := '{"Idempotency-Replayed": "true"}';
    recorded jsonb;   -- the status a replayed result recorded
BEGIN
    IF outcome IS NOT DISTINCT FROM NULL THEN
        RETURN;   -- NULL in, NULL out, as when the function was STRICT
    END IF;
    IF retry_after IS NULL OR retry_after < 0 THEN
        RAISE EXCEPTION 'invalid Retry-After'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('retry_after must be zero or more seconds, not %s.', coalesce(retry_after::text, 'NULL'));
    END IF;
    CASE outcome.kind
    WHEN 'prior_result' THEN
        IF jsonb_typeof(outcome.result) = 'object' AND outcome.result ? 'status' AND outcome.result ? 'body' THEN
            recorded := outcome.result -> 'status';
            body := outcome.result -> 'body';
            headers := CASE WHEN jsonb_typeof(outcome.result -> 'headers') = 'object'
                            THEN outcome.result -> 'headers' ELSE '{}' END || replayed;
        ELSE
            recorded := '200';
            body := outcome.result;
            headers := replayed;
        END IF;
    WHEN 'prior_error' THEN
        status := 422;
        body := @extschema@.idem_http_problem(422, outcome.error ->> 'class_tag', outcome.error ->> 'message');
        headers := jsonb_build_object('Content-Type', 'application/problem+json') || replayed;
    WHEN 'in_flight' THEN
        status := 409;
        body := @extschema@.idem_http_problem(409, 'IDEMPOTENCY_REQUEST_IN_PROGRESS',
            'A request with this idempotency key is still being processed; retry after the time in Retry-After.',
            docs_uri);
        headers := problem || jsonb_build_object('Retry-After', CASE
            WHEN outcome.lease_ends_at IS NULL THEN retry_after::text
            ELSE greatest(1, ceil(extract(epoch FROM outcome.lease_ends_at - clock_timestamp())))::bigint::text
            END);
    WHEN 'mismatch' THEN
        status := 422;
        body := @extschema@.idem_http_problem(422, 'IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST',
            'This idempotency key was already used with a different request.', docs_uri);
        headers := problem;
    WHEN 'fresh' THEN
        RAISE EXCEPTION 'a fresh outcome has no HTTP response yet'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'idem_http_response answers replays, requests in flight and reused keys.',
                  HINT = 'Do the work, record it with idem_commit or idem_fail_permanent, and answer with what you recorded.';
    ELSE
        RAISE EXCEPTION 'invalid idempotency outcome'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Its kind is NULL; pass the row idem_begin returned.';
    END CASE;
    IF recorded IS NOT NULL THEN
        IF NOT (jsonb_typeof(recorded) = 'number' AND recorded::numeric BETWEEN 100 AND 599
                AND recorded::numeric = trunc(recorded::numeric)) THEN
            RAISE EXCEPTION 'invalid recorded HTTP status'
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = format('The recorded status %s is not an integer from 100 to 599.', recorded);
        END IF;
        status := recorded::numeric;
    END IF;
END;
$$;

COMMENT ON FUNCTION idem_http_response(@extschema@.idem_outcome, integer, text) IS
'The HTTP status, headers and body for a replay, a request in flight or a reused key';

-- Stores the service owns ----------------------------------------------------

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

-- Statistics -----------------------------------------------------------------

-- How many begins took an abandoned claim over, and how many recovery
-- points holders recorded (NULLs unless preloaded).
CREATE FUNCTION idem_stats_recovery(OUT takeovers bigint, OUT recovery_points bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_stats_recovery'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idem_stats_recovery() IS
'Cumulative counts of takeovers and of recovery points recorded (NULLs unless preloaded)';

REVOKE ALL ON FUNCTION idem_stats_recovery() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_stats_recovery() TO pg_monitor;

-- held_key_locks: the store's per-key locks granted now in this database,
-- which counts the claims held by their lock alone (no row shows them; a
-- namespace without a lease), plus any begin between its look and its answer.
-- Their tags are keyed to name no namespace, so the count is per database.
CREATE OR REPLACE VIEW idem_stats AS
SELECT c.*, pg_catalog.pg_total_relation_size('@extschema@.idempotency_record'::pg_catalog.regclass) AS table_bytes,
       (SELECT pg_catalog.count(*) FROM pg_catalog.pg_locks l
        WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory' AND l.objsubid OPERATOR(pg_catalog.=) 18756 AND l.granted
          AND l.database OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database d
                                                 WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
       ) AS held_key_locks,
       @extschema@.idem_stats_released_keys() AS released_keys,
       r.takeovers, r.recovery_points
FROM @extschema@.idem_stats_counters() c, @extschema@.idem_stats_recovery() r;

COMMENT ON VIEW idem_stats IS
'Cumulative counters (counters_on false unless preloaded), the size of the store, the per-key locks held now, keys released, takeovers and recovery points';

-- Privileges ------------------------------------------------------------------

-- The objects this update makes get the grants the script gives them (the
-- owner's, PUBLIC's, and pg_monitor's on the views and the functions behind
-- them) and no more. ALTER DEFAULT PRIVILEGES of the installing role (EXECUTE on its
-- functions, SELECT on its tables, for an application role or for
-- pg_monitor, say) would add others, and
-- that role could then read every namespace's records and the lock secret,
-- run what only the owner may (idem_key_state, idem_release_key, the
-- purge): they are taken back here, privilege by privilege
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
          AND d.objid IN ('@extschema@.idem_record_point(text,text,bigint,text,jsonb)'::pg_catalog.regprocedure,
                          '@extschema@.idem_begin_batch(text,text[],jsonb[],interval,interval)'::pg_catalog.regprocedure,
                          '@extschema@.idem_stats_recovery()'::pg_catalog.regprocedure)
    LOOP
        EXECUTE pg_catalog.format('REVOKE %s ON %s %s FROM %I', x.privilege_type, x.kind, x.name, x.rolname);
    END LOOP;
END;
$defaults$;

-- idem_stats calls idem_stats_recovery as the role that reads the view: a
-- role (or PUBLIC) granted EXECUTE on the functions behind it
-- (idem_stats_counters), rather than through pg_monitor, gets EXECUTE on
-- the new one too, so that
-- it still reads idem_stats (an ordinary grant, kept by pg_dump).
DO $stats_readers$
DECLARE
    x record;
BEGIN
    FOR x IN
        SELECT DISTINCT CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(r.rolname) END AS grantee
        FROM pg_catalog.pg_proc p
        CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) a
        LEFT JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
        WHERE p.oid = '@extschema@.idem_stats_counters()'::pg_catalog.regprocedure
          AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner
          AND a.grantee <> 'pg_monitor'::pg_catalog.regrole
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION @extschema@.idem_stats_recovery() TO %s', x.grantee);
    END LOOP;
    -- Those grants are the user's, not the extension's initial privileges
    -- (pg_dump keeps them): the cleanup below removes the roles' entries,
    -- and PUBLIC's is removed here.
    UPDATE pg_catalog.pg_init_privs i
    SET initprivs = ARRAY(SELECT item FROM pg_catalog.unnest(i.initprivs) item
                          WHERE (SELECT e.grantee <> 0 FROM pg_catalog.aclexplode(ARRAY[item]) e LIMIT 1))
    WHERE i.privtype = 'e' AND i.classoid = 'pg_catalog.pg_proc'::pg_catalog.regclass
      AND i.objoid = '@extschema@.idem_stats_recovery()'::pg_catalog.regprocedure;
END;
$stats_readers$;

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
