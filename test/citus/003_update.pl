# 003_update.pl: ALTER EXTENSION idempotency UPDATE on a Citus cluster whose
# registry is a reference table and whose store is distributed: release
# 0.9.2 installed (the release before, which this library still serves), a
# tenant's records written, then the update to this release on the
# coordinator. Every node's registry keeps its columns (on its placement
# too), the tenant's records replay as before, the new entry point is made
# and records a recovery point, and a namespace whose
# fingerprint ignores a trace id replays a retry with another one, called
# on a worker through the store's entry point.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::Bin;
use CitusCluster;

CitusCluster::require_citus();
my @nodes = CitusCluster::nodes(preload => 'citus,idempotency');
my ($coordinator, @workers) = @nodes;
my $db = 'shop';
{
	local $CitusCluster::version = '0.9.2';
	CitusCluster::database($db, @nodes);
}
is($_->safe_psql($db, q{SELECT extversion FROM pg_extension WHERE extname = 'idempotency'}), '0.9.2',
	$_->name . ': release 0.9.2') for @nodes;

# sql as role app on node, with its stderr.
sub as_app
{
	my ($node, $sql) = @_;
	my ($ret, $out, $err) = $node->psql($db, "SET ROLE app;\n$sql", on_error_stop => 1);
	return ($out, $err);
}

$coordinator->safe_psql($db, q{
	CREATE ROLE app LOGIN;
	CREATE SCHEMA shop AUTHORIZATION app;
	SELECT idempotency.idem_namespace_configure('acme');
	SELECT idempotency.idem_distribute_registry();
	SELECT idempotency.idem_grant('acme', 'app');
	SET ROLE app;
	SELECT idempotency.idem_create_store('shop.tenant_records');
	SELECT create_distributed_table('shop.tenant_records', 'namespace');
	SELECT count(*) FROM idempotency.idem_create_entry_points('shop.tenant_records');
	RESET ROLE;
	SELECT idempotency.idem_bind_store('acme', 'shop.tenant_records');});
my ($out, $err) = as_app($workers[0], q{
	BEGIN;
	SELECT kind FROM shop.tenant_records_begin('acme', 'order-1', '{"sku": 1}');
	SELECT shop.tenant_records_commit('acme', 'order-1', '{"order": 1}');
	COMMIT;});
is($out, "fresh\n", '0.9.2: a tenant record written') or diag($err);

$coordinator->safe_psql($db, q{ALTER EXTENSION idempotency UPDATE});
my $current = $coordinator->safe_psql($db,
	q{SELECT default_version FROM pg_available_extensions WHERE name = 'idempotency'});
is($_->safe_psql($db, q{SELECT extversion FROM pg_extension WHERE extname = 'idempotency'}), $current,
	$_->name . ": updated to $current") for @nodes;
# The registry's column on every node, in the table and in its placement.
for my $node (@nodes)
{
	is($node->safe_psql($db, q{
		SELECT count(*) FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'idempotency' AND c.relname LIKE 'idem_namespace_config%'
		  AND a.attname = 'fingerprint_ignore' AND NOT a.attisdropped}),
		$node->safe_psql($db, q{
		SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'idempotency' AND c.relname LIKE 'idem_namespace_config%' AND c.relkind = 'r'}),
		$node->name . ': every copy of the registry has fingerprint_ignore');
}
($out, $err) = as_app($workers[1], q{SELECT kind || ' ' || result FROM shop.tenant_records_begin('acme', 'order-1', '{"sku": 1}')});
is($out, "prior_result {\"order\": 1}", 'after the update: the record replays through the entry point') or diag($err);

# Called again, idem_create_entry_points keeps the seven entry points 0.9
# made and adds 1.0.0's save_point, which works on the tenant's node.
is($coordinator->safe_psql($db, q{SET ROLE app; SELECT count(*) FROM idempotency.idem_create_entry_points('shop.tenant_records')}),
	'8', 'idem_create_entry_points again: the seven of 0.9 and 1.0.0\'s save point');
$coordinator->safe_psql($db, q{
	SELECT idempotency.idem_namespace_configure('initech', in_progress_lease => '1 hour');
	SELECT idempotency.idem_bind_store('initech', 'shop.tenant_records');
	SELECT idempotency.idem_grant('initech', 'app');});
($out, $err) = as_app($workers[0], q{BEGIN; SELECT fence FROM shop.tenant_records_begin('initech', 'job-1', '{}'); COMMIT;});
my $fence = $out =~ s/\s+//gr;
($out, $err) = as_app($workers[1], qq{SELECT shop.tenant_records_save_point('initech', 'job-1', 'sent', '{"id": 1}', $fence)});
like($out, qr/^\d{4}-\d\d-\d\d [\d:.]+[-+][\d:]+$/, 'a recovery point through the new entry point answers the lease\'s end') or diag($err);
is($coordinator->safe_psql($db, q{SELECT recovery_point || ' ' || recovery_state FROM shop.tenant_records WHERE namespace = 'initech'}),
	'sent {"id": 1}', '  recorded with the claim');

# A namespace whose fingerprint ignores a trace id, on the same store.
$coordinator->safe_psql($db, q{
	SELECT idempotency.idem_namespace_fingerprint('globex', ARRAY['/trace_id']);
	SELECT idempotency.idem_bind_store('globex', 'shop.tenant_records');
	SELECT idempotency.idem_grant('globex', 'app');});
($out, $err) = as_app($workers[1], q{
	BEGIN;
	SELECT kind FROM shop.tenant_records_begin('globex', 'order-7', '{"sku": 7, "trace_id": "a"}');
	SELECT shop.tenant_records_commit('globex', 'order-7', '{"order": 7}');
	COMMIT;});
is($out, "fresh\n", 'a namespace with pointers: fresh on a worker') or diag($err);
for my $node (@nodes)
{
	($out, $err) = as_app($node, q{
		SELECT kind || ' ' || coalesce(result::text, '') FROM shop.tenant_records_begin('globex', 'order-7', '{"sku": 7, "trace_id": "b"}')});
	is($out, "prior_result {\"order\": 7}", $node->name . ': a retry with another trace id replays') or diag($err);
}
($out, $err) = as_app($workers[0], q{SELECT kind FROM shop.tenant_records_begin('globex', 'order-7', '{"sku": 8, "trace_id": "a"}')});
is($out, 'mismatch', '  another sku is a mismatch') or diag($err);
# A change with records is refused, counted across the nodes.
my ($ret, $o, $e) = $coordinator->psql($db, q{SELECT idempotency.idem_namespace_fingerprint('globex', NULL)});
like($e, qr/cannot change what the fingerprint of idempotency namespace "globex" ignores/,
	'a change of the pointers with records on a worker is refused');

$_->stop for @nodes;
done_testing();
