-- caller.portable.sql: who calls (the portable edition). The store's
-- functions read and write tables no application role may touch, so they
-- run as the extension's owner (SECURITY DEFINER), where current_user is
-- that owner. Who called is established before that, in the caller's own
-- context: the API's functions, which run as their caller, read the view
-- below, which computes as its caller a proof of who that is (keyed with
-- the lock secret, which only the owner reads, and bound to this backend and
-- transaction); the owner's functions take the caller and its proof and
-- check one against the other. A role can obtain a proof only for itself.

-- A proof that role caller calls, in this backend and transaction: SHA-256
-- of the secret and a message of fixed length (so that no longer message
-- extends one).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_proof(secret bytea, caller oid)
RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT pg_catalog.sha256(secret OPERATOR(pg_catalog.||) '\x70'::pg_catalog.bytea
                             OPERATOR(pg_catalog.||) pg_catalog.int8send(caller::pg_catalog.int8)
                             OPERATOR(pg_catalog.||) pg_catalog.int4send(pg_catalog.pg_backend_pid())
                             OPERATOR(pg_catalog.||) pg_catalog.timestamptz_send(pg_catalog.now()))
$$;

-- The caller (current_user where it is read: the API function's caller,
-- or the owner of a SECURITY DEFINER function that calls it, as the
-- library's GetUserId() sees it) and its proof. (LIMIT makes the view one
-- that no statement can write through: a DELETE through it would remove
-- the secret as the view's owner.)
CREATE OR REPLACE VIEW idempotency_internal.idem_caller WITH (security_barrier) AS
SELECT pg_catalog.to_regrole(current_user::pg_catalog.text)::pg_catalog.oid AS caller,
       idempotency_internal.idem_proof(s.secret, pg_catalog.to_regrole(current_user::pg_catalog.text)::pg_catalog.oid) AS proof
FROM idempotency_internal.idem_lock_secret s
LIMIT 1;
