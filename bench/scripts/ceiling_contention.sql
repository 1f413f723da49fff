-- ceiling, contention: the bare statements on 8 hot keys per round. A plain
-- INSERT ... ON CONFLICT DO NOTHING waits for a concurrent inserter instead
-- of answering in_flight; the inserter is the fresh one.
\set key :round * 1000 + random(1, 8)
BEGIN;
WITH ins AS (INSERT INTO ceiling.record (namespace, key_value, status, request_hash, request_payload, created_at, updated_at, expires_at) VALUES (:ns, :key, 'in_progress', '\x0000000000000000000000000000000000000000000000000000000000000000', '{"amount": 100, "currency": "EUR", "customer": "c-42", "items": [{"sku": "a-1", "qty": 2}, {"sku": "b-7", "qty": 1}]}', now(), now(), now() + interval '1 day') ON CONFLICT DO NOTHING RETURNING 1) SELECT count(*) AS fresh FROM ins \gset
\if :fresh
INSERT INTO bench.business VALUES ('ceiling', :round, :key);
UPDATE ceiling.record SET status = 'committed', result_payload = '{"payment_id": 7, "status": "captured"}', updated_at = now() WHERE namespace = :ns AND key_value = :key AND status = 'in_progress';
INSERT INTO bench.tally VALUES ('ceiling', :round, 'fresh');
\else
SELECT status FROM ceiling.record WHERE namespace = :ns AND key_value = :key;
INSERT INTO bench.tally VALUES ('ceiling', :round, 'prior_result');
\endif
END;
