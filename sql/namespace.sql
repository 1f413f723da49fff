-- namespace: 1 to 64 characters of a-z, 0-9, '-' and '_'; anything else is
-- ERROR 22023 from every function that takes a namespace.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
RESET client_min_messages;
SET search_path = public, idempotency;
SELECT idem_parse('a', 'k') AS one_char,
       idem_parse('payments-v2_eu', 'k') AS mixed,
       idem_parse(repeat('n', 64), 'k') AS sixty_four;
-- NULL namespace: an error even though the key is absent.
SELECT idem_parse(NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_parse('', 'k');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_parse(repeat('n', 65), 'k');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_parse('Payments', 'k');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_parse('my payments', 'k');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_parse('payments.eu', 'k');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_parse('paiement-é', 'k');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_parse(E'pay\tments', 'k');
\echo :LAST_ERROR_SQLSTATE
-- The same rule guards idem_mint.
SELECT idem_mint(NULL, ARRAY['a']);
\echo :LAST_ERROR_SQLSTATE
SELECT idem_mint('UPPER', ARRAY['a']);
\echo :LAST_ERROR_SQLSTATE
