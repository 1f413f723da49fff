-- registry.native.sql: what the library does for the registry: the cache
-- invalidation and namespace-lock triggers' functions, the namespace lock
-- itself (src/pg/policy.cpp).

-- Every backend caches what it read from the registry's tables; any change
-- to them, through the functions or by hand, tells every backend to forget
-- it (at the changing transaction's commit, or its rollback for its own
-- cache). The statement triggers are made once (triggers.native.sql).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_namespace_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idem_namespace_changed'
LANGUAGE C;

-- Takes the namespace's lock in ExclusiveLock for an update of its row
-- that leaves configured_at as it was: idem_lock_namespace makes one under
-- Citus, where this runs on every node's placement of the registry, so
-- that a change that must see every record waits for the namespace's
-- begins on every node.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_namespace_config_locked()
RETURNS trigger
AS 'MODULE_PATHNAME', 'idem_namespace_config_locked_1_0'
LANGUAGE C;

-- For the registry functions that must see every record of one namespace
-- (changing hash_keys or store_request, dropping it), and for an operator
-- moving a namespace's records: the namespace's lock, which waits for its
-- writers and stalls no other namespace.
CREATE OR REPLACE FUNCTION idem_lock_namespace(namespace text)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_lock_namespace_1_0'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_lock_namespace(text) IS
'Waits for the transactions that began keys in a namespace and keeps new ones out until this transaction ends';
