"""Store round trips on a real server: every outcome, the transitions, the
HTTP answers, the version check and the autocommit refusal."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

import psycopg
import pytest
from psycopg_pool import ConnectionPool

import idempotency.store as store_module
from idempotency import (
    Fresh,
    IncompatibleServer,
    InFlight,
    JsonText,
    Mismatch,
    PriorError,
    PriorResult,
    Store,
    StoredError,
    TransactionRequired,
    outcome_from_row,
)

from .conftest import EDITION

NS = "py-store"


def begin_fresh(store: Store, conn: psycopg.Connection, key: str, request: object) -> Fresh:
    """Begins a key that must be fresh."""
    outcome = store.begin(conn, NS, key, request)
    assert isinstance(outcome, Fresh), outcome
    return outcome


def test_fresh_then_prior_result(conn: psycopg.Connection, other: psycopg.Connection, key: str) -> None:
    """A committed result replays to another transaction."""
    store = Store()
    with conn.transaction():
        fresh = begin_fresh(store, conn, key, {"amount": 100})
        assert fresh.attempt == 1 and fresh.fence >= 2**32 and not fresh.takeover
        assert fresh.lease_ends_at is None and fresh.recovery_point is None
        assert len(fresh.submitted_hash) == 32
        store.commit(conn, NS, key, {"payment_id": 7, "amount": 1.5}, fresh.fence)
    with other.transaction():
        replay = store.begin(other, NS, key, {"amount": 100})
    assert replay == PriorResult(result={"payment_id": 7, "amount": 1.5}, submitted_hash=fresh.submitted_hash)
    assert replay.kind == "prior_result"


def test_in_flight_from_another_connection(conn: psycopg.Connection, other: psycopg.Connection, key: str) -> None:
    """A claim open in one transaction is in flight to another."""
    store = Store()
    with conn.transaction():
        fresh = begin_fresh(store, conn, key, {"n": 1})
        with other.transaction():
            held = store.begin(other, NS, key, {"n": 1})
            assert isinstance(held, InFlight) and held.kind == "in_flight"
            assert held.lease_ends_at is None
            # The answer the server builds for it: 409 with Retry-After.
            reply = store.http_response(other, held, retry_after=3)
            assert reply.status == 409 and reply.headers["Retry-After"] == "3"
            assert reply.body["code"] == "IDEMPOTENCY_REQUEST_IN_PROGRESS"
            # Committing a key this transaction does not hold: the server's error, as psycopg gives it.
            with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState) as e:
                store.commit(other, NS, key, {}, None)
            assert e.value.sqlstate == "55000" and "holds no claim" in (e.value.diag.message_primary or "")
            assert e.value.diag.message_detail
            raise psycopg.Rollback
        store.commit(conn, NS, key, {"ok": True}, fresh.fence)


def test_prior_error(conn: psycopg.Connection, other: psycopg.Connection, key: str) -> None:
    """A permanent failure replays as its error; a malformed one is the server's 22023."""
    store = Store()
    refusal = StoredError("InvalidAmount", "amount must be positive", cause="amount was -5")
    with conn.transaction():
        fresh = begin_fresh(store, conn, key, {"amount": -5})
        store.fail_permanent(conn, NS, key, refusal, fresh.fence)
    with other.transaction():
        replay = store.begin(other, NS, key, {"amount": -5})
        assert isinstance(replay, PriorError) and replay.error == refusal
        reply = store.http_response(other, replay)
    assert reply.status == 422 and reply.headers["Idempotency-Replayed"] == "true"
    assert (reply.body["code"], reply.body["detail"]) == ("InvalidAmount", "amount must be positive")
    # An error of the wrong shape is the server's 22023, detail preserved.
    with conn.transaction():
        other_key = key + "-bad"
        fresh = begin_fresh(store, conn, other_key, {})
        with pytest.raises(psycopg.errors.InvalidParameterValue) as e:
            store.fail_permanent(conn, NS, other_key, {"message": "no class tag"}, fresh.fence)
        assert e.value.diag.message_primary == "invalid idempotency error payload"
        assert '"class_tag" is missing.' in (e.value.diag.message_detail or "")
        raise psycopg.Rollback


def test_mismatch(conn: psycopg.Connection, key: str) -> None:
    """The key with another request is a mismatch, answered 422 without the recorded request."""
    store = Store()
    with conn.transaction():
        fresh = begin_fresh(store, conn, key, {"amount": 100})
        store.commit(conn, NS, key, {"ok": 1}, fresh.fence)
    with conn.transaction():
        reused = store.begin(conn, NS, key, {"amount": 999})
        assert isinstance(reused, Mismatch)
        assert reused.recorded_request == {"amount": 100}
        assert reused.recorded_hash == fresh.submitted_hash and reused.submitted_hash != fresh.submitted_hash
        reply = store.http_response(conn, reused, docs_uri="https://example.com/idempotency")
    assert reply.status == 422 and reply.body["code"] == "IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST"
    assert reply.body["type"] == "https://example.com/idempotency"
    assert reply.headers["Link"] == '<https://example.com/idempotency>; rel="describedby"'
    assert "100" not in reply.body_text  # never the recorded request


def test_fail_transient_then_fresh(conn: psycopg.Connection, other: psycopg.Connection, key: str) -> None:
    """A transient failure forgets the claim: the next begin is fresh."""
    store = Store()
    with conn.transaction():
        fresh = begin_fresh(store, conn, key, {"n": 2})
        store.fail_transient(conn, NS, key, fresh.fence)
    with other.transaction():
        again = begin_fresh(store, other, key, {"n": 2})
        assert again.attempt == 1 and again.fence != fresh.fence
        store.commit(other, NS, key, "done", again.fence)
    with conn.transaction():
        assert store.begin(conn, NS, key, {"n": 2}) == PriorResult("done", again.submitted_hash)


def test_rollback_takes_the_claim(conn: psycopg.Connection, key: str) -> None:
    """A rolled-back claim leaves nothing."""
    store = Store()
    with conn.transaction():
        begin_fresh(store, conn, key, {})
        raise psycopg.Rollback
    with conn.transaction():
        begin_fresh(store, conn, key, {})
        raise psycopg.Rollback


def test_autocommit_is_refused(database: str, key: str) -> None:
    """Autocommit without a transaction block is refused before any round trip."""
    store = Store()
    with psycopg.connect(dbname=database, autocommit=True) as auto:
        with pytest.raises(TransactionRequired) as e:
            store.begin(auto, NS, key, {})
        assert e.value.sqlstate == "25P01" and "autocommit" in e.value.message
        assert auto.execute("SELECT state FROM idempotency.idem_key_state(%s, %s)", (NS, key)).fetchone() == (
            "absent",)
        # Inside a transaction block the same connection may begin.
        with auto.transaction():
            fresh = begin_fresh(store, auto, key, {})
            store.commit(auto, NS, key, {"ok": True}, fresh.fence)
        with auto.transaction():
            assert isinstance(store.begin(auto, NS, key, {}), PriorResult)


def test_json_text_keeps_numbers_exact(conn: psycopg.Connection, key: str) -> None:
    """JsonText goes as it is: 1.50 stays 1.50 in the fingerprint."""
    store = Store()
    with conn.transaction():
        fresh = begin_fresh(store, conn, key, JsonText('{"amount": 1.50}'))
        store.commit(conn, NS, key, JsonText('{"amount": 1.50}'), fresh.fence)
    with conn.transaction():
        assert isinstance(store.begin(conn, NS, key, JsonText('{"amount":1.50}')), PriorResult)
        assert isinstance(store.begin(conn, NS, key, {"amount": 1.5}), Mismatch)  # 1.5 is not 1.50
        row = conn.execute("SELECT encode(idempotency.idem_request_hash('{\"amount\": 1.50}'), 'hex')").fetchone()
        assert row is not None and fresh.submitted_hash.hex() == row[0]


def test_http_key(conn: psycopg.Connection) -> None:
    """The header, bare or quoted, or the 400."""
    store = Store()
    with conn.transaction():
        assert store.http_key(conn, NS, '"7d1c-44a0"').key == "7d1c-44a0"
        assert store.http_key(conn, NS, "  7d1c-44a0 ").key == "7d1c-44a0"
        missing = store.http_key(conn, NS, None, "https://example.com/docs")
        assert missing.key is None and missing.response is not None
        assert missing.response.status == 400 and missing.response.body["code"] == "MISSING_IDEMPOTENCY_KEY"
        assert missing.response.headers["Content-Type"] == "application/problem+json"
        bad = store.http_key(conn, NS, '"7d1c-44a0')
        assert bad.response is not None and bad.response.body["code"] == "INVALID_IDEMPOTENCY_KEY"
        assert "closing double quote is missing" in bad.response.body["detail"]
        assert bad.response.content() == bad.response.body_text.encode()  # type: ignore[union-attr]


def test_recorded_response_replays(conn: psycopg.Connection, key: str) -> None:
    """A recorded {status, headers, body} replays as itself, marked."""
    store = Store()
    with conn.transaction():
        fresh = begin_fresh(store, conn, key, {})
        store.commit(conn, NS, key, {"status": 201, "headers": {"Location": "/p/1"}, "body": {"id": 1}}, fresh.fence)
    with conn.transaction():
        replay = store.begin(conn, NS, key, {})
        reply = store.http_response(conn, replay)
    assert (reply.status, reply.headers) == (201, {"Location": "/p/1", "Idempotency-Replayed": "true"})
    assert reply.body == {"id": 1}


def test_begin_http_answers_in_one_statement(conn: psycopg.Connection, key: str) -> None:
    """begin_http: the outcome and the server's answer, numbers as recorded."""
    store = Store()
    with conn.transaction():
        fresh, none = store.begin_http(conn, NS, key, {"a": 1})
        assert isinstance(fresh, Fresh) and none is None
        store.commit(conn, NS, key, JsonText('{"status": 200, "headers": {"Content-Type": "application/json"},'
                                             ' "body": {"n": 1.50}}'), fresh.fence)
    with conn.transaction():
        replay, answer = store.begin_http(conn, NS, key, {"a": 1})
        assert isinstance(replay, PriorResult) and replay.result["body"] == {"n": 1.5}
        assert answer is not None and answer.status == 200 and answer.headers["Idempotency-Replayed"] == "true"
        assert answer.content() == b'{"n": 1.50}'  # as recorded, not as Python reads it
        mismatch, answer = store.begin_http(conn, NS, key, {"a": 2}, docs_uri="https://example.com/d")
        assert isinstance(mismatch, Mismatch) and answer is not None and answer.status == 422
        assert answer.body["type"] == "https://example.com/d"


def test_fresh_has_no_http_response(conn: psycopg.Connection, key: str) -> None:
    """The server refuses an HTTP answer for a fresh outcome."""
    store = Store()
    with conn.transaction():
        fresh = begin_fresh(store, conn, key, {})
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="a fresh outcome has no HTTP response"):
            store.http_response(conn, fresh)
        raise psycopg.Rollback


def test_lease_heartbeat_save_point_and_takeover(conn: psycopg.Connection, other: psycopg.Connection,
                                                  key: str) -> None:
    """A leased claim: heartbeat, save point, in flight, then a takeover that resumes."""
    store = Store()
    ns = "py-leased"
    conn.execute("SELECT idempotency.idem_namespace_configure(%s, in_progress_lease => '1 second')", (ns,))
    conn.commit()
    with conn.transaction():
        first = store.begin(conn, ns, key, {"job": 1})
        assert isinstance(first, Fresh) and isinstance(first.lease_ends_at, datetime)
    with conn.transaction():
        ends = store.extend_lease(conn, ns, key, first.fence)
        assert ends >= first.lease_ends_at
        assert store.save_point(conn, ns, key, "charged", {"charge_id": "ch_1"}, first.fence) >= ends
    with other.transaction():
        waiting = store.begin(other, ns, key, {"job": 1})
        assert isinstance(waiting, InFlight) and waiting.lease_ends_at is not None
        assert isinstance(waiting.age, timedelta)
        assert store.http_response(other, waiting).status == 409
    time.sleep(1.2)
    with other.transaction():
        taken = store.begin(other, ns, key, {"job": 1})
        assert isinstance(taken, Fresh) and taken.takeover and taken.attempt == 2
        assert (taken.recovery_point, taken.recovery_state) == ("charged", {"charge_id": "ch_1"})
        store.commit(other, ns, key, {"charge_id": "ch_1"}, taken.fence)
    with conn.transaction():
        # The old holder's fence no longer finishes anything: the server's 55000.
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
            store.extend_lease(conn, ns, key, first.fence)


def test_added_columns_are_ignored() -> None:
    """Columns the package does not know are ignored."""
    row = {"kind": "prior_result", "result": {"a": 1}, "submitted_hash": b"\x01" * 32, "a_column_of_1_1": 42}
    assert outcome_from_row(row) == PriorResult({"a": 1}, b"\x01" * 32)
    fresh = outcome_from_row({"kind": "fresh", "fence": 2**32, "attempt": 1, "takeover": False,
                              "submitted_hash": memoryview(b"\x02" * 32), "later": "x"})
    assert isinstance(fresh, Fresh) and fresh.submitted_hash == b"\x02" * 32


def test_one_store_for_a_pool_of_threads(database: str, key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Store shared by the threads of a ConnectionPool asks idem_version() once."""
    checks: list[object] = []
    check = store_module._server_version
    monkeypatch.setattr(store_module, "_server_version", lambda *a: checks.append(a) or check(*a))
    store = Store()

    def one(i: int) -> bool:
        """One request's transaction on a pooled connection."""
        with pool.connection() as c, c.transaction():
            fresh = begin_fresh(store, c, f"{key}-{i}", {"i": i})
            store.commit(c, NS, f"{key}-{i}", i, fresh.fence)
        with pool.connection() as c, c.transaction():
            return store.begin(c, NS, f"{key}-{i}", {"i": i}) == PriorResult(i, fresh.submitted_hash)

    with ConnectionPool(f"dbname={database}", min_size=4, max_size=4) as pool, ThreadPoolExecutor(4) as threads:
        assert all(threads.map(one, range(12)))
    assert len(checks) == 1


def test_version(conn: psycopg.Connection) -> None:
    """The server answers API 1, and the edition the tests run against."""
    version = Store().server_version(conn)
    assert version.api.startswith("1.") and version.edition == EDITION
    assert version.version.split(".")[0] == "1"


def test_no_extension_is_refused(scratch: str) -> None:
    """A database without the extension is refused, with the advice to create it."""
    with psycopg.connect(dbname=scratch) as c, pytest.raises(IncompatibleServer) as e:
        Store().begin(c, NS, "k", {})
    assert "not installed" in e.value.message
    assert e.value.hint == ("Run CREATE EXTENSION idempotency, or, on a managed PostgreSQL that cannot load it, "
                            "the portable edition's script (docs/managed.md).")


def test_a_09_server_is_refused(scratch: str) -> None:
    """0.9.2, without idem_version(), is refused with the advice to update."""
    with psycopg.connect(dbname=scratch) as c:
        c.execute("CREATE EXTENSION idempotency VERSION '0.9.2'")
        c.commit()
        with pytest.raises(IncompatibleServer) as e:
            Store().begin(c, NS, "k", {})
        assert "0.9.2" in e.value.message and e.value.hint == "Run ALTER EXTENSION idempotency UPDATE."
        # Refused before anything was sent that could break the caller's transaction.
        assert c.execute("SELECT 1").fetchone() == (1,)


def test_another_api_major_is_refused(scratch: str) -> None:
    """API 2.0 is refused, naming both versions."""
    with psycopg.connect(dbname=scratch) as c:
        c.execute("CREATE EXTENSION idempotency")
        c.execute("ALTER EXTENSION idempotency DROP FUNCTION idempotency.idem_version()")
        c.execute("DROP FUNCTION idempotency.idem_version()")
        c.execute("""CREATE FUNCTION idempotency.idem_version(OUT edition text, OUT version text, OUT api text)
                     LANGUAGE sql AS $$ SELECT 'native', '2.0.0', '2.0' $$""")
        c.commit()
        with pytest.raises(IncompatibleServer) as e:
            Store().http_key(c, NS, "k")
    assert "2.0.0" in e.value.message and "API 2.0" in e.value.message and "API 1" in e.value.message
