"""claim_guard.py: the claim guard behind PgBouncer. A transaction that got
fresh cannot commit before it ends the attempt; behind a pooler, the refused
COMMIT must also leave the server connection clean for the next client,
since PgBouncer hands it on as soon as the server says the transaction is
over. In each pool mode, through a pool of one server connection where
there is one (transaction_1, session_1; statement_3 otherwise):

- BEGIN, a fresh idem_begin, COMMIT: refused with 25000; the client is out
  of its transaction and its connection works; the next client gets the
  same server connection with no transaction, no lock and no record left,
  and its begin of the key is fresh;
- a fresh idem_begin alone (autocommit) is refused the same way; a replay
  alone is fine;
- statement pooling: PgBouncer ends a client that opens a transaction
  block, closing its server connection; one call that begins and commits
  (pooled_payment, like docs/usage.md's recipes) is the way to use the
  store there."""
import sys

import psycopg

from pooled import Tap, begin, direct, eventually, failure, pooled, probe

REQUEST = {"amount": 1}


def server_state(conn):
    """(backend pid, transaction id if one is assigned, advisory locks held) of conn's server connection."""
    return conn.execute(
        "SELECT pg_backend_pid(), txid_current_if_assigned(),"
        " (SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory')").fetchone()


def recorded(key):
    with direct() as conn:
        return conn.execute("SELECT count(*) FROM idempotency.idempotency_record WHERE namespace = 'guard' AND key_value = %s",
                            (key,)).fetchone()[0]


def unfinished_commit(t, mode, database):
    key = f"{mode}-unfinished"
    a = pooled(database)
    a.execute("BEGIN")
    kind = begin(a, "guard", key, REQUEST)[0]
    (pid,) = a.execute("SELECT pg_backend_pid()").fetchone()
    t.ok(kind == "fresh", f"{mode}: a client begins {key}: fresh")
    e = failure(a.execute, "COMMIT")
    t.ok(isinstance(e, psycopg.errors.InvalidTransactionState) and "cannot commit while idempotency key" in str(e),
         f"{mode}: its COMMIT before idem_commit is refused (25000)", e)
    t.ok(a.info.transaction_status == psycopg.pq.TransactionStatus.IDLE and a.execute("SELECT 1").fetchone() == (1,),
         f"{mode}: the client is out of its transaction, and its connection works")
    a.close()
    t.ok(recorded(key) == 0, f"{mode}: nothing of {key} was recorded")
    b = pooled(database)
    state = server_state(b)
    t.ok(state == (pid, None, 0), f"{mode}: the next client gets that server connection, with no transaction and no lock",
         (state, pid))
    b.execute("BEGIN")
    t.ok(begin(b, "guard", key, REQUEST)[0] == "fresh", f"{mode}: and its begin of {key} is fresh")
    b.execute("ROLLBACK")
    b.close()


def autocommit_begins(t, mode, database):
    key = f"{mode}-alone"
    a = pooled(database)
    e = failure(begin, a, "guard", key, REQUEST)
    t.ok(isinstance(e, psycopg.errors.InvalidTransactionState), f"{mode}: a fresh idem_begin alone is refused (25000)", e)
    t.ok(recorded(key) == 0 and probe("guard", key, REQUEST) == "fresh", f"{mode}: it left nothing")
    with direct() as d:
        d.execute("BEGIN")
        fence = begin(d, "guard", key, REQUEST)[1]
        d.execute("SELECT idempotency.idem_commit('guard', %s, '{\"paid\": true}', %s)", (key, fence))
        d.execute("COMMIT")
    kind, _, result = begin(a, "guard", key, REQUEST)
    t.ok((kind, result) == ("prior_result", {"paid": True}), f"{mode}: a replay alone is answered", kind)
    a.close()


def statement_pooling(t):
    a = pooled("statement_3")
    (pid,) = a.execute("SELECT pg_backend_pid()").fetchone()
    e = failure(lambda: (a.execute("BEGIN"), a.execute("SELECT 1")))
    t.ok(isinstance(e, psycopg.OperationalError) and "transaction blocks not allowed in statement pooling mode" in str(e)
         and a.closed, "statement: PgBouncer ends a client that opens a transaction block", e)
    with direct() as d:
        gone = eventually(lambda: d.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()[0] == 0)
    t.ok(gone, "statement: and closes the server connection it was in (its session ends, and its transaction)")
    b = pooled("statement_3")
    state = server_state(b)
    t.ok(state[1:] == (None, 0), "statement: the next client's server connection has no transaction", state)
    answer = b.execute("SELECT answer FROM pooled_payment('guard', 'statement-one-call', false)").fetchone()[0]
    again = b.execute("SELECT answer FROM pooled_payment('guard', 'statement-one-call', false)").fetchone()[0]
    t.ok((answer, again) == ("paid", "replayed"),
         "statement: one call that begins and commits works, and its retry replays", (answer, again))
    b.close()


def main():
    t = Tap()
    unfinished_commit(t, "transaction", "transaction_1")
    autocommit_begins(t, "transaction", "transaction_1")
    unfinished_commit(t, "session", "session_1")
    autocommit_begins(t, "session", "session_1")
    autocommit_begins(t, "statement", "statement_3")
    statement_pooling(t)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
