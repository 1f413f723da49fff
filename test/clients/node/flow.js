'use strict';
// flow.js: docs/clients.md's node-postgres guide, run through node-postgres
// with its defaults (a Pool configured by the PG* environment variables,
// autocommit, untyped text parameters) against the database test/clients/run
// prepared. The regions between "snippet:" and "end snippet" are the guide's
// code (test/clients/snippets.py checks that they are); the rest checks what
// the guide promises, and what it warns about, and prints TAP.
const pg = require('pg');

// snippet: flow
const NAMESPACE = 'payments';

class ProviderUnavailable extends Error {}

// POST /payments: header is the Idempotency-Key field (undefined when absent),
// request the parsed body, charge the payment provider's client.
async function createPayment(pool, header, request, charge) {
  const { rows: [h] } = await pool.query(
    'SELECT key, status, body FROM idempotency.idem_http_key($1, $2)', [NAMESPACE, header]);
  if (h.key === null) return { status: h.status, headers: {}, body: h.body };   // 400

  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const response = await attempt(client, h.key, request, charge);
    await client.query('COMMIT');
    return response;
  } catch (err) {
    await client.query('ROLLBACK');   // the claim goes with the work: a retry starts fresh
    throw err;
  } finally {
    client.release();
  }
}

async function attempt(client, key, request, charge) {
  // An object parameter is sent as JSON text; the server types it jsonb.
  const { rows: [o] } = await client.query(
    'SELECT kind, result, error, fence FROM idempotency.idem_begin($1, $2, $3)',
    [NAMESPACE, key, { method: 'POST', target: '/payments', body: request }]);
  switch (o.kind) {
    case 'prior_result':
      return { status: o.result.status, headers: { 'Idempotency-Replayed': 'true' }, body: o.result.body };
    case 'prior_error':
      return { status: 422, headers: { 'Idempotency-Replayed': 'true' },
               body: { code: o.error.class_tag, detail: o.error.message } };
    case 'in_flight':
      return { status: 409, headers: { 'Retry-After': '1' },
               body: { code: 'IDEMPOTENCY_REQUEST_IN_PROGRESS' } };
    case 'mismatch':
      return { status: 422, headers: {}, body: { code: 'IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST' } };
  }
  // fresh: this transaction holds the key and must finish it before COMMIT.
  if (!(request.amount > 0)) {
    const error = { class_tag: 'InvalidAmount', message: 'amount must be positive' };
    await client.query('SELECT idempotency.idem_fail_permanent($1, $2, $3, $4)',
                       [NAMESPACE, key, error, o.fence]);
    return { status: 422, headers: {}, body: { code: error.class_tag, detail: error.message } };
  }
  try {
    await charge(key, request);
  } catch (err) {
    if (!(err instanceof ProviderUnavailable)) throw err;
    // Keep the outage on record and release the key: the retry starts fresh.
    await client.query('INSERT INTO provider_outages (idempotency_key) VALUES ($1)', [key]);
    await client.query('SELECT idempotency.idem_fail_transient($1, $2, $3)', [NAMESPACE, key, o.fence]);
    return { status: 503, headers: { 'Retry-After': '1' }, body: { code: 'PROVIDER_UNAVAILABLE' } };
  }
  const { rows: [p] } = await client.query(
    'INSERT INTO payments (amount, currency) VALUES ($1, $2) RETURNING id',
    [request.amount, request.currency]);
  const result = { status: 201, body: { payment_id: Number(p.id) } };   // bigint arrives as a string
  await client.query('SELECT idempotency.idem_commit($1, $2, $3, $4)', [NAMESPACE, key, result, o.fence]);
  return { status: 201, headers: {}, body: result.body };
}
// end snippet

// snippet: typed
// A refund recorded as the composite type refund_receipt; its request is the amount.
async function refund(pool, key, amount) {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    // anyelement needs a type: an untyped parameter says it with a cast.
    const { rows: [o] } = await client.query(
      `SELECT o.kind, o.fence, r.refund_id, r.amount
         FROM idempotency.idem_begin_typed('refunds', $1, $2::numeric) o,
              idempotency.idem_result(o, NULL::refund_receipt) r`, [key, amount]);
    let receipt;
    if (o.kind === 'prior_result') {
      receipt = { refundId: o.refund_id, amount: o.amount };   // numeric arrives as a string
    } else if (o.kind === 'fresh') {
      const { rows: [r] } = await client.query(
        'INSERT INTO refunds (amount) VALUES ($1) RETURNING id, amount', [amount]);
      await client.query(
        'SELECT idempotency.idem_commit_typed($1, $2, ROW($3, $4)::refund_receipt, $5)',
        ['refunds', key, r.id, r.amount, o.fence]);
      receipt = { refundId: r.id, amount: r.amount };
    } else {
      throw new Error(`refund ${key} is ${o.kind}`);
    }
    await client.query('COMMIT');
    return receipt;
  } catch (err) {
    await client.query('ROLLBACK');
    throw err;
  } finally {
    client.release();
  }
}
// end snippet

// snippet: errors
// err.code is the SQLSTATE; err.detail and err.hint say what to do.
// String(err) and err.message hold only the first line.
function describe(err) {
  return { sqlstate: err.code, message: err.message, detail: err.detail, hint: err.hint };
}
// end snippet

// snippet: recipes
// docs/usage.md's HTTP handler: one statement, its own transaction in autocommit mode.
async function createPaymentInSql(pool, header, request) {
  const { rows: [r] } = await pool.query(
    'SELECT status, headers, body FROM create_payment($1, $2)', [header, request]);
  return r;
}

// docs/usage.md's stored procedure commits: CALL it outside BEGIN ... COMMIT.
async function transfer(pool, key, fromId, toId, amount) {
  await pool.query('CALL transfer($1, $2, $3, $4)', [key, fromId, toId, amount]);
}
// end snippet

// ---- the checks ----
let count = 0;
let failed = 0;
function ok(cond, name, diag) {
  count += 1;
  if (!cond) failed += 1;
  console.log(`${cond ? 'ok' : 'not ok'} ${count} - ${name}`);
  if (!cond && diag !== undefined) console.error(`# ${JSON.stringify(diag)}`);
}
async function rejection(promise) {
  try { await promise; } catch (err) { return err; }
  return null;
}
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

async function main() {
  const pool = new pg.Pool();
  const one = async (sql, params) => (await pool.query(sql, params)).rows[0];
  const payments = async () => Number((await one('SELECT count(*) AS n FROM payments')).n);
  let failNext = null;
  const charge = async () => {
    const err = failNext;
    failNext = null;
    if (err) throw err;
  };
  const eur100 = { amount: 100, currency: 'EUR' };
  const before = await payments();

  let r = await createPayment(pool, undefined, eur100, charge);
  ok(r.status === 400 && r.body.code === 'MISSING_IDEMPOTENCY_KEY', 'no header: 400 MISSING_IDEMPOTENCY_KEY', r);
  r = await createPayment(pool, '"node-1', eur100, charge);
  ok(r.status === 400 && r.body.code === 'INVALID_IDEMPOTENCY_KEY', 'unterminated quoted header: 400 INVALID_IDEMPOTENCY_KEY', r);

  const first = await createPayment(pool, 'node-1', eur100, charge);
  ok(first.status === 201 && Number.isInteger(first.body.payment_id), 'fresh: 201 with the payment id', first);
  r = await createPayment(pool, '"node-1"', { currency: 'EUR', amount: 100 }, charge);
  ok(r.status === 201 && same(r.body, first.body) && r.headers['Idempotency-Replayed'] === 'true',
     'retry (quoted header, keys reordered): the same 201 and body, flagged as a replay', r);
  r = await createPayment(pool, 'node-1', { amount: 999, currency: 'EUR' }, charge);
  ok(r.status === 422 && r.body.code === 'IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST', 'same key, other amount: 422 mismatch', r);

  const holder = await pool.connect();
  await holder.query('BEGIN');
  const held = await holder.query('SELECT kind FROM idempotency.idem_begin($1, $2, $3)',
    [NAMESPACE, 'node-2', { method: 'POST', target: '/payments', body: eur100 }]);
  ok(held.rows[0].kind === 'fresh', 'another connection holds node-2 in an open transaction');
  r = await createPayment(pool, 'node-2', eur100, charge);
  ok(r.status === 409 && r.headers['Retry-After'] === '1', 'while it is held: 409 with Retry-After', r);
  await holder.query('ROLLBACK');
  holder.release();
  r = await createPayment(pool, 'node-2', eur100, charge);
  ok(r.status === 201, 'after the holder rolled back: fresh, 201', r);

  r = await createPayment(pool, 'node-3', { amount: -5, currency: 'EUR' }, charge);
  ok(r.status === 422 && r.body.code === 'InvalidAmount', 'a refused amount: 422 recorded with idem_fail_permanent', r);
  r = await createPayment(pool, 'node-3', { amount: -5, currency: 'EUR' }, charge);
  ok(r.status === 422 && r.body.code === 'InvalidAmount' && r.headers['Idempotency-Replayed'] === 'true',
     'its retry: the same 422, replayed', r);

  failNext = new ProviderUnavailable('provider down');
  r = await createPayment(pool, 'node-4', eur100, charge);
  ok(r.status === 503, 'provider unavailable: 503 after idem_fail_transient', r);
  const outages = await one('SELECT count(*)::int AS n FROM provider_outages WHERE idempotency_key = $1', ['node-4']);
  ok(outages.n === 1, 'the outage row committed with the released key', outages);
  r = await createPayment(pool, 'node-4', eur100, charge);
  ok(r.status === 201, 'its retry: fresh, 201', r);

  failNext = new Error('connection reset by the provider');
  const err = await rejection(createPayment(pool, 'node-5', eur100, charge));
  ok(err && err.message === 'connection reset by the provider', 'an unexpected error propagates after ROLLBACK', err && err.message);
  r = await createPayment(pool, 'node-5', eur100, charge);
  ok(r.status === 201, 'its retry: fresh, 201 (the claim was rolled back)', r);
  ok(await payments() - before === 4, 'one payment per key that succeeded (node-1, -2, -4, -5)');

  // Typed results.
  const receipt = await refund(pool, 'rf-node-1', 25);
  ok(Number.isInteger(receipt.refundId) && receipt.amount === '25', 'typed: fresh refund recorded as refund_receipt', receipt);
  const again = await refund(pool, 'rf-node-1', 25);
  ok(same(again, receipt), 'typed: the retry decodes the same receipt with idem_result', again);
  ok((await one('SELECT count(*)::int AS n FROM refunds')).n === 1, 'typed: one refund row');
  let e = await rejection(pool.query("SELECT kind FROM idempotency.idem_begin_typed('refunds', $1, $2)", ['rf-node-2', 25]));
  ok(e && e.code === '42804', 'typed without a cast: 42804 (anyelement cannot be unknown)', e && describe(e));
  const tuple = await one(`SELECT idempotency.idem_result(o, NULL::refund_receipt) AS receipt
                             FROM idempotency.idem_begin_typed('refunds', 'rf-node-1', 25::numeric) o`);
  ok(tuple.receipt === `(${receipt.refundId},25)`, 'a composite selected as one column arrives as a tuple string', tuple);

  // Errors: detail and hint.
  await pool.query('ALTER TYPE refund_receipt ADD ATTRIBUTE note text');
  e = await rejection(refund(pool, 'rf-node-1', 25));
  const d = e && describe(e);
  ok(d && d.sqlstate === 'ID001'
       && d.message === 'incompatible stored state: the stored result does not fit type public.refund_receipt'
       && d.detail === 'At $: field "note" of type public.refund_receipt is missing from the stored value.'
       && d.hint === 'The type changed since the result was recorded. Decode it as jsonb, or use a new namespace for the new type.',
     'a changed type: ID001 with the detail and hint api.md shows', d);
  ok(e && !String(e).includes('note'), 'String(err) drops the detail', e && String(e));
  await pool.query('ALTER TYPE refund_receipt DROP ATTRIBUTE note');

  e = await rejection(pool.query('BEGIN; SELECT * FROM create_payment($1, $2); COMMIT;', ['node-6', eur100]));
  ok(e && e.code === '42601', 'several statements in one parameterized query: 42601', e && describe(e));
  e = await rejection(pool.query("SELECT kind FROM idempotency.idem_begin('payments', 'node-7', $1)", [[1, 2]]));
  ok(e && e.code === '22P02', 'a JS array is sent as a PostgreSQL array, not JSON: 22P02', e && describe(e));
  const begun = await rejection(pool.query("SELECT kind FROM idempotency.idem_begin('payments', 'node-8', '{}')"));
  ok(begun && begun.code === '25000', 'a fresh begin alone in autocommit mode: 25000 at its COMMIT', begun && describe(begun));

  const w = await one('SELECT kind FROM idempotency.idem_begin($1, $2, $3, $4)', [NAMESPACE, 'node-1', {}, '1 hour']);
  ok(w.kind === 'mismatch', 'a string for the interval parameter', w);
  const g = await one('SELECT idempotency.idem_grant($1, $2) AS granted', ['node-grants', 'postgres']);
  ok(g.granted === true, 'a string for the regrole parameter', g);

  // A client that stops talking inside its transaction (half-open): its
  // session, and so its claim, lasts until idle_in_transaction_session_timeout ends it.
  const gone = new pg.Client();
  gone.on('error', () => {});   // the server's termination arrives as an error event
  await gone.connect();
  await gone.query("SET idle_in_transaction_session_timeout = '1s'");
  await gone.query('BEGIN');
  await gone.query('SELECT kind FROM idempotency.idem_begin($1, $2, $3)',
                   [NAMESPACE, 'node-9', { method: 'POST', target: '/payments', body: eur100 }]);
  r = await createPayment(pool, 'node-9', eur100, charge);
  ok(r.status === 409, 'a client silent inside its transaction holds its key in flight', r);
  await new Promise((resolve) => setTimeout(resolve, 1500));
  r = await createPayment(pool, 'node-9', eur100, charge);
  ok(r.status === 201, 'once idle_in_transaction_session_timeout ended its session, the retry is fresh', r);

  // docs/usage.md's recipes.
  r = await createPaymentInSql(pool, 'node-sql-1', eur100);
  ok(r.status === 201 && Number.isInteger(r.body.payment_id), "usage.md's create_payment: 201", r);
  const replay = await createPaymentInSql(pool, 'node-sql-1', eur100);
  ok(replay.status === 201 && same(replay.body, r.body) && replay.headers['Idempotency-Replayed'] === 'true',
     "usage.md's create_payment: the retry replays", replay);
  await transfer(pool, 'tr-node', 1, 2, 30);
  await transfer(pool, 'tr-node', 1, 2, 30);
  const balances = (await pool.query('SELECT balance FROM accounts ORDER BY id')).rows.map((x) => x.balance);
  ok(same(balances, ['40', '60']), "usage.md's transfer, called twice: moved once", balances);

  await pool.end();
  console.log(`1..${count}`);
  process.exitCode = failed ? 1 : 0;
}

main().catch((err) => {
  console.log(`Bail out! ${err.stack}`);
  process.exitCode = 1;
});
