"""idempotency-pg: a typed layer over the idempotency extension's SQL
functions for psycopg 3, sync and async, with ASGI (FastAPI, Starlette) and
Django middleware in idempotency.asgi and idempotency.django."""

from ._version import __version__
from .errors import AttemptFinished, IdempotencyError, IncompatibleServer, InvalidArgument, TransactionRequired
from .http import Claim, HttpKey, HttpResponse, Settings
from .keys import mint, parse, validate_namespace
from .outcomes import (
    Fresh,
    InFlight,
    JsonText,
    Kind,
    Mismatch,
    Outcome,
    PriorError,
    PriorResult,
    ServerVersion,
    StoredError,
    outcome_from_row,
)
from .store import API_MAJOR, AsyncStore, Store

__all__ = [
    "API_MAJOR",
    "AsyncStore",
    "AttemptFinished",
    "Claim",
    "Fresh",
    "HttpKey",
    "HttpResponse",
    "IdempotencyError",
    "InFlight",
    "IncompatibleServer",
    "InvalidArgument",
    "JsonText",
    "Kind",
    "Mismatch",
    "Outcome",
    "PriorError",
    "PriorResult",
    "ServerVersion",
    "Settings",
    "Store",
    "StoredError",
    "TransactionRequired",
    "__version__",
    "mint",
    "outcome_from_row",
    "parse",
    "validate_namespace",
]
