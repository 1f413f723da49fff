-- ceiling, fresh cycle: the bare statements of a begin and a commit, no
-- validation, no hashing.
\set k random(1, 9000000000000000000)
BEGIN;
INSERT INTO ceiling.record (namespace, key_value, status, request_hash, request_payload, created_at, updated_at, expires_at) VALUES (:ns, :k, 'in_progress', '\x0000000000000000000000000000000000000000000000000000000000000000', '{"amount": 100, "currency": "EUR", "customer": "c-42", "items": [{"sku": "a-1", "qty": 2}, {"sku": "b-7", "qty": 1}]}', now(), now(), now() + interval '1 day') ON CONFLICT DO NOTHING;
UPDATE ceiling.record SET status = 'committed', result_payload = '{"payment_id": 7, "status": "captured"}', updated_at = now() WHERE namespace = :ns AND key_value = :k AND status = 'in_progress';
END;
