# 015_metrics.pl: with the library in shared_preload_libraries, idem_metrics
# counts per namespace what idem_stats counts for the server (each begin
# outcome, transition, wait and the time waited, takeover, recovery point,
# release, purged row: through the direct path and through SQL), shows the
# claims of open transactions in flight with their age, keeps at most
# idempotency.tracked_namespaces namespaces apart (the rest, and a namespace
# named _other, under _other, per database), forgets them on
# idem_stats_reset, counts nothing with track_counters off, and starts empty
# after a restart.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('metrics');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'idempotency'\nidempotency.tracked_namespaces = 5");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idempotency');

my $counters = 'begins_fresh, begins_in_flight, begins_prior_result, begins_prior_error, begins_mismatch, '
  . 'commits, permanent_failures, transient_failures, waits, takeovers, recovery_points, released_keys, purged_rows';
# The counters of namespace ns in database db, '|'-separated; all NULL
# ($uncounted) for a namespace the counters do not keep apart.
my $uncounted = '|' x 12;
sub counted {
	my ($ns, $db) = @_;
	return $node->safe_psql($db // 'postgres',
		"SELECT $counters FROM idempotency.idem_metrics WHERE scope = 'namespace' AND namespace = '$ns'");
}
is($node->safe_psql('postgres', q{SELECT counters_on FROM idempotency.idem_metrics WHERE scope = 'database'}),
	't', 'counters are on');
is($node->safe_psql('postgres', q{SELECT string_agg(namespace, ',') FROM idempotency.idem_metrics WHERE scope = 'namespace'}),
	'_other', 'at first only _other, the overflow row, is shown');
is(counted('_other'), '0|0|0|0|0|0|0|0|0|0|0|0|0', '  with zeros');

# Namespace a: fresh + commit, a replay, a mismatch. Namespace b: fresh +
# permanent failure, a replayed error, fresh + transient failure, fresh +
# commit, and one purged row (an expired record).
$node->safe_psql('postgres', q{
	BEGIN;
	SELECT idempotency.idem_begin('a', 'k1', '{"x": 1}');
	SELECT idempotency.idem_commit('a', 'k1', '{}');
	COMMIT;
	SELECT idempotency.idem_begin('a', 'k1', '{"x": 1}');
	SELECT idempotency.idem_begin('a', 'k1', '{"x": 2}');
	BEGIN;
	SELECT idempotency.idem_begin('b', 'k1', '{}');
	SELECT idempotency.idem_fail_permanent('b', 'k1', '{"class_tag": "E", "message": "no"}');
	COMMIT;
	SELECT idempotency.idem_begin('b', 'k1', '{}');
	BEGIN;
	SELECT idempotency.idem_begin('b', 'k2', '{}', '1 microsecond');
	SELECT idempotency.idem_fail_transient('b', 'k2');
	SELECT idempotency.idem_begin('b', 'k2', '{}', '1 microsecond');
	SELECT idempotency.idem_commit('b', 'k2', '{}');
	COMMIT;
	SELECT pg_sleep(0.01);
	SELECT idempotency.idem_purge();});
is(counted('a'), '1|0|1|0|1|1|0|0|0|0|0|0|0', 'namespace a: fresh, replay, mismatch, commit');
is(counted('b'), '3|0|0|1|0|1|1|1|0|0|0|0|1', 'namespace b: its outcomes, transitions and purged row');
is($node->safe_psql('postgres', q{SELECT begin_fresh, commits, purged_rows FROM idempotency.idem_stats}),
	'4|2|1', 'the server-wide counters count the same calls');

# A wait: a holder keeps a key of namespace a; one caller answers in_flight
# at once, another waits until the holder commits, then replays.
my $holder = $node->background_psql('postgres');
$holder->query_safe(q{BEGIN; SELECT idempotency.idem_begin('a', 'held', '{}');});
# The holder's open claim is in flight, with its age; no row shows it.
$node->poll_query_until('postgres',
	q{SELECT claims_in_flight = 1 AND oldest_claim_age_seconds > 0.2 AND records_in_progress = 0
	  FROM idempotency.idem_metrics WHERE namespace = 'a'})
  or die 'the open claim is not shown';
pass('an open transaction\'s claim is in flight, with its age, though no row shows it');
$node->safe_psql('postgres', q{SELECT idempotency.idem_begin('a', 'held', '{}')});
my $waiter = $node->background_psql('postgres');
$waiter->query_until(qr/waiting/, q{
	\echo waiting
	SELECT kind FROM idempotency.idem_begin('a', 'held', '{}', in_flight_wait => '60s');
});
$node->poll_query_until('postgres',
	q{SELECT count(*) = 1 FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 18756 AND NOT granted})
  or die 'the waiter never waited';
$node->safe_psql('postgres', 'SELECT pg_sleep(0.3)');
$holder->query_safe(q{SELECT idempotency.idem_commit('a', 'held', '{}'); COMMIT;});
$holder->quit;
$waiter->quit;
is(counted('a'), '2|1|2|0|1|2|0|0|1|0|0|0|0', 'namespace a: the in_flight answer, the wait, the replay after it');
ok($node->safe_psql('postgres', q{SELECT wait_seconds BETWEEN 0.3 AND 30 FROM idempotency.idem_metrics WHERE namespace = 'a'}) eq 't',
	'  and how long the waiter waited');
is($node->safe_psql('postgres', q{SELECT claims_in_flight, oldest_claim_age_seconds IS NULL FROM idempotency.idem_metrics WHERE namespace = 'a'}),
	'0|t', 'the claim is no longer in flight once its transaction ended');

# A takeover and a recovery point under a lease: a holder records a point
# and commits its claim unfinished; past the lease a retry takes it over.
# An operator then releases the finished key.
$node->safe_psql('postgres', q{
	SELECT idempotency.idem_namespace_configure('leased', in_progress_lease => '1 second');
	CREATE TABLE fence (f bigint);
	BEGIN;
	INSERT INTO fence SELECT fence FROM idempotency.idem_begin('leased', 'job', '{}');
	SELECT idempotency.idem_save_point('leased', 'job', 'charged', '{}', (SELECT f FROM fence));
	COMMIT;});
is($node->safe_psql('postgres', q{SELECT claims_in_flight, records_in_progress FROM idempotency.idem_metrics WHERE namespace = 'leased'}),
	'1|1', 'a claim committed unfinished is in flight, as its row');
$node->safe_psql('postgres', q{
	SELECT pg_sleep(1.1);
	BEGIN;
	SELECT kind, takeover FROM idempotency.idem_begin('leased', 'job', '{}');
	SELECT idempotency.idem_commit('leased', 'job', '{}');
	COMMIT;
	SELECT idempotency.idem_release_key('leased', 'job');});
is(counted('leased'), '2|0|0|0|0|1|0|0|0|1|1|1|0', 'namespace leased: the takeover, the recovery point, the release');
is($node->safe_psql('postgres', q{SELECT lease_seconds, records_taken_over FROM idempotency.idem_metrics WHERE namespace = 'leased'}),
	'1|0', 'its lease; no record taken over is left (the release removed it)');

# Purged rows through SQL: a bound store with a trigger of its owner's is
# purged by statements, not directly.
$node->safe_psql('postgres', q{
	CREATE SCHEMA svc;
	SELECT idempotency.idem_create_store('svc.records');
	CREATE FUNCTION svc.noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN OLD; END $$;
	CREATE TRIGGER noop BEFORE DELETE ON svc.records FOR EACH ROW EXECUTE FUNCTION svc.noop();
	SELECT idempotency.idem_bind_store('bound', 'svc.records');
	BEGIN;
	SELECT idempotency.idem_begin('bound', 'k' || g, '{}', '1 microsecond') FROM generate_series(1, 3) g;
	SELECT idempotency.idem_commit('bound', 'k' || g, '{}') FROM generate_series(1, 3) g;
	COMMIT;
	SELECT pg_sleep(0.01);
	SELECT idempotency.idem_purge();});
is(counted('bound'), '3|0|0|0|0|3|0|0|0|0|0|0|3', 'namespace bound: purged through SQL, counted per namespace');

# Five namespaces are kept apart (a, b, leased, bound, and one more); the
# sixth counts under _other, as does a namespace named _other. Another
# database has its own rows, its overflow its own _other.
$node->safe_psql('postgres', q{
	BEGIN;
	SELECT idempotency.idem_begin('fifth', 'k', '{}'); SELECT idempotency.idem_commit('fifth', 'k', '{}');
	SELECT idempotency.idem_begin('sixth', 'k', '{}'); SELECT idempotency.idem_commit('sixth', 'k', '{}');
	SELECT idempotency.idem_begin('_other', 'k', '{}'); SELECT idempotency.idem_commit('_other', 'k', '{}');
	COMMIT;});
is(counted('fifth'), '1|0|0|0|0|1|0|0|0|0|0|0|0', 'the fifth namespace is kept apart');
is(counted('_other'), '2|0|0|0|0|2|0|0|0|0|0|0|0', 'the sixth and "_other" count under _other');
is($node->safe_psql('postgres', q{SELECT count(*) FROM idempotency.idem_metrics WHERE scope = 'namespace'}),
	'6', 'the view shows the five and _other (the sixth has records, but no row of its own)');
is($node->safe_psql('postgres', q{SELECT records_committed FROM idempotency.idem_metrics WHERE namespace = '_other'}),
	'2', '  _other sums the records of the namespaces past the five');
$node->safe_psql('postgres', 'CREATE DATABASE other');
$node->safe_psql('other', q{
	CREATE EXTENSION idempotency;
	BEGIN;
	SELECT idempotency.idem_begin('a', 'k', '{}'); SELECT idempotency.idem_commit('a', 'k', '{}');
	COMMIT;});
is(counted('a', 'other'), $uncounted, 'the table is full: another database\'s namespace counts under its own _other');
is(counted('_other', 'other'), '1|0|0|0|0|1|0|0|0|0|0|0|0', '  which that database alone shows');

# A reset forgets the namespaces; with track_counters off nothing counts.
$node->safe_psql('postgres', 'SELECT idempotency.idem_stats_reset()');
is($node->safe_psql('postgres', q{SELECT string_agg(namespace || ':' || coalesce(begins_fresh::text, '-'), ',' ORDER BY namespace)
	FROM idempotency.idem_metrics WHERE scope = 'namespace'}),
	'_other:0,a:-,b:-,bound:-,fifth:-,leased:-',
	'after a reset: the namespaces are shown (registered, or with records) without counters until counted again');
$node->safe_psql('other', q{BEGIN; SELECT idempotency.idem_begin('a', 'k2', '{}'); ROLLBACK;});
is(counted('a', 'other'), '1|0|0|0|0|0|0|0|0|0|0|0|0', 'the freed rows take namespaces again (a rolled-back begin counts)');
$node->safe_psql('postgres', q{
	SET idempotency.track_counters = off;
	BEGIN; SELECT idempotency.idem_begin('a', 'quiet', '{}'); ROLLBACK;});
is(counted('a'), $uncounted, 'track_counters = off counts nothing');

# Only pg_monitor's members read the view.
$node->safe_psql('postgres', q{
	CREATE ROLE watcher LOGIN IN ROLE pg_monitor;
	CREATE ROLE app LOGIN;
	GRANT USAGE ON SCHEMA idempotency TO app;});
is($node->safe_psql('postgres', q{SELECT count(*) > 0 FROM idempotency.idem_metrics}, extra_params => ['-U', 'watcher']),
	't', 'pg_monitor reads it');
my ($ret, $out, $err) = $node->psql('postgres', 'SELECT * FROM idempotency.idem_metrics', extra_params => ['-U', 'app']);
like($err, qr/permission denied for view idem_metrics/, 'another role does not');

$node->restart;
is($node->safe_psql('postgres', q{SELECT string_agg(namespace, ',' ORDER BY namespace) FROM idempotency.idem_metrics
	WHERE scope = 'namespace' AND begins_fresh IS NOT NULL}), '_other', 'counters start empty after a restart');
$node->stop;
done_testing();
