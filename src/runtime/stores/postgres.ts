/**
 * PostgreSQL idempotency store on `pg` (node-postgres). Imports only `../store.js` and `pg`'s types;
 * copied into users' generated code.
 *
 * ```ts
 * import pg from 'pg';
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
 * pool.on('error', (err) => log(err));  // idle clients of a pool that loses its server emit 'error'
 * const store = new PostgresStore(pool);
 * await store.migrate();                // CREATE TABLE / INDEX IF NOT EXISTS; or run PostgresStore.schemaSql()
 * ```
 *
 * A logged table with the record id as primary key. Reserve is one statement,
 * `INSERT … ON CONFLICT (id) DO UPDATE … WHERE <expired completed> RETURNING`, so of any number of
 * concurrent reservations exactly one returns a row; the same statement also returns the existing record
 * (one round trip for a replay). Completion, release and takeover are single `UPDATE`/`DELETE`
 * statements fenced by the lease token. Every statement is a named prepared statement (parsed and planned
 * once per connection; see {@link PostgresStoreOptions.preparedStatements} for poolers in transaction mode). Time is the server's (`clock_timestamp()`, in ms) unless a `clock` is injected.
 *
 * Batching (default): the reservations (and, separately, the completions) that concurrent requests ask for within one
 * turn of the event loop go to the server as one statement (a `VALUES` row per call, up to 16 rows) — one round
 * trip and one commit for all of them — with the same per-record semantics: each reservation is its own
 * `INSERT … ON CONFLICT` row (ids in sorted order, so two batches never wait on each other in a cycle), each
 * completion its own token-fenced row. A call alone in its turn, or a second call for an id already in the
 * batch, runs as its own statement. See {@link PostgresStoreOptions.batch}.
 */
import { createHash } from 'node:crypto';
import type { ClientBase, Pool, PoolClient, QueryResultRow } from 'pg';
import {
  HANDLER_COMMITTED,
  HANDLER_ENDED,
  StoreError,
  checkStoreName,
  cursorLease,
  isHandlerGivenUp,
  beginsOrEndsTransaction,
  queuePerTurn,
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
  type WithReservationOptions,
} from '../store.js';

/** What the store runs queries on: a `pg.Pool` (needed for one-transaction mode), or one connected `pg.Client`. */
export type PostgresQueryable = Pool | ClientBase;

// A Pool hands out clients; a Client's own connect() opens its single connection and must not be called.
function isPool(db: PostgresQueryable): db is Pool {
  return typeof (db as Partial<Pool>).connect === 'function' && typeof (db as Partial<Pool>).totalCount === 'number';
}

/** Options of {@link PostgresStore}. */
export interface PostgresStoreOptions {
  /** Table name, optionally schema-qualified (`idem.records`); letters, digits, `_` (default `idempotency_records`). */
  readonly table?: string;
  /** Injected clock (ms since the epoch) instead of the server's; for tests. */
  readonly clock?: () => number;
  /** One-transaction mode: longest wait on the row lock of a duplicate's open transaction (default 30000 ms). */
  readonly lockTimeoutMs?: number;
  /**
   * Batch the reservations, and the completions, asked for within one event-loop turn into one statement each
   * of up to 16 rows (default true). Concurrent requests then share a round trip and a commit, which cuts the
   * app's and the server's CPU per request; a call alone in its turn is sent alone, one turn later. Every call of
   * a batch waits for the whole statement. `false`: every call is its own statement, sent at once.
   */
  readonly batch?: boolean;
  /**
   * Named prepared statements, parsed once per connection (default true). `false` sends every statement unnamed
   * (parsed each time): for a pooler that hands each transaction another server connection — PgBouncer before 1.21
   * in `pool_mode = transaction`, Supavisor's transaction mode — where a named statement is missing on the next
   * connection (26000) or already there (42P05). The store also turns them off by itself at the first such error,
   * sending that statement again unnamed. A one-transaction request's completion is always sent unnamed (a failure
   * there would come after its handler ran); its reservation, failing so, is tried again in a new transaction.
   */
  readonly preparedStatements?: boolean;
}

/** A call waiting for the next batch. */
interface Queued<I, O> {
  readonly input: I;
  readonly resolve: (value: O) => void;
  readonly reject: (error: unknown) => void;
}

interface CompleteCall {
  readonly id: string;
  readonly token: string;
  readonly complete: CompleteInput;
}

interface Row extends QueryResultRow {
  id: string;
  operation: string;
  fingerprint: string;
  state: 'in_progress' | 'completed';
  lease_token: string;
  lease_until: string;
  expires_at: string;
  created_at: string;
  status: number | null;
  headers: Record<string, string> | null;
  body: Buffer | null;
  result_id: string | null;
  now?: string;
  reserved?: boolean;
}

/**
 * Most rows in one batched statement; a larger turn goes as several. Each size is its own prepared statement on
 * each connection (see `statements`), so this also bounds how many of them a connection holds.
 */
const MAX_BATCH_ROWS = 16;

// $1 is always the injected time or NULL for the server clock, in ms.
const NOW = `COALESCE($1::bigint, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)`;

/**
 * Makes the statement's own transaction commit durably whatever the session says: with `synchronous_commit =
 * off` (set for the server, the database, the role or the session) a server crash loses commits already
 * acknowledged — a lost reservation lets the retry run the effect again. Raised only from `off`, to `local`
 * (the commit waits for the local WAL flush; `on` and the standby levels stay as set), for the current
 * transaction only (`set_config(…, true)`). A column of every write's time row: volatile, so never optimised away.
 */
const DURABLE = `CASE WHEN current_setting('synchronous_commit') = 'off' THEN set_config('synchronous_commit', 'local', true) END`;

/** The time row every write statement reads its `now` from (as `c`), carrying {@link DURABLE} with it. */
const WRITE_CLOCK = `SELECT ${NOW} AS now, ${DURABLE} AS durable`;

/** PostgreSQL store. The caller creates and ends the pool; the store only borrows clients from it. */
export class PostgresStore implements TransactionalStore<PoolClient> {
  readonly #db: PostgresQueryable;
  readonly #table: string;
  readonly #clock: (() => number) | undefined;
  readonly #lockTimeoutMs: number;
  readonly #sql: ReturnType<typeof statements>;
  readonly #batch: boolean;
  #prepared: boolean;
  // The calls of one turn, sent as batches once the turn has asked all it will (see queuePerTurn).
  readonly #queueReserve = queuePerTurn<Queued<ReserveInput, ReserveResult>>((calls) => this.#reserveBatch(calls));
  readonly #queueComplete = queuePerTurn<Queued<CompleteCall, boolean>>((calls) => this.#completeBatch(calls));

  constructor(db: PostgresQueryable, options: PostgresStoreOptions = {}) {
    this.#db = db;
    this.#table = checkStoreName(options.table ?? 'idempotency_records', 'PostgreSQL table name', /^([A-Za-z_][A-Za-z0-9_]{0,62}\.)?[A-Za-z_][A-Za-z0-9_]{0,62}$/);
    this.#clock = options.clock;
    this.#lockTimeoutMs = Math.max(1, Math.floor(options.lockTimeoutMs ?? 30_000));
    this.#sql = statements(this.#table);
    this.#batch = options.batch ?? true;
    this.#prepared = options.preparedStatements ?? true;
  }

  /** The schema {@link PostgresStore.migrate} creates, for review or your own migration tool. */
  static schemaSql(table = 'idempotency_records'): string {
    const t = checkStoreName(table, 'PostgreSQL table name', /^([A-Za-z_][A-Za-z0-9_]{0,62}\.)?[A-Za-z_][A-Za-z0-9_]{0,62}$/);
    const i = t.replace(/^.*\./, '');
    return [
      `CREATE TABLE IF NOT EXISTS ${t} (`,
      `  id text PRIMARY KEY,`,
      `  operation text NOT NULL,`,
      `  fingerprint text NOT NULL,`,
      `  state text NOT NULL CHECK (state IN ('in_progress', 'completed')),`,
      `  lease_token text NOT NULL,`,
      `  lease_until bigint NOT NULL,`,
      `  expires_at bigint NOT NULL,`,
      `  created_at bigint NOT NULL,`,
      `  status integer,`,
      `  headers jsonb,`,
      `  body bytea,`,
      `  result_id text`,
      `);`,
      `CREATE INDEX IF NOT EXISTS ${i}_expiry ON ${t} (expires_at) WHERE state = 'completed';`,
      `CREATE INDEX IF NOT EXISTS ${i}_lease ON ${t} (lease_until) WHERE state = 'in_progress';`,
    ].join('\n');
  }

  /** Whether the table and both its indexes exist (a catalog read: it takes no lock on the table). */
  async #schemaPresent(client: ClientBase): Promise<boolean> {
    const schema = this.#table.includes('.') ? `${this.#table.replace(/\..*$/, '')}.` : '';
    const base = this.#table.replace(/^.*\./, '');
    const result = await client.query('SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL AND to_regclass($3) IS NOT NULL AS present', [
      this.#table,
      `${schema}${base}_expiry`,
      `${schema}${base}_lease`,
    ]);
    return result.rows[0]?.present === true;
  }

  /** Create the table and indexes if absent. Idempotent (also when two instances race). */
  async migrate(): Promise<void> {
    // Concurrent CREATE … IF NOT EXISTS can still collide on the catalog; an advisory lock orders them. The
    // lock, the DDL and the unlock must share one connection: a transaction-scoped lock on one checked-out
    // client, released by its COMMIT or ROLLBACK (a session lock taken and released through a pool could
    // land on two connections and stay held).
    const db = this.#db;
    let client: ClientBase;
    try {
      client = isPool(db) ? await db.connect() : db;
    } catch (error) {
      throw wrap(error);
    }
    let broken: unknown;
    // A checked-out client's connection may end under it (see withReservation): noted, never an unhandled 'error'.
    const onError = (error: Error): void => {
      broken ??= error;
    };
    if (client !== db) client.on('error', onError);
    try {
      // Already there (every start but the first): no DDL at all. `CREATE INDEX IF NOT EXISTS` on an existing index
      // still waits for a lock that any open transaction on the table holds — a one-transaction request of a running
      // instance — and every reservation then queues behind it: one instance starting in a rolling deploy made the
      // whole fleet answer 503 for as long as such a request ran (the deploy review's).
      if (await this.#schemaPresent(client)) return;
      await client.query('BEGIN');
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`idemkit:${this.#table}`]);
      await client.query(PostgresStore.schemaSql(this.#table));
      await client.query('COMMIT');
    } catch (error) {
      try {
        await client.query('ROLLBACK');
      } catch {
        broken = error;
      }
      // A role without the right to create (42501) on a table a migration of the DBA's made, its indexes named
      // otherwise: the table is there, so the store can run — DDL is not for it to insist on.
      if (broken === undefined && sqlState(error) === '42501' && (await tableUsable(client, this.#table))) return;
      throw wrap(error);
    } finally {
      if (client !== db) {
        client.off('error', onError);
        (client as PoolClient).release(broken === undefined ? undefined : broken instanceof Error ? broken : new Error('connection failed'));
      }
    }
  }

  reserve(input: ReserveInput): Promise<ReserveResult> {
    if (!this.#batch) return this.#reserveOn(this.#db, input);
    return new Promise<ReserveResult>((resolve, reject) => {
      this.#queueReserve({ input, resolve, reject });
    });
  }

  async complete(id: string, token: string, input: CompleteInput): Promise<boolean> {
    if (!this.#batch) return (await this.#completeOn(this.#db, id, token, input)) === 1;
    return new Promise<boolean>((resolve, reject) => {
      // The body is copied now, as the unbatched call does, so the caller may reuse its buffer.
      this.#queueComplete({ input: { id, token, complete: { ...input, response: { ...input.response, body: Buffer.from(input.response.body) } } }, resolve, reject });
    });
  }

  /**
   * Send one turn's calls of one kind: the distinct ids in sorted order (lock order), in statements of at most
   * {@link MAX_BATCH_ROWS} rows; a call for an id already taken, or a statement's worth of one call, alone.
   */
  static #dispatch<C extends { readonly input: { readonly id: string } }>(calls: readonly C[], alone: (call: C) => void, many: (batch: C[]) => void): void {
    const seen = new Set<string>();
    const distinct: C[] = [];
    for (const call of calls) {
      if (seen.has(call.input.id)) alone(call);
      else {
        seen.add(call.input.id);
        distinct.push(call);
      }
    }
    distinct.sort((a, b) => (a.input.id < b.input.id ? -1 : a.input.id > b.input.id ? 1 : 0));
    for (let start = 0; start < distinct.length; start += MAX_BATCH_ROWS) {
      const batch = distinct.slice(start, start + MAX_BATCH_ROWS);
      if (batch.length === 1) alone(batch[0]!);
      else many(batch);
    }
  }

  #reserveBatch(calls: Queued<ReserveInput, ReserveResult>[]): void {
    const alone = (call: Queued<ReserveInput, ReserveResult>): void => {
      this.#reserveOn(this.#db, call.input).then(call.resolve, call.reject);
    };
    PostgresStore.#dispatch(calls, alone, (batch) => {
      const values: unknown[] = [this.#now()];
      for (const { input: i } of batch) values.push(i.id, i.operation, i.fingerprint, i.token, i.leaseMs, i.ttlMs);
      this.#query(this.#sql.reserveMany(batch.length), values).then(
        (result) => {
          const rows = new Map<string, Row>();
          for (const row of result.rows) rows.set(row.id, row);
          for (const call of batch) {
            const row = rows.get(call.input.id);
            // No row: committed by a concurrent reservation after the statement's snapshot; read it as the single call does.
            if (row === undefined) alone(call);
            else call.resolve(reserveResultOf(row, call.input));
          }
        },
        () => {
          // A statement that failed as a whole changed nothing. Whatever failed it (a deadlock, a conflict the
          // batch could not arbitrate, one call's value the server rejects, a lost connection), each call is
          // tried again on its own: a bad row must not fail the other requests of the turn, and a call that
          // really cannot succeed fails alone, as it would have without batching.
          for (const call of batch) alone(call);
        },
      );
    });
  }

  #completeBatch(calls: Queued<CompleteCall, boolean>[]): void {
    const alone = (call: Queued<CompleteCall, boolean>): void => {
      this.#completeOn(this.#db, call.input.id, call.input.token, call.input.complete).then((count) => call.resolve(count === 1), call.reject);
    };
    PostgresStore.#dispatch(calls, alone, (batch) => {
      const values: unknown[] = [this.#now()];
      for (const { input: i } of batch) {
        values.push(i.id, i.token, i.complete.response.status, JSON.stringify(i.complete.response.headers), i.complete.response.body, i.complete.resultId ?? null, i.complete.ttlMs);
      }
      this.#query(this.#sql.completeMany(batch.length), values).then(
        (result) => {
          const done = new Set(result.rows.map((row) => row.id));
          for (const call of batch) call.resolve(done.has(call.input.id));
        },
        // As for reservations: the failed statement changed nothing, so each completion is tried on its own.
        () => {
          for (const call of batch) alone(call);
        },
      );
    });
  }

  async release(id: string, token: string): Promise<boolean> {
    const result = await this.#query(this.#sql.release, [id, token]);
    return result.rowCount === 1;
  }

  async takeover(id: string, fingerprint: string, staleToken: string, newToken: string, leaseMs: number): Promise<IdempotencyRecord | undefined> {
    const result = await this.#query(this.#sql.takeover, [this.#now(), id, fingerprint, staleToken, newToken, leaseMs]);
    const row = result.rows[0];
    return row === undefined ? undefined : toRecord(row);
  }

  /**
   * Lease heartbeat: one fenced UPDATE setting `lease_until = now + leaseMs` (server clock) while the
   * record is `in_progress` under `token` (also past the lease, as long as nobody took it over).
   */
  async extend(id: string, token: string, leaseMs: number): Promise<boolean> {
    const result = await this.#query(this.#sql.extend, [this.#now(), id, token, leaseMs]);
    return result.rowCount === 1;
  }

  async get(id: string): Promise<IdempotencyRecord | undefined> {
    const result = await this.#query(this.#sql.get, [id]);
    const row = result.rows[0];
    return row === undefined ? undefined : toRecord(row);
  }

  async listAbandoned(options: ListAbandonedOptions = {}): Promise<IdempotencyRecord[]> {
    const after = options.after;
    const result =
      after === undefined
        ? await this.#query(this.#sql.abandoned, [this.#now(), limitOf(options)])
        : await this.#query(this.#sql.abandonedAfter, [this.#now(), limitOf(options), cursorLease(after), after.id]);
    return result.rows.map(toRecord);
  }

  async purgeExpired(options: BatchOptions = {}): Promise<number> {
    const result = await this.#query(this.#sql.purge, [this.#now(), limitOf(options)]);
    return result.rowCount ?? 0;
  }

  async purgeAbandoned(options: BatchOptions = {}): Promise<number> {
    const result = await this.#query(this.#sql.purgeAbandoned, [this.#now(), limitOf(options)]);
    return result.rowCount ?? 0;
  }

  async now(): Promise<number> {
    const clock = this.#clock;
    if (clock !== undefined) return clock();
    const result = await this.#query(this.#sql.now, [null]);
    return Number(result.rows[0]!.now);
  }

  async withReservation<T>(input: ReserveInput, work: (reserved: ReserveResult, tx: PoolClient) => Promise<TransactionStep<T>>, options?: WithReservationOptions): Promise<T> {
    // A duplicate waits on the row lock no longer than its guard waits for it: past that the guard answers anyway, and a
    // statement still waiting would hold its pooled connection up to lockTimeoutMs — a few slow requests with their
    // duplicates then took every connection, and every other key got 503 (the chaos review's).
    const asked = options?.lockWaitMs;
    const lockTimeoutMs = asked !== undefined && Number.isFinite(asked) ? Math.max(1, Math.min(this.#lockTimeoutMs, Math.floor(asked))) : this.#lockTimeoutMs;
    const pool = this.#db;
    if (!isPool(pool)) throw new StoreError('unsupported', 'one-transaction mode needs a pg.Pool (the store borrows a client per transaction)');
    let client: PoolClient;
    try {
      client = await pool.connect();
    } catch (error) {
      throw wrap(error);
    }
    let broken: unknown;
    let givenUp = false;
    // While the handler holds the client, the server may end its connection (a restart, a failover,
    // `idle_in_transaction_session_timeout`): pg emits 'error' on the checked-out client, which crashes the process
    // without a listener (the pool listens only on idle clients). The client is then released as broken; the
    // statement in flight fails on its own, and the outcome is the guard's to answer.
    const onError = (error: Error): void => {
      broken ??= error;
    };
    client.on('error', onError);
    try {
      let reserved: ReserveResult | undefined;
      for (let attempt = 1; reserved === undefined; attempt += 1) {
        try {
          // One round trip for both (a simple-protocol query may hold several statements).
          await client.query(`BEGIN; SET LOCAL lock_timeout = ${lockTimeoutMs}`);
          // Waits here while another open transaction holds an uncommitted reservation of the same id.
          reserved = await this.#reserveOn(client, input);
        } catch (error) {
          const rolledBack = await rollback(client);
          if (!rolledBack) broken = error;
          // Under a `serializable` or `repeatable read` default a reservation fails so when a concurrent one commits
          // (a duplicate waiting on the first request's row lock, every time it commits): rolled back before any
          // handler ran, so it is tried again in a new transaction — it then sees the record, as a replay or a 409.
          const cause = error instanceof StoreError ? error.cause : error;
          // A server-side statement_timeout shorter than the guard's wait ended the wait on a duplicate's row lock (57014):
          // nothing ran yet, so it is the lock wait's answer (409 + Retry-After), not the store being down (503).
          if (rolledBack && sqlState(cause) === '57014') {
            throw new StoreError('lock-timeout', 'statement_timeout ended the wait for another transaction holding this key', { cause });
          }
          if (!rolledBack || attempt >= SERIALIZATION_ATTEMPTS || !(isSerializationFailure(cause) || isPreparedStatementMissing(cause))) throw wrap(error);
          await serializationPause(attempt);
        }
      }
      // The handler gets the client through a handle: it cannot release, end or end the transaction of the client the
      // store holds, and once given up it can send nothing more (a statement through a `query` it kept included).
      const handle = clientHandle(client);
      let step: TransactionStep<T>;
      try {
        step = await work(reserved, handle.tx);
      } catch (error) {
        // A handler given up at its bound may still be at work on this client. A ROLLBACK would end the transaction
        // under it, and its next statement — queued behind the ROLLBACK, or sent after it — ran on its own and
        // committed: an effect without its record, run again by the retry (a review's `pg_sleep` then INSERT). Instead
        // the handle is revoked (it refuses whatever comes after, and fails what pg had queued unsent), the statement
        // in flight is cancelled, and the client is then released as broken with the transaction open (see `finally`
        // below): pg ends the connection and the server rolls the transaction back with the session.
        givenUp = isHandlerGivenUp(error);
        if (givenUp) {
          // The client stays connected until its cancel is through (below): nothing the handler sends meanwhile may
          // reach the server. The cancelled statement fails in the handler, whose own error path then sent ROLLBACK
          // and a write — committed on its own, without the record (a review's, with Drizzle's transaction() too).
          handle.revoke();
          broken = error;
          throw error;
        }
        handle.end();
        const ended = transactionEnded(client);
        if (!(await rollback(client))) {
          broken = error;
          throw error;
        }
        throw (await this.#keptByHandler(client, reserved, input, ended, error)) ?? error;
      }
      handle.end();
      try {
        // A COMMIT or ROLLBACK that reached the server some way the handle does not see (several statements in one
        // string) ended the transaction: the handler's writes and the reservation are committed or undone already. A
        // committed reservation is completed on its own, so the retry replays; one undone leaves nothing to complete.
        const ended = transactionEnded(client);
        if (step.commit) {
          if ((await this.#completeOn(client, input.id, input.token, step.complete)) !== 1) {
            throw new StoreError('unavailable', ended ? "the handler ended the store's transaction itself (a ROLLBACK through tx)" : 'the reservation disappeared inside its own transaction');
          }
          if (!ended) await client.query('COMMIT');
        } else {
          if (!ended) await client.query('ROLLBACK');
          const kept = await this.#keptByHandler(client, reserved, input, ended);
          if (kept !== undefined) throw kept;
        }
      } catch (error) {
        if (!(await rollback(client))) broken = error;
        throw wrap(error);
      }
      return step.value;
    } finally {
      const release = (): void => {
        client.off('error', onError);
        // A client whose connection failed mid-transaction is destroyed rather than returned to the pool.
        client.release(broken === undefined ? undefined : broken instanceof Error ? broken : new Error('connection failed'));
      };
      // A statement in flight outlives its socket: the server runs it to its end before it sees the connection gone,
      // holding the key's row lock and a server connection the pool no longer counts — it opens another in its place,
      // so given-up handlers in long statements took the server past max_connections (a review's: pool max 5, 120
      // handlers in pg_sleep, then 53300 for everyone). A cancel request ends the statement first, the client still
      // held: a pooler forwards it only while the client it came from is connected (a review's PgBouncer, 30 handlers
      // on a pool of 3 server connections: 32 backends, until the cancel came before the release). The error is the
      // caller's at once; the pool's slot is given back when the cancel is done.
      if (givenUp) {
        void cancelStatement(pool, client).then(() => {
          try {
            release();
          } catch {
            // Released already (never by the handler, whose handle does not release): nothing to give back.
          }
        });
      } else release();
    }
  }

  #now(): number | null {
    return this.#clock === undefined ? null : this.#clock();
  }

  /**
   * After the rollback of a one-transaction request whose handler failed or answered 5xx: whether the handler made it
   * other than "nothing happened". `ended`: the server said the transaction was over before the store's ROLLBACK — a
   * COMMIT or ROLLBACK hidden among a string's statements, after which a write in the same string ran on its own. A
   * reservation that outlived the rollback was committed by the handler (a hidden COMMIT, or `COMMIT; BEGIN` and
   * `COMMIT AND CHAIN`, which leave a transaction open): its writes before that COMMIT stand, so the record is kept,
   * its lease ended at once — the key goes to reconciliation (or 409 abandoned), never to a retry that runs the
   * effect again (a review's: the retry past the lease ran it twice). Either way an error for the caller, the outcome
   * being unknown; undefined when the rollback undid everything. One statement, on the failure path only.
   */
  async #keptByHandler(client: PoolClient, reserved: ReserveResult, input: ReserveInput, ended: boolean, cause?: unknown): Promise<StoreError | undefined> {
    if (reserved.outcome !== 'reserved') return undefined;
    let kept: boolean;
    try {
      kept = (await this.#query(this.#sql.extend, [this.#now(), input.id, input.token, 0], client, true)).rowCount === 1;
    } catch (error) {
      return new StoreError('unavailable', "could not tell whether the handler's transaction was rolled back", { cause: error });
    }
    if (kept) return new StoreError('unavailable', HANDLER_COMMITTED, { cause });
    return ended ? new StoreError('unavailable', HANDLER_ENDED, { cause }) : undefined;
  }

  async #reserveOn(db: PostgresQueryable, input: ReserveInput): Promise<ReserveResult> {
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const now = this.#now();
      const result = await this.#query(
        this.#sql.reserve,
        [now, input.id, input.operation, input.fingerprint, input.token, input.leaseMs, input.ttlMs],
        db,
      );
      const row = result.rows[0];
      if (row !== undefined) return reserveResultOf(row, input);
      // No row: the conflicting record was committed after the statement's snapshot (a concurrent
      // reservation), so its read could not see it. Read it with a fresh snapshot.
      const existing = await this.#query(this.#sql.existing, [now, input.id], db);
      const found = existing.rows[0];
      if (found !== undefined) return { outcome: 'existing', record: toRecord(found), now: Number(found.now) };
      // Released or purged between the two statements: try again.
    }
    throw new StoreError('unavailable', 'the record kept changing under the reservation');
  }

  async #completeOn(db: PostgresQueryable, id: string, token: string, input: CompleteInput): Promise<number> {
    const result = await this.#query(
      this.#sql.complete,
      [this.#now(), id, token, input.response.status, JSON.stringify(input.response.headers), Buffer.from(input.response.body), input.resultId ?? null, input.ttlMs],
      db,
      true,
    );
    return result.rowCount ?? 0;
  }

  async #query(statement: Named, values: unknown[], db: PostgresQueryable = this.#db, afterHandler = false): Promise<{ rows: Row[]; rowCount: number | null }> {
    for (let attempt = 1; ; attempt += 1) {
      // A one-transaction request's completion (after its handler ran) always unnamed: behind a pooler in transaction
      // mode a named statement missing on the pinned connection would fail it, rolling the transaction back — and the
      // retry would run the handler's effects outside `tx` again (a diff review's). Its reservation stays named (its
      // plan is the dear one: unnamed, the server's CPU per request tripled); one failing so is tried again unnamed.
      const prepared = this.#prepared && !(afterHandler && db !== this.#db);
      try {
        return await db.query<Row>(prepared ? { name: statement.name, text: statement.text, values } : { text: statement.text, values });
      } catch (error) {
        // A pooler in transaction mode (PgBouncer < 1.21): the server connection is another one than the one the
        // statement was prepared on. Named statements are off from now on; a statement of its own, which never ran
        // (the server refused it at Parse or Bind), is sent again unnamed.
        if (prepared && isPreparedStatementMissing(error)) {
          this.#prepared = false;
          if (db === this.#db) {
            attempt -= 1;
            continue;
          }
        }
        // A statement of its own (not one of a one-transaction request's) that the server rolled back for a
        // serialization failure or a deadlock changed nothing, and is sent again: with the server's default isolation
        // at `serializable` (or `repeatable read`), concurrent statements on other keys fail so now and then (SSI's
        // page-level predicate locks), which answered 503s to fresh requests and left completed effects unrecorded.
        if (db !== this.#db || attempt >= SERIALIZATION_ATTEMPTS || !isSerializationFailure(error)) throw wrap(error);
        await serializationPause(attempt);
      }
    }
  }
}

/** A named prepared statement: `pg` parses it once per connection and then only binds and executes it. */
interface Named {
  readonly name: string;
  readonly text: string;
}

// The name is derived from the text, so two stores (or tables) never reuse a name for another statement.
function named(text: string): Named {
  return { name: `idemkit_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`, text };
}

// The statements fenced by id and lease token test `state <> 'completed'` (the CHECK makes it `in_progress`), never
// `state = 'in_progress'`: that is the lease index's predicate, and a plan of a statistics run that saw no record in
// progress (a new table, or a big one with few requests in flight) scanned the whole lease index with the id as a mere
// filter — slow (16 ms for a lease renewal over 100k records), and under SSI (`serializable`) a read of every record
// in progress, so concurrent one-transaction requests of distinct keys failed each other's commits (91 of 100).
function statements(t: string) {
  // The arbitration both forms of reserve share: a conflicting row is taken over only when it is a completed
  // record past its retention; the answer is the live record read before (all of it), or for a reservation only
  // its id and time: the caller knows every other field it just wrote (reservedRecord), so the row that every
  // fresh request gets back carries no text the driver would decode for nothing.
  const takeExpiredAndAnswer = `ON CONFLICT (id) DO UPDATE SET
          operation = EXCLUDED.operation, fingerprint = EXCLUDED.fingerprint, state = 'in_progress',
          lease_token = EXCLUDED.lease_token, lease_until = EXCLUDED.lease_until, expires_at = EXCLUDED.expires_at,
          created_at = EXCLUDED.created_at, status = NULL, headers = NULL, body = NULL, result_id = NULL
        WHERE r.state = 'completed' AND r.expires_at <= EXCLUDED.created_at
        RETURNING r.id, r.created_at)
      SELECT ins.id, ${RESERVED_NULLS}, ins.created_at AS now, true AS reserved FROM ins
      UNION ALL
      SELECT ${RECORD_COLUMNS.map((column) => `cur.${column}`).join(', ')}, c.now, false AS reserved FROM cur, c`;
  const texts = {
    // Inserts (or takes over an expired completed record) and returns it with reserved = true; otherwise
    // returns the existing record with reserved = false. A record that is live in the statement's snapshot
    // is returned without attempting the insert, so a replay takes no row lock and writes nothing. The
    // INSERT … ON CONFLICT still arbitrates every attempt: of concurrent reservations exactly one returns a
    // row, and an in_progress record is never overwritten. A record committed by a concurrent reservation
    // after the snapshot is invisible to the read (no row: the caller reads again).
    reserve: `
      WITH c AS (${WRITE_CLOCK}),
      cur AS (
        SELECT r.* FROM ${t} r, c WHERE r.id = $2 AND NOT (r.state = 'completed' AND r.expires_at <= c.now)),
      ins AS (
        INSERT INTO ${t} AS r (id, operation, fingerprint, state, lease_token, lease_until, expires_at, created_at)
        SELECT $2, $3, $4, 'in_progress', $5, c.now + $6::bigint, c.now + $7::bigint, c.now FROM c
        WHERE NOT EXISTS (SELECT 1 FROM cur)
        ${takeExpiredAndAnswer}`,
    existing: `SELECT r.*, ${NOW} AS now FROM ${t} r WHERE r.id = $2`,
    get: `SELECT * FROM ${t} WHERE id = $1`,
    now: `SELECT ${NOW} AS now`,
    complete: `
      UPDATE ${t} SET state = 'completed', status = $4, headers = $5::jsonb, body = $6, result_id = $7, expires_at = c.now + $8::bigint
      FROM (${WRITE_CLOCK}) c
      WHERE id = $2 AND lease_token = $3 AND state <> 'completed'`,
    release: `DELETE FROM ${t} USING (SELECT ${DURABLE} AS durable) d WHERE id = $1 AND lease_token = $2 AND state <> 'completed'`,
    takeover: `
      UPDATE ${t} AS r SET lease_token = $5, lease_until = c.now + $6::bigint, created_at = c.now
      FROM (${WRITE_CLOCK}) c
      WHERE r.id = $2 AND r.fingerprint = $3 AND r.lease_token = $4 AND r.state <> 'completed' AND r.lease_until <= c.now
      RETURNING r.*`,
    extend: `
      UPDATE ${t} SET lease_until = c.now + $4::bigint
      FROM (${WRITE_CLOCK}) c
      WHERE id = $2 AND lease_token = $3 AND state <> 'completed'`,
    abandoned: `
      SELECT r.* FROM ${t} r, (SELECT ${NOW} AS now) c
      WHERE r.state = 'in_progress' AND r.lease_until <= c.now ORDER BY r.lease_until, r.id LIMIT $2`,
    // The next page: after the cursor's (lease_until, id), in the same order (lease_until >= $3 keeps the lease index).
    abandonedAfter: `
      SELECT r.* FROM ${t} r, (SELECT ${NOW} AS now) c
      WHERE r.state = 'in_progress' AND r.lease_until <= c.now
        AND r.lease_until >= $3 AND (r.lease_until > $3 OR r.id > $4)
      ORDER BY r.lease_until, r.id LIMIT $2`,
    // Batched, and SKIP LOCKED so two purgers (or a purger and a reservation) never wait on each other.
    purge: `
      DELETE FROM ${t} WHERE id IN (
        SELECT r.id FROM ${t} r, (SELECT ${NOW} AS now) c
        WHERE r.state = 'completed' AND r.expires_at <= c.now ORDER BY r.expires_at LIMIT $2 FOR UPDATE OF r SKIP LOCKED)`,
    purgeAbandoned: `
      DELETE FROM ${t} WHERE id IN (
        SELECT r.id FROM ${t} r, (SELECT ${NOW} AS now) c
        WHERE r.state = 'in_progress' AND r.lease_until <= c.now AND r.expires_at <= c.now
        ORDER BY r.lease_until LIMIT $2 FOR UPDATE OF r SKIP LOCKED)`,
  };
  const fixed = Object.fromEntries(Object.entries(texts).map(([key, text]) => [key, named(text)])) as { readonly [K in keyof typeof texts]: Named };
  // The batched forms, one statement per batch size: `rows` rows of scalar parameters after $1 (the time).
  // Scalars, not arrays: over arrays the planner knows each batch's length only when it plans for the
  // values, so PostgreSQL re-planned the statement at every execution (a custom plan, dearer than the
  // batch saved); with one statement per size the generic plan is as good and is kept.
  // Each row's record is found by its own `id = $n` (a UNION ALL of lookups, an UPDATE per row), never by `id IN (…)`
  // or a join on the VALUES list: the generic plan is made while the table is new (never analyzed, taken for 10
  // pages), and for 16 ids a sequential scan of 10 pages is cheaper than 16 index lookups — a plan then kept until
  // autovacuum first analyzes the table (a minute or more), while every batch read every record: 20 ms a batch at
  // 24,000 records, a launch burst slowed by its own records. One id's lookup is an index scan on a table never analyzed;
  // one analyzed while it held a page or two gets sequential scans for single and batched statements alike until its next
  // analyze (kept generic plans, as for any prepared statement), where a batch now costs what its calls alone would.
  const batched = (build: (rows: number) => string) => {
    const cache: Named[] = [];
    return (rows: number): Named => (cache[rows] ??= named(build(rows)));
  };
  return {
    ...fixed,
    // One row per distinct id, ids sorted (lock order); each row its own ON CONFLICT arbitration.
    reserveMany: batched((rows) => `
      WITH c AS (${WRITE_CLOCK}),
      i (id, operation, fingerprint, token, lease_ms, ttl_ms) AS (VALUES ${valueRows(rows, ['text', 'text', 'text', 'text', 'bigint', 'bigint'])}),
      cur AS (
        SELECT r.* FROM (${Array.from({ length: rows }, (_, j) => `SELECT * FROM ${t} WHERE id = $${2 + 6 * j}`).join(' UNION ALL ')}) r, c
        WHERE NOT (r.state = 'completed' AND r.expires_at <= c.now)),
      ins AS (
        INSERT INTO ${t} AS r (id, operation, fingerprint, state, lease_token, lease_until, expires_at, created_at)
        SELECT i.id, i.operation, i.fingerprint, 'in_progress', i.token, c.now + i.lease_ms, c.now + i.ttl_ms, c.now FROM i, c
        WHERE NOT EXISTS (SELECT 1 FROM cur WHERE cur.id = i.id)
        ORDER BY i.id
        ${takeExpiredAndAnswer}`),
    // Each row fenced by its own token, in an UPDATE of its own (see above); returns the ids it completed.
    completeMany: batched((rows) => {
      const updates = Array.from({ length: rows }, (_, j) => {
        const [id, token, status, headers, body, resultId, ttlMs] = Array.from({ length: 7 }, (_, k) => `$${2 + 7 * j + k}`);
        return `
      u${j} AS (
        UPDATE ${t} AS r SET state = 'completed', status = ${status}::int, headers = ${headers}::text::jsonb, body = ${body}::bytea,
          result_id = ${resultId}::text, expires_at = (SELECT now FROM c) + ${ttlMs}::bigint
        WHERE r.id = ${id}::text AND r.lease_token = ${token}::text AND r.state <> 'completed'
        RETURNING r.id)`;
      });
      return `
      WITH c AS (${WRITE_CLOCK}),${updates.join(',')}
      ${updates.map((_, j) => `SELECT id FROM u${j}`).join(' UNION ALL ')}`;
    }),
  };
}

/** `($2::a, $3::b, …), (…)`: `rows` rows of typed parameters, numbered from $2. */
function valueRows(rows: number, types: readonly string[]): string {
  return Array.from({ length: rows }, (_, j) => `(${types.map((type, k) => `$${2 + types.length * j + k}::${type}`).join(', ')})`).join(', ');
}

/** The record's columns and types, in the order a reservation's answer lists them (`SELECT *` would follow the table's own order). */
const RECORD_COLUMN_TYPES: readonly (readonly [string, string])[] = [
  ['id', 'text'], ['operation', 'text'], ['fingerprint', 'text'], ['state', 'text'], ['lease_token', 'text'], ['lease_until', 'bigint'],
  ['expires_at', 'bigint'], ['created_at', 'bigint'], ['status', 'integer'], ['headers', 'jsonb'], ['body', 'bytea'], ['result_id', 'text'],
];
const RECORD_COLUMNS = RECORD_COLUMN_TYPES.map(([column]) => column);

/**
 * The columns after `id` of a reservation's answer row, named as the existing record's (a UNION's rows take the
 * first branch's names): NULL, the record being the caller's own, as it wrote it.
 */
const RESERVED_NULLS = RECORD_COLUMN_TYPES.slice(1).map(([column, type]) => `NULL::${type} AS ${column}`).join(', ');

/** A reservation's answer: `input` reserved at the row's time (the record exactly as the statement wrote it), or the existing record. */
function reserveResultOf(row: Row, input: ReserveInput): ReserveResult {
  if (row.reserved === true) {
    const now = Number(row.now);
    return { outcome: 'reserved', record: reservedRecord(input, now), now };
  }
  return { outcome: 'existing', record: toRecord(row), now: Number(row.now) };
}

function limitOf(options: BatchOptions): number {
  return Math.max(1, Math.floor(options.limit ?? 500));
}

/** Roll back; false when the connection itself is gone (the server then rolls back on its own). */
async function rollback(client: PoolClient): Promise<boolean> {
  try {
    await client.query('ROLLBACK');
    return true;
  } catch {
    return false;
  }
}

/**
 * Cancel what runs on `client`'s server session (the protocol's CancelRequest, on a connection of its own through the
 * pool's own client class and options: it takes no pool slot and needs no login). Resolves, never rejects, once the
 * server has closed that connection (it has then signalled the backend) or after {@link CANCEL_WAIT_MS}: a failure
 * only leaves the statement to run to its end, as without it.
 */
function cancelStatement(pool: Pool, client: PoolClient): Promise<void> {
  const { processID, secretKey } = client as unknown as { processID?: unknown; secretKey?: unknown };
  if (typeof processID !== 'number' || secretKey === null || secretKey === undefined) return Promise.resolve();
  const Client = (pool as unknown as { Client?: new (options: unknown) => unknown }).Client;
  let connection: CancelConnection | undefined;
  let host: unknown;
  let port: unknown;
  try {
    if (typeof Client !== 'function') return Promise.resolve();
    const canceller = new Client((pool as unknown as { options?: unknown }).options) as { connection?: CancelConnection; host?: unknown; port?: unknown; sslNegotiation?: unknown };
    // Direct TLS starts its handshake on connect, where the request would go out in the clear over it.
    if (canceller.sslNegotiation === 'direct') return Promise.resolve();
    ({ connection, host, port } = canceller);
  } catch {
    return Promise.resolve();
  }
  if (connection === undefined || typeof connection.cancel !== 'function' || typeof connection.connect !== 'function') return Promise.resolve();
  const con = connection;
  return new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      con.stream?.destroy?.();
      resolve();
    }, CANCEL_WAIT_MS);
    timer.unref?.();
    const done = (): void => {
      clearTimeout(timer);
      resolve();
    };
    con.on('error', () => undefined);
    con.once('end', done);
    con.once('connect', () => {
      try {
        con.cancel(processID, secretKey);
      } catch {
        con.stream?.destroy?.();
      }
    });
    try {
      if (typeof host === 'string' && host.startsWith('/')) con.connect(`${host}/.s.PGSQL.${String(port)}`);
      else con.connect(port, host);
      // A server that never answers must not keep the process alive past its own work.
      con.stream?.unref?.();
    } catch {
      done();
    }
  });
}

/**
 * `client` for one handler: a proxy over a stand-in of its prototype (`instanceof pg.Client` holds) whose `query` runs
 * on the client until revoked, then refuses — promise, callback and submittable (cursor, stream) forms alike — and
 * whose other members are the client's until then. Statements that would end the store's transaction are refused
 * (an ORM's `transaction()` on a client sends BEGIN then COMMIT: the reservation committed half-way, without its
 * record — a review's Drizzle); `release()` and `end()` do nothing (the store gives the client back: a handler's
 * release put it back in the pool mid-transaction, and after a give-up crashed the process on the store's own).
 * `revoke` also fails what was queued behind the statement in flight, unsent; `end` stops the handle without that.
 */
function clientHandle(client: PoolClient): { tx: PoolClient; revoke: () => void; end: () => void } {
  let ended: 'no' | 'returned' | 'given-up' | 'by-handler' = 'no';
  const refusal = (): Error =>
    ended === 'given-up'
      ? new Error("idempotency: this request's handler was given up at its bound and its transaction is rolled back: `tx` is no longer usable")
      : ended === 'by-handler'
        ? new Error("idempotency: the handler ended the store's transaction (a COMMIT or ROLLBACK through tx): nothing more goes out through `tx`")
        : new Error("idempotency: this request's transaction has ended (its handler returned): `tx` is no longer usable");
  const { connection } = client as unknown as { connection?: unknown };
  const fail = (query: unknown, error: Error): void => {
    const handleError = (query as { handleError?: unknown } | null)?.handleError;
    if (typeof handleError === 'function') queueMicrotask(() => (handleError as (error: Error, connection: unknown) => void).call(query, error, connection));
  };
  // Answers `args` (a `query` call's) with `error` in the form it was asked in.
  const refuse = (args: unknown[], error: Error): unknown => {
    const first = args[0] as { submit?: unknown } | null | undefined;
    if (first !== null && typeof first === 'object' && typeof first.submit === 'function') {
      fail(first, error);
      return first;
    }
    const callback = args[args.length - 1];
    if (typeof callback === 'function') {
      queueMicrotask(() => (callback as (error: Error) => void)(error));
      return undefined;
    }
    return Promise.reject(error);
  };
  // Whether the transaction is still the store's, read when a statement is about to go out: the server's last word
  // on it (a COMMIT or ROLLBACK hidden in an earlier string ended it) or the handle ended.
  const usable = (): boolean => {
    if (ended === 'no' && transactionEnded(client)) ended = 'by-handler';
    return ended === 'no';
  };
  const queue = (client as unknown as { _queryQueue?: unknown })._queryQueue;
  // pg sends a queued statement once the one before it is answered: checked then, not when it was queued. Two
  // statements queued together — `Promise.all([tx.query('SELECT 1; ROLLBACK'), tx.query('INSERT …')])` — passed the
  // check while the first was unsent, and the INSERT then ran on its own after the ROLLBACK, without the record (a
  // review's). The queued statement's `submit` (pg's own hook: an error it returns fails the statement unsent) is
  // wrapped for its turn.
  const checkWhenSent = (queued: unknown): void => {
    const target = queued as { submit?: unknown } | null;
    if (target === null || typeof target !== 'object' || typeof target.submit !== 'function') return;
    const own = Object.prototype.hasOwnProperty.call(target, 'submit');
    const submit = target.submit as (connection: unknown) => unknown;
    target.submit = function (this: unknown, connection: unknown): unknown {
      if (own) target.submit = submit;
      else delete target.submit;
      return usable() ? submit.call(this, connection) : refusal();
    };
  };
  // A client in pg's pipeline mode writes every statement at once, before the one ahead is answered: through the
  // handle each waits for the one before it instead, so the check above still comes between them.
  let previous: Promise<unknown> = Promise.resolve();
  const pipelined = (args: unknown[]): unknown => {
    const callback = typeof args[args.length - 1] === 'function' ? (args.pop() as (error: Error | null, result?: unknown) => void) : undefined;
    const sent = previous.then((): unknown => send(args));
    previous = sent.catch((): undefined => undefined);
    if (callback === undefined) return sent;
    sent.then(
      (result) => callback(null, result),
      (error: Error) => callback(error),
    );
    return undefined;
  };
  const query = (...args: unknown[]): unknown => {
    const first = args[0] as { submit?: unknown } | null | undefined;
    const submittable = first !== null && typeof first === 'object' && typeof first.submit === 'function';
    if (!submittable && (client as unknown as { pipeline?: unknown }).pipeline === true) return pipelined(args);
    return send(args);
  };
  const send = (args: unknown[]): unknown => {
    if (!usable()) return refuse(args, refusal());
    const first = args[0] as { text?: unknown } | string | null | undefined;
    const text = typeof first === 'string' ? first : typeof first === 'object' && first !== null && typeof first.text === 'string' ? first.text : undefined;
    if (text !== undefined && beginsOrEndsTransaction(text, true)) {
      return refuse(
        args,
        new Error(
          "idempotency: the store owns this request's transaction (the key's record commits with your writes): a handler must not BEGIN, COMMIT or ROLLBACK it — use SAVEPOINT and ROLLBACK TO SAVEPOINT for a part you may undo, and run an ORM's queries on tx without its own transaction()",
        ),
      );
    }
    const waiting = Array.isArray(queue) ? queue.length : -1;
    const result = (client.query as (...a: unknown[]) => unknown)(...args);
    if (Array.isArray(queue) && queue.length === waiting + 1) checkWhenSent(queue[queue.length - 1]);
    // A COMMIT or ROLLBACK the check above did not see (a second statement in one string): the transaction is over,
    // and nothing more goes out through the handle — a write after it would commit on its own.
    if (result instanceof Promise) {
      return result.then((answer: unknown) => {
        if (transactionEnded(client) && ended === 'no') ended = 'by-handler';
        return answer;
      });
    }
    return result;
  };
  const release = (): void => undefined;
  const endClient = (): Promise<void> => Promise.resolve();
  const methods = new Map<PropertyKey, { member: unknown; call: (...args: unknown[]) => unknown }>();
  const tx = new Proxy(Object.create(Object.getPrototypeOf(client) as object | null) as object, {
    get(_standIn, property) {
      if (property === 'query') return query;
      if (property === 'release') return release;
      if (property === 'end') return endClient;
      if (typeof property === 'symbol' || property in Object.prototype) return Reflect.get(client, property, client);
      if (ended !== 'no') throw refusal();
      const member = Reflect.get(client, property, client) as unknown;
      if (typeof member !== 'function') return member;
      let method = methods.get(property);
      if (method === undefined || method.member !== member) {
        const call = (...args: unknown[]): unknown => {
          if (ended !== 'no') throw refusal();
          const result = Reflect.apply(member as (...a: unknown[]) => unknown, client, args);
          return result === client ? tx : result;
        };
        method = { member, call };
        methods.set(property, method);
      }
      return method.call;
    },
    set(_standIn, property, value) {
      if (ended !== 'no') throw refusal();
      return Reflect.set(client, property, value, client);
    },
    has(_standIn, property) {
      return Reflect.has(client, property);
    },
  }) as PoolClient;
  return {
    tx,
    revoke: () => {
      ended = 'given-up';
      // pg sends the next queued statement once the one in flight is answered (its own queue, not part of its API).
      const queue = (client as unknown as { _queryQueue?: unknown })._queryQueue;
      if (Array.isArray(queue)) for (const queued of queue.splice(0)) fail(queued, refusal());
    },
    end: () => {
      if (ended === 'no') ended = 'returned';
    },
  };
}

/** Whether the server says the client is no longer in a transaction (pg 8.23's `getTransactionStatus`; 'I' idle). */
function transactionEnded(client: PoolClient): boolean {
  const status = (client as unknown as { getTransactionStatus?: () => unknown }).getTransactionStatus;
  return typeof status === 'function' && status.call(client) === 'I';
}

/** The longest a cancel request holds the given-up client before it is released anyway. */
const CANCEL_WAIT_MS = 5_000;

/** The part of node-postgres's Connection a cancel request uses. */
interface CancelConnection {
  connect(port: unknown, host?: unknown): void;
  cancel(processID: number, secretKey: unknown): void;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  once(event: string, listener: (...args: unknown[]) => void): unknown;
  stream?: { destroy?: () => void; unref?: () => void };
}

/** Whether `table` exists and this role may read and write it (a catalog read); false when it cannot be told. */
async function tableUsable(client: ClientBase, table: string): Promise<boolean> {
  try {
    const sql = `SELECT CASE WHEN to_regclass($1) IS NULL THEN false ELSE has_table_privilege($1, 'SELECT') AND has_table_privilege($1, 'INSERT') AND has_table_privilege($1, 'UPDATE') AND has_table_privilege($1, 'DELETE') END AS present`;
    return (await client.query(sql, [table])).rows[0]?.present === true;
  } catch {
    return false;
  }
}

/**
 * Attempts of a statement that a serialization failure or a deadlock rolled back (see `#query`): 5 with pauses of a few
 * ms let one of 1,600 statements fail in a loaded test run (200 concurrent reservations under `serializable`, the
 * conflicts recurring while the load lasted); 10, the pauses doubling, span about a quarter of a second at most.
 */
const SERIALIZATION_ATTEMPTS = 10;

/** Random ms, up to twice as many each attempt (2, 4, 8 … at most 50), before a rolled-back statement goes again. */
function serializationPause(attempt: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(50, 2 ** attempt)));
}

/** 26000 invalid_sql_statement_name, 42P05 duplicate_prepared_statement: a pooler swapped the server connection. */
function isPreparedStatementMissing(error: unknown): boolean {
  const code = sqlState(error);
  return code === '26000' || code === '42P05';
}

/** 40001 serialization_failure, 40P01 deadlock_detected: the server rolled the transaction back, nothing changed. */
function isSerializationFailure(error: unknown): boolean {
  const code = sqlState(error);
  return code === '40001' || code === '40P01';
}

/** The `code` a `pg` error carries (its SQLSTATE, or a Node errno), if any. */
function sqlState(error: unknown): unknown {
  return (error as { code?: unknown } | null | undefined)?.code;
}

function wrap(error: unknown): StoreError {
  if (error instanceof StoreError) return error;
  const code = sqlState(error);
  // 55P03 lock_not_available: lock_timeout ran out waiting for a duplicate's open transaction.
  if (code === '55P03') return new StoreError('lock-timeout', 'waited too long for another transaction holding this key', { cause: error });
  return new StoreError('unavailable', `PostgreSQL store operation failed${typeof code === 'string' ? ` (${code})` : ''}`, { cause: error });
}

function toRecord(row: Row): IdempotencyRecord {
  return recordFromRow(row, (stored) => stored ?? {});
}
