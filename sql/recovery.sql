-- recovery: recovery points for work that spans several transactions
-- (Stripe's atomic phases). In a namespace with an in_progress_lease the
-- holder records how far its work got with its fence (idem_save_point);
-- a begin that takes the abandoned claim over answers fresh with takeover
-- true and that point, so the new attempt resumes after it. in_flight and
-- fresh answers say when the lease ends; idem_http_response turns it into
-- Retry-After.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
RESET client_min_messages;
SET search_path = public, idempotency;
DELETE FROM idempotency_record;
SELECT namespace FROM idem_namespace_configure('rp', in_progress_lease => '1 hour');

-- A first claim: not a takeover, no point, its lease an hour from now.
SELECT fence AS rp_fence, kind, attempt, takeover, recovery_point IS NULL AS no_point,
       recovery_state IS NULL AS no_state,
       lease_ends_at - clock_timestamp() BETWEEN interval '59 minutes' AND interval '1 hour' AS lease_an_hour
FROM idem_begin('rp', 'pay-1', '{"amount": 100}') \gset
SELECT :'kind' AS kind, :attempt AS attempt, :'takeover' AS takeover, :'no_point' AS no_point,
       :'no_state' AS no_state, :'lease_an_hour' AS lease_an_hour;
-- The holder records its phases; each is a heartbeat and returns the lease end.
SELECT idem_save_point('rp', 'pay-1', 'started', NULL, :rp_fence) - clock_timestamp()
       BETWEEN interval '59 minutes' AND interval '1 hour' AS lease_an_hour;
SELECT idem_save_point('rp', 'pay-1', 'charged', '{"charge_id": "ch_1"}', :rp_fence) > now() AS recorded;
SELECT recovery_point, recovery_state FROM idempotency_record WHERE namespace = 'rp' AND key_value = 'pay-1';
-- While the lease runs a retry is in flight, and says until when.
SELECT kind, lease_ends_at - clock_timestamp() BETWEEN interval '59 minutes' AND interval '1 hour' AS lease_an_hour,
       takeover, recovery_point
FROM idem_begin('rp', 'pay-1', '{"amount": 100}');
SELECT status, headers->>'Retry-After' AS retry_after
FROM idem_http_response(idem_begin('rp', 'pay-1', '{"amount": 100}'));
-- The holder dies; its lease runs out. The retry takes the claim over and
-- is told so, with the last point and its state: it resumes after the
-- charge instead of charging again.
UPDATE idempotency_record SET updated_at = now() - interval '2 hours' WHERE namespace = 'rp';
SELECT fence AS rp_fence2, kind, attempt, takeover, recovery_point, recovery_state, fence <> :rp_fence AS new_fence
FROM idem_begin('rp', 'pay-1', '{"amount": 100}') \gset
SELECT :'kind' AS kind, :attempt AS attempt, :'takeover' AS takeover, :'recovery_point' AS recovery_point,
       :'recovery_state' AS recovery_state, :'new_fence' AS new_fence;
-- The takeover keeps the point; the old holder can no longer record one.
SELECT recovery_point, recovery_state FROM idempotency_record WHERE namespace = 'rp' AND key_value = 'pay-1';
SELECT idem_save_point('rp', 'pay-1', 'charged', '{"charge_id": "ch_2"}', :rp_fence);
-- The new holder records its own phase and finishes; the record replays.
SELECT idem_save_point('rp', 'pay-1', 'recorded', '{"charge_id": "ch_1", "ride": 7}', :rp_fence2) > now() AS recorded;
SELECT idem_commit('rp', 'pay-1', '{"ride": 7}', :rp_fence2);
SELECT kind, result, takeover, recovery_point, lease_ends_at FROM idem_begin('rp', 'pay-1', '{"amount": 100}');
-- A point on a finished record, on a key without a record, under a
-- namespace without a lease, with another request's claim: refused.
SELECT idem_save_point('rp', 'pay-1', 'late', NULL, :rp_fence2);
SELECT idem_save_point('rp', 'nothing', 'p', NULL, :rp_fence2);
SELECT idem_save_point('no-lease', 'k', 'p', NULL, :rp_fence2);
-- A takeover of a claim that recorded no point: takeover true, no point.
SELECT fence AS rp_fence3 FROM idem_begin('rp', 'pay-2', '{"amount": 5}') \gset
UPDATE idempotency_record SET updated_at = now() - interval '2 hours' WHERE namespace = 'rp' AND key_value = 'pay-2';
SELECT kind, attempt, takeover, recovery_point IS NULL AS no_point, recovery_state IS NULL AS no_state
FROM idem_begin('rp', 'pay-2', '{"amount": 5}');
-- The direct path too: a record with a point is kept, and one taken over
-- (pay-2, above); one without either is forgotten.
SELECT idem_fail_transient('rp', 'pay-2', :rp_fence3);
SELECT idem_fail_transient('rp', 'pay-2', (SELECT fence FROM idempotency_record WHERE key_value = 'pay-2'));
SELECT fence AS rp_fence7 FROM idem_begin('rp', 'pay-7', '{"amount": 7}') \gset
SELECT idem_fail_transient('rp', 'pay-7', :rp_fence7);
SELECT count(*) AS forgotten FROM idempotency_record WHERE key_value = 'pay-7';
SELECT fence AS rp_fence5 FROM idem_begin('rp', 'pay-5', '{"amount": 5}') \gset
SELECT idem_save_point('rp', 'pay-5', 'charged', '{"charge_id": "ch_5"}', :rp_fence5) > now() AS recorded;
SELECT idem_fail_transient('rp', 'pay-5', :rp_fence5);
BEGIN;
SELECT kind, takeover FROM idem_begin('rp', 'pay-6', '{"amount": 6}');
SELECT idem_save_point('rp', 'pay-6', 'charged', NULL, fence) > now() AS recorded FROM idempotency_record WHERE key_value = 'pay-6';
SELECT idem_fail_transient('rp', 'pay-6');
ROLLBACK;
SELECT recovery_point FROM idempotency_record WHERE key_value = 'pay-5';
-- Bad arguments change nothing: NULL and blank points, control
-- characters, a point too long, a NULL or bad fence, NULL namespace or key.
SELECT fence AS rp_fence4 FROM idempotency_record WHERE namespace = 'rp' AND key_value = 'pay-2' \gset
SELECT idem_save_point('rp', 'pay-2', NULL, NULL, :rp_fence4);
SELECT idem_save_point('rp', 'pay-2', '', NULL, :rp_fence4);
SELECT idem_save_point('rp', 'pay-2', E'a\nb', NULL, :rp_fence4);
SELECT idem_save_point('rp', 'pay-2', repeat('p', 256), NULL, :rp_fence4);
SELECT idem_save_point('rp', 'pay-2', 'p', NULL, NULL);
SELECT idem_save_point('rp', 'pay-2', 'p', NULL, 7);
SELECT idem_save_point(NULL, 'pay-2', 'p', NULL, :rp_fence4);
SELECT idem_save_point('rp', NULL, 'p', NULL, :rp_fence4);
SELECT recovery_point IS NULL AS unchanged FROM idempotency_record WHERE namespace = 'rp' AND key_value = 'pay-2';
-- A state larger than the namespace's max_payload_bytes is refused.
SELECT namespace FROM idem_namespace_configure('rp', in_progress_lease => '1 hour', max_payload_bytes => 64);
SELECT idem_save_point('rp', 'pay-2', 'big', jsonb_build_object('s', repeat('x', 100)), :rp_fence4);
SELECT namespace FROM idem_namespace_configure('rp', in_progress_lease => '1 hour');
-- A point with 255 characters (multibyte) and a NULL state are fine.
SELECT idem_save_point('rp', 'pay-2', repeat('é', 255), NULL, :rp_fence4) > now() AS recorded;
SELECT length(recovery_point), recovery_state FROM idempotency_record WHERE namespace = 'rp' AND key_value = 'pay-2';
-- In a namespace without a lease nothing outlives its transaction: no
-- lease end, and a first claim is no takeover.
BEGIN;
SELECT kind, takeover, lease_ends_at FROM idem_begin('no-lease', 'k2', '{}');
ROLLBACK;
-- In a read-only transaction a point is refused.
BEGIN READ ONLY;
SELECT idem_save_point('rp', 'pay-2', 'p', NULL, :rp_fence4);
ROLLBACK;
-- in_flight without a lease end keeps the given Retry-After.
SELECT headers->>'Retry-After' AS retry_after
FROM idem_http_response(ROW('in_flight', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::idem_outcome, 5);
-- A lease end already passed answers 1, never 0 or less.
SELECT headers->>'Retry-After' AS retry_after
FROM idem_http_response(ROW('in_flight', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, now() - interval '1 minute', NULL, NULL, NULL)::idem_outcome);
-- Retry-After counts from the clock when the response is made, not from
-- the statement's start (a handler that waited first).
CREATE FUNCTION pg_temp.late_response() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    o idem_outcome := jsonb_populate_record(NULL::idem_outcome,
        jsonb_build_object('kind', 'in_flight', 'lease_ends_at', clock_timestamp() + interval '10 seconds'));
BEGIN
    PERFORM pg_sleep(2);
    RETURN (SELECT headers->>'Retry-After' FROM idem_http_response(o));
END $$;
SELECT pg_temp.late_response() AS retry_after;
-- A lease end 90.2 s away answers 91.
SELECT headers->>'Retry-After' AS retry_after
FROM idem_http_response(ROW('in_flight', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, statement_timestamp() + interval '90.2 seconds', NULL, NULL, NULL)::idem_outcome);
-- A store the service owns of 0.7.0's shape (twelve columns) is refused,
-- with the ALTER TABLE that adds the recovery columns; once altered it
-- binds, and keeps recovery points.
CREATE TABLE public.rp_old (
    namespace text COLLATE "C" NOT NULL, key_value text COLLATE "C" NOT NULL, status text NOT NULL,
    request_hash bytea NOT NULL, request_payload jsonb, result_payload jsonb, error_payload jsonb,
    created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL, expires_at timestamptz NOT NULL,
    attempt integer NOT NULL DEFAULT 1, fence bigint, PRIMARY KEY (namespace, key_value));
SELECT namespace FROM idem_namespace_configure('rp-old', in_progress_lease => '1 hour');
SELECT idem_bind_store('rp-old', 'public.rp_old');
ALTER TABLE public.rp_old ADD COLUMN recovery_point text, ADD COLUMN recovery_state jsonb;
SELECT idem_bind_store('rp-old', 'public.rp_old');
SELECT fence AS old_fence FROM idem_begin('rp-old', 'pay-3', '{"amount": 3}') \gset
SELECT idem_save_point('rp-old', 'pay-3', 'charged', '{"charge_id": "ch_3"}', :old_fence) > now() AS recorded;
UPDATE public.rp_old SET updated_at = now() - interval '2 hours';
SELECT kind, attempt, takeover, recovery_point, recovery_state FROM idem_begin('rp-old', 'pay-3', '{"amount": 3}');
-- A record with a recovery point is not forgotten (idem_fail_transient):
-- its work had effects a retry must resume after. Written through SQL here
-- (the store has a column default an operator added, and another index):
-- a first claim still has no point, whatever the default.
ALTER TABLE public.rp_old ALTER COLUMN recovery_point SET DEFAULT 'charged';
CREATE INDEX ON public.rp_old (created_at);
SELECT fence AS old_fence FROM public.rp_old WHERE key_value = 'pay-3' \gset
SELECT idem_fail_transient('rp-old', 'pay-3', :old_fence);
SELECT fence AS sql_fence, recovery_point IS NULL AS no_point FROM idem_begin('rp-old', 'pay-4', '{"amount": 4}') \gset
SELECT :'no_point' AS no_point, recovery_point IS NULL AS none_stored FROM public.rp_old WHERE key_value = 'pay-4';
UPDATE public.rp_old SET updated_at = now() - interval '2 hours' WHERE key_value = 'pay-4';
SELECT kind, takeover, recovery_point IS NULL AS no_point FROM idem_begin('rp-old', 'pay-4', '{"amount": 4}');
-- A record taken over is not forgotten either: the attempt before may
-- have acted. A first attempt without a point is.
SELECT fence AS sql_fence FROM public.rp_old WHERE key_value = 'pay-4' \gset
SELECT idem_fail_transient('rp-old', 'pay-4', :sql_fence);
SELECT fence AS sql_fence FROM idem_begin('rp-old', 'pay-8', '{"amount": 8}') \gset
SELECT idem_fail_transient('rp-old', 'pay-8', :sql_fence);
SELECT count(*) AS forgotten FROM public.rp_old WHERE key_value = 'pay-8';
ALTER TABLE public.rp_old ALTER COLUMN recovery_point DROP DEFAULT;
-- Columns in the recovery columns' places that are not they: no fix but a
-- new table.
ALTER TABLE public.rp_old DROP COLUMN recovery_state, ADD COLUMN note text;
SELECT fence AS old_fence FROM public.rp_old WHERE key_value = 'pay-3' \gset
SELECT idem_save_point('rp-old', 'pay-3', 'charged', NULL, :old_fence);
DELETE FROM public.rp_old;
SELECT idem_bind_store('rp-old', NULL);
SELECT idem_namespace_drop('rp-old');
DROP TABLE public.rp_old;
-- 0.9's name, deprecated since 1.0.0 (the fence third), works as it did.
SELECT fence AS dep_fence FROM idem_begin('rp', 'pay-dep', '{"n": 1}') \gset
SELECT idem_record_point('rp', 'pay-dep', :dep_fence, 'charged', '{"charge_id": "ch_d"}') > now() AS recorded_by_the_old_name;
SELECT recovery_point, recovery_state FROM idempotency_record WHERE namespace = 'rp' AND key_value = 'pay-dep';
SELECT obj_description('idem_record_point(text,text,bigint,text,jsonb)'::regprocedure) AS deprecated;
DELETE FROM idempotency_record;
SELECT idem_namespace_drop('rp');
