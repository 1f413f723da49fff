-- readme: the example in README.md, verbatim (test/bin/check-release checks
-- that it is), run from a database without the extension.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idempotency;
RESET client_min_messages;
SET search_path = public;
CREATE EXTENSION idempotency;
BEGIN;
-- A caller's Idempotency-Key header, validated, with the request it came with:
SELECT kind FROM idempotency.idem_begin('payments',
    idempotency.idem_parse('payments', '  3f2a9c1e-7b4d  '), '{"amount": 100, "currency": "EUR"}');
-- kind = fresh: do the work in this same transaction, then record its result:
SELECT idempotency.idem_commit('payments', '3f2a9c1e-7b4d', '{"payment_id": 7}');
COMMIT;
-- The retry replays the result instead of paying twice (key order is irrelevant):
SELECT kind, result FROM idempotency.idem_begin('payments', '3f2a9c1e-7b4d', '{"currency":"EUR","amount":100}');
-- A key for an outbound call, stable across retries, sessions and restarts:
SELECT idempotency.idem_mint('payments', ARRAY['tenant-42', 'invoice-1001']);
