"""ASGI middleware (FastAPI, Starlette): two lines make a service's POST and
PATCH handlers idempotent.

    app.add_middleware(IdempotencyMiddleware, namespace="payments", pool=pool)

and a handler writes through the claim's connection, in the claim's transaction:

    async def create(conn: AsyncConnection = Depends(idempotency.asgi.connection)): ...

A handler may end the attempt itself through claim(request):
fail_permanent(error) makes this answer, and every retry's, the 422 of
that refusal; fail_transient() sends the handler's answer after a rollback.

The behaviour is clients/README.md's: the header checked by idem_http_key
(400), the request fingerprinted by idem_begin as method, route template and
body, every answer that needs no work built by idem_http_response (a replay
marked Idempotency-Replayed, 409 with Retry-After, 422), the handler run in
the transaction that holds the claim, its 2xx and 4xx answers recorded and
committed before they are sent, a 5xx or an exception rolled back, a 503
when the database cannot be reached and a 500 for any other error of the
store."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, MutableMapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Protocol

import psycopg
from starlette.requests import Request
from starlette.routing import Host, Match, Mount

from .http import (
    DEFAULT_METHODS,
    DEFAULT_REPLAY_HEADERS,
    Claim,
    HttpResponse,
    Settings,
    failure,
    first_answer,
    header,
    record_2xx_4xx,
    recorded_response,
    request_fingerprint,
    template,
)
from .outcomes import Fresh, StoredError
from .store import AsyncStore

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger("idempotency")

__all__ = ["AsyncClaim", "AsyncConnectionSource", "IdempotencyMiddleware", "claim", "connection", "route_template"]


class AsyncConnectionSource(Protocol):
    """Where the middleware takes a connection for each request: a psycopg_pool
    AsyncConnectionPool, or anything with the same connection() method."""

    def connection(self) -> AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]:
        """A connection for one request, given back when the block ends."""
        ...


@dataclass(frozen=True, slots=True)
class AsyncClaim(Claim[psycopg.AsyncConnection[Any]]):
    """The claim an ASGI handler gets: a Claim whose handler may end the
    attempt itself, once (clients/README.md, rules 17 to 20)."""

    store: AsyncStore = field(kw_only=True, repr=False, compare=False)

    async def fail_permanent(self, error: StoredError | Mapping[str, str]) -> None:
        """Refuses the request for good (idem_fail_permanent with the claim's
        fence): the middleware then commits and answers, whatever the handler
        answers below 500, the 422 problem every retry gets."""
        self._start("permanent", error)
        try:
            await self.store.fail_permanent(self.connection, self.namespace, self.key, error, self.fence)
        except BaseException:
            self._undo()
            raise

    async def fail_transient(self) -> None:
        """Releases the key (idem_fail_transient with the claim's fence): the
        handler's answer is sent after a rollback, nothing is recorded, and a
        retry runs the handler again."""
        self._start("transient")
        try:
            await self.store.fail_transient(self.connection, self.namespace, self.key, self.fence)
        except BaseException:
            self._undo()
            raise


def claim(request: Request) -> AsyncClaim:
    """The running handler's claim (a FastAPI dependency, or a call in a
    Starlette endpoint); LookupError when the middleware made none (a method
    it does not cover, or an optional key left out)."""
    found = getattr(request.state, "idempotency", None)
    if not isinstance(found, AsyncClaim):
        raise LookupError("this request has no idempotency claim: IdempotencyMiddleware did not claim its key")
    return found


def connection(request: Request) -> psycopg.AsyncConnection[Any]:
    """The connection whose transaction holds the claim, for the handler's own
    writes (never commit or roll it back: the middleware does)."""
    return claim(request).connection


def _routed(route: Any, scope: Scope, prefix: str) -> str | None:
    """The template of a route that matched: its path, a mount's prefix with
    its inner route's, or (FastAPI's include_router) the route FastAPI chose."""
    if isinstance(route, (Mount, Host)):
        prefix = prefix + route.path if isinstance(route, Mount) else prefix
        inner = _match_routes(route.routes, scope, prefix)
        return inner if inner is not None else (prefix + "/{path}" if isinstance(route, Mount) else None)
    choose = getattr(route, "_match", None)
    if callable(choose) and hasattr(route, "original_router"):
        _, _, chosen, context = choose(_copy(scope))
        if chosen is not None and hasattr(chosen, "original_router"):
            return _routed(chosen, scope, prefix)
        path = getattr(context, "path_format", None) or getattr(chosen, "path", None)
        return prefix + path if isinstance(path, str) else None
    path = getattr(route, "path", None)
    return prefix + path if isinstance(path, str) else None


def _copy(scope: Scope) -> dict[str, Any]:
    """A copy of the scope that route matching may write to (FastAPI keeps
    notes in scope["fastapi"])."""
    copied = dict(scope)
    if isinstance(copied.get("fastapi"), dict):
        copied["fastapi"] = dict(copied["fastapi"])
    return copied


def _match_routes(routes: Collection[Any], scope: Scope, prefix: str) -> str | None:
    """The template of the route the router would choose: the first full
    match, else the first partial one (a 405), as Starlette's Router does."""
    partial: tuple[Any, dict[str, Any]] | None = None
    for route in routes:
        try:
            match, child = route.matches(_copy(scope))
        except Exception:
            continue
        if match is Match.FULL:
            return _routed(route, {**scope, **child}, prefix)
        if match is Match.PARTIAL and partial is None:
            partial = (route, child)
    if partial is not None:
        return _routed(partial[0], {**scope, **partial[1]}, prefix)
    return None


def route_template(scope: Scope) -> str:
    """The route template the framework will match for this request
    (/payments/{id}; Starlette's {id:int} is {id}), found with the app's own
    routes before it runs; the path when no template matches or the app has
    no Starlette router."""
    router = getattr(scope.get("app"), "router", None)
    routes = getattr(router, "routes", None)
    if routes is not None:
        try:
            found = _match_routes(routes, scope, "")
        except Exception:
            log.debug("idempotency: no route template for %s", scope.get("path"), exc_info=True)
            found = None
        if found is not None:
            return template(found)
    path: str = scope.get("path", "")
    return path


def _header(scope: Scope, name: bytes) -> str | None:
    """A request header's value (repeated fields joined with ", ", as a proxy would), or None."""
    values = [v.decode("latin-1") for k, v in scope.get("headers", []) if k.lower() == name]
    return ", ".join(values) if values else None


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None when the client went away first."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replayed_receive(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the handler the body read already, then the client's own messages."""
    sent = False

    async def replay() -> Message:
        """The buffered body first, then the client's messages."""
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _send_reply(send: Send, reply: HttpResponse) -> None:
    """Sends an answer the server built (or the 503)."""
    content = reply.content()
    headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in reply.headers.items()]
    if header(reply.headers, "Content-Length") is None:
        headers.append((b"content-length", str(len(content)).encode("ascii")))
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": content, "more_body": False})


class _Capture:
    """Holds the handler's response until the claim's transaction has committed."""

    def __init__(self) -> None:
        """Nothing captured yet."""
        self.start: Message | None = None
        self.chunks: list[bytes] = []
        self.after: list[Message] = []

    async def send(self, message: Message) -> None:
        """The handler's send: kept, not sent."""
        if message["type"] == "http.response.start":
            self.start = message
        elif message["type"] == "http.response.body":
            self.chunks.append(message.get("body", b""))
        else:
            self.after.append(message)

    @property
    def status(self) -> int | None:
        """The handler's status, or None if it sent no response."""
        return int(self.start["status"]) if self.start is not None else None

    def headers(self) -> list[tuple[str, str]]:
        """The handler's headers, as text."""
        assert self.start is not None
        return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in self.start.get("headers", [])]

    async def forward(self, send: Send) -> None:
        """Sends the held response."""
        assert self.start is not None
        await send(self.start)
        await send({"type": "http.response.body", "body": b"".join(self.chunks), "more_body": False})
        for message in self.after:
            await send(message)


async def _rollback(conn: psycopg.AsyncConnection[Any]) -> None:
    """Rolls the request's transaction back; a broken connection is left to the pool."""
    try:
        await conn.rollback()
    except Exception:
        log.debug("idempotency: rollback failed", exc_info=True)


class IdempotencyMiddleware:
    """Claims each covered request's Idempotency-Key in a transaction of its
    own and runs the handler in it (see the module's documentation)."""

    def __init__(self, app: ASGIApp, *, namespace: str, pool: AsyncConnectionSource, docs_uri: str | None = None,
                 retry_after: int = 1, methods: Collection[str] = DEFAULT_METHODS,
                 record: Callable[[int], bool] = record_2xx_4xx,
                 replay_headers: Collection[str] = DEFAULT_REPLAY_HEADERS, optional: Collection[str] = (),
                 store: AsyncStore | None = None) -> None:
        """app: the ASGI app; pool: where connections come from; the rest as idempotency.Settings."""
        self.app = app
        self.pool = pool
        self.settings = Settings(namespace=namespace, docs_uri=docs_uri, retry_after=retry_after, methods=methods,
                                 record=record, replay_headers=replay_headers, optional=frozenset(optional))
        self.store = store or AsyncStore()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """One request: covered ones go through the store, the others straight to the app."""
        if scope["type"] != "http" or not self.settings.covers(scope["method"]):
            await self.app(scope, receive, send)
            return
        raw_key = _header(scope, b"idempotency-key")
        target = route_template(scope)
        if raw_key is None and self.settings.is_optional(target):
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        if body is None:
            return
        async with AsyncExitStack() as stack:
            await self._claimed(stack, scope, receive, send, raw_key, target, body)

    async def _claimed(self, stack: AsyncExitStack, scope: Scope, receive: Receive, send: Send,
                       raw_key: str | None, target: str, body: bytes) -> None:
        """Claims the key and runs the handler, or answers for the store."""
        conn: psycopg.AsyncConnection[Any] | None = None
        try:
            conn = await stack.enter_async_context(self.pool.connection())
            claimed = await self._claim(conn, scope["method"], raw_key, target, _header(scope, b"content-type"),
                                        body)
        except Exception as e:
            claimed = failure(self.settings, e)
            log.error("idempotency: the store failed before the handler ran; answering %d: %s",
                      claimed.status, e, exc_info=e)
        if isinstance(claimed, HttpResponse):
            if conn is not None:
                await _rollback(conn)
            await _send_reply(send, claimed)
            return
        await self._run(scope, receive, send, claimed, body)

    async def _claim(self, conn: psycopg.AsyncConnection[Any], method: str, raw_key: str | None, target: str,
                     content_type: str | None, body: bytes) -> AsyncClaim | HttpResponse:
        """Opens the transaction, checks the header and begins the key: the
        claim, or the answer the server built (400, a replay, 409, 422)."""
        s = self.settings
        await self.store.server_version(conn)
        if conn.autocommit:
            await conn.execute("BEGIN")
        checked = await self.store.http_key(conn, s.namespace, raw_key, s.docs_uri)
        if checked.key is None:
            assert checked.response is not None
            return checked.response
        outcome, answer = await self.store.begin_http(conn, s.namespace, checked.key,
                                                      request_fingerprint(method, target, content_type, body),
                                                      retry_after=s.retry_after, docs_uri=s.docs_uri)
        if isinstance(outcome, Fresh):
            return AsyncClaim(conn, s.namespace, checked.key, outcome, store=self.store)
        assert answer is not None
        return answer

    async def _run(self, scope: Scope, receive: Receive, send: Send, held: AsyncClaim, body: bytes) -> None:
        """Runs the handler in the claim's transaction; records and commits a
        recorded status before sending it (or the 422 of a refusal the
        handler recorded), rolls back anything else."""
        s = self.settings
        conn = held.connection
        inner = dict(scope)
        inner["state"] = {**scope.get("state", {}), "idempotency": held}
        extensions = dict(scope.get("extensions") or {})
        extensions.pop("http.response.pathsend", None)   # the body must pass through the capture
        extensions.pop("http.response.zerocopysend", None)
        inner["extensions"] = extensions
        capture = _Capture()
        try:
            await self.app(inner, _replayed_receive(body, receive), capture.send)
        except BaseException:
            await _rollback(conn)
            raise
        finally:
            ending = held._close()
        status = capture.status
        if status is None:
            await _rollback(conn)
            return
        if ending == "transient" or status >= 500 or (ending == "open" and not s.record(status)):
            await _rollback(conn)
            await capture.forward(send)
            return
        refusal: HttpResponse | None = None
        try:
            if ending == "permanent":
                refusal = first_answer(await self.store.http_response(conn, held._refusal(), s.retry_after,
                                                                      s.docs_uri))
            else:
                result = recorded_response(status, capture.headers(), b"".join(capture.chunks), s.replay_headers)
                await self.store.commit(conn, s.namespace, held.key, result, held.fence)
            await conn.commit()
        except Exception as e:
            answer = failure(s, e)
            log.error("idempotency: the response was not recorded; answering %d: %s", answer.status, e, exc_info=e)
            await _rollback(conn)
            await _send_reply(send, answer)
            return
        if refusal is not None:
            await _send_reply(send, refusal)
        else:
            await capture.forward(send)
