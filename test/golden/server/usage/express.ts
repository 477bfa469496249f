// Hand-written usage of the generated Express guards (type-checked with the golden output; the
// `@ts-expect-error` lines prove the types reject wrong wiring). Mirrors the README.
import express from 'express';
import Database from 'better-sqlite3';
import { createGuards, SqliteStore, StoreError, idempotencyOf, type ReconcileHook } from '../express-sqlite/index.js';

const db = new Database('app.db');
const store = new SqliteStore(db);
await store.migrate();

// A reconciliation hook in its own module: look the effect up by business id before deciding.
const reconcile: ReconcileHook = async (abandoned) => (abandoned.operation === 'createDemoRequest' ? { outcome: 'unknown' } : { outcome: 'not-happened' });

const guards = createGuards({
  store,
  principal: (req) => req.get('authorization') === undefined ? undefined : 'user-from-your-auth',
  reconcile,
  log: (event) => console.log(JSON.stringify(event)),
});

// Options read from configuration may be undefined: with exactOptionalPropertyTypes an undefined option is absent.
const config: { storeTimeoutMs?: number | undefined; failOpen?: boolean | undefined } = {};
createGuards({ store, storeTimeoutMs: config.storeTimeoutMs, failOpen: config.failOpen, reconcile: undefined });

const app = express();
app.post('/v1/demo-requests', express.json(), guards.createDemoRequest, (req, res) => {
  res.status(201).json({ id: 'dr_1', topic: (req.body as { topic: string }).topic });
});

// One-transaction mode: the business row and the `completed` record commit together.
app.post('/v1/demo-requests-tx', express.json(), guards.createDemoRequest.inTransaction, (req, res) => {
  const { tx } = idempotencyOf<Database.Database>(res);
  tx?.prepare('INSERT INTO demo_requests (id) VALUES (?)').run('dr_2');
  res.status(201).json({ id: 'dr_2' });
});

// Store failures surface as StoreError (the guard itself answers 503; this is for your own store calls).
store.purgeExpired().catch((error: unknown) => {
  if (!(error instanceof StoreError)) throw error;
});

// @ts-expect-error — every guard needs a store
createGuards({ principal: () => 'u' });
// @ts-expect-error — only contracted operations have guards
void guards.getDemoRequest;
// @ts-expect-error — the principal hook returns a string id, not an object
createGuards({ store, principal: () => ({ id: 1 }) });
// @ts-expect-error — a reconciliation verdict is completed | not-happened | unknown
createGuards({ store, reconcile: () => ({ outcome: 'delete-it' }) });
// @ts-expect-error — the guard is middleware: (req, res, next)
guards.createDemoRequest('not a request');
