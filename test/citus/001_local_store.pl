# 001_local_store.pl: the store never answers from a table Citus manages. Under
# Citus a distributed or reference table's rows live in shard tables, and
# the relation of its name on each node is an empty shell: begin would
# answer fresh from it for a key that has a record, and on a worker the
# direct writes would go into the shell, out of Citus's sight. Every store
# function therefore refuses with 0A000 once Citus manages the store's
# tables, on the coordinator and on the workers, however it is called.
#
# Nor does it run where Citus would make another node's copy of the
# extension's table answer: a store function distributed by Citus, or any
# call on a Citus worker.
#
# Runs only where the citus extension is installed (../shared/citus/install
# builds it for PostgreSQL 15; CI does): a coordinator and two workers on
# localhost.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::Bin;
use CitusCluster;

CitusCluster::require_citus();
my @nodes = CitusCluster::nodes(preload => 'citus');
my ($coordinator, @workers) = @nodes;
sub citus_database { CitusCluster::database($_[0], @nodes) }

# (On a worker, the refusal of any call there comes first.)
my $refused = qr/ERROR:  0A000: (the idempotency store cannot use a table that Citus manages|cannot use the idempotency store on a Citus worker)/;

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

# The store functions distributed (delegated to the node of the key's
# shard) while the store is the extension's local table: every node would
# answer from its own copy. 0.5.0 answered fresh on a worker, recording the
# key there, and fresh again on the coordinator (issue 26). Refused on every
# node, and nothing is written anywhere; a client on a worker is refused
# too, while the coordinator, undistributed, answers.
citus_database('delegated');
$coordinator->safe_psql('delegated', q{
	CREATE TABLE anchor (k text PRIMARY KEY);
	SELECT create_distributed_table('anchor', 'k');
	CREATE FUNCTION wrapped_begin(key text) RETURNS text LANGUAGE plpgsql AS
	  $$BEGIN RETURN (SELECT kind::text FROM idempotency.idem_begin('n', key, '{"a": 1}')); END$$;
	SELECT create_distributed_function('idempotency.idem_begin(text,text,jsonb,interval,interval)', 'key',
	                                   colocate_with := 'anchor', force_delegation := true);
	SELECT create_distributed_function('idempotency.idem_commit(text,text,jsonb,bigint)', 'key',
	                                   colocate_with := 'anchor', force_delegation := true);
	SELECT create_distributed_function('wrapped_begin(text)', 'key', colocate_with := 'anchor',
	                                   force_delegation := true);});
my $refused_elsewhere = qr/ERROR:  0A000: cannot use the idempotency store (as a function distributed by Citus|on a Citus worker)/;
for my $node ($coordinator, @workers)
{
	my $where = 'on the ' . $node->name;
	for my $call (
		[ 'a delegated begin and commit',
			q{BEGIN; SELECT kind FROM idempotency.idem_begin('n', 'k1', '{"a": 1}'); SELECT idempotency.idem_commit('n', 'k1', '{}'); COMMIT;} ],
		[ 'a delegated begin in autocommit', q{SELECT kind FROM idempotency.idem_begin('n', 'k2', '{"a": 1}')} ],
		[ 'a distributed wrapper', q{SELECT wrapped_begin('k3')} ],
		[ 'a begin the planner does not delegate (a CTE)',
			q{BEGIN; WITH o AS (SELECT * FROM idempotency.idem_begin('n', 'k4', '{"a": 1}')) SELECT kind FROM o; ROLLBACK;} ])
	{
		my ($what, $statement) = @$call;
		my ($ret, $out, $err) = $node->psql('delegated', $statement, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
		like($err, $refused_elsewhere, "delegated, $where: $what is refused with 0A000");
		unlike($out, qr/fresh/, "  delegated, $where: and never answers fresh");
	}
}
is(join(' ', map { $_->safe_psql('delegated', 'SELECT count(*) FROM idempotency.idempotency_record') } @nodes),
	'0 0 0', 'delegated: no node recorded anything');
my ($ret, $out, $err) = $coordinator->psql('delegated', q{BEGIN; WITH o AS (SELECT * FROM idempotency.idem_begin('n', 'k4', '{"a": 1}')) SELECT kind FROM o; ROLLBACK;},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/DETAIL:  Citus runs idempotency\.idem_begin\(text,text,jsonb,interval,interval\) on the node that holds its distribution argument's shard/,
	'delegated: the detail says why');
like($err, qr/HINT:  Undistribute it on every node/, 'delegated: the hint says how to undo it');

# Undistributed again (on every node, as Citus keeps the mark per node), the
# coordinator answers and a worker's client is still refused.
$coordinator->safe_psql('delegated', q{
	SELECT * FROM run_command_on_all_nodes($$SELECT citus_unmark_object_distributed('pg_proc'::regclass, f, 0, false)
	  FROM unnest(ARRAY['idempotency.idem_begin(text,text,jsonb,interval,interval)'::regprocedure,
	                    'idempotency.idem_commit(text,text,jsonb,bigint)'::regprocedure]) f$$)});
is($coordinator->safe_psql('delegated', q{
	BEGIN;
	SELECT kind FROM idempotency.idem_begin('n', 'k1', '{"a": 1}');
	SELECT idempotency.idem_commit('n', 'k1', '{}');
	COMMIT;
	SELECT kind FROM idempotency.idem_begin('n', 'k1', '{"a": 1}');}), "fresh\n\nprior_result",
	'delegated, undistributed: the coordinator answers, once');
($ret, $out, $err) = $workers[0]->psql('delegated', q{SELECT kind FROM idempotency.idem_begin('n', 'k1', '{"a": 1}')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/ERROR:  0A000: cannot use the idempotency store on a Citus worker/,
	'delegated, undistributed: a client on a worker is refused');
like($err, qr/HINT:  Call the store on the coordinator/, '  with a hint that says where');

$_->stop for @nodes;
done_testing();
