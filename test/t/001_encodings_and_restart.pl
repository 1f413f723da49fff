# 001_encodings_and_restart.pl: keys and fingerprints are the same in every
# database encoding and survive a server restart unchanged.
#
# Runs under PostgreSQL::Test::Cluster (Debian's postgresql-server-dev
# package ships it); test/bin/run-tests starts it with the right PERL5LIB.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('encodings');
$node->init(extra => ['--encoding=UTF8', '--locale=C']);
$node->start;

# The same characters, as UTF-8 byte strings (client_encoding is UTF8; the
# server converts them into each database's encoding). Each database gets
# only characters its encoding can represent; SQL_ASCII stores the bytes.
my %text = (
	ascii  => "'tenant-42'",
	latin1 => "'Gr\xc3\xbc\xc3\x9fe \xc3\xa9t\xc3\xa9'",          # Grüße été
	eucjp  => "'\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e'",         # 日本語
);
my %databases = (
	utf8      => { encoding => 'UTF8',      chars => [qw(ascii latin1 eucjp)] },
	latin1    => { encoding => 'LATIN1',    chars => [qw(ascii latin1)] },
	euc_jp    => { encoding => 'EUC_JP',    chars => [qw(ascii eucjp)] },
	sql_ascii => { encoding => 'SQL_ASCII', chars => [qw(ascii latin1 eucjp)] },
);

# One query per character set: a minted key and a fingerprint of an object
# whose keys and values use those characters.
sub probe
{
	my ($db, $chars) = @_;
	my $t = $text{$chars};
	return $node->safe_psql($db, qq{
		SET client_encoding = 'UTF8';
		SELECT idempotency.idem_mint('n', ARRAY[$t, 'order-1']) || ' '
		    || encode(idempotency.idem_request_hash(jsonb_build_object($t, jsonb_build_array($t, 1.50), 'a', $t)), 'hex')
		    || ' ' || idempotency.idem_parse('n', ' ' || $t || ' ');
	});
}

for my $db (sort keys %databases)
{
	next if $db eq 'utf8';
	$node->safe_psql('postgres',
		"CREATE DATABASE $db TEMPLATE template0 ENCODING '$databases{$db}{encoding}' LOCALE 'C'");
}
$node->safe_psql($_, 'CREATE EXTENSION idempotency') for ('postgres', grep { $_ ne 'utf8' } keys %databases);
sub dbname { my $db = shift; return $db eq 'utf8' ? 'postgres' : $db; }

my %reference = map { $_ => probe('postgres', $_) } keys %text;
like($reference{ascii}, qr/^[0-9a-f]{64} [0-9a-f]{64} tenant-42$/, 'the UTF8 reference looks right');

for my $db (sort keys %databases)
{
	for my $chars (@{ $databases{$db}{chars} })
	{
		is(probe(dbname($db), $chars), $reference{$chars},
			"$databases{$db}{encoding} database gives the UTF8 database's key, fingerprint and parsed key for $chars text");
	}
}

# A character the database encoding cannot hold is rejected with a clear
# error (the conversion error of PostgreSQL itself), not hashed as garbage.
my ($ret, $out, $err) = $node->psql('latin1',
	qq{SET client_encoding = 'UTF8'; SELECT idempotency.idem_mint('n', ARRAY[$text{eucjp}]);});
isnt($ret, 0, 'a Japanese part in a LATIN1 database fails');
like($err, qr/has no equivalent in encoding "LATIN1"/, 'with an encoding error');

# A SQL_ASCII database checks no text, so bytes that are not UTF-8 can reach
# the store. A request, a result and an error holding them are all refused
# (22021, PostgreSQL's own message) before anything is written, and an
# Idempotency-Key header holding them is the client's mistake: a 400.
my $latin1_e = "\xe9";    # é in LATIN1: not UTF-8
sub sql_ascii
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $node->psql('sql_ascii', "SET client_encoding = 'SQL_ASCII'; $sql",
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	return $err ne '' ? ($err =~ /ERROR:  (\w{5}):/)[0] : $out;
}
is(sql_ascii(qq{SELECT kind FROM idempotency.idem_begin('n', 'request', jsonb_build_object('a', 'caf$latin1_e'))}),
	'22021', 'SQL_ASCII: a request that is not UTF-8 is refused');
is(sql_ascii(qq{BEGIN; SELECT kind FROM idempotency.idem_begin('n', 'result', '{}');
	SELECT idempotency.idem_commit('n', 'result', jsonb_build_object('a', 'caf$latin1_e')); COMMIT;}),
	'22021', 'SQL_ASCII: so is a result');
is(sql_ascii(qq{BEGIN; SELECT kind FROM idempotency.idem_begin('n', 'error', '{}');
	SELECT idempotency.idem_fail_permanent('n', 'error', jsonb_build_object('class_tag', 'E', 'message', 'caf$latin1_e'));
	COMMIT;}), '22021', 'SQL_ASCII: and an error');
is(sql_ascii(q{SELECT count(*) FROM idempotency.idempotency_record}), '0', '  and nothing was written');
is(sql_ascii(qq{SELECT status || ' ' || (body ->> 'code') || ' ' || (body ->> 'detail')
	FROM idempotency.idem_http_key('n', 'key-$latin1_e')}),
	'400 INVALID_IDEMPOTENCY_KEY The Idempotency-Key field holds bytes that are not UTF-8.',
	'SQL_ASCII: a header that is not UTF-8 is a 400');

# Restart: everything computed before is computed again, bit for bit.
$node->restart;
for my $chars (sort keys %text)
{
	is(probe('postgres', $chars), $reference{$chars}, "after a restart, $chars text gives the same results");
}

$node->stop;
done_testing();
