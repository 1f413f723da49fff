-- http.native.sql: the header field's grammar, in the library (src/core/header.cpp).

-- The key in an Idempotency-Key header, as the IETF draft defines the field
-- (a Structured Field String, "8e03978e-...") or as a bare value
-- (8e03978e-...): the same key either way. reason says why a header holds
-- no key (NULL when there is no header). Answers, never raises, for a bad
-- header: it is the client's mistake.
CREATE OR REPLACE FUNCTION idem_header_key(namespace text, header text, OUT key text, OUT reason text)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_header_key'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION idem_header_key(text, text) IS
'The key in an Idempotency-Key header (quoted sf-string or bare), or why it holds none';
