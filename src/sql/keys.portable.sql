-- keys.portable.sql: keys and fingerprints in SQL and PL/pgSQL (the
-- portable edition; keys.native.sql has the library's). The answers are the
-- library's to the byte: test/kat and test/portable/differential.sql compare.

-- Volatility, as in keys.native.sql: IMMUTABLE (the result depends only on
-- the arguments and the database encoding), PARALLEL SAFE, STRICT only
-- where NULL in must mean NULL out. The plumbing below is PARALLEL SAFE and
-- IMMUTABLE too, so that the API's functions may keep their markings.

-- The Unicode code points of s, in order, whatever the database encoding
-- (the messages count characters and name them as U+XXXX).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_code_points(s text)
RETURNS integer[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT CASE WHEN s OPERATOR(pg_catalog.=) '' THEN '{}'::pg_catalog.int4[]
                WHEN pg_catalog.getdatabaseencoding() OPERATOR(pg_catalog.=) 'UTF8'
        THEN ARRAY(SELECT pg_catalog.ascii(c.c) FROM pg_catalog.regexp_split_to_table(s COLLATE "C", '') WITH ORDINALITY c(c, n)
                   ORDER BY c.n)
        ELSE ARRAY(SELECT pg_catalog.ascii(pg_catalog.convert_from(pg_catalog.convert_to(c.c, 'UTF8'), 'UTF8'))
                   FROM pg_catalog.regexp_split_to_table(s COLLATE "C", '') WITH ORDINALITY c(c, n) ORDER BY c.n)
    END
$$;

-- A code point as the messages write it: U+ and at least four upper-case hex digits.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_u_plus(code integer)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT 'U+' OPERATOR(pg_catalog.||) pg_catalog.upper(pg_catalog.lpad(pg_catalog.to_hex(code),
                                                                       greatest(4, pg_catalog.length(pg_catalog.to_hex(code))), '0')) $$;

-- Whether a code point is Unicode White_Space (the 25 characters idem_parse trims).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_is_white_space(code integer)
RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT code OPERATOR(pg_catalog.=) ANY ('{9,10,11,12,13,32,133,160,5760,8232,8233,8239,8287,12288}'::integer[])
           OR (code OPERATOR(pg_catalog.>=) 8192 AND code OPERATOR(pg_catalog.<=) 8202)
$$;

-- Raises idem_mint's and idem_parse's namespace errors (22023): NULL, then
-- empty, then the first character not allowed, then the length.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_check_namespace(namespace text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
#variable_conflict use_variable
DECLARE
    ns text COLLATE "C" := namespace;   -- byte for byte, whatever the argument's collation
    at integer;
    code integer;
BEGIN
    IF ns OPERATOR(pg_catalog.~) '^[a-z0-9_-]{1,64}$' THEN
        RETURN;
    ELSIF ns IS NULL THEN
        RAISE EXCEPTION 'idempotency namespace must not be null'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Pass a namespace of 1 to 64 characters: a-z, 0-9, "-" and "_".';
    ELSIF ns OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION 'invalid idempotency namespace'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = 'The namespace is empty; it must be 1 to 64 characters.';
    ELSIF ns OPERATOR(pg_catalog.~) '[^a-z0-9_-]' THEN
        at := pg_catalog.length(pg_catalog.substring(ns, '^[a-z0-9_-]*')) OPERATOR(pg_catalog.+) 1;
        code := (idempotency_internal.idem_code_points(pg_catalog.substr(ns, at, 1)))[1];
        RAISE EXCEPTION 'invalid idempotency namespace'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('Character %s at position %s is not allowed; use only lower-case a-z, digits 0-9, "-" and "_".',
                                             CASE WHEN code OPERATOR(pg_catalog.>) 32 AND code OPERATOR(pg_catalog.<) 127
                                                       AND code OPERATOR(pg_catalog.<>) 34
                                                  THEN '"' OPERATOR(pg_catalog.||) pg_catalog.chr(code) OPERATOR(pg_catalog.||) '"'
                                                  ELSE idempotency_internal.idem_u_plus(code) END, at);
    END IF;
    RAISE EXCEPTION 'invalid idempotency namespace'
        USING ERRCODE = 'invalid_parameter_value',
              DETAIL = pg_catalog.format('The namespace is %s characters long; the limit is 64.', pg_catalog.length(ns));
END;
$$;

-- A caller's key checked and trimmed, as idem_parse answers it: Unicode
-- white space off both ends, then not blank, at most 255 characters, no
-- control character. key: the trimmed key; problem: what is wrong (the
-- detail of 22023), NULL when nothing is. Printable ASCII is the quick path.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_key_check(raw text, OUT key text, OUT problem text)
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
#variable_conflict use_variable
DECLARE
    given text COLLATE "C" := raw;   -- byte for byte, whatever the argument's collation
    codes pg_catalog.int4[];
    first pg_catalog.int4;
    last pg_catalog.int4;
    control pg_catalog.int4;
BEGIN
    IF given OPERATOR(pg_catalog.~) '^[!-~]([ -~]{0,253}[!-~])?$' THEN
        key := given;
        RETURN;
    END IF;
    codes := idempotency_internal.idem_code_points(given);
    SELECT pg_catalog.min(c.n), pg_catalog.max(c.n) INTO first, last
    FROM pg_catalog.unnest(codes) WITH ORDINALITY c(code, n) WHERE NOT idempotency_internal.idem_is_white_space(c.code);
    IF first IS NULL THEN
        problem := 'The key is blank: it is empty or only white space.';
    ELSIF last OPERATOR(pg_catalog.-) first OPERATOR(pg_catalog.+) 1 OPERATOR(pg_catalog.>) 255 THEN
        problem := pg_catalog.format('The key is %s characters long after trimming; the limit is 255.',
                                     last OPERATOR(pg_catalog.-) first OPERATOR(pg_catalog.+) 1);
    ELSE
        SELECT c.n INTO control FROM pg_catalog.unnest(codes[first:last]) WITH ORDINALITY c(code, n)
        WHERE c.code OPERATOR(pg_catalog.<) 32 OR c.code OPERATOR(pg_catalog.=) 127 ORDER BY c.n LIMIT 1;
        IF control IS NOT NULL THEN
            problem := pg_catalog.format('The key contains control character %s at position %s.',
                                         idempotency_internal.idem_u_plus(codes[first OPERATOR(pg_catalog.+) control OPERATOR(pg_catalog.-) 1]), control);
        ELSE
            key := pg_catalog.substr(given, first, last OPERATOR(pg_catalog.-) first OPERATOR(pg_catalog.+) 1);
        END IF;
    END IF;
END;
$$;

-- The key idem_key_check makes of raw, or its error (22023).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_key_of(raw text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
#variable_conflict use_variable
DECLARE
    checked record := idempotency_internal.idem_key_check(raw);
BEGIN
    IF checked.problem IS NOT NULL THEN
        RAISE EXCEPTION 'invalid idempotency key' USING ERRCODE = 'invalid_parameter_value', DETAIL = checked.problem;
    END IF;
    RETURN checked.key;
END;
$$;

CREATE OR REPLACE FUNCTION idem_parse(namespace text, raw text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    PERFORM idempotency_internal.idem_check_namespace(namespace COLLATE "C");
    RETURN idempotency_internal.idem_key_of(raw COLLATE "C");   -- NULL in, NULL out
END;
$$;

COMMENT ON FUNCTION idem_parse(text, text) IS
'Validates a caller-supplied idempotency key and returns it trimmed; NULL in, NULL out';

-- The minted key: lowercase hex SHA-256 over a 4-byte big-endian part
-- count, then each part's 4-byte big-endian UTF-8 length and bytes. Each
-- part is checked in order: NULL, empty, then blank (only white space).
CREATE OR REPLACE FUNCTION idem_mint(namespace text, parts text[])
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    bad record;
BEGIN
    PERFORM idempotency_internal.idem_check_namespace(namespace);
    IF parts IS NULL THEN
        RAISE EXCEPTION 'idempotency key parts must not be null'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = 'Pass a text[] with at least one non-blank part.';
    ELSIF array_ndims(parts) > 1 THEN
        RAISE EXCEPTION 'idempotency key parts must be a one-dimensional array'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = format('The array has %s dimensions.', array_ndims(parts));
    ELSIF cardinality(parts) = 0 THEN
        RAISE EXCEPTION 'cannot mint an idempotency key from no parts'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = 'Pass an array with at least one non-blank part.';
    END IF;
    SELECT p.n, CASE WHEN p.part IS NULL THEN 'null' WHEN p.part = '' THEN 'empty' ELSE 'blank (only white space)' END AS what
    INTO bad
    FROM unnest(parts COLLATE "C") WITH ORDINALITY p(part, n)
    WHERE p.part IS NULL OR p.part = ''
       OR (p.part !~ '[!-~]' AND NOT EXISTS (SELECT FROM unnest(idempotency_internal.idem_code_points(p.part)) c(code)
                                             WHERE NOT idempotency_internal.idem_is_white_space(c.code)))
    ORDER BY p.n LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'invalid idempotency key part'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = format('Part %s is %s.', bad.n, bad.what);
    END IF;
    RETURN encode(sha256(int4send(cardinality(parts))
                         || (SELECT string_agg(int4send(octet_length(u.b)) || u.b, ''::bytea ORDER BY u.n)
                             FROM (SELECT convert_to(p.part, 'UTF8') AS b, p.n
                                   FROM unnest(parts COLLATE "C") WITH ORDINALITY p(part, n)) u)), 'hex');
END;
$$;

COMMENT ON FUNCTION idem_mint(text, text[]) IS
'Deterministic idempotency key: lowercase hex SHA-256 over the length-prefixed UTF-8 parts';


-- The canonical walk --------------------------------------------------------
-- Three ways, by depth, each giving the library's bytes: scalars print as
-- jsonb prints them (PostgreSQL's JSON escapes and numeric_out, which the
-- library writes too), object members in the order of their UTF-8 bytes.
-- These helpers have no SET clause (it costs more than the walk of a small
-- request): every name in them is schema-qualified.

-- Object members sort by the UTF-8 bytes of their keys: in a database
-- whose text sorts that way under COLLATE "C" (UTF8, SQL_ASCII, LATIN1) by
-- the text itself, elsewhere by its UTF-8 conversion.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_utf8_order()
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT pg_catalog.getdatabaseencoding() OPERATOR(pg_catalog.=) ANY ('{UTF8,SQL_ASCII,LATIN1}'::pg_catalog.text[]) $$;

-- The canonical text of a value with at most levels levels of containers
-- (levels >= 1), one statement per container: most requests.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_canonical_nested(v jsonb, levels integer)
RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
#variable_conflict use_variable
BEGIN
    CASE pg_catalog.jsonb_typeof(v)
    WHEN 'object' THEN
        RETURN '{' OPERATOR(pg_catalog.||) coalesce((
            SELECT pg_catalog.string_agg(pg_catalog.to_json(e.k)::pg_catalog.text OPERATOR(pg_catalog.||) ':'
                       OPERATOR(pg_catalog.||) CASE WHEN pg_catalog.jsonb_typeof(e.v) OPERATOR(pg_catalog.=) ANY ('{object,array}'::pg_catalog.text[])
                                                    THEN idempotency_internal.idem_canonical_nested(e.v, levels OPERATOR(pg_catalog.-) 1)
                                                    ELSE e.v::pg_catalog.text END,
                       ',' ORDER BY CASE WHEN NOT idempotency_internal.idem_utf8_order()
                                         THEN pg_catalog.convert_to(e.k, 'UTF8') END,
                                    e.k COLLATE "C")
            FROM pg_catalog.jsonb_each(v) e(k, v)), '') OPERATOR(pg_catalog.||) '}';
    WHEN 'array' THEN
        RETURN '[' OPERATOR(pg_catalog.||) coalesce((
            SELECT pg_catalog.string_agg(
                       CASE WHEN pg_catalog.jsonb_typeof(e.v) OPERATOR(pg_catalog.=) ANY ('{object,array}'::pg_catalog.text[])
                            THEN idempotency_internal.idem_canonical_nested(e.v, levels OPERATOR(pg_catalog.-) 1)
                            ELSE e.v::pg_catalog.text END,
                       ',' ORDER BY e.n)
            FROM pg_catalog.jsonb_array_elements(v) WITH ORDINALITY e(v, n)), '') OPERATOR(pg_catalog.||) ']';
    ELSE
        RETURN v::pg_catalog.text;
    END CASE;
END;
$$;

-- The canonical text of a value nested fewer than 64 levels deep, in one
-- statement (no recursion of functions): every value gets a sort key (its
-- parent's, then its member's UTF-8 key and a zero byte, or its element's
-- 4-byte index), each container an opening and a closing token (byte 0xff
-- sorts after every child), and the tokens are joined in key order; a comma
-- goes before a member or element that does not follow its container's
-- opening.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_canonical_flat(payload jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
#variable_conflict use_variable
BEGIN
    RETURN (
        WITH RECURSIVE n(path, pre, v, t) AS (
            SELECT '\x'::pg_catalog.bytea, '', payload, pg_catalog.jsonb_typeof(payload)
          UNION ALL
            SELECT n.path OPERATOR(pg_catalog.||) c.sortkey, c.pre, c.v, pg_catalog.jsonb_typeof(c.v)
            FROM n CROSS JOIN LATERAL (
                SELECT pg_catalog.convert_to(e.k, 'UTF8') OPERATOR(pg_catalog.||) '\x00'::pg_catalog.bytea AS sortkey,
                       pg_catalog.to_json(e.k)::pg_catalog.text OPERATOR(pg_catalog.||) ':' AS pre, e.v
                FROM pg_catalog.jsonb_each(n.v) e(k, v) WHERE n.t OPERATOR(pg_catalog.=) 'object'
                UNION ALL
                SELECT pg_catalog.int4send(a.ord::pg_catalog.int4), '', a.v
                FROM pg_catalog.jsonb_array_elements(n.v) WITH ORDINALITY a(v, ord)
                WHERE n.t OPERATOR(pg_catalog.=) 'array') c
            WHERE n.t OPERATOR(pg_catalog.=) ANY ('{object,array}'::pg_catalog.text[])
        )
        SELECT pg_catalog.string_agg(s.tok, '' ORDER BY s.path)
        FROM (SELECT x.path,
                     CASE WHEN x.first OR NOT x.opens OR pg_catalog.lag(x.opens AND x.container) OVER (ORDER BY x.path)
                          THEN x.tok ELSE ',' OPERATOR(pg_catalog.||) x.tok END AS tok
              FROM (SELECT n.path, true AS opens, n.path OPERATOR(pg_catalog.=) '\x'::pg_catalog.bytea AS first,
                           n.t OPERATOR(pg_catalog.=) ANY ('{object,array}'::pg_catalog.text[]) AS container,
                           n.pre OPERATOR(pg_catalog.||) CASE n.t WHEN 'object' THEN '{' WHEN 'array' THEN '['
                                                                 ELSE n.v::pg_catalog.text END AS tok
                    FROM n
                    UNION ALL
                    SELECT n.path OPERATOR(pg_catalog.||) '\xff'::pg_catalog.bytea, false, false, false,
                           CASE n.t WHEN 'object' THEN '}' ELSE ']' END
                    FROM n WHERE n.t OPERATOR(pg_catalog.=) ANY ('{object,array}'::pg_catalog.text[])) x) s);
END;
$$;

-- The canonical text of a value nested 64 levels or deeper, without
-- recursion (the stack stays flat at any depth, where a recursive walk
-- would end in PostgreSQL's stack-depth error): a stack of what is left to
-- write, a literal or a value, and one statement per container.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_canonical_deep(payload jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
#variable_conflict use_variable
DECLARE
    literal pg_catalog.text[] := ARRAY[NULL]::pg_catalog.text[];   -- the stack: a literal, or NULL: the value beside it
    value pg_catalog.jsonb[] := ARRAY[payload];
    top pg_catalog.int4 := 1;
    out pg_catalog.text[] := '{}';
    written pg_catalog.int4 := 0;
    v pg_catalog.jsonb;
    keys pg_catalog.text[];
    vals pg_catalog.jsonb[];
BEGIN
    WHILE top OPERATOR(pg_catalog.>) 0 LOOP
        written := written OPERATOR(pg_catalog.+) 1;
        IF literal[top] IS NOT NULL THEN
            out[written] := literal[top];
            top := top OPERATOR(pg_catalog.-) 1;
            CONTINUE;
        END IF;
        v := value[top];
        top := top OPERATOR(pg_catalog.-) 1;
        CASE pg_catalog.jsonb_typeof(v)
        WHEN 'object' THEN
            SELECT pg_catalog.array_agg(pg_catalog.to_json(e.k)::pg_catalog.text OPERATOR(pg_catalog.||) ':'
                                        ORDER BY pg_catalog.convert_to(e.k, 'UTF8')),
                   pg_catalog.array_agg(e.v ORDER BY pg_catalog.convert_to(e.k, 'UTF8'))
            INTO keys, vals FROM pg_catalog.jsonb_each(v) e(k, v);
            out[written] := '{';
            top := top OPERATOR(pg_catalog.+) 1;
            literal[top] := '}';
        WHEN 'array' THEN
            SELECT pg_catalog.array_agg(''::pg_catalog.text ORDER BY a.n), pg_catalog.array_agg(a.v ORDER BY a.n)
            INTO keys, vals FROM pg_catalog.jsonb_array_elements(v) WITH ORDINALITY a(v, n);
            out[written] := '[';
            top := top OPERATOR(pg_catalog.+) 1;
            literal[top] := ']';
        ELSE
            out[written] := v::pg_catalog.text;
            CONTINUE;
        END CASE;
        FOR i IN REVERSE coalesce(pg_catalog.cardinality(keys), 0)..1 LOOP   -- last pushed first written
            top := top OPERATOR(pg_catalog.+) 1;
            literal[top] := NULL;
            value[top] := vals[i];
            top := top OPERATOR(pg_catalog.+) 1;
            literal[top] := CASE WHEN i OPERATOR(pg_catalog.>) 1 THEN ',' ELSE '' END OPERATOR(pg_catalog.||) keys[i];
        END LOOP;
    END LOOP;
    RETURN pg_catalog.array_to_string(out, '');
END;
$$;

-- The canonical text of a value: a scalar as jsonb prints it; up to four
-- levels of containers (strict $.**{5}: no value five levels down, and
-- the test stops looking there) one statement per container; up to 63 in
-- one statement; deeper without recursion.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_canonical_text(payload jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
#variable_conflict use_variable
BEGIN
    IF pg_catalog.jsonb_typeof(payload) OPERATOR(pg_catalog.<>) ALL ('{object,array}'::pg_catalog.text[]) THEN
        RETURN payload::pg_catalog.text;
    ELSIF NOT pg_catalog.jsonb_path_exists(payload, 'strict $.**{5}') THEN
        RETURN idempotency_internal.idem_canonical_nested(payload, 4);
    ELSIF NOT pg_catalog.jsonb_path_exists(payload, 'strict $.**{64}') THEN
        RETURN idempotency_internal.idem_canonical_flat(payload);
    END IF;
    RETURN idempotency_internal.idem_canonical_deep(payload);
END;
$$;


-- JSON Pointers -------------------------------------------------------------

-- Raises the error of element n of a list of pointers (RFC 6901), or of
-- the list (n NULL), as idem_canonical(payload, ignore) raises it; or, for
-- pointers read from namespace ns's registry row, as every store call on
-- ns raises it. An element's detail starts with its place.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_pointer_error(state text, message text, detail text, n bigint,
                                                                   ns text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    IF n IS NOT NULL THEN
        detail := format('Element %s of the pointers: %s', n,
                         CASE WHEN detail COLLATE "C" ~ '^[A-Z]' THEN lower(left(detail, 1)) || substr(detail, 2) ELSE detail END);
    END IF;
    IF ns IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = state, MESSAGE = message, DETAIL = detail;
    END IF;
    RAISE EXCEPTION USING ERRCODE = state,
        MESSAGE = format('idempotency namespace "%s" has an invalid fingerprint_ignore: %s', ns, message),
        DETAIL = detail,
        HINT = 'Someone wrote it into idem_namespace_config by hand. Write back the value it had: the namespace''s records were fingerprinted under it (without records, idem_namespace_fingerprint sets any).';
END;
$$;

-- The tokens of each pointer in ignore (one row per pointer, in order),
-- after checking the list as the library does: a one-dimensional array
-- without NULLs, each element a pointer (not "", starting with "/", at
-- most 1,024 bytes in UTF-8, "~" only as "~0" or "~1"), at most 64
-- different ones. ns: the namespace whose registry row holds them (for the
-- message), or NULL.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_pointer_tokens(ignore text[], ns text DEFAULT NULL)
RETURNS TABLE (pointer text, tokens text[])
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    pointers text[] COLLATE "C" := ignore;   -- byte for byte, whatever the argument's collation
    p record;
    tilde integer;
BEGIN
    IF array_ndims(pointers) > 1 THEN
        PERFORM idempotency_internal.idem_pointer_error('22023', 'JSON Pointers must be a one-dimensional array',
                                                        format('It has %s dimensions.', array_ndims(pointers)), NULL, ns);
    END IF;
    SELECT u.n INTO tilde FROM unnest(pointers) WITH ORDINALITY u(p, n) WHERE u.p IS NULL ORDER BY u.n LIMIT 1;
    IF FOUND THEN
        PERFORM idempotency_internal.idem_pointer_error('22004', 'JSON Pointer must not be null',
                                                        format('Element %s of the pointers is NULL.', tilde), NULL, ns);
    END IF;
    FOR p IN SELECT u.p, u.n FROM unnest(pointers) WITH ORDINALITY u(p, n) ORDER BY u.n LOOP
        IF p.p = '' THEN
            PERFORM idempotency_internal.idem_pointer_error('22023', 'a fingerprint cannot ignore the whole request',
                'The JSON Pointer "" names the whole document; name members or elements, such as "/trace_id".', p.n, ns);
        ELSIF left(p.p, 1) <> '/' THEN
            PERFORM idempotency_internal.idem_pointer_error('22023', 'invalid JSON Pointer',
                'A JSON Pointer (RFC 6901) starts with "/", as "/trace_id" or "/items/0" do.', p.n, ns);
        ELSIF octet_length(convert_to(p.p, 'UTF8')) > 1024 THEN
            PERFORM idempotency_internal.idem_pointer_error('22023', 'JSON Pointer is too long',
                format('It has %s bytes in UTF-8; at most 1024 are allowed.', octet_length(convert_to(p.p, 'UTF8'))), p.n, ns);
        END IF;
        tilde := length(substring(p.p COLLATE "C" FROM '^(?:[^~]|~[01])*')) + 1;
        IF tilde <= length(p.p) THEN
            PERFORM idempotency_internal.idem_pointer_error('22023', 'invalid JSON Pointer',
                format('"~" is written "~0" and "/" inside a name "~1" (RFC 6901); the "~" at character %s is followed by neither.', tilde),
                p.n, ns);
        END IF;
    END LOOP;
    IF (SELECT count(DISTINCT u.p) FROM unnest(pointers) u(p)) > 64 THEN
        PERFORM idempotency_internal.idem_pointer_error('22023', 'too many JSON Pointers for one fingerprint',
            format('There are %s different ones; at most 64 are allowed.', (SELECT count(DISTINCT u.p) FROM unnest(pointers) u(p))),
            NULL, ns);
    END IF;
    RETURN QUERY
        SELECT u.p, ARRAY(SELECT replace(replace(t.t, '~1', '/'), '~0', '~')
                          FROM unnest((string_to_array(u.p, '/'))[2:]) WITH ORDINALITY t(t, n) ORDER BY t.n)
        FROM unnest(pointers) WITH ORDINALITY u(p, n) ORDER BY u.n;
END;
$$;

-- payload without the members and elements the pointers name: each
-- pointer is followed through the value as it is (an object's member by
-- its name, an array's element by an index written as RFC 6901 writes it:
-- 0, 12, never 01 or -; through a scalar, or to what is not there, it
-- names nothing), and the parts found are removed deepest and last first,
-- so that removing one array element never moves another one named.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_without(payload jsonb, ignore text[], ns text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    p record;
    at jsonb;
    path text[];
    sortable text[];
    paths jsonb := '[]';   -- [sort key, path] of each part found
    token text;
BEGIN
    IF ignore IS NULL THEN
        RETURN payload;
    END IF;
    FOR p IN SELECT t.tokens FROM idempotency_internal.idem_pointer_tokens(ignore, ns) t LOOP
        IF payload IS NULL THEN
            CONTINUE;
        END IF;
        at := payload;
        path := '{}';
        sortable := '{}';
        FOREACH token IN ARRAY p.tokens LOOP
            IF jsonb_typeof(at) = 'object' AND at ? token THEN
                at := at -> token;
                sortable := sortable || token;
            ELSIF jsonb_typeof(at) = 'array' AND token COLLATE "C" ~ '^(0|[1-9][0-9]{0,9})$'
                  AND token::bigint < jsonb_array_length(at) THEN
                at := at -> token::integer;
                sortable := sortable || lpad(token, 10, '0');
            ELSE
                path := NULL;
                EXIT;
            END IF;
            path := path || token;
        END LOOP;
        IF path IS NOT NULL THEN
            paths := paths || jsonb_build_array(jsonb_build_array(to_jsonb(sortable), to_jsonb(path)));
        END IF;
    END LOOP;
    IF payload IS NULL OR paths = '[]' THEN
        RETURN payload;
    END IF;
    -- A part under another part is removed with it; the rest deepest and
    -- last first (descending order of their sort keys).
    FOR p IN
        SELECT DISTINCT ARRAY(SELECT jsonb_array_elements_text(x.e -> 1)) AS path,
               ARRAY(SELECT jsonb_array_elements_text(x.e -> 0)) COLLATE "C" AS sortable
        FROM jsonb_array_elements(paths) x(e)
        WHERE NOT EXISTS (SELECT FROM jsonb_array_elements(paths) y(e)
                          WHERE jsonb_array_length(y.e -> 0) < jsonb_array_length(x.e -> 0)
                            AND (SELECT bool_and(y.e -> 0 -> (i - 1) = x.e -> 0 -> (i - 1))
                                 FROM generate_series(1, jsonb_array_length(y.e -> 0)) i))
        ORDER BY 2 DESC
    LOOP
        payload := payload #- p.path;
    END LOOP;
    RETURN payload;
END;
$$;


-- The API ---------------------------------------------------------------------

CREATE OR REPLACE FUNCTION idem_canonical(payload jsonb)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT idempotency_internal.idem_canonical_text(payload) $$;

COMMENT ON FUNCTION idem_canonical(jsonb) IS
'Canonical JSON text of a value: object keys in code-point order, no whitespace';

CREATE OR REPLACE FUNCTION idem_request_hash(payload jsonb)
RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT pg_catalog.sha256(pg_catalog.convert_to(idempotency_internal.idem_canonical_text(payload), 'UTF8')) $$;

COMMENT ON FUNCTION idem_request_hash(jsonb) IS
'Request fingerprint: SHA-256 of the UTF-8 canonical JSON of a value';

-- The same two with the members and elements that RFC 6901 JSON Pointers
-- name left out, as a namespace whose fingerprint ignores them makes it
-- (idem_namespace_fingerprint). NULL pointers leave nothing out; a NULL
-- payload gives NULL, the pointers unchecked, as in the library.
CREATE OR REPLACE FUNCTION idem_canonical(payload jsonb, ignore text[])
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN payload IS NOT NULL
                THEN idempotency_internal.idem_canonical_text(idempotency_internal.idem_without(payload, ignore COLLATE "C")) END
$$;

COMMENT ON FUNCTION idem_canonical(jsonb, text[]) IS
'Canonical JSON text of a value without the parts JSON Pointers name';

CREATE OR REPLACE FUNCTION idem_request_hash(payload jsonb, ignore text[])
RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN payload IS NOT NULL
                THEN pg_catalog.sha256(pg_catalog.convert_to(idempotency_internal.idem_canonical_text(
                         idempotency_internal.idem_without(payload, ignore COLLATE "C")), 'UTF8')) END
$$;

COMMENT ON FUNCTION idem_request_hash(jsonb, text[]) IS
'Request fingerprint of a value without the parts JSON Pointers name';
