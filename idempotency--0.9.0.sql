/* idempotency--0.9.0.sql: release 0.9.0, installed directly. An existing
   installation reaches the same objects through the update scripts
   (sql/setup.sql compares the two). */

\echo Use "CREATE EXTENSION idempotency" to load this file. \quit

-- The schema must be the installer's own (or a superuser's, who could do
-- anything its owner can: pg_dump creates the schema and gives it to its
-- owner before CREATE EXTENSION, and another superuser may restore that)
-- and empty: a schema that another role created first would let that role
-- drop the store (DROP SCHEMA ... CASCADE), and objects already in it would
-- sit among the extension's. (CREATE EXTENSION creates the schema for the
-- installer when it is missing.)
DO $check$
DECLARE
    schema_owner regrole := (SELECT n.nspowner::regrole FROM pg_catalog.pg_namespace n
                             WHERE n.oid = '@extschema@'::pg_catalog.regnamespace);
    present text := (SELECT o.name FROM (
                         SELECT c.relname::text AS name FROM pg_catalog.pg_class c
                         WHERE c.relnamespace = '@extschema@'::pg_catalog.regnamespace
                         UNION ALL
                         SELECT p.proname::text FROM pg_catalog.pg_proc p
                         WHERE p.pronamespace = '@extschema@'::pg_catalog.regnamespace
                         UNION ALL
                         SELECT t.typname::text FROM pg_catalog.pg_type t
                         WHERE t.typnamespace = '@extschema@'::pg_catalog.regnamespace
                           AND t.typrelid = 0 AND t.typelem = 0) o
                     LIMIT 1);
BEGIN
    IF schema_owner OPERATOR(pg_catalog.<>) current_user::regrole
       AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) schema_owner) THEN
        RAISE EXCEPTION 'schema "@extschema@" is owned by role %, not by %', schema_owner, current_user
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'Its owner could drop the extension''s objects (DROP SCHEMA ... CASCADE) or change their privileges.',
                  HINT = 'Drop or rename that schema, or have its owner hand it over (ALTER SCHEMA ... OWNER TO), then run CREATE EXTENSION again.';
    END IF;
    IF present IS NOT NULL THEN
        RAISE EXCEPTION 'schema "@extschema@" is not empty'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = pg_catalog.format('It already holds "%s" (and maybe more); the extension needs a schema of its own.', present),
                  HINT = 'Drop or rename that schema, then run CREATE EXTENSION again.';
    END IF;
END;
$check$;

-- Keys and fingerprints --------------------------------------------------------

-- Volatility, for every function below:
--   IMMUTABLE      the result depends only on the arguments (and the database
--                  encoding, fixed for a database's lifetime), never on
--                  tables, settings or time, so the planner may fold calls on
--                  constants and the result may sit in an index expression.
--   PARALLEL SAFE  no shared state, no writes, nothing session-local.
--   STRICT         only where NULL in must mean NULL out. idem_mint and
--                  idem_parse are not STRICT: a NULL namespace (or NULL parts)
--                  is a caller's bug and raises an error, which STRICT would
--                  hide behind a NULL result.

CREATE FUNCTION idem_mint(namespace text, parts text[])
RETURNS text
AS 'MODULE_PATHNAME', 'idem_mint'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION idem_mint(text, text[]) IS
'Deterministic idempotency key: lowercase hex SHA-256 over the length-prefixed UTF-8 parts';

CREATE FUNCTION idem_parse(namespace text, raw text)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_parse'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION idem_parse(text, text) IS
'Validates a caller-supplied idempotency key and returns it trimmed; NULL in, NULL out';

CREATE FUNCTION idem_canonical(payload jsonb)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_canonical'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idem_canonical(jsonb) IS
'Canonical JSON text of a value: object keys in code-point order, no whitespace';

CREATE FUNCTION idem_request_hash(payload jsonb)
RETURNS bytea
AS 'MODULE_PATHNAME', 'idem_request_hash'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idem_request_hash(jsonb) IS
'Request fingerprint: SHA-256 of the UTF-8 canonical JSON of a value';

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

-- What idem_begin answers (the seed's IdempotencyOutcome variants).
CREATE TYPE idem_kind AS ENUM ('fresh', 'in_flight', 'prior_result', 'prior_error', 'mismatch');

-- idem_begin's answer. result is set for prior_result, error for
-- prior_error; recorded_request, recorded_hash and submitted_hash for
-- mismatch (submitted_hash is set on every answer); attempt and fence for
-- fresh (the attempt number, 1 or more after takeovers, and the fence the
-- transitions may require); age for in_flight (how long ago the holder
-- claimed the key). The type only ever grows at its end
-- (docs/internals.md).
CREATE TYPE idem_outcome AS (
    kind             @extschema@.idem_kind,
    result           jsonb,
    error            jsonb,
    recorded_request jsonb,
    recorded_hash    bytea,
    submitted_hash   bytea,
    attempt          integer,
    age              interval,
    fence            bigint,
    lease_ends_at    timestamptz,
    takeover         boolean,
    recovery_point   text,
    recovery_state   jsonb
);

-- One row per (namespace, key), shared by every consumer in the database;
-- the namespace column keeps their keyspaces apart. Keys compare bytewise
-- (COLLATE "C"): a key is an opaque token, and C comparison is the fastest.
-- attempt counts takeovers of an abandoned in-progress record; fence is the
-- claim's, drawn at random; recovery_point and recovery_state are the
-- last a holder recorded (idem_record_point); with store_request off the
-- request is not kept. The columns stand in the order the update scripts
-- leave them, which the C code reads by number (a store the service owns
-- has the same first twelve, and the recovery columns next to keep
-- recovery points). The store's C code is the table's only writer and keeps its rules (the status, a 32-byte hash, the payload that
-- goes with each status) where it writes: CHECK constraints would be
-- compiled again by every statement that writes (docs/performance.md).
CREATE TABLE idempotency_record (
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
    CONSTRAINT idempotency_record_pkey PRIMARY KEY (namespace, key_value)
);

-- Purge deletes in expires_at order; this index makes each chunk cheap.
CREATE INDEX idempotency_record_expires_at_idx ON idempotency_record (expires_at);

-- pg_dump keeps the rows (a dump without them would replay nothing).
SELECT pg_catalog.pg_extension_config_dump('@extschema@.idempotency_record', '');

-- Applications go through the functions, never the table.
REVOKE ALL ON idempotency_record FROM PUBLIC;

-- Not used since 0.6.0, whose fences are drawn at random: kept so that a
-- dump of 0.5.0, which sets its position, restores into this release.
CREATE SEQUENCE idem_fence_seq AS bigint START 4294967296 MINVALUE 4294967296 NO CYCLE;
REVOKE ALL ON SEQUENCE idem_fence_seq FROM PUBLIC;

-- The key that lock tags are keyed with: a role that reads pg_locks sees 64
-- bits of HMAC-SHA256(secret, namespace, key), against which it can test no
-- guess, and with which it can make no two keys collide. Only the owner reads
-- it. Not dumped: a restored database draws its own.
CREATE TABLE idem_lock_secret (
    secret bytea NOT NULL CONSTRAINT idem_lock_secret_size_check CHECK (pg_catalog.octet_length(secret) = 32)
);
CREATE UNIQUE INDEX idem_lock_secret_one_row ON idem_lock_secret ((true));
REVOKE ALL ON idem_lock_secret FROM PUBLIC;
-- Two random UUIDs are 32 bytes with 244 random bits (pg_strong_random).
INSERT INTO idem_lock_secret
SELECT pg_catalog.decode(pg_catalog.replace(pg_catalog.gen_random_uuid()::text OPERATOR(pg_catalog.||)
                                            pg_catalog.gen_random_uuid()::text, '-', ''), 'hex');

-- Volatility of the store functions: VOLATILE (they read and write the
-- table and depend on the transaction), not STRICT (a NULL argument is an
-- error that says which), PARALLEL UNSAFE (they write). They check the
-- caller's namespace grant, then reach the table as its owner, through the
-- table access methods or through SQL that names every table, function and
-- operator with its schema: nothing on the caller's search_path can stand
-- in for one, and the per-call cost of pinning search_path is saved.

-- replay_window and in_flight_wait, when given, are this call's (the
-- settings of those names are never taken from a session: see
-- docs/api.md). Every claim (a fresh begin or a takeover) draws a fence at
-- random from [2^32, 2^63), so two claims of one key, in this database or
-- in any copy of it, have the same fence with negligible probability.
CREATE FUNCTION idem_begin(namespace text, key text, request jsonb, replay_window interval DEFAULT NULL,
                           in_flight_wait interval DEFAULT NULL)
RETURNS @extschema@.idem_outcome
AS 'MODULE_PATHNAME', 'idem_begin_0_9'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_begin(text, text, jsonb, interval, interval) IS
'Starts an idempotent operation: fresh (go ahead), in_flight, prior_result, prior_error or mismatch';

-- Many keys of one namespace in one call (a queue consumer's batch): each
-- key begun as idem_begin begins it, with the request at the same place in
-- requests, one outcome per key in the keys' order (use WITH ORDINALITY). A
-- key given twice is begun twice, the second time after the first. The keys
-- are begun in the order of their bytes, so two batches with keys in common
-- cannot deadlock; in_flight_wait bounds the whole call. At most 10000 keys.
CREATE FUNCTION idem_begin_batch(namespace text, keys text[], requests jsonb[], replay_window interval DEFAULT NULL,
                                 in_flight_wait interval DEFAULT NULL)
RETURNS SETOF @extschema@.idem_outcome
AS 'MODULE_PATHNAME', 'idem_begin_batch_0_9'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 100;

COMMENT ON FUNCTION idem_begin_batch(text, text[], jsonb[], interval, interval) IS
'idem_begin for many keys of one namespace: one outcome per key, in the keys'' order';

-- The transitions may take the fence that idem_begin answered with fresh:
-- when given, they act only while the record is still that claim's, so a
-- caller whose lease ran out cannot finish or forget a record another has
-- taken over, or one begun again since, or one claimed in another copy of
-- the database. Fences are compared for equality only.
CREATE FUNCTION idem_commit(namespace text, key text, result jsonb, fence bigint DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_commit_0_5'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_commit(text, text, jsonb, bigint) IS
'Records the result of an in-progress operation for replay (only while it is still the claim that drew fence, when given)';

CREATE FUNCTION idem_fail_permanent(namespace text, key text, error jsonb, fence bigint DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_fail_permanent_0_5'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_fail_permanent(text, text, jsonb, bigint) IS
'Records a permanent error ({"class_tag", "message", "cause"?}) of an in-progress operation for replay';

CREATE FUNCTION idem_fail_transient(namespace text, key text, fence bigint DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_fail_transient_0_8'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_fail_transient(text, text, bigint) IS
'Forgets an in-progress operation so that the next idem_begin is fresh';

-- Deletes expired rows, batch_size at a time (at most max_batches chunks
-- that deleted something, when given), inside the caller's transaction,
-- from the extension's table and every store a namespace is bound to.
-- SKIP LOCKED: a row another transaction holds is neither waited for nor
-- deleted; rows that other transactions have not committed are invisible
-- here, so untouched too. An in_progress record whose lease still runs is
-- never deleted. Purging crosses namespaces: it runs as the owner, for the
-- roles the owner grants it to (the pg_cron job's, an operator's), not for
-- PUBLIC.
CREATE FUNCTION idem_purge(batch_size integer DEFAULT 10000, max_batches integer DEFAULT NULL)
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

COMMENT ON FUNCTION idem_purge(integer, integer) IS
'Deletes expired records in chunks inside the current transaction; returns how many';

-- The same, committing after every chunk, for pg_cron and operators purging
-- millions of rows: no lock is held longer than one chunk, nor a snapshot
-- longer than a chunk or a pause, and idempotency.purge_pause (at most 10 s)
-- spaces the chunks out so that requests running meanwhile keep the cores
-- and the WAL. CALL it outside an explicit transaction block. A procedure that commits
-- cannot pin search_path with SET, so its operators are schema-qualified.
CREATE PROCEDURE idem_purge_batches(batch_size integer DEFAULT 10000)
LANGUAGE plpgsql
AS $$
DECLARE
    n bigint;
    batches integer := 0;
    total bigint := 0;
    pause text;
BEGIN
    LOOP
        n := @extschema@.idem_purge(batch_size, 1);
        COMMIT;
        EXIT WHEN n OPERATOR(pg_catalog.=) 0;   -- every store is purged (one chunk may end a store, not all)
        total := total OPERATOR(pg_catalog.+) n;
        batches := batches OPERATOR(pg_catalog.+) 1;
        -- idempotency.purge_pause (read after the chunk: the library that
        -- defines it is loaded by then), e.g. '10ms'.
        pause := pg_catalog.current_setting('idempotency.purge_pause', true);
        IF pause OPERATOR(pg_catalog.<>) '0' THEN
            PERFORM pg_catalog.pg_sleep(pg_catalog.date_part('epoch', pause::pg_catalog.interval));
        END IF;
    END LOOP;
    RAISE NOTICE 'idempotency: purged % expired records in % batches', total, batches;
END;
$$;

COMMENT ON PROCEDURE idem_purge_batches(integer) IS
'Deletes expired records, committing after every chunk (for pg_cron); CALL outside a transaction block';

-- Typed use from SQL (the seed's typed wrapper). These take any composite
-- or scalar value and convert it with to_jsonb. They have their own names
-- rather than overloading idem_begin/idem_commit: an anyelement overload
-- beside the jsonb one makes every call with an untyped literal
-- (idem_begin('ns', 'k', '{"a": 1}')) fail as "not unique", and would turn a
-- varchar parameter from a driver into a JSON string without a word.

CREATE FUNCTION idem_begin_typed(namespace text, key text, request anyelement, replay_window interval DEFAULT NULL,
                                 in_flight_wait interval DEFAULT NULL)
RETURNS @extschema@.idem_outcome
LANGUAGE sql VOLATILE PARALLEL UNSAFE
AS $$ SELECT @extschema@.idem_begin(namespace, key, pg_catalog.to_jsonb(request), replay_window, in_flight_wait) $$;

COMMENT ON FUNCTION idem_begin_typed(text, text, anyelement, interval, interval) IS
'idem_begin for a value of any type, fingerprinted as to_jsonb(request)';

CREATE FUNCTION idem_commit_typed(namespace text, key text, result anyelement, fence bigint DEFAULT NULL)
RETURNS void
LANGUAGE sql VOLATILE PARALLEL UNSAFE
AS $$ SELECT @extschema@.idem_commit(namespace, key, pg_catalog.to_jsonb(result), fence) $$;

COMMENT ON FUNCTION idem_commit_typed(text, text, anyelement, bigint) IS
'idem_commit for a value of any type, recorded as to_jsonb(result)';

-- Why a stored JSON value cannot be the to_jsonb of a value of type typ,
-- or NULL when it can: a composite needs an object with exactly its
-- attributes (recursively), an array type a JSON array, any other type
-- (json and jsonb aside) a string, number or boolean. JSON null fits
-- anything. path names the position in the messages ($, $.field, $[3]).
-- Whether each scalar converts is left to idem_result.
CREATE FUNCTION idem_shape_mismatch(value jsonb, typ regtype, path text DEFAULT '$')
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

COMMENT ON FUNCTION idem_shape_mismatch(jsonb, regtype, text) IS
'Why a JSON value is not the shape to_jsonb gives the type, or NULL when it is (used by idem_result)';

-- Decodes a replayed result into the caller's type: the inverse of
-- idem_commit_typed. NULL when the outcome carries no result (any kind but
-- prior_result) or the result is JSON null. A stored value that no longer
-- fits the type (a missing or extra field, a JSON kind the type cannot
-- take, a value that does not convert) raises ID001 "incompatible stored
-- state", never a half-filled row.
CREATE FUNCTION idem_result(outcome @extschema@.idem_outcome, template anyelement)
RETURNS anyelement
LANGUAGE plpgsql STABLE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    typ regtype := pg_typeof(template);
    base oid := typ;
    stored jsonb := (outcome).result;
    why text;
    decoded ALIAS FOR $0;
    composite boolean;
    anonymous boolean;
    hint constant text := 'The type changed since the result was recorded. Decode it as jsonb, or use a new namespace for the new type.';
BEGIN
    IF stored IS NULL OR jsonb_typeof(stored) = 'null' THEN
        RETURN NULL;
    END IF;
    LOOP   -- a domain decodes as its base type, and is then checked as itself
        EXIT WHEN (SELECT t.typtype <> 'd' FROM pg_type t WHERE t.oid = base);
        base := (SELECT t.typbasetype FROM pg_type t WHERE t.oid = base);
    END LOOP;
    SELECT t.typtype = 'p' OR (t.typtype = 'c' AND t.typrelid = 0), t.typrelid <> 0
        INTO STRICT anonymous, composite FROM pg_type t WHERE t.oid = base;
    IF anonymous THEN
        RAISE EXCEPTION 'idem_result needs a named type, not %', typ
            USING ERRCODE = 'datatype_mismatch',
                  DETAIL = 'Pass a NULL of the type to decode into, for example NULL::my_result.';
    END IF;
    why := @extschema@.idem_shape_mismatch(stored, typ);
    IF why IS NOT NULL THEN
        RAISE EXCEPTION 'incompatible stored state: the stored result does not fit type %', typ
            USING ERRCODE = 'ID001', DETAIL = why,
                  HINT = hint;
    END IF;
    BEGIN
        -- Dynamic SQL for composites too: a cached jsonb_populate_record
        -- keeps the row type it first saw for the rest of the transaction,
        -- so a type altered in that transaction would decode half-filled.
        IF composite THEN
            EXECUTE 'SELECT r.* FROM pg_catalog.jsonb_populate_record($1, $2) r'
                INTO decoded USING template, stored;
        ELSE
            EXECUTE format('SELECT v FROM pg_catalog.jsonb_to_record($1) AS r(v %s)', typ)
                INTO decoded USING jsonb_build_object('v', stored);
        END IF;
    EXCEPTION WHEN data_exception OR integrity_constraint_violation THEN
        GET STACKED DIAGNOSTICS why = MESSAGE_TEXT;
        RAISE EXCEPTION 'incompatible stored state: the stored result does not fit type %', typ
            USING ERRCODE = 'ID001', DETAIL = 'A stored value does not convert: ' || why || '.',
                  HINT = hint;
    END;
    RETURN decoded;
END;
$$;

COMMENT ON FUNCTION idem_result(idem_outcome, anyelement) IS
'Decodes a replayed result into the type of template; ID001 when the stored shape no longer fits';

-- Statistics ---------------------------------------------------------------

-- The cumulative counters (kept in shared memory when the library is in
-- shared_preload_libraries). With counters_on false every other column is
-- NULL. Counts include calls whose transaction later rolled back.
CREATE FUNCTION idem_stats_counters(
    OUT counters_on boolean,
    OUT begin_fresh bigint,
    OUT begin_in_flight bigint,
    OUT begin_prior_result bigint,
    OUT begin_prior_error bigint,
    OUT begin_mismatch bigint,
    OUT commits bigint,
    OUT permanent_failures bigint,
    OUT transient_failures bigint,
    OUT waits bigint,
    OUT purged_rows bigint,
    OUT stats_reset timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_stats_counters'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idem_stats_counters() IS
'Cumulative counters of begin outcomes, transitions, waits and purged rows (NULL unless preloaded)';

CREATE FUNCTION idem_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'idem_stats_reset'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idem_stats_reset() IS
'Sets the counters of idem_stats back to zero';

-- Internal: idem_purge reports the rows it deleted here.
CREATE FUNCTION idem_stats_count_purged(rows bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_stats_count_purged'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idem_stats_count_purged(bigint) IS
'Internal: adds to the purged_rows counter (called by idem_purge)';

-- The counters and the size of the table with its indexes and TOAST.
-- How many keys idem_release_key released (NULL unless preloaded).
CREATE FUNCTION idem_stats_released_keys()
RETURNS bigint
AS 'MODULE_PATHNAME', 'idem_stats_released_keys'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idem_stats_released_keys() IS
'Cumulative count of keys idem_release_key released (NULL unless preloaded)';

REVOKE ALL ON FUNCTION idem_stats_released_keys() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_stats_released_keys() TO pg_monitor;

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
CREATE VIEW idem_stats AS
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

-- One row per namespace and store, counted from each table (full scans: for
-- an operator or a monitoring job once a minute, not for every request). An
-- in_progress row is visible here only once the transaction that began it
-- has committed without finishing it: an abandoned or long-running
-- operation. Reads the stores namespaces are bound to as the extension's
-- owner (a read runs no trigger).
CREATE FUNCTION idem_namespace_stats_figures(
    OUT namespace text, OUT in_progress bigint, OUT committed bigint, OUT failed bigint,
    OUT oldest_in_progress_age interval, OUT expired bigint, OUT row_bytes bigint, OUT store regclass,
    OUT oldest_expired_age interval)
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
                   s.row_bytes, t, s.oldest_expired_age
            FROM jsonb_to_recordset(figures) AS s(namespace text, in_progress bigint, committed bigint, failed bigint,
                                                  oldest_in_progress_age interval, expired bigint, row_bytes bigint,
                                                  oldest_expired_age interval);
    END LOOP;
END;
$$;

REVOKE ALL ON FUNCTION idem_namespace_stats_figures() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idem_namespace_stats_figures() TO pg_monitor;

CREATE VIEW idem_namespace_stats AS
SELECT namespace COLLATE "C" AS namespace, in_progress, committed, failed, oldest_in_progress_age, expired,
       row_bytes, store, oldest_expired_age
FROM @extschema@.idem_namespace_stats_figures();

COMMENT ON VIEW idem_namespace_stats IS
'Rows per namespace by status, the oldest committed in_progress row, expired rows not yet purged and how long the oldest has waited, bytes';

-- What is stored is not for every role: monitoring roles read the views,
-- superusers reset the counters.
REVOKE ALL ON idem_stats, idem_namespace_stats FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_stats_counters(), idem_stats_reset() FROM PUBLIC;
GRANT USAGE ON SCHEMA @extschema@ TO pg_monitor;
GRANT SELECT ON idem_stats, idem_namespace_stats TO pg_monitor;
GRANT EXECUTE ON FUNCTION idem_stats_counters() TO pg_monitor;

REVOKE ALL ON FUNCTION idem_purge(integer, integer) FROM PUBLIC;
REVOKE ALL ON PROCEDURE idem_purge_batches(integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_stats_count_purged(bigint) FROM PUBLIC;

-- What an operator sees of one key: its record, or a claim a transaction
-- holds by the key's lock alone (a namespace without a lease), which no
-- row shows. state: absent, held (by the lock, no row), in_flight (a
-- transaction is writing its row), in_progress (a row: a claim under a
-- lease, or abandoned), committed or failed; holder_pid: the backend of a
-- held or in_flight key (NULL for a prepared transaction). Reads the
-- server's lock table: for an operator, not for every request. It names
-- the backends working on a key, so only the extension's owner may run it
-- (and grant it).
CREATE FUNCTION idem_key_state(namespace text, key text,
    OUT state text, OUT holder_pid integer, OUT attempt integer, OUT claimed_at timestamptz,
    OUT expires_at timestamptz, OUT request_hash bytea)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_key_state'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_key_state(text, text) IS
'One key''s state (absent, held, in_flight, in_progress, committed, failed) and the backend holding it';

REVOKE ALL ON FUNCTION idem_key_state(text, text) FROM PUBLIC;

-- An operator's release of one key: its record is deleted, so that the next
-- begin of the key answers fresh (a result a bug recorded), without waiting
-- for purge or writing to the table. Returns the status the record had
-- (NULL: the key had none). Refused (55006) while a transaction holds the
-- key (a claim held by its lock, a row being written, this transaction's
-- own claim) or while an in_progress record's lease runs; counted in
-- idem_stats.released_keys and logged with the roles that did it. Only the
-- extension's owner may run it (and grant it); the caller must also be
-- granted the namespace.
CREATE FUNCTION idem_release_key(namespace text, key text)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_release_key'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_release_key(text, text) IS
'Deletes one key''s record (refused while a transaction or a lease holds it); returns the status it had';

REVOKE ALL ON FUNCTION idem_release_key(text, text) FROM PUBLIC;

-- A holder's heartbeat: the lease of its claim (a namespace with an
-- in_progress_lease) runs again from now, so that a long operation is not
-- taken over while it still works. Fenced as the transitions are; returns
-- the new end of the lease.
CREATE FUNCTION idem_extend_lease(namespace text, key text, fence bigint)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'idem_extend_lease'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_extend_lease(text, text, bigint) IS
'A heartbeat of a claim under a lease: its lease runs again from now (fenced); returns the new end';

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

-- HTTP ----------------------------------------------------------------------

-- The key in an Idempotency-Key header, as the IETF draft defines the field
-- (a Structured Field String, "8e03978e-...") or as a bare value
-- (8e03978e-...): the same key either way. reason says why a header holds
-- no key (NULL when there is no header). Answers, never raises, for a bad
-- header: it is the client's mistake.
CREATE FUNCTION idem_header_key(namespace text, header text, OUT key text, OUT reason text)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_header_key'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION idem_header_key(text, text) IS
'The key in an Idempotency-Key header (quoted sf-string or bare), or why it holds none';

-- An RFC 9457 problem-details body. type is docs_uri when the service
-- documents its problems there, else about:blank; title is the status's
-- reason phrase; code carries the machine-readable error code. docs_uri
-- also goes into a Link header, so only printable ASCII without spaces,
-- quotes or angle brackets is accepted.
CREATE FUNCTION idem_http_problem(status integer, code text, detail text, docs_uri text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF docs_uri ~ '[^!-~]|[<>"]' OR docs_uri = '' THEN
        RAISE EXCEPTION 'invalid problem documentation URI'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'docs_uri becomes the problem''s type and a Link header: printable ASCII without spaces, quotes or angle brackets, such as https://example.com/problems/idempotency.';
    END IF;
    RETURN jsonb_strip_nulls(jsonb_build_object(
        'type', coalesce(docs_uri, 'about:blank'),
        'title', CASE status
            WHEN 400 THEN 'Bad Request' WHEN 401 THEN 'Unauthorized' WHEN 402 THEN 'Payment Required'
            WHEN 403 THEN 'Forbidden' WHEN 404 THEN 'Not Found' WHEN 409 THEN 'Conflict'
            WHEN 410 THEN 'Gone' WHEN 412 THEN 'Precondition Failed' WHEN 422 THEN 'Unprocessable Content'
            WHEN 429 THEN 'Too Many Requests' WHEN 500 THEN 'Internal Server Error'
            WHEN 502 THEN 'Bad Gateway' WHEN 503 THEN 'Service Unavailable' END,
        'status', status,
        'detail', detail,
        'code', code));
END;
$$;

COMMENT ON FUNCTION idem_http_problem(integer, text, text, text) IS
'An RFC 9457 problem-details body (type docs_uri, or about:blank) with a code member';

-- The Idempotency-Key header of a request, checked: key is set when the
-- header holds a valid key; otherwise key is NULL and status, headers and
-- body are the 400 response (MISSING_IDEMPOTENCY_KEY when the header is
-- absent or NULL, INVALID_IDEMPOTENCY_KEY with the reason otherwise). With
-- docs_uri, the problem's type is that URI and a Link header (rel
-- "describedby") points there, as the draft shows. An invalid namespace is
-- the caller's bug, not the client's, and raises idem_parse's error.
CREATE FUNCTION idem_http_key(namespace text, header text, docs_uri text DEFAULT NULL,
                              OUT key text, OUT status integer, OUT headers jsonb, OUT body jsonb)
RETURNS record
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    reason text;
BEGIN
    SELECT h.key, h.reason INTO key, reason FROM @extschema@.idem_header_key(namespace, header) h;
    IF key IS NULL THEN
        status := 400;
        body := @extschema@.idem_http_problem(400,
            CASE WHEN reason IS NULL THEN 'MISSING_IDEMPOTENCY_KEY' ELSE 'INVALID_IDEMPOTENCY_KEY' END,
            coalesce(reason, 'This request needs an Idempotency-Key header.'), docs_uri);
        headers := jsonb_build_object('Content-Type', 'application/problem+json')
                   || CASE WHEN docs_uri IS NULL THEN '{}'
                           ELSE jsonb_build_object('Link', format('<%s>; rel="describedby"', docs_uri)) END;
    END IF;
END;
$$;

COMMENT ON FUNCTION idem_http_key(text, text, text) IS
'Checks an Idempotency-Key header: the key, or the 400 problem response';

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
CREATE FUNCTION idem_http_response(outcome @extschema@.idem_outcome, retry_after integer DEFAULT 1,
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

-- The registry ---------------------------------------------------------------

-- One row per registered namespace. A NULL setting follows its GUC
-- (idempotency.replay_window, .in_progress_lease, .store_request,
-- .max_payload_bytes). hash_keys has no GUC: it decides how keys are looked
-- up, so it may change only while the namespace has no records. store is
-- the table the namespace's records are kept in (idem_bind_store), NULL for
-- idempotency_record; regclass, so that a dump names it. fingerprint_ignore
-- lists the JSON Pointers its request fingerprint leaves out
-- (idem_namespace_fingerprint), NULL for none; like hash_keys it may change
-- only while the namespace has no records.
CREATE TABLE idem_namespace_config (
    namespace         text COLLATE "C" PRIMARY KEY,
    replay_window     interval,
    in_progress_lease interval,
    store_request     boolean,
    hash_keys         boolean NOT NULL DEFAULT false,
    max_payload_bytes integer,
    configured_at     timestamptz NOT NULL DEFAULT now(),
    store             regclass,
    store_name        text,
    fingerprint_ignore text[],
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
    grantee_name text,
    PRIMARY KEY (namespace, grantee)
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.idem_namespace_config', '');
-- A grant to a role that was dropped names an OID no role has: a dump
-- leaves it out, so that a restore never hands it to whichever role has
-- that OID there.
SELECT pg_catalog.pg_extension_config_dump('@extschema@.idem_namespace_grant',
    'WHERE EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) grantee)');
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
    BEFORE UPDATE OR DELETE ON idem_namespace_config
    FOR EACH ROW EXECUTE FUNCTION idem_namespace_config_locked();

-- For the registry functions that must see every record of one namespace
-- (changing hash_keys or store_request, dropping it): the namespace's lock,
-- which waits for its writers and stalls no other namespace.
CREATE FUNCTION idem_lock_namespace(namespace text)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_lock_namespace'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

REVOKE ALL ON FUNCTION idem_lock_namespace(text) FROM PUBLIC;

COMMENT ON FUNCTION idem_lock_namespace(text) IS
'Internal: waits for the transactions that began keys in a namespace and keeps new ones out until this transaction ends';

-- Internal: raises 55P02 when this session's values for the store's
-- settings were refused when the library loaded, leaving the built-in
-- defaults in place of the configured values (docs/api.md, Settings); the
-- registry functions that read a setting call it first.
CREATE FUNCTION idem_trusted_settings()
RETURNS void
AS 'MODULE_PATHNAME', 'idem_trusted_settings'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

REVOKE ALL ON FUNCTION idem_trusted_settings() FROM PUBLIC;

-- Registers a namespace, or replaces its settings: every call states them
-- all, and a NULL (an omitted argument) follows the GUC. Refuses to change
-- hash_keys while the namespace has records, which would hide them, and to
-- remove its lease while a record claimed under it is in progress.
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

COMMENT ON FUNCTION idem_namespace_configure(text, interval, interval, boolean, boolean, integer) IS
'Registers a namespace or replaces its settings; a NULL setting follows its GUC';

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
                       idem_namespace_fingerprint(text, text[]),
                       idem_namespace_drop(text), idem_grant(text, regrole), idem_revoke(text, regrole)
    FROM PUBLIC;

-- Stores the service owns ----------------------------------------------------

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
AS 'MODULE_PATHNAME', 'idem_store_stats_0_7'
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

COMMENT ON FUNCTION idem_bind_store(text, regclass) IS
'Keeps a namespace''s records in a table the service owns (NULL: the extension''s table)';

REVOKE ALL ON FUNCTION idem_bind_store(text, regclass) FROM PUBLIC;

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
-- 'namespace' (hash-distributed by that column, one copy of each shard), 'other'. What
-- pg_dist_partition already tells every role.
CREATE FUNCTION idem_store_distribution(store regclass)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_store_distribution'
LANGUAGE C STABLE PARALLEL SAFE;

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

REVOKE ALL ON FUNCTION idem_distribute_registry() FROM PUBLIC;

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

COMMENT ON FUNCTION idem_create_entry_points(regclass) IS
'Creates a Citus-distributed store''s functions, delegated to the node of each call''s shard';


-- The registry with its grants, one row per registered namespace.
CREATE VIEW idem_namespaces AS
SELECT c.namespace, c.replay_window, c.in_progress_lease, c.store_request, c.hash_keys,
       c.max_payload_bytes,
       ARRAY(SELECT g.grantee FROM @extschema@.idem_namespace_grant g
             WHERE g.namespace = c.namespace ORDER BY g.grantee::text) AS grantees,
       c.configured_at, c.store, c.fingerprint_ignore
FROM @extschema@.idem_namespace_config c;

REVOKE ALL ON idem_namespaces FROM PUBLIC;
GRANT SELECT ON idem_namespaces TO pg_monitor;

-- Privileges ----------------------------------------------------------------

-- The grants this script makes are all the extension's objects have: the
-- owner's, PUBLIC's and pg_monitor's on the views and the functions behind
-- them. ALTER DEFAULT PRIVILEGES of the installing role (EXECUTE on its
-- functions, SELECT on its tables, USAGE or CREATE on a schema it creates,
-- for an application role or for pg_monitor, say) would add others, and
-- that role could then read every namespace's records and the lock secret,
-- run what only the owner may (idem_key_state, idem_release_key, the
-- purge), or create objects in the schema: they are taken back here,
-- privilege by privilege, but USAGE on the schema (docs/security.md).
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
    LOOP
        EXECUTE pg_catalog.format('REVOKE %s ON %s %s FROM %I', x.privilege_type, x.kind, x.name, x.rolname);
    END LOOP;
    -- The schema (CREATE EXTENSION may have made it, under the defaults for
    -- schemas; it is no member of the extension): no one but its owner
    -- creates objects among the extension's, where they could stand in for
    -- its functions. USAGE stays as given.
    FOR x IN
        SELECT CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(r.rolname) END AS grantee
        FROM pg_catalog.pg_namespace n
        CROSS JOIN LATERAL pg_catalog.aclexplode(n.nspacl) a
        LEFT JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
        WHERE n.oid = '@extschema@'::pg_catalog.regnamespace AND a.privilege_type = 'CREATE'
          AND a.grantee <> n.nspowner
    LOOP
        EXECUTE pg_catalog.format('REVOKE CREATE ON SCHEMA @extschema@ FROM %s CASCADE', x.grantee);
        RAISE WARNING 'idempotency: % may no longer create objects in schema @extschema@', x.grantee
            USING DETAIL = 'Only the schema''s owner creates objects among the extension''s, where they could stand in for its functions.';
    END LOOP;
END;
$defaults$;

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
