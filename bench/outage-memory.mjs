// Outage memory benchmark (not a test), on the built `dist/`: what a guard holds for the requests an outage failed.
// Each reservation call that fails may still have made its record, so the guard keeps its token and releases it in
// the background once the store can be read (see `lateReleaseLimit` in the README). Here the store refuses every
// call; --requests requests over --keys keys each get a 503, and the heap they leave behind is printed, per request,
// at the default lateReleaseLimit and with no bound.
// Usage: npm run build && node bench/outage-memory.mjs [--requests 100000] [--keys 1,1000,100000]
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = (file) => pathToFileURL(path.join(root, 'dist', file)).href;
const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : process.argv[i + 1];
};

if (process.env.OUTAGE_CHILD === undefined) {
  const requests = Number(arg('requests', '100000'));
  const keyCounts = arg('keys', '1,1000,100000').split(',').map(Number);
  if (!Number.isInteger(requests) || requests < 1 || keyCounts.some((n) => !Number.isInteger(n) || n < 1)) {
    console.error('bench:outage-memory: --requests and --keys take positive integers, e.g. --requests 100000 --keys 1,1000');
    process.exit(2);
  }
  console.log(`heap held after ${requests} requests answered 503 by a guard whose store refuses every call (node ${process.version})`);
  console.log('keys    | lateReleaseLimit | heap held  | per request | answered 503');
  for (const keys of keyCounts) {
    for (const limit of ['default', 'Infinity']) {
      // A process each: the heap of one run does not blur the next.
      const child = spawnSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url)], {
        env: { ...process.env, OUTAGE_CHILD: JSON.stringify({ requests, keys, limit }) },
        encoding: 'utf8',
      });
      if (child.status !== 0) {
        console.error(child.stderr);
        process.exit(1);
      }
      const r = JSON.parse(child.stdout);
      console.log(`${String(keys).padEnd(7)} | ${limit.padEnd(16)} | ${(r.held / 1e6).toFixed(1).padStart(7)} MB | ${String(Math.round(r.held / requests)).padStart(9)} B | ${r.unavailable}`);
    }
  }
} else {
  const { requests, keys, limit } = JSON.parse(process.env.OUTAGE_CHILD);
  const { createGuard } = await import(dist('src/runtime/guard.js'));
  const { MemoryStore } = await import(dist('src/runtime/stores/memory.js'));
  const { StoreError } = await import(dist('src/runtime/store.js'));
  const memory = new MemoryStore();
  const down = () => Promise.reject(new StoreError('unavailable', 'connection refused'));
  const store = Object.assign(Object.create(memory), { reserve: down, get: down, release: down, takeover: down, complete: down });
  const contract = {
    operationId: 'createPayment', method: 'POST', path: '/payments',
    key: { in: 'header', name: 'Idempotency-Key', required: true, maxLength: 255 },
    scope: [{ kind: 'principal' }], fingerprint: { include: [], exclude: [], query: [] },
    ttlMs: 86_400_000, leaseMs: 30_000, retry: { deadlineMs: 30_000, maxAttempts: 4, backoff: { initialMs: 200, maxMs: 5000, jitter: 'full' } },
    effect: { owner: 'payments', external: true }, transient: [429, 503],
    responses: { replayHeader: 'Idempotent-Replayed', missingKey: 400, invalidKey: 400, mismatch: 422, inProgress: 409, abandoned: 409, storeUnavailable: 503 },
    unknownOutcome: 'reconcile',
  };
  const guard = createGuard(contract, { store, ...(limit === 'Infinity' ? { lateReleaseLimit: Infinity } : {}) });
  const request = (i) => ({ pathParams: {}, query: {}, headers: { 'idempotency-key': `key-${i % keys}` }, body: { amount: 100 }, principal: 'acct_1' });
  const handler = async () => ({ status: 201, headers: {}, body: new Uint8Array() });
  globalThis.gc();
  const before = process.memoryUsage().heapUsed;
  let unavailable = 0;
  for (let i = 0; i < requests; i += 1000) {
    const answers = await Promise.all(Array.from({ length: Math.min(1000, requests - i) }, (_, j) => guard.handle(request(i + j), handler)));
    unavailable += answers.filter((a) => a.status === 503).length;
  }
  await new Promise((resolve) => setTimeout(resolve, 100));
  globalThis.gc();
  process.stdout.write(JSON.stringify({ held: process.memoryUsage().heapUsed - before, unavailable }));
  process.exit(0);
}
