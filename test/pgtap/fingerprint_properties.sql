-- fingerprint_properties: the request fingerprint ignores object key order
-- and whitespace, keeps array order, is deterministic across sessions, and
-- its canonical text is a fixed point that parses back to the same value.
-- With a namespace's pointers (0.9.0), requests that differ only where they
-- point answer alike, and requests that differ anywhere else never do.
BEGIN;
SET search_path = idempotency, public;
SELECT plan(15);

-- 500 random objects of 1 to 12 keys with nested values, each built twice:
-- once with keys in one order, once in reverse (jsonb_object_agg keeps the
-- last duplicate, so keys here are unique per object).
CREATE TEMP TABLE members AS
SELECT o, k, CASE (k % 4)
               WHEN 0 THEN to_jsonb(random())
               WHEN 1 THEN to_jsonb(md5(random()::text) || 'é😀')
               WHEN 2 THEN jsonb_build_array(k, jsonb_build_object('z', k, 'a', -k), NULL)
               ELSE jsonb_build_object('nested', jsonb_build_object('b', true, 'a', false))
             END AS v,
       k::text || ':' || substr(md5(o::text || '/' || k::text), 1, k % 7) AS key  -- unique per object
FROM generate_series(1, 500) o, generate_series(1, 1 + (o % 12)) k;
CREATE TEMP TABLE objects AS
SELECT o,
       jsonb_object_agg(key, v ORDER BY k) AS forward,
       (SELECT jsonb_object_agg(m2.key, m2.v ORDER BY m2.k DESC) FROM members m2 WHERE m2.o = m.o) AS backward,
       string_agg(format('%s : %s', to_json(key), v::text), ' ,  ' ORDER BY k DESC) AS spaced_text
FROM members m GROUP BY o;

SELECT is((SELECT count(*) FROM objects WHERE idem_request_hash(forward) <> idem_request_hash(backward)), 0::bigint,
          'key insertion order never changes the fingerprint');
SELECT is((SELECT count(*) FROM objects
           WHERE idem_request_hash(forward) <> idem_request_hash(('{ ' || spaced_text || ' }')::jsonb)),
          0::bigint, 'whitespace and key order in the input text never change the fingerprint');
SELECT is((SELECT count(*) FROM objects WHERE idem_canonical(idem_canonical(forward)::jsonb) <> idem_canonical(forward)),
          0::bigint, 'canonicalising twice changes nothing');
SELECT is((SELECT count(*) FROM objects WHERE idem_canonical(forward)::jsonb <> forward), 0::bigint,
          'the canonical text parses back to an equal jsonb');
SELECT is((SELECT count(DISTINCT idem_request_hash(forward)) FROM objects),
          (SELECT count(DISTINCT forward) FROM objects), 'different values give different fingerprints');

-- Array order is meaningful.
SELECT is((SELECT count(*) FROM objects
           WHERE idem_request_hash(jsonb_build_array(forward, 1)) = idem_request_hash(jsonb_build_array(1, forward))),
          0::bigint, 'swapping array elements changes the fingerprint');
SELECT isnt(idem_request_hash('[1, 2, 3]'), idem_request_hash('[3, 2, 1]'), 'reversed arrays differ');

-- Another session computes the same fingerprints.
CREATE TEMP TABLE remote AS
SELECT * FROM dblink(
  format('host=%s port=%s dbname=%s user=%s',
         split_part(current_setting('unix_socket_directories'), ',', 1),
         current_setting('port'), current_database(), current_user),
  $$SELECT i, idempotency.idem_request_hash(jsonb_build_object('i', i, 'name', 'é' || i, 'tags', jsonb_build_array(i, 'x')))
    FROM generate_series(1, 300) i$$) AS t(i int, fingerprint bytea);
SELECT is((SELECT count(*) FROM remote
           WHERE fingerprint = idem_request_hash(jsonb_build_object('tags', jsonb_build_array(i, 'x'), 'name', 'é' || i, 'i', i))),
          300::bigint, 'a second session computes the same 300 fingerprints');
SELECT is((SELECT count(DISTINCT fingerprint) FROM remote), 300::bigint, 'and they are distinct');

-- What a namespace ignores: a trace id and a nested send time, with random
-- values, on every object. Two such deliveries of one object fingerprint
-- alike, and as the object with an empty "meta"; distinct objects stay
-- distinct; a change elsewhere (one more member) always shows.
CREATE TEMP TABLE deliveries AS
SELECT o, forward,
       forward || jsonb_build_object('trace_id', md5(random()::text), 'meta', jsonb_build_object('sent_at', random())) AS first,
       backward || jsonb_build_object('meta', jsonb_build_object('sent_at', random()), 'trace_id', random()) AS second
FROM objects;
SELECT is((SELECT count(*) FROM deliveries
           WHERE idem_request_hash(first, ARRAY['/trace_id', '/meta/sent_at'])
                 <> idem_request_hash(second, ARRAY['/meta/sent_at', '/trace_id'])
              OR idem_request_hash(first, ARRAY['/trace_id', '/meta/sent_at'])
                 <> idem_request_hash(forward || '{"meta": {}}')),
          0::bigint, 'two deliveries differing only where the pointers point fingerprint alike');
SELECT is((SELECT count(DISTINCT idem_request_hash(first, ARRAY['/trace_id', '/meta/sent_at'])) FROM deliveries),
          (SELECT count(DISTINCT forward) FROM deliveries), 'distinct objects keep distinct fingerprints');
SELECT is((SELECT count(*) FROM deliveries
           WHERE idem_request_hash(first, ARRAY['/trace_id', '/meta/sent_at'])
                 = idem_request_hash(first || '{"extra": 1}', ARRAY['/trace_id', '/meta/sent_at'])),
          0::bigint, 'a member no pointer names always changes the fingerprint');
-- Through the store: each object begun and committed as its first
-- delivery; the second replays, and the first with one more member is a
-- mismatch that answers the first delivery as it was recorded.
SELECT is((SELECT fingerprint_ignore FROM idem_namespace_fingerprint('fp-properties', ARRAY['/trace_id', '/meta/sent_at'])),
          ARRAY['/meta/sent_at', '/trace_id'], 'the namespace keeps its pointers sorted');
CREATE TEMP TABLE first_deliveries AS SELECT x.* FROM deliveries d, LATERAL (
    SELECT b.kind, idem_commit('fp-properties', 'o' || d.o, jsonb_build_object('o', d.o))::text AS committed
    FROM idem_begin('fp-properties', 'o' || d.o, d.first) b) x;
SELECT is((SELECT count(*) FROM deliveries d, idem_begin('fp-properties', 'o' || d.o, d.second) b
           WHERE b.kind = 'prior_result' AND b.result = jsonb_build_object('o', d.o)),
          (SELECT count(*) FROM deliveries), 'every second delivery replays its object''s result');
SELECT is((SELECT count(*) FROM deliveries d, idem_begin('fp-properties', 'o' || d.o, d.first || '{"extra": 1}') b
           WHERE b.kind = 'mismatch' AND b.recorded_request = d.first),
          (SELECT count(*) FROM deliveries), 'and every changed one is a mismatch carrying the first delivery');

SELECT * FROM finish();
ROLLBACK;
