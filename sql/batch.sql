-- batch: idem_begin_batch begins many keys of one namespace in one call,
-- each as idem_begin would, and answers one outcome per key in the keys'
-- order; a key given twice is begun twice, the second after the first.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
RESET client_min_messages;
SET search_path = public, idempotency;
DELETE FROM idempotency_record;
SELECT namespace FROM idem_namespace_configure('q');

-- Three new keys, not in the order of their bytes: fresh each, answered in
-- the input's order.
BEGIN;
SELECT n, kind, attempt, takeover, fence > 4294967295 AS fenced
FROM idem_begin_batch('q', ARRAY['m-3', 'm-1', 'm-2'], ARRAY['{"n": 3}', '{"n": 1}', '{"n": 2}']::jsonb[])
     WITH ORDINALITY AS b(kind, result, error, recorded_request, recorded_hash, submitted_hash, attempt, age, fence,
                          lease_ends_at, takeover, recovery_point, recovery_state, n);
SELECT idem_commit('q', k, jsonb_build_object('done', k)) FROM unnest(ARRAY['m-1', 'm-2', 'm-3']) k;
COMMIT;
-- Replays and a mismatch, each as the single call answers it.
SELECT b.kind, b.result, b.recorded_request
FROM idem_begin_batch('q', ARRAY['m-2', 'm-1', 'm-3'], ARRAY['{"n": 2}', '{"n": 1}', '{"n": 99}']::jsonb[]) b;
SELECT b.kind, b.result FROM unnest(ARRAY['m-2', 'm-1']) k, idem_begin('q', k, jsonb_build_object('n', right(k, 1)::int)) b;
-- A key twice (the second is in flight: the first is this transaction's
-- claim), a key twice with another request (a mismatch), and a key that
-- is the same once trimmed.
BEGIN;
SELECT kind FROM idem_begin_batch('q', ARRAY['d-1', 'd-2', 'd-1', 'd-2', ' d-3', 'd-3 '],
                                  ARRAY['{"a": 1}', '{"b": 1}', '{"a": 1}', '{"b": 2}', '{}', '{}']::jsonb[]);
ROLLBACK;
-- No keys: no rows. In the select list it works too.
SELECT count(*) FROM idem_begin_batch('q', ARRAY[]::text[], ARRAY[]::jsonb[]);
BEGIN;
SELECT (idem_begin_batch('q', ARRAY['s-1', 's-2'], ARRAY['{}', '{}']::jsonb[])).kind;
ROLLBACK;
-- An HTTP response per key, from the whole row of each outcome.
SELECT r.status, r.headers->>'Idempotency-Replayed' AS replayed
FROM idem_begin_batch('q', ARRAY['m-1'], ARRAY['{"n": 1}']::jsonb[]) o, idem_http_response(o) r;

-- Bad input changes nothing: NULL arrays and elements, an invalid key (its
-- element named), arrays of different lengths or of two dimensions, too
-- many keys, a namespace the caller does not hold.
CREATE TABLE before AS SELECT * FROM idempotency_record;
SELECT * FROM idem_begin_batch('q', NULL, ARRAY['{}']::jsonb[]);
SELECT * FROM idem_begin_batch('q', ARRAY['a'], NULL);
SELECT * FROM idem_begin_batch('q', ARRAY['a', NULL], ARRAY['{}', '{}']::jsonb[]);
SELECT * FROM idem_begin_batch('q', ARRAY['a', '   '], ARRAY['{}', '{}']::jsonb[]);
SELECT * FROM idem_begin_batch('q', ARRAY['a', E'b\tc'], ARRAY['{}', '{}']::jsonb[]);
SELECT * FROM idem_begin_batch('q', ARRAY['a', 'b'], ARRAY['{}', NULL]::jsonb[]);
SELECT * FROM idem_begin_batch('q', ARRAY['a', 'b'], ARRAY['{}']::jsonb[]);
SELECT * FROM idem_begin_batch('q', ARRAY[['a', 'b']], ARRAY[['{}', '{}']]::jsonb[]);
SELECT * FROM idem_begin_batch('q', array_fill('k'::text, ARRAY[10001]), array_fill('{}'::jsonb, ARRAY[10001]));
SELECT * FROM idem_begin_batch(NULL, ARRAY['a'], ARRAY['{}']::jsonb[]);
SELECT * FROM idem_begin_batch('q', ARRAY['a'], ARRAY['{}']::jsonb[], in_flight_wait => '-1 second');
SELECT * FROM idem_begin_batch('q', ARRAY['a'], ARRAY['{}']::jsonb[], replay_window => '0');
SELECT * FROM idem_begin_batch('q', ARRAY[]::text[], ARRAY[]::jsonb[], replay_window => '0');
SELECT namespace FROM idem_namespace_configure('q', max_payload_bytes => 64);
SELECT * FROM idem_begin_batch('q', ARRAY['a', 'b'], ARRAY['{}', jsonb_build_object('s', repeat('x', 100))]);
SELECT namespace FROM idem_namespace_configure('q');
CREATE ROLE regress_idem_batch_outsider;
GRANT USAGE ON SCHEMA idempotency TO regress_idem_batch_outsider;
SET ROLE regress_idem_batch_outsider;
SELECT * FROM idem_begin_batch('q', ARRAY['a'], ARRAY['{}']::jsonb[]);
RESET ROLE;
DROP OWNED BY regress_idem_batch_outsider;
DROP ROLE regress_idem_batch_outsider;
SELECT (SELECT count(*) FROM idempotency_record) = (SELECT count(*) FROM before) AS unchanged,
       NOT EXISTS (SELECT * FROM idempotency_record EXCEPT SELECT * FROM before) AS same_rows;
DROP TABLE before;

-- A namespace with hashed keys and a lease: the claims are committed rows
-- with their lease's end; 10000 keys are accepted.
SELECT namespace FROM idem_namespace_configure('qh', hash_keys => true, in_progress_lease => '1 hour');
SELECT kind, count(*), bool_and(lease_ends_at > now()) AS leased
FROM idem_begin_batch('qh', ARRAY(SELECT 'h-' || g FROM generate_series(1, 10000) g),
                      array_fill('{}'::jsonb, ARRAY[10000])) GROUP BY kind;
SELECT count(*) AS rows, bool_and(length(key_value) = 64) AS hashed FROM idempotency_record WHERE namespace = 'qh';
-- In a read-only transaction a batch replays and refuses to claim.
BEGIN READ ONLY;
SELECT kind FROM idem_begin_batch('q', ARRAY['m-1'], ARRAY['{"n": 1}']::jsonb[]);
SELECT kind FROM idem_begin_batch('q', ARRAY['m-1', 'new'], ARRAY['{"n": 1}', '{}']::jsonb[]);
ROLLBACK;
DELETE FROM idempotency_record;
SELECT idem_namespace_drop(n) FROM unnest(ARRAY['q', 'qh']) n;
