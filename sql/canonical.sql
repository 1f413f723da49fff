-- canonical: idem_canonical(jsonb) and idem_request_hash(jsonb).
-- Keys sorted by code point at every depth (jsonb itself stores them
-- shortest-first), arrays in order, no whitespace.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
RESET client_min_messages;
SET search_path = public, idempotency;
SELECT idem_canonical('{"b": 1, "ab": 2, "a": {"z": [3, {"y": 1, "x": 2}], "": null}}');
SELECT '{"b": 1, "ab": 2, "a": 3}'::jsonb::text AS jsonb_own_order,
       idem_canonical('{"b": 1, "ab": 2, "a": 3}') AS canonical_order;
-- U+FFFD sorts before U+1F600 (UTF-16 order would put the emoji first).
SELECT idem_canonical(jsonb_build_object(U&'\FFFD', 1, U&'\+01F600', 2));
-- Scalars and empty containers.
SELECT idem_canonical('"text"') AS string, idem_canonical('42') AS number,
       idem_canonical('true') AS bool, idem_canonical('null') AS null,
       idem_canonical('{}') AS object, idem_canonical('[]') AS array,
       idem_canonical('[{}, [], [[]]]') AS nested;
-- Strings are escaped exactly as PostgreSQL's own JSON output escapes them.
SELECT idem_canonical(to_jsonb(s)) = to_json(s)::text AS same_escaping, idem_canonical(to_jsonb(s))
FROM (VALUES (E'quote " backslash \\ slash /'), (E'\b\f\n\r\t'), (E'\x01\x1f\x7f'), ('é 日本 😀')) v(s);
-- Numbers in PostgreSQL's numeric text form.
SELECT idem_canonical('[1.0, 1.50, 1e2, 1E-2, -0, 1.5e1, 123456789012345678901234567890]');
-- NULL in, NULL out (STRICT).
SELECT idem_canonical(NULL) IS NULL AS canonical_null, idem_request_hash(NULL) IS NULL AS hash_null;
-- The hash is SHA-256 of the canonical text's UTF-8 bytes.
SELECT idem_request_hash(v) = sha256(convert_to(idem_canonical(v), 'UTF8')) AS hash_of_canonical
FROM (VALUES ('{"z": "é", "a": [1, 2, {"c": null, "b": true}]}'::jsonb), ('"😀"'), ('[]')) t(v);
-- Known answer from coreutils: printf %s '{"a":1}' | sha256sum
SELECT encode(idem_request_hash('{"a":1}'), 'hex') AS known_answer;
-- Reordering keys never changes the hash; reordering an array does.
SELECT idem_request_hash('{"a": 1, "b": 2}') = idem_request_hash('{"b":2,"a":1}') AS key_order_ignored,
       idem_request_hash('[1, 2]') = idem_request_hash('[2, 1]') AS array_order_ignored;
-- Deep nesting ends in PostgreSQL's stack-depth error, never a crash.
CREATE TEMP TABLE deep AS SELECT (repeat('[', 3000) || repeat(']', 3000))::jsonb AS v;
SET max_stack_depth = '100kB';
SELECT idem_request_hash(v) FROM deep;
\echo :LAST_ERROR_SQLSTATE
SELECT idem_canonical(v) FROM deep;
\echo :LAST_ERROR_SQLSTATE
RESET max_stack_depth;
SELECT length(idem_canonical(v)) AS deep_length_at_default_stack FROM deep;
-- The backend is still healthy after the error.
SELECT idem_canonical('{"ok": true}');
