-- parse: idem_parse(namespace, raw) trims and validates a caller-supplied key.
-- An absent header is not an error.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
RESET client_min_messages;
SET search_path = public, idempotency;
SELECT idem_parse('payments', NULL) IS NULL AS absent_is_null;
SELECT idem_parse('payments', '  order-1001  ') AS trimmed,
       idem_parse('payments', E'\t\n order 1001 \r') AS inner_space_kept,
       idem_parse('payments', U&'\00A0\3000key\2003') AS unicode_space_trimmed;
-- 255 characters are allowed; the limit counts characters, not bytes.
SELECT length(idem_parse('payments', repeat('k', 255))) AS ascii_255,
       length(idem_parse('payments', repeat('é', 255))) AS two_byte_255,
       length(idem_parse('payments', repeat('😀', 255))) AS four_byte_255,
       length(idem_parse('payments', ' ' || repeat('k', 255) || ' ')) AS padded_255;
-- C1 controls other than U+007F are not control characters under this rule.
SELECT idem_parse('payments', U&'a\009Bb') = U&'a\009Bb' AS c1_kept;
-- Errors: the detail names the rule that failed.
SELECT idem_parse('payments', '');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_parse('payments', E'  \t ');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_parse('payments', repeat('k', 256));
\echo :LAST_ERROR_SQLSTATE
SELECT idem_parse('payments', repeat('é', 256));
\echo :LAST_ERROR_SQLSTATE
SELECT idem_parse('payments', E'order\n1001');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_parse('payments', E'order\x01');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_parse('payments', E'\x7f');
\echo :LAST_ERROR_SQLSTATE
SELECT idem_parse('payments', E'ok \x1f then');
\echo :LAST_ERROR_SQLSTATE
