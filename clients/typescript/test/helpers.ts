// What the tests share: the repository's known-answer files, and databases of
// their own on the server the PG* variables name.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

/** The repository's root (the tests run from clients/typescript/build). */
export const REPO = fileURLToPath(new URL('../../../', import.meta.url));

/** A CSV file as rows of named fields (RFC 4180: quoted fields, doubled quotes, newlines inside quotes). */
export function readCsv(relativePath: string): Record<string, string>[] {
  const text = readFileSync(REPO + relativePath, 'utf8');
  const records: string[][] = [];
  let field = '';
  let record: string[] = [];
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { field += '"'; i++; } else if (c === '"') quoted = false; else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') { record.push(field); field = ''; }
    else if (c === '\n') { record.push(field); records.push(record); record = []; field = ''; }
    else if (c !== '\r') field += c;
  }
  if (field !== '' || record.length > 0) { record.push(field); records.push(record); }
  const [header, ...rows] = records;
  return rows.map((r) => Object.fromEntries(header!.map((name, i) => [name, r[i] ?? ''])));
}

let serial = 0;

/**
 * IDEM_TEST_STORE_IN_TEMPLATE=1: the server's new databases come with the store
 * already (test/bin/portable's clients layer: the portable edition's plain
 * script installed in template1), so the tests' databases do not create the
 * extension. IDEM_TEST_EDITION: the edition idem_version() must answer.
 */
const STORE_IN_TEMPLATE = process.env.IDEM_TEST_STORE_IN_TEMPLATE === '1';
export const EDITION = process.env.IDEM_TEST_EDITION || 'native';

/** A database of its own, with the extension and the business tables of the test applications. */
export interface TestDatabase {
  name: string;
  pool: pg.Pool;
  /** A single client outside any pool, for tests that hold a transaction. */
  client(): Promise<pg.Client>;
  drop(): Promise<void>;
}

/** Runs SQL on the server's postgres database (CREATE and DROP DATABASE). */
async function admin(sql: string): Promise<void> {
  const c = new pg.Client({ database: 'postgres' });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

/** Creates a database with `CREATE EXTENSION idempotency` (unless bare) and the test applications' tables. */
export async function createDatabase(label: string, options: { bare?: boolean } = {}): Promise<TestDatabase> {
  const name = `idem_ts_${label}_${process.pid}_${++serial}`;
  await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin(`CREATE DATABASE ${name}`);
  const clients: pg.Client[] = [];
  const pool = new pg.Pool({ database: name, max: 10 });
  // An idle connection the server ends would otherwise throw from the pool: say so instead.
  pool.on('error', (err) => process.stderr.write(`idle connection of ${name}: ${err.message}\n`));
  if (!options.bare) {
    await pool.query(`
      SET client_min_messages = warning;
      ${STORE_IN_TEMPLATE ? '' : 'CREATE EXTENSION idempotency;'}
      CREATE TABLE payments (id bigserial PRIMARY KEY, idem_key text, amount numeric NOT NULL, currency text NOT NULL);
      CREATE TABLE notes (id bigserial PRIMARY KEY, idem_key text, body text NOT NULL);
      CREATE TABLE charges (id bigserial PRIMARY KEY, idem_key text, downstream_key text NOT NULL);
      CREATE TABLE outages (idem_key text NOT NULL);
      CREATE TABLE uniques (v text UNIQUE DEFERRABLE INITIALLY DEFERRED);
      -- A row here fails the COMMIT with 40001, as a serialization failure does.
      CREATE TABLE serialization_failures (v text);
      CREATE FUNCTION fail_serialization() RETURNS trigger LANGUAGE plpgsql AS
        $$BEGIN RAISE EXCEPTION 'could not serialize access' USING ERRCODE = '40001'; END$$;
      CREATE CONSTRAINT TRIGGER fail_at_commit AFTER INSERT ON serialization_failures
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fail_serialization();`);
  }
  return {
    name,
    pool,
    async client() {
      const c = new pg.Client({ database: name });
      await c.connect();
      clients.push(c);
      return c;
    },
    async drop() {
      await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
      await pool.end();
      await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

/** The PG* settings of a database, for a child process. */
export function databaseEnv(name: string): NodeJS.ProcessEnv {
  return { ...process.env, PGDATABASE: name };
}

// A TCP port free on 127.0.0.1 now, for an app a test starts.
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

// Starts the app in file (a script that listens on $PORT) against database
// name, and waits until it answers on / (10 s at most). The caller kills it.
export async function startApp(file: string, name: string): Promise<{ child: ChildProcess; port: number }> {
  const port = await freePort();
  const child = spawn(process.execPath, [file], { env: { ...databaseEnv(name), PORT: String(port) }, stdio: ['ignore', 'inherit', 'inherit'] });
  const deadline = Date.now() + 10000;
  for (;;) {
    try { await fetch(`http://127.0.0.1:${port}/`); return { child, port }; } catch (err) {
      if (Date.now() > deadline || child.exitCode !== null) { child.kill('SIGKILL'); throw err; }
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
