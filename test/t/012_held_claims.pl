# 012_held_claims.pl: claims held by the key's lock alone (a namespace
# without a lease) against the shared lock table and two-phase commit.
# Every session at once holds its transaction's full share of such claims
# (max_locks_per_transaction / 4) and more as rows: no 53200, every begin
# fresh, one record per key once they commit. A prepared transaction that
# finished a held claim keeps the key in flight until COMMIT PREPARED, and
# one that is rolled back leaves the key fresh. A batch answers each key as
# single begins would (test/pgtap/batch_equivalence.sql) at a smaller
# max_locks_per_transaction than make test's server has.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $sessions = 18;
my $node = PostgreSQL::Test::Cluster->new('held');
$node->init;
$node->append_conf('postgresql.conf', qq{
max_connections = 20
max_locks_per_transaction = 64
max_prepared_transactions = 2
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idempotency');

my $share = $node->safe_psql('postgres', 'SHOW max_locks_per_transaction') / 4;
is($share, 16, 'a transaction holds up to 16 claims by their lock');

# Each session: its share held by locks, then 4 more written as rows, all
# open at once.
my @open;
for my $s (1 .. $sessions)
{
	my $h = $node->background_psql('postgres', on_error_stop => 0);
	my $n = $share + 4;
	my $out = $h->query(qq{
		BEGIN;
		SELECT count(*) FILTER (WHERE b.kind = 'fresh')
		FROM generate_series(1, $n) g, idempotency.idem_begin('held', 's$s-' || g, '{}') b;});
	push @open, [ $h, $out ];
}
is(scalar(grep { $_->[1] eq ($share + 4) } @open), $sessions, "$sessions sessions each claimed " . ($share + 4) . ' keys, all fresh');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 18756 AND granted"),
	$sessions * $share, "their held claims are $share key locks each");
is($node->safe_psql('postgres',
		"SELECT count(*) FROM idempotency.idempotency_record WHERE namespace = 'held' AND status = 'in_progress'"),
	0, 'and no row is visible to others while they are open');
my ($ret, $out, $err) = $node->psql('postgres', q{
	BEGIN;
	SELECT count(*) FROM generate_series(1, 2000) g, idempotency.idem_begin('held', 'extra-' || g, '{}') b;
	ROLLBACK;});
is($ret, 0, 'another session begins 2,000 keys meanwhile without running out of shared memory');
unlike($err, qr/53200|out of shared memory/, '  no 53200');

for my $s (1 .. $sessions)
{
	my ($h) = @{ $open[ $s - 1 ] };
	my $n = $share + 4;
	$h->query_safe(qq{
		SELECT count(*) FROM generate_series(1, $n) g,
		  LATERAL (SELECT idempotency.idem_commit('held', 's$s-' || g, jsonb_build_object('s', $s, 'g', g))) c;
		COMMIT;});
	$h->quit;
}
is($node->safe_psql('postgres', q{
	SELECT count(*), count(DISTINCT key_value), bool_and(status = 'committed' AND attempt = 1)
	FROM idempotency.idempotency_record WHERE namespace = 'held'}),
	($sessions * ($share + 4)) . '|' . ($sessions * ($share + 4)) . '|t',
	'one committed record per key');

# Two-phase commit: PREPARE is refused while a claim is open, allowed once
# it is finished; the prepared transaction holds the key until it ends.
($ret, $out, $err) = $node->psql('postgres', q{
	BEGIN;
	SELECT idempotency.idem_begin('held', 'twophase-open', '{}');
	PREPARE TRANSACTION 'open';});
like($err, qr/cannot prepare while idempotency key/, 'PREPARE is refused while a held claim is open');

$node->safe_psql('postgres', q{
	BEGIN;
	SELECT idempotency.idem_begin('held', 'twophase', '{"n": 1}');
	SELECT idempotency.idem_commit('held', 'twophase', '{"done": true}');
	PREPARE TRANSACTION 'finished';});
is($node->safe_psql('postgres', q{SELECT kind FROM idempotency.idem_begin('held', 'twophase', '{"n": 1}')}),
	'in_flight', 'a prepared transaction keeps the key in flight');
$node->safe_psql('postgres', q{COMMIT PREPARED 'finished'});
is($node->safe_psql('postgres', q{SELECT kind, result FROM idempotency.idem_begin('held', 'twophase', '{"n": 1}')}),
	'prior_result|{"done": true}', 'and once it commits, the result replays');

$node->safe_psql('postgres', q{
	BEGIN;
	SELECT idempotency.idem_begin('held', 'twophase-2', '{}');
	SELECT idempotency.idem_commit('held', 'twophase-2', '{}');
	PREPARE TRANSACTION 'undone';});
$node->safe_psql('postgres', q{ROLLBACK PREPARED 'undone'});
is($node->safe_psql('postgres', q{
	BEGIN;
	SELECT kind FROM idempotency.idem_begin('held', 'twophase-2', '{}');
	ROLLBACK;}), 'fresh', 'a prepared transaction rolled back leaves the key fresh');

$node->stop;

# The batch against single begins with 8 claims held by their lock, not 16.
my $small = PostgreSQL::Test::Cluster->new('small_share');
$small->init;
$small->append_conf('postgresql.conf', 'max_locks_per_transaction = 32');
$small->start;
$small->safe_psql('postgres', 'CREATE EXTENSION idempotency; CREATE EXTENSION pgtap; CREATE EXTENSION dblink;');
my $tap = "$ENV{IDEM_REPO}/test/pgtap/batch_equivalence.sql";
($ret, $out, $err) = $small->psql('postgres', undef, extra_params => [ '-X', '-q', '-f', $tap ]);
is($ret, 0, 'batch_equivalence.sql runs at max_locks_per_transaction = 32') or diag($err);
like($out, qr/^1\.\.\d+$/m, '  and plans its tests');
unlike($out, qr/^not ok/m, '  and every test passes') or diag($out);
$small->stop;
done_testing();
