// The service in a process of its own, for the test that kills it mid-handler:
//   node build/apps/serve.js express|fastify   (PG* name the database; IDEM_HOLD=1 holds a request asking to be held forever, else not at all)
import pg from 'pg';
import { startApp, type Framework } from './payments.js';

const framework = process.argv[2] as Framework;
const pool = new pg.Pool({ max: 4 });
const app = await startApp(framework, { pool, hold: process.env['IDEM_HOLD'] === '1' ? 'forever' : 'never' });
process.stdout.write(`listening ${app.url}\n`);
