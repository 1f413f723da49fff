-- batch_equivalence: idem_begin_batch answers each key exactly as
-- idem_begin calls, one per key in the batch's order, would in the same
-- transaction: random batches over keys of every status (new keys, keys
-- committed, failed, abandoned under a lease, held by another transaction,
-- a reused key with another request), with repeats, and more new keys than
-- a transaction holds by their lock alone (max_locks_per_transaction / 4:
-- the rest are written as rows), so that some keys are claimed one way in
-- the batch and the other way one by one. Every column is compared but the
-- ones that change from call to call (age, fence and lease_ends_at by
-- whether they are NULL). Each batch and each series of single begins runs
-- in a subtransaction that is rolled back, so every round starts from the
-- same records. Run by pg_prove in make test, and at another
-- max_locks_per_transaction by test/t/012_held_claims.pl.
\set namespaces '{beq,beq-lease}'
\ir store.psql
SELECT setseed(0.37);
-- Records committed before the test: replays, failures, a claim abandoned
-- under a lease (taken over), each request {"n": 0}.
SELECT idempotency.idem_namespace_configure('beq-lease', in_progress_lease => '1 second') IS NOT NULL AS leased;
DO $$
BEGIN
    FOR i IN 1..6 LOOP
        PERFORM idempotency.idem_begin('beq', 'done-' || i, '{"n": 0}');
        PERFORM idempotency.idem_commit('beq', 'done-' || i, jsonb_build_object('r', i));
        PERFORM idempotency.idem_begin('beq', 'failed-' || i, '{"n": 0}');
        PERFORM idempotency.idem_fail_permanent('beq', 'failed-' || i,
                                                jsonb_build_object('class_tag', 'E', 'message', 'm' || i));
        PERFORM idempotency.idem_begin('beq-lease', 'done-' || i, '{"n": 0}');
        PERFORM idempotency.idem_commit('beq-lease', 'done-' || i, jsonb_build_object('r', i));
        PERFORM idempotency.idem_begin('beq-lease', 'abandoned-' || i, '{"n": 0}');
    END LOOP;
END;
$$;
-- The abandoned claims' lease has run out.
SELECT pg_sleep(1.1);
-- Another transaction holds keys held-1 to held-6 of both namespaces.
SELECT dblink_connect('holder', format('host=%s port=%s dbname=%s user=%s',
         split_part(current_setting('unix_socket_directories'), ',', 1),
         current_setting('port'), current_database(), current_user)) AS holder_connected;
SELECT dblink_exec('holder', 'BEGIN') AS holder_began;
SELECT n AS holding FROM dblink('holder', $h$SELECT count(idempotency.idem_begin(ns, 'held-' || i, '{"n": 0}'))
                                    FROM generate_series(1, 6) i, unnest(ARRAY['beq', 'beq-lease']) ns$h$) AS h(n bigint);

BEGIN;
SET search_path = idempotency, public;
SELECT plan(43);

-- Every column of one answer as text; age, fence and lease_ends_at as
-- whether they are NULL.
CREATE FUNCTION pg_temp.shown(o idempotency.idem_outcome) RETURNS text LANGUAGE sql AS $$
    SELECT concat_ws(' | ', o.kind, o.result, o.error, o.recorded_request, encode(o.recorded_hash, 'hex'),
                     encode(o.submitted_hash, 'hex'), o.attempt, 'age:' || (o.age IS NULL),
                     'fence:' || (o.fence IS NULL), 'lease:' || (o.lease_ends_at IS NULL), o.takeover,
                     o.recovery_point, o.recovery_state)
$$;

-- The batch's answers, in the input's order, undone afterwards.
CREATE FUNCTION pg_temp.batch(ns text, keys text[], requests jsonb[]) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    answers text[];
BEGIN
    BEGIN
        -- A function scan returns the rows in the function's order: the input's.
        answers := ARRAY(SELECT pg_temp.shown(b) FROM idempotency.idem_begin_batch(ns, keys, requests) b);
        RAISE EXCEPTION USING ERRCODE = 'P0099';
    EXCEPTION WHEN SQLSTATE 'P0099' THEN
        NULL;
    END;
    RETURN answers;
END;
$$;

-- The same keys begun one by one, in the given order (the batch's, or the
-- input's), answered in the input's order, undone afterwards.
CREATE FUNCTION pg_temp.singles(ns text, keys text[], requests jsonb[], batch_order boolean) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    answers text[] := array_fill(NULL::text, ARRAY[cardinality(keys)]);
    i integer;
BEGIN
    BEGIN
        FOR i IN SELECT n FROM unnest(keys) WITH ORDINALITY AS k(key, n)
                 ORDER BY CASE WHEN batch_order THEN convert_to(k.key, 'UTF8') END, n LOOP
            answers[i] := pg_temp.shown(idempotency.idem_begin(ns, keys[i], requests[i]));
        END LOOP;
        RAISE EXCEPTION USING ERRCODE = 'P0099';
    EXCEPTION WHEN SQLSTATE 'P0099' THEN
        NULL;
    END;
    RETURN answers;
END;
$$;

-- The first answer in which a batch and single begins differ (NULL: none),
-- with the keys, for a short failure message.
CREATE FUNCTION pg_temp.difference(keys text[], batch text[], singles text[]) RETURNS text LANGUAGE sql AS $$
    SELECT format('answer %s (key %s): batch %s; single begins %s', i, keys[i], batch[i], singles[i])
    FROM generate_series(1, greatest(cardinality(batch), cardinality(singles), cardinality(keys))) i
    WHERE batch[i] IS DISTINCT FROM singles[i]
    ORDER BY i LIMIT 1
$$;

-- A random batch of n keys of namespace ns: new keys (many: more than a
-- transaction holds by their lock), repeats, and keys of every status, each
-- with request {"n": 0}, or another one (a reused key) one time in five.
CREATE FUNCTION pg_temp.random_keys(ns text, n integer, OUT keys text[], OUT requests jsonb[]) LANGUAGE sql AS $$
    WITH pick AS (
        SELECT g, CASE (random() * 5)::int
                    WHEN 0 THEN 'done-' || (1 + (random() * 5)::int)
                    WHEN 1 THEN 'failed-' || (1 + (random() * 5)::int)
                    WHEN 2 THEN (CASE WHEN ns = 'beq-lease' THEN 'abandoned-' ELSE 'held-' END) || (1 + (random() * 5)::int)
                    ELSE 'new-' || (1 + (random() * 39)::int)
                  END AS key,
               CASE WHEN random() < 0.2 THEN '{"n": 1}' ELSE '{"n": 0}' END::jsonb AS request
        FROM generate_series(1, n) g)
    SELECT array_agg(key ORDER BY g), array_agg(request ORDER BY g) FROM pick
$$;

-- The finding: 16 new keys and one key given twice, first and last. Begun
-- one by one in the input's order, the repeated key is the transaction's
-- first claim (held by its lock); in the batch's order, its 17th (a row).
-- Either way its second answer is in flight, since the claim, with its age.
SELECT is(pg_temp.difference(k, pg_temp.batch('beq', k, r), pg_temp.singles('beq', k, r, false)), NULL,
          'a key given twice around 16 new ones: the batch answers as single begins in the input''s order')
FROM (SELECT ARRAY['z'] || array_agg(format('a%s', lpad(g::text, 2, '0'))) || ARRAY['z'] AS k,
             array_fill('{}'::jsonb, ARRAY[18]) AS r
      FROM generate_series(1, 16) g) x;
SELECT is((SELECT a[18] FROM (SELECT pg_temp.batch('beq', k, r) AS a
                               FROM (SELECT ARRAY['z'] || array_agg(format('a%s', lpad(g::text, 2, '0'))) || ARRAY['z'] AS k,
                                            array_fill('{}'::jsonb, ARRAY[18]) AS r
                                     FROM generate_series(1, 16) g) x) y),
          (SELECT pg_temp.shown(o) FROM (SELECT ROW('in_flight', NULL, NULL, NULL, NULL, idempotency.idem_request_hash('{}'),
                                                    NULL, interval '0', NULL, NULL, NULL, NULL, NULL)::idempotency.idem_outcome AS o) z),
          '  and its second answer is in flight, with its age');

-- Twenty random batches per namespace, each compared with single begins in
-- the batch's order and in the input's.
SELECT is(pg_temp.difference(keys, pg_temp.batch(ns, keys, requests), pg_temp.singles(ns, keys, requests, true)), NULL,
          format('%s, random batch %s of %s keys: as single begins in the batch''s order', ns, round, cardinality(keys)))
FROM (SELECT ns, round, (pg_temp.random_keys(ns, 20 + round * 3)).*
      FROM unnest(ARRAY['beq', 'beq-lease']) ns, generate_series(1, 10) round) r
ORDER BY ns, round;
SELECT is(pg_temp.difference(keys, pg_temp.batch(ns, keys, requests), pg_temp.singles(ns, keys, requests, false)), NULL,
          format('%s, random batch %s of %s keys: as single begins in the input''s order', ns, round, cardinality(keys)))
FROM (SELECT ns, round, (pg_temp.random_keys(ns, 20 + round * 3)).*
      FROM unnest(ARRAY['beq', 'beq-lease']) ns, generate_series(1, 10) round) r
ORDER BY ns, round;

-- Every kind was answered in those rounds.
SELECT set_eq($$SELECT DISTINCT split_part(a, ' | ', 1) FROM
                (SELECT unnest(pg_temp.batch(ns, keys, requests)) AS a
                 FROM (SELECT ns, (pg_temp.random_keys(ns, 60)).* FROM unnest(ARRAY['beq', 'beq-lease']) ns) r) x$$,
              ARRAY['fresh', 'in_flight', 'prior_result', 'prior_error', 'mismatch'],
              'the batches met every kind of answer');

SELECT * FROM finish();
ROLLBACK;

SELECT dblink_exec('holder', 'ROLLBACK') AS holder_rolled_back;
SELECT dblink_disconnect('holder');
DELETE FROM records WHERE namespace IN ('beq', 'beq-lease');
SELECT idempotency.idem_namespace_drop(ns) FROM unnest(ARRAY['beq', 'beq-lease']) ns;
\ir unbind.psql
