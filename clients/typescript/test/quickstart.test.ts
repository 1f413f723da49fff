// docs/quickstart.md's TypeScript tab, run as written: the quick start's own
// table, then the Express app against a client that retries.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { REPO, createDatabase, startApp, type TestDatabase } from './helpers.js';

const GUIDE = readFileSync(`${REPO}docs/quickstart.md`, 'utf8');

// The code block after <!-- quickstart: NAME -->.
function block(name: string): string {
  const match = new RegExp(`<!-- quickstart: ${name} -->\\n\`\`\`[a-z]*\\n([\\s\\S]*?)\`\`\``).exec(GUIDE);
  assert.ok(match, `docs/quickstart.md has no block after <!-- quickstart: ${name} -->`);
  return match[1]!;
}

let db: TestDatabase;
before(async () => {
  db = await createDatabase('quickstart', { bare: true });
  await db.pool.query(block('schema'));   // the extension and the table, as the guide makes them
});
after(async () => { await db.drop(); });

test("docs/quickstart.md's Express app answers a retry with the first answer", async () => {
  // Inside the package, so that @idempotency/pg resolves to this build.
  const file = fileURLToPath(new URL('./quickstart-express.mjs', import.meta.url));
  writeFileSync(file, block('typescript'));
  const { child, port } = await startApp(file, db.name);
  try {
    const url = `http://127.0.0.1:${port}/payments`;
    const post = (key: string | null, body: object) => fetch(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...(key === null ? {} : { 'Idempotency-Key': key }) },
      body: JSON.stringify(body),
    });
    const key = `quickstart-${Date.now()}`;
    const first = await post(key, { amount: 100, currency: 'EUR' });
    assert.equal(first.status, 201, await first.clone().text());
    const again = await post(`"${key}"`, { amount: 100, currency: 'EUR' });
    assert.equal(again.status, 201);
    assert.equal(again.headers.get('idempotency-replayed'), 'true');
    assert.equal(again.headers.get('location'), first.headers.get('location'));
    assert.deepEqual(await again.json(), await first.json());
    const reused = await post(key, { amount: 99, currency: 'EUR' });
    assert.equal(reused.status, 422);
    assert.equal(((await reused.json()) as { code: string }).code, 'IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST');
    assert.equal((await post(null, { amount: 100, currency: 'EUR' })).status, 400);
    const refusal = `${key}-refused`;
    const no = await post(refusal, { amount: 0, currency: 'EUR' });
    const noAgain = await post(refusal, { amount: 0, currency: 'EUR' });
    assert.equal(no.status, 422);
    assert.equal(noAgain.status, 422);
    assert.equal(noAgain.headers.get('idempotency-replayed'), 'true');
    const problem = (await no.json()) as { code: string };
    assert.equal(problem.code, 'InvalidAmount');
    assert.deepEqual(await noAgain.json(), problem);
    const { rows: [n] } = await db.pool.query('SELECT count(*)::int AS n FROM payments');
    assert.equal(n.n, 1);
  } finally {
    child.kill('SIGKILL');
  }
});
