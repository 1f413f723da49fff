-- typed: idem_begin_typed / idem_commit_typed take values of any type
-- (converted with to_jsonb) and idem_result decodes a replay back into the
-- caller's type, with ID001 when the stored shape no longer fits it.
-- PL/pgSQL line numbers in CONTEXT lines would tie this file to the
-- function's layout; messages, details and hints are what matters.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
RESET client_min_messages;
SET search_path = public, idempotency;
\set SHOW_CONTEXT never
CREATE TYPE pg_temp.charge AS (amount integer, currency text);
CREATE TYPE pg_temp.receipt AS (payment_id integer, charged pg_temp.charge, tags text[]);

-- The typed cycle: a composite request, a composite result, fenced like
-- the jsonb transitions.
BEGIN;
SELECT fence FROM idem_begin_typed('typed', 'r-1', ROW(100, 'EUR')::pg_temp.charge) \gset
SELECT idem_commit_typed('typed', 'r-1', ROW(7, ROW(100, 'EUR'), ARRAY['card'])::pg_temp.receipt, :'fence'::bigint + 1);
ROLLBACK;
BEGIN;
SELECT kind, fence FROM idem_begin_typed('typed', 'r-1', ROW(100, 'EUR')::pg_temp.charge) \gset
\echo :kind
SELECT idem_commit_typed('typed', 'r-1', ROW(7, ROW(100, 'EUR'), ARRAY['card'])::pg_temp.receipt, :'fence');
COMMIT;
-- It is stored as to_jsonb would write it, so the jsonb functions see the same record.
SELECT request_payload, result_payload FROM idempotency_record WHERE key_value = 'r-1';
SELECT kind, result FROM idem_begin('typed', 'r-1', '{"currency": "EUR", "amount": 100}');
-- The replay, decoded; a fresh answer has no result to decode: NULL.
SELECT r.* FROM idem_begin_typed('typed', 'r-1', ROW(100, 'EUR')::pg_temp.charge) o,
              idem_result(o, NULL::pg_temp.receipt) r;
BEGIN;
SELECT kind, idem_result(o, NULL::pg_temp.receipt) IS NULL AS no_result
FROM idem_begin_typed('typed', 'r-2', ROW(5, 'EUR')::pg_temp.charge) o;
ROLLBACK;
-- Another value under the same key is a mismatch, as with jsonb.
SELECT kind, recorded_request FROM idem_begin_typed('typed', 'r-1', ROW(101, 'EUR')::pg_temp.charge);

-- Scalars and arrays, and jsonb itself.
BEGIN;
SELECT kind FROM idem_begin_typed('typed', 's-1', 42);
SELECT idem_commit_typed('typed', 's-1', 'ok'::text);
COMMIT;
SELECT idem_result(o, NULL::text) AS as_text, idem_result(o, NULL::jsonb) AS as_jsonb
FROM idem_begin_typed('typed', 's-1', 42) o;
BEGIN;
SELECT kind FROM idem_begin_typed('typed', 'a-1', ARRAY[1, 2]);
SELECT idem_commit_typed('typed', 'a-1', ARRAY[[1, 2], [3, 4]]);
COMMIT;
SELECT idem_result(o, NULL::integer[]) FROM idem_begin_typed('typed', 'a-1', ARRAY[1, 2]) o;
BEGIN;
SELECT kind FROM idem_begin_typed('typed', 't-1', timestamptz '2026-01-02 03:04:05+00');
SELECT idem_commit_typed('typed', 't-1', timestamptz '2026-01-02 03:04:05+00');
COMMIT;
SELECT idem_result(o, NULL::timestamptz) = timestamptz '2026-01-02 03:04:05+00' AS round_trips
FROM idem_begin_typed('typed', 't-1', timestamptz '2026-01-02 03:04:05+00') o;

-- An untyped literal still means jsonb: the typed functions have their own
-- names because an anyelement overload would make this call ambiguous.
BEGIN;
SELECT kind FROM idem_begin('typed', 'literal', '{"a": 1}');
ROLLBACK;

-- Drift: the stored result no longer fits the type. Each is ID001 and
-- names the first difference.
CREATE TYPE pg_temp.receipt_more AS (payment_id integer, charged pg_temp.charge, tags text[], note text);
SELECT idem_result(o, NULL::pg_temp.receipt_more) FROM idem_begin('typed', 'r-1', '{"amount": 100, "currency": "EUR"}') o;
\echo :LAST_ERROR_SQLSTATE
CREATE TYPE pg_temp.receipt_less AS (payment_id integer, charged pg_temp.charge);
SELECT idem_result(o, NULL::pg_temp.receipt_less) FROM idem_begin('typed', 'r-1', '{"amount": 100, "currency": "EUR"}') o;
\echo :LAST_ERROR_SQLSTATE
CREATE TYPE pg_temp.charge_v2 AS (amount integer, currency text, fee integer);
CREATE TYPE pg_temp.receipt_nested AS (payment_id integer, charged pg_temp.charge_v2, tags text[]);
SELECT idem_result(o, NULL::pg_temp.receipt_nested) FROM idem_begin('typed', 'r-1', '{"amount": 100, "currency": "EUR"}') o;
\echo :LAST_ERROR_SQLSTATE
CREATE TYPE pg_temp.receipt_int_tags AS (payment_id integer, charged pg_temp.charge, tags integer[]);
SELECT idem_result(o, NULL::pg_temp.receipt_int_tags) FROM idem_begin('typed', 'r-1', '{"amount": 100, "currency": "EUR"}') o;
\echo :LAST_ERROR_SQLSTATE
CREATE TYPE pg_temp.receipt_scalar_tags AS (payment_id integer, charged pg_temp.charge, tags text);
SELECT idem_result(o, NULL::pg_temp.receipt_scalar_tags) FROM idem_begin('typed', 'r-1', '{"amount": 100, "currency": "EUR"}') o;
\echo :LAST_ERROR_SQLSTATE
SELECT idem_result(o, NULL::integer) FROM idem_begin('typed', 'r-1', '{"amount": 100, "currency": "EUR"}') o;
\echo :LAST_ERROR_SQLSTATE
SELECT idem_result(o, NULL::pg_temp.charge) FROM idem_begin_typed('typed', 's-1', 42) o;
\echo :LAST_ERROR_SQLSTATE
SELECT idem_result(o, NULL::integer) FROM idem_begin_typed('typed', 's-1', 42) o;
\echo :LAST_ERROR_SQLSTATE
SELECT idem_result(o, NULL::text) FROM idem_begin_typed('typed', 'a-1', ARRAY[1, 2]) o;
\echo :LAST_ERROR_SQLSTATE
CREATE DOMAIN pg_temp.positive AS integer CHECK (VALUE > 0);
BEGIN;
SELECT kind FROM idem_begin('typed', 'neg', '{}');
SELECT idem_commit('typed', 'neg', '-3');
COMMIT;
SELECT idem_result(o, NULL::pg_temp.positive) FROM idem_begin('typed', 'neg', '{}') o;
\echo :LAST_ERROR_SQLSTATE
-- JSON null fits any type and decodes as NULL.
BEGIN;
SELECT kind FROM idem_begin('typed', 'null', '{}');
SELECT idem_commit('typed', 'null', 'null');
COMMIT;
SELECT idem_result(o, NULL::pg_temp.receipt) IS NULL AS is_null FROM idem_begin('typed', 'null', '{}') o;

-- Misuse.
SELECT idem_result(o, ROW(1, 2)) FROM idem_begin('typed', 'r-1', '{"amount": 100, "currency": "EUR"}') o;
\echo :LAST_ERROR_SQLSTATE
SELECT kind FROM idem_begin_typed('typed', 'n-1', NULL::integer);
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SELECT kind FROM idem_begin_typed('typed', 'r-2', ROW(5, 'EUR')::pg_temp.charge);
SELECT idem_commit_typed('typed', 'r-2', NULL::integer);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SELECT status FROM idempotency_record WHERE key_value IN ('n-1', 'r-2') ORDER BY key_value;

-- A domain over a composite, or over an array, decodes as its base type and
-- is checked as itself.
CREATE DOMAIN pg_temp.receipt_d AS pg_temp.receipt CHECK ((VALUE).payment_id > 0);
CREATE DOMAIN pg_temp.tags_d AS text[] CHECK (cardinality(VALUE) > 0);
SELECT (idem_result(o, NULL::pg_temp.receipt_d)).* FROM idem_begin_typed('typed', 'r-1', ROW(100, 'EUR')::pg_temp.charge) o;
SELECT pg_typeof(idem_result(o, NULL::pg_temp.receipt_d)) FROM idem_begin_typed('typed', 'r-1', ROW(100, 'EUR')::pg_temp.charge) o;
BEGIN;
SELECT kind FROM idem_begin_typed('typed', 'd-1', 'a'::text);
SELECT idem_commit_typed('typed', 'd-1', ARRAY['x', 'y']::pg_temp.tags_d);
COMMIT;
SELECT idem_result(o, NULL::pg_temp.tags_d) FROM idem_begin_typed('typed', 'd-1', 'a'::text) o;
CREATE DOMAIN pg_temp.receipt_paid AS pg_temp.receipt CHECK ((VALUE).payment_id > 100);
SELECT idem_result(o, NULL::pg_temp.receipt_paid) FROM idem_begin_typed('typed', 'r-1', ROW(100, 'EUR')::pg_temp.charge) o;
\echo :LAST_ERROR_SQLSTATE
