#!/usr/bin/python3
"""service.py: an example payments service on the idempotency extension.

POST /payments with an Idempotency-Key header (quoted, as the IETF draft
specifies the field, or bare) and a JSON body {"amount": 100, "currency":
"EUR", "customer": "c-42"} creates one payment. The fingerprinted request is
the method, the target and the body, so a key reused on another endpoint is
a mismatch, never a replay of this one's result. Problems (400, 409, 422)
name the service's documentation as their type and in a Link header.
Each request runs in one database transaction: check the header
(idem_http_key), begin the key (idem_begin), and either answer what the
store already knows (idem_http_response: a replay with
Idempotency-Replayed: true, 409 while the first request is in flight, 422
for a key reused with another body), or do the work, write the payment row
and record the response (idem_commit) before committing. A refused payment
is recorded with idem_fail_permanent and replays as the same 422. A
transient failure (the provider timed out) rolls everything back and
answers 503, so the retry starts fresh.

Only the Python standard library and psycopg 3 (Debian: python3-psycopg).
Run it with a libpq connection string for a database where the extension
can be created:

    PAYMENTS_DSN="dbname=shop" python3 service.py --port 8080
    curl -i -X POST localhost:8080/payments -H 'Idempotency-Key: 7d1c-44a0' \
         -d '{"amount": 100, "currency": "EUR", "customer": "c-42"}'

PAYMENTS_PROVIDER_DELAY_MS makes the simulated payment provider slow, and
the customer "c-flaky" times out once per key, to show the in-flight and
transient paths. A real service would use a connection pool."""
import argparse
import http.server
import json
import os
import threading
import time

import psycopg
from psycopg.types.json import Jsonb

NAMESPACE = "payments"
DOCS = "https://example.com/docs/idempotency"
DSN = os.environ.get("PAYMENTS_DSN", "")
PROVIDER_DELAY = float(os.environ.get("PAYMENTS_PROVIDER_DELAY_MS", "0")) / 1000.0

SCHEMA = """
CREATE EXTENSION IF NOT EXISTS idempotency;
CREATE TABLE IF NOT EXISTS payments (
    id              bigserial PRIMARY KEY,
    idempotency_key text NOT NULL UNIQUE,
    amount          numeric NOT NULL,
    currency        text NOT NULL,
    customer        text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);
"""

# Keys whose first provider call timed out (the "c-flaky" customer).
_timed_out = set()
_timed_out_lock = threading.Lock()


class ProviderTimeout(Exception):
    """A transient failure: nothing was charged, the client may retry."""


def charge(key, request):
    """The simulated payment provider: slow if asked, and it times out once
    per key for the customer c-flaky."""
    time.sleep(PROVIDER_DELAY)
    if request.get("customer") == "c-flaky":
        with _timed_out_lock:
            if key not in _timed_out:
                _timed_out.add(key)
                raise ProviderTimeout()


def refusal(request):
    """Why the payment is refused for good (a permanent failure), or None."""
    amount = request.get("amount")
    if not isinstance(amount, (int, float)) or isinstance(amount, bool) or amount <= 0:
        return {"class_tag": "InvalidAmount", "message": "amount must be a positive number"}
    if not isinstance(request.get("currency"), str) or not isinstance(request.get("customer"), str):
        return {"class_tag": "InvalidPayment", "message": "currency and customer must be strings"}
    return None


def create_payment(conn, header, raw_body):
    """POST /payments in one transaction; returns (status, headers, body)."""
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
        kind, fence, status, headers, body = conn.execute(
            """SELECT o.kind::text, o.fence, r.status, r.headers, r.body
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
        charge(key, request)                                  # may raise ProviderTimeout: all rolled back
        payment_id = conn.execute(
            "INSERT INTO payments (idempotency_key, amount, currency, customer) VALUES (%s, %s, %s, %s) RETURNING id",
            (key, request["amount"], request["currency"], request["customer"])).fetchone()[0]
        response = {"status": 201, "headers": {"Location": f"/payments/{payment_id}"},
                    "body": {"payment_id": payment_id, "amount": request["amount"],
                             "currency": request["currency"], "status": "captured"}}
        conn.execute("SELECT idempotency.idem_commit(%s, %s, %s, %s)", (NAMESPACE, key, Jsonb(response), fence))
        return 201, response["headers"], response["body"]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        if self.path != "/payments":
            return self.reply(404, {}, {"type": "about:blank", "title": "Not Found", "status": 404})
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            with psycopg.connect(DSN) as conn:
                status, headers, body = create_payment(conn, self.headers.get("Idempotency-Key"), raw)
        except ProviderTimeout:
            status, headers, body = 503, {"Content-Type": "application/problem+json", "Retry-After": "1"}, {
                "type": "about:blank", "title": "Service Unavailable", "status": 503,
                "detail": "The payment provider timed out; nothing was charged. Retry with the same key."}
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
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"payments service listening on 127.0.0.1:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
