-- known_answers: every vector in test/kat/vectors.csv and test/kat/keys.csv,
-- which test/kat/vectors.py computes from the specification alone
-- (independent of the C++ code), must come out of the SQL functions exactly:
-- keys, canonical texts and fingerprints, and the key rules' errors with
-- their messages and details, which the client packages test against too. pg_prove runs
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
CREATE TEMP TABLE kat_keys (function text, name text, input text, key text, message text, detail text);
\copy kat_keys FROM 'test/kat/keys.csv' WITH (FORMAT csv, HEADER)
-- One key vector run through the SQL functions: the key as the CSV writes
-- it (a JSON string, null, ok) or, on an error, '' and the error.
CREATE FUNCTION pg_temp.run_key(v kat_keys, OUT key text, OUT message text, OUT detail text) LANGUAGE plpgsql AS $$
BEGIN
    key := CASE v.function
        WHEN 'namespace' THEN (SELECT 'ok' FROM idem_parse(v.input::jsonb #>> '{}', 'k'))
        WHEN 'parse' THEN coalesce(to_jsonb(idem_parse('kat', v.input::jsonb #>> '{}'))::text, 'null')
        ELSE to_jsonb(idem_mint('kat', ARRAY(SELECT e #>> '{}' FROM jsonb_array_elements(v.input::jsonb) e)))::text
    END;
    message := '';
    detail := '';
EXCEPTION WHEN invalid_parameter_value THEN
    GET STACKED DIAGNOSTICS message = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
    key := '';
END;
$$;
SELECT plan((SELECT count(*)::int FROM kat WHERE kind = 'mint')
            + (SELECT count(*)::int FROM kat_keys) + 1
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

SELECT cmp_ok((SELECT count(*) FROM kat_keys), '>=', 30::bigint, 'the key vectors are loaded');
-- JSON strings compare as values, not as their escapes.
SELECT is((SELECT row(CASE WHEN r.key LIKE '"%' THEN (r.key::jsonb #>> '{}') ELSE r.key END, r.message, r.detail)::text
           FROM pg_temp.run_key(k) r),
          row(CASE WHEN k.key LIKE '"%' THEN (k.key::jsonb #>> '{}') ELSE coalesce(k.key, '') END,
              coalesce(k.message, ''), coalesce(k.detail, ''))::text,
          k.function || ' ' || k.name)
FROM kat_keys k ORDER BY k.function, k.name;

SELECT * FROM finish();
ROLLBACK;
