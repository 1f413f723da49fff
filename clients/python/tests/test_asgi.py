"""The ASGI middleware on a plain Starlette app, through Starlette's
TestClient: the adapter's details (route templates, bodies that are not
JSON, optional keys, what is recorded, fail closed)."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

from idempotency.asgi import IdempotencyMiddleware, claim, connection, route_template

NS = "py-starlette"


async def note(request: Request) -> Response:
    """Writes the raw body as a note in the claim's transaction; answers text."""
    body = await request.body()
    cur = await connection(request).execute(
        "INSERT INTO payments (key, amount, app) VALUES (%s, %s, 'starlette') RETURNING id",
        (claim(request).key, len(body)))
    row = await cur.fetchone()
    return PlainTextResponse(f"note {row[0] if row else 0}\n\xe9", status_code=201, headers={"X-Not-Kept": "1"})


async def item(request: Request) -> Response:
    """A mounted route with a parameter."""
    text = f'{{"item": {request.path_params["item_id"]}, "n": 1.50}}'
    return Response(text, status_code=201, media_type="application/json")


async def missing(request: Request) -> Response:
    """Writes, then answers 404: recorded by default, rolled back when the service records only 2xx."""
    await connection(request).execute("INSERT INTO payments (key, amount, app) VALUES (%s, 0, 'starlette')",
                                      (claim(request).key,))
    return JSONResponse({"error": "no such thing"}, status_code=404)


async def boom(request: Request) -> Response:
    """Writes, then raises."""
    await connection(request).execute("INSERT INTO payments (key, amount, app) VALUES (%s, 0, 'starlette')",
                                      (claim(request).key,))
    raise RuntimeError("boom")


async def empty(request: Request) -> Response:
    """Writes, then answers 201 with no body under a JSON Content-Type."""
    await connection(request).execute("INSERT INTO payments (key, amount, app) VALUES (%s, 0, 'starlette')",
                                      (claim(request).key,))
    return Response(b"", status_code=201, media_type="application/json")


async def json_null(request: Request) -> Response:
    """Answers the JSON null, as a FastAPI handler that returns None does."""
    return JSONResponse(None, status_code=201)


async def bad_json(request: Request) -> Response:
    """Writes, then answers a JSON Content-Type over a body that is not JSON."""
    await connection(request).execute("INSERT INTO payments (key, amount, app) VALUES (%s, 0, 'starlette')",
                                      (claim(request).key,))
    return Response(b"{not json", status_code=201, media_type="application/json")


async def conflict(request: Request) -> Response:
    """Writes what breaks a deferred unique constraint: the COMMIT fails with 23505."""
    await connection(request).execute("INSERT INTO payments (key, amount, app) VALUES (%s, 0, 'starlette')",
                                      (claim(request).key,))
    await connection(request).execute("INSERT INTO uniques VALUES ('twice'), ('twice')")
    return JSONResponse({"ok": True}, status_code=201)


async def serialization(request: Request) -> Response:
    """Writes what a deferred trigger refuses with 40001 at COMMIT."""
    await connection(request).execute("INSERT INTO serialization_failures VALUES ('x')")
    return JSONResponse({"ok": True}, status_code=201)


async def maybe(request: Request) -> Response:
    """An optional-key route: with a key it runs under the store, without one it runs alone."""
    try:
        return JSONResponse({"key": claim(request).key})
    except LookupError:
        return JSONResponse({"key": None})


refusals_seen: list[str | None] = []


async def refused_badly(request: Request) -> Response:
    """Records a refusal the server refuses (no message), then tries to
    release the key: the attempt stayed open (rule 17), so the server
    answers that call too, in the broken transaction."""
    held = claim(request)
    for end in (lambda: held.fail_permanent({"class_tag": "NoMessage"}), held.fail_transient):
        try:
            await end()
        except psycopg.Error as e:
            refusals_seen.append(e.sqlstate)
    return JSONResponse({"refused": True}, status_code=400)


def make_app(database: str, **options: Any) -> Starlette:
    """A Starlette app with the middleware, its pool opened by its lifespan."""
    pool = AsyncConnectionPool(f"dbname={database}", open=False, min_size=1, max_size=4,
                               kwargs=options.pop("connect_kwargs", {}))
    source = options.pop("source", pool)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        """Opens the pool for the app's life."""
        async with pool:
            yield

    app = Starlette(routes=[
        Route("/notes", note, methods=["POST"]),
        Route("/missing", missing, methods=["POST"]),
        Route("/boom", boom, methods=["POST"]),
        Route("/maybe", maybe, methods=["POST", "GET"]),
        Route("/empty", empty, methods=["POST"]),
        Route("/null", json_null, methods=["POST"]),
        Route("/bad-json", bad_json, methods=["POST"]),
        Route("/conflict", conflict, methods=["POST"]),
        Route("/serialization", serialization, methods=["POST"]),
        Route("/refused-badly", refused_badly, methods=["POST"]),
        Mount("/api", routes=[Route("/items/{item_id:int}", item, methods=["POST"])]),
    ], lifespan=lifespan)
    app.add_middleware(IdempotencyMiddleware, namespace=NS, pool=source, **options)
    return app


@pytest.fixture
def client(database: str) -> Iterator[TestClient]:
    """A TestClient of the app, /maybe with an optional key."""
    with TestClient(make_app(database, optional=["/maybe"]), raise_server_exceptions=False) as c:
        yield c


def new_key() -> str:
    """A key no other test uses."""
    return f"asgi-{uuid.uuid4()}"


def count(database: str, key: str) -> int:
    """How many committed payments a key has."""
    with psycopg.connect(dbname=database, autocommit=True) as c:
        row = c.execute("SELECT count(*) FROM payments WHERE key = %s", (key,)).fetchone()
        return int(row[0]) if row else -1


def test_a_body_that_is_not_json(client: TestClient, database: str) -> None:
    """Raw bytes in and out: fingerprinted by their SHA-256, replayed byte for byte."""
    key = new_key()
    first = client.post("/notes", content=b"\x00\xffraw bytes", headers={"Idempotency-Key": key})
    assert first.status_code == 201 and first.content.endswith("\n\xe9".encode())
    again = client.post("/notes", content=b"\x00\xffraw bytes", headers={"Idempotency-Key": key})
    assert again.status_code == 201 and again.headers["Idempotency-Replayed"] == "true"
    assert again.content == first.content  # recorded as base64, replayed byte for byte
    assert again.headers["Content-Type"] == first.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert "x-not-kept" in first.headers and "x-not-kept" not in again.headers
    other = client.post("/notes", content=b"\x00\xffother bytes", headers={"Idempotency-Key": key})
    assert other.status_code == 422  # the sha256 of other bytes
    assert count(database, key) == 1


def test_an_empty_body_and_a_json_body_differ(client: TestClient) -> None:
    """No body is null, as the JSON body null is; {} is another request."""
    key = new_key()
    json_type = {"Idempotency-Key": key, "Content-Type": "application/json"}
    assert client.post("/notes", headers={"Idempotency-Key": key}).status_code == 201
    assert client.post("/notes", content=b"null", headers=json_type).status_code == 201  # null both
    assert client.post("/notes", content=b"{}", headers=json_type).status_code == 422


def recorded_body(database: str, key: str) -> Any:
    """The body of the request the server fingerprinted for a key, as recorded."""
    with psycopg.connect(dbname=database, autocommit=True) as c:
        row = c.execute("SELECT request_payload->'body' FROM idempotency.idempotency_record WHERE key_value = %s",
                        (key,)).fetchone()
        assert row is not None
        return row[0]


def test_a_body_is_json_only_under_a_json_content_type(client: TestClient, database: str) -> None:
    """Rule 7: JSON text sent as text/plain is bytes (its SHA-256); under application/json it is JSON."""
    key = new_key()
    plain = {"Idempotency-Key": key, "Content-Type": "text/plain"}
    assert client.post("/notes", content=b'{"a": 1}', headers=plain).status_code == 201
    assert recorded_body(database, key) == {"sha256": hashlib.sha256(b'{"a": 1}').hexdigest()}
    assert client.post("/notes", content=b'{ "a":1 }', headers=plain).status_code == 422  # other bytes
    key = new_key()
    declared = {"Idempotency-Key": key, "Content-Type": "application/merge-patch+json"}
    assert client.post("/notes", content=b'{"a": 1}', headers=declared).status_code == 201
    assert recorded_body(database, key) == {"a": 1}
    again = client.post("/notes", content=b'{ "a":1 }', headers=declared)  # the same JSON
    assert again.status_code == 201 and again.headers["Idempotency-Replayed"] == "true"


def test_no_body_and_a_json_null_replay_as_sent(client: TestClient, database: str) -> None:
    """Rules 11 and 12: no body is recorded as "" and replayed as none, even
    under a JSON Content-Type; the JSON null replays as null."""
    for path, content in (("/empty", b""), ("/null", b"null")):
        key = new_key()
        first = client.post(path, headers={"Idempotency-Key": key})
        assert first.status_code == 201 and first.content == content
        again = client.post(path, headers={"Idempotency-Key": key})
        assert again.status_code == 201 and again.headers["Idempotency-Replayed"] == "true"
        assert again.content == content, path
        assert again.headers["Content-Type"] == first.headers["Content-Type"] == "application/json"


STORE_ERROR = {"type": "about:blank", "title": "Internal Server Error", "status": 500,
               "code": "IDEMPOTENCY_STORE_ERROR",
               "detail": "The idempotency store refused the request; nothing was recorded."}


def test_a_json_content_type_over_a_body_that_is_not_json(client: TestClient, database: str) -> None:
    """Rule 11: it could not be replayed as sent, so it is not recorded: 500, the work rolled back."""
    key = new_key()
    answer = client.post("/bad-json", headers={"Idempotency-Key": key})
    assert answer.status_code == 500 and answer.headers["Content-Type"] == "application/problem+json"
    assert answer.json() == STORE_ERROR
    assert count(database, key) == 0
    assert client.post("/bad-json", headers={"Idempotency-Key": key}).status_code == 500  # nothing was recorded


def test_a_commit_that_fails(client: TestClient, database: str) -> None:
    """Rules 13 to 15: a deferred constraint at COMMIT is a store error (500);
    a serialization failure there is the store unreachable for now (503)."""
    key = new_key()
    answer = client.post("/conflict", headers={"Idempotency-Key": key})
    assert answer.status_code == 500 and answer.json() == STORE_ERROR
    assert count(database, key) == 0
    answer = client.post("/serialization", headers={"Idempotency-Key": new_key()})
    assert answer.status_code == 503 and answer.headers["Retry-After"] == "1"
    assert answer.json()["code"] == "IDEMPOTENCY_STORE_UNAVAILABLE"


def test_which_errors_are_unreachable() -> None:
    """Rule 13: no SQLSTATE, or classes 08, 53, 57P, 40 and 25006; not other SQLSTATEs nor the package's refusals."""
    from idempotency import IncompatibleServer
    from idempotency.http import unreachable

    for e in (psycopg.OperationalError("connection refused"), psycopg.errors.AdminShutdown(),
              psycopg.errors.SerializationFailure(), psycopg.errors.DeadlockDetected(),
              psycopg.errors.TooManyConnections(), psycopg.errors.ReadOnlySqlTransaction(),
              psycopg.errors.ConnectionFailure(), OSError("reset"), TimeoutError()):
        assert unreachable(e), e
    for e in (psycopg.errors.UniqueViolation(), psycopg.errors.InvalidParameterValue(),
              psycopg.errors.QueryCanceled(), IncompatibleServer("too old"), ValueError("a bug")):
        assert not unreachable(e), e


def test_json_numbers_are_replayed_as_recorded(client: TestClient) -> None:
    """A replay sends the recorded JSON, 1.50 as 1.50."""
    key = new_key()
    first = client.post("/api/items/1", json={"a": 1}, headers={"Idempotency-Key": key})
    assert first.status_code == 201 and first.json() == {"item": 1, "n": 1.5}
    replay = client.post("/api/items/2", content=b'{ "a" : 1 }',
                         headers={"Idempotency-Key": key, "Content-Type": "application/json"})
    assert replay.headers["Idempotency-Replayed"] == "true"  # /api/items/{item_id:int}: the same template
    assert b"1.50" in replay.content and replay.json() == first.json()


def test_route_templates(database: str) -> None:
    """Templates of Starlette routes and mounts, and of FastAPI's included routers."""
    from fastapi import APIRouter, FastAPI

    app = make_app(database)
    scope: dict[str, Any] = {"type": "http", "method": "POST", "path": "/api/items/7", "root_path": "", "app": app}
    assert route_template(scope) == "/api/items/{item_id}"  # rule 6: Starlette's {item_id:int} is {item_id}
    assert route_template({**scope, "path": "/nowhere/7"}) == "/nowhere/7"
    assert route_template({**scope, "method": "PUT", "path": "/notes"}) == "/notes"  # a 405 is routed there too

    api = FastAPI()
    inner = APIRouter(prefix="/orders")
    inner.add_api_route("/{order_id}/lines/{line}", lambda order_id, line: None, methods=["POST"])
    outer = APIRouter()
    outer.include_router(inner, prefix="/v2")
    api.include_router(outer)
    api.add_api_route("/top/{x}", lambda x: None, methods=["POST"])
    fast = {"type": "http", "method": "POST", "path": "/v2/orders/9/lines/3", "root_path": "", "app": api}
    assert route_template(fast) == "/v2/orders/{order_id}/lines/{line}"
    assert route_template({**fast, "path": "/top/1"}) == "/top/{x}"
    assert "fastapi" not in fast  # matching wrote nothing into the request's scope


def test_a_route_with_an_optional_key(client: TestClient) -> None:
    """An optional route runs without the store when the key is left out."""
    assert client.post("/maybe").json() == {"key": None}  # no key: run without the store
    key = new_key()
    assert client.post("/maybe", headers={"Idempotency-Key": key}).json() == {"key": key}
    replay = client.post("/maybe", headers={"Idempotency-Key": key})
    assert replay.headers["Idempotency-Replayed"] == "true"
    assert client.post("/notes").status_code == 400  # elsewhere the key is required
    assert client.get("/maybe").json() == {"key": None}  # GET is not covered


def test_4xx_is_recorded_unless_configured(database: str, client: TestClient) -> None:
    """4xx is recorded by default; a service that records only 2xx rolls it back."""
    key = new_key()
    assert client.post("/missing", headers={"Idempotency-Key": key}).status_code == 404
    replay = client.post("/missing", headers={"Idempotency-Key": key})
    assert replay.status_code == 404 and replay.headers["Idempotency-Replayed"] == "true"
    assert count(database, key) == 1
    app = make_app(database, record=lambda status: 200 <= status < 300)
    with TestClient(app) as only_2xx:
        key = new_key()
        for _ in range(2):
            answer = only_2xx.post("/missing", headers={"Idempotency-Key": key})
            assert answer.status_code == 404 and "idempotency-replayed" not in answer.headers
        assert count(database, key) == 0  # not recorded: rolled back, the handler's write with it


def test_an_exception_records_nothing(client: TestClient, database: str) -> None:
    """An exception rolls back the claim and the handler's write."""
    key = new_key()
    for _ in range(2):
        assert client.post("/boom", headers={"Idempotency-Key": key}).status_code == 500
    assert count(database, key) == 0


def test_a_pool_in_autocommit_mode(database: str) -> None:
    """The middleware opens its transaction on an autocommit pool too."""
    with TestClient(make_app(database, connect_kwargs={"autocommit": True}), raise_server_exceptions=False) as c:
        key = new_key()
        assert c.post("/notes", content=b"x", headers={"Idempotency-Key": key}).status_code == 201
        assert c.post("/notes", content=b"x", headers={"Idempotency-Key": key}).headers["Idempotency-Replayed"]
        assert c.post("/boom", headers={"Idempotency-Key": key + "b"}).status_code == 500
    assert count(database, key) == 1 and count(database, key + "b") == 0


class Unreachable:
    """A connection source whose database cannot be reached."""

    def connection(self) -> AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]:
        """A connection that cannot be had."""

        @asynccontextmanager
        async def refuse() -> AsyncIterator[psycopg.AsyncConnection[Any]]:
            """Fails as a refused connection does."""
            raise psycopg.OperationalError("connection refused")
            yield  # type: ignore[unreachable]

        return refuse()


def test_fail_closed(database: str) -> None:
    """No database: 503 with the service's docs, and the handler never runs."""
    ran: list[str] = []
    app = make_app(database, source=Unreachable(), docs_uri="https://example.com/idem", retry_after=5)
    app.router.routes.append(Route("/spy", lambda r: ran.append("x") or Response(), methods=["POST"]))
    with TestClient(app) as c:
        answer = c.post("/spy", headers={"Idempotency-Key": new_key()})
    assert answer.status_code == 503 and ran == []
    assert answer.headers["Retry-After"] == "5"
    assert answer.headers["Link"] == '<https://example.com/idem>; rel="describedby"'
    assert answer.json() == {
        "type": "https://example.com/idem", "title": "Service Unavailable", "status": 503,
        "code": "IDEMPOTENCY_STORE_UNAVAILABLE",
        "detail": "The idempotency store cannot be reached. Retry the request with the same Idempotency-Key."}


def test_optional_routes_as_the_framework_writes_them() -> None:
    """An optional route may be named as Django or Starlette writes it, or as rule 6 does."""
    from idempotency import Settings

    s = Settings(namespace="payments", optional=["payments/<int:pk>", "/items/{id:int}", "/plain"])
    assert s.is_optional("/payments/{pk}") and s.is_optional("/items/{id}") and s.is_optional("/plain")
    assert not s.is_optional("/payments")


def test_settings_are_checked_at_start_up() -> None:
    """A bad namespace fails when the app is built, not per request."""
    from idempotency import InvalidArgument

    async def nothing(scope: Any, receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        """An ASGI app that does nothing."""
        pass

    with pytest.raises(InvalidArgument, match="invalid idempotency namespace"):
        IdempotencyMiddleware(nothing, namespace="Payments", pool=Unreachable())


def test_repeated_key_fields_are_refused(client: TestClient) -> None:
    """Two Idempotency-Key fields are joined as a proxy joins them ("a, a"): a 400, never a new key."""
    answer = client.post("/notes", headers=[("Idempotency-Key", "a"), ("Idempotency-Key", "a")])
    assert answer.status_code == 400 and answer.json()["code"] == "INVALID_IDEMPOTENCY_KEY"


def test_an_incompatible_server_is_refused(scratch: str, caplog: pytest.LogCaptureFixture) -> None:
    """A 0.9 extension: 500 (rule 15: a retry cannot help), and the log says why and what to run."""
    with psycopg.connect(dbname=scratch, autocommit=True) as c:
        c.execute("CREATE EXTENSION idempotency VERSION '0.9.2'")
    with TestClient(make_app(scratch)) as client:
        answer = client.post("/notes", headers={"Idempotency-Key": new_key()})
    assert answer.status_code == 500 and answer.json() == STORE_ERROR
    assert "the idempotency extension 0.9.2 is too old" in caplog.text
    assert "ALTER EXTENSION idempotency UPDATE" in caplog.text


def test_a_refusal_the_server_refuses(client: TestClient, database: str) -> None:
    """Rule 17: the server's error reaches the handler, the attempt stays
    open, and the answer cannot be recorded in the broken transaction: 500."""
    key = new_key()
    refusals_seen.clear()
    answer = client.post("/refused-badly", headers={"Idempotency-Key": key})
    assert refusals_seen == ["22023", "25P02"]  # not AttemptFinished: the first call did not end the attempt
    assert answer.status_code == 500 and answer.json()["code"] == "IDEMPOTENCY_STORE_ERROR"
    again = client.post("/refused-badly", headers={"Idempotency-Key": key})
    assert again.status_code == 500 and "idempotency-replayed" not in again.headers  # nothing was recorded
