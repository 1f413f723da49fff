// README.md's Express and Fastify examples, run as written: two lines make a
// handler idempotent.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { createDatabase, startApp, type TestDatabase } from './helpers.js';

const README = readFileSync(fileURLToPath(new URL('../README.md', import.meta.url)), 'utf8');

// The code block after <!-- example: NAME -->.
function example(name: string): string {
  const match = new RegExp(`<!-- example: ${name} -->\\n\`\`\`js\\n([\\s\\S]*?)\`\`\``).exec(README);
  assert.ok(match, `README.md has no example ${name}`);
  return match[1]!;
}

let db: TestDatabase;
before(async () => { db = await createDatabase('readme'); });
after(async () => { await db.drop(); });

for (const name of ['express', 'fastify']) {
  test(`README.md's ${name} example`, async () => {
    const code = example(name);
    if (name === 'express') assert.ok(code.trimEnd().split('\n').length <= 20, 'a 20-line example');
    // Inside the package, so that @idempotency/pg resolves to this build.
    const file = fileURLToPath(new URL(`./readme-${name}.mjs`, import.meta.url));
    writeFileSync(file, code);
    const { child, port } = await startApp(file, db.name);
    try {
      const url = `http://127.0.0.1:${port}/payments`;
      const key = `readme-${name}-${Date.now()}`;
      const send = () => fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json', 'Idempotency-Key': key }, body: JSON.stringify({ amount: 100, currency: 'EUR' }) });
      const first = await send();
      assert.equal(first.status, 201, await first.clone().text());
      const again = await send();
      assert.equal(again.status, 201);
      assert.equal(again.headers.get('idempotency-replayed'), 'true');
      assert.equal(again.headers.get('location'), first.headers.get('location'));
      assert.deepEqual(await again.json(), await first.json());
      const { rows: [n] } = await db.pool.query('SELECT count(*)::int AS n FROM payments');
      assert.equal(n.n, 1);
      assert.equal((await fetch(url, { method: 'POST', body: '{}', headers: { 'Content-Type': 'application/json' } })).status, 400);
    } finally {
      child.kill('SIGKILL');
      await db.pool.query('TRUNCATE payments');
    }
  });
}
