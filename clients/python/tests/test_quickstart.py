"""docs/quickstart.md's Python handler, and the one of the repository's
README, run as written against the quick start's own table."""

from __future__ import annotations

import importlib.util
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from starlette.testclient import TestClient

from .conftest import REPO, create_database, drop_database

GUIDE = (REPO / "docs" / "quickstart.md").read_text(encoding="utf-8")
README = (REPO / "README.md").read_text(encoding="utf-8")


def block(text: str, name: str) -> str:
    """The code block after <!-- quickstart: name --> in text."""
    m = re.search(rf"<!-- quickstart: {re.escape(name)} -->\n```[a-z]*\n(.*?)```", text, flags=re.S)
    assert m, f"no block after <!-- quickstart: {name} -->"
    return m.group(1)


@pytest.fixture(scope="module")
def quickstart_db() -> Iterator[str]:
    """A new database made by the guide's own SQL: the extension and its table."""
    name = f"idem_python_quickstart_{os.getpid()}"
    create_database(name, block(GUIDE, "schema"))
    yield name
    drop_database(name)


def load(code: str, path: Path) -> Any:
    """The code, written to path and imported as a module."""
    path.write_text(code, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def payments(database: str) -> int:
    with psycopg.connect(dbname=database) as conn:
        row = conn.execute("SELECT count(*) FROM payments").fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("source", ["docs/quickstart.md", "README.md"])
def test_the_handler_answers_a_retry_with_the_first_answer(
        source: str, quickstart_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A payment, its retry (replayed), the key reused (422), no key (400); one row."""
    code = block(GUIDE if source == "docs/quickstart.md" else README, "python")
    if source == "README.md":
        assert len(code.splitlines()) <= 30, "the README shows a short app"
    monkeypatch.setenv("DATABASE_URL", f"dbname={quickstart_db}")
    app = load(code, tmp_path / "app.py").app
    before = payments(quickstart_db)
    key = f"quickstart-{uuid.uuid4()}"
    body = {"amount": 100, "currency": "EUR"}
    with TestClient(app) as client:
        first = client.post("/payments", json=body, headers={"Idempotency-Key": key})
        again = client.post("/payments", json=body, headers={"Idempotency-Key": f'"{key}"'})
        reused = client.post("/payments", json={**body, "amount": 99}, headers={"Idempotency-Key": key})
        missing = client.post("/payments", json=body)
    assert first.status_code == again.status_code == 201, first.text
    assert again.headers["Idempotency-Replayed"] == "true" and again.json() == first.json()
    assert reused.status_code == 422 and reused.json()["code"] == "IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST"
    assert missing.status_code == 400 and missing.json()["code"] == "MISSING_IDEMPOTENCY_KEY"
    assert payments(quickstart_db) == before + 1


def test_the_quickstart_handler_records_a_refusal(
        quickstart_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An amount of 0 is refused for good: the same 422 again, replayed; no row."""
    monkeypatch.setenv("DATABASE_URL", f"dbname={quickstart_db}")
    app = load(block(GUIDE, "python"), tmp_path / "app.py").app
    before = payments(quickstart_db)
    key = f"quickstart-{uuid.uuid4()}"
    with TestClient(app) as client:
        first = client.post("/payments", json={"amount": 0, "currency": "EUR"}, headers={"Idempotency-Key": key})
        again = client.post("/payments", json={"amount": 0, "currency": "EUR"}, headers={"Idempotency-Key": key})
    assert first.status_code == again.status_code == 422, first.text
    assert first.json()["code"] == "InvalidAmount" and again.json() == first.json()
    assert "Idempotency-Replayed" not in first.headers and again.headers["Idempotency-Replayed"] == "true"
    assert payments(quickstart_db) == before
