-- The replay request's fingerprint alone: idem_request_hash of the request
-- the replay scripts send, as a jsonb already parsed, as idem_begin gets it.
-- The subquery (OFFSET 0) keeps the planner from folding the immutable call
-- into a constant once, which would leave only the round trip to count.
SELECT idempotency.idem_request_hash(request) FROM (SELECT '{"amount": 100, "currency": "EUR", "customer": "c-42", "items": [{"sku": "a-1", "qty": 2}, {"sku": "b-7", "qty": 1}]}'::jsonb AS request OFFSET 0) r;
