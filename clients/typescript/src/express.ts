// The Express middleware: put it on a route with one namespace, and the
// handler runs once per key, inside the transaction of its claim.
//   app.post('/payments', idempotency({ pool, namespace: 'payments' }), handler)
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import {
  covers, decodedPath, prepare, routeTemplate, settings, tooLarge, unreadable, type Attempt, type HttpResponse,
  type IdempotencyContext, type IdempotencyOptions,
} from './http.js';

export type { IdempotencyContext, IdempotencyOptions } from './http.js';

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** The claim and its transaction, on a request the idempotency middleware let through fresh. */
      idempotency?: IdempotencyContext;
    }
  }
}

/** Options of the Express middleware. */
export interface ExpressIdempotencyOptions extends IdempotencyOptions {
  /** The largest body the middleware reads itself, in bytes, when no body parser ran before it (default 1 MiB). */
  bodyLimit?: number;
}

class BodyTooLarge extends Error {}

// The body's bytes: what a parser before the middleware left, or the stream, read here.
async function requestBody(req: Request, limit: number): Promise<Buffer | null> {
  const parsed: unknown = req.body;
  if (parsed !== undefined || req.readableEnded) {
    if (parsed === undefined || parsed === null) return null;
    if (Buffer.isBuffer(parsed)) return parsed;
    if (typeof parsed === 'string') return Buffer.from(parsed, 'utf8');
    // A parser took the bytes: its value is what the fingerprint gets.
    if (typeof parsed === 'object' && Object.keys(parsed).length === 0 && !hasBody(req)) return null;
    return Buffer.from(JSON.stringify(parsed), 'utf8');
  }
  if (!hasBody(req)) return null;
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new BodyTooLarge();
    chunks.push(chunk as Buffer);
  }
  const body = Buffer.concat(chunks);
  // What express.json() or express.raw() would have left for the handler.
  req.body = body;
  if (req.is(['application/json', '+json'])) {
    try {
      req.body = JSON.parse(body.toString('utf8'));
    } catch {
      // not JSON: the handler gets the bytes, the fingerprint their SHA-256
    }
  }
  return body;
}

// True when the request announces a body (a length above 0, or chunks).
function hasBody(req: Request): boolean {
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}

// The route template Express matched (its mount path, then the route's path);
// before routing (app.use), the one it will match; else the path, percent-decoded.
function target(req: Request): string {
  const route = (req as Request & { route?: { path?: unknown } }).route;
  if (route && typeof route.path === 'string') return routeTemplate(req.baseUrl + route.path);
  const path = new URL(req.originalUrl, 'http://localhost').pathname;
  const stack = (req.app as unknown as { router?: { stack?: unknown } }).router?.stack;
  const found = Array.isArray(stack) ? routeAhead(stack as Layer[], path, req.method, '') : undefined;
  return found === undefined ? decodedPath(path) : routeTemplate(found);
}

// What routeAhead reads of an Express 5 router's layer.
interface Layer {
  match?(path: string): false | { path: string; pattern: unknown };
  route?: { _handlesMethod?(method: string): boolean };
  handle?: { stack?: unknown };
}

// The pattern of the first route of stack (or of a router mounted in it)
// that matches path and method, as Express's router will choose it; undefined
// for none, or for a pattern that is not a string (a RegExp).
function routeAhead(stack: Layer[], path: string, method: string, prefix: string): string | undefined {
  for (const layer of stack) {
    const m = typeof layer.match === 'function' ? layer.match(path) : false;
    if (!m || typeof m.pattern !== 'string') continue;
    if (layer.route) {
      if (layer.route._handlesMethod?.(method)) return prefix + m.pattern;
      continue;
    }
    const inner = layer.handle?.stack;
    if (Array.isArray(inner)) {
      const found = routeAhead(inner as Layer[], path.slice(m.path.length) || '/', method,
        prefix + (m.pattern === '/' ? '' : m.pattern));
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

// Sends a response the middleware answers itself.
function send(res: Response, r: HttpResponse): void {
  res.status(r.status);
  for (const [name, value] of Object.entries(r.headers)) res.setHeader(name, value);
  res.setHeader('Content-Length', r.body.length);
  res.end(r.body);
}

/**
 * The middleware, on a route or mounted with app.use (then with the template
 * of the route Express will match as the target): it keys requests of
 * options.methods (POST and PATCH). A fresh
 * request reaches the handler with req.idempotency: its key and the client of
 * its transaction.
 */
export function idempotency(options: ExpressIdempotencyOptions): RequestHandler {
  const s = settings(options);
  const limit = options.bodyLimit ?? 1024 * 1024;
  return (req: Request, res: Response, next: NextFunction) => {
    const header = req.get('Idempotency-Key');
    if (!covers(s, req.method) || (header === undefined && !s.required)) {
      next();
      return;
    }
    void (async () => {
      let body: Buffer | null;
      try {
        body = await requestBody(req, limit);
      } catch (err) {
        send(res, err instanceof BodyTooLarge ? tooLarge(s, limit) : unreadable(s));
        return;
      }
      const prepared = await prepare(s, { method: req.method, target: target(req), header, contentType: req.get('Content-Type'), body });
      if (prepared.kind === 'skip') return next();
      if (prepared.kind === 'respond') return send(res, prepared.response);
      holdResponse(res, prepared.attempt);
      req.idempotency = prepared.attempt.context;
      next();
    })().catch(next);
  };
}

/**
 * Holds the handler's response (status, headers, writes) until the attempt is
 * finished: the response leaves only after its record is committed, or is
 * replaced by a 503 when the commit fails.
 */
function holdResponse(res: Response, attempt: Attempt): void {
  const original = { writeHead: res.writeHead, write: res.write, end: res.end };
  const chunks: Buffer[] = [];
  const bytes = (chunk: unknown, encoding?: unknown): Buffer | null => {
    if (chunk === undefined || chunk === null || typeof chunk === 'function') return null;
    if (Buffer.isBuffer(chunk)) return chunk;
    if (chunk instanceof Uint8Array) return Buffer.from(chunk);
    return Buffer.from(String(chunk), typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
  };
  res.writeHead = function writeHead(this: Response, status: number, ...rest: unknown[]) {
    res.statusCode = status;
    let headers = rest[0];
    if (typeof headers === 'string') {
      res.statusMessage = headers;
      headers = rest[1];
    }
    if (Array.isArray(headers)) {
      const flat = headers.flat() as string[];
      for (let i = 0; i + 1 < flat.length; i += 2) res.setHeader(flat[i]!, flat[i + 1]!);
    } else if (headers && typeof headers === 'object') {
      for (const [name, value] of Object.entries(headers)) if (value !== undefined) res.setHeader(name, value as string);
    }
    return res;
  } as Response['writeHead'];
  res.write = function write(chunk: unknown, encoding?: unknown, cb?: unknown) {
    const b = bytes(chunk, encoding);
    if (b) chunks.push(b);
    const done = typeof encoding === 'function' ? encoding : cb;
    if (typeof done === 'function') process.nextTick(done as () => void);
    return true;
  } as Response['write'];
  res.end = function end(chunk?: unknown, encoding?: unknown, cb?: unknown) {
    const b = bytes(chunk, encoding);
    if (b) chunks.push(b);
    const done = [chunk, encoding, cb].find((a) => typeof a === 'function') as (() => void) | undefined;
    res.writeHead = original.writeHead;
    res.write = original.write;
    res.end = original.end;
    const body = Buffer.concat(chunks);
    const headers = res.getHeaders() as Record<string, unknown>;
    void attempt.finish({ status: res.statusCode, headers: headers as Record<string, string>, body }).then((instead) => {
      if (instead) {
        for (const name of res.getHeaderNames()) res.removeHeader(name);
        res.statusMessage = '';
        send(res, instead);
      } else {
        res.end(body, done);
      }
    });
    return res;
  } as Response['end'];
}

export default idempotency;
