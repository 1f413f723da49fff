-- schema.sql: the schema of the extension's plumbing (trigger functions,
-- the statistics' and the stores' helpers, the lock secret): not an API,
-- changed in any release (docs/compatibility.md). USAGE for everyone, so
-- that the API's functions reach it for any caller; each object in it
-- carries its own privileges.
CREATE SCHEMA idempotency_internal;
COMMENT ON SCHEMA idempotency_internal IS
'The idempotency extension''s plumbing: not an API (docs/compatibility.md)';
