import assert from 'node:assert/strict';
import pg from 'pg';
import { createGuard, type GuardLogEvent } from '../../../src/runtime/guard.js';
import { handlerGivenUp, isHandlerGivenUp, StoreError } from '../../../src/runtime/store.js';
import { PostgresStore } from '../../../src/runtime/stores/postgres.js';
import { PG_DIRS, PGBOUNCER_DIRS, requireBinary, startPgBouncer, startPostgres, type PostgresServer } from '../../helpers/servers.js';
import { bodyJson, demoContract, demoRequest, jsonResponse } from '../fixtures.js';
import { describeStoreContract, describeTransactionContract } from '../store-contract.js';
import { reserveFromProcesses } from './multi-process.js';


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

  describeStoreContract('postgres (batch: true by default, the calls of one turn in one statement)', async (clock) => {
    const name = table();
    const store = new PostgresStore(pool, { table: name, clock });
    await store.migrate();
    return {
      store,
      dump: async () => JSON.stringify((await pool.query(`SELECT * FROM ${name}`)).rows, (_, v) => (v !== null && typeof v === 'object' && v.type === 'Buffer' ? Buffer.from(v.data).toString('latin1') : v)),
      dispose: async () => { await pool.query(`DROP TABLE ${name}`); },
    };
  });

  describeStoreContract('postgres (batch: false, every call its own statement)', async (clock) => {
    const name = table();
    const store = new PostgresStore(pool, { table: name, clock, batch: false });
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

    it('reserves 30 ids in two statements (16 rows at most); duplicates in the same turn see the one winner', async () => {
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
      // Two statements for the 30 distinct ids (16 + 14 rows); the duplicates never share a batch with their id, so
      // they went on their own (one statement each, plus a fresh read when the batch's row committed after their snapshot).
      assert.ok(statements() >= 2 + 5 && statements() <= 2 + 5 * 2, `${statements()} statements`);
      const before = statements();
      await Promise.all(Array.from({ length: 16 }, (_, i) => store.reserve(input(`more-${i}`))));
      assert.equal(statements() - before, 1, 'one statement for 16 reservations');
      await pool.query(`DROP TABLE ${name}`);
    });

    it('finds the records of a batch by their id, not by reading the whole table, in plans made while the table was new and small', async () => {
      // PostgreSQL keeps a named statement's generic plan, made while the table was new and tiny, until the table is next
      // analyzed (autovacuum: at most once a minute, and never here). Batches that looked their ids up with `id IN (…)`
      // or a join on a VALUES list got a sequential scan there and kept it as the table grew: every batch read every
      // record (20 ms a batch at 24,000 records), so a launch burst slowed with its own records until the first analyze.
      const name = table();
      const db = new pg.Pool({ connectionString: server.connectionString, max: 1 });
      try {
        const store = new PostgresStore(db, { table: name, batch: true });
        await store.migrate();
        await db.query(`ALTER TABLE ${name} SET (autovacuum_enabled = false)`);
        // PostgreSQL plans a named statement for its values five times, then keeps a generic plan from the sixth on.
        for (let turn = 0; turn < 8; turn += 1) {
          const ids = Array.from({ length: 16 }, (_, i) => `new-${turn}-${String(i).padStart(2, '0')}`);
          assert.ok((await Promise.all(ids.map((id) => store.reserve(input(id))))).every((r) => r.outcome === 'reserved'));
          const done = await Promise.all(ids.map((id) => store.complete(id, `t-${id}`, { response: { status: 201, headers: {}, body: new Uint8Array([1]) }, ttlMs: 60_000 })));
          assert.ok(done.every(Boolean));
        }
        await db.query(
          `INSERT INTO ${name} (id, operation, fingerprint, state, lease_token, lease_until, expires_at, created_at)
           SELECT 'bulk-' || g, 'op', 'v1', 'completed', 't', 0, 9000000000000000, 0 FROM generate_series(1, 20000) g`,
        );
        const client = await db.connect();
        try {
          const prepared = (await client.query<{ name: string; types: string[] }>(
            `SELECT name, parameter_types::text[] AS types FROM pg_prepared_statements WHERE generic_plans > 0`,
          )).rows;
          const literal: Record<string, string> = { text: `'x'`, bigint: '0', integer: '0', bytea: `'\\x00'`, jsonb: `'{}'` };
          const checked: number[] = [];
          for (const { name: statement, types } of prepared) {
            const args = types.map((type) => literal[type] ?? 'NULL').join(', ');
            const plan = (await client.query(`EXPLAIN (FORMAT JSON) EXECUTE ${statement}(${args})`)).rows[0]['QUERY PLAN'];
            const scans: string[] = [];
            const walk = (node: { 'Node Type': string; 'Relation Name'?: string; Plans?: unknown[] }): void => {
              if (node['Relation Name'] === name) scans.push(node['Node Type']);
              for (const child of node.Plans ?? []) walk(child as typeof node);
            };
            walk(plan[0].Plan);
            assert.ok(!scans.includes('Seq Scan'), `a statement with ${types.length} parameters reads the whole table: ${scans.join(', ')}`);
            checked.push(types.length);
          }
          // The batch of 16 reservations (1 + 6 × 16 parameters) and of 16 completions (1 + 7 × 16) were among them.
          assert.ok(checked.includes(97) && checked.includes(113), `checked statements with ${checked.join(', ')} parameters`);
        } finally {
          client.release();
        }
      } finally {
        await db.end();
        await pool.query(`DROP TABLE ${name}`);
      }
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
      // A reservation is answered with the record as the batch stored it, also over an expired completed one.
      assert.deepEqual(await store.get('e-1'), again!.record);
      assert.deepEqual(await store.get('e-2'), stuck!.record);
      await pool.query(`DROP TABLE ${name}`);
    });

    it('answers reservations by column name, whatever the column order of a table made by another migration tool', async () => {
      const name = table();
      // The store's columns, types and indexes, in reverse order.
      await pool.query(`CREATE TABLE ${name} (result_id text, body bytea, headers jsonb, status integer, created_at bigint NOT NULL,
        expires_at bigint NOT NULL, lease_until bigint NOT NULL, lease_token text NOT NULL,
        state text NOT NULL CHECK (state IN ('in_progress', 'completed')), fingerprint text NOT NULL, operation text NOT NULL, id text PRIMARY KEY)`);
      for (const batch of [true, false]) {
        const store = new PostgresStore(pool, { table: name, batch });
        const [fresh, other] = await Promise.all([store.reserve(input(`o-${batch}`)), store.reserve(input(`p-${batch}`))]);
        assert.equal(fresh!.outcome, 'reserved');
        assert.deepEqual(await store.get(`o-${batch}`), fresh!.record);
        assert.deepEqual(await store.get(`p-${batch}`), other!.record);
        await store.complete(`o-${batch}`, `t-o-${batch}`, { response: { status: 201, headers: { etag: '"1"' }, body: new Uint8Array([7]) }, resultId: 'r', ttlMs: 60_000 });
        const [again] = await Promise.all([store.reserve(input(`o-${batch}`, 'late')), store.reserve(input(`q-${batch}`))]);
        assert.equal(again!.outcome, 'existing');
        assert.deepEqual(again!.record, await store.get(`o-${batch}`));
        assert.deepEqual(again!.record.response, { status: 201, headers: { etag: '"1"' }, body: new Uint8Array([7]) });
      }
      await pool.query(`DROP TABLE ${name}`);
    });

    it('keeps the plan of a batched statement: PostgreSQL does not plan it again for every batch', async () => {
      // Over arrays the planner knew a batch's length only from the values and planned every execution anew,
      // which cost more server time than the batch saved. pg_prepared_statements is per connection: use one.
      const client = new pg.Client({ connectionString: server.connectionString });
      await client.connect();
      const name = table();
      try {
        const store = new PostgresStore(client, { table: name, batch: true });
        await store.migrate();
        // A table of some size with statistics, as in use: on a tiny one the planner's choice says nothing.
        await client.query(`INSERT INTO ${name} (id, operation, fingerprint, state, lease_token, lease_until, expires_at, created_at)
          SELECT 'bulk-' || g, 'op', 'v1:x', 'completed', 't', 0, 0, 0 FROM generate_series(1, 20000) AS g; ANALYZE ${name}`);
        const response = { status: 201, headers: { 'content-type': 'application/json' }, body: new Uint8Array([1]) };
        for (let turn = 0; turn < 10; turn += 1) {
          const ids = [0, 1, 2].map((j) => `p-${turn}-${j}`);
          const reserved = await Promise.all(ids.map((id) => store.reserve(input(id))));
          assert.ok(reserved.every((r) => r.outcome === 'reserved'));
          assert.deepEqual(await Promise.all(ids.map((id) => store.complete(id, `t-${id}`, { response, ttlMs: 60_000 }))), [true, true, true]);
        }
        const plans = await client.query<{ statement: string; generic_plans: string; custom_plans: string }>(
          `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements WHERE name LIKE 'idemkit_%'`,
        );
        assert.equal(plans.rows.length, 2, 'one batched reserve and one batched complete statement');
        for (const row of plans.rows) {
          assert.ok(Number(row.custom_plans) <= 5 && Number(row.generic_plans) >= 5, `${row.statement}: ${row.custom_plans} custom plans, ${row.generic_plans} generic`);
        }
      } finally {
        await client.query(`DROP TABLE IF EXISTS ${name}`);
        await client.end();
      }
    });

    it('sends every call as its own statement with batch: false', async () => {
      const name = table();
      await new PostgresStore(pool, { table: name }).migrate();
      const { db, statements } = counted();
      const store = new PostgresStore(db, { table: name, batch: false });
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

  it('migrate() on a table already there takes no lock: a new instance starting beside an open one-transaction request neither waits nor stalls the others', async () => {
    const name = table();
    const running = new PostgresStore(pool, { table: name });
    await running.migrate();
    let open!: () => void;
    const gate = new Promise<void>((resolve) => { open = resolve; });
    const held = running.withReservation({ id: 'long', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 60_000, ttlMs: 60_000 }, async () => {
      await gate;
      return { commit: false, value: 'done' };
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const starting = new PostgresStore(pool, { table: name });
    const migrated = starting.migrate().then(() => 'migrated');
    const other = running.reserve({ id: 'other', operation: 'op', fingerprint: 'v1:x', token: 't2', leaseMs: 1000, ttlMs: 5000 }).then((r) => r.outcome);
    const timeout = new Promise((resolve) => setTimeout(() => resolve('waiting'), 3000));
    // Before: CREATE INDEX IF NOT EXISTS queued behind the open transaction, and the reservation behind it.
    assert.deepEqual(await Promise.all([Promise.race([migrated, timeout]), Promise.race([other, timeout])]), ['migrated', 'reserved']);
    open();
    assert.equal(await held, 'done');
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

  it('one-transaction duplicates wait on the row lock no longer than the guard\'s transactionWaitMs: 409, and their connections go back to the pool', async () => {
    // The chaos review's: with the store's 30 s lock_timeout, duplicates of a slow request held every pooled
    // connection past the guard's own give-up (answered 503), and every other key got 503 until it ended.
    const small = new pg.Pool({ connectionString: server.connectionString, max: 3 });
    try {
      const store = new PostgresStore(small, { table: table() });
      await store.migrate();
      const guard = createGuard<pg.PoolClient>(demoContract(), { store, storeTimeoutMs: 5000, transactionWaitMs: 300 });
      let open!: () => void;
      const gate = new Promise<void>((resolve) => { open = resolve; });
      const slow = guard.handle(demoRequest('slow'), async () => { await gate; return jsonResponse(201, { id: 'slow' }); }, { transaction: true });
      await new Promise((resolve) => setTimeout(resolve, 100));
      const started = Date.now();
      const duplicates = await Promise.all([1, 2, 3, 4].map(() => guard.handle(demoRequest('slow'), async () => jsonResponse(201, { id: 'twice' }), { transaction: true })));
      assert.deepEqual(duplicates.map((answer) => answer.status), [409, 409, 409, 409]);
      assert.ok(Date.now() - started < 4000, `answered after ${Date.now() - started} ms`);
      // The pool has 3 connections, the slow request holds one: the duplicates gave theirs back.
      const fresh = await guard.handle(demoRequest('fresh'), async () => jsonResponse(201, { id: 'fresh' }), { transaction: true });
      assert.equal(fresh.status, 201);
      open();
      assert.equal(bodyJson(await slow).id, 'slow');
    } finally {
      await small.end();
    }
  });

  it("one-transaction duplicates whose wait a server-side statement_timeout ends answer 409 + Retry-After, not 503", async () => {
    // A review's: with the role's statement_timeout at 100 ms, 29 of 30 duplicates of a 400 ms request answered 503.
    const small = new pg.Pool({ connectionString: server.connectionString, max: 6, options: '-c statement_timeout=100' });
    let open = (): void => undefined;
    const gate = new Promise<void>((resolve) => { open = resolve; });
    try {
      const store = new PostgresStore(small, { table: table() });
      await store.migrate();
      const guard = createGuard<pg.PoolClient>(demoContract(), { store, storeTimeoutMs: 5000, transactionWaitMs: 2000 });
      const slow = guard.handle(demoRequest('timed'), async () => { await gate; return jsonResponse(201, { id: 'slow' }); }, { transaction: true });
      await new Promise((resolve) => setTimeout(resolve, 100));
      const duplicates = await Promise.all([1, 2, 3].map(() => guard.handle(demoRequest('timed'), async () => jsonResponse(201, { id: 'twice' }), { transaction: true })));
      assert.deepEqual(duplicates.map((answer) => answer.status), [409, 409, 409]);
      assert.ok(duplicates.every((answer) => Number(answer.headers['retry-after']) >= 1));
      open();
      assert.equal(bodyJson(await slow).id, 'slow');
    } finally {
      open(); // a failed assertion must not leave the slow request holding a connection (small.end() would wait for it)
      await small.end();
    }
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

  it("a one-transaction handler whose connection the server ends fails that call alone: no unhandled 'error', the pool goes on", async () => {
    const store = new PostgresStore(pool, { table: table() });
    await store.migrate();
    // As a restart, a failover or idle_in_transaction_session_timeout ends the session while the handler holds it.
    await assert.rejects(
      store.withReservation({ id: 'ended', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 1000, ttlMs: 5000 }, async (_reserved, tx) => {
        const pid = (await tx.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
        await pool.query('SELECT pg_terminate_backend($1)', [pid]);
        await new Promise((resolve) => setTimeout(resolve, 200));
        return { commit: true, complete: { response: { status: 201, headers: {}, body: new Uint8Array(0) }, ttlMs: 5000 }, value: 1 };
      }),
      (e: unknown) => e instanceof StoreError,
    );
    assert.equal((await pool.query('SELECT 1 AS one')).rows[0].one, 1);
    assert.equal(await store.get('ended'), undefined, 'the reservation rolled back with the session');
  });

  for (const pipeline of [false, true]) {
    it(`a one-transaction handler given up while its statement runs writes nothing outside the transaction${pipeline ? ' (a pool in pg\'s pipeline mode)' : ''}`, async () => {
      // A review's: the store rolled back under the handler still at work, and its next statement ran on its own and
      // committed — the effect without its record, so the retry ran it again.
      const db = new pg.Pool({ connectionString: server.connectionString, max: 2, pipeline } as pg.PoolConfig);
      db.on('error', () => undefined);
      const name = table();
      try {
        const store = new PostgresStore(db, { table: name });
        await store.migrate();
        await db.query(`CREATE TABLE ${name}_effects (id text)`);
        let handler: Promise<string> | undefined;
        await assert.rejects(
          store.withReservation({ id: 'late', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 30_000, ttlMs: 60_000 }, (_reserved, tx) => {
            handler = (async () => {
              await tx.query('SELECT pg_sleep(0.4)');
              await tx.query(`INSERT INTO ${name}_effects VALUES ('late')`);
              return 'wrote';
            })().catch((error: Error) => `failed: ${error.message}`);
            // What the adapters do at their bound: the work rejected with a given-up error while the handler runs on.
            return new Promise((_, reject) => setTimeout(() => reject(handlerGivenUp('given up at the bound')), 100));
          }),
          (e: unknown) => isHandlerGivenUp(e),
        );
        await handler;
        assert.deepEqual((await db.query(`SELECT id FROM ${name}_effects`)).rows, [], 'the late write committed on its own');
        assert.equal(await store.get('late'), undefined, 'the reservation rolled back');
        assert.equal((await store.reserve({ id: 'late', operation: 'op', fingerprint: 'v1:x', token: 't2', leaseMs: 1000, ttlMs: 5000 })).outcome, 'reserved', 'the key is free');
      } finally {
        await db.end().catch(() => undefined);
      }
    });
  }

  /** A pool of 3 straight to the server, or through a PgBouncer in transaction mode (3 server connections); `end` stops both. */
  async function poolThrough(test: Mocha.Context, through: 'direct' | 'PgBouncer'): Promise<{ db: pg.Pool; preparedStatements: false | undefined; end: () => Promise<void> }> {
    let bouncer: Awaited<ReturnType<typeof startPgBouncer>> | undefined;
    if (through === 'PgBouncer') {
      requireBinary(test, 'pgbouncer', PGBOUNCER_DIRS);
      bouncer = await startPgBouncer(server, 'transaction', 3);
    }
    const db = new pg.Pool({ connectionString: bouncer?.connectionString ?? server.connectionString, max: 3 });
    db.on('error', () => undefined);
    const end = async (): Promise<void> => {
      await db.end().catch(() => undefined);
      await bouncer?.stop();
    };
    return { db, preparedStatements: through === 'direct' ? undefined : false, end };
  }

  for (const through of ['direct', 'PgBouncer'] as const) {
    it(`one-transaction handlers given up in long statements leave no statement running, the pool bounds the server connections, and their keys are free at once (${through === 'direct' ? 'straight to the server' : 'through PgBouncer in transaction mode'})`, async function () {
      // A review's: a given-up handler's statement outlived its socket (the server runs it to its end before it sees
      // the connection gone), holding the key's row lock, while the pool opened another connection in its place —
      // pool max 5 and 120 given-up handlers in pg_sleep took the server past max_connections (53300 for everyone).
      // Through PgBouncer the cancel counts only while the client it came from is still connected.
      const { db, preparedStatements, end } = await poolThrough(this, through);
      const name = table();
      const tag = `long_${name}`;
      // Counted on the server, by the statement's text: behind PgBouncer the client's process id is the pooler's.
      const running = async (): Promise<number> =>
        Number((await pool.query(`SELECT count(*) AS n FROM pg_stat_activity WHERE query LIKE $1 AND pid <> pg_backend_pid()`, [`SELECT pg_sleep(30) /* ${tag} */%`])).rows[0].n);
      try {
        const store = new PostgresStore(db, { table: name, preparedStatements });
        await store.migrate();
        let peak = 0;
        const input = (id: string, token: string) => ({ id, operation: 'op', fingerprint: 'v1:x', token, leaseMs: 30_000, ttlMs: 60_000 });
        const outcomes = await Promise.all(
          Array.from({ length: 12 }, (_, i) =>
            store
              .withReservation(input(`long-${i}`, 't'), (_reserved, tx) => {
                void tx.query(`SELECT pg_sleep(30) /* ${tag} */`).catch(() => undefined);
                return new Promise<never>((_, reject) => setTimeout(() => reject(handlerGivenUp('given up at the bound')), 100));
              })
              .then(
                () => 'ran',
                async (error: unknown) => {
                  peak = Math.max(peak, await running());
                  return isHandlerGivenUp(error) ? 'given up' : String(error);
                },
              ),
          ),
        );
        assert.deepEqual(new Set(outcomes), new Set(['given up']));
        assert.ok(peak <= 3 + 1, `the pool's 3 connections at most (one more while it is replaced), not one per given-up handler: ${peak} statements at once`);
        const deadline = Date.now() + 5_000;
        while ((await running()) > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 25));
        assert.equal(await running(), 0, 'given-up statements still run on the server');
        const again = await Promise.all(Array.from({ length: 12 }, (_, i) => store.reserve({ ...input(`long-${i}`, 'retry'), leaseMs: 1000 })));
        assert.deepEqual(new Set(again.map((r) => r.outcome)), new Set(['reserved']), 'a retry reserves the key at once');
      } finally {
        await end();
      }
    });
  }

  for (const through of ['direct', 'PgBouncer'] as const) {
    it(`a one-transaction handler whose statement is cancelled at its bound cannot roll back and write on its own (${through === 'direct' ? 'straight to the server' : 'through PgBouncer in transaction mode'})`, async function () {
      // A review's: the client stayed usable while its cancel went out; the cancelled statement failed in the handler,
      // whose error path (its own, or an ORM's transaction()) sent ROLLBACK and then a write — committed, no record.
      const { db, preparedStatements, end } = await poolThrough(this, through);
      const name = table();
      try {
        const store = new PostgresStore(db, { table: name, preparedStatements });
        await store.migrate();
        await pool.query(`CREATE TABLE ${name}_effects (k text, what text)`);
        const late: string[] = [];
        for (let i = 0; i < 3; i += 1) {
          const key = `cancelled-${i}`;
          let handler: Promise<void> | undefined;
          await assert.rejects(
            store.withReservation({ id: key, operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 30_000, ttlMs: 60_000 }, (_reserved, tx) => {
              handler = (async () => {
                try {
                  await tx.query(`INSERT INTO ${name}_effects VALUES ($1, 'business')`, [key]);
                  await tx.query('SELECT pg_sleep(5)');
                } catch {
                  try {
                    await tx.query('ROLLBACK');
                    await tx.query(`INSERT INTO ${name}_effects VALUES ($1, 'failure noted')`, [key]);
                    late.push('written');
                  } catch (error) {
                    late.push((error as Error).message);
                  }
                }
              })();
              return new Promise((_, reject) => setTimeout(() => reject(handlerGivenUp('given up at the bound')), 100));
            }),
            (e: unknown) => isHandlerGivenUp(e),
          );
          await handler;
        }
        assert.equal(late.length, 3);
        for (const outcome of late) assert.match(outcome, /given up at its bound/);
        assert.deepEqual((await pool.query(`SELECT k, what FROM ${name}_effects`)).rows, [], 'a late write committed on its own');
      } finally {
        await end();
      }
    });
  }

  /** Runs `run` on a store of a fresh table in a pool of its own (max 2), beside an `effects (id text)` table; ends the pool. */
  async function withEffectsTable(run: (store: PostgresStore, db: pg.Pool, effects: string) => Promise<void>, options: Partial<pg.PoolConfig> = {}): Promise<void> {
    const db = new pg.Pool({ connectionString: server.connectionString, max: 2, ...options });
    db.on('error', () => undefined);
    const name = table();
    try {
      const store = new PostgresStore(db, { table: name });
      await store.migrate();
      await db.query(`CREATE TABLE ${name}_effects (id text)`);
      await run(store, db, `${name}_effects`);
    } finally {
      await db.end().catch(() => undefined);
    }
  }

  it("a one-transaction handler's tx runs its statements and savepoints, but cannot end the store's transaction or release its client", async () => {
    // A review's: an ORM's transaction() on a client sends BEGIN then COMMIT (the reservation committed half-way, without
    // its record); a Kysely-style wrapper's release() put the client back in the pool mid-transaction.
    await withEffectsTable(async (store, db, effects) => {
      const refused: string[] = [];
      const value = await store.withReservation({ id: 'own', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 30_000, ttlMs: 60_000 }, async (_reserved, tx) => {
        assert.ok(tx instanceof pg.Client);
        await tx.query(`INSERT INTO ${effects} VALUES ('kept')`);
        await tx.query('SAVEPOINT part');
        await tx.query(`INSERT INTO ${effects} VALUES ('undone')`);
        await tx.query('ROLLBACK TO SAVEPOINT part');
        await tx.query('ROLLBACK /* a comment */ TO SAVEPOINT part');
        for (const text of ['BEGIN', 'commit', '  /* an ORM */ COMMIT', 'END', 'ROLLBACK', 'START TRANSACTION', "PREPARE TRANSACTION 'x'", '/* a /* nested */ comment */ COMMIT', '-- a line\rCOMMIT', ';COMMIT', 'ROLLBACK; TO SAVEPOINT part']) {
          await tx.query(text).then(() => refused.push(`${text}: ran`), (error: Error) => refused.push(error.message));
        }
        tx.release();
        const { rows } = await tx.query({ text: `SELECT count(*)::int AS n FROM ${effects}` });
        return { commit: true, value: rows[0].n as number, complete: { response: { status: 201, headers: {}, body: new Uint8Array([1]) }, ttlMs: 60_000 } };
      });
      assert.equal(value, 1);
      assert.equal(refused.length, 11);
      for (const message of refused) assert.match(message, /the store owns this request's transaction.*SAVEPOINT/);
      assert.deepEqual((await db.query(`SELECT id FROM ${effects}`)).rows, [{ id: 'kept' }]);
      assert.equal((await store.get('own'))?.state, 'completed');
      assert.equal(db.idleCount + db.waitingCount, db.totalCount, 'the client went back to the pool once, by the store');
    });
  });

  it("a handler that ends the store's transaction in a way tx cannot see still has its committed reservation completed (replayed, not run again)", async () => {
    await withEffectsTable(async (store, db, effects) => {
      const complete = { response: { status: 201, headers: {}, body: new Uint8Array([1]) }, ttlMs: 60_000 };
      const value = await store.withReservation({ id: 'hidden-commit', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 30_000, ttlMs: 60_000 }, async (_reserved, tx) => {
        await tx.query(`INSERT INTO ${effects} VALUES ('effect'); COMMIT`);
        // Past that COMMIT a write would commit on its own: nothing more goes out.
        await assert.rejects(tx.query(`INSERT INTO ${effects} VALUES ('after')`), /the handler ended the store's transaction/);
        return { commit: true, value: 'done', complete };
      });
      assert.equal(value, 'done');
      assert.equal((await store.get('hidden-commit'))?.state, 'completed');
      await assert.rejects(
        store.withReservation({ id: 'hidden-rollback', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 30_000, ttlMs: 60_000 }, async (_reserved, tx) => {
          await tx.query('SELECT 1; ROLLBACK');
          return { commit: true, value: 'done', complete };
        }),
        (error: unknown) => error instanceof StoreError && /ended the store's transaction/.test(error.message),
      );
      assert.equal(await store.get('hidden-rollback'), undefined);
      // The callback form, whose answer the handle does not watch: the next statement finds the transaction over.
      const called = await store.withReservation({ id: 'hidden-callback', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 30_000, ttlMs: 60_000 }, async (_reserved, tx) => {
        const after = await new Promise<unknown>((resolve) => {
          (tx.query as unknown as (text: string, cb: (error: Error | null) => void) => void)(`INSERT INTO ${effects} VALUES ('called'); COMMIT`, (error) => {
            assert.equal(error, null);
            (tx.query as unknown as (text: string, cb: (error: Error | null) => void) => void)(`INSERT INTO ${effects} VALUES ('after-callback')`, resolve);
          });
        });
        assert.match(String(after), /the handler ended the store's transaction/);
        return { commit: true, value: 'called', complete };
      });
      assert.equal(called, 'called');
      assert.equal((await store.get('hidden-callback'))?.state, 'completed');
      assert.deepEqual((await db.query(`SELECT id FROM ${effects} ORDER BY id`)).rows.map((row: { id: string }) => row.id), ['called', 'effect']);
    });
  });

  it('statements queued together through tx are checked as each goes out: one queued behind a hidden COMMIT or ROLLBACK is refused unsent (pg pipeline mode too)', async () => {
    for (const pipeline of [false, true]) {
      await withEffectsTable(
        async (store, db, effects) => {
          const complete = { response: { status: 201, headers: {}, body: new Uint8Array([1]) }, ttlMs: 60_000 };
          const ran = async (id: string, first: string): Promise<string[]> => {
            const said: string[] = [];
            await store
              .withReservation({ id, operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 30_000, ttlMs: 60_000 }, async (_reserved, tx) => {
                await Promise.all([
                  tx.query(first).then(() => said.push('first ran'), (error: Error) => said.push(error.message)),
                  tx.query(`INSERT INTO ${effects} VALUES ('${id}')`).then(() => said.push('insert ran'), (error: Error) => said.push(error.message)),
                ]);
                return { commit: true, value: undefined, complete };
              })
              .catch((error: Error) => said.push(`store: ${error.message}`));
            return said;
          };
          const mode = `pipeline ${String(pipeline)}`;
          const rolledBack = await ran('rollback', 'SELECT 1; ROLLBACK');
          assert.equal(rolledBack[0], 'first ran', mode);
          assert.match(rolledBack[1] ?? '', /the handler ended the store's transaction/, mode);
          assert.match(rolledBack[2] ?? '', /store: .*ended the store's transaction itself/, mode);
          const committed = await ran('commit', 'SELECT 1; COMMIT');
          assert.match(committed[1] ?? '', /the handler ended the store's transaction/, mode);
          assert.deepEqual((await db.query(`SELECT id FROM ${effects}`)).rows, [], `${mode}: a write ran outside the transaction`);
          assert.equal((await store.get('commit'))?.state, 'completed', mode);
          // Queued together with nothing hidden, both run in the transaction as before.
          assert.deepEqual(await ran('plain', `INSERT INTO ${effects} VALUES ('plain-first')`), ['first ran', 'insert ran'], mode);
          assert.equal((await db.query(`SELECT count(*)::int AS n FROM ${effects}`)).rows[0].n, 2, mode);
        },
        pipeline ? ({ pipeline: true } as Partial<pg.PoolConfig>) : {},
      );
    }
  });

  it('a handler that committed through tx and then failed or answered 5xx has its record kept, its lease ended: never "rolled back", never run again by a retry', async () => {
    await withEffectsTable(async (store, db, effects) => {
      const reservation = (id: string) => ({ id, operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 30_000, ttlMs: 60_000 });
      // `COMMIT; BEGIN` leaves a transaction open, so nothing looks ended: the store's rollback undoes only what came after.
      await assert.rejects(
        store.withReservation(reservation('commit-begin'), async (_reserved, tx) => {
          await tx.query(`INSERT INTO ${effects} VALUES ('before'); COMMIT; BEGIN`);
          await tx.query(`INSERT INTO ${effects} VALUES ('after')`);
          throw new Error('handler failed');
        }),
        (error: unknown) => error instanceof StoreError && /committed the store's transaction itself/.test(error.message) && (error.cause as Error).message === 'handler failed',
      );
      await assert.rejects(
        store.withReservation(reservation('hidden-commit-5xx'), async (_reserved, tx) => {
          await tx.query(`INSERT INTO ${effects} VALUES ('answered-5xx'); COMMIT`);
          return { commit: false, value: undefined };
        }),
        (error: unknown) => error instanceof StoreError && /committed the store's transaction itself/.test(error.message),
      );
      for (const id of ['commit-begin', 'hidden-commit-5xx']) {
        const kept = await store.get(id);
        assert.equal(kept?.state, 'in_progress', id);
        assert.ok(kept.leaseUntil <= (await store.now()), `${id}: its lease ended at once`);
      }
      assert.deepEqual((await store.listAbandoned()).map((record) => record.id).sort(), ['commit-begin', 'hidden-commit-5xx']);
      // A ROLLBACK hidden so, then a write in the same string: that write ran on its own — unknown, not "rolled back".
      await assert.rejects(
        store.withReservation(reservation('rollback-write'), async (_reserved, tx) => {
          await tx.query(`SELECT 1; ROLLBACK; INSERT INTO ${effects} VALUES ('alone')`);
          throw new Error('handler failed');
        }),
        (error: unknown) => error instanceof StoreError && /ended the store's transaction itself/.test(error.message),
      );
      // Without any of that, the handler's own error, its writes undone.
      await assert.rejects(
        store.withReservation(reservation('plain'), async (_reserved, tx) => {
          await tx.query(`INSERT INTO ${effects} VALUES ('undone')`);
          throw new Error('plain failure');
        }),
        (error: unknown) => !(error instanceof StoreError) && (error as Error).message === 'plain failure',
      );
      assert.equal(await store.get('plain'), undefined);
      assert.deepEqual((await db.query(`SELECT id FROM ${effects} ORDER BY id`)).rows.map((row: { id: string }) => row.id), ['alone', 'answered-5xx', 'before']);
      // Through the guard: 503 outcome-unknown, logged so; the retry finds the record abandoned (409), the handler not run again.
      const events: GuardLogEvent[] = [];
      const guard = createGuard<pg.PoolClient>(demoContract(), { store, log: (event) => events.push(event) });
      let runs = 0;
      const charge = async (ctx: { tx: pg.PoolClient | undefined }) => {
        runs += 1;
        await ctx.tx!.query(`INSERT INTO ${effects} VALUES ('charged'); COMMIT; BEGIN`);
        throw new Error('failed after charging');
      };
      const first = await guard.handle(demoRequest('charge'), charge, { transaction: true });
      assert.equal(first.status, 503, `got ${first.status}`);
      assert.match(new TextDecoder().decode(first.body), /idempotency-outcome-unknown/);
      assert.ok(events.some((event) => event.decision === 'outcome-unknown') && !events.some((event) => event.decision === 'rolled-back'));
      const retry = await guard.handle(demoRequest('charge'), charge, { transaction: true });
      assert.equal(retry.status, 409, `got ${retry.status}`);
      assert.match(new TextDecoder().decode(retry.body), /idempotency-request-abandoned/);
      assert.equal(runs, 1);
    });
  });

  it('a one-transaction handler given up at its bound writes nothing through a query it kept, and its release() crashes nothing', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      await withEffectsTable(async (store, db, effects) => {
        let handler: Promise<string> | undefined;
        await assert.rejects(
          store.withReservation({ id: 'kept-query', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 30_000, ttlMs: 60_000 }, (_reserved, tx) => {
            const query = tx.query.bind(tx) as (text: string) => Promise<unknown>;
            handler = (async () => {
              try {
                await query('SELECT pg_sleep(5)');
                return 'slept';
              } catch {
                try {
                  await query('ROLLBACK');
                  await query(`INSERT INTO ${effects} VALUES ('late')`);
                  return 'written';
                } catch (error) {
                  return (error as Error).message;
                } finally {
                  tx.release();
                }
              }
            })();
            return new Promise((_, reject) => setTimeout(() => reject(handlerGivenUp('given up at the bound')), 100));
          }),
          (e: unknown) => isHandlerGivenUp(e),
        );
        assert.match(await handler!, /given up at its bound/);
        await new Promise((resolve) => setTimeout(resolve, 300));
        assert.deepEqual((await db.query(`SELECT id FROM ${effects}`)).rows, [], 'the late write committed on its own');
        assert.equal((await store.reserve({ id: 'kept-query', operation: 'op', fingerprint: 'v1:x', token: 't2', leaseMs: 1000, ttlMs: 5000 })).outcome, 'reserved');
        assert.deepEqual(unhandled, []);
      });
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  for (const isolation of ['serializable', 'repeatable read']) {
    it(`with the database's default isolation at ${isolation}, concurrent reservations and completions of other keys all succeed (serialization failures are sent again)`, async () => {
      // A team's choice for its own transactions (ALTER DATABASE … SET default_transaction_isolation) reaches the store's
      // statements too: SSI's page-level predicate locks failed a few per cent of them with 40001 — fresh requests
      // answered 503, completions of effects that had run left unrecorded — and duplicates of one key failed alike.
      const database = `iso_${isolation.replace(' ', '_')}_${process.pid}`;
      await pool.query(`CREATE DATABASE ${database}`);
      await pool.query(`ALTER DATABASE ${database} SET default_transaction_isolation = '${isolation}'`);
      const db = new pg.Pool({ connectionString: server.connectionString.replace(/\/postgres$/, `/${database}`), max: 10 });
      try {
        assert.equal((await db.query('SHOW transaction_isolation')).rows[0].transaction_isolation, isolation);
        for (const batch of [true, false]) {
          const store = new PostgresStore(db, { table: `iso_${batch}`, batch });
          await store.migrate();
          const input = (id: string, token: string) => ({ id, operation: 'op', fingerprint: 'v1:x', token, leaseMs: 30_000, ttlMs: 60_000 });
          for (let round = 0; round < 4; round += 1) {
            const same = await Promise.all(Array.from({ length: 50 }, (_, i) => store.reserve(input(`same-${round}`, `t${i}`))));
            assert.equal(same.filter((r) => r.outcome === 'reserved').length, 1);
            const ids = Array.from({ length: 200 }, (_, i) => `k-${round}-${i}`);
            const reserved = await Promise.all(ids.map((id) => store.reserve(input(id, `t-${id}`))));
            assert.ok(reserved.every((r) => r.outcome === 'reserved'));
            const completed = await Promise.all(ids.map((id) => store.complete(id, `t-${id}`, { response: { status: 201, headers: {}, body: new Uint8Array([1]) }, ttlMs: 60_000 })));
            assert.ok(completed.every((done) => done === true));
          }
        }
      } finally {
        await db.end();
        await pool.query(`DROP DATABASE ${database}`);
      }
    });
  }

  it('one-transaction duplicates under a serializable default: a reservation rolled back by the first one\'s commit is tried again (replay or 409, never 503)', async () => {
    // A review's: 50 concurrent one-transaction requests with one key, 5 rounds, answered 45 × 503 store-unavailable —
    // each duplicate waiting on the row lock failed with 40001 when the first request committed.
    const database = `iso_tx_${process.pid}`;
    await pool.query(`CREATE DATABASE ${database}`);
    await pool.query(`ALTER DATABASE ${database} SET default_transaction_isolation = 'serializable'`);
    const db = new pg.Pool({ connectionString: server.connectionString.replace(/\/postgres$/, `/${database}`), max: 20 });
    try {
      const store = new PostgresStore(db, { table: 'iso_tx' });
      await store.migrate();
      await db.query('CREATE TABLE business (key text)');
      const guard = createGuard<pg.PoolClient>(demoContract(), { store, storeTimeoutMs: 10_000 });
      for (let round = 0; round < 3; round += 1) {
        const answers = await Promise.all(
          Array.from({ length: 30 }, () => guard.handle(demoRequest(`same-${round}`), async (ctx) => {
            await ctx.tx!.query('INSERT INTO business (key) VALUES ($1)', [`same-${round}`]);
            return jsonResponse(201, { id: `same-${round}` });
          }, { transaction: true })),
        );
        const statuses = answers.map((a) => a.status);
        assert.deepEqual(statuses.filter((status) => status !== 201 && status !== 409), [], `statuses: ${statuses.join(' ')}`);
        assert.equal((await db.query('SELECT count(*)::int AS n FROM business WHERE key = $1', [`same-${round}`])).rows[0].n, 1);
      }
      // Distinct keys do not conflict: the completion's fence reads the record by its primary key, not by a scan of the
      // partial lease index (which SSI locked whole — 91 of 100 concurrent requests answered 503 outcome-unknown). As
      // in production the table holds many completed records (SSI's predicate locks are per index page: keys spread
      // over pages), and its statistics saw none in progress.
      await db.query(
        `INSERT INTO iso_tx (id, operation, fingerprint, state, lease_token, lease_until, expires_at, created_at, status, headers, body)
         SELECT md5(g::text), 'op', 'f', 'completed', 't', 0, 9e15, 0, 201, '{}', '' FROM generate_series(1, 50000) g`,
      );
      await db.query('ANALYZE iso_tx');
      let failed = 0;
      let total = 0;
      for (let round = 0; round < 3; round += 1) {
        const answers = await Promise.all(
          Array.from({ length: 40 }, (_, i) => guard.handle(demoRequest(`distinct-${round}-${i}`), async (ctx) => {
            await ctx.tx!.query('INSERT INTO business (key) VALUES ($1)', [`distinct-${round}-${i}`]);
            return jsonResponse(201, { id: i });
          }, { transaction: true }).then((answer) => answer.status, () => 'threw')),
        );
        total += answers.length;
        failed += answers.filter((status) => status !== 201).length;
      }
      process.stdout.write(`      serializable, one transaction, distinct keys: ${failed} of ${total} concurrent requests not 201\n`);
      assert.ok(failed <= total / 20, `${failed} of ${total} failed`);
    } finally {
      await db.end();
      await pool.query(`DROP DATABASE ${database}`);
    }
  });

  it('migrate() accepts a table a DBA\'s migration made (indexes named otherwise) for a role that may not create', async () => {
    await pool.query('CREATE SCHEMA locked');
    await pool.query(PostgresStore.schemaSql('locked.records').replace(/records_expiry/g, 'idx_records_exp').replace(/records_lease/g, 'idx_records_lease'));
    await pool.query("CREATE ROLE app_no_ddl LOGIN");
    await pool.query('GRANT USAGE ON SCHEMA locked TO app_no_ddl');
    await pool.query('GRANT SELECT, INSERT, UPDATE, DELETE ON locked.records TO app_no_ddl');
    const app = new pg.Pool({ connectionString: server.connectionString.replace('postgres://postgres@', 'postgres://app_no_ddl@'), max: 2 });
    try {
      const store = new PostgresStore(app, { table: 'locked.records' });
      await store.migrate();
      assert.equal((await store.reserve({ id: 'k', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 1000, ttlMs: 5000 })).outcome, 'reserved');
      // A table that is not there is still an error: the store cannot run without it.
      await assert.rejects(new PostgresStore(app, { table: 'locked.missing' }).migrate(), (e: unknown) => e instanceof StoreError && /42501/.test(e.message));
      // So is one this role may not write: every request would answer 503.
      await pool.query('REVOKE DELETE ON locked.records FROM app_no_ddl');
      await assert.rejects(new PostgresStore(app, { table: 'locked.records' }).migrate(), (e: unknown) => e instanceof StoreError && /42501/.test(e.message));
    } finally {
      await app.end();
      await pool.query('DROP SCHEMA locked CASCADE');
      await pool.query('DROP OWNED BY app_no_ddl');
      await pool.query('DROP ROLE app_no_ddl');
    }
  });

  describe('through PgBouncer in transaction pooling mode (each transaction may get another server connection)', () => {
    // PgBouncer before 1.21 (Debian 12 has 1.18), as Supavisor's transaction mode, does not carry named prepared
    // statements across server connections: 26000 (missing there) or 42P05 (already there). A third or more of
    // the store's statements failed so — 503s, completions of effects that ran left unrecorded.
    const input = (id: string, token: string) => ({ id, operation: 'op', fingerprint: 'v1:x', token, leaseMs: 30_000, ttlMs: 60_000 });
    const done = { response: { status: 201, headers: {}, body: new Uint8Array([1]) }, ttlMs: 60_000 };

    it('a named statement missing on a one-transaction request\'s connection cannot fail it after the handler ran (its completion is unnamed; its reservation is tried again)', async () => {
      // A diff review's: the completion's named statement missing on the pinned connection (26000) rolled the transaction
      // back after the handler ran — 503 outcome-unknown, and the retry ran the handler's outside effect again. Here
      // DEALLOCATE stands in for the pooler's swap of server connections.
      const one = new pg.Pool({ connectionString: server.connectionString, max: 1 });
      try {
        const store = new PostgresStore(one, { table: table() });
        await store.migrate();
        await store.reserve(input('warm', 'tw'));
        await store.complete('warm', 'tw', done);
        // The completion's statement gone from the connection, the reservation's still there: the case where only the
        // step after the handler would fail.
        const names = await one.query("SELECT name FROM pg_prepared_statements WHERE statement LIKE '%SET state = ''completed''%' AND statement NOT LIKE '%VALUES%'");
        assert.equal(names.rows.length, 1);
        await one.query(`DEALLOCATE ${names.rows[0].name as string}`);
        const guard = createGuard<pg.PoolClient>(demoContract(), { store });
        let effects = 0;
        const handler = async (): Promise<ReturnType<typeof jsonResponse>> => {
          effects += 1;
          return jsonResponse(201, { id: 'once' });
        };
        const first = await guard.handle(demoRequest('unnamed'), handler, { transaction: true });
        assert.equal(first.status, 201, JSON.stringify(bodyJson(first)));
        assert.equal((await guard.handle(demoRequest('unnamed'), handler, { transaction: true })).headers['idempotent-replayed'], 'true');
        assert.equal(effects, 1);
      } finally {
        await one.end();
      }
    });

    for (const preparedStatements of [undefined, false]) {
      it(`reservations and completions all succeed (preparedStatements: ${preparedStatements ?? 'default, turned off at the first error'})`, async function () {
        requireBinary(this, 'pgbouncer', PGBOUNCER_DIRS);
        const bouncer = await startPgBouncer(server, 'transaction', 3);
        const db = new pg.Pool({ connectionString: bouncer.connectionString, max: 12 });
        db.on('error', () => undefined);
        try {
          for (const batch of [true, false]) {
            const store = new PostgresStore(db, { table: table(), batch, preparedStatements });
            await store.migrate();
            for (let round = 0; round < 3; round += 1) {
              const same = await Promise.all(Array.from({ length: 50 }, (_, i) => store.reserve(input(`same-${round}`, `t${i}`))));
              assert.equal(same.filter((r) => r.outcome === 'reserved').length, 1);
              const ids = Array.from({ length: 100 }, (_, i) => `k-${round}-${i}`);
              assert.ok((await Promise.all(ids.map((id) => store.reserve(input(id, `t-${id}`))))).every((r) => r.outcome === 'reserved'));
              assert.ok((await Promise.all(ids.map((id) => store.complete(id, `t-${id}`, done)))).every((ok) => ok === true));
              assert.equal((await store.get(ids[0]!))?.state, 'completed');
            }
            // One-transaction requests through it too, once named statements are off (first error, or asked).
            const guard = createGuard<pg.PoolClient>(demoContract(), { store });
            const answers = await Promise.all(
              Array.from({ length: 20 }, (_, i) => guard.handle(demoRequest(`tx-${i % 10}`), async (ctx) => {
                await ctx.tx!.query('SELECT 1');
                return jsonResponse(201, { id: `tx-${i % 10}` });
              }, { transaction: true })),
            );
            assert.deepEqual(answers.filter((a) => a.status === 503), []);
          }
        } finally {
          await db.end();
          await bouncer.stop();
        }
      });
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
    const batching = new PostgresStore(pool, { table: table(), batch: true });
    await batching.migrate();
    await server.kill();
    const unavailable = (e: unknown) => e instanceof StoreError && e.kind === 'unavailable';
    await assert.rejects(store.reserve({ id: 'x', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 1, ttlMs: 1 }), unavailable);
    // A batch that cannot reach the server fails every call of it, each with its own typed error.
    const calls = await Promise.allSettled([
      ...['a', 'b', 'c'].map((id) => batching.reserve({ id, operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 1, ttlMs: 1 })),
      ...['d', 'e'].map((id) => batching.complete(id, 't', { response: { status: 201, headers: {}, body: new Uint8Array() }, ttlMs: 1 })),
    ]);
    assert.deepEqual(calls.map((c) => c.status), ['rejected', 'rejected', 'rejected', 'rejected', 'rejected']);
    for (const call of calls) assert.ok(call.status === 'rejected' && unavailable(call.reason), String((call as PromiseRejectedResult).reason));
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

describe('PostgresStore durability (a cluster of its own, crashed and restarted)', function () {
  this.timeout(120_000);
  let server: PostgresServer;

  before(async function () {
    requireBinary(this, 'initdb', PG_DIRS);
    requireBinary(this, 'pg_ctl', PG_DIRS);
    // The helper's cluster runs with synchronous_commit = off: exactly the setting under which a crash loses commits.
    server = await startPostgres();
  });
  after(async () => {
    await server?.stop();
  });

  it('keeps every acknowledged reservation and completion across a server crash, though the server runs with synchronous_commit = off', async () => {
    const open = () => {
      const pool = new pg.Pool({ connectionString: server.connectionString, max: 4 });
      pool.on('error', () => undefined);
      return pool;
    };
    const input = (id: string) => ({ id, operation: 'op', fingerprint: 'v1:x', token: `t-${id}`, leaseMs: 60_000, ttlMs: 3_600_000 });
    const response = { status: 201, headers: { 'content-type': 'application/json' }, body: Buffer.from('{"id":"x"}') };
    let pool = open();
    const store = new PostgresStore(pool, { table: 'crash_records' });
    await store.migrate();
    const ids = Array.from({ length: 20 }, (_, i) => `key-${i}`);
    // Batched (one turn) and alone, then completions of half of them: every call acknowledged before the crash.
    await Promise.all(ids.slice(0, 19).map((id) => store.reserve(input(id))));
    await store.reserve(input(ids[19]!));
    assert.deepEqual(await Promise.all(ids.slice(0, 10).map((id) => store.complete(id, `t-${id}`, { response, ttlMs: 3_600_000 }))), Array(10).fill(true));
    await server.kill();
    await pool.end().catch(() => undefined);
    await server.restart();
    pool = open();
    try {
      const recovered = new PostgresStore(pool, { table: 'crash_records' });
      const states = await Promise.all(ids.map(async (id) => (await recovered.get(id))?.state ?? 'lost'));
      assert.deepEqual(states, [...Array(10).fill('completed'), ...Array(10).fill('in_progress')]);
    } finally {
      await pool.end();
    }
  });
});
