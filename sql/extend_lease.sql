-- extend_lease: idem_extend_lease, a holder's heartbeat. In a namespace
-- with an in_progress_lease a claim may outlive its transaction and is taken
-- over once the lease has run out; the holder that still works moves its
-- lease on with its fence, and is not taken over. Fenced as the transitions
-- are; refused without a lease and for a record not in progress.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idempotency;
RESET client_min_messages;
SET search_path = public, idempotency;
DELETE FROM idempotency_record;
SELECT namespace FROM idem_namespace_configure('hb', in_progress_lease => '1 hour');

-- A claim committed unfinished (a worker's first phase); its fence.
SELECT fence AS hb_fence FROM idem_begin('hb', 'job-1', '{"n": 1}') \gset
-- The claim is two hours old: its lease ran out. A heartbeat now moves it
-- on (to an hour from now) ...
UPDATE idempotency_record SET updated_at = now() - interval '2 hours' WHERE namespace = 'hb';
SELECT idem_extend_lease('hb', 'job-1', :hb_fence) - clock_timestamp() BETWEEN interval '59 minutes' AND interval '1 hour'
    AS lease_runs_an_hour;
-- ... so a retry finds it in flight instead of taking it over.
SELECT kind, attempt FROM idem_begin('hb', 'job-1', '{"n": 1}');
-- Without the heartbeat the lease runs out and a retry takes the claim over
-- (attempt 2, a new fence); the old holder's heartbeat is then refused.
UPDATE idempotency_record SET updated_at = now() - interval '2 hours' WHERE namespace = 'hb';
SELECT kind, attempt, fence <> :hb_fence AS new_fence FROM idem_begin('hb', 'job-1', '{"n": 1}');
SELECT idem_extend_lease('hb', 'job-1', :hb_fence);
-- The new holder's fence works; a finished record has no lease.
SELECT fence AS hb_fence2 FROM idempotency_record WHERE namespace = 'hb' AND key_value = 'job-1' \gset
SELECT idem_extend_lease('hb', 'job-1', :hb_fence2) > now() AS extended;
SELECT idem_commit('hb', 'job-1', '{"done": true}', :hb_fence2);
SELECT idem_extend_lease('hb', 'job-1', :hb_fence2);
-- A key without a record; a namespace without a lease; NULL in, NULL out;
-- a bad fence.
SELECT idem_extend_lease('hb', 'nothing', :hb_fence2);
SELECT idem_extend_lease('no-lease', 'k', :hb_fence2);
SELECT idem_extend_lease('hb', 'job-1', NULL) IS NULL AS null_fence;
SELECT idem_extend_lease('hb', 'job-1', 7);
-- The claim's replay window moves with its lease: a claim kept alive past
-- the window it began with, then finished, replays for a window from its
-- last heartbeat (not purged at once, its retry answered fresh).
SELECT fence AS hb_fence3 FROM idem_begin('hb', 'job-2', '{"n": 2}', replay_window => '2 hours') \gset
UPDATE idempotency_record SET created_at = now() - interval '130 minutes', updated_at = now() - interval '130 minutes',
                              expires_at = now() - interval '10 minutes'
WHERE namespace = 'hb' AND key_value = 'job-2';
SELECT idem_extend_lease('hb', 'job-2', :hb_fence3) > now() AS extended;
SELECT expires_at - clock_timestamp() BETWEEN interval '119 minutes' AND interval '2 hours' AS window_from_now
FROM idempotency_record WHERE namespace = 'hb' AND key_value = 'job-2';
SELECT idem_commit('hb', 'job-2', '{"done": 2}', :hb_fence3);
SELECT idem_purge() AS purged;
SELECT kind, result FROM idem_begin('hb', 'job-2', '{"n": 2}');
DELETE FROM idempotency_record;
SELECT idem_namespace_drop('hb');
