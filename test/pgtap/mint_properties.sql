-- mint_properties: idem_mint is deterministic across calls and sessions,
-- distinct for distinct part lists, and sensitive to part order and
-- boundaries. Needs the pgtap and dblink extensions in the test database.
BEGIN;
SET search_path = idempotency, public;
SELECT plan(8);

-- 2,000 random part lists of 1 to 5 parts of 1 to 12 characters, some non-ASCII.
CREATE TEMP TABLE cases AS
SELECT i, ARRAY(SELECT substr(md5(random()::text) || 'é😀日', 1 + (random() * 30)::int, 1 + (random() * 11)::int)
                FROM generate_series(1, 1 + (random() * 4)::int)
                WHERE i > 0) AS parts
FROM generate_series(1, 2000) i;
-- Every part above is non-blank, as mint requires.
DELETE FROM cases WHERE EXISTS (SELECT 1 FROM unnest(parts) p WHERE btrim(p) = '');

SELECT is((SELECT count(*) FROM cases WHERE idem_mint('t', parts) <> idem_mint('t', parts)), 0::bigint,
          'the same parts give the same key on every call');

SELECT is((SELECT count(DISTINCT idem_mint('t', parts)) FROM cases),
          (SELECT count(DISTINCT parts) FROM cases),
          'distinct part lists give distinct keys');

SELECT is((SELECT count(*) FROM cases
           WHERE cardinality(parts) > 1 AND parts[1] <> parts[2]
             AND idem_mint('t', parts) = idem_mint('t', parts[2:2] || parts[1:1] || parts[3:])),
          0::bigint, 'swapping two different parts changes the key');

SELECT is((SELECT count(*) FROM cases
           WHERE cardinality(parts) > 1
             AND idem_mint('t', parts) = idem_mint('t', ARRAY[array_to_string(parts, '')])),
          0::bigint, 'concatenating the parts changes the key (length prefixes)');

SELECT isnt(idem_mint('t', ARRAY['ab', 'c']), idem_mint('t', ARRAY['a', 'bc']),
            'ab|c and a|bc differ');

SELECT is(idem_mint('payments', ARRAY['tenant-42', 'invoice-1001']),
          idem_mint('refunds', ARRAY['tenant-42', 'invoice-1001']),
          'the namespace scopes the store, not the hash');

-- Another session (through dblink) computes the same keys.
CREATE TEMP TABLE remote AS
SELECT * FROM dblink(
  format('host=%s port=%s dbname=%s user=%s',
         split_part(current_setting('unix_socket_directories'), ',', 1),
         current_setting('port'), current_database(), current_user),
  $$SELECT i, idempotency.idem_mint('t', ARRAY['p', i::text, 'é']) FROM generate_series(1, 500) i$$)
  AS t(i int, key text);
SELECT is((SELECT count(*) FROM remote WHERE key = idem_mint('t', ARRAY['p', i::text, 'é'])), 500::bigint,
          'a second session computes the same 500 keys');
SELECT is((SELECT count(DISTINCT key) FROM remote), 500::bigint, 'and they are 500 distinct keys');

SELECT * FROM finish();
ROLLBACK;
