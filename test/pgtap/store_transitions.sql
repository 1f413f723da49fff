-- store_transitions: every transition from every state, as a matrix; the
-- answer of idem_begin in every state; "nothing changed" after each refused
-- transition; expired-but-unpurged replay and purge counts; typed decoding
-- and its drift errors; a hostile caller's search_path; the purge procedure
-- under CALL.
\set namespaces '{m,h,t,proc}'
\ir store.psql
BEGIN;
SET search_path = idempotency, public;
SELECT plan(48);

-- Puts key k of namespace 'm' into state s: absent, in_progress, committed or failed.
CREATE FUNCTION pg_temp.make(k text, s text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF s = 'absent' THEN RETURN; END IF;
    PERFORM idempotency.idem_begin('m', k, '{"req": 1}');
    IF s = 'committed' THEN
        PERFORM idempotency.idem_commit('m', k, '{"res": 1}');
    ELSIF s = 'failed' THEN
        PERFORM idempotency.idem_fail_permanent('m', k, '{"class_tag": "E", "message": "m"}');
    END IF;
END;
$$;
-- A snapshot of one key's row (NULL when there is none), to compare before and after.
CREATE FUNCTION pg_temp.row_of(k text) RETURNS text LANGUAGE sql AS $$
    SELECT r::text FROM pg_temp.records r WHERE namespace = 'm' AND key_value = k
$$;

SELECT pg_temp.make(s || '-' || a, s)
FROM unnest(ARRAY['absent', 'in_progress', 'committed', 'failed']) s,
     unnest(ARRAY['commit', 'fail_permanent', 'fail_transient']) a;
CREATE TEMP TABLE before AS SELECT key_value, pg_temp.row_of(key_value) AS row FROM pg_temp.records WHERE namespace = 'm';

-- From in_progress every transition succeeds and lands where it should.
SELECT lives_ok($$SELECT idem_commit('m', 'in_progress-commit', '{"res": 2}')$$, 'in_progress -> commit');
SELECT is((SELECT status || ' ' || result_payload::text FROM pg_temp.records WHERE key_value = 'in_progress-commit'),
          'committed {"res": 2}', '  the row is committed with the result');
SELECT lives_ok($$SELECT idem_fail_permanent('m', 'in_progress-fail_permanent', '{"class_tag": "E", "message": "x"}')$$,
                'in_progress -> fail_permanent');
SELECT is((SELECT status || ' ' || error_payload::text FROM pg_temp.records WHERE key_value = 'in_progress-fail_permanent'),
          'failed {"message": "x", "class_tag": "E"}', '  the row is failed with the error');
SELECT lives_ok($$SELECT idem_fail_transient('m', 'in_progress-fail_transient')$$, 'in_progress -> fail_transient');
SELECT is(pg_temp.row_of('in_progress-fail_transient'), NULL, '  the row is gone');

-- From absent, committed and failed every transition is refused with 55000
-- and a detail that says which, and the row is unchanged.
SELECT throws_ok(format('SELECT idem_%s(%L, %L%s)', a, 'm', s || '-' || a,
                        CASE a WHEN 'commit' THEN $$, '{"res": 9}'$$
                               WHEN 'fail_permanent' THEN $$, '{"class_tag": "E", "message": "late"}'$$
                               ELSE '' END),
                 '55000',
                 format('cannot %s an idempotency record that is not in progress', CASE a WHEN 'commit' THEN 'commit' ELSE 'fail' END),
                 format('%s -> %s is refused', s, a))
FROM unnest(ARRAY['absent', 'committed', 'failed']) s,
     unnest(ARRAY['commit', 'fail_permanent', 'fail_transient']) a;
SELECT is(pg_temp.row_of(b.key_value), b.row, format('  %s is unchanged', b.key_value))
FROM before b WHERE b.key_value !~ '^in_progress' ORDER BY b.key_value;
SELECT is(count(*), 0::bigint, '  and no refused transition created a row')
FROM pg_temp.records WHERE namespace = 'm' AND key_value ~ '^absent';

-- idem_begin in each state, with the same and with another request.
SELECT pg_temp.make('b-' || s, s) FROM unnest(ARRAY['in_progress', 'committed', 'failed']) s;
SELECT is(ARRAY(SELECT o.kind::text FROM unnest(ARRAY['b-absent', 'b-in_progress', 'b-committed', 'b-failed']) k,
                LATERAL idem_begin('m', k, '{"req": 1}') o),
          ARRAY['fresh', 'in_flight', 'prior_result', 'prior_error'],
          'begin with the same request: fresh, in_flight (own transaction), prior_result, prior_error');
SELECT is(ARRAY(SELECT o.kind::text FROM unnest(ARRAY['b-in_progress', 'b-committed', 'b-failed']) k,
                LATERAL idem_begin('m', k, '{"req": 2}') o),
          ARRAY['mismatch', 'mismatch', 'mismatch'], 'begin with another request: mismatch in every state');
SELECT is(ARRAY(SELECT pg_temp.row_of(k) FROM unnest(ARRAY['b-in_progress', 'b-committed', 'b-failed']) k),
          ARRAY(SELECT pg_temp.row_of(k) FROM unnest(ARRAY['b-in_progress', 'b-committed', 'b-failed']) k
                WHERE (SELECT kind FROM idem_begin('m', k, '{"req": 3}')) = 'mismatch'),
          '  and a mismatch changes nothing');

-- Expired records still replay until purged; purge counts what it deletes
-- and deletes nothing else.
UPDATE pg_temp.records SET expires_at = now() - interval '1 hour' WHERE namespace = 'm' AND key_value IN ('b-committed', 'b-failed');
SELECT is((SELECT kind::text FROM idem_begin('m', 'b-committed', '{"req": 1}')), 'prior_result', 'an expired committed record replays until purged');
SELECT is((SELECT count(*) FROM pg_temp.records WHERE expires_at < now()), 2::bigint, 'two expired records');
SELECT is(idem_purge(1, 1), 1::bigint, 'purge with one chunk of one deletes one');
SELECT is(idem_purge(), 1::bigint, 'purge deletes the other');
SELECT is(idem_purge(), 0::bigint, 'and then nothing');
SELECT is((SELECT kind::text FROM idem_begin('m', 'b-committed', '{"req": 2}')), 'fresh', 'a purged key is fresh again, with any request');
SELECT ok((SELECT count(*) FROM pg_temp.records WHERE namespace = 'm') > 0, 'unexpired records stay');

-- Typed decoding.
CREATE TYPE pg_temp.pay AS (id integer, amount numeric);
SELECT idem_begin_typed('t', 'k', 1);
SELECT idem_commit_typed('t', 'k', ROW(7, 1.50)::pg_temp.pay);
SELECT is((SELECT idem_result(o, NULL::pg_temp.pay) FROM idem_begin_typed('t', 'k', 1) o), ROW(7, 1.50)::pg_temp.pay,
          'idem_result gives back the committed value');
ALTER TYPE pg_temp.pay ADD ATTRIBUTE currency text;
SELECT throws_ok($$SELECT idem_result(o, NULL::pg_temp.pay) FROM idem_begin_typed('t', 'k', 1) o$$,
                 'ID001', 'incompatible stored state: the stored result does not fit type pay', 'a field added to the type: ID001');
ALTER TYPE pg_temp.pay DROP ATTRIBUTE currency, DROP ATTRIBUTE amount;
SELECT throws_ok($$SELECT idem_result(o, NULL::pg_temp.pay) FROM idem_begin_typed('t', 'k', 1) o$$,
                 'ID001', 'incompatible stored state: the stored result does not fit type pay', 'a field dropped from the type: ID001');
ALTER TYPE pg_temp.pay ADD ATTRIBUTE amount boolean;
SELECT throws_ok($$SELECT idem_result(o, NULL::pg_temp.pay) FROM idem_begin_typed('t', 'k', 1) o$$,
                 'ID001', 'incompatible stored state: the stored result does not fit type pay', 'a field whose value no longer converts: ID001');

-- A hostile search_path: a schema ahead of pg_catalog with an "=" that
-- matches everything, a now() in the past and a to_jsonb that lies. None
-- of it may reach the store.
CREATE SCHEMA evil;
CREATE FUNCTION evil.yes(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT true';
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.yes);
CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE sql AS $$SELECT timestamptz '2000-01-01'$$;
CREATE FUNCTION evil.to_jsonb(anyelement) RETURNS jsonb LANGUAGE sql AS $$SELECT '"forged"'::jsonb$$;
SELECT idem_begin('h', 'one', '{}'), idem_begin('h', 'two', '{}');
-- Runs a statement under the hostile path; 'ok' or the SQLSTATE it raised.
CREATE FUNCTION pg_temp.hostile(statement text) RETURNS text LANGUAGE plpgsql
SET search_path = evil, pg_catalog, idempotency AS $$
BEGIN
    EXECUTE statement;
    RETURN 'ok';
EXCEPTION WHEN others THEN
    RETURN SQLSTATE;
END;
$$;
SELECT is(pg_temp.hostile($$SELECT idem_commit('h', 'one', '{"r": 1}')$$), 'ok', 'commit under a hostile search_path');
SELECT is(pg_temp.hostile($$SELECT idem_fail_transient('h', 'three')$$), '55000',
          'fail_transient of an absent key is refused, not applied to another key');
SELECT is(pg_temp.hostile($$SELECT idem_begin_typed('h', 'typed', 5)$$), 'ok', 'begin_typed under a hostile search_path');
SELECT is(pg_temp.hostile($$SELECT idem_result(o, NULL::jsonb) FROM idem_begin('h', 'one', '{}') o$$), 'ok',
          'idem_result under a hostile search_path');
SELECT is(pg_temp.hostile($$SELECT idem_purge()$$), 'ok', 'purge under a hostile search_path');
-- No row while a claim without a lease is open on the extension's own table
-- (one write per fresh attempt): there 'two' has none until it is finished;
-- a bound store still writes its in_progress row. Either way it is not
-- committed, and it is still this transaction's open claim (in flight).
SELECT is((SELECT status FROM pg_temp.records WHERE namespace = 'h' AND key_value = 'two'),
          CASE WHEN :'bound'::boolean THEN 'in_progress' END,
          'the hostile "=" did not commit the other key');
SELECT is((SELECT kind::text FROM idem_begin('h', 'two', '{}')), 'in_flight',
          'nor finished it: the claim on it is still open');
-- The claim's request is 5, not the hostile to_jsonb's "forged": the same
-- request is this transaction's claim in flight, another is a mismatch
-- (asked of begin, since a claim without a lease has no row to read).
SELECT is((SELECT kind::text FROM idem_begin('h', 'typed', '5'::jsonb)), 'in_flight',
          'the hostile to_jsonb was not used');
SELECT ok((SELECT bool_and(updated_at > '2020-01-01') FROM pg_temp.records WHERE namespace = 'h'),
          'the hostile now() was not used');

-- CALL idem_purge_batches commits between chunks, so it runs in its own
-- session; it purges every expired row, and refuses inside a transaction block.
SELECT dblink_connect('proc', format('host=%s port=%s dbname=%s user=%s',
         split_part(current_setting('unix_socket_directories'), ',', 1),
         current_setting('port'), current_database(), current_user));
SELECT dblink_exec('proc', format($$INSERT INTO %s
    SELECT 'proc', 'k' || i, 'committed', sha256(''), '{}', '{}', NULL, now(), now(), now() - interval '1 day'
    FROM generate_series(1, 25) i$$, current_setting('idem_test.store')));
-- With idempotency.purge_pause it sleeps after each chunk that deleted rows
-- (three here), so the call lasts at least three pauses.
SELECT dblink_exec('proc', $$SET idempotency.purge_pause = '200ms'$$);
CREATE TEMP TABLE started AS SELECT clock_timestamp() AS at;
SELECT dblink_exec('proc', 'CALL idempotency.idem_purge_batches(10)');
CREATE TEMP TABLE called AS
SELECT *, clock_timestamp() - (SELECT at FROM started) AS took
FROM dblink('proc', format($$SELECT count(*) FROM %s WHERE namespace = 'proc'$$, current_setting('idem_test.store')))
    AS t(left_over bigint);
SELECT dblink_disconnect('proc');
SELECT is((SELECT left_over FROM called), 0::bigint, 'CALL idem_purge_batches(10) purged 25 expired rows in 3 chunks');
SELECT cmp_ok((SELECT took FROM called), '>=', interval '600 ms', '  pausing 200 ms after each of the three');
SELECT throws_ok('CALL idem_purge_batches()', '2D000', NULL, 'inside a transaction block it is refused');
SELECT * FROM finish();
ROLLBACK;
\ir unbind.psql
