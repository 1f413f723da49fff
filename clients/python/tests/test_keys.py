"""mint, parse and namespace validation against the known-answer vectors of
test/kat/ (read from the repository, never copied), and against the server."""

from __future__ import annotations

import csv
import json
import random
from typing import Any

import psycopg
import pytest

from idempotency import InvalidArgument, mint, parse, validate_namespace

from .conftest import KAT


def _rows(name: str) -> list[dict[str, str]]:
    """The rows of a vector file."""
    with open(KAT / name, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


KEY_ROWS = _rows("keys.csv")
MINT_ROWS = [r for r in _rows("vectors.csv") if r["kind"] == "mint"]


def run_local(function: str, value: Any) -> tuple[Any, str, str]:
    """One key rule run here: (answer, message, detail), message and detail empty unless it failed."""
    try:
        if function == "namespace":
            validate_namespace(value)
            return "ok", "", ""
        if function == "parse":
            return parse("kat", value), "", ""
        return mint("kat", value), "", ""
    except InvalidArgument as e:
        assert e.sqlstate == "22023"
        return None, e.message, e.detail or ""


def test_vector_files_are_loaded() -> None:
    """The vector files are there and hold every rule."""
    assert len(KEY_ROWS) >= 40
    assert {r["function"] for r in KEY_ROWS} == {"namespace", "parse", "mint"}
    assert len(MINT_ROWS) >= 20


@pytest.mark.parametrize("row", KEY_ROWS, ids=[r["name"] for r in KEY_ROWS])
def test_key_rule(row: dict[str, str]) -> None:
    """One row of keys.csv: the answer, or the error's message and detail."""
    answer, message, detail = run_local(row["function"], json.loads(row["input"]))
    if row["key"] == "":
        assert (message, detail) == (row["message"], row["detail"])
    else:
        expected = "ok" if row["key"] == "ok" else json.loads(row["key"])
        assert (answer, message, detail) == (expected, "", "")


@pytest.mark.parametrize("row", MINT_ROWS, ids=[r["name"] for r in MINT_ROWS])
def test_mint_vector(row: dict[str, str]) -> None:
    """One mint row of vectors.csv, in two namespaces."""
    parts = json.loads(row["input"])
    assert mint("kat", parts) == row["sha256"]
    assert mint("another-namespace", parts) == row["sha256"]  # the namespace is validated, not hashed


def test_errors_print_like_the_server() -> None:
    """The package's errors read as psycopg prints the server's."""
    with pytest.raises(InvalidArgument) as e:
        parse("Payments", "k")
    assert str(e.value) == ('invalid idempotency namespace\nDETAIL:  Character "P" at position 1 is not allowed; '
                            'use only lower-case a-z, digits 0-9, "-" and "_".')
    with pytest.raises(InvalidArgument, match="must not be null"):
        parse(None, None)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument) as e:
        mint("n", None)  # type: ignore[arg-type]
    assert e.value.message == "idempotency key parts must not be null"
    with pytest.raises(InvalidArgument) as e:
        mint("n", [["a"], ["b"]])  # type: ignore[list-item]
    assert e.value.detail == "The array has 2 dimensions."
    with pytest.raises(TypeError):
        mint("n", "abc")  # a str is not a list of parts


def _server(conn: psycopg.Connection, function: str, value: Any) -> tuple[Any, str, str]:
    """The same rule run by the extension, under a savepoint."""
    try:
        with conn.transaction():
            if function == "namespace":
                conn.execute("SELECT idempotency.idem_parse(%s, 'k')", (value,))
                return "ok", "", ""
            if function == "parse":
                row = conn.execute("SELECT idempotency.idem_parse('kat', %s)", (value,)).fetchone()
            else:
                row = conn.execute("SELECT idempotency.idem_mint('kat', %s::text[])", (value,)).fetchone()
            assert row is not None
            return row[0], "", ""
    except psycopg.errors.InvalidParameterValue as e:
        return None, e.diag.message_primary or "", e.diag.message_detail or ""


def test_local_answers_are_the_servers(conn: psycopg.Connection) -> None:
    """Every vector, and random inputs near the rules' edges, give the server's answer exactly."""
    rng = random.Random(42)
    alphabet = ["a", "Z", " ", "\t", "\n", "\x01", "\x7f", "\u0085", "\u00a0", "\u200b", "\u3000", "é",
                "😀", '"', "-", "_", "9"]
    cases: list[tuple[str, Any]] = [(r["function"], json.loads(r["input"])) for r in KEY_ROWS]
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
        cases.append(("parse", text * rng.choice([1, 1, 40])))
        cases.append(("namespace", text.lower()))
        cases.append(("mint", [text, "".join(rng.choice(alphabet) for _ in range(3))][: rng.randint(1, 2)]))
    with conn.transaction():
        for function, value in cases:
            assert run_local(function, value) == _server(conn, function, value), (function, value)
