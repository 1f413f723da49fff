"""AsyncStore on AsyncConnection and a psycopg_pool pool: the same round trips."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

import idempotency.store as store_module
from idempotency import AsyncStore, Fresh, InFlight, Mismatch, PriorError, PriorResult, StoredError, TransactionRequired

NS = "py-async"


def test_every_outcome_async(database: str, key: str) -> None:
    """The outcomes through AsyncStore."""
    async def main() -> None:
        """The test, on an event loop."""
        store = AsyncStore()
        async with await psycopg.AsyncConnection.connect(dbname=database) as a, \
                await psycopg.AsyncConnection.connect(dbname=database) as b:
            async with a.transaction():
                fresh = await store.begin(a, NS, key, {"n": 1})
                assert isinstance(fresh, Fresh)
                async with b.transaction():
                    assert isinstance(await store.begin(b, NS, key, {"n": 1}), InFlight)
                await store.commit(a, NS, key, {"done": True}, fresh.fence)
            async with b.transaction():
                assert await store.begin(b, NS, key, {"n": 1}) == PriorResult({"done": True}, fresh.submitted_hash)
                mismatch = await store.begin(b, NS, key, {"n": 2})
                assert isinstance(mismatch, Mismatch)
                assert (await store.http_response(b, mismatch)).status == 422
            failed = key + "-failed"
            async with a.transaction():
                fresh = await store.begin(a, NS, failed, {})
                assert isinstance(fresh, Fresh)
                await store.fail_permanent(a, NS, failed, {"class_tag": "Nope", "message": "no"}, fresh.fence)
            async with a.transaction():
                assert await store.begin(a, NS, failed, {}) == PriorError(StoredError("Nope", "no"),
                                                                          fresh.submitted_hash)
            transient = key + "-transient"
            async with a.transaction():
                fresh = await store.begin(a, NS, transient, {})
                assert isinstance(fresh, Fresh)
                await store.fail_transient(a, NS, transient, fresh.fence)
            async with b.transaction():
                assert isinstance(await store.begin(b, NS, transient, {}), Fresh)
                raise psycopg.Rollback

    asyncio.run(main())


def test_autocommit_is_refused_async(database: str, key: str) -> None:
    """Autocommit is refused on an AsyncConnection too."""
    async def main() -> None:
        """The test, on an event loop."""
        store = AsyncStore()
        async with await psycopg.AsyncConnection.connect(dbname=database, autocommit=True) as auto:
            with pytest.raises(TransactionRequired):
                await store.begin(auto, NS, key, {})
            async with auto.transaction():
                assert isinstance(await store.begin(auto, NS, key, {}), Fresh)
                raise psycopg.Rollback

    asyncio.run(main())


def test_pool_checks_the_version_once(database: str, key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One store per pool: idem_version() is asked once, however many requests start at once."""
    checks: list[object] = []
    check = store_module._server_version
    monkeypatch.setattr(store_module, "_server_version", lambda *a: checks.append(a) or check(*a))

    async def main() -> None:
        """The test, on an event loop."""
        store = AsyncStore()
        async with AsyncConnectionPool(f"dbname={database}", min_size=2, max_size=4, open=False) as pool:
            async def one(i: int) -> None:
                """One request's transaction."""
                async with pool.connection() as conn, conn.transaction():
                    fresh = await store.begin(conn, NS, f"{key}-{i}", {"i": i})
                    assert isinstance(fresh, Fresh)
                    await store.commit(conn, NS, f"{key}-{i}", i, fresh.fence)

            await asyncio.gather(*(one(i) for i in range(8)))
            async with pool.connection() as conn:
                rows = await (await conn.execute(
                    "SELECT count(*) FROM idempotency.idempotency_record WHERE namespace = %s AND key_value LIKE %s",
                    (NS, key + "-%"))).fetchone()
                assert rows == (8,)
        assert len(checks) == 1

    asyncio.run(main())
