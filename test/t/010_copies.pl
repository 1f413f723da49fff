# 010_copies.pl: no copy of a database repeats a fence. A claim's fence is
# drawn at random, so the claims of one key in two copies (a restored dump,
# restored twice, and into another cluster whose database has the same OID;
# point-in-time recovery; a standby promoted while the old primary keeps
# running; a logical replica; a copy of the data directory started by crash
# recovery) never share a fence, and a worker still holding the original's
# claim cannot finish the copy's record of the key: its commit is refused.
# (0.5.0 drew fences from a sequence, whose position every copy carries:
# each copy then handed out the fences the original had already given.)
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $origin = PostgreSQL::Test::Cluster->new('origin');
$origin->init(allows_streaming => 'logical', has_archiving => 1);
$origin->start;
$origin->safe_psql('postgres', q{
	CREATE EXTENSION idempotency;
	-- Claims in 'jobs' may be committed unfinished (a worker keeps working
	-- across transactions), as in the reported case.
	SELECT idempotency.idem_namespace_configure('jobs', in_progress_lease => '10 minutes');
	CREATE PUBLICATION records FOR TABLE idempotency.idempotency_record;});

# Claims keys of 'jobs' on node's database db in one transaction and returns
# { key => fence } for those that were fresh.
sub claim
{
	my ($node, $db, @keys) = @_;
	my $list = join(', ', map { "'$_'" } @keys);
	my $out = $node->safe_psql($db, qq{
		SELECT k || ' ' || o.fence FROM unnest(ARRAY[$list]) k, idempotency.idem_begin('jobs', k, '{}') o
		WHERE o.kind = 'fresh'});
	return { map { split / / } split /\n/, $out };
}

# Some history first: a sequence would have moved on from its start.
claim($origin, 'postgres', map { "before-$_" } 1 .. 5);

# The copies, all taken before the origin claims the keys below.
$origin->stop('immediate');
$origin->backup_fs_cold('cold');
$origin->start;
my $dump = $origin->basedir . '/origin.dump';
$origin->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $origin->connstr('postgres') ], 'pg_dump of the origin');
$origin->backup('base');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($origin, 'base', has_streaming => 1);
$standby->start;
$origin->wait_for_catchup($standby, 'replay', $origin->lsn('insert'));
$standby->stop;    # it misses what follows, as an asynchronous standby may

my $replica = PostgreSQL::Test::Cluster->new('replica');
$replica->init;
# The subscription's workers start without waiting out the default 5 s.
$replica->append_conf('postgresql.conf', "wal_retrieve_retry_interval = '100ms'");
$replica->start;
$replica->safe_psql('postgres', q{
	CREATE EXTENSION idempotency;
	SELECT idempotency.idem_namespace_configure('jobs', in_progress_lease => '10 minutes');});
$replica->safe_psql('postgres',
	'CREATE SUBSCRIPTION records CONNECTION \'' . $origin->connstr . ' dbname=postgres\' PUBLICATION records');
$replica->poll_query_until('postgres',
	q{SELECT count(*) = 0 FROM pg_subscription_rel WHERE srsubstate NOT IN ('r', 's')})
  or die 'the replica never copied the records';
$origin->wait_for_catchup('records');
is($replica->safe_psql('postgres', q{SELECT count(*) FROM idempotency.idempotency_record}), '5',
	'the logical replica has the origin\'s records');
$replica->safe_psql('postgres', 'ALTER SUBSCRIPTION records DISABLE');    # it falls behind

# Now the origin's workers claim the keys (committed unfinished, under the
# lease) and keep working.
my @keys = map { "k$_" } 1 .. 40;
my $held = claim($origin, 'postgres', @keys);
is(scalar(keys %$held), 40, 'the origin claims every key');
ok(!(grep { $_ < 4294967296 } values %$held), 'every fence is at least 2^32');

# Each copy: its retries claim the same keys; none of its fences is one the
# origin drew; the origin's worker, failed over to the copy, cannot commit
# there with its fence; the copy's own claim can.
my %drawn;
sub check_copy
{
	my ($name, $node, $db) = @_;
	my $fences = claim($node, $db, @keys);
	is(scalar(keys %$fences), 40, "$name: the copy claims every key");
	my %origin = map { $_ => 1 } values %$held;
	is(scalar(grep { $origin{$_} } values %$fences), 0, "$name: no fence drawn there is one the origin drew");
	is(scalar(grep { $fences->{$_} == $held->{$_} } @keys), 0, "$name: no key has the origin's fence");
	my ($ret, $out, $err) = $node->psql($db,
		"SELECT idempotency.idem_commit('jobs', 'k1', '{\"by\": \"stale worker\"}', $held->{k1})",
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/ERROR:  55000: cannot commit an idempotency record held under another fence/,
		"$name: the origin's worker cannot commit the copy's record with its fence");
	is($node->safe_psql($db,
			"SELECT idempotency.idem_commit('jobs', 'k1', '{\"by\": \"copy\"}', $fences->{k1});"
			  . " SELECT result_payload ->> 'by' FROM idempotency.idempotency_record WHERE key_value = 'k1'"),
		"\ncopy", "$name: the copy's own claim commits");
	$drawn{$name} = $fences;
}

# A dump restored into two databases of the origin's cluster, and into the
# database of another cluster that has the same OID ('postgres' is 5 in both).
for my $db ('restored_1', 'restored_2')
{
	$origin->safe_psql('postgres', "CREATE DATABASE $db");
	$origin->command_ok([ 'pg_restore', '-d', $origin->connstr($db), $dump ], "pg_restore into $db");
	check_copy("dump restored into $db", $origin, $db);
}
my %second = map { $_ => 1 } values %{ $drawn{'dump restored into restored_1'} };
is(scalar(grep { $second{$_} } values %{ $drawn{'dump restored into restored_2'} }), 0,
	'two restores of one dump draw no fence in common');
my $other = PostgreSQL::Test::Cluster->new('other');
$other->init;
$other->start;
is($other->safe_psql('postgres', q{SELECT oid FROM pg_database WHERE datname = 'postgres'}),
	$origin->safe_psql('postgres', q{SELECT oid FROM pg_database WHERE datname = 'postgres'}),
	'the other cluster\'s database has the origin database\'s OID');
$other->command_ok([ 'pg_restore', '-d', $other->connstr('postgres'), $dump ], 'pg_restore into the other cluster');
check_copy('dump restored into another cluster', $other, 'postgres');

# Point-in-time recovery to the end of the base backup.
my $pitr = PostgreSQL::Test::Cluster->new('pitr');
$pitr->init_from_backup($origin, 'base', has_restoring => 1);
$pitr->append_conf('postgresql.conf', "recovery_target = 'immediate'\nrecovery_target_action = 'promote'");
$pitr->start;
$pitr->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die 'PITR never finished';
check_copy('point-in-time recovery', $pitr, 'postgres');

# The standby, promoted while the old primary keeps running.
$standby->append_conf('postgresql.conf', "primary_conninfo = ''");
$standby->start;
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die 'the standby was never promoted';
check_copy('a standby promoted beside the running primary', $standby, 'postgres');

# The logical replica, failed over to.
check_copy('a logical replica', $replica, 'postgres');

# A copy of the data directory, started by crash recovery.
my $copy = PostgreSQL::Test::Cluster->new('datadir_copy');
$copy->init_from_backup($origin, 'cold');
$copy->start;
check_copy('a data-directory copy after crash recovery', $copy, 'postgres');

$_->stop for ($copy, $replica, $standby, $pitr, $other, $origin);
done_testing();
