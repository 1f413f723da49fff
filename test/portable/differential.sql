-- differential.sql: the corpus that test/bin/portable's differential layer
-- gives both editions (generated once, with a fixed seed, in the native
-- edition's database, and copied to the portable one): jsonb values and
-- mint parts that reach every branch of the canonical walk and of the key
-- derivation. Each row: id, what it is, the value, fingerprint-ignore
-- pointers (or NULL), mint parts.
CREATE TABLE corpus (id integer PRIMARY KEY, what text NOT NULL, doc jsonb, ignore text[], parts text[]);
SELECT setseed(0.40);

-- Strings: every character from U+0001 to U+00FF alone and in company,
-- the escapes JSON has (quote, backslash, solidus, controls), DEL, the
-- C1 controls, U+2028 and U+2029, the last BMP characters, surrogate
-- neighbours and non-BMP characters (emoji, the last plane).
INSERT INTO corpus (id, what, doc, parts)
SELECT c, 'character U+' || to_hex(c), to_jsonb(chr(c)), ARRAY[chr(c)]
FROM generate_series(1, 255) c;
INSERT INTO corpus (id, what, doc, parts)
SELECT 1000 + n, 'character U+' || to_hex(c), to_jsonb('x' || chr(c) || 'y'), ARRAY['x' || chr(c), 'y']
FROM unnest(ARRAY[2028, 2029, 8232, 8233, 55295, 57344, 65279, 65533, 65534, 65535, 65536, 128512, 128169,
                  917505, 1114109, 1114111]) WITH ORDINALITY u(c, n);
INSERT INTO corpus (id, what, doc, parts)
SELECT 1100, 'every ASCII character in one string', to_jsonb(string_agg(chr(c), '' ORDER BY c)),
       ARRAY[string_agg(chr(c), '' ORDER BY c)]
FROM generate_series(1, 127) c;

-- Numbers in every form jsonb keeps: integers, signs, zeros, fractions with
-- trailing zeros, exponents (jsonb keeps numeric's digits), huge and tiny,
-- NaN-free (JSON has none).
INSERT INTO corpus (id, what, doc)
SELECT 2000 + n, 'number ' || t, t::jsonb
FROM unnest(ARRAY['0', '-0', '0.0', '-0.0', '1', '-1', '1.0', '1.50', '100', '1e2', '1E2', '1e+2', '1e-2', '-1.5e-7',
                  '0.000001', '1e-400', '1e400', '123456789012345678901234567890', '-0.000000000000000000000000001',
                  '3.141592653589793238462643383279502884197', '9223372036854775807', '9223372036854775808',
                  '-9223372036854775809', '1.0e0', '0e10', '2.5E-1', '1e1000', '-1e-1000',
                  '4.9406564584124654e-324', '1.7976931348623157e308', '0.1', '0.30000000000000004'])
     WITH ORDINALITY u(t, n);

-- Objects: key order by code point (not jsonb's length-first order, not
-- UTF-16's), keys that differ in case, in length, in non-BMP characters;
-- empty keys, empty containers, nulls and booleans.
INSERT INTO corpus (id, what, doc)
SELECT 3000 + n, 'object ' || n, t::jsonb
FROM unnest(ARRAY['{}', '[]', '[{}]', '{"a": []}', '{"": 1}', '{"": {"": {"": null}}}',
                  '{"b": 1, "a": 2, "aa": 3, "B": 4, "A": 5, "_": 6, "~": 7, "é": 8, "￿": 9, "😀": 10, "𐀀": 11, "\ufb01": 12}',
                  '{"ab": 1, "a": 2, "abc": 3, "b": 4}', '{"true": true, "false": false, "null": null}',
                  '[1, "1", true, null, {"1": 1}, [1]]', '{"a\"b": "c\\d", "\u0001": "\u001f", "/": "\/"}',
                  '{"k": "\ud83d\ude00", "l": "\u2028\u2029"}', '[[[[[[[[[[1]]]]]]]]]]',
                  '{"x": {"y": {"z": [1, {"w": [2, {"v": 3}]}]}}}', '"\u007f\u0080\u009f\u00a0"'])
     WITH ORDINALITY u(t, n);

-- Nesting at every depth around the walk's tiers (4, 64) and far beyond:
-- arrays, objects, and both alternating, with a value at the bottom.
INSERT INTO corpus (id, what, doc)
SELECT 4000 + d, 'arrays ' || d || ' deep', (repeat('[', d) || '7' || repeat(']', d))::jsonb
FROM unnest(ARRAY[1, 2, 3, 4, 5, 6, 8, 16, 31, 32, 33, 62, 63, 64, 65, 66, 100, 128, 500, 1000, 10000]) d;
INSERT INTO corpus (id, what, doc)
SELECT 5000 + d, 'objects ' || d || ' deep', (repeat('{"a":', d) || '"end"' || repeat('}', d))::jsonb
FROM unnest(ARRAY[1, 2, 3, 4, 5, 6, 8, 16, 31, 32, 33, 62, 63, 64, 65, 66, 100, 128, 500, 1000, 10000]) d;
INSERT INTO corpus (id, what, doc)
SELECT 6000 + d, 'alternating ' || d || ' deep',
       (repeat('{"b": 1, "a": [0, ', d) || 'null' || repeat(']}', d))::jsonb
FROM unnest(ARRAY[1, 3, 4, 5, 63, 64, 65, 200, 2000]) d;

-- Random documents: objects and arrays of random keys (any code point),
-- strings and numbers, 1 to 6 levels deep.
CREATE FUNCTION pg_temp.random_text() RETURNS text LANGUAGE sql VOLATILE AS $$
    SELECT string_agg(chr(CASE WHEN r < 0.5 THEN 32 + (random() * 94)::int
                               WHEN r < 0.7 THEN 1 + (random() * 31)::int
                               WHEN r < 0.9 THEN 160 + (random() * 55000)::int
                               ELSE 65536 + (random() * 1048000)::int END), '')
    FROM (SELECT random() AS r FROM generate_series(1, 1 + (random() * 12)::int)) s
$$;
CREATE FUNCTION pg_temp.random_doc(depth integer) RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $$
DECLARE r float8 := random();
BEGIN
    IF depth = 0 OR r < 0.25 THEN
        RETURN CASE WHEN r < 0.08 THEN to_jsonb(pg_temp.random_text())
                    WHEN r < 0.16 THEN to_jsonb(round(((random() - 0.5) * 10 ^ (random() * 30)::int)::numeric, (random() * 12)::int))
                    WHEN r < 0.20 THEN to_jsonb(random() < 0.5)
                    WHEN r < 0.22 THEN 'null'::jsonb
                    ELSE to_jsonb((random() * 1000000)::bigint - 500000) END;
    ELSIF r < 0.6 THEN
        RETURN (SELECT coalesce(jsonb_object_agg(pg_temp.random_text(), pg_temp.random_doc(depth - 1)), '{}')
                FROM generate_series(1, (random() * 5)::int));
    END IF;
    RETURN (SELECT coalesce(jsonb_agg(pg_temp.random_doc(depth - 1)), '[]') FROM generate_series(1, (random() * 5)::int));
END;
$$;
INSERT INTO corpus (id, what, doc, parts)
SELECT 7000 + n, 'random document ' || n, pg_temp.random_doc(1 + (random() * 5)::int),
       ARRAY(SELECT pg_temp.random_text() FROM generate_series(1, 1 + (random() * 4)::int))
FROM generate_series(1, 400) n;

-- Fingerprints with pointers: present, absent, escaped (~0 ~1), into
-- arrays, the whole document's parts, and malformed ones (an error each).
INSERT INTO corpus (id, what, doc, ignore)
SELECT 8100 + n, 'ignore ' || i::text,
       '{"a": {"b": [1, 2, {"c": 3}]}, "m~n": 1, "x/y": 2, "": {"": 3}, "trace": "t"}', i::text[]
FROM (VALUES (1, '{/trace}'), (2, '{/a/b}'), (3, '{/a/b/2/c}'), (4, '{/m~0n}'), (5, '{/x~1y}'), (6, '{/}'), (7, '{//}'),
             (8, '{/missing}'), (9, '{/a/b/9}'), (10, '{/trace,/a}'), (11, '{/a,/a/b}'), (12, '{""}'), (13, '{trace}'),
             (14, '{/a~2}'), (15, '{/a/b/01}'), (16, '{/a/b/-}'), (17, '{NULL}'), (18, '{}')) v(n, i);

-- Big: a 1 MiB document (a string of every printable character and an
-- array of objects) and a wide object of 20,000 keys.
INSERT INTO corpus (id, what, doc)
SELECT 9000, 'a 1 MiB document',
       jsonb_build_object('blob', repeat('The quick brown fox é中😀 "q" \ / ', 16000),
                          'rows', (SELECT jsonb_agg(jsonb_build_object('i', i, 'name', 'row ' || i, 'v', i * 1.25))
                                   FROM generate_series(1, 10000) i));
INSERT INTO corpus (id, what, doc)
SELECT 9001, 'an object of 20,000 keys', (SELECT jsonb_object_agg('k' || (i * 7919 % 20000), i) FROM generate_series(1, 20000) i);

-- Mint parts: empty parts, many parts, long parts, parts that are the
-- same bytes split differently, invalid namespaces (errors).
INSERT INTO corpus (id, what, parts)
SELECT 9100 + n, 'mint ' || n, p
FROM (VALUES (1, ARRAY['']::text[]), (2, ARRAY['', '']), (3, ARRAY['a', '']), (4, ARRAY['', 'a']),
             (5, ARRAY[repeat('z', 10000)]), (6, ARRAY(SELECT i::text FROM generate_series(1, 300) i)),
             (7, ARRAY['ab', 'c']), (8, ARRAY['a', 'bc']), (9, ARRAY[NULL]::text[]), (10, '{}'::text[]),
             (11, ARRAY['tenant-42', 'invoice-1001']), (12, ARRAY[E'a\tb', E'\u00e9', 'e' || chr(769)])) v(n, p);
