-- triggers.portable.sql: the claim guard's trigger (made once; its function
-- and the marks it fires for are in store.portable.sql). A deferred
-- constraint trigger fires at COMMIT and PREPARE TRANSACTION for each
-- claim a begin marked in the transaction (a claim in a namespace without
-- a lease), and refuses the COMMIT while that claim is still open. (The
-- library's cache-invalidation triggers and its event trigger are not made:
-- the portable edition caches nothing, and an event trigger needs a
-- superuser.)
CREATE CONSTRAINT TRIGGER idem_claim_guard
    AFTER INSERT ON idempotency_internal.idem_open_claims
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION idempotency_internal.idem_claim_guard();
