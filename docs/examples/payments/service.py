#!/usr/bin/python3
"""service.py: an example payments service on the idempotency extension.

POST /payments with an Idempotency-Key header (quoted, as the IETF draft
specifies the field, or bare) and a JSON body {"amount": 100, "currency":
"EUR", "customer": "c-42"} creates one payment. The fingerprinted request is
the method, the target and the body, so a key reused on another endpoint is
a mismatch, never a replay of this one's result. Problems (400, 409, 422)
name the service's documentation as their type and in a Link header.
The payment provider is called over the network, so a request cannot be
one database transaction: it is the recovery-point recipe of docs/usage.md
(Stripe's atomic phases), in a namespace with an in_progress_lease.
  1. Claim (a transaction): check the header (idem_http_key), begin the
     key (idem_begin), and either answer what the store already knows
     (idem_http_response: a replay with Idempotency-Replayed: true, 409
     with Retry-After until the holder's lease ends, 422 for a key reused
     with another body), or commit the claim. A refused payment is
     recorded with idem_fail_permanent and replays as the same 422.
  2. Charge (no transaction): call the provider with the key as its
     idempotency key. A decline (4xx) is recorded for good
     (idem_fail_permanent: 422, replayed). When the provider surely got
     nothing (the connection was refused) on a first attempt, the claim is
     forgotten (idem_fail_transient) and the answer is 503: the retry
     starts over at once. When it may have charged (a timeout, a 5xx), or
     an earlier attempt may have (a takeover), the claim is kept: 503 with
     Retry-After until its lease ends, when the retry takes it over and
     calls the provider again with the same key.
  3. Record the charge (a transaction): idem_save_point(..., 'charged',
     {"charge_id": ...}, fence) with the claim's fence.
  4. Finish (a transaction): a heartbeat (idem_extend_lease) checks the
     fence and holds the record, then the payment row and the response
     (idem_commit, fenced) commit together.
If the process dies between phases, the claim's lease runs out and the
client's retry takes it over: idem_begin answers fresh with takeover true
and the last recovery point. After 'charged' the retry skips the provider
and uses the recorded charge id; before it, it calls the provider again
with the same key, which the provider answers with the charge it made.

Only the Python standard library and psycopg 3 (Debian: python3-psycopg).
Run it with a libpq connection string for a database where the extension
can be created:

    PAYMENTS_DSN="dbname=shop" python3 service.py --port 8080
    curl -i -X POST localhost:8080/payments -H 'Idempotency-Key: 7d1c-44a0' \
         -d '{"amount": 100, "currency": "EUR", "customer": "c-42"}'

PAYMENTS_PROVIDER_URL names a provider that answers POST /charges (with an
Idempotency-Key header) with {"charge_id": ...}, within
PAYMENTS_PROVIDER_TIMEOUT_S (default 10, well inside the lease); without it a simulated
provider runs in the process: PAYMENTS_PROVIDER_DELAY_MS makes it slow, and
the customer "c-flaky" times out once per key, to show the in-flight and
transient paths. PAYMENTS_LEASE is the claim's lease (default 30 seconds).
PAYMENTS_CRASH_AFTER=<step> kills the process (SIGKILL) when it reaches
that step, for the test that resumes after every phase
(test/e2e/recovery_e2e.py): claimed, called, recording, charged,
finishing, committed. A real service would use a connection pool."""
import argparse
import datetime
import hashlib
import http.server
import json
import math
import os
import signal
import threading
import time
import urllib.error
import urllib.request

import psycopg
import psycopg.errors
from psycopg.types.json import Jsonb

NAMESPACE = "payments"
DOCS = "https://example.com/docs/idempotency"
DSN = os.environ.get("PAYMENTS_DSN", "")
PROVIDER_DELAY = float(os.environ.get("PAYMENTS_PROVIDER_DELAY_MS", "0")) / 1000.0
PROVIDER_URL = os.environ.get("PAYMENTS_PROVIDER_URL")
PROVIDER_TIMEOUT = float(os.environ.get("PAYMENTS_PROVIDER_TIMEOUT_S", "10"))   # well inside the lease
LEASE = os.environ.get("PAYMENTS_LEASE", "30 seconds")
CRASH_AFTER = os.environ.get("PAYMENTS_CRASH_AFTER")

SCHEMA = """
CREATE EXTENSION IF NOT EXISTS idempotency;
CREATE TABLE IF NOT EXISTS payments (
    id              bigserial PRIMARY KEY,
    idempotency_key text NOT NULL UNIQUE,
    charge_id       text NOT NULL,
    amount          numeric NOT NULL,
    currency        text NOT NULL,
    customer        text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
"""

# Keys whose first provider call timed out (the "c-flaky" customer).
_timed_out = set()
_timed_out_lock = threading.Lock()


class ProviderUnavailable(Exception):
    """The provider did not answer. sent: the call may have reached it (a
    timeout, a 5xx), so a charge may have been made; False when it surely
    did not (the connection was refused)."""

    def __init__(self, sent):
        super().__init__("payment provider unavailable")
        self.sent = sent
        self.retry_after = 1   # seconds until the claim's lease ends, when it is kept


class ProviderDeclined(Exception):
    """The provider refused the payment for good (a 4xx answer)."""


def crash_point(step):
    """Dies here, as a crash would, when PAYMENTS_CRASH_AFTER names step."""
    if CRASH_AFTER == step:
        os.kill(os.getpid(), signal.SIGKILL)


def charge(key, request):
    """Charges the payment at the provider with key as the provider's
    idempotency key, so that calling again for one key charges once; returns
    the charge id. Raises ProviderDeclined, or ProviderUnavailable."""
    if PROVIDER_URL:
        call = urllib.request.Request(PROVIDER_URL + "/charges", data=json.dumps(request).encode(), method="POST",
                                      headers={"Content-Type": "application/json", "Idempotency-Key": key})
        try:
            with urllib.request.urlopen(call, timeout=PROVIDER_TIMEOUT) as r:
                return json.loads(r.read())["charge_id"]
        except urllib.error.HTTPError as e:
            if 400 <= e.code < 500:
                raise ProviderDeclined(e.read().decode(errors="replace")) from e
            raise ProviderUnavailable(sent=True) from e
        except urllib.error.URLError as e:
            raise ProviderUnavailable(sent=not isinstance(e.reason, ConnectionRefusedError)) from e
        except (TimeoutError, ConnectionError) as e:
            raise ProviderUnavailable(sent=True) from e
    time.sleep(PROVIDER_DELAY)          # the simulated provider
    if request.get("customer") == "c-flaky":
        with _timed_out_lock:
            if key not in _timed_out:
                _timed_out.add(key)
                raise ProviderUnavailable(sent=False)
    return "ch_" + hashlib.sha256(key.encode()).hexdigest()[:16]


def refusal(request):
    """Why the payment is refused for good (a permanent failure), or None."""
    amount = request.get("amount")
    if not isinstance(amount, (int, float)) or isinstance(amount, bool) or amount <= 0:
        return {"class_tag": "InvalidAmount", "message": "amount must be a positive number"}
    if not isinstance(request.get("currency"), str) or not isinstance(request.get("customer"), str):
        return {"class_tag": "InvalidPayment", "message": "currency and customer must be strings"}
    return None


def create_payment(conn, header, raw_body):
    """POST /payments in the recipe's phases; returns (status, headers, body)."""
    # 1. Claim: a transaction that commits the claim (or answers from the store).
    with conn.transaction():
        key, status, headers, body = conn.execute(
            "SELECT key, status, headers, body FROM idempotency.idem_http_key(%s, %s, %s)",
            (NAMESPACE, header, DOCS)).fetchone()
        if key is None:
            return status, headers, body                      # 400: missing or invalid key
        try:
            request = json.loads(raw_body or b"null")
        except ValueError:
            request = None
        if not isinstance(request, dict):
            problem = conn.execute("SELECT idempotency.idem_http_problem(400, 'INVALID_BODY', %s)",
                                   ("The body must be a JSON object.",)).fetchone()[0]
            return 400, {"Content-Type": "application/problem+json"}, problem
        fingerprinted = {"method": "POST", "target": "/payments", "body": request}
        kind, fence, takeover, point, state, lease_ends_at, status, headers, body = conn.execute(
            """SELECT o.kind::text, o.fence, o.takeover, o.recovery_point, o.recovery_state, o.lease_ends_at,
                      r.status, r.headers, r.body
               FROM idempotency.idem_begin(%s, %s, %s) o
               LEFT JOIN LATERAL idempotency.idem_http_response(CASE WHEN o.kind <> 'fresh' THEN o END, 1, %s) r
               ON true""",
            (NAMESPACE, key, Jsonb(fingerprinted), DOCS)).fetchone()
        if kind != "fresh":
            return status, headers, body                      # replay, 409 or 422
        error = refusal(request)
        if error:
            conn.execute("SELECT idempotency.idem_fail_permanent(%s, %s, %s, %s)",
                         (NAMESPACE, key, Jsonb(error), fence))
            body = conn.execute("SELECT idempotency.idem_http_problem(422, %s, %s)",
                                (error["class_tag"], error["message"])).fetchone()[0]
            return 422, {"Content-Type": "application/problem+json"}, body
    crash_point("claimed")
    # 2. Charge, unless an earlier attempt (taken over: this one's
    # recovery_point) recorded the charge already.
    if point == "charged":
        charge_id = state["charge_id"]
    else:
        try:
            charge_id = charge(key, request)
        except ProviderDeclined as e:
            error = {"class_tag": "PaymentDeclined", "message": "the payment provider declined the payment",
                     "cause": str(e)[:200]}
            with conn.transaction():                          # for good: the retry replays the 422
                conn.execute("SELECT idempotency.idem_fail_permanent(%s, %s, %s, %s)",
                             (NAMESPACE, key, Jsonb(error), fence))
            body = conn.execute("SELECT idempotency.idem_http_problem(422, %s, %s)",
                                (error["class_tag"], error["message"])).fetchone()[0]
            return 422, {"Content-Type": "application/problem+json"}, body
        except ProviderUnavailable as e:
            if not e.sent and not takeover:
                # Surely nothing charged, and no earlier attempt of the key
                # (a takeover's may have charged): forget the claim, so the
                # retry starts over at once.
                with conn.transaction():
                    conn.execute("SELECT idempotency.idem_fail_transient(%s, %s, %s)", (NAMESPACE, key, fence))
                raise
            # Perhaps charged: keep the claim. Once its lease ends the retry
            # takes it over and calls the provider again with the same key,
            # which answers with the charge it made; until then it is 409,
            # and another request with this key is 422.
            e.retry_after = max(1, math.ceil((lease_ends_at - datetime.datetime.now(datetime.timezone.utc))
                                             .total_seconds()))
            raise
        crash_point("called")
        # 3. Record the charge with the claim's fence.
        with conn.transaction():
            conn.execute("SELECT idempotency.idem_save_point(%s, %s, 'charged', %s, %s)",
                         (NAMESPACE, key, Jsonb({"charge_id": charge_id}), fence))
            crash_point("recording")
        crash_point("charged")
    # 4. Finish: the payment row and the recorded response commit together.
    # The heartbeat first checks the fence and locks the record: a retry
    # cannot take it over while this transaction runs, and an attempt
    # already taken over stops here (55000) before it writes anything.
    with conn.transaction():
        conn.execute("SELECT idempotency.idem_extend_lease(%s, %s, %s)", (NAMESPACE, key, fence))
        payment_id = conn.execute(
            """INSERT INTO payments (idempotency_key, charge_id, amount, currency, customer)
               VALUES (%s, %s, %s, %s, %s) RETURNING id""",
            (key, charge_id, request["amount"], request["currency"], request["customer"])).fetchone()[0]
        response = {"status": 201, "headers": {"Location": f"/payments/{payment_id}"},
                    "body": {"payment_id": payment_id, "charge_id": charge_id, "amount": request["amount"],
                             "currency": request["currency"], "status": "captured"}}
        conn.execute("SELECT idempotency.idem_commit(%s, %s, %s, %s)", (NAMESPACE, key, Jsonb(response), fence))
        crash_point("finishing")
    crash_point("committed")
    return 201, response["headers"], response["body"]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        if self.path != "/payments":
            return self.reply(404, {}, {"type": "about:blank", "title": "Not Found", "status": 404})
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            with psycopg.connect(DSN, autocommit=True) as conn:   # each phase its own transaction
                status, headers, body = create_payment(conn, self.headers.get("Idempotency-Key"), raw)
        except psycopg.errors.ObjectNotInPrerequisiteState:
            # Too slow: the lease ran out and a retry took the claim over
            # (this attempt's fence was refused, nothing of it committed).
            status, headers, body = 409, {"Content-Type": "application/problem+json", "Retry-After": "1"}, {
                "type": "about:blank", "title": "Conflict", "status": 409,
                "detail": "This attempt no longer holds the request (its lease ran out and a retry took it "
                          "over); retry with the same key."}
        except ProviderUnavailable as e:
            status, headers = 503, {"Content-Type": "application/problem+json",
                                    "Retry-After": str(e.retry_after)}
            body = {"type": "about:blank", "title": "Service Unavailable", "status": 503,
                    "detail": ("The payment provider did not answer; the payment may have been made. Retry "
                               "with the same key." if e.sent else
                               "The payment provider is unavailable; nothing was charged. Retry with the same key.")}
        self.reply(status, headers, body)

    def reply(self, status, headers, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        headers = dict(headers or {})
        headers.setdefault("Content-Type", "application/json")
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, fmt, *args):
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args()
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(SCHEMA)
        # A claim outlives its transaction for LEASE; then a retry takes it over.
        conn.execute("SELECT idempotency.idem_namespace_configure(%s, in_progress_lease => %s::interval)",
                     (NAMESPACE, LEASE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"payments service listening on 127.0.0.1:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
