-- extension, replay: begin an already committed key with its request (prior_result).
\set k random(1, :nkeys)
SELECT kind, result FROM idempotency.idem_begin(:ns, :k, '{"amount": 100, "currency": "EUR", "customer": "c-42", "items": [{"sku": "a-1", "qty": 2}, {"sku": "b-7", "qty": 1}]}');
