"""HTTP answers and the middleware's shared rules (clients/README.md): which
requests it covers, the request it fingerprints, the response it records, and
the 503 it answers when the store cannot be reached.

The server decides everything else: idem_http_key checks the header,
idem_begin hashes the request, idem_http_response builds every replay, 409 and
422 (Store.http_key, Store.http_response)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Generic, TypeVar

from .keys import validate_namespace
from .outcomes import Fresh, JsonText

C = TypeVar("C")

DEFAULT_METHODS = frozenset({"POST", "PATCH"})
DEFAULT_REPLAY_HEADERS = ("Content-Type", "Location")
UNAVAILABLE_CODE = "IDEMPOTENCY_STORE_UNAVAILABLE"


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
        """The body's bytes: the JSON text when the Content-Type is JSON; else
        the recorded base64 string decoded (as the middleware records a body
        that is not JSON)."""
        if self.body_text is None:
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
        run without the store)."""

    namespace: str
    docs_uri: str | None = None
    retry_after: int = 1
    methods: Collection[str] = DEFAULT_METHODS
    record: Callable[[int], bool] = record_2xx_4xx
    replay_headers: Collection[str] = DEFAULT_REPLAY_HEADERS
    optional: Collection[str] = frozenset()
    _methods: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Checks the namespace with the extension's rules, at start-up rather than per request."""
        validate_namespace(self.namespace)
        if isinstance(self.retry_after, bool) or not isinstance(self.retry_after, int) or self.retry_after < 0:
            raise ValueError(f"retry_after is zero or more seconds, not {self.retry_after!r}")
        object.__setattr__(self, "_methods", frozenset(m.upper() for m in self.methods))

    def covers(self, method: str) -> bool:
        """Whether requests of this method go through the store."""
        return method.upper() in self._methods


@dataclass(frozen=True, slots=True)
class Claim(Generic[C]):
    """The claim the middleware made for the running handler: the connection
    whose transaction holds it (use it for the handler's own writes, and never
    commit or roll it back), the key and the fresh outcome."""

    connection: C
    namespace: str
    key: str
    outcome: Fresh

    @property
    def fence(self) -> int:
        """The fence the claim's commit passes."""
        return self.outcome.fence


def _refused_by_jsonb(value: Any) -> bool:
    """Whether a parsed JSON value holds a string jsonb cannot (U+0000, a lone surrogate)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item or any("\ud800" <= c <= "\udfff" for c in item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _refuse_constant(name: str) -> Any:
    """NaN and Infinity are not JSON."""
    raise ValueError(f"{name} is not JSON")


def json_text(body: bytes) -> JsonText | None:
    """The body as JSON text when it is JSON that jsonb accepts, else None.
    The text goes to the server as it is: numbers keep their exact form."""
    try:
        text = body.decode("utf-8")
        value = json.loads(text, parse_float=Decimal, parse_int=Decimal, parse_constant=_refuse_constant)
    except ValueError:
        return None
    return None if _refused_by_jsonb(value) else JsonText(text)


def request_fingerprint(method: str, target: str, body: bytes) -> JsonText:
    """The request idem_begin hashes: {"method", "target", "body"}, the body
    as its JSON, or {"sha256": hex} when it is not JSON, or null when empty."""
    if body == b"":
        body_json = "null"
    else:
        body_json = json_text(body) or json.dumps({"sha256": hashlib.sha256(body).hexdigest()})
    method_json, target_json = json.dumps(method.upper()), json.dumps(target, ensure_ascii=False)
    return JsonText(f'{{"method":{method_json},"target":{target_json},"body":{body_json}}}')


def recorded_response(status: int, headers: Iterable[tuple[str, str]], body: bytes,
                      replay_headers: Collection[str]) -> JsonText:
    """The result committed for an answer: {"status", "headers", "body"} with
    the replayed headers (as replay_headers spells them; repeated ones joined
    with ", "), and the body as JSON when the recorded Content-Type is JSON and
    the body is JSON, else as a base64 string."""
    spelled = {name.lower(): name for name in replay_headers}
    kept: dict[str, str] = {}
    for name, value in headers:
        canonical = spelled.get(name.lower())
        if canonical is not None:
            kept[canonical] = f"{kept[canonical]}, {value}" if canonical in kept else value
    body_json = json_text(body) if is_json_media_type(header(kept, "Content-Type")) else None
    if body_json is None:
        body_json = JsonText(json.dumps(base64.b64encode(body).decode("ascii")))
    headers_json = json.dumps(kept, ensure_ascii=False)
    return JsonText(f'{{"status":{int(status)},"headers":{headers_json},"body":{body_json}}}')


def unavailable(settings: Settings) -> HttpResponse:
    """The 503 answered when the store cannot be reached (the database cannot
    be connected to, or a statement, the claim or the commit fails): an RFC
    9457 problem in the server's shape, built here since the server is out
    of reach. The handler has not run, or its work was rolled back."""
    problem: dict[str, Any] = {
        "type": settings.docs_uri or "about:blank",
        "title": "Service Unavailable",
        "status": 503,
        "code": UNAVAILABLE_CODE,
        "detail": "The idempotency store cannot be reached: the request was not carried out. Retry it later.",
    }
    headers = {"Content-Type": "application/problem+json", "Retry-After": str(max(settings.retry_after, 1))}
    if settings.docs_uri:
        headers["Link"] = f'<{settings.docs_uri}>; rel="describedby"'
    text = json.dumps(problem)
    return HttpResponse(503, headers, problem, text)
