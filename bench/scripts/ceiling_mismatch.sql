-- ceiling, mismatch: the bare statements of a begin on an existing key (the
-- insert finds it, the select reads it).
\set k random(1, :nkeys)
INSERT INTO ceiling.record (namespace, key_value, status, request_hash, request_payload, created_at, updated_at, expires_at) VALUES (:ns, :k, 'in_progress', '\x0000000000000000000000000000000000000000000000000000000000000000', '{"amount": 100, "currency": "EUR", "customer": "c-42", "items": [{"sku": "a-1", "qty": 2}, {"sku": "b-7", "qty": 1}]}', now(), now(), now() + interval '1 day') ON CONFLICT DO NOTHING;
SELECT status, request_hash, request_payload, result_payload, error_payload FROM ceiling.record WHERE namespace = :ns AND key_value = :k;
