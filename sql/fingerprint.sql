-- fingerprint: the parts of a request a namespace's fingerprint ignores
-- (RFC 6901 JSON Pointers, idem_namespace_fingerprint), the canonical text
-- and hash without them, and every refusal.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
RESET client_min_messages;
SET search_path = public, idempotency;
DELETE FROM idempotency_record;

-- What the pointers leave out: members, nested members, array elements,
-- names with "~" and "/" in them ("~0", "~1"), the member named "" ("/"),
-- and a whole subtree with a pointer under it. A pointer through a scalar,
-- to a missing member, or with an index that is not one leaves out nothing.
SELECT idem_canonical('{"a": 1, "trace_id": "t-1", "meta": {"at": "now", "by": "me"}}',
                      ARRAY['/trace_id', '/meta/at']);
SELECT idem_canonical('{"items": [{"n": 1, "nonce": 5}, {"n": 2, "nonce": 6}, "c"]}',
                      ARRAY['/items/0/nonce', '/items/2']);
SELECT idem_canonical('{"a/b": 1, "m~n": 2, "": 3, "x": 4}', ARRAY['/a~1b', '/m~0n', '/']);
SELECT idem_canonical('{"a": {"b": 1, "c": 2}, "d": 3}', ARRAY['/a/b', '/a']);
SELECT idem_canonical('{"a": 1, "b": [1, 2]}', ARRAY['/a/b', '/missing', '/b/01', '/b/-', '/b/9']);
SELECT idem_canonical('[[1, 2], [3, 4]]', ARRAY['/1/0']);
SELECT idem_canonical('"scalar"', ARRAY['/0']);
-- Without pointers, the whole value; NULL payload: NULL.
SELECT idem_canonical('{"b": 1, "a": 2}', NULL) AS no_pointers, idem_canonical('{"b": 1, "a": 2}', '{}') AS empty,
       idem_canonical(NULL, ARRAY['/a']) IS NULL AS null_payload;
-- The hash is SHA-256 of that text.
SELECT idem_request_hash('{"b": 1, "t": 2}', ARRAY['/t']) = sha256('{"b":1}') AS hash_of_the_text,
       idem_request_hash('{"b": 1, "t": 2}', NULL) = idem_request_hash('{"b": 1, "t": 2}') AS whole;

-- Pointers that are not, each refused with what is wrong.
\set VERBOSITY default
SELECT idem_canonical('{}', ARRAY['']);
SELECT idem_canonical('{}', ARRAY['a/b']);
SELECT idem_canonical('{}', ARRAY['/a~2b']);
SELECT idem_canonical('{}', ARRAY['/a~']);
SELECT idem_canonical('{}', ARRAY['/a', NULL]);
SELECT idem_canonical('{}', ARRAY[ARRAY['/a'], ARRAY['/b']]);
SELECT idem_canonical('{}', ARRAY(SELECT '/p' || g FROM generate_series(1, 65) g));
SELECT idem_canonical('{}', ARRAY['/' || repeat('x', 1024)]);
SELECT idem_canonical('{}', ARRAY['/ok', '/é~x']);
\set VERBOSITY terse

-- A namespace that ignores a trace id and a client timestamp.
SELECT namespace, fingerprint_ignore
FROM idem_namespace_fingerprint('fp', ARRAY['/sent_at', '/meta/trace_id', '/sent_at']);
SELECT namespace, fingerprint_ignore FROM idem_namespaces WHERE namespace = 'fp';
BEGIN;
SELECT kind, submitted_hash = sha256('{"amount":5,"meta":{"tenant":7}}') AS hashed_without_them
FROM idem_begin('fp', 'k1', '{"amount": 5, "sent_at": "10:00", "meta": {"trace_id": "a", "tenant": 7}}');
SELECT idem_commit('fp', 'k1', '{"paid": true}');
COMMIT;
-- A retry with other values there replays; another amount, or another
-- value anywhere else, is a mismatch, which answers the request as it was
-- recorded, whole.
SELECT kind, result FROM idem_begin('fp', 'k1', '{"amount": 5, "sent_at": "10:07", "meta": {"trace_id": "b", "tenant": 7}}');
SELECT kind, result FROM idem_begin('fp', 'k1', '{"amount": 5, "meta": {"tenant": 7}}');
SELECT kind, recorded_request FROM idem_begin('fp', 'k1', '{"amount": 6, "sent_at": "10:00", "meta": {"trace_id": "a", "tenant": 7}}');
SELECT kind FROM idem_begin('fp', 'k1', '{"amount": 5, "sent_at": "10:00", "meta": {"trace_id": "a", "tenant": 8}}');
SELECT request_payload FROM idempotency_record WHERE namespace = 'fp' AND key_value = 'k1';
-- In a batch too, and in flight: a retry while the first is claimed.
SELECT kind FROM idem_begin_batch('fp', ARRAY['k1', 'k1'],
                                  ARRAY['{"amount": 5, "sent_at": "1", "meta": {"tenant": 7}}',
                                        '{"amount": 5, "sent_at": "2", "meta": {"tenant": 7, "trace_id": "c"}}']::jsonb[]);
BEGIN;
SELECT kind FROM idem_begin('fp', 'k2', '{"amount": 1, "sent_at": "a"}');
SELECT kind FROM idem_begin('fp', 'k2', '{"amount": 1, "sent_at": "b"}');
SELECT kind FROM idem_begin_batch('fp', ARRAY['k2', 'k3', 'k3'],
                                  ARRAY['{"amount": 1, "sent_at": "c"}', '{"amount": 2, "sent_at": "d"}',
                                        '{"amount": 2}']::jsonb[]);
ROLLBACK;

-- A change while the namespace has records is refused: the records were
-- fingerprinted under the pointers in force. The same pointers in another
-- order, or repeated, are no change. The namespace is as it was.
SELECT idem_namespace_fingerprint('fp', ARRAY['/sent_at']);
SELECT idem_namespace_fingerprint('fp', NULL);
SELECT fingerprint_ignore FROM idem_namespace_fingerprint('fp', ARRAY['/meta/trace_id', '/sent_at', '/sent_at']);
-- Once its records are gone (expired and purged; here deleted), it changes.
DELETE FROM idempotency_record WHERE namespace = 'fp';
SELECT fingerprint_ignore FROM idem_namespace_fingerprint('fp', ARRAY['/sent_at']);
SELECT fingerprint_ignore FROM idem_namespace_fingerprint('fp', '{}');
BEGIN;
SELECT kind, submitted_hash = idem_request_hash('{"amount": 5, "sent_at": "x"}') AS whole
FROM idem_begin('fp', 'k1', '{"amount": 5, "sent_at": "x"}');
ROLLBACK;
-- The limit counts different pointers: 65 given, 64 different, are taken.
SELECT octet_length(idem_canonical('{}', ARRAY(SELECT '/p' || (g % 64) FROM generate_series(0, 64) g)));
SELECT cardinality(fingerprint_ignore)
FROM idem_namespace_fingerprint('fp-3', ARRAY(SELECT '/p' || (g % 64) FROM generate_series(0, 64) g));
SELECT idem_namespace_drop('fp-3');
-- Bad pointers and a bad namespace change nothing.
SELECT idem_namespace_fingerprint('fp', ARRAY['trace_id']);
SELECT idem_namespace_fingerprint('fp', ARRAY[NULL]);
\set VERBOSITY default
SELECT idem_namespace_fingerprint('fp', ARRAY['/z', '/z', '/a~x']);   -- the element as given: 3
\set VERBOSITY terse
SELECT idem_namespace_fingerprint('no such namespace!', ARRAY['/a']);
SELECT idem_namespace_fingerprint(NULL, ARRAY['/a']);
-- The change needs READ COMMITTED (it must see every record).
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT idem_namespace_fingerprint('fp', ARRAY['/a']);
ROLLBACK;
SELECT namespace, fingerprint_ignore FROM idem_namespaces WHERE namespace = 'fp';
-- idem_namespace_configure replaces the other settings and keeps the pointers.
SELECT fingerprint_ignore FROM idem_namespace_fingerprint('fp-2', ARRAY['/t']);
SELECT replay_window, fingerprint_ignore FROM idem_namespace_configure('fp-2', replay_window => '1 hour');

-- A namespace bound to a store the service owns fingerprints the same way.
SELECT idem_create_store('public.fp_store');
SELECT idem_bind_store('fp-2', 'public.fp_store');
BEGIN;
SELECT kind FROM idem_begin('fp-2', 'b1', '{"v": 1, "t": 1}');
SELECT idem_commit('fp-2', 'b1', '{"ok": 1}');
COMMIT;
SELECT kind, result FROM idem_begin('fp-2', 'b1', '{"v": 1, "t": 2}');
SELECT idem_namespace_fingerprint('fp-2', NULL);
DELETE FROM public.fp_store;
SELECT idem_bind_store('fp-2', NULL);
DROP TABLE public.fp_store;

-- Pointers written into the registry by hand that are not pointers: every
-- call on the namespace says so, and what to do.
UPDATE idem_namespace_config SET fingerprint_ignore = ARRAY['nope'] WHERE namespace = 'fp-2';
\set VERBOSITY default
SELECT kind FROM idem_begin('fp-2', 'x', '{}');
\set VERBOSITY terse
UPDATE idem_namespace_config SET fingerprint_ignore = NULL WHERE namespace = 'fp-2';

-- Only the extension's owner (or whom it grants) says what a fingerprint ignores.
CREATE ROLE fp_user;
GRANT USAGE ON SCHEMA idempotency TO fp_user;
SET ROLE fp_user;
SELECT idem_namespace_fingerprint('fp', ARRAY['/a']);
SELECT idem_canonical('{"a": 1, "b": 2}', ARRAY['/a']);
RESET ROLE;
REVOKE USAGE ON SCHEMA idempotency FROM fp_user;
DROP ROLE fp_user;
SELECT idem_namespace_drop('fp'), idem_namespace_drop('fp-2');
