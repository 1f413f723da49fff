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
  /** Where the middleware is mounted for every route (Express app.use, a Fastify global plugin): the methods it keys (default POST and PATCH). */
  methods?: string[];
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
  /** Records a refusal (idem_fail_permanent) instead of the response: every retry gets a 422 with it. */
  failPermanent(error: RecordedError): Promise<void>;
  /** Releases the key (idem_fail_transient) and keeps the handler's writes: the retry starts fresh. */
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
  };
}

/** /payments/:id as /payments/{id}: the template's parameters named as in the shared contract. */
export function routeTemplate(path: string): string {
  return path.replace(/:([A-Za-z_$][\w$]*)(\([^)]*\))?/g, '{$1}');
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

/** The response of idem_http_key or idem_http_response, its jsonb body as bytes (base64 decoded for a recorded non-JSON body). */
export function fromServer(r: ServerResponse): HttpResponse {
  const headers = { ...r.headers };
  if (r.body === null) return { status: r.status, headers, body: Buffer.alloc(0) };
  const contentType = headerValue(headers, 'Content-Type');
  if (contentType === undefined) {
    headers['Content-Type'] = 'application/json';
  } else if (!isJsonType(contentType)) {
    const value: unknown = JSON.parse(r.body);
    if (typeof value === 'string') return { status: r.status, headers, body: Buffer.from(value, 'base64') };
  }
  return { status: r.status, headers, body: Buffer.from(r.body, 'utf8') };
}

/** The 503 of a store that cannot be reached: built here, since the database that builds problems is what failed. */
export function unavailable(s: Settings, detail: string): HttpResponse {
  const problem: Record<string, unknown> = {
    type: s.docsUri ?? 'about:blank', title: 'Service Unavailable', status: 503,
    code: 'IDEMPOTENCY_STORE_UNAVAILABLE', detail,
  };
  const headers: Record<string, string> = { 'Content-Type': 'application/problem+json', 'Retry-After': String(Math.max(s.retryAfter, 1)) };
  if (s.docsUri) headers['Link'] = `<${s.docsUri}>; rel="describedby"`;
  return { status: 503, headers, body: Buffer.from(JSON.stringify(problem)) };
}

// The 500 of a response the store refused to record: nothing was done, and a retry would be refused again.
function notRecorded(s: Settings, err: unknown): HttpResponse {
  const problem = {
    type: s.docsUri ?? 'about:blank', title: 'Internal Server Error', status: 500,
    code: 'IDEMPOTENCY_RESPONSE_NOT_RECORDED',
    detail: `The response could not be recorded, so nothing was done: ${(err as Error)?.message ?? String(err)}`,
  };
  return { status: 500, headers: { 'Content-Type': 'application/problem+json' }, body: Buffer.from(JSON.stringify(problem)) };
}

/**
 * True for an error that says the database cannot be reached: a SQLSTATE of
 * class 08, 57P0x or 53300, or a socket's error (ECONNREFUSED, "Connection
 * terminated"), which has none; not a bug (TypeError and its kin), nor this package's refusals.
 */
export function isConnectionError(err: unknown): boolean {
  if (err instanceof IdempotencyError || err instanceof TypeError || err instanceof RangeError
    || err instanceof SyntaxError || err instanceof ReferenceError) return false;
  const code = (err as { code?: unknown })?.code;
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return true;
  return code.startsWith('08') || code.startsWith('57P') || code === '53300';
}

/**
 * Decides a request: no store (an optional header absent), an answer at once (400, a replay, 409, 422, 503), or a fresh claim
 * whose handler runs in the attempt's transaction. Errors that are not the
 * database's absence (an incompatible server, an invalid namespace) are thrown.
 */
export async function prepare(s: Settings, request: HttpRequest): Promise<Prepared> {
  if (request.header === undefined && !s.required) return { kind: 'skip' };
  let client: PoolClientLike;
  try {
    client = await s.pool.connect();
  } catch (err) {
    return { kind: 'respond', response: unavailable(s, 'The idempotency store cannot be reached; nothing was done. Retry later.') };
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
    if (lost) return { kind: 'respond', response: unavailable(s, 'The idempotency store cannot be reached; nothing was done. Retry later.') };
    throw err;
  }
}

/** A fresh claim: the handler runs in its transaction; finish records the response, or rolls back. */
export class Attempt {
  readonly context: IdempotencyContext;
  private state: 'open' | 'finished-by-handler' | 'done' = 'open';

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
        this.openForHandler();
        await client.query('SELECT idempotency.idem_fail_permanent($1, $2, $3::jsonb, $4::bigint)',
          [s.namespace, key, JSON.stringify(error), String(outcome.fence)]);
        this.state = 'finished-by-handler';
      },
      failTransient: async () => {
        this.openForHandler();
        await client.query('SELECT idempotency.idem_fail_transient($1, $2, $3::bigint)', [s.namespace, key, String(outcome.fence)]);
        this.state = 'finished-by-handler';
      },
    };
  }

  // Refuses a second finish by the handler.
  private openForHandler(): void {
    if (this.state !== 'open') throw new IdempotencyError('55000', 'the idempotency attempt is already finished', `Its state is ${this.state}.`);
  }

  /** True until finish or abandon ended the transaction. */
  get open(): boolean {
    return this.state !== 'done';
  }

  /**
   * Ends the attempt once the handler answered: records the response and
   * commits (2xx and 4xx by default), commits what the handler finished itself,
   * or rolls back (a 5xx, a thrown error). Answers null to send the handler's
   * response, or the response to send instead (503 when the commit failed).
   */
  async finish(response: HttpResponse, threw: boolean): Promise<HttpResponse | null> {
    if (this.state === 'done') return null;
    const finishedByHandler = this.state === 'finished-by-handler';
    this.state = 'done';
    const client = this.client;
    if (threw || (!finishedByHandler && (response.status >= 500 || !this.s.record(response.status)))) {
      await this.rollback();
      return null;
    }
    if (!finishedByHandler) {
      try {
        await client.query('SELECT idempotency.idem_commit($1, $2, $3::jsonb, $4::bigint)',
          [this.s.namespace, this.key, this.result(response), String(this.outcome.fence)]);
      } catch (err) {
        if (isConnectionError(err)) {
          client.release(err as Error);
          return unavailable(this.s, 'The idempotency store could not be reached to record the response; nothing was done. Retry.');
        }
        await this.rollback();
        return notRecorded(this.s, err);
      }
    }
    try {
      await client.query('COMMIT');
    } catch (err) {
      // A failed COMMIT rolled the work back with the claim: the client may retry.
      client.release(isConnectionError(err) ? (err as Error) : undefined);
      return unavailable(this.s, 'The transaction could not be committed; nothing was done. Retry.');
    }
    client.release();
    return null;
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

  // {"status", "headers", "body"} as JSON text: the JSON body as its own text, any other body in base64, none without "body".
  private result(response: HttpResponse): string {
    const headers: Record<string, string> = {};
    for (const name of this.s.replayHeaders) {
      const value = headerValue(response.headers, name);
      if (value !== undefined) headers[name] = value;
    }
    let text = `{"status":${response.status},"headers":${JSON.stringify(headers)}`;
    if (response.body.length > 0) {
      text += `,"body":${jsonBody(headerValue(response.headers, 'Content-Type'), response.body) ?? JSON.stringify(response.body.toString('base64'))}`;
    }
    return text + '}';
  }
}
