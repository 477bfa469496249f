// Guard overhead benchmark (not a test): POST handlers served bare and behind the generated Express guard,
// on each store, in one server process per store; load from this process over loopback keep-alive
// connections, bounded in time. Two handlers, each measured bare and guarded in the same run:
//   no-op — answers 201 with a JSON body and does nothing else (the guard's worst case: all of its cost shows);
//   write — the same answer after one representative business write on the same store/database
//           (SQLite: an INSERT on the same connection; PostgreSQL: an INSERT through the same pool;
//            Redis: one HSET; memory: a Map insert);
//   write, one transaction — SQLite and PostgreSQL: the write handler behind the guard's one-transaction mode
//           (`inTransaction`), its INSERT inside the transaction that reserved the key and committed with the record
//           (one commit per request instead of the store's own two); against the same bare write handler;
//   write + downstream call — an extra, clearly labelled realistic row: the same write, then an awaited
//           --downstream ms (default 2) call to another service (a timer standing in for a payment provider's answer), as
//           the handlers a guard is put in front of usually do. The no-op and write rows stay the reference.
// Prints requests/s and p50/p99 for fresh keys and for replays, as ratios to the bare handler of the same kind,
// the app process's CPU time per request, and the store server's (Redis, PostgreSQL) CPU time per request, at each
// number of connections asked for (default 16 and 64). A closed loop of few connections measures latency as much as
// capacity: at 16, a guarded request that waits for its store round trips leaves the app idle meanwhile, while the
// bare handler already keeps it busy; at 64 both are saturated, so requests/s is the server's capacity. Each phase's time is cut into --rounds slices run interleaved
// (bare, bare write, fresh, fresh write, bare call, fresh call, replay; then again), so a change in the machine's other load hits every
// phase alike instead of skewing one ratio. Replays never run the handler, so the one replay figure is shown
// against both references.
// Stores: memory, sqlite, postgres, redis, and sqlite-normal — a clearly labelled extra: SQLite with the
// connection's `synchronous = NORMAL` (an opt-in of the app that owns the connection; the default and the sqlite
// row keep FULL, one WAL sync per commit). With NORMAL a commit does not wait for the disk, so an OS crash or
// power loss can lose the last commits — reservations and completions — and a retry may then run the effect
// again; a crash of the app process alone loses nothing. The PostgreSQL server here runs with fsync off (the disk
// is not what is measured there), so sqlite-normal is its like-for-like row, and with PostgreSQL's default
// synchronous_commit (on): the store makes its own commits wait for the WAL flush whatever the setting (it raises
// `off` to `local`), so with the server at `off` only the bare handler's write would skip that flush, an unequal
// comparison. With fsync off the flush is a write of the WAL, not a sync.
// And, only when asked for (--stores …,null), `null`: a store that keeps nothing and answers at once (every key
// fresh, every completion accepted), so the row is the guard's and the Express adapter's own cost without any
// store I/O — key, record id, fingerprint, response hold and recording, the promises between them — for telling
// that apart from what a real store's round trips and writes cost. It is not a store to run with.
// The PostgreSQL pool has 10 connections (PG_POOL_MAX=n changes it) and the store batches (its default; PG_BATCH=0
// sends every call alone); Redis uses ioredis auto-pipelining (REDIS_AUTO_PIPELINING=0 turns it off) and the store
// batches (its default: the reservations and completions of one turn in one script; REDIS_BATCH=0 sends each alone).
// Usage: npm run build && node bench/guard.mjs [--seconds 3] [--rounds 5] [--connections 16,64] [--stores memory,sqlite,sqlite-normal,postgres,redis[,null]] [--downstream 2] [--app-cpu 0]
import { execFile, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { cpus, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, arg, i, all) => (arg.startsWith('--') ? [...pairs, [arg.slice(2), all[i + 1]]] : pairs), []),
);
const SECONDS = Number(args.seconds ?? 3);
const CONNECTIONS = String(args.connections ?? '16,64').split(',').map(Number);
function usage(message) {
  console.error(`bench:guard: ${message}`);
  process.exit(2);
}
if (CONNECTIONS.some((n) => !Number.isInteger(n) || n < 1)) usage('--connections takes positive integers, e.g. 16,64');
// BENCH_ONLY=<phase>: run that phase alone at the first --connections count, for profiling; prints its requests/s only.
const ONLY_PATHS = { bare: '/bare', bareWrite: '/bare-write', fresh: '/v1/demo-requests', freshWrite: '/guarded-write', bareCall: '/bare-call', freshCall: '/guarded-call', freshTx: '/guarded-write-tx', replay: '/v1/demo-requests' };
const ONLY = process.env.BENCH_ONLY;
if (ONLY !== undefined && !Object.hasOwn(ONLY_PATHS, ONLY)) usage(`BENCH_ONLY takes one of ${Object.keys(ONLY_PATHS).join(', ')}`);
const STORES = (args.stores ?? 'memory,sqlite,sqlite-normal,postgres,redis').split(',');
// The store the guard is generated for, per bench store name.
const GENERATED_STORE = { 'sqlite-normal': 'sqlite', null: 'memory' };
// The stores with one-transaction mode: their write handler is also measured inside the reserving transaction.
const TRANSACTIONAL = new Set(['sqlite', 'sqlite-normal', 'postgres']);
const generatedStore = (store) => GENERATED_STORE[store] ?? store;
const ROUNDS = Math.max(1, Number(args.rounds ?? 5));
const WARMUP_MS = 500;
const DOWNSTREAM_MS = Number(args.downstream ?? 2);
// --app-cpu N: the app process on CPU N alone, and this process (the load), its store servers and everything else on
// the other CPUs (Linux, taskset) — the app's core measured as a server of its own would be, with its clients and
// database elsewhere. Without it every process shares every core, as on one small machine.
const APP_CPU = args['app-cpu'] === undefined ? undefined : Number(args['app-cpu']);
const CPUS = cpus().length;
if (APP_CPU !== undefined) {
  if (!Number.isInteger(APP_CPU) || APP_CPU < 0 || APP_CPU >= CPUS) usage(`--app-cpu takes a CPU number from 0 to ${CPUS - 1}`);
  if (CPUS < 2) usage('--app-cpu needs at least 2 CPUs: one for the app, the rest for the load and the stores');
  if (findBinary('taskset') === undefined) usage('--app-cpu needs taskset (util-linux) on PATH');
}

const APP = `
import express from 'express';
import { randomUUID } from 'node:crypto';
import { createGuards } from './gen/guards.js';
import { idempotencyOf } from './gen/runtime/adapters/express.js';
import { makeStore } from './store.js';

const { store, write, writeIn } = await makeStore();
const DOWNSTREAM_MS = Number(process.env['DOWNSTREAM_MS']);
const guards = createGuards({ store, principal: (req) => req.get('x-user') });
const app = express();
app.disable('x-powered-by');
type Body = { topic: string };
const noop = (req: express.Request, res: express.Response) => {
  res.status(201).json({ id: randomUUID(), topic: (req.body as Body).topic });
};
const writing = (req: express.Request, res: express.Response, next: express.NextFunction) => {
  const id = randomUUID();
  write(id, (req.body as Body).topic).then(() => res.status(201).json({ id, topic: (req.body as Body).topic }), next);
};
app.post('/bare', express.json(), noop);
app.post('/v1/demo-requests', express.json(), guards.createDemoRequest, noop);
const calling = (req: express.Request, res: express.Response, next: express.NextFunction) => {
  const id = randomUUID();
  write(id, (req.body as Body).topic)
    .then(() => new Promise((resolve) => setTimeout(resolve, DOWNSTREAM_MS)))
    .then(() => res.status(201).json({ id, topic: (req.body as Body).topic }), next);
};
app.post('/bare-write', express.json(), writing);
app.post('/guarded-write', express.json(), guards.createDemoRequest, writing);
// One-transaction mode (stores with transactions): the same write inside the transaction that reserved the key,
// committed with the record.
if (writeIn !== undefined) {
  app.post('/guarded-write-tx', express.json(), guards.createDemoRequest.inTransaction, (req: express.Request, res: express.Response, next: express.NextFunction) => {
    const id = randomUUID();
    writeIn(idempotencyOf(res).tx, id, (req.body as Body).topic).then(() => res.status(201).json({ id, topic: (req.body as Body).topic }), next);
  });
}
app.post('/bare-call', express.json(), calling);
app.post('/guarded-call', express.json(), guards.createDemoRequest, calling);
process.on('SIGTERM', () => process.exit(0));
const server = app.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write('listening ' + (typeof address === 'object' && address !== null ? address.port : 0) + '\\n');
});
`;

// Per store: the guard's store and one representative business write on the same store/database.
const STORE_MODULES = {
  memory: `
import { MemoryStore } from './gen/runtime/stores/memory.js';
type WriteIn = (tx: unknown, id: string, topic: string) => Promise<void>;
const rows = new Map<string, string>();
export async function makeStore() {
  return { store: new MemoryStore(), write: async (id: string, topic: string) => void rows.set(id, topic), writeIn: undefined as WriteIn | undefined };
}`,
  null: `
// Keeps nothing: the guard's own cost without store I/O (a diagnostic, not a store; see the header).
import type { CompleteInput, IdempotencyRecord, IdempotencyStore, ReserveInput, ReserveResult } from './gen/runtime/store.js';
class NullStore implements IdempotencyStore {
  async reserve(input: ReserveInput): Promise<ReserveResult> {
    const now = Date.now();
    const record: IdempotencyRecord = { id: input.id, operation: input.operation, fingerprint: input.fingerprint, state: 'in_progress', leaseToken: input.token, leaseUntil: now + input.leaseMs, expiresAt: now + input.ttlMs, createdAt: now };
    return { outcome: 'reserved', record, now };
  }
  async complete(_id: string, _token: string, _input: CompleteInput): Promise<boolean> { return true; }
  async release(): Promise<boolean> { return true; }
  async takeover(): Promise<IdempotencyRecord | undefined> { return undefined; }
  async extend(): Promise<boolean> { return true; }
  async get(): Promise<IdempotencyRecord | undefined> { return undefined; }
  async listAbandoned(): Promise<IdempotencyRecord[]> { return []; }
  async purgeExpired(): Promise<number> { return 0; }
  async now(): Promise<number> { return Date.now(); }
}
type WriteIn = (tx: unknown, id: string, topic: string) => Promise<void>;
const rows = new Map<string, string>();
export async function makeStore() {
  return { store: new NullStore(), write: async (id: string, topic: string) => void rows.set(id, topic), writeIn: undefined as WriteIn | undefined };
}`,
  sqlite: sqliteModule('FULL'),
  'sqlite-normal': sqliteModule('NORMAL'),
  postgres: `
import pg from 'pg';
import { PostgresStore } from './gen/runtime/stores/postgres.js';
export async function makeStore() {
  const pool = new pg.Pool({ connectionString: process.env['PG_URL'], max: Number(process.env['PG_POOL_MAX'] ?? 10) });
  const store = new PostgresStore(pool, { batch: process.env['PG_BATCH'] !== '0' });
  await store.migrate();
  await pool.query('CREATE TABLE IF NOT EXISTS demo_rows (id text PRIMARY KEY, topic text NOT NULL)');
  const sql = 'INSERT INTO demo_rows (id, topic) VALUES ($1, $2)';
  return {
    store,
    write: async (id: string, topic: string) => void (await pool.query(sql, [id, topic])),
    writeIn: async (tx: unknown, id: string, topic: string) => void (await (tx as pg.PoolClient).query(sql, [id, topic])),
  };
}`,
  redis: `
import { Redis } from 'ioredis';
import { RedisStore } from './gen/runtime/stores/redis.js';
type WriteIn = (tx: unknown, id: string, topic: string) => Promise<void>;
export async function makeStore() {
  // Auto-pipelining (ioredis's documented option; one write for the commands of one event-loop turn) serves the
  // bare write handler and the guard alike.
  const redis = new Redis(process.env['REDIS_URL']!, { enableAutoPipelining: process.env['REDIS_AUTO_PIPELINING'] !== '0' });
  await new Promise<void>((resolve) => redis.once('ready', () => resolve()));
  return { store: new RedisStore(redis, { batch: process.env['REDIS_BATCH'] !== '0' }), write: async (id: string, topic: string) => void (await redis.hset('demo:' + id, 'topic', topic)), writeIn: undefined as WriteIn | undefined };
}`,
};

// The store's synchronous level (FULL, which it sets: one WAL sync per commit) or the opt-in NORMAL set after it, for guard and handler alike.
function sqliteModule(synchronous) {
  return `
import Database from 'better-sqlite3';
import { SqliteStore } from './gen/runtime/stores/sqlite.js';
export async function makeStore() {
  const db = new Database(process.env['SQLITE_FILE']!);
  const store = new SqliteStore(db);
  await store.migrate();
  db.pragma('synchronous = ${synchronous}');
  db.exec('CREATE TABLE IF NOT EXISTS demo_rows (id TEXT PRIMARY KEY, topic TEXT NOT NULL)');
  const insert = db.prepare('INSERT INTO demo_rows (id, topic) VALUES (?, ?)');
  // In one-transaction mode the handler writes through \`tx\`, preparing there as the README says (a statement of the
  // connection's own, run late by a given-up handler, would join the next transaction).
  const sql = 'INSERT INTO demo_rows (id, topic) VALUES (?, ?)';
  return { store, write: async (id: string, topic: string) => void insert.run(id, topic), writeIn: async (tx: unknown, id: string, topic: string) => void (tx as Database.Database).prepare(sql).run(id, topic) };
}`;
}

function findBinary(name, extra = []) {
  for (const dir of [...(process.env.PATH ?? '').split(path.delimiter), ...extra]) {
    if (dir && existsSync(path.join(dir, name))) return path.join(dir, name);
  }
  return undefined;
}

async function freePort() {
  return new Promise((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function startPostgres() {
  const dirs = ['/usr/lib/postgresql/15/bin', '/usr/lib/postgresql/16/bin', '/usr/lib/postgresql/17/bin'];
  const initdb = findBinary('initdb', dirs);
  const pgCtl = findBinary('pg_ctl', dirs);
  if (!initdb || !pgCtl) return undefined;
  const asPostgres = process.getuid?.() === 0;
  const tool = (binary, argv) => (asPostgres ? run('runuser', ['-u', 'postgres', '--', binary, ...argv]) : run(binary, argv));
  const dir = mkdtempSync(path.join(tmpdir(), 'idemkit-bench-pg-'));
  if (asPostgres) {
    const uid = Number((await run('id', ['-u', 'postgres'])).stdout.trim());
    const gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
    chownSync(dir, uid, gid);
  }
  const port = await freePort();
  await tool(initdb, ['-D', path.join(dir, 'data'), '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync']);
  // fsync on would measure the disk, not the guard; synchronous_commit stays on, as the store's own commits are (see the header).
  await tool(pgCtl, ['-D', path.join(dir, 'data'), '-l', path.join(dir, 'log'), '-w', '-o', `-p ${port} -h 127.0.0.1 -k ${dir} -c fsync=off`, 'start']);
  const postmaster = Number(readFileSync(path.join(dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]);
  return {
    env: { PG_URL: `postgres://postgres@127.0.0.1:${port}/postgres` },
    cpuMs: () => treeCpuMs(postmaster),
    stop: async () => {
      await tool(pgCtl, ['-D', path.join(dir, 'data'), '-m', 'fast', '-w', 'stop']).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function startRedis() {
  const binary = findBinary('redis-server');
  if (!binary) return undefined;
  const port = await freePort();
  const child = spawn(binary, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  for (let i = 0; i < 100; i += 1) {
    const ok = await new Promise((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => (socket.destroy(), resolve(true)));
      socket.on('error', () => resolve(false));
    });
    if (ok) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { env: { REDIS_URL: `redis://127.0.0.1:${port}` }, cpuMs: () => cpuMs(child.pid), stop: async () => (child.kill('SIGTERM'), await exited) };
}

async function build(work) {
  const cli = path.join(root, 'dist', 'src', 'cli', 'bin.js');
  if (!existsSync(cli)) throw new Error('run `npm run build` first');
  writeFileSync(path.join(work, 'package.json'), JSON.stringify({ type: 'module', private: true }));
  symlinkSync(path.join(root, 'node_modules'), path.join(work, 'node_modules'), 'dir');
  for (const store of STORES) {
    const dir = path.join(work, 'src', store);
    mkdirSync(dir, { recursive: true });
    await run(process.execPath, [cli, 'generate', 'server', path.join(root, 'test/fixtures/server/demo.yaml'), '--framework', 'express', '--store', generatedStore(store), '--out', path.join(dir, 'gen')]);
    writeFileSync(path.join(dir, 'store.ts'), STORE_MODULES[store]);
    writeFileSync(path.join(dir, 'app.ts'), APP);
  }
  const tsconfig = {
    compilerOptions: {
      target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, skipLibCheck: true,
      types: ['node'], typeRoots: [path.join(root, 'node_modules', '@types')], outDir: 'dist', rootDir: '.',
    },
    include: ['src/**/*.ts'],
  };
  writeFileSync(path.join(work, 'tsconfig.json'), JSON.stringify(tsconfig));
  await run(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', work]);
}

async function startApp(work, store, env) {
  // BENCH_CPU_PROF=<dir> profiles the app processes (for finding overhead, not for the figures).
  const prof = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
  // taskset execs node in its own process, so child.pid is the app's.
  const pin = APP_CPU === undefined ? [] : ['-c', String(APP_CPU), process.execPath];
  const child = spawn(pin.length > 0 ? 'taskset' : process.execPath, [...pin, ...prof, path.join(work, 'dist', 'src', store, 'app.js')], {
    env: { ...process.env, ...env, SQLITE_FILE: path.join(work, `${store}.db`), DOWNSTREAM_MS: String(DOWNSTREAM_MS) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const match = /listening (\d+)/.exec(out);
      if (match) resolve(Number(match[1]));
    });
    child.once('exit', (code) => reject(new Error(`${store} app exited ${code}`)));
  });
  return { port, pid: child.pid, stop: () => new Promise((resolve) => (child.once('exit', resolve), child.kill('SIGTERM'))) };
}

// CPU time (ms, user + system) the app process has used, from /proc (Linux; undefined elsewhere). Per request it
// is the app's own cost, much less disturbed by other load on the machine than requests/s.
function cpuMs(pid, withReaped = false) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ');
    // utime, stime (and cutime, cstime: children that exited) in USER_HZ (100 on Linux)
    const ticks = Number(fields[11]) + Number(fields[12]) + (withReaped ? Number(fields[13]) + Number(fields[14]) : 0);
    return (ticks * 1000) / 100;
  } catch {
    return undefined;
  }
}

// CPU time (ms) of a server process and its children (PostgreSQL: the postmaster, its backends and workers).
function treeCpuMs(root) {
  let total = cpuMs(root, true);
  if (total === undefined) return undefined;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const fields = readFileSync(`/proc/${entry}/stat`, 'utf8').replace(/^.*\) /, '').split(' ');
      if (Number(fields[1]) === root) total += cpuMs(Number(entry)) ?? 0;
    } catch {
      // exited meanwhile
    }
  }
  return total;
}

/**
 * Closed-loop load over raw keep-alive sockets (an autocannon-like loop without its dependency): each
 * connection sends the next request as soon as the previous answer is complete. `next(i)` builds request i.
 */
async function load(port, next, ms, connections = CONNECTIONS[0]) {
  const latencies = [];
  let counter = 0;
  let errors = 0;
  const deadline = performance.now() + ms;
  const warmEnd = performance.now() + Math.min(WARMUP_MS, ms / 10);
  let responses = 0;
  await Promise.all(
    Array.from({ length: connections }, () =>
      new Promise((resolve) => {
        const socket = net.connect(port, '127.0.0.1');
        socket.setNoDelay(true);
        let buffer = Buffer.alloc(0);
        let started = 0;
        const send = () => {
          if (performance.now() >= deadline) return socket.end(), resolve();
          started = performance.now();
          socket.write(next(counter++));
        };
        socket.on('connect', send);
        socket.on('error', () => resolve());
        socket.on('data', (chunk) => {
          buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
          for (;;) {
            const end = buffer.indexOf('\r\n\r\n');
            if (end < 0) return;
            const head = buffer.subarray(0, end).toString('latin1');
            const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
            if (buffer.length < end + 4 + length) return;
            const status = Number(head.slice(9, 12));
            if (status !== 201) errors += 1;
            buffer = buffer.subarray(end + 4 + length);
            responses += 1;
            const now = performance.now();
            if (now >= warmEnd) latencies.push(now - started);
            send();
          }
        });
      }),
    ),
  );
  return { latencies, measuredMs: ms - Math.min(WARMUP_MS, ms / 10), responses, errors };
}

/** Requests/s of one slice (the responses after its warm-up). */
function sliceRps(slice) {
  return slice.latencies.length / (slice.measuredMs / 1000);
}

/** Requests/s, p50/p99 and CPU µs per request of the slices of one phase. */
function summarise(slices) {
  const latencies = slices.flatMap((slice) => slice.latencies).sort((a, b) => a - b);
  const measuredMs = slices.reduce((n, slice) => n + slice.measuredMs, 0);
  const responses = slices.reduce((n, slice) => n + slice.responses, 0);
  const cpu = slices.reduce((n, slice) => n + slice.cpuMs, 0);
  const serverCpu = slices.reduce((n, slice) => n + slice.serverCpuMs, 0);
  return {
    rps: latencies.length / (measuredMs / 1000),
    p50: latencies[Math.floor(latencies.length * 0.5)] ?? NaN,
    p99: latencies[Math.floor(latencies.length * 0.99)] ?? NaN,
    cpuUs: (cpu * 1000) / responses,
    serverCpuUs: (serverCpu * 1000) / responses,
    errors: slices.reduce((n, slice) => n + slice.errors, 0),
  };
}

function request(pathname, key, topic) {
  const body = JSON.stringify({ topic, contact: { email: 'bench@example.com' } });
  return (
    `POST ${pathname} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
    `X-User: bench\r\n${key ? `Idempotency-Key: ${key}\r\n` : ''}Connection: keep-alive\r\n\r\n${body}`
  );
}

const fmt = (n, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');

if (APP_CPU !== undefined) {
  const others = Array.from({ length: CPUS }, (_, cpu) => cpu).filter((cpu) => cpu !== APP_CPU).join(',');
  // Every thread of this process; the servers it starts from now on inherit it.
  await run('taskset', ['-a', '-p', '-c', others, String(process.pid)]).catch((error) =>
    usage(`--app-cpu could not keep this process off CPU ${APP_CPU}: ${String(error.stderr ?? error.message).trim().split('\n')[0]}`),
  );
}
const work = mkdtempSync(path.join(tmpdir(), 'idemkit-bench-guard-'));
const rows = [];
try {
  await build(work);
  for (const store of STORES) {
    const backend = store === 'postgres' ? await startPostgres() : store === 'redis' ? await startRedis() : { env: {}, stop: async () => undefined };
    if (backend === undefined) {
      rows.push({ store, skipped: `no ${store} server binary on PATH` });
      continue;
    }
    const app = await startApp(work, store, backend.env);
    try {
      const ms = SECONDS * 1000;
      const run = `${process.pid}-${Date.now().toString(36)}`;
      const only = ONLY;
      if (only !== undefined) {
        if (only === 'replay') await load(app.port, () => request('/v1/demo-requests', `replay-${run}`, 'replay'), 50);
        const keyOf = only.startsWith('bare') ? () => undefined : only === 'replay' ? () => `replay-${run}` : (i) => `${only}-${run}-${i}`;
        const result = await load(app.port, (i) => request(ONLY_PATHS[only], keyOf(i), only === 'replay' ? 'replay' : `x-${i}`), ms);
        console.log(store, only, Math.round(result.latencies.length / (result.measuredMs / 1000)), 'req/s');
        continue;
      }
      // name, path, key of request i in round r (none: bare), topic (replays keep one payload)
      const keys = Math.max(...CONNECTIONS);
      const phases = [
        ['bare', '/bare', undefined],
        ['bareWrite', '/bare-write', undefined],
        ['fresh', '/v1/demo-requests', (r, i, c) => `fresh-${run}-${c}-${r}-${i}`],
        ['freshWrite', '/guarded-write', (r, i, c) => `fresh-write-${run}-${c}-${r}-${i}`],
        ...(TRANSACTIONAL.has(store) ? [['freshTx', '/guarded-write-tx', (r, i, c) => `fresh-tx-${run}-${c}-${r}-${i}`]] : []),
        ['bareCall', '/bare-call', undefined],
        ['freshCall', '/guarded-call', (r, i, c) => `fresh-call-${run}-${c}-${r}-${i}`],
        ['replay', '/v1/demo-requests', (_r, i) => `replay-${run}-${i % keys}`, 'replay'],
        // The null store keeps nothing to replay: every request of that phase would run the handler.
      ].filter(([name]) => store !== 'null' || name !== 'replay');
      // Replays: complete one key per connection first, then hit those keys only.
      if (store !== 'null') for (let c = 0; c < keys; c += 1) await load(app.port, () => request('/v1/demo-requests', `replay-${run}-${c}`, 'replay'), 50, 1);
      const slices = {};
      const sliceMs = ms / ROUNDS;
      for (let round = -1; round < ROUNDS; round += 1) {
        for (const connections of CONNECTIONS) {
          for (const [name, pathname, keyOf, topic] of phases) {
            // Round -1 warms every route up (JIT, pools, prepared statements) and is not counted.
            const cpu0 = cpuMs(app.pid);
            const server0 = backend.cpuMs?.();
            const slice = await load(
              app.port,
              (i) => request(pathname, keyOf?.(round, i, connections), topic ?? `t-${run}-${connections}-${round}-${i}`),
              Math.min(sliceMs, round < 0 ? 1000 : sliceMs),
              connections,
            );
            const cpu1 = cpuMs(app.pid);
            const server1 = backend.cpuMs?.();
            const delta = (a, b) => (a === undefined || b === undefined ? NaN : b - a);
            if (round >= 0) (slices[`${name}@${connections}`] ??= []).push({ ...slice, cpuMs: delta(cpu0, cpu1), serverCpuMs: delta(server0, server1) });
          }
        }
      }
      for (const connections of CONNECTIONS) {
        const result = Object.fromEntries(phases.map(([name]) => [name, summarise(slices[`${name}@${connections}`])]));
        // Each round's own ratio (its fresh slice against its bare slice, run moments apart): how far the ratio moves
        // with the machine's load, printed beside the whole phase's ratio in the goal table.
        const rounds = (name, ref) => slices[`${name}@${connections}`]?.map((slice, r) => sliceRps(slice) / sliceRps(slices[`${ref}@${connections}`][r]));
        const spread = { fresh: rounds('fresh', 'bare'), freshWrite: rounds('freshWrite', 'bareWrite'), freshTx: rounds('freshTx', 'bareWrite'), freshCall: rounds('freshCall', 'bareCall'), replay: rounds('replay', 'bare') };
        rows.push({ store, connections, ...result, spread, errors: phases.reduce((n, [name]) => n + result[name].errors, 0) });
      }
    } finally {
      await app.stop();
      await backend.stop();
    }
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}

if (ONLY !== undefined) {
  // BENCH_ONLY printed one figure per store above; the tables would be empty.
  for (const row of rows) if (row.skipped) console.log(`${row.store}: skipped, ${row.skipped}`);
  process.exit(0);
}

const cell = (r, ref) =>
  r === undefined ? 'n/a (keeps nothing)'.padEnd(33) : `${fmt(r.rps).padStart(6)} (${fmt(r.rps / ref.rps, 2)}) ${`${fmt(r.p50, 2)}/${fmt(r.p99, 2)}`.padEnd(12)} ${fmt(r.cpuUs).padStart(4)}`;
const base = (r) => `${fmt(r.rps).padStart(6)} ${`${fmt(r.p50, 2)}/${fmt(r.p99, 2)}`.padEnd(12)} ${fmt(r.cpuUs).padStart(4)}`;
console.log(`guard overhead: Express, ${SECONDS}s per phase in ${ROUNDS} interleaved slices, node ${process.version}`);
console.log(
  APP_CPU === undefined
    ? `${CPUS} CPUs shared by the app, the load and the store servers`
    : `the app alone on CPU ${APP_CPU}; the load and the store servers on the other ${CPUS - 1} CPU${CPUS > 2 ? 's' : ''}`,
);
console.log('req/s (ratio to the bare handler of the same kind), p50/p99 ms, app-process CPU µs per request; replays never run the handler');
for (const connections of CONNECTIONS) {
  const measured = rows.filter((row) => row.connections === connections);
  console.log(`\n${connections} keep-alive connections`);
  console.log('no-op handler:');
  console.log('store         | bare   p50/p99      cpu  | fresh  (ratio) p50/p99      cpu  | replay (ratio) p50/p99      cpu  | non-201');
  for (const row of measured) console.log(`${row.store.padEnd(13)} | ${base(row.bare)} | ${cell(row.fresh, row.bare)} | ${cell(row.replay, row.bare)} | ${row.errors}`);
  console.log('write handler (one business write on the same store/database):');
  console.log('store         | bare   p50/p99      cpu  | fresh  (ratio) p50/p99      cpu  | replay (ratio) p50/p99      cpu');
  for (const row of measured) console.log(`${row.store.padEnd(13)} | ${base(row.bareWrite)} | ${cell(row.freshWrite, row.bareWrite)} | ${cell(row.replay, row.bareWrite)}`);
  const transactional = measured.filter((row) => row.freshTx !== undefined);
  if (transactional.length > 0) {
    console.log('the same write in one-transaction mode (the write and the record commit together; SQLite, PostgreSQL):');
    console.log('store         | bare   p50/p99      cpu  | fresh  (ratio) p50/p99      cpu');
    for (const row of transactional) console.log(`${row.store.padEnd(13)} | ${base(row.bareWrite)} | ${cell(row.freshTx, row.bareWrite)}`);
  }
  console.log(`extra, realistic: write + ${DOWNSTREAM_MS} ms downstream call (a timer standing in for a provider's answer):`);
  console.log('store         | bare   p50/p99      cpu  | fresh  (ratio) p50/p99      cpu  | replay (ratio) p50/p99      cpu');
  for (const row of measured) console.log(`${row.store.padEnd(13)} | ${base(row.bareCall)} | ${cell(row.freshCall, row.bareCall)} | ${cell(row.replay, row.bareCall)}`);
  const served = measured.filter((row) => Number.isFinite(row.fresh.serverCpuUs));
  if (served.length === 0) continue;
  console.log(`store server CPU µs per request (redis-server; PostgreSQL postmaster and backends), ${APP_CPU === undefined ? 'on the same cores as the app' : 'on the other CPUs'}:`);
  console.log('store         | bare write | fresh | fresh write | fresh write, one tx | replay');
  const us = (r) => (r === undefined ? '–' : fmt(r.serverCpuUs)).padStart(5);
  for (const row of served) console.log(`${row.store.padEnd(13)} | ${us(row.bareWrite).padStart(10)} | ${us(row.fresh)} | ${us(row.freshWrite).padStart(11)} | ${us(row.freshTx).padStart(19)} | ${us(row.replay).padStart(6)}`);
}
// The issue's goal for fresh keys, per store: requests/s at least this share of the bare handler's.
const GOAL = { sqlite: 0.85, 'sqlite-normal': 0.85, postgres: 0.75, redis: 0.75 };
const goalRows = rows.filter((row) => !row.skipped && GOAL[row.store] !== undefined);
if (goalRows.length > 0) {
  console.log('\ngoal: fresh keys at ≥ 0.85 of the bare handler\'s req/s on SQLite, ≥ 0.75 on PostgreSQL and Redis');
  console.log('each: the ratio of the whole phase, met or not, then (lowest–highest) of the rounds\' own ratios');
  console.log('store         | conns | goal | fresh no-op            | fresh write            | write, one transaction | fresh write + call     | replay (of bare no-op)');
  const range = (rounds) => (rounds === undefined || rounds.length === 0 ? '' : ` (${fmt(Math.min(...rounds), 2)}–${fmt(Math.max(...rounds), 2)})`);
  const mark = (r, ref, goal, rounds) => `${fmt(r.rps / ref.rps, 3)} ${r.rps / ref.rps >= goal ? 'met' : 'not'}${range(rounds)}`;
  for (const row of goalRows) {
    const goal = GOAL[row.store];
    const s = row.spread;
    console.log(
      `${row.store.padEnd(13)} | ${String(row.connections).padStart(5)} | ${goal.toFixed(2)} | ${mark(row.fresh, row.bare, goal, s.fresh).padEnd(22)} | ${mark(row.freshWrite, row.bareWrite, goal, s.freshWrite).padEnd(22)} | ${(row.freshTx === undefined ? '–' : mark(row.freshTx, row.bareWrite, goal, s.freshTx)).padEnd(22)} | ${mark(row.freshCall, row.bareCall, goal, s.freshCall).padEnd(22)} | ${mark(row.replay, row.bare, goal, s.replay)}`,
    );
  }
  // The null store's rows, when run: the guard's own cost with no store I/O, the most any store's row can read
  // (within the noise). No goal applies to it.
  const plain = (r, ref, rounds) => `${fmt(r.rps / ref.rps, 3)}${range(rounds)}`;
  const nullRows = rows.filter((r) => r.store === 'null' && !r.skipped);
  for (const row of nullRows) {
    const s = row.spread;
    console.log(
      `${'null'.padEnd(13)} | ${String(row.connections).padStart(5)} |    – | ${plain(row.fresh, row.bare, s.fresh).padEnd(22)} | ${plain(row.freshWrite, row.bareWrite, s.freshWrite).padEnd(22)} | ${'–'.padEnd(22)} | ${plain(row.freshCall, row.bareCall, s.freshCall).padEnd(22)} | n/a`,
    );
  }
  if (nullRows.length > 0) console.log('null: no store I/O at all (the guard alone), so the ceiling of every store\'s row; no goal applies to it');
}
for (const row of rows) if (row.skipped) console.log(`${row.store}: skipped, ${row.skipped}`);
