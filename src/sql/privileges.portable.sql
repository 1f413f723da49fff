-- privileges.portable.sql: the grants the portable edition adds to
-- privileges.sql's. Its own tables are no one's but the owner's, whatever
-- default privileges the installing role set (privileges.sql takes back
-- what they gave named roles; PUBLIC's is taken here, as privileges.sql
-- takes it on the shared tables). Every role reads its own proof
-- (caller.portable.sql): the view shows no one else's, and nothing of the
-- secret.
REVOKE ALL ON idempotency_internal.idem_open_claims, idempotency_internal.idem_caller FROM PUBLIC;
GRANT SELECT ON idempotency_internal.idem_caller TO PUBLIC;
REVOKE ALL ON FUNCTION idempotency_internal.idem_claim_guard() FROM PUBLIC;
