"""The FastAPI and the Django app, each a real uvicorn process driven over
HTTP by httpx: what clients/README.md's middleware promises, end to end."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

import idempotency

from .servers import AppServer, Downstream

NAMESPACES = {"fastapi": "py-fastapi", "django": "py-django"}


@pytest.fixture(scope="module")
def downstream() -> Iterator[Downstream]:
    """The fake downstream service, for the module."""
    d = Downstream()
    yield d
    d.stop()


@pytest.fixture(scope="module", params=["fastapi", "django"])
def app(request: pytest.FixtureRequest, database: str, downstream: Downstream) -> Iterator[tuple[str, AppServer]]:
    """Each app under uvicorn, started once for the module."""
    server = AppServer(request.param, database, downstream.url)
    yield request.param, server
    server.stop()


def new_key() -> str:
    """A key no other test uses."""
    return f"http-{uuid.uuid4()}"


def rows(database: str, table: str, key: str) -> int:
    """How many committed business rows a key has."""
    with psycopg.connect(dbname=database, autocommit=True) as c:
        row = c.execute(f"SELECT count(*) FROM {table} WHERE key = %s", (key,)).fetchone()
        assert row is not None
        return int(row[0])


def key_state(database: str, namespace: str, key: str) -> str:
    """idem_key_state: absent, held, committed, ..."""
    with psycopg.connect(dbname=database, autocommit=True) as c:
        row = c.execute("SELECT state FROM idempotency.idem_key_state(%s, %s)", (namespace, key)).fetchone()
        assert row is not None
        return str(row[0])


def wait_held(database: str, namespace: str, key: str) -> None:
    """Waits until a handler holds the key (its transaction is open)."""
    deadline = time.monotonic() + 15
    while key_state(database, namespace, key) != "held":
        assert time.monotonic() < deadline, "the handler never claimed the key"
        time.sleep(0.05)


def post(url: str, key: str | None, body: Any, sleep: float = 0) -> httpx.Response:
    """POSTs JSON with the key; sleep is how long the handler sleeps (X-Sleep, not fingerprinted)."""
    headers = {} if key is None else {"Idempotency-Key": key}
    if sleep:
        headers["X-Sleep"] = str(sleep)
    return httpx.post(url, json=body, headers=headers, timeout=30)


def test_same_request_twice(app: tuple[str, AppServer], database: str) -> None:
    """One effect; the second answer is the first, marked as a replay."""
    _, server = app
    key = new_key()
    first = post(server.url + "/payments", key, {"amount": 10})
    assert first.status_code == 201, first.text
    assert "idempotency-replayed" not in first.headers
    again = post(server.url + "/payments", f'"{key}"', {"amount": 10})  # quoted, as the draft writes it
    assert again.status_code == 201 and again.headers["Idempotency-Replayed"] == "true"
    assert again.json() == first.json()
    assert again.headers["Location"] == first.headers["Location"] == f"/payments/{first.json()['payment_id']}"
    assert again.headers["Content-Type"] == first.headers["Content-Type"]
    assert rows(database, "payments", key) == 1


def test_two_at_once(app: tuple[str, AppServer], database: str) -> None:
    """While the first runs, the second gets 409 with Retry-After."""
    name, server = app
    key = new_key()
    answers: dict[str, httpx.Response] = {}
    slow = threading.Thread(target=lambda: answers.setdefault(
        "slow", post(server.url + "/payments", key, {"amount": 5}, sleep=1.5)))
    slow.start()
    wait_held(database, NAMESPACES[name], key)
    second = post(server.url + "/payments", key, {"amount": 5}, sleep=1.5)
    slow.join()
    assert answers["slow"].status_code == 201
    assert second.status_code == 409 and second.headers["Retry-After"] == "1"
    assert second.headers["Content-Type"] == "application/problem+json"
    assert second.json()["code"] == "IDEMPOTENCY_REQUEST_IN_PROGRESS"
    assert rows(database, "payments", key) == 1


def test_a_handler_that_raises_records_nothing(app: tuple[str, AppServer], database: str) -> None:
    """An exception: 500, nothing recorded or committed; the retry succeeds."""
    name, server = app
    key = new_key()
    failed = post(server.url + "/payments", key, {"amount": 7, "fail_once": True})
    assert failed.status_code == 500
    assert key_state(database, NAMESPACES[name], key) == "absent"
    assert rows(database, "payments", key) == 0  # the handler's insert rolled back with the claim
    retried = post(server.url + "/payments", key, {"amount": 7, "fail_once": True})
    assert retried.status_code == 201 and "idempotency-replayed" not in retried.headers
    assert rows(database, "payments", key) == 1


def test_a_5xx_answer_records_nothing(app: tuple[str, AppServer], database: str) -> None:
    """A 5xx answer rolls back; the retry succeeds and is replayed after."""
    _, server = app
    key = new_key()
    assert post(server.url + "/flaky", key, {}).status_code == 503
    assert rows(database, "payments", key) == 0
    assert post(server.url + "/flaky", key, {}).status_code == 201
    replay = post(server.url + "/flaky", key, {})
    assert replay.status_code == 201 and replay.headers["Idempotency-Replayed"] == "true"
    assert rows(database, "payments", key) == 1


def test_a_reused_key(app: tuple[str, AppServer], database: str) -> None:
    """The key with another body, or on another endpoint: 422, never a replay."""
    _, server = app
    key = new_key()
    assert post(server.url + "/payments", key, {"amount": 10}).status_code == 201
    reused = post(server.url + "/payments", key, {"amount": 11})
    assert reused.status_code == 422 and reused.headers["Content-Type"] == "application/problem+json"
    problem = reused.json()
    assert problem["code"] == "IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST" and problem["status"] == 422
    # The same body on another endpoint is another request, never this one's replay.
    assert post(server.url + "/flaky", key, {"amount": 10}).status_code == 422
    assert rows(database, "payments", key) == 1


# The problem idem_http_response builds for the refusal the apps record (rule 18).
REFUSED = {"type": "about:blank", "title": "Unprocessable Content", "status": 422, "code": "InvalidAmount",
           "detail": "amount must be positive"}
FINISHED = {"sqlstate": "55000", "message": "the idempotency attempt is already finished"}


def test_a_refusal_the_handler_records(app: tuple[str, AppServer], database: str) -> None:
    """Rule 18: after fail_permanent the first answer is the 422 every retry
    gets (not the handler's 400), committed with the handler's write."""
    name, server = app
    key = new_key()
    first = post(server.url + "/refusals", key, {"amount": -5})
    assert first.status_code == 422, first.text
    assert first.headers["Content-Type"] == "application/problem+json"
    assert "idempotency-replayed" not in first.headers
    assert first.json() == REFUSED
    assert key_state(database, NAMESPACES[name], key) == "failed"
    assert rows(database, "payments", key) == 1  # the handler's write committed with the refusal
    again = post(server.url + "/refusals", key, {"amount": -5})
    assert again.status_code == 422 and again.headers["Idempotency-Replayed"] == "true"
    assert again.content == first.content and again.headers["Content-Type"] == first.headers["Content-Type"]
    assert rows(database, "payments", key) == 1  # the handler did not run again


def test_a_refusal_then_a_5xx_records_nothing(app: tuple[str, AppServer], database: str) -> None:
    """Rule 18: a 5xx after fail_permanent rolls back, the refusal with it."""
    name, server = app
    key = new_key()
    first = post(server.url + "/refusals", key, {"amount": -5, "answer": 503})
    assert first.status_code == 503 and first.json() == {"refused": "by the handler"}
    assert key_state(database, NAMESPACES[name], key) == "absent"
    assert rows(database, "payments", key) == 0
    again = post(server.url + "/refusals", key, {"amount": -5, "answer": 503})
    assert again.status_code == 503 and "idempotency-replayed" not in again.headers  # ran again


def test_a_key_the_handler_releases(app: tuple[str, AppServer], database: str) -> None:
    """Rule 19: after fail_transient the handler's 409 is sent, nothing is
    recorded, its write is rolled back, and the retry runs it again."""
    name, server = app
    key = new_key()
    first = post(server.url + "/releases", key, {})
    assert first.status_code == 409 and first.json() == {"status": "busy"}
    assert "idempotency-replayed" not in first.headers
    assert key_state(database, NAMESPACES[name], key) == "absent"
    assert rows(database, "payments", key) == 0
    retried = post(server.url + "/releases", key, {})
    assert retried.status_code == 201 and "idempotency-replayed" not in retried.headers
    replay = post(server.url + "/releases", key, {})
    assert replay.status_code == 201 and replay.headers["Idempotency-Replayed"] == "true"
    assert rows(database, "payments", key) == 1


def test_an_attempt_ends_once(app: tuple[str, AppServer], database: str) -> None:
    """Rule 20: a second ending, and one after the answer was recorded, are refused with 55000."""
    name, server = app
    key = new_key()
    twice = post(server.url + "/twice", key, {})
    assert twice.status_code == 409 and twice.json() == FINISHED
    assert key_state(database, NAMESPACES[name], key) == "absent"
    key = new_key()
    assert post(server.url + "/stash", key, {}).status_code == 201
    late = httpx.get(server.url + "/late", params={"key": key}, timeout=30)
    assert late.status_code == 200 and late.json() == FINISHED
    assert key_state(database, NAMESPACES[name], key) == "committed"
    replay = post(server.url + "/stash", key, {})
    assert replay.status_code == 201 and replay.headers["Idempotency-Replayed"] == "true"


def test_the_route_template_is_fingerprinted(app: tuple[str, AppServer], database: str) -> None:
    """Another path of the same template is the same request."""
    _, server = app
    key = new_key()
    first = post(server.url + "/payments/1/refunds", key, {"reason": "late"})
    assert first.status_code == 201
    # Another id under the same template and key: the same request (a replay), not a mismatch.
    other = post(server.url + "/payments/2/refunds", key, {"reason": "late"})
    assert other.status_code == 201 and other.headers["Idempotency-Replayed"] == "true"
    assert other.json() == first.json()
    # Rule 6: FastAPI's /payments/{payment_id}/refunds and Django's
    # payments/<int:payment_id>/refunds are one template.
    with psycopg.connect(dbname=database, autocommit=True) as c:
        row = c.execute("SELECT request_payload->>'target' FROM idempotency.idempotency_record WHERE key_value = %s",
                        (key,)).fetchone()
    assert row == ("/payments/{payment_id}/refunds",)


def test_a_body_over_the_limit(app: tuple[str, AppServer], database: str) -> None:
    """Rule 4: Django's DATA_UPLOAD_MAX_MEMORY_SIZE (64 KiB here) is answered
    413 before anything is claimed; ASGI sets no limit of its own."""
    name, server = app
    key = new_key()
    answer = post(server.url + "/payments", key, {"amount": 1, "pad": "x" * 70000})
    if name == "fastapi":
        assert answer.status_code == 201
        return
    assert answer.status_code == 413 and answer.headers["Content-Type"] == "application/problem+json"
    assert answer.json() == {"type": "about:blank", "title": "Content Too Large", "status": 413,
                             "code": "REQUEST_BODY_TOO_LARGE",
                             "detail": "The request body is larger than 65536 bytes."}
    assert key_state(database, NAMESPACES[name], key) == "absent" and rows(database, "payments", key) == 0


def test_a_missing_or_malformed_key(app: tuple[str, AppServer], database: str) -> None:
    """400 from idem_http_key, and the handler does not run."""
    _, server = app
    missing = post(server.url + "/payments", None, {"amount": 1})
    assert missing.status_code == 400 and missing.json()["code"] == "MISSING_IDEMPOTENCY_KEY"
    key = new_key()
    malformed = post(server.url + "/payments", f'"{key}', {"amount": 1})
    assert malformed.status_code == 400 and malformed.json()["code"] == "INVALID_IDEMPOTENCY_KEY"
    assert "closing double quote" in malformed.json()["detail"]
    assert rows(database, "payments", key) == 0
    assert httpx.get(server.url + "/health").status_code == 200  # GET is not covered


def test_a_minted_key_goes_downstream(app: tuple[str, AppServer], database: str, downstream: Downstream) -> None:
    """Every retry sends the downstream the same minted key; a replay sends nothing."""
    _, server = app
    key = new_key()
    minted = idempotency.mint("py-downstream", [key])
    failed = post(server.url + "/shipments", key, {"fail_once": True})
    assert failed.status_code == 500
    assert downstream.calls[minted] == 1
    done = post(server.url + "/shipments", key, {"fail_once": True})
    assert done.status_code == 201 and done.json()["downstream_key"] == minted
    assert downstream.calls[minted] == 2  # the retry sent the same key: the downstream deduplicates
    replay = post(server.url + "/shipments", key, {"fail_once": True})
    assert replay.headers["Idempotency-Replayed"] == "true" and replay.json() == done.json()
    assert downstream.calls[minted] == 2  # a replay runs nothing
    assert rows(database, "shipments", key) == 1


def test_a_process_killed_mid_handler(app: tuple[str, AppServer], database: str) -> None:
    """SIGKILL while the handler sleeps with its insert done: the server rolls
    the dead session's transaction back, claim and row, and the retry succeeds."""
    name, survivor = app
    victim = AppServer(name, database)
    key = new_key()
    try:
        answers: list[object] = []

        def doomed_request() -> None:
            """The request the kill interrupts."""
            try:
                answers.append(post(victim.url + "/payments", key, {"amount": 3}, sleep=60))
            except httpx.TransportError as e:
                answers.append(e)

        doomed = threading.Thread(target=doomed_request)
        doomed.start()
        wait_held(database, NAMESPACES[name], key)
        victim.kill()
        doomed.join(10)
        assert len(answers) == 1 and isinstance(answers[0], httpx.TransportError)  # the client saw no answer
    finally:
        victim.stop()
    deadline = time.monotonic() + 20
    while True:
        retried = post(survivor.url + "/payments", key, {"amount": 3})
        if retried.status_code != 409 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert retried.status_code == 201 and "idempotency-replayed" not in retried.headers
    assert rows(database, "payments", key) == 1


def test_an_unreachable_database_is_503(app: tuple[str, AppServer], database: str) -> None:
    """Fail closed: no connection, no handler, a 503 problem."""
    name = app[0]
    with socket_closed_port() as port:
        server = AppServer(name, database, PGHOST="127.0.0.1", PGPORT=str(port), APP_POOL_TIMEOUT="1")
        try:
            answer = post(server.url + "/payments", new_key(), {"amount": 1})
        finally:
            server.stop()
    assert answer.status_code == 503, answer.text
    assert answer.headers["Content-Type"] == "application/problem+json"
    assert answer.headers["Retry-After"] == "1"
    assert answer.json()["code"] == "IDEMPOTENCY_STORE_UNAVAILABLE"


class socket_closed_port:
    """A port on 127.0.0.1 that refuses connections while the block runs."""

    def __enter__(self) -> int:
        """Binds the port without listening."""
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        port: int = self.socket.getsockname()[1]
        return port

    def __exit__(self, *exc: object) -> None:
        """Frees it."""
        self.socket.close()
