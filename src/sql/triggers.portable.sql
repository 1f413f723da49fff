-- triggers.portable.sql: the claim guard on the extension's table (made
-- once; its function is in store.portable.sql). A deferred constraint
-- trigger fires at COMMIT and PREPARE TRANSACTION for each row a store
-- function left in progress in the transaction, and refuses the COMMIT
-- while that claim is still open in a namespace without a lease. (The
-- library's cache-invalidation triggers and its event trigger are not made:
-- the portable edition caches nothing, and an event trigger needs a
-- superuser.)
CREATE CONSTRAINT TRIGGER idem_claim_guard
    AFTER INSERT OR UPDATE ON idempotency_record
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.status = 'in_progress')
    EXECUTE FUNCTION idempotency_internal.idem_claim_guard();
