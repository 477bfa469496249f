import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, openSync, readSync, closeSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { SqliteStore, type SqliteDatabase } from '../../../src/runtime/stores/sqlite.js';
import { WRITES_PER_CHECKPOINT, backgroundCheckpointIdle } from '../../../src/runtime/stores/sqlite-checkpoint.js';

/** The WAL header's checkpoint sequence number: it grows each time a writer restarts a fully copied-back WAL. */
function checkpointSequence(file: string): number {
  const header = Buffer.alloc(16);
  const fd = openSync(`${file}-wal`, 'r');
  try {
    readSync(fd, header, 0, 16, 0);
  } finally {
    closeSync(fd);
  }
  return header.readUInt32BE(12);
}

const input = (id: string) => ({ id, operation: 'op', fingerprint: 'v1:x', token: `t-${id}`, leaseMs: 1000, ttlMs: 10_000 });
const response = { status: 201, headers: { 'content-type': 'application/json' }, body: Buffer.from('{"id":"x"}') };

/**
 * `rounds` rounds of WRITES_PER_CHECKPOINT writes — reservations and their completions, in two groups — each
 * round waiting for the checkpoint its last write asks for (when the store checkpoints in the background).
 */
async function writeRounds(store: SqliteStore, db: SqliteDatabase, rounds: number, prefix: string): Promise<void> {
  const perGroup = WRITES_PER_CHECKPOINT / 4;
  for (let round = 0; round < rounds; round += 1) {
    for (let group = 0; group < 2; group += 1) {
      const ids = Array.from({ length: perGroup }, (_, i) => `${prefix}-${round}-${group}-${i}`);
      await Promise.all(ids.map((id) => store.reserve(input(id))));
      await Promise.all(ids.map((id) => store.complete(id, `t-${id}`, { response, ttlMs: 10_000 })));
    }
    await backgroundCheckpointIdle(db);
  }
}

describe('SqliteStore background checkpoints', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'idemkit-sqlite-ckpt-'));
  });
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  async function open(name: string, options: { backgroundCheckpoint?: boolean } = {}) {
    const file = join(dir, `${name}.db`);
    const db = new Database(file);
    const store = new SqliteStore(db, options);
    await store.migrate();
    // The app's connection never checkpoints by itself: only the worker can copy the WAL back.
    db.pragma('wal_autocheckpoint = 0');
    return { file, db, store };
  }

  it('copies the WAL back from a worker thread, so a connection that never checkpoints keeps a bounded WAL', async () => {
    const on = await open('on');
    const off = await open('off', { backgroundCheckpoint: false });
    await writeRounds(on.store, on.db, 8, 'on');
    await writeRounds(off.store, off.db, 8, 'off');
    // Without the worker, nothing copied the WAL back: it was never restarted and holds every commit.
    assert.equal(checkpointSequence(off.file), 0);
    // With it, writers restarted the WAL after the worker's checkpoints, reusing the file from its start.
    assert.ok(checkpointSequence(on.file) >= 6, `WAL restarted ${checkpointSequence(on.file)} times`);
    const [onSize, offSize] = [statSync(`${on.file}-wal`).size, statSync(`${off.file}-wal`).size];
    assert.ok(onSize * 2 < offSize, `WAL ${onSize} bytes with background checkpoints, ${offSize} without`);
    // Every record is in the database, whoever copied it back.
    const rows = new Database(on.file, { readonly: true });
    assert.equal((rows.prepare('SELECT count(*) AS n FROM idempotency_records WHERE state = ?').get('completed') as { n: number }).n, 8 * (WRITES_PER_CHECKPOINT / 2));
    rows.close();
    on.db.close();
    off.db.close();
  });

  it('leaves in-memory databases to SQLite (no worker, no file)', async () => {
    const db = new Database(':memory:');
    const store = new SqliteStore(db);
    await store.migrate();
    await writeRounds(store, db, 1, 'mem');
    assert.equal((await store.get('mem-0-0-0'))?.state, 'completed');
    db.close();
  });

  it('never keeps the process alive: a script that writes past the threshold and ends exits by itself', function () {
    this.timeout(60_000);
    const storeModule = fileURLToPath(new URL('../../../src/runtime/stores/sqlite.ts', import.meta.url));
    const script = `
      import Database from 'better-sqlite3';
      const { SqliteStore } = await import(${JSON.stringify(storeModule)});
      const db = new Database(${JSON.stringify(join(dir, 'exit.db'))});
      const store = new SqliteStore(db);
      await store.migrate();
      await Promise.all(Array.from({ length: 600 }, (_, i) => store.reserve({ id: 'k' + i, operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 1000, ttlMs: 10000 })));
      console.log('written');
    `;
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000, cwd: process.cwd() });
    assert.equal(child.signal, null, `the process did not exit by itself: ${child.stderr}`);
    assert.equal(child.status, 0, child.stderr);
    assert.equal(child.stdout.trim(), 'written');
  });
});
