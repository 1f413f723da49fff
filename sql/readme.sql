-- readme: the example in README.md, verbatim (test/bin/check-release checks
-- that it is), run from a database without the extension.
DROP EXTENSION idempotency;
SET search_path = public;
CREATE EXTENSION idempotency;
-- A key for an outbound call, stable across retries, sessions and restarts:
SELECT idempotency.idem_mint('payments', ARRAY['tenant-42', 'invoice-1001']);
-- A caller's Idempotency-Key header, trimmed and validated (NULL when absent):
SELECT idempotency.idem_parse('payments', '  3f2a9c1e-7b4d-4e0a  ');
-- The request fingerprint ignores key order and whitespace:
SELECT idempotency.idem_request_hash('{"amount": 100, "currency": "EUR"}')
     = idempotency.idem_request_hash('{"currency":"EUR","amount":100}');
