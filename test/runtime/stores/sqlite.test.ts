import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import Database from 'better-sqlite3';
import { SqliteStore, type SqliteDatabase } from '../../../src/runtime/stores/sqlite.js';
import { StoreError, handlerGivenUp, isHandlerGivenUp } from '../../../src/runtime/store.js';
import { createGuard, type GuardLogEvent } from '../../../src/runtime/guard.js';
import { describeStoreContract, describeTransactionContract } from '../store-contract.js';
import { reserveFromProcesses } from './multi-process.js';
import { demoContract, demoRequest, jsonResponse } from '../fixtures.js';

let dir: string;
let n = 0;
function openDb(): { db: SqliteDatabase; file: string } {
  n += 1;
  const file = join(dir, `store-${n}.db`);
  return { db: new Database(file), file };
}

function dumpTable(db: SqliteDatabase, table = 'idempotency_records'): string {
  const rows = db.prepare(`SELECT * FROM ${table}`).all();
  return JSON.stringify(rows, (_, v) => (v instanceof Uint8Array ? Buffer.from(v).toString('latin1') : v));
}

describe('SqliteStore', () => {
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'idemkit-sqlite-'));
  });
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  describeStoreContract('sqlite (temp file, WAL)', async (clock) => {
    const { db } = openDb();
    const store = new SqliteStore(db, { clock });
    await store.migrate();
    return { store, dump: async () => dumpTable(db), dispose: async () => { db.close(); } };
  });

  describeTransactionContract<SqliteDatabase>('sqlite', async () => {
    const { db } = openDb();
    const store = new SqliteStore(db);
    await store.migrate();
    db.exec('CREATE TABLE demo_requests (value TEXT NOT NULL)');
    return {
      store,
      writeBusiness: async (tx, value) => { tx.prepare('INSERT INTO demo_requests (value) VALUES (?)').run(value); },
      businessRows: async () => (db.prepare('SELECT value FROM demo_requests ORDER BY value').all() as { value: string }[]).map((r) => r.value),
      dispose: async () => { db.close(); },
    };
  });

  it('limits the WAL kept after a checkpoint to 64 MiB (journal_size_limit), and keeps a limit set on the connection', async () => {
    const { db } = openDb();
    assert.equal(db.pragma('journal_size_limit', { simple: true }), -1);
    await new SqliteStore(db).migrate();
    assert.equal(db.pragma('journal_size_limit', { simple: true }), 64 * 1024 * 1024);
    const own = openDb().db;
    own.pragma('journal_size_limit = 1048576');
    await new SqliteStore(own).migrate();
    assert.equal(own.pragma('journal_size_limit', { simple: true }), 1048576);
    db.close();
    own.close();
  });

  it('a purge loop lets the process serve between its batches: timers and I/O run while it deletes', async () => {
    // A scale review's: `while (await store.purgeExpired() === 500) {}` over 500,000 expired records froze the process
    // for 31 s — each call settled in a microtask, so no timer, socket or request ran until the loop ended.
    const { db } = openDb();
    const now = 1_000_000;
    const store = new SqliteStore(db, { clock: () => now });
    await store.migrate();
    const insert = db.prepare(
      `INSERT INTO idempotency_records (id, operation, fingerprint, state, lease_token, lease_until, expires_at, created_at, status, headers, body)
       VALUES (?, 'op', 'v1:f', ?, 't', ?, ?, 0, ?, ?, ?)`,
    );
    db.transaction(() => {
      for (let i = 0; i < 3000; i++) insert.run(`c${i}`, 'completed', 10, 100 + i, 201, '{}', Buffer.from('{}'));
      for (let i = 0; i < 3000; i++) insert.run(`p${i}`, 'in_progress', 10, 100 + i, null, null, null);
      // Past their lease, within their TTL: kept by purgeAbandoned.
      for (let i = 0; i < 3000; i++) insert.run(`k${i}`, 'in_progress', 10, 10_000_000 + i, null, null, null);
    })();
    for (const purge of [() => store.purgeExpired({ limit: 100 }), () => store.purgeAbandoned({ limit: 100 })]) {
      let ticks = 0;
      const ticking = setInterval(() => (ticks += 1), 0);
      let batches = 0;
      try {
        while ((await purge()) === 100) batches += 1;
      } finally {
        clearInterval(ticking);
      }
      assert.equal(batches, 30);
      assert.ok(ticks >= 10, `timers ran ${ticks} times during ${batches} batches`);
    }
    assert.deepEqual(db.prepare(`SELECT state, count(*) AS n FROM idempotency_records GROUP BY state`).all(), [{ state: 'in_progress', n: 3000 }]);
    // purgeAbandoned reads by TTL: the records it keeps are not read on every call.
    const plan = db.prepare(`EXPLAIN QUERY PLAN SELECT id FROM idempotency_records WHERE state = 'in_progress' AND expires_at <= ? AND lease_until <= ? ORDER BY expires_at LIMIT ?`).all(now, now, 100) as { detail: string }[];
    assert.match(plan.map((row) => row.detail).join('\n'), /USING INDEX idempotency_records_in_progress_expiry \(expires_at<\?\)/);
    db.close();
  });

  it('migrates idempotently, in WAL mode, with a short busy_timeout slice set', async () => {
    const { db } = openDb();
    const store = new SqliteStore(db, { table: 'idem_custom', busyTimeoutMs: 1234 });
    await store.migrate();
    await store.migrate();
    assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
    assert.equal(db.pragma('busy_timeout', { simple: true }), 5);
    const indexes = (db.prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'idem_custom' ORDER BY name`).all() as { name: string }[]).map((r) => r.name);
    assert.deepEqual(indexes, ['idem_custom_expiry', 'idem_custom_in_progress_expiry', 'idem_custom_lease', 'sqlite_autoindex_idem_custom_1']);
    db.close();
  });

  it('syncs every commit (synchronous = FULL), also on a WAL database opened again, unless told to keep the level', async () => {
    const { db, file } = openDb();
    await new SqliteStore(db).migrate();
    // A new file reads FULL before migrate(); switching it to WAL must not bring better-sqlite3's NORMAL in.
    assert.equal(db.pragma('synchronous', { simple: true }), 2);
    db.close();
    const level = (connection: SqliteDatabase) => connection.pragma('synchronous', { simple: true });
    // better-sqlite3 builds SQLite with SQLITE_DEFAULT_WAL_SYNCHRONOUS=1: a reopened WAL database starts at NORMAL.
    const reopened = new Database(file);
    const before = level(reopened);
    new SqliteStore(reopened);
    assert.equal(level(reopened), 2, `FULL after the store was created (the connection opened at ${before})`);
    reopened.close();
    const kept = new Database(file);
    kept.pragma('synchronous = NORMAL');
    new SqliteStore(kept, { synchronous: 'keep' });
    assert.equal(level(kept), 1);
    kept.close();
    const extra = new Database(file);
    extra.pragma('synchronous = EXTRA');
    new SqliteStore(extra);
    assert.equal(level(extra), 3);
    extra.close();
    // Inside a transaction: fine on a connection already at FULL; refused, saying why, below it.
    const inTx = new Database(file);
    inTx.pragma('synchronous = FULL');
    inTx.exec('BEGIN');
    new SqliteStore(inTx);
    inTx.exec('ROLLBACK');
    inTx.pragma('synchronous = NORMAL');
    inTx.exec('BEGIN');
    assert.throws(() => new SqliteStore(inTx), /refuses inside a transaction: create the store outside it/);
    inTx.exec('ROLLBACK');
    inTx.close();
  });

  it('refuses a table name that could inject SQL', () => {
    const { db } = openDb();
    assert.throws(() => new SqliteStore(db, { table: 'x; DROP TABLE y' }), StoreError);
    db.close();
  });

  it('shares records between two connections (processes) on one file', async () => {
    const { db, file } = openDb();
    const other = new Database(file);
    const a = new SqliteStore(db);
    await a.migrate();
    const b = new SqliteStore(other);
    const input = { id: 'shared', operation: 'op', fingerprint: 'v1:x', token: 't-a', leaseMs: 1000, ttlMs: 10_000 };
    assert.equal((await a.reserve(input)).outcome, 'reserved');
    assert.equal((await b.reserve({ ...input, token: 't-b' })).outcome, 'existing');
    db.close();
    other.close();
  });

  it('gives exactly one of 4 OS processes × 25 concurrent reservations the record (one file)', async function () {
    this.timeout(120_000);
    const { db, file } = openDb();
    await new SqliteStore(db).migrate();
    db.close();
    const { won, seen } = await reserveFromProcesses('sqlite', file, 'idempotency_records', 'multi');
    assert.equal(won.length, 1);
    assert.deepEqual(seen, won);
  });

  it('throws a typed error when the connection is closed, and the guard answers 503', async () => {
    const { db } = openDb();
    const store = new SqliteStore(db);
    await store.migrate();
    db.close();
    await assert.rejects(store.reserve({ id: 'x', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 1, ttlMs: 1 }), (e: unknown) => e instanceof StoreError && e.kind === 'unavailable');
    const guard = createGuard(demoContract(), { store, storeTimeoutMs: 500 });
    let runs = 0;
    const response = await guard.handle(demoRequest('k'), async () => { runs += 1; return jsonResponse(201, {}); });
    assert.equal(response.status, 503);
    assert.equal(runs, 0);
  });

  describe('another connection holding the write lock (another process)', () => {
    const input = (id: string, token = 't') => ({ id, operation: 'op', fingerprint: 'v1:x', token, leaseMs: 1000, ttlMs: 10_000 });

    // Counts timer ticks while `promise` is pending: a blocked event loop gets none.
    async function ticksWhile<T>(promise: Promise<T>): Promise<{ ticks: number; elapsed: number; result: PromiseSettledResult<T> }> {
      let ticks = 0;
      const timer = setInterval(() => { ticks += 1; }, 10);
      const started = Date.now();
      const [result] = await Promise.allSettled([promise]);
      clearInterval(timer);
      return { ticks, elapsed: Date.now() - started, result: result! };
    }

    it('waits without blocking the event loop, then fails unavailable (not lock-timeout) after busyTimeoutMs', async () => {
      const { db, file } = openDb();
      const store = new SqliteStore(db, { busyTimeoutMs: 400 });
      await store.migrate();
      const holder = new Database(file);
      holder.exec('BEGIN IMMEDIATE');
      try {
        const { ticks, elapsed, result } = await ticksWhile(store.reserve(input('busy')));
        assert.equal(result.status, 'rejected');
        const error = (result as PromiseRejectedResult).reason as StoreError;
        assert.ok(error instanceof StoreError);
        assert.equal(error.kind, 'unavailable');
        assert.match(error.message, /SQLITE_BUSY.*locked by another connection/);
        assert.ok(elapsed >= 350 && elapsed < 2000, `gave up after ${elapsed} ms`);
        assert.ok(ticks >= 10, `the event loop ran ${ticks} ticks of 10 ms in ${elapsed} ms`);
      } finally {
        holder.exec('ROLLBACK');
        holder.close();
        db.close();
      }
    });

    it('gets the record once the other connection lets go within busyTimeoutMs', async () => {
      const { db, file } = openDb();
      const store = new SqliteStore(db, { busyTimeoutMs: 3000 });
      await store.migrate();
      const holder = new Database(file);
      holder.exec('BEGIN IMMEDIATE');
      setTimeout(() => holder.exec('COMMIT'), 200);
      const { ticks, result } = await ticksWhile(store.reserve(input('later')));
      holder.close();
      assert.equal(result.status, 'fulfilled');
      assert.equal((result as PromiseFulfilledResult<Awaited<ReturnType<SqliteStore['reserve']>>>).value.outcome, 'reserved');
      assert.ok(ticks >= 5, `the event loop ran ${ticks} ticks`);
      db.close();
    });

    it('answers 503 + Retry-After (not 409 in progress) in one-transaction mode while another process holds the file for another key', async () => {
      const { db, file } = openDb();
      const other = new Database(file);
      const otherStore = new SqliteStore(other);
      const store = new SqliteStore(db, { busyTimeoutMs: 300 });
      await store.migrate();
      // The other process's transactional handler is running (for its own key) and holds the write lock.
      let open!: () => void;
      const gate = new Promise<void>((resolve) => { open = resolve; });
      const holding = otherStore.withReservation(input('other-key', 'o'), async () => { await gate; return { commit: false, value: undefined }; });
      await new Promise((resolve) => setTimeout(resolve, 50));
      const guard = createGuard<SqliteDatabase>(demoContract(), { store, storeTimeoutMs: 2000, transactionWaitMs: 2000 });
      let runs = 0;
      const started = Date.now();
      const response = await guard.handle(demoRequest('nobody-holds-this'), async () => { runs += 1; return jsonResponse(201, {}); }, { transaction: true });
      const elapsed = Date.now() - started;
      open();
      await holding;
      assert.equal(response.status, 503, `got ${response.status}`);
      assert.match(response.headers['retry-after'] ?? '', /^[1-9][0-9]*$/);
      assert.equal(runs, 0);
      assert.ok(elapsed < 1500, `answered after ${elapsed} ms`);
      // Once the other transaction ended, the same request runs.
      const retry = await guard.handle(demoRequest('nobody-holds-this'), async () => { runs += 1; return jsonResponse(201, {}); }, { transaction: true });
      assert.equal(retry.status, 201);
      assert.equal(runs, 1);
      other.close();
      db.close();
    });
  });

  describe('group commit', () => {
    const input = (id: string, token = `t-${id}`) => ({ id, operation: 'op', fingerprint: 'v1:x', token, leaseMs: 1000, ttlMs: 10_000 });

    // WAL frames appended: every commit writes its changed pages as new frames, so separate commits of 30
    // small inserts append far more of them than one commit of all 30.
    function walPages(file: string): number {
      return Math.floor(statSync(`${file}-wal`).size / 4096);
    }

    it('stores the response as it was when complete() was called, though the statement runs later in the turn', async () => {
      const { db } = openDb();
      const store = new SqliteStore(db);
      await store.migrate();
      const guard = createGuard(demoContract(), { store });
      const decision = await guard.begin(demoRequest('key-reused-scratch-buffer-0001'));
      assert.equal(decision.kind, 'proceed');
      if (decision.kind !== 'proceed') return;
      // A handler that encodes into a scratch buffer it reuses for the next request.
      const scratch = new Uint8Array(16);
      scratch.set(new TextEncoder().encode('{"id":"A"}'));
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      const completing = guard.complete(decision.reservation, { status: 201, headers, body: scratch.subarray(0, 10) });
      scratch.set(new TextEncoder().encode('{"id":"B"}'));
      headers['content-type'] = 'text/plain';
      await completing;
      const replay = await guard.begin(demoRequest('key-reused-scratch-buffer-0001'));
      assert.equal(replay.kind, 'respond');
      if (replay.kind !== 'respond') return;
      assert.equal(new TextDecoder().decode(replay.response.body), '{"id":"A"}');
      assert.equal(replay.response.headers['content-type'], 'application/json');
    });

    it('settles concurrent writes of one event-loop turn after one shared COMMIT, each visible to other connections once settled', async () => {
      const { db, file } = openDb();
      const store = new SqliteStore(db);
      await store.migrate();
      const other = new Database(file);
      const visible = other.prepare('SELECT count(*) FROM idempotency_records WHERE id = ?').pluck();
      const changesBefore = (db.prepare('SELECT total_changes()').pluck().get() as number);
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          store.reserve(input(`g-${i}`)).then((result) => {
            // Settled only after COMMIT: another connection already sees the row.
            assert.equal(visible.get(`g-${i}`), 1);
            return result;
          }),
        ),
      );
      assert.deepEqual(results.map((r) => r.outcome), Array.from({ length: 20 }, () => 'reserved'));
      assert.equal((db.prepare('SELECT total_changes()').pluck().get() as number) - changesBefore, 20);
      // Completions, releases and renewals of one turn share a commit too, each still fenced by its token.
      const outcomes = await Promise.all([
        store.complete('g-0', 't-g-0', { response: { status: 201, headers: {}, body: new Uint8Array([1]) }, ttlMs: 10_000 }),
        store.complete('g-1', 'stale', { response: { status: 201, headers: {}, body: new Uint8Array([1]) }, ttlMs: 10_000 }),
        store.release('g-2', 't-g-2'),
        store.release('g-3', 'stale'),
        store.extend('g-4', 't-g-4', 60_000),
        store.extend('g-5', 'stale', 60_000),
        store.reserve(input('g-6', 'another')),
      ]);
      assert.deepEqual(outcomes.slice(0, 6), [true, false, true, false, true, false]);
      assert.equal((outcomes[6] as Awaited<ReturnType<SqliteStore['reserve']>>).outcome, 'existing');
      assert.equal((await store.get('g-0'))?.state, 'completed');
      assert.equal(await store.get('g-2'), undefined);
      other.close();
      db.close();
    });

    it('uses one transaction for the writes of one turn (WAL frames, against groupCommit: false)', async () => {
      const grouped = openDb();
      const store = new SqliteStore(grouped.db);
      await store.migrate();
      const before = walPages(grouped.file);
      await Promise.all(Array.from({ length: 30 }, (_, i) => store.reserve(input(`one-${i}`))));
      const groupedPages = walPages(grouped.file) - before;
      const separate = openDb();
      const ungrouped = new SqliteStore(separate.db, { groupCommit: false });
      await ungrouped.migrate();
      const start = walPages(separate.file);
      await Promise.all(Array.from({ length: 30 }, (_, i) => ungrouped.reserve(input(`sep-${i}`))));
      const separatePages = walPages(separate.file) - start;
      assert.ok(separatePages >= 30, `30 separate commits appended ${separatePages} pages`);
      assert.ok(groupedPages < 10, `one group commit appended ${groupedPages} pages`);
      grouped.db.close();
      separate.db.close();
    });

    it('gives exactly one of 50 concurrent reservations of one id the record inside a group', async () => {
      const { db } = openDb();
      const store = new SqliteStore(db);
      await store.migrate();
      const results = await Promise.all(Array.from({ length: 50 }, (_, i) => store.reserve(input('same', `tok-${i}`))));
      const won = results.filter((r) => r.outcome === 'reserved');
      assert.equal(won.length, 1);
      assert.ok(results.every((r) => r.record.leaseToken === won[0]!.record.leaseToken));
      db.close();
    });

    it('runs each call on its own when a statement ends the group transaction, and fails only that call', async () => {
      const { db } = openDb();
      const store = new SqliteStore(db);
      await store.migrate();
      // A real SQLite failure inside the group: RAISE(ROLLBACK) undoes the whole transaction.
      db.exec(`CREATE TRIGGER refuse_poison BEFORE INSERT ON idempotency_records WHEN NEW.id = 'poison' BEGIN SELECT RAISE(ROLLBACK, 'poisoned'); END`);
      const results = await Promise.allSettled([store.reserve(input('a')), store.reserve(input('poison')), store.reserve(input('b'))]);
      assert.equal(results[0]!.status, 'fulfilled');
      assert.equal(results[2]!.status, 'fulfilled');
      assert.equal(results[1]!.status, 'rejected');
      const error = (results[1] as PromiseRejectedResult).reason as StoreError;
      assert.ok(error instanceof StoreError && error.kind === 'unavailable', String(error));
      assert.equal((await store.get('a'))?.state, 'in_progress');
      assert.equal((await store.get('b'))?.state, 'in_progress');
      assert.equal(await store.get('poison'), undefined);
      assert.equal(db.inTransaction, false);
      db.close();
    });

    it('keeps the rest of the group when one statement fails without ending the transaction', async () => {
      const { db } = openDb();
      const store = new SqliteStore(db);
      await store.migrate();
      db.exec(`CREATE TRIGGER abort_poison BEFORE INSERT ON idempotency_records WHEN NEW.id = 'poison' BEGIN SELECT RAISE(ABORT, 'poisoned'); END`);
      const results = await Promise.allSettled([store.reserve(input('a')), store.reserve(input('poison')), store.reserve(input('b'))]);
      assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
      assert.ok((results[1] as PromiseRejectedResult).reason instanceof StoreError);
      assert.equal((await store.get('a'))?.state, 'in_progress');
      assert.equal((await store.get('b'))?.state, 'in_progress');
      db.close();
    });

    it('waits behind a transactional request on the connection instead of joining its transaction', async () => {
      const { db } = openDb();
      const store = new SqliteStore(db);
      await store.migrate();
      let open!: () => void;
      const gate = new Promise<void>((resolve) => { open = resolve; });
      // A one-transaction request that will roll back: nothing written inside it may survive, and nothing
      // written outside it may be rolled back with it.
      const tx = store.withReservation(input('tx-key'), async () => { await gate; return { commit: false, value: 'rolled back' }; });
      await new Promise((resolve) => setTimeout(resolve, 10));
      const pending = Promise.all([store.reserve(input('outside-1')), store.reserve(input('outside-2'))]);
      await new Promise((resolve) => setTimeout(resolve, 20));
      open();
      assert.equal(await tx, 'rolled back');
      assert.deepEqual((await pending).map((r) => r.outcome), ['reserved', 'reserved']);
      assert.equal((await store.get('outside-1'))?.state, 'in_progress');
      assert.equal(await store.get('tx-key'), undefined);
      db.close();
    });

    it("a one-transaction handler given up at its bound cannot write into, or end, the next request's transaction", async () => {
      // A review's: `tx` is the store's own connection, so a given-up handler running on wrote into the next transaction
      // on it — another key's, committed with that key's record — and its ROLLBACK ended that one.
      const { db } = openDb();
      const store = new SqliteStore(db);
      await store.migrate();
      db.exec('CREATE TABLE effects (id TEXT)');
      const late: string[] = [];
      let next!: () => void;
      const nextStarted = new Promise<void>((resolve) => { next = resolve; });
      await assert.rejects(
        store.withReservation(input('given-up'), async (_reserved, tx) => {
          const early = tx.prepare('INSERT INTO effects VALUES (?)');
          early.run('given-up, in time');
          const connection = tx.prepare('SELECT 1').database;
          const immediate = tx.transaction(() => early.run('late, through immediate')).immediate;
          void (async () => {
            await nextStarted;
            for (const write of [
              () => tx.prepare('INSERT INTO effects VALUES (?)').run('late, prepared late'),
              () => early.run('late, prepared early'),
              () => tx.exec('ROLLBACK'),
              () => tx.transaction(() => early.run('late, in a function'))(),
              () => connection.prepare('INSERT INTO effects VALUES (?)').run('late, through statement.database'),
              () => immediate(),
            ]) {
              try {
                write();
                late.push('written');
              } catch (error) {
                late.push((error as Error).message);
              }
            }
          })();
          throw handlerGivenUp('given up at the bound');
        }),
        (error: unknown) => isHandlerGivenUp(error),
      );
      const value = await store.withReservation(input('next'), async (_reserved, tx) => {
        tx.prepare('INSERT INTO effects VALUES (?)').run('next');
        next();
        await new Promise((resolve) => setTimeout(resolve, 20));
        return { commit: true, value: 'committed', complete: { response: jsonResponse(201, {}), ttlMs: 60_000 } };
      });
      assert.equal(value, 'committed');
      assert.equal(late.length, 6);
      for (const outcome of late) assert.match(outcome, /transaction has ended/);
      assert.deepEqual(db.prepare('SELECT id FROM effects').pluck().all(), ['next']);
      assert.equal((await store.get('next'))?.state, 'completed');
      assert.equal(await store.get('given-up'), undefined);
      db.close();
    });

    it('a one-transaction handler given up in the middle of iterate() leaves the connection free for the next request', async () => {
      // A review's: the open iterator kept the connection busy, its ROLLBACK failed, and every later transaction with it.
      const { db } = openDb();
      const store = new SqliteStore(db);
      await store.migrate();
      db.exec("CREATE TABLE effects (id TEXT); INSERT INTO effects VALUES ('a'), ('b'), ('c')");
      const seen: string[] = [];
      let go!: () => void;
      const gate = new Promise<void>((resolve) => { go = resolve; });
      let loop: Promise<void> | undefined;
      await assert.rejects(
        store.withReservation(input('iterating'), async (_reserved, tx) => {
          loop = (async () => {
            try {
              for (const id of tx.prepare('SELECT id FROM effects').pluck().iterate() as Iterable<string>) {
                seen.push(id);
                await gate;
              }
              seen.push('loop ended');
            } catch (error) {
              seen.push((error as Error).message);
            }
          })();
          await new Promise((resolve) => setTimeout(resolve, 5));
          throw handlerGivenUp('given up at the bound');
        }),
        (error: unknown) => isHandlerGivenUp(error),
      );
      assert.equal(db.inTransaction, false, 'the given-up transaction is rolled back');
      const done = { response: jsonResponse(201, {}), ttlMs: 60_000 };
      assert.equal(await store.withReservation(input('after'), async () => ({ commit: true, value: 'next', complete: done })), 'next');
      go();
      await loop;
      assert.equal(seen.length, 2);
      assert.equal(seen[0], 'a');
      assert.match(seen[1]!, /transaction has ended/, 'the late loop is refused, not read on');
      assert.equal(await store.get('iterating'), undefined);
      assert.equal((await store.get('after'))?.state, 'completed');
      db.close();
    });

    it("hands the handler a `tx` that works as the connection while its transaction is open, and says why once it is over", async () => {
      const { db } = openDb();
      const store = new SqliteStore(db);
      await store.migrate();
      db.exec('CREATE TABLE effects (id TEXT, n INTEGER)');
      let kept: SqliteDatabase | undefined;
      const value = await store.withReservation(input('in-use'), async (_reserved, tx) => {
        kept = tx;
        const insert = tx.prepare('INSERT INTO effects VALUES (?, ?)');
        assert.equal(tx.inTransaction, true);
        // better-sqlite3's transaction(): nested in the store's transaction as a savepoint, rolled back alone on a throw.
        const many = tx.transaction((rows: Array<[string, number]>) => { for (const row of rows) insert.run(...row); });
        many([['a', 1], ['b', 2]]);
        assert.throws(() => tx.transaction(() => { insert.run('c', 3); throw new Error('undone'); })(), /undone/);
        many.immediate([['b', 2]]);
        tx.prepare('DELETE FROM effects WHERE rowid = (SELECT max(rowid) FROM effects)').run();
        await new Promise((resolve) => setTimeout(resolve, 5));
        // The store's transaction and connection are not the handler's to end (a review's: a COMMIT through tx
        // committed the reservation half-way; tx.close() closed the store for every later request).
        for (const end of [() => tx.exec('COMMIT'), () => tx.prepare(' -- done\nROLLBACK'), () => tx.exec('BEGIN'), () => tx.exec('end transaction'), () => tx.exec('/* x */ ;COMMIT'), () => tx.exec('ROLLBACK; TO part'), () => tx.close()]) {
          assert.throws(end, /store owns this request's transaction|must not close it/);
        }
        tx.exec('SAVEPOINT part');
        insert.run('undone', 100);
        tx.exec('ROLLBACK /* the part */ TO part');
        tx.exec('RELEASE part');
        // SQLite's line comment runs to a line feed: a carriage return inside it is still comment (PostgreSQL ends it there).
        tx.exec('-- no COMMIT here\r COMMIT\nSELECT 1');
        const total = tx.prepare('SELECT sum(n) FROM effects').pluck().get();
        // What a library or a logger reads off a connection: its fields, its methods as the same functions, and no way
        // to the raw connection (a review's: the stand-in's inspector handed it to a caller's function).
        assert.equal(tx.prepare, tx.prepare);
        assert.equal(insert.database, tx);
        assert.deepEqual(JSON.parse(JSON.stringify(tx)), JSON.parse(JSON.stringify(db)));
        assert.deepEqual(Reflect.ownKeys(insert), Reflect.ownKeys(db.prepare('SELECT 1')).filter((key) => typeof key === 'string'));
        assert.match(inspect(tx, { breakLength: Infinity }), /Database \{ name: '[^']*store-\d+\.db', open: true, inTransaction: true/);
        for (const handle of [tx, insert, many] as object[]) {
          assert.ok(Reflect.ownKeys(handle).every((key) => typeof key === 'string'), "no symbol-keyed property (the library's own native handle)");
          const inspector = (handle as Record<symbol, unknown>)[Symbol.for('nodejs.util.inspect.custom')];
          if (typeof inspector === 'function') inspector.call(handle, 0, {}, (value: unknown) => assert.notEqual(value, db, 'the raw connection reached an inspector'));
        }
        return { commit: true, value: total, complete: { response: jsonResponse(201, {}), ttlMs: 60_000 } };
      });
      assert.equal(value, 3);
      assert.deepEqual(db.prepare('SELECT id FROM effects ORDER BY id').pluck().all(), ['a', 'b']);
      assert.throws(() => kept!.prepare('SELECT 1'), /transaction has ended.*prepared on your own Database/);
      // Logged late (a context kept in `res.locals`), it says so rather than throwing.
      assert.match(inspect({ tx: kept }), /its transaction has ended/);
      assert.equal(String(kept), '[object Object]');
      assert.ok(kept instanceof Database);
      assert.equal(db.prepare('SELECT 1').pluck().get(), 1, 'the connection itself serves on');
      db.close();
    });

    it("a handler that ends the store's transaction in a way tx cannot see (several statements in one exec, INSERT OR ROLLBACK) has its committed reservation completed, and writes nothing after", async () => {
      const { db } = openDb();
      const store = new SqliteStore(db);
      await store.migrate();
      db.exec('CREATE TABLE effects (id TEXT)');
      const complete = { response: jsonResponse(201, {}), ttlMs: 60_000 };
      const value = await store.withReservation(input('hidden-commit'), async (_reserved, tx) => {
        tx.exec("INSERT INTO effects VALUES ('effect'); COMMIT");
        // Past that COMMIT a write would commit on its own: refused, with why.
        assert.throws(() => tx.prepare("INSERT INTO effects VALUES ('after')").run(), /store's transaction was ended from inside the handler/);
        assert.throws(() => tx.exec("INSERT INTO effects VALUES ('after')"), /store's transaction was ended from inside the handler/);
        return { commit: true, value: 'done', complete };
      });
      assert.equal(value, 'done');
      assert.equal((await store.get('hidden-commit'))?.state, 'completed', 'the retry replays');
      assert.deepEqual(db.prepare('SELECT id FROM effects').pluck().all(), ['effect']);
      // A ROLLBACK so hidden undid the reservation: nothing to complete, said so, and nothing written after it.
      await assert.rejects(
        store.withReservation(input('hidden-rollback'), async (_reserved, tx) => {
          // The exec fails after its ROLLBACK: the transaction is over all the same.
          assert.throws(() => tx.exec("INSERT INTO effects VALUES ('undone'); ROLLBACK; INSERT INTO nowhere VALUES (1)"), /no such table/);
          assert.throws(() => tx.exec("INSERT INTO effects VALUES ('after')"), /store's transaction was ended from inside the handler/);
          return { commit: true, value: 'done', complete };
        }),
        (error: unknown) => error instanceof StoreError && /ended the store's transaction itself \(a ROLLBACK through tx\)/.test(error.message),
      );
      await assert.rejects(
        store.withReservation(input('hidden-commit-undo'), async (_reserved, tx) => {
          tx.exec('SELECT 1; COMMIT');
          return { commit: false, value: 'undo', complete };
        }),
        (error: unknown) => error instanceof StoreError && /committed the store's transaction itself/.test(error.message),
      );
      assert.equal(await store.get('hidden-rollback'), undefined);
      assert.deepEqual(db.prepare('SELECT id FROM effects').pluck().all(), ['effect']);
      // One statement that rolls the transaction back without saying ROLLBACK: an INSERT OR ROLLBACK meeting a
      // conflict. A handler that catches its error and writes on is refused, instead of committing on its own.
      db.exec('CREATE TABLE uniques (id TEXT PRIMARY KEY)');
      db.prepare("INSERT INTO uniques VALUES ('taken')").run();
      await assert.rejects(
        store.withReservation(input('or-rollback'), async (_reserved, tx) => {
          assert.throws(() => tx.prepare("INSERT OR ROLLBACK INTO uniques VALUES ('taken')").run(), /UNIQUE constraint failed/);
          assert.throws(() => tx.prepare("INSERT INTO effects VALUES ('after-or-rollback')").run(), /store's transaction was ended from inside the handler/);
          return { commit: true, value: 'done', complete };
        }),
        (error: unknown) => error instanceof StoreError && /ended the store's transaction itself/.test(error.message),
      );
      assert.equal(await store.get('or-rollback'), undefined);
      assert.deepEqual(db.prepare('SELECT id FROM effects').pluck().all(), ['effect']);
      // The store's next transaction on the connection is its own again.
      assert.equal(await store.withReservation(input('next'), async (_reserved, tx) => {
        tx.prepare("INSERT INTO effects VALUES ('next')").run();
        return { commit: true, value: 'ok', complete };
      }), 'ok');
      assert.equal(db.inTransaction, false);
      assert.deepEqual(db.prepare('SELECT id FROM effects ORDER BY id').pluck().all(), ['effect', 'next']);
      db.close();
    });

    it('a handler that committed through tx and then failed or answered 5xx has its record kept, abandoned at once: the guard answers outcome-unknown and the retry never runs it again', async () => {
      const { db } = openDb();
      const store = new SqliteStore(db);
      await store.migrate();
      db.exec('CREATE TABLE effects (id TEXT)');
      const effects = (): unknown[] => db.prepare('SELECT id FROM effects ORDER BY id').pluck().all();
      // Store level: `COMMIT; BEGIN` in one exec leaves a transaction open, so nothing looks ended — but the store's
      // rollback undoes only what came after, and the reservation outlives it.
      await assert.rejects(
        store.withReservation(input('commit-begin'), async (_reserved, tx) => {
          tx.exec("INSERT INTO effects VALUES ('before'); COMMIT; BEGIN");
          tx.exec("INSERT INTO effects VALUES ('after')");
          throw new Error('handler failed');
        }),
        (error: unknown) => error instanceof StoreError && /committed the store's transaction itself/.test(error.message) && (error.cause as Error).message === 'handler failed',
      );
      const kept = await store.get('commit-begin');
      assert.equal(kept?.state, 'in_progress');
      assert.ok(kept.leaseUntil <= Date.now(), 'its lease ended at once');
      assert.deepEqual((await store.listAbandoned()).map((record) => record.id), ['commit-begin']);
      assert.deepEqual(effects(), ['before']);
      // A ROLLBACK hidden so, and a write after it in the same exec: committed on its own — the outcome is unknown too.
      await assert.rejects(
        store.withReservation(input('rollback-write'), async (_reserved, tx) => {
          tx.exec("SELECT 1; ROLLBACK; INSERT INTO effects VALUES ('alone')");
          throw new Error('handler failed');
        }),
        (error: unknown) => error instanceof StoreError && /ended the store's transaction itself/.test(error.message),
      );
      assert.equal(await store.get('rollback-write'), undefined);
      // A handler that failed without that: its own error, everything undone.
      await assert.rejects(
        store.withReservation(input('plain'), async (_reserved, tx) => {
          tx.exec("INSERT INTO effects VALUES ('undone')");
          throw new Error('plain failure');
        }),
        (error: unknown) => !(error instanceof StoreError) && (error as Error).message === 'plain failure',
      );
      assert.equal(await store.get('plain'), undefined);
      assert.deepEqual(effects(), ['alone', 'before']);

      // Through the guard: 503 outcome-unknown (not the app's 500, not "rolled back"), and a retry past the lease finds
      // the record abandoned instead of running the handler again.
      const events: GuardLogEvent[] = [];
      const guard = createGuard<SqliteDatabase>(demoContract(), { store, log: (event) => events.push(event) });
      let runs = 0;
      const failing = async (ctx: { tx: SqliteDatabase | undefined }) => {
        runs += 1;
        ctx.tx!.exec("INSERT INTO effects VALUES ('charged'); COMMIT; BEGIN");
        throw new Error('handler failed after charging');
      };
      const first = await guard.handle(demoRequest('charge'), failing, { transaction: true });
      assert.equal(first.status, 503, `got ${first.status}`);
      assert.match(new TextDecoder().decode(first.body), /idempotency-outcome-unknown/);
      assert.ok(events.some((event) => event.decision === 'outcome-unknown'));
      assert.ok(!events.some((event) => event.decision === 'rolled-back'), 'logged as rolled back');
      const answering = async (ctx: { tx: SqliteDatabase | undefined }) => {
        runs += 1;
        ctx.tx!.exec("INSERT INTO effects VALUES ('charged'); COMMIT; BEGIN");
        return jsonResponse(500, {});
      };
      assert.equal((await guard.handle(demoRequest('charge-500'), answering, { transaction: true })).status, 503);
      const retry = await guard.handle(demoRequest('charge'), failing, { transaction: true });
      assert.equal(retry.status, 409, `got ${retry.status}`);
      assert.match(new TextDecoder().decode(retry.body), /idempotency-request-abandoned/);
      assert.equal((await guard.handle(demoRequest('charge-500'), answering, { transaction: true })).status, 409);
      assert.equal(runs, 2, 'a retry ran the handler again');
      assert.deepEqual(effects().filter((id) => id === 'charged'), ['charged', 'charged']);
      db.close();
    });

    it('falls back to waiting per call while another connection holds the write lock', async () => {
      const { db, file } = openDb();
      const store = new SqliteStore(db, { busyTimeoutMs: 3000 });
      await store.migrate();
      const holder = new Database(file);
      holder.exec('BEGIN IMMEDIATE');
      setTimeout(() => holder.exec('COMMIT'), 150);
      const results = await Promise.all([store.reserve(input('w-1')), store.reserve(input('w-2'))]);
      holder.close();
      assert.deepEqual(results.map((r) => r.outcome), ['reserved', 'reserved']);
      db.close();
    });
  });

  it('failOpen never runs a duplicate transactional request while the first one still holds the key (in-process queue)', async () => {
    const { db } = openDb();
    const store = new SqliteStore(db);
    await store.migrate();
    // A short lease and store timeout: the duplicate gives up waiting for the connection long before the first ends.
    const guard = createGuard<SqliteDatabase>(demoContract({ leaseMs: 40 }), { store, storeTimeoutMs: 20, failOpen: true });
    let effects = 0;
    const slow = async () => {
      effects += 1;
      await new Promise((resolve) => setTimeout(resolve, 400));
      return jsonResponse(201, { id: 'order-1' });
    };
    const first = guard.handle(demoRequest('same-key'), slow, { transaction: true });
    await new Promise((resolve) => setTimeout(resolve, 10));
    // The client timed out and retried with the same key while the first request is still running.
    const duplicate = await guard.handle(demoRequest('same-key'), slow, { transaction: true });
    assert.equal(duplicate.status, 503, `got ${duplicate.status}`);
    assert.match(duplicate.headers['retry-after'] ?? '', /^[1-9][0-9]*$/);
    assert.equal((await first).status, 201);
    assert.equal(effects, 1, 'the effect ran twice');
    const retry = await guard.handle(demoRequest('same-key'), slow, { transaction: true });
    assert.equal(retry.status, 201);
    assert.equal(retry.headers['idempotent-replayed'], 'true');
    assert.equal(effects, 1);
    db.close();
  });

  it('prints reserve latency (figure, not an assertion)', async () => {
    const { db } = openDb();
    const store = new SqliteStore(db);
    await store.migrate();
    const count = 2000;
    const started = process.hrtime.bigint();
    for (let i = 0; i < count; i += 1) await store.reserve({ id: `lat-${i}`, operation: 'op', fingerprint: 'v1:x', token: `t${i}`, leaseMs: 1000, ttlMs: 10_000 });
    const micros = Number(process.hrtime.bigint() - started) / 1000 / count;
    process.stdout.write(`      sqlite reserve: ${micros.toFixed(1)} µs/op over ${count} sequential reservations\n`);
    assert.equal((await store.get('lat-0'))?.state, 'in_progress');
    db.close();
  });
});
