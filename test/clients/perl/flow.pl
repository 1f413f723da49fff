#!/usr/bin/perl
# flow.pl: docs/clients.md's DBD::Pg guide, run through DBI and DBD::Pg
# (Debian's libdbd-pg-perl; AutoCommit on, untyped placeholders, JSON::PP
# for JSON) against the database test/clients/run prepared, configured by
# the PG* environment variables. The regions between "snippet:" and "end
# snippet" are the guide's code (test/clients/snippets.py checks that they
# are); the rest checks what the guide promises, and what it warns about.
use strict;
use warnings;
use DBI;
use Test::More;

# snippet: flow
use JSON::PP qw(encode_json decode_json);

my $NAMESPACE = 'payments';

# RaiseError: a failed statement dies (DBI's default only warns and returns undef).
sub connect_db {
    return DBI->connect('dbi:Pg:', undef, undef, { RaiseError => 1, PrintError => 0, AutoCommit => 1 });
}

# POST /payments: $header is the Idempotency-Key field (undef when absent),
# $request the decoded body, $charge the payment provider's client, which
# dies with "provider unavailable" when it is.
sub create_payment {
    my ($dbh, $header, $request, $charge) = @_;
    my $h = $dbh->selectrow_hashref('SELECT key, status, body FROM idempotency.idem_http_key(?, ?)',
                                    undef, $NAMESPACE, $header);
    return { status => $h->{status}, headers => {}, body => decode_json($h->{body}) }
        unless defined $h->{key};                                               # 400
    return in_transaction($dbh, sub { attempt($dbh, $h->{key}, $request, $charge) });
}

# Runs $code between begin_work and commit. When it dies: rolls back (the
# claim goes with the work, so a retry starts fresh) and dies again, with the
# database's error read first (a rollback clears it).
sub in_transaction {
    my ($dbh, $code) = @_;
    $dbh->begin_work;
    my $result;
    eval { $result = $code->(); $dbh->commit; 1 } and return $result;
    my $error = database_error($dbh) // $@;
    $dbh->rollback;
    die $error;
}

sub attempt {
    my ($dbh, $key, $request, $charge) = @_;
    # Placeholders are sent untyped: the server reads the JSON text as jsonb.
    my $o = $dbh->selectrow_hashref(
        'SELECT kind, result, error, fence FROM idempotency.idem_begin(?, ?, ?)', undef,
        $NAMESPACE, $key, encode_json({ method => 'POST', target => '/payments', body => $request }));
    if ($o->{kind} eq 'prior_result') {
        my $result = decode_json($o->{result});
        return { status => $result->{status}, headers => { 'Idempotency-Replayed' => 'true' },
                 body => $result->{body} };
    }
    if ($o->{kind} eq 'prior_error') {
        my $error = decode_json($o->{error});
        return { status => 422, headers => { 'Idempotency-Replayed' => 'true' },
                 body => { code => $error->{class_tag}, detail => $error->{message} } };
    }
    return { status => 409, headers => { 'Retry-After' => '1' },
             body => { code => 'IDEMPOTENCY_REQUEST_IN_PROGRESS' } } if $o->{kind} eq 'in_flight';
    return { status => 422, headers => {},
             body => { code => 'IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST' } } if $o->{kind} eq 'mismatch';
    # fresh: this transaction holds the key and must finish it before commit.
    unless ($request->{amount} > 0) {
        my $refusal = { class_tag => 'InvalidAmount', message => 'amount must be positive' };
        $dbh->do('SELECT idempotency.idem_fail_permanent(?, ?, ?, ?)', undef,
                 $NAMESPACE, $key, encode_json($refusal), $o->{fence});
        return { status => 422, headers => {},
                 body => { code => $refusal->{class_tag}, detail => $refusal->{message} } };
    }
    unless (eval { $charge->($key, $request); 1 }) {
        die $@ unless $@ =~ /^provider unavailable/;
        # Keep the outage on record and release the key: the retry starts fresh.
        $dbh->do('INSERT INTO provider_outages (idempotency_key) VALUES (?)', undef, $key);
        $dbh->do('SELECT idempotency.idem_fail_transient(?, ?, ?)', undef, $NAMESPACE, $key, $o->{fence});
        return { status => 503, headers => { 'Retry-After' => '1' }, body => { code => 'PROVIDER_UNAVAILABLE' } };
    }
    my ($payment_id) = $dbh->selectrow_array(
        'INSERT INTO payments (amount, currency) VALUES (?, ?) RETURNING id', undef,
        $request->{amount}, $request->{currency});
    my $body = { payment_id => 0 + $payment_id };     # a number in JSON, not a string
    $dbh->do('SELECT idempotency.idem_commit(?, ?, ?, ?)', undef,
             $NAMESPACE, $key, encode_json({ status => 201, body => $body }), $o->{fence});
    return { status => 201, headers => {}, body => $body };
}
# end snippet

# snippet: typed
# A refund recorded as the composite type refund_receipt; its request is the amount.
sub refund {
    my ($dbh, $key, $amount) = @_;
    return in_transaction($dbh, sub {
        # Untyped placeholders: idem_begin_typed's anyelement needs ?::numeric.
        my $o = $dbh->selectrow_hashref(q{
            SELECT o.kind, o.fence, r.refund_id, r.amount
              FROM idempotency.idem_begin_typed('refunds', ?, ?::numeric) o,
                   idempotency.idem_result(o, NULL::refund_receipt) r}, undef, $key, $amount);
        return { refund_id => $o->{refund_id}, amount => $o->{amount} } if $o->{kind} eq 'prior_result';
        die "refund $key is $o->{kind}\n" unless $o->{kind} eq 'fresh';
        my $receipt = $dbh->selectrow_hashref(
            'INSERT INTO refunds (amount) VALUES (?) RETURNING id AS refund_id, amount', undef, $amount);
        $dbh->do('SELECT idempotency.idem_commit_typed(?, ?, ROW(?, ?)::refund_receipt, ?)', undef,
                 'refunds', $key, $receipt->{refund_id}, $receipt->{amount}, $o->{fence});
        return $receipt;
    });
}
# end snippet

# snippet: errors
# The SQLSTATE, message, detail and hint of the error the last statement
# raised, or undef. Read them at once: the next statement on the handle, a
# rollback included, clears them. (errstr holds them too, as lines.)
sub database_error {
    my ($dbh) = @_;
    return undef unless $dbh->state;
    return { sqlstate => $dbh->state, message => $dbh->pg_error_field('primary'),
             detail => $dbh->pg_error_field('detail'), hint => $dbh->pg_error_field('hint') };
}
# end snippet

# snippet: recipes
# docs/usage.md's HTTP handler: one statement, its own transaction with AutoCommit.
sub create_payment_in_sql {
    my ($dbh, $header, $request) = @_;
    my $r = $dbh->selectrow_hashref('SELECT status, headers, body FROM create_payment(?, ?)', undef,
                                    $header, encode_json($request));
    return { status => $r->{status}, headers => decode_json($r->{headers}), body => decode_json($r->{body}) };
}

# docs/usage.md's stored procedure commits: CALL it outside begin_work ... commit.
sub transfer {
    my ($dbh, $key, $from_id, $to_id, $amount) = @_;
    $dbh->do('CALL transfer(?, ?, ?, ?)', undef, $key, $from_id, $to_id, $amount);
}
# end snippet

# ---- the checks ----
sub failure { my ($code) = @_; return eval { $code->(); 1 } ? undef : $@ }

my $dbh = connect_db();
my $fail_next;
my $charge = sub { if (defined(my $e = $fail_next)) { undef $fail_next; die $e } };
my $eur100 = { amount => 100, currency => 'EUR' };
my $count = sub { ($dbh->selectrow_array(shift, undef, @_))[0] };
my $before = $count->('SELECT count(*) FROM payments');

my $r = create_payment($dbh, undef, $eur100, $charge);
is_deeply([$r->{status}, $r->{body}{code}], [400, 'MISSING_IDEMPOTENCY_KEY'], 'no header: 400 MISSING_IDEMPOTENCY_KEY');
$r = create_payment($dbh, '"dbd-1', $eur100, $charge);
is_deeply([$r->{status}, $r->{body}{code}], [400, 'INVALID_IDEMPOTENCY_KEY'], 'unterminated quoted header: 400 INVALID_IDEMPOTENCY_KEY');

my $first = create_payment($dbh, 'dbd-1', $eur100, $charge);
ok($first->{status} == 201 && $first->{body}{payment_id} =~ /^\d+$/, 'fresh: 201 with the payment id');
$r = create_payment($dbh, '"dbd-1"', { currency => 'EUR', amount => 100 }, $charge);
is_deeply($r, { status => 201, headers => { 'Idempotency-Replayed' => 'true' }, body => $first->{body} },
          'retry (quoted header, keys reordered): the same 201 and body, flagged as a replay');
$r = create_payment($dbh, 'dbd-1', { amount => 999, currency => 'EUR' }, $charge);
is_deeply([$r->{status}, $r->{body}{code}], [422, 'IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST'], 'same key, other amount: 422 mismatch');

my $holder = connect_db();
$holder->begin_work;
my ($held) = $holder->selectrow_array('SELECT kind FROM idempotency.idem_begin(?, ?, ?)', undef, $NAMESPACE, 'dbd-2',
                                      encode_json({ method => 'POST', target => '/payments', body => $eur100 }));
is($held, 'fresh', 'another connection holds dbd-2 in an open transaction');
$r = create_payment($dbh, 'dbd-2', $eur100, $charge);
is_deeply([$r->{status}, $r->{headers}{'Retry-After'}], [409, '1'], 'while it is held: 409 with Retry-After');
$holder->rollback;
$holder->disconnect;
is(create_payment($dbh, 'dbd-2', $eur100, $charge)->{status}, 201, 'after the holder rolled back: fresh, 201');

my $refused = { amount => -5, currency => 'EUR' };
$r = create_payment($dbh, 'dbd-3', $refused, $charge);
is_deeply([$r->{status}, $r->{body}{code}], [422, 'InvalidAmount'], 'a refused amount: 422 recorded with idem_fail_permanent');
$r = create_payment($dbh, 'dbd-3', $refused, $charge);
is_deeply([$r->{status}, $r->{body}{code}, $r->{headers}{'Idempotency-Replayed'}], [422, 'InvalidAmount', 'true'],
          'its retry: the same 422, replayed');

$fail_next = "provider unavailable: 503 from the provider\n";
is(create_payment($dbh, 'dbd-4', $eur100, $charge)->{status}, 503, 'provider unavailable: 503 after idem_fail_transient');
is($count->('SELECT count(*) FROM provider_outages WHERE idempotency_key = ?', 'dbd-4'), 1,
   'the outage row committed with the released key');
is(create_payment($dbh, 'dbd-4', $eur100, $charge)->{status}, 201, 'its retry: fresh, 201');

$fail_next = "connection reset by the provider\n";
is(failure(sub { create_payment($dbh, 'dbd-5', $eur100, $charge) }), "connection reset by the provider\n",
   'an unexpected error dies again after the rollback');
is(create_payment($dbh, 'dbd-5', $eur100, $charge)->{status}, 201, 'its retry: fresh, 201 (the claim was rolled back)');
is($count->('SELECT count(*) FROM payments') - $before, 4, 'one payment per key that succeeded (dbd-1, -2, -4, -5)');

# Typed results.
my $receipt = refund($dbh, 'rf-dbd-1', 25);
ok($receipt->{refund_id} =~ /^\d+$/ && $receipt->{amount} == 25, 'typed: fresh refund recorded as refund_receipt');
is_deeply(refund($dbh, 'rf-dbd-1', 25), $receipt, 'typed: the retry decodes the same receipt with idem_result');
is($count->('SELECT count(*) FROM refunds'), 1, 'typed: one refund row');
failure(sub { $dbh->do(q{SELECT kind FROM idempotency.idem_begin_typed('refunds', ?, ?)}, undef, 'rf-dbd-2', 25) });
is($dbh->state, '42804', 'typed without a cast: 42804');
my ($tuple) = $dbh->selectrow_array(q{SELECT idempotency.idem_result(o, NULL::refund_receipt)
                                        FROM idempotency.idem_begin_typed('refunds', 'rf-dbd-1', 25::numeric) o});
is($tuple, "($receipt->{refund_id},25)", 'a composite selected as one column arrives as a tuple string');

# Errors: detail and hint.
$dbh->do('ALTER TYPE refund_receipt ADD ATTRIBUTE note text');
my $e = failure(sub { refund($dbh, 'rf-dbd-1', 25) });
is_deeply($e, { sqlstate => 'ID001',
                message => 'incompatible stored state: the stored result does not fit type public.refund_receipt',
                detail => 'At $: field "note" of type public.refund_receipt is missing from the stored value.',
                hint => 'The type changed since the result was recorded. Decode it as jsonb, or use a new namespace for the new type.' },
          'a changed type: ID001 with the detail and hint api.md shows');
$e = failure(sub { $dbh->selectrow_array(q{SELECT r.refund_id FROM idempotency.idem_begin_typed('refunds', 'rf-dbd-1', 25::numeric) o,
                                                  idempotency.idem_result(o, NULL::refund_receipt) r}) });
like($e, qr/^DETAIL:  At \$: field "note".*^HINT:  The type changed/ms, 'errstr (and so $@ under RaiseError) includes the detail and the hint');
$dbh->do('ALTER TYPE refund_receipt DROP ATTRIBUTE note');

# What the guide warns about.
{
    my $plain = DBI->connect('dbi:Pg:', undef, undef);   # DBI's defaults: PrintError, no RaiseError
    local $SIG{__WARN__} = sub {};
    my $ret = $plain->do('SELECT idempotency.idem_commit(?, ?, ?)', undef, 'payments', 'dbd-6', '{}');
    ok(!defined $ret && $plain->state eq '55000', "DBI's defaults: a failed statement returns undef and does not die");
    $plain->disconnect;
}
is(failure(sub { $dbh->do('BEGIN; SELECT * FROM create_payment(?, ?); COMMIT;', undef, 'dbd-7', encode_json($eur100)) }),
   undef, 'several statements with placeholders: DBD::Pg quotes the values itself and sends them as one string');
is($count->(q{SELECT count(*) FROM idempotency.idem_begin('payments', 'dbd-7',
               jsonb_build_object('method', 'POST', 'target', '/payments', 'body', ?::jsonb)) WHERE kind = 'prior_result'},
            encode_json($eur100)), 1, '... and they ran');
failure(sub { $dbh->do(q{SELECT kind FROM idempotency.idem_begin('payments', 'dbd-8', '{}')}) });
is($dbh->state, '25000', 'a fresh begin alone with AutoCommit: 25000 at its COMMIT');

is(($dbh->selectrow_array('SELECT kind FROM idempotency.idem_begin(?, ?, ?, ?)', undef, $NAMESPACE, 'dbd-1', '{}', '1 hour'))[0],
   'mismatch', 'a string for the interval parameter');
ok(($dbh->selectrow_array('SELECT idempotency.idem_grant(?, ?)', undef, 'dbd-grants', 'postgres'))[0],
   'a string for the regrole parameter');

# docs/usage.md's recipes.
$r = create_payment_in_sql($dbh, 'dbd-sql-1', $eur100);
ok($r->{status} == 201 && $r->{body}{payment_id} =~ /^\d+$/, "usage.md's create_payment: 201");
is_deeply(create_payment_in_sql($dbh, 'dbd-sql-1', $eur100),
          { status => 201, headers => { %{ $r->{headers} }, 'Idempotency-Replayed' => 'true' }, body => $r->{body} },
          "usage.md's create_payment: the retry replays");
transfer($dbh, 'tr-dbd', 1, 2, 30) for 1 .. 2;
is_deeply($dbh->selectcol_arrayref('SELECT balance FROM accounts ORDER BY id'), [40, 60], "usage.md's transfer, called twice: moved once");

$dbh->disconnect;
done_testing();
