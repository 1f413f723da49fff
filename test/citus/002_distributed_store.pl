# 002_distributed_store.pl: a store the service owns, distributed by Citus
# by key (and one by namespace, colocated with the service's tenant table),
# gives exactly one effect per key. Its entry points run where the key's
# shard is, from the coordinator and from the workers; every outcome; one-
# and two-phase commits; in_flight across nodes; the claim guard on a
# worker; a shard move that waits for a begin; 16 retrying clients over
# 2,000 keys, still and then with shard moves under the load; a worker
# that crashes between PREPARE and COMMIT PREPARED; the registry on every
# node (grants, a drop that waits for a worker's begin); purge per shard;
# and every refusal. A coordinator and two workers on localhost.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use FindBin;
use lib $FindBin::Bin;
use CitusCluster;

CitusCluster::require_citus();
my @nodes = CitusCluster::nodes(preload => 'citus,idempotency', extra => qq{
citus.recover_2pc_interval = -1
});
my ($coordinator, @workers) = @nodes;
my $db = 'shop';
CitusCluster::database($db, @nodes);

# The service: a store distributed by key, its payments colocated with it
# (one phase), a ledger as a reference table (two phases), an application
# role, and the store's entry points. The registry first, so that every
# node reads the bindings.
$coordinator->safe_psql($db, q{
	CREATE ROLE app LOGIN;
	CREATE SCHEMA shop AUTHORIZATION app;
	SELECT idempotency.idem_namespace_configure('pay', replay_window => '1 day');
	SELECT idempotency.idem_namespace_configure('job', in_progress_lease => '1 minute');
	SELECT idempotency.idem_distribute_registry();
	SELECT idempotency.idem_grant('pay', 'app'), idempotency.idem_grant('job', 'app');
	SET ROLE app;
	SELECT idempotency.idem_create_store('shop.idem_records');
	SELECT create_distributed_table('shop.idem_records', 'key_value', shard_count := 8);
	CREATE TABLE shop.payments (key_value text COLLATE "C" NOT NULL, id bigserial, amount int NOT NULL,
	                            PRIMARY KEY (key_value, id));
	SELECT create_distributed_table('shop.payments', 'key_value', colocate_with := 'shop.idem_records');
	CREATE TABLE shop.ledger (key_value text NOT NULL, id bigserial PRIMARY KEY);
	SELECT create_reference_table('shop.ledger');
	SELECT count(*) FROM idempotency.idem_create_entry_points('shop.idem_records');
	RESET ROLE;
	SELECT idempotency.idem_bind_store('pay', 'shop.idem_records');
	SELECT idempotency.idem_bind_store('job', 'shop.idem_records');});

# The node (its Cluster object) that holds key k's shard.
my %by_port = map { $_->port => $_ } @nodes;
sub owner_of
{
	my ($k) = @_;
	my $port = $coordinator->safe_psql($db, qq{
		SELECT p.nodeport FROM pg_dist_shard_placement p
		WHERE p.shardid = get_shard_id_for_distribution_column('shop.idem_records', '$k'::text)});
	return $by_port{$port};
}
sub other_worker { my ($node) = @_; return (grep { $_ != $node } @workers)[0]; }

# sql as role app on node, with the error and its SQLSTATE.
sub as_app
{
	my ($node, $sql) = @_;
	my ($ret, $out, $err) = $node->psql($db, $sql, extra_params => [ '-U', 'app', '-v', 'VERBOSITY=verbose' ]);
	return ($out, $err);
}

# 1. Delegation: from the coordinator and from each worker, a call runs on
#    the node of its key's shard (its begin counted there, and only there).
$_->safe_psql($db, q{SELECT pg_stat_reset()}) for @nodes;
$_->safe_psql($db, q{ALTER SYSTEM SET track_functions = 'all'; SELECT pg_reload_conf()}) for @nodes;
for my $client (@nodes)
{
	my ($out, $err) = as_app($client, q{
		BEGIN;
		SELECT kind FROM shop.idem_records_begin('pay', 'k-} . $client->name . q{', '{"amount": 5}');
		SELECT shop.idem_records_commit('pay', 'k-} . $client->name . q{', '{"paid": 5}');
		COMMIT;});
	is($out, "fresh\n", 'delegation: a client of the ' . $client->name . ' begins and commits its key');
}
for my $client (@nodes)
{
	my $key = 'k-' . $client->name;
	my $owner = owner_of($key);
	my ($out) = as_app($client, qq{SELECT kind || ' ' || result FROM shop.idem_records_begin('pay', '$key', '{"amount": 5}')});
	is($out, 'prior_result {"paid": 5}', "delegation: the $key replays through the " . $client->name);
}
sleep 1;    # statistics are sent at the end of each transaction
my @calls = map {
	$_->safe_psql($db, q{SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions WHERE funcname = 'idem_begin'})
} @nodes;
is($calls[0], '0', 'delegation: the coordinator ran no begin itself');
is($calls[1] + $calls[2], '6', '  the workers ran all six');

# 2. Every outcome through the entry points, on the key's node.
my ($out, $err) = as_app($coordinator, q{
	BEGIN;
	SELECT kind FROM shop.idem_records_begin('pay', 'declined', '{"amount": 9}');
	SELECT shop.idem_records_fail_permanent('pay', 'declined', '{"class_tag": "declined", "message": "card declined"}');
	SELECT kind FROM shop.idem_records_begin('pay', 'transient', '{"amount": 9}');
	SELECT shop.idem_records_fail_transient('pay', 'transient');
	COMMIT;
	SELECT kind || ' ' || error FROM shop.idem_records_begin('pay', 'declined', '{"amount": 9}');
	SELECT kind || ' ' || recorded_request FROM shop.idem_records_begin('pay', 'declined', '{"amount": 1}');
	BEGIN;
	SELECT kind FROM shop.idem_records_begin('pay', 'transient', '{"amount": 9}');
	ROLLBACK;});
is($out, join("\n", 'fresh', '', 'fresh', '', 'prior_error {"message": "card declined", "class_tag": "declined"}',
	'mismatch {"amount": 9}', 'fresh'), 'outcomes: fresh, prior_error, mismatch, and fresh again after a transient failure');
# A claim under the lease, committed unfinished, taken over once it ran out:
# attempt 2, and the first claim's fence is refused.
($out, $err) = as_app($coordinator, q{
	BEGIN;
	SELECT fence FROM shop.idem_records_begin('job', 'j-1', '{"job": 1}');
	COMMIT;});
my $first_fence = $out;
$coordinator->safe_psql($db, q{UPDATE shop.idem_records SET updated_at = now() - interval '2 minutes' WHERE key_value = 'j-1'});
($out, $err) = as_app($coordinator, qq{
	BEGIN;
	SELECT kind || ' ' || attempt FROM shop.idem_records_begin('job', 'j-1', '{"job": 1}');
	SELECT shop.idem_records_commit('job', 'j-1', '{"done": true}', $first_fence);
	COMMIT;});
is($out, 'fresh 2', 'outcomes: an abandoned claim under the lease is taken over as attempt 2');
like($err, qr/ERROR:  55000: cannot commit an idempotency record held under another fence/,
	'  and the first claim\'s fence is refused');
# A holder's heartbeat and recovery point through the entry points, called
# on a worker and run on the key's node; a takeover there answers the
# point, and the old holder's fence records nothing more. Called directly
# where the shard is not, the store's function is refused.
($out, $err) = as_app($workers[0], q{
	BEGIN;
	SELECT fence FROM shop.idem_records_begin('job', 'j-2', '{"job": 2}');
	COMMIT;});
my $holder_fence = $out;
my $claimed_at = $coordinator->safe_psql($db, q{SELECT updated_at FROM shop.idem_records WHERE key_value = 'j-2'});
($out, $err) = as_app($workers[1], qq{
	SELECT shop.idem_records_extend_lease('job', 'j-2', $holder_fence);
	SELECT shop.idem_records_record_point('job', 'j-2', $holder_fence, 'charged', '{"charge": "ch_2"}');});
like($out, qr/^\d{4}-\d\d-\d\d [\d:.]+[-+][\d:]+\n\d{4}-\d\d-\d\d [\d:.]+[-+][\d:]+$/,
	'lease: a heartbeat and a recovery point through the entry points, each answering the lease\'s end') or diag($err);
is($coordinator->safe_psql($db, qq{SELECT updated_at > '$claimed_at' AND recovery_point = 'charged' FROM shop.idem_records WHERE key_value = 'j-2'}),
	't', '  the lease runs again from the heartbeat, and the point is kept with the claim');
my ($ret, $o, $e) = $coordinator->psql($db, qq{SET ROLE app; SELECT idempotency.idem_record_point('job', 'j-2', $holder_fence, 'x')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($e, qr/ERROR:  0A000: this key of idempotency namespace "job" is kept on another node/,
	'  idem_record_point itself, where the shard is not, is refused');
$coordinator->safe_psql($db, q{UPDATE shop.idem_records SET updated_at = now() - interval '2 minutes' WHERE key_value = 'j-2'});
($out, $err) = as_app($workers[1], q{
	BEGIN;
	SELECT kind || ' ' || attempt || ' ' || takeover || ' ' || recovery_point || ' ' || recovery_state
	FROM shop.idem_records_begin('job', 'j-2', '{"job": 2}');
	COMMIT;});
is($out, 'fresh 2 true charged {"charge": "ch_2"}', '  a takeover answers the recovery point') or diag($err);
($out, $err) = as_app($workers[0], qq{SELECT shop.idem_records_record_point('job', 'j-2', $holder_fence, 'refunded')});
like($err, qr/ERROR:  55000: cannot record a recovery point of/, '  and the old holder\'s fence records no point') or diag($out);
($out, $err) = as_app($workers[1], qq{SELECT shop.idem_records_extend_lease('job', 'j-2', $holder_fence)});
like($err, qr/ERROR:  55000: cannot extend the lease of/, '  nor extends the lease') or diag($out);

# 3. One phase and two: the record with its colocated payment commits on
#    one worker; with a ledger row (a reference table) it takes two.
sub prepared_count { return $coordinator->safe_psql($db, 'SELECT count(*) FROM pg_dist_transaction'); }
my $before = prepared_count();
as_app($coordinator, q{
	BEGIN;
	SELECT kind FROM shop.idem_records_begin('pay', 'one-phase', '{"amount": 3}');
	INSERT INTO shop.payments (key_value, amount) VALUES ('one-phase', 3);
	SELECT shop.idem_records_commit('pay', 'one-phase', '{"paid": 3}');
	COMMIT;});
is(prepared_count(), $before, 'commits: the record and its colocated payment commit in one phase');
as_app($coordinator, q{
	BEGIN;
	SELECT kind FROM shop.idem_records_begin('pay', 'two-phase', '{"amount": 4}');
	INSERT INTO shop.payments (key_value, amount) VALUES ('two-phase', 4);
	INSERT INTO shop.ledger (key_value) VALUES ('two-phase');
	SELECT shop.idem_records_commit('pay', 'two-phase', '{"paid": 4}');
	COMMIT;});
cmp_ok(prepared_count(), '>', $before, '  with a reference table row, in two');
is($coordinator->safe_psql($db, q{
	SELECT string_agg(status, ',' ORDER BY key_value) FROM shop.idem_records WHERE key_value IN ('one-phase', 'two-phase')}),
	'committed,committed', '  both records are committed');
$coordinator->safe_psql($db, 'SELECT recover_prepared_transactions()');

# 4. The claim guard on the worker: a fresh attempt not finished fails the
#    COMMIT, and nothing of the transaction stays on any node.
($out, $err) = as_app($coordinator, q{
	BEGIN;
	SELECT kind FROM shop.idem_records_begin('pay', 'unfinished', '{"amount": 2}');
	INSERT INTO shop.payments (key_value, amount) VALUES ('unfinished', 2);
	COMMIT;});
# (The worker commits during the coordinator's commit, in one phase: Citus
# relays the worker's refusal as a WARNING and fails the COMMIT.)
like($err, qr/WARNING:  25000: cannot commit while idempotency key sha256:\S+ is in progress/,
	'claim guard: the worker refuses to commit an unfinished attempt');
like($err, qr/ERROR:  XX000: could not commit transaction for shard \d+ on at least one active node/,
	'  and the COMMIT fails');
is($coordinator->safe_psql($db, q{SELECT count(*) FROM shop.idem_records WHERE key_value = 'unfinished'}) . ' '
	. $coordinator->safe_psql($db, q{SELECT count(*) FROM shop.payments WHERE key_value = 'unfinished'}), '0 0',
	'  and neither the record nor the payment was committed');
($out) = as_app($coordinator, q{BEGIN; SELECT kind FROM shop.idem_records_begin('pay', 'unfinished', '{"amount": 2}'); ROLLBACK;});
is($out, 'fresh', '  a retry is fresh');

# 5. in_flight across nodes: a claim held through the coordinator answers
#    in_flight at once to a client of a worker; with a wait, that client
#    waits for the holder and replays its result.
my $holder = $coordinator->background_psql($db, extra_params => [ '-U', 'app' ]);
$holder->query_safe(q{BEGIN; SELECT kind FROM shop.idem_records_begin('pay', 'held', '{"amount": 7}')});
my $contender = other_worker(owner_of('held'));
($out) = as_app($contender, q{SELECT kind FROM shop.idem_records_begin('pay', 'held', '{"amount": 7}')});
is($out, 'in_flight', 'in_flight: a client of another node finds the key in flight at once');
my $waiter = $contender->background_psql($db, extra_params => [ '-U', 'app' ]);
$waiter->query_until(qr/waiting/, q{
	\echo waiting
	SELECT kind || ' ' || result FROM shop.idem_records_begin('pay', 'held', '{"amount": 7}', in_flight_wait => '1 minute');
});
usleep(300_000);
$holder->query_safe(q{SELECT shop.idem_records_commit('pay', 'held', '{"paid": 7}'); COMMIT;});
like($waiter->query_safe('SELECT 1'), qr/prior_result \{"paid": 7\}/, '  with a wait it replays once the holder commits');
$waiter->quit;

# 6. A shard move waits for a begin: the holder's shard cannot move while it
#    holds the key; once it commits the move goes through, and the key
#    replays from its new node.
$holder->query_safe(q{BEGIN; SELECT kind FROM shop.idem_records_begin('pay', 'moving', '{"amount": 8}')});
my $from = owner_of('moving');
my $to = other_worker($from);
my $shard = $coordinator->safe_psql($db, q{SELECT get_shard_id_for_distribution_column('shop.idem_records', 'moving'::text)});
my $mover = $coordinator->background_psql($db);
$mover->query_until(qr/moving/, sprintf(q{
	\echo moving
	SELECT citus_move_shard_placement(%d, 'localhost', %d, 'localhost', %d, shard_transfer_mode := 'block_writes');
	\echo moved
}, $shard, $from->port, $to->port));
ok($from->poll_query_until($db, q{
	SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 8 AND NOT granted}),
	'move: it waits on the shard lock the begin holds');
is(owner_of('moving')->port, $from->port, '  and the shard has not moved');
$holder->query_safe(q{SELECT shop.idem_records_commit('pay', 'moving', '{"paid": 8}'); COMMIT;});
$mover->query_until(qr/moved/, '');
$mover->quit;
is(owner_of('moving')->port, $to->port, '  once the holder commits, the shard moves');
($out) = as_app($coordinator, q{SELECT kind || ' ' || result FROM shop.idem_records_begin('pay', 'moving', '{"amount": 8}')});
is($out, 'prior_result {"paid": 8}', '  and the key replays from its new node');
$holder->quit;

# 7. Refusals: the store's functions called where the shard is not (the
#    extension's own, or not delegated by Citus: a CTE, PL/pgSQL), hashed
#    keys in a store distributed by key, a Citus table of another kind (a
#    reference table, one whose shards have two copies), a distributed
#    store while the registry is on the coordinator only.
my $elsewhere = qr/ERROR:  0A000: this key of idempotency namespace "pay" is kept on another node/;
for my $call (
	[ 'idem_begin itself, on the coordinator', q{SELECT kind FROM idempotency.idem_begin('pay', 'k-coordinator', '{"amount": 5}')} ],
	[ 'a CTE, which Citus does not delegate',
		q{WITH o AS (SELECT * FROM shop.idem_records_begin('pay', 'k-coordinator', '{"amount": 5}')) SELECT kind FROM o} ],
	[ 'PL/pgSQL PERFORM', q{DO $$BEGIN PERFORM shop.idem_records_begin('pay', 'k-coordinator', '{"amount": 5}'); END$$} ])
{
	my ($what, $sql) = @$call;
	($out, $err) = as_app($coordinator, $sql);
	like($err, $elsewhere, "refusals: $what is refused with 0A000");
	like($err, qr/HINT:  Call shop\.idem_records_begin/, '  with a hint that names the entry point') if $what =~ /itself/;
}
($out, $err) = as_app(other_worker(owner_of('k-coordinator')),
	q{SELECT kind FROM idempotency.idem_begin('pay', 'k-coordinator', '{"amount": 5}')});
like($err, $elsewhere, 'refusals: idem_begin on a worker without the shard is refused');
($ret, $o, $e) = $coordinator->psql($db, q{SELECT idempotency.idem_namespace_configure('pay', hash_keys => true)},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($e, qr/ERROR:  0A000: idempotency namespace "pay" cannot hash its keys in a store distributed by key/,
	'refusals: hash_keys on a store distributed by key');
$coordinator->safe_psql($db, q{
	SELECT idempotency.idem_create_store('shop.replicated');
	SELECT create_reference_table('shop.replicated');});
($ret, $o, $e) = $coordinator->psql($db, q{SELECT idempotency.idem_bind_store('other', 'shop.replicated')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($e, qr/ERROR:  0A000: cannot bind idempotency namespace "other" to shop\.replicated/,
	'refusals: a reference table cannot be a store');
# Nor a table whose shards have two copies (statement-based replication):
# a key could be begun on each node that holds a copy, once on each.
$coordinator->safe_psql($db, q{
	SELECT idempotency.idem_create_store('shop.two_copies');
	SET citus.shard_replication_factor = 2;
	SELECT create_distributed_table('shop.two_copies', 'key_value', shard_count := 2);});
is($coordinator->safe_psql($db, q{SELECT idempotency.idem_store_distribution('shop.two_copies')}), 'other',
	'refusals: a table with replicated shards is not a store distribution');
($ret, $o, $e) = $coordinator->psql($db, q{SELECT idempotency.idem_bind_store('other', 'shop.two_copies')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($e, qr/ERROR:  0A000: cannot bind idempotency namespace "other" to shop\.two_copies\n.*replicat/,
	'  and cannot be bound');
# A namespace bound to one by an earlier release (here by hand) is refused
# at every call, before any key is looked at.
$coordinator->safe_psql($db, q{
	INSERT INTO idempotency.idem_namespace_config (namespace, store, store_name)
	VALUES ('other', 'shop.two_copies', 'shop.two_copies')});
($ret, $o, $e) = $coordinator->psql($db, q{SELECT kind FROM idempotency.idem_begin('other', 'k', '{}')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($e, qr/ERROR:  0A000: the store of idempotency namespace "other" is a Citus table of a kind it cannot use\n.*replicated/,
	'  and a namespace bound to it before is refused at every call');
$coordinator->safe_psql($db, q{DELETE FROM idempotency.idem_namespace_config WHERE namespace = 'other'});

# A store whose name leaves no room for its entry points' names.
($ret, $o, $e) = $coordinator->psql($db, q{
	SET ROLE app;
	SELECT idempotency.idem_create_store('shop.records_of_a_service_with_a_really_very_long_name_xyz');
	SELECT create_distributed_table('shop.records_of_a_service_with_a_really_very_long_name_xyz', 'key_value');
	SELECT * FROM idempotency.idem_create_entry_points('shop.records_of_a_service_with_a_really_very_long_name_xyz');},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($e, qr/ERROR:  42622: the name of store shop\.records_of_a_service_with_a_really_very_long_name_xyz is too long for its entry points/,
	'refusals: a store name too long for its entry points');

# A distributed table can be dropped as ever; the bound store cannot, nor
# replaced by Citus's alter_distributed_table (it drops the old table).
$coordinator->safe_psql($db, q{
	CREATE TABLE shop.scratch (a int PRIMARY KEY);
	SELECT create_distributed_table('shop.scratch', 'a');
	DROP TABLE shop.scratch;});
pass('refusals: an unrelated distributed table is dropped as ever');
for my $ddl (q{DROP TABLE shop.idem_records}, q{SELECT alter_distributed_table('shop.idem_records', shard_count := 4, cascade_to_colocated := false)})
{
	($ret, $o, $e) = $coordinator->psql($db, $ddl, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($e, qr/ERROR:  2BP01: cannot drop table shop\.idem_records: idempotency namespace "\S+" is bound to it/,
		"refusals: $ddl is refused while namespaces are bound to the store");
}

# 8. The registry on every node: a grant revoked on the coordinator holds
#    on the workers from the next call; a drop waits for a begin a worker
#    holds, then counts its record.
$coordinator->safe_psql($db, q{
	CREATE ROLE other LOGIN;
	GRANT USAGE ON SCHEMA shop TO other;
	SELECT idempotency.idem_grant('pay', 'other');});
($ret, $o, $e) = $workers[0]->psql($db, q{SELECT kind FROM shop.idem_records_begin('pay', 'k-coordinator', '{"amount": 5}')},
	extra_params => [ '-U', 'other' ]);
is($o, 'prior_result', 'registry: a grant made on the coordinator holds on a worker');
$coordinator->safe_psql($db, q{SELECT idempotency.idem_revoke('pay', 'other')});
($ret, $o, $e) = $workers[0]->psql($db, q{SELECT kind FROM shop.idem_records_begin('pay', 'k-coordinator', '{"amount": 5}')},
	extra_params => [ '-U', 'other', '-v', 'VERBOSITY=verbose' ]);
like($e, qr/ERROR:  42501: permission denied for idempotency namespace "pay"/, '  and so does its revoke');
$coordinator->safe_psql($db, q{SELECT idempotency.idem_namespace_configure('drop-me')});
$coordinator->safe_psql($db, q{SELECT idempotency.idem_bind_store('drop-me', 'shop.idem_records')});
$holder = $coordinator->background_psql($db);
$holder->query_safe(q{BEGIN; SELECT kind FROM shop.idem_records_begin('drop-me', 'k', '{}')});
my $dropper = $coordinator->background_psql($db, on_error_stop => 0);
$dropper->query_until(qr/dropping/, q{
	\echo dropping
	SELECT idempotency.idem_namespace_drop('drop-me');
	\echo dropped
});
ok(owner_of('k')->poll_query_until($db, q{
	SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory' AND mode = 'ExclusiveLock' AND NOT granted}),
	'registry: a drop waits on the worker for the namespace\'s begin there');
$holder->query_safe(q{SELECT shop.idem_records_commit('drop-me', 'k', '{}'); COMMIT;});
$dropper->query_until(qr/dropped/, '');
like($dropper->{stderr}, qr/cannot drop idempotency namespace "drop-me"/, '  then counts its record and refuses');
$dropper->quit;
$holder->quit;

# A node whose copy of the registry holds OIDs that name other roles and
# tables there (as Citus's binary copy to a node added later, or a
# rebalance, leaves it): a grant whose role has another name counts for
# nothing, a store of another name is refused, until idem_distribute_registry
# writes the rows again by name.
my $w = $workers[0];
my ($local_key) = grep { owner_of($_)->port == $w->port } map { "local-$_" } 1 .. 40;
$coordinator->safe_psql($db, q{CREATE ROLE mallory LOGIN; GRANT USAGE ON SCHEMA shop, idempotency TO mallory});
my ($config_placement, $grant_placement) = map {
	$coordinator->safe_psql($db, qq{
		SELECT shard_name(logicalrelid, shardid, false) FROM pg_dist_shard WHERE logicalrelid = 'idempotency.$_'::regclass})
} qw(idem_namespace_config idem_namespace_grant);
$w->safe_psql($db, qq{
	SET citus.enable_manual_changes_to_shards = on;
	UPDATE $grant_placement SET grantee = 'mallory'::regrole WHERE namespace = 'pay' AND grantee = 'app'::regrole;});
($ret, $o, $e) = $w->psql($db, qq{SELECT kind FROM shop.idem_records_begin('pay', '$local_key', '{}')},
	extra_params => [ '-U', 'mallory', '-v', 'VERBOSITY=verbose' ]);
like($e, qr/ERROR:  42501: permission denied for idempotency namespace "pay"/,
	'registry by OID: a grant whose role has another name on this node gives that role nothing');
($ret, $o, $e) = $w->psql($db, qq{SELECT kind FROM shop.idem_records_begin('pay', '$local_key', '{}')},
	extra_params => [ '-U', 'app', '-v', 'VERBOSITY=verbose' ]);
like($e, qr/ERROR:  42501: permission denied for idempotency namespace "pay"/, '  nor its grantee, there');
$w->safe_psql($db, qq{
	SET citus.enable_manual_changes_to_shards = on;
	UPDATE $config_placement SET store = 'shop.payments'::regclass WHERE namespace = 'pay';});
($ret, $o, $e) = $w->psql($db, qq{SELECT kind FROM shop.idem_records_begin('pay', '$local_key', '{}')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($e, qr/ERROR:  55000: this node's idempotency registry names another table as the store of namespace "pay"/,
	'registry by OID: a store of another name on this node is refused');
$coordinator->safe_psql($db, q{SELECT idempotency.idem_distribute_registry()});
($out) = as_app($w, qq{BEGIN; SELECT kind FROM shop.idem_records_begin('pay', '$local_key', '{}'); ROLLBACK;});
is($out, 'fresh', '  idem_distribute_registry writes the rows again by name, and the node answers');

# 9. 16 retrying clients over 2,000 keys on all three nodes: each pays a key
#    (a payment colocated with the record) once; a quarter of the fresh
#    attempts roll back after paying, some fail transiently. Then again on
#    new keys while shards move under the load.
my $hammer = "$FindBin::Bin/retrying-client";
sub hammer
{
	my ($prefix, $keys) = @_;
	my @ports = map { $_->port } @nodes;
	my @pids;
	for my $client (0 .. 15)
	{
		my $pid = fork();
		die "fork: $!" unless defined $pid;
		if ($pid == 0)
		{
			exec($^X, $hammer, $db, $ports[$client % 3], $prefix, $keys, $client) or die "exec: $!";
		}
		push @pids, $pid;
	}
	return @pids;
}
sub wait_all { my $failed = 0; for (@_) { waitpid($_, 0); $failed++ if $? != 0; } return $failed; }
sub payments
{
	my ($prefix) = @_;
	return $coordinator->safe_psql($db, qq{
		SELECT count(*) || ' ' || count(DISTINCT key_value) FROM shop.payments WHERE key_value LIKE '$prefix%'})
	  . ' ' . $coordinator->safe_psql($db, qq{
		SELECT count(*) FROM shop.idem_records WHERE key_value LIKE '$prefix%' AND status = 'committed'});
}
is(wait_all(hammer('still-', 2000)), 0, 'load: 16 retrying clients finished');
is(payments('still-'), '2000 2000 2000', '  every key paid exactly once and committed');

my @load = hammer('moving-', 2000);
my $moves = 0;
my @shards = split /\n/, $coordinator->safe_psql($db, q{
	SELECT s.shardid FROM pg_dist_shard s WHERE s.logicalrelid = 'shop.idem_records'::regclass ORDER BY 1});
for my $round (0 .. 6)
{
	my $s = $shards[$round % @shards];
	my $port = $coordinator->safe_psql($db, "SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = $s");
	my $target = $port == $workers[0]->port ? $workers[1] : $workers[0];
	my $mode = $round % 2 ? 'force_logical' : 'block_writes';
	# A move may lose a lock race with the load (more so on a busy
	# machine): tried up to three times, as an operator would.
	for my $try (1 .. 3)
	{
		my ($r) = $coordinator->psql($db, sprintf(q{
			SELECT citus_move_shard_placement(%d, 'localhost', %d, 'localhost', %d, shard_transfer_mode := '%s')},
			$s, $port, $target->port, $mode));
		if ($r == 0) { $moves++; last; }
	}
}
is(wait_all(@load), 0, 'load with moves: 16 retrying clients finished');
cmp_ok($moves, '>=', 5, "  while $moves shard moves went through");
is(payments('moving-'), '2000 2000 2000', '  every key paid exactly once and committed');

# 10. A worker crashes between PREPARE and COMMIT PREPARED: the
#     coordinator's commit decided; until recovery the key is in flight,
#     after it the key replays; one payment. (The coordinator waits for a
#     synchronous standby that never comes after its local commit, before
#     it sends COMMIT PREPARED: the worker is crashed then.)
my $victim_key = 'crash-1';
my $victim = owner_of($victim_key);
$coordinator->append_conf('postgresql.conf', qq{synchronous_standby_names = 'nobody'\n});
$coordinator->reload;
my $client = $coordinator->background_psql($db, on_error_stop => 0);
$client->query_safe(qq{
	BEGIN;
	SELECT kind FROM shop.idem_records_begin('pay', '$victim_key', '{"amount": 6}');
	INSERT INTO shop.payments (key_value, amount) VALUES ('$victim_key', 6);
	INSERT INTO shop.ledger (key_value) VALUES ('$victim_key');
	SELECT shop.idem_records_commit('pay', '$victim_key', '{"paid": 6}');});
$client->query_until(qr/committing/, "\\echo committing\nCOMMIT;\n");
ok($coordinator->poll_query_until($db, q{
	SELECT count(*) = 1 FROM pg_stat_activity
	WHERE wait_event = 'SyncRep' AND backend_type = 'client backend' AND query LIKE 'COMMIT%'}),
	'crash: the coordinator committed and waits before COMMIT PREPARED');
is($victim->safe_psql($db, 'SELECT count(*) FROM pg_prepared_xacts'), '1', '  the worker holds the prepared transaction');
$victim->stop('immediate');
$victim->start;
$coordinator->safe_psql($db, q{SET synchronous_commit = local;
	SELECT pg_cancel_backend(pid) FROM pg_stat_activity
	WHERE wait_event = 'SyncRep' AND backend_type = 'client backend' AND query LIKE 'COMMIT%'});
$client->quit;
$coordinator->adjust_conf('postgresql.conf', 'synchronous_standby_names', "''");
$coordinator->reload;
is($victim->safe_psql($db, 'SELECT count(*) FROM pg_prepared_xacts'), '1',
	'crash: after its restart the worker still holds the prepared transaction');
($out) = as_app($coordinator, qq{SELECT kind FROM shop.idem_records_begin('pay', '$victim_key', '{"amount": 6}')});
is($out, 'in_flight', '  the key is in flight until it is recovered');
is($coordinator->safe_psql($db, 'SELECT recover_prepared_transactions()'), '1', '  recovery commits it');
($out) = as_app($coordinator, qq{SELECT kind || ' ' || result FROM shop.idem_records_begin('pay', '$victim_key', '{"amount": 6}')});
is($out, 'prior_result {"paid": 6}', '  and the key replays its result');
is($coordinator->safe_psql($db, qq{SELECT count(*) FROM shop.payments WHERE key_value = '$victim_key'}) . ' '
	. $coordinator->safe_psql($db, qq{SELECT count(*) FROM shop.ledger WHERE key_value = '$victim_key'}), '1 1',
	'  one payment, one ledger row');

# 11. Purge per shard on every node: expired records go, a record whose
#     lease still runs stays.
$coordinator->safe_psql($db, q{
	UPDATE shop.idem_records SET expires_at = now() - interval '1 second' WHERE key_value LIKE 'still-%'});
my $purged = $coordinator->safe_psql($db, q{
	SELECT sum(result::bigint) FROM run_command_on_all_nodes($$SELECT idempotency.idem_purge()$$)});
is($purged, '2000', 'purge: idem_purge on every node deletes the expired records from its shards');
is($coordinator->safe_psql($db, q{SELECT count(*) FROM shop.idem_records WHERE key_value LIKE 'still-%'}), '0',
	'  none is left');
is($coordinator->safe_psql($db, q{SELECT committed FROM idempotency.idem_namespace_stats WHERE namespace = 'pay'}),
	$coordinator->safe_psql($db, q{SELECT count(*) FROM shop.idem_records WHERE namespace = 'pay' AND status = 'committed'}),
	'stats: idem_namespace_stats counts the distributed store');
is($coordinator->safe_psql($db, q{
	SELECT count(*) FILTER (WHERE nodeid = 1 AND (result::jsonb ->> 'begin_fresh')::bigint = 0) || ' '
	       || (sum((result::jsonb ->> 'begin_fresh')::bigint) > 0)
	FROM run_command_on_all_nodes($$SELECT row_to_json(s) FROM idempotency.idem_stats s$$)}), '1 true',
	'stats: the counters are each node\'s (the coordinator answered no begin), summed over the nodes');

# 12. A store distributed by namespace, colocated with the service's table
#     distributed by tenant: each tenant's calls and rows on one node, one
#     phase, and hashed keys allowed.
$coordinator->safe_psql($db, q{
	SET ROLE app;
	SELECT idempotency.idem_create_store('shop.tenant_records');
	CREATE TABLE shop.orders (tenant text COLLATE "C" NOT NULL, id bigserial, PRIMARY KEY (tenant, id));
	SELECT create_distributed_table('shop.orders', 'tenant');
	SELECT create_distributed_table('shop.tenant_records', 'namespace', colocate_with := 'shop.orders');
	SELECT count(*) FROM idempotency.idem_create_entry_points('shop.tenant_records');
	RESET ROLE;
	SELECT idempotency.idem_namespace_configure('acme', hash_keys => true);
	SELECT idempotency.idem_bind_store('acme', 'shop.tenant_records');
	SELECT idempotency.idem_grant('acme', 'app');});
$before = prepared_count();
($out, $err) = as_app($workers[1], q{
	BEGIN;
	SELECT kind FROM shop.tenant_records_begin('acme', 'order-1', '{"sku": 1}');
	INSERT INTO shop.orders (tenant) VALUES ('acme');
	SELECT shop.tenant_records_commit('acme', 'order-1', '{"order": 1}');
	COMMIT;
	SELECT kind || ' ' || result FROM shop.tenant_records_begin('acme', 'order-1', '{"sku": 1}');});
is($out, "fresh\n\nprior_result {\"order\": 1}", 'tenant store: fresh, then the replay');
is(prepared_count(), $before, '  the record and the tenant\'s order commit in one phase');
like($coordinator->safe_psql($db, q{SELECT key_value FROM shop.tenant_records WHERE namespace = 'acme'}),
	qr/^[0-9a-f]{64}$/, '  with the key hashed');
# A batch of one tenant's keys, through its entry point (delegated to the
# tenant's node as the others are): the replay, a new key, the new key again
# (in flight: this call's claim), in the input's order.
($out, $err) = as_app($workers[0], q{
	BEGIN;
	SELECT shop.tenant_records_begin_batch('acme', ARRAY['order-1', 'order-2', 'order-2'],
	                                       ARRAY['{"sku": 1}', '{"sku": 2}', '{"sku": 2}']::jsonb[]);
	ROLLBACK;});
like($out, qr/^\{"\(prior_result,.*\)","\(fresh,.*\)","\(in_flight,.*\)"\}$/,
	'tenant store: a batch through its entry point answers each key in order') or diag($err);
# Called again (after an update that adds an entry point, say), it keeps
# the ones that exist and makes what is missing.
$coordinator->safe_psql($db, q{DROP FUNCTION shop.tenant_records_begin_batch(text, text[], jsonb[], interval, interval)});
is($coordinator->safe_psql($db, q{SET ROLE app; SELECT count(*) FROM idempotency.idem_create_entry_points('shop.tenant_records')}),
	'8', 'tenant store: idem_create_entry_points again keeps the seven and makes the batch\'s again');
($out, $err) = as_app($workers[1], q{
	BEGIN;
	SELECT shop.tenant_records_begin_batch('acme', ARRAY['order-1'], ARRAY['{"sku": 1}']::jsonb[]);
	ROLLBACK;});
like($out, qr/^\{"\(prior_result,/, '  and the batch entry point made again works') or diag($err);
# A function of an entry point's name that is not the entry point (another
# owner's, another body) is refused, not adopted.
$coordinator->safe_psql($db, q{
	DROP FUNCTION shop.tenant_records_begin_batch(text, text[], jsonb[], interval, interval);
	CREATE FUNCTION shop.tenant_records_begin_batch(namespace text, keys text[], requests jsonb[],
	    replay_window interval DEFAULT NULL, in_flight_wait interval DEFAULT NULL)
	RETURNS idempotency.idem_outcome[] LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$;});
($ret, $o, $e) = $coordinator->psql($db, q{SET ROLE app; SELECT count(*) FROM idempotency.idem_create_entry_points('shop.tenant_records')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($e, qr/ERROR:  42723: function shop\.tenant_records_begin_batch\(.*\) already exists and is not the entry point/,
	'tenant store: a function of the batch entry point\'s name that is not it is refused');
$coordinator->safe_psql($db, q{
	DROP FUNCTION shop.tenant_records_begin_batch(text, text[], jsonb[], interval, interval);
	SET ROLE app; SELECT count(*) FROM idempotency.idem_create_entry_points('shop.tenant_records');});
# A store distributed by key has no batch entry point, and idem_begin_batch
# refuses it: a batch's keys would be on several nodes.
is($coordinator->safe_psql($db, q{SELECT count(*) FROM pg_proc WHERE proname = 'idem_records_begin_batch'}), '0',
	'store distributed by key: no batch entry point');
($ret, $o, $e) = $coordinator->psql($db, q{SELECT * FROM idempotency.idem_begin_batch('pay', ARRAY['a'], ARRAY['{}']::jsonb[])},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($e, qr/ERROR:  0A000: idem_begin_batch cannot begin keys of a store distributed by key/,
	'store distributed by key: idem_begin_batch is refused');

# 13. From a single server, two ways: a namespace whose records are in the
#     extension's table on the coordinator moves to the distributed store
#     in one transaction; a store bound to a plain table is distributed in
#     place (Citus copies its rows into the shards). Both replay after.
$coordinator->safe_psql($db, q{
	SELECT idempotency.idem_namespace_configure('legacy');
	SELECT idempotency.idem_grant('legacy', 'app');
	BEGIN;
	SELECT kind FROM idempotency.idem_begin('legacy', 'l-1', '{"a": 1}');
	SELECT idempotency.idem_commit('legacy', 'l-1', '{"ok": 1}');
	COMMIT;
	BEGIN;
	SELECT idempotency.idem_lock_namespace('legacy');
	WITH moved AS (DELETE FROM idempotency.idempotency_record WHERE namespace = 'legacy' RETURNING *)
	INSERT INTO shop.idem_records SELECT * FROM moved;
	SELECT idempotency.idem_bind_store('legacy', 'shop.idem_records');
	COMMIT;});
($out) = as_app($workers[0], q{SELECT kind || ' ' || result FROM shop.idem_records_begin('legacy', 'l-1', '{"a": 1}')});
is($out, 'prior_result {"ok": 1}', 'migration: records copied from the extension\'s table replay from the distributed store');
# Once the registry is distributed, every node reads a binding: a table on
# the coordinator only cannot be bound.
$coordinator->safe_psql($db, q{SET ROLE app; SELECT idempotency.idem_create_store('shop.local_only');});
($ret, $o, $e) = $coordinator->psql($db, q{SELECT idempotency.idem_bind_store('local', 'shop.local_only')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($e, qr/ERROR:  0A000: cannot bind idempotency namespace "local" to shop\.local_only/,
	'migration: with the registry distributed, a table on the coordinator only cannot be bound');
# A single server's bound store, before Citus took the registry: Citus
# distributes the store in place, then the registry, and the records replay
# through the entry points.
CitusCluster::database('grow', @nodes);
$coordinator->safe_psql('grow', q{
	CREATE ROLE grower LOGIN;
	CREATE SCHEMA shop AUTHORIZATION grower;
	SELECT idempotency.idem_grant('single', 'grower');
	SET ROLE grower;
	SELECT idempotency.idem_create_store('shop.single');
	RESET ROLE;
	SELECT idempotency.idem_bind_store('single', 'shop.single');
	BEGIN;
	SELECT kind FROM idempotency.idem_begin('single', 's-1', '{"a": 1}');
	SELECT idempotency.idem_commit('single', 's-1', '{"ok": 1}');
	COMMIT;
	SET ROLE grower;
	SELECT create_distributed_table('shop.single', 'key_value');
	SELECT truncate_local_data_after_distributing_table('shop.single');
	RESET ROLE;
	SELECT idempotency.idem_distribute_registry();
	SET ROLE grower;
	SELECT count(*) FROM idempotency.idem_create_entry_points('shop.single');});
($ret, $o, $e) = $workers[1]->psql('grow', q{SELECT kind || ' ' || result FROM shop.single_begin('single', 's-1', '{"a": 1}')},
	extra_params => [ '-U', 'grower' ]);
is($o, 'prior_result {"ok": 1}', 'migration: a bound store distributed in place replays from its shards');
is($coordinator->safe_psql('grow', q{SELECT store FROM idempotency.idem_namespaces WHERE namespace = 'single'}),
	'shop.single', '  and keeps its binding');

$_->stop for @nodes;
done_testing();
