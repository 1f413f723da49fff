# 002_exactly_once.pl: one effect per key under concurrent retries, and
# after crashes.
#
# Sixteen pgbench clients send requests for a few hundred keys, each request
# a retry of its key's one payload. A fresh attempt inserts a row into a
# business table inside the same transaction and then, at random, commits,
# fails permanently, fails transiently or rolls back. Every answer a client
# sees is logged in the same transaction. Then:
#   1. after the load: one business row per committed key and none for any
#      other, every result a client saw equal to the stored one, no
#      in_progress row, no mismatch;
#   2. a backend killed with SIGKILL between begin and commit: the crash
#      recovery leaves no trace of its attempt, and a retry gets fresh;
#   3. an immediate shutdown under the load: after recovery the checks of 1
#      hold again, and every key that has no finished record (the
#      interrupted ones among them) gets fresh.
# IDEM_LOAD_TRANSACTIONS (per client, default 1000) and IDEM_LOAD_KEYS
# (default 300) size the load; the figures are printed with diag().
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep);

my $clients = 16;
my $per_client = $ENV{IDEM_LOAD_TRANSACTIONS} // 1000;
my $keys = $ENV{IDEM_LOAD_KEYS} // 300;

my $node = PostgreSQL::Test::Cluster->new('exactly_once');
$node->init;
# Crash recovery is the point here: durable commits, a postmaster that
# restarts after a backend dies, and no statement log under load.
$node->append_conf('postgresql.conf', qq{
fsync = on
restart_after_crash = on
log_statement = none
max_connections = 40
});
$node->start;

$node->safe_psql('postgres', q{
	CREATE EXTENSION idempotency;
	-- The business effect: one row per successful attempt.
	CREATE TABLE business (id bigserial PRIMARY KEY, key text NOT NULL, nonce text NOT NULL);
	-- Every answer a client was given, in the transaction that got it.
	CREATE TABLE seen (key text NOT NULL, status text NOT NULL, payload jsonb);
});

# One request: begin (logged), then for a fresh attempt the work in a
# savepoint and one of four endings. 40% commit, 15% fail permanently, 20%
# fail transiently, 25% roll back; the payload is a function of the key.
my $script = $node->basedir . '/request.sql';
PostgreSQL::Test::Utils::append_to_file($script, qq{
\\set k :base + random(1, :nkeys)
\\set ending random(1, 100)
BEGIN;
WITH answer AS (
  SELECT * FROM idempotency.idem_begin('load', 'order-' || :k,
                                       jsonb_build_object('order', :k, 'amount_cents', :k * 100))
), logged AS (
  INSERT INTO seen SELECT 'order-' || :k, kind::text, coalesce(result, error) FROM answer RETURNING status
)
SELECT (status = 'fresh')::int AS fresh FROM logged \\gset
\\if :fresh
SAVEPOINT work;
INSERT INTO business (key, nonce) VALUES ('order-' || :k, md5(random()::text));
\\if :ending <= 40
WITH done AS (
  SELECT key, jsonb_build_object('row', id, 'nonce', nonce) AS result FROM business
  WHERE id = currval('business_id_seq')
), returned AS (
  INSERT INTO seen SELECT key, 'returned', result FROM done
)
SELECT idempotency.idem_commit('load', key, result) FROM done;
COMMIT;
\\elif :ending <= 55
ROLLBACK TO SAVEPOINT work;
SELECT idempotency.idem_fail_permanent('load', 'order-' || :k,
                                       '{"class_tag": "Declined", "message": "card declined"}');
COMMIT;
\\elif :ending <= 75
ROLLBACK TO SAVEPOINT work;
SELECT idempotency.idem_fail_transient('load', 'order-' || :k);
COMMIT;
\\else
ROLLBACK;
\\endif
\\else
COMMIT;
\\endif
});

# Runs pgbench with the request script over keys base + 1 .. base + nkeys,
# for a number of transactions per client or of seconds; returns its harness (started) and
# a reference to its output.
sub start_load
{
	my ($base, $nkeys, $transactions, $seconds) = @_;
	my ($out, $err) = ('', '');
	my @limit = defined $seconds ? ('-T', $seconds) : ('-t', $transactions);
	my $h = IPC::Run::start(
		[ 'pgbench', '-n', '-c', $clients, '-j', 4, @limit, '-D', "base=$base", '-D', "nkeys=$nkeys", '-f', $script,
		  '-h', $node->host, '-p', $node->port, 'postgres' ],
		'>', \$out, '2>', \$err);
	return ($h, \$out, \$err);
}

# The invariants, each as a count of violations (so a failure names them).
sub check_invariants
{
	my ($when) = @_;
	my %violations = (
		'committed keys without exactly one business row' => q{
			SELECT count(*) FROM idempotency.idempotency_record r
			WHERE r.namespace = 'load' AND r.status = 'committed'
			  AND (SELECT count(*) FROM business b WHERE b.key = r.key_value) <> 1},
		'business rows of keys that are not committed' => q{
			SELECT count(*) FROM business b
			WHERE NOT EXISTS (SELECT FROM idempotency.idempotency_record r
			                  WHERE r.namespace = 'load' AND r.key_value = b.key AND r.status = 'committed')},
		'stored results that are not the business row of their attempt' => q{
			SELECT count(*) FROM idempotency.idempotency_record r JOIN business b ON b.key = r.key_value
			WHERE r.namespace = 'load' AND r.status = 'committed'
			  AND r.result_payload <> jsonb_build_object('row', b.id, 'nonce', b.nonce)},
		'results seen by clients that differ from the stored result' => q{
			SELECT count(*) FROM seen s JOIN idempotency.idempotency_record r
			  ON r.namespace = 'load' AND r.key_value = s.key
			WHERE s.status IN ('returned', 'prior_result')
			  AND (r.status <> 'committed' OR r.result_payload IS DISTINCT FROM s.payload)},
		'errors seen by clients that differ from the stored error' => q{
			SELECT count(*) FROM seen s JOIN idempotency.idempotency_record r
			  ON r.namespace = 'load' AND r.key_value = s.key
			WHERE s.status = 'prior_error'
			  AND (r.status <> 'failed' OR r.error_payload IS DISTINCT FROM s.payload)},
		'replays seen for keys that have no record' => q{
			SELECT count(*) FROM seen s
			WHERE s.status IN ('returned', 'prior_result', 'prior_error')
			  AND NOT EXISTS (SELECT FROM idempotency.idempotency_record r
			                  WHERE r.namespace = 'load' AND r.key_value = s.key)},
		'mismatches (every retry sends the same payload)' => q{
			SELECT count(*) FROM seen WHERE status = 'mismatch'},
		'in_progress records left behind' => q{
			SELECT count(*) FROM idempotency.idempotency_record WHERE status = 'in_progress'},
	);
	for my $what (sort keys %violations)
	{
		is($node->safe_psql('postgres', $violations{$what}), '0', "$when: no $what");
	}
}

# How many keys are in each state, and how many answers of each kind.
sub census
{
	return $node->safe_psql('postgres', q{
		SELECT string_agg(status || '=' || n, ' ' ORDER BY status) FROM (
		  SELECT status::text, count(*) AS n FROM idempotency.idempotency_record GROUP BY 1
		  UNION ALL SELECT 'seen:' || status, count(*) FROM seen GROUP BY 1) c});
}

# Every key, retried once more from a fresh session, answers what its
# record says: fresh when it has no record, its result or its error
# otherwise. Returns the number of keys that answered fresh.
sub retry_every_key
{
	my ($when, $base, $nkeys) = @_;
	my ($wrong, $fresh) = split /\|/, $node->safe_psql('postgres', qq{
		BEGIN;
		CREATE TEMP TABLE retry AS
		SELECT k, r.status::text AS recorded, (idempotency.idem_begin('load', 'order-' || k,
		         jsonb_build_object('order', k, 'amount_cents', k * 100))).kind::text AS answer
		FROM generate_series($base + 1, $base + $nkeys) k
		LEFT JOIN idempotency.idempotency_record r ON r.namespace = 'load' AND r.key_value = 'order-' || k;
		SELECT count(*) FILTER (WHERE answer <> CASE recorded WHEN 'committed' THEN 'prior_result'
		                                                      WHEN 'failed' THEN 'prior_error' ELSE 'fresh' END),
		       count(*) FILTER (WHERE answer = 'fresh')
		FROM retry;
		ROLLBACK;});
	is($wrong, '0', "$when: a retry of every key answers what its record says (fresh when there is none)");
	return $fresh;
}

# 1. The load, to the end.
my ($h, $out, $err) = start_load(0, $keys, $per_client);
$h->finish;
is($h->result(0), 0, 'pgbench ran every request') or diag($$err);
my ($done) = $$out =~ /number of transactions actually processed: (\d+)/;
is($done, $clients * $per_client, "all $clients x $per_client requests were processed");
diag("load: $done requests over $keys keys; " . census());
check_invariants('after the load');
my $committed = $node->safe_psql('postgres',
	q{SELECT count(*) FROM idempotency.idempotency_record WHERE status = 'committed'});
cmp_ok($committed, '>', 0, 'some keys were committed (the checks above had something to check)');
my $retried = $node->safe_psql('postgres',
	q{SELECT count(*) FROM (SELECT key FROM seen GROUP BY key HAVING count(*) > 1) r});
cmp_ok($retried, '>', $keys / 2, 'most keys were requested more than once');
my $fresh_after_load = retry_every_key('after the load', 0, $keys);
note("after the load, $fresh_after_load of $keys keys have no finished record and answer fresh");

# 2. SIGKILL between begin and commit. The victim begins a key, does its
# work, and is killed before it commits; another session sees the attempt
# in flight meanwhile.
my $victim_key = 'order-0';
my ($in, $vout, $verr) = ('', '', '');
my $victim = IPC::Run::start(
	[ 'psql', '-X', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-h', $node->host, '-p', $node->port, 'postgres' ],
	'<', \$in, '>', \$vout, '2>', \$verr);
$in .= qq{BEGIN;
SELECT pg_backend_pid();
SELECT kind FROM idempotency.idem_begin('load', '$victim_key', '{"order": 0}');
INSERT INTO business (key, nonce) VALUES ('$victim_key', 'killed');
SELECT 'ready';
};
$victim->pump until $vout =~ /ready/ || !$victim->pumpable;
my ($pid) = $vout =~ /^(\d+)$/m;
like($vout, qr/^fresh$/m, 'the victim began its key');
is($node->safe_psql('postgres', "SELECT kind FROM idempotency.idem_begin('load', '$victim_key', '{\"order\": 0}')"),
	'in_flight', 'another session sees the attempt in flight');
kill 'KILL', $pid;
$victim->finish;
$node->poll_query_until('postgres', 'SELECT true') or die 'the server did not come back after the crash';
ok(scalar(grep { /terminated by signal 9/ } slurp_file($node->logfile)), 'the backend was killed with SIGKILL');
is($node->safe_psql('postgres', qq{
	SELECT count(*) FROM idempotency.idempotency_record WHERE key_value = '$victim_key'}),
	'0', 'after recovery the killed attempt left no record');
is($node->safe_psql('postgres', "SELECT count(*) FROM business WHERE key = '$victim_key'"),
	'0', 'and no business row');
is($node->safe_psql('postgres', qq{
	BEGIN; SELECT kind FROM idempotency.idem_begin('load', '$victim_key', '{"order": 0}'); ROLLBACK;}),
	'fresh', 'a retry of the killed key gets fresh');
check_invariants('after the SIGKILL');

# 3. An immediate shutdown under the load, twice. Each phase has keys of its
# own, ten times as many as the load above, so that the shutdown finds many
# of them unfinished however fast the machine is.
my $crash_keys = 10 * $keys;
my $crashes = 2;
my $interrupted_total = 0;
for my $crash (1 .. $crashes)
{
	my ($lh, $lout, $lerr) = start_load($crash * $crash_keys, $crash_keys, undef, 60);
	# Wait until the load is well under way: 200 more answers than before.
	my $before = $node->safe_psql('postgres', 'SELECT count(*) FROM seen');
	$node->poll_query_until('postgres', "SELECT count(*) > $before + 200 FROM seen")
	  or die 'the load did not start';
	my $busy = $node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_stat_activity
		  WHERE backend_type = 'client backend' AND xact_start IS NOT NULL AND pid <> pg_backend_pid()});
	$node->stop('immediate');
	$lh->finish;
	like($$lerr, qr/server closed the connection|terminating connection|connection to server/,
		"crash $crash: pgbench lost its server in the middle of the load");    # pgbench fails: its server went away
	$node->start;
	diag("crash $crash: immediate shutdown with $busy pgbench transactions open");
	$interrupted_total += $busy;
	check_invariants("after immediate shutdown $crash");
	my $fresh = retry_every_key("after immediate shutdown $crash", $crash * $crash_keys, $crash_keys);
	cmp_ok($fresh, '>', 0, "after immediate shutdown $crash, keys without a finished record get fresh");
	diag("crash $crash: $fresh of $crash_keys keys had no finished record and answered fresh");
}
diag('after the crashes: ' . census());
my $requests = $node->safe_psql('postgres', 'SELECT count(*) FROM seen');
diag("requests answered and committed in all: $requests; crashes: 1 SIGKILL + $crashes immediate shutdowns; "
	  . "transactions open at the shutdowns: $interrupted_total");

$node->stop;
done_testing();
