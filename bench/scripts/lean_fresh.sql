-- lean, fresh cycle: the cheapest bare statements for a caller who reads
-- first (bench.cycles' lean branch over the wire): the SELECT finds nothing,
-- a plain INSERT (a concurrent duplicate would raise 23505 for the caller to
-- catch) and the UPDATE, on the ceiling's table.
\set k random(1, 9000000000000000000)
BEGIN;
SELECT status, request_hash, request_payload, result_payload, error_payload FROM ceiling.record WHERE namespace = :ns AND key_value = :k;
INSERT INTO ceiling.record (namespace, key_value, status, request_hash, request_payload, created_at, updated_at, expires_at) VALUES (:ns, :k, 'in_progress', '\x0000000000000000000000000000000000000000000000000000000000000000', '{"amount": 100, "currency": "EUR", "customer": "c-42", "items": [{"sku": "a-1", "qty": 2}, {"sku": "b-7", "qty": 1}]}', now(), now(), now() + interval '1 day');
UPDATE ceiling.record SET status = 'committed', result_payload = '{"payment_id": 7, "status": "captured"}', updated_at = now() WHERE namespace = :ns AND key_value = :k AND status = 'in_progress';
END;
