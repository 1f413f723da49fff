-- setup.sql: the tables and the type docs/clients.md's examples use, beside
-- the payments table and the recipes of docs/usage.md (test/clients/run
-- creates each driver's database with the extension, those recipes, then this).

-- snippet: setup
-- Payments (usage.md's table) and the outages the handler keeps on record.
CREATE TABLE provider_outages (
    idempotency_key text NOT NULL,
    at              timestamptz NOT NULL DEFAULT now()
);

-- Refunds, recorded as a composite result (usage.md's typed recipe).
CREATE TYPE refund_receipt AS (refund_id integer, amount numeric);
CREATE TABLE refunds (id serial PRIMARY KEY, amount numeric NOT NULL);
-- end snippet
