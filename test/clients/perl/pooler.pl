#!/usr/bin/perl
# pooler.pl: DBD::Pg behind PgBouncer in transaction pooling, as
# docs/clients.md's section on poolers says to connect, and why. Run by
# test/pooler/run with the PG* variables naming its PgBouncer (the database
# PGDATABASE through a pool of two server connections) and SERVER_PORT the
# server itself, for the checks.
#
# DBD::Pg runs a statement handle's first execution unnamed, and prepares it
# on the server (dbdpg_p<pid>_<n>) for the second and later ones
# (pg_switch_prepared): a handle executed again (prepare_cached, or one
# $sth in a loop) then runs by name. Behind transaction pooling that run may
# land on another server connection, which has no such statement. The checks
# make it move deterministically: with two server connections, a second
# client holds one in an open transaction while the handle is prepared on
# the other, and a third holds that one when it runs again (each cleared
# first with DEALLOCATE ALL: statements of earlier clients stay on it).
#
# - With pg_server_prepare => 0 (the guide's setting): the move works, and 4
#   processes paying 40 keys (each retried) over the pool of two, with
#   prepare_cached handles, get one payment per key, with no error.
# - With the defaults: a new handle per call (the guide's selectrow_hashref
#   with SQL) is unnamed and moves fine; a re-executed handle fails with
#   26000 when it moves, before PgBouncer 1.21 (POOLER_MAX_PREPARED=0). From
#   1.21 (max_prepared_statements > 0) it moves fine, but destroying such a
#   handle sends SQL DEALLOCATE with DBD::Pg's name, which PgBouncer passes
#   through unchanged and the server does not know: inside a transaction,
#   that aborts the transaction.
use strict;
use warnings;
use DBI;
use JSON::PP qw(encode_json decode_json);
use Test::More;

# snippet: pooler
# Behind PgBouncer in transaction or statement pooling: no server-side
# prepared statements (placeholders are then filled in by DBD::Pg), so that
# nothing a transaction relies on stays on a server connection.
sub connect_through_pgbouncer {
    return DBI->connect('dbi:Pg:', undef, undef,
                        { RaiseError => 1, PrintError => 0, AutoCommit => 1, pg_server_prepare => 0 });
}
# end snippet

my $tracks_prepared = ($ENV{POOLER_MAX_PREPARED} // 0) > 0;
my $BEGIN = 'SELECT kind, result, fence FROM idempotency.idem_begin(?, ?, ?)';
my $REQUEST = encode_json({ amount => 100 });

# A client of PgBouncer with DBD::Pg's defaults (and RaiseError).
sub with_defaults {
    return DBI->connect('dbi:Pg:', undef, undef, { RaiseError => 1, PrintError => 0, AutoCommit => 1 });
}
# A session of the server itself, for the checks.
sub server {
    return DBI->connect("dbi:Pg:port=$ENV{SERVER_PORT}", undef, undef, { RaiseError => 1, PrintError => 0, AutoCommit => 1 });
}
sub failure { my ($code) = @_; eval { $code->(); 1 } ? undef : $@ }
sub backend { my ($dbh) = @_; return ($dbh->selectrow_array('SELECT pg_backend_pid()'))[0] }

# The guide's flow, reduced: begin, a payment, commit, in one transaction,
# with prepare_cached handles. Returns the payment's id (recorded or replayed).
sub pay {
    my ($dbh, $key) = @_;
    $dbh->begin_work;
    my $o = $dbh->selectrow_hashref($dbh->prepare_cached($BEGIN), undef, 'pooled', $key, $REQUEST);
    if ($o->{kind} eq 'prior_result') {
        $dbh->commit;
        return decode_json($o->{result})->{payment_id};
    }
    die "$key: $o->{kind}\n" unless $o->{kind} eq 'fresh';
    my ($payment) = $dbh->selectrow_array(
        $dbh->prepare_cached(q{INSERT INTO payments (amount, currency) VALUES (100, 'EUR') RETURNING id}));
    $dbh->selectrow_array($dbh->prepare_cached('SELECT idempotency.idem_commit(?, ?, ?, ?)'), undef,
                          'pooled', $key, encode_json({ payment_id => 0 + $payment }), $o->{fence});
    $dbh->commit;
    return $payment;
}

# Runs $run (a sub given $x) six times on one server connection, then once
# on the other one of the pool of two. Returns (what the last run died
# with or undef, the two backends).
sub moved {
    my ($x, $run) = @_;
    my ($y, $w) = (with_defaults(), with_defaults());
    $y->begin_work;
    $y->do('DEALLOCATE ALL');                   # y holds one server connection
    $x->do('DEALLOCATE ALL');                   # x runs on the other one
    $run->($x) for 1 .. 6;
    my $first = backend($x);
    $w->begin_work;
    $w->do('SELECT 1');                         # w holds that one now
    $y->commit;
    my $e = failure(sub { $run->($x) });
    my $second = backend($x);
    $w->commit;
    $_->disconnect for $y, $w;
    return ($e, $first, $second);
}

{
    my $s = server();
    pay($s, 'moved');
    $s->disconnect;
}
my $cached = sub { $_[0]->selectrow_array($_[0]->prepare_cached($BEGIN), undef, 'pooled', 'moved', $REQUEST) };
my $new_handle = sub { $_[0]->selectrow_array($BEGIN, undef, 'pooled', 'moved', $REQUEST) };

# The guide's setting.
my $x = connect_through_pgbouncer();
my ($e, $first, $second) = moved($x, $cached);
ok(!defined $e && $first != $second, 'pg_server_prepare => 0: a re-executed handle runs on another server connection')
    or diag($e);
$x->disconnect;

my @children;
for my $n (1 .. 4) {
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        my $dbh = connect_through_pgbouncer();
        for my $i (1 .. 10) {
            my $key = "load-$n-$i";
            my ($paid, $again) = (pay($dbh, $key), pay($dbh, $key));
            die "$key: paid $paid, the retry got $again\n" unless $again == $paid;
        }
        $dbh->disconnect;
        exit 0;
    }
    push @children, $pid;
}
my @failed = grep { waitpid($_, 0) && $? != 0 } @children;
is(scalar @failed, 0, 'pg_server_prepare => 0: 4 processes pay 40 keys through the pool of two, retries replay, no error');
{
    my $s = server();
    is_deeply($s->selectcol_arrayref(q{SELECT count(*) FROM payments}), [41], 'one payment per key (and the one before)');
    $s->disconnect;
}

# DBD::Pg's defaults.
$x = with_defaults();
($e) = moved($x, $new_handle);
ok(!defined $e, 'defaults: a new handle per call (selectrow_hashref with SQL) runs unnamed, on any server connection')
    or diag($e);
($e) = moved($x, $cached);
if ($tracks_prepared) {
    ok(!defined $e, 'defaults, PgBouncer tracking prepared statements: a re-executed handle runs on another server connection')
        or diag($e);
    $x->begin_work;
    my $sth = $x->prepare($BEGIN);
    $sth->execute('pooled', 'moved', $REQUEST) for 1 .. 2;     # the second execution is prepared
    $sth->finish;
    {
        local $SIG{__WARN__} = sub {};          # DESTROY's own report of the failed DEALLOCATE
        undef $sth;
    }
    $e = failure(sub { $x->do('SELECT 1') });
    like($e, qr/current transaction is aborted/,
         'defaults, PgBouncer tracking prepared statements: destroying that handle in a transaction aborts it (DEALLOCATE)');
    $x->rollback;
} else {
    like($e, qr/prepared statement "dbdpg_p\d+_\d+" does not exist/,
         'defaults, before PgBouncer 1.21: a re-executed handle on another server connection fails with 26000');
}
$x->disconnect;

done_testing();
