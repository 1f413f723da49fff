-- triggers.portable.sql: the claim guard (made once; its function is in
-- store.portable.sql): a trigger on the extension's table, and one on the
-- claims a begin makes in stores the service owns, which no DDL of the
-- extension's ever touches. A deferred constraint
-- trigger fires at COMMIT and PREPARE TRANSACTION for each claim a begin
-- wrote in the transaction (a row a begin writes in progress, marked by
-- idempotency_internal.claiming for the statement: a row written by hand
-- is no claim), and refuses the COMMIT while that claim is still open in a
-- namespace without a lease. (The
-- library's cache-invalidation triggers and its event trigger are not made:
-- the portable edition caches nothing, and an event trigger needs a
-- superuser.)
CREATE CONSTRAINT TRIGGER idem_claim_guard
    AFTER INSERT OR UPDATE ON idempotency_record
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.status = 'in_progress'
                       AND pg_catalog.current_setting('idempotency_internal.claiming', true) = 'on')
    EXECUTE FUNCTION idempotency_internal.idem_claim_guard();


-- The open claims of this transaction in stores the service owns, in a
-- namespace without a lease: a begin inserts one with its claim, and the
-- claim's end (a commit, a failure) deletes it, in the same transaction;
-- one left there at COMMIT is refused. Rows never outlive their
-- transaction, so the table is unlogged.
CREATE UNLOGGED TABLE idempotency_internal.idem_open_claims (
    namespace text COLLATE "C" NOT NULL,
    key_value text COLLATE "C" NOT NULL,
    store     regclass NOT NULL,
    fence     bigint NOT NULL,
    CONSTRAINT idem_open_claims_pkey PRIMARY KEY (namespace, key_value)
);
CREATE CONSTRAINT TRIGGER idem_claim_guard
    AFTER INSERT ON idempotency_internal.idem_open_claims
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION idempotency_internal.idem_claim_guard();
