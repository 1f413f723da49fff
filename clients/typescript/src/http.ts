// The one behaviour of the HTTP middleware (clients/README.md), without a
// framework: the key checked by idem_http_key, the request fingerprinted by the
// server, every answer but fresh built by idem_http_response, the handler's
// response recorded with idem_commit in the transaction of its claim.
import { createHash } from 'node:crypto';
import { IdempotencyError } from './errors.js';
import { validateNamespace } from './keys.js';
import { beginForHttp, checkServer, type Queryable, type ServerResponse } from './namespace.js';
import type { Fresh, RecordedError } from './outcome.js';

/** What the middleware needs of a node-postgres PoolClient. */
export interface PoolClientLike extends Queryable {
  release(err?: Error | boolean): void;
}

/** What the middleware needs of a node-postgres Pool. */
export interface PoolLike {
  connect(): Promise<PoolClientLike>;
}

/** Options shared by the Express middleware and the Fastify plugin. */
export interface IdempotencyOptions {
  /** The pool the middleware takes a connection from for each request's transaction. */
  pool: PoolLike;
  /** The namespace of the keys. */
  namespace: string;
  /** The URI of the service's documentation of these problems: their type, and a Link header. */
  docsUri?: string;
  /** Retry-After, in seconds, of a 409 whose holder has no lease, and of a 503 (default 1). */
  retryAfter?: number;
  /** false: a request without the header runs the handler without the store (default true: 400). */
  required?: boolean;
  /** The statuses recorded (default 2xx and 4xx); a 5xx is never recorded. */
  record?: (status: number) => boolean;
  /** The response headers recorded and replayed (default Content-Type and Location). */
  replayHeaders?: string[];
  /** Narrows the namespace's replay window for these requests (an interval, '1 day'). */
  replayWindow?: string;
  /** How long a begin waits for a holder before answering in_flight (an interval, '2 seconds'). */
  inFlightWait?: string;
  /** The methods it keys (default POST and PATCH); a request of another method passes through, without the store. */
  methods?: string[];
  /** Told each error the middleware answers with a 500 or 503 (default: console.error, with its SQLSTATE and detail). */
  onError?: (err: unknown) => void;
}

/** What the handler gets in the request: its transaction and its claim. */
export interface IdempotencyContext {
  readonly namespace: string;
  /** The key, as idem_http_key read it from the header. */
  readonly key: string;
  /** The connection, inside the transaction of the claim: the handler's writes go here. */
  readonly client: PoolClientLike;
  /** The fresh outcome. */
  readonly outcome: Fresh;
  /**
   * Records a refusal (idem_fail_permanent) instead of the response: below 500
   * the middleware commits it and answers the 422 every retry gets.
   */
  failPermanent(error: RecordedError): Promise<void>;
  /** Releases the key (idem_fail_transient): the handler's answer is sent after a rollback, and a retry runs it again. */
  failTransient(): Promise<void>;
}

/** A response: what a handler answered, or what the middleware answers instead. */
export interface HttpResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** The request as the fingerprint needs it. */
export interface HttpRequest {
  method: string;
  /** The route template the framework matched, or the path. */
  target: string;
  /** The Idempotency-Key field (undefined when absent). */
  header: string | undefined;
  /** The Content-Type field. */
  contentType: string | undefined;
  /** The body's bytes (null: no body), or its JSON text when a parser left only the parsed value. */
  body: Buffer | null;
}

/** What to do with a request: run the handler without the store, answer at once, or run it in the attempt. */
export type Prepared =
  | { readonly kind: 'skip' }
  | { readonly kind: 'respond'; readonly response: HttpResponse }
  | { readonly kind: 'run'; readonly attempt: Attempt };

const DEFAULT_METHODS = ['POST', 'PATCH'];
const DEFAULT_REPLAY_HEADERS = ['Content-Type', 'Location'];

/** 2xx and 4xx: what a handler decided. 5xx (and a thrown error) may go right on a retry. */
export function recordByDefault(status: number): boolean {
  return (status >= 200 && status < 300) || (status >= 400 && status < 500);
}

/** The options with their defaults, checked once when the middleware is made. */
export interface Settings {
  pool: PoolLike;
  namespace: string;
  docsUri: string | null;
  retryAfter: number;
  required: boolean;
  record: (status: number) => boolean;
  replayHeaders: string[];
  replayWindow: string | undefined;
  inFlightWait: string | undefined;
  methods: string[];
  onError: (err: unknown) => void;
}

/** Checks the options (the namespace as the extension would) and fills in the defaults. */
export function settings(options: IdempotencyOptions): Settings {
  if (!options || typeof options.pool?.connect !== 'function') {
    throw new TypeError('the idempotency middleware needs a pool: a node-postgres Pool (or anything with connect())');
  }
  validateNamespace(options.namespace);
  const retryAfter = options.retryAfter ?? 1;
  if (!Number.isInteger(retryAfter) || retryAfter < 0) throw new RangeError(`retryAfter is whole seconds, 0 or more, not ${retryAfter}`);
  return {
    pool: options.pool,
    namespace: options.namespace,
    docsUri: options.docsUri ?? null,
    retryAfter,
    required: options.required ?? true,
    record: options.record ?? recordByDefault,
    replayHeaders: options.replayHeaders ?? DEFAULT_REPLAY_HEADERS,
    replayWindow: options.replayWindow,
    inFlightWait: options.inFlightWait,
    methods: (options.methods ?? DEFAULT_METHODS).map((m) => m.toUpperCase()),
    onError: options.onError ?? logError,
  };
}

/** A route's template with each parameter written {name} (rule 6): :id and :id(\\d+) are {id}, *path {path}, a bare * {*}. */
export function routeTemplate(path: string): string {
  return path
    .replace(/:([A-Za-z_$][\w$]*)(\([^)]*\))?/g, '{$1}')
    .replace(/\*([A-Za-z_$][\w$]*)?/g, (_all, name: string | undefined) => `{${name ?? '*'}}`);
}

/** A request's path, percent-decoded, for a request no route template matched (rule 6). */
export function decodedPath(path: string): string {
  try {
    return decodeURIComponent(path);
  } catch {
    return path;
  }
}

/** True for application/json and any type whose subtype ends in +json. */
export function isJsonType(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const type = contentType.split(';')[0]!.trim().toLowerCase();
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}

// The JSON text of a body, or null when it is not JSON.
function jsonBody(contentType: string | undefined, body: Buffer): string | null {
  if (!isJsonType(contentType) || body.length === 0) return null;
  const text = body.toString('utf8');
  try {
    JSON.parse(text);
    return text;
  } catch {
    return null;
  }
}

/**
 * The request the server fingerprints, as JSON text: {"method", "target",
 * "body"}, the body as its own JSON text (the server parses it, numbers and
 * all), {"sha256": hex} when it is not JSON, null when there is none.
 */
export function fingerprintRequest(request: HttpRequest): string {
  let body = 'null';
  if (request.body !== null && request.body.length > 0) {
    body = jsonBody(request.contentType, request.body)
      ?? JSON.stringify({ sha256: createHash('sha256').update(request.body).digest('hex') });
  }
  return `{"method":${JSON.stringify(request.method.toUpperCase())},"target":${JSON.stringify(request.target)},"body":${body}}`;
}

/** A header of a response's headers, by any case of its name. */
export function headerValue(headers: Record<string, unknown>, name: string): string | undefined {
  const lower = name.toLowerCase();
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() === lower && v !== undefined && v !== null) return Array.isArray(v) ? v.join(', ') : String(v);
  }
  return undefined;
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * The response of idem_http_key or idem_http_response (rule 12): its status
 * and headers as they are, and its jsonb body as bytes: none for no body or a
 * recorded ""; the JSON text under a JSON Content-Type; a string under another
 * Content-Type, or none, decoded from base64 (the JSON text if it is not base64).
 */
export function fromServer(r: ServerResponse): HttpResponse {
  const headers = { ...r.headers };
  const value: unknown = r.body === null ? '' : JSON.parse(r.body);
  if (value === '') return { status: r.status, headers, body: Buffer.alloc(0) };
  if (typeof value === 'string' && !isJsonType(headerValue(headers, 'Content-Type')) && BASE64.test(value)) {
    return { status: r.status, headers, body: Buffer.from(value, 'base64') };
  }
  return { status: r.status, headers, body: Buffer.from(r.body!, 'utf8') };
}

/**
 * An RFC 9457 problem the middleware builds itself (rule 16), in the
 * server's shape: type, title, status, code, detail, and a Link header
 * naming the service's documentation when it has one.
 */
export function problem(s: Settings, status: number, title: string, code: string, detail: string,
  extra: Record<string, string> = {}): HttpResponse {
  const body = { type: s.docsUri ?? 'about:blank', title, status, code, detail };
  const headers: Record<string, string> = { 'Content-Type': 'application/problem+json', ...extra };
  if (s.docsUri) headers['Link'] = `<${s.docsUri}>; rel="describedby"`;
  return { status, headers, body: Buffer.from(JSON.stringify(body)) };
}

/** Rule 14's 503: the store cannot be reached (built here, since the server that builds problems is what failed). */
export function unavailable(s: Settings): HttpResponse {
  return problem(s, 503, 'Service Unavailable', 'IDEMPOTENCY_STORE_UNAVAILABLE',
    'The idempotency store cannot be reached. Retry the request with the same Idempotency-Key.',
    { 'Retry-After': String(Math.max(s.retryAfter, 1)) });
}

/** Rule 15's 500: any other error of the store; nothing was recorded. */
export function storeError(s: Settings): HttpResponse {
  return problem(s, 500, 'Internal Server Error', 'IDEMPOTENCY_STORE_ERROR',
    'The idempotency store refused the request; nothing was recorded.');
}

/** Rule 4's 413: the body is over the limit; nothing was claimed. */
export function tooLarge(s: Settings, limit: number): HttpResponse {
  return problem(s, 413, 'Content Too Large', 'REQUEST_BODY_TOO_LARGE', `The request body is larger than ${limit} bytes.`);
}

/** Rule 4's 400: the body could not be read; nothing was claimed. */
export function unreadable(s: Settings): HttpResponse {
  return problem(s, 400, 'Bad Request', 'UNREADABLE_REQUEST_BODY', 'The request body could not be read.');
}

/** A response rule 11 cannot record: a JSON Content-Type over a body that is not JSON. */
class NotRecordable extends IdempotencyError {
  // Says why: a replay could not give back the bytes that were sent.
  constructor() {
    super('22023', 'the response is not recorded: its Content-Type is JSON and its body is not JSON',
      'A replay of it could not give back the bytes that were sent.');
  }
}

/**
 * True for an error that says the store cannot serve now, so that a retry
 * may succeed (rule 13): an error without a SQLSTATE from the driver or a
 * socket (ECONNREFUSED, "Connection terminated", a pool's timeout), or a
 * server's SQLSTATE of class 08, 53, 57P or 40, or 25006. Not another
 * SQLSTATE, nor this package's refusals, nor a bug (TypeError and its kin).
 */
export function isConnectionError(err: unknown): boolean {
  if (err instanceof IdempotencyError || err instanceof TypeError || err instanceof RangeError
    || err instanceof SyntaxError || err instanceof ReferenceError) return false;
  const server = err as { code?: unknown; severity?: unknown };
  if (typeof server?.severity !== 'string' || typeof server.code !== 'string') return true;   // not the server's answer
  return ['08', '53', '57P', '40', '25006'].some((prefix) => (server.code as string).startsWith(prefix));
}

/** The answer to an error of the store: 503 when it cannot be reached (rule 14), else 500 (rule 15). */
export function failure(s: Settings, err: unknown): HttpResponse {
  return isConnectionError(err) ? unavailable(s) : storeError(s);
}

// The default onError: one line with the error's message, SQLSTATE and detail where the server gave them.
function logError(err: unknown): void {
  const e = err as { code?: unknown; message?: unknown; detail?: unknown };
  console.error(`idempotency: the store failed: ${String(e?.message ?? err)}`
    + (typeof e?.code === 'string' ? ` (SQLSTATE ${e.code})` : '') + (typeof e?.detail === 'string' ? ` DETAIL: ${e.detail}` : ''));
}

/**
 * Decides a request: no store (a method not covered, an optional header
 * absent), an answer at once (400, a replay, 409, 422, 503, 500), or a fresh
 * claim whose handler runs in the attempt's transaction.
 */
export async function prepare(s: Settings, request: HttpRequest): Promise<Prepared> {
  if (!covers(s, request.method) || (request.header === undefined && !s.required)) return { kind: 'skip' };
  let client: PoolClientLike;
  try {
    client = await s.pool.connect();
  } catch (err) {
    const response = failure(s, err);
    s.onError(err);
    return { kind: 'respond', response };
  }
  let inTransaction = false;
  try {
    await checkServer(client);
    const { rows: [h] } = await client.query(
      'SELECT key, status::text AS status, headers::text AS headers, body::text AS body FROM idempotency.idem_http_key($1, $2, $3)',
      [s.namespace, request.header ?? null, s.docsUri]);
    if (h.key === null) {
      client.release();
      return { kind: 'respond', response: fromServer({ status: Number(h.status), headers: JSON.parse(h.headers), body: h.body }) };
    }
    await client.query('BEGIN');
    inTransaction = true;
    const { outcome, response } = await beginForHttp(client, s.namespace, h.key, fingerprintRequest(request),
      { replayWindow: s.replayWindow, inFlightWait: s.inFlightWait, retryAfter: s.retryAfter, docsUri: s.docsUri });
    if (outcome.kind !== 'fresh') {
      await client.query('ROLLBACK');
      client.release();
      return { kind: 'respond', response: fromServer(response!) };
    }
    return { kind: 'run', attempt: new Attempt(s, client, h.key as string, outcome) };
  } catch (err) {
    const lost = isConnectionError(err);
    if (inTransaction && !lost) await client.query('ROLLBACK').catch(() => undefined);
    client.release(lost ? (err as Error) : undefined);
    const response = failure(s, err);
    s.onError(err);
    return { kind: 'respond', response };
  }
}

/** Whether the middleware keys requests of this method (rule 1). */
export function covers(s: Settings, method: string): boolean {
  return s.methods.includes(method.toUpperCase());
}

/** A fresh claim: the handler runs in its transaction; finish records the response, or rolls back. */
export class Attempt {
  readonly context: IdempotencyContext;
  // How the handler ended the attempt (rules 17 to 20); done once finish or abandon ended the transaction.
  private state: 'open' | 'refused' | 'released' | 'done' = 'open';
  private refusal: RecordedError | null = null;

  constructor(private readonly s: Settings, private readonly client: PoolClientLike, readonly key: string, readonly outcome: Fresh) {
    const attempt = this;
    // The handler's view of the connection: it cannot release it, nor use it once the attempt is over.
    const guarded = new Proxy(client, {
      get(target, prop, receiver) {
        if (prop === 'release') {
          return () => { throw new IdempotencyError('55000', 'the idempotency middleware releases this connection', 'The handler must not release the connection of its attempt.'); };
        }
        if (prop === 'query') {
          return (...args: unknown[]) => {
            if (attempt.state === 'done') {
              throw new IdempotencyError('25P01', 'the idempotency attempt is over', 'Its transaction was committed or rolled back when the response was sent; this connection went back to the pool.');
            }
            return (target.query as (...a: unknown[]) => unknown).apply(target, args);
          };
        }
        const value = Reflect.get(target, prop, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    this.context = {
      namespace: s.namespace,
      key,
      client: guarded,
      outcome,
      failPermanent: async (error: RecordedError) => {
        this.startEnding('refused', error);
        await client.query('SELECT idempotency.idem_fail_permanent($1, $2, $3::jsonb, $4::bigint)',
          [s.namespace, key, JSON.stringify(error), String(outcome.fence)]).catch((err: unknown) => this.undoEnding(err));
      },
      failTransient: async () => {
        this.startEnding('released', null);
        await client.query('SELECT idempotency.idem_fail_transient($1, $2, $3::bigint)', [s.namespace, key, String(outcome.fence)])
          .catch((err: unknown) => this.undoEnding(err));
      },
    };
  }

  // Takes the handler's one ending before its call reaches the server (rule 20).
  private startEnding(how: 'refused' | 'released', refusal: RecordedError | null): void {
    if (this.state !== 'open') {
      const detail = this.state === 'done'
        ? 'The middleware has finished it: the answer was recorded or rolled back with its transaction.'
        : `${this.state === 'refused' ? 'failPermanent' : 'failTransient'} ended it already: a handler ends its attempt once.`;
      throw new IdempotencyError('55000', 'the idempotency attempt is already finished', detail);
    }
    this.state = how;
    this.refusal = refusal;
  }

  // The server refused the call: the attempt stays open (rule 17), and the handler gets the error.
  private undoEnding(err: unknown): never {
    if (this.state !== 'done') {
      this.state = 'open';
      this.refusal = null;
    }
    throw err;
  }

  /** True until finish or abandon ended the transaction. */
  get open(): boolean {
    return this.state !== 'done';
  }

  /**
   * Ends the attempt once the handler answered, by its status however the
   * framework reached it (rule 10): records the response and commits (2xx and
   * 4xx by default), or rolls back (a 5xx, a status not recorded). A refusal
   * the handler recorded is committed below 500 and answered with its 422; a
   * key it released is rolled back (rules 18 and 19). Answers null to send the
   * handler's response, or the response to send instead (that 422, or 503 or
   * 500 when the store failed).
   */
  async finish(response: HttpResponse): Promise<HttpResponse | null> {
    if (this.state === 'done') return null;
    const ended = this.state;
    this.state = 'done';
    const client = this.client;
    if (ended === 'released' || response.status >= 500 || (ended === 'open' && !this.s.record(response.status))) {
      await this.rollback();
      return null;
    }
    let refused: HttpResponse | null = null;
    try {
      if (ended === 'refused') {
        refused = await this.refusalResponse();
      } else {
        await client.query('SELECT idempotency.idem_commit($1, $2, $3::jsonb, $4::bigint)',
          [this.s.namespace, this.key, this.result(response), String(this.outcome.fence)]);
      }
    } catch (err) {
      const instead = failure(this.s, err);
      this.s.onError(err);
      if (isConnectionError(err)) client.release(err as Error);
      else await this.rollback();
      return instead;
    }
    try {
      await client.query('COMMIT');
    } catch (err) {
      // A failed COMMIT rolled the work back with the claim (or, cut off, may have committed: the retry replays it).
      client.release(isConnectionError(err) ? (err as Error) : undefined);
      const instead = failure(this.s, err);
      this.s.onError(err);
      return instead;
    }
    client.release();
    return refused;
  }

  // The 422 idem_http_response builds for the recorded refusal's prior_error
  // outcome: what every retry gets, without Idempotency-Replayed (rule 18).
  private async refusalResponse(): Promise<HttpResponse> {
    const { rows: [r] } = await this.client.query(
      `SELECT status, headers::text AS headers, body::text AS body FROM idempotency.idem_http_response(
         jsonb_populate_record(NULL::idempotency.idem_outcome, jsonb_build_object('kind', 'prior_error', 'error', $1::jsonb)),
         $2, $3)`,
      [JSON.stringify(this.refusal), this.s.retryAfter, this.s.docsUri]);
    const headers = JSON.parse(r.headers) as Record<string, string>;
    for (const name of Object.keys(headers)) if (name.toLowerCase() === 'idempotency-replayed') delete headers[name];
    return fromServer({ status: Number(r.status), headers, body: r.body });
  }

  /** Rolls back an attempt whose handler never answered (the request ended without a response). */
  async abandon(): Promise<void> {
    if (this.state === 'done') return;
    this.state = 'done';
    await this.rollback();
  }

  private async rollback(): Promise<void> {
    try {
      await this.client.query('ROLLBACK');
      this.client.release();
    } catch (err) {
      this.client.release(err as Error);
    }
  }

  // {"status", "headers", "body"} as JSON text (rule 11): "" for no body, the
  // JSON body as its own text under a JSON Content-Type, any other in base64.
  // A JSON Content-Type over a body that is not JSON is refused (NotRecordable).
  private result(response: HttpResponse): string {
    const headers: Record<string, string> = {};
    for (const name of this.s.replayHeaders) {
      const value = headerValue(response.headers, name);
      if (value !== undefined) headers[name] = value;
    }
    const contentType = headerValue(response.headers, 'Content-Type');
    let body = '""';
    if (response.body.length > 0 && isJsonType(contentType)) {
      const json = jsonBody(contentType, response.body);
      if (json === null) throw new NotRecordable();
      body = json;
    } else if (response.body.length > 0) {
      body = JSON.stringify(response.body.toString('base64'));
    }
    return `{"status":${response.status},"headers":${JSON.stringify(headers)},"body":${body}}`;
  }
}
