/**
 * Child process for the multi-process reservation tests: connects its own client, waits for a shared
 * start instant, fires `count` concurrent reservations of one id and prints how many it won, as JSON.
 * Run as `node --import tsx reserve-child.ts '<json args>'`.
 */
import { randomUUID } from 'node:crypto';
import type { IdempotencyStore } from '../../../src/runtime/store.js';

interface Args {
  kind: 'postgres' | 'redis' | 'sqlite';
  /** PostgreSQL connection string, Redis port, or SQLite file. */
  target: string;
  /** Table or key prefix. */
  name: string;
  id: string;
  count: number;
  startAt: number;
}

const args = JSON.parse(process.argv[2]!) as Args;
let store: IdempotencyStore;
let close: () => Promise<unknown>;
if (args.kind === 'postgres') {
  const { default: pg } = await import('pg');
  const { PostgresStore } = await import('../../../src/runtime/stores/postgres.js');
  const pool = new pg.Pool({ connectionString: args.target, max: 10 });
  await pool.query('SELECT 1');
  store = new PostgresStore(pool, { table: args.name });
  close = () => pool.end();
} else if (args.kind === 'sqlite') {
  const { default: Database } = await import('better-sqlite3');
  const { SqliteStore } = await import('../../../src/runtime/stores/sqlite.js');
  const db = new Database(args.target);
  store = new SqliteStore(db, { table: args.name });
  close = async () => db.close();
} else {
  const { Redis } = await import('ioredis');
  const { RedisStore } = await import('../../../src/runtime/stores/redis.js');
  const redis = new Redis({ host: '127.0.0.1', port: Number(args.target), lazyConnect: true });
  await redis.connect();
  store = new RedisStore(redis, { prefix: args.name });
  close = () => redis.quit();
}
await new Promise((resolve) => setTimeout(resolve, Math.max(0, args.startAt - Date.now())));
const results = await Promise.all(
  Array.from({ length: args.count }, () =>
    store.reserve({ id: args.id, operation: 'op', fingerprint: 'v1:multi', token: randomUUID(), leaseMs: 30_000, ttlMs: 60_000 }),
  ),
);
const won = results.filter((r) => r.outcome === 'reserved').map((r) => r.record.leaseToken);
const seen = [...new Set(results.map((r) => r.record.leaseToken))];
process.stdout.write(JSON.stringify({ won, seen }));
await close();
