"""session_state.py: what one client's session leaves on a server connection
for the next client, behind PgBouncer.

- The store's settings cannot be set from a session in any pool mode
  (55P02), so none reaches another client's record (test/t/011 shows the
  record itself through transaction pooling). On a server connection that
  has not loaded the library yet, SET makes a placeholder, which the library
  refuses with a WARNING when it loads, in whichever client's call: that
  client's record keeps the server's window.
- Other session state does travel in transaction pooling: a SET, and a
  session-level SET ROLE, which hands the next client of the pool that
  role's namespace grants. pooler_gateway (NOINHERIT) logs in for services
  and acts as pooler_app_a with SET ROLE; a client of the same pool that
  set no role then runs as pooler_app_a and may claim keys in its namespace
  a-only. SET LOCAL ROLE ends with its transaction; a service that logs in
  as its own role (pooler_svc_b) gets a pool of its own; and session
  pooling resets the connection (DISCARD ALL, PgBouncer's
  server_reset_query) before the next client gets it."""
import sys
from datetime import timedelta

import psycopg

from pooled import Tap, admin, begin, failure, pooled

SETTINGS = ("replay_window = '1s'", "in_flight_wait = '3s'")


def refused_settings(t, mode, database):
    """Through a pool of one, on a server connection that has loaded the library."""
    conn = pooled(database)
    conn.execute("LOAD 'idempotency'")
    for setting in SETTINGS:
        e = failure(conn.execute, f"SET idempotency.{setting}")
        t.ok(isinstance(e, psycopg.errors.CantChangeRuntimeParam) and "cannot be set in a session" in str(e),
             f"{mode}: SET idempotency.{setting} is refused (55P02)", e)
    conn.close()


def before_the_library(t):
    """On a new server connection that has not loaded the library (unless
    the server preloads it), SET makes a placeholder; when the library loads,
    in whichever client's call, the placeholder is refused with a WARNING
    and the server's value applies to that client's record."""
    with admin() as console:
        console.execute("RECONNECT transaction_1")
    a = pooled("transaction_1")
    loaded = a.execute("SELECT count(*) FROM pg_settings WHERE name = 'idempotency.replay_window'").fetchone()[0]
    e = failure(a.execute, "SET idempotency.replay_window = '1s'")
    if loaded:
        t.ok(isinstance(e, psycopg.errors.CantChangeRuntimeParam), "the server preloads the library: SET is refused", e)
        return
    t.ok(e is None, "a new server connection without the library: client A's SET is a placeholder, accepted", e)
    b = pooled("transaction_1")
    warnings = []
    b.add_notice_handler(lambda d: warnings.append(d.message_primary))
    b.execute("BEGIN")
    fence = begin(b, "settings", "b-1", {})[1]
    b.execute("SELECT idempotency.idem_commit('settings', 'b-1', '{}', %s)", (fence,))
    b.execute("COMMIT")
    t.ok('parameter "idempotency.replay_window" cannot be set in a session' in warnings,
         "client B's call loads the library: a WARNING that the session's value is refused", warnings)
    window = b.execute("SELECT expires_at - created_at FROM idempotency.idempotency_record"
                       " WHERE namespace = 'settings' AND key_value = 'b-1'").fetchone()[0]
    t.ok(window == timedelta(days=1), "client B's record has the server's replay window, not client A's", window)
    a.close()
    b.close()


def claims(conn, namespace, key):
    """Whether conn may claim key in namespace: its begin, rolled back."""
    conn.execute("BEGIN")
    try:
        return begin(conn, namespace, key, {})[0] == "fresh"
    except psycopg.errors.InsufficientPrivilege:
        return False
    finally:
        conn.execute("ROLLBACK")


def who(conn):
    return conn.execute("SELECT current_user, pg_backend_pid()").fetchone()


def main():
    t = Tap()
    for mode in ("transaction", "session", "statement"):
        refused_settings(t, mode, f"{mode}_1")
    before_the_library(t)

    # A plain session setting reaches the next client in transaction pooling...
    a, b = pooled("transaction_1"), pooled("transaction_1")
    a.execute("SET myapp.tenant = 'tenant-a'")
    t.ok(b.execute("SELECT current_setting('myapp.tenant', true)").fetchone()[0] == "tenant-a",
         "transaction: client A's SET myapp.tenant reaches client B")
    a.execute("RESET ALL")
    a.close()
    b.close()

    # ... and so does a session-level SET ROLE, with the role's namespace grants.
    gateway = pooled("transaction_1", user="pooler_gateway")
    t.ok(not claims(gateway, "a-only", "k"), "pooler_gateway alone cannot claim keys in a-only (42501)")
    a = pooled("transaction_1", user="pooler_gateway")
    a.execute("SET ROLE pooler_app_a")
    t.ok(claims(a, "a-only", "k"), "client A, after SET ROLE pooler_app_a, can")
    role, pid = who(gateway)
    t.ok(role == "pooler_app_a", "transaction: client B, who set no role, runs as pooler_app_a on the same server connection",
         role)
    t.ok(claims(gateway, "a-only", "k"), "transaction: and may claim keys in a-only")
    a.execute("RESET ROLE")

    # SET LOCAL ROLE ends with the transaction.
    a.execute("BEGIN")
    a.execute("SET LOCAL ROLE pooler_app_a")
    t.ok(begin(a, "a-only", "k", {})[0] == "fresh", "client A, after SET LOCAL ROLE in its transaction, can claim in a-only")
    a.execute("ROLLBACK")
    t.ok(who(gateway)[0] == "pooler_gateway" and not claims(gateway, "a-only", "k"),
         "transaction: with SET LOCAL ROLE, client B runs as pooler_gateway and cannot")

    # A service that logs in as its own role has a pool of its own.
    a.execute("SET ROLE pooler_app_a")
    svc_b = pooled("transaction_1", user="pooler_svc_b")
    role, svc_pid = who(svc_b)
    t.ok(role == "pooler_svc_b" and svc_pid != who(a)[1],
         "a client that logs in as pooler_svc_b gets a server connection of its own pool, as pooler_svc_b", (role, svc_pid))
    t.ok(claims(svc_b, "b-only", "k") and not claims(svc_b, "a-only", "k"),
         "and has its own grants (b-only), not pooler_app_a's")
    a.execute("RESET ROLE")
    for c in (a, gateway, svc_b):
        c.close()

    # Session pooling resets the connection before the next client gets it.
    a = pooled("session_1", user="pooler_gateway")
    a.execute("SET ROLE pooler_app_a")
    a.execute("SET myapp.tenant = 'tenant-a'")
    (pid,) = a.execute("SELECT pg_backend_pid()").fetchone()
    a.close()
    b = pooled("session_1", user="pooler_gateway")
    state = b.execute("SELECT current_user, coalesce(current_setting('myapp.tenant', true), ''), pg_backend_pid()").fetchone()
    t.ok(state[2] == pid and state[:2] == ("pooler_gateway", ""),
         "session: the next client of that server connection gets it reset (no role, no setting)", (state, pid))
    b.close()
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
