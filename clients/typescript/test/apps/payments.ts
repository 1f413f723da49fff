// One small service, written once for Express and once for Fastify, each made
// idempotent by the package's middleware or plugin and one namespace.
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express, { type NextFunction, type Request, type Response } from 'express';
import Fastify from 'fastify';
import { mint, type IdempotencyContext, type PoolLike } from '@idempotency/pg';
import { idempotency as expressIdempotency } from '@idempotency/pg/express';
import fastifyIdempotency from '@idempotency/pg/fastify';

export type Framework = 'express' | 'fastify';

export const DOCS = 'https://docs.example.com/idempotency';

/** What the endings of each 'broken' request answered (their SQLSTATEs), in order. */
export const brokenCodes: unknown[][] = [];

/** A payment's request body, with the switches the tests flip. */
interface PaymentBody {
  amount: number;
  currency?: string;
  hold?: boolean;          // wait for the test (or forever, in a child process told to)
  failOnce?: boolean;      // throw after the insert, the first time for this key
  fail500Once?: boolean;   // answer 500 without throwing, the first time
  throw409Once?: boolean;  // throw an error whose status is 409, the first time
  conflictOnce?: boolean;  // break a deferred unique constraint: COMMIT fails, the first time
  serializationOnce?: boolean;  // fail the COMMIT with 40001 (a deferred trigger), the first time
}

/** Requests a test holds inside their handler until it lets them go. */
export class Holds {
  private readonly waiting = new Map<string, { reached: () => void; reachedP: Promise<void>; release: () => void; releaseP: Promise<void> }>();

  private entry(key: string) {
    let e = this.waiting.get(key);
    if (!e) {
      let reached!: () => void;
      let release!: () => void;
      const reachedP = new Promise<void>((r) => { reached = r; });
      const releaseP = new Promise<void>((r) => { release = r; });
      e = { reached, reachedP, release, releaseP };
      this.waiting.set(key, e);
    }
    return e;
  }

  /** The handler of key: tells the test it is there, and waits. */
  async hold(key: string): Promise<void> {
    const e = this.entry(key);
    e.reached();
    await e.releaseP;
  }

  /** Resolves once the handler of key holds. */
  reached(key: string): Promise<void> {
    return this.entry(key).reachedP;
  }

  release(key: string): void {
    this.entry(key).release();
  }
}

export interface AppOptions {
  pool: PoolLike & { query(text: string, values?: unknown[]): Promise<{ rows: any[] }> };
  /** The fake downstream the charges call. */
  downstream?: string;
  /** What a request asking to be held does: wait for the test (default), forever, printing "holding KEY" (a child process the test kills), or not at all. */
  hold?: 'test' | 'forever' | 'never';
}

export interface RunningApp {
  url: string;
  holds: Holds;
  /** How many times a handler ran its body. */
  runs: { count: number };
  close(): Promise<void>;
}

// The handlers, the same for both frameworks: each returns status, headers and body.
interface Answer { status: number; headers?: Record<string, string>; body: unknown; text?: boolean }

function service(options: AppOptions, holds: Holds, runs: { count: number }) {
  const failed = new Set<string>();
  const stash = new Map<string, IdempotencyContext>();
  const once = (what: string, key: string) => {
    if (failed.has(`${what}:${key}`)) return false;
    failed.add(`${what}:${key}`);
    return true;
  };
  return {
    async payment(ctx: IdempotencyContext, body: PaymentBody): Promise<Answer> {
      runs.count++;
      if (!(body.amount > 0)) {
        await ctx.failPermanent({ class_tag: 'InvalidAmount', message: 'amount must be positive' });
        return { status: 422, headers: { 'Content-Type': 'application/problem+json' }, body: { code: 'InvalidAmount', detail: 'amount must be positive' } };
      }
      const { rows: [p] } = await ctx.client.query(
        'INSERT INTO payments (idem_key, amount, currency) VALUES ($1, $2, $3) RETURNING id::text AS id',
        [ctx.key, body.amount, body.currency ?? 'EUR']);
      if (body.hold && options.hold !== 'never') {
        if (options.hold === 'forever') {
          process.stdout.write(`holding ${ctx.key}\n`);
          await new Promise(() => undefined);
        }
        await holds.hold(ctx.key);
      }
      if (body.failOnce && once('throw', ctx.key)) throw new Error(`the payment of ${ctx.key} failed`);
      if (body.fail500Once && once('500', ctx.key)) return { status: 500, body: { error: 'provider down' } };
      if (body.throw409Once && once('409', ctx.key)) {
        throw Object.assign(new Error('the account is locked'), { status: 409, statusCode: 409 });
      }
      if (body.conflictOnce && once('conflict', ctx.key)) {
        await ctx.client.query(`INSERT INTO uniques VALUES ('twice'), ('twice')`);
      }
      if (body.serializationOnce && once('serialization', ctx.key)) {
        await ctx.client.query(`INSERT INTO serialization_failures VALUES ('x')`);
      }
      return { status: 201, headers: { Location: `/payments/${p.id}` }, body: { payment_id: p.id, amount: body.amount } };
    },

    async note(ctx: IdempotencyContext, text: string): Promise<Answer> {
      runs.count++;
      const { rows: [n] } = await ctx.client.query('INSERT INTO notes (idem_key, body) VALUES ($1, $2) RETURNING id::text AS id', [ctx.key, text]);
      return { status: 201, headers: { 'Content-Type': 'text/plain; charset=utf-8' }, body: `note ${n.id}: ${text}`, text: true };
    },

    async optional(ctx: IdempotencyContext | null | undefined): Promise<Answer> {
      runs.count++;
      const db = ctx ? ctx.client : options.pool;
      await db.query(`INSERT INTO notes (idem_key, body) VALUES ($1, 'optional')`, [ctx?.key ?? null]);
      return { status: 201, body: { keyed: Boolean(ctx) } };
    },

    // A handler that ends its attempt itself (rules 17 to 20): release the key
    // the first time per key (409), refuse then answer 503, end it twice, or
    // keep it past the request for late().
    async ending(ctx: IdempotencyContext, body: { how: 'release' | 'refuse-5xx' | 'twice' | 'stash' | 'broken' }): Promise<Answer> {
      runs.count++;
      if (body.how === 'broken') {
        // Breaks the transaction, then tries both endings: the server answers each (the first did not end the attempt).
        await ctx.client.query('SELECT 1/0').catch(() => undefined);
        const codes: unknown[] = [];
        for (const end of [() => ctx.failPermanent({ class_tag: 'Broken', message: 'never recorded' }), () => ctx.failTransient()]) {
          await end().catch((err: { code?: string }) => codes.push(err.code));
        }
        brokenCodes.push(codes);
        return { status: 400, body: { broken: true } };
      }
      await ctx.client.query(`INSERT INTO notes (idem_key, body) VALUES ($1, $2)`, [ctx.key, body.how]);
      if (body.how === 'release') {
        if (!once('release', ctx.key)) return { status: 201, body: { status: 'done' } };
        await ctx.failTransient();
        return { status: 409, body: { status: 'busy' } };
      }
      if (body.how === 'refuse-5xx') {
        await ctx.failPermanent({ class_tag: 'InvalidAmount', message: 'amount must be positive' });
        return { status: 503, body: { refused: 'by the handler' } };
      }
      if (body.how === 'twice') {
        await ctx.failTransient();
        try {
          await ctx.failPermanent({ class_tag: 'Twice', message: 'never recorded' });
        } catch (err) {
          const e = err as { code?: string; message?: string };
          return { status: 409, body: { code: e.code, message: e.message } };
        }
        return { status: 409, body: { code: null } };
      }
      stash.set(ctx.key, ctx);
      return { status: 201, body: { stashed: ctx.key } };
    },

    // Ends an attempt whose answer was recorded already: refused (rule 20).
    async late(key: string): Promise<Answer> {
      try {
        await stash.get(key)!.failTransient();
      } catch (err) {
        const e = err as { code?: string; message?: string };
        return { status: 200, body: { code: e.code, message: e.message } };
      }
      return { status: 200, body: { code: null } };
    },

    async charge(ctx: IdempotencyContext, body: { amount: number; failOnce?: boolean }): Promise<Answer> {
      runs.count++;
      // The downstream call's key: minted from the inbound key, the same on every retry.
      const downstreamKey = mint('psp-charges', [ctx.key]);
      const r = await fetch(options.downstream!, {
        method: 'POST', headers: { 'Idempotency-Key': downstreamKey, 'Content-Type': 'application/json' },
        body: JSON.stringify({ amount: body.amount }),
      });
      if (!r.ok) return { status: 502, body: { error: 'downstream' } };
      const charge = (await r.json()) as { charge: string };
      await ctx.client.query('INSERT INTO charges (idem_key, downstream_key) VALUES ($1, $2)', [ctx.key, downstreamKey]);
      if (body.failOnce && once('charge', ctx.key)) throw new Error('the process failed after the downstream call');
      return { status: 201, body: { charge: charge.charge, downstream_key: downstreamKey } };
    },
  };
}

/** Starts the service on a port of its own. */
export async function startApp(framework: Framework, options: AppOptions): Promise<RunningApp> {
  const holds = new Holds();
  const runs = { count: 0 };
  const svc = service(options, holds, runs);
  return framework === 'express' ? startExpress(options, svc, holds, runs) : startFastify(options, svc, holds, runs);
}

async function startExpress(options: AppOptions, svc: ReturnType<typeof service>, holds: Holds, runs: { count: number }): Promise<RunningApp> {
  const app = express();
  app.set('env', 'test');   // no stack traces on stderr for the errors the tests provoke
  app.use(express.json());
  // The two lines: the middleware and its namespace, on the routes.
  const keyed = expressIdempotency({ pool: options.pool, namespace: 'payments', docsUri: DOCS });
  const send = (res: Response, a: Answer) => {
    res.status(a.status);
    for (const [k, v] of Object.entries(a.headers ?? {})) res.setHeader(k, v);
    if (a.text) res.send(a.body as string); else res.json(a.body);
  };
  const route = (fn: (req: Request) => Promise<Answer>) => async (req: Request, res: Response) => send(res, await fn(req));

  app.post('/payments', keyed, route((req) => svc.payment(req.idempotency!, req.body)));
  app.post('/payments/:id/refunds', keyed, route(async (req) => ({ status: 201, body: { refund_for: req.params['id'] } })));
  app.post('/refunds', keyed, route(async () => ({ status: 201, body: { refund: true } })));
  app.post('/notes', keyed, route((req) => svc.note(req.idempotency!, (req.body as Buffer).toString('utf8'))));
  app.post('/optional', expressIdempotency({ pool: options.pool, namespace: 'payments', required: false }),
    route((req) => svc.optional(req.idempotency)));
  app.post('/charges', expressIdempotency({ pool: options.pool, namespace: 'charges' }), route((req) => svc.charge(req.idempotency!, req.body)));
  app.post('/empty', keyed, route(async () => ({ status: 201, headers: { 'Content-Type': 'application/json' }, body: '', text: true })));
  app.post('/null', keyed, route(async () => ({ status: 201, body: null })));
  app.post('/bad-json', keyed, route(async (req) => {
    await req.idempotency!.client.query(`INSERT INTO notes (idem_key, body) VALUES ($1, 'bad-json')`, [req.idempotency!.key]);
    return { status: 201, headers: { 'Content-Type': 'application/json' }, body: '{not json', text: true };
  }));
  app.post('/endings', keyed, route((req) => svc.ending(req.idempotency!, req.body)));
  app.get('/late', route((req) => svc.late(String(req.query['key']))));
  app.get('/health', (_req, res) => { res.json({ ok: true }); });
  // Errors answered with their own status, as Express's default handler does.
  app.use((err: Error & { status?: number }, _req: Request, res: Response, _next: NextFunction) => {
    res.status(err.status ?? 500).json({ error: err.message });
  });

  const server: Server = await new Promise((resolve) => { const s = app.listen(0, '127.0.0.1', () => resolve(s)); });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`, holds, runs,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

async function startFastify(options: AppOptions, svc: ReturnType<typeof service>, holds: Holds, runs: { count: number }): Promise<RunningApp> {
  const app = Fastify({ logger: false });
  // The two lines: the plugin and its namespace; every POST and PATCH route after it is keyed.
  await app.register(fastifyIdempotency, { pool: options.pool, namespace: 'payments', docsUri: DOCS });
  const send = (reply: import('fastify').FastifyReply, a: Answer) => {
    reply.code(a.status).headers(a.headers ?? {});
    return a.text ? reply.send(a.body) : reply.send(a.body);
  };

  app.post('/payments', async (request, reply) => send(reply, await svc.payment(request.idempotency!, request.body as PaymentBody)));
  app.post('/payments/:id/refunds', async (request, reply) => send(reply, { status: 201, body: { refund_for: (request.params as { id: string }).id } }));
  app.post('/refunds', async (_request, reply) => send(reply, { status: 201, body: { refund: true } }));
  app.post('/notes', async (request, reply) => send(reply, await svc.note(request.idempotency!, request.body as string)));
  app.post('/optional', { config: { idempotency: { required: false } } }, async (request, reply) => send(reply, await svc.optional(request.idempotency)));
  app.post('/charges', { config: { idempotency: { namespace: 'charges' } } },
    async (request, reply) => send(reply, await svc.charge(request.idempotency!, request.body as { amount: number })));
  app.post('/empty', async (_request, reply) => send(reply, { status: 201, headers: { 'Content-Type': 'application/json' }, body: '', text: true }));
  app.post('/null', async (_request, reply) => reply.code(201).header('Content-Type', 'application/json').send('null'));
  app.post('/bad-json', async (request, reply) => {
    await request.idempotency!.client.query(`INSERT INTO notes (idem_key, body) VALUES ($1, 'bad-json')`, [request.idempotency!.key]);
    return send(reply, { status: 201, headers: { 'Content-Type': 'application/json' }, body: '{not json', text: true });
  });
  app.post('/endings', async (request, reply) => send(reply, await svc.ending(request.idempotency!, request.body as { how: 'release' })));
  app.get('/late', async (request, reply) => send(reply, await svc.late((request.query as { key: string }).key)));
  app.get('/health', async () => ({ ok: true }));

  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return { url, holds, runs, close: () => app.close() };
}
