"""HTTP answers and the middleware's shared rules (clients/README.md, "The
HTTP middleware"): which requests it covers, the request it fingerprints, the
response it records, and the problems it answers itself (413, 400, 500, 503).

The server decides everything else: idem_http_key checks the header,
idem_begin hashes the request, idem_http_response builds every replay, 409 and
422 (Store.http_key, Store.http_response)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Generic, Literal, TypeAlias, TypeVar

import psycopg

from .errors import AttemptFinished, IdempotencyError
from .keys import validate_namespace
from .outcomes import Fresh, JsonText, PriorError, StoredError

C = TypeVar("C")

DEFAULT_METHODS = frozenset({"POST", "PATCH"})
DEFAULT_REPLAY_HEADERS = ("Content-Type", "Location")
UNAVAILABLE_CODE = "IDEMPOTENCY_STORE_UNAVAILABLE"
STORE_ERROR_CODE = "IDEMPOTENCY_STORE_ERROR"
# SQLSTATE classes (and one code) that say the store cannot serve now: a retry may succeed (rule 13).
_TRANSIENT = ("08", "53", "57P", "40", "25006")


def is_json_media_type(content_type: str | None) -> bool:
    """Whether a Content-Type is JSON: application/json or any +json type."""
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def header(headers: Mapping[str, str], name: str) -> str | None:
    """A header's value by case-insensitive name, or None."""
    lowered = name.lower()
    for key, value in headers.items():
        if key.lower() == lowered:
            return value
    return None


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """An HTTP answer the server built (idem_http_key's 400, idem_http_response's
    replay, 409 or 422): status, headers and the body as JSON (body) and as the
    JSON text the server printed (body_text, numbers exactly as recorded)."""

    status: int
    headers: dict[str, str]
    body: Any
    body_text: str | None = field(default=None, repr=False)

    def content(self) -> bytes:
        """The body's bytes (rule 12): none for no body or a recorded ""; the
        JSON text when the Content-Type is JSON; else a string decoded from
        base64 (as the middleware records a body that is not JSON)."""
        if self.body_text is None or self.body == "":
            return b""
        if isinstance(self.body, str) and not is_json_media_type(header(self.headers, "Content-Type")):
            try:
                return base64.b64decode(self.body, validate=True)
            except binascii.Error:
                pass
        return self.body_text.encode("utf-8")


@dataclass(frozen=True, slots=True)
class HttpKey:
    """idem_http_key's answer: the key, or (key None) the 400 to send."""

    key: str | None
    response: HttpResponse | None




def record_2xx_4xx(status: int) -> bool:
    """The default: record 2xx and 4xx answers (never a 5xx)."""
    return 200 <= status < 300 or 400 <= status < 500


@dataclass(frozen=True, slots=True)
class Settings:
    """How the middleware treats requests; the same options for ASGI and Django.

    namespace: the idempotency namespace of the service's keys.
    docs_uri: the service's documentation of these problems (their type, and a Link header).
    retry_after: Retry-After seconds of a 409 (unless a lease says when) and of the 503.
    methods: the methods that need a key (others pass through untouched).
    record: which statuses below 500 are recorded and committed; any other
        answer (and every 5xx) rolls back, the claim with it.
    replay_headers: the response headers recorded for replays.
    optional: route templates whose requests may come without a key (they then
        run without the store), as the framework writes them or as rule 6 does."""

    namespace: str
    docs_uri: str | None = None
    retry_after: int = 1
    methods: Collection[str] = DEFAULT_METHODS
    record: Callable[[int], bool] = record_2xx_4xx
    replay_headers: Collection[str] = DEFAULT_REPLAY_HEADERS
    optional: Collection[str] = frozenset()
    _methods: frozenset[str] = field(init=False, repr=False, compare=False)
    _optional: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Checks the namespace with the extension's rules, at start-up rather than per request."""
        validate_namespace(self.namespace)
        if isinstance(self.retry_after, bool) or not isinstance(self.retry_after, int) or self.retry_after < 0:
            raise ValueError(f"retry_after is zero or more seconds, not {self.retry_after!r}")
        object.__setattr__(self, "_methods", frozenset(m.upper() for m in self.methods))
        object.__setattr__(self, "_optional", frozenset(template(o) for o in self.optional))

    def covers(self, method: str) -> bool:
        """Whether requests of this method go through the store."""
        return method.upper() in self._methods

    def is_optional(self, target: str) -> bool:
        """Whether requests of this route template may come without a key."""
        return template(target) in self._optional


# How a handler ended its attempt (rules 17 to 20): not yet, with a refusal,
# with the key released; "over" once the middleware has finished it.
Ending: TypeAlias = Literal["open", "permanent", "transient", "over"]

_FINISHED = {
    "permanent": "fail_permanent ended it already: a handler ends its attempt once.",
    "transient": "fail_transient ended it already: a handler ends its attempt once.",
    "over": "The middleware has finished it: the answer was recorded or rolled back with its transaction.",
}


class _Ending:
    """The one mutable part of a claim: how its handler ended it, and the refusal it recorded."""

    __slots__ = ("error", "how")

    def __init__(self) -> None:
        """Not ended yet."""
        self.how: Ending = "open"
        self.error: StoredError | None = None


@dataclass(frozen=True, slots=True)
class Claim(Generic[C]):
    """The claim the middleware made for the running handler: the connection
    whose transaction holds it (use it for the handler's own writes, and never
    commit or roll it back), the key and the fresh outcome. The middleware
    hands out a subclass whose fail_permanent and fail_transient end the
    attempt (idempotency.asgi.AsyncClaim, idempotency.django.DjangoClaim)."""

    connection: C
    namespace: str
    key: str
    outcome: Fresh
    _ending: _Ending = field(default_factory=_Ending, init=False, repr=False, compare=False)

    @property
    def fence(self) -> int:
        """The fence the claim's commit passes."""
        return self.outcome.fence

    def _start(self, how: Literal["permanent", "transient"],
               error: StoredError | Mapping[str, str] | None = None) -> None:
        """Takes the handler's one ending before its call reaches the server
        (AttemptFinished when it was taken, or the middleware is done: rule
        20), with the refusal the 422 will show once the server has recorded it."""
        if self._ending.how != "open":
            raise AttemptFinished(_FINISHED[self._ending.how])
        self._ending.how = how
        if error is not None:
            self._ending.error = error if isinstance(error, StoredError) else StoredError(
                class_tag=str(error.get("class_tag")), message=str(error.get("message")), cause=error.get("cause"))

    def _undo(self) -> None:
        """The server refused the call: the attempt stays open (rule 17),
        unless the middleware finished it meanwhile."""
        if self._ending.how != "over":
            self._ending.how, self._ending.error = "open", None

    def _close(self) -> Ending:
        """For the middleware, once the handler is done: how it ended the attempt; none may end it after."""
        how, self._ending.how = self._ending.how, "over"
        return how

    def _refusal(self) -> PriorError:
        """The prior_error outcome of the recorded refusal: idem_http_response builds its 422 from it."""
        assert self._ending.error is not None
        return PriorError(error=self._ending.error, submitted_hash=self.outcome.submitted_hash)


def first_answer(reply: HttpResponse) -> HttpResponse:
    """A replay's answer as the first answer (rule 18): without Idempotency-Replayed."""
    headers = {k: v for k, v in reply.headers.items() if k.lower() != "idempotency-replayed"}
    return HttpResponse(reply.status, headers, reply.body, reply.body_text)


def _refuse_constant(name: str) -> Any:
    """NaN and Infinity are not JSON."""
    raise ValueError(f"{name} is not JSON")


def json_text(body: bytes) -> JsonText | None:
    """The body as JSON text when it is JSON, else None. The text goes to the
    server as it is (numbers keep their exact form); what jsonb refuses
    (\\u0000) the server refuses."""
    try:
        text = body.decode("utf-8")
        json.loads(text, parse_float=Decimal, parse_int=Decimal, parse_constant=_refuse_constant)
    except ValueError:
        return None
    return JsonText(text)


def request_fingerprint(method: str, target: str, content_type: str | None, body: bytes) -> JsonText:
    """The request idem_begin hashes (rules 5 to 7): {"method", "target",
    "body"}, the body as its JSON when the Content-Type is JSON and it parses,
    null when empty, else {"sha256": hex}."""
    if body == b"":
        body_json = "null"
    else:
        body_json = (json_text(body) if is_json_media_type(content_type) else None) \
            or json.dumps({"sha256": hashlib.sha256(body).hexdigest()})
    method_json, target_json = json.dumps(method.upper()), json.dumps(target, ensure_ascii=False)
    return JsonText(f'{{"method":{method_json},"target":{target_json},"body":{body_json}}}')


class NotRecordable(IdempotencyError):
    """A response rule 11 cannot record: a JSON Content-Type over a body that is not JSON."""


def recorded_response(status: int, headers: Iterable[tuple[str, str]], body: bytes,
                      replay_headers: Collection[str]) -> JsonText:
    """The result committed for an answer (rule 11): {"status", "headers",
    "body"} with the replayed headers (as replay_headers spells them; repeated
    ones joined with ", "), and the body: "" for none, the JSON under a JSON
    Content-Type, else a base64 string. NotRecordable for a JSON Content-Type
    over a body that is not JSON, which no replay could give back."""
    spelled = {name.lower(): name for name in replay_headers}
    kept: dict[str, str] = {}
    for name, value in headers:
        canonical = spelled.get(name.lower())
        if canonical is not None:
            kept[canonical] = f"{kept[canonical]}, {value}" if canonical in kept else value
    if body == b"":
        body_json = JsonText('""')
    elif is_json_media_type(header(kept, "Content-Type")):
        found = json_text(body)
        if found is None:
            raise NotRecordable("the response is not recorded: its Content-Type is JSON and its body is not JSON",
                                "A replay of it could not give back the bytes that were sent.")
        body_json = found
    else:
        body_json = JsonText(json.dumps(base64.b64encode(body).decode("ascii")))
    headers_json = json.dumps(kept, ensure_ascii=False)
    return JsonText(f'{{"status":{int(status)},"headers":{headers_json},"body":{body_json}}}')


_STARLETTE_PARAM = re.compile(r"\{([^{}:]+):[^{}]*\}")
_DJANGO_PARAM = re.compile(r"<(?:[^<>:]+:)?([^<>]+)>")


def template(route: str) -> str:
    """A route template with each parameter written {name} (rule 6):
    Starlette's {id:int} and Django's <int:id> are {id}; a leading / always."""
    found = _DJANGO_PARAM.sub(r"{\1}", _STARLETTE_PARAM.sub(r"{\1}", route))
    return found if found.startswith("/") else "/" + found


def unreachable(error: BaseException) -> bool:
    """Rule 13: the store cannot serve now, and a retry may succeed. An error
    of the driver without a SQLSTATE (no connection, a broken one, a pool or
    socket timeout), or a SQLSTATE of class 08, 53, 57P or 40, or 25006; not
    another SQLSTATE, nor this package's refusals, nor a bug. Django's errors
    are read through the psycopg error they wrap."""
    if isinstance(error, IdempotencyError):
        return False
    cause = error if isinstance(error, psycopg.Error) else error.__cause__
    if isinstance(cause, psycopg.Error):
        return cause.sqlstate is None or cause.sqlstate.startswith(_TRANSIENT)
    return isinstance(error, (OSError, TimeoutError))


def problem(settings: Settings, status: int, title: str, code: str, detail: str,
            headers: Mapping[str, str] | None = None) -> HttpResponse:
    """An RFC 9457 problem the middleware builds itself (rule 16), in the
    server's shape: type, title, status, code, detail, and a Link header
    naming the service's documentation when it has one."""
    body: dict[str, Any] = {"type": settings.docs_uri or "about:blank", "title": title, "status": status,
                            "code": code, "detail": detail}
    sent = {"Content-Type": "application/problem+json", **(headers or {})}
    if settings.docs_uri:
        sent["Link"] = f'<{settings.docs_uri}>; rel="describedby"'
    return HttpResponse(status, sent, body, json.dumps(body))


def unavailable(settings: Settings) -> HttpResponse:
    """Rule 14's 503: the store cannot be reached (built here, since the
    server is out of reach). The handler has not run, or its work was rolled
    back; should the commit have been cut off, the retry gets the replay."""
    return problem(settings, 503, "Service Unavailable", UNAVAILABLE_CODE,
                   "The idempotency store cannot be reached. Retry the request with the same Idempotency-Key.",
                   {"Retry-After": str(max(settings.retry_after, 1))})


def store_error(settings: Settings) -> HttpResponse:
    """Rule 15's 500: any other error of the store; nothing was recorded."""
    return problem(settings, 500, "Internal Server Error", STORE_ERROR_CODE,
                   "The idempotency store refused the request; nothing was recorded.")


def failure(settings: Settings, error: BaseException) -> HttpResponse:
    """The answer to an error of the store: 503 when unreachable, else 500."""
    return unavailable(settings) if unreachable(error) else store_error(settings)


def too_large(settings: Settings, limit: int) -> HttpResponse:
    """Rule 4's 413: the body is over the framework's limit; nothing was claimed."""
    return problem(settings, 413, "Content Too Large", "REQUEST_BODY_TOO_LARGE",
                   f"The request body is larger than {limit} bytes.")


def unreadable(settings: Settings) -> HttpResponse:
    """Rule 4's 400: the body could not be read; nothing was claimed."""
    return problem(settings, 400, "Bad Request", "UNREADABLE_REQUEST_BODY", "The request body could not be read.")
