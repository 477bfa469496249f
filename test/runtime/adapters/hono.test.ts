import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { validator } from 'hono/validator';
import type Database from 'better-sqlite3';
import { createRouteGuard, idempotencyOf, type RouteGuardOptions } from '../../../src/runtime/adapters/fetch.js';
import pg from 'pg';
import { MemoryStore } from '../../../src/runtime/stores/memory.js';
import { PostgresStore } from '../../../src/runtime/stores/postgres.js';
import { PG_DIRS, requireBinary, startPostgres, type PostgresServer } from '../../helpers/servers.js';
import { contract, endless, withSqliteStore } from './fixtures.js';

/** A real Hono app served by @hono/node-server on 127.0.0.1; resolves once it listens. */
async function listen(app: Hono): Promise<{ url: string; close: () => Promise<void> }> {
  let server: ServerType | undefined;
  const port = await new Promise<number>((resolve) => {
    server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info: AddressInfo) => resolve(info.port));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        const http = server as import('node:http').Server;
        http.close((error) => (error ? reject(error) : resolve()));
        http.closeAllConnections();
      }),
  };
}

function post(url: string, key: string | undefined, body: unknown): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-user': 'u', ...(key !== undefined ? { 'idempotency-key': key } : {}) },
    body: JSON.stringify(body),
  });
}

/** Hono's own validator: `{ n: number }` or a 400 from the validator. */
const validN = validator('json', (value, c) => {
  const n = (value as { n?: unknown }).n;
  if (typeof n !== 'number') return c.json({ error: 'n must be a number' }, 400);
  return { n };
});

const STORES: Record<string, (work: (store: RouteGuardOptions['store']) => Promise<void>) => Promise<void>> = {
  memory: (work) => work(new MemoryStore()),
  sqlite: (work) => withSqliteStore((store) => work(store)),
};

describe('runtime/adapters/fetch with a real Hono app (@hono/node-server)', () => {
  for (const [storeName, withStore] of Object.entries(STORES)) {
    it(`${storeName}: the middleware mounted before validator('json', …) guards the route; replays, refuses a changed body and a missing key before the handler`, async () => {
      await withStore(async (store) => {
        const guard = createRouteGuard(contract, { store, principal: (request) => request.headers.get('x-user') ?? undefined });
        const app = new Hono();
        let runs = 0;
        app.post('/things/:tenant', guard.middleware, validN, (c) => {
          runs += 1;
          const key = idempotencyOf(c.req.raw).idempotencyKey;
          c.header('location', `/things/${c.req.param('tenant')}/${runs}`);
          return c.json({ id: runs, n: c.req.valid('json').n, key }, 201);
        });
        const server = await listen(app);
        try {
          const first = await post(`${server.url}/things/t1`, 'k1', { n: 7 });
          assert.equal(first.status, 201);
          assert.equal(first.headers.get('idempotent-replayed'), 'false');
          const firstText = await first.text();
          assert.deepEqual(JSON.parse(firstText), { id: 1, n: 7, key: 'k1' });

          const replay = await post(`${server.url}/things/t1`, 'k1', { n: 7 });
          assert.equal(replay.status, 201);
          assert.equal(replay.headers.get('idempotent-replayed'), 'true');
          assert.equal(replay.headers.get('location'), '/things/t1/1');
          assert.equal(await replay.text(), firstText);

          const changed = await post(`${server.url}/things/t1`, 'k1', { n: 8 });
          assert.equal(changed.status, 422);
          assert.equal(changed.headers.get('content-type'), 'application/problem+json');
          await changed.body?.cancel();

          const keyless = await post(`${server.url}/things/t1`, undefined, { n: 7 });
          assert.equal(keyless.status, 400);
          assert.equal(keyless.headers.get('content-type'), 'application/problem+json');
          await keyless.body?.cancel();

          // The validator still runs after the guard, and its 400 is the recorded answer for that key.
          const invalid = await post(`${server.url}/things/t1`, 'k2', { n: 'seven' });
          assert.equal(invalid.status, 400);
          assert.deepEqual(await invalid.json(), { error: 'n must be a number' });
          assert.equal(runs, 1, 'the handler ran for the first request only');
        } finally {
          await server.close();
        }
      });
    });

    it(`${storeName}: two concurrent requests with one key run the handler once`, async () => {
      await withStore(async (store) => {
        const guard = createRouteGuard(contract, { store, principal: (request) => request.headers.get('x-user') ?? undefined });
        const app = new Hono();
        let runs = 0;
        let open!: () => void;
        const gate = new Promise<void>((resolve) => (open = resolve));
        app.post('/things/:tenant', guard.middleware, validN, async (c) => {
          runs += 1;
          await gate;
          return c.json({ id: runs }, 201);
        });
        const server = await listen(app);
        try {
          const answers = [post(`${server.url}/things/t1`, 'same', { n: 1 }), post(`${server.url}/things/t1`, 'same', { n: 1 })];
          // The handler holds the key until the gate opens: the answer that comes first is the other request's.
          const early = await Promise.race(answers);
          assert.equal(early.status, 409);
          open();
          const statuses = (await Promise.all(answers)).map((answer) => answer.status).sort();
          assert.deepEqual(statuses, [201, 409]);
          assert.equal(runs, 1);
          const replay = await post(`${server.url}/things/t1`, 'same', { n: 1 });
          assert.equal(replay.headers.get('idempotent-replayed'), 'true');
          assert.deepEqual(await replay.json(), { id: 1 });
        } finally {
          open();
          await server.close();
        }
      });
    });
  }

  it('a handler that throws: onError answers 500, the key is kept, and a retry does not run the handler again', async () => {
    const guard = createRouteGuard(contract, { store: new MemoryStore(), principal: (request) => request.headers.get('x-user') ?? undefined });
    const app = new Hono();
    let runs = 0;
    app.post('/things/:tenant', guard.middleware, validN, () => {
      runs += 1;
      throw new Error('database down');
    });
    app.onError((error, c) => c.json({ error: error.message }, 500));
    const server = await listen(app);
    try {
      const first = await post(`${server.url}/things/t1`, 'boom', { n: 1 });
      assert.equal(first.status, 500);
      assert.deepEqual(await first.json(), { error: 'database down' });
      const retry = await post(`${server.url}/things/t1`, 'boom', { n: 1 });
      assert.equal(retry.status, 409, 'kept for reconciliation, as wrap keeps a 5xx');
      await retry.body?.cancel();
      assert.equal(runs, 1);
    } finally {
      await server.close();
    }
  });

  it('mounted with app.use, guards the contract\'s method only: GET, HEAD and OPTIONS on the path pass through', async () => {
    const guard = createRouteGuard(contract, { store: new MemoryStore(), principal: (request) => request.headers.get('x-user') ?? undefined });
    const app = new Hono();
    let runs = 0;
    app.use('/things/:tenant', guard.middleware);
    app.get('/things/:tenant', (c) => c.json({ tenant: c.req.param('tenant') }));
    app.on('OPTIONS', '/things/:tenant', (c) => c.body(null, 204, { allow: 'GET, HEAD, POST, OPTIONS' }));
    app.post('/things/:tenant', validN, (c) => {
      runs += 1;
      return c.json({ id: runs }, 201);
    });
    const server = await listen(app);
    try {
      const read = await fetch(`${server.url}/things/t1`);
      assert.equal(read.status, 200);
      assert.equal(read.headers.get('idempotent-replayed'), null);
      assert.deepEqual(await read.json(), { tenant: 't1' });
      assert.equal((await fetch(`${server.url}/things/t1`, { method: 'HEAD' })).status, 200);
      assert.equal((await fetch(`${server.url}/things/t1`, { method: 'OPTIONS' })).status, 204);
      // The POST is still guarded.
      const first = await post(`${server.url}/things/t1`, 'used', { n: 1 });
      assert.equal(first.headers.get('idempotent-replayed'), 'false');
      await first.body?.cancel();
      const replay = await post(`${server.url}/things/t1`, 'used', { n: 1 });
      assert.equal(replay.headers.get('idempotent-replayed'), 'true');
      await replay.body?.cancel();
      assert.equal((await post(`${server.url}/things/t1`, undefined, { n: 1 })).status, 400);
      assert.equal(runs, 1);
    } finally {
      await server.close();
    }
  });

  it('mounted with app.use on a wildcard, passes another route under it on unguarded; mounted on a route of its own, a path the contract does not match is still refused', async () => {
    const guard = createRouteGuard(contract, { store: new MemoryStore(), principal: (request) => request.headers.get('x-user') ?? undefined });
    const app = new Hono();
    let runs = 0;
    app.use('/things/*', guard.middleware);
    app.post('/things/:tenant', validN, (c) => c.json({ id: (runs += 1) }, 201));
    app.post('/things/:tenant/archive', (c) => c.json({ archived: c.req.param('tenant') }));
    app.post('/mislabelled', guard.middleware, (c) => c.json({ ran: true }));
    const errors: string[] = [];
    app.onError((error, c) => {
      errors.push(error.message);
      return c.json({ error: 'internal' }, 500);
    });
    const server = await listen(app);
    try {
      const other = await post(`${server.url}/things/t1/archive`, 'k1', {});
      assert.equal(other.status, 200);
      assert.equal(other.headers.get('idempotent-replayed'), null, 'not guarded: another route');
      assert.deepEqual(await other.json(), { archived: 't1' });
      const first = await post(`${server.url}/things/t1`, 'k1', { n: 1 });
      assert.equal(first.status, 201, 'the key was not taken by the other route');
      assert.equal(first.headers.get('idempotent-replayed'), 'false');
      await first.body?.cancel();
      // Hono routes the decoded path: /things/t%31 is the contract's route, guarded (the replay), not passed on.
      const encoded = await post(`${server.url}/thing%73/t1`, 'k1', { n: 1 });
      assert.equal(encoded.headers.get('idempotent-replayed'), 'true');
      await encoded.body?.cancel();
      const mislabelled = await post(`${server.url}/mislabelled`, 'k2', {});
      assert.equal(mislabelled.status, 500);
      await mislabelled.body?.cancel();
      assert.match(errors[0] ?? '', /\/mislabelled does not match \/things\/\{tenant\}; pass options\.params/);
      assert.equal(runs, 1);
    } finally {
      await server.close();
    }
  });

  it('a streamed answer whose client leaves before it ends is cancelled, not held on in memory; the key is kept, not replayed cut short', async () => {
    const guard = createRouteGuard(contract, { store: new MemoryStore(), principal: (request) => request.headers.get('x-user') ?? undefined });
    const app = new Hono();
    let runs = 0;
    let events: ReturnType<typeof endless> | undefined;
    app.post('/things/:tenant', guard.middleware, () => {
      runs += 1;
      events = endless('data: tick\n\n');
      return new Response(events.stream, { headers: { 'content-type': 'text/event-stream' } });
    });
    app.onError((_error, c) => c.json({ error: 'internal' }, 500));
    const server = await listen(app);
    try {
      // The client leaves: its socket is destroyed while the guard reads the endless answer.
      await new Promise<void>((resolve, reject) => {
        const request = httpRequest(`${server.url}/things/t1`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-user': 'u', 'idempotency-key': 'sse' } }, () => reject(new Error('answered')));
        request.on('error', () => resolve());
        request.end(JSON.stringify({ n: 1 }));
        setTimeout(() => request.destroy(), 150);
      });
      const deadline = Date.now() + 2000;
      while (events?.cancelled() !== true && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      assert.equal(events?.cancelled(), true, 'the handler\'s stream is cancelled once its client left');
      const retry = await post(`${server.url}/things/t1`, 'sse', { n: 1 });
      assert.equal(retry.status, 409, 'kept for reconciliation');
      await retry.body?.cancel();
      assert.equal(runs, 1);
    } finally {
      await server.close();
    }
  });

  it('bodyLimit in front of the guard (as the README says): a body past it is 413 before the guard reads it, sent with a length or chunked; the key stays free', async () => {
    const guard = createRouteGuard(contract, { store: new MemoryStore(), principal: (request) => request.headers.get('x-user') ?? undefined });
    const app = new Hono();
    let runs = 0;
    app.post('/things/:tenant', bodyLimit({ maxSize: 1024 }), guard.middleware, validN, (c) => c.json({ id: (runs += 1) }, 201));
    const server = await listen(app);
    try {
      const big = { n: 1, pad: 'x'.repeat(4096) };
      assert.equal((await post(`${server.url}/things/t1`, 'big', big)).status, 413);
      const chunked = await fetch(`${server.url}/things/t1`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-user': 'u', 'idempotency-key': 'big' },
        body: new Blob([JSON.stringify(big)]).stream(),
        duplex: 'half',
      } as RequestInit);
      assert.equal(chunked.status, 413);
      assert.equal(runs, 0);
      const small = await post(`${server.url}/things/t1`, 'big', { n: 1 });
      assert.equal(small.status, 201, 'the key was never reserved');
      assert.equal(runs, 1);
    } finally {
      await server.close();
    }
  });

  it('wrap after a validator that read the body fails with an error saying to mount the middleware first', async () => {
    const guard = createRouteGuard(contract, { store: new MemoryStore(), principal: (request) => request.headers.get('x-user') ?? undefined });
    const app = new Hono();
    let runs = 0;
    const guarded = guard.wrap(async () => {
      runs += 1;
      return Response.json({ id: runs }, { status: 201 });
    });
    app.post('/things/:tenant', validN, (c) => guarded(c.req.raw));
    const errors: string[] = [];
    app.onError((error, c) => {
      errors.push(error.message);
      return c.json({ error: 'internal' }, 500);
    });
    const server = await listen(app);
    try {
      const answer = await post(`${server.url}/things/t1`, 'late', { n: 1 });
      assert.equal(answer.status, 500);
      await answer.body?.cancel();
      assert.equal(errors.length, 1);
      assert.match(errors[0]!, /^idempotency guard for createThing: the request body was already read before the guard/);
      assert.match(errors[0]!, /mount the route guard's middleware before the validator/);
      assert.match(errors[0]!, /or read and validate the body inside the wrapped handler/);
      assert.equal(runs, 0);
    } finally {
      await server.close();
    }
  });

  describe('inTransaction: the middleware in one-transaction mode (SQLite)', () => {
    const principal = (request: Request) => request.headers.get('x-user') ?? undefined;
    const count = (db: Database.Database, sql: string) => (db.prepare(sql).get() as { n: number }).n;

    /** A Hono app whose handler writes a row through the guard's transaction, then answers `status()` (201 when undefined). */
    function txApp(guard: ReturnType<typeof createRouteGuard>, status: () => number | undefined, runs: { n: number }) {
      const app = new Hono();
      app.post('/things/:tenant', guard.inTransaction, validN, async (c) => {
        runs.n += 1;
        const { tx } = idempotencyOf<Database.Database>(c.req.raw);
        tx!.prepare('INSERT INTO things (id, tenant) VALUES (?, ?)').run(`thing-${runs.n}`, c.req.param('tenant'));
        await new Promise((resolve) => setTimeout(resolve, 50));
        const failed = status();
        if (failed === 500) throw new Error('failed after the write');
        if (failed !== undefined) return c.json({ error: 'failed after the write' }, failed as 503);
        return c.json({ id: `thing-${runs.n}`, n: c.req.valid('json').n }, 201);
      });
      app.onError((error, c) => c.json({ error: error.message }, 500));
      return app;
    }

    it('commits the business row and the completed record together; concurrent duplicates run the handler once and replay', async () => {
      await withSqliteStore(async (store, db) => {
        db.exec('CREATE TABLE things (id TEXT PRIMARY KEY, tenant TEXT NOT NULL)');
        const runs = { n: 0 };
        const server = await listen(txApp(createRouteGuard(contract, { store, principal }), () => undefined, runs));
        try {
          const answers = await Promise.all([1, 2, 3].map(() => post(`${server.url}/things/t1`, 'tx-1', { n: 1 })));
          // One-transaction mode serialises the connection: the duplicates wait for the commit and then replay.
          assert.deepEqual(answers.map((a) => a.status), [201, 201, 201]);
          assert.deepEqual(answers.map((a) => a.headers.get('idempotent-replayed')).sort(), ['false', 'true', 'true']);
          const bodies = await Promise.all(answers.map((a) => a.text()));
          assert.equal(new Set(bodies).size, 1);
          assert.deepEqual(JSON.parse(bodies[0]!), { id: 'thing-1', n: 1 });
          assert.equal(runs.n, 1);
          assert.equal(count(db, 'SELECT count(*) AS n FROM things'), 1);
          assert.equal((db.prepare('SELECT state FROM idempotency_records').get() as { state: string }).state, 'completed');
          // The validator runs inside the transaction too: its 400 is the recorded answer, and nothing was written.
          const invalid = await post(`${server.url}/things/t1`, 'tx-invalid', { n: 'one' });
          assert.equal(invalid.status, 400);
          await invalid.body?.cancel();
          const again = await post(`${server.url}/things/t1`, 'tx-invalid', { n: 'one' });
          assert.equal(again.headers.get('idempotent-replayed'), 'true');
          await again.body?.cancel();
          assert.equal(runs.n, 1);
        } finally {
          await server.close();
        }
      });
    });

    it('a thrown error that onError answers with a 500 rolls back the row and frees the key; the retry runs and commits', async () => {
      await withSqliteStore(async (store, db) => {
        db.exec('CREATE TABLE things (id TEXT PRIMARY KEY, tenant TEXT NOT NULL)');
        const runs = { n: 0 };
        let status: number | undefined = 500;
        const server = await listen(txApp(createRouteGuard(contract, { store, principal }), () => status, runs));
        try {
          const failed = await post(`${server.url}/things/t1`, 'tx-2', { n: 2 });
          assert.equal(failed.status, 500);
          assert.deepEqual(await failed.json(), { error: 'failed after the write' });
          assert.equal(count(db, 'SELECT count(*) AS n FROM things'), 0);
          assert.equal(count(db, 'SELECT count(*) AS n FROM idempotency_records'), 0);
          status = undefined;
          const retry = await post(`${server.url}/things/t1`, 'tx-2', { n: 2 });
          assert.equal(retry.status, 201);
          assert.equal(retry.headers.get('idempotent-replayed'), 'false');
          await retry.body?.cancel();
          assert.equal(runs.n, 2);
          assert.equal(count(db, 'SELECT count(*) AS n FROM things'), 1);
        } finally {
          await server.close();
        }
      });
    });

    it("answers a commit that fails after the handler with the guard's 503 alone, none of the handler's headers; nothing stays", async () => {
      await withSqliteStore(async (store, db) => {
        db.exec('CREATE TABLE things (id TEXT PRIMARY KEY, tenant TEXT NOT NULL)');
        // The completion fails inside the transaction, so the handler's write cannot commit.
        db.exec("CREATE TRIGGER refuse_completion BEFORE UPDATE ON idempotency_records WHEN NEW.state = 'completed' BEGIN SELECT RAISE(ABORT, 'disk full'); END");
        const guard = createRouteGuard(contract, { store, principal });
        const app = new Hono();
        app.post('/things/:tenant', guard.inTransaction, validN, (c) => {
          idempotencyOf<Database.Database>(c.req.raw).tx!.prepare("INSERT INTO things (id, tenant) VALUES ('x', 't')").run();
          c.header('location', '/things/t1/x');
          return c.json({ id: 'x' }, 201);
        });
        const server = await listen(app);
        try {
          const answer = await post(`${server.url}/things/t1`, 'tx-3', { n: 3 });
          assert.equal(answer.status, 503);
          assert.equal(answer.headers.get('content-type'), 'application/problem+json');
          assert.equal(answer.headers.get('location'), null);
          assert.equal(((await answer.json()) as { type: string }).type, 'https://idemkit.dev/problems/idempotency-outcome-unknown');
          assert.equal(count(db, 'SELECT count(*) AS n FROM things'), 0);
          assert.equal(count(db, 'SELECT count(*) AS n FROM idempotency_records'), 0);
        } finally {
          await server.close();
        }
      });
    });

    it('is refused where it is read, for a store without transactions or an external effect without a provider key; copying the guard does not read it', async () => {
      const onMemory = createRouteGuard(contract, { store: new MemoryStore(), principal });
      assert.throws(() => onMemory.inTransaction, /^TypeError: one-transaction mode cannot guard createThing: it needs a store with transactions \(SqliteStore or PostgresStore\), and MemoryStore has none/);
      assert.doesNotThrow(() => ({ ...onMemory }));
      assert.equal(typeof onMemory.middleware, 'function');
      await withSqliteStore(async (store) => {
        const external = { ...contract, effect: { owner: 'things', external: true, providerKey: 'none' as const } };
        assert.throws(() => createRouteGuard(external, { store, principal }).inTransaction, /one-transaction mode cannot guard createThing: .*providerKey: none/);
        assert.equal(typeof createRouteGuard(contract, { store, principal }).inTransaction, 'function');
      });
    });
  });

  describe('inTransaction on PostgreSQL (a throw-away cluster)', () => {
    let server: PostgresServer | undefined;
    let pool: pg.Pool;
    before(async function () {
      requireBinary(this, 'initdb', PG_DIRS);
      requireBinary(this, 'pg_ctl', PG_DIRS);
      server = await startPostgres();
      pool = new pg.Pool({ connectionString: server.connectionString, max: 10 });
    });
    after(async () => {
      await pool?.end().catch(() => undefined);
      await server?.stop();
    });

    it('commits the row with the record; concurrent duplicates wait on the row lock and replay; a 500 rolls both back and frees the key', async () => {
      const store = new PostgresStore(pool);
      await store.migrate();
      await pool.query('CREATE TABLE things (id text PRIMARY KEY, tenant text NOT NULL)');
      const guard = createRouteGuard(contract, { store, principal: (request) => request.headers.get('x-user') ?? undefined });
      let runs = 0;
      let fail = false;
      const app = new Hono();
      app.post('/things/:tenant', guard.inTransaction, validN, async (c) => {
        runs += 1;
        await idempotencyOf<pg.PoolClient>(c.req.raw).tx!.query('INSERT INTO things (id, tenant) VALUES ($1, $2)', [`thing-${runs}`, c.req.param('tenant')]);
        await new Promise((resolve) => setTimeout(resolve, 50));
        if (fail) throw new Error('failed after the write');
        return c.json({ id: `thing-${runs}` }, 201);
      });
      app.onError((error, c) => c.json({ error: error.message }, 500));
      const served = await listen(app);
      const count = async (table: string) => Number((await pool.query(`SELECT count(*) AS n FROM ${table}`)).rows[0].n);
      try {
        const answers = await Promise.all([1, 2, 3].map(() => post(`${served.url}/things/t1`, 'pg-1', { n: 1 })));
        assert.deepEqual(answers.map((a) => a.status), [201, 201, 201]);
        assert.deepEqual(answers.map((a) => a.headers.get('idempotent-replayed')).sort(), ['false', 'true', 'true']);
        assert.deepEqual(new Set(await Promise.all(answers.map((a) => a.text()))).size, 1);
        assert.equal(runs, 1);
        assert.equal(await count('things'), 1);
        fail = true;
        const failed = await post(`${served.url}/things/t1`, 'pg-2', { n: 2 });
        assert.equal(failed.status, 500);
        await failed.body?.cancel();
        assert.equal(await count('things'), 1, 'the failed request wrote nothing');
        assert.equal(await count('idempotency_records'), 1, 'and left no record: the key is free');
        fail = false;
        const retry = await post(`${served.url}/things/t1`, 'pg-2', { n: 2 });
        assert.equal(retry.status, 201);
        assert.equal(retry.headers.get('idempotent-replayed'), 'false');
        await retry.body?.cancel();
        assert.equal(await count('things'), 2);
      } finally {
        await served.close();
      }
    });

    it('a handler given up at the bound is answered 503 and loses its connection: its late write fails instead of landing outside the transaction, and the retry runs once', async () => {
      const store = new PostgresStore(pool);
      await store.migrate();
      await pool.query('CREATE TABLE IF NOT EXISTS late_things (id text PRIMARY KEY)');
      const guard = createRouteGuard(contract, { store, principal: (request) => request.headers.get('x-user') ?? undefined, leaseRenewalMaxMs: 300 });
      let runs = 0;
      let slow = true;
      const late: string[] = [];
      const app = new Hono();
      app.post('/things/:tenant', guard.inTransaction, async (c) => {
        runs += 1;
        const run = runs;
        const { tx } = idempotencyOf<pg.PoolClient>(c.req.raw);
        if (slow) await new Promise((resolve) => setTimeout(resolve, 600));
        try {
          await tx!.query('INSERT INTO late_things (id) VALUES ($1)', [`late-${run}`]);
        } catch (error) {
          late.push((error as Error).message);
          throw error;
        }
        return c.json({ id: `late-${run}` }, 201);
      });
      app.onError((error, c) => c.json({ error: error.message }, 500));
      const served = await listen(app);
      try {
        const first = await post(`${served.url}/things/t1`, 'pg-late', { n: 1 });
        assert.equal(first.status, 503);
        assert.equal(((await first.json()) as { type: string }).type, 'https://idemkit.dev/problems/idempotency-outcome-unknown');
        await new Promise((resolve) => setTimeout(resolve, 500));
        assert.equal(late.length, 1, 'the late write failed on its closed connection');
        slow = false;
        const retry = await post(`${served.url}/things/t1`, 'pg-late', { n: 1 });
        assert.equal(retry.status, 201, 'rolled back: the key is free');
        await retry.body?.cancel();
        assert.deepEqual((await pool.query('SELECT id FROM late_things ORDER BY id')).rows, [{ id: 'late-2' }], 'one effect');
      } finally {
        await served.close();
      }
    });
  });
});
