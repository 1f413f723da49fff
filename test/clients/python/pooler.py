"""pooler.py: psycopg 3 behind PgBouncer in transaction pooling, as
docs/clients.md's section on poolers says to connect, and why. Run by
test/pooler/run with the PG* variables naming its PgBouncer (the database
PGDATABASE through a pool of two server connections) and SERVER_PORT the
server itself, for the checks; prints TAP.

psycopg prepares a query on the server (as _pg3_0, _pg3_1, ...) once a
connection has run it five times (prepare_threshold), and from then on
sends only its name. Behind transaction pooling the next transaction may
run on another server connection, which has no such statement, or has
another client's statement of that name. The checks make a statement move
deterministically: with two server connections, a second client holds one
in an open transaction while the statement is prepared on the other, and a
third holds that one when it runs again. (Each server connection is
cleared first with DEALLOCATE ALL: in transaction pooling, statements
prepared by earlier clients stay on it.)

- With prepare_threshold=None (the guide's setting): the move works, and 8
  connections paying 80 keys (each retried) over the pool of two get one
  payment per key, with no error.
- With the defaults, before PgBouncer 1.21 (POOLER_MAX_PREPARED=0): 26000
  "prepared statement _pg3_0 does not exist" when the statement moves; and
  when two clients each prepared their own _pg3_0, one client's parameters
  run in the other client's statement.
- With the defaults, from 1.21 (max_prepared_statements > 0, PgBouncer
  prepares each client's statements where they run): the move works; but
  psycopg 3.1 deallocates a statement it evicts from its cache (more than
  prepared_max, 100, on one connection) with SQL DEALLOCATE, which PgBouncer
  passes through unchanged, and the server has no statement of that name
  (26000)."""
import os
import sys
import threading

import psycopg
from psycopg.types.json import Jsonb

# snippet: pooler
def connect_through_pgbouncer():
    """Behind PgBouncer in transaction or statement pooling: no server-side
    prepared statements, so that nothing a transaction relies on stays on a
    server connection (the same keyword for psycopg_pool: kwargs=...)."""
    return psycopg.connect(prepare_threshold=None)
# end snippet


TRACKS_PREPARED = int(os.environ.get("POOLER_MAX_PREPARED", "0")) > 0
NAMESPACE = "pooled"
BEGIN = "SELECT kind, result, fence FROM idempotency.idem_begin(%s, %s, %s)"

count = 0
failed = 0


def ok(cond, name, diag=None):
    global count, failed
    count += 1
    failed += 0 if cond else 1
    print(f"{'ok' if cond else 'not ok'} {count} - {name}", flush=True)
    if not cond and diag is not None:
        print(f"# {diag!r}", file=sys.stderr, flush=True)


def failure(fn, *args):
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 (the checks look at what was raised)
        return e
    return None


def server():
    """A session of the server itself, for the checks."""
    return psycopg.connect(port=int(os.environ["SERVER_PORT"]))


def pay(conn, key):
    """The guide's flow, reduced: begin, a payment, commit, in one
    transaction. Returns the payment's id (recorded, or replayed)."""
    with conn.transaction():
        kind, result, fence = conn.execute(BEGIN, (NAMESPACE, key, Jsonb({"amount": 100}))).fetchone()
        if kind == "prior_result":
            return result["payment_id"]
        assert kind == "fresh", kind
        (payment,) = conn.execute("INSERT INTO payments (amount, currency) VALUES (100, 'EUR') RETURNING id").fetchone()
        conn.execute("SELECT idempotency.idem_commit(%s, %s, %s, %s)",
                     (NAMESPACE, key, Jsonb({"payment_id": payment}), fence))
        return payment


def backend(conn):
    (pid,) = conn.execute("SELECT pg_backend_pid()").fetchone()
    conn.commit()
    return pid


def hold(conn, clear=False):
    """Holds a server connection: an open transaction (which first clears
    the connection's prepared statements when clear)."""
    conn.execute("DEALLOCATE ALL" if clear else "SELECT 1")


def moved_statement(x):
    """Runs the guide's begin six times on x (a committed key: a replay),
    then once more on the other server connection of the pool of two.
    Returns (what that last run raised or None, the two backends)."""
    with psycopg.connect() as y, psycopg.connect() as w:
        hold(y, clear=True)                         # y holds one server connection
        x.execute("DEALLOCATE ALL")                 # x runs on the other one
        x.commit()
        for _ in range(6):
            x.execute(BEGIN, (NAMESPACE, "moved", Jsonb({"amount": 100})))
            x.commit()
        first = backend(x)                          # x's statement is prepared on the other one
        hold(w)                                     # which w now holds
        y.commit()
        e = failure(lambda: (x.execute(BEGIN, (NAMESPACE, "moved", Jsonb({"amount": 100}))).fetchone(), x.commit()))
        x.rollback()
        second = backend(x)
        w.commit()
    return e, (first, second)


def main():
    with server() as conn:
        pay(conn, "moved")

    # The guide's setting.
    with connect_through_pgbouncer() as x:
        e, (first, second) = moved_statement(x)
        ok(e is None and first != second,
           "prepare_threshold=None: the begin runs on another server connection after six runs on one", e)

    payments, errors = {}, []

    def client(n):
        try:
            with connect_through_pgbouncer() as conn:
                for i in range(10):
                    key = f"load-{n}-{i}"
                    paid = pay(conn, key)
                    payments.setdefault(key, set()).update({paid, pay(conn, key)})
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    clients = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for c in clients:
        c.start()
    for c in clients:
        c.join()
    ok(not errors, "prepare_threshold=None: 8 connections pay 80 keys through the pool of two, with no error", errors[:3])
    ok(len(payments) == 80 and all(len(p) == 1 for p in payments.values()), "one payment per key, replayed to its retry")
    with server() as conn:
        (n,) = conn.execute("SELECT count(*) FROM payments").fetchone()
    ok(n == 81, "the payments table holds those 80 (and the one before)", n)

    # psycopg's defaults.
    with psycopg.connect() as x:
        e, _ = moved_statement(x)
        if TRACKS_PREPARED:
            ok(e is None, "defaults, PgBouncer tracking prepared statements: the prepared begin runs on another server connection", e)
        else:
            ok(isinstance(e, psycopg.errors.InvalidSqlStatementName) and '"_pg3_0" does not exist' in str(e),
               "defaults, before PgBouncer 1.21: the prepared begin on another server connection fails with 26000", e)

    # Two clients' statements of the same name: one client's parameters in the other's statement.
    with psycopg.connect() as y, psycopg.connect() as w, psycopg.connect() as x1, psycopg.connect() as x2:
        hold(y, clear=True)
        x1.execute("DEALLOCATE ALL")
        x1.commit()
        for _ in range(6):
            x1.execute("SELECT 'client 1 asked for ' || %s::text", ("a",))
            x1.commit()
        hold(w)
        y.commit()
        for _ in range(6):
            x2.execute("SELECT 'client 2 asked for ' || %s::text", ("b",))
            x2.commit()
        answer = x1.execute("SELECT 'client 1 asked for ' || %s::text", ("a",)).fetchone()[0]
        x1.commit()
        w.commit()
    if TRACKS_PREPARED:
        ok(answer == "client 1 asked for a", "defaults, PgBouncer tracking prepared statements: each client runs its own _pg3_0", answer)
    else:
        ok(answer == "client 2 asked for a",
           "defaults, before PgBouncer 1.21: client 1's _pg3_0 runs client 2's statement with client 1's parameter", answer)

    # psycopg 3.1 deallocates an evicted statement with SQL DEALLOCATE, by
    # its own name, which PgBouncer 1.21 and later do not translate.
    if TRACKS_PREPARED:
        with psycopg.connect() as x:
            x.prepared_max = 1                      # evicts at the second prepared statement, not the 101st
            queries = [f"SELECT %s::int AS column_{n}" for n in range(3)]
            e = failure(lambda: [(x.execute(q, (i,)), x.commit()) for q in queries for i in range(6)])
            x.rollback()
        ok(isinstance(e, psycopg.errors.InvalidSqlStatementName),
           "defaults, PgBouncer tracking prepared statements: the DEALLOCATE of an evicted statement fails with 26000", e)

    print(f"1..{count}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
