/**
 * Harness for real third-party SDKs against generated guards: compile fixture apps with their guards under
 * `tsc --strict`, start them as child processes on 127.0.0.1, and put a TCP proxy between SDK and app that
 * records each exchange and can drop an answer after the handler committed (the lost response).
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { main } from '../../src/cli/main.js';
import { prepareTsProject, REPO_ROOT, runTsc } from '../generate/tsc.js';
import { bufferIo } from '../helpers/io.js';
import { listeningPort } from './harness.js';

/** Where the SDK fixtures (OpenAPI documents and apps) live. */
export const SDK_FIXTURES = path.join(REPO_ROOT, 'test', 'fixtures', 'real-shapes', 'sdk');

/** Modules of {@link SDK_FIXTURES} the fixture apps share, copied next to them. */
const SHARED_FIXTURE_MODULES = ['express-test-endpoints.ts', 'sdk-effects.ts', 'sdk-store.ts'];

/** One request the proxy forwarded, and the answer it saw (unless it dropped it). */
export interface Exchange {
  readonly method: string;
  readonly path: string;
  /** Header lines as sent on the wire: [name with its casing, value]. */
  readonly headers: readonly (readonly [string, string])[];
  /** The request body bytes that followed the head in the same chunk (small test requests). */
  readonly body: string;
  readonly sentAt: number;
  status?: number;
  retryAfter?: string;
  answeredAt?: number;
  /** The proxy destroyed the connection when the answer came (the answer after commit was lost). */
  dropped?: boolean;
  /** The proxy closed the client's connection right after forwarding the request, before any answer. */
  cut?: boolean;
  /** The status the proxy answered itself in place of the app's answer (a gateway's 502/504; see {@link GatewayError}). */
  gateway?: number;
}

/**
 * An answer a gateway in front of the app gives instead of the app's: `status` (an HTML body, `Connection: close`)
 * once the app's answer comes (the handler committed; the response is lost as a 5xx) or, with `afterMs`, that long
 * after the request while the app has not answered yet (a gateway timeout; the app keeps running the request, and
 * its answer is recorded, not sent).
 */
export interface GatewayError {
  readonly status: number;
  readonly afterMs?: number;
}

/** Polls `check` every 20 ms until it holds; throws naming `what` after `ms`. */
export async function waitUntil(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * The guard's first answer of `status` among `attempts` (503: a store outage; 409: a request in progress), after
 * checking what an SDK that honours it shows: it carries `Retry-After` in whole seconds and the SDK's next attempt
 * waited that long.
 */
export function assertRetryAfterWaited(attempts: readonly Exchange[], status = 503): Exchange {
  const answer = attempts.find((e) => e.status === status);
  assert.ok(answer !== undefined, `a ${status} from the guard`);
  const retryAfter = Number(answer.retryAfter);
  assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1, `${status} carries Retry-After in seconds (got ${String(answer.retryAfter)})`);
  const next = attempts[attempts.indexOf(answer) + 1];
  assert.ok(next !== undefined, `the SDK retried after the ${status}`);
  const waited = next.sentAt - answer.answeredAt!;
  assert.ok(waited >= retryAfter * 1000 - 50, `the SDK waited the Retry-After (${retryAfter} s) before retrying (waited ${waited} ms)`);
  return answer;
}

/** A request header of an exchange, by case-insensitive name. */
export function headerOf(exchange: Exchange, name: string): string | undefined {
  return exchange.headers.find(([n]) => n.toLowerCase() === name.toLowerCase())?.[1];
}

/**
 * A loopback TCP proxy that records each HTTP/1.1 request head and answer status, and destroys both sockets
 * instead of forwarding an answer while `dropAnswers > 0`, or closes the client's connection right after
 * forwarding a request while `cutRequests > 0` (the app keeps running it; its answer is recorded, not sent), or
 * answers the next requests itself as a gateway would, one {@link GatewayError} of `gatewayErrors` each.
 */
export class LossyProxy {
  readonly exchanges: Exchange[] = [];
  dropAnswers = 0;
  cutRequests = 0;
  gatewayErrors: GatewayError[] = [];
  readonly #sockets = new Set<net.Socket>();
  readonly #server: net.Server;
  port = 0;

  constructor(private readonly upstreamPort: number) {
    this.#server = net.createServer((client) => this.#connect(client));
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    this.port = (this.#server.address() as net.AddressInfo).port;
  }

  async stop(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  /** The exchanges since `from` (an earlier `exchanges.length`). */
  since(from: number): Exchange[] {
    return this.exchanges.slice(from);
  }

  #connect(client: net.Socket): void {
    const upstream = net.connect(this.upstreamPort, '127.0.0.1');
    this.#sockets.add(client).add(upstream);
    const pending: Exchange[] = [];
    /** What the gateway does with each pending exchange, if anything. */
    const gatewayFor = new Map<Exchange, GatewayError>();
    /** The gateway answered the client itself: nothing more of the app's goes to it, and its leaving ends nothing. */
    let detached = false;
    const kill = (): void => {
      client.destroy();
      upstream.destroy();
    };
    const answerAsGateway = (exchange: Exchange, status: number): void => {
      exchange.gateway = status;
      detached = true;
      const body = `<html><head><title>${status}</title></head><body><center><h1>${status}</h1></center></body></html>\r\n`;
      client.end(`HTTP/1.1 ${status} ${status === 504 ? 'Gateway Time-out' : 'Bad Gateway'}\r\nContent-Type: text/html\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
    };
    client.on('data', (chunk: Buffer) => {
      // Small test requests: a head never spans two chunks, and no body holds a request line.
      const text = chunk.toString('latin1');
      const heads = [...text.matchAll(/^([A-Z]+) (\S+) HTTP\/1\.1\r\n([\s\S]*?)\r\n\r\n/gm)];
      heads.forEach((match, i) => {
        const headers = match[3]!.split('\r\n').map((line) => {
          const colon = line.indexOf(':');
          return [line.slice(0, colon), line.slice(colon + 1).trim()] as const;
        });
        const bodyStart = match.index + match[0].length;
        const body = Buffer.from(text.slice(bodyStart, heads[i + 1]?.index ?? text.length), 'latin1').toString('utf8');
        const exchange: Exchange = { method: match[1]!, path: match[2]!, headers, body, sentAt: Date.now() };
        this.exchanges.push(exchange);
        pending.push(exchange);
        const gateway = this.gatewayErrors.shift();
        if (gateway !== undefined) {
          gatewayFor.set(exchange, gateway);
          if (gateway.afterMs !== undefined) {
            setTimeout(() => {
              if (exchange.status === undefined && !client.destroyed) answerAsGateway(exchange, gateway.status);
            }, gateway.afterMs);
          }
        }
      });
      upstream.write(chunk);
      if (heads.length > 0 && this.cutRequests > 0) {
        this.cutRequests -= 1;
        pending.at(-1)!.cut = true;
        client.destroy();
      }
    });
    upstream.on('data', (chunk: Buffer) => {
      const head = /^HTTP\/1\.1 (\d{3})[^\r]*\r\n([\s\S]*?)\r\n\r\n/.exec(chunk.toString('latin1'));
      if (head !== null) {
        const exchange = pending.shift();
        if (exchange !== undefined) {
          exchange.status = Number(head[1]);
          exchange.answeredAt = Date.now();
          const retryAfter = /^retry-after: *(.*)$/im.exec(head[2]!)?.[1];
          if (retryAfter !== undefined) exchange.retryAfter = retryAfter.trim();
          const gateway = gatewayFor.get(exchange);
          if (gateway !== undefined && exchange.gateway === undefined && !detached) answerAsGateway(exchange, gateway.status);
          if (this.dropAnswers > 0) {
            this.dropAnswers -= 1;
            exchange.dropped = true;
            kill();
            return;
          }
        }
      }
      if (!client.destroyed && !detached) client.write(chunk);
    });
    client.on('end', () => {
      if (!detached) upstream.end();
    });
    upstream.on('end', () => client.end());
    client.on('error', kill);
    upstream.on('error', kill);
    client.on('close', () => this.#sockets.delete(client));
    upstream.on('close', () => this.#sockets.delete(upstream));
  }
}

/**
 * One fixture app to compile: the guard generated from `spec` into `src/<dir>/<gen>/`, and the app file beside it
 * (with the shared fixture modules).
 */
export interface GuardedApp {
  /** The OpenAPI document, relative to {@link SDK_FIXTURES}. */
  readonly spec: string;
  readonly framework: 'express' | 'fastify' | 'fetch';
  /** The store the guard is generated with (default `sqlite`); the app picks it up through `sdk-store.ts`. */
  readonly store?: 'sqlite' | 'postgres' | 'redis';
  /** The directory the guard is generated into (the app imports `./<gen>/index.js`). */
  readonly gen: string;
  /** The app's file in {@link SDK_FIXTURES}; compiled to `dist/src/<dir>/<app>.js`. */
  readonly app: string;
  /** A subdirectory of `src/` (default none), so one app file can be built against guards of several stores. */
  readonly dir?: string;
}

/**
 * Generates each app's guard with the real CLI (its store, SQLite by default), copies the apps beside them and
 * compiles all of it in one `tsc --strict` run, in a temp tree removed when the process exits; resolves to that
 * tree's root.
 */
export async function compileGuardedApps(apps: readonly GuardedApp[]): Promise<string> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'idemkit-sdk-'));
  process.on('exit', () => rmSync(root, { recursive: true, force: true }));
  writeFileSync(path.join(root, 'package.json'), JSON.stringify({ type: 'module', private: true }));
  const dirs = new Set<string>();
  for (const app of apps) {
    const dir = path.join(root, 'src', app.dir ?? '');
    mkdirSync(dir, { recursive: true });
    dirs.add(dir);
    const io = bufferIo();
    const store = app.store ?? 'sqlite';
    const args = ['generate', 'server', path.join(SDK_FIXTURES, app.spec), '--framework', app.framework, '--store', store, '--out', path.join(dir, app.gen)];
    const code = await main(args, io);
    if (code !== 0) throw new Error(`generate server ${app.spec} --framework ${app.framework} --store ${store} exited ${code}: ${io.err}`);
    copyFileSync(path.join(SDK_FIXTURES, app.app), path.join(dir, app.app));
  }
  for (const dir of dirs) for (const shared of SHARED_FIXTURE_MODULES) copyFileSync(path.join(SDK_FIXTURES, shared), path.join(dir, shared));
  const diagnostics = await runTsc(prepareTsProject(root, { outDir: path.join(root, 'dist'), include: ['src/**/*.ts'] }));
  if (diagnostics !== '') throw new Error(`the generated guards and the apps do not compile under tsc --strict:\n${diagnostics}`);
  return root;
}

/** A compiled fixture app running as a child process, with its SQLite file in its own temp directory. */
export class AppProcess {
  /** The app's stderr so far (printed by the suites when a test fails). */
  stderr = '';
  port = 0;
  readonly dataDir = mkdtempSync(path.join(os.tmpdir(), 'idemkit-sdk-run-'));
  #child: ChildProcess | undefined;

  /** The SQLite file the app's store uses (when it was generated with SQLite). */
  get databaseFile(): string {
    return path.join(this.dataDir, 'idempotency.db');
  }

  /** Starts `dist/src/<script>` of a {@link compileGuardedApps} tree; resolves once it prints `listening PORT`. */
  async start(root: string, script: string, env: Readonly<Record<string, string>> = {}): Promise<void> {
    const child = spawn(process.execPath, [path.join(root, 'dist', 'src', script)], {
      env: { ...process.env, ...env, SQLITE_FILE: this.databaseFile, SQLITE_BUSY_MS: '300' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.#child = child;
    child.stderr!.on('data', (chunk: Buffer) => {
      this.stderr += chunk.toString();
    });
    const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
    this.port = await listeningPort(child, exited, script, () => this.stderr);
  }

  /** Stops the app (SIGTERM, waits for the exit) and removes its data directory. */
  async stop(): Promise<void> {
    const child = this.#child;
    if (child !== undefined && child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await gone;
    }
    rmSync(this.dataDir, { recursive: true, force: true });
  }

  /** GETs a JSON document from the app (its /test/* read-backs). */
  async getJson<T>(urlPath: string): Promise<T> {
    const response = await fetch(`http://127.0.0.1:${this.port}${urlPath}`);
    return (await response.json()) as T;
  }
}

/**
 * An app started before a suite's tests (`start` starts it) with a {@link LossyProxy} in front, both stopped after
 * them. After each test the proxy forwards everything again, and a failed test prints the app's stderr. Call it in
 * a `describe`; `proxy()` is there once the suite has started.
 */
export function appBehindProxy(start: (app: AppProcess) => Promise<void>): { readonly app: AppProcess; readonly proxy: () => LossyProxy } {
  const app = new AppProcess();
  let proxy: LossyProxy | undefined;
  before(async function () {
    this.timeout(180_000);
    await start(app);
    proxy = new LossyProxy(app.port);
    await proxy.start();
  });
  after(async () => {
    await proxy?.stop();
    await app.stop();
  });
  afterEach(function () {
    if (proxy !== undefined) {
      proxy.dropAnswers = 0;
      proxy.cutRequests = 0;
      proxy.gatewayErrors = [];
    }
    if (this.currentTest?.state === 'failed' && app.stderr !== '') console.error(app.stderr);
  });
  return { app, proxy: () => proxy! };
}
