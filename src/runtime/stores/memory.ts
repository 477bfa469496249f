/**
 * In-memory idempotency store: one process only, for development and tests. Records vanish with the
 * process, so never use it where two app instances share traffic. Imports only `../store.js`.
 */
import {
  cursorLease,
  reservedRecord,
  type BatchOptions,
  type CompleteInput,
  type IdempotencyRecord,
  type ListAbandonedOptions,
  type IdempotencyStore,
  type ReserveInput,
  type ReserveResult,
} from '../store.js';

/** Options of {@link MemoryStore}. */
export interface MemoryStoreOptions {
  /** Clock in ms since the epoch (default `Date.now`); tests inject one. */
  readonly clock?: () => number;
}

/**
 * A `Map` of records. Every method does its check-and-write synchronously before its first `await`,
 * so on Node's single thread each one is atomic.
 */
export class MemoryStore implements IdempotencyStore {
  readonly #records = new Map<string, IdempotencyRecord>();
  readonly #clock: () => number;

  constructor(options: MemoryStoreOptions = {}) {
    this.#clock = options.clock ?? Date.now;
  }

  async reserve(input: ReserveInput): Promise<ReserveResult> {
    const now = this.#clock();
    const existing = this.#records.get(input.id);
    if (existing !== undefined && !(existing.state === 'completed' && existing.expiresAt <= now)) {
      return { outcome: 'existing', record: copy(existing), now };
    }
    const record = reservedRecord(input, now);
    this.#records.set(input.id, record);
    return { outcome: 'reserved', record: copy(record), now };
  }

  async complete(id: string, token: string, input: CompleteInput): Promise<boolean> {
    const existing = this.#records.get(id);
    if (existing === undefined || existing.state !== 'in_progress' || existing.leaseToken !== token) return false;
    const now = this.#clock();
    this.#records.set(id, {
      ...existing,
      state: 'completed',
      expiresAt: now + input.ttlMs,
      response: {
        status: input.response.status,
        headers: { ...input.response.headers },
        body: new Uint8Array(input.response.body),
      },
      ...(input.resultId !== undefined ? { resultId: input.resultId } : {}),
    });
    return true;
  }

  async release(id: string, token: string): Promise<boolean> {
    const existing = this.#records.get(id);
    if (existing === undefined || existing.state !== 'in_progress' || existing.leaseToken !== token) return false;
    this.#records.delete(id);
    return true;
  }

  async takeover(id: string, fingerprint: string, staleToken: string, newToken: string, leaseMs: number): Promise<IdempotencyRecord | undefined> {
    const existing = this.#records.get(id);
    const now = this.#clock();
    if (
      existing === undefined ||
      existing.state !== 'in_progress' ||
      existing.leaseToken !== staleToken ||
      existing.fingerprint !== fingerprint ||
      existing.leaseUntil > now
    ) {
      return undefined;
    }
    const record: IdempotencyRecord = { ...existing, leaseToken: newToken, leaseUntil: now + leaseMs, createdAt: now };
    this.#records.set(id, record);
    return copy(record);
  }

  async extend(id: string, token: string, leaseMs: number): Promise<boolean> {
    const existing = this.#records.get(id);
    if (existing === undefined || existing.state !== 'in_progress' || existing.leaseToken !== token) return false;
    this.#records.set(id, { ...existing, leaseUntil: this.#clock() + leaseMs });
    return true;
  }

  async get(id: string): Promise<IdempotencyRecord | undefined> {
    const existing = this.#records.get(id);
    return existing === undefined ? undefined : copy(existing);
  }

  async listAbandoned(options: ListAbandonedOptions = {}): Promise<IdempotencyRecord[]> {
    const now = this.#clock();
    const after = options.after;
    if (after !== undefined) cursorLease(after);
    return [...this.#records.values()]
      .filter((r) => r.state === 'in_progress' && r.leaseUntil <= now)
      .filter((r) => after === undefined || r.leaseUntil > after.leaseUntil || (r.leaseUntil === after.leaseUntil && r.id > after.id))
      .sort((a, b) => a.leaseUntil - b.leaseUntil || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      .slice(0, options.limit ?? 500)
      .map(copy);
  }

  async purgeExpired(options: BatchOptions = {}): Promise<number> {
    const now = this.#clock();
    const limit = options.limit ?? 500;
    let deleted = 0;
    for (const [id, record] of this.#records) {
      if (deleted >= limit) break;
      if (record.state === 'completed' && record.expiresAt <= now) {
        this.#records.delete(id);
        deleted += 1;
      }
    }
    return deleted;
  }

  async purgeAbandoned(options: BatchOptions = {}): Promise<number> {
    const now = this.#clock();
    const limit = options.limit ?? 500;
    const gone = [...this.#records.values()]
      .filter((r) => r.state === 'in_progress' && r.leaseUntil <= now && r.expiresAt <= now)
      .sort((a, b) => a.leaseUntil - b.leaseUntil)
      .slice(0, limit);
    for (const record of gone) this.#records.delete(record.id);
    return gone.length;
  }

  async now(): Promise<number> {
    return this.#clock();
  }

  /** Nothing to create; present so every store can be migrated the same way. */
  async migrate(): Promise<void> {}
}

// Callers get copies so that mutating a returned record cannot change the store.
function copy(record: IdempotencyRecord): IdempotencyRecord {
  return record.response === undefined
    ? { ...record }
    : { ...record, response: { ...record.response, headers: { ...record.response.headers }, body: new Uint8Array(record.response.body) } };
}
