// The typed layer on a real server: every outcome's round trip, the fence kept
// exact, the autocommit refusal, the version check and the server's errors.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { IdempotencyError, IncompatibleServerError, Namespace, checkServer, type Outcome } from '@idempotency/pg';
import { outcomeFromRow, OUTCOME_COLUMNS } from '../dist/esm/outcome.js';
import { createDatabase, EDITION, type TestDatabase } from './helpers.js';

let db: TestDatabase;
before(async () => {
  db = await createDatabase('store');
  await db.pool.query(`SELECT idempotency.idem_namespace_configure('leased', in_progress_lease => '1 second', store_request => true)`);
  await db.pool.query(`SELECT idempotency.idem_namespace_configure('kept', store_request => true)`);
  await db.pool.query(`SELECT idempotency.idem_namespace_configure('unkept', store_request => false)`);
});
after(async () => { await db.drop(); });

const payments = new Namespace('payments');

// Runs fn in a transaction on a client of its own, committed unless fn throws.
async function inTransaction<T>(fn: (c: pg.Client) => Promise<T>, client?: pg.Client): Promise<T> {
  const c = client ?? await db.client();
  await c.query('BEGIN');
  try {
    const r = await fn(c);
    await c.query('COMMIT');
    return r;
  } catch (err) {
    await c.query('ROLLBACK');
    throw err;
  }
}

// begin in a transaction that is rolled back: what the key answers now, leaving nothing.
async function peek(ns: Namespace, key: string, request: unknown): Promise<Outcome> {
  const c = await db.client();
  await c.query('BEGIN');
  try {
    return await ns.begin(c, key, request);
  } finally {
    await c.query('ROLLBACK');
  }
}

function expectKind<K extends Outcome['kind']>(o: Outcome, kind: K): Extract<Outcome, { kind: K }> {
  assert.equal(o.kind, kind, JSON.stringify(o, (_k, v) => (typeof v === 'bigint' ? String(v) : v)));
  return o as Extract<Outcome, { kind: K }>;
}

describe('outcomes', () => {
  test('fresh, then commit: prior_result replays the result', async () => {
    const result = { status: 201, body: { payment_id: 7, amount: 12.5, tags: ['a', 'b'] } };
    await inTransaction(async (c) => {
      const o = expectKind(await payments.begin(c, 'k-commit', { amount: 12.5 }), 'fresh');
      assert.equal(typeof o.fence, 'bigint');
      assert.equal(o.attempt, 1);
      assert.equal(o.takeover, false);
      assert.equal(o.leaseEndsAt, null);
      assert.equal(o.recoveryPoint, null);
      await payments.commit(c, 'k-commit', result, o.fence);
    });
    const again = await inTransaction((c) => payments.begin(c, 'k-commit', { amount: 12.5 }));
    assert.deepEqual(expectKind(again, 'prior_result').result, result);
  });

  test('fail_permanent: prior_error carries the recorded error', async () => {
    const error = { class_tag: 'InvalidAmount', message: 'amount must be positive', cause: 'amount -5' };
    await inTransaction(async (c) => {
      const o = expectKind(await payments.begin(c, 'k-refused', { amount: -5 }), 'fresh');
      await payments.failPermanent(c, 'k-refused', error, o.fence);
    });
    const again = await inTransaction((c) => payments.begin(c, 'k-refused', { amount: -5 }));
    assert.deepEqual(expectKind(again, 'prior_error').error, error);
  });

  test('fail_transient releases the key and keeps the transaction\'s other writes', async () => {
    await inTransaction(async (c) => {
      const o = expectKind(await payments.begin(c, 'k-transient', { amount: 1 }), 'fresh');
      await c.query(`INSERT INTO outages VALUES ('k-transient')`);
      await payments.failTransient(c, 'k-transient', o.fence);
    });
    const again = await inTransaction(async (c) => {
      const o = expectKind(await payments.begin(c, 'k-transient', { amount: 1 }), 'fresh');
      await payments.commit(c, 'k-transient', { ok: true }, o.fence);
      return o;
    });
    assert.equal(again.kind, 'fresh');
    assert.equal((await db.pool.query(`SELECT count(*)::int AS n FROM outages WHERE idem_key = 'k-transient'`)).rows[0].n, 1);
  });

  test('mismatch: the hashes, and the recorded request where the namespace keeps it', async () => {
    const kept = new Namespace('kept');
    for (const ns of [new Namespace('unkept'), kept]) {
      await inTransaction(async (c) => {
        const o = expectKind(await ns.begin(c, 'k-reused', { amount: 1 }), 'fresh');
        await ns.commit(c, 'k-reused', { ok: true }, o.fence);
      });
      const m = expectKind(await peek(ns, 'k-reused', { amount: 2 }), 'mismatch');
      assert.ok(Buffer.isBuffer(m.submittedHash) && m.submittedHash.length === 32);
      assert.ok(Buffer.isBuffer(m.recordedHash) && m.recordedHash.length === 32);
      assert.notDeepEqual(m.recordedHash, m.submittedHash);
      const { rows: [h] } = await db.pool.query(`SELECT encode(idempotency.idem_request_hash('{"amount": 2}'), 'hex') AS h`);
      assert.equal(m.submittedHash.toString('hex'), h.h, 'the server fingerprinted the request as sent');
      assert.deepEqual(m.recordedRequest, ns === kept ? { amount: 1 } : null);
    }
  });

  test('in_flight while another transaction holds the key', async () => {
    const holder = await db.client();
    await holder.query('BEGIN');
    try {
      expectKind(await payments.begin(holder, 'k-held', { amount: 1 }), 'fresh');
      const other = expectKind(await peek(payments, 'k-held', { amount: 1 }), 'in_flight');
      assert.equal(other.leaseEndsAt, null);
      assert.ok(other.age === null || other.age >= 0);
    } finally {
      await holder.query('ROLLBACK');
    }
    // The holder rolled back: the claim went with it.
    expectKind(await peek(payments, 'k-held', { amount: 1 }), 'fresh');
  });

  test('a lease: extend_lease, save_point, in_flight with its end, then a takeover with the recovery point', async () => {
    const leased = new Namespace('leased');
    const first = await inTransaction(async (c) => {
      const o = expectKind(await leased.begin(c, 'k-lease', { job: 1 }), 'fresh');
      assert.ok(o.leaseEndsAt instanceof Date);
      const ends = await leased.extendLease(c, 'k-lease', o.fence);
      assert.ok(ends.getTime() >= o.leaseEndsAt.getTime());
      const at = await leased.savePoint(c, 'k-lease', 'charged', { charge_id: 'ch_1', big: 9007199254740993 }, o.fence);
      assert.ok(at instanceof Date);
      return o;   // committed unfinished: the lease holds the claim across transactions
    });
    const waiting = expectKind(await peek(leased, 'k-lease', { job: 1 }), 'in_flight');
    assert.ok(waiting.leaseEndsAt instanceof Date);
    assert.equal(typeof waiting.age, 'number');
    await new Promise((r) => setTimeout(r, 1300));
    await inTransaction(async (c) => {
      const o = expectKind(await leased.begin(c, 'k-lease', { job: 1 }), 'fresh');
      assert.equal(o.takeover, true);
      assert.equal(o.attempt, 2);
      assert.notEqual(o.fence, first.fence);
      assert.equal(o.recoveryPoint, 'charged');
      assert.deepEqual(o.recoveryState, { charge_id: 'ch_1', big: 9007199254740992 });
      await leased.commit(c, 'k-lease', { done: true }, o.fence);
    });
  });
});

describe('fences', () => {
  test('a fence is a bigint, exact even where the application parses int8 as a Number', async () => {
    const lossy = new pg.Client({ database: db.name, types: { getTypeParser: (oid: number, format?: any) => (oid === 20 ? Number : pg.types.getTypeParser(oid, format)) } as any });
    await lossy.connect();
    try {
      const { rows: [n] } = await lossy.query(`SELECT 9007199254740993::bigint AS n`);
      assert.equal(n.n, 9007199254740992, 'this client does lose digits of an int8');
      for (let i = 0; i < 5; i++) {
        await inTransaction(async (c) => {
          const o = expectKind(await payments.begin(c, `k-fence-${i}`, {}), 'fresh');
          const { rows: [state] } = await c.query(`SELECT $1::text::bigint::text = $1::text AS same`, [String(o.fence)]);
          assert.equal(state.same, true);
          await payments.commit(c, `k-fence-${i}`, { i }, o.fence);   // a fence with a lost digit is refused
        }, lossy);
      }
    } finally {
      await lossy.end();
    }
  });

  test('a wrong fence is the server\'s error, SQLSTATE, message, detail and hint preserved', async () => {
    const err = await inTransaction(async (c) => {
      const o = expectKind(await payments.begin(c, 'k-wrong-fence', {}), 'fresh');
      return payments.commit(c, 'k-wrong-fence', {}, o.fence + 1n).then(() => null, (e: unknown) => e);
    }).catch((e: unknown) => e);
    assert.ok(err instanceof pg.DatabaseError, String(err));
    assert.equal(err.code, '55000');
    assert.equal(err.message, 'cannot commit an idempotency record held under another fence');
    assert.match(err.detail ?? '', /^The record for key sha256:[0-9a-f]+\.\.\. is in progress under attempt 1/);
    assert.equal(err.hint, 'Pass the fence that idem_begin answered with fresh for this key.');
  });

  test('a number is refused as a fence: it would have lost digits', async () => {
    const c = await db.client();
    await assert.rejects(payments.commit(c, 'k', {}, 12 as unknown as bigint), TypeError);
  });
});

describe('transactions', () => {
  test('begin refuses a connection in autocommit mode, and sends nothing', async () => {
    const c = await db.client();
    let sent = 0;
    const counting = { query: (...a: [string, unknown[]?]) => { sent++; return c.query(...a); }, getTransactionStatus: () => c.getTransactionStatus() };
    await checkServer(counting);
    sent = 0;
    await assert.rejects(payments.begin(counting, 'k-auto', { amount: 1 }), (err: unknown) => {
      assert.ok(err instanceof IdempotencyError);
      assert.equal(err.code, '25P01');
      assert.equal(err.message, 'idem_begin needs a transaction block');
      assert.match(err.hint ?? '', /BEGIN/);
      return true;
    });
    assert.equal(sent, 0);
    expectKind(await peek(payments, 'k-auto', { amount: 1 }), 'fresh');
  });

  test('the caller\'s transaction stays the caller\'s: begin neither commits nor rolls back', async () => {
    const c = await db.client();
    await c.query('BEGIN');
    await c.query(`INSERT INTO notes (idem_key, body) VALUES ('k-own', 'mine')`);
    expectKind(await payments.begin(c, 'k-own', {}), 'fresh');
    assert.equal(c.getTransactionStatus(), 'T');
    await c.query('ROLLBACK');
    assert.equal((await db.pool.query(`SELECT count(*)::int AS n FROM notes WHERE idem_key = 'k-own'`)).rows[0].n, 0);
    expectKind(await peek(payments, 'k-own', {}), 'fresh');
  });
});

describe('rows mapped by column name', () => {
  test('columns a later release adds are ignored', async () => {
    const { rows: [row] } = await db.pool.query(
      `SELECT 'a column from 1.1'::text AS later_column, ${OUTCOME_COLUMNS}, 42 AS another
         FROM idempotency.idem_begin('payments', 'k-commit', '{"amount": 12.5}') o`);
    const o = outcomeFromRow(row);
    assert.equal(o.kind, 'prior_result');
    assert.deepEqual(Object.keys(o).sort(), ['kind', 'result']);
  });

  test('an unknown kind is refused', () => {
    assert.throws(() => outcomeFromRow({ kind: 'maybe' }), /unknown idempotency outcome "maybe"/);
  });
});

describe('the server\'s version, asked at first use', () => {
  test('asked once per connection', async () => {
    const c = await db.client();
    const texts: string[] = [];
    const counting = { query: (t: string, v?: unknown[]) => { texts.push(t); return c.query(t, v); }, getTransactionStatus: () => c.getTransactionStatus() };
    await c.query('BEGIN');
    await payments.begin(counting, 'k-once-1', {});
    await payments.begin(counting, 'k-once-2', {});
    await c.query('ROLLBACK');
    assert.equal(texts.filter((t) => t.includes('idem_version')).length, 2, 'the catalog look and the call, once');
    assert.equal(texts.length, 4);
    assert.deepEqual(await checkServer(c), { edition: EDITION, version: (await checkServer(c)).version, api: '1.0' });
  });

  test('a database without the extension', async () => {
    const bare = await createDatabase('bare', { bare: true });
    try {
      const c = await bare.client();
      await c.query('BEGIN');
      await assert.rejects(payments.begin(c, 'k', {}), (err: unknown) => {
        assert.ok(err instanceof IncompatibleServerError);
        assert.equal(err.code, '55000');
        assert.equal(err.message, 'the idempotency extension is not installed in this database');
        assert.equal(err.hint, "Run CREATE EXTENSION idempotency, or, on a managed PostgreSQL that cannot load it, the portable edition's script (docs/managed.md).");
        return true;
      });
      assert.equal(c.getTransactionStatus(), 'T', 'the caller\'s transaction is not aborted by the check');
      await c.query('ROLLBACK');
    } finally {
      await bare.drop();
    }
  });

  test('an extension older than 1.0.0', async () => {
    const old = await createDatabase('old', { bare: true });
    try {
      await old.pool.query(`CREATE EXTENSION idempotency VERSION '0.9.2'`);
      const c = await old.client();
      await assert.rejects(checkServer(c), (err: unknown) => {
        assert.ok(err instanceof IncompatibleServerError);
        assert.equal(err.message, 'the idempotency extension 0.9.2 is older than 1.0.0');
        assert.equal(err.hint, 'Run ALTER EXTENSION idempotency UPDATE.');
        return true;
      });
      // Updated, the same connection is accepted: a refusal is not remembered.
      await old.pool.query('ALTER EXTENSION idempotency UPDATE');
      assert.equal((await checkServer(c)).api, '1.0');
    } finally {
      await old.drop();
    }
  });

  test('an API major this package does not know', async () => {
    const future = await createDatabase('future', { bare: true });
    try {
      await future.pool.query(`CREATE SCHEMA idempotency;
        CREATE FUNCTION idempotency.idem_version(OUT edition text, OUT version text, OUT api text)
          LANGUAGE sql AS $$ SELECT 'native', '2.0.0', '2.0' $$`);
      const c = await future.client();
      await assert.rejects(checkServer(c), (err: unknown) => {
        assert.ok(err instanceof IncompatibleServerError);
        assert.equal(err.message, `the idempotency extension's API 2.0 is not one @idempotency/pg knows`);
        assert.equal(err.detail, 'The server has the native edition 2.0.0, API 2.0; @idempotency/pg knows API major 1.');
        return true;
      });
    } finally {
      await future.drop();
    }
  });
});
