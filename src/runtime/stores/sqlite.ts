/**
 * SQLite idempotency store on better-sqlite3 (12.x): the embedded default. Imports only `../store.js`
 * and better-sqlite3's types; copied into users' generated code.
 *
 * ```ts
 * import Database from 'better-sqlite3';
 * const db = new Database('idempotency.db');
 * const store = new SqliteStore(db);   // sets busy_timeout and synchronous = FULL on the connection you own
 * store.migrate();                     // WAL + table + indexes, idempotent
 * ```
 *
 * Atomicity: a reservation is one `INSERT … ON CONFLICT DO UPDATE … WHERE <expired>` statement — a write statement opens
 * its write transaction (the database's write lock, waiting up to `busy_timeout`) before it reads, like
 * `BEGIN IMMEDIATE` — so processes sharing the file never both win a record. When it returns no row, the
 * existing record is read by a second statement (and the reservation tried again if another process removed
 * it in between). Every other write is a single fenced statement, atomic on its own; one-transaction mode
 * uses `BEGIN IMMEDIATE`. Statements are prepared once per store.
 *
 * Group commit: the writes of concurrent requests (reservations, completions, releases, lease renewals) asked
 * for in one turn of the event loop share one `BEGIN IMMEDIATE … COMMIT` — one WAL sync instead of one per
 * statement, which is most of a write's cost with `synchronous = FULL` (see {@link SqliteStoreOptions.synchronous}). Each call still settles
 * only after its statement committed; see {@link SqliteStoreOptions.groupCommit}.
 *
 * One-transaction mode and `await`: better-sqlite3 is synchronous and a connection has one transaction,
 * so while a handler awaits inside {@link SqliteStore.withReservation}, anything else run on that
 * connection would join the open transaction. This store therefore serialises all of its work on a
 * connection with a per-connection async mutex: a transactional request holds it from `BEGIN IMMEDIATE`
 * to `COMMIT`/`ROLLBACK`, and every other call of any SqliteStore on that connection (including a
 * duplicate delivery, which then reads `completed`) waits for it. Transactional requests on one
 * connection thus run one at a time; give the guard its own connection (or your app, if it writes
 * outside the guard while a transactional handler awaits) to keep those writes out of the transaction.
 *
 * **One-transaction mode is for one process.** `BEGIN IMMEDIATE` takes the whole file's write lock and holds
 * it until the handler's answer commits, so while one request's handler runs, every write of every other
 * connection to the file — any key, any process — waits. This store waits asynchronously (a 5 ms
 * `busy_timeout` slice, then timers, one call per connection probing the lock) for at most `busyTimeoutMs`,
 * then fails with `StoreError` `unavailable` (the guard answers 503 + Retry-After, never 409: the lock says
 * nothing about the key). With several processes on one file, use plain mode (every store call is one short
 * statement), or PostgreSQL, whose row locks are per key.
 */
// A namespace import, not a default one: it needs no esModuleInterop in a CommonJS project.
import type * as BetterSqlite3 from 'better-sqlite3';
import {
  HANDLER_COMMITTED,
  HANDLER_ENDED,
  StoreError,
  checkStoreName,
  beginsOrEndsTransaction,
  cursorLease,
  recordFromRow,
  reservedRecord,
  type BatchOptions,
  type CompleteInput,
  type IdempotencyRecord,
  type ListAbandonedOptions,
  type ReserveInput,
  type ReserveResult,
  type TransactionStep,
  type TransactionalStore,
} from '../store.js';

/** A better-sqlite3 connection. */
export type SqliteDatabase = BetterSqlite3.Database;

/** Options of {@link SqliteStore}. */
export interface SqliteStoreOptions {
  /** Table name (letters, digits, `_`; default `idempotency_records`). */
  readonly table?: string;
  /** Clock in ms since the epoch (default `Date.now`); SQLite has no clock of its own worth sharing. */
  readonly clock?: () => number;
  /**
   * Longest wait, in ms, for another connection's write lock before a call fails with `StoreError`
   * `unavailable` (default 2000), counted from the call. The wait is asynchronous: the store sets
   * `PRAGMA busy_timeout` to a few ms on the connection (so one statement never blocks the event loop for
   * long) and retries on `SQLITE_BUSY` with timers. While the lock is held, one call per connection probes it
   * at a time and the others wait for that probe without touching the database, so the event loop is held for
   * at most one slice per timer tick however many requests wait.
   *
   * The default is the guard's default `storeTimeoutMs`: the guard answers 503 once that has passed, so a
   * longer wait here would go on trying for a request already answered, and hold the lock's other waiters
   * behind it. Keep this at or below the guard's `storeTimeoutMs` if you change either. `null` leaves
   * `busy_timeout` alone and never retries.
   */
  readonly busyTimeoutMs?: number | null;
  /**
   * Group commit (default true): reservations, completions, releases and lease renewals asked for within one
   * turn of the event loop (by any SqliteStore on the connection) run in one `BEGIN IMMEDIATE … COMMIT`, so
   * concurrent requests share one commit (one WAL sync) instead of paying one each. Every call still settles
   * only after its own statement committed; a call alone in its turn runs as a single statement, as without
   * grouping. When the group cannot take the write lock at once, or its transaction fails, each call runs on
   * its own (with the `busyTimeoutMs` wait). `false` runs every call as its own statement right away.
   */
  readonly groupCommit?: boolean;
  /**
   * The connection's durability (default `'full'`): the store sets `PRAGMA synchronous = FULL` (or keeps EXTRA), so a
   * reservation or completion is on disk before the call settles — before the handler runs, before the
   * answer leaves. Needed because better-sqlite3 builds SQLite with `SQLITE_DEFAULT_WAL_SYNCHRONOUS=1`: a
   * connection that opens an existing WAL database (every start after the first) runs at NORMAL, where an OS
   * crash or power loss can lose commits already acknowledged — and a retry of a key whose reservation was
   * lost runs its effect again. `'keep'` leaves the level you set (for an informed opt-in to NORMAL; setting
   * it after constructing the store works too).
   */
  readonly synchronous?: 'full' | 'keep';
}

interface Row {
  id: string;
  operation: string;
  fingerprint: string;
  state: 'in_progress' | 'completed';
  lease_token: string;
  lease_until: number;
  expires_at: number;
  created_at: number;
  status: number | null;
  headers: string | null;
  body: Uint8Array | null;
  result_id: string | null;
}

// One mutex per connection, shared by every SqliteStore on it (see the file comment). `busy` counts the
// calls queued or running on it.
interface Mutex {
  tail: Promise<unknown>;
  busy: number;
  /** Calls waiting for the next group commit on the connection (see {@link SqliteStoreOptions.groupCommit}). */
  group: Grouped[] | undefined;
  /**
   * Another connection was last seen holding the write lock. Writes then wait for the prober instead of trying
   * themselves: each try blocks the event loop for up to a busy_timeout slice, and many waiters trying on their
   * own would block it for one slice each, every few ms (see SqliteStore.#waitForLock).
   */
  locked: boolean;
  /** A call is probing the lock (one per connection at a time). */
  probing: boolean;
  /** The prober's next pause, growing while the lock stays held, so a long hold costs few probes. */
  probeDelay: number;
  /** Calls waiting for the current probe to end. */
  readonly waiting: Set<() => void>;
  /** Calls waiting for the lock in any way (probing, or for a probe). */
  waiters: number;
}

/** One call waiting for a group commit: its statement(s), and how to run it on its own instead. */
interface Grouped {
  readonly work: () => unknown;
  readonly alone: () => Promise<unknown>;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}
const mutexes = new WeakMap<SqliteDatabase, Mutex>();

function mutexOf(db: SqliteDatabase): Mutex {
  let mutex = mutexes.get(db);
  if (mutex === undefined) {
    mutex = { tail: Promise.resolve(), busy: 0, group: undefined, locked: false, probing: false, probeDelay: FIRST_PROBE_MS, waiting: new Set(), waiters: 0 };
    mutexes.set(db, mutex);
  }
  return mutex;
}

function serialise<T>(db: SqliteDatabase, work: () => Promise<T> | T): Promise<T> {
  const mutex = mutexOf(db);
  mutex.busy += 1;
  const result = mutex.tail.then(work);
  const done = (): void => {
    mutex.busy -= 1;
  };
  mutex.tail = result.then(done, done);
  return result;
}

/** A turn of the event loop: timers and I/O that were due run before what follows. */
function nextTurn(): Promise<void> {
  return new Promise<void>((resolve) => setImmediate(resolve));
}

/**
 * Run synchronous work under the mutex. When nothing is queued or in a transaction on the connection, it
 * runs at once (better-sqlite3 is synchronous, so nothing can interleave with it) instead of waiting for a
 * turn of the queue.
 */
function serialiseSync<T>(db: SqliteDatabase, work: () => T | Promise<T>): Promise<T> {
  const mutex = mutexOf(db);
  if (mutex.busy !== 0) return serialise(db, work);
  try {
    return Promise.resolve(work());
  } catch (error) {
    return Promise.reject(error);
  }
}

/**
 * Queue a write for the connection's next group commit, run once the current turn of the event loop has
 * queued everything it will (`setImmediate`). Settles after the group's COMMIT.
 */
function grouped<T>(db: SqliteDatabase, work: () => T, alone: () => Promise<T>): Promise<T> {
  const mutex = mutexOf(db);
  return new Promise<T>((resolve, reject) => {
    const call: Grouped = { work, alone, resolve: resolve as (value: unknown) => void, reject };
    if (mutex.group !== undefined) {
      mutex.group.push(call);
      return;
    }
    mutex.group = [call];
    setImmediate(() => {
      const calls = mutex.group!;
      mutex.group = undefined;
      // Alone in its turn: one autocommit statement is cheaper than BEGIN … COMMIT around it.
      if (calls.length === 1) return runAlone(calls);
      // After any transactional request holding the connection, like every other call.
      void serialiseSync(db, () => commitGroup(db, calls));
    });
  });
}

function runAlone(calls: readonly Grouped[]): void {
  for (const call of calls) call.alone().then(call.resolve, call.reject);
}

/**
 * Runs every call's statements in one write transaction and settles them after COMMIT. If the transaction
 * cannot start (another connection holds the write lock), a statement ends it, or COMMIT fails, it is rolled
 * back and every call not yet settled runs on its own (with the busy wait): nothing of the group was
 * committed, and each call is safe to run again (a reservation that did land is found as `existing` with its
 * own token; a completion that did land fences itself out).
 */
function commitGroup(db: SqliteDatabase, calls: readonly Grouped[]): void {
  // While another connection holds the write lock, BEGIN IMMEDIATE would only block for a slice and fail:
  // each call waits for the lock's probe instead.
  if (mutexOf(db).locked) return runAlone(calls);
  try {
    db.exec('BEGIN IMMEDIATE');
  } catch (error) {
    if (isBusy(error)) mutexOf(db).locked = true;
    return runAlone(calls);
  }
  const outcomes: { ok: boolean; value: unknown }[] = [];
  try {
    for (const call of calls) {
      try {
        outcomes.push({ ok: true, value: call.work() });
      } catch (error) {
        // A failed statement is undone on its own (the rest of the transaction stands) unless it ended the transaction.
        if (!db.inTransaction) throw error;
        outcomes.push({ ok: false, value: error });
      }
    }
    db.exec('COMMIT');
  } catch {
    rollback(db);
    return runAlone(calls);
  }
  for (let i = 0; i < calls.length; i += 1) {
    const outcome = outcomes[i]!;
    if (outcome.ok) calls[i]!.resolve(outcome.value);
    else calls[i]!.reject(wrap(outcome.value, 'SQLite store operation failed'));
  }
}

type Statement = BetterSqlite3.Statement<unknown[], unknown>;

// Every statement of a store, prepared once (on first use, so after migrate() has created the table).
interface Statements {
  readonly reserve: Statement;
  readonly select: Statement;
  readonly complete: Statement;
  readonly release: Statement;
  readonly takeover: Statement;
  readonly extend: Statement;
  readonly abandoned: Statement;
  readonly abandonedAfter: Statement;
  readonly purge: Statement;
  readonly purgeAbandoned: Statement;
}

function prepareStatements(db: SqliteDatabase, t: string): Statements {
  return {
    reserve: db.prepare(
      `INSERT INTO ${t} (id, operation, fingerprint, state, lease_token, lease_until, expires_at, created_at)
       VALUES (?, ?, ?, 'in_progress', ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET
         operation = excluded.operation, fingerprint = excluded.fingerprint, state = 'in_progress',
         lease_token = excluded.lease_token, lease_until = excluded.lease_until, expires_at = excluded.expires_at,
         created_at = excluded.created_at, status = NULL, headers = NULL, body = NULL, result_id = NULL
       WHERE ${t}.state = 'completed' AND ${t}.expires_at <= excluded.created_at`,
    ),
    select: db.prepare(`SELECT * FROM ${t} WHERE id = ?`),
    complete: db.prepare(
      `UPDATE ${t} SET state = 'completed', status = ?, headers = ?, body = ?, result_id = ?, expires_at = ?
       WHERE id = ? AND lease_token = ? AND state = 'in_progress'`,
    ),
    release: db.prepare(`DELETE FROM ${t} WHERE id = ? AND lease_token = ? AND state = 'in_progress'`),
    takeover: db.prepare(
      `UPDATE ${t} SET lease_token = ?, lease_until = ?, created_at = ?
       WHERE id = ? AND fingerprint = ? AND lease_token = ? AND state = 'in_progress' AND lease_until <= ? RETURNING *`,
    ),
    extend: db.prepare(`UPDATE ${t} SET lease_until = ? WHERE id = ? AND lease_token = ? AND state = 'in_progress'`),
    abandoned: db.prepare(`SELECT * FROM ${t} WHERE state = 'in_progress' AND lease_until <= ? ORDER BY lease_until, id LIMIT ?`),
    abandonedAfter: db.prepare(
      `SELECT * FROM ${t} WHERE state = 'in_progress' AND lease_until <= ?
         AND lease_until >= ? AND (lease_until > ? OR id > ?) ORDER BY lease_until, id LIMIT ?`,
    ),
    purge: db.prepare(
      `DELETE FROM ${t} WHERE id IN (
         SELECT id FROM ${t} WHERE state = 'completed' AND expires_at <= ? ORDER BY expires_at LIMIT ?)`,
    ),
    purgeAbandoned: db.prepare(
      `DELETE FROM ${t} WHERE id IN (
         SELECT id FROM ${t} WHERE state = 'in_progress' AND expires_at <= ? AND lease_until <= ? ORDER BY expires_at LIMIT ?)`,
    ),
  };
}

/** SQLite store. The caller creates, configures and closes the `Database`; the store never does. */
export class SqliteStore implements TransactionalStore<SqliteDatabase> {
  readonly #db: SqliteDatabase;
  readonly #table: string;
  readonly #clock: () => number;
  readonly #busyWaitMs: number;
  readonly #groupCommit: boolean;
  #statements: Statements | undefined;

  constructor(db: SqliteDatabase, options: SqliteStoreOptions = {}) {
    this.#db = db;
    this.#table = checkStoreName(options.table ?? 'idempotency_records', 'SQLite table name');
    this.#clock = options.clock ?? Date.now;
    const busy = options.busyTimeoutMs === undefined ? 2000 : options.busyTimeoutMs;
    this.#busyWaitMs = busy === null ? 0 : Math.max(0, Math.floor(busy));
    this.#groupCommit = options.groupCommit ?? true;
    // A short synchronous wait per statement; the rest of the wait is asynchronous (see #waitForLock).
    if (busy !== null) db.pragma(`busy_timeout = ${Math.min(BUSY_SLICE_MS, this.#busyWaitMs)}`);
    // SQLite never shrinks the WAL by default (journal_size_limit -1): after a burst of writes the file keeps
    // its largest size for good, however little it holds after checkpoints. With a limit, the WAL is truncated
    // to it each time a checkpoint lets SQLite start it over. It does not bound the WAL between checkpoints
    // (wal_autocheckpoint does, unless a long read holds them off). A limit you set on the connection stays.
    if (Number(db.pragma('journal_size_limit', { simple: true })) < 0) db.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
    if ((options.synchronous ?? 'full') === 'full') requireFullSync(db);
  }

  // Prepared on first use: the table may not exist before migrate(). SQLite re-prepares them itself after a schema change.
  get #sql(): Statements {
    return (this.#statements ??= prepareStatements(this.#db, this.#table));
  }

  /** The schema {@link SqliteStore.migrate} creates, for review or your own migration tool. */
  static schemaSql(table = 'idempotency_records'): string {
    const t = checkStoreName(table, 'SQLite table name');
    return [
      `CREATE TABLE IF NOT EXISTS ${t} (`,
      `  id TEXT PRIMARY KEY,`,
      `  operation TEXT NOT NULL,`,
      `  fingerprint TEXT NOT NULL,`,
      `  state TEXT NOT NULL CHECK (state IN ('in_progress', 'completed')),`,
      `  lease_token TEXT NOT NULL,`,
      `  lease_until INTEGER NOT NULL,`,
      `  expires_at INTEGER NOT NULL,`,
      `  created_at INTEGER NOT NULL,`,
      `  status INTEGER,`,
      `  headers TEXT,`,
      `  body BLOB,`,
      `  result_id TEXT`,
      `) STRICT;`,
      `CREATE INDEX IF NOT EXISTS ${t}_expiry ON ${t} (expires_at) WHERE state = 'completed';`,
      `CREATE INDEX IF NOT EXISTS ${t}_lease ON ${t} (lease_until) WHERE state = 'in_progress';`,
      // purgeAbandoned's: by TTL, so that records past their lease but within their TTL are never read to be kept
      // (by lease, each call read all of them: 300,000 such records stalled the process 232 ms per call).
      `CREATE INDEX IF NOT EXISTS ${t}_in_progress_expiry ON ${t} (expires_at) WHERE state = 'in_progress';`,
    ].join('\n');
  }

  /** Switch the file to WAL and create the table and indexes if absent. Idempotent. */
  async migrate(): Promise<void> {
    await this.#run(() => {
      this.#db.pragma('journal_mode = WAL');
      this.#db.exec(SqliteStore.schemaSql(this.#table));
    });
  }

  reserve(input: ReserveInput): Promise<ReserveResult> {
    // Alone, no explicit transaction: one write statement is atomic, and half the cost of BEGIN IMMEDIATE … COMMIT.
    return this.#write(() => this.#reserveNow(input));
  }

  complete(id: string, token: string, input: CompleteInput): Promise<boolean> {
    // The statement may run later in this turn (group commit, or behind a one-transaction request): take the
    // response as it is now, so a caller that reuses its body buffer cannot change what is stored.
    const r = input.response;
    const taken: CompleteInput = { ...input, response: { status: r.status, headers: { ...r.headers }, body: Buffer.from(r.body) } };
    // One fenced UPDATE: atomic on its own, no explicit transaction needed.
    return this.#write(() => this.#completeNow(id, token, taken));
  }

  release(id: string, token: string): Promise<boolean> {
    return this.#write(() => this.#sql.release.run(id, token).changes === 1);
  }

  takeover(id: string, fingerprint: string, staleToken: string, newToken: string, leaseMs: number): Promise<IdempotencyRecord | undefined> {
    return this.#run(() => {
      const now = this.#clock();
      const row = this.#sql.takeover.get(newToken, now + leaseMs, now, id, fingerprint, staleToken, now) as Row | undefined;
      return row === undefined ? undefined : toRecord(row);
    });
  }

  /**
   * Lease heartbeat: one fenced UPDATE setting `lease_until = clock() + leaseMs` while the record is
   * `in_progress` under `token` (also past the lease, as long as nobody took it over).
   */
  extend(id: string, token: string, leaseMs: number): Promise<boolean> {
    return this.#write(() => this.#sql.extend.run(this.#clock() + leaseMs, id, token).changes === 1);
  }

  get(id: string): Promise<IdempotencyRecord | undefined> {
    return this.#run(() => {
      const row = this.#sql.select.get(id) as Row | undefined;
      return row === undefined ? undefined : toRecord(row);
    }, { read: true });
  }

  async listAbandoned(options: ListAbandonedOptions = {}): Promise<IdempotencyRecord[]> {
    const after = options.after;
    const lease = after === undefined ? undefined : cursorLease(after);
    return this.#run(() => {
      const now = this.#clock();
      const rows = after === undefined
        ? this.#sql.abandoned.all(now, limitOf(options))
        : this.#sql.abandonedAfter.all(now, lease, lease, after.id, limitOf(options));
      return (rows as Row[]).map(toRecord);
    }, { read: true });
  }

  // Each purge call first lets the event loop turn: a batch is a synchronous DELETE, and a purge loop
  // (`while (await store.purgeExpired() === 500) {}`) of calls that settle in a microtask never let I/O or timers
  // run — 500,000 expired records froze the process for 31 s, no request served.
  async purgeExpired(options: BatchOptions = {}): Promise<number> {
    await nextTurn();
    return this.#run(() => this.#sql.purge.run(this.#clock(), limitOf(options)).changes);
  }

  async purgeAbandoned(options: BatchOptions = {}): Promise<number> {
    await nextTurn();
    return this.#run(() => {
      const now = this.#clock();
      return this.#sql.purgeAbandoned.run(now, now, limitOf(options)).changes;
    });
  }

  async now(): Promise<number> {
    return this.#clock();
  }

  withReservation<T>(input: ReserveInput, work: (reserved: ReserveResult, tx: SqliteDatabase) => Promise<TransactionStep<T>>): Promise<T> {
    return serialise(this.#db, async () => {
      const db = this.#db;
      let reserved: ReserveResult;
      // Another connection (process) may hold the write lock, possibly across its own awaited handler:
      // wait for it with timers, never by blocking the event loop, and give up after busyTimeoutMs.
      const deadline = performance.now() + this.#busyWaitMs;
      for (let delay = 2; ; delay = Math.min(delay * 2, 50)) {
        try {
          db.exec('BEGIN IMMEDIATE');
          break;
        } catch (error) {
          if (!isBusy(error) || performance.now() + delay > deadline) throw wrap(error, 'could not begin the transaction');
        }
        await sleep(delay);
      }
      try {
        reserved = this.#reserveNow(input);
      } catch (error) {
        rollback(db);
        throw wrap(error, 'could not reserve');
      }
      // The handler gets the connection through a handle that ends with its turn: one given up at its bound runs on,
      // and what it wrote through the connection itself after that joined the next transaction on it — another key's,
      // committed with it — or its ROLLBACK ended that one (a review's). Through `tx` it is refused instead.
      const tx = handleFor(db);
      let step: TransactionStep<T>;
      try {
        step = await work(reserved, tx.db);
      } catch (error) {
        tx.revoke();
        const ended = !db.inTransaction;
        rollback(db);
        throw this.#keptByHandler(reserved, input, ended, error) ?? error;
      }
      tx.revoke();
      try {
        // A COMMIT or ROLLBACK the handler sent (hidden among the statements of one exec, or on the connection
        // through its own Database) ended the transaction: its writes and the reservation are committed or undone
        // already. A committed reservation is completed on its own, so the retry replays; one undone leaves
        // nothing to complete, and a rollback asked for cannot undo what was committed.
        const ended = !db.inTransaction;
        if (step.commit) {
          if (!this.#completeNow(input.id, input.token, step.complete)) {
            throw new StoreError('unavailable', ended ? "the handler ended the store's transaction itself (a ROLLBACK through tx)" : 'the reservation disappeared inside its own transaction');
          }
          if (!ended) db.exec('COMMIT');
        } else {
          if (!ended) db.exec('ROLLBACK');
          const kept = this.#keptByHandler(reserved, input, ended);
          if (kept !== undefined) throw kept;
        }
      } catch (error) {
        rollback(db);
        throw wrap(error, 'could not finish the transaction');
      }
      return step.value;
    });
  }

  /**
   * After the rollback of a one-transaction request whose handler failed or answered 5xx: an error when the handler
   * made it other than "nothing happened" (PostgreSQL's store explains the cases). A reservation that outlived the
   * rollback was committed by the handler (`COMMIT; BEGIN` in one exec leaves a transaction open): the record is kept,
   * its lease ended at once, so the key goes to reconciliation rather than to a retry that runs the effect again.
   */
  #keptByHandler(reserved: ReserveResult, input: ReserveInput, ended: boolean, cause?: unknown): StoreError | undefined {
    if (reserved.outcome !== 'reserved') return undefined;
    let kept: boolean;
    try {
      // A read first: in WAL mode it needs no write lock, so another process holding one does not turn an honest 5xx
      // into "outcome unknown" in the usual case, where the rollback undid the reservation.
      const row = this.#sql.select.get(input.id) as Row | undefined;
      kept = row !== undefined && row.state === 'in_progress' && row.lease_token === input.token;
    } catch (error) {
      return wrap(error, "could not tell whether the handler's transaction was rolled back");
    }
    if (kept) {
      try {
        this.#sql.extend.run(this.#clock(), input.id, input.token);
      } catch {
        // Its lease then runs out as set: the record is kept all the same.
      }
      return new StoreError('unavailable', HANDLER_COMMITTED, { cause });
    }
    return ended ? new StoreError('unavailable', HANDLER_ENDED, { cause }) : undefined;
  }

  /** A write of the request path: into the connection's next group commit, or at once without grouping. */
  #write<T>(work: () => T): Promise<T> {
    if (!this.#groupCommit) return this.#run(work);
    const deadline = performance.now() + this.#busyWaitMs;
    // Once a lock that held the call is let go, it goes back into a group: the calls that waited commit together.
    const inGroup = (): Promise<T> => grouped(this.#db, work, () => this.#run(work, { deadline, again: inGroup }));
    return inGroup();
  }

  /**
   * Run one call under the connection mutex, waiting for another connection's write lock up to `deadline`
   * (busyTimeoutMs from the call). `again` is how the call goes in once the lock is let go (by default, alone).
   * A read tries even while the lock is known held: in WAL mode a read does not need it.
   */
  #run<T>(work: () => T, options: { read?: boolean; deadline?: number; again?: () => Promise<T> } = {}): Promise<T> {
    const db = this.#db;
    const gate = mutexOf(db);
    const read = options.read === true;
    // `probing`: this try is the lock's probe. Any other write skips its try while the lock is known held —
    // checked when its turn on the mutex comes, so calls queued in one turn do not each block for a slice.
    const once = (probing: boolean): Promise<T> =>
      serialiseSync(db, () => {
        if (!probing && !read && gate.locked && this.#busyWaitMs !== 0) throw new LockHeld();
        try {
          return work();
        } catch (error) {
          if (isBusy(error)) gate.locked = true;
          throw wrap(error, 'SQLite store operation failed');
        }
      });
    if (this.#busyWaitMs === 0) return once(false);
    const deadline = options.deadline ?? performance.now() + this.#busyWaitMs;
    return once(false).catch((error: unknown) => {
      if (!(error instanceof LockHeld) && !isBusy(error)) throw error;
      return this.#waitForLock(once, options.again, deadline, error instanceof LockHeld ? undefined : error);
    });
  }

  /**
   * Wait for another connection's write lock (`SQLITE_BUSY`) to be let go, until `deadline`. One waiting call
   * per connection probes the lock (one try, blocking for at most the busy_timeout slice) after a growing
   * pause; the others wait for that probe's outcome on a promise, without touching the database. When a probe
   * gets through, the lock is marked free and the others go in (through `again`, a group commit, for a grouped
   * write); the first of them to meet the lock again marks it held, and the rest skip their try and wait again.
   * So the event loop is blocked for about one slice per timer tick at most, whatever the number of waiters.
   * A prober that reaches its deadline hands probing to another waiter. Every try is one of this store's
   * calls — a single statement, or reads after a write that did not happen — so a busy try changed nothing,
   * and tries go through the connection mutex, so none lands in another call's open transaction.
   */
  async #waitForLock<T>(once: (probing: boolean) => Promise<T>, again: (() => Promise<T>) | undefined, deadline: number, error: unknown): Promise<T> {
    const gate = mutexOf(this.#db);
    let last = error;
    gate.waiters += 1;
    try {
      for (;;) {
        if (!gate.locked) {
          if (again !== undefined) return await again();
          try {
            return await once(false);
          } catch (next) {
            if (!(next instanceof LockHeld) && !isBusy(next)) throw next;
            if (!(next instanceof LockHeld)) last = next;
          }
        }
        const left = deadline - performance.now();
        if (left <= 0) throw stillLocked(last);
        if (gate.probing) {
          await new Promise<void>((resolve) => {
            const done = (): void => {
              clearTimeout(timer);
              gate.waiting.delete(done);
              resolve();
            };
            const timer = setTimeout(done, left);
            gate.waiting.add(done);
          });
          continue;
        }
        gate.probing = true;
        try {
          const delay = Math.min(gate.probeDelay, left);
          gate.probeDelay = Math.min(gate.probeDelay * 2, LAST_PROBE_MS);
          await sleep(delay);
          if (!gate.locked) continue;
          try {
            const value = await once(true);
            gate.locked = false;
            return value;
          } catch (next) {
            // Anything but the lock (a closed connection…) says nothing about it: the others try for themselves.
            if (!isBusy(next)) {
              gate.locked = false;
              throw next;
            }
            last = next;
          }
        } finally {
          gate.probing = false;
          if (!gate.locked) gate.probeDelay = FIRST_PROBE_MS;
          for (const wake of [...gate.waiting]) wake();
        }
      }
    } finally {
      gate.waiters -= 1;
      // Nobody waits any more: the next call tries at once rather than waiting for a probe of a lock long gone.
      if (gate.waiters === 0) {
        gate.locked = false;
        gate.probeDelay = FIRST_PROBE_MS;
      }
    }
  }

  #reserveNow(input: ReserveInput): ReserveResult {
    const sql = this.#sql;
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const now = this.#clock();
      // One changed row: this call wrote the record (new, or over an expired completed one), exactly as
      // reservedRecord() builds it — so it is not read back (RETURNING would double the statement's cost).
      if (sql.reserve.run(input.id, input.operation, input.fingerprint, input.token, now + input.leaseMs, now + input.ttlMs, now).changes === 1) {
        return { outcome: 'reserved', record: reservedRecord(input, now), now };
      }
      const existing = sql.select.get(input.id) as Row | undefined;
      if (existing !== undefined) return { outcome: 'existing', record: toRecord(existing), now };
      // Outside a transaction another process may release or purge the record between the two statements: try again.
    }
    throw new StoreError('unavailable', 'the record kept changing under the reservation');
  }

  #completeNow(id: string, token: string, input: CompleteInput): boolean {
    const now = this.#clock();
    const r = input.response;
    return this.#sql.complete.run(r.status, JSON.stringify(r.headers), bytesOf(r.body), input.resultId ?? null, now + input.ttlMs, id, token).changes === 1;
  }
}

/**
 * Raise the connection to `synchronous = FULL` (EXTRA stays EXTRA). Set, not assumed, even when the level already
 * reads FULL: SQLite applies better-sqlite3's WAL default (NORMAL) when the connection first reads a WAL file,
 * unless the level was set explicitly (see `SqliteStoreOptions.synchronous`). SQLite refuses any change inside a
 * transaction; there the file has been read already, so a level of FULL stays and one below it is refused.
 */
function requireFullSync(db: SqliteDatabase): void {
  const current = Number(db.pragma('synchronous', { simple: true }));
  if (!db.inTransaction) {
    db.pragma(`synchronous = ${Math.max(2, current)}`);
  } else if (current < 2) {
    throw new TypeError(
      "SqliteStore sets the connection's synchronous level to FULL, which SQLite refuses inside a transaction: create the store outside it (or pass synchronous: 'keep')",
    );
  }
}

/** A Buffer over the same memory (better-sqlite3 binds BLOBs from Buffers, copying them during the call). */
function bytesOf(body: Uint8Array): Buffer {
  return Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}

function limitOf(options: BatchOptions): number {
  return Math.max(1, Math.floor(options.limit ?? 500));
}

/**
 * `db` for one handler's transaction, and its end: once revoked, every call through the handle — or through a statement,
 * an iterator or a `transaction()` function made from it — throws, while the connection itself goes on serving the
 * store. Revoking closes the iterators still open (one left open keeps the connection busy: its ROLLBACK then failed,
 * and every later transaction with it — a review's). Each handle is a proxy over a stand-in of the same prototype, not
 * over the object itself, so that frozen properties (`statement.database`, `transaction().immediate`) are handed out
 * as handles too rather than as the raw connection, and no way through the proxy (a symbol, a descriptor, the
 * inspector) reaches the raw object.
 */
function handleFor(db: SqliteDatabase): { db: SqliteDatabase; revoke: () => void } {
  let revoked = false;
  // Set when the store's transaction was found ended by what the handler ran: a COMMIT or ROLLBACK hidden in a string
  // of several statements (`tx.exec('INSERT …; COMMIT')`, which the check of the first statement lets through), say.
  // What came after would commit on its own.
  let endedByHandler = false;
  const check = (): void => {
    // The connection's own word, read before anything goes through: a statement that ended the transaction without
    // saying COMMIT or ROLLBACK (`INSERT OR ROLLBACK` on a conflict, an error SQLite answers by rolling back) left
    // the handler's next write to commit on its own, without the record.
    if (!revoked && !db.inTransaction) {
      endedByHandler = true;
      end();
    }
    if (endedByHandler) {
      throw new TypeError(
        "idempotency: the store's transaction was ended from inside the handler (a COMMIT or ROLLBACK among the statements of one tx.exec, an INSERT OR ROLLBACK that met a conflict, or an error SQLite answers by rolling back): `tx` is no longer usable, and what it would write now would commit on its own — use SAVEPOINT and ROLLBACK TO for a part you may undo",
      );
    }
    if (revoked) {
      throw new TypeError(
        "idempotency: this request's transaction has ended (its handler returned, or was given up at its bound): `tx` and what was prepared through it are no longer usable; keep statements you reuse across requests prepared on your own Database",
      );
    }
  };
  // The iterators handed out and not yet finished.
  const open = new Set<Iterator<unknown>>();
  let root: unknown;
  // What a call or a property gives is handed out as a handle when it is the connection, a statement, an iterator or a
  // function; rows and plain values as they are. A method that returns its own object (`pluck()`, an iterator's
  // [Symbol.iterator]) returns its handle; the connection is always the one handle.
  const handle = (value: unknown): unknown => {
    if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return value;
    if (value === db && root !== undefined) return root;
    const iterator = isIterator(value);
    if (typeof value !== 'function' && value !== db && !isStatement(value) && !iterator) return value;
    const real = value as object;
    if (iterator) open.add(value as Iterator<unknown>);
    // The enumerable own properties, as handles: what Object.keys, a spread or JSON.stringify see (nothing once revoked).
    const keys = (): string[] => (revoked ? [] : Reflect.ownKeys(real).filter((key): key is string => typeof key === 'string' && Object.prototype.propertyIsEnumerable.call(real, key)));
    // util.inspect formats the proxy's target, calling a custom inspector it finds there on the proxy: the stand-in's
    // prototype has one that shows what the handle shows, never the raw object (the inspector given to it is the
    // caller's). A function's stand-in is a bare function.
    const describe = (_depth: number, options: unknown, inspect: (value: unknown, options: unknown) => string): string =>
      revoked ? '[idempotency tx: its transaction has ended]' : `${labelOf(real)} ${inspect(Object.fromEntries(keys().map((key) => [key, proxy[key]])), options)}`;
    const standIn: object = typeof value === 'function' ? (): undefined => undefined : Object.create(standInPrototype(Object.getPrototypeOf(real) as object | null));
    // One function per method, made at its first use: `tx.prepare === tx.prepare`, and no closure per call on a hot loop.
    let methods: Map<PropertyKey, { member: unknown; call: (...args: unknown[]) => unknown }> | undefined;
    const proxy = new Proxy(standIn, {
      get(_standIn, property) {
        if (typeof property === 'symbol') {
          if (property === INSPECT || property === DESCRIBE) return describe;
          if (property === Symbol.toStringTag || property === Symbol.toPrimitive) return Reflect.get(real, property, real);
          // Other symbols are the library's own (its native handle): never through the handle.
          if (property !== Symbol.iterator) return undefined;
        } else if (property === 'toJSON' || property in Object.prototype) {
          // What every object answers (String(tx), JSON.stringify) is read as it is, ended or not.
          return Reflect.get(real, property, real);
        }
        check();
        const member = Reflect.get(real, property, real) as unknown;
        if (typeof member !== 'function') return handle(member);
        methods ??= new Map();
        let method = methods.get(property);
        if (method === undefined || method.member !== member) {
          const finishing = iterator && (property === 'return' || property === 'throw');
          const next = iterator && property === 'next';
          const guarded = real === db && (property === 'exec' || property === 'prepare' || property === 'close');
          const call = (...args: unknown[]): unknown => {
            check();
            if (guarded) refuseOnConnection(property as string, args[0]);
            const result = Reflect.apply(member as (...a: unknown[]) => unknown, real, args);
            if (finishing || (next && (result as IteratorResult<unknown> | undefined)?.done === true)) open.delete(real as Iterator<unknown>);
            return result === real ? proxy : handle(result);
          };
          method = { member, call };
          methods.set(property, method);
        }
        return method.call;
      },
      set(_standIn, property, member) {
        check();
        return Reflect.set(real, property, member, real);
      },
      has(_standIn, property) {
        return Reflect.has(real, property);
      },
      ownKeys() {
        return keys();
      },
      getOwnPropertyDescriptor(_standIn, property) {
        if (typeof property !== 'string' || !keys().includes(property)) return undefined;
        return { value: proxy[property], writable: false, enumerable: true, configurable: true };
      },
      apply(_standIn, self, args) {
        check();
        return handle(Reflect.apply(real as (...a: unknown[]) => unknown, self, args));
      },
    }) as Record<string, unknown>;
    return proxy;
  };
  const end = (): void => {
    revoked = true;
    for (const iterator of open) {
      try {
        iterator.return?.();
      } catch {
        // Already closed.
      }
    }
    open.clear();
  };
  root = handle(db);
  return { db: root as SqliteDatabase, revoke: end };
}

const INSPECT = Symbol.for('nodejs.util.inspect.custom');

/**
 * Throws for what a handler must not do on the store's connection: close it, or begin or end the store's transaction
 * (better-sqlite3's own `transaction()` nests as savepoints and is fine). A COMMIT through `tx` committed the
 * reservation half-way; a ROLLBACK undid it, and the handler's later writes committed on their own.
 */
function refuseOnConnection(method: string, sql: unknown): void {
  if (method === 'close') throw new TypeError("idempotency: `tx` is the store's own connection: a handler must not close it");
  if (typeof sql !== 'string') return;
  if (!beginsOrEndsTransaction(sql, false)) return;
  throw new TypeError(
    "idempotency: the store owns this request's transaction (the key's record commits with your writes): a handler must not BEGIN, COMMIT or ROLLBACK it — use SAVEPOINT and ROLLBACK TO, or better-sqlite3's transaction(), for a part you may undo",
  );
}

type Describe = (depth: number, options: unknown, inspect: (value: unknown, options: unknown) => string) => string;

/** Each handle's own inspector, read through the handle by the shared one its stand-in inherits. */
const DESCRIBE = Symbol('idempotency tx inspector');

/** Per prototype of the library's (connection, statement, iterator), the one its handles' stand-ins inherit. */
const standInPrototypes = new WeakMap<object, object>();
let nullStandInPrototype: object | undefined;

function standInPrototype(prototype: object | null): object {
  const known = prototype === null ? nullStandInPrototype : standInPrototypes.get(prototype);
  if (known !== undefined) return known;
  const made = Object.create(prototype) as object;
  Object.defineProperty(made, INSPECT, {
    configurable: true,
    value(this: object, depth: number, options: unknown, inspect: (value: unknown, options: unknown) => string): string {
      const describe = (this as { [DESCRIBE]?: unknown })[DESCRIBE];
      return typeof describe === 'function' ? (describe as Describe)(depth, options, inspect) : '[idempotency tx]';
    },
  });
  if (prototype === null) nullStandInPrototype = made;
  else standInPrototypes.set(prototype, made);
  return made;
}

function labelOf(value: object): string {
  const name = (Object.getPrototypeOf(value) as { constructor?: { name?: unknown } } | null)?.constructor?.name;
  return typeof name === 'string' ? name : 'Object';
}

function isStatement(value: unknown): boolean {
  return value !== null && typeof value === 'object' && typeof (value as { run?: unknown }).run === 'function' && typeof (value as { all?: unknown }).all === 'function';
}

function isIterator(value: unknown): boolean {
  return value !== null && typeof value === 'object' && typeof (value as { next?: unknown }).next === 'function' && typeof (value as { return?: unknown }).return === 'function';
}

function rollback(db: SqliteDatabase): void {
  try {
    if (db.inTransaction) db.exec('ROLLBACK');
  } catch {
    // The connection is already out of the transaction (SQLite rolls back on some errors itself).
  }
}

// The longest a single statement blocks the event loop waiting for another connection's write lock.
const BUSY_SLICE_MS = 5;

// The prober's first and longest pause between two tries of a held lock (see SqliteStore.#waitForLock).
const FIRST_PROBE_MS = 2;
const LAST_PROBE_MS = 50;

// The size the WAL is truncated to after a checkpoint restarts it (PRAGMA journal_size_limit).
const WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;

/** Thrown by a write that skipped its try because the lock is known held; it then waits for the probe. */
class LockHeld extends Error {}

/** The StoreError of a call that waited busyTimeoutMs for the lock, with the last SQLITE_BUSY if it met one itself. */
function stillLocked(last: unknown): StoreError {
  if (last !== undefined) return wrap(last, 'SQLite store operation failed');
  return new StoreError('unavailable', 'SQLite store operation failed (SQLITE_BUSY): the database stayed locked by another connection (raise busyTimeoutMs, or keep one-transaction mode to one process)');
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Another connection holds the lock (SQLITE_BUSY and its extended codes, SQLITE_LOCKED), wrapped or not. */
function isBusy(error: unknown): boolean {
  const raw = error instanceof StoreError ? error.cause : error;
  const code = (raw as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && /^SQLITE_(BUSY|LOCKED)/.test(code);
}

function wrap(error: unknown, message: string): StoreError {
  if (error instanceof StoreError) return error;
  const code = (error as { code?: unknown }).code;
  // A busy database is 'unavailable' (the guard answers 503 + Retry-After), never 'lock-timeout': the lock
  // is the whole file's, held by another connection for any key, so it says nothing about this key.
  const why = isBusy(error) ? ': the database stayed locked by another connection (raise busyTimeoutMs, or keep one-transaction mode to one process)' : '';
  return new StoreError('unavailable', `${message}${typeof code === 'string' ? ` (${code})` : ''}${why}`, { cause: error });
}

function toRecord(row: Row): IdempotencyRecord {
  return recordFromRow(row, (stored) => JSON.parse(stored ?? '{}') as Record<string, string>);
}
