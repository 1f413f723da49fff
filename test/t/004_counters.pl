# 004_counters.pl: with the library in shared_preload_libraries, idem_stats
# counts every begin outcome, commit, failure, wait and purged row across
# sessions; idem_stats_reset zeroes them; idempotency.track_counters = off
# stops counting; the counters live in memory and start at zero after a
# restart.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('counters');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idempotency');

my $columns = 'begin_fresh, begin_in_flight, begin_prior_result, begin_prior_error, begin_mismatch, '
  . 'commits, permanent_failures, transient_failures, waits, purged_rows';
sub counters { return $node->safe_psql('postgres', "SELECT $columns FROM idempotency.idem_stats"); }

is($node->safe_psql('postgres', 'SELECT counters_on FROM idempotency.idem_stats'), 't', 'counters are on');
is(counters(), '0|0|0|0|0|0|0|0|0|0', 'they start at zero');

# One of everything, from separate sessions: 4 fresh (a, b, c, d), a
# commit, a permanent and a transient failure, a replay, a replayed error,
# a mismatch, one expired row purged.
$node->safe_psql('postgres', q{
	BEGIN;
	SELECT idempotency.idem_begin('n', 'a', '{"x": 1}');
	SELECT idempotency.idem_commit('n', 'a', '{"ok": true}');
	COMMIT;});
$node->safe_psql('postgres', q{
	BEGIN;
	SELECT idempotency.idem_begin('n', 'b', '{"x": 1}');
	SELECT idempotency.idem_fail_permanent('n', 'b', '{"class_tag": "E", "message": "no"}');
	COMMIT;});
$node->safe_psql('postgres', q{
	BEGIN;
	SELECT idempotency.idem_begin('n', 'c', '{"x": 1}', '1 microsecond');
	SELECT idempotency.idem_fail_transient('n', 'c');
	SELECT idempotency.idem_begin('n', 'c', '{"x": 1}', '1 microsecond');
	SELECT idempotency.idem_commit('n', 'c', '{}');
	COMMIT;});
$node->safe_psql('postgres', q{
	SELECT idempotency.idem_begin('n', 'a', '{"x": 1}');
	SELECT idempotency.idem_begin('n', 'b', '{"x": 1}');
	SELECT idempotency.idem_begin('n', 'a', '{"x": 2}');
	SELECT pg_sleep(0.01);
	SELECT idempotency.idem_purge();});
is(counters(), '4|0|1|1|1|2|1|1|0|1', 'each outcome, transition and purged row counted once');

# in_flight and a wait: a second session begins the key a first one holds,
# once without waiting and once waiting until the holder commits.
my $holder = $node->background_psql('postgres');
$holder->query_safe(q{BEGIN; SELECT idempotency.idem_begin('n', 'held', '{}');});
$node->safe_psql('postgres', q{SELECT idempotency.idem_begin('n', 'held', '{}')});
my $waiter = $node->background_psql('postgres');
$waiter->query_until(qr/waiting/, q{
	\echo waiting
	SELECT kind FROM idempotency.idem_begin('n', 'held', '{}', in_flight_wait => '60s');
});
# 'n' has no lease: the holder's claim is its key's lock, held to its
# transaction's end (one write per fresh attempt), and the waiter waits on
# that lock (advisory, objsubid 18756), not on the holder's transaction id.
$node->poll_query_until('postgres',
	q{SELECT count(*) = 1 FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 18756 AND NOT granted})
  or die 'the waiter never waited';
$holder->query_safe(q{SELECT idempotency.idem_commit('n', 'held', '{}'); COMMIT;});
$holder->quit;
$waiter->quit;
is(counters(), '5|1|2|1|1|3|1|1|1|1',
	'in_flight counted for the caller that did not wait; the wait counted, then the replay the waiter got');

# Reset, then counting off for a session.
# (In a parallel worker: the reset is PARALLEL SAFE, and must work there.)
$node->safe_psql('postgres', q{
	SET parallel_setup_cost = 0;
	SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
	                       THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END, 'on', false);
	SELECT idempotency.idem_stats_reset();});
is(counters(), '0|0|0|0|0|0|0|0|0|0', 'reset zeroes every counter');
ok($node->safe_psql('postgres', 'SELECT stats_reset > now() - interval \'1 minute\' FROM idempotency.idem_stats') eq 't',
	'stats_reset moves to the reset');
$node->safe_psql('postgres', q{
	SET idempotency.track_counters = off;
	BEGIN;
	SELECT idempotency.idem_begin('n', 'quiet', '{}');
	ROLLBACK;});
is(counters(), '0|0|0|0|0|0|0|0|0|0', 'track_counters = off counts nothing');
$node->safe_psql('postgres', q{BEGIN; SELECT idempotency.idem_begin('n', 'loud', '{}'); ROLLBACK;});
is(counters(), '1|0|0|0|0|0|0|0|0|0', 'other sessions still count');

# An operator's release of a key: counted in released_keys, and logged with
# the role that did it (the key by its label, never itself).
$node->safe_psql('postgres', q{
	BEGIN;
	SELECT idempotency.idem_begin('n', 'poisoned', '{}');
	SELECT idempotency.idem_commit('n', 'poisoned', '{"bug": true}');
	COMMIT;});
my $log_offset = -s $node->logfile;
is($node->safe_psql('postgres', q{SELECT idempotency.idem_release_key('n', 'poisoned')}), 'committed',
	'idem_release_key removes the record and says what it was');
is($node->safe_psql('postgres', q{SELECT released_keys FROM idempotency.idem_stats}), '1', '  counted in released_keys');
ok($node->log_contains(
		qr/idempotency: key sha256:[0-9a-f]{12}\.\.\. of namespace "n" released by role "\w+" \(session role "\w+"\), effective if its transaction commits; its record was committed/,
		$log_offset),
	'  and logged with the role, the key by its label');
unlike(slurp_file($node->logfile, $log_offset) =~ s/^.*LOG:  statement: .*$//mgr, qr/poisoned/,
	'  never the key itself: the line comes without its statement (only log_statement logs that here)');

# A store that purge or the statistics skip (its owner's trigger raises on
# DELETE, its row security raises on SELECT): counted in stores_skipped.
$node->safe_psql('postgres', q{
	CREATE ROLE svc; CREATE SCHEMA svc AUTHORIZATION svc; GRANT USAGE ON SCHEMA idempotency TO svc;
	SET ROLE svc;
	SELECT idempotency.idem_create_store('svc.store');
	RESET ROLE;
	SELECT idempotency.idem_bind_store('svc', 'svc.store');
	BEGIN;
	SELECT idempotency.idem_begin('svc', 'k', '{}', replay_window => '1 millisecond');
	SELECT idempotency.idem_commit('svc', 'k', '{}');
	COMMIT;
	SET ROLE svc;
	CREATE FUNCTION svc.no() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no'; END $$;
	CREATE TRIGGER no BEFORE DELETE ON svc.store FOR EACH ROW EXECUTE FUNCTION svc.no();
	CREATE FUNCTION svc.deny(text) RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no'; END $$;
	ALTER TABLE svc.store ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
	CREATE POLICY deny ON svc.store USING (svc.deny(namespace));});
is($node->safe_psql('postgres', q{SELECT stores_skipped FROM idempotency.idem_stats}), '0', 'no store skipped yet');
$node->safe_psql('postgres', q{SELECT pg_sleep(0.01); SELECT idempotency.idem_purge(); SELECT count(*) FROM idempotency.idem_namespace_stats});
is($node->safe_psql('postgres', q{SELECT stores_skipped FROM idempotency.idem_stats}), '2',
	'a purge and a statistics read that skipped the store count in stores_skipped');

# A non-superuser cannot turn counting off for itself or reset the counters.
$node->safe_psql('postgres', 'CREATE ROLE app LOGIN; GRANT USAGE ON SCHEMA idempotency TO app');
my ($ret, $out, $err) = $node->psql('postgres', 'SET idempotency.track_counters = off', extra_params => ['-U', 'app']);
like($err, qr/permission denied to set parameter "idempotency.track_counters"/, 'track_counters is for superusers');
($ret, $out, $err) = $node->psql('postgres', 'SELECT idempotency.idem_stats_reset()', extra_params => ['-U', 'app']);
like($err, qr/permission denied for function idem_stats_reset/, 'reset is for superusers');

$node->restart;
is(counters(), '0|0|0|0|0|0|0|0|0|0', 'counters start at zero after a restart');
$node->stop;
done_testing();
