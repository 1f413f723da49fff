-- extension, a batch of replays: 500 committed keys (from a random one on) in one idem_begin_batch, answering the columns the single call's script does.
\set k random(1, :nkeys)
SELECT kind, result FROM idempotency.idem_begin_batch(:ns, ARRAY(SELECT ((:k + g) % :nkeys + 1)::text FROM generate_series(0, 499) g), array_fill('{"amount": 100, "currency": "EUR", "customer": "c-42", "items": [{"sku": "a-1", "qty": 2}, {"sku": "b-7", "qty": 1}]}'::jsonb, ARRAY[500]));
