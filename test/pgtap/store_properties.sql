-- store_properties: properties of the store that a single regression
-- transcript cannot show: a batch consumer beginning 100,000 keys in one
-- transaction, a bounded in-flight wait against a holder that does not
-- finish, and use from PL/pgSQL (DO blocks and functions).
BEGIN;
SET search_path = idempotency, public;
SELECT plan(7);

-- 100,000 distinct keys in one transaction: all fresh, and no lock is left
-- behind per key (the per-key lock lasts one call), so the lock table is safe.
SELECT is((SELECT count(*) FROM generate_series(1, 100000) i,
                  LATERAL idem_begin('batch', 'key-' || i, jsonb_build_object('i', i)) o
           WHERE o.kind = 'fresh'),
          100000::bigint, 'one transaction begins 100,000 distinct keys, all fresh');
SELECT is((SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()),
          0::bigint, 'and holds no per-key lock afterwards');

-- This transaction holds 'held' in flight; another session waits at most
-- idempotency.in_flight_wait for it and then answers in_flight.
SELECT is((SELECT kind FROM idem_begin('waits', 'held', '{}')), 'fresh', 'this transaction holds a key');
CREATE TEMP TABLE waited AS
SELECT * FROM dblink(
  format('host=%s port=%s dbname=%s user=%s',
         split_part(current_setting('unix_socket_directories'), ',', 1),
         current_setting('port'), current_database(), current_user),
  $$SET idempotency.in_flight_wait = '300ms';
    SELECT o.kind::text, clock_timestamp() - now() FROM idempotency.idem_begin('waits', 'held', '{}') o$$)
  AS t(kind text, waited interval);
SELECT is((SELECT kind FROM waited), 'in_flight', 'a waiter whose holder never finishes answers in_flight');
SELECT cmp_ok((SELECT waited FROM waited), '>=', interval '250ms', 'after waiting about in_flight_wait');

-- PL/pgSQL: a DO block and a function running the whole cycle.
DO $$
DECLARE o idempotency.idem_outcome;
BEGIN
    SELECT * INTO o FROM idempotency.idem_begin('plpgsql', 'do-block', '{"n": 1}');
    IF o.kind = 'fresh' THEN
        PERFORM idempotency.idem_commit('plpgsql', 'do-block', '{"done": true}');
    END IF;
END;
$$;
SELECT is((SELECT result FROM idem_begin('plpgsql', 'do-block', '{"n": 1}')), '{"done": true}'::jsonb,
          'a DO block runs begin and commit');

CREATE FUNCTION pg_temp.pay(k text, amount int) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE o idempotency.idem_outcome;
BEGIN
    SELECT * INTO o FROM idempotency.idem_begin('plpgsql', k, jsonb_build_object('amount', amount));
    CASE o.kind
        WHEN 'fresh' THEN
            PERFORM idempotency.idem_commit('plpgsql', k, jsonb_build_object('paid', amount));
            RETURN jsonb_build_object('paid', amount, 'replayed', false);
        WHEN 'prior_result' THEN
            RETURN o.result || '{"replayed": true}';
        ELSE
            RETURN jsonb_build_object('kind', o.kind);
    END CASE;
END;
$$;
SELECT is(ARRAY[pg_temp.pay('f', 5), pg_temp.pay('f', 5), pg_temp.pay('f', 6)],
          ARRAY['{"paid": 5, "replayed": false}', '{"paid": 5, "replayed": true}', '{"kind": "mismatch"}']::jsonb[],
          'a PL/pgSQL function: fresh, then replay, then mismatch');

SELECT * FROM finish();
ROLLBACK;
