-- namespace_access: a namespace is an access boundary. Two services with a
-- namespace each and a third role with none: nobody reaches another's
-- records through any function, learns nothing from the error, or touches
-- the table; membership in a granted role counts; a revoke takes effect at
-- once; a hostile search_path changes nothing the functions do.
BEGIN;
SELECT plan(47);

CREATE ROLE regress_tap_pay;
CREATE ROLE regress_tap_ship;
CREATE ROLE regress_tap_none;
CREATE ROLE regress_tap_member IN ROLE regress_tap_pay;
GRANT USAGE ON SCHEMA idempotency TO regress_tap_none;  -- can call functions, holds no namespace
SELECT idempotency.idem_grant('pay', 'regress_tap_pay');
SELECT idempotency.idem_grant('ship', 'regress_tap_ship');

-- pay's records: one committed, one in progress, one failed.
SET ROLE regress_tap_pay;
SELECT idempotency.idem_begin('pay', 'done', '{"amount": 10}');
SELECT idempotency.idem_commit('pay', 'done', '{"charge": "ch_1"}');
SELECT idempotency.idem_begin('pay', 'running', '{"amount": 20}');
SELECT idempotency.idem_begin('pay', 'refused', '{"amount": 30}');
SELECT idempotency.idem_fail_permanent('pay', 'refused', '{"class_tag": "CardDeclined", "message": "no"}');
RESET ROLE;
CREATE TEMP TABLE pay_before AS SELECT r::text AS row FROM idempotency.idempotency_record r WHERE namespace = 'pay';
GRANT SELECT ON pay_before TO PUBLIC;

-- The owner of the namespace sees its records.
SET ROLE regress_tap_pay;
SELECT is((SELECT kind::text || ' ' || result::text FROM idempotency.idem_begin('pay', 'done', '{"amount": 10}')),
          'prior_result {"charge": "ch_1"}', 'pay replays its own result');
SELECT is((SELECT kind::text FROM idempotency.idem_begin('pay', 'done', '{"amount": 11}')), 'mismatch',
          'pay sees a mismatch on its own key');
RESET ROLE;

-- Another service, and a role with no namespace, get 42501 with one message
-- from every function, whatever the key's state: nothing tells a recorded
-- key from an unknown one.
CREATE FUNCTION pg_temp.denied_everywhere(who text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    call text;
BEGIN
    FOREACH call IN ARRAY ARRAY[
        $c$SELECT idempotency.idem_begin('pay', 'done', '{"amount": 10}')$c$,
        $c$SELECT idempotency.idem_begin('pay', 'done', '{"amount": 99}')$c$,
        $c$SELECT idempotency.idem_begin('pay', 'running', '{"amount": 20}')$c$,
        $c$SELECT idempotency.idem_begin('pay', 'refused', '{"amount": 30}')$c$,
        $c$SELECT idempotency.idem_begin('pay', 'never-used', '{"amount": 1}')$c$,
        $c$SELECT idempotency.idem_begin_typed('pay', 'done', 10)$c$,
        $c$SELECT idempotency.idem_commit('pay', 'running', '{"stolen": true}')$c$,
        $c$SELECT idempotency.idem_commit('pay', 'never-used', '{}')$c$,
        $c$SELECT idempotency.idem_commit_typed('pay', 'running', 1)$c$,
        $c$SELECT idempotency.idem_fail_permanent('pay', 'running', '{"class_tag": "X", "message": "x"}')$c$,
        $c$SELECT idempotency.idem_fail_transient('pay', 'running')$c$,
        $c$SELECT idempotency.idem_fail_transient('pay', 'never-used')$c$]
    LOOP
        RETURN NEXT throws_ok(call, '42501', 'permission denied for idempotency namespace "pay"',
                              who || ': ' || substr(call, 20, 60));
    END LOOP;
END;
$$;
SET ROLE regress_tap_ship;
SELECT * FROM pg_temp.denied_everywhere('ship');
RESET ROLE;
SET ROLE regress_tap_none;
SELECT * FROM pg_temp.denied_everywhere('none');
-- An unregistered namespace answers the same: its existence is not revealed.
SELECT throws_ok($$SELECT idempotency.idem_begin('no-such-namespace', 'k', '{}')$$, '42501',
                 'permission denied for idempotency namespace "no-such-namespace"',
                 'none: an unregistered namespace is denied alike');
-- The table, the registry and purging are out of reach.
SELECT throws_ok($$SELECT * FROM idempotency.idempotency_record$$, '42501', NULL, 'none: cannot read the table');
SELECT throws_ok($$DELETE FROM idempotency.idempotency_record$$, '42501', NULL, 'none: cannot delete from the table');
SELECT throws_ok($$SELECT * FROM idempotency.idem_namespaces$$, '42501', NULL, 'none: cannot read the registry');
SELECT throws_ok($$SELECT idempotency.idem_purge()$$, '42501', NULL, 'none: cannot purge');
SELECT throws_ok($$SELECT idempotency.idem_grant('pay', 'regress_tap_none')$$, '42501', NULL,
                 'none: cannot grant itself a namespace');
RESET ROLE;
SELECT set_eq($$SELECT r::text FROM idempotency.idempotency_record r WHERE namespace = 'pay'$$,
              $$SELECT row FROM pay_before$$, 'pay''s records are unchanged after every denied call');

-- A member of a granted role may use the namespace, as with table privileges.
SET ROLE regress_tap_member;
SELECT is((SELECT kind::text FROM idempotency.idem_begin('pay', 'done', '{"amount": 10}')), 'prior_result',
          'a member of the granted role replays');
RESET ROLE;

-- A revoke takes effect for the next call, in this session too.
SELECT idempotency.idem_revoke('pay', 'regress_tap_pay');
SET ROLE regress_tap_member;
SELECT throws_ok($$SELECT idempotency.idem_begin('pay', 'done', '{"amount": 10}')$$, '42501', NULL,
                 'after the revoke, the member is denied');
RESET ROLE;
SET ROLE regress_tap_pay;
SELECT throws_ok($$SELECT idempotency.idem_begin('pay', 'done', '{"amount": 10}')$$, '42501', NULL,
                 'after the revoke, the role itself is denied');
RESET ROLE;
SELECT idempotency.idem_grant('pay', 'regress_tap_pay');

-- A hostile search_path: operators and functions named like the ones the
-- store uses, ahead of pg_catalog. They would raise if ever called.
CREATE SCHEMA regress_tap_evil;
GRANT USAGE ON SCHEMA regress_tap_evil TO PUBLIC;
CREATE FUNCTION regress_tap_evil.texteq(text, text) RETURNS boolean LANGUAGE plpgsql AS
    $$BEGIN RAISE EXCEPTION 'hijacked: ='; END$$;
CREATE OPERATOR regress_tap_evil.= (FUNCTION = regress_tap_evil.texteq, LEFTARG = text, RIGHTARG = text);
CREATE FUNCTION regress_tap_evil.tsplus(timestamptz, interval) RETURNS timestamptz LANGUAGE plpgsql AS
    $$BEGIN RAISE EXCEPTION 'hijacked: +'; END$$;
CREATE OPERATOR regress_tap_evil.+ (FUNCTION = regress_tap_evil.tsplus, LEFTARG = timestamptz, RIGHTARG = interval);
CREATE FUNCTION regress_tap_evil.now() RETURNS timestamptz LANGUAGE plpgsql AS
    $$BEGIN RAISE EXCEPTION 'hijacked: now()'; END$$;
-- pgTAP itself uses unqualified operators, so each call runs inside a
-- function that carries the hostile path, and is checked outside it.
CREATE FUNCTION pg_temp.under_hostile_path(sql text) RETURNS text LANGUAGE plpgsql
SET search_path = regress_tap_evil, pg_catalog, idempotency, public
AS $$ DECLARE r text; BEGIN EXECUTE sql INTO r; RETURN r; END $$;
SET ROLE regress_tap_pay;
SELECT throws_ok($$SELECT pg_temp.under_hostile_path('SELECT (''a''::text = ''b''::text)::text')$$, 'P0001', 'hijacked: =',
                 'the hostile path does capture unqualified SQL');
SELECT is(pg_temp.under_hostile_path($$SELECT kind::text FROM idempotency.idem_begin('pay', 'hostile', '{"amount": 5}')$$),
          'fresh', 'begin is unaffected by the hostile path');
SELECT lives_ok($$SELECT pg_temp.under_hostile_path('SELECT idempotency.idem_commit(''pay'', ''hostile'', ''{"ok": true}'')')$$,
                'commit is unaffected by the hostile path');
SELECT is(pg_temp.under_hostile_path($$SELECT kind::text FROM idempotency.idem_begin('pay', 'hostile', '{"amount": 5}')$$),
          'prior_result', 'the replay is unaffected by the hostile path');
SELECT is(pg_temp.under_hostile_path($$SELECT kind::text FROM idempotency.idem_begin('pay', 'hostile-2', '{}')$$),
          'fresh', 'a second key begins under the hostile path');
SELECT lives_ok($$SELECT pg_temp.under_hostile_path('SELECT idempotency.idem_fail_transient(''pay'', ''hostile-2'')')$$,
                'fail_transient is unaffected by the hostile path');
RESET ROLE;
-- The same through SQL: an index an operator added makes the store write
-- with its SQL statements, which name every object by schema (the functions
-- pin no search_path). Also hostile: nextval() and clock_timestamp().
CREATE FUNCTION regress_tap_evil.nextval(regclass) RETURNS bigint LANGUAGE plpgsql AS
    $$BEGIN RAISE EXCEPTION 'hijacked: nextval()'; END$$;
CREATE FUNCTION regress_tap_evil.clock_timestamp() RETURNS timestamptz LANGUAGE plpgsql AS
    $$BEGIN RAISE EXCEPTION 'hijacked: clock_timestamp()'; END$$;
CREATE INDEX regress_tap_status_idx ON idempotency.idempotency_record (status);
SET ROLE regress_tap_pay;
SELECT is(pg_temp.under_hostile_path($$SELECT kind::text FROM idempotency.idem_begin('pay', 'hostile-sql', '{"amount": 5}')$$),
          'fresh', 'begin through SQL is unaffected by the hostile path');
SELECT lives_ok($$SELECT pg_temp.under_hostile_path('SELECT idempotency.idem_commit(''pay'', ''hostile-sql'', ''{"ok": true}'')')$$,
                'commit through SQL is unaffected by the hostile path');
SELECT throws_ok($$SELECT pg_temp.under_hostile_path('SELECT idempotency.idem_commit(''pay'', ''hostile-sql'', ''{"ok": true}'')')$$,
                 '55000', 'cannot commit an idempotency record that is not in progress',
                 'so is the SQL that says why a commit is refused');
SELECT is(pg_temp.under_hostile_path($$SELECT kind::text FROM idempotency.idem_begin('pay', 'hostile-sql-2', '{}')$$),
          'fresh', 'a second key begins through SQL');
SELECT lives_ok($$SELECT pg_temp.under_hostile_path('SELECT idempotency.idem_fail_transient(''pay'', ''hostile-sql-2'')')$$,
                'fail_transient through SQL is unaffected by the hostile path');
RESET ROLE;
DROP INDEX idempotency.regress_tap_status_idx;

SELECT * FROM finish();
ROLLBACK;
