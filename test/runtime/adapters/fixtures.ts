import Database from 'better-sqlite3';
import type { CompiledContract } from '../../../src/runtime/contract.js';
import { MemoryStore } from '../../../src/runtime/stores/memory.js';
import { SqliteStore } from '../../../src/runtime/stores/sqlite.js';

/** A memory store whose completions take `ms` (a store round trip the guard awaits while the answer is held). */
export function slowCompletionStore(ms: number): MemoryStore {
  const store = new MemoryStore();
  const complete = store.complete.bind(store);
  store.complete = async (...args: Parameters<MemoryStore['complete']>) => {
    await new Promise((resolve) => setTimeout(resolve, ms));
    return complete(...args);
  };
  return store;
}

/** The contract the adapter tests guard: principal + path scope, whole-body fingerprint plus the `mode` query. */
export const contract: CompiledContract = {
  operationId: 'createThing',
  method: 'POST',
  path: '/things/{tenant}',
  key: { in: 'header', name: 'Idempotency-Key', required: true, maxLength: 64 },
  scope: [{ kind: 'principal' }, { kind: 'path', name: 'tenant' }],
  fingerprint: { include: 'all', exclude: [], query: ['mode'] },
  ttlMs: 60_000,
  leaseMs: 5_000,
  retry: { deadlineMs: 10_000, maxAttempts: 3, backoff: { initialMs: 100, maxMs: 1000, jitter: 'full' } },
  effect: { owner: 'things', external: false, providerKey: 'none' },
  transient: [429, 503],
  responses: { replayHeader: 'Idempotent-Replayed', missingKey: 400, invalidKey: 400, mismatch: 422, inProgress: 409, abandoned: 409, storeUnavailable: 503 },
  unknownOutcome: 'surface',
};

/**
 * A contract whose path parameter names cannot be Express or Fastify param names (`{item.id}`,
 * `{action-name}`, as in odd-31.yaml): routes spell them `:itemId` and `:actionName`.
 */
export const oddPathContract: CompiledContract = {
  ...contract,
  operationId: 'items.actions-run now',
  path: '/v1/items/{item.id}/actions/{action-name}',
  scope: [{ kind: 'principal' }, { kind: 'path', name: 'item.id' }],
  fingerprint: { include: 'all', exclude: [], query: [] },
};

/** A streamed body that sends `chunk` every 10 ms and never ends; `cancelled()` once its reader cancels it. */
export function endless(chunk = 'row\n'): { stream: ReadableStream<Uint8Array>; cancelled: () => boolean } {
  let cancelled = false;
  let timer: ReturnType<typeof setInterval> | undefined;
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      timer = setInterval(() => controller.enqueue(new TextEncoder().encode(chunk)), 10);
    },
    cancel() {
      cancelled = true;
      clearInterval(timer);
    },
  });
  return { stream, cancelled: () => cancelled };
}

/**
 * Runs `work` with a migrated SqliteStore on a fresh in-memory database; afterwards `closeFirst` (the app
 * serving it), then the database, are closed, whether `work` passed or failed.
 */
export async function withSqliteStore(work: (store: SqliteStore, db: Database.Database) => Promise<void>, closeFirst?: () => Promise<unknown>): Promise<void> {
  const db = new Database(':memory:');
  try {
    const store = new SqliteStore(db);
    await store.migrate();
    await work(store, db);
  } finally {
    await closeFirst?.();
    db.close();
  }
}

/** {@link contract} with its key in a body field (a JSON member or a form field), as Square and AWS send it. */
export const bodyKeyContract: CompiledContract = { ...contract, operationId: 'createThingBodyKey', key: { in: 'body', name: '/client_token', required: true, maxLength: 64 } };

/** {@link contract} with its key in the `requestId` query parameter, as Google Cloud APIs take it. */
export const queryKeyContract: CompiledContract = { ...contract, operationId: 'createThingQueryKey', key: { in: 'query', name: 'requestId', required: true, maxLength: 64 } };
