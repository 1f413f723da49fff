"""What idem_begin answers, as typed values mapped from its row by column name.

The five kinds are a closed set: match on the classes (or on .kind) and let
mypy check the match is exhaustive with typing.assert_never."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, Literal, TypeAlias

from .errors import IncompatibleServer


@dataclass(frozen=True, slots=True)
class Fresh:
    """This transaction holds the key: do the work, then commit (or fail) it
    with this fence in the same transaction."""

    fence: int
    attempt: int
    takeover: bool
    lease_ends_at: datetime | None
    recovery_point: str | None
    recovery_state: Any
    submitted_hash: bytes
    kind: ClassVar[Literal["fresh"]] = "fresh"


@dataclass(frozen=True, slots=True)
class InFlight:
    """Another transaction holds the key; age is how long ago it claimed it
    (None for a claim held by its lock), lease_ends_at when its lease ends."""

    age: timedelta | None
    lease_ends_at: datetime | None
    submitted_hash: bytes
    kind: ClassVar[Literal["in_flight"]] = "in_flight"


@dataclass(frozen=True, slots=True)
class PriorResult:
    """The key was committed with this result (a replay)."""

    result: Any
    submitted_hash: bytes
    kind: ClassVar[Literal["prior_result"]] = "prior_result"


@dataclass(frozen=True, slots=True)
class StoredError:
    """A permanent failure as idem_fail_permanent records it."""

    class_tag: str
    message: str
    cause: str | None = None

    def to_json(self) -> dict[str, str]:
        """The error as the jsonb object idem_fail_permanent takes."""
        value = {"class_tag": self.class_tag, "message": self.message}
        if self.cause is not None:
            value["cause"] = self.cause
        return value


@dataclass(frozen=True, slots=True)
class PriorError:
    """The key failed for good with this error (a replay)."""

    error: StoredError
    submitted_hash: bytes
    kind: ClassVar[Literal["prior_error"]] = "prior_error"


@dataclass(frozen=True, slots=True)
class Mismatch:
    """The key was used with another request: rejected, never overwritten.
    recorded_request is None when the namespace does not store requests."""

    recorded_hash: bytes
    submitted_hash: bytes
    recorded_request: Any
    kind: ClassVar[Literal["mismatch"]] = "mismatch"


Outcome: TypeAlias = Fresh | InFlight | PriorResult | PriorError | Mismatch
Kind: TypeAlias = Literal["fresh", "in_flight", "prior_result", "prior_error", "mismatch"]

# The columns of idem_outcome this package reads, by name; a later release
# adds columns at the end, which are neither selected nor needed.
OUTCOME_COLUMNS = ("kind", "result", "error", "recorded_request", "recorded_hash", "submitted_hash", "attempt",
                   "age", "fence", "lease_ends_at", "takeover", "recovery_point", "recovery_state")


def _bytes(value: Any) -> bytes:
    """A bytea column as bytes (psycopg gives bytes or memoryview)."""
    return bytes(value) if value is not None else b""


def outcome_from_row(row: Mapping[str, Any]) -> Outcome:
    """Maps a row of idem_begin by column name; columns it does not know are ignored."""
    kind = row["kind"]
    submitted = _bytes(row.get("submitted_hash"))
    if kind == "fresh":
        return Fresh(fence=int(row["fence"]), attempt=int(row["attempt"]), takeover=bool(row.get("takeover")),
                     lease_ends_at=row.get("lease_ends_at"), recovery_point=row.get("recovery_point"),
                     recovery_state=row.get("recovery_state"), submitted_hash=submitted)
    if kind == "in_flight":
        return InFlight(age=row.get("age"), lease_ends_at=row.get("lease_ends_at"), submitted_hash=submitted)
    if kind == "prior_result":
        return PriorResult(result=row.get("result"), submitted_hash=submitted)
    if kind == "prior_error":
        error = row.get("error") or {}
        return PriorError(error=StoredError(class_tag=error.get("class_tag", ""), message=error.get("message", ""),
                                            cause=error.get("cause")),
                          submitted_hash=submitted)
    if kind == "mismatch":
        return Mismatch(recorded_hash=_bytes(row.get("recorded_hash")), submitted_hash=submitted,
                        recorded_request=row.get("recorded_request"))
    raise IncompatibleServer(f"idem_begin answered the kind {kind!r}, which API 1 does not have")


def _interval(value: timedelta) -> str:
    """A timedelta as PostgreSQL interval input."""
    return f"{value.days} days {value.seconds} seconds {value.microseconds} microseconds"


def outcome_to_json(outcome: Outcome) -> dict[str, Any]:
    """The outcome as a JSON object that jsonb_populate_record turns back
    into an idem_outcome (for idem_http_response); unset columns are NULL."""
    value: dict[str, Any] = {"kind": outcome.kind, "submitted_hash": "\\x" + outcome.submitted_hash.hex()}
    if isinstance(outcome, Fresh):
        value.update(fence=outcome.fence, attempt=outcome.attempt, takeover=outcome.takeover,
                     recovery_point=outcome.recovery_point, recovery_state=outcome.recovery_state)
        if outcome.lease_ends_at is not None:
            value["lease_ends_at"] = outcome.lease_ends_at.isoformat()
    elif isinstance(outcome, InFlight):
        if outcome.age is not None:
            value["age"] = _interval(outcome.age)
        if outcome.lease_ends_at is not None:
            value["lease_ends_at"] = outcome.lease_ends_at.isoformat()
    elif isinstance(outcome, PriorResult):
        value["result"] = outcome.result
    elif isinstance(outcome, PriorError):
        value["error"] = outcome.error.to_json()
    else:
        value.update(recorded_hash="\\x" + outcome.recorded_hash.hex(), recorded_request=outcome.recorded_request)
    return value


@dataclass(frozen=True, slots=True)
class ServerVersion:
    """idem_version(): the edition (native or portable), release and API."""

    edition: str
    version: str
    api: str


class JsonText(str):
    """JSON text sent to a jsonb parameter as it is (the server parses it),
    so that numbers keep their exact form: a request body, a recorded response."""

    __slots__ = ()

    @classmethod
    def of(cls, value: Any) -> JsonText:
        """JSON text of a Python value."""
        return cls(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
