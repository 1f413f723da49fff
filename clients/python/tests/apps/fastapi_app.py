"""A FastAPI service made idempotent by the middleware and one namespace.

Run by the HTTP tests under uvicorn: APP_DATABASE names the database,
DOWNSTREAM_URL the fake downstream service; the PG* variables the server."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from decimal import Decimal
from typing import Annotated, Any

import httpx
import psycopg
from fastapi import Depends, FastAPI, Request, Response
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

import idempotency
from idempotency import IdempotencyError, StoredError
from idempotency.asgi import AsyncClaim, IdempotencyMiddleware, claim, connection

pool = AsyncConnectionPool(f"dbname={os.environ.get('APP_DATABASE', 'postgres')}", open=False, min_size=1,
                           max_size=8, timeout=float(os.environ.get("APP_POOL_TIMEOUT", "10")))


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Opens the pool for the app's life."""
    await pool.open(wait=False)
    yield
    await pool.close()


app = FastAPI(lifespan=lifespan)
app.add_middleware(IdempotencyMiddleware, namespace="py-fastapi", pool=pool)   # the one line

Conn = Annotated[psycopg.AsyncConnection[Any], Depends(connection)]
_failed: set[str] = set()


class Payment(BaseModel):
    """The request body of POST /payments."""
    amount: Decimal
    fail_once: bool = False


@app.get("/health")
async def health() -> dict[str, bool]:
    """Readiness, for the tests (a GET: not covered)."""
    return {"ok": True}


@app.post("/payments", status_code=201)
async def create_payment(payment: Payment, conn: Conn, request: Request, response: Response) -> dict[str, Any]:
    """Inserts a payment in the claim's transaction; sleeps as long as the
    X-Sleep header says (headers are not fingerprinted), or fails once per key."""
    key = claim(request).key
    cur = await conn.execute("INSERT INTO payments (key, amount, app) VALUES (%s, %s, 'fastapi') RETURNING id",
                             (key, payment.amount))
    (payment_id,) = await cur.fetchone() or (None,)
    await asyncio.sleep(float(request.headers.get("X-Sleep", "0")))
    if payment.fail_once and key not in _failed:
        _failed.add(key)
        raise RuntimeError("the handler failed after its insert")
    response.headers["Location"] = f"/payments/{payment_id}"
    return {"payment_id": payment_id, "amount": str(payment.amount)}


@app.post("/payments/{payment_id}/refunds", status_code=201)
async def refund(payment_id: int, conn: Conn, request: Request) -> dict[str, Any]:
    """A route with a parameter: its template, not its path, is fingerprinted."""
    cur = await conn.execute("INSERT INTO payments (key, amount, app) VALUES (%s, -1, 'fastapi') RETURNING id",
                             (claim(request).key,))
    row = await cur.fetchone()
    return {"refund_id": row[0] if row else None, "payment_id": payment_id}


@app.post("/flaky")
async def flaky(conn: Conn, request: Request, response: Response) -> dict[str, str]:
    """Writes, then answers 503 the first time per key: a 5xx records nothing and commits nothing."""
    key = claim(request).key
    await conn.execute("INSERT INTO payments (key, amount, app) VALUES (%s, 0, 'fastapi')", (key,))
    if key not in _failed:
        _failed.add(key)
        response.status_code = 503
        return {"status": "try again"}
    response.status_code = 201
    return {"status": "done"}


@app.post("/shipments", status_code=201)
async def ship(conn: Conn, request: Request) -> dict[str, Any]:
    """Calls the downstream service with a key minted from the inbound one, so
    every retry of this request sends the downstream the same key."""
    held = claim(request)
    body = await request.json()
    downstream_key = idempotency.mint("py-downstream", [held.key])
    async with httpx.AsyncClient() as client:
        answer = await client.post(os.environ["DOWNSTREAM_URL"] + "/ship", json=body,
                                   headers={"Idempotency-Key": downstream_key})
        answer.raise_for_status()
    if body.get("fail_once") and held.key not in _failed:
        _failed.add(held.key)
        raise RuntimeError("the handler failed after the downstream call")
    await conn.execute("INSERT INTO shipments (key, downstream_key, app) VALUES (%s, %s, 'fastapi')",
                       (held.key, downstream_key))
    return {"downstream_key": downstream_key, "tracking": answer.json()["tracking"]}


class Refusal(BaseModel):
    """The request body of POST /refusals: the status the handler answers after its refusal."""
    amount: Decimal
    answer: int = 400


@app.post("/refusals")
async def refuse(refusal: Refusal, conn: Conn, request: Request, response: Response) -> dict[str, Any]:
    """Writes, then refuses the request for good (rule 18): below 500 the
    middleware answers the 422 every retry gets instead of this answer."""
    held = claim(request)
    await conn.execute("INSERT INTO payments (key, amount, app) VALUES (%s, %s, 'fastapi')",
                       (held.key, refusal.amount))
    await held.fail_permanent(StoredError(class_tag="InvalidAmount", message="amount must be positive"))
    response.status_code = refusal.answer
    return {"refused": "by the handler"}


@app.post("/releases", status_code=201)
async def release(conn: Conn, request: Request, response: Response) -> dict[str, str]:
    """Writes, then releases the key the first time per key (rule 19): its
    409 is sent, its write rolled back, and the retry runs it again."""
    held = claim(request)
    await conn.execute("INSERT INTO payments (key, amount, app) VALUES (%s, 0, 'fastapi')", (held.key,))
    if held.key not in _failed:
        _failed.add(held.key)
        await held.fail_transient()
        response.status_code = 409
        return {"status": "busy"}
    return {"status": "done"}


def _refused(e: IdempotencyError) -> dict[str, str | None]:
    """An error of the package as the tests read it."""
    return {"sqlstate": e.sqlstate, "message": e.message}


@app.post("/twice")
async def twice(request: Request, response: Response) -> dict[str, str | None]:
    """Releases the key, then tries to refuse it too (rule 20): the second call is refused."""
    held = claim(request)
    await held.fail_transient()
    try:
        await held.fail_permanent({"class_tag": "Twice", "message": "never recorded"})
    except IdempotencyError as e:
        response.status_code = 409
        return _refused(e)
    return {"sqlstate": None}


_stash: dict[str, AsyncClaim] = {}


@app.post("/stash", status_code=201)
async def stash(request: Request) -> dict[str, str]:
    """Keeps its claim past the request, for GET /late."""
    held = claim(request)
    _stash[held.key] = held
    return {"stashed": held.key}


@app.get("/late")
async def late(key: str) -> dict[str, str | None]:
    """Ends a claim whose answer was recorded already (rule 20): refused."""
    held = _stash.pop(key)
    try:
        await held.fail_transient()
    except IdempotencyError as e:
        return _refused(e)
    return {"sqlstate": None}
