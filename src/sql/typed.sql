-- typed.sql: the store for values of any type (to_jsonb in, a strict
-- decode back out).

-- Typed use from SQL (the specification's typed wrapper). These take any composite
-- or scalar value and convert it with to_jsonb. They have their own names
-- rather than overloading idem_begin/idem_commit: an anyelement overload
-- beside the jsonb one makes every call with an untyped literal
-- (idem_begin('ns', 'k', '{"a": 1}')) fail as "not unique", and would turn a
-- varchar parameter from a driver into a JSON string without a word.

CREATE OR REPLACE FUNCTION idem_begin_typed(namespace text, key text, request anyelement, replay_window interval DEFAULT NULL,
                                 in_flight_wait interval DEFAULT NULL)
RETURNS @extschema@.idem_outcome
LANGUAGE sql VOLATILE PARALLEL UNSAFE
AS $$ SELECT @extschema@.idem_begin(namespace, key, pg_catalog.to_jsonb(request), replay_window, in_flight_wait) $$;

COMMENT ON FUNCTION idem_begin_typed(text, text, anyelement, interval, interval) IS
'idem_begin for a value of any type, fingerprinted as to_jsonb(request)';

CREATE OR REPLACE FUNCTION idem_commit_typed(namespace text, key text, result anyelement, fence bigint DEFAULT NULL)
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
CREATE OR REPLACE FUNCTION idempotency_internal.idem_shape_mismatch(value jsonb, typ regtype, path text DEFAULT '$')
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
            why := idempotency_internal.idem_shape_mismatch(value -> attr.attname::text, attr.atttypid::regtype,
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
            why := idempotency_internal.idem_shape_mismatch(element,
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

COMMENT ON FUNCTION idempotency_internal.idem_shape_mismatch(jsonb, regtype, text) IS
'Why a JSON value is not the shape to_jsonb gives the type, or NULL when it is (used by idem_result)';

-- Decodes a replayed result into the caller's type: the inverse of
-- idem_commit_typed. NULL when the outcome carries no result (any kind but
-- prior_result) or the result is JSON null. A stored value that no longer
-- fits the type (a missing or extra field, a JSON kind the type cannot
-- take, a value that does not convert) raises ID001 "incompatible stored
-- state", never a half-filled row.
CREATE OR REPLACE FUNCTION idem_result(outcome @extschema@.idem_outcome, template anyelement)
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
    why := idempotency_internal.idem_shape_mismatch(stored, typ);
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
