-- usage: every recipe of docs/usage.md, verbatim and in order (test/bin/check-release
-- checks that they are), so the recipes cannot drift from the extension.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
RESET client_min_messages;
SET search_path = public, idempotency;

CREATE TABLE payments (
    id       bigserial PRIMARY KEY,
    amount   numeric NOT NULL,
    currency text NOT NULL
);

-- POST /payments, in one statement: a driver in autocommit mode sends
-- SELECT status, headers, body FROM create_payment($1, $2) alone (pgJDBC:
-- create_payment(?, ?::jsonb)); inside an explicit transaction it sends
-- BEGIN, that SELECT and COMMIT as three statements, never as one string.
CREATE FUNCTION create_payment(idempotency_key text, request jsonb,
                               OUT status integer, OUT headers jsonb, OUT body jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    docs constant text := 'https://example.com/docs/idempotency';
    key text;
    o idempotency.idem_outcome;
    refusal jsonb;
    payment_id bigint;
BEGIN
    SELECT h.key, h.status, h.headers, h.body INTO key, status, headers, body
    FROM idempotency.idem_http_key('payments', idempotency_key, docs) h;
    IF key IS NULL THEN
        RETURN;                                  -- 400: no key, or an invalid one
    END IF;
    -- The method and the target are part of the request: the same key and
    -- body sent to another endpoint are a mismatch, not this one's replay.
    SELECT * INTO o FROM idempotency.idem_begin('payments', key,
        jsonb_build_object('method', 'POST', 'target', '/payments', 'body', request));
    IF o.kind <> 'fresh' THEN
        SELECT r.* INTO status, headers, body FROM idempotency.idem_http_response(o, 1, docs) r;
        RETURN;                                  -- a replay, 409 or 422
    END IF;
    IF (request ->> 'amount')::numeric <= 0 THEN
        -- A business refusal is permanent: record it so a retry gets it too.
        refusal := '{"class_tag": "InvalidAmount", "message": "amount must be positive"}';
        PERFORM idempotency.idem_fail_permanent('payments', key, refusal);
        status := 422;
        headers := '{"Content-Type": "application/problem+json"}';
        body := idempotency.idem_http_problem(422, refusal ->> 'class_tag', refusal ->> 'message');
        RETURN;
    END IF;
    INSERT INTO payments (amount, currency)
    VALUES ((request ->> 'amount')::numeric, request ->> 'currency')
    RETURNING id INTO payment_id;
    status := 201;
    headers := jsonb_build_object('Location', '/payments/' || payment_id);
    body := jsonb_build_object('payment_id', payment_id);
    PERFORM idempotency.idem_commit('payments', key,
        jsonb_build_object('status', status, 'headers', headers, 'body', body), o.fence);
END;
$$;

SELECT * FROM create_payment('7d1c-44a0', '{"amount": 100, "currency": "EUR"}');
SELECT * FROM create_payment('"7d1c-44a0"', '{"currency": "EUR", "amount": 100}');
SELECT * FROM create_payment('7d1c-44a0', '{"amount": 999, "currency": "EUR"}');
SELECT kind FROM idempotency.idem_begin('payments', '7d1c-44a0',
    jsonb_build_object('method', 'POST', 'target', '/refunds', 'body', '{"amount": 100, "currency": "EUR"}'::jsonb));
SELECT * FROM create_payment(NULL, '{"amount": 100, "currency": "EUR"}');
SELECT * FROM create_payment('"7d1c-44a0', '{"amount": 100, "currency": "EUR"}');
SELECT * FROM create_payment('b9e0-0001', '{"amount": -5, "currency": "EUR"}');
SELECT * FROM create_payment('b9e0-0001', '{"amount": -5, "currency": "EUR"}');
SELECT count(*) AS payments FROM payments;

CREATE TABLE orders_paid (order_id text PRIMARY KEY, paid_at timestamptz NOT NULL);

CREATE FUNCTION on_payment_succeeded(event_id text, event jsonb) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    o idempotency.idem_outcome;
BEGIN
    SELECT * INTO o FROM idempotency.idem_begin('psp-webhooks', event_id, event, interval '7 days');
    IF o.kind = 'fresh' THEN
        INSERT INTO orders_paid VALUES (event ->> 'order_id', now());
        PERFORM idempotency.idem_commit('psp-webhooks', event_id, '{"status": 200}');
        RETURN 200;
    ELSIF o.kind = 'in_flight' THEN
        RETURN 409;        -- the provider retries later
    ELSE
        RETURN 200;        -- already handled (or a conflicting duplicate): acknowledge
    END IF;
END;
$$;

SELECT on_payment_succeeded('evt_1NxQ', '{"type": "payment.succeeded", "order_id": "A-17"}');
SELECT on_payment_succeeded('evt_1NxQ', '{"type": "payment.succeeded", "order_id": "A-17"}');
SELECT count(*) AS rows_for_a17 FROM orders_paid WHERE order_id = 'A-17';

SELECT fingerprint_ignore
FROM idempotency.idem_namespace_fingerprint('crm-webhooks', ARRAY['/delivery/attempt', '/delivery/sent_at']);

BEGIN;
SELECT kind FROM idempotency.idem_begin('crm-webhooks', 'evt_9',
    '{"type": "contact.created", "contact": 42, "delivery": {"attempt": 1, "sent_at": "10:00:00"}}');
SELECT idempotency.idem_commit('crm-webhooks', 'evt_9', '{"status": 200}');
COMMIT;
SELECT kind, result FROM idempotency.idem_begin('crm-webhooks', 'evt_9',
    '{"type": "contact.created", "contact": 42, "delivery": {"attempt": 2, "sent_at": "10:05:00"}}');

CREATE TABLE stock (sku text PRIMARY KEY, quantity integer NOT NULL);
INSERT INTO stock VALUES ('sku-1', 10);

CREATE FUNCTION consume_reservation(message_id text, message jsonb) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    o idempotency.idem_outcome;
BEGIN
    SELECT * INTO o FROM idempotency.idem_begin('inventory-inbox', message_id, message);
    CASE o.kind
    WHEN 'fresh' THEN
        UPDATE stock SET quantity = quantity - (message ->> 'quantity')::integer
        WHERE sku = message ->> 'sku';
        PERFORM idempotency.idem_commit('inventory-inbox', message_id, '{"applied": true}');
        RETURN 'ack';
    WHEN 'prior_result', 'prior_error' THEN
        RETURN 'ack';              -- a redelivery: already applied
    WHEN 'in_flight' THEN
        RETURN 'retry';            -- another consumer has it right now
    ELSE
        RETURN 'dead-letter';      -- mismatch
    END CASE;
END;
$$;

SELECT consume_reservation('msg-001', '{"sku": "sku-1", "quantity": 3}');
SELECT consume_reservation('msg-001', '{"sku": "sku-1", "quantity": 3}');
SELECT consume_reservation('msg-001', '{"sku": "sku-1", "quantity": 4}');
SELECT quantity FROM stock WHERE sku = 'sku-1';

CREATE TABLE psp_outbox (
    idempotency_key text PRIMARY KEY,
    request         jsonb NOT NULL,
    sent_at         timestamptz
);

INSERT INTO psp_outbox (idempotency_key, request)
VALUES (idempotency.idem_mint('psp-charges', ARRAY['tenant-42', 'invoice-1001', 'capture']),
        '{"amount": 100, "currency": "EUR"}')
ON CONFLICT (idempotency_key) DO NOTHING;

-- The same operation retried (another process, after a restart): the same key, no second call.
INSERT INTO psp_outbox (idempotency_key, request)
VALUES (idempotency.idem_mint('psp-charges', ARRAY['tenant-42', 'invoice-1001', 'capture']),
        '{"amount": 100, "currency": "EUR"}')
ON CONFLICT (idempotency_key) DO NOTHING;

SELECT idempotency_key, request FROM psp_outbox;

CREATE TABLE accounts (id integer PRIMARY KEY, balance numeric NOT NULL);
INSERT INTO accounts VALUES (1, 100), (2, 0);

CREATE PROCEDURE transfer(key text, from_id integer, to_id integer, amount numeric)
LANGUAGE plpgsql AS $$
DECLARE
    o idempotency.idem_outcome;
BEGIN
    SELECT * INTO o FROM idempotency.idem_begin('transfers', key,
        jsonb_build_object('from', from_id, 'to', to_id, 'amount', amount));
    IF o.kind = 'fresh' THEN
        UPDATE accounts SET balance = balance - amount WHERE id = from_id;
        UPDATE accounts SET balance = balance + amount WHERE id = to_id;
        PERFORM idempotency.idem_commit('transfers', key, jsonb_build_object('moved', amount));
    ELSIF o.kind <> 'prior_result' THEN
        RAISE EXCEPTION 'transfer % not applied: %', key, o.kind;
    END IF;
    COMMIT;
END;
$$;

CALL transfer('tr-1', 1, 2, 30);
CALL transfer('tr-1', 1, 2, 30);
SELECT id, balance FROM accounts ORDER BY id;

CREATE TYPE refund_receipt AS (refund_id integer, amount numeric);

BEGIN;
SELECT kind FROM idempotency.idem_begin_typed('refunds', 'rf-1', 25);
SELECT idempotency.idem_commit_typed('refunds', 'rf-1', ROW(501, 25)::refund_receipt);
COMMIT;

SELECT o.kind, r.refund_id, r.amount
FROM idempotency.idem_begin_typed('refunds', 'rf-1', 25) o,
     idempotency.idem_result(o, NULL::refund_receipt) r;

CREATE ROLE signup_app LOGIN;

-- Clients send keys like 'signup:ann@example.com': store only their hash, and
-- not the request either. Records replay for a week.
SELECT namespace, replay_window, store_request, hash_keys
FROM idempotency.idem_namespace_configure('signups', replay_window => '7 days',
                                          store_request => false, hash_keys => true);
SELECT idempotency.idem_grant('signups', 'signup_app');

-- A typo in a namespace is an error, not a new keyspace (for every role).
SELECT require_registered FROM idempotency.idem_namespace_defaults(require_registered => true);

SELECT namespace, grantees FROM idempotency.idem_namespaces WHERE namespace = 'signups';

SET ROLE signup_app;
BEGIN;
SELECT kind FROM idempotency.idem_begin('signups', 'signup:ann@example.com', '{"plan": "pro"}');
SELECT idempotency.idem_commit('signups', 'signup:ann@example.com', '{"user_id": 7}');
COMMIT;
SELECT kind FROM idempotency.idem_begin('payments', 'k-1', '{}');   -- not its namespace: 42501
RESET ROLE;
-- (Not in the guide: back to the built-in default for the rest of this file.)
SELECT require_registered FROM idempotency.idem_namespace_defaults(require_registered => false);

-- (A 1-second lease so that this example runs quickly; minutes in real life.)
SELECT in_progress_lease FROM idempotency.idem_namespace_configure('exports', in_progress_lease => '1 second');

-- The workers' own bookkeeping: which attempt holds which fence.
CREATE TABLE export_attempts (job text, attempt integer, fence bigint);

-- Attempt 1: claim the key and commit the claim on its own; keep its fence.
INSERT INTO export_attempts
SELECT 'exp-7', attempt, fence FROM idempotency.idem_begin('exports', 'exp-7', '{"report": "q3"}') WHERE kind = 'fresh';
-- The downstream key is a function of the inbound one: the same for every attempt.
SELECT idempotency.idem_mint('exports', ARRAY['exp-7', 'render']) AS downstream_key;

-- ... the worker calls the renderer with that key, and dies. Past the lease,
-- a retry of the same request takes the operation over:
SELECT pg_sleep(1.1);
INSERT INTO export_attempts
SELECT 'exp-7', attempt, fence FROM idempotency.idem_begin('exports', 'exp-7', '{"report": "q3"}') WHERE kind = 'fresh';
SELECT job, attempt FROM export_attempts ORDER BY attempt;
-- Meanwhile a retry that comes too soon is told to wait, with the attempt's age:
SELECT kind, age < interval '1 second' AS just_started FROM idempotency.idem_begin('exports', 'exp-7', '{"report": "q3"}');

-- Attempt 1 wakes up late: its commit, fenced with its fence, is refused.
SELECT idempotency.idem_commit('exports', 'exp-7', '{"url": "/exports/7-old.pdf"}', fence)
FROM export_attempts WHERE attempt = 1;
-- Attempt 2 calls the renderer with the same downstream key and records the outcome.
SELECT idempotency.idem_commit('exports', 'exp-7', '{"url": "/exports/7.pdf"}', fence)
FROM export_attempts WHERE attempt = 2;
SELECT kind, result FROM idempotency.idem_begin('exports', 'exp-7', '{"report": "q3"}');

-- (A 1-second lease so that this example runs quickly; a minute or more in real life.)
SELECT in_progress_lease FROM idempotency.idem_namespace_configure('rides', in_progress_lease => '1 second');

-- The service's own tables: the rides, and (standing in for the payment
-- provider, which is called over the network) the charges it made, one per
-- idempotency key as a provider deduplicates them.
CREATE TABLE rides (ride_key text PRIMARY KEY, charge_id text NOT NULL);
CREATE TABLE provider_charges (idempotency_key text PRIMARY KEY, charge_id text NOT NULL);
CREATE TABLE ride_attempts (attempt integer, fence bigint, takeover boolean, recovery_point text, recovery_state jsonb);

-- Phase 1, a transaction: claim the key and commit the claim.
INSERT INTO ride_attempts
SELECT attempt, fence, takeover, recovery_point, recovery_state
FROM idempotency.idem_begin('rides', 'ride-42', '{"from": "A", "to": "B"}') WHERE kind = 'fresh';

-- Phase 2, no transaction of ours: charge the card at the provider with the
-- key as the provider's idempotency key.
INSERT INTO provider_charges VALUES ('ride-42', 'ch_001') ON CONFLICT DO NOTHING;

-- Phase 3, a transaction: record the charge with the claim's fence.
SELECT idempotency.idem_save_point('rides', 'ride-42', 'charged', '{"charge_id": "ch_001"}', fence) > now() AS recorded
FROM ride_attempts WHERE attempt = 1;

-- ... and the process dies before phase 4. A retry that comes while its
-- lease runs is in flight, and told when the lease ends:
SELECT status, headers->>'Retry-After' AS retry_after
FROM idempotency.idem_http_response(idempotency.idem_begin('rides', 'ride-42', '{"from": "A", "to": "B"}'));
-- Past the lease the retry takes the claim over, and is told so, with the
-- last recovery point and its state: the card was charged as ch_001.
SELECT pg_sleep(1.1);
INSERT INTO ride_attempts
SELECT attempt, fence, takeover, recovery_point, recovery_state
FROM idempotency.idem_begin('rides', 'ride-42', '{"from": "A", "to": "B"}') WHERE kind = 'fresh';
SELECT attempt, takeover, recovery_point, recovery_state FROM ride_attempts ORDER BY attempt;

-- The new attempt resumes after 'charged': no second call to the provider.
-- Phase 4, a transaction: the ride and the recorded result together, fenced.
BEGIN;
INSERT INTO rides SELECT 'ride-42', recovery_state->>'charge_id' FROM ride_attempts WHERE attempt = 2;
SELECT idempotency.idem_commit('rides', 'ride-42', '{"ride": "ride-42", "charge_id": "ch_001"}', fence)
FROM ride_attempts WHERE attempt = 2;
COMMIT;
SELECT (SELECT count(*) FROM provider_charges) AS charges, (SELECT count(*) FROM rides) AS rides;
SELECT kind, result FROM idempotency.idem_begin('rides', 'ride-42', '{"from": "A", "to": "B"}');

-- (Not part of the recipe: clean up what it created.)
DELETE FROM idempotency.idempotency_record WHERE namespace IN ('signups', 'exports', 'rides');
SELECT idempotency.idem_namespace_drop(n) FROM unnest(ARRAY['signups', 'exports', 'rides']) n;
DROP OWNED BY signup_app;
DROP ROLE signup_app;
DROP TABLE export_attempts, rides, provider_charges, ride_attempts;

-- What the pg_cron recipe schedules; scheduling itself runs in test/t/003_pg_cron.pl.
CALL idempotency.idem_purge_batches(10000);
