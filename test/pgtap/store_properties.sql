-- store_properties: properties of the store that a single regression
-- transcript cannot show: a batch consumer beginning 100,000 keys in one
-- transaction, a bounded in-flight wait against a holder that does not
-- finish, and use from PL/pgSQL (DO blocks and functions).
\set namespaces '{batch,batch-commit,plpgsql,waits}'
\ir store.psql
BEGIN;
SET search_path = idempotency, public;
SELECT plan(12);

-- 100,000 distinct keys in one transaction: all fresh, and the per-key
-- locks left behind are bounded, so the lock table is safe; the transaction
-- holds one namespace lock (until it ends). On the extension's own table a
-- claim without a lease is held by its key's lock to the transaction's end
-- (one write per fresh attempt), for at most max_locks_per_transaction / 4
-- keys; the rest are written as in_progress rows, whose per-key lock lasts
-- one call. A bound store keeps no per-key lock at all.
SELECT is((SELECT count(*) FROM generate_series(1, 100000) i,
                  LATERAL idem_begin('batch', 'key-' || i, jsonb_build_object('i', i)) o
           WHERE o.kind = 'fresh'),
          100000::bigint, 'one transaction begins 100,000 distinct keys, all fresh');
SELECT is((SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND objsubid = 18756),
          CASE WHEN :'bound'::boolean THEN 0 ELSE current_setting('max_locks_per_transaction')::bigint / 4 END,
          'and holds no more per-key locks afterwards than the held claims'' bound');
SELECT is((SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND objsubid = 18766),
          1::bigint, 'and one lock on the namespace');

-- ... and commits them, once each is finished: 100,000 claims, a quarter
-- of them in subtransactions that roll back (which release them), the
-- rest committed. One claim left unfinished fails the COMMIT and leaves
-- nothing. (In another session: this file's transaction never commits.)
SELECT dblink_connect('batch', format('host=%s port=%s dbname=%s user=%s',
         split_part(current_setting('unix_socket_directories'), ',', 1),
         current_setting('port'), current_database(), current_user));
CREATE FUNCTION pg_temp.batch(keys integer, unfinished integer) RETURNS text LANGUAGE sql AS $fn$
    SELECT dblink_exec('batch', 'BEGIN');
    SELECT dblink_exec('batch', format($b$
        DO $do$
        DECLARE k text;
        BEGIN
            FOR i IN 1..%s LOOP
                k := 'key-' || i;
                IF i %% 4 = 0 THEN
                    BEGIN
                        PERFORM idempotency.idem_begin('batch-commit', k, '{}');
                        RAISE EXCEPTION 'undone';
                    EXCEPTION WHEN raise_exception THEN
                        NULL;
                    END;
                ELSE
                    PERFORM idempotency.idem_begin('batch-commit', k, '{}');
                    IF i <> %s THEN
                        PERFORM idempotency.idem_commit('batch-commit', k, '{}');
                    END IF;
                END IF;
            END LOOP;
        END;
        $do$$b$, keys, unfinished));
    SELECT dblink_exec('batch', 'COMMIT');
$fn$;
SELECT lives_ok($$SELECT pg_temp.batch(100000, 0)$$, 'a transaction claims 100,000 keys, finishes 75,000 and commits');
SELECT is((SELECT count(*) FROM dblink('batch', format($q$SELECT 1 FROM %s
                                                 WHERE namespace = 'batch-commit' AND status = 'committed'$q$,
                                                 current_setting('idem_test.store'))) AS t(one int)),
          75000::bigint, '  the 75,000 are committed, the rolled-back quarter left nothing');
SELECT dblink_exec('batch', format($q$DELETE FROM %s WHERE namespace = 'batch-commit'$q$, current_setting('idem_test.store')));
SELECT throws_ok($$SELECT pg_temp.batch(1000, 777)$$, '25000', NULL,
                 'with one of them unfinished the COMMIT fails');
SELECT is((SELECT n FROM dblink('batch', format($q$SELECT count(*) FROM %s
                                           WHERE namespace = 'batch-commit'$q$, current_setting('idem_test.store'))) AS t(n bigint)),
          0::bigint, '  and leaves nothing');
SELECT dblink_disconnect('batch');

-- This transaction holds 'held' in flight; another session waits at most
-- its in_flight_wait for it and then answers in_flight.
SELECT is((SELECT kind FROM idem_begin('waits', 'held', '{}')), 'fresh', 'this transaction holds a key');
CREATE TEMP TABLE waited AS
SELECT * FROM dblink(
  format('host=%s port=%s dbname=%s user=%s',
         split_part(current_setting('unix_socket_directories'), ',', 1),
         current_setting('port'), current_database(), current_user),
  $$SELECT o.kind::text, clock_timestamp() - now()
    FROM idempotency.idem_begin('waits', 'held', '{}', in_flight_wait => '300ms') o$$)
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
\ir unbind.psql
