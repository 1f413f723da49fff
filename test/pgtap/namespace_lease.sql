-- namespace_lease: the in_progress lease from the caller's side. Records
-- that another session committed in progress (the asynchronous pattern)
-- are made through dblink and aged there. No lease (the default) never takes
-- one over; the GUC gives unregistered namespaces a lease and a namespace's
-- own setting (0 included) overrides it; a taken-over record is attempt 2
-- and can be finished; this transaction's own record is never taken over.
BEGIN;
SET search_path = idempotency, public;
SELECT plan(11);

SELECT dblink_connect('other', format('host=%s port=%s dbname=%s user=%s',
         split_part(current_setting('unix_socket_directories'), ',', 1),
         current_setting('port'), current_database(), current_user));
-- Begins key k of namespace ns in the other session, committed, and ages it.
CREATE FUNCTION pg_temp.abandoned(ns text, k text, age interval) RETURNS void LANGUAGE sql AS $$
    SELECT dblink_exec('other', format(
        $f$SELECT idempotency.idem_begin(%L, %L, '{"job": 1}');
           UPDATE idempotency.idempotency_record SET updated_at = now() - %L::interval
           WHERE namespace = %L AND key_value = %L$f$, ns, k, age, ns, k));
$$;
SELECT pg_temp.abandoned('lease-none', 'k', '10 days');
SELECT pg_temp.abandoned('lease-guc', 'k', '10 minutes');
SELECT pg_temp.abandoned('lease-zero', 'k', '10 minutes');
SELECT pg_temp.abandoned('lease-own', 'k', '10 minutes');

SELECT is((SELECT kind::text || ' ' || (age > interval '9 days')::text FROM idem_begin('lease-none', 'k', '{"job": 1}')),
          'in_flight true', 'no lease: ten days old and still in flight, with its age');

SET LOCAL idempotency.in_progress_lease = '5min';
SELECT is((SELECT kind::text || ' ' || attempt FROM idem_begin('lease-guc', 'k', '{"job": 1}')),
          'fresh 2', 'the GUC lease: an unregistered namespace''s record is taken over as attempt 2');
SELECT is((SELECT attempt FROM idempotency_record WHERE namespace = 'lease-guc'), 2, '  the record says attempt 2');
SELECT ok((SELECT updated_at BETWEEN now() AND clock_timestamp() FROM idempotency_record WHERE namespace = 'lease-guc'),
          '  and began at the taking statement''s time');
SELECT lives_ok($$SELECT idem_commit('lease-guc', 'k', '{"done": true}')$$, '  the taker commits the outcome');
SELECT is((SELECT kind::text FROM idem_begin('lease-guc', 'k', '{"job": 1}')), 'prior_result', '  which then replays');
SELECT is((SELECT kind::text FROM idem_begin('lease-guc', 'k', '{"job": 2}')), 'mismatch',
          '  another request under the key is still a mismatch');

SELECT idem_namespace_configure('lease-zero', in_progress_lease => '0');
SELECT is((SELECT kind::text FROM idem_begin('lease-zero', 'k', '{"job": 1}')), 'in_flight',
          'a namespace lease of 0 overrides the GUC: never taken over');

-- This transaction's own record: past the lease, still in flight (taking it
-- over would run the work twice in one transaction).
SELECT is((SELECT kind::text FROM idem_begin('lease-own', 'k', '{"job": 1}')), 'fresh', 'a taker gets lease-own');
UPDATE idempotency_record SET updated_at = now() - interval '1 hour' WHERE namespace = 'lease-own';
SELECT is((SELECT kind::text FROM idem_begin('lease-own', 'k', '{"job": 1}')), 'in_flight',
          'its own record, past the lease, is not taken over again');
SELECT is((SELECT attempt FROM idempotency_record WHERE namespace = 'lease-own'), 2, '  and stays attempt 2');

SELECT dblink_disconnect('other');
SELECT * FROM finish();
ROLLBACK;
-- What the other session committed goes once this transaction has let go of it.
DELETE FROM idempotency.idempotency_record WHERE namespace LIKE 'lease-%';
