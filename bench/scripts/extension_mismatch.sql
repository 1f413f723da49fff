-- extension, mismatch: begin an already committed key with another request.
\set k random(1, :nkeys)
SELECT kind, recorded_request FROM idempotency.idem_begin(:ns, :k, '{"amount": 101, "currency": "EUR", "customer": "c-42", "items": [{"sku": "a-1", "qty": 2}, {"sku": "b-7", "qty": 1}]}');
