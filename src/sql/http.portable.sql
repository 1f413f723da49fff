-- http.portable.sql: the header field's grammar in PL/pgSQL (the portable
-- edition; http.native.sql has the library's, src/core/header.cpp).

-- The key in an Idempotency-Key header, as the IETF draft defines the field
-- (a Structured Field String, "8e03978e-...") or as a bare value
-- (8e03978e-...): the same key either way. reason says why a header holds
-- no key (NULL when there is no header). Answers, never raises, for a bad
-- header: it is the client's mistake. Positions are UTF-8 byte offsets
-- from 1, as the library counts them.
CREATE OR REPLACE FUNCTION idem_header_key(namespace text, header text, OUT key text, OUT reason text)
RETURNS record
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    codes integer[];
    n integer;
    i integer := 1;
    at integer := 1;   -- the UTF-8 byte offset (from 1) of code point i
    c integer;
    content text := '';
    quoted constant text := 'The Idempotency-Key field is not a Structured Field String: ';
    checked record;
BEGIN
    PERFORM idempotency_internal.idem_check_namespace(namespace);
    IF header IS NULL THEN
        RETURN;
    ELSIF getdatabaseencoding() = 'SQL_ASCII'
          AND header COLLATE "C" !~ '^([\x01-\x7f]|[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]|[\xe1-\xec\xee\xef][\x80-\xbf]{2}|\xed[\x80-\x9f][\x80-\xbf]|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}|\xf4[\x80-\x8f][\x80-\xbf]{2})*$' THEN
        reason := 'The Idempotency-Key field holds bytes that are not UTF-8.';
        RETURN;
    END IF;
    codes := idempotency_internal.idem_code_points(header);
    n := coalesce(cardinality(codes), 0);
    WHILE i <= n AND codes[i] IN (32, 9) LOOP
        i := i + 1;
        at := at + 1;
    END LOOP;
    IF i > n OR codes[i] <> 34 THEN   -- a bare key: no list, no double quote
        at := 1;
        FOR i IN 1..n LOOP
            IF codes[i] = 44 THEN
                reason := format('A bare Idempotency-Key value (one not in double quotes) cannot hold a comma: it holds more than one value (a list, as when duplicate fields are joined), at byte %s.', at);
                RETURN;
            ELSIF codes[i] = 34 THEN
                reason := format('A bare Idempotency-Key value (one not in double quotes) cannot hold a double quote, at byte %s; a quoted key starts with one.', at);
                RETURN;
            END IF;
            at := at + CASE WHEN codes[i] < 128 THEN 1 WHEN codes[i] < 2048 THEN 2 WHEN codes[i] < 65536 THEN 3 ELSE 4 END;
        END LOOP;
        checked := idempotency_internal.idem_key_check(header);
    ELSE
        LOOP
            i := i + 1;
            at := at + 1;
            IF i > n THEN
                reason := quoted || 'the closing double quote is missing.';
                RETURN;
            END IF;
            c := codes[i];
            EXIT WHEN c = 34;
            IF c = 92 THEN
                IF i = n OR codes[i + 1] NOT IN (34, 92) THEN
                    reason := quoted || format('only \" and \\ are escapes; the backslash at byte %s.', at);
                    RETURN;
                END IF;
                i := i + 1;
                at := at + 1;
                c := codes[i];
            ELSIF c < 32 OR c > 126 THEN
                reason := quoted || format('a string holds only printable ASCII (0x20 to 0x7E), not byte 0x%s at byte %s.',
                                           upper(lpad(to_hex(CASE WHEN c < 128 THEN c WHEN c < 2048 THEN 192 | (c >> 6)
                                                                  WHEN c < 65536 THEN 224 | (c >> 12) ELSE 240 | (c >> 18) END), 2, '0')),
                                           at);
                RETURN;
            END IF;
            content := content || chr(c);
        END LOOP;
        i := i + 1;
        at := at + 1;
        WHILE i <= n AND codes[i] IN (32, 9) LOOP
            i := i + 1;
            at := at + 1;
        END LOOP;
        IF i <= n THEN
            reason := quoted || CASE codes[i]
                WHEN 44 THEN format('it holds more than one value (a list, as when duplicate fields are joined), at byte %s.', at)
                WHEN 59 THEN format('parameters are not defined for Idempotency-Key, at byte %s.', at)
                ELSE format('something follows the closing double quote, at byte %s.', at) END;
            RETURN;
        END IF;
        checked := idempotency_internal.idem_key_check(content);
    END IF;
    key := checked.key;
    reason := checked.problem;
END;
$$;

COMMENT ON FUNCTION idem_header_key(text, text) IS
'The key in an Idempotency-Key header (quoted sf-string or bare), or why it holds none';
