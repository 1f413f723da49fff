"""Django middleware: two settings make a project's POST and PATCH views idempotent.

    MIDDLEWARE = ["idempotency.django.IdempotencyMiddleware", ...]
    IDEMPOTENCY = {"namespace": "payments"}

IDEMPOTENCY takes the options of idempotency.Settings (docs_uri,
retry_after, methods, record, replay_headers, optional: Django route
templates such as "payments/<int:pk>") and "database", the alias whose
connection holds the claim (default "default"; a psycopg 3 backend).

The view runs inside transaction.atomic() on that database, in the
transaction that holds the claim: its ORM writes commit with the recorded
response or roll back with the claim. request.idempotency is the DjangoClaim
(key, fence, and the psycopg connection); a view may end the attempt itself
with its fail_permanent(error) (every retry gets the 422 of that refusal,
and so does this request) or fail_transient() (its answer is sent after a
rollback). Otherwise the behaviour is clients/README.md's, as in
idempotency.asgi."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import psycopg
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured, RequestDataTooBig
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.http import HttpRequest
from django.http import HttpResponse as DjangoResponse
from django.http.response import HttpResponseBase
from django.urls import Resolver404, resolve

from .http import (
    Claim,
    HttpResponse,
    Settings,
    failure,
    first_answer,
    header,
    recorded_response,
    request_fingerprint,
    template,
    too_large,
    unreadable,
)
from .outcomes import Fresh, StoredError
from .store import Store

log = logging.getLogger("idempotency")

__all__ = ["DjangoClaim", "IdempotencyMiddleware", "route_template"]


@dataclass(frozen=True, slots=True)
class DjangoClaim(Claim[psycopg.Connection[Any]]):
    """request.idempotency: a Claim whose view may end the attempt itself,
    once (clients/README.md, rules 17 to 20)."""

    store: Store = field(kw_only=True, repr=False, compare=False)

    def fail_permanent(self, error: StoredError | Mapping[str, str]) -> None:
        """Refuses the request for good (idem_fail_permanent with the claim's
        fence): the middleware then commits and answers, whatever the view
        answers below 500, the 422 problem every retry gets."""
        self._start("permanent", error)
        try:
            self.store.fail_permanent(self.connection, self.namespace, self.key, error, self.fence)
        except BaseException:
            self._undo()
            raise

    def fail_transient(self) -> None:
        """Releases the key (idem_fail_transient with the claim's fence): the
        view's answer is sent after a rollback, nothing is recorded, and a
        retry runs the view again."""
        self._start("transient")
        try:
            self.store.fail_transient(self.connection, self.namespace, self.key, self.fence)
        except BaseException:
            self._undo()
            raise


class _ViewRaised(Exception):
    """The view raised (its cause): the error goes on to Django once the claim is rolled back."""


class _StoreFailed(Exception):
    """The store failed (its cause says how): answer 503 or 500, after the atomic block rolled back."""


def route_template(request: HttpRequest) -> str:
    """The route Django matches for the request, its parameters written
    {name} ("payments/<int:pk>" is "/payments/{pk}"); the path when none
    matches."""
    try:
        match = resolve(request.path_info, getattr(request, "urlconf", None))
    except Resolver404:
        return request.path
    route: str | None = getattr(match, "route", None)
    return template(route) if route else request.path


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
        if raw_key is None and s.is_optional(target):
            return self.get_response(request)
        try:
            body = request.body
        except RequestDataTooBig:
            return _reply(too_large(s, django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE))
        except OSError:
            return _reply(unreadable(s))
        if connections[self.database].in_atomic_block:
            raise ImproperlyConfigured("IdempotencyMiddleware needs its own transaction; a block is already open")
        try:
            with transaction.atomic(using=self.database):
                return self._in_transaction(request, raw_key, target, body)
        except _StoreFailed as e:
            answer = failure(s, e.__cause__ or e)
            log.error("idempotency: the store failed; answering %d: %s", answer.status, e.__cause__ or e,
                      exc_info=e.__cause__ or e)
            return _reply(answer)
        except _ViewRaised as e:  # the view's own error escapes, after the rollback
            assert e.__cause__ is not None
            raise e.__cause__ from None
        except Exception as e:  # the atomic block's COMMIT, or a connection lost on the way out
            if not isinstance(e, psycopg.Error) and not isinstance(e.__cause__, psycopg.Error):
                raise
            answer = failure(s, e)
            log.error("idempotency: the claim's transaction did not commit; answering %d: %s", answer.status, e,
                      exc_info=e)
            return _reply(answer)

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
                fingerprint = request_fingerprint(request.method or "", target, request.content_type, body)
                outcome, answer = self.store.begin_http(conn, s.namespace, checked.key, fingerprint,
                                                        retry_after=s.retry_after, docs_uri=s.docs_uri)
        except Exception as e:
            raise _StoreFailed() from e
        if answer is not None or checked.key is None:
            assert answer is not None
            transaction.set_rollback(True, using=self.database)
            return _reply(answer)
        assert isinstance(outcome, Fresh)
        held = DjangoClaim(conn, s.namespace, checked.key, outcome, store=self.store)
        request.idempotency = held  # type: ignore[attr-defined]
        try:
            response = self.get_response(request)
        except Exception as e:
            raise _ViewRaised() from e
        finally:
            ending = held._close()
        status = response.status_code
        if ending == "transient" or status >= 500 or (ending == "open" and not s.record(status)):
            transaction.set_rollback(True, using=self.database)
            return response
        try:
            if db.needs_rollback:
                raise transaction.TransactionManagementError("the view's transaction broke; nothing can be recorded")
            if ending == "permanent":  # the 422 every retry gets, committed with the refusal on the way out
                return _reply(first_answer(self.store.http_response(conn, held._refusal(), s.retry_after,
                                                                    s.docs_uri)))
            result = recorded_response(status, list(response.items()), _content(response), s.replay_headers)
            self.store.commit(conn, s.namespace, held.key, result, held.fence)
        except Exception as e:
            raise _StoreFailed() from e
        return response
