-- scope: keys unique per caller scope (a tenant, a user), as the IETF draft
-- and Stripe-style stores have them, on one server: the key is minted from
-- the scope and the client's key (docs/scale-out.md#scope). Two tenants
-- that send the same Idempotency-Key get two records, and each retry finds
-- its own.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
RESET client_min_messages;
SET search_path = public, idempotency;
CREATE FUNCTION pg_temp.scoped(tenant text, header text) RETURNS text LANGUAGE sql AS
  $$SELECT idem_mint('scoped', ARRAY[tenant, (SELECT key FROM idem_http_key('scoped', header))])$$;
BEGIN;
SELECT kind FROM idem_begin('scoped', pg_temp.scoped('tenant-a', '"order-1"'), '{"amount": 10}');
SELECT idem_commit('scoped', pg_temp.scoped('tenant-a', '"order-1"'), '{"payment": "a-1"}');
SELECT kind FROM idem_begin('scoped', pg_temp.scoped('tenant-b', '"order-1"'), '{"amount": 99}');
SELECT idem_commit('scoped', pg_temp.scoped('tenant-b', '"order-1"'), '{"payment": "b-1"}');
COMMIT;
SELECT o.kind, o.result FROM (VALUES ('tenant-a', 10), ('tenant-b', 99)) t(tenant, amount),
       idem_begin('scoped', pg_temp.scoped(t.tenant, 'order-1'), jsonb_build_object('amount', t.amount)) o
ORDER BY t.tenant;
-- The same tenant with another request is a mismatch, not another tenant's replay.
SELECT kind FROM idem_begin('scoped', pg_temp.scoped('tenant-a', 'order-1'), '{"amount": 99}');
-- Tenant ids with the separator a naive concatenation would use stay apart.
SELECT idem_mint('n', ARRAY['a:b', 'c']) <> idem_mint('n', ARRAY['a', 'b:c']) AS no_collision;
SELECT count(*) AS records FROM idempotency_record WHERE namespace = 'scoped';
DELETE FROM idempotency_record WHERE namespace = 'scoped';
