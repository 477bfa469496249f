/**
 * The idempotency store interface: one durable record per (scope, operation, key), reserved atomically.
 *
 * Every backend (`stores/memory.ts`, `stores/sqlite.ts`, `stores/postgres.ts`, `stores/redis.ts`) implements
 * {@link IdempotencyStore}; SQLite and PostgreSQL also implement {@link TransactionalStore}. All of them
 * pass the same conformance suite. This file imports nothing: it is copied into users' generated code.
 *
 * Time: every instant is an integer count of **milliseconds since the Unix epoch**, every duration is
 * milliseconds. The clock is the store's: PostgreSQL and Redis read their server's clock unless the store
 * was built with a `clock` (tests inject one so lease and TTL cases do not sleep); SQLite and memory use
 * the process clock (`Date.now`) unless given a `clock`.
 *
 * A record never holds the raw idempotency key, request headers or the request body: the guard passes
 * only the record id (a SHA-256), the fingerprint (a SHA-256) and the handler's response.
 */

/** `in_progress`: reserved and owned by one lease token; `completed`: a terminal result to replay. */
export type RecordState = 'in_progress' | 'completed';

/** A response as the handler really sent it: status, allow-listed headers (lower-case), exact bytes. */
export interface StoredResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Uint8Array;
}

/** One stored record, as the store read it back. */
export interface IdempotencyRecord {
  /** Record id: hex SHA-256 of scope parts, operation and key. Primary key. */
  readonly id: string;
  /** operationId the record belongs to (safe to log). */
  readonly operation: string;
  /** Versioned request fingerprint (`v1:<hex>`); never changes for the record's lifetime. */
  readonly fingerprint: string;
  readonly state: RecordState;
  /** Token of the current owner. Completion and release must present it (fencing). */
  readonly leaseToken: string;
  /** Until when (ms) the owner holds an `in_progress` record; after it the record is abandoned. */
  readonly leaseUntil: number;
  /** When (ms) the record stops counting: an expired `completed` record is as good as absent. */
  readonly expiresAt: number;
  /** When (ms) the record was first reserved (or last taken over). */
  readonly createdAt: number;
  /** The terminal response; present exactly when `state` is `completed`. */
  readonly response?: StoredResponse;
  /** Business result id of a completed record (e.g. the created object's id), when known. */
  readonly resultId?: string;
}

/** What {@link IdempotencyStore.reserve} needs. */
export interface ReserveInput {
  readonly id: string;
  readonly operation: string;
  readonly fingerprint: string;
  /** Fresh random token that will own the record if this call wins. */
  readonly token: string;
  /** Lease length: `leaseUntil = now + leaseMs`. */
  readonly leaseMs: number;
  /** Retention: `expiresAt = now + ttlMs` (reset again on completion). */
  readonly ttlMs: number;
}

/**
 * Result of a reservation. `now` is the store clock's reading used for the decision, so the caller
 * can compute seconds left on a lease without trusting its own clock.
 */
export type ReserveResult =
  | { readonly outcome: 'reserved'; readonly record: IdempotencyRecord; readonly now: number }
  | { readonly outcome: 'existing'; readonly record: IdempotencyRecord; readonly now: number };

/** What a fenced completion writes. */
export interface CompleteInput {
  readonly response: StoredResponse;
  readonly resultId?: string;
  /** Retention from the moment of completion: `expiresAt = now + ttlMs`. */
  readonly ttlMs: number;
}

/** Options of the maintenance calls. */
export interface BatchOptions {
  /** Most records to touch in one call (default 500). */
  readonly limit?: number;
}

/** Options of {@link IdempotencyStore.listAbandoned}: a page of `limit` records, after the last one of the page before. */
export interface ListAbandonedOptions extends BatchOptions {
  /**
   * The last record of the previous page (its `leaseUntil` and `id`): the page starts after it in the list's order
   * (lease, then id). Without it the list starts at the oldest lease. A reconciliation that leaves some records
   * unsettled pages on with it instead of reading the same first `limit` again; settled records leave the list,
   * and the cursor stays valid when its own record did.
   */
  readonly after?: { readonly leaseUntil: number; readonly id: string } | undefined;
}

/** The lease of a {@link ListAbandonedOptions.after} cursor, checked: a page cursor that is not one is a caller's bug. */
export function cursorLease(after: { readonly leaseUntil: number; readonly id: string }): number {
  if (!Number.isSafeInteger(after.leaseUntil) || typeof after.id !== 'string') {
    throw new TypeError('listAbandoned({ after }) takes the last record of the previous page: { leaseUntil: integer ms, id: string }');
  }
  return after.leaseUntil;
}

/** Why a store operation failed. The guard fails closed on `unavailable`. */
export type StoreErrorKind = 'unavailable' | 'lock-timeout' | 'unsupported';

/**
 * The one error type stores throw. Stores never swallow errors: driver errors are wrapped with
 * `kind: 'unavailable'` and the driver error as `cause`; the guard decides what to answer.
 */
export class StoreError extends Error {
  override readonly name = 'StoreError';
  readonly kind: StoreErrorKind;
  constructor(kind: StoreErrorKind, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.kind = kind;
  }
}

/**
 * A backend for idempotency records. Implementations are constructed with a client the user created
 * and never open, close or own connections.
 */
export interface IdempotencyStore {
  /**
   * Atomically reserve `input.id`. In one indivisible step:
   * - no record, or a `completed` record whose `expiresAt <= now` → write
   *   `in_progress{fingerprint, token, leaseUntil: now + leaseMs, expiresAt: now + ttlMs}` and return
   *   `reserved`;
   * - otherwise return `existing` with the record untouched. An `in_progress` record is never
   *   overwritten here, whatever its lease or expiry (abandoned records go through reconciliation).
   * Of any number of concurrent calls for one id, from any number of processes, exactly one gets `reserved`.
   */
  reserve(input: ReserveInput): Promise<ReserveResult>;

  /**
   * Fenced completion: only when the record is `in_progress` and its token equals `token`, set it
   * `completed` with the response, result id and `expiresAt = now + ttlMs`. Returns whether it wrote.
   * A `completed` record is never overwritten.
   */
  complete(id: string, token: string, input: CompleteInput): Promise<boolean>;

  /**
   * Fenced release: delete the record only when it is `in_progress` and its token equals `token`.
   * Returns whether it deleted. Used when the effect certainly did not happen.
   */
  release(id: string, token: string): Promise<boolean>;

  /**
   * Fenced takeover of an abandoned reservation: only when the record is `in_progress`, its token equals
   * `staleToken`, its fingerprint equals `fingerprint` and `leaseUntil <= now`, give it to `newToken` with
   * `leaseUntil = now + leaseMs` and `createdAt = now`. Returns the new record, or `undefined` when any
   * condition failed. Of concurrent takeovers of one record exactly one wins.
   */
  takeover(id: string, fingerprint: string, staleToken: string, newToken: string, leaseMs: number): Promise<IdempotencyRecord | undefined>;

  /**
   * Optional lease heartbeat: only when the record is `in_progress` and its token equals `token`, set
   * `leaseUntil = now + leaseMs` (store clock; also after the lease ran out, as long as nobody took it over).
   * Returns whether it extended. The guard renews every lease/3 while the handler runs when a store has it,
   * so a slow but live owner never looks abandoned; and it calls it with `leaseMs = 0` to end the lease of a
   * kept local-effect record whose handler answered 5xx or threw (`leaseUntil = now`: abandoned at once).
   */
  extend?(id: string, token: string, leaseMs: number): Promise<boolean>;

  /** Read one record (expired ones included, as stored), or `undefined`. */
  get(id: string): Promise<IdempotencyRecord | undefined>;

  /**
   * `in_progress` records whose lease has run out (`leaseUntil <= now`), oldest lease first (ties by id), at most
   * `limit`, after `after` when given. Never deletes.
   */
  listAbandoned(options?: ListAbandonedOptions): Promise<IdempotencyRecord[]>;

  /**
   * Delete up to `limit` `completed` records with `expiresAt <= now`; returns how many were deleted.
   * `in_progress` records are never purged. Call it periodically until it returns less than `limit`.
   */
  purgeExpired(options?: BatchOptions): Promise<number>;

  /**
   * Optional (every bundled store has it): delete up to `limit` `in_progress` records past both their lease and
   * their TTL (`leaseUntil <= now` and `expiresAt <= now`), oldest lease first; returns how many were deleted. A
   * handler that threw or answered a non-transient 5xx keeps its record for reconciliation, and one whose key is
   * never retried keeps it for good: this bounds the store. Past its TTL no retry within the contract (the client's
   * retry budget fits in the TTL) can reach a record, but the record is the only trace that an effect may have
   * happened: call it once your reconciliation has seen them ({@link listAbandoned}), or for operations with
   * nothing to reconcile. Call it periodically until it returns less than `limit`.
   */
  purgeAbandoned?(options?: BatchOptions): Promise<number>;

  /** The store clock (ms since the epoch). */
  now(): Promise<number>;

  /** Create the schema if absent (idempotent); a no-op where there is none. Never called implicitly. */
  migrate?(): Promise<void>;
}

/**
 * What the work inside {@link TransactionalStore.withReservation} decided: commit the reservation, the
 * business writes and the completion together, or roll all of it back (which also frees the key).
 */
export type TransactionStep<T> =
  | { readonly commit: true; readonly complete: CompleteInput; readonly value: T }
  | { readonly commit: false; readonly value: T };

/**
 * A store whose records live in the same database as the business data (PostgreSQL, SQLite).
 * `Tx` is the handle the business code writes through (a `pg` `PoolClient`, a better-sqlite3 `Database`).
 */
export interface TransactionalStore<Tx> extends IdempotencyStore {
  /**
   * Open a transaction, reserve `input.id` inside it — waiting while another open transaction holds the
   * same record — and call `work` with the outcome and the transaction handle. `work` returns whether to
   * commit (writing `completed` in the same transaction) or roll back. If `work` throws, the transaction
   * rolls back and the error propagates. The store never commits an `in_progress` record here.
   * PostgreSQL locks the one row, so duplicates wait and other keys do not; SQLite locks the whole file for
   * the transaction (handler included), so there one-transaction mode is for a single process.
   */
  withReservation<T>(input: ReserveInput, work: (reserved: ReserveResult, tx: Tx) => Promise<TransactionStep<T>>, options?: WithReservationOptions): Promise<T>;
}

/** Options of {@link TransactionalStore.withReservation}. */
export interface WithReservationOptions {
  /**
   * The longest the reservation may wait on a duplicate's open transaction, when shorter than the store's own bound
   * (PostgreSQL's `lockTimeoutMs`): past it the call rejects with a `lock-timeout` {@link StoreError}, and its
   * connection goes back to the pool instead of waiting on (the guard passes its `transactionWaitMs`).
   */
  readonly lockWaitMs?: number;
}

/** The record a reservation creates: `in_progress` under the caller's token, leased and retained from `now`. */
export function reservedRecord(input: ReserveInput, now: number): IdempotencyRecord {
  return {
    id: input.id,
    operation: input.operation,
    fingerprint: input.fingerprint,
    state: 'in_progress',
    leaseToken: input.token,
    leaseUntil: now + input.leaseMs,
    expiresAt: now + input.ttlMs,
    createdAt: now,
  };
}

/**
 * Marks the error a one-transaction handler is given up with while it may still be running (past the adapter's
 * bound, or a streamed answer whose client left): its transaction is rolled back, and a store whose transaction has
 * a connection of its own (PostgreSQL) closes that connection rather than pool it — the handler still holds it, and
 * its late statements would otherwise run outside any transaction or inside the next request's.
 */
export const HANDLER_STILL_RUNNING: unique symbol = Symbol.for('idemkit.handlerStillRunning') as never;

/** An error for a handler given up while it may still run (see {@link HANDLER_STILL_RUNNING}). */
export function handlerGivenUp(message: string): Error {
  return Object.assign(new Error(message), { [HANDLER_STILL_RUNNING]: true });
}

/** Whether `error` gave up a handler that may still be running. */
export function isHandlerGivenUp(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[HANDLER_STILL_RUNNING] === true;
}

/**
 * A one-transaction handler that failed or answered 5xx had committed the store's transaction itself (a COMMIT through
 * `tx` the store could not see: hidden among a string's statements, or followed by a BEGIN): its writes before that
 * COMMIT stand, so the record is kept, its lease ended — the key goes to reconciliation, not to a retry that runs again.
 */
export const HANDLER_COMMITTED =
  "the handler committed the store's transaction itself (a COMMIT through tx) and then failed or answered 5xx: what it wrote before that COMMIT stands, and the key's record is kept for reconciliation";

/** As {@link HANDLER_COMMITTED}, a ROLLBACK: undone up to there, but a write after it in the same string ran on its own. */
export const HANDLER_ENDED =
  "the handler ended the store's transaction itself (a COMMIT or ROLLBACK through tx): a write after it in the same call, if any, ran outside the transaction";

/** Whether `store` supports one-transaction mode. */
export function isTransactionalStore<Tx = unknown>(store: IdempotencyStore): store is TransactionalStore<Tx> {
  return typeof (store as Partial<TransactionalStore<Tx>>).withReservation === 'function';
}

/** A record's columns as the SQL stores keep them (times in ms, as numbers or PostgreSQL's numeric strings). */
export interface RecordRow<Headers> {
  readonly id: string;
  readonly operation: string;
  readonly fingerprint: string;
  readonly state: RecordState;
  readonly lease_token: string;
  readonly lease_until: number | string;
  readonly expires_at: number | string;
  readonly created_at: number | string;
  readonly status: number | null;
  readonly headers: Headers | null;
  readonly body: Uint8Array | null;
  readonly result_id: string | null;
}

/**
 * The record a SQL row holds. `decodeHeaders` turns the stored headers column into the allow-listed
 * headers; it runs only for a completed record.
 */
export function recordFromRow<Headers>(row: RecordRow<Headers>, decodeHeaders: (stored: Headers | null) => Record<string, string>): IdempotencyRecord {
  const base = {
    id: row.id,
    operation: row.operation,
    fingerprint: row.fingerprint,
    state: row.state,
    leaseToken: row.lease_token,
    leaseUntil: Number(row.lease_until),
    expiresAt: Number(row.expires_at),
    createdAt: Number(row.created_at),
  };
  if (row.state !== 'completed') return base;
  return {
    ...base,
    response: {
      status: Number(row.status),
      headers: decodeHeaders(row.headers),
      // A copy that owns its memory: a driver's small Buffer is a view into a shared pool, and a caller that
      // hands `body.buffer` on (not the view) would otherwise send other records' bytes with the replay.
      body: row.body === null ? new Uint8Array() : new Uint8Array(row.body),
    },
    ...(row.result_id !== null ? { resultId: row.result_id } : {}),
  };
}

/** Validate a table name or key prefix at construction, so it can be spliced into SQL or keys safely. */
export function checkStoreName(value: string, what: string, pattern: RegExp = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/): string {
  if (!pattern.test(value)) {
    throw new StoreError('unsupported', `${what} ${JSON.stringify(value)} is not allowed: use letters, digits and _ (${pattern.source})`);
  }
  return value;
}

/**
 * A queue that hands what it was given within one turn of the event loop to `flush`, in order, once the turn's
 * I/O callbacks have all run (`setImmediate`): by then every request whose data arrived in the turn has asked.
 * How the PostgreSQL and Redis stores batch the calls of concurrent requests.
 */
export function queuePerTurn<T>(flush: (items: T[]) => void): (item: T) => void {
  let items: T[] = [];
  let scheduled = false;
  return (item) => {
    items.push(item);
    if (scheduled) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      const taken = items;
      items = [];
      flush(taken);
    });
  };
}

/**
 * Whether `sql` begins with a statement that starts or ends a transaction (BEGIN, START TRANSACTION, COMMIT, END,
 * ROLLBACK or ABORT not followed by TO, PREPARE TRANSACTION), after what comes before it: white space, semicolons, `--`
 * comments (ended by a line feed, or on PostgreSQL also a carriage return) and block comments (nested on PostgreSQL,
 * not on SQLite). Only the first statement of a string is read.
 */
export function beginsOrEndsTransaction(sql: string, postgres: boolean): boolean {
  const words: string[] = [];
  let at = 0;
  while (words.length < 3) {
    // Empty statements (`;`) are skipped before the first word only: `ROLLBACK; TO x` is a ROLLBACK, then another statement.
    at = afterComments(sql, at, postgres, words.length === 0);
    const word = /^[A-Za-z_]+/.exec(sql.slice(at, at + 64));
    if (word === null) break;
    words.push(word[0].toUpperCase());
    at += word[0].length;
  }
  const [first, second, third] = words;
  if ((first === 'ROLLBACK' || first === 'ABORT') && (second === 'TO' || ((second === 'WORK' || second === 'TRANSACTION') && third === 'TO'))) return false;
  if (first === 'START' || first === 'PREPARE') return second === 'TRANSACTION';
  return first === 'BEGIN' || first === 'COMMIT' || first === 'END' || first === 'ROLLBACK' || first === 'ABORT';
}

function afterComments(sql: string, from: number, postgres: boolean, semicolons: boolean): number {
  let at = from;
  for (;;) {
    while (at < sql.length && (/\s/.test(sql[at]!) || (semicolons && sql[at] === ';'))) at += 1;
    if (sql.startsWith('--', at)) {
      // PostgreSQL's line comment ends at a CR or an LF, SQLite's at an LF only (a CR inside it is still comment).
      const end = sql.slice(at).search(postgres ? /[\n\r]/ : /\n/);
      if (end < 0) return sql.length;
      at += end + 1;
    } else if (sql.startsWith('/*', at)) {
      let depth = 1;
      at += 2;
      while (at < sql.length && depth > 0) {
        if (postgres && sql.startsWith('/*', at)) {
          depth += 1;
          at += 2;
        } else if (sql.startsWith('*/', at)) {
          depth -= 1;
          at += 2;
        } else at += 1;
      }
    } else return at;
  }
}
