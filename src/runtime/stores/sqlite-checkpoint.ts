/**
 * Background WAL checkpoints for {@link SqliteStore}: one worker thread per process, with its own
 * better-sqlite3 connection per database file, copies the WAL back into the database
 * (`PRAGMA wal_checkpoint(PASSIVE)`) while the app's connection keeps writing.
 *
 * Why: SQLite checkpoints a WAL database inside the COMMIT that takes the WAL past `wal_autocheckpoint`
 * pages (1000 by default). better-sqlite3 is synchronous, so that COMMIT holds the event loop for the whole
 * copy and its two fsyncs — at a few thousand guarded requests a second, about a tenth of the app thread's
 * time, in stalls of several milliseconds. A checkpoint by another connection is SQLite's own design for
 * this: PASSIVE never takes the write lock and never waits, so the app's writes go on meanwhile, and a WAL
 * kept under the threshold this way never makes the app's COMMIT checkpoint.
 *
 * Nothing depends on the worker for correctness: the app's connection keeps its own `wal_autocheckpoint`, so
 * if the worker cannot start, cannot open the file (a custom VFS, an encryption extension, a renamed file) or
 * falls behind, SQLite checkpoints inline as it would without this module. Only databases in WAL mode in a
 * named file are checkpointed here; in-memory and temporary databases and other journal modes are left alone.
 * The worker is `unref`'d (it never keeps a process alive) and closes a connection it has not used for a
 * second; a process that exits meanwhile leaves the `-wal` file behind, which SQLite reads back on the next
 * open as after any exit.
 */
import { statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type BetterSqlite3 from 'better-sqlite3';

/** Writes (statements of the request path) between two checkpoint requests for one database. */
export const WRITES_PER_CHECKPOINT = 256;

// CommonJS run by the worker (`eval`): the driver is loaded from the path the app resolved, so the worker
// uses the same better-sqlite3 as the app wherever the code runs from.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { statSync } = require('node:fs');
const Database = require(workerData.driver);
const open = new Map();
parentPort.on('message', ({ id, file, identity }) => {
  try {
    let entry = open.get(file);
    if (entry !== undefined && entry.identity !== identity) {
      open.delete(file);
      clearTimeout(entry.idle);
      entry.db.close();
      entry = undefined;
    }
    if (entry === undefined) {
      const found = statSync(file);
      if (found.dev + ':' + found.ino !== identity) throw new Error('the file at this path is not the database the store writes');
      entry = { identity, db: new Database(file, { fileMustExist: true, timeout: 1000 }), idle: undefined };
      open.set(file, entry);
    }
    clearTimeout(entry.idle);
    entry.db.pragma('wal_checkpoint(PASSIVE)');
    const current = entry;
    entry.idle = setTimeout(() => {
      if (open.get(file) === current) open.delete(file);
      current.db.close();
    }, 1000);
    parentPort.postMessage({ id, ok: true });
  } catch {
    parentPort.postMessage({ id, ok: false });
  }
});
`;

/** What the worker answers to one checkpoint request. */
interface Reply {
  readonly id: number;
  readonly ok: boolean;
}

/** One database's checkpointing: its file, writes since the last request, whether a request is out. */
interface Target {
  readonly id: number;
  readonly file: string;
  /** `dev:ino` of the file when the store first wrote: the worker opens only that file. */
  readonly identity: string;
  writes: number;
  inFlight: boolean;
  /** Set when the worker could not checkpoint the file: it stays with SQLite's inline checkpoints. */
  refused: boolean;
  /** Resolved by the reply to the request in flight (see {@link backgroundCheckpointIdle}). */
  waiters: (() => void)[];
}

let worker: Worker | undefined;
/** Set when the worker failed: every database checkpoints inline from then on. */
let workerFailed = false;
let nextId = 1;
/** Targets with a request in flight, by id. */
const inFlight = new Map<number, Target>();
/** Per connection: its target, or `null` when it is not checkpointed here. */
const byDatabase = new WeakMap<BetterSqlite3.Database, Target | null>();

/**
 * Count `writes` about to be committed on `db` (called from inside the statement's synchronous work); every
 * {@link WRITES_PER_CHECKPOINT} of them, ask the worker for a checkpoint unless one is still running. Never
 * throws and never blocks: any problem leaves the database to SQLite's own inline checkpoints.
 */
export function noteWrites(db: BetterSqlite3.Database, writes: number): void {
  let target = byDatabase.get(db);
  if (target === undefined) {
    target = targetOf(db);
    byDatabase.set(db, target);
  }
  if (target === null || target.refused) return;
  target.writes += writes;
  if (target.inFlight || target.writes < WRITES_PER_CHECKPOINT) return;
  const running = workerOf();
  if (running === undefined) return;
  target.writes = 0;
  target.inFlight = true;
  inFlight.set(target.id, target);
  // After the synchronous work under way (the group's COMMIT): the checkpoint then covers these writes.
  queueMicrotask(() => running.postMessage({ id: target.id, file: target.file, identity: target.identity }));
}

/**
 * Resolves once no background checkpoint of `db` is running (at once when none is). For tests and for a
 * shutdown that wants the WAL copied back before it closes the connection.
 */
export function backgroundCheckpointIdle(db: BetterSqlite3.Database): Promise<void> {
  const target = byDatabase.get(db);
  if (target === undefined || target === null || !target.inFlight) return Promise.resolve();
  return new Promise((resolve) => target.waiters.push(resolve));
}

/** The file `db` writes, if it is a WAL database in a named file that still exists at its path. */
function targetOf(db: BetterSqlite3.Database): Target | null {
  try {
    if (db.memory || db.readonly || db.name === '' || db.name.startsWith('file:')) return null;
    if (String(db.pragma('journal_mode', { simple: true })).toLowerCase() !== 'wal') return null;
    const file = path.resolve(db.name);
    const found = statSync(file);
    return { id: nextId++, file, identity: `${found.dev}:${found.ino}`, writes: 0, inFlight: false, refused: false, waiters: [] };
  } catch {
    return null;
  }
}

function workerOf(): Worker | undefined {
  if (worker !== undefined || workerFailed) return worker;
  try {
    const driver = createRequire(import.meta.url).resolve('better-sqlite3');
    const started = new Worker(WORKER_SOURCE, { eval: true, workerData: { driver } });
    started.on('message', settle);
    const fail = (): void => {
      workerFailed = true;
      worker = undefined;
      for (const target of inFlight.values()) finish(target);
    };
    started.on('error', fail);
    started.on('exit', fail);
    // After the listeners: adding a 'message' listener refs the worker's port again.
    started.unref();
    worker = started;
  } catch {
    workerFailed = true;
  }
  return worker;
}

function settle(reply: Reply): void {
  const target = inFlight.get(reply.id);
  if (target === undefined) return;
  if (!reply.ok) target.refused = true;
  finish(target);
}

function finish(target: Target): void {
  inFlight.delete(target.id);
  target.inFlight = false;
  const waiters = target.waiters;
  target.waiters = [];
  for (const resolve of waiters) resolve();
}
