-- readme: the SQL of README.md and of docs/quickstart.md, every block
-- verbatim and in order (test/bin/check-release checks that it is), run
-- from a database without the extension. Set-up between the blocks is
-- marked; nothing of it is inside a block.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idempotency;
RESET client_min_messages;
SET search_path = public;
-- README.md

CREATE EXTENSION idempotency;

-- The first request with key 'a1b2': the answer is fresh, so do the work and record its result.
BEGIN;
SELECT kind FROM idempotency.idem_begin('payments', 'a1b2', '{"amount": 100}');
SELECT idempotency.idem_commit('payments', 'a1b2', '{"payment_id": 7}');
COMMIT;

-- The retry, with the same key and request, gets the first result back: prior_result, {"payment_id": 7}.
SELECT kind, result FROM idempotency.idem_begin('payments', 'a1b2', '{"amount": 100}');

-- docs/quickstart.md, in a schema of its own (set-up: usage.sql, run
-- before in the same database, has tables of the same names).
DROP EXTENSION idempotency;
CREATE SCHEMA quickstart;
SET search_path = quickstart;

CREATE EXTENSION idempotency;

CREATE TABLE payments (
    id       bigserial PRIMARY KEY,
    amount   numeric NOT NULL,
    currency text NOT NULL
);

CREATE ROLE payments_app LOGIN;
GRANT SELECT, INSERT ON payments TO payments_app;
GRANT USAGE ON SEQUENCE payments_id_seq TO payments_app;
SELECT idempotency.idem_grant('payments', 'payments_app');

CREATE FUNCTION create_payment(idempotency_key text, request jsonb,
                               OUT status integer, OUT headers jsonb, OUT body jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    key text;
    o idempotency.idem_outcome;
    payment_id bigint;
BEGIN
    -- 1. The header: a 400 when it is missing or malformed.
    SELECT h.key, h.status, h.headers, h.body INTO key, status, headers, body
    FROM idempotency.idem_http_key('payments', idempotency_key) h;
    IF key IS NULL THEN
        RETURN;
    END IF;
    -- 2. The first time: fresh. A retry: the first answer again, a 409 or a 422.
    SELECT * INTO o FROM idempotency.idem_begin('payments', key,
        jsonb_build_object('method', 'POST', 'target', '/payments', 'body', request));
    IF o.kind <> 'fresh' THEN
        SELECT r.* INTO status, headers, body FROM idempotency.idem_http_response(o) r;
        RETURN;
    END IF;
    -- 3. The work, and the answer recorded, in this transaction.
    IF (request ->> 'amount')::numeric <= 0 THEN
        -- Refused for good: recorded, so every retry gets this 422 again.
        PERFORM idempotency.idem_fail_permanent('payments', key,
            '{"class_tag": "InvalidAmount", "message": "amount must be positive"}');
        status := 422;
        headers := '{"Content-Type": "application/problem+json"}';
        body := idempotency.idem_http_problem(422, 'InvalidAmount', 'amount must be positive');
        RETURN;
    END IF;
    INSERT INTO payments (amount, currency)
    VALUES ((request ->> 'amount')::numeric, request ->> 'currency')
    RETURNING id INTO payment_id;
    status := 201;
    headers := jsonb_build_object('Location', '/payments/' || payment_id);
    body := jsonb_build_object('payment_id', payment_id);
    PERFORM idempotency.idem_commit('payments', key,
        jsonb_build_object('status', status, 'headers', headers, 'body', body));
END;
$$;

SELECT status, headers, body FROM create_payment('7d1c-44a0', '{"amount": 100, "currency": "EUR"}');
SELECT status, headers, body FROM create_payment('7d1c-44a0', '{"amount": 100, "currency": "EUR"}');

-- (set-up) The other answers: no header, the key reused, a refusal and its replay.
SELECT status, headers, body FROM create_payment(NULL, '{"amount": 100, "currency": "EUR"}');
SELECT status, body ->> 'code' AS code FROM create_payment('7d1c-44a0', '{"amount": 99, "currency": "EUR"}');
SELECT status, headers, body FROM create_payment('b9e0-0001', '{"amount": 0, "currency": "EUR"}');
SELECT status, headers, body FROM create_payment('b9e0-0001', '{"amount": 0, "currency": "EUR"}');
SELECT count(*) AS payments FROM payments;
-- (set-up) Kotlin's tab binds the namespace to a store of the service's:
-- the SQL tab's records must not be in the extension's table then.
DELETE FROM idempotency.idempotency_record WHERE namespace = 'payments';

SELECT idempotency.idem_create_store('public.payment_keys');
SELECT idempotency.idem_bind_store('payments', 'public.payment_keys');

-- (set-up) What the quick start made, undone: the namespace unbound, its
-- grant and registration, the role, the store and the schema.
SELECT namespace, store FROM idempotency.idem_namespaces WHERE namespace = 'payments';
SELECT idempotency.idem_bind_store('payments', NULL);
SELECT idempotency.idem_revoke('payments', 'payments_app');
SELECT idempotency.idem_namespace_drop('payments');
DROP TABLE public.payment_keys;
DROP OWNED BY payments_app;
DROP ROLE payments_app;
RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA quickstart CASCADE;
RESET client_min_messages;
