-- collation: arguments in a collation that is not deterministic (a
-- case-insensitive ICU collation, as a column of the caller's may have) are
-- read byte for byte, as in "C": keys that differ in case are two keys, a
-- namespace in upper case is refused, a JSON Pointer is checked as written.
-- No call fails for the collation itself (regular expressions and LIKE
-- refuse a nondeterministic collation with 0A000).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
RESET client_min_messages;
SET search_path = public, idempotency;
\set SHOW_CONTEXT never
DELETE FROM idempotency_record;
CREATE COLLATION pg_temp.ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TEMP TABLE caller (ns text COLLATE pg_temp.ci, k text COLLATE pg_temp.ci, p text COLLATE pg_temp.ci);
INSERT INTO caller VALUES ('coll', 'Key-1', '/a'), ('coll', 'key-1', '/b'), ('COLL', 'k', '/~2');

-- Keys and namespaces.
SELECT k, idem_parse(ns, k) FROM caller WHERE p <> '/~2' ORDER BY k COLLATE "C";
SELECT idem_parse(ns, k) FROM caller WHERE p = '/~2';
SELECT idem_parse('coll', k || E'\n' || k) FROM caller WHERE p = '/a';
SELECT k, idem_mint(ns, ARRAY[k]) = idem_mint('coll', ARRAY[k COLLATE "C"]) AS as_in_c FROM caller WHERE p <> '/~2' ORDER BY k COLLATE "C";
SELECT idem_mint(ns, ARRAY[k]) FROM caller WHERE p = '/~2';
SELECT key, reason FROM caller, idem_header_key(ns, k) WHERE p = '/a';
SELECT key, status FROM caller, idem_http_key(ns, ' "' || k || '" ') WHERE p = '/a';
SELECT key, status, headers FROM caller, idem_http_key(ns, NULL, 'https://example.com/' || k) WHERE p = '/a';
SELECT body ->> 'type' FROM caller, idem_http_problem(409, 'in_flight', k, 'https://example.com/' || k) AS body WHERE p = '/a';
SELECT idem_http_problem(409, 'in_flight', 'x', 'https://example.com/' || k || ' ') FROM caller WHERE p = '/a';
SELECT p, idem_canonical('{"a": 1, "b": 2}', ARRAY[p]), idem_request_hash('{"a": 1}', ARRAY[p]) = idem_request_hash('{"a": 1}', ARRAY[p COLLATE "C"]) AS as_in_c
    FROM caller WHERE p <> '/~2' ORDER BY p COLLATE "C";
SELECT idem_canonical('{}', ARRAY[p]) FROM caller WHERE p = '/~2';
SELECT idem_canonical('{"a": [1, 2, 3]}', ARRAY['/a/1' COLLATE pg_temp.ci]);

-- The store: two keys that differ only in case are two records.
BEGIN;
SELECT k, (idem_begin(ns, k, '{"n": 1}')).kind FROM caller WHERE p <> '/~2' ORDER BY k COLLATE "C";
SELECT k, idem_commit(ns, k, '{"r": 1}') FROM caller WHERE k = 'Key-1' COLLATE "C";
SELECT k, idem_fail_permanent(ns, k, '{"class_tag": "No", "message": "no"}') FROM caller WHERE k = 'key-1' COLLATE "C";
COMMIT;
SELECT key_value, status FROM idempotency_record WHERE namespace = 'coll' ORDER BY key_value COLLATE "C";
SELECT k, (idem_begin(ns, k, '{"n": 1}')).kind FROM caller WHERE p <> '/~2' ORDER BY k COLLATE "C";
SELECT k, (idem_begin(ns, k, '{"n": 2}')).kind FROM caller WHERE p <> '/~2' ORDER BY k COLLATE "C";
SELECT (idem_begin(ns, k, '{"n": 1}')).kind FROM caller WHERE p = '/~2';
SELECT k, kind FROM caller, idem_begin_batch(ns, ARRAY[k], ARRAY['{"n": 1}'::jsonb]) WHERE p <> '/~2' ORDER BY k COLLATE "C";
SELECT k, state FROM caller, idem_key_state(ns, k) WHERE p <> '/~2' ORDER BY k COLLATE "C";

-- A namespace with a lease: heartbeats, recovery points, transient failure.
SELECT namespace FROM idem_namespace_configure('coll-lease' COLLATE pg_temp.ci, in_progress_lease => '1 hour');
SELECT fence AS coll_fence FROM idem_begin('coll-lease' COLLATE pg_temp.ci, 'Job' COLLATE pg_temp.ci, '{"n": 1}') \gset
SELECT idem_extend_lease('coll-lease' COLLATE pg_temp.ci, 'Job' COLLATE pg_temp.ci, :coll_fence) > now() AS extended;
SELECT idem_save_point('coll-lease' COLLATE pg_temp.ci, 'Job' COLLATE pg_temp.ci, 'Step-1' COLLATE pg_temp.ci, '{}', :coll_fence) > now() - interval '1 minute' AS saved;
SELECT kind FROM idem_begin('coll-lease' COLLATE pg_temp.ci, 'job' COLLATE pg_temp.ci, '{"n": 1}');
SELECT fence AS coll_fence2 FROM idem_begin('coll-lease' COLLATE pg_temp.ci, 'Job-2' COLLATE pg_temp.ci, '{"n": 1}') \gset
SELECT idem_fail_transient('coll-lease' COLLATE pg_temp.ci, 'Job-2' COLLATE pg_temp.ci, :coll_fence2);
SELECT key_value, status FROM idempotency_record WHERE namespace = 'coll-lease' ORDER BY key_value COLLATE "C";

-- Namespace administration.
SELECT namespace, fingerprint_ignore FROM idem_namespace_fingerprint('coll-fp' COLLATE pg_temp.ci, ARRAY['/A', '/a', '/A'] COLLATE pg_temp.ci);
SELECT idem_namespace_fingerprint('coll-fp' COLLATE pg_temp.ci, ARRAY['/~2' COLLATE pg_temp.ci]);
SELECT idem_release_key('coll' COLLATE pg_temp.ci, 'KEY-1' COLLATE pg_temp.ci) IS NULL AS nothing_released;
SELECT idem_release_key('coll' COLLATE pg_temp.ci, 'Key-1' COLLATE pg_temp.ci) AS released;
SELECT key_value FROM idempotency_record WHERE namespace = 'coll' ORDER BY key_value COLLATE "C";

SELECT idem_grant('coll' COLLATE pg_temp.ci, 'pg_monitor'), idem_revoke('coll' COLLATE pg_temp.ci, 'pg_monitor');
SELECT namespace, grantee FROM idem_namespace_grant WHERE namespace LIKE 'coll%';
BEGIN;
SELECT idem_lock_namespace('coll' COLLATE pg_temp.ci);
ROLLBACK;
CREATE SCHEMA coll_app;
SELECT idem_create_store('coll_app."Store"' COLLATE pg_temp.ci);
SELECT idem_bind_store('coll-bound' COLLATE pg_temp.ci, 'coll_app."Store"');
BEGIN;
SELECT kind FROM idem_begin('coll-bound' COLLATE pg_temp.ci, 'K' COLLATE pg_temp.ci, '{}');
SELECT idem_commit('coll-bound' COLLATE pg_temp.ci, 'K' COLLATE pg_temp.ci, '{}');
COMMIT;
SELECT namespace, key_value, status FROM coll_app."Store";
SELECT idem_release_key('coll-bound' COLLATE pg_temp.ci, 'K' COLLATE pg_temp.ci);
SELECT idem_bind_store('coll-bound' COLLATE pg_temp.ci, NULL);
SET client_min_messages = warning;
DROP SCHEMA coll_app CASCADE;
RESET client_min_messages;
DELETE FROM idempotency_record;
SELECT idem_namespace_drop('coll-bound' COLLATE pg_temp.ci);
SELECT idem_namespace_drop('coll-fp' COLLATE pg_temp.ci);
SELECT idem_namespace_drop('coll' COLLATE pg_temp.ci);
SELECT idem_namespace_drop('coll-lease' COLLATE pg_temp.ci);
