"""Django middleware: two settings make a project's POST and PATCH views idempotent.

    MIDDLEWARE = ["idempotency.django.IdempotencyMiddleware", ...]
    IDEMPOTENCY = {"namespace": "payments"}

IDEMPOTENCY takes the options of idempotency.Settings (docs_uri,
retry_after, methods, record, replay_headers, optional: Django route
templates such as "payments/<int:pk>") and "database", the alias whose
connection holds the claim (default "default"; a psycopg 3 backend).

The view runs inside transaction.atomic() on that database, in the
transaction that holds the claim: its ORM writes commit with the recorded
response or roll back with the claim. request.idempotency is the Claim (key,
fence, and the psycopg connection). Otherwise the behaviour is clients/README.md's, as in
idempotency.asgi."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import psycopg
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction
from django.http import HttpRequest
from django.http import HttpResponse as DjangoResponse
from django.http.response import HttpResponseBase
from django.urls import Resolver404, resolve

from .errors import IncompatibleServer
from .http import Claim, HttpResponse, Settings, header, recorded_response, request_fingerprint, unavailable
from .outcomes import Fresh
from .store import Store

log = logging.getLogger("idempotency")

__all__ = ["IdempotencyMiddleware", "route_template"]


class _Unavailable(Exception):
    """The store could not be reached, or the claim's transaction broke: answer 503."""


def route_template(request: HttpRequest) -> str:
    """The route Django matches for the request, as its URLconf writes it
    ("payments/<int:pk>"); the path when none matches."""
    try:
        match = resolve(request.path_info, getattr(request, "urlconf", None))
    except Resolver404:
        return request.path
    route: str | None = getattr(match, "route", None)
    return route if route else request.path


def _reply(reply: HttpResponse) -> DjangoResponse:
    """A Django response of an answer the server built (or the 503), with
    its headers only (no Content-Type added when it has none)."""
    response = DjangoResponse(reply.content(), status=reply.status)
    if header(reply.headers, "Content-Type") is None:
        del response["Content-Type"]
    for name, value in reply.headers.items():
        response[name] = value
    return response


def _content(response: HttpResponseBase) -> bytes:
    """The response's body; a streaming one is read whole (and given back as read)."""
    if getattr(response, "streaming", False):
        streamed = b"".join(response.streaming_content)  # type: ignore[attr-defined]
        response.streaming_content = [streamed]  # type: ignore[attr-defined]
        return streamed
    content: bytes = response.content  # type: ignore[attr-defined]
    return content


class IdempotencyMiddleware:
    """Claims each covered request's Idempotency-Key in the transaction the view runs in."""

    sync_capable = True
    async_capable = False

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        """Reads settings.IDEMPOTENCY once, at start-up."""
        self.get_response = get_response
        options: dict[str, Any] = dict(getattr(django_settings, "IDEMPOTENCY", {}) or {})
        self.database: str = options.pop("database", DEFAULT_DB_ALIAS)
        try:
            self.settings = Settings(**options)
        except (TypeError, ValueError) as e:
            raise ImproperlyConfigured(f"settings.IDEMPOTENCY: {e}") from e
        self.store = Store()

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        """One request: covered ones go through the store, the others straight to the view."""
        s = self.settings
        if not s.covers(request.method or ""):
            return self.get_response(request)
        raw_key = request.headers.get("Idempotency-Key")
        target = route_template(request)
        if raw_key is None and target in s.optional:
            return self.get_response(request)
        body = request.body
        if connections[self.database].in_atomic_block:
            raise ImproperlyConfigured("IdempotencyMiddleware needs its own transaction; a block is already open")
        try:
            with transaction.atomic(using=self.database):
                return self._in_transaction(request, raw_key, target, body)
        except _Unavailable as e:
            if isinstance(e.__cause__, IncompatibleServer):
                log.error("idempotency: the server is refused, answering 503: %s", e.__cause__)
            else:
                log.exception("idempotency: the store cannot be reached or did not commit; answering 503")
            return _reply(unavailable(s))
        except (DatabaseError, psycopg.Error):
            log.exception("idempotency: the store cannot be reached or did not commit; answering 503")
            return _reply(unavailable(s))

    def _in_transaction(self, request: HttpRequest, raw_key: str | None, target: str,
                        body: bytes) -> HttpResponseBase:
        """Inside the atomic block: claim, run the view, record; the block
        commits on return, and rolls back where set_rollback says."""
        s = self.settings
        db = connections[self.database]
        try:
            db.ensure_connection()
            conn: psycopg.Connection[Any] = db.connection
            checked = self.store.http_key(conn, s.namespace, raw_key, s.docs_uri)
            answer: HttpResponse | None = checked.response
            if checked.key is not None:
                outcome, answer = self.store.begin_http(conn, s.namespace, checked.key,
                                                        request_fingerprint(request.method or "", target, body),
                                                        retry_after=s.retry_after, docs_uri=s.docs_uri)
        except Exception as e:
            raise _Unavailable() from e
        if answer is not None or checked.key is None:
            transaction.set_rollback(True, using=self.database)
            return _reply(answer or unavailable(s))
        assert isinstance(outcome, Fresh)
        held = Claim(conn, s.namespace, checked.key, outcome)
        request.idempotency = held  # type: ignore[attr-defined]
        response = self.get_response(request)
        status = response.status_code
        if status >= 500 or not s.record(status):
            transaction.set_rollback(True, using=self.database)
            return response
        if db.needs_rollback:
            raise _Unavailable("the view's transaction broke; nothing is committed")
        try:
            result = recorded_response(status, list(response.items()), _content(response), s.replay_headers)
            self.store.commit(conn, s.namespace, held.key, result, held.fence)
        except Exception as e:
            raise _Unavailable() from e
        return response
