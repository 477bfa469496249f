import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { SqliteStore, type SqliteDatabase } from '../../../src/runtime/stores/sqlite.js';
import { StoreError } from '../../../src/runtime/store.js';

// Many requests waiting for a write lock held by another connection (another process, `sqlite3 .backup`, a
// VACUUM): the event loop must keep answering, and every call must end by its busyTimeoutMs.
describe('SqliteStore with many calls waiting for another connection’s write lock', () => {
  let dir: string;
  let n = 0;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'idemkit-sqlite-busy-'));
  });
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  async function open(options: ConstructorParameters<typeof SqliteStore>[1]): Promise<{ db: SqliteDatabase; holder: SqliteDatabase; store: SqliteStore }> {
    n += 1;
    const file = join(dir, `busy-${n}.db`);
    const db = new Database(file);
    const store = new SqliteStore(db, options);
    await store.migrate();
    return { db, holder: new Database(file), store };
  }

  const input = (id: string) => ({ id, operation: 'op', fingerprint: 'v1:x', token: `t-${id}`, leaseMs: 10_000, ttlMs: 60_000 });

  // Largest lateness of a 10 ms interval timer while `work` runs: how long the event loop was held at once.
  async function loopDelayWhile<T>(work: Promise<T>): Promise<{ maxDelayMs: number; value: T }> {
    let maxDelayMs = 0;
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      maxDelayMs = Math.max(maxDelayMs, now - last - 10);
      last = now;
    }, 10);
    try {
      const value = await work;
      return { maxDelayMs, value };
    } finally {
      clearInterval(timer);
    }
  }

  // Settles every call, recording when; a call still pending after `limitMs` counts as hanging.
  async function settleAll(calls: Promise<unknown>[], limitMs: number): Promise<{ outcomes: string[]; lastMs: number }> {
    const started = performance.now();
    let lastMs = 0;
    const outcomes = await Promise.all(
      calls.map((call) =>
        Promise.race([
          call.then(
            (value) => ((value as { outcome?: string }).outcome ?? 'ok'),
            (error: unknown) => (error instanceof StoreError ? `StoreError ${error.kind}` : `other: ${String(error)}`),
          ),
          new Promise<string>((resolve) => setTimeout(() => resolve('hanging'), limitMs).unref()),
        ]).then((outcome) => {
          lastMs = Math.max(lastMs, performance.now() - started);
          return outcome;
        }),
      ),
    );
    return { outcomes, lastMs };
  }

  for (const groupCommit of [true, false]) {
    it(`keeps the event loop responsive while 40 reservations wait 1.5 s for the lock, then reserves them all (groupCommit: ${groupCommit})`, async () => {
      const { db, holder, store } = await open({ busyTimeoutMs: 4000, groupCommit });
      holder.exec('BEGIN IMMEDIATE');
      setTimeout(() => holder.exec('COMMIT'), 1500);
      const ids = Array.from({ length: 40 }, (_, i) => `busy-${i}`);
      const result = await loopDelayWhile(settleAll(ids.map((id) => store.reserve(input(id))), 6000));
      const maxDelay = result.maxDelayMs;
      holder.close();
      assert.deepEqual(result.value.outcomes, ids.map(() => 'reserved'));
      assert.ok(result.value.lastMs >= 1400 && result.value.lastMs < 2500, `the last call settled after ${Math.round(result.value.lastMs)} ms`);
      assert.ok(maxDelay < 100, `the event loop was held for ${Math.round(maxDelay)} ms at once`);
      for (const id of ids) assert.equal((await store.get(id))?.state, 'in_progress');
      db.close();
    });

    it(`fails all 40 waiting calls unavailable by busyTimeoutMs while the lock stays held, without holding the event loop (groupCommit: ${groupCommit})`, async () => {
      const { db, holder, store } = await open({ busyTimeoutMs: 500, groupCommit });
      holder.exec('BEGIN IMMEDIATE');
      try {
        const calls = Array.from({ length: 40 }, (_, i) => store.reserve(input(`gone-${i}`)));
        const result = await loopDelayWhile(settleAll(calls, 5000));
        const maxDelay = result.maxDelayMs;
        assert.deepEqual(result.value.outcomes, calls.map(() => 'StoreError unavailable'));
        assert.ok(result.value.lastMs >= 450 && result.value.lastMs < 700, `the last call gave up after ${Math.round(result.value.lastMs)} ms`);
        assert.ok(maxDelay < 100, `the event loop was held for ${Math.round(maxDelay)} ms at once`);
      } finally {
        holder.exec('ROLLBACK');
        holder.close();
      }
      // The lock is gone: the next call goes in at once.
      assert.equal((await store.reserve(input('after'))).outcome, 'reserved');
      db.close();
    });
  }

  it('stops waiting by default within the guard’s default storeTimeoutMs (2000 ms)', async () => {
    const { db, holder, store } = await open({});
    holder.exec('BEGIN IMMEDIATE');
    try {
      const { outcomes, lastMs } = await settleAll([store.reserve(input('default')), store.complete('default', 't', { response: { status: 201, headers: {}, body: new Uint8Array() }, ttlMs: 1000 })], 6000);
      assert.deepEqual(outcomes, ['StoreError unavailable', 'StoreError unavailable']);
      assert.ok(lastMs >= 1900 && lastMs < 2300, `gave up after ${Math.round(lastMs)} ms`);
    } finally {
      holder.exec('ROLLBACK');
      holder.close();
    }
    db.close();
  });

  it('bounds the wait on a monotonic clock: a wall clock stepped back an hour meanwhile does not stretch it', async () => {
    const { db, holder, store } = await open({ busyTimeoutMs: 300, clock: () => 1_800_000_000_000 });
    holder.exec('BEGIN IMMEDIATE');
    const realNow = Date.now;
    const steppedAt = realNow();
    // As NTP stepping the clock back: every reading from 50 ms on is an hour earlier.
    Date.now = () => (realNow() - steppedAt > 50 ? realNow() - 3_600_000 : realNow());
    try {
      const { outcomes, lastMs } = await settleAll([store.reserve(input('stepped')), store.withReservation(input('stepped-tx'), async () => ({ commit: false, value: 0 }))], 3000);
      assert.deepEqual(outcomes, ['StoreError unavailable', 'StoreError unavailable']);
      assert.ok(lastMs < 1000, `gave up after ${Math.round(lastMs)} ms`);
    } finally {
      Date.now = realNow;
      holder.exec('ROLLBACK');
      holder.close();
    }
    db.close();
  });
});
