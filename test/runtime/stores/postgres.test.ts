import assert from 'node:assert/strict';
import pg from 'pg';
import { createGuard } from '../../../src/runtime/guard.js';
import { StoreError } from '../../../src/runtime/store.js';
import { PostgresStore } from '../../../src/runtime/stores/postgres.js';
import { requireBinary, startPostgres, type PostgresServer } from '../../helpers/servers.js';
import { bodyJson, demoContract, demoRequest, jsonResponse } from '../fixtures.js';
import { describeStoreContract, describeTransactionContract } from '../store-contract.js';
import { reserveFromProcesses } from './multi-process.js';

const PG_DIRS = ['/usr/lib/postgresql/15/bin'];

describe('PostgresStore (real PostgreSQL cluster)', function () {
  this.timeout(120_000);
  let server: PostgresServer;
  let pool: pg.Pool;
  let n = 0;
  const table = () => `idem_${process.pid}_${(n += 1)}`;

  before(async function () {
    requireBinary(this, 'initdb', PG_DIRS);
    requireBinary(this, 'pg_ctl', PG_DIRS);
    server = await startPostgres();
    pool = new pg.Pool({ connectionString: server.connectionString, max: 20 });
    // Idle clients of a pool whose server dies emit 'error'; the kill test expects exactly that.
    pool.on('error', () => undefined);
  });
  after(async () => {
    await pool?.end().catch(() => undefined);
    await server?.stop();
  });

  describeStoreContract('postgres', async (clock) => {
    const name = table();
    const store = new PostgresStore(pool, { table: name, clock });
    await store.migrate();
    return {
      store,
      dump: async () => JSON.stringify((await pool.query(`SELECT * FROM ${name}`)).rows, (_, v) => (v !== null && typeof v === 'object' && v.type === 'Buffer' ? Buffer.from(v.data).toString('latin1') : v)),
      dispose: async () => { await pool.query(`DROP TABLE ${name}`); },
    };
  });

  describeStoreContract('postgres (batch: true, the calls of one turn in one statement)', async (clock) => {
    const name = table();
    const store = new PostgresStore(pool, { table: name, clock, batch: true });
    await store.migrate();
    return {
      store,
      dump: async () => JSON.stringify((await pool.query(`SELECT * FROM ${name}`)).rows, (_, v) => (v !== null && typeof v === 'object' && v.type === 'Buffer' ? Buffer.from(v.data).toString('latin1') : v)),
      dispose: async () => { await pool.query(`DROP TABLE ${name}`); },
    };
  });

  describe('batching (calls of one event-loop turn in one statement)', () => {
    const input = (id: string, token = `t-${id}`, leaseMs = 30_000, ttlMs = 60_000) => ({ id, operation: 'op', fingerprint: `v1:${id}`, token, leaseMs, ttlMs });

    /** The pool, counting the statements the store sends through it. */
    function counted(): { db: pg.Pool; statements: () => number } {
      let count = 0;
      const db = new Proxy(pool, {
        get(target, name, receiver) {
          if (name === 'query') return (...args: unknown[]) => { count += 1; return (target.query as (...a: unknown[]) => unknown)(...args); };
          const value = Reflect.get(target, name, receiver) as unknown;
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        },
      });
      return { db, statements: () => count };
    }

    it('reserves 30 ids in one statement; duplicates in the same turn see the one winner', async () => {
      const name = table();
      await new PostgresStore(pool, { table: name }).migrate();
      const { db, statements } = counted();
      const store = new PostgresStore(db, { table: name, batch: true });
      const distinct = Array.from({ length: 30 }, (_, i) => store.reserve(input(`b-${String(i).padStart(2, '0')}`)));
      const duplicates = Array.from({ length: 5 }, (_, i) => store.reserve(input('b-07', `dup-${i}`)));
      const results = await Promise.all(distinct);
      const dupResults = await Promise.all(duplicates);
      results.forEach((r, i) => {
        const id = `b-${String(i).padStart(2, '0')}`;
        assert.equal(r.record.id, id);
        if (id === 'b-07') return;
        assert.equal(r.outcome, 'reserved');
        assert.equal(r.record.leaseToken, `t-${id}`);
        assert.equal(r.record.fingerprint, `v1:${id}`);
        assert.equal(r.record.leaseUntil - r.record.createdAt, 30_000);
        assert.equal(r.now, r.record.createdAt);
      });
      // b-07 was asked for 6 times in the turn (once in the batch, 5 times on their own): exactly one won, all see it.
      const contenders = [results[7]!, ...dupResults];
      const won = contenders.filter((r) => r.outcome === 'reserved');
      assert.equal(won.length, 1);
      assert.ok(contenders.every((r) => r.record.leaseToken === won[0]!.record.leaseToken));
      // One statement for the 30 distinct ids; the duplicates never share a batch with their id, so they went on
      // their own (one statement each, plus a fresh read when the batch's row committed after their snapshot).
      assert.ok(statements() >= 1 + 5 && statements() <= 1 + 5 * 2, `${statements()} statements`);
      const before = statements();
      await Promise.all(Array.from({ length: 30 }, (_, i) => store.reserve(input(`more-${i}`))));
      assert.equal(statements() - before, 1, 'one statement for 30 reservations');
      await pool.query(`DROP TABLE ${name}`);
    });

    it('completes a batch byte-exact, each row fenced by its own token', async () => {
      const name = table();
      const store = new PostgresStore(pool, { table: name, batch: true });
      await store.migrate();
      const ids = ['c-1', 'c-2', 'c-3', 'c-4'];
      await Promise.all(ids.map((id) => store.reserve(input(id))));
      const every = Uint8Array.from({ length: 256 }, (_, i) => i);
      const headers = { 'content-type': 'application/json; charset="utf-8"', etag: 'W/"a\\b"', 'content-language': 'ünï, 日本' };
      const { db, statements } = counted();
      const batched = new PostgresStore(db, { table: name, batch: true });
      const done = await Promise.all([
        batched.complete('c-1', 't-c-1', { response: { status: 201, headers, body: every }, resultId: 'r-1', ttlMs: 60_000 }),
        batched.complete('c-2', 't-c-2', { response: { status: 200, headers: {}, body: new Uint8Array() }, ttlMs: 60_000 }),
        batched.complete('c-3', 'stale', { response: { status: 201, headers: {}, body: every }, ttlMs: 60_000 }),
        batched.complete('missing', 't-x', { response: { status: 201, headers: {}, body: every }, ttlMs: 60_000 }),
      ]);
      assert.deepEqual(done, [true, true, false, false]);
      assert.equal(statements(), 1);
      const first = (await store.get('c-1'))!;
      assert.equal(first.state, 'completed');
      assert.deepEqual(first.response, { status: 201, headers, body: every });
      assert.equal(first.resultId, 'r-1');
      // The body owns its memory: the driver's small Buffers are views into a shared pool, and `body.buffer`
      // handed on must not carry other rows' bytes.
      assert.equal(first.response!.body.buffer.byteLength, first.response!.body.byteLength);
      const second = (await store.get('c-2'))!;
      assert.deepEqual(second.response, { status: 200, headers: {}, body: new Uint8Array() });
      assert.equal(second.resultId, undefined);
      assert.equal((await store.get('c-3'))!.state, 'in_progress');
      assert.equal(await store.get('missing'), undefined);
      await pool.query(`DROP TABLE ${name}`);
    });

    it('a completion the server rejects (a NUL in its result id or headers) fails alone, not the others of its batch', async () => {
      const name = table();
      const store = new PostgresStore(pool, { table: name, batch: true });
      await store.migrate();
      await Promise.all(['n-1', 'n-2', 'n-3', 'n-4'].map((id) => store.reserve(input(id))));
      const response = (headers: Record<string, string> = {}) => ({ status: 201, headers, body: new Uint8Array([1, 2, 3]) });
      const [innocent, nulId] = await Promise.allSettled([
        store.complete('n-1', 't-n-1', { response: response(), resultId: 'r-1', ttlMs: 60_000 }),
        store.complete('n-2', 't-n-2', { response: response(), resultId: 'evil\u0000id', ttlMs: 60_000 }),
      ]);
      assert.deepEqual(innocent, { status: 'fulfilled', value: true });
      assert.equal(nulId.status, 'rejected');
      const [beside, nulHeader] = await Promise.allSettled([
        store.complete('n-3', 't-n-3', { response: response(), ttlMs: 60_000 }),
        store.complete('n-4', 't-n-4', { response: response({ etag: 'x\u0000' }), ttlMs: 60_000 }),
      ]);
      assert.deepEqual(beside, { status: 'fulfilled', value: true });
      assert.equal(nulHeader.status, 'rejected');
      assert.equal((await store.get('n-1'))!.state, 'completed');
      assert.equal((await store.get('n-3'))!.state, 'completed');
      assert.equal((await store.get('n-2'))!.state, 'in_progress');
      await pool.query(`DROP TABLE ${name}`);
    });

    it('re-reserves expired completed records in a batch, never an in_progress one', async () => {
      const name = table();
      let now = 1_000_000;
      const store = new PostgresStore(pool, { table: name, clock: () => now, batch: true });
      await store.migrate();
      await Promise.all([store.reserve(input('e-1', 'old-1', 10, 100)), store.reserve(input('e-2', 'old-2', 10, 100))]);
      await store.complete('e-1', 'old-1', { response: { status: 201, headers: {}, body: new Uint8Array([1]) }, ttlMs: 100 });
      now += 1000;
      const [again, stuck] = await Promise.all([store.reserve(input('e-1', 'new-1')), store.reserve(input('e-2', 'new-2'))]);
      assert.equal(again!.outcome, 'reserved');
      assert.equal(again!.record.leaseToken, 'new-1');
      assert.equal(again!.record.response, undefined);
      assert.equal(stuck!.outcome, 'existing');
      assert.equal(stuck!.record.leaseToken, 'old-2');
      await pool.query(`DROP TABLE ${name}`);
    });

    it('sends every call as its own statement by default (batch: false)', async () => {
      const name = table();
      await new PostgresStore(pool, { table: name }).migrate();
      const { db, statements } = counted();
      const store = new PostgresStore(db, { table: name });
      await Promise.all(Array.from({ length: 6 }, (_, i) => store.reserve(input(`n-${i}`))));
      assert.equal(statements(), 6);
      await pool.query(`DROP TABLE ${name}`);
    });
  });

  describeTransactionContract<pg.PoolClient>('postgres', async () => {
    const name = table();
    const store = new PostgresStore(pool, { table: name });
    await store.migrate();
    await pool.query(`CREATE TABLE ${name}_business (value text NOT NULL)`);
    return {
      store,
      writeBusiness: async (tx, value) => { await tx.query(`INSERT INTO ${name}_business (value) VALUES ($1)`, [value]); },
      businessRows: async () => (await pool.query(`SELECT value FROM ${name}_business ORDER BY value`)).rows.map((r) => r.value as string),
      dispose: async () => { await pool.query(`DROP TABLE ${name}; DROP TABLE ${name}_business`); },
    };
  });

  it('migrates idempotently: a logged table, primary key on the id, expiry and lease indexes', async () => {
    const name = table();
    const store = new PostgresStore(pool, { table: name });
    await Promise.all([store.migrate(), store.migrate(), new PostgresStore(pool, { table: name }).migrate()]);
    const rel = await pool.query(`SELECT relpersistence FROM pg_class WHERE relname = $1`, [name]);
    assert.equal(rel.rows[0].relpersistence, 'p', 'logged (permanent) table');
    const indexes = await pool.query(`SELECT indexname, indexdef FROM pg_indexes WHERE tablename = $1 ORDER BY indexname`, [name]);
    assert.deepEqual(indexes.rows.map((r) => r.indexname), [`${name}_expiry`, `${name}_lease`, `${name}_pkey`]);
    assert.match(indexes.rows[2].indexdef, /UNIQUE INDEX .* \(id\)/);
  });

  it('migrates concurrently from several pools without stalling, and leaves no advisory lock held', async () => {
    const name = table();
    const pools = Array.from({ length: 4 }, () => new pg.Pool({ connectionString: server.connectionString, max: 3 }));
    try {
      // Other queries share each pool, so a lock and an unlock sent through the pool could land on different connections.
      const started = Date.now();
      for (let round = 0; round < 5; round += 1) {
        const busy = pools.flatMap((p) => Array.from({ length: 4 }, (_, i) => p.query('SELECT pg_sleep($1::float8)', [0.002 * i])));
        await Promise.all([...pools.flatMap((p) => [new PostgresStore(p, { table: name }).migrate(), new PostgresStore(p, { table: name }).migrate()]), ...busy]);
      }
      assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`);
      const held = await pool.query(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory'`);
      assert.equal(held.rows[0].n, 0);
      await new PostgresStore(pool, { table: name }).migrate();
    } finally {
      await Promise.all(pools.map((p) => p.end()));
      await pool.query(`DROP TABLE IF EXISTS ${name}`);
    }
  });

  it('uses the server clock when none is injected', async () => {
    const store = new PostgresStore(pool, { table: table() });
    await store.migrate();
    const serverNow = await store.now();
    assert.ok(Math.abs(serverNow - Date.now()) < 60_000, 'server and test clocks agree within a minute');
    const result = await store.reserve({ id: 'clock', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 1000, ttlMs: 5000 });
    assert.equal(result.record.leaseUntil - result.record.createdAt, 1000);
    assert.ok(result.now >= serverNow);
  });

  it('extends a lease from the server clock (clock_timestamp)', async () => {
    const store = new PostgresStore(pool, { table: table() });
    await store.migrate();
    await store.reserve({ id: 'hb', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 1000, ttlMs: 5000 });
    const before = await store.now();
    assert.equal(await store.extend('hb', 't', 600_000), true);
    const after = await store.now();
    const leaseUntil = (await store.get('hb'))!.leaseUntil;
    assert.ok(leaseUntil >= before + 600_000 && leaseUntil <= after + 600_000, `${before} ≤ ${leaseUntil - 600_000} ≤ ${after}`);
    assert.equal(await store.extend('hb', 'stale', 900_000), false);
    assert.equal((await store.get('hb'))!.leaseUntil, leaseUntil);
  });

  it('answers 409 in progress when the row lock wait runs past lockTimeoutMs (one-transaction mode)', async () => {
    const name = table();
    const store = new PostgresStore(pool, { table: name, lockTimeoutMs: 100 });
    await store.migrate();
    const guard = createGuard<pg.PoolClient>(demoContract(), { store, storeTimeoutMs: 5000 });
    let open!: () => void;
    const gate = new Promise<void>((resolve) => { open = resolve; });
    const first = guard.handle(demoRequest('locked'), async () => { await gate; return jsonResponse(201, { id: 'one' }); }, { transaction: true });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const second = await guard.handle(demoRequest('locked'), async () => jsonResponse(201, { id: 'two' }), { transaction: true });
    assert.equal(second.status, 409);
    assert.ok(Number(second.headers['retry-after']) >= 1);
    open();
    assert.equal(bodyJson(await first).id, 'one');
  });

  it('also runs on one pg.Client, but needs a Pool for one-transaction mode', async () => {
    const client = new pg.Client({ connectionString: server.connectionString });
    await client.connect();
    try {
      const store = new PostgresStore(client, { table: table() });
      await store.migrate();
      assert.equal((await store.reserve({ id: 'c', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 1000, ttlMs: 5000 })).outcome, 'reserved');
      await assert.rejects(
        store.withReservation({ id: 'd', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 1000, ttlMs: 5000 }, async () => ({ commit: false, value: 0 })),
        (e: unknown) => e instanceof StoreError && e.kind === 'unsupported',
      );
    } finally {
      await client.end();
    }
  });

  it('refuses a table name that could inject SQL', () => {
    assert.throws(() => new PostgresStore(pool, { table: 'x; DROP TABLE y' }), StoreError);
  });

  it('gives exactly one of 4 OS processes × 25 concurrent reservations the record', async () => {
    const name = table();
    await new PostgresStore(pool, { table: name }).migrate();
    const { won, seen } = await reserveFromProcesses('postgres', server.connectionString, name, 'multi');
    assert.equal(won.length, 1);
    assert.deepEqual(seen, won, 'every process saw the winner as the owner');
  });

  it('prints reserve latency (figure, not an assertion)', async () => {
    const store = new PostgresStore(pool, { table: table() });
    await store.migrate();
    const count = 500;
    const started = process.hrtime.bigint();
    for (let i = 0; i < count; i += 1) await store.reserve({ id: `lat-${i}`, operation: 'op', fingerprint: 'v1:x', token: `t${i}`, leaseMs: 1000, ttlMs: 10_000 });
    const micros = Number(process.hrtime.bigint() - started) / 1000 / count;
    process.stdout.write(`      postgres reserve: ${micros.toFixed(1)} µs/op over ${count} sequential reservations (loopback)\n`);
    assert.equal((await store.get('lat-0'))?.state, 'in_progress');
  });

  // A nested describe declared last runs after every other test here (mocha runs a suite's own tests first).
  describe('when the server dies', () => it('throws a typed error when the server is killed, and the guard answers 503 within its bound', async () => {
    const store = new PostgresStore(pool, { table: table() });
    await store.migrate();
    await server.kill();
    await assert.rejects(
      store.reserve({ id: 'x', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 1, ttlMs: 1 }),
      (e: unknown) => e instanceof StoreError && e.kind === 'unavailable',
    );
    const guard = createGuard(demoContract(), { store, storeTimeoutMs: 1000 });
    let runs = 0;
    const started = Date.now();
    const response = await guard.handle(demoRequest('after-kill'), async () => { runs += 1; return jsonResponse(201, {}); });
    const elapsed = Date.now() - started;
    assert.equal(response.status, 503);
    assert.equal(response.headers['retry-after'], '1');
    assert.equal(runs, 0);
    assert.ok(elapsed < 3000, `answered after ${elapsed} ms`);
  }));
});
