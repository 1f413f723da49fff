// mint, parse and the namespace check against the repository's known answers
// (test/kat/keys.csv, the mint rows of test/kat/vectors.csv), read from there.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { IdempotencyError, Namespace, mint, parse, validateNamespace } from '@idempotency/pg';
import { createDatabase, readCsv, type TestDatabase } from './helpers.js';

const NAMESPACE = 'payments';

// Runs fn and answers its result, or the error it threw as {message, detail} (22023 checked).
function answer(fn: () => unknown): { value: unknown } | { message: string; detail: string } {
  try {
    return { value: fn() };
  } catch (err) {
    assert.ok(err instanceof IdempotencyError, `expected an IdempotencyError, got ${String(err)}`);
    assert.equal(err.code, '22023');
    return { message: err.message, detail: err.detail ?? '' };
  }
}

// What a keys.csv row expects: the key (or "ok"), or the error.
function expected(row: Record<string, string>): { value: unknown } | { message: string; detail: string } {
  if (row['key'] === '') return { message: row['message']!, detail: row['detail']! };
  if (row['function'] === 'namespace') return { value: undefined };
  return { value: JSON.parse(row['key']!) };
}

describe('test/kat/keys.csv', () => {
  const rows = readCsv('test/kat/keys.csv');
  test('has rows of all three functions', () => {
    for (const fn of ['namespace', 'parse', 'mint']) assert.ok(rows.some((r) => r['function'] === fn), fn);
  });
  for (const row of rows) {
    test(`${row['function']} ${row['name']}`, () => {
      const input = JSON.parse(row['input']!);
      switch (row['function']) {
        case 'namespace':
          assert.deepEqual(answer(() => validateNamespace(input)), expected(row));
          assert.deepEqual(answer(() => { new Namespace(input); }), expected(row));
          break;
        case 'parse':
          assert.deepEqual(answer(() => parse(NAMESPACE, input)), expected(row));
          break;
        case 'mint':
          assert.deepEqual(answer(() => mint(NAMESPACE, input)), expected(row));
          break;
        default:
          assert.fail(`unknown function ${row['function']}`);
      }
    });
  }
});

describe('test/kat/vectors.csv, mint rows', () => {
  const rows = readCsv('test/kat/vectors.csv').filter((r) => r['kind'] === 'mint');
  test('has mint rows', () => assert.ok(rows.length >= 20, `${rows.length} rows`));
  for (const row of rows) {
    test(`mint ${row['name']}`, () => {
      const parts = JSON.parse(row['input']!) as string[];
      // parts_hex restates the parts' UTF-8 bytes: the CSV was read as written.
      assert.equal(parts.map((p) => Buffer.from(p, 'utf8').toString('hex')).join('.'), row['parts_hex']);
      assert.equal(mint(NAMESPACE, parts), row['sha256']);
      assert.equal(mint('another-namespace', parts), row['sha256'], 'the namespace does not enter the key');
    });
  }
});

describe('the rules the files do not show', () => {
  test('a namespace is checked before the key or the parts', () => {
    assert.equal(answer(() => parse('Bad', null)).hasOwnProperty('detail'), true);
    assert.equal(answer(() => mint('Bad', null as unknown as string[])).hasOwnProperty('detail'), true);
    assert.deepEqual(answer(() => validateNamespace(null)), {
      message: 'idempotency namespace must not be null', detail: 'Pass a namespace of 1 to 64 characters: a-z, 0-9, "-" and "_".',
    });
  });
  test('null parts', () => {
    assert.deepEqual(answer(() => mint(NAMESPACE, null as unknown as string[])), {
      message: 'idempotency key parts must not be null', detail: 'Pass a text[] with at least one non-blank part.',
    });
  });
  test('a part that is not a string is a TypeError, not a key', () => {
    assert.throws(() => mint(NAMESPACE, [42 as unknown as string]), TypeError);
  });
});

describe('the same answers as the server', () => {
  let db: TestDatabase;
  before(async () => { db = await createDatabase('keys'); });
  after(async () => { await db.drop(); });

  // Inputs beyond the files: a lone surrogate (sent as U+FFFD), white space the
  // JavaScript \s class gets wrong (U+0085 is White_Space, U+FEFF is not).
  const parses = ['\ud800key', '\u0085key\u0085', '\ufeffkey', ' a\u00a0b ', '\u180ekey'];
  const parts = [['\ud800'], ['\ufeff'], ['\u0085'], ['a', '\u180e'], ['x'.repeat(70000)]];
  const namespaces = ['pay\ud800', 'pay\u0085', 'x'.repeat(65) + 'A'];

  test('parse', async () => {
    for (const raw of parses) {
      const server = await db.pool.query('SELECT idempotency.idem_parse($1, $2) AS key', [NAMESPACE, raw])
        .then((r) => ({ value: r.rows[0].key as unknown }), (e) => ({ message: e.message as string, detail: e.detail as string }));
      assert.deepEqual(answer(() => parse(NAMESPACE, raw)), server, JSON.stringify(raw));
    }
  });
  test('mint', async () => {
    for (const p of parts) {
      const server = await db.pool.query('SELECT idempotency.idem_mint($1, $2::text[]) AS key', [NAMESPACE, p])
        .then((r) => ({ value: r.rows[0].key as unknown }), (e) => ({ message: e.message as string, detail: e.detail as string }));
      assert.deepEqual(answer(() => mint(NAMESPACE, p)), server, JSON.stringify(p).slice(0, 40));
    }
  });
  test('namespace', async () => {
    for (const ns of namespaces) {
      const server = await db.pool.query('SELECT idempotency.idem_parse($1, $2) AS key', [ns, 'k'])
        .then((r) => ({ value: r.rows[0].key as unknown }), (e) => ({ message: e.message as string, detail: e.detail as string }));
      assert.deepEqual(answer(() => parse(ns, 'k')), server, JSON.stringify(ns));
    }
  });
});
