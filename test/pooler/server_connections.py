"""server_connections.py: what a pooled server connection carries, behind
PgBouncer in transaction pooling.

- A begin that waits (in_flight_wait) holds its server connection while it
  waits: with a pool of two (transaction_2) and two retries waiting for a
  key another session holds, an unrelated SELECT 1 waits in PgBouncer's
  queue (SHOW POOLS: cl_waiting) until the holder commits.
- A client that stops answering inside its transaction (SIGSTOP: its
  socket stays open, nothing arrives) keeps its claim. The server's peer is
  PgBouncer (the backend's client port is one of PgBouncer's server
  connections), which answers, so the server's TCP keepalives never end
  that session. Two timeouts do: PgBouncer's idle_transaction_timeout
  (PgBouncer closes the client and that server connection), and the
  server's idle_in_transaction_session_timeout (here SET LOCAL in the
  client's transaction; the backend is idle in a transaction whoever its
  peer is). Either way the server rolls the claim back, the retry is fresh,
  and the client, resumed, finds its connection closed.
- A server session outlives its clients: the next client gets the same
  backend, which has the library the first client's call loaded (so after
  ALTER EXTENSION UPDATE a pool keeps running the old library), until
  RECONNECT on the admin console replaces the pool's server connections."""
import multiprocessing
import os
import signal
import sys
import threading
from datetime import datetime, timezone

import psycopg

from pooled import Tap, admin, begin, direct, eventually, failure, pool, pooled, probe, show


def waits_hold_connections(t):
    events, lock = [], threading.Lock()

    def log(event):
        with lock:
            events.append(event)

    holder = direct()
    holder.execute("BEGIN")
    fence = begin(holder, "waits", "w-1", {})[1]
    answers = {}

    def waiter(name):
        conn = pooled("transaction_2")
        answers[name] = begin(conn, "waits", "w-1", {}, in_flight_wait="5 min")[0]
        log(f"{name} answered")
        conn.close()

    def bystander():
        conn = pooled("transaction_2")
        answers["select 1"] = conn.execute("SELECT 1").fetchone()[0]
        log("select 1 answered")
        conn.close()

    waiters = [threading.Thread(target=waiter, args=(f"retry {i}",)) for i in (1, 2)]
    for w in waiters:
        w.start()
    console = admin()
    # Watched from a session of its own: a transaction sees one snapshot of pg_stat_activity.
    watcher = direct()
    waiting = eventually(lambda: watcher.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%idem_begin%'")
        .fetchone()[0] == 2)
    t.ok(waiting and pool(console, "transaction_2")["sv_active"] == 2,
         "two retries wait for a held key (in_flight_wait), each on a server connection of the pool of two",
         pool(console, "transaction_2"))
    other = threading.Thread(target=bystander)
    other.start()
    queued = eventually(lambda: pool(console, "transaction_2")["cl_waiting"] == 1)
    t.ok(queued and not events, "an unrelated SELECT 1 waits in PgBouncer's queue (cl_waiting 1)",
         (pool(console, "transaction_2"), events))
    holder.execute("SELECT idempotency.idem_commit('waits', 'w-1', '{}', %s)", (fence,))
    log("holder committed")
    holder.execute("COMMIT")
    for thread in (*waiters, other):
        thread.join(60)
    t.ok(answers == {"retry 1": "prior_result", "retry 2": "prior_result", "select 1": 1},
         "when the holder commits, the retries replay and the SELECT 1 gets its server connection", answers)
    t.ok(events[0] == "holder committed", "nothing was answered before the holder committed", events)
    holder.close()
    watcher.close()
    console.close()


def stopped_client(key, server_timeout, ready, resumed):
    """Claims key inside a transaction (with the server's
    idle_in_transaction_session_timeout at 1 s for that transaction when
    server_timeout), says so, then (stopped and resumed by the parent) tries
    to commit and reports what happened."""
    conn = pooled("transaction_2")
    conn.execute("BEGIN")
    if server_timeout:
        conn.execute("SET LOCAL idle_in_transaction_session_timeout = '1s'")
    kind = begin(conn, "waits", key, {})[0]
    ready.send(kind)
    resumed.recv()
    e = failure(conn.execute, "COMMIT")
    ready.send(f"{type(e).__name__}: {e}" if e else "committed")


def stopped_client_released(t, console, key, by, server_timeout, says):
    """A client stopped while it holds key, until the timeout named by
    releases the key; then resumed, its error must contain says."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    resume_parent, resume_child = ctx.Pipe()
    client = ctx.Process(target=stopped_client, args=(key, server_timeout, child, resume_child))
    client.start()
    t.ok(parent.recv() == "fresh", f"{by}: a client claims {key} inside its transaction")
    os.kill(client.pid, signal.SIGSTOP)
    with direct() as d:
        port = d.execute("SELECT client_port FROM pg_stat_activity WHERE state = 'idle in transaction'"
                         " AND query LIKE '%idem_begin%'").fetchone()
    t.ok(probe("waits", key, {}) == "in_flight", f"{by}: stopped (its socket open, nothing sent), it holds the key")
    bouncer_ports = {s["local_port"] for s in show(console, "SERVERS")}
    t.ok(port is not None and port[0] in bouncer_ports,
         f"{by}: the holding backend's peer is PgBouncer (its client port is one of PgBouncer's server connections)",
         (port, bouncer_ports))
    released = eventually(lambda: probe("waits", key, {}) == "fresh")
    t.ok(released, f"{by} ends it: the server rolls the claim back, the retry is fresh")
    os.kill(client.pid, signal.SIGCONT)
    resume_parent.send("go")
    what = parent.recv()
    t.ok(what.startswith("OperationalError") and says in what, f"{by}: the client, resumed, finds its connection closed", what)
    client.join(30)


def stopped_clients(t):
    console = admin()
    console.execute("SET idle_transaction_timeout = 1")
    try:
        stopped_client_released(t, console, "stopped-1", "PgBouncer's idle_transaction_timeout", False,
                                "idle transaction timeout")
    finally:
        console.execute("SET idle_transaction_timeout = 0")
    stopped_client_released(t, console, "stopped-2", "the server's idle_in_transaction_session_timeout", True,
                            "idle-in-transaction timeout")
    console.close()


def sessions_outlive_clients(t):
    first = pooled("transaction_1")
    first.execute("SELECT idempotency.idem_mint('outlive', ARRAY['x'])")
    (pid,) = first.execute("SELECT pg_backend_pid()").fetchone()
    first.close()
    connected = datetime.now(timezone.utc)
    second = pooled("transaction_1")
    again, started, maps = second.execute(
        "SELECT pg_backend_pid(), backend_start, pg_read_file('/proc/self/maps')"
        " FROM pg_stat_activity WHERE pid = pg_backend_pid()").fetchone()
    t.ok(again == pid and started < connected,
         "the next client of the pool gets the same server session, older than its own connection", (pid, again))
    t.ok("/idempotency.so" in maps, "which has the library mapped: loaded for the first client, not for it")
    second.close()
    with admin() as console:
        console.execute("RECONNECT transaction_1")
    third = pooled("transaction_1")
    t.ok(third.execute("SELECT pg_backend_pid()").fetchone()[0] != pid,
         "after RECONNECT on the admin console, a new client gets a new server session")
    third.close()


def main():
    t = Tap()
    waits_hold_connections(t)
    stopped_clients(t)
    sessions_outlive_clients(t)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
