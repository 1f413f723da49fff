# 014_frozen_replay.pl: a record frozen long ago still replays without a
# lock. A begin's first look answers, without the namespace's lock, only a
# row version committed before the statement's snapshot (probe.cpp,
# answerable_unlocked). Freezing keeps a row's raw xmin; once the cluster
# has used 2^31 transaction ids since, that raw xmin compares as one from
# the future, and a first look that read it raw sent every replay of the
# record to the locked path (an outside review found it with pg_resetwal).
# Here the ids are advanced the same way: pg_resetwal -x, with the pg_xact
# segment the new id needs, and a VACUUM FREEZE of every database halfway
# so that the server accepts the jump.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('frozen');
$node->init;
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION idempotency;
	SELECT namespace FROM idempotency.idem_namespace_configure('ns', replay_window => '1000 years');
	BEGIN;
	SELECT kind FROM idempotency.idem_begin('ns', 'old', '{"a": 1}');
	SELECT idempotency.idem_commit('ns', 'old', '{"r": "old"}');
	COMMIT;
	VACUUM FREEZE idempotency.idempotency_record;});

# The namespace lock a transaction holds after a replay: 0 when the first
# look answered.
my $replayed = q{
	BEGIN;
	SELECT b.kind || ' ' || b.result FROM idempotency.idem_begin('ns', 'old', '{"a": 1}') b;
	SELECT b.kind || ' ' || b.result FROM idempotency.idem_begin_batch('ns', ARRAY['old'], ARRAY['{"a": 1}'::jsonb]) b;
	SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
	COMMIT;};
my $answer = qq{prior_result {"r": "old"}\nprior_result {"r": "old"}\n0};
is($node->safe_psql('postgres', $replayed), $answer, 'a frozen record replays without the namespace lock');

# Moves the next transaction id to $xid, writing the pg_xact segment it
# needs (32 pages of the block size, 4 transactions a byte).
my $block = $node->safe_psql('postgres', 'SHOW block_size');
sub advance
{
	my ($xid) = @_;
	$node->stop;
	my $segment = sprintf('%s/pg_xact/%04X', $node->data_dir, int($xid / ($block * 32 * 4)));
	open(my $fh, '>', $segment) or die "could not create $segment: $!";
	binmode $fh;
	print $fh "\0" x ($block * 32);
	close $fh;
	$node->command_ok([ 'pg_resetwal', '-x', $xid, '-D', $node->data_dir ], "pg_resetwal -x $xid");
	$node->start;
}

advance(1200 << 20);
$node->safe_psql($_, 'VACUUM FREEZE') for ('postgres', 'template1');
$node->safe_psql('postgres', 'ALTER DATABASE template0 ALLOW_CONNECTIONS true');
$node->safe_psql('template0', 'VACUUM FREEZE');
$node->safe_psql('postgres', 'ALTER DATABASE template0 ALLOW_CONNECTIONS false');
advance(2200 << 20);

is($node->safe_psql('postgres', q{SELECT age(xmin) < 0 FROM idempotency.idempotency_record WHERE key_value = 'old'}),
	't', 'the record\'s raw xmin now reads as one from the future');
is($node->safe_psql('postgres', $replayed), $answer,
	'2^31 transactions later, the frozen record still replays without the namespace lock');

# A record committed now replays without it too; one committed during the
# statement would not (first_look.spec).
$node->safe_psql('postgres', q{
	BEGIN;
	SELECT kind FROM idempotency.idem_begin('ns', 'new', '{"a": 2}');
	SELECT idempotency.idem_commit('ns', 'new', '{"r": "new"}');
	COMMIT;});
is($node->safe_psql('postgres', q{
	BEGIN;
	SELECT b.kind || ' ' || b.result FROM idempotency.idem_begin('ns', 'new', '{"a": 2}') b;
	SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
	COMMIT;}), qq{prior_result {"r": "new"}\n0}, 'a record committed after the jump replays without it');

$node->stop;
done_testing();
