-- extension, fresh cycle: begin a new random key and commit its result, in one transaction.
\set k random(1, 9000000000000000000)
BEGIN;
SELECT kind FROM idempotency.idem_begin(:ns, :k, '{"amount": 100, "currency": "EUR", "customer": "c-42", "items": [{"sku": "a-1", "qty": 2}, {"sku": "b-7", "qty": 1}]}');
SELECT idempotency.idem_commit(:ns, :k, '{"payment_id": 7, "status": "captured"}');
END;
