-- extension, a batch of fresh keys: 500 new keys begun in one idem_begin_batch, each committed, in one transaction.
\set k random(1, 9000000000000000000)
BEGIN;
SELECT count(*) FILTER (WHERE kind = 'fresh') FROM idempotency.idem_begin_batch(:ns, ARRAY(SELECT (:k::numeric * 1000 + g)::text FROM generate_series(1, 500) g), array_fill('{"amount": 100, "currency": "EUR", "customer": "c-42", "items": [{"sku": "a-1", "qty": 2}, {"sku": "b-7", "qty": 1}]}'::jsonb, ARRAY[500]));
SELECT count(idempotency.idem_commit(:ns, (:k::numeric * 1000 + g)::text, '{"payment_id": 7, "status": "captured"}')) FROM generate_series(1, 500) g;
END;
