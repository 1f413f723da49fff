-- known_answers: every vector in test/kat/vectors.csv, which
-- test/kat/vectors.py computes from the specification alone (independent of
-- the C++ code), must come out of the SQL functions exactly. pg_prove runs
-- from the repository root, so the relative path below resolves.
BEGIN;
SET search_path = idempotency, public;
CREATE TEMP TABLE kat (kind text, name text, input text, parts_hex text, canonical text, sha256 text);
\copy kat FROM 'test/kat/vectors.csv' WITH (FORMAT csv, HEADER)
SELECT plan((SELECT count(*)::int FROM kat WHERE kind = 'mint') + 2 * (SELECT count(*)::int FROM kat WHERE kind = 'canonical') + 1);

SELECT cmp_ok((SELECT count(*) FROM kat), '>=', 50::bigint, 'the vector file is loaded');
SELECT is(idem_mint('kat', ARRAY(SELECT jsonb_array_elements_text(input::jsonb))), sha256, 'mint ' || name)
FROM kat WHERE kind = 'mint' ORDER BY name;
SELECT is(idem_canonical(input::jsonb), canonical, 'canonical ' || name)
FROM kat WHERE kind = 'canonical' ORDER BY name;
SELECT is(encode(idem_request_hash(input::jsonb), 'hex'), sha256, 'fingerprint ' || name)
FROM kat WHERE kind = 'canonical' ORDER BY name;

SELECT * FROM finish();
ROLLBACK;
