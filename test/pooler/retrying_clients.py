"""retrying_clients.py: exactly one effect per key behind PgBouncer, in
transaction, session and statement pooling.

In each mode, 16 client processes share a pool of three server connections
(transaction_3, session_3, statement_3) and all retry the same keys, eight
at a time in orders of their own, reconnecting every few keys (so that in session
pooling too, server connections pass from client to client). A fresh
attempt inserts a payment and then, one time in four, rolls back instead of
committing; the client retries the key until it gets an answer that ends
it. In transaction and session pooling a request is BEGIN, idem_begin, the
payment, idem_commit, COMMIT; in statement pooling, where a transaction may
be one statement only, it is one call of pooled_payment (setup.sql).

Before the clients start, one more client claims a key of theirs and is
killed with SIGKILL while it holds it: in transaction and session pooling
idle inside its transaction (PgBouncer then closes that server connection,
and the server rolls the claim back), in statement pooling while its
statement runs (held on an advisory lock the test holds until the kill).

Then, for every key: one payment; its record committed with that payment;
every answer any client got names that payment."""
import multiprocessing
import os
import random
import signal
import sys
import time

import psycopg

from pooled import Tap, direct, eventually, pooled, probe

CLIENTS = 16
KEYS = {"transaction": 120, "session": 60, "statement": 90}
RECONNECT_EVERY = 5
# A client that sees in_flight for this long gives the key up (and the test fails).
GIVE_UP_AFTER = 60.0


def request(mode, key):
    return {"mode": mode, "key": key}


def attempt_in_transaction(conn, mode, key, fail):
    """One try as BEGIN ... COMMIT: ('paid' | 'replayed', payment id), or
    ('in_flight' | 'rolled back', None)."""
    with conn.transaction() as tx:
        kind, fence, result = conn.execute(
            "SELECT kind, fence, result FROM idempotency.idem_begin('pooled', %s, %s)",
            (key, psycopg.types.json.Jsonb(request(mode, key)))).fetchone()
        if kind == "prior_result":
            return "replayed", result["payment_id"]
        if kind == "in_flight":
            return "in_flight", None
        if kind != "fresh":
            raise AssertionError(f"{key}: {kind}")
        (payment,) = conn.execute("INSERT INTO pooled_payments (key, mode) VALUES (%s, %s) RETURNING id",
                                  (key, mode)).fetchone()
        if fail:
            raise psycopg.Rollback(tx)              # the work failed: the claim goes with it
        conn.execute("SELECT idempotency.idem_commit('pooled', %s, %s, %s)",
                     (key, psycopg.types.json.Jsonb({"payment_id": payment}), fence))
        return "paid", payment                      # committed as the block ends
    return "rolled back", None


def attempt_in_statement(conn, mode, key, fail):
    """One try as one statement, pooled_payment."""
    try:
        answer, payment = conn.execute("SELECT answer, payment_id FROM pooled_payment(%s, %s, %s)",
                                       (mode, key, fail)).fetchone()
    except psycopg.errors.RaiseException:
        return "rolled back", None                  # the work failed after fresh: all rolled back
    return answer, payment


def client(mode, keys, seed, results):
    """One client: every key until it is paid or replayed. Puts (answers,
    tries that rolled back, tries that found the key in flight, keys given
    up, error) on results."""
    rng = random.Random(seed)
    attempt = attempt_in_statement if mode == "statement" else attempt_in_transaction
    answers, rollbacks, in_flight, gave_up = [], 0, 0, []
    conn = None
    try:
        for n, key in enumerate(keys):
            if n % RECONNECT_EVERY == 0:
                if conn is not None:
                    conn.close()
                conn = pooled(f"{mode}_3")
            started = time.monotonic()
            while True:
                answer, payment = attempt(conn, mode, key, rng.random() < 0.25)
                if answer in ("paid", "replayed"):
                    answers.append((key, answer, payment))
                    break
                rollbacks += answer == "rolled back"
                in_flight += answer == "in_flight"
                if time.monotonic() - started > GIVE_UP_AFTER:
                    gave_up.append(key)
                    break
                time.sleep(0.002)
        conn.close()
        results.put((answers, rollbacks, in_flight, gave_up, None))
    except Exception as e:  # noqa: BLE001 (reported to the parent, which fails the test)
        results.put((answers, rollbacks, in_flight, gave_up, f"{type(e).__name__}: {e}"))


def victim_in_transaction(mode, key, ready):
    """Claims key, pays, tells the parent the payment's id, and waits inside
    its transaction to be killed."""
    conn = pooled(f"{mode}_3")
    conn.execute("BEGIN")
    kind = conn.execute("SELECT kind FROM idempotency.idem_begin('pooled', %s, %s)",
                        (key, psycopg.types.json.Jsonb(request(mode, key)))).fetchone()[0]
    (payment,) = conn.execute("INSERT INTO pooled_payments (key, mode) VALUES (%s, %s) RETURNING id",
                              (key, mode)).fetchone()
    ready.send((kind, payment))
    signal.pause()


def victim_in_statement(mode, key):
    """Calls pooled_payment with hold: its statement waits on the advisory
    lock the parent holds, until it is killed."""
    conn = pooled(f"{mode}_3")
    conn.execute("SELECT answer FROM pooled_payment(%s, %s, false, true)", (mode, key))


def kill_a_holder(t, mode, key):
    """Starts a client that claims key, checks that the key is in flight,
    and kills the client with SIGKILL. Returns its payment id (None in
    statement pooling, where its statement's effect may or may not have
    committed when the server noticed)."""
    ctx = multiprocessing.get_context("fork")
    if mode == "statement":
        with direct() as lock, direct() as watcher:
            lock.execute("BEGIN")
            lock.execute("SELECT pg_advisory_xact_lock(29)")
            victim = ctx.Process(target=victim_in_statement, args=(mode, key))
            victim.start()
            # Watched from a session of its own: a transaction sees one snapshot of pg_stat_activity.
            waiting = eventually(lambda: watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND query LIKE '%pooled_payment%'").fetchone()[0] == 1)
            t.ok(waiting, f"{mode}: a client's statement holds {key}, waiting on the test's lock")
            t.ok(probe("pooled", key, request(mode, key)) == "in_flight", f"{mode}: {key} is in flight")
            os.kill(victim.pid, signal.SIGKILL)
            victim.join()
            lock.execute("ROLLBACK")
        return None
    parent, child = ctx.Pipe()
    victim = ctx.Process(target=victim_in_transaction, args=(mode, key, child))
    victim.start()
    kind, payment = parent.recv()
    t.ok(kind == "fresh", f"{mode}: a client claims {key} and pays, inside its transaction", kind)
    t.ok(probe("pooled", key, request(mode, key)) == "in_flight", f"{mode}: {key} is in flight")
    os.kill(victim.pid, signal.SIGKILL)
    victim.join()
    return payment


def run_mode(t, mode):
    keys = [f"{mode}-{i}" for i in range(KEYS[mode])]
    killed_key = keys[len(keys) // 2]
    killed_payment = kill_a_holder(t, mode, killed_key)

    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    clients = []
    for c in range(CLIENTS):
        # Every client takes the keys eight at a time, each eight in an order
        # of its own: all of them race on the same few keys.
        order = []
        for i in range(0, len(keys), 8):
            batch = keys[i:i + 8]
            random.Random(c * 1000 + i).shuffle(batch)
            order += batch
        clients.append(ctx.Process(target=client, args=(mode, order, 1000 + c, results)))
    started = time.monotonic()
    for p in clients:
        p.start()
    outcomes = [results.get(timeout=600) for _ in clients]
    for p in clients:
        p.join()
    elapsed = time.monotonic() - started

    answers = [a for o in outcomes for a in o[0]]
    rollbacks = sum(o[1] for o in outcomes)
    in_flight = sum(o[2] for o in outcomes)
    gave_up = [k for o in outcomes for k in o[3]]
    errors = [o[4] for o in outcomes if o[4]]
    t.ok(not errors, f"{mode}: no client met an error", errors)
    t.ok(not gave_up, f"{mode}: every client got an answer for every key", gave_up)
    t.diag(f"{mode}: {CLIENTS} clients over a pool of 3, {len(keys)} keys, {len(answers)} answers, "
           f"{rollbacks} rollbacks after fresh, {in_flight} in_flight answers, {elapsed:.1f} s")
    t.ok(rollbacks > 0, f"{mode}: some fresh attempts rolled back", rollbacks)

    with direct() as conn:
        payments = dict(conn.execute(
            "SELECT key, array_agg(id) FROM pooled_payments WHERE mode = %s GROUP BY key", (mode,)).fetchall())
        t.ok(sorted(payments) == sorted(keys) and all(len(ids) == 1 for ids in payments.values()),
             f"{mode}: exactly one payment per key",
             {k: v for k, v in payments.items() if len(v) != 1} or sorted(set(keys) - set(payments)))
        records = dict(conn.execute(
            "SELECT key_value, status || ' ' || coalesce(result_payload ->> 'payment_id', '')"
            " FROM idempotency.idempotency_record WHERE namespace = 'pooled' AND key_value LIKE %s",
            (f"{mode}-%",)).fetchall())
        wrong = {k: records.get(k) for k in keys
                 if records.get(k) != f"committed {payments.get(k, [None])[0]}"}
        t.ok(not wrong, f"{mode}: every key's record committed with its payment", wrong)
    mismatched = [a for a in answers if a[2] != payments.get(a[0], [None])[0]]
    t.ok(not mismatched, f"{mode}: every answer any client got names the key's payment", mismatched[:5])
    t.ok(all(any(a[0] == k and a[1] == "paid" for a in answers) or k == killed_key for k in keys),
         f"{mode}: every key was paid by one of the clients (the killed client's key perhaps by it)")
    if killed_payment is not None:
        t.ok(killed_payment not in payments[killed_key],
             f"{mode}: the killed client's payment was rolled back; a retry paid {killed_key}",
             (killed_payment, payments[killed_key]))
    else:
        paid_by_client = any(a[0] == killed_key and a[1] == "paid" for a in answers)
        t.diag(f"{mode}: {killed_key} was paid by "
               f"{'a retrying client' if paid_by_client else 'the killed client, whose statement committed'}")


def main():
    t = Tap()
    for mode in KEYS:
        run_mode(t, mode)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
