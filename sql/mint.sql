-- mint: idem_mint(namespace, parts) is lowercase hex SHA-256 over a
-- length-prefixed UTF-8 encoding of the parts.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
RESET client_min_messages;
SET search_path = public, idempotency;
SELECT idem_mint('payments', ARRAY['ab', 'c']) AS ab_c,
       idem_mint('payments', ARRAY['a', 'bc']) AS a_bc;
-- Order matters; the namespace does not enter the hash (it scopes the store).
SELECT idem_mint('payments', ARRAY['c', 'ab']) = idem_mint('payments', ARRAY['ab', 'c']) AS reordered_equal,
       idem_mint('payments', ARRAY['ab', 'c']) = idem_mint('refunds', ARRAY['ab', 'c']) AS other_namespace_equal;
-- Known answer, computed by hand from the specification:
-- sha256(00000001 00000001 61) = sha256 of the bytes 0,0,0,1,0,0,0,1,'a'.
SELECT idem_mint('n', ARRAY['a']) = encode(sha256('\x000000010000000161'::bytea), 'hex') AS one_part_known_answer;
-- Parts are hashed as given: inner and surrounding spaces are kept.
SELECT idem_mint('n', ARRAY[' a ']) = idem_mint('n', ARRAY['a']) AS spaces_ignored;
SELECT length(idem_mint('n', ARRAY['😀', 'Grüße', '日本'])) AS key_length,
       idem_mint('n', ARRAY['😀', 'Grüße', '日本']) ~ '^[0-9a-f]{64}$' AS lowercase_hex;
-- A non-1 lower bound does not matter: only the order of elements does.
SELECT idem_mint('n', '[0:1]={x,y}'::text[]) = idem_mint('n', ARRAY['x', 'y']) AS lower_bound_ignored;
-- Errors: each names the offending position.
SELECT idem_mint('n', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_mint('n', ARRAY[]::text[]);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_mint('n', ARRAY['a', NULL]);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_mint('n', ARRAY['a', 'b', '']);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_mint('n', ARRAY[E' \t\n']);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_mint('n', ARRAY['a', U&'\3000']);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_mint('n', ARRAY['', NULL]);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_mint('n', ARRAY[['a', 'b'], ['c', 'd']]);
\echo :LAST_ERROR_SQLSTATE
