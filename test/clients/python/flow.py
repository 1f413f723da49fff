"""flow.py: docs/clients.md's psycopg 3 guide, run through psycopg with its
defaults (psycopg.connect() configured by the PG* environment variables, not
in autocommit mode) against the database test/clients/run prepared. The
regions between "snippet:" and "end snippet" are the guide's code
(test/clients/snippets.py checks that they are); the rest checks what the
guide promises, and what it warns about, and prints TAP."""
import sys
from datetime import timedelta
from decimal import Decimal

import psycopg
from psycopg.types.composite import CompositeInfo, register_composite
from psycopg.types.json import Json

# snippet: flow
from psycopg.types.json import Jsonb

NAMESPACE = "payments"


class ProviderUnavailable(Exception):
    pass


def create_payment(conn, header, request, charge):
    """POST /payments: header is the Idempotency-Key field (None when absent),
    request the parsed body, charge the payment provider's client. Returns
    (status, headers, body)."""
    # One transaction: committed when the block ends, rolled back (the claim
    # with the work, so that a retry starts fresh) when it raises.
    with conn.transaction():
        key, status, body = conn.execute(
            "SELECT key, status, body FROM idempotency.idem_http_key(%s, %s)",
            (NAMESPACE, header)).fetchone()
        if key is None:
            return status, {}, body                                      # 400
        return attempt(conn, key, request, charge)


def attempt(conn, key, request, charge):
    # Jsonb() sends jsonb: a bare dict cannot be adapted, and Json() is json.
    kind, result, error, fence = conn.execute(
        "SELECT kind, result, error, fence FROM idempotency.idem_begin(%s, %s, %s)",
        (NAMESPACE, key, Jsonb({"method": "POST", "target": "/payments", "body": request}))).fetchone()
    if kind == "prior_result":
        return result["status"], {"Idempotency-Replayed": "true"}, result["body"]
    if kind == "prior_error":
        return 422, {"Idempotency-Replayed": "true"}, {"code": error["class_tag"], "detail": error["message"]}
    if kind == "in_flight":
        return 409, {"Retry-After": "1"}, {"code": "IDEMPOTENCY_REQUEST_IN_PROGRESS"}
    if kind == "mismatch":
        return 422, {}, {"code": "IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST"}
    # fresh: this transaction holds the key and must finish it before COMMIT.
    if not request["amount"] > 0:
        refusal = {"class_tag": "InvalidAmount", "message": "amount must be positive"}
        conn.execute("SELECT idempotency.idem_fail_permanent(%s, %s, %s, %s)",
                     (NAMESPACE, key, Jsonb(refusal), fence))
        return 422, {}, {"code": refusal["class_tag"], "detail": refusal["message"]}
    try:
        charge(key, request)
    except ProviderUnavailable:
        # Keep the outage on record and release the key: the retry starts fresh.
        conn.execute("INSERT INTO provider_outages (idempotency_key) VALUES (%s)", (key,))
        conn.execute("SELECT idempotency.idem_fail_transient(%s, %s, %s)", (NAMESPACE, key, fence))
        return 503, {"Retry-After": "1"}, {"code": "PROVIDER_UNAVAILABLE"}
    (payment_id,) = conn.execute(
        "INSERT INTO payments (amount, currency) VALUES (%s, %s) RETURNING id",
        (request["amount"], request["currency"])).fetchone()
    body = {"payment_id": payment_id}
    conn.execute("SELECT idempotency.idem_commit(%s, %s, %s, %s)",
                 (NAMESPACE, key, Jsonb({"status": 201, "body": body}), fence))
    return 201, {}, body
# end snippet


# snippet: typed
def refund(conn, key, amount):
    """A refund recorded as the composite type refund_receipt; its request is
    the amount. A Decimal is sent as numeric, so idem_begin_typed's anyelement
    needs no cast (a str would: %s::numeric). Returns (refund_id, amount)."""
    with conn.transaction():
        kind, fence, refund_id, refunded = conn.execute(
            """SELECT o.kind, o.fence, r.refund_id, r.amount
                 FROM idempotency.idem_begin_typed('refunds', %s, %s) o,
                      idempotency.idem_result(o, NULL::refund_receipt) r""",
            (key, amount)).fetchone()
        if kind == "prior_result":
            return refund_id, refunded
        if kind != "fresh":
            raise RuntimeError(f"refund {key} is {kind}")
        refund_id, refunded = conn.execute(
            "INSERT INTO refunds (amount) VALUES (%s) RETURNING id, amount", (amount,)).fetchone()
        conn.execute("SELECT idempotency.idem_commit_typed(%s, %s, ROW(%s, %s)::refund_receipt, %s)",
                     ("refunds", key, refund_id, refunded, fence))
        return refund_id, refunded
# end snippet


# snippet: errors
def describe(err):
    """err.sqlstate is the SQLSTATE; err.diag has the detail and the hint
    (str(err) prints them too, after the message)."""
    return {"sqlstate": err.sqlstate, "message": err.diag.message_primary,
            "detail": err.diag.message_detail, "hint": err.diag.message_hint}
# end snippet


# snippet: recipes
def create_payment_in_sql(conn, header, request):
    """docs/usage.md's HTTP handler: one statement in one transaction."""
    with conn.transaction():
        return conn.execute("SELECT status, headers, body FROM create_payment(%s, %s)",
                            (header, Jsonb(request))).fetchone()


def transfer(key, from_id, to_id, amount):
    """docs/usage.md's stored procedure commits: CALL it outside any
    transaction, on a connection in autocommit mode."""
    with psycopg.connect(autocommit=True) as conn:
        conn.execute("CALL transfer(%s, %s, %s, %s)", (key, from_id, to_id, amount))
# end snippet


# ---- the checks ----
count = 0
failed = 0


def ok(cond, name, diag=None):
    global count, failed
    count += 1
    failed += 0 if cond else 1
    print(f"{'ok' if cond else 'not ok'} {count} - {name}")
    if not cond and diag is not None:
        print(f"# {diag!r}", file=sys.stderr)


def failure(fn, *args):
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 (the checks look at what was raised)
        return e
    return None


def main():
    conn = psycopg.connect()
    one = lambda sql, params=(): conn.execute(sql, params).fetchone()  # noqa: E731
    fail_next = []

    def charge(key, request):
        if fail_next:
            raise fail_next.pop()

    eur100 = {"amount": 100, "currency": "EUR"}
    (before,) = one("SELECT count(*) FROM payments")
    conn.commit()

    r = create_payment(conn, None, eur100, charge)
    ok(r[0] == 400 and r[2]["code"] == "MISSING_IDEMPOTENCY_KEY", "no header: 400 MISSING_IDEMPOTENCY_KEY", r)
    r = create_payment(conn, '"py-1', eur100, charge)
    ok(r[0] == 400 and r[2]["code"] == "INVALID_IDEMPOTENCY_KEY", "unterminated quoted header: 400 INVALID_IDEMPOTENCY_KEY", r)

    first = create_payment(conn, "py-1", eur100, charge)
    ok(first[0] == 201 and isinstance(first[2]["payment_id"], int), "fresh: 201 with the payment id", first)
    r = create_payment(conn, '"py-1"', {"currency": "EUR", "amount": 100}, charge)
    ok(r[0] == 201 and r[2] == first[2] and r[1].get("Idempotency-Replayed") == "true",
       "retry (quoted header, keys reordered): the same 201 and body, flagged as a replay", r)
    r = create_payment(conn, "py-1", {"amount": 999, "currency": "EUR"}, charge)
    ok(r[0] == 422 and r[2]["code"] == "IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST", "same key, other amount: 422 mismatch", r)

    with psycopg.connect() as holder:
        (held,) = holder.execute("SELECT kind FROM idempotency.idem_begin(%s, %s, %s)",
                                 (NAMESPACE, "py-2", Jsonb({"method": "POST", "target": "/payments", "body": eur100}))).fetchone()
        ok(held == "fresh", "another connection holds py-2 in an open transaction", held)
        r = create_payment(conn, "py-2", eur100, charge)
        ok(r[0] == 409 and r[1].get("Retry-After") == "1", "while it is held: 409 with Retry-After", r)
        holder.rollback()
    r = create_payment(conn, "py-2", eur100, charge)
    ok(r[0] == 201, "after the holder rolled back: fresh, 201", r)

    refused = {"amount": -5, "currency": "EUR"}
    r = create_payment(conn, "py-3", refused, charge)
    ok(r[0] == 422 and r[2]["code"] == "InvalidAmount", "a refused amount: 422 recorded with idem_fail_permanent", r)
    r = create_payment(conn, "py-3", refused, charge)
    ok(r[0] == 422 and r[2]["code"] == "InvalidAmount" and r[1].get("Idempotency-Replayed") == "true",
       "its retry: the same 422, replayed", r)

    fail_next.append(ProviderUnavailable())
    r = create_payment(conn, "py-4", eur100, charge)
    ok(r[0] == 503, "provider unavailable: 503 after idem_fail_transient", r)
    (outages,) = one("SELECT count(*) FROM provider_outages WHERE idempotency_key = %s", ("py-4",))
    conn.commit()
    ok(outages == 1, "the outage row committed with the released key", outages)
    r = create_payment(conn, "py-4", eur100, charge)
    ok(r[0] == 201, "its retry: fresh, 201", r)

    fail_next.append(ConnectionResetError("connection reset by the provider"))
    e = failure(create_payment, conn, "py-5", eur100, charge)
    ok(isinstance(e, ConnectionResetError), "an unexpected error propagates after the rollback", e)
    r = create_payment(conn, "py-5", eur100, charge)
    ok(r[0] == 201, "its retry: fresh, 201 (the claim was rolled back)", r)
    (after,) = one("SELECT count(*) FROM payments")
    conn.commit()
    ok(after - before == 4, "one payment per key that succeeded (py-1, -2, -4, -5)", after - before)

    # Typed results.
    receipt = refund(conn, "rf-py-1", Decimal("25"))
    ok(isinstance(receipt[0], int) and receipt[1] == Decimal("25"), "typed: fresh refund recorded as refund_receipt", receipt)
    again = refund(conn, "rf-py-1", Decimal("25"))
    ok(again == receipt, "typed: the retry decodes the same receipt with idem_result", again)
    ok(refund(conn, "rf-py-1", 25) == receipt, "typed: a Python int is the same request (smallint, to_jsonb 25)")
    (refunds,) = one("SELECT count(*) FROM refunds")
    conn.commit()
    ok(refunds == 1, "typed: one refund row", refunds)
    e = failure(conn.execute, "SELECT kind FROM idempotency.idem_begin_typed('refunds', %s, %s)", ("rf-py-2", "25"))
    conn.rollback()
    ok(isinstance(e, psycopg.Error) and e.sqlstate == "42804", "typed with a str and no cast: 42804", e)
    select_one_column = ("SELECT idempotency.idem_result(o, NULL::refund_receipt)"
                         " FROM idempotency.idem_begin_typed('refunds', 'rf-py-1', 25::numeric) o")
    (tuple_text,) = one(select_one_column)
    conn.commit()
    ok(tuple_text == f"({receipt[0]},25)", "a composite selected as one column arrives as a tuple string", tuple_text)
    register_composite(CompositeInfo.fetch(conn, "refund_receipt"), conn)
    (decoded,) = one(select_one_column)
    conn.commit()
    ok((decoded.refund_id, decoded.amount) == receipt, "register_composite decodes it into a named tuple", decoded)

    # Errors: detail and hint.
    conn.execute("ALTER TYPE refund_receipt ADD ATTRIBUTE note text")
    conn.commit()
    e = failure(refund, conn, "rf-py-1", Decimal("25"))
    d = describe(e) if isinstance(e, psycopg.Error) else None
    ok(d == {"sqlstate": "ID001",
             "message": "incompatible stored state: the stored result does not fit type public.refund_receipt",
             "detail": 'At $: field "note" of type public.refund_receipt is missing from the stored value.',
             "hint": "The type changed since the result was recorded. Decode it as jsonb, or use a new namespace for the new type."},
       "a changed type: ID001 with the detail and hint api.md shows", d)
    ok(isinstance(e, psycopg.Error) and 'DETAIL:  At $: field "note"' in str(e) and "HINT:  The type changed" in str(e),
       "str(err) includes the detail and the hint", str(e))
    conn.execute("ALTER TYPE refund_receipt DROP ATTRIBUTE note")
    conn.commit()

    # What the guide warns about, with the defaults.
    e = failure(conn.execute, "SELECT kind FROM idempotency.idem_begin(%s, %s, %s)", (NAMESPACE, "py-6", {"a": 1}))
    conn.rollback()
    ok(isinstance(e, psycopg.ProgrammingError) and "cannot adapt type 'dict'" in str(e), "a bare dict: cannot adapt", e)
    e = failure(conn.execute, "SELECT kind FROM idempotency.idem_begin(%s, %s, %s)", (NAMESPACE, "py-6", Json({"a": 1})))
    ok(isinstance(e, psycopg.errors.UndefinedFunction), "Json() (json, not jsonb): 42883", e)
    e = failure(conn.execute, "SELECT 1")
    ok(isinstance(e, psycopg.errors.InFailedSqlTransaction), "after a caught error, the next statement: 25P02", e)
    conn.rollback()
    ok(conn.execute("SELECT 1").fetchone() == (1,), "after rollback(): the connection works again")
    conn.rollback()
    conn.execute("SELECT 1")
    with conn.transaction():
        conn.execute("SELECT 1")
    ok(conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS,
       "conn.transaction() inside the transaction the first statement opened commits nothing")
    conn.rollback()
    e = failure(conn.execute, "CALL transfer(%s, %s, %s, %s)", ("tr-py-2", 1, 2, 1))
    conn.rollback()
    ok(isinstance(e, psycopg.errors.InvalidTransactionTermination), "CALL on the default connection (in a transaction): 2D000", e)
    e = failure(conn.execute, "BEGIN; SELECT * FROM create_payment(%s, %s); COMMIT;", ("py-7", Jsonb(eur100)))
    conn.rollback()
    ok(isinstance(e, psycopg.errors.SyntaxError), "several statements in one parameterized query: 42601", e)

    for window in ("1 hour", timedelta(hours=1)):
        (w,) = one("SELECT kind FROM idempotency.idem_begin(%s, %s, %s, %s)", (NAMESPACE, "py-1", Jsonb({}), window))
        conn.rollback()
        ok(w == "mismatch", f"a {type(window).__name__} for the interval parameter", w)
    (granted,) = one("SELECT idempotency.idem_grant(%s, %s)", ("py-grants", "postgres"))
    conn.commit()
    ok(granted is True, "a str for the regrole parameter", granted)

    # docs/usage.md's recipes.
    status, headers, body = create_payment_in_sql(conn, "py-sql-1", eur100)
    ok(status == 201 and isinstance(body["payment_id"], int), "usage.md's create_payment: 201", (status, body))
    replay = create_payment_in_sql(conn, "py-sql-1", eur100)
    ok(replay == (201, {"Idempotency-Replayed": "true", **headers}, body), "usage.md's create_payment: the retry replays", replay)
    transfer("tr-py", 1, 2, 30)
    transfer("tr-py", 1, 2, 30)
    balances = [b for (b,) in conn.execute("SELECT balance FROM accounts ORDER BY id")]
    conn.commit()
    ok(balances == [40, 60], "usage.md's transfer, called twice: moved once", balances)

    conn.close()
    print(f"1..{count}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
