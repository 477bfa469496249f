/**
 * Throw-away database servers for integration tests: a PostgreSQL cluster (`initdb` + `pg_ctl` in a temp
 * dir), a PgBouncer in front of one, and a `redis-server`, each on a free loopback port, started and stopped by
 * the test itself.
 *
 * A missing binary is a loud skip locally and a failure when `CI=true` ({@link requireBinary}).
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Where a binary lives: PATH first, then the given directories. */
export function findBinary(name: string, extraDirs: readonly string[] = []): string | undefined {
  const dirs = [...(process.env['PATH'] ?? '').split(delimiter), ...extraDirs];
  for (const dir of dirs) {
    if (dir !== '' && existsSync(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

/**
 * Find `name` or stop the suite: with `CI=true` a missing binary fails it; locally the suite is skipped
 * with a warning on stderr (never silently).
 */
export function requireBinary(ctx: Mocha.Context, name: string, extraDirs: readonly string[] = []): string {
  const found = findBinary(name, extraDirs);
  if (found !== undefined) return found;
  const message = `${name} not found on PATH${extraDirs.length > 0 ? ` or in ${extraDirs.join(', ')}` : ''}`;
  if (process.env['CI'] === 'true') throw new Error(`${message}: CI must run the ${ctx.currentTest?.parent?.title ?? ctx.test?.parent?.title ?? ''} tests (.ci/run installs it)`);
  process.stderr.write(`\n  !!! SKIPPING "${ctx.test?.parent?.fullTitle() ?? name}": ${message}. Install it to run these tests. !!!\n\n`);
  ctx.skip();
}

/** A free TCP port on 127.0.0.1 (asked from the OS, then released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Where Debian's PostgreSQL packages put initdb and pg_ctl (when they are not on PATH). */
export const PG_DIRS = ['/usr/lib/postgresql/15/bin', '/usr/lib/postgresql/16/bin', '/usr/lib/postgresql/17/bin'];

/** A running throw-away PostgreSQL cluster. */
export interface PostgresServer {
  readonly host: string;
  readonly port: number;
  readonly user: string;
  readonly database: string;
  readonly connectionString: string;
  /** Stop it (fast shutdown) and delete its directory. Safe to call twice. */
  stop(): Promise<void>;
  /** Stop it the hard way (immediate shutdown, no checkpoint), as a crash would. */
  kill(): Promise<void>;
  /** Start it again on the same port and data after {@link kill} (crash recovery runs). */
  restart(): Promise<void>;
}

/** Run a PostgreSQL tool, as the `postgres` user when we are root (initdb refuses to run as root). */
async function pgTool(asPostgres: boolean, binary: string, args: string[]): Promise<void> {
  const [cmd, argv] = asPostgres ? ['runuser', ['-u', 'postgres', '--', binary, ...args]] : [binary, args];
  await run(cmd, argv, { timeout: 60_000 });
}

/** `initdb` + `pg_ctl start` in a temp dir on a free loopback port. Call {@link requireBinary} first. */
export async function startPostgres(): Promise<PostgresServer> {
  const initdb = findBinary('initdb', PG_DIRS);
  const pgCtl = findBinary('pg_ctl', PG_DIRS);
  if (initdb === undefined || pgCtl === undefined) throw new Error('initdb / pg_ctl not found');
  const asPostgres = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), 'idemkit-pg-'));
  if (asPostgres) {
    const { stdout: uid } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    chownSync(dir, Number(uid.trim()), Number(gid.trim()));
  }
  const data = join(dir, 'data');
  const port = await freePort();
  await pgTool(asPostgres, initdb, ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync']);
  const options = `-p ${port} -h 127.0.0.1 -k ${dir} -c fsync=off -c full_page_writes=off -c synchronous_commit=off`;
  const start = () => pgTool(asPostgres, pgCtl, ['-D', data, '-l', join(dir, 'server.log'), '-w', '-t', '60', '-o', options, 'start']);
  await start();
  let running = true;
  // If the test process dies without `after` running, do not leave a postmaster behind.
  const stopOnExit = () => {
    if (!running) return;
    const [cmd, argv] = asPostgres ? ['runuser', ['-u', 'postgres', '--', pgCtl, '-D', data, '-m', 'immediate', 'stop']] : [pgCtl, ['-D', data, '-m', 'immediate', 'stop']];
    try {
      execFileSync(cmd, argv as string[], { stdio: 'ignore', timeout: 30_000 });
    } catch {
      // Nothing more can be done while exiting.
    }
  };
  process.once('exit', stopOnExit);
  const shutdown = async (mode: 'fast' | 'immediate') => {
    if (!running) return;
    running = false;
    process.removeListener('exit', stopOnExit);
    try {
      await pgTool(asPostgres, pgCtl, ['-D', data, '-m', mode, '-w', '-t', '60', 'stop']);
    } finally {
      if (mode === 'fast') rmSync(dir, { recursive: true, force: true });
    }
  };
  return {
    host: '127.0.0.1',
    port,
    user: 'postgres',
    database: 'postgres',
    connectionString: `postgres://postgres@127.0.0.1:${port}/postgres`,
    stop: async () => {
      if (running) await shutdown('fast');
      rmSync(dir, { recursive: true, force: true });
    },
    kill: () => shutdown('immediate'),
    restart: async () => {
      if (running) return;
      await start();
      running = true;
      process.once('exit', stopOnExit);
    },
  };
}

/** A running throw-away Redis server. */
export interface RedisServer {
  readonly host: string;
  readonly port: number;
  /** SIGTERM and wait for it to exit. Safe to call twice. */
  stop(): Promise<void>;
  /** SIGKILL, as a crash would. */
  kill(): Promise<void>;
  /** Start it again on the same port after {@link kill} or {@link stop} (empty: there is no persistence). */
  restart(): Promise<void>;
}

/**
 * `redis-server` on a free loopback port (or `port`) without persistence, with `extraArgs` after its own. Call
 * {@link requireBinary} first.
 */
export async function startRedis(extraArgs: readonly string[] = [], port?: number): Promise<RedisServer> {
  const binary = findBinary('redis-server');
  if (binary === undefined) throw new Error('redis-server not found');
  port ??= await freePort();
  let signal: (sig: NodeJS.Signals) => Promise<void> = async () => undefined;
  const start = async (): Promise<void> => {
    // Its own working directory: a test that turns on AOF (CONFIG SET appendonly yes) writes it there, not into the checkout.
    const dir = mkdtempSync(join(tmpdir(), 'idemkit-redis-'));
    const child: ChildProcess = spawn(binary, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...extraArgs], {
      stdio: 'ignore',
    });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const killOnExit = () => child.kill('SIGKILL');
    process.once('exit', killOnExit);
    signal = async (sig: NodeJS.Signals) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(sig);
      await exited;
      process.removeListener('exit', killOnExit);
      rmSync(dir, { recursive: true, force: true });
    };
    await waitForRedis(port, 10_000);
  };
  await start();
  let running = true;
  const stopWith = async (sig: NodeJS.Signals) => {
    running = false;
    await signal(sig);
  };
  return {
    host: '127.0.0.1',
    port,
    stop: () => stopWith('SIGTERM'),
    kill: () => stopWith('SIGKILL'),
    restart: async () => {
      if (running) return;
      await start();
      running = true;
    },
  };
}

/** A running throw-away Redis Cluster: its masters, each a {@link RedisServer}. */
export interface RedisCluster {
  readonly nodes: readonly RedisServer[];
  stop(): Promise<void>;
}

/**
 * A Redis Cluster of `size` masters (no replicas) on free loopback ports (each with its bus port free too), its
 * slots spread by `redis-cli --cluster create`; resolves once every node says `cluster_state:ok`. Needs
 * `redis-server` and `redis-cli` (Debian's redis-server package brings both).
 */
export async function startRedisCluster(size = 3): Promise<RedisCluster> {
  const cli = findBinary('redis-cli');
  if (cli === undefined) throw new Error('redis-cli not found');
  const nodes: RedisServer[] = [];
  const stop = async (): Promise<void> => {
    for (const node of nodes) await node.stop();
  };
  try {
    for (let i = 0; i < size; i += 1) nodes.push(await startRedis(['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf'], await clusterPort()));
    await run(cli, ['--cluster', 'create', ...nodes.map((node) => `127.0.0.1:${node.port}`), '--cluster-replicas', '0', '--cluster-yes'], { timeout: 30_000 });
    const deadline = Date.now() + 30_000;
    for (const node of nodes) {
      for (;;) {
        const { stdout } = await run(cli, ['-p', String(node.port), 'cluster', 'info']);
        if (stdout.includes('cluster_state:ok')) break;
        if (Date.now() > deadline) throw new Error(`Redis Cluster node ${node.port} did not reach cluster_state:ok`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return { nodes, stop };
}

/**
 * A free port whose cluster bus port (port + 10000, as every Redis version takes it; Redis 7's `--cluster-port`
 * would free us from it, but Redis 6 has none) is free too.
 */
async function clusterPort(): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt += 1) {
    const port = await freePort();
    if (port + 10_000 <= 65_535 && (await portFree(port + 10_000))) return port;
  }
  throw new Error('found no free port whose cluster bus port (port + 10000) is free too');
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

async function waitForRedis(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = createConnection({ host: '127.0.0.1', port });
      socket.once('error', () => resolve(false));
      socket.once('connect', () => socket.write('PING\r\n'));
      socket.once('data', (data) => {
        socket.destroy();
        resolve(data.toString().startsWith('+PONG'));
      });
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`redis-server did not answer on port ${port}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A running throw-away PgBouncer in front of a {@link PostgresServer}. */
export interface PgBouncer {
  readonly port: number;
  readonly connectionString: string;
  /** SIGTERM, wait for it to exit, delete its directory. Safe to call twice. */
  stop(): Promise<void>;
}

/** Where Debian's pgbouncer package puts the binary (when `/usr/sbin` is not on PATH). */
export const PGBOUNCER_DIRS = ['/usr/sbin'];

/**
 * `pgbouncer` on a free loopback port in front of `server`, with `poolMode` (`transaction`: each transaction may
 * get another server connection) and `poolSize` server connections; as the `postgres` user when we are root
 * (pgbouncer refuses to run as root). Call {@link requireBinary} first.
 */
export async function startPgBouncer(server: PostgresServer, poolMode: 'session' | 'transaction', poolSize: number): Promise<PgBouncer> {
  const binary = findBinary('pgbouncer', PGBOUNCER_DIRS);
  if (binary === undefined) throw new Error('pgbouncer not found');
  const asPostgres = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), 'idemkit-pgbouncer-'));
  const port = await freePort();
  const ini = join(dir, 'pgbouncer.ini');
  writeFileSync(join(dir, 'users.txt'), `"${server.user}" ""\n`);
  writeFileSync(
    ini,
    [
      '[databases]',
      `${server.database} = host=${server.host} port=${server.port} dbname=${server.database} user=${server.user}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'users.txt')}`,
      `pool_mode = ${poolMode}`,
      `default_pool_size = ${poolSize}`,
      'max_client_conn = 500',
      `logfile = ${join(dir, 'pgbouncer.log')}`,
      '',
    ].join('\n'),
  );
  if (asPostgres) {
    const { stdout: uid } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    for (const file of [dir, ini, join(dir, 'users.txt')]) chownSync(file, Number(uid.trim()), Number(gid.trim()));
  }
  const [cmd, argv] = asPostgres ? ['runuser', ['-u', 'postgres', '--', binary, ini]] : [binary, [ini]];
  const child: ChildProcess = spawn(cmd, argv, { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // SIGTERM, not SIGKILL: runuser passes it on to pgbouncer (a SIGKILL would leave pgbouncer running).
  const killOnExit = () => child.kill('SIGTERM');
  process.once('exit', killOnExit);
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    process.removeListener('exit', killOnExit);
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 10_000;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = createConnection({ host: '127.0.0.1', port });
      socket.once('error', () => resolve(false));
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
    });
    if (ok) break;
    if (Date.now() > deadline || child.exitCode !== null) {
      await stop();
      throw new Error(`pgbouncer did not listen on port ${port}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { port, connectionString: `postgres://${server.user}@127.0.0.1:${port}/${server.database}`, stop };
}
