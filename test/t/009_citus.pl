# 009_citus.pl: the store never answers from a table Citus manages. Under
# Citus a distributed or reference table's rows live in shard tables, and
# the relation of its name on each node is an empty shell: begin would
# answer fresh from it for a key that has a record, and on a worker the
# direct writes would go into the shell, out of Citus's sight. Every store
# function therefore refuses with 0A000 once Citus manages the store's
# tables, on the coordinator and on the workers, however it is called.
#
# Runs only where the citus extension is installed (it is not packaged by
# Debian, so CI skips it): a coordinator and two workers on localhost.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $sharedir = `pg_config --sharedir`;
chomp $sharedir;
plan skip_all => "the citus extension is not installed ($sharedir/extension/citus.control)"
  unless -f "$sharedir/extension/citus.control";

my @nodes = map { PostgreSQL::Test::Cluster->new($_) } qw(coordinator worker1 worker2);
for my $node (@nodes)
{
	$node->init;
	$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'citus'
listen_addresses = 'localhost'
max_prepared_transactions = 20
citus.enable_statistics_collection = off
});
	$node->append_conf('pg_hba.conf', "host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n");
	$node->start;
}
my ($coordinator, @workers) = @nodes;

# A database with Citus on every node, the workers registered, and the
# extension created on the coordinator (Citus creates it on the workers).
sub citus_database
{
	my ($db) = @_;
	for my $node (@nodes)
	{
		$node->safe_psql('postgres', "CREATE DATABASE $db");
		$node->safe_psql($db, 'CREATE EXTENSION citus');
	}
	$coordinator->safe_psql($db, sprintf(q{SELECT citus_set_coordinator_host('localhost', %d)}, $coordinator->port));
	$coordinator->safe_psql($db, sprintf(q{SELECT citus_add_node('localhost', %d)}, $_->port)) for @workers;
	$coordinator->safe_psql($db, 'CREATE EXTENSION idempotency');
	return;
}

my $refused = qr/ERROR:  0A000: the idempotency store cannot use a table that Citus manages/;

# The store as plain tables on the coordinator, untouched by Citus, works.
citus_database('plain');
is($coordinator->safe_psql('plain', q{
	BEGIN;
	SELECT kind FROM idempotency.idem_begin('n', 'k', '{"a": 1}');
	SELECT idempotency.idem_commit('n', 'k', '{"ok": true}');
	COMMIT;
	SELECT kind FROM idempotency.idem_begin('n', 'k', '{"a": 1}');}),
	"fresh\n\nprior_result", 'a store Citus does not manage answers as on any server');

for my $layout (['distributed', q{SELECT create_distributed_table('idempotency.idempotency_record', 'namespace')}],
	['reference', q{SELECT create_reference_table('idempotency.idempotency_record')}])
{
	my ($db, $sql) = @$layout;
	citus_database($db);
	$coordinator->safe_psql($db, q{
		BEGIN;
		SELECT idempotency.idem_begin('n', 'recorded', '{"a": 1}');
		SELECT idempotency.idem_commit('n', 'recorded', '{"ok": true}');
		COMMIT;});
	$coordinator->safe_psql($db, $sql);

	for my $node ($coordinator, @workers)
	{
		my $where = "$db, on the " . $node->name;
		for my $call (
			[ 'begin of a recorded key', q{BEGIN; SELECT kind FROM idempotency.idem_begin('n', 'recorded', '{"a": 1}'); ROLLBACK;} ],
			[ 'begin of a new key', q{BEGIN; SELECT kind FROM idempotency.idem_begin('n', 'new', '{"a": 1}'); ROLLBACK;} ],
			[ 'commit', q{SELECT idempotency.idem_commit('n', 'recorded', '{}')} ],
			[ 'fail_permanent', q{SELECT idempotency.idem_fail_permanent('n', 'recorded', '{"class_tag": "E", "message": "m"}')} ],
			[ 'fail_transient', q{SELECT idempotency.idem_fail_transient('n', 'recorded')} ],
			[ 'a PL/pgSQL PERFORM', q{DO $$BEGIN PERFORM idempotency.idem_begin('n', 'new', '{"a": 1}'); END$$} ],
			[ 'a call in a CTE', q{BEGIN; WITH o AS (SELECT * FROM idempotency.idem_begin('n', 'new', '{"a": 1}')) SELECT kind FROM o; ROLLBACK;} ])
		{
			my ($what, $statement) = @$call;
			my ($ret, $out, $err) = $node->psql($db, $statement, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
			like($err, $refused, "$where: $what is refused with 0A000");
			is($out, '', "  $where: and answers nothing");
		}
	}
	my ($ret, $out, $err) = $coordinator->psql($db, q{SELECT idempotency.idem_begin('n', 'new', '{}')},
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/DETAIL:  Citus keeps the rows of idempotency\.idempotency_record in shards/,
		"$db: the detail says why");
	like($err, qr{HINT:  Keep the store's tables out of Citus; docs/scale-out\.md says how to recover them\.},
		"$db: the hint says where to read on");
}

$_->stop for @nodes;
done_testing();
