"""The README's examples are the code the tests run."""

from __future__ import annotations

import importlib.util
import re
import uuid

import psycopg
import pytest
from starlette.testclient import TestClient

from .conftest import HERE

README = (HERE.parent / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)
EXAMPLE = HERE / "apps" / "readme_app.py"


def test_the_fastapi_example_is_the_tested_app() -> None:
    """The README's FastAPI block is tests/apps/readme_app.py."""
    assert BLOCKS[0] == EXAMPLE.read_text(encoding="utf-8")


def test_the_fastapi_example_works(database: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The example replays the same request and makes one row."""
    monkeypatch.setenv("DATABASE_URL", f"dbname={database}")
    spec = importlib.util.spec_from_file_location("readme_app", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    key = f"readme-{uuid.uuid4()}"
    with TestClient(module.app) as client:
        first = client.post("/payments", json={"amount": 100}, headers={"Idempotency-Key": key})
        again = client.post("/payments", json={"amount": 100}, headers={"Idempotency-Key": f'"{key}"'})
    assert first.status_code == again.status_code == 201
    assert again.headers["Idempotency-Replayed"] == "true" and again.json() == first.json()
    with psycopg.connect(dbname=database) as conn:
        row = conn.execute("SELECT count(*) FROM payments WHERE id = %s", (first.json()["payment_id"],)).fetchone()
    assert row == (1,)


def test_the_store_example_runs(database: str, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    """The store example runs twice: fresh, then the replay."""
    store_block = next(b for b in BLOCKS if "store = Store()" in b)
    monkeypatch.setenv("PGDATABASE", database)
    exec(compile(store_block, "README.md", "exec"), {})
    exec(compile(store_block, "README.md", "exec"), {})
    assert capsys.readouterr().out == "already done: {'status': 'paid'}\n"
