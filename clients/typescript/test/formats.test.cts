// The CommonJS build, through require and the exports map, with its own types:
// the same answers as the ES module build.
import assert = require('node:assert/strict');
import fs = require('node:fs');
import path = require('node:path');
import test = require('node:test');
import idem = require('@idempotency/pg');
import express = require('@idempotency/pg/express');
import fastify = require('@idempotency/pg/fastify');

const REPO = path.resolve(__dirname, '../../..');

test('require() loads the CommonJS build of every entry point', () => {
  assert.match(require.resolve('@idempotency/pg'), /dist[\\/]cjs[\\/]index\.js$/);
  assert.match(require.resolve('@idempotency/pg/express'), /dist[\\/]cjs[\\/]express\.js$/);
  assert.match(require.resolve('@idempotency/pg/fastify'), /dist[\\/]cjs[\\/]fastify\.js$/);
  assert.equal(typeof express.idempotency, 'function');
  assert.equal(express.default, express.idempotency);
  assert.equal(typeof fastify.idempotency, 'function');
  assert.equal(fastify.default, fastify.idempotency);
  assert.equal(idem.API_MAJOR, 1);
});

test('the CommonJS build mints and parses as the ES module build does', async () => {
  const esm = await import('@idempotency/pg');
  assert.notEqual(esm.mint, idem.mint, 'two builds were loaded');
  const rows = fs.readFileSync(path.join(REPO, 'test/kat/vectors.csv'), 'utf8').split('\n').filter((l) => l.startsWith('mint,'));
  assert.ok(rows.length >= 20);
  for (const line of rows) {
    // A mint row: kind,name,"[...]",parts_hex,,sha256 (its input is the only quoted field).
    const input = line.slice(line.indexOf(',"') + 2, line.lastIndexOf('",')).replaceAll('""', '"');
    const sha256 = line.slice(line.lastIndexOf(',') + 1);
    const parts = JSON.parse(input) as string[];
    assert.equal(idem.mint('payments', parts), sha256, line.slice(0, 40));
    assert.equal(esm.mint('payments', parts), sha256);
  }
  assert.equal(idem.parse('payments', '  k  '), 'k');
  assert.throws(() => idem.validateNamespace('Payments'), (err: unknown) => err instanceof idem.IdempotencyError && err.code === '22023');
});
