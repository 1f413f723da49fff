-- views.sql: the registry as operators read it.

-- The registry with its grants, one row per registered namespace.
CREATE OR REPLACE VIEW idem_namespaces AS
SELECT c.namespace, c.replay_window, c.in_progress_lease, c.store_request, c.hash_keys,
       c.max_payload_bytes,
       ARRAY(SELECT g.grantee FROM @extschema@.idem_namespace_grant g
             WHERE g.namespace = c.namespace ORDER BY g.grantee::text) AS grantees,
       c.configured_at, c.store, c.fingerprint_ignore
FROM @extschema@.idem_namespace_config c;
