# 006_memory_flat.pl: one backend runs N idem_begin + idem_commit cycles
# (default 100,000, a million with make test SLOW=1; IDEM_MEMORY_CYCLES sets it), each on a distinct key
# and in its own transaction, and its private memory stays flat: the
# backend's RssAnon (/proc/<pid>/status) after the last cycle is within
# $slack_kib of what it was after a warm-up chunk. RssAnon leaves out
# shared memory, so the shared buffers the growing table fills do not count;
# VmRSS, which includes them, is printed too. Every cycle must have answered
# `fresh`, and exactly N committed records (and N commits in idem_stats)
# must exist at the end.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $cycles = $ENV{IDEM_MEMORY_CYCLES} // 100_000;
die "IDEM_MEMORY_CYCLES must be a whole number of at least 2, not '$cycles'"
  unless $cycles =~ /^\d+$/ && $cycles >= 2;
# Cycles per CALL; the first CALL is the warm-up.
my $chunk = $cycles >= 20_000 ? 10_000 : int($cycles / 2);
# How much RssAnon may grow between the warm-up and the end. Observed on
# the 2-core Debian 12 machine: 3.8 MiB after the warm-up and +8 kB after a
# million cycles, flat at every tenth; with 8 bytes palloc'd in
# TopMemoryContext and never freed on each begin (24 bytes with the chunk
# header), +23 MiB. 4 MiB is about 500 times the noise and, over a million
# cycles, 4 bytes a cycle: less than any allocation can leak. With fewer
# cycles a leak must be larger to show (4 MiB / IDEM_MEMORY_CYCLES a cycle).
my $slack_kib = 4 * 1024;

my $node = PostgreSQL::Test::Cluster->new('memory');
$node->init;
# Preloaded, so that the shared-memory counters are on and counted too.
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'idempotency'");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION idempotency');

# One cycle per transaction, as a service would run them: begin a fresh key,
# commit its result, COMMIT. A key that does not answer `fresh` is an error.
$node->safe_psql('postgres', q{
	CREATE PROCEDURE memory_cycles(first bigint, n integer) LANGUAGE plpgsql AS $$
	DECLARE
		k text;
		answer idempotency.idem_kind;
	BEGIN
		FOR i IN first .. first + n - 1 LOOP
			k := 'memory-' || i;
			SELECT kind INTO answer FROM idempotency.idem_begin('memory', k, '{"cycle": true}');
			IF answer IS DISTINCT FROM 'fresh' THEN
				RAISE EXCEPTION 'cycle %: idem_begin answered %', i, answer;
			END IF;
			PERFORM idempotency.idem_commit('memory', k, '{"ok": true}');
			COMMIT;
		END LOOP;
	END $$;});

# The fields of /proc/PID/status that matter here, in kB.
sub memory_of
{
	my ($pid) = @_;
	my %m;
	open my $fh, '<', "/proc/$pid/status" or die "cannot read /proc/$pid/status: $!";
	while (<$fh>)
	{
		$m{$1} = $2 if /^(VmRSS|RssAnon|RssShmem|VmHWM):\s+(\d+) kB/;
	}
	close $fh;
	die "no RssAnon in /proc/$pid/status" unless defined $m{RssAnon};
	return \%m;
}

# kB as MiB with one decimal, for the printed figures.
sub mib { return sprintf('%.1f MiB', $_[0] / 1024); }

my $session = $node->background_psql('postgres');
# The timeout applies to each CALL, not to the whole run.
$session->set_query_timer_restart;
my $pid = $session->query_safe('SELECT pg_backend_pid()');
$session->query_safe('SET synchronous_commit = off');

# run_chunk FIRST N: one CALL of N cycles starting at key FIRST.
sub run_chunk
{
	my ($first, $n) = @_;
	$session->query_safe("CALL memory_cycles($first, $n)");
}

my $done = 0;
run_chunk(1, $chunk);
$done += $chunk;
my $warm = memory_of($pid);
note "after the warm-up ($done cycles): RssAnon " . mib($warm->{RssAnon}) . ', VmRSS ' . mib($warm->{VmRSS});

my $max_anon = $warm->{RssAnon};
my $report_every = $cycles / 10;
my $next_report = $report_every;
while ($done < $cycles)
{
	my $n = $cycles - $done < $chunk ? $cycles - $done : $chunk;
	run_chunk($done + 1, $n);
	$done += $n;
	my $m = memory_of($pid);
	$max_anon = $m->{RssAnon} if $m->{RssAnon} > $max_anon;
	if ($done >= $next_report)
	{
		note "after $done cycles: RssAnon " . mib($m->{RssAnon}) . ', VmRSS ' . mib($m->{VmRSS});
		$next_report += $report_every;
	}
}
my $end = memory_of($pid);

diag sprintf('%d cycles in one backend: RssAnon %s after the %d-cycle warm-up, %s at the end '
	  . '(%+d kB; highest %s); VmRSS %s -> %s; VmHWM %s',
	$cycles, mib($warm->{RssAnon}), $chunk, mib($end->{RssAnon}),
	$end->{RssAnon} - $warm->{RssAnon}, mib($max_anon),
	mib($warm->{VmRSS}), mib($end->{VmRSS}), mib($end->{VmHWM}));
cmp_ok($end->{RssAnon} - $warm->{RssAnon}, '<=', $slack_kib,
	"the backend's private memory (RssAnon) grew by at most $slack_kib kB over $cycles cycles");

$session->quit;

is( $node->safe_psql(
		'postgres', q{
		SELECT count(*) FILTER (WHERE status = 'committed') || ' committed, '
		    || count(*) FILTER (WHERE status <> 'committed') || ' other'
		FROM idempotency.idempotency_record WHERE namespace = 'memory'}),
	"$cycles committed, 0 other",
	'every cycle left exactly one committed record');
is($node->safe_psql('postgres', 'SELECT begin_fresh, commits FROM idempotency.idem_stats'),
	"$cycles|$cycles", 'idem_stats counted every fresh begin and every commit');

$node->stop;
done_testing();
