"""pooled.py: what test/pooler's programs share: psycopg connections through
the PgBouncer that test/pooler/run started (POOLER_PORT on 127.0.0.1), to
its admin console, and straight to the server (the PG* variables, database
idem_pooler); waiting for an event; and TAP output.

Connections through PgBouncer use prepare_threshold=None, the setting
docs/clients.md gives psycopg behind a pooler (python/pooler.py in
test/clients shows why), and autocommit, so that every transaction is the
program's own BEGIN ... COMMIT."""
import os
import sys
import time

import psycopg
from psycopg.types.json import Jsonb

POOLER_PORT = int(os.environ["POOLER_PORT"])


def pooled(database, user="postgres", **options):
    """A client of PgBouncer's pool `database` (see test/pooler/run)."""
    return psycopg.connect(host="127.0.0.1", port=POOLER_PORT, dbname=database, user=user,
                           prepare_threshold=None, autocommit=True, **options)


def direct(**options):
    """A session of the server itself, as the tests' superuser."""
    return psycopg.connect(dbname="idem_pooler", autocommit=True, **options)


def admin():
    """PgBouncer's admin console, which speaks only the simple query protocol
    (a ClientCursor's)."""
    return psycopg.connect(host="127.0.0.1", port=POOLER_PORT, dbname="pgbouncer", user="postgres",
                           autocommit=True, cursor_factory=psycopg.ClientCursor)


def show(console, what):
    """SHOW what on the admin console, as dicts."""
    cur = console.execute(f"SHOW {what}")
    names = [d.name for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def pool(console, database, user="postgres"):
    """The row of SHOW POOLS for database and user."""
    return next(p for p in show(console, "POOLS") if p["database"] == database and p["user"] == user)


def eventually(check, limit=30.0):
    """Calls check every 20 ms until it returns something true, and returns
    that; None after limit seconds. For events the test waits for (a lock
    wait begins, PgBouncer ends a session), never to measure a duration."""
    end = time.monotonic() + limit
    while True:
        value = check()
        if value or time.monotonic() > end:
            return value
        time.sleep(0.02)


def begin(conn, namespace, key, request, **arguments):
    """idem_begin's (kind, fence, result) on conn."""
    extra = "".join(f", {name} => %s" for name in arguments)
    return conn.execute(f"SELECT kind, fence, result FROM idempotency.idem_begin(%s, %s, %s{extra})",
                        (namespace, key, Jsonb(request), *arguments.values())).fetchone()


def probe(namespace, key, request):
    """What a begin of key answers now, seen from a session of the server
    itself; its claim, if fresh, is rolled back."""
    with direct() as conn:
        conn.execute("BEGIN")
        kind = begin(conn, namespace, key, request)[0]
        conn.execute("ROLLBACK")
        return kind


def failure(fn, *args):
    """The exception fn(*args) raises, or None."""
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 (the checks look at what was raised)
        return e
    return None


class Tap:
    """TAP output: ok() per check, then done(), which prints the plan and
    returns the exit status."""

    def __init__(self):
        self.count = 0
        self.failed = 0

    def ok(self, cond, name, diag=None):
        self.count += 1
        self.failed += 0 if cond else 1
        print(f"{'ok' if cond else 'not ok'} {self.count} - {name}", flush=True)
        if not cond and diag is not None:
            print(f"# {diag!r}", file=sys.stderr, flush=True)
        return cond

    def diag(self, text):
        print(f"# {text}", flush=True)

    def done(self):
        print(f"1..{self.count}")
        return 1 if self.failed else 0
