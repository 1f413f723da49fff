-- fingerprint_properties: the request fingerprint ignores object key order
-- and whitespace, keeps array order, is deterministic across sessions, and
-- its canonical text is a fixed point that parses back to the same value.
BEGIN;
SET search_path = idempotency, public;
SELECT plan(9);

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

SELECT * FROM finish();
ROLLBACK;
