/* idempotency--0.1.0--0.2.0.sql: release 0.2.0 adds the store. */

\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.2.0'" to load this file. \quit

-- What idem_begin answers (the seed's IdempotencyOutcome variants).
CREATE TYPE idem_kind AS ENUM ('fresh', 'in_flight', 'prior_result', 'prior_error', 'mismatch');

-- idem_begin's answer. result is set for prior_result, error for
-- prior_error; recorded_request, recorded_hash and submitted_hash for
-- mismatch (submitted_hash is set on every answer).
CREATE TYPE idem_outcome AS (
    kind             @extschema@.idem_kind,
    result           jsonb,
    error            jsonb,
    recorded_request jsonb,
    recorded_hash    bytea,
    submitted_hash   bytea
);

-- One row per (namespace, key), shared by every consumer in the database;
-- the namespace column keeps their keyspaces apart. Keys compare bytewise
-- (COLLATE "C"): a key is an opaque token, and C comparison is the fastest.
CREATE TABLE idempotency_record (
    namespace       text COLLATE "C" NOT NULL,
    key_value       text COLLATE "C" NOT NULL,
    status          text NOT NULL,
    request_hash    bytea NOT NULL,
    request_payload jsonb NOT NULL,
    result_payload  jsonb,
    error_payload   jsonb,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    CONSTRAINT idempotency_record_pkey PRIMARY KEY (namespace, key_value),
    CONSTRAINT idempotency_record_status_check
        CHECK (status IN ('in_progress', 'committed', 'failed')),
    CONSTRAINT idempotency_record_request_hash_check
        CHECK (octet_length(request_hash) = 32),
    CONSTRAINT idempotency_record_outcome_check CHECK (
        CASE status
            WHEN 'in_progress' THEN result_payload IS NULL AND error_payload IS NULL
            WHEN 'committed'   THEN result_payload IS NOT NULL AND error_payload IS NULL
            WHEN 'failed'      THEN result_payload IS NULL AND error_payload IS NOT NULL
        END)
);

-- Purge deletes in expires_at order; this index makes each chunk cheap.
CREATE INDEX idempotency_record_expires_at_idx ON idempotency_record (expires_at);

-- pg_dump keeps the rows (a dump without them would replay nothing).
SELECT pg_catalog.pg_extension_config_dump('@extschema@.idempotency_record', '');

-- Applications go through the functions, never the table.
REVOKE ALL ON idempotency_record FROM PUBLIC;

-- Volatility of the store functions: VOLATILE (they read and write the
-- table and depend on the transaction), not STRICT (a NULL argument is an
-- error that says which), PARALLEL UNSAFE (they write).

CREATE FUNCTION idem_begin(namespace text, key text, request jsonb, replay_window interval DEFAULT NULL)
RETURNS @extschema@.idem_outcome
AS 'MODULE_PATHNAME', 'idem_begin'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_begin(text, text, jsonb, interval) IS
'Starts an idempotent operation: fresh (go ahead), in_flight, prior_result, prior_error or mismatch';

CREATE FUNCTION idem_commit(namespace text, key text, result jsonb)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_commit'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_commit(text, text, jsonb) IS
'Records the result of an in-progress operation for replay';

CREATE FUNCTION idem_fail_permanent(namespace text, key text, error jsonb)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_fail_permanent'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_fail_permanent(text, text, jsonb) IS
'Records a permanent error ({"class_tag", "message", "cause"?}) of an in-progress operation for replay';

CREATE FUNCTION idem_fail_transient(namespace text, key text)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_fail_transient'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_fail_transient(text, text) IS
'Forgets an in-progress operation so that the next idem_begin is fresh';

-- Deletes expired rows, batch_size at a time (at most max_batches chunks
-- when given), inside the caller's transaction. SKIP LOCKED: a row another
-- transaction holds is neither waited for nor deleted; rows that other
-- transactions have not committed are invisible here, so untouched too.
CREATE FUNCTION idem_purge(batch_size integer DEFAULT 10000, max_batches integer DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    total bigint := 0;
    batches integer := 0;
    n bigint;
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
    LOOP
        WITH doomed AS (
            SELECT ctid FROM @extschema@.idempotency_record
            WHERE expires_at < now()
            ORDER BY expires_at
            LIMIT batch_size
            FOR UPDATE SKIP LOCKED)
        DELETE FROM @extschema@.idempotency_record r USING doomed d WHERE r.ctid = d.ctid;
        GET DIAGNOSTICS n = ROW_COUNT;
        total := total + n;
        batches := batches + 1;
        EXIT WHEN n < batch_size OR batches = max_batches;
    END LOOP;
    RETURN total;
END;
$$;

COMMENT ON FUNCTION idem_purge(integer, integer) IS
'Deletes expired records in chunks inside the current transaction; returns how many';

-- The same, committing after every chunk, for pg_cron and operators purging
-- millions of rows: no lock or snapshot is held longer than one chunk.
-- CALL it outside an explicit transaction block. A procedure that commits
-- cannot pin search_path with SET, so its operators are schema-qualified.
CREATE PROCEDURE idem_purge_batches(batch_size integer DEFAULT 10000)
LANGUAGE plpgsql
AS $$
DECLARE
    n bigint;
    batches integer := 0;
    total bigint := 0;
BEGIN
    LOOP
        n := @extschema@.idem_purge(batch_size, 1);
        total := total OPERATOR(pg_catalog.+) n;
        batches := batches OPERATOR(pg_catalog.+) 1;
        COMMIT;
        EXIT WHEN n OPERATOR(pg_catalog.<) batch_size;
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

CREATE FUNCTION idem_begin_typed(namespace text, key text, request anyelement, replay_window interval DEFAULT NULL)
RETURNS @extschema@.idem_outcome
LANGUAGE sql VOLATILE PARALLEL UNSAFE
AS $$ SELECT @extschema@.idem_begin(namespace, key, pg_catalog.to_jsonb(request), replay_window) $$;

COMMENT ON FUNCTION idem_begin_typed(text, text, anyelement, interval) IS
'idem_begin for a value of any type, fingerprinted as to_jsonb(request)';

CREATE FUNCTION idem_commit_typed(namespace text, key text, result anyelement)
RETURNS void
LANGUAGE sql VOLATILE PARALLEL UNSAFE
AS $$ SELECT @extschema@.idem_commit(namespace, key, pg_catalog.to_jsonb(result)) $$;

COMMENT ON FUNCTION idem_commit_typed(text, text, anyelement) IS
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
    IF found_kind IS NULL OR found_kind = 'null' THEN
        RETURN NULL;
    END IF;
    LOOP   -- a domain has the shape of its base type
        SELECT typtype, typbasetype, typrelid, typelem, typcategory INTO t FROM pg_type WHERE oid = base;
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
    SELECT t.typtype = 'p' OR (t.typtype = 'c' AND t.typrelid = 0), t.typrelid <> 0
        INTO STRICT anonymous, composite FROM pg_type t WHERE t.oid = typ;
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
