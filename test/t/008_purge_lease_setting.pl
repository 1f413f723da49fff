# 008_purge_lease_setting.pl: the server-wide in-progress lease. Until
# 1.0.0 it was a server setting (idempotency.in_progress_lease, set in
# postgresql.conf or with ALTER SYSTEM only: every session must agree on
# which claims may outlive their transaction); from 1.0.0 it is the
# in_progress_lease of idem_defaults, and the update copies the setting's
# value there.
#
# On a 0.9.2 schema, which this library still serves: an unregistered
# namespace's abandoned record is taken over under the setting and can be
# finished; a namespace's own lease, 0 included, overrides it. It holds for
# a purge run by a role that may only purge, in a session where the library
# is not loaded yet: until the library is loaded PostgreSQL keeps any value
# a session sets for it as a placeholder; idem_purge loads the library
# before reading the setting, which turns such a value away. A value that
# stood where the configured one did (a connection's option, a database's
# lease) is refused too when the library loads, and the configured value is
# then lost for that session: the store refuses to run there (55P02) rather
# than run on the built-in default.
#
# After the update to 1.0.0: idem_defaults has the lease; the purge and the
# takeover follow it; the setting, still in postgresql.conf, no longer
# applies and every backend warns of it once; a session's value cannot
# change anything, so the store runs.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('purge_lease');
$node->init;
$node->append_conf('postgresql.conf', "idempotency.in_progress_lease = '1h'");
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION idempotency VERSION '0.9.2';
	CREATE ROLE purger LOGIN;
	GRANT USAGE ON SCHEMA idempotency TO purger;
	GRANT EXECUTE ON FUNCTION idempotency.idem_purge(integer, integer) TO purger;
	SELECT idempotency.idem_namespace_configure('lease-zero', in_progress_lease => '0');
	-- Records that workers claimed and committed unfinished: in 'jobs' ten
	-- minutes ago (the replay window has passed), elsewhere two hours ago.
	INSERT INTO idempotency.idempotency_record
	    (namespace, key_value, status, request_hash, request_payload, created_at, updated_at, expires_at, fence)
	VALUES ('jobs', 'running', 'in_progress', idempotency.idem_request_hash('{}'), '{}',
	        now() - interval '10 minutes', now() - interval '10 minutes', now() - interval '1 minute', 5000000000),
	       ('lease-guc', 'k', 'in_progress', idempotency.idem_request_hash('{}'), '{}',
	        now() - interval '2 hours', now() - interval '2 hours', now() + interval '1 day', 5000000001),
	       ('lease-zero', 'k', 'in_progress', idempotency.idem_request_hash('{}'), '{}',
	        now() - interval '2 hours', now() - interval '2 hours', now() + interval '1 day', 5000000002);});

# The server's lease: an unregistered namespace's record older than an hour
# is taken over (attempt 2) and finished by the taker; a namespace whose own
# lease is 0 keeps its record in flight.
is($node->safe_psql('postgres', q{
	BEGIN;
	SELECT kind || ' ' || attempt FROM idempotency.idem_begin('lease-guc', 'k', '{}');
	SELECT idempotency.idem_commit('lease-guc', 'k', '{"done": true}');
	COMMIT;
	SELECT kind FROM idempotency.idem_begin('lease-guc', 'k', '{}');}), "fresh 2\n\nprior_result",
	'the server-wide lease: an abandoned record is taken over as attempt 2, finished, then replayed');
is($node->safe_psql('postgres', q{SELECT kind FROM idempotency.idem_begin('lease-zero', 'k', '{}')}),
	'in_flight', 'a namespace lease of 0 overrides the server-wide lease');

# No session sets it: not SET, and not for a database.
my ($ret, $out, $err) = $node->psql('postgres', q{LOAD 'idempotency'; SET idempotency.in_progress_lease = '0'});
like($err, qr/parameter "idempotency.in_progress_lease" cannot be changed now/, 'a session cannot set the lease');
($ret, $out, $err) = $node->psql('postgres', q{LOAD 'idempotency'; ALTER DATABASE postgres SET idempotency.in_progress_lease = '0'});
like($err, qr/parameter "idempotency.in_progress_lease" cannot be changed now/, 'nor set it for a database');

($ret, $out, $err) = $node->psql('postgres', q{
	SET idempotency.in_progress_lease = '0';
	SELECT idempotency.idem_purge();}, extra_params => ['-U', 'purger']);
is($out, '0', 'a purger that set the lease to 0 before the library was loaded purges nothing');
like($err, qr/parameter "idempotency.in_progress_lease" cannot be changed now/,
	'and is told its setting was refused');
is($node->safe_psql('postgres', q{SELECT count(*) FROM idempotency.idempotency_record WHERE key_value = 'running'}),
	'1', 'the record whose lease runs is still there');

# A connection's option (the library not preloaded): it stands where the
# server's lease did, and when the library loads PostgreSQL refuses it and
# leaves the built-in default (no lease). The store refuses to run in such a
# session: the purge deletes nothing, and a begin is refused as well.
my $trust = qr/ERROR:  55P02: the idempotency settings of this session cannot be trusted/;
for my $option ('-c idempotency.in_progress_lease=0', '-c idempotency.in_progress_lease=1h',
	'-c idempotency.replay_window=1s')
{
	local $ENV{PGOPTIONS} = $option;
	($ret, $out, $err) = $node->psql('postgres', 'SELECT idempotency.idem_purge()',
		extra_params => [ '-U', 'purger', '-v', 'VERBOSITY=verbose' ]);
	like($err, $trust, "a purge in a session started with $option is refused");
	($ret, $out, $err) = $node->psql('postgres', q{SELECT kind FROM idempotency.idem_begin('jobs', 'other', '{}')},
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($err, $trust, "  and so is a begin");
}
is($node->safe_psql('postgres', q{SELECT count(*) FROM idempotency.idempotency_record WHERE key_value = 'running'}),
	'1', 'the record whose lease runs is still there');

# A database's value for the lease, set where the library was not loaded
# (0.5.0 allowed it): the sessions of that database cannot trust their lease.
$node->safe_psql('postgres', q{ALTER DATABASE postgres SET idempotency.in_progress_lease = '0'});
($ret, $out, $err) = $node->psql('postgres', 'SELECT idempotency.idem_purge()',
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, $trust, "a database's lease: the store refuses to run in its sessions");
like($err, qr/idempotency\.in_progress_lease was set for this session before/, '  naming the setting');
$node->safe_psql('postgres', q{ALTER DATABASE postgres RESET idempotency.in_progress_lease});
is($node->safe_psql('postgres', 'SELECT idempotency.idem_purge()'), '0',
	'  removed, the server\'s lease applies again');

# The update to 1.0.0 copies the server's lease into idem_defaults.
$node->safe_psql('postgres', 'ALTER EXTENSION idempotency UPDATE');
is($node->safe_psql('postgres', q{SELECT in_progress_lease FROM idempotency.idem_defaults}), '01:00:00',
	'1.0.0: the update copied the server\'s lease into idem_defaults');
my $old_setting = qr/WARNING:  setting "idempotency.in_progress_lease" no longer applies/;
($ret, $out, $err) = $node->psql('postgres', q{
	INSERT INTO idempotency.idempotency_record
	    (namespace, key_value, status, request_hash, request_payload, created_at, updated_at, expires_at, fence)
	VALUES ('lease-guc', 'k2', 'in_progress', idempotency.idem_request_hash('{}'), '{}',
	        now() - interval '2 hours', now() - interval '2 hours', now() + interval '1 day', 5000000003);
	BEGIN;
	SELECT kind || ' ' || attempt FROM idempotency.idem_begin('lease-guc', 'k2', '{}');
	SELECT idempotency.idem_commit('lease-guc', 'k2', '{"done": true}');
	COMMIT;});
is($out, "fresh 2\n", '1.0.0: the defaults\' lease: an abandoned record is taken over as attempt 2');
like($err, $old_setting, '  and the session is warned that the setting no longer applies');
($ret, $out, $err) = $node->psql('postgres', 'SELECT idempotency.idem_purge()',
	extra_params => [ '-U', 'purger' ]);
is($out, '0', '1.0.0: a purge keeps the record whose lease (the defaults\') runs');
# A session's value for the setting changes nothing now: the store runs.
{
	local $ENV{PGOPTIONS} = '-c idempotency.in_progress_lease=0';
	($ret, $out, $err) = $node->psql('postgres', 'SELECT idempotency.idem_purge()',
		extra_params => [ '-U', 'purger' ]);
	is($out, '0', '1.0.0: a session started with a lease of 0 runs, and purges nothing');
	unlike($err, qr/55P02|cannot be trusted/, '  and is not refused');
}
is($node->safe_psql('postgres', q{SELECT count(*) FROM idempotency.idempotency_record WHERE key_value = 'running'}),
	'1', 'the record whose lease runs is still there');
# The defaults' lease is not removed under the record claimed with it
# ('jobs' is unregistered: it follows the defaults).
($ret, $out, $err) = $node->psql('postgres', q{SELECT idempotency.idem_namespace_defaults(in_progress_lease => '0')});
like($err, qr/cannot remove the default in-progress lease.*\n.*Namespace "jobs"/,
	'1.0.0: the defaults\' lease is not removed while a namespace that follows it has a claim in progress');
# The setting gone, nothing is warned of.
# (adjust_conf is not in PostgreSQL 13's test modules: the line is dropped by hand.)
my $conf = $node->data_dir . '/postgresql.conf';
my $kept = join '', grep { !/^\s*idempotency\.in_progress_lease\s*=/ } split /^/m, slurp_file($conf);
open my $fh, '>', $conf or die "cannot write $conf: $!";
print $fh $kept;
close $fh;
$node->reload;
($ret, $out, $err) = $node->psql('postgres', 'SELECT idempotency.idem_purge()', extra_params => [ '-U', 'purger' ]);
is($out, '0', '1.0.0: the setting removed, the defaults\' lease still keeps the record');
unlike($err, $old_setting, '  and nothing is warned of');

$node->stop;
done_testing();
