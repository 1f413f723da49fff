-- setup.sql: what test/pooler's programs use in the database idem_pooler,
-- beside the extension and docs/usage.md's objects (test/pooler/run creates
-- the database with fresh_db, then runs this as a superuser).

-- One row per effect, with its key and pool mode: the retrying clients
-- count them per key.
CREATE TABLE pooled_payments (
    id   bigserial PRIMARY KEY,
    key  text NOT NULL,
    mode text NOT NULL
);

-- A payment in one statement, for statement pooling, where a transaction is
-- one statement: the claim, the effect, then the commit; or, with fail, an
-- error after the effect that rolls back both (a rollback after fresh). With
-- hold, it waits for the advisory lock 29 after the effect, which the test
-- holds while it kills the client whose statement this is.
CREATE FUNCTION pooled_payment(mode text, key text, fail boolean, hold boolean DEFAULT false,
                               OUT answer text, OUT payment_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    o idempotency.idem_outcome;
BEGIN
    SELECT * INTO o FROM idempotency.idem_begin('pooled', key, jsonb_build_object('mode', mode, 'key', key));
    IF o.kind = 'prior_result' THEN
        answer := 'replayed';
        payment_id := (o.result ->> 'payment_id')::bigint;
        RETURN;
    ELSIF o.kind <> 'fresh' THEN
        answer := o.kind;
        RETURN;
    END IF;
    INSERT INTO pooled_payments (key, mode) VALUES (key, mode) RETURNING id INTO payment_id;
    IF hold THEN
        PERFORM pg_advisory_xact_lock(29);
    END IF;
    IF fail THEN
        RAISE EXCEPTION 'the work failed after fresh';
    END IF;
    PERFORM idempotency.idem_commit('pooled', key, jsonb_build_object('payment_id', payment_id), o.fence);
    answer := 'paid';
END;
$$;

-- Roles for session_state.py. pooler_gateway logs in for two services and
-- acts as each with SET ROLE: NOINHERIT, so that without it, it has none of
-- their grants. pooler_svc_b logs in as its own service (a pool of its own).
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'pooler_app_a') THEN
        CREATE ROLE pooler_app_a NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'pooler_gateway') THEN
        CREATE ROLE pooler_gateway LOGIN NOINHERIT IN ROLE pooler_app_a;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'pooler_svc_b') THEN
        CREATE ROLE pooler_svc_b LOGIN;
    END IF;
END;
$$;
SELECT idempotency.idem_grant('a-only', 'pooler_app_a');
SELECT idempotency.idem_grant('b-only', 'pooler_svc_b');
GRANT CONNECT ON DATABASE idem_pooler TO pooler_gateway, pooler_svc_b;
