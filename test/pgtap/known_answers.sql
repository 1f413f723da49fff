-- known_answers: every vector in test/kat/vectors.csv, which
-- test/kat/vectors.py computes from the specification alone (independent of
-- the C++ code), must come out of the SQL functions exactly. pg_prove runs
-- from the repository root, so the relative path below resolves.
BEGIN;
SET search_path = idempotency, public;
CREATE TEMP TABLE kat (kind text, name text, input text, parts_hex text, canonical text, sha256 text);
\copy kat FROM 'test/kat/vectors.csv' WITH (FORMAT csv, HEADER)
-- A fingerprint row's parts_hex is its JSON Pointers, each as hex of its UTF-8 bytes, joined with '.'.
CREATE TEMP VIEW kat_pointers AS
SELECT name, input, canonical, sha256,
       ARRAY(SELECT convert_from(decode(h, 'hex'), 'UTF8')
             FROM unnest(string_to_array(parts_hex, '.')) WITH ORDINALITY AS u(h, n) ORDER BY n) AS pointers
FROM kat WHERE kind = 'fingerprint';
SELECT plan((SELECT count(*)::int FROM kat WHERE kind = 'mint')
            + 2 * (SELECT count(*)::int FROM kat WHERE kind = 'canonical')
            + 2 * (SELECT count(*)::int FROM kat WHERE kind = 'fingerprint')
            + 2);

SELECT cmp_ok((SELECT count(*) FROM kat), '>=', 50::bigint, 'the vector file is loaded');
SELECT is(idem_mint('kat', ARRAY(SELECT jsonb_array_elements_text(input::jsonb))), sha256, 'mint ' || name)
FROM kat WHERE kind = 'mint' ORDER BY name;
SELECT is(idem_canonical(input::jsonb), canonical, 'canonical ' || name)
FROM kat WHERE kind = 'canonical' ORDER BY name;
SELECT is(encode(idem_request_hash(input::jsonb), 'hex'), sha256, 'fingerprint ' || name)
FROM kat WHERE kind = 'canonical' ORDER BY name;
SELECT cmp_ok((SELECT count(*) FROM kat WHERE kind = 'fingerprint'), '>=', 20::bigint, 'the fingerprint vectors are loaded');
SELECT is(idem_canonical(input::jsonb, pointers), canonical, 'canonical ignoring pointers ' || name)
FROM kat_pointers ORDER BY name;
SELECT is(encode(idem_request_hash(input::jsonb, pointers), 'hex'), sha256, 'fingerprint ignoring pointers ' || name)
FROM kat_pointers ORDER BY name;

SELECT * FROM finish();
ROLLBACK;
