"""Store and AsyncStore: the extension's SQL functions on the caller's
psycopg 3 connection, inside the caller's transaction.

A store never opens, commits or rolls back a transaction it is given. One
store stands for one database (one pool, or one connection): at first use it
runs idem_version() once and refuses a server whose API major it does not
know. Errors the server raises are psycopg's, with their SQLSTATE, message,
detail and hint."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb, set_json_loads

from ._version import __version__
from .errors import IncompatibleServer, TransactionRequired
from .http import HttpKey, HttpResponse
from .outcomes import (
    OUTCOME_COLUMNS,
    JsonText,
    Outcome,
    ServerVersion,
    StoredError,
    outcome_from_row,
    outcome_to_json,
)

API_MAJOR = "1"

_PROBE = sql.SQL(
    "SELECT pg_catalog.to_regprocedure('idempotency.idem_version()') IS NOT NULL AS has_version,"
    " (SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'idempotency') AS extversion")
_VERSION = sql.SQL("SELECT edition, version, api FROM idempotency.idem_version()")
_BEGIN = sql.SQL("SELECT {} FROM idempotency.idem_begin(%s, %s, %s, %s, %s)").format(
    sql.SQL(", ").join(sql.Identifier(c) for c in OUTCOME_COLUMNS))
# idem_begin and, for an outcome that needs no work, idem_http_response on
# the server's own outcome row: one statement, and the recorded JSON exactly
# as recorded (numbers in their own form).
_BEGIN_HTTP = sql.SQL(
    "SELECT {}, r.status AS http_status, r.headers AS http_headers, r.body AS http_body,"
    " r.body::text AS http_body_text FROM idempotency.idem_begin(%s, %s, %s, %s, %s) o"
    " LEFT JOIN LATERAL idempotency.idem_http_response(CASE WHEN o.kind <> 'fresh' THEN o END, %s, %s) r"
    " ON true").format(sql.SQL(", ").join(sql.Identifier("o", c) for c in OUTCOME_COLUMNS))
_COMMIT = sql.SQL("SELECT idempotency.idem_commit(%s, %s, %s, %s)")
_FAIL_PERMANENT = sql.SQL("SELECT idempotency.idem_fail_permanent(%s, %s, %s, %s)")
_FAIL_TRANSIENT = sql.SQL("SELECT idempotency.idem_fail_transient(%s, %s, %s)")
_EXTEND_LEASE = sql.SQL("SELECT idempotency.idem_extend_lease(%s, %s, %s) AS ends")
_SAVE_POINT = sql.SQL("SELECT idempotency.idem_save_point(%s, %s, %s, %s, %s) AS ends")
_HTTP_KEY = sql.SQL("SELECT key, status, headers, body, body::text AS body_text"
                    " FROM idempotency.idem_http_key(%s, %s, %s)")
_HTTP_RESPONSE = sql.SQL(
    "SELECT status, headers, body, body::text AS body_text FROM idempotency.idem_http_response("
    "pg_catalog.jsonb_populate_record(NULL::idempotency.idem_outcome, %s), %s, %s)")


def _json(value: Any) -> Jsonb:
    """A value for a jsonb parameter: JsonText as it is, anything else as json.dumps writes it."""
    if isinstance(value, JsonText):
        return Jsonb(value, dumps=str)
    if isinstance(value, StoredError):
        return Jsonb(value.to_json())
    return Jsonb(value)


def _cursor_setup(cur: psycopg.Cursor[Any] | psycopg.AsyncCursor[Any]) -> None:
    """jsonb comes back parsed on the store's cursors, whatever the connection
    registered (Django's backend loads jsonb as text)."""
    set_json_loads(json.loads, cur)


def _refuse_autocommit(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> None:
    """begin needs a transaction: refused in autocommit mode outside a transaction block."""
    if conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
        raise TransactionRequired(
            "idempotency begin needs a transaction, and the connection is in autocommit mode",
            "A fresh claim made in autocommit mode would be committed unfinished by its own statement.",
            "Begin, work and commit inside `with conn.transaction():`, or use a connection without autocommit.",
            sqlstate="25P01")


def _server_version(probe: Mapping[str, Any], row: Mapping[str, Any] | None) -> ServerVersion:
    """Checks idem_version()'s answer (or its absence) against API major 1."""
    if row is None:
        installed = probe.get("extversion")
        if installed is None:
            raise IncompatibleServer(
                "the idempotency extension is not installed in this database (no idempotency.idem_version())",
                f"idempotency-pg {__version__} needs the extension's API {API_MAJOR}.",
                "Run CREATE EXTENSION idempotency, or, on a managed PostgreSQL that cannot load it, "
                "the portable edition's script (docs/managed.md).")
        raise IncompatibleServer(
            f"the idempotency extension {installed} is too old for idempotency-pg {__version__}",
            f"It has no idem_version(): this package needs API {API_MAJOR} (release 1.0.0 or later).",
            "Run ALTER EXTENSION idempotency UPDATE.")
    version = ServerVersion(edition=row["edition"], version=row["version"], api=row["api"])
    if version.api.split(".", 1)[0] != API_MAJOR:
        raise IncompatibleServer(
            f"the server's idempotency {version.version} ({version.edition}) has API {version.api},"
            f" and idempotency-pg {__version__} knows API {API_MAJOR} only",
            f"API {version.api} is not API {API_MAJOR}.x: its calls or answers may differ.",
            f"Use a release of idempotency-pg for API {version.api.split('.', 1)[0]}.")
    return version


def _http(row: Mapping[str, Any]) -> HttpResponse:
    """An HTTP answer from its row (status, headers, body, body_text)."""
    return HttpResponse(status=int(row["status"]), headers=dict(row["headers"] or {}), body=row["body"],
                        body_text=row["body_text"])


def _begun(row: Mapping[str, Any]) -> tuple[Outcome, HttpResponse | None]:
    """begin_http's row: the outcome, and its HTTP answer unless it is fresh."""
    outcome = outcome_from_row(row)
    if row["http_status"] is None:
        return outcome, None
    return outcome, HttpResponse(status=int(row["http_status"]), headers=dict(row["http_headers"] or {}),
                                 body=row["http_body"], body_text=row["http_body_text"])


def _http_key(row: Mapping[str, Any]) -> HttpKey:
    """idem_http_key's row as a key or the 400 to send."""
    if row["key"] is not None:
        return HttpKey(key=row["key"], response=None)
    return HttpKey(key=None, response=_http(row))


def _http_params(outcome: Outcome, retry_after: int, docs_uri: str | None) -> tuple[Any, ...]:
    """The parameters of idem_http_response for an outcome."""
    return (Jsonb(outcome_to_json(outcome)), retry_after, docs_uri)


class Store:
    """The SQL functions on a psycopg Connection, in the caller's transaction."""

    def __init__(self) -> None:
        """A store for one database; it checks the server's API at first use."""
        self._version: ServerVersion | None = None
        self._lock = threading.Lock()

    def server_version(self, conn: psycopg.Connection[Any]) -> ServerVersion:
        """idem_version(), asked once: raises IncompatibleServer for a server
        without it (0.9 and older) or of another API major."""
        if self._version is None:
            with self._lock:
                if self._version is None:
                    with conn.cursor(row_factory=dict_row) as cur:
                        probe = cur.execute(_PROBE).fetchone()
                        assert probe is not None
                        row = cur.execute(_VERSION).fetchone() if probe["has_version"] else None
                    self._version = _server_version(probe, row)
        return self._version

    def _row(self, conn: psycopg.Connection[Any], query: sql.SQL | sql.Composed,
             params: tuple[Any, ...]) -> dict[str, Any]:
        """Runs one statement of the store and returns its one row by column name."""
        self.server_version(conn)
        with conn.cursor(row_factory=dict_row) as cur:
            _cursor_setup(cur)
            row = cur.execute(query, params).fetchone()
        assert row is not None
        return row

    def begin(self, conn: psycopg.Connection[Any], namespace: str, key: str, request: Any, *,
              replay_window: timedelta | None = None, in_flight_wait: timedelta | None = None) -> Outcome:
        """idem_begin: claims the key for this transaction (Fresh) or says why
        not. request is any JSON value (a JsonText goes as it is)."""
        _refuse_autocommit(conn)
        return outcome_from_row(self._row(conn, _BEGIN, (namespace, key, _json(request), replay_window,
                                                         in_flight_wait)))

    def begin_http(self, conn: psycopg.Connection[Any], namespace: str, key: str, request: Any, *,
                   retry_after: int = 1, docs_uri: str | None = None, replay_window: timedelta | None = None,
                   in_flight_wait: timedelta | None = None) -> tuple[Outcome, HttpResponse | None]:
        """begin, and in the same statement idem_http_response for an outcome
        that needs no work: (Fresh, None), or (outcome, the answer to send)."""
        _refuse_autocommit(conn)
        return _begun(self._row(conn, _BEGIN_HTTP, (namespace, key, _json(request), replay_window, in_flight_wait,
                                                    retry_after, docs_uri)))

    def commit(self, conn: psycopg.Connection[Any], namespace: str, key: str, result: Any,
               fence: int | None) -> None:
        """idem_commit: records the result; later begins replay it."""
        self._row(conn, _COMMIT, (namespace, key, _json(result), fence))

    def fail_permanent(self, conn: psycopg.Connection[Any], namespace: str, key: str,
                       error: StoredError | Mapping[str, str], fence: int | None) -> None:
        """idem_fail_permanent: records the error; later begins replay it."""
        self._row(conn, _FAIL_PERMANENT, (namespace, key, _json(error), fence))

    def fail_transient(self, conn: psycopg.Connection[Any], namespace: str, key: str, fence: int | None) -> None:
        """idem_fail_transient: forgets the claim; the next begin is fresh."""
        self._row(conn, _FAIL_TRANSIENT, (namespace, key, fence))

    def extend_lease(self, conn: psycopg.Connection[Any], namespace: str, key: str, fence: int) -> datetime:
        """idem_extend_lease: a holder's heartbeat; returns the lease's new end."""
        ends: datetime = self._row(conn, _EXTEND_LEASE, (namespace, key, fence))["ends"]
        return ends

    def save_point(self, conn: psycopg.Connection[Any], namespace: str, key: str, point: str, state: Any,
                   fence: int) -> datetime:
        """idem_save_point: records how far the work got; returns the lease's new end."""
        ends: datetime = self._row(conn, _SAVE_POINT, (namespace, key, point, _json(state), fence))["ends"]
        return ends

    def http_key(self, conn: psycopg.Connection[Any], namespace: str, header: str | None,
                 docs_uri: str | None = None) -> HttpKey:
        """idem_http_key: the key of an Idempotency-Key header (quoted or bare),
        or the 400 to answer."""
        return _http_key(self._row(conn, _HTTP_KEY, (namespace, header, docs_uri)))

    def http_response(self, conn: psycopg.Connection[Any], outcome: Outcome, retry_after: int = 1,
                      docs_uri: str | None = None) -> HttpResponse:
        """idem_http_response: the answer to an outcome that needs no work
        (a replay, 409, 422), rebuilt from the outcome's fields (JSON numbers as
        Python read them; begin_http answers from the server's own row). A Fresh
        outcome is refused by the server (22023)."""
        return _http(self._row(conn, _HTTP_RESPONSE, _http_params(outcome, retry_after, docs_uri)))


class AsyncStore:
    """The SQL functions on a psycopg AsyncConnection, in the caller's transaction."""

    def __init__(self) -> None:
        """A store for one database; it checks the server's API at first use."""
        self._version: ServerVersion | None = None
        self._lock: asyncio.Lock | None = None

    async def server_version(self, conn: psycopg.AsyncConnection[Any]) -> ServerVersion:
        """idem_version(), asked once: raises IncompatibleServer for a server
        without it (0.9 and older) or of another API major."""
        if self._version is None:
            self._lock = self._lock or asyncio.Lock()
            async with self._lock:
                if self._version is None:
                    async with conn.cursor(row_factory=dict_row) as cur:
                        probe = await (await cur.execute(_PROBE)).fetchone()
                        assert probe is not None
                        row = await (await cur.execute(_VERSION)).fetchone() if probe["has_version"] else None
                    self._version = _server_version(probe, row)
        return self._version

    async def _row(self, conn: psycopg.AsyncConnection[Any], query: sql.SQL | sql.Composed,
                   params: tuple[Any, ...]) -> dict[str, Any]:
        """Runs one statement of the store and returns its one row by column name."""
        await self.server_version(conn)
        async with conn.cursor(row_factory=dict_row) as cur:
            _cursor_setup(cur)
            row = await (await cur.execute(query, params)).fetchone()
        assert row is not None
        return row

    async def begin(self, conn: psycopg.AsyncConnection[Any], namespace: str, key: str, request: Any, *,
                    replay_window: timedelta | None = None, in_flight_wait: timedelta | None = None) -> Outcome:
        """idem_begin: claims the key for this transaction (Fresh) or says why
        not. request is any JSON value (a JsonText goes as it is)."""
        _refuse_autocommit(conn)
        return outcome_from_row(await self._row(conn, _BEGIN, (namespace, key, _json(request), replay_window,
                                                               in_flight_wait)))

    async def begin_http(self, conn: psycopg.AsyncConnection[Any], namespace: str, key: str, request: Any, *,
                         retry_after: int = 1, docs_uri: str | None = None, replay_window: timedelta | None = None,
                         in_flight_wait: timedelta | None = None) -> tuple[Outcome, HttpResponse | None]:
        """begin, and in the same statement idem_http_response for an outcome
        that needs no work: (Fresh, None), or (outcome, the answer to send)."""
        _refuse_autocommit(conn)
        return _begun(await self._row(conn, _BEGIN_HTTP, (namespace, key, _json(request), replay_window,
                                                          in_flight_wait, retry_after, docs_uri)))

    async def commit(self, conn: psycopg.AsyncConnection[Any], namespace: str, key: str, result: Any,
                     fence: int | None) -> None:
        """idem_commit: records the result; later begins replay it."""
        await self._row(conn, _COMMIT, (namespace, key, _json(result), fence))

    async def fail_permanent(self, conn: psycopg.AsyncConnection[Any], namespace: str, key: str,
                             error: StoredError | Mapping[str, str], fence: int | None) -> None:
        """idem_fail_permanent: records the error; later begins replay it."""
        await self._row(conn, _FAIL_PERMANENT, (namespace, key, _json(error), fence))

    async def fail_transient(self, conn: psycopg.AsyncConnection[Any], namespace: str, key: str,
                             fence: int | None) -> None:
        """idem_fail_transient: forgets the claim; the next begin is fresh."""
        await self._row(conn, _FAIL_TRANSIENT, (namespace, key, fence))

    async def extend_lease(self, conn: psycopg.AsyncConnection[Any], namespace: str, key: str,
                           fence: int) -> datetime:
        """idem_extend_lease: a holder's heartbeat; returns the lease's new end."""
        ends: datetime = (await self._row(conn, _EXTEND_LEASE, (namespace, key, fence)))["ends"]
        return ends

    async def save_point(self, conn: psycopg.AsyncConnection[Any], namespace: str, key: str, point: str,
                         state: Any, fence: int) -> datetime:
        """idem_save_point: records how far the work got; returns the lease's new end."""
        ends: datetime = (await self._row(conn, _SAVE_POINT, (namespace, key, point, _json(state), fence)))["ends"]
        return ends

    async def http_key(self, conn: psycopg.AsyncConnection[Any], namespace: str, header: str | None,
                       docs_uri: str | None = None) -> HttpKey:
        """idem_http_key: the key of an Idempotency-Key header (quoted or bare),
        or the 400 to answer."""
        return _http_key(await self._row(conn, _HTTP_KEY, (namespace, header, docs_uri)))

    async def http_response(self, conn: psycopg.AsyncConnection[Any], outcome: Outcome, retry_after: int = 1,
                            docs_uri: str | None = None) -> HttpResponse:
        """idem_http_response: the answer to an outcome that needs no work
        (a replay, 409, 422), rebuilt from the outcome's fields (JSON numbers as
        Python read them; begin_http answers from the server's own row). A Fresh
        outcome is refused by the server (22023)."""
        return _http(await self._row(conn, _HTTP_RESPONSE, _http_params(outcome, retry_after, docs_uri)))
