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

test('mounted with app.use: POST and PATCH keyed by their path, GET not', async () => {
  const app = express();
  app.use(idempotency({ pool: db.pool, namespace: 'payments' }));
  app.post('/orders/:id', (req, res) => { res.status(201).json({ keyed: req.idempotency !== undefined }); });
  app.get('/orders/:id', (req, res) => { res.json({ keyed: req.idempotency !== undefined }); });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    assert.equal((await fetch(`${url}/orders/7`, { method: 'POST' })).status, 400);
    const posted = await fetch(`${url}/orders/7`, { method: 'POST', headers: { 'Idempotency-Key': 'mounted-1' } });
    assert.deepEqual(await posted.json(), { keyed: true });
    const got = await fetch(`${url}/orders/7`);
    assert.deepEqual(await got.json(), { keyed: false });
    // No route had matched yet: the target is the path.
    const c = await db.client();
    await c.query('BEGIN');
    const o = await new Namespace('payments').begin(c, 'mounted-1', {});
    await c.query('ROLLBACK');
    assert.equal(o.kind, 'mismatch');
    assert.deepEqual(o.kind === 'mismatch' && o.recordedRequest, { method: 'POST', target: '/orders/7', body: null });
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
});
