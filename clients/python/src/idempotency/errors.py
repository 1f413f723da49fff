"""The errors this package raises itself.

Errors the server raises reach the caller unchanged, as psycopg's own
exceptions (psycopg.Error: sqlstate, diag.message_primary,
diag.message_detail, diag.message_hint); the ones below are raised without
a round trip, with the same SQLSTATE, message and detail the server gives
where it has an answer of its own."""

from __future__ import annotations


class IdempotencyError(Exception):
    """An error of this package: the SQLSTATE (when the server has one for
    it), the message, and the detail and hint as the server writes them."""

    def __init__(self, message: str, detail: str | None = None, hint: str | None = None,
                 sqlstate: str | None = None) -> None:
        """Keeps the parts apart, as psycopg's diag does for the server's errors."""
        super().__init__(message)
        self.message = message
        self.detail = detail
        self.hint = hint
        self.sqlstate = sqlstate

    def __str__(self) -> str:
        """The message, then DETAIL and HINT lines, as psycopg prints a server error."""
        lines = [self.message]
        if self.detail:
            lines.append(f"DETAIL:  {self.detail}")
        if self.hint:
            lines.append(f"HINT:  {self.hint}")
        return "\n".join(lines)


class InvalidArgument(IdempotencyError):
    """A namespace, key or key part that breaks the extension's rules
    (SQLSTATE 22023, with idem_parse's and idem_mint's message and detail)."""

    def __init__(self, message: str, detail: str) -> None:
        """An error with the extension's message and detail."""
        super().__init__(message, detail, sqlstate="22023")


class IncompatibleServer(IdempotencyError):
    """The database's idempotency extension is missing, older than 1.0.0, or
    of an API major this package does not know."""


class TransactionRequired(IdempotencyError):
    """begin was given a connection in autocommit mode outside a transaction
    block, where its claim would be committed unfinished by its own statement."""


class AttemptFinished(IdempotencyError):
    """A handler ended its attempt a second time, or after the middleware had
    finished it (SQLSTATE 55000, clients/README.md rule 20)."""

    def __init__(self, detail: str) -> None:
        """The shared message, and what ended the attempt."""
        super().__init__("the idempotency attempt is already finished", detail, sqlstate="55000")
