-- The consumer's migration (test-only): the service's store, its namespace
-- bound to it and granted to the service's role, and purging allowed.
-- A DBA installed the extension once (CREATE EXTENSION idempotency).
SELECT idempotency.idem_create_store('${store}');
SELECT idempotency.idem_bind_store('${namespace}', '${store}');
SELECT idempotency.idem_grant('${namespace}', '${app_role}');
GRANT EXECUTE ON FUNCTION idempotency.idem_purge(integer, integer) TO "${app_role}";
