#!/usr/bin/python3
"""recovery_e2e.py: the recovery-point recipe (docs/usage.md), killed at
every phase boundary and resumed by a retry, with one charge per key.

A payment provider runs on localhost in this process: POST /charges with an
Idempotency-Key header answers {"charge_id": ...}, charging once per key,
and counts every call (not only charges) per key. The example service
(docs/examples/payments/service.py) runs against the database named by the
PG* variables with a 2-second lease and PAYMENTS_CRASH_AFTER set to one
step; its request dies there (SIGKILL: no cleanup, no rollback but the
server's). A new service process then serves the client's retries, which
honour Retry-After until the dead attempt's lease ends and the retry takes
it over. For each step the test checks: the retry ends in 201, with the
provider's charge for the key; the provider charged the key once; it was
called exactly as often as the recovery point requires (a crash after the
charge was recorded leads to no call at all); one payments row; and the
record is committed, taken over as many times as the crash required. Prints
TAP. Then the provider's troubles: a charge answered after the service
gave up (503, the key not reopened to another request, the retry takes the
claim over and gets the same charge) and a decline (422, replayed)."""
import http.client
import http.server
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
DB = "idempotency_recovery_e2e"
LEASE_SECONDS = 4
PROVIDER_TIMEOUT = 1
results = []

# Each step the service can die after, and what the retry must do then:
# the provider calls for the key in all, and whether the record was taken
# over (attempt 2) or replayed (attempt 1).
STEPS = [
    ("claimed", 1, 2),     # claim committed, provider not called: the retry calls it
    ("called", 2, 2),      # provider charged, nothing recorded: the retry calls again, same charge
    ("recording", 2, 2),   # killed inside the transaction recording the charge: rolled back
    ("charged", 1, 2),     # the charge recorded: the retry makes no call
    ("finishing", 1, 2),   # killed inside the final transaction: rolled back, the point stays
    ("committed", 1, 1),   # everything committed, the answer lost: the retry replays
]


def ok(cond, name, diag=""):
    results.append(bool(cond))
    print(f"{'ok' if cond else 'not ok'} {len(results)} - {name}", flush=True)
    if not cond and diag:
        print("# " + str(diag).replace("\n", "\n# "), flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Provider(http.server.BaseHTTPRequestHandler):
    """The payment provider: one charge per idempotency key, every call counted."""
    protocol_version = "HTTP/1.1"
    lock = threading.Lock()
    calls = {}
    charges = {}

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        key = self.headers.get("Idempotency-Key")
        with Provider.lock:
            calls = Provider.calls[key] = Provider.calls.get(key, 0) + 1
            declined = request.get("customer") == "c-declined"
            if key not in Provider.charges and not declined:
                Provider.charges[key] = f"ch_{len(Provider.charges) + 1}"
            data = json.dumps({"error": "card_declined"} if declined else {"charge_id": Provider.charges[key]}).encode()
        if request.get("customer") == "c-slow" and calls == 1:
            time.sleep(PROVIDER_TIMEOUT + 1)     # charged, but answers after the service gave up
        try:
            self.send_response(402 if declined else 200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass    # the service gave up on the slow answer

    def log_message(self, fmt, *args):
        pass


def start_service(port, provider_port, crash_after=None):
    env = dict(os.environ, PAYMENTS_DSN=f"dbname={DB}", PAYMENTS_LEASE=f"{LEASE_SECONDS} seconds",
               PAYMENTS_PROVIDER_URL=f"http://127.0.0.1:{provider_port}",
               PAYMENTS_PROVIDER_TIMEOUT_S=str(PROVIDER_TIMEOUT))
    if crash_after:
        env["PAYMENTS_CRASH_AFTER"] = crash_after
    service = subprocess.Popen([sys.executable, SERVICE, "--port", str(port)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = service.stdout.readline()
    if "listening" not in line:
        print(f"Bail out! the service did not start: {line}{service.stdout.read()}")
        sys.exit(1)
    return service


def post(port, body, key):
    """POST /payments; (status, headers, body), or (None, {}, error) when the
    connection died with the service."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}/payments", data=json.dumps(body).encode(),
                                 method="POST", headers={"Content-Type": "application/json", "Idempotency-Key": key})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read())
    except (urllib.error.URLError, ConnectionError, http.client.RemoteDisconnected) as e:
        return None, {}, repr(e)


def retry_until_done(port, body, key):
    """Retries as a client does, honouring Retry-After; the last answer and
    how many 409s came first, and the Retry-After values they carried."""
    waits = []
    for _ in range(20):
        status, headers, answer = post(port, body, key)
        if status != 409:
            return status, headers, answer, waits
        waits.append(headers.get("Retry-After"))
        time.sleep(int(headers.get("Retry-After", "1")))
    return status, headers, answer, waits


def provider_trouble(provider_port):
    """The provider charges but answers too late (the service gives up), or
    declines: one charge, no second effect, no other request under the key."""
    port = free_port()
    service = start_service(port, provider_port)
    try:
        slow = {"amount": 7, "currency": "EUR", "customer": "c-slow"}
        status, headers, answer = post(port, slow, "slow-1")
        ok(status == 503 and headers.get("Retry-After", "").isdigit() and int(headers["Retry-After"]) >= LEASE_SECONDS - 2,
           "provider timeout after it charged: 503 with Retry-After until the claim's lease ends", (status, headers, answer))
        status, _, answer = post(port, dict(slow, amount=8), "slow-1")
        ok(status == 422, "meanwhile another request with the key is a mismatch, not a fresh start", (status, answer))
        status, headers, answer, waits = retry_until_done(port, slow, "slow-1")
        with Provider.lock:
            calls, charge_id = Provider.calls.get("slow-1"), Provider.charges.get("slow-1")
        ok(status == 201 and answer.get("charge_id") == charge_id and waits,
           "the retry waits for the lease, takes the claim over and ends with the charge made", (status, answer, waits))
        ok(calls == 2, "the provider was called twice with the key and charged once", calls)

        declined = {"amount": 9, "currency": "EUR", "customer": "c-declined"}
        first = post(port, declined, "declined-1")
        again = post(port, declined, "declined-1")
        ok(first[0] == 422 and first[2].get("code") == "PaymentDeclined", "a decline is 422 PaymentDeclined", first)
        ok(again[0] == 422 and again[2] == first[2] and again[1].get("Idempotency-Replayed") == "true",
           "and its retry replays it, without calling the provider", again)
        with Provider.lock:
            ok(Provider.calls.get("declined-1") == 1, "the provider saw one call for the declined key",
               Provider.calls.get("declined-1"))
    finally:
        service.terminate()
        service.wait()
    with psycopg.connect(f"dbname={DB}") as c:
        rows = c.execute("SELECT idempotency_key, count(*) FROM payments WHERE idempotency_key IN ('slow-1', 'declined-1') "
                         "GROUP BY 1 ORDER BY 1").fetchall()
    ok(rows == [("slow-1", 1)], "one payment for the slow key, none for the declined one", rows)


def main():
    with psycopg.connect("dbname=postgres", autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB}")
        c.execute(f"CREATE DATABASE {DB}")
    provider = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Provider)
    threading.Thread(target=provider.serve_forever, daemon=True).start()
    provider_port = provider.server_address[1]
    try:
        for step, calls, attempt in STEPS:
            run(step, calls, attempt, provider_port)
        provider_trouble(provider_port)
    finally:
        provider.shutdown()
    print(f"1..{len(results)}")
    sys.exit(0 if all(results) else 1)


def run(step, calls, attempt, provider_port):
    key = f"ride-{step}"
    body = {"amount": 100, "currency": "EUR", "customer": "c-42"}
    port = free_port()
    dying = start_service(port, provider_port, crash_after=step)
    status, _, answer = post(port, body, key)
    dying.wait(timeout=30)
    ok(status is None and dying.returncode == -9, f"{step}: the service died at the step (SIGKILL)",
       (status, answer, dying.returncode))

    service = start_service(port, provider_port)
    try:
        status, headers, answer, waits = retry_until_done(port, body, key)
        again = post(port, body, key)       # and once more, after it is done
    finally:
        service.terminate()
        service.wait()
    with Provider.lock:
        made, charge_id = Provider.calls.get(key, 0), Provider.charges.get(key)
    ok(status == 201 and answer.get("charge_id") == charge_id and charge_id is not None,
       f"{step}: the retry ends in 201 with the provider's charge", (status, headers, answer, charge_id))
    if attempt == 2:
        # The dead attempt's lease was still running: 409s whose Retry-After
        # is what is left of it (nearly all of it at first: the crash came
        # right after the claim or a point), then the takeover.
        ok(waits and all(w is not None and w.isdigit() and 1 <= int(w) <= LEASE_SECONDS for w in waits)
           and int(waits[0]) >= LEASE_SECONDS - 1,
           f"{step}: 409 with Retry-After from the lease until it ran out", waits)
    else:
        ok(not waits and headers.get("Idempotency-Replayed") == "true", f"{step}: the retry replays", (waits, headers))
    with Provider.lock:
        made = Provider.calls.get(key, 0)
    ok(made == calls, f"{step}: the provider was called {calls} time(s), however often the client retried", made)
    with psycopg.connect(f"dbname={DB}") as c:
        rows = c.execute("SELECT count(*), min(charge_id) FROM payments WHERE idempotency_key = %s", (key,)).fetchone()
        record = c.execute("SELECT status, attempt, recovery_point FROM idempotency.idempotency_record "
                           "WHERE namespace = 'payments' AND key_value = %s", (key,)).fetchone()
    ok(rows == (1, charge_id), f"{step}: one payment row, with that charge", rows)
    ok(record is not None and record[0] == "committed" and record[1] == attempt and record[2] == "charged",
       f"{step}: the record is committed at attempt {attempt}, its last point 'charged'", record)
    ok(again[0] == 201 and again[2] == answer and again[1].get("Idempotency-Replayed") == "true",
       f"{step}: a later retry replays the same answer", again)


if __name__ == "__main__":
    main()
