-- privileges.portable.sql: the grants the portable edition adds to
-- privileges.sql's. Every role reads its own proof (caller.portable.sql):
-- the view shows no one else's, and nothing of the secret.
GRANT SELECT ON idempotency_internal.idem_caller TO PUBLIC;
REVOKE ALL ON FUNCTION idempotency_internal.idem_claim_guard() FROM PUBLIC;
