-- keys.native.sql: keys and fingerprints, in the library (src/core, src/pg/canonical.cpp).

-- Volatility, for every function below:
--   IMMUTABLE      the result depends only on the arguments (and the database
--                  encoding, fixed for a database's lifetime), never on
--                  tables, settings or time, so the planner may fold calls on
--                  constants and the result may sit in an index expression.
--   PARALLEL SAFE  no shared state, no writes, nothing session-local.
--   STRICT         only where NULL in must mean NULL out. idem_mint and
--                  idem_parse are not STRICT: a NULL namespace (or NULL parts)
--                  is a caller's bug and raises an error, which STRICT would
--                  hide behind a NULL result.

CREATE OR REPLACE FUNCTION idem_mint(namespace text, parts text[])
RETURNS text
AS 'MODULE_PATHNAME', 'idem_mint'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION idem_mint(text, text[]) IS
'Deterministic idempotency key: lowercase hex SHA-256 over the length-prefixed UTF-8 parts';

CREATE OR REPLACE FUNCTION idem_parse(namespace text, raw text)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_parse'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION idem_parse(text, text) IS
'Validates a caller-supplied idempotency key and returns it trimmed; NULL in, NULL out';

CREATE OR REPLACE FUNCTION idem_canonical(payload jsonb)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_canonical'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idem_canonical(jsonb) IS
'Canonical JSON text of a value: object keys in code-point order, no whitespace';

CREATE OR REPLACE FUNCTION idem_request_hash(payload jsonb)
RETURNS bytea
AS 'MODULE_PATHNAME', 'idem_request_hash'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idem_request_hash(jsonb) IS
'Request fingerprint: SHA-256 of the UTF-8 canonical JSON of a value';

-- The same two with the members and elements that RFC 6901 JSON Pointers
-- name left out, as a namespace whose fingerprint ignores them makes it
-- (idem_namespace_fingerprint). NULL pointers leave nothing out.
CREATE OR REPLACE FUNCTION idem_canonical(payload jsonb, ignore text[])
RETURNS text
AS 'MODULE_PATHNAME', 'idem_canonical_ignoring'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION idem_canonical(jsonb, text[]) IS
'Canonical JSON text of a value without the parts JSON Pointers name';

CREATE OR REPLACE FUNCTION idem_request_hash(payload jsonb, ignore text[])
RETURNS bytea
AS 'MODULE_PATHNAME', 'idem_request_hash_ignoring'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION idem_request_hash(jsonb, text[]) IS
'Request fingerprint of a value without the parts JSON Pointers name';
