# 008_purge_lease_setting.pl: the server-wide in-progress lease
# (idempotency.in_progress_lease, superuser-only) holds for a purge run by a
# role that may only purge, in a session where the library is not loaded
# yet. Until the library is loaded PostgreSQL keeps any value a session
# sets for it as a placeholder; idem_purge loads the library before reading
# the setting, which turns such a value away.
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
	CREATE EXTENSION idempotency;
	CREATE ROLE purger LOGIN;
	GRANT USAGE ON SCHEMA idempotency TO purger;
	GRANT EXECUTE ON FUNCTION idempotency.idem_purge(integer, integer) TO purger;
	-- A worker claimed the key ten minutes ago under the server's lease of
	-- an hour; the record's replay window has passed.
	INSERT INTO idempotency.idempotency_record
	    (namespace, key_value, status, request_hash, created_at, updated_at, expires_at, fence)
	VALUES ('jobs', 'running', 'in_progress', idempotency.idem_request_hash('{}'),
	        now() - interval '10 minutes', now() - interval '10 minutes', now() - interval '1 minute',
	        nextval('idempotency.idem_fence_seq'));});

my ($ret, $out, $err) = $node->psql('postgres', q{
	SET idempotency.in_progress_lease = '0';
	SELECT idempotency.idem_purge();}, extra_params => ['-U', 'purger']);
is($out, '0', 'a purger that set the lease to 0 before the library was loaded purges nothing');
like($err, qr/permission denied to set parameter "idempotency.in_progress_lease"/,
	'and is told its setting was refused');
is($node->safe_psql('postgres', q{SELECT count(*) FROM idempotency.idempotency_record WHERE key_value = 'running'}),
	'1', 'the record whose lease runs is still there');

$node->stop;
done_testing();
