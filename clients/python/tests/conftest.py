"""Shared fixtures: a database of the tests' own on the server the PG*
variables name, with the extension and the business tables of the apps."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
KAT = REPO / "test" / "kat"
# IDEM_TEST_STORE_IN_TEMPLATE=1: the server's new databases come with the store
# already (test/bin/portable's clients layer: the portable edition's plain
# script installed in template1), so the tests' databases do not create the
# extension. IDEM_TEST_EDITION: the edition idem_version() must answer.
STORE_IN_TEMPLATE = os.environ.get("IDEM_TEST_STORE_IN_TEMPLATE") == "1"
EDITION = os.environ.get("IDEM_TEST_EDITION", "native")

SCHEMA = """
CREATE EXTENSION idempotency;
CREATE TABLE payments (
    id       bigserial PRIMARY KEY,
    key      text NOT NULL DEFAULT '',
    amount   numeric NOT NULL,
    app      text NOT NULL DEFAULT 'readme'
);
CREATE TABLE shipments (
    id             bigserial PRIMARY KEY,
    key            text NOT NULL,
    downstream_key text NOT NULL,
    app            text NOT NULL
);
-- Checked at COMMIT: a second 'twice' breaks the unique constraint (23505),
-- a row in serialization_failures raises 40001: a store error and an
-- unreachable store as the middleware's commit meets them.
CREATE TABLE uniques (v text UNIQUE DEFERRABLE INITIALLY DEFERRED);
CREATE TABLE serialization_failures (v text);
CREATE FUNCTION fail_serialization() RETURNS trigger LANGUAGE plpgsql AS
  $$BEGIN RAISE EXCEPTION 'could not serialize access' USING ERRCODE = '40001'; END$$;
CREATE CONSTRAINT TRIGGER fail_at_commit AFTER INSERT ON serialization_failures
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fail_serialization();
"""


def create_database(name: str, schema: str = SCHEMA) -> None:
    """Creates a database (dropped first if a failed run left it) and runs schema in it."""
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    if STORE_IN_TEMPLATE:
        schema = schema.replace("CREATE EXTENSION idempotency;\n", "", 1)
    if schema:
        with psycopg.connect(dbname=name, autocommit=True) as conn:
            conn.execute(schema)


def drop_database(name: str) -> None:
    """Drops a database of the tests, ending its sessions."""
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def database() -> Iterator[str]:
    """The tests' database: the extension and the apps' tables."""
    name = f"idem_python_{os.getpid()}"
    create_database(name)
    yield name
    drop_database(name)


@pytest.fixture
def conn(database: str) -> Iterator[psycopg.Connection]:
    """A connection with psycopg's defaults (not in autocommit mode)."""
    with psycopg.connect(dbname=database) as c:
        yield c


@pytest.fixture
def other(database: str) -> Iterator[psycopg.Connection]:
    """A second connection, for another transaction."""
    with psycopg.connect(dbname=database) as c:
        yield c


@pytest.fixture
def key() -> str:
    """A key no other test uses."""
    return f"k-{uuid.uuid4()}"


@pytest.fixture
def scratch() -> Iterator[str]:
    """An empty database a test may break, dropped after."""
    name = f"idem_python_scratch_{os.getpid()}"
    create_database(name, "")
    yield name
    drop_database(name)
