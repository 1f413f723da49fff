# CitusCluster.pm: a Citus cluster on localhost for the Citus layer: a
# coordinator and two workers (PostgreSQL::Test::Cluster nodes, Citus first
# in shared_preload_libraries), and a database with Citus on every node,
# the workers registered and the extension created on the coordinator
# (Citus creates it on the workers). Skips the whole test file when Citus
# 13 is not installed for this PostgreSQL.
package CitusCluster;

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# Skips the test file unless the citus extension is installed.
sub require_citus
{
	my $sharedir = `pg_config --sharedir`;
	chomp $sharedir;
	plan skip_all => "the citus extension is not installed ($sharedir/extension/citus.control)"
	  unless -f "$sharedir/extension/citus.control";
	return;
}

# Three started nodes (coordinator, worker1, worker2); extra is appended to
# each postgresql.conf.
sub nodes
{
	my (%opt) = @_;
	my @nodes = map { PostgreSQL::Test::Cluster->new($_) } qw(coordinator worker1 worker2);
	for my $node (@nodes)
	{
		$node->init(allows_streaming => 'logical');
		$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = '$opt{preload}'
listen_addresses = 'localhost'
max_prepared_transactions = 20
max_connections = 60
citus.enable_statistics_collection = off
citus.max_cached_conns_per_worker = 2
} . ($opt{extra} // ''));
		$node->append_conf('pg_hba.conf', "host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n");
		$node->start;
	}
	return @nodes;
}

# A database with Citus on every node, the workers registered (and the
# coordinator, which holds no shards), and the extension created (of
# release $CitusCluster::version when set: an update's test).
our $version;
sub database
{
	my ($db, @nodes) = @_;
	my ($coordinator, @workers) = @nodes;
	for my $node (@nodes)
	{
		$node->safe_psql('postgres', "CREATE DATABASE $db");
		$node->safe_psql($db, 'CREATE EXTENSION citus');
	}
	$coordinator->safe_psql($db, sprintf(q{SELECT citus_set_coordinator_host('localhost', %d)}, $coordinator->port));
	$coordinator->safe_psql($db, sprintf(q{SELECT citus_add_node('localhost', %d)}, $_->port)) for @workers;
	$coordinator->safe_psql($db, 'CREATE EXTENSION idempotency' . ($version ? " VERSION '$version'" : ''));
	return;
}

1;
