# 007_standby.pl: a streaming standby serves the primary's records read-only.
#
# Records written on the primary reach the standby through WAL. There
# idem_begin replays a committed result, a recorded error and a mismatch
# exactly as the primary would, and needs no write to do so; an answer that
# would have to write (fresh, or a lease takeover) is refused with SQLSTATE
# 25006 and a message that says why. The transitions and purge are refused
# the same way. A read-only transaction on the primary behaves alike.
# A key the primary holds in a namespace without a lease has no row until it
# is finished (one write per fresh attempt): the standby cannot see it and
# refuses its begin as it refuses any new key's; a key held in a namespace
# with a lease has its in_progress row, and the standby answers in_flight.
# Logical decoding sees the store's writes (made through heapam, not SQL) as
# it sees any table's: each insert, update and delete with its columns; a
# fresh attempt without a lease is one insert of its finished record.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 'logical');
$primary->start;
$primary->safe_psql('postgres', q{
	CREATE EXTENSION idempotency;
	SELECT idempotency.idem_namespace_configure('leased', in_progress_lease => '1 millisecond');
	-- Claims here keep their in_progress row (a lease long enough not to be taken over).
	SELECT idempotency.idem_namespace_configure('held', in_progress_lease => '1 hour');
	BEGIN;
	SELECT idempotency.idem_begin('n', 'paid', '{"amount": 10}');
	SELECT idempotency.idem_commit('n', 'paid', '{"receipt": "r-1"}');
	SELECT idempotency.idem_begin('n', 'declined', '{"amount": 20}');
	SELECT idempotency.idem_fail_permanent('n', 'declined', '{"class_tag": "Declined", "message": "no funds"}');
	-- An attempt whose transaction committed without finishing the work.
	SELECT idempotency.idem_begin('leased', 'stuck', '{"amount": 30}');
	COMMIT;
});
$primary->backup('backup');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'backup', has_streaming => 1);
$standby->start;

# A record committed after the standby started arrives through streaming.
$primary->safe_psql('postgres', q{
	BEGIN;
	SELECT idempotency.idem_begin('n', 'later', '{"amount": 40}');
	SELECT idempotency.idem_commit('n', 'later', '{"receipt": "r-2"}');
	COMMIT;
});
$primary->wait_for_catchup($standby);

is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't', 'the standby is in recovery');

# begin answers what the record says, without writing.
sub begin_on
{
	my ($node, $ns, $key, $request) = @_;
	return $node->psql('postgres', qq{
		SELECT kind, coalesce(result, error, recorded_request)
		FROM idempotency.idem_begin('$ns', '$key', '$request')}, extra_params => ['-v', 'VERBOSITY=verbose']);
}
my ($ret, $out, $err) = begin_on($standby, 'n', 'paid', '{"amount": 10}');
is($out, 'prior_result|{"receipt": "r-1"}', 'a committed result replays on the standby');
($ret, $out, $err) = begin_on($standby, 'n', 'later', '{"amount": 40}');
is($out, 'prior_result|{"receipt": "r-2"}', 'a result committed after the backup replays too (streamed)');
($ret, $out, $err) = begin_on($standby, 'n', 'declined', '{"amount": 20}');
is($out, 'prior_error|{"message": "no funds", "class_tag": "Declined"}', 'a recorded error replays');
($ret, $out, $err) = begin_on($standby, 'n', 'paid', '{"amount": 11}');
is($out, 'mismatch|{"amount": 10}', 'a different request is a mismatch');
($ret, $out, $err) = begin_on($standby, 'leased', 'stuck', '{"amount": 30}');
isnt($ret, 0, 'a lease takeover is refused on the standby');
like($err, qr/ERROR:  25006: cannot begin idempotency key sha256:[0-9a-f]{12}\.\.\. in a read-only transaction/,
	'with SQLSTATE 25006, naming the key by its label');

# A new key would need a write: refused, clearly.
($ret, $out, $err) = $standby->psql('postgres',
	q{SELECT idempotency.idem_begin('n', 'new', '{"amount": 50}')}, extra_params => ['-v', 'VERBOSITY=verbose']);
isnt($ret, 0, 'begin of a new key fails on the standby');
like($err, qr/ERROR:  25006: cannot begin idempotency key sha256:[0-9a-f]{12}\.\.\. in a read-only transaction/,
	'with SQLSTATE 25006');
like($err, qr/DETAIL:  The server is a standby in recovery: it replays recorded outcomes but records no new attempt\./,
	'and a detail that says the server is a standby');
like($err, qr/HINT:  Call idem_begin on the primary\./, 'and a hint that says where to go');

# A key the primary holds in a namespace without a lease: its claim is held
# by the key's lock alone, with no row until it is finished (one write per
# fresh attempt), so the standby cannot see it: its begin there finds no
# row and is refused with 25006, as a new key's is, instead of answering
# in_flight. On the primary another session still sees it in flight.
my $holder = $primary->background_psql('postgres');
$holder->query_safe(q{BEGIN; SELECT idempotency.idem_begin('n', 'inflight', '{"amount": 60}');
	SELECT idempotency.idem_begin('held', 'inflight', '{"amount": 60}');});
# Up to the insert position: the holder's claims are not committed, so their
# WAL may not be written yet, and the default target (the write position)
# would not wait for it.
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
is($primary->safe_psql('postgres', q{
	SELECT kind || '/' || coalesce(age::text, 'unknown') FROM idempotency.idem_begin('n', 'inflight', '{"amount": 60}')}),
	'in_flight/unknown', 'the primary holds a key without a lease: another session there answers in_flight, age unknown');
is($primary->safe_psql('postgres', q{
	SELECT count(*) FROM idempotency.idempotency_record WHERE namespace = 'n' AND key_value = 'inflight'}),
	'0', '  and it has no row');
my ($timed_out, $waited_out) = (0, '');
($ret, $out, $err) = $standby->psql('postgres', q{
	SELECT kind FROM idempotency.idem_begin('n', 'inflight', '{"amount": 60}', in_flight_wait => '1s');},
	timeout => 60, timed_out => \$timed_out, extra_params => ['-v', 'VERBOSITY=verbose']);
is($timed_out, 0, 'a begin on the standby of a key the primary holds without a lease returns at once');
isnt($ret, 0, '  refused: the standby finds no row for it');
is($out, '', '  with no answer');
like($err, qr/ERROR:  25006: cannot begin idempotency key sha256:[0-9a-f]{12}\.\.\. in a read-only transaction/,
	'  with SQLSTATE 25006, as for a new key');
like($err, qr/DETAIL:  The server is a standby in recovery: it replays recorded outcomes but records no new attempt\./,
	'  and the standby\'s detail');

# A key in flight on the primary in a namespace with a lease (its
# in_progress row is written), waited for on the standby: there the
# primary's transaction holds no lock to wait on, so the wait polls, and it
# ends when its in_flight_wait runs out (in_flight) or when
# statement_timeout cancels it, never only when the primary commits.
($ret, $out, $err) = $standby->psql('postgres', q{
	SELECT kind FROM idempotency.idem_begin('held', 'inflight', '{"amount": 60}', in_flight_wait => '1s');},
	timeout => 60, timed_out => \$timed_out);
is($timed_out, 0, 'a bounded wait on the standby returns while the primary still holds the key');
is($out, 'in_flight', '  and answers in_flight');
($ret, $out, $err) = $standby->psql('postgres', q{
	SET statement_timeout = '500ms';
	SELECT kind FROM idempotency.idem_begin('held', 'inflight', '{"amount": 60}', in_flight_wait => '10min');},
	timeout => 60, timed_out => \$timed_out, extra_params => ['-v', 'VERBOSITY=verbose']);
is($timed_out, 0, 'statement_timeout cancels a long wait on the standby');
like($err, qr/ERROR:  57014: canceling statement due to statement timeout/, '  with 57014');
$holder->query_safe(q{ROLLBACK;});
$holder->quit;

# The transitions and purge need writes too.
for my $call ("idem_commit('n', 'paid', '{}')", "idem_fail_permanent('n', 'paid', '{\"class_tag\": \"E\", \"message\": \"m\"}')",
	"idem_fail_transient('n', 'paid')", "idem_purge()")
{
	($ret, $out, $err) = $standby->psql('postgres', "SELECT idempotency.$call",
		extra_params => ['-v', 'VERBOSITY=verbose']);
	like($err, qr/ERROR:  25006: /, "$call fails on the standby with 25006");
}

# The primary, in a read-only transaction, replays and refuses alike.
($ret, $out, $err) = $primary->psql('postgres', q{
	SET default_transaction_read_only = on;
	SELECT kind FROM idempotency.idem_begin('n', 'paid', '{"amount": 10}');
	SELECT idempotency.idem_begin('n', 'new', '{"amount": 50}');}, extra_params => ['-v', 'VERBOSITY=verbose']);
is($out, 'prior_result', 'a read-only transaction on the primary replays');
like($err, qr/ERROR:  25006: cannot begin idempotency key sha256:[0-9a-f]{12}\.\.\. in a read-only transaction/,
	'and refuses a new key with 25006');
like($err, qr/DETAIL:  The transaction is read-only/, 'saying the transaction is read-only');

# Nothing the standby was asked did anything: the primary's records are as
# they were, and the new key is still new there.
is($primary->safe_psql('postgres', q{
	SELECT string_agg(namespace || '/' || key_value || '/' || status, ' ' ORDER BY namespace, key_value)
	FROM idempotency.idempotency_record}),
	'leased/stuck/in_progress n/declined/failed n/later/committed n/paid/committed',
	'the primary still has exactly its four records');

# Logical decoding, as test_decoding shows it. Without a lease a fresh
# attempt writes once (one write per fresh attempt): its commit is one
# insert of the finished record, with the fence idem_begin answered, and a
# claim forgotten (a transient failure) writes nothing at all. With a lease
# the claim is inserted in_progress, its commit is an update and a claim
# forgotten is a delete.
$primary->safe_psql('postgres', q{SELECT pg_create_logical_replication_slot('decoded', 'test_decoding')});
my ($fence) = split /\n/, $primary->safe_psql('postgres', q{
	BEGIN;
	SELECT fence FROM idempotency.idem_begin('n', 'decoded', '{"amount": 60}');
	SELECT idempotency.idem_commit('n', 'decoded', '{"receipt": "r-3"}');
	SELECT idempotency.idem_begin('n', 'forgotten', '{"amount": 70}');
	SELECT idempotency.idem_fail_transient('n', 'forgotten');
	COMMIT;
});
like($fence, qr/^\d+$/, 'idem_begin answered a fence');
$primary->safe_psql('postgres', q{
	BEGIN;
	SELECT idempotency.idem_begin('held', 'decoded', '{"amount": 80}');
	SELECT idempotency.idem_commit('held', 'decoded', '{"receipt": "r-4"}');
	SELECT idempotency.idem_begin('held', 'forgotten', '{"amount": 90}');
	SELECT idempotency.idem_fail_transient('held', 'forgotten');
	COMMIT;
});
my $changes = $primary->safe_psql('postgres', q{
	SELECT string_agg(regexp_replace(data, '(created|updated|expires)_at\[timestamp with time zone\]:''[^'']*''', '\1_at', 'g'), E'\n')
	FROM pg_logical_slot_get_changes('decoded', NULL, NULL) WHERE data LIKE 'table %'});
like($changes, qr/^table idempotency\.idempotency_record: INSERT: namespace\[text\]:'n' key_value\[text\]:'decoded' status\[text\]:'committed' .*request_payload\[jsonb\]:'\{"amount": 60\}' result_payload\[jsonb\]:'\{"receipt": "r-3"\}' error_payload\[jsonb\]:null .*attempt\[integer\]:1 fence\[bigint\]:$fence recovery_point\[text\]:null recovery_state\[jsonb\]:null$/m,
	'without a lease decoding shows the finished record inserted once, with the fence begin answered');
is(scalar(() = $changes =~ /^table [^:]*: [A-Z]+: namespace\[text\]:'n' key_value\[text\]:'decoded' /mg), 1,
	'  and no other change of it (no in_progress insert, no update)');
unlike($changes, qr/namespace\[text\]:'n' key_value\[text\]:'forgotten'/, '  and a claim forgotten without a lease shows nothing');
like($changes, qr/^table idempotency\.idempotency_record: INSERT: namespace\[text\]:'held' key_value\[text\]:'decoded' status\[text\]:'in_progress' .*request_payload\[jsonb\]:'\{"amount": 80\}' result_payload\[jsonb\]:null .*attempt\[integer\]:1 fence\[bigint\]:\d+ recovery_point\[text\]:null recovery_state\[jsonb\]:null$/m,
	'with a lease decoding shows the claim inserted');
like($changes, qr/^table idempotency\.idempotency_record: UPDATE: namespace\[text\]:'held' key_value\[text\]:'decoded' status\[text\]:'committed' .*result_payload\[jsonb\]:'\{"receipt": "r-4"\}'/m,
	'the commit as an update');
like($changes, qr/^table idempotency\.idempotency_record: DELETE: namespace\[text\]:'held' key_value\[text\]:'forgotten'$/m,
	'the forgotten claim as a delete by its primary key');
is(scalar(() = $changes =~ /^table /mg), 5, 'and nothing else');
$primary->safe_psql('postgres', q{SELECT pg_drop_replication_slot('decoded')});

$standby->stop;
$primary->stop;
done_testing();
