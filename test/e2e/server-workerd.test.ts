// The generated fetch guard in Cloudflare's runtime: workerd (the `workerd` devDependency, the open-source runtime of
// Cloudflare Workers) serving a worker bundled by esbuild from the generated TypeScript, with `nodejs_compat` (the
// guard hashes with node:crypto), on the memory store (a worker's isolate holds it). Web timers are numbers there: the
// guard hung on every request before it stopped calling unref() on them.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { build } from 'esbuild';
import { main } from '../../src/cli/main.js';
import { bufferIo } from '../helpers/io.js';
import { freePort } from '../helpers/servers.js';
import { REPO_ROOT } from '../generate/tsc.js';
import { post, type Answer } from './harness.js';

const WORKER = `
import { createGuards } from './gen/guards.js';
import { MemoryStore } from './gen/runtime/stores/memory.js';

let effects = 0;
const guards = createGuards({ store: new MemoryStore(), principal: (request) => request.headers.get('x-user') ?? undefined });
const create = guards.createDemoRequest.wrap(async (request: Request) => {
  const hold = Number(request.headers.get('x-test-hold-ms') ?? 0);
  if (hold > 0) await new Promise((resolve) => setTimeout(resolve, hold));
  effects += 1;
  const body = (await request.json()) as { topic: string };
  return Response.json({ id: 'demo-' + effects, topic: body.topic }, { status: 201, headers: { location: '/v1/demo-requests/demo-' + effects } });
});

export default {
  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === '/test/effects') return Response.json({ effects });
    if (request.method === 'POST' && url.pathname === '/v1/demo-requests') return create(request);
    return new Response('not found', { status: 404 });
  },
};
`;

const config = (port: number) => `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [ (name = "main", worker = .demo) ],
  sockets = [ (name = "http", address = "127.0.0.1:${port}", http = (), service = "main") ],
);
const demo :Workerd.Worker = (
  modules = [ (name = "worker", esModule = embed "worker.js") ],
  compatibilityDate = "2025-09-01",
  compatibilityFlags = ["nodejs_compat"],
);
`;

describe('generated fetch guard under workerd (Cloudflare Workers runtime), over HTTP', function () {
  this.timeout(60_000);
  let dir: string;
  let port: number;
  let child: ChildProcess | undefined;
  let stderr = '';
  let counter = 0;
  const unique = (what: string) => `${what}-${process.pid}-${(counter += 1)}`;
  const body = (topic: string) => ({ topic, contact: { email: 'w@example.com' } });
  const effects = async (): Promise<number> => ((await get('/test/effects')) as { effects: number }).effects;

  async function get(urlPath: string): Promise<unknown> {
    const response = await fetch(`http://127.0.0.1:${port}${urlPath}`);
    return response.json();
  }

  before(async function () {
    this.timeout(120_000);
    dir = mkdtempSync(path.join(os.tmpdir(), 'idemkit-workerd-'));
    const io = bufferIo();
    const code = await main(['generate', 'server', path.join(REPO_ROOT, 'test', 'fixtures', 'server', 'demo.yaml'), '--framework', 'fetch', '--store', 'memory', '--out', path.join(dir, 'gen')], io);
    assert.equal(code, 0, io.err);
    writeFileSync(path.join(dir, 'worker.ts'), WORKER);
    // As wrangler bundles a worker: one ES module, node:* left to the runtime's nodejs_compat.
    await build({ entryPoints: [path.join(dir, 'worker.ts')], bundle: true, format: 'esm', platform: 'neutral', external: ['node:*'], outfile: path.join(dir, 'worker.js'), logLevel: 'silent' });
    port = await freePort();
    writeFileSync(path.join(dir, 'config.capnp'), config(port));
    child = spawn(path.join(REPO_ROOT, 'node_modules', '.bin', 'workerd'), ['serve', 'config.capnp'], { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<never>((_resolve, reject) => child!.once('exit', (code) => reject(new Error(`workerd exited ${code}: ${stderr}`))));
    const deadline = Date.now() + 30_000;
    for (;;) {
      const up = await Promise.race([get('/test/effects').then(() => true, () => false), exited]);
      if (up) break;
      if (Date.now() > deadline) throw new Error(`workerd did not listen within 30 s: ${stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  });

  after(async () => {
    if (child !== undefined && child.exitCode === null) {
      const gone = new Promise((resolve) => child!.once('exit', resolve));
      child.kill('SIGTERM');
      await gone;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('first answer, then the replay of the same status, headers and bytes; another body with the key is 422; one effect', async () => {
    const key = unique('replay');
    const before = await effects();
    const first = await post(port, '/v1/demo-requests', { key, user: 'alice', body: body('pricing') });
    assert.equal(first.status, 201, `${first.text} ${stderr}`);
    assert.equal(first.headers['idempotent-replayed'], 'false');
    const replay = await post(port, '/v1/demo-requests', { key, user: 'alice', body: body('pricing') });
    assert.equal(replay.status, 201);
    assert.equal(replay.headers['idempotent-replayed'], 'true');
    assert.equal(replay.text, first.text);
    assert.equal(replay.headers['location'], first.headers['location']);
    const other = await post(port, '/v1/demo-requests', { key, user: 'alice', body: body('refund-everything') });
    assert.equal(other.status, 422);
    assert.equal(other.headers['content-type'], 'application/problem+json');
    // Another principal with the same key is another record.
    assert.equal((await post(port, '/v1/demo-requests', { key, user: 'bob', body: body('pricing') })).headers['idempotent-replayed'], 'false');
    assert.equal((await effects()) - before, 2);
  });

  it('lost response: the client goes away while the handler runs; the effect completes and the retry gets the stored answer', async () => {
    const key = unique('lost');
    const before = await effects();
    await new Promise<void>((resolve) => {
      const payload = JSON.stringify(body('lost'));
      const request = http.request({
        host: '127.0.0.1',
        port,
        path: '/v1/demo-requests',
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), 'idempotency-key': key, 'x-user': 'alice', 'x-test-hold-ms': '600' },
      });
      request.on('response', () => assert.fail('the answer was to be lost'));
      request.on('error', () => undefined);
      request.on('close', () => resolve());
      request.end(payload);
      setTimeout(() => request.destroy(), 200);
    });
    for (const deadline = Date.now() + 5000; (await effects()) === before; ) {
      if (Date.now() > deadline) assert.fail('the handler of the lost request never ran its effect');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    let retry: Answer;
    for (const deadline = Date.now() + 5000; ; await new Promise((resolve) => setTimeout(resolve, 200))) {
      retry = await post(port, '/v1/demo-requests', { key, user: 'alice', body: body('lost') });
      if (retry.status !== 409 || Date.now() > deadline) break;
    }
    assert.equal(retry.status, 201, retry.text);
    assert.equal(retry.headers['idempotent-replayed'], 'true');
    assert.equal((await effects()) - before, 1);
  });

  it('20 concurrent requests with one key run the handler once; the rest get 409 + Retry-After or the replay', async () => {
    const key = unique('burst');
    const before = await effects();
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => post(port, '/v1/demo-requests', { key, user: 'alice', body: body('burst'), headers: { 'x-test-hold-ms': '300' } })),
    );
    assert.equal((await effects()) - before, 1);
    const firsts = answers.filter((answer) => answer.status === 201 && answer.headers['idempotent-replayed'] === 'false');
    assert.equal(firsts.length, 1);
    for (const answer of answers) {
      if (answer.status === 201) assert.equal(answer.text, firsts[0]!.text);
      else {
        assert.equal(answer.status, 409, answer.text);
        assert.match(String(answer.headers['retry-after']), /^[1-9]\d*$/);
      }
    }
  });

  it('missing and oversized keys: 400 problem+json, the handler not run', async () => {
    const before = await effects();
    const missing = await post(port, '/v1/demo-requests', { user: 'alice', body: body('no-key') });
    assert.equal(missing.status, 400);
    assert.equal(missing.headers['content-type'], 'application/problem+json');
    const long = await post(port, '/v1/demo-requests', { key: 'k'.repeat(300), user: 'alice', body: body('long-key') });
    assert.equal(long.status, 400);
    assert.equal(await effects(), before);
  });
});
