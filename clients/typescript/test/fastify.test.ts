// The Fastify plugin over real HTTP: apps/payments.ts's service, then the
// plugin's reach: which routes it keys.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import Fastify from 'fastify';
import idempotency from '@idempotency/pg/fastify';
import { httpSuite } from './http-suite.js';
import { createDatabase, type TestDatabase } from './helpers.js';

httpSuite('fastify');

let db: TestDatabase;
before(async () => { db = await createDatabase('fastify_reach'); });
after(async () => { await db.drop(); });

test('global: false keys only the routes whose config asks, and only the methods they cover (rule 1)', async () => {
  const app = Fastify();
  await app.register(idempotency, { pool: db.pool, namespace: 'payments', global: false });
  let runs = 0;
  // A route of another method is keyed when its config names that method; `true` alone keeps POST and PATCH.
  app.put('/orders/:id', { config: { idempotency: { methods: ['PUT'] } as any } }, async (request) => {
    runs++;
    await request.idempotency!.client.query(`INSERT INTO notes (idem_key, body) VALUES ($1, 'put')`, [request.idempotency!.key]);
    return { keyed: true };
  });
  app.put('/plain-put', { config: { idempotency: true } }, async (request) => ({ keyed: request.idempotency !== null }));
  app.post('/plain', async (request) => ({ keyed: request.idempotency !== null }));
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  try {
    const put = (key?: string) => fetch(`${url}/orders/1`, { method: 'PUT', headers: key ? { 'Idempotency-Key': key } : {} });
    assert.equal((await put()).status, 400);
    assert.equal((await put('reach-put')).status, 200);
    const again = await put('reach-put');
    assert.equal(again.headers.get('idempotency-replayed'), 'true');
    assert.equal(runs, 1);
    const plainPut = await fetch(`${url}/plain-put`, { method: 'PUT' });
    assert.equal(plainPut.status, 200, 'a PUT passes through, without the store');
    assert.deepEqual(await plainPut.json(), { keyed: false });
    const plain = await fetch(`${url}/plain`, { method: 'POST' });
    assert.equal(plain.status, 200);
    assert.deepEqual(await plain.json(), { keyed: false });
  } finally {
    await app.close();
  }
});
