-- extension, a batch of mismatches: 500 committed keys (from a random one on) with another request, answering the columns the single call's script does.
\set k random(1, :nkeys)
SELECT kind, recorded_request FROM idempotency.idem_begin_batch(:ns, ARRAY(SELECT ((:k + g) % :nkeys + 1)::text FROM generate_series(0, 499) g), array_fill('{"amount": 101, "currency": "EUR", "customer": "c-42", "items": [{"sku": "a-1", "qty": 2}, {"sku": "b-7", "qty": 1}]}'::jsonb, ARRAY[500]));
