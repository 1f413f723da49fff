// The Express middleware over real HTTP: apps/payments.ts's service, then the
// middleware mounted for every route.
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import express from 'express';
import { Namespace } from '@idempotency/pg';
import { idempotency } from '@idempotency/pg/express';
import { httpSuite } from './http-suite.js';
import { createDatabase, type TestDatabase } from './helpers.js';

httpSuite('express');

let db: TestDatabase;
before(async () => { db = await createDatabase('express_reach'); });
after(async () => { await db.drop(); });

test('mounted with app.use: POST and PATCH keyed by the template of the route ahead, GET not', async () => {
  const app = express();
  app.use(idempotency({ pool: db.pool, namespace: 'payments' }));
  app.post('/orders/:id', (req, res) => { res.status(201).json({ keyed: req.idempotency !== undefined }); });
  app.get('/orders/:id', (req, res) => { res.json({ keyed: req.idempotency !== undefined }); });
  const api = express.Router();
  api.post('/lines/:line', (req, res) => { res.status(201).json({ keyed: req.idempotency !== undefined }); });
  app.use('/shops/:shop', api);
  const server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    assert.equal((await fetch(`${url}/orders/7`, { method: 'POST' })).status, 400);
    const posted = await fetch(`${url}/orders/7`, { method: 'POST', headers: { 'Idempotency-Key': 'mounted-1' } });
    assert.deepEqual(await posted.json(), { keyed: true });
    const got = await fetch(`${url}/orders/7`);
    assert.deepEqual(await got.json(), { keyed: false });
    await fetch(`${url}/shops/9/lines/3`, { method: 'POST', headers: { 'Idempotency-Key': 'mounted-3' } });
    // No route matches /nowhere/a%20b: the target is the path, percent-decoded (rule 6).
    await fetch(`${url}/nowhere/a%20b`, { method: 'POST', headers: { 'Idempotency-Key': 'mounted-2' } });
    // No route had matched yet: the target is the template of the route Express matches next (rule 6).
    const c = await db.client();
    await c.query('BEGIN');
    const o = await new Namespace('payments').begin(c, 'mounted-1', {});
    await c.query('ROLLBACK');
    assert.equal(o.kind, 'mismatch');
    assert.deepEqual(o.kind === 'mismatch' && o.recordedRequest, { method: 'POST', target: '/orders/{id}', body: null });
    await c.query('BEGIN');
    const p = await new Namespace('payments').begin(c, 'mounted-2', {});
    await c.query('ROLLBACK');
    assert.deepEqual(p.kind === 'mismatch' && p.recordedRequest, { method: 'POST', target: '/nowhere/a b', body: null });
    await c.query('BEGIN');
    const q = await new Namespace('payments').begin(c, 'mounted-3', {});
    await c.query('ROLLBACK');
    assert.deepEqual(q.kind === 'mismatch' && q.recordedRequest, { method: 'POST', target: '/shops/{shop}/lines/{line}', body: null });
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
});

// Runs an Express app on a port of its own for one test.
async function withApp(app: express.Express, run: (url: string) => Promise<void>): Promise<void> {
  const server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  try {
    await run(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
}

test('on a route, the methods it covers are POST and PATCH unless told (rule 1)', async () => {
  const app = express();
  app.put('/orders/:id', idempotency({ pool: db.pool, namespace: 'payments' }), (req, res) => { res.json({ keyed: req.idempotency !== undefined }); });
  app.put('/keyed/:id', idempotency({ pool: db.pool, namespace: 'payments', methods: ['PUT'] }), (req, res) => { res.json({ keyed: req.idempotency !== undefined }); });
  await withApp(app, async (url) => {
    const put = await fetch(`${url}/orders/1`, { method: 'PUT' });
    assert.equal(put.status, 200, 'a PUT passes through, without the store');
    assert.deepEqual(await put.json(), { keyed: false });
    assert.equal((await fetch(`${url}/keyed/1`, { method: 'PUT' })).status, 400);
    const keyed = await fetch(`${url}/keyed/1`, { method: 'PUT', headers: { 'Idempotency-Key': 'put-1' } });
    assert.deepEqual(await keyed.json(), { keyed: true });
  });
});

test('a body over bodyLimit: 413 REQUEST_BODY_TOO_LARGE, nothing claimed (rule 4)', async () => {
  const app = express();
  app.post('/notes', idempotency({ pool: db.pool, namespace: 'payments', bodyLimit: 10, docsUri: 'https://example.com/idem' }), (_req, res) => { res.status(201).end(); });
  await withApp(app, async (url) => {
    const r = await fetch(`${url}/notes`, { method: 'POST', headers: { 'Idempotency-Key': 'too-large', 'Content-Type': 'text/plain' }, body: 'x'.repeat(11) });
    assert.equal(r.status, 413);
    assert.match(r.headers.get('content-type') ?? '', /^application\/problem\+json/);
    assert.equal(r.headers.get('link'), '<https://example.com/idem>; rel="describedby"');
    assert.deepEqual(await r.json(), {
      type: 'https://example.com/idem', title: 'Content Too Large', status: 413, code: 'REQUEST_BODY_TOO_LARGE',
      detail: 'The request body is larger than 10 bytes.',
    });
    const { rows: [s] } = await db.pool.query(`SELECT state FROM idempotency.idem_key_state('payments', 'too-large')`);
    assert.equal(s.state, 'absent');
  });
});

test('a response without a Content-Type replays without one, byte for byte (rule 12)', async () => {
  const app = express();
  app.post('/raw', idempotency({ pool: db.pool, namespace: 'payments' }), (_req, res) => {
    res.status(201);
    res.end(Buffer.from([0x00, 0xff, 0x61]));
  });
  await withApp(app, async (url) => {
    const send = () => fetch(`${url}/raw`, { method: 'POST', headers: { 'Idempotency-Key': 'raw-1' } });
    const first = await send();
    assert.equal(first.headers.get('content-type'), null);
    assert.deepEqual(Buffer.from(await first.arrayBuffer()), Buffer.from([0x00, 0xff, 0x61]));
    const again = await send();
    assert.equal(again.headers.get('idempotency-replayed'), 'true');
    assert.equal(again.headers.get('content-type'), null);
    assert.deepEqual(Buffer.from(await again.arrayBuffer()), Buffer.from([0x00, 0xff, 0x61]));
  });
});

test('route templates write each parameter {name} (rule 6)', async () => {
  const { routeTemplate } = await import('@idempotency/pg') as unknown as { routeTemplate: (path: string) => string };
  assert.equal(routeTemplate('/payments/:id/refunds'), '/payments/{id}/refunds');
  assert.equal(routeTemplate('/items/:id(\\d+)'), '/items/{id}');
  assert.equal(routeTemplate('/files/*path'), '/files/{path}');   // Express 5
  assert.equal(routeTemplate('/static/*'), '/static/{*}');        // Fastify
});
