#!/usr/bin/python3
"""payments_e2e.py: the example service in docs/examples/payments, end to
end over real HTTP on localhost.

Starts service.py against the database named by the PG* variables (the
test command's private server), with a slow simulated provider so that a
duplicate can arrive while the first request is in flight, and checks every
promise of the Idempotency-Key pattern with real requests: a retry replays
the same status and body with Idempotency-Replayed: true; two concurrent
duplicates give one 201 and one 409; the same key with another body gives
422; a missing or invalid key gives 400, with the service's documentation
link; a refused payment replays its 422; after a transient failure (503)
the retry succeeds; a key sent quoted (as the IETF draft specifies the
field) and bare is one key; and the payments table holds exactly one row per
key that succeeded. Prints TAP."""
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import psycopg

HERE = os.path.dirname(os.path.abspath(__file__))
SERVICE = os.path.join(HERE, "..", "..", "docs", "examples", "payments", "service.py")
DB = "idempotency_e2e"
results = []


def ok(cond, name, diag=""):
    results.append(bool(cond))
    print(f"{'ok' if cond else 'not ok'} {len(results)} - {name}")
    if not cond and diag:
        print("# " + str(diag).replace("\n", "\n# "))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, body, key=None, raw=None):
    """POST /payments; returns (status, headers, parsed body)."""
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/payments", data=data, method="POST",
                                 headers={"Content-Type": "application/json"})
    if key is not None:
        req.add_header("Idempotency-Key", key)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read())


def main():
    with psycopg.connect("dbname=postgres", autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB}")
        c.execute(f"CREATE DATABASE {DB}")
    port = free_port()
    env = dict(os.environ, PAYMENTS_DSN=f"dbname={DB}", PAYMENTS_PROVIDER_DELAY_MS="1500")
    service = subprocess.Popen([sys.executable, SERVICE, "--port", str(port)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = service.stdout.readline()
        if "listening" not in line:
            print(f"Bail out! the service did not start: {line}{service.stdout.read()}")
            sys.exit(1)
        run(port)
    finally:
        service.terminate()
        service.wait()
    print(f"1..{len(results)}")
    sys.exit(0 if all(results) else 1)


def run(port):
    pay = {"amount": 100, "currency": "EUR", "customer": "c-42"}

    # A retry replays the same status and body, flagged as a replay.
    s1, h1, b1 = post(port, pay, "key-retry")
    s2, h2, b2 = post(port, dict(reversed(list(pay.items()))), "key-retry")   # same body, keys reordered
    ok(s1 == 201 and "Idempotency-Replayed" not in h1, "first request: 201, not a replay", (s1, h1))
    ok(s2 == 201 and b2 == b1 and h2.get("Location") == h1.get("Location"), "retry: same status, body and Location",
       (s2, b2, h2))
    ok(h2.get("Idempotency-Replayed") == "true", "retry: Idempotency-Replayed: true", h2)

    # Two concurrent duplicates: one does the work (201), the other is told to retry (409).
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(post(port, pay, "key-race"))) for _ in range(2)]
    threads[0].start()
    time.sleep(0.5)                       # the first is inside the slow provider call
    threads[1].start()
    for t in threads:
        t.join()
    statuses = sorted(a[0] for a in answers)
    ok(statuses == [201, 409], "concurrent duplicates: one 201 and one 409", statuses)
    conflict = [a for a in answers if a[0] == 409]
    if conflict:
        s, h, b = conflict[0]
        # Retry-After: the seconds until the first request's lease (30 s) ends.
        ok(b.get("code") == "IDEMPOTENCY_REQUEST_IN_PROGRESS" and h.get("Retry-After", "").isdigit()
           and 28 <= int(h["Retry-After"]) <= 30 and h.get("Content-Type") == "application/problem+json",
           "409 is a problem body IDEMPOTENCY_REQUEST_IN_PROGRESS with Retry-After until the lease ends", (h, b))
    else:
        ok(False, "409 is a problem body IDEMPOTENCY_REQUEST_IN_PROGRESS with Retry-After", answers)
    s, h, b = post(port, pay, "key-race")
    ok(s == 201 and h.get("Idempotency-Replayed") == "true", "after the race, the retry replays the 201", (s, h))

    # The same key with another body: 422, and nothing about the first body leaks.
    s, h, b = post(port, dict(pay, amount=999), "key-retry")
    ok(s == 422 and b.get("code") == "IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST", "reused key: 422", (s, b))
    ok("100" not in json.dumps(b) and "c-42" not in json.dumps(b), "the 422 does not carry the recorded request", b)

    # Missing and invalid keys: 400, nothing recorded.
    s, h, b = post(port, pay)
    ok(s == 400 and b.get("code") == "MISSING_IDEMPOTENCY_KEY", "no header: 400 MISSING_IDEMPOTENCY_KEY", (s, b))
    ok(b.get("type") == "https://example.com/docs/idempotency"
       and h.get("Link") == '<https://example.com/docs/idempotency>; rel="describedby"',
       "the 400 names the service's documentation as its type and in a Link header", (h, b))
    s, h, b = post(port, pay, '"key-unterminated')
    ok(s == 400 and b.get("code") == "INVALID_IDEMPOTENCY_KEY" and "closing double quote" in b.get("detail", ""),
       "a quoted key without its closing quote: 400 saying so", (s, b))
    s, h, b = post(port, pay, "   ")
    ok(s == 400 and b.get("code") == "INVALID_IDEMPOTENCY_KEY", "blank header: 400 INVALID_IDEMPOTENCY_KEY", (s, b))
    s, h, b = post(port, pay, "k" * 256)
    ok(s == 400 and b.get("code") == "INVALID_IDEMPOTENCY_KEY" and "255" in b.get("detail", ""),
       "256-character key: 400 with the limit in the detail", (s, b))

    # A refused payment is permanent: the retry replays the same 422.
    refused = dict(pay, amount=-5)
    s1, h1, b1 = post(port, refused, "key-refused")
    s2, h2, b2 = post(port, refused, "key-refused")
    ok(s1 == 422 and b1.get("code") == "InvalidAmount", "refused payment: 422 InvalidAmount", (s1, b1))
    ok(s2 == 422 and b2 == b1 and h2.get("Idempotency-Replayed") == "true", "its retry replays the same 422",
       (s2, b2, h2))

    # A transient failure records nothing: 503, then the retry succeeds.
    flaky = dict(pay, customer="c-flaky")
    s1, h1, b1 = post(port, flaky, "key-flaky")
    s2, h2, b2 = post(port, flaky, "key-flaky")
    ok(s1 == 503, "provider timeout: 503", (s1, b1))
    ok(s2 == 201 and "Idempotency-Replayed" not in h2, "the retry after a transient failure is fresh: 201", (s2, h2))

    # The draft's form of the field, a quoted string, and the bare form that
    # Stripe-style clients send: one key, so one payment.
    s1, h1, b1 = post(port, pay, '"8e03978e-40d5-43e8-bc93-6894a57f9324"')
    s2, h2, b2 = post(port, pay, "8e03978e-40d5-43e8-bc93-6894a57f9324")
    ok(s1 == 201 and s2 == 201 and b2 == b1 and h2.get("Idempotency-Replayed") == "true",
       "a quoted key and its bare form are one key: the second replays the first", (s1, s2, h2))

    # Exactly one payment per key that succeeded, none for the others.
    with psycopg.connect(f"dbname={DB}") as c:
        rows = c.execute("SELECT idempotency_key, count(*) FROM payments GROUP BY 1 ORDER BY 1").fetchall()
        stuck = c.execute("SELECT count(*) FROM idempotency.idempotency_record WHERE status = 'in_progress'").fetchone()[0]
    ok(rows == [("8e03978e-40d5-43e8-bc93-6894a57f9324", 1), ("key-flaky", 1), ("key-race", 1), ("key-retry", 1)],
       "one payment row per successful key", rows)
    ok(stuck == 0, "no in_progress record left behind", stuck)


if __name__ == "__main__":
    main()
