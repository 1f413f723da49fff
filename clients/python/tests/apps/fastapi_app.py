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
from idempotency.asgi import IdempotencyMiddleware, claim, connection

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
