# 011_pooler_settings.pl: behind a connection pooler in transaction pooling,
# what one client sets for its session stays on the server connection and
# reaches the next client that gets it. No setting of the store's can be set
# that way: client A's SET idempotency.replay_window = '1s' and SET
# idempotency.in_flight_wait = '3s' are refused, so client B's record keeps
# the server's replay window (a purge 1.2 s later leaves it, and B's retry
# replays it: one effect), and B's begin of a key held elsewhere answers
# in_flight at once. (0.5.0 took both from A's session: B's record expired
# after a second, was purged, and B's retry answered fresh.) Runs through
# Debian's PgBouncer with a pool of one server connection, and the library
# preloaded; skipped where pgbouncer is not installed.
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my ($pgbouncer) = grep { -x } ('/usr/sbin/pgbouncer', '/usr/bin/pgbouncer');
plan skip_all => 'pgbouncer is not installed (Debian package pgbouncer)' unless $pgbouncer;

my $node = PostgreSQL::Test::Cluster->new('pooled');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idempotency');

# PgBouncer on a free local port, transaction pooling, one server connection.
my $dir = $node->basedir;
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $socket_dir = $node->host;
open my $ini, '>', "$dir/pgbouncer.ini" or die $!;
print $ini <<"EOF";
[databases]
postgres = host=$socket_dir port=@{[ $node->port ]} dbname=postgres
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
default_pool_size = 1
max_client_conn = 10
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
EOF
close $ini;
open my $users, '>', "$dir/userlist.txt" or die $!;
print $users qq{"postgres" ""\n};
close $users;
my $bouncer = IPC::Run::start([ $pgbouncer, "$dir/pgbouncer.ini" ], '>', "$dir/pgbouncer.out", '2>&1');

# Runs sql as one client of the pool (its own client connection) and returns
# (stdout, stderr).
sub pooled
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'psql', '-X', '-A', '-t', '-h', '127.0.0.1', '-p', $port, '-U', 'postgres', '-d', 'postgres',
			'-c', $sql ], '>', \$out, '2>', \$err);
	chomp $out;
	return ($out, $err);
}
for (1 .. 100) { last if (pooled('SELECT 1'))[0] eq '1'; sleep 0.1; }
is((pooled('SELECT 1'))[0], '1', 'clients connect through PgBouncer');

# The pool is what makes a session setting reach another client: what A sets
# for its session, B (on the same server connection) sees.
pooled(q{SET myapp.tenant = 'client-a'});
is((pooled(q{SELECT current_setting('myapp.tenant', true)}))[0], 'client-a',
	'a setting client A makes for its session reaches client B through the pool');

# Client A may not set the store's replay window for its session...
my ($out, $err) = pooled(q{SET idempotency.replay_window = '1s'});
like($err, qr/parameter "idempotency.replay_window" cannot be set in a session/,
	'client A cannot set idempotency.replay_window for its session');
# ... so client B's record keeps the server's window.
($out, $err) = pooled(q{BEGIN;
	SELECT kind FROM idempotency.idem_begin('pay', 'b-1', '{"amount": 1}');
	SELECT idempotency.idem_commit('pay', 'b-1', '{"payment": 1}');
	COMMIT;});
is($err, '', 'client B pays once');
is($node->safe_psql('postgres', q{SELECT status || ' ' || (expires_at - created_at) FROM idempotency.idempotency_record WHERE key_value = 'b-1'}),
	'committed 1 day', "client B's record has the server's replay window");
sleep 1.2;
is($node->safe_psql('postgres', 'SELECT idempotency.idem_purge()'), '0', 'a purge 1.2 s later deletes nothing');
is((pooled(q{SELECT kind FROM idempotency.idem_begin('pay', 'b-1', '{"amount": 1}')}))[0], 'prior_result',
	"client B's retry replays: one payment");

# Nor the in-flight wait: client B, given the server connection after A,
# answers in_flight at once for a key another session holds.
($out, $err) = pooled(q{SET idempotency.in_flight_wait = '3s'});
like($err, qr/parameter "idempotency.in_flight_wait" cannot be set in a session/,
	'client A cannot set idempotency.in_flight_wait for its session');
my $holder = $node->background_psql('postgres');
$holder->query_safe(q{BEGIN; SELECT idempotency.idem_begin('pay', 'held', '{}');});
my $start = time;
is((pooled(q{SELECT kind FROM idempotency.idem_begin('pay', 'held', '{}')}))[0], 'in_flight',
	'client B finds the held key in flight');
cmp_ok(time - $start, '<', 2.5, '  at once, not after client A\'s wait');
$holder->query_safe('ROLLBACK');
$holder->quit;

$bouncer->kill_kill;
$node->stop;
done_testing();
