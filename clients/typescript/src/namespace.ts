// The typed layer over the store's SQL functions, on a client the caller holds
// inside BEGIN: this package never opens, commits or rolls back the caller's
// transaction. At first use of a connection it checks idem_version().
import { IdempotencyError, IncompatibleServerError } from './errors.js';
import { mint, parse, validateNamespace } from './keys.js';
import { OUTCOME_COLUMNS, outcomeFromRow, type Fresh, type Json, type Outcome, type OutcomeRow, type RecordedError } from './outcome.js';

/** What the package needs of a node-postgres Client or PoolClient. */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rows: any[]; rowCount?: number | null }>;
  /** node-postgres 8.21 and later: 'I' idle (autocommit), 'T' in a transaction block, 'E' failed. */
  getTransactionStatus?(): string | null;
}

/** The server's idem_version(). */
export interface ServerVersion {
  edition: string;
  version: string;
  api: string;
}

/** The API major this package speaks. */
export const API_MAJOR = 1;

const PACKAGE = '@idempotency/pg';
const checked = new WeakMap<object, Promise<ServerVersion>>();

/**
 * The server's idem_version(), asked once per connection and refused when its
 * API major is not 1, or when the extension is missing or older than 1.0.0.
 * It sends nothing that can fail inside the caller's transaction.
 */
export function checkServer(client: Queryable): Promise<ServerVersion> {
  let check = checked.get(client);
  if (!check) {
    check = askServer(client);
    checked.set(client, check);
    // Only a compatible answer is kept: after ALTER EXTENSION ... UPDATE, the next call asks again.
    check.catch(() => checked.delete(client));
  }
  return check;
}

async function askServer(client: Queryable): Promise<ServerVersion> {
  const { rows: [found] } = await client.query(
    `SELECT to_regprocedure('idempotency.idem_version()') IS NOT NULL AS has_version,
            (SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'idempotency') AS extversion`);
  if (!found.has_version) {
    if (found.extversion === null) {
      throw new IncompatibleServerError('the idempotency extension is not installed in this database',
        `${PACKAGE} found neither the extension idempotency nor the function idempotency.idem_version().`,
        "Run CREATE EXTENSION idempotency, or, on a managed PostgreSQL that cannot load it, the portable edition's script (docs/managed.md).");
    }
    throw new IncompatibleServerError(`the idempotency extension ${found.extversion} is older than 1.0.0`,
      `It has no idempotency.idem_version(), which ${PACKAGE} (API major ${API_MAJOR}) asks at first use.`,
      'Run ALTER EXTENSION idempotency UPDATE.');
  }
  const { rows: [v] } = await client.query('SELECT edition, version, api FROM idempotency.idem_version()');
  const server: ServerVersion = { edition: String(v.edition), version: String(v.version), api: String(v.api) };
  if (Number(server.api.split('.')[0]) !== API_MAJOR) {
    throw new IncompatibleServerError(`the idempotency extension's API ${server.api} is not one ${PACKAGE} knows`,
      `The server has the ${server.edition} edition ${server.version}, API ${server.api}; ${PACKAGE} knows API major ${API_MAJOR}.`,
      `Use a release of ${PACKAGE} made for API ${server.api.split('.')[0]}.`);
  }
  return server;
}

/** Refuses a client in autocommit mode, where a fresh claim would be committed unfinished by its own statement. */
function requireTransaction(client: Queryable): void {
  const status = typeof client.getTransactionStatus === 'function' ? client.getTransactionStatus() : null;
  if (status === 'I') {
    throw new IdempotencyError('25P01', 'idem_begin needs a transaction block',
      'The connection is in autocommit mode: the claim would be committed by its own statement, unfinished.',
      'Send BEGIN on this client and wait for it, then begin, do the work and finish the attempt before COMMIT.');
  }
}

/** Options of a begin: each may only narrow what the namespace allows. */
export interface BeginOptions {
  /** An interval, such as '1 day': records older than this answer fresh. */
  replayWindow?: string;
  /** An interval, such as '2 seconds': how long to wait for a holder before answering in_flight. */
  inFlightWait?: string;
}

/** The HTTP response idem_http_response built for an outcome that needs no work. */
export interface ServerResponse {
  status: number;
  headers: Record<string, string>;
  /** The body as jsonb text, or null when the response has none. */
  body: string | null;
}

// JSON text for a jsonb parameter: node-postgres would send an array as a PostgreSQL array.
function jsonText(value: unknown): string | null {
  const text = JSON.stringify(value);
  return text === undefined ? null : text;
}

// A fence as the text of a bigint parameter, never through a Number.
function fenceText(fence: bigint | string): string {
  if (typeof fence !== 'bigint' && typeof fence !== 'string') {
    throw new TypeError(`a fence is a bigint (or its decimal string), not a ${typeof fence}: a number would lose digits`);
  }
  return String(fence);
}

/** begin with the response idem_http_response gives for anything but fresh (the middleware's one statement). */
export async function beginForHttp(client: Queryable, namespace: string, key: string, requestJson: string,
  options: BeginOptions & { retryAfter: number; docsUri: string | null }): Promise<{ outcome: Outcome; response: ServerResponse | null }> {
  await checkServer(client);
  requireTransaction(client);
  const { rows: [row] } = await client.query(
    `SELECT ${OUTCOME_COLUMNS}, r.status::text AS http_status, r.headers::text AS http_headers, r.body::text AS http_body
       FROM idempotency.idem_begin($1, $2, $3::jsonb, $4::interval, $5::interval) o
       LEFT JOIN LATERAL idempotency.idem_http_response(CASE WHEN o.kind <> 'fresh' THEN o END, $6, $7) r ON true`,
    [namespace, key, requestJson, options.replayWindow ?? null, options.inFlightWait ?? null, options.retryAfter, options.docsUri]);
  const outcome = outcomeFromRow(row as OutcomeRow);
  const response = row.http_status === null ? null : {
    status: Number(row.http_status),
    headers: JSON.parse(row.http_headers ?? '{}') as Record<string, string>,
    body: row.http_body as string | null,
  };
  return { outcome, response };
}

/**
 * One namespace of the store, on the caller's connection and transaction.
 * The key functions (mint, parse) run here, without a round trip.
 */
export class Namespace {
  readonly name: string;

  // Checks the namespace at once, as the extension would.
  constructor(name: string) {
    validateNamespace(name);
    this.name = name;
  }

  /** idem_mint: a deterministic key from the natural key's parts. */
  mint(parts: ReadonlyArray<string | null>): string {
    return mint(this.name, parts);
  }

  /** idem_parse: a caller's key, trimmed and checked (null for null). */
  parse(raw: string | null | undefined): string | null {
    return parse(this.name, raw);
  }

  /**
   * idem_begin in the caller's transaction; the server fingerprints the request.
   * Refuses a client outside BEGIN (SQLSTATE 25P01).
   */
  async begin(client: Queryable, key: string, request: unknown, options: BeginOptions = {}): Promise<Outcome> {
    await checkServer(client);
    requireTransaction(client);
    const { rows: [row] } = await client.query(
      `SELECT ${OUTCOME_COLUMNS} FROM idempotency.idem_begin($1, $2, $3::jsonb, $4::interval, $5::interval) o`,
      [this.name, key, jsonText(request), options.replayWindow ?? null, options.inFlightWait ?? null]);
    return outcomeFromRow(row as OutcomeRow);
  }

  /** idem_commit: records the result of the fresh attempt with its fence. */
  async commit(client: Queryable, key: string, result: unknown, fence: bigint | string): Promise<void> {
    await checkServer(client);
    await client.query('SELECT idempotency.idem_commit($1, $2, $3::jsonb, $4::bigint)',
      [this.name, key, jsonText(result), fenceText(fence)]);
  }

  /** idem_fail_permanent: records a refusal that every retry gets again. */
  async failPermanent(client: Queryable, key: string, error: RecordedError, fence: bigint | string): Promise<void> {
    await checkServer(client);
    await client.query('SELECT idempotency.idem_fail_permanent($1, $2, $3::jsonb, $4::bigint)',
      [this.name, key, jsonText(error), fenceText(fence)]);
  }

  /** idem_fail_transient: releases the key (the transaction's other writes stay); the retry starts fresh. */
  async failTransient(client: Queryable, key: string, fence: bigint | string): Promise<void> {
    await checkServer(client);
    await client.query('SELECT idempotency.idem_fail_transient($1, $2, $3::bigint)', [this.name, key, fenceText(fence)]);
  }

  /** idem_extend_lease: a holder's heartbeat; answers when the lease now ends. */
  async extendLease(client: Queryable, key: string, fence: bigint | string): Promise<Date> {
    await checkServer(client);
    const { rows: [row] } = await client.query(
      'SELECT (extract(epoch FROM idempotency.idem_extend_lease($1, $2, $3::bigint)) * 1000)::text AS ends',
      [this.name, key, fenceText(fence)]);
    return new Date(Number(row.ends));
  }

  /** idem_save_point: how far the work got, which a takeover's fresh outcome carries. */
  async savePoint(client: Queryable, key: string, point: string, state: Json, fence: bigint | string): Promise<Date> {
    await checkServer(client);
    const { rows: [row] } = await client.query(
      'SELECT (extract(epoch FROM idempotency.idem_save_point($1, $2, $3, $4::jsonb, $5::bigint)) * 1000)::text AS at',
      [this.name, key, point, jsonText(state), fenceText(fence)]);
    return new Date(Number(row.at));
  }
}

export type { Fresh };
