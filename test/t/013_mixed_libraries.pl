# 013_mixed_libraries.pl: one effect per key while two libraries serve one
# database. Installing a new package replaces the library on disk, but a
# pooled session that loaded the old one keeps running it until it ends,
# before and after ALTER EXTENSION UPDATE. Here the library of the release
# before (0.9.1 and 0.9.2 as they landed, built from their commits by
# lib.sh's suite_perl_tap: IDEM_OLD_RELEASES) and this build's serve
# sessions of one server at once (this build serves releases N and N-1:
# docs/compatibility.md):
# - a claim this build holds by the key's lock alone (no row) makes the old
#   library's begin wait and then replay, or claim the key once the holder
#   rolls back;
# - the old library's claim (an in_progress row) is in flight for this build;
# - after the update, the old library's session is refused (42883: it has
#   no entry point of the name the catalog now gives idem_begin, 1.0.0's,
#   which reads the defaults and the lock secret where 1.0.0 keeps them, as
#   no older library does) and changes nothing.
# Every key ends with one effect and one record.
#
# The server runs from a copy of the PostgreSQL installation (programs
# copied, everything else linked), which PostgreSQL finds relative to its
# programs: the package upgrade is done there, by renaming the new files
# over the old ones as dpkg does.
use strict;
use warnings;
use File::Basename qw(dirname);
use File::Copy qw(copy);
use File::Path qw(make_path rmtree);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my %old = map { split /:/, $_, 2 } split ' ', ($ENV{IDEM_OLD_RELEASES} // '');
if (!grep { -f "$old{$_}/idempotency.so" } keys %old)
{
	die 'IDEM_OLD_RELEASES names no build of an earlier release, and IDEM_REQUIRE_OLD_RELEASE=1'
	  if $ENV{IDEM_REQUIRE_OLD_RELEASE};
	plan skip_all => 'no build of an earlier release (IDEM_OLD_RELEASES; lib.sh builds them from the git history)';
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

# Links every entry of from into to, but the extension's own files and
# those named.
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

# The copy of the installation, with release $version's library and scripts.
sub installation
{
	my ($version, $old) = @_;
	my $root = "$PostgreSQL::Test::Utils::tmp_check/installation-$version";
	rmtree($root);
	make_path("$root$bindir", "$root$pkglibdir", "$root$sharedir/extension");
	for my $program (glob "$bindir/*")
	{
		my $to = "$root$bindir/" . (split m{/}, $program)[-1];
		copy($program, $to) or die "copy $program: $!";
		chmod 0755, $to;
	}
	link_all_but_ours($pkglibdir, "$root$pkglibdir");
	link_all_but_ours($sharedir, "$root$sharedir", 'extension');
	link_all_but_ours("$sharedir/extension", "$root$sharedir/extension");
	install_files("$root$pkglibdir", "$old/idempotency.so");
	install_files("$root$sharedir/extension", glob("$old/idempotency*.sql"), "$old/idempotency.control");
	return $root;
}

# Counts of (key, effect) and of records, as 'k1=1,...'.
sub effects
{
	my ($node, $keys) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT string_agg(k || '=' || (SELECT count(*) FROM effects e WHERE e.key = k), ',' ORDER BY k)
		FROM unnest('{$keys}'::text[]) k});
}

# begin_waiting(session, key, label): the session begins key in a
# transaction of its own and, when fresh, records its effect and commits it
# (result {"by": "old"}); returns at once, the begin left to wait. Its
# answer is echoed as "label:kind".
sub begin_waiting
{
	my ($session, $key, $label) = @_;
	my $wait = q{, in_flight_wait => '3 min'};
	$session->query_until(qr/waiting/, qq{
		\\echo waiting
		BEGIN;
		SELECT b.kind || ':' || coalesce(b.result::text, '') AS $label FROM idempotency.idem_begin('mixed', '$key', '{"amount": 1}'$wait) b \\gset
		INSERT INTO effects SELECT '$key', 'old' WHERE :'$label' LIKE 'fresh%';
		SELECT idempotency.idem_commit('mixed', '$key', '{"by": "old"}') WHERE :'$label' LIKE 'fresh%';
		COMMIT;
		\\echo $label=:$label
	});
}

# Whether a backend running a query that names label waits for a lock.
sub waits
{
	my ($node, $label) = @_;
	return $node->poll_query_until('postgres', qq{
		SELECT count(*) = 1 FROM pg_stat_activity
		WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND query LIKE '%$label FROM%'});
}

# The new library claims key (held by its lock, no row), with its effect.
sub new_claims
{
	my ($node, $new, $key, $what) = @_;
	is($new->query_safe(qq{BEGIN;
		SELECT b.kind FROM idempotency.idem_begin('mixed', '$key', '{"amount": 1}') b;
		INSERT INTO effects VALUES ('$key', 'new');}), 'fresh', "$what: the new library claims $key");
	is($node->safe_psql('postgres', qq{SELECT count(*) FROM idempotency.idempotency_record WHERE key_value = '$key'}),
		'0', "$what:   and holds it without a row");
}

for my $version (sort keys %old)
{
	my $what = "$version and this build";
	my $root = installation($version, $old{$version});
	my $node = PostgreSQL::Test::Cluster->new("mixed_$version" =~ s/\.//gr, install_path => dirname("$root$bindir"));
	$node->init;
	$node->start;
	is($node->safe_psql('postgres', q{SELECT setting FROM pg_config WHERE name = 'PKGLIBDIR'}), "$root$pkglibdir",
		"$what: the server loads its libraries from the copy");
	$node->safe_psql('postgres', q{
		CREATE EXTENSION idempotency;
		CREATE TABLE effects (key text, by text);});
	is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'idempotency'}),
		$version, "$what: release $version is installed from its own files");

	# A pooled session of the old release: it has loaded the old library.
	my $old_session = $node->background_psql('postgres', on_error_stop => 0);
	$old_session->query_safe(q{SELECT idempotency.idem_mint('mixed', ARRAY['load'])});

	# The package upgrade: this build's library and scripts replace the old.
	install_files("$root$pkglibdir", "$pkglibdir/idempotency.so");
	install_files("$root$sharedir/extension", glob("$sharedir/extension/idempotency*.sql"),
		"$sharedir/extension/idempotency.control");
	my $new = $node->background_psql('postgres', on_error_stop => 0);
	my $current = $node->safe_psql('postgres',
		q{SELECT default_version FROM pg_available_extensions WHERE name = 'idempotency'});
	isnt($current, $version, "$what: the new package offers $current");

	# 1. The new library holds k1 by its lock; the old one waits, then replays.
	new_claims($node, $new, 'k1', $what);
	begin_waiting($old_session, 'k1', 'old_k1');
	ok(waits($node, 'old_k1'), "$what: the old library waits for the key's lock");
	$new->query_safe(q{SELECT idempotency.idem_commit('mixed', 'k1', '{"by": "new"}'); COMMIT;});
	like($old_session->query_safe(q{\echo done}), qr/old_k1=prior_result:\{"by": "new"\}/,
		"$what:   then replays the result the new library recorded");

	# 2. The old library claims k2 with a row: in flight for the new one.
	is($old_session->query_safe(q{BEGIN;
		SELECT b.kind FROM idempotency.idem_begin('mixed', 'k2', '{"amount": 1}') b;
		INSERT INTO effects VALUES ('k2', 'old');}), 'fresh', "$what: the old library claims k2");
	is($new->query_safe(q{SELECT b.kind FROM idempotency.idem_begin('mixed', 'k2', '{"amount": 1}') b}),
		'in_flight', "$what:   in flight for the new library");
	$old_session->query_safe(q{SELECT idempotency.idem_commit('mixed', 'k2', '{"by": "old"}'); COMMIT;});
	is($new->query_safe(q{SELECT b.kind || ':' || b.result FROM idempotency.idem_begin('mixed', 'k2', '{"amount": 1}') b}),
		'prior_result:{"by": "old"}', "$what:   replayed once committed");

	# 3. The new library's claim on k3 rolled back: the old one, waiting,
	#    then claims it, and that is the only effect.
	new_claims($node, $new, 'k3', $what);
	begin_waiting($old_session, 'k3', 'old_k3');
	ok(waits($node, 'old_k3'), "$what: the old library waits for the new one's claim");
	$new->query_safe('ROLLBACK');
	like($old_session->query_safe(q{\echo done}), qr/old_k3=fresh/, "$what:   and claims the key once it is rolled back");

	# 4. ALTER EXTENSION UPDATE with both sessions open, then k4 from both.
	$node->safe_psql('postgres', 'ALTER EXTENSION idempotency UPDATE');
	is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'idempotency'}),
		$current, "$what: updated to $current");
	new_claims($node, $new, 'k4', "$what, after the update");
	$old_session->query(q{BEGIN;
		SELECT b.kind FROM idempotency.idem_begin('mixed', 'k4', '{"amount": 1}') b;
		INSERT INTO effects VALUES ('k4', 'old');
		COMMIT;});
	like($old_session->{stderr}, qr/could not find function "idem_begin_1_0"/,
		"$what: the old library's begin is refused once the catalog names the new entry point");
	$old_session->{stderr} = '';
	$new->query_safe(q{SELECT idempotency.idem_commit('mixed', 'k4', '{"by": "new"}'); COMMIT;});
	# Every store function reads 1.0.0's defaults (a lease, a payload
	# limit), which no older library does: the old library's purge, which
	# would purge under the old setting's lease, and its heartbeat are
	# refused too.
	$old_session->query(q{SELECT idempotency.idem_purge()});
	like($old_session->{stderr}, qr/could not find function "idem_store_(problem|purge)_1_0"/,
		"$what: the old library's purge is refused after the update");
	$old_session->{stderr} = '';
	$old_session->query(q{SELECT idempotency.idem_extend_lease('mixed', 'k4', 4294967296)});
	like($old_session->{stderr}, qr/could not find function "idem_extend_lease_1_0"/,
		"$what: and so is its heartbeat");
	$old_session->{stderr} = '';

	# Every key: one effect, one committed record.
	my $keys = 'k1,k2,k3,k4';
	is(effects($node, $keys), join(',', map { "$_=1" } split /,/, $keys), "$what: one effect per key");
	is($node->safe_psql('postgres', q{
		SELECT string_agg(key_value || '=' || status, ',' ORDER BY key_value)
		FROM idempotency.idempotency_record WHERE namespace = 'mixed'}),
		join(',', map { "$_=committed" } split /,/, $keys), "$what: one committed record per key");

	$old_session->quit;
	$new->quit;
	$node->stop;
}
done_testing();
