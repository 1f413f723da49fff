// The middleware's one behaviour (clients/README.md), driven over real HTTP
// against the service of apps/payments.ts: the same tests for Express and Fastify.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { Namespace, mint } from '@idempotency/pg';
import { DOCS, brokenCodes, startApp, type Framework, type RunningApp } from './apps/payments.js';
import { createDatabase, databaseEnv, type TestDatabase } from './helpers.js';

interface Reply { status: number; headers: Headers; text: string; json: any }

// One HTTP request through fetch (undici), its body read whole.
async function post(url: string, body: unknown, key?: string, contentType = 'application/json'): Promise<Reply> {
  const headers: Record<string, string> = { 'Content-Type': contentType };
  if (key !== undefined) headers['Idempotency-Key'] = key;
  const r = await fetch(url, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await r.text();
  let json: unknown = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, headers: r.headers, text, json };
}

/** Rule 16's 500, as the middleware builds it (type: the service's docs). */
const STORE_ERROR = {
  type: 'about:blank', title: 'Internal Server Error', status: 500, code: 'IDEMPOTENCY_STORE_ERROR',
  detail: 'The idempotency store refused the request; nothing was recorded.',
};

let serial = 0;
// A key of this test run's own.
function newKey(label: string): string {
  return `${label}-${process.pid}-${Date.now()}-${++serial}`;
}

export function httpSuite(framework: Framework): void {
  let db: TestDatabase;
  let app: RunningApp;
  let downstream: { url: string; calls: Map<string, number>; server: Server };

  const count = async (table: string, key: string) =>
    (await db.pool.query(`SELECT count(*)::int AS n FROM ${table} WHERE idem_key = $1`, [key])).rows[0].n as number;

  before(async () => {
    db = await createDatabase(framework);
    const calls = new Map<string, number>();
    const server = createServer((req, res) => {
      const key = String(req.headers['idempotency-key']);
      calls.set(key, (calls.get(key) ?? 0) + 1);
      req.resume();
      req.on('end', () => { res.setHeader('Content-Type', 'application/json'); res.end(JSON.stringify({ charge: `ch_${key.slice(0, 8)}` })); });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    downstream = { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/charges`, calls, server };
    app = await startApp(framework, { pool: db.pool, downstream: downstream.url });
  });
  after(async () => {
    await app?.close();
    await new Promise((r) => downstream?.server.close(r));
    await db?.drop();
  });

  describe(`${framework}: requests`, () => {
    test('the same request twice: one effect, the replay marked', async () => {
      const key = newKey('twice');
      const first = await post(`${app.url}/payments`, { amount: 100, currency: 'EUR' }, key);
      assert.equal(first.status, 201, first.text);
      assert.equal(first.headers.get('idempotency-replayed'), null);
      assert.match(first.headers.get('location') ?? '', /^\/payments\/\d+$/);
      // The IETF draft's quoted form is the same key.
      const again = await post(`${app.url}/payments`, { currency: 'EUR', amount: 100 }, `"${key}"`);
      assert.equal(again.status, 201, again.text);
      assert.equal(again.headers.get('idempotency-replayed'), 'true');
      assert.deepEqual(again.json, first.json);
      assert.equal(again.headers.get('location'), first.headers.get('location'));
      assert.match(again.headers.get('content-type') ?? '', /^application\/json/);
      assert.equal(await count('payments', key), 1);
    });

    test('two at once: one 201 and one 409 with Retry-After', async () => {
      const key = newKey('concurrent');
      const runs = app.runs.count;
      const first = post(`${app.url}/payments`, { amount: 5, hold: true }, key);
      await app.holds.reached(key);
      const second = await post(`${app.url}/payments`, { amount: 5, hold: true }, key);
      assert.equal(second.status, 409, second.text);
      assert.equal(second.headers.get('retry-after'), '1');
      assert.match(second.headers.get('content-type') ?? '', /^application\/problem\+json/);
      assert.equal(second.json.code, 'IDEMPOTENCY_REQUEST_IN_PROGRESS');
      assert.equal(second.json.type, DOCS);
      assert.equal(second.headers.get('link'), `<${DOCS}>; rel="describedby"`);
      app.holds.release(key);
      const done = await first;
      assert.equal(done.status, 201, done.text);
      assert.equal(app.runs.count, runs + 1, 'the handler ran once');
      assert.equal(await count('payments', key), 1);
    });

    test('a handler that throws: nothing recorded, the retry succeeds', async () => {
      const key = newKey('throws');
      const failed = await post(`${app.url}/payments`, { amount: 7, failOnce: true }, key);
      assert.equal(failed.status, 500, failed.text);
      assert.equal(await count('payments', key), 0, 'the insert rolled back with the claim');
      const retry = await post(`${app.url}/payments`, { amount: 7, failOnce: true }, key);
      assert.equal(retry.status, 201, retry.text);
      assert.equal(retry.headers.get('idempotency-replayed'), null);
      assert.equal(await count('payments', key), 1);
    });

    test('a thrown error the framework answers 4xx is recorded like any 4xx (rule 10)', async () => {
      const key = newKey('thrown-409');
      const failed = await post(`${app.url}/payments`, { amount: 8, throw409Once: true }, key);
      assert.equal(failed.status, 409, failed.text);
      const retry = await post(`${app.url}/payments`, { amount: 8, throw409Once: true }, key);
      assert.equal(retry.status, 409, retry.text);
      assert.equal(retry.headers.get('idempotency-replayed'), 'true');
      assert.deepEqual(retry.json, failed.json);
      assert.equal(await count('payments', key), 1, 'the 4xx committed with the handler\'s write');
    });

    test('a 5xx answered without a throw is not recorded either', async () => {
      const key = newKey('five-hundred');
      const failed = await post(`${app.url}/payments`, { amount: 7, fail500Once: true }, key);
      assert.equal(failed.status, 500);
      assert.equal(await count('payments', key), 0);
      const retry = await post(`${app.url}/payments`, { amount: 7, fail500Once: true }, key);
      assert.equal(retry.status, 201, retry.text);
      assert.equal(await count('payments', key), 1);
    });

    test('a reused key with another body: 422 (RFC 9457), and on another route too', async () => {
      const key = newKey('reused');
      assert.equal((await post(`${app.url}/payments`, { amount: 10 }, key)).status, 201);
      const other = await post(`${app.url}/payments`, { amount: 11 }, key);
      assert.equal(other.status, 422, other.text);
      assert.match(other.headers.get('content-type') ?? '', /^application\/problem\+json/);
      assert.equal(other.json.code, 'IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST');
      assert.equal(other.json.status, 422);
      assert.equal(other.json.type, DOCS);
      assert.equal(other.headers.get('idempotency-replayed'), null);
      const elsewhere = await post(`${app.url}/refunds`, { amount: 10 }, key);
      assert.equal(elsewhere.status, 422, 'the method and the route are part of the fingerprint');
      assert.equal(await count('payments', key), 1);
    });

    test('the target is the route template, not the path', async () => {
      const key = newKey('template');
      const first = await post(`${app.url}/payments/1/refunds`, { amount: 1 }, key);
      assert.equal(first.status, 201, first.text);
      const second = await post(`${app.url}/payments/2/refunds`, { amount: 1 }, key);
      assert.equal(second.status, 201);
      assert.equal(second.headers.get('idempotency-replayed'), 'true', '/payments/{id}/refunds matched both');
      assert.deepEqual(second.json, { refund_for: '1' });
      // What the server fingerprinted, as the recorded request shows it.
      const c = await db.client();
      await c.query('BEGIN');
      try {
        const o = await new Namespace('payments').begin(c, key, { another: 'request' });
        assert.equal(o.kind, 'mismatch');
        assert.deepEqual(o.kind === 'mismatch' && o.recordedRequest, { method: 'POST', target: '/payments/{id}/refunds', body: { amount: 1 } });
      } finally {
        await c.query('ROLLBACK');
      }
    });

    test('a missing or malformed key: 400 from idem_http_key, the handler never runs', async () => {
      const runs = app.runs.count;
      const missing = await post(`${app.url}/payments`, { amount: 1 });
      assert.equal(missing.status, 400);
      assert.equal(missing.json.code, 'MISSING_IDEMPOTENCY_KEY');
      assert.equal(missing.json.type, DOCS);
      for (const bad of ['"unterminated', 'a, b', '"k";a=1']) {
        const r = await post(`${app.url}/payments`, { amount: 1 }, bad);
        assert.equal(r.status, 400, bad);
        assert.equal(r.json.code, 'INVALID_IDEMPOTENCY_KEY');
        assert.match(r.headers.get('content-type') ?? '', /^application\/problem\+json/);
      }
      assert.equal(app.runs.count, runs);
    });

    test('a route that makes the key optional runs without the store when it is absent', async () => {
      const without = await post(`${app.url}/optional`, {});
      assert.equal(without.status, 201, without.text);
      assert.deepEqual(without.json, { keyed: false });
      const key = newKey('optional');
      const keyed = await post(`${app.url}/optional`, {}, key);
      assert.deepEqual(keyed.json, { keyed: true });
      const replay = await post(`${app.url}/optional`, {}, key);
      assert.equal(replay.headers.get('idempotency-replayed'), 'true');
      assert.equal(await count('notes', key), 1);
    });

    test('a refusal recorded by the handler (failPermanent): the first answer is the 422 every retry gets (rule 18)', async () => {
      const key = newKey('refused');
      const first = await post(`${app.url}/payments`, { amount: -5 }, key);
      assert.equal(first.status, 422, first.text);
      assert.equal(first.headers.get('content-type'), 'application/problem+json');
      assert.equal(first.headers.get('idempotency-replayed'), null);
      // idem_http_response's problem, not the handler's own body.
      assert.deepEqual(first.json, { type: 'about:blank', title: 'Unprocessable Content', status: 422, code: 'InvalidAmount', detail: 'amount must be positive' });
      const runs = app.runs.count;
      const again = await post(`${app.url}/payments`, { amount: -5 }, key);
      assert.equal(again.status, 422);
      assert.equal(again.headers.get('idempotency-replayed'), 'true');
      assert.equal(again.text, first.text);
      assert.equal(app.runs.count, runs);
    });

    test('a refusal then a 5xx: rolled back, the refusal with it (rule 18)', async () => {
      const key = newKey('refused-5xx');
      for (const run of [1, 2]) {
        const r = await post(`${app.url}/endings`, { how: 'refuse-5xx' }, key);
        assert.equal(r.status, 503, `run ${run}: ${r.text}`);
        assert.deepEqual(r.json, { refused: 'by the handler' });
        assert.equal(r.headers.get('idempotency-replayed'), null);
        assert.equal(await count('notes', key), 0);
      }
    });

    test('a key the handler releases (failTransient): its answer sent, its writes rolled back (rule 19)', async () => {
      const key = newKey('released');
      const first = await post(`${app.url}/endings`, { how: 'release' }, key);
      assert.equal(first.status, 409, first.text);
      assert.deepEqual(first.json, { status: 'busy' });
      assert.equal(await count('notes', key), 0);
      const retried = await post(`${app.url}/endings`, { how: 'release' }, key);
      assert.equal(retried.status, 201, retried.text);
      assert.equal(retried.headers.get('idempotency-replayed'), null);
      const replay = await post(`${app.url}/endings`, { how: 'release' }, key);
      assert.equal(replay.headers.get('idempotency-replayed'), 'true');
      assert.equal(await count('notes', key), 1);
    });

    test('an ending the server refuses leaves the attempt open; the broken transaction answers 500 (rule 17)', async () => {
      const key = newKey('broken');
      brokenCodes.length = 0;
      const r = await post(`${app.url}/endings`, { how: 'broken' }, key);
      assert.deepEqual(brokenCodes, [['25P02', '25P02']]);   // not 55000: the first call did not end the attempt
      assert.equal(r.status, 500, r.text);
      assert.deepEqual(r.json, { ...STORE_ERROR, type: DOCS });
      const again = await post(`${app.url}/endings`, { how: 'broken' }, key);
      assert.equal(again.status, 500);
      assert.equal(again.headers.get('idempotency-replayed'), null);
    });

    test('an attempt ends once: a second ending, or one after the answer, is 55000 (rule 20)', async () => {
      const finished = { code: '55000', message: 'the idempotency attempt is already finished' };
      const twice = await post(`${app.url}/endings`, { how: 'twice' }, newKey('twice'));
      assert.equal(twice.status, 409, twice.text);
      assert.deepEqual(twice.json, finished);
      const key = newKey('late');
      assert.equal((await post(`${app.url}/endings`, { how: 'stash' }, key)).status, 201);
      const late = await fetch(`${app.url}/late?key=${encodeURIComponent(key)}`);
      assert.deepEqual(await late.json(), finished);
      const replay = await post(`${app.url}/endings`, { how: 'stash' }, key);
      assert.equal(replay.headers.get('idempotency-replayed'), 'true');
    });

    test('a body that is not JSON: fingerprinted by its SHA-256, its response replayed byte for byte', async () => {
      const key = newKey('note');
      const first = await post(`${app.url}/notes`, 'héllo wörld', key, 'text/plain; charset=utf-8');
      assert.equal(first.status, 201, first.text);
      assert.match(first.text, /^note \d+: héllo wörld$/);
      const again = await post(`${app.url}/notes`, 'héllo wörld', key, 'text/plain; charset=utf-8');
      assert.equal(again.headers.get('idempotency-replayed'), 'true');
      assert.equal(again.text, first.text);
      assert.equal(again.headers.get('content-type'), first.headers.get('content-type'));
      const other = await post(`${app.url}/notes`, 'hello world', key, 'text/plain; charset=utf-8');
      assert.equal(other.status, 422);
      assert.equal(await count('notes', key), 1);
    });

    test('a commit that fails: 500 for a constraint, 503 for a serialization failure (rules 13 to 15)', async () => {
      const key = newKey('commit-fails');
      const failed = await post(`${app.url}/payments`, { amount: 3, conflictOnce: true }, key);
      assert.equal(failed.status, 500, failed.text);
      assert.match(failed.headers.get('content-type') ?? '', /^application\/problem\+json/);
      assert.deepEqual(failed.json, { ...STORE_ERROR, type: DOCS });
      assert.equal(failed.headers.get('link'), `<${DOCS}>; rel="describedby"`);
      assert.equal(await count('payments', key), 0);
      const retry = await post(`${app.url}/payments`, { amount: 3, conflictOnce: true }, key);
      assert.equal(retry.status, 201, retry.text);
      assert.equal(await count('payments', key), 1);

      const other = newKey('serialization');
      const busy = await post(`${app.url}/payments`, { amount: 3, serializationOnce: true }, other);
      assert.equal(busy.status, 503, busy.text);
      assert.equal(busy.json.code, 'IDEMPOTENCY_STORE_UNAVAILABLE');
      assert.equal(busy.headers.get('retry-after'), '1');
      assert.equal(await count('payments', other), 0);
      assert.equal((await post(`${app.url}/payments`, { amount: 3, serializationOnce: true }, other)).status, 201);
    });

    test('no body and a JSON null body replay as sent (rules 11 and 12)', async () => {
      for (const [path, text] of [['/empty', ''], ['/null', 'null']] as const) {
        const key = newKey(`body${path.slice(1)}`);
        const first = await post(`${app.url}${path}`, {}, key);
        assert.equal(first.status, 201, first.text);
        assert.equal(first.text, text);
        const again = await post(`${app.url}${path}`, {}, key);
        assert.equal(again.status, 201, `${path}: ${again.text}`);
        assert.equal(again.headers.get('idempotency-replayed'), 'true');
        assert.equal(again.text, text, path);
        assert.equal(again.headers.get('content-type'), first.headers.get('content-type'));
      }
    });

    test('a JSON Content-Type over a body that is not JSON is not recorded: 500 (rule 11)', async () => {
      const key = newKey('bad-json');
      const r = await post(`${app.url}/bad-json`, {}, key);
      assert.equal(r.status, 500, r.text);
      assert.deepEqual(r.json, { ...STORE_ERROR, type: DOCS });
      assert.equal(await count('notes', key), 0, 'the handler\'s write rolled back');
    });

    test('a body is JSON only under a JSON Content-Type (rule 7)', async () => {
      const key = newKey('declared');
      assert.equal((await post(`${app.url}/notes`, '{"a": 1}', key, 'text/plain')).status, 201);
      const other = await post(`${app.url}/notes`, '{ "a":1 }', key, 'text/plain');
      assert.equal(other.status, 422, 'other bytes, not declared JSON: another request');
    });

    test('a GET is not keyed', async () => {
      const r = await fetch(`${app.url}/health`);
      assert.equal(r.status, 200);
    });
  });

  describe(`${framework}: failures`, () => {
    test('the database cannot be reached: 503, the handler never runs', async () => {
      const probe = createServer();
      await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
      const port = (probe.address() as AddressInfo).port;
      await new Promise((r) => probe.close(r));   // a port nothing listens on
      const pool = new pg.Pool({ host: '127.0.0.1', port, connectionTimeoutMillis: 2000 });
      const down = await startApp(framework, { pool });
      try {
        const r = await post(`${down.url}/payments`, { amount: 1 }, newKey('down'));
        assert.equal(r.status, 503, r.text);
        assert.match(r.headers.get('content-type') ?? '', /^application\/problem\+json/);
        assert.deepEqual(r.json, {
          type: DOCS, title: 'Service Unavailable', status: 503, code: 'IDEMPOTENCY_STORE_UNAVAILABLE',
          detail: 'The idempotency store cannot be reached. Retry the request with the same Idempotency-Key.',
        });
        assert.equal(r.headers.get('retry-after'), '1');
        assert.equal(down.runs.count, 0);
      } finally {
        await down.close();
        await pool.end();
      }
    });

    test('a database without the extension: 500 IDEMPOTENCY_STORE_ERROR (rule 15), the handler never runs', async () => {
      const bare = await createDatabase(`${framework}_bare`, { bare: true });
      const wrong = await startApp(framework, { pool: bare.pool });
      try {
        const r = await post(`${wrong.url}/payments`, { amount: 1 }, newKey('bare'));
        assert.equal(r.status, 500, r.text);
        assert.deepEqual(r.json, { ...STORE_ERROR, type: DOCS });
        assert.equal(wrong.runs.count, 0);
      } finally {
        await wrong.close();
        await bare.drop();
      }
    });

    test('a process killed mid-handler: the retry succeeds, one committed row', async () => {
      const key = newKey('killed');
      const serve = fileURLToPath(new URL('./apps/serve.js', import.meta.url));
      const start = (hold: boolean) => {
        const child = spawn(process.execPath, [serve, framework], {
          env: { ...databaseEnv(db.name), IDEM_HOLD: hold ? '1' : '0' }, stdio: ['ignore', 'pipe', 'inherit'],
        });
        const lines = createInterface({ input: child.stdout! });
        const next = (prefix: string) => new Promise<string>((resolve, reject) => {
          const onLine = (line: string) => { if (line.startsWith(prefix)) { lines.off('line', onLine); resolve(line.slice(prefix.length)); } };
          lines.on('line', onLine);
          child.once('exit', (code, signal) => reject(new Error(`the app exited (${code ?? signal}) before "${prefix}"`)));
        });
        return { child, next };
      };
      const stop = (child: ChildProcess) => new Promise<void>((r) => { if (child.exitCode !== null || child.signalCode !== null) r(); else { child.once('exit', () => r()); child.kill('SIGKILL'); } });

      const doomed = start(true);
      try {
        const url = await doomed.next('listening ');
        const holding = doomed.next('holding ');
        const pending = post(`${url}/payments`, { amount: 42, hold: true }, key).then(() => assert.fail('answered'), (err: unknown) => err);
        assert.equal(await holding, key);
        // The handler's insert is written, uncommitted, when the process dies.
        await stop(doomed.child);
        assert.ok(await pending, 'the request failed with its process');
      } finally {
        await stop(doomed.child);
      }
      const survivor = start(false);
      try {
        const url = await survivor.next('listening ');
        // The server ends the dead session and its claim; until then a retry is told 409.
        let retry: Reply;
        const deadline = Date.now() + 15000;
        do {
          retry = await post(`${url}/payments`, { amount: 42, hold: true }, key);
          if (retry.status === 409) await new Promise((r) => setTimeout(r, 100));
        } while (retry.status === 409 && Date.now() < deadline);
        assert.equal(retry.status, 201, retry.text);
        assert.equal(retry.headers.get('idempotency-replayed'), null);
        assert.equal(await count('payments', key), 1);
      } finally {
        await stop(survivor.child);
      }
    });

    test('a minted key to a downstream call: the same key on every retry', async () => {
      const key = newKey('charge');
      const expected = mint('psp-charges', [key]);
      const { rows: [server] } = await db.pool.query('SELECT idempotency.idem_mint($1, ARRAY[$2]) AS k', ['psp-charges', key]);
      assert.equal(expected, server.k, 'the key the package mints is the server\'s');
      const failed = await post(`${app.url}/charges`, { amount: 9, failOnce: true }, key);
      assert.equal(failed.status, 500, failed.text);
      const retry = await post(`${app.url}/charges`, { amount: 9, failOnce: true }, key);
      assert.equal(retry.status, 201, retry.text);
      assert.equal(retry.json.downstream_key, expected);
      const replay = await post(`${app.url}/charges`, { amount: 9, failOnce: true }, key);
      assert.equal(replay.headers.get('idempotency-replayed'), 'true');
      assert.deepEqual(replay.json, retry.json);
      assert.equal(downstream.calls.get(expected), 2, 'two attempts reached the downstream, under one key');
      assert.equal(await count('charges', key), 1);
      const other = newKey('charge');
      assert.equal((await post(`${app.url}/charges`, { amount: 9 }, other)).status, 201);
      assert.equal(downstream.calls.get(mint('psp-charges', [other])), 1, 'another inbound key, another downstream key');
    });
  });
}
