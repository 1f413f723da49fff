'use strict';
// pooler.js: node-postgres behind PgBouncer in transaction pooling, as
// docs/clients.md's section on poolers says to query, and why. Run by
// test/pooler/run with the PG* variables naming its PgBouncer (the database
// PGDATABASE through a pool of two server connections) and SERVER_PORT the
// server itself, for the checks; prints TAP.
//
// node-postgres sends a query without a `name` unnamed: parsed where it
// runs. A query config with a name is parsed once per connection and then
// run by that name. Behind transaction pooling the next transaction may run
// on another server connection, which has no such statement. The checks
// make a statement move deterministically: with two server connections, a
// second client holds one in an open transaction while the statement runs
// on the other, and a third holds that one when it runs again (each
// cleared first with DEALLOCATE ALL: statements of earlier clients stay).
//
// - Unnamed (the default, and the guide's setting): the move works, and a
//   pg.Pool of 8 paying 80 keys (each retried) over the pool of two gets
//   one payment per key, with no error.
// - Named: 26000 when it moves before PgBouncer 1.21
//   (POOLER_MAX_PREPARED=0); from 1.21 (max_prepared_statements > 0) it
//   works.
const pg = require('pg');

const NAMESPACE = 'pooled';

// snippet: pooler
// Behind PgBouncer in transaction or statement pooling: queries without a
// `name` (node-postgres's default). A named query is parsed once per
// connection and then run by name on whichever server connection PgBouncer
// gives that transaction, which may not have it (before PgBouncer 1.21).
async function begin(client, key, request) {
  const { rows: [o] } = await client.query(
    'SELECT kind, result, fence FROM idempotency.idem_begin($1, $2, $3)', [NAMESPACE, key, request]);
  return o;
}

// Not behind PgBouncer before 1.21:
async function beginNamed(client, key, request) {
  const { rows: [o] } = await client.query({
    name: 'idem-begin',
    text: 'SELECT kind, result, fence FROM idempotency.idem_begin($1, $2, $3)',
    values: [NAMESPACE, key, request],
  });
  return o;
}
// end snippet

const tracksPrepared = Number(process.env.POOLER_MAX_PREPARED || 0) > 0;
const REQUEST = { amount: 100 };

let count = 0;
let failed = 0;
function ok(cond, name, diag) {
  count += 1;
  if (!cond) failed += 1;
  console.log(`${cond ? 'ok' : 'not ok'} ${count} - ${name}`);
  if (!cond && diag !== undefined) console.error(`# ${String(diag)}`);
}
async function rejection(promise) {
  try { await promise; } catch (err) { return err; }
  return null;
}
async function connect(config) {
  const client = new pg.Client(config);
  await client.connect();
  return client;
}
const backend = async (client) => (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;

// The guide's flow, reduced: begin, a payment, commit, in one transaction.
// Returns the payment's id (recorded, or replayed).
async function pay(client, key) {
  await client.query('BEGIN');
  try {
    const o = await begin(client, key, REQUEST);
    if (o.kind === 'prior_result') {
      await client.query('COMMIT');
      return o.result.payment_id;
    }
    if (o.kind !== 'fresh') throw new Error(`${key}: ${o.kind}`);
    const { rows: [p] } = await client.query(
      "INSERT INTO payments (amount, currency) VALUES (100, 'EUR') RETURNING id");
    await client.query('SELECT idempotency.idem_commit($1, $2, $3, $4)',
      [NAMESPACE, key, { payment_id: Number(p.id) }, o.fence]);
    await client.query('COMMIT');
    return Number(p.id);
  } catch (err) {
    await client.query('ROLLBACK');
    throw err;
  }
}

// Runs `run` (given x) six times on one server connection, then once on the
// other one of the pool of two. Returns [what the last run threw or null,
// the two backends].
async function moved(x, run) {
  const y = await connect();
  const w = await connect();
  await y.query('BEGIN');
  await y.query('DEALLOCATE ALL');          // y holds one server connection
  await x.query('DEALLOCATE ALL');          // x runs on the other one
  for (let i = 0; i < 6; i++) await run(x);
  const first = await backend(x);
  await w.query('BEGIN');
  await w.query('SELECT 1');                // w holds that one now
  await y.query('COMMIT');
  const err = await rejection(run(x));
  const second = await backend(x);
  await w.query('COMMIT');
  await y.end();
  await w.end();
  return [err, first, second];
}

async function main() {
  const server = await connect({ port: Number(process.env.SERVER_PORT) });
  await pay(server, 'moved');

  const x = await connect();
  const [err, first, second] = await moved(x, (c) => begin(c, 'moved', REQUEST));
  ok(err === null && first !== second, 'unnamed: the begin runs on another server connection after six runs on one', err);

  const pool = new pg.Pool({ max: 8 });
  const payments = {};
  const errors = [];
  await Promise.all(Array.from({ length: 80 }, async (_, i) => {
    const client = await pool.connect();
    try {
      const key = `load-${i}`;
      payments[key] = new Set([await pay(client, key), await pay(client, key)]);
    } catch (e) {
      errors.push(e);
    } finally {
      client.release();
    }
  }));
  await pool.end();
  ok(errors.length === 0, 'unnamed: a pg.Pool of 8 pays 80 keys through the pool of two, with no error', errors[0]);
  ok(Object.keys(payments).length === 80 && Object.values(payments).every((p) => p.size === 1),
    'one payment per key, replayed to its retry');
  const { rows: [n] } = await server.query('SELECT count(*)::int AS n FROM payments');
  ok(n.n === 81, 'the payments table holds those 80 (and the one before)', n.n);

  const [namedErr] = await moved(x, (c) => beginNamed(c, 'moved', REQUEST));
  if (tracksPrepared) {
    ok(namedErr === null, 'named, PgBouncer tracking prepared statements: the named begin runs on another server connection',
      namedErr);
  } else {
    ok(namedErr !== null && namedErr.code === '26000' && /"idem-begin" does not exist/.test(namedErr.message),
      'named, before PgBouncer 1.21: the named begin on another server connection fails with 26000', namedErr);
  }
  await x.end();
  await server.end();
  console.log(`1..${count}`);
  process.exitCode = failed ? 1 : 0;
}

main().catch((err) => {
  console.log(`Bail out! ${err.stack}`);
  process.exitCode = 1;
});
