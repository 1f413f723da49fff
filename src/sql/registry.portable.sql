-- registry.portable.sql: the namespace lock and the registry's trigger
-- functions, in PL/pgSQL (registry.native.sql has the library's).

-- The registry's statement trigger in the library tells every backend to
-- forget what it cached; the portable edition caches nothing, so there is
-- nothing to forget (its triggers are not made: triggers.portable.sql).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_namespace_changed()
RETURNS trigger
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
BEGIN
    RETURN NULL;
END;
$$;

-- The registry's row trigger in the library takes the namespace's lock on
-- every Citus node; the portable edition runs on one server, where
-- idem_lock_namespace takes it, so the trigger is not made either.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_namespace_config_locked()
RETURNS trigger
LANGUAGE plpgsql
AS $$
#variable_conflict use_variable
BEGIN
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END;
$$;

-- For the registry functions that must see every record of one namespace
-- (changing hash_keys or store_request, dropping it), and for an operator
-- moving a namespace's records: the namespace's lock, which waits for its
-- writers and stalls no other namespace. READ COMMITTED only: the
-- statements that follow must see every record.
CREATE OR REPLACE FUNCTION idem_lock_namespace(namespace text)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
BEGIN
    PERFORM idempotency_internal.idem_check_namespace(namespace);
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'changing hash_keys, store_request, the lease or the fingerprint of an idempotency namespace, or dropping it, needs READ COMMITTED'
            USING ERRCODE = 'invalid_transaction_state',
                  DETAIL = format('This transaction is %s; its snapshot could miss records committed since it began.',
                                  upper(current_setting('transaction_isolation')));
    END IF;
    PERFORM idempotency_internal.idem_lock((SELECT s.secret FROM idempotency_internal.idem_lock_secret s), namespace, true);
END;
$$;

COMMENT ON FUNCTION idem_lock_namespace(text) IS
'Waits for the transactions that began keys in a namespace and keeps new ones out until this transaction ends';
