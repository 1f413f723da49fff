# 013_mixed_libraries.pl: one effect per key while two libraries serve one
# database. Installing a new package replaces the library on disk, but a
# pooled session that loaded the old one keeps running it until it ends,
# before and after ALTER EXTENSION UPDATE. Here release 0.5.0's library
# (built from its commit by lib.sh's suite_perl_tap, IDEM_OLD_RELEASE) and
# this build's serve sessions of one server at once: a claim this build
# holds by the key's lock alone (no row) makes 0.5.0's begin wait and then
# replay; 0.5.0's claim (an in_progress row) is in flight for this build;
# after the update the old session's begin is refused (42883: 0.5.0 has no
# entry point of that name) and changes nothing. Every key ends with one
# effect and one record.
#
# The server runs from a copy of the PostgreSQL installation (programs
# copied, everything else linked), which PostgreSQL finds relative to its
# programs: the package upgrade is done there, by renaming the new files
# over the old ones as dpkg does.
use strict;
use warnings;
use File::Basename qw(dirname);
use File::Copy qw(copy);
use File::Path qw(make_path);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $old = $ENV{IDEM_OLD_RELEASE};
if (!$old || !-f "$old/idempotency.so")
{
	die 'IDEM_OLD_RELEASE names no build of release 0.5.0, and IDEM_REQUIRE_OLD_RELEASE=1'
	  if $ENV{IDEM_REQUIRE_OLD_RELEASE};
	plan skip_all => 'no build of release 0.5.0 (IDEM_OLD_RELEASE; lib.sh builds one from the git history)';
}

sub pg_config
{
	my $what = shift;
	my $out = `pg_config --$what`;
	chomp $out;
	die "pg_config --$what failed" if $? || $out eq '';
	return $out;
}
my ($bindir, $pkglibdir, $sharedir) = map { pg_config($_) } qw(bindir pkglibdir sharedir);

# The copy: programs as files (PostgreSQL resolves its own path through
# symbolic links), every other library and shared file as a link, and the
# extension's own files as 0.5.0 installed them.
my $root = "$PostgreSQL::Test::Utils::tmp_check/installation";
make_path("$root$bindir", "$root$pkglibdir", "$root$sharedir/extension");
for my $program (glob "$bindir/*")
{
	my $to = "$root$bindir/" . (split m{/}, $program)[-1];
	copy($program, $to) or die "copy $program: $!";
	chmod 0755, $to;
}
sub link_all_but_ours
{
	my ($from, $to, @except) = @_;
	for my $entry (glob "$from/*")
	{
		my $name = (split m{/}, $entry)[-1];
		next if grep { $name eq $_ } @except;
		next if $name =~ /^idempotency[.-]/;
		symlink($entry, "$to/$name") or die "symlink $entry: $!";
	}
}
link_all_but_ours($pkglibdir, "$root$pkglibdir");
link_all_but_ours($sharedir, "$root$sharedir", 'extension');
link_all_but_ours("$sharedir/extension", "$root$sharedir/extension");

# Installs the files named into dir as a package upgrade does: each is
# written beside its final name and renamed over it, so a backend that has
# the old library mapped keeps it. Old scripts are removed.
sub install_files
{
	my ($dir, @files) = @_;
	unlink glob "$dir/idempotency--*.sql";
	for my $file (@files)
	{
		my $name = (split m{/}, $file)[-1];
		copy($file, "$dir/.$name.new") or die "copy $file: $!";
		rename("$dir/.$name.new", "$dir/$name") or die "rename $name: $!";
	}
}
install_files("$root$pkglibdir", "$old/idempotency.so");
install_files("$root$sharedir/extension", glob("$old/idempotency*.sql"), "$old/idempotency.control");

my $node = PostgreSQL::Test::Cluster->new('mixed', install_path => dirname("$root$bindir"));
$node->init;
$node->start;
is($node->safe_psql('postgres', 'SHOW dynamic_library_path'), '$libdir', 'the server loads libraries from $libdir');
$node->safe_psql('postgres', q{
	CREATE EXTENSION idempotency;
	CREATE TABLE effects (key text, by text);});
is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'idempotency'}),
	'0.5.0', 'release 0.5.0 is installed from its own files');

# A pooled session of 0.5.0: it has loaded the old library.
my $old_session = $node->background_psql('postgres', on_error_stop => 0);
$old_session->query_safe(q{SELECT idempotency.idem_mint('mixed', ARRAY['load'])});

# The package upgrade: this build's library and scripts replace 0.5.0's.
install_files("$root$pkglibdir", "$pkglibdir/idempotency.so");
install_files("$root$sharedir/extension", glob("$sharedir/extension/idempotency*.sql"),
	"$sharedir/extension/idempotency.control");
my $new_session = $node->background_psql('postgres', on_error_stop => 0);
my $current = $node->safe_psql('postgres',
	q{SELECT default_version FROM pg_available_extensions WHERE name = 'idempotency'});
isnt($current, '0.5.0', "the new package offers $current");

# 1. This build claims by the key's lock alone (0.5.0's SQL, no lease: the
#    new library holds the claim without a row); 0.5.0's begin waits for the
#    lock and replays the result.
is($new_session->query_safe(qq{BEGIN;
	SELECT b.kind FROM idempotency.idem_begin('mixed', 'k1', '{"amount": 1}') b;
	INSERT INTO effects VALUES ('k1', 'new');}), 'fresh', 'the new library: fresh');
is($node->safe_psql('postgres', q{SELECT count(*) FROM idempotency.idempotency_record WHERE key_value = 'k1'}),
	'0', '  and holds the claim without a row');
$old_session->query_until(qr/waiting/, q{
	\echo waiting
	BEGIN;
	SELECT b.kind || ':' || coalesce(b.result::text, '') AS old_k1 FROM idempotency.idem_begin('mixed', 'k1', '{"amount": 1}') b \gset
	INSERT INTO effects SELECT 'k1', 'old' WHERE :'old_k1' LIKE 'fresh%';
	COMMIT;
	\echo :old_k1
});
ok($node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity
	WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND query LIKE '%old_k1%'}),
	'the old library waits for the key\'s lock');
$new_session->query_safe(q{SELECT idempotency.idem_commit('mixed', 'k1', '{"charged": 1}'); COMMIT;});
my $answer = $old_session->query_safe(q{\echo done});
like($answer, qr/prior_result:\{"charged": 1\}/, 'then replays the result the new library recorded');

# 2. 0.5.0 claims with an in_progress row: in flight for this build until it
#    commits, then a replay.
is($old_session->query_safe(q{BEGIN;
	SELECT b.kind FROM idempotency.idem_begin('mixed', 'k2', '{"amount": 1}') b;
	INSERT INTO effects VALUES ('k2', 'old');}), 'fresh', 'the old library: fresh');
is($new_session->query_safe(q{SELECT b.kind FROM idempotency.idem_begin('mixed', 'k2', '{"amount": 1}') b}),
	'in_flight', 'the new library finds its claim in flight');
$old_session->query_safe(q{SELECT idempotency.idem_commit('mixed', 'k2', '{"charged": 2}'); COMMIT;});
is($new_session->query_safe(q{SELECT b.kind || ':' || b.result FROM idempotency.idem_begin('mixed', 'k2', '{"amount": 1}') b}),
	'prior_result:{"charged": 2}', 'and replays it once committed');

# 3. The same key from both at once, the new library first, rolled back:
#    the old one then claims it (fresh) and that is the only effect.
$new_session->query_safe(q{BEGIN;
	SELECT idempotency.idem_begin('mixed', 'k3', '{"amount": 1}');
	INSERT INTO effects VALUES ('k3', 'new');});
$old_session->query_until(qr/waiting/, q{
	\echo waiting
	BEGIN;
	SELECT b.kind AS old_k3 FROM idempotency.idem_begin('mixed', 'k3', '{"amount": 1}') b \gset
	INSERT INTO effects SELECT 'k3', 'old' WHERE :'old_k3' = 'fresh';
	SELECT idempotency.idem_commit('mixed', 'k3', '{"charged": 3}') WHERE :'old_k3' = 'fresh';
	COMMIT;
	\echo :old_k3
});
ok($node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity
	WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND query LIKE '%old_k3%'}),
	'the old library waits for the new one\'s claim');
$new_session->query_safe('ROLLBACK');
like($old_session->query_safe(q{\echo done}), qr/^fresh/m, 'and claims the key once it is rolled back');

# 4. ALTER EXTENSION UPDATE with both sessions open.
$node->safe_psql('postgres', 'ALTER EXTENSION idempotency UPDATE');
is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'idempotency'}),
	$current, "updated to $current");
is($new_session->query_safe(qq{BEGIN;
	SELECT b.kind FROM idempotency.idem_begin('mixed', 'k4', '{"amount": 1}') b;
	INSERT INTO effects VALUES ('k4', 'new');}), 'fresh', 'after the update the new library claims k4');
$old_session->query(q{BEGIN;
	SELECT b.kind FROM idempotency.idem_begin('mixed', 'k4', '{"amount": 1}') b;
	INSERT INTO effects VALUES ('k4', 'old');
	COMMIT;});
like($old_session->{stderr}, qr/could not find function "idem_begin_0_6"/,
	'the old library\'s begin is refused once the catalog names the new entry point');
$old_session->{stderr} = '';
$new_session->query_safe(q{SELECT idempotency.idem_commit('mixed', 'k4', '{"charged": 4}'); COMMIT;});
is($old_session->query_safe(q{SELECT count(*) FROM effects WHERE key = 'k4' AND by = 'old'}), '0',
	'  and its transaction changed nothing');

# Every key: one effect, one committed record.
is($node->safe_psql('postgres', q{
	SELECT string_agg(key || '=' || n, ',' ORDER BY key) FROM (SELECT key, count(*) n FROM effects GROUP BY key) e}),
	'k1=1,k2=1,k3=1,k4=1', 'one effect per key');
is($node->safe_psql('postgres', q{
	SELECT string_agg(key_value || '=' || status, ',' ORDER BY key_value)
	FROM idempotency.idempotency_record WHERE namespace = 'mixed'}),
	'k1=committed,k2=committed,k3=committed,k4=committed', 'one committed record per key');

$old_session->quit;
$new_session->quit;
$node->stop;
done_testing();
