# 003_pg_cron.pl: the pg_cron recipe of docs/usage.md, for real. pg_cron runs
# idem_purge_batches on its schedule in a server that preloads it; expired
# records disappear, live ones and the in-progress record of an open
# transaction stay.
#
# pg_cron (Debian's postgresql-15-cron, 1.4) schedules by the minute, so
# this test waits up to about a minute for the first run.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('cron');
$node->init;
# pg_cron connects over libpq as the user who scheduled the job; point it at
# the test server's socket directory (its default, localhost, is not listening).
$node->append_conf('postgresql.conf', join("\n",
	"shared_preload_libraries = 'pg_cron'",
	"cron.database_name = 'postgres'",
	"cron.host = '" . $node->host . "'",
	"cron.timezone = 'UTC'", ''));
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION pg_cron; CREATE EXTENSION idempotency;');

# 2,500 expired records (more than one chunk of 1,000 below), 10 live ones.
$node->safe_psql('postgres', q{
	INSERT INTO idempotency.idempotency_record
	SELECT 'cron', 'expired-' || i, 'committed', sha256(i::text::bytea), '{}', '{"ok": true}', NULL,
	       now() - interval '2 days', now() - interval '2 days', now() - interval '1 day'
	FROM generate_series(1, 2500) i;
	BEGIN;
	SELECT idempotency.idem_begin('cron', 'live-' || i, '{}') FROM generate_series(1, 10) i;
	SELECT idempotency.idem_commit('cron', 'live-' || i, '{}') FROM generate_series(1, 10) i;
	COMMIT;
});

# The recipe, verbatim:
$node->safe_psql('postgres', q{
SELECT cron.schedule('idempotency-purge', '*/10 * * * *', 'CALL idempotency.idem_purge_batches(10000)');
});
is($node->safe_psql('postgres', q{SELECT schedule || ' ' || command FROM cron.job WHERE jobname = 'idempotency-purge'}),
	'*/10 * * * * CALL idempotency.idem_purge_batches(10000)', 'the recipe schedules the purge procedure');

# Run it every minute for the test, in chunks of 1,000 so it commits twice
# between chunks. Meanwhile a transaction holds an expired record (it is
# committing it): the purge must neither wait for it nor delete it.
$node->safe_psql('postgres', q{
	SELECT cron.alter_job(jobid, schedule => '* * * * *', command => 'CALL idempotency.idem_purge_batches(1000)')
	FROM cron.job WHERE jobname = 'idempotency-purge';
});
# (An expired in_progress record as an older release let an autocommit
# caller leave it; the holder locks its row as a transition would.)
$node->safe_psql('postgres', q{
	INSERT INTO idempotency.idempotency_record
	VALUES ('cron', 'held', 'in_progress', sha256('held'), '{}', NULL, NULL,
	        now() - interval '2 days', now() - interval '2 days', now() - interval '1 day');
});
my $holder = $node->background_psql('postgres');
$holder->query_safe(q{
	BEGIN;
	SELECT 1 FROM idempotency.idempotency_record WHERE namespace = 'cron' AND key_value = 'held' FOR UPDATE;
});
ok($node->poll_query_until('postgres', q{
	SELECT count(*) = 0 FROM idempotency.idempotency_record WHERE namespace = 'cron' AND key_value LIKE 'expired-%'
}), 'pg_cron ran the purge and every expired record is gone');
is($node->safe_psql('postgres', q{SELECT count(*) FROM idempotency.idempotency_record WHERE key_value LIKE 'live-%'}),
	'10', 'live records stay');
is($node->safe_psql('postgres', q{
	SELECT status FROM cron.job_run_details ORDER BY runid LIMIT 1
}), 'succeeded', 'the job run succeeded');

is($node->safe_psql('postgres', q{SELECT status FROM idempotency.idempotency_record WHERE key_value = 'held'}),
	'in_progress', 'the expired record an open transaction holds was neither waited for nor deleted');
$holder->query_safe('ROLLBACK');
$holder->quit;

$node->stop;
done_testing();
