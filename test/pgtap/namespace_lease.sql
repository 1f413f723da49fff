-- namespace_lease: the in_progress lease from the caller's side. Records
-- that another session committed in progress (the asynchronous pattern
-- under a lease, or a claim an older release let an autocommit caller
-- commit) are written through dblink and aged there. No lease (the default)
-- takes one over only once its replay window has passed; this transaction's
-- own record is never taken over; the lease
-- runs from when the key was claimed, not from when its transaction began;
-- purging never deletes a record whose lease still runs, in any time zone.
-- (The server-wide lease, which no session can set, is in
-- test/t/008_purge_lease_setting.pl, with a taken-over record finished.)
\set namespaces '{lease-none,lease-own,lease-late,lease-purge,lease-dst}'
\ir store.psql
BEGIN;
SET search_path = idempotency, public;
SELECT plan(10);

SELECT dblink_connect('other', format('host=%s port=%s dbname=%s user=%s',
         split_part(current_setting('unix_socket_directories'), ',', 1),
         current_setting('port'), current_database(), current_user));
-- Leaves key k of namespace ns in progress, committed, claimed age ago and
-- expiring in expires (from now).
CREATE FUNCTION pg_temp.abandoned(ns text, k text, age interval, expires interval DEFAULT '1 day') RETURNS void
LANGUAGE sql AS $$
    SELECT dblink_exec('other', format(
        $f$INSERT INTO %s
               (namespace, key_value, status, request_hash, request_payload, created_at, updated_at, expires_at)
           VALUES (%L, %L, 'in_progress', idempotency.idem_request_hash('{"job": 1}'), '{"job": 1}',
                   now() - %L::interval, now() - %L::interval, now() + %L::interval)$f$, current_setting('idem_test.store'), ns, k, age, age, expires));
$$;
SELECT pg_temp.abandoned('lease-none', 'k', '10 days');
SELECT pg_temp.abandoned('lease-none', 'expired', '10 days', '-1 second');
SELECT pg_temp.abandoned('lease-own', 'k', '10 minutes');
SELECT namespace FROM idem_namespace_configure('lease-own', in_progress_lease => '5 minutes');

SELECT is((SELECT kind::text || ' ' || (age > interval '9 days')::text FROM idem_begin('lease-none', 'k', '{"job": 1}')),
          'in_flight true', 'no lease: ten days old and still in flight, with its age');
SELECT is((SELECT kind::text || ' ' || attempt FROM idem_begin('lease-none', 'expired', '{"job": 1}')),
          'fresh 2', 'no lease, but past its replay window: taken over as attempt 2, never in flight for ever');

-- This transaction's own record: past the lease, still in flight (taking it
-- over would run the work twice in one transaction).
SELECT is((SELECT kind::text FROM idem_begin('lease-own', 'k', '{"job": 1}')), 'fresh', 'a taker gets lease-own');
UPDATE pg_temp.records SET updated_at = now() - interval '1 hour' WHERE namespace = 'lease-own';
SELECT is((SELECT kind::text FROM idem_begin('lease-own', 'k', '{"job": 1}')), 'in_flight',
          'its own record, past the lease, is not taken over again');
SELECT is((SELECT attempt FROM pg_temp.records WHERE namespace = 'lease-own'), 2, '  and stays attempt 2');

-- The lease runs from the claim: a transaction that waited longer than the
-- lease before claiming holds a whole lease once it commits, and a retry
-- right after is in flight, not a takeover.
SELECT * FROM dblink('other', $$SELECT namespace FROM idempotency.idem_namespace_configure('lease-late', in_progress_lease => '1 second')$$) AS t(ns text);
SELECT dblink_exec('other', 'BEGIN');
SELECT * FROM dblink('other', 'SELECT pg_sleep(1.2)::text') AS t(slept text);
SELECT is((SELECT kind FROM dblink('other', $$SELECT kind::text FROM idempotency.idem_begin('lease-late', 'k', '{"job": 1}')$$)
           AS t(kind text)), 'fresh', 'a late claim is fresh');
SELECT dblink_exec('other', 'COMMIT');
SELECT is((SELECT kind::text || ' ' || (age < interval '1 second')::text FROM idem_begin('lease-late', 'k', '{"job": 1}')),
          'in_flight true', '  and a retry at once finds it in flight, claimed under a second ago');

-- Purging: a record past its replay window whose lease still runs stays (its
-- worker may yet finish it); one whose lease ran out goes.
SELECT * FROM dblink('other', $$SELECT namespace FROM idempotency.idem_namespace_configure('lease-purge', in_progress_lease => '1 hour')$$) AS t(ns text);
SELECT pg_temp.abandoned('lease-purge', 'running', '10 minutes', '-1 second');
SELECT pg_temp.abandoned('lease-purge', 'ran-out', '2 hours', '-1 second');
SELECT is((SELECT n FROM dblink('other', $$SELECT idempotency.idem_purge()$$) AS t(n bigint)), 1::bigint,
          'purge deletes the record whose lease ran out');
SELECT is((SELECT k FROM dblink('other', format($$SELECT key_value FROM %s WHERE namespace = 'lease-purge'$$, current_setting('idem_test.store')))
           AS t(k text)), 'running', '  and keeps the one whose lease still runs');

-- A lease is a length of time, whatever the purger's time zone: here one in
-- which the clocks went forward 25 days ago (a POSIX zone whose summer time
-- starts then), where 50 calendar days from the claim end an hour early.
SELECT * FROM dblink('other', $$SELECT namespace FROM idempotency.idem_namespace_configure('lease-dst', in_progress_lease => '50 days 00:30')$$) AS t(ns text);
SELECT pg_temp.abandoned('lease-dst', 'running', '1200 hours', '-1 second');
SELECT dblink_exec('other', format('SET TimeZone = %L', format('AAA-10BBB,J%s/0,J%s/0',
         least(365, extract(doy FROM now() - interval '25 days')::int),
         (least(365, extract(doy FROM now() - interval '25 days')::int) + 179) % 365 + 1)));
SELECT is((SELECT n FROM dblink('other', $$SELECT idempotency.idem_purge()$$) AS t(n bigint)), 0::bigint,
          'purge keeps a record whose lease runs, in any time zone');
SELECT dblink_exec('other', 'RESET TimeZone');

-- (lease-own is this transaction's to remove: bound to a store, its row was
-- there before and this transaction has changed it.)
SELECT dblink_exec('other', $$DELETE FROM idempotency.idem_namespace_config WHERE namespace LIKE 'lease-%' AND namespace <> 'lease-own'$$);
SELECT dblink_disconnect('other');
SELECT * FROM finish();
ROLLBACK;
-- What the other session committed goes once this transaction has let go of it.
DELETE FROM pg_temp.records WHERE namespace LIKE 'lease-%';
\ir unbind.psql
