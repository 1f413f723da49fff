// The Fastify plugin: register it with one namespace, and every POST and PATCH
// route registered after it runs once per key, inside the transaction of its claim.
//   await app.register(idempotency, { pool, namespace: 'payments' })
import { Transform, type Readable } from 'node:stream';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import fp from 'fastify-plugin';
import {
  prepare, routeTemplate, settings, type Attempt, type HttpResponse, type IdempotencyContext,
  type IdempotencyOptions, type Settings,
} from './http.js';

export type { IdempotencyContext, IdempotencyOptions } from './http.js';

/** A route's own settings, in its config: { idempotency: false } leaves it out; { methods: ['PUT'] } keys a PUT route. */
export type RouteIdempotency = boolean | Partial<Omit<IdempotencyOptions, 'pool'>>;

/** Options of the Fastify plugin. */
export interface FastifyIdempotencyOptions extends IdempotencyOptions {
  /** false: only routes whose config names idempotency are keyed (default true: every route); either way, only requests of the methods covered. */
  global?: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The claim and its transaction, on a request the plugin let through fresh; null otherwise. */
    idempotency: IdempotencyContext | null;
  }
  interface FastifyContextConfig {
    idempotency?: RouteIdempotency;
  }
}

const attempts = new WeakMap<FastifyRequest, Attempt>();
const bodies = new WeakMap<FastifyRequest, Buffer[]>();

// Copies the payload's bytes as the content-type parser reads them, for the fingerprint.
function keepBody(request: FastifyRequest, payload: Readable): Readable {
  const chunks: Buffer[] = [];
  bodies.set(request, chunks);
  const tee = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk);
      (tee as Transform & { receivedEncodedLength: number }).receivedEncodedLength += chunk.length;
      callback(null, chunk);
    },
  });
  (tee as Transform & { receivedEncodedLength: number }).receivedEncodedLength = 0;
  payload.on('error', (err) => tee.destroy(err));
  return payload.pipe(tee);
}

// The payload onSend got, as bytes.
async function payloadBytes(payload: unknown): Promise<Buffer> {
  if (payload === null || payload === undefined) return Buffer.alloc(0);
  if (Buffer.isBuffer(payload)) return payload;
  if (typeof payload === 'string') return Buffer.from(payload, 'utf8');
  if (typeof (payload as Readable).pipe === 'function') {
    const chunks: Buffer[] = [];
    for await (const chunk of payload as Readable) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
    return Buffer.concat(chunks);
  }
  return Buffer.from(String(payload), 'utf8');
}

// Sends a response the plugin answers itself.
function reply(replyTo: FastifyReply, r: HttpResponse): FastifyReply {
  return replyTo.code(r.status).headers(r.headers).send(r.body);
}

// A route's hooks (one, several or none) as a list, to add the plugin's after them.
function toArray<T>(hooks: T | T[] | undefined): T[] {
  return hooks === undefined ? [] : Array.isArray(hooks) ? hooks : [hooks];
}

// The settings of a route, or null when the plugin leaves it out.
function routeSettings(base: Settings, options: FastifyIdempotencyOptions, route: RouteOptions): Settings | null {
  const own = (route.config as { idempotency?: RouteIdempotency } | undefined)?.idempotency;
  if (own === false) return null;
  if (own === undefined && options.global === false) return null;
  const s = own === undefined || own === true ? base : settings({ ...options, ...own });
  const methods = toArray(route.method).map((m) => String(m).toUpperCase());
  return methods.some((m) => s.methods.includes(m)) ? s : null;
}

const plugin: FastifyPluginAsync<FastifyIdempotencyOptions> = async (app, options) => {
  const base = settings(options);
  app.decorateRequest('idempotency', null);
  app.addHook('onRoute', (route) => {
    const s = routeSettings(base, options, route);
    if (!s) return;
    const template = routeTemplate(route.url ?? route.path);
    route.preParsing = [...toArray(route.preParsing), async (request: FastifyRequest, _reply: FastifyReply, payload: Readable) =>
      keepBody(request, payload)] as RouteOptions['preParsing'];
    route.preHandler = [...toArray(route.preHandler), async (request: FastifyRequest, replyTo: FastifyReply) => {
      const header = request.headers['idempotency-key'];
      const chunks = bodies.get(request);
      const prepared = await prepare(s, {
        method: request.method,
        target: template,
        header: Array.isArray(header) ? header.join(', ') : header,
        contentType: request.headers['content-type'],
        body: chunks && chunks.length > 0 ? Buffer.concat(chunks) : null,
      });
      if (prepared.kind === 'respond') return reply(replyTo, prepared.response);
      if (prepared.kind === 'run') {
        attempts.set(request, prepared.attempt);
        request.idempotency = prepared.attempt.context;
      }
      return undefined;
    }] as RouteOptions['preHandler'];
    route.onSend = [...toArray(route.onSend), async (request: FastifyRequest, replyTo: FastifyReply, payload: unknown) => {
      const held = attempts.get(request);
      if (!held || !held.open) return payload;
      const body = await payloadBytes(payload);
      const instead = await held.finish({ status: replyTo.statusCode, headers: replyTo.getHeaders() as Record<string, string>, body });
      if (!instead) return body;
      for (const name of Object.keys(replyTo.getHeaders())) replyTo.removeHeader(name);
      replyTo.code(instead.status).headers(instead.headers);
      return instead.body;
    }] as RouteOptions['onSend'];
    route.onResponse = [...toArray(route.onResponse), async (request: FastifyRequest) => {
      // A reply that never went through onSend (hijacked) leaves nothing open.
      await attempts.get(request)?.abandon();
    }] as RouteOptions['onResponse'];
  });
};

/** The plugin, for app.register(idempotency, { pool, namespace }). */
export const idempotency = fp(plugin, { fastify: '5.x', name: '@idempotency/pg' });
export default idempotency;
