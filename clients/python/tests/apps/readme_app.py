import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Response
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from idempotency.asgi import IdempotencyMiddleware, connection

pool = AsyncConnectionPool(os.environ["DATABASE_URL"], open=False)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with pool:
        yield


app = FastAPI(lifespan=lifespan)
app.add_middleware(IdempotencyMiddleware, namespace="payments", pool=pool)


@app.post("/payments", status_code=201)
async def create_payment(payment: dict[str, Any], response: Response,
                         conn: Annotated[AsyncConnection[Any], Depends(connection)]) -> dict[str, Any]:
    cur = await conn.execute("INSERT INTO payments (amount) VALUES (%s) RETURNING id", (payment["amount"],))
    (payment_id,) = await cur.fetchone() or (None,)
    response.headers["Location"] = f"/payments/{payment_id}"
    return {"payment_id": payment_id}
