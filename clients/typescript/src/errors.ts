// Errors this package raises itself. Errors the server raises reach the caller
// unchanged: node-postgres' DatabaseError, with its code (the SQLSTATE),
// message, detail and hint.

/** An error with a SQLSTATE, a message and a detail, shaped like node-postgres' DatabaseError. */
export class IdempotencyError extends Error {
  /** The SQLSTATE: the one the extension raises for the same input, or the class of what failed. */
  readonly code: string;
  /** Why it failed: the extension's detail, word for word, where the extension has one. */
  readonly detail: string | undefined;
  /** What to do about it. */
  readonly hint: string | undefined;

  // What failed (message), why (detail) and what to do (hint), with a SQLSTATE.
  constructor(code: string, message: string, detail?: string, hint?: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'IdempotencyError';
    this.code = code;
    this.detail = detail;
    this.hint = hint;
  }
}

/** The server's extension is missing, older than 1.0.0, or of an API major this package does not know. */
export class IncompatibleServerError extends IdempotencyError {
  // Raised by the first use of a connection, before anything else is sent on it.
  constructor(message: string, detail: string, hint?: string) {
    super('55000', message, detail, hint);
    this.name = 'IncompatibleServerError';
  }
}
