/**
 * End-to-end harness for generated server guards: generate each framework × store target with the real
 * CLI into a temp directory, add the fixture app, compile everything with one `tsc --strict` run, and
 * start the compiled apps as child processes on 127.0.0.1.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { main } from '../../src/cli/main.js';
import { withImportExtension } from '../../src/generate/output.js';
import { bufferIo } from '../helpers/io.js';
import { prepareTsProject, REPO_ROOT, runTsc } from '../generate/tsc.js';

export type Framework = 'express' | 'fastify' | 'fetch';
export type Store = 'memory' | 'sqlite' | 'postgres' | 'redis';
export interface Target {
  readonly framework: Framework;
  readonly store: Store;
  /**
   * What serves the compiled fetch handlers: a `node:http` bridge (default); Bun or Deno (the `bun` and `deno`
   * devDependencies) with `Bun.serve` / `Deno.serve`; or Next.js (the `next` devDependency), the handlers being an
   * app router's route handlers.
   */
  readonly runtime?: 'bun' | 'deno' | 'next';
}

/** Every target the end-to-end suites run (one compile for all of them). */
export const TARGETS: readonly Target[] = [
  { framework: 'express', store: 'memory' },
  { framework: 'express', store: 'sqlite' },
  { framework: 'express', store: 'postgres' },
  { framework: 'express', store: 'redis' },
  { framework: 'fastify', store: 'memory' },
  { framework: 'fastify', store: 'sqlite' },
  { framework: 'fetch', store: 'memory' },
  { framework: 'fetch', store: 'sqlite' },
  { framework: 'fetch', store: 'memory', runtime: 'bun' },
  { framework: 'fetch', store: 'redis', runtime: 'bun' },
  { framework: 'fetch', store: 'memory', runtime: 'deno' },
  { framework: 'fetch', store: 'redis', runtime: 'deno' },
  { framework: 'fetch', store: 'memory', runtime: 'next' },
  { framework: 'fetch', store: 'sqlite', runtime: 'next' },
];

const run = promisify(execFile);

export const DEMO_SPEC = path.join(REPO_ROOT, 'test', 'fixtures', 'server', 'demo.yaml');
const APP_FIXTURES = path.join(REPO_ROOT, 'test', 'fixtures', 'server', 'app');

const runtimeSuffix = (target: Target): string => (target.runtime === undefined ? '' : `-${target.runtime}`);
const targetName = (target: Target): string => `${target.framework}-${target.store}${runtimeSuffix(target)}`;

let build: Promise<string> | undefined;
let buildRoot: string | undefined;

process.on('exit', () => {
  if (buildRoot !== undefined) rmSync(buildRoot, { recursive: true, force: true });
});

/** Generates and compiles every target once per test run; resolves to the root of the compiled tree. */
export function buildTargets(): Promise<string> {
  build ??= (async () => {
    const root = mkdtempSync(path.join(os.tmpdir(), 'idemkit-e2e-'));
    buildRoot = root;
    writeFileSync(path.join(root, 'package.json'), JSON.stringify({ type: 'module', private: true }));
    for (const target of TARGETS) {
      // A Next.js target is TypeScript that `next build` compiles and checks itself (its own tsconfig), out of src/.
      const next = target.runtime === 'next';
      const dir = next ? path.join(nextRoot(root, target), 'web', 'lib') : path.join(root, 'src', targetName(target));
      mkdirSync(dir, { recursive: true });
      const io = bufferIo();
      // Next.js resolves no `./x.js` to `x.ts` (neither webpack nor Turbopack): its guards import without an extension.
      const args = ['generate', 'server', DEMO_SPEC, '--framework', target.framework, '--store', target.store, '--out', path.join(dir, 'gen'), ...(next ? ['--import-extension', 'none'] : [])];
      const code = await main(args, io);
      if (code !== 0) throw new Error(`generate ${targetName(target)} exited ${code}: ${io.err}`);
      // The app's own files as a Next.js app writes them: the same fixtures, their relative imports without `.js`.
      const copy = next ? copyWithoutJsImports : copyFileSync;
      if (!next) copy(path.join(APP_FIXTURES, `app-${target.framework}${runtimeSuffix(target)}.ts`), path.join(dir, 'app.ts'));
      if (target.framework === 'fetch') copy(path.join(APP_FIXTURES, 'fetch-routes.ts'), path.join(dir, 'fetch-routes.ts'));
      copy(path.join(APP_FIXTURES, `store-${target.store}.ts`), path.join(dir, 'store.ts'));
      copy(path.join(APP_FIXTURES, 'support.ts'), path.join(dir, 'support.ts'));
    }
    const diagnostics = await runTsc(prepareTsProject(root, { outDir: path.join(root, 'dist'), include: ['src/**/*.ts'] }));
    if (diagnostics !== '') throw new Error(`generated code does not compile under tsc --strict:\n${diagnostics}`);
    return root;
  })();
  return build;
}

/** Where a Next.js target's app lives: `app.js` (Next's programmatic server) beside `web/` (the Next.js project). */
function nextRoot(root: string, target: Target): string {
  return path.join(root, 'next', targetName(target));
}

/** Copies a fixture with its relative imports written without `.js` (`./store.js` → `./store`), as bundled apps write them. */
function copyWithoutJsImports(from: string, to: string): void {
  writeFileSync(to, withImportExtension([{ path: path.basename(to), contents: readFileSync(from, 'utf8') }], 'none')[0]!.contents);
}

/** The entry point of a built target. */
function appEntry(root: string, target: Target): string {
  return target.runtime === 'next' ? path.join(nextRoot(root, target), 'app.js') : path.join(root, 'dist', 'src', targetName(target), 'app.js');
}

const nextBuilds = new Map<string, Promise<void>>();

/**
 * Adds the Next.js app router (TypeScript route handlers that export the guards of `web/lib/fetch-routes.ts`), its
 * tsconfig and config, and Next's programmatic server (`app.js`) to a Next.js target, and runs `next build` on it —
 * which compiles the generated guards from their TypeScript and type-checks them and the routes — once, when the
 * target is first started (so suites that start no Next.js target do not wait for it).
 */
function buildNextApp(dir: string): Promise<void> {
  let build = nextBuilds.get(dir);
  if (build === undefined) {
    build = nextBuild(dir);
    nextBuilds.set(dir, build);
  }
  return build;
}

async function nextBuild(dir: string): Promise<void> {
  const fixtures = path.join(APP_FIXTURES, 'next');
  copyFileSync(path.join(fixtures, 'server.mjs'), path.join(dir, 'app.js'));
  cpSync(path.join(fixtures, 'app'), path.join(dir, 'web', 'app'), { recursive: true });
  for (const file of ['next.config.mjs', 'tsconfig.json']) copyFileSync(path.join(fixtures, file), path.join(dir, 'web', file));
  const next = path.join(REPO_ROOT, 'node_modules', 'next', 'dist', 'bin', 'next');
  try {
    await run(process.execPath, [next, 'build'], { cwd: path.join(dir, 'web'), env: { ...process.env, NEXT_TELEMETRY_DISABLED: '1' }, maxBuffer: 16 * 1024 * 1024 });
  } catch (error) {
    const failure = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(`next build of ${dir} failed:\n${`${failure.stdout ?? ''}${failure.stderr ?? ''}`.trim() || failure.message}`);
  }
}

/** A running app process. */
export interface RunningServer {
  readonly port: number;
  readonly child: ChildProcess;
  /** Resolves with the exit code or signal once the process is gone. */
  readonly exited: Promise<number | string | null>;
  /** SIGTERM, then SIGKILL after 3 s; resolves when the process is gone. */
  stop(): Promise<void>;
  /** stderr so far (for failure messages). */
  stderr(): string;
}

/** Files the app writes to: effects, reconciliation calls, guard logs (one JSON object per line). */
export interface AppFiles {
  readonly dir: string;
  readonly effects: string;
  readonly reconcile: string;
  readonly log: string;
  readonly sqlite: string;
}

/** A fresh directory of app files for one server (or one group of servers sharing a store). */
export function appFiles(): AppFiles {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'idemkit-e2e-run-'));
  return {
    dir,
    effects: path.join(dir, 'effects.jsonl'),
    reconcile: path.join(dir, 'reconcile.jsonl'),
    log: path.join(dir, 'guard-log.jsonl'),
    sqlite: path.join(dir, 'idempotency.db'),
  };
}

/**
 * The port a child app prints as `listening PORT` on stdout; rejects when it exits first or says nothing within
 * 20 s, with its stderr so far.
 */
export function listeningPort(child: ChildProcess, exited: Promise<number | string | null>, name: string, stderr: () => string): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    let stdout = '';
    const timer = setTimeout(() => reject(new Error(`${name} did not start within 20 s: ${stderr()}`)), 20_000);
    child.stdout!.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const match = /listening (\d+)/.exec(stdout);
      if (match !== null) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    });
    void exited.then((how) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${String(how)}) before listening: ${stderr()}`));
    });
  });
}

/**
 * The command that runs a compiled app under `runtime`. Bun and Deno come from their devDependencies: the platform
 * package's binary (what the `bun` package's postinstall links into place, so it runs also where install scripts
 * were not run), else the package's bin.
 */
/** The Bun or Deno binary of the devDependencies (the platform package's, else the `.bin` launcher). */
export function runtimeBinary(runtime: 'bun' | 'deno'): string {
  const arch = process.arch === 'arm64' ? (runtime === 'bun' ? 'aarch64' : 'arm64') : process.arch;
  const platformBinary =
    runtime === 'bun'
      ? path.join(REPO_ROOT, 'node_modules', '@oven', `bun-${process.platform}-${arch}`, 'bin', 'bun')
      : path.join(REPO_ROOT, 'node_modules', '@deno', `${process.platform}-${arch}-glibc`, 'deno');
  const candidates = [platformBinary, path.join(REPO_ROOT, 'node_modules', '.bin', runtime)];
  const binary = candidates.find((candidate) => existsSync(candidate));
  if (binary === undefined) throw new Error(`no ${runtime} binary at ${candidates.join(' or ')}: run npm ci (${runtime} is a devDependency)`);
  return binary;
}

function runtimeCommand(runtime: Target['runtime'], app: string): [string, string[]] {
  if (runtime !== 'bun' && runtime !== 'deno') return [process.execPath, [app]];
  const binary = runtimeBinary(runtime);
  // Deno: every permission (files, network, environment, the native addons of node_modules); it reads packages from
  // node_modules itself, as the project has a package.json.
  return runtime === 'bun' ? [binary, [app]] : [binary, ['run', '--allow-all', '--quiet', app]];
}

/** Starts the compiled app of `target` and waits until it listens. */
export async function startServer(target: Target, files: AppFiles, env: Record<string, string> = {}): Promise<RunningServer> {
  const root = await buildTargets();
  if (target.runtime === 'next') await buildNextApp(nextRoot(root, target));
  const app = appEntry(root, target);
  if (!existsSync(app)) throw new Error(`${targetName(target)} is not one of the built TARGETS`);
  const [command, argv] = runtimeCommand(target.runtime, app);
  const child = spawn(command, argv, {
    env: {
      ...process.env,
      ...(target.runtime === 'next' ? { NEXT_TELEMETRY_DISABLED: '1' } : {}),
      EFFECTS_FILE: files.effects,
      RECONCILE_FILE: files.reconcile,
      LOG_FILE: files.log,
      SQLITE_FILE: files.sqlite,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  const port = await listeningPort(child, exited, targetName(target), () => stderr);
  return {
    port,
    child,
    exited,
    stderr: () => stderr,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** One HTTP answer. */
export interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly text: string;
  readonly json: Record<string, unknown>;
}

/** Options of {@link post}. */
export interface PostOptions {
  readonly key?: string | readonly string[];
  readonly user?: string;
  readonly body?: unknown;
  /** The payload as written, instead of `body` as JSON (a form: set its `content-type` in `headers`). */
  readonly raw?: string;
  readonly headers?: Record<string, string>;
  /** Keep-alive agent for load; default: a fresh connection. */
  readonly agent?: http.Agent;
}

/** POSTs JSON to the app and reads the whole answer. */
export function post(port: number, urlPath: string, options: PostOptions = {}): Promise<Answer> {
  const payload = options.raw ?? (options.body === undefined ? '' : JSON.stringify(options.body));
  const headers: http.OutgoingHttpHeaders = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), ...options.headers };
  if (options.key !== undefined) headers['idempotency-key'] = options.key as string | string[];
  if (options.user !== undefined) headers['x-user'] = options.user;
  return new Promise((resolve, reject) => {
    const request = http.request({ host: '127.0.0.1', port, path: urlPath, method: 'POST', headers, agent: options.agent ?? false }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: Record<string, unknown> = {};
        try {
          json = JSON.parse(text) as Record<string, unknown>;
        } catch {
          // Not JSON: tests look at `text`.
        }
        resolve({ status: response.statusCode ?? 0, headers: response.headers, text, json });
      });
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(payload);
  });
}

/**
 * Sends a POST and destroys the socket as soon as `dropWhen()` holds (checked every 5 ms; e.g. "the
 * handler's effect is visible"), before the answer arrives: the lost response. Resolves once the socket is
 * closed, with whether any answer had arrived by then.
 */
export function postAndDrop(port: number, urlPath: string, options: PostOptions & { dropWhen: () => boolean }): Promise<boolean> {
  const payload = JSON.stringify(options.body);
  return new Promise((resolve) => {
    const request = http.request({
      host: '127.0.0.1',
      port,
      path: urlPath,
      method: 'POST',
      agent: false,
      headers: {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(payload),
        'idempotency-key': options.key as string,
        ...(options.user !== undefined ? { 'x-user': options.user } : {}),
        ...options.headers,
      },
    });
    let answered = false;
    request.on('response', (response) => {
      answered = true;
      response.resume();
    });
    request.on('error', () => undefined);
    request.on('close', () => resolve(answered));
    request.end(payload);
    const poll = setInterval(() => {
      if (!options.dropWhen()) return;
      clearInterval(poll);
      request.destroy();
    }, 5);
    request.on('close', () => clearInterval(poll));
  });
}

/** Lines of a JSON-lines file written by the app ([] when absent). */
export function readLines(file: string): Record<string, unknown>[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** Effects the app ran for requests whose body carried `nonce`. */
export function effectsFor(files: AppFiles, nonce: string): Record<string, unknown>[] {
  return readLines(files.effects).filter((effect) => JSON.stringify(effect['body']).includes(nonce));
}

/** Polls `check` every 25 ms until it returns true or `ms` pass. */
export async function waitFor(check: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

let counter = 0;
/** A key/nonce unique within the run. */
export function unique(prefix: string): string {
  counter += 1;
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${counter}`;
}

/**
 * A SQLite "outage": another connection takes the file's write lock (`BEGIN EXCLUSIVE`), so the app's store gets
 * SQLITE_BUSY after its busy timeout — what a wedged or full disk looks like to the guard — until `release()`,
 * which may be called again (a `finally` after an early release).
 */
export function holdSqliteWriteLock(file: string): { release(): void } {
  const holder = new Database(file);
  holder.exec('BEGIN EXCLUSIVE');
  return {
    release: () => {
      if (!holder.open) return;
      holder.exec('ROLLBACK');
      holder.close();
    },
  };
}
