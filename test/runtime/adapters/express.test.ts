import assert from 'node:assert/strict';
import http, { type Server } from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import Database from 'better-sqlite3';
import express from 'express';
import { createRouteGuard, idempotencyOf, type RouteGuard, type RouteGuardOptions } from '../../../src/runtime/adapters/express.js';
import { bodyKeyContract, contract, oddPathContract, queryKeyContract, slowCompletionStore } from './fixtures.js';
import type { CompiledContract } from '../../../src/runtime/contract.js';
import { computeRecordId } from '../../../src/runtime/fingerprint.js';
import { MemoryStore } from '../../../src/runtime/stores/memory.js';
import { SqliteStore } from '../../../src/runtime/stores/sqlite.js';
import { post } from '../../e2e/harness.js';
import { Readable, pipeline } from 'node:stream';
import { gunzipSync, gzipSync } from 'node:zlib';

/** POSTs JSON to /things/t1 and reads the answer's bytes as sent (no decoding). */
function postBytes(port: number, options: { key: string; body: unknown }): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  const payload = JSON.stringify(options.body);
  const headers = { 'content-type': 'application/json', 'x-user': 'u', 'idempotency-key': options.key };
  return new Promise((resolve, reject) => {
    const request = http.request({ host: '127.0.0.1', port, path: '/things/t1', method: 'POST', headers, agent: false }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks) }));
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(payload);
  });
}


/**
 * A guard over a memory store with a 300 ms lease whose reconcile hook answers `outcome` and records each abandoned
 * record id it is asked about.
 */
function reconcilingGuard(outcome: 'unknown' | 'not-happened', extra: Partial<RouteGuardOptions> = {}): { guard: RouteGuard; reconciled: string[] } {
  const reconciled: string[] = [];
  const guard = createRouteGuard({ ...contract, leaseMs: 300 }, options(new MemoryStore(), { ...extra, reconcile: (abandoned) => (reconciled.push(abandoned.recordId), { outcome }) }));
  return { guard, reconciled };
}

/** POSTs JSON to `path` and goes away `ms` later, before any answer (the guard holds a streamed one until it ends). */
function leaveAfter(port: number, path: string, key: string, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const request = http.request({ host: '127.0.0.1', port, path, method: 'POST', headers: { 'content-type': 'application/json', 'x-user': 'u', 'idempotency-key': key }, agent: false });
    request.on('error', () => undefined);
    request.end('{}');
    setTimeout(() => {
      request.destroy();
      resolve();
    }, ms);
  });
}

/** A client that leaves a streamed answer 100 ms in and retries 500 ms later: the retry must be the finished answer's replay. */
async function leftThenReplayed(port: number, key: string, text: string): Promise<void> {
  await leaveAfter(port, '/things/t1', key, 100);
  await new Promise((resolve) => setTimeout(resolve, 500));
  const retry = await post(port, '/things/t1', { key, user: 'u', body: {} });
  assert.equal(retry.headers['idempotent-replayed'], 'true', retry.text);
  assert.equal(retry.text, text);
}

async function listen(app: express.Express): Promise<{ port: number; close(): Promise<void> }> {
  const server: Server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

function options(store: RouteGuardOptions['store'], extra: Partial<RouteGuardOptions> = {}): RouteGuardOptions {
  return { store, principal: (req) => req.get('x-user'), ...extra };
}

describe('runtime/adapters/express', () => {
  let calls = 0;
  let server: { port: number; close(): Promise<void> };
  beforeEach(() => {
    calls = 0;
  });
  afterEach(async () => {
    await server?.close();
  });

  it('a lossless JSON parser’s bigints are fingerprinted exactly: no 500 before the handler, and a body that differs past a double is 422', async () => {
    const app = express();
    // As json-bigint with useNativeBigInt (or a reviver with source access) parses: integers past 2^53 as bigints.
    const losslessJson: express.RequestHandler = (req, _res, next) => {
      const marked = (req.body as string).replace(/(:\s*)(-?\d{16,})(?=\s*[,}\]])/g, '$1"#big:$2"');
      req.body = JSON.parse(marked, (_name, value: unknown) => (typeof value === 'string' && value.startsWith('#big:') ? BigInt(value.slice(5)) : value));
      next();
    };
    const amounts: bigint[] = [];
    app.post('/things/:tenant', express.text({ type: 'application/json' }), losslessJson, createRouteGuard(contract, options(new MemoryStore())), (req, res) => {
      calls += 1;
      amounts.push((req.body as { amount: bigint }).amount);
      res.status(201).json({ id: calls });
    });
    server = await listen(app);
    const send = (key: string, raw: string) => post(server.port, '/things/t1', { key, user: 'u', raw });
    const first = await send('big', '{"amount":9007199254740993}');
    assert.equal(first.status, 201, first.text);
    assert.equal((await send('big', '{"amount":9007199254740993}')).headers['idempotent-replayed'], 'true');
    const other = await send('big', '{"amount":9007199254740992}');
    assert.equal(other.status, 422, other.text);
    assert.deepEqual(amounts, [9007199254740993n]);
    assert.equal(calls, 1);
  });

  it('reads a key from a form field (express.urlencoded) or the query, as the contract says', async () => {
    const app = express();
    const created: express.RequestHandler = (_req, res) => {
      calls += 1;
      res.status(201).json({ id: calls });
    };
    app.post('/things/:tenant', express.urlencoded({ extended: false }), createRouteGuard(bodyKeyContract, options(new MemoryStore())), created);
    app.post('/queried/:tenant', express.json(), createRouteGuard(queryKeyContract, options(new MemoryStore())), created);
    server = await listen(app);
    const form = (token: string, amount = '1') => post(server!.port, '/things/t1', { user: 'u', headers: { 'content-type': 'application/x-www-form-urlencoded' }, raw: `amount=${amount}&client_token=${token}` });
    assert.equal((await form('tok-1')).status, 201);
    const replay = await form('tok-1');
    assert.equal(replay.headers['idempotent-replayed'], 'true');
    assert.equal((await form('tok-1', '2')).status, 422);
    // body-parser keeps %FF (no UTF-8) as the text "%FF", as it decodes %25FF: both are refused, as on Fastify and fetch.
    assert.equal((await form('%FF')).status, 400);
    assert.equal((await form('%25FF')).status, 400);
    assert.equal((await form('50%25%20off')).status, 201, 'a key holding a % that decodes is a key');
    assert.equal((await post(server.port, '/queried/t1?requestId=q-1', { user: 'u', body: { a: 1 } })).status, 201);
    assert.equal((await post(server.port, '/queried/t1?requestId=q-1', { user: 'u', body: { a: 1 } })).headers['idempotent-replayed'], 'true');
    assert.equal((await post(server.port, '/queried/t1', { user: 'u', key: 'q-1', body: { a: 1 } })).status, 400);
    assert.equal(calls, 3);
  });

  it('captures writeHead(status, headers) + write + end and replays the exact bytes and allow-listed headers', async () => {
    const app = express();
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    app.post('/things/:tenant', express.json(), guard, (req, res) => {
      calls += 1;
      res.setHeader('set-cookie', 'session=secret');
      res.writeHead(201, 'Made', [['content-type', 'text/plain; charset=utf-8'], ['etag', '"v1"']].flat());
      res.write('part one, ');
      res.write(Buffer.from('part two, '));
      res.end(`tenant ${String(req.params['tenant'])}`, 'utf8');
    });
    server = await listen(app);
    const first = await post(server.port, '/things/t1', { key: 'k1', user: 'u', body: { a: 1 } });
    assert.equal(first.status, 201);
    assert.equal(first.text, 'part one, part two, tenant t1');
    assert.equal(first.headers['idempotent-replayed'], 'false');
    assert.equal(first.headers['set-cookie']?.[0], 'session=secret');
    const replay = await post(server.port, '/things/t1', { key: 'k1', user: 'u', body: { a: 1 } });
    assert.equal(replay.status, 201);
    assert.equal(replay.text, first.text);
    assert.equal(replay.headers['etag'], '"v1"');
    assert.equal(replay.headers['content-type'], 'text/plain; charset=utf-8');
    assert.equal(replay.headers['idempotent-replayed'], 'true');
    assert.equal(replay.headers['set-cookie'], undefined, 'cookies are never replayed');
    assert.equal(calls, 1);
  });

  it('sends a raw writeHead array as Node does: a repeated name stays repeated, nested pairs work; after setHeader as this Node does (Node 22+ keeps a repeat, Node 20 lets the last win)', async () => {
    const app = express();
    app.disable('x-powered-by');
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    const handler = (req: express.Request, res: express.Response) => {
      const tenant = String(req.params['tenant']);
      if (tenant === 'flat') res.writeHead(202, 'Fine', ['X-A', '1', 'x-a', '2', 'Link', '<a>', 'Link', '<b>']);
      else if (tenant === 'nested') res.writeHead(202, [['X-B', 'v1'], ['x-b', 'v2']]);
      else {
        res.setHeader('x-c', '0');
        res.writeHead(202, ['X-C', '1', 'x-c', '2']);
      }
      res.end('ok');
    };
    app.post('/bare/:tenant', express.json(), handler);
    app.post('/things/:tenant', express.json(), guard, handler);
    server = await listen(app);
    for (const tenant of ['flat', 'nested', 'set']) {
      const bare = await post(server.port, `/bare/${tenant}`, { body: { a: 1 } });
      const guarded = await post(server.port, `/things/${tenant}`, { key: `k-${tenant}`, user: 'u', body: { a: 1 } });
      assert.equal(guarded.status, 202, tenant);
      for (const name of ['x-a', 'link', 'x-b', 'x-c']) assert.equal(guarded.headers[name], bare.headers[name], `${tenant}: ${name}`);
    }
    const flat = await post(server.port, '/things/flat', { key: 'k-flat-2', user: 'u', body: { a: 1 } });
    assert.deepEqual([flat.headers['x-a'], flat.headers['link']], ['1, 2', '<a>, <b>']);
  });

  it('records no line for a header set to an empty list, as Node sends none: the replay has none either', async () => {
    const app = express();
    const guard = createRouteGuard(contract, options(new MemoryStore(), { replayHeaders: ['content-type', 'x-empty'] }));
    app.post('/things/:tenant', express.json(), guard, (_req, res) => {
      res.setHeader('x-empty', []);
      res.status(201).json({ id: 'e1' });
    });
    server = await listen(app);
    const first = await post(server.port, '/things/t1', { key: 'k-empty', user: 'u', body: { a: 1 } });
    const replay = await post(server.port, '/things/t1', { key: 'k-empty', user: 'u', body: { a: 1 } });
    assert.deepEqual([first.status, replay.status, replay.headers['idempotent-replayed']], [201, 201, 'true']);
    assert.equal(first.headers['x-empty'], undefined);
    assert.equal(replay.headers['x-empty'], undefined);
  });

  it('replays an empty 204 and a res.sendStatus text; path scope and declared query are part of the record', async () => {
    const app = express();
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    app.post('/things/:tenant', express.json(), guard, (req, res) => {
      calls += 1;
      if (req.query['mode'] === 'empty') res.status(204).end();
      else res.sendStatus(202);
    });
    server = await listen(app);
    const empty = await post(server.port, '/things/t1?mode=empty', { key: 'k', user: 'u', body: {} });
    assert.equal(empty.status, 204);
    const emptyReplay = await post(server.port, '/things/t1?mode=empty', { key: 'k', user: 'u', body: {} });
    assert.equal(emptyReplay.status, 204);
    assert.equal(emptyReplay.headers['idempotent-replayed'], 'true');
    // Another declared query value is another payload; another tenant is another record.
    assert.equal((await post(server.port, '/things/t1?mode=text', { key: 'k', user: 'u', body: {} })).status, 422);
    const other = await post(server.port, '/things/t2?mode=text', { key: 'k', user: 'u', body: {} });
    assert.equal(other.status, 202);
    assert.equal(other.text, 'Accepted');
    assert.equal((await post(server.port, '/things/t2?mode=text', { key: 'k', user: 'u', body: {} })).text, 'Accepted');
    assert.equal(calls, 2);
  });

  it('a free-form query object (queryAll): every query parameter sent is part of the payload, over HTTP', async () => {
    const app = express();
    const freeForm: CompiledContract = { ...contract, fingerprint: { ...contract.fingerprint, query: ['options'], queryAll: true } };
    app.post('/things/:tenant', express.json(), createRouteGuard(freeForm, options(new MemoryStore())), (_req, res) => {
      calls += 1;
      res.status(201).json({ id: `t${calls}` });
    });
    server = await listen(app);
    const first = await post(server.port, '/things/t1?colour=red&size=s&size=m', { key: 'k', user: 'u', body: {} });
    assert.equal(first.status, 201);
    const again = await post(server.port, '/things/t1?size=s&colour=red&size=m', { key: 'k', user: 'u', body: {} });
    assert.equal(again.headers['idempotent-replayed'], 'true', 'the same parameters in another order');
    assert.equal((await post(server.port, '/things/t1?colour=blue&size=s&size=m', { key: 'k', user: 'u', body: {} })).status, 422);
    assert.equal((await post(server.port, '/things/t1?colour=red&size=s&size=m&gift=1', { key: 'k', user: 'u', body: {} })).status, 422);
    assert.equal(calls, 1);
  });

  it('a thrown handler answers 500 through the error handler and keeps the key (no blind retry)', async () => {
    const app = express();
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    app.post('/things/:tenant', express.json(), guard, async () => {
      calls += 1;
      throw new Error('after the write?');
    });
    app.use((_error: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      res.status(500).json({ error: 'internal' });
    });
    server = await listen(app);
    const failed = await post(server.port, '/things/t1', { key: 'k', user: 'u', body: {} });
    assert.equal(failed.status, 500);
    const retry = await post(server.port, '/things/t1', { key: 'k', user: 'u', body: {} });
    assert.equal(retry.status, 409);
    // The handler has finished: the kept record goes to reconciliation at once, not "in progress" for the lease.
    assert.equal(retry.json['type'], 'https://idemkit.dev/problems/idempotency-request-abandoned');
    assert.equal(calls, 1);
  });

  it('records the body of an encoded answer decoded (the replay is readable); an encoding it cannot undo is recorded with its header', async () => {
    const app = express();
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    // What compression middleware mounted after the guard, or a handler passing an upstream's gzip on, sends.
    app.post('/things/:tenant', express.json(), guard, (req, res) => {
      calls += 1;
      const json = JSON.stringify({ id: `thing-${calls}` });
      const custom = (req.body as { custom?: boolean }).custom === true;
      res.status(201).type('application/json').setHeader('content-encoding', custom ? 'x-custom' : 'gzip');
      res.end(custom ? json : gzipSync(json));
    });
    server = await listen(app);
    const first = await postBytes(server.port, { key: 'gz', body: {} });
    assert.equal(first.headers['content-encoding'], 'gzip');
    assert.equal(gunzipSync(first.body).toString(), '{"id":"thing-1"}');
    const replay = await postBytes(server.port, { key: 'gz', body: {} });
    assert.equal(replay.headers['idempotent-replayed'], 'true');
    assert.equal(replay.headers['content-encoding'], undefined);
    assert.equal(replay.body.toString(), '{"id":"thing-1"}');
    await postBytes(server.port, { key: 'custom', body: { custom: true } });
    const custom = await postBytes(server.port, { key: 'custom', body: { custom: true } });
    assert.deepEqual([custom.headers['idempotent-replayed'], custom.headers['content-encoding'], custom.body.toString()], ['true', 'x-custom', '{"id":"thing-2"}']);
    assert.equal(calls, 2);
  });

  it('records a gzip body that would inflate past 16 MiB as sent, with its Content-Encoding, instead of inflating it', async () => {
    const app = express();
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    const bomb = gzipSync(Buffer.alloc(20 * 1024 * 1024));
    app.post('/things/:tenant', express.json(), guard, (_req, res) => {
      calls += 1;
      res.status(201).type('application/octet-stream').setHeader('content-encoding', 'gzip');
      res.end(bomb);
    });
    server = await listen(app);
    await postBytes(server.port, { key: 'bomb', body: {} });
    const replay = await postBytes(server.port, { key: 'bomb', body: {} });
    assert.equal(replay.headers['content-encoding'], 'gzip');
    assert.ok(replay.body.equals(bomb));
    assert.equal(calls, 1);
  });

  it('a timeout middleware answering over a running handler (req.timedout) does not free the key: the retry waits instead of running it again', async () => {
    const app = express();
    // A reconcile hook that finds no effect yet, and a lease shorter than the handler: the lease must be renewed, or
    // reconciliation would take the key over beside the running handler.
    const guard = createRouteGuard({ ...contract, leaseMs: 60 }, options(new MemoryStore(), { reconcile: async () => ({ outcome: 'not-happened' }) }));
    // connect-timeout's behaviour: mark the request, answer 503, let the handler run on.
    app.use((req, res, next) => {
      const timer = setTimeout(() => {
        (req as { timedout?: boolean }).timedout = true;
        res.status(503).json({ error: 'Response timeout' });
      }, 30);
      res.on('finish', () => clearTimeout(timer));
      next();
    });
    let finished!: () => void;
    const done = new Promise<void>((resolve) => (finished = resolve));
    app.post('/things/:tenant', express.json(), guard, (req, res) => {
      setTimeout(() => {
        calls += 1;
        if (!(req as { timedout?: boolean }).timedout) res.status(201).json({ id: calls });
        finished();
      }, 300);
    });
    server = await listen(app);
    const first = await post(server.port, '/things/t1', { key: 'slow', user: 'u', body: {} });
    assert.equal(first.status, 503);
    const retry = await post(server.port, '/things/t1', { key: 'slow', user: 'u', body: {} });
    assert.equal(retry.json['type'], 'https://idemkit.dev/problems/idempotency-request-in-progress');
    await new Promise((resolve) => setTimeout(resolve, 150));
    const later = await post(server.port, '/things/t1', { key: 'slow', user: 'u', body: {} });
    assert.equal(later.json['type'], 'https://idemkit.dev/problems/idempotency-request-in-progress', 'past the first lease');
    await done;
    assert.equal(calls, 1);
  });

  it("after a timeout that does not answer (connect-timeout's respond: false), the handler's own answer is recorded", async () => {
    const app = express();
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    app.use((req, _res, next) => {
      setTimeout(() => ((req as { timedout?: boolean }).timedout = true), 10);
      next();
    });
    app.post('/things/:tenant', express.json(), guard, (_req, res) => {
      setTimeout(() => {
        calls += 1;
        res.status(201).json({ id: `late-${calls}` });
      }, 40);
    });
    server = await listen(app);
    const first = await post(server.port, '/things/t1', { key: 'late', user: 'u', body: {} });
    const replay = await post(server.port, '/things/t1', { key: 'late', user: 'u', body: {} });
    assert.deepEqual([first.status, first.text], [201, '{"id":"late-1"}']);
    assert.deepEqual([replay.status, replay.text, replay.headers['idempotent-replayed']], [201, first.text, 'true']);
    assert.equal(calls, 1);
  });

  it('a response destroyed before it ended (a piped source failed) keeps the record and ends its lease: the retry is reconciled', async () => {
    const app = express();
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    app.post('/things/:tenant', express.json(), guard, (_req, res) => {
      calls += 1;
      res.status(201).type('text/plain');
      const source = new Readable({
        read() {
          this.push('partial ');
          this.destroy(new Error('upstream went away'));
        },
      });
      pipeline(source, res, () => undefined);
    });
    server = await listen(app);
    await assert.rejects(post(server.port, '/things/t1', { key: 'cut', user: 'u', body: {} }));
    const retry = await post(server.port, '/things/t1', { key: 'cut', user: 'u', body: {} });
    assert.equal(retry.json['type'], 'https://idemkit.dev/problems/idempotency-request-abandoned');
    assert.equal(calls, 1);
  });

  it('a client that leaves a streamed answer the handler still finishes: the finished answer is the replay', async () => {
    const app = express();
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    app.post('/things/:tenant', express.json(), guard, async (_req, res) => {
      calls += 1;
      res.status(201).type('text/plain');
      res.write('working…\n');
      await new Promise((resolve) => setTimeout(resolve, 300));
      res.end(`thing-${calls}\n`);
    });
    server = await listen(app);
    await leftThenReplayed(server.port, 'late', 'working…\nthing-1\n');
    assert.equal(calls, 1);
  });

  it('a client that leaves a streamed answer the handler never ends (a pipeline stops, a handler stops on close): after the lease the record goes to reconciliation, not "in progress" for a day', async function () {
    this.timeout(10_000);
    const app = express();
    const { guard, reconciled } = reconcilingGuard('unknown');
    const tick = () => new Promise((resolve) => setTimeout(resolve, 40));
    app.post('/piped/:tenant', express.json(), guard, (_req, res) => {
      calls += 1;
      res.status(201).type('text/plain');
      // The socket's close marks res destroyed without calling destroy(): pipeline stops, neither ending nor destroying it.
      pipeline(Readable.from((async function* () { for (let i = 0; i < 50; i += 1) { yield `chunk ${i}\n`; await tick(); } })()), res, () => undefined);
    });
    app.post('/ticks/:tenant', express.json(), guard, (_req, res) => {
      calls += 1;
      res.status(201).type('text/event-stream');
      const timer = setInterval(() => res.write('data: tick\n\n'), 40);
      res.on('close', () => clearInterval(timer));
    });
    server = await listen(app);
    for (const path of ['/piped/t1', '/ticks/t1']) {
      await leaveAfter(server.port, path, `left-${path}`, 150);
      await new Promise((resolve) => setTimeout(resolve, 900));
      const retry = await post(server.port, path, { key: `left-${path}`, user: 'u', body: {} });
      assert.equal(retry.json['type'], 'https://idemkit.dev/problems/idempotency-request-abandoned', `${path}: ${retry.text}`);
    }
    assert.equal(calls, 2);
    assert.equal(reconciled.length, 2);
  });

  it("a handler that never answers (an async handler's rejection, which Express 4 drops): its record goes to reconciliation once leaseRenewalMaxMs is spent", async function () {
    this.timeout(10_000);
    const app = express();
    const { guard, reconciled } = reconcilingGuard('unknown', { leaseRenewalMaxMs: 600 });
    // Express 4 calls the handler and ignores the promise it returns: a rejection never reaches an error handler.
    app.post('/things/:tenant', express.json(), guard, (_req, _res) => {
      calls += 1;
      void Promise.reject(new Error('lost by Express 4')).catch(() => undefined);
    });
    server = await listen(app);
    await leaveAfter(server.port, '/things/t1', 'silent', 150);
    await new Promise((resolve) => setTimeout(resolve, 1_300));
    const retry = await post(server.port, '/things/t1', { key: 'silent', user: 'u', body: {} });
    assert.equal(retry.json['type'], 'https://idemkit.dev/problems/idempotency-request-abandoned', retry.text);
    assert.equal(calls, 1);
    assert.equal(reconciled.length, 1);
  });

  it('a slow handler whose client left is waited for, not given up after one lease: the retry gets its replay, the handler ran once', async function () {
    this.timeout(10_000);
    const app = express();
    // A hook that trusts the lease would take over (and charge twice) if the guard gave the live handler up.
    const { guard, reconciled } = reconcilingGuard('not-happened');
    app.post('/things/:tenant', express.json(), guard, async (_req, res) => {
      calls += 1;
      await new Promise((resolve) => setTimeout(resolve, 1_200));
      res.status(201).json({ id: `thing-${calls}` });
    });
    server = await listen(app);
    await leaveAfter(server.port, '/things/t1', 'slow', 100);
    await new Promise((resolve) => setTimeout(resolve, 1_900));
    const retry = await post(server.port, '/things/t1', { key: 'slow', user: 'u', body: {} });
    assert.equal(retry.status, 201, retry.text);
    assert.equal(retry.headers['idempotent-replayed'], 'true');
    assert.deepEqual(retry.json, { id: 'thing-1' });
    assert.equal(calls, 1);
    assert.deepEqual(reconciled, []);
  });

  it('mounted with app.use, guards the contract’s method and path only (a preflight, a GET with a used key and a POST to a path under the mount pass on unguarded); on a route, whatever the route takes', async () => {
    const app = express();
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    app.use('/things/:tenant', express.json(), guard);
    app.options('/things/:tenant', (_req, res) => void res.sendStatus(204));
    app.get('/things/:tenant', (_req, res) => void res.json({ read: (calls += 1) }));
    app.post('/things/:tenant', (_req, res) => void res.status(201).json({ id: (calls += 1) }));
    server = await listen(app);
    assert.equal((await post(server.port, '/things/t1', { key: 'used', user: 'u', body: {} })).status, 201);
    const read = await new Promise<http.IncomingMessage>((resolve, reject) => {
      http.get({ host: '127.0.0.1', port: server.port, path: '/things/t1', headers: { 'idempotency-key': 'used', 'x-user': 'u' }, agent: false }, resolve).on('error', reject);
    });
    read.resume();
    assert.equal(read.statusCode, 200);
    assert.equal(read.headers['idempotent-replayed'], undefined);
    const preflight = await new Promise<http.IncomingMessage>((resolve, reject) => {
      http.request({ host: '127.0.0.1', port: server.port, path: '/things/t1', method: 'OPTIONS', agent: false }, resolve).on('error', reject).end();
    });
    preflight.resume();
    assert.equal(preflight.statusCode, 204);
    assert.equal(calls, 2);
    // Another path under the mount, with the used key and the same body: its own handler runs (was /things/t1's replay).
    app.post('/things/:tenant/refund', (_req, res) => void res.status(201).json({ refund: (calls += 1) }));
    const refund = await post(server.port, '/things/t1/refund', { key: 'used', user: 'u', body: {} });
    assert.equal(refund.status, 201);
    assert.equal(refund.headers['idempotent-replayed'], undefined);
    assert.deepEqual(refund.json, { refund: 3 });
    calls -= 1;
    // Express routes without letter case: /THINGS/t1 reaches the handler, and the guard with it.
    const upper = await post(server.port, '/THINGS/t1', { key: 'used', user: 'u', body: {} });
    assert.equal(upper.headers['idempotent-replayed'], 'true', upper.text);
    // Mounted on a route, it guards whatever the route takes, as before: a PATCH route behind a POST contract's guard.
    app.patch('/routed/:tenant', express.json(), guard, (_req, res) => void res.status(201).json({ id: (calls += 1) }));
    const patch = (): Promise<http.IncomingMessage> =>
      new Promise((resolve, reject) => {
        http.request({ host: '127.0.0.1', port: server.port, path: '/routed/t1', method: 'PATCH', headers: { 'content-type': 'application/json', 'idempotency-key': 'p', 'x-user': 'u' }, agent: false }, resolve).on('error', reject).end('{}');
      });
    (await patch()).resume();
    const again = await patch();
    again.resume();
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(calls, 3);
  });

  it('an error after res.json cannot change what was sent: the wire and the record say 201, keep-alive stays in sync', async () => {
    const app = express();
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    app.post('/things/:tenant', express.json(), guard, async (req, res) => {
      calls += 1;
      res.status(201).json({ id: `thing-${calls}` });
      // A step after the answer fails: Express hands the rejection to the error handlers below.
      if (req.body.fail === 'throw') throw new Error('post-send step failed');
    });
    app.use((error: Error, req: express.Request, res: express.Response, next: express.NextFunction) => {
      // The usual guard against answering twice; with `blind` a careless handler that never looks.
      if (res.headersSent && req.body.handler !== 'blind') return next(error);
      res.status(500).set('x-error', 'yes').json({ error: 'internal', message: 'something went wrong, please contact support' });
    });
    app.set('env', 'test'); // the final handler's error log is expected noise here
    server = await listen(app);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      for (const handler of ['checks-headers-sent', 'blind']) {
        const body = { fail: 'throw', handler };
        // Express's final handler closes the connection once headers were sent (as without the guard); the
        // blind handler's connection stays open and must stay in sync.
        const via = handler === 'blind' ? { agent } : {};
        const first = await post(server.port, '/things/t1', { key: `k-${handler}`, user: 'u', body, ...via });
        assert.equal(first.status, 201, handler);
        assert.equal(first.text, `{"id":"thing-${calls}"}`);
        assert.equal(first.headers['content-length'], String(Buffer.byteLength(first.text)));
        assert.equal(first.headers['x-error'], undefined);
        assert.equal(first.headers['idempotent-replayed'], 'false');
        // The next request on the same connection parses: no leftover bytes, no length mismatch.
        const replay = await post(server.port, '/things/t1', { key: `k-${handler}`, user: 'u', body, ...via });
        assert.equal(replay.status, 201);
        assert.equal(replay.text, first.text);
        assert.equal(replay.headers['idempotent-replayed'], 'true');
      }
      assert.equal(calls, 2);
    } finally {
      agent.destroy();
    }
  });

  it("the guard's own answers and replays carry Content-Length: an HTTP/1.0 keep-alive client keeps its connection", async () => {
    // A review's: the guard's answers went out chunked on HTTP/1.1 and close-delimited on HTTP/1.0 (Connection: close).
    const app = express();
    app.post('/things/:tenant', express.json(), createRouteGuard(contract, options(new MemoryStore())), (req, res) => {
      calls += 1;
      res.status(201).json({ id: `thing-${calls}` });
    });
    server = await listen(app);
    const http10 = (key: string | undefined): Promise<string> =>
      new Promise((resolve, reject) => {
        const socket = net.connect(server.port, '127.0.0.1');
        const body = '{"a":1}';
        const keyLine = key === undefined ? '' : `Idempotency-Key: ${key}\r\n`;
        socket.end(`POST /things/t1 HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\nX-User: u\r\n${keyLine}Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
        let text = '';
        socket.on('data', (chunk: Buffer) => {
          text += chunk.toString('latin1');
          const [head, rest] = text.split('\r\n\r\n');
          const length = /\r\ncontent-length: (\d+)/i.exec(head ?? '');
          if (rest !== undefined && length !== null && Buffer.byteLength(rest, 'latin1') >= Number(length[1])) {
            socket.destroy();
            resolve(text);
          }
        });
        socket.on('end', () => resolve(text));
        socket.on('error', reject);
      });
    for (const [label, key] of [['missing key', undefined], ['first answer', 'k-10'], ['replay', 'k-10']] as const) {
      const text = await http10(key);
      const [head = '', body = ''] = text.split('\r\n\r\n');
      const length = /\r\ncontent-length: (\d+)/i.exec(head);
      assert.ok(length !== null, `${label}: ${head}`);
      assert.equal(Number(length[1]), Buffer.byteLength(body, 'latin1'), label);
      assert.match(head, /\r\nconnection: keep-alive/i, label);
      assert.doesNotMatch(head, /transfer-encoding/i, label);
    }
    assert.equal(calls, 1);
  });

  it('a reconcile verdict read from a gzip provider is replayed readable: fetch\'s decoded body with the headers still saying gzip, and raw gzip bytes', async () => {
    // A diff review's: `{ headers: Object.fromEntries(r.headers), body: await r.arrayBuffer() }` recorded a decoded body
    // under `Content-Encoding: gzip`, and every retry failed in the client ("incorrect header check").
    const provider = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
      res.end(gzipSync(JSON.stringify({ id: 'pay_1' })));
    });
    await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
    const providerUrl = `http://127.0.0.1:${(provider.address() as AddressInfo).port}/payments/pay_1`;
    try {
      for (const mode of ['fetch', 'raw gzip'] as const) {
        const app = express();
        const guard = createRouteGuard(contract, options(new MemoryStore(), {
          reconcile: async () => {
            if (mode === 'raw gzip') {
              return { outcome: 'completed', response: { status: 201, headers: { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' }, body: gzipSync('{"id":"pay_1"}') } };
            }
            const found = await fetch(providerUrl);
            // Object.fromEntries(found.headers), as the hook's author writes it (this tsconfig's lib has no iterable Headers).
            const headers: Record<string, string> = {};
            found.headers.forEach((value, name) => (headers[name] = value));
            return { outcome: 'completed', response: { status: 201, headers, body: new Uint8Array(await found.arrayBuffer()) } };
          },
        }));
        app.post('/things/:tenant', express.json(), guard, () => {
          calls += 1;
          throw new Error('the provider call timed out');
        });
        app.set('env', 'test');
        server = await listen(app);
        const key = `gz-${mode.replace(' ', '-')}`;
        assert.equal((await post(server.port, '/things/t1', { key, user: 'u', body: {} })).status, 500, mode);
        const retry = await post(server.port, '/things/t1', { key, user: 'u', body: {} });
        assert.equal(retry.status, 201, `${mode}: ${retry.text}`);
        assert.equal(retry.text, '{"id":"pay_1"}', mode);
        assert.equal(retry.headers['content-encoding'], undefined, mode);
        assert.equal(retry.headers['content-type'], 'application/json', mode);
        assert.equal(retry.headers['idempotent-replayed'], 'true', mode);
        await server.close();
      }
      assert.equal(calls, 2);
    } finally {
      await new Promise((resolve) => provider.close(resolve));
    }
  });

  it('with a reconcile hook, options built as a class keep their prototype members, and a verdict is read once: a flipping outcome never runs the handler again', async () => {
    // A diff review's: an adapter wrapper copied the options (a prototype `store` getter and `log` method were lost:
    // 503 on every request, no log) and read the verdict before the guard did (a flipping outcome ran the handler twice).
    const events: string[] = [];
    let reads = 0;
    class Settings {
      readonly #store = new MemoryStore();
      get store(): MemoryStore {
        return this.#store;
      }
      principal(req: express.Request): string | undefined {
        return req.get('x-user');
      }
      log(event: { decision: string; reason?: string }): void {
        events.push(event.reason === undefined ? event.decision : `${event.decision}:${event.reason}`);
      }
      reconcile(): never {
        reads = 0;
        return {
          get outcome() {
            reads += 1;
            return reads === 1 ? 'completed' : 'not-happened';
          },
          response: { status: 201, headers: { 'content-encoding': 'gzip' }, body: gzipSync('{"id":"x"}') },
        } as never;
      }
    }
    const app = express();
    app.post('/things/:tenant', express.json(), createRouteGuard(contract, new Settings() as unknown as RouteGuardOptions), () => {
      calls += 1;
      throw new Error('the provider call timed out');
    });
    app.set('env', 'test');
    server = await listen(app);
    assert.equal((await post(server.port, '/things/t1', { key: 'class-options', user: 'u', body: {} })).status, 500);
    const retry = await post(server.port, '/things/t1', { key: 'class-options', user: 'u', body: {} });
    assert.equal(retry.status, 201, retry.text);
    assert.equal(retry.text, '{"id":"x"}');
    assert.equal(calls, 1);
    assert.ok(events.includes('reserved'), events.join(' '));
    assert.ok(!events.includes('taken-over'), events.join(' '));
  });

  it('refuses to guess a fingerprint when the body was not parsed', async () => {
    const app = express();
    app.post('/things/:tenant', createRouteGuard(contract, options(new MemoryStore())), (_req, res) => {
      calls += 1;
      res.sendStatus(201);
    });
    app.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      res.status(500).send(error.message);
    });
    server = await listen(app);
    const answer = await post(server.port, '/things/t1', { key: 'k', user: 'u', body: { a: 1 } });
    assert.equal(answer.status, 500);
    assert.match(answer.text, /the request body \(content-type application\/json\) was not parsed before the guard; mount a parser for it first, e\.g\. express\.json\(\) before the guard$/);
    assert.equal(calls, 0);
    // AWS's JSON protocol under express.json(), which takes application/json only: the message names the type to add.
    const amz = await post(server.port, '/things/t1', { key: 'k2', user: 'u', headers: { 'content-type': 'application/x-amz-json-1.1' }, body: { a: 1 } });
    assert.match(amz.text, /express\.json\(\{ type: \['application\/json', 'application\/x-amz-json-1\.1'\] \}\)/);
  });

  it('a client that left during a middleware before the parser is no configuration error: nothing reserved, no error raised', async () => {
    // The client review's: under load, clients whose deadline aborted them while an async middleware ran made the guard
    // throw "mount a parser" (body-parser skips a request already finished), a 500 and an error log each.
    const app = express();
    const errors: string[] = [];
    let arrived!: () => void;
    const reached = new Promise<void>((resolve) => { arrived = resolve; });
    const slow: express.RequestHandler = (req, _res, next) => {
      if (req.get('x-slow') === undefined) return next();
      arrived();
      req.socket.once('close', () => setTimeout(next, 20));
    };
    const store = new MemoryStore();
    app.post('/things/:tenant', slow, express.json(), createRouteGuard(contract, options(store)), (_req, res) => void res.status(201).json({ id: (calls += 1) }));
    app.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      errors.push(error.message);
      res.status(500).end();
    });
    server = await listen(app);
    const request = http.request({ host: '127.0.0.1', port: server.port, method: 'POST', path: '/things/t1', headers: { 'content-type': 'application/json', 'idempotency-key': 'gone-1', 'x-user': 'u', 'x-slow': '1' } });
    request.on('error', () => undefined);
    request.end(JSON.stringify({ a: 1 }));
    await reached;
    request.destroy();
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.deepEqual(errors, []);
    assert.equal(calls, 0);
    assert.equal((await post(server.port, '/things/t1', { key: 'gone-1', user: 'u', body: { a: 1 } })).status, 201, 'the key was never reserved');
  });

  it('status: answers reads only — mounted with app.use, it lets the contracted POST through to its guard and handler', async () => {
    const app = express();
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    app.use(guard.status);
    app.post('/things/:tenant', express.json(), guard, (_req, res) => void res.status(201).json({ id: (calls += 1) }));
    server = await listen(app);
    const first = await post(server.port, '/things/t1', { key: 'k-use', user: 'u', body: { a: 1 } });
    assert.equal(first.status, 201);
    assert.equal(first.headers['idempotent-replayed'], 'false');
    const again = await post(server.port, '/things/t1', { key: 'k-use', user: 'u', body: { a: 1 } });
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(calls, 1);
  });

  it('a body a middleware read itself (a raw-body capture) with the client still there is the configuration error it was, not a client gone', async () => {
    // The diff review's: Node 20 marks such a request destroyed, and the client-gone check left it without an answer.
    const app = express();
    const raw: express.RequestHandler = (req, _res, next) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => setImmediate(next));
    };
    app.post('/things/:tenant', raw, createRouteGuard(contract, options(new MemoryStore())), (_req, res) => void res.status(201).json({ id: (calls += 1) }));
    app.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => void res.status(500).send(error.message));
    server = await listen(app);
    const answer = await post(server.port, '/things/t1', { key: 'raw-1', user: 'u', body: { a: 1 } });
    assert.equal(answer.status, 500);
    assert.match(answer.text, /was not parsed before the guard/);
    assert.equal(calls, 0);
  });

  it("refuses Express 4's placeholder body ({} from a parser that skipped the type), which would replay another payload; a parsed {} is a body", async () => {
    const app = express();
    // What body-parser 1.x (Express 4) does for a type it does not take, and marks when it did parse one.
    const express4Json: express.RequestHandler = (req, _res, next) => {
      // Express 4's request has req.param (Express 5 removed it).
      (req as { param?: unknown }).param = () => undefined;
      if (req.is('application/json')) return express.json()(req, _res, () => ((req as { _body?: boolean })._body = true, next()));
      req.body = req.body || {};
      next();
    };
    app.post('/things/:tenant', express4Json, createRouteGuard(contract, options(new MemoryStore())), (_req, res) => void res.status(201).json({ id: (calls += 1) }));
    app.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => void res.status(500).send(error.message));
    server = await listen(app);
    const text = (body: string) => post(server.port, '/things/t1', { key: 'k-text', user: 'u', headers: { 'content-type': 'text/plain' }, raw: body });
    const first = await text('transfer 10 to alice');
    assert.equal(first.status, 500);
    assert.match(first.text, /the request body \(content-type text\/plain\) was not parsed before the guard/);
    assert.equal((await text('transfer 9999 to mallory')).status, 500);
    assert.equal(calls, 0);
    // A JSON {} the parser did read is a body like any other — also from a parser that sets no req._body (body-parser 2, a custom one).
    app.post('/custom/:tenant', (req, _res, next) => {
      (req as { param?: unknown }).param = () => undefined;
      express.json()(req, _res, next);
    }, createRouteGuard(contract, options(new MemoryStore())), (_req, res) => void res.status(201).json({ ok: true }));
    assert.equal((await post(server.port, '/custom/t1', { key: 'k-custom', user: 'u', body: {} })).status, 201);
    assert.equal((await post(server.port, '/things/t1', { key: 'k-json', user: 'u', body: {} })).status, 201);
    assert.equal((await post(server.port, '/things/t1', { key: 'k-json', user: 'u', body: {} })).headers['idempotent-replayed'], 'true');
    assert.equal(calls, 1);
  });

  it('gives the handler the canonical key and reservation; throws when no guard ran', async () => {
    const app = express();
    const seen: unknown[] = [];
    app.post('/things/:tenant', express.json(), createRouteGuard(contract, options(new MemoryStore())), (_req, res) => {
      const context = idempotencyOf(res);
      seen.push(context.idempotencyKey, context.reservation.guarded);
      res.sendStatus(201);
    });
    app.post('/unguarded', (_req, res) => {
      try {
        idempotencyOf(res);
        res.sendStatus(200);
      } catch (error) {
        res.status(500).send((error as Error).message);
      }
    });
    server = await listen(app);
    await post(server.port, '/things/t1', { key: '"quoted-key"', user: 'u', body: {} });
    assert.deepEqual(seen, ['quoted-key', true]);
    assert.match((await post(server.port, '/unguarded', {})).text, /no idempotency guard ran/);
  });

  it('scopes by the principal whether the hook answers at once, with a promise or with another thenable; req and res stay paired', async () => {
    const hooks: RouteGuardOptions['principal'][] = [
      (req) => req.get('x-user'),
      async (req) => req.get('x-user'),
      (req) => ({ then: (resolve: (value: string | undefined) => void) => resolve(req.get('x-user')) }) as unknown as Promise<string | undefined>,
    ];
    for (const principal of hooks) {
      const app = express();
      let runs = 0;
      app.post('/things/:tenant', express.json(), createRouteGuard(contract, options(new MemoryStore(), { principal })), (req, res) => {
        runs += 1;
        res.status(201).json({ id: `r${runs}`, sameRequest: res.req === req });
      });
      server = await listen(app);
      const first = await post(server.port, '/things/t1', { key: 'k', user: 'alice', body: { topic: 'x' } });
      const replay = await post(server.port, '/things/t1', { key: 'k', user: 'alice', body: { topic: 'x' } });
      const otherUser = await post(server.port, '/things/t1', { key: 'k', user: 'bob', body: { topic: 'x' } });
      assert.deepEqual([first.status, first.json, first.headers['idempotent-replayed']], [201, { id: 'r1', sameRequest: true }, 'false']);
      assert.deepEqual([replay.status, replay.text, replay.headers['idempotent-replayed']], [201, first.text, 'true']);
      assert.deepEqual([otherUser.status, otherUser.json], [201, { id: 'r2', sameRequest: true }]);
      assert.equal((await post(server.port, '/things/t1', { key: 'k', body: { topic: 'x' } })).status, 400, 'no principal, no shared key space');
      assert.equal(runs, 2);
      await server.close();
    }
    server = await listen(express());
  });

  it('resolves path parameters Express cannot name ({item.id}) from the request path, percent-decoded, under a mount prefix', async () => {
    const app = express();
    const router = express.Router();
    const seen: (string | undefined)[] = [];
    router.post('/v1/items/:itemId/actions/:actionName', express.json(), createRouteGuard(oddPathContract, options(new MemoryStore())), (req, res) => {
      calls += 1;
      seen.push(idempotencyOf(res).reservation.recordId);
      res.status(201).json({ call: calls, item: req.params['itemId'] });
    });
    app.use('/api', router);
    server = await listen(app);
    const path = '/api/v1/items/a%20b%2F%C3%BC/actions/run';
    const first = await post(server.port, path, { key: 'k1', user: 'u', body: { n: 1 } });
    assert.equal(first.status, 201, first.text);
    assert.deepEqual(first.json, { call: 1, item: 'a b/ü' });
    // The record is scoped by the decoded value of `item.id`.
    assert.equal(seen[0], computeRecordId([['principal', 'u'], ['path', 'item.id', 'a b/ü']], 'items.actions-run now', 'k1'));
    const replay = await post(server.port, path, { key: 'k1', user: 'u', body: { n: 1 } });
    assert.equal(replay.status, 201);
    assert.equal(replay.headers['idempotent-replayed'], 'true');
    assert.equal(replay.text, first.text);
    // Another item is another record; another action on the same item is another payload.
    assert.equal((await post(server.port, '/api/v1/items/other/actions/run', { key: 'k1', user: 'u', body: { n: 1 } })).status, 201);
    assert.equal((await post(server.port, '/api/v1/items/a%20b%2F%C3%BC/actions/stop', { key: 'k1', user: 'u', body: { n: 1 } })).status, 422);
    assert.equal(calls, 2);
  });

  it('a client that closes while the completion is being recorded leaves no socket behind (no descriptor leak)', async () => {
    // A soak review's: the client's FIN came after the handler's end() and before the store answered; Node's auto-destroy
    // went to the guard's held `socket.destroy`, which then waited for a 'finish' that an ended socket never emits —
    // 60 of 1,000 such sockets, each a descriptor, stayed open for good.
    const store = slowCompletionStore(300);
    const app = express();
    app.post('/things/:thingId', express.json(), createRouteGuard(contract, options(store)), (_req, res) => {
      calls += 1;
      res.status(201).json({ id: calls });
    });
    const http1 = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    server = { port: (http1.address() as AddressInfo).port, close: () => new Promise((resolve) => http1.close(() => resolve())) };
    const { connect } = await import('node:net');
    for (const how of ['end', 'destroy'] as const) {
      await Promise.all(
        Array.from({ length: 10 }, (_, i) => new Promise<void>((resolve) => {
          const socket = connect(server.port, '127.0.0.1', () => {
            socket.write(`POST /things/t1 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nx-user: u\r\nidempotency-key: close-${how}-${i}\r\n\r\n{}`);
            setTimeout(() => {
              socket[how]();
              resolve();
            }, 100);
          });
          socket.on('error', () => undefined);
          socket.resume();
        })),
      );
      await new Promise((resolve) => setTimeout(resolve, 600));
      const open = await new Promise<number>((resolve, reject) => http1.getConnections((error, count) => (error ? reject(error) : resolve(count))));
      assert.equal(open, 0, `${open} sockets left open after clients that ${how === 'end' ? 'half-closed' : 'closed'}`);
    }
    assert.equal(calls, 20);
  });

  it('keeps req.params first when the route names the contract parameter itself', async () => {
    const app = express();
    app.post('/things/:tenant', express.json(), createRouteGuard({ ...contract, path: '/elsewhere/{tenant}' }, options(new MemoryStore())), (_req, res) => {
      res.status(201).json({ record: idempotencyOf(res).reservation.recordId });
    });
    server = await listen(app);
    const answer = await post(server.port, '/things/t1', { key: 'k', user: 'u', body: {} });
    assert.equal(answer.status, 201, answer.text);
    assert.equal(answer.json['record'], computeRecordId([['principal', 'u'], ['path', 'tenant', 't1']], 'createThing', 'k'));
  });

  describe('one-transaction mode on SQLite', () => {
    let db: Database.Database;
    let store: SqliteStore;
    beforeEach(async () => {
      db = new Database(':memory:');
      store = new SqliteStore(db);
      await store.migrate();
      db.exec('CREATE TABLE things (id TEXT PRIMARY KEY, tenant TEXT NOT NULL)');
    });
    afterEach(() => db.close());

    function txApp(fail: () => number | undefined) {
      const app = express();
      const guard = createRouteGuard(contract, options(store));
      app.post('/things/:tenant', express.json(), guard.inTransaction, async (req, res) => {
        calls += 1;
        const { tx } = idempotencyOf<Database.Database>(res);
        const id = `thing-${calls}`;
        tx!.prepare('INSERT INTO things (id, tenant) VALUES (?, ?)').run(id, String(req.params['tenant']));
        await new Promise((resolve) => setTimeout(resolve, 50));
        const status = fail();
        if (status !== undefined) {
          res.status(status).json({ error: 'failed after the write' });
          return;
        }
        res.status(201).json({ id });
      });
      return app;
    }

    it('commits the business row and the completed record together; duplicates replay', async () => {
      server = await listen(txApp(() => undefined));
      const answers = await Promise.all([1, 2, 3].map(() => post(server.port, '/things/t1', { key: 'tx-1', user: 'u', body: { n: 1 } })));
      assert.deepEqual(answers.map((a) => a.status), [201, 201, 201]);
      assert.equal(answers.filter((a) => a.headers['idempotent-replayed'] === 'false').length, 1);
      assert.equal(new Set(answers.map((a) => a.json['id'])).size, 1);
      assert.equal(calls, 1);
      assert.equal((db.prepare('SELECT count(*) AS n FROM things').get() as { n: number }).n, 1);
      assert.equal((db.prepare("SELECT state FROM idempotency_records").get() as { state: string }).state, 'completed');
    });

    it('a client that leaves a streamed answer the handler then finishes within the lease: one row, the retry replays it', async function () {
      this.timeout(10_000);
      const app = express();
      const guard = createRouteGuard({ ...contract, leaseMs: 2_000 }, options(store));
      app.post('/things/:tenant', express.json(), guard.inTransaction, async (req, res) => {
        calls += 1;
        res.status(201).type('text/plain');
        res.write('working…\n');
        await new Promise((resolve) => setTimeout(resolve, 300));
        idempotencyOf<Database.Database>(res).tx!.prepare('INSERT INTO things (id, tenant) VALUES (?, ?)').run(`thing-${calls}`, String(req.params['tenant']));
        res.end(`thing-${calls}\n`);
      });
      server = await listen(app);
      await leftThenReplayed(server.port, 'late', 'working…\nthing-1\n');
      assert.equal(calls, 1);
      assert.deepEqual(db.prepare('SELECT id FROM things').all(), [{ id: 'thing-1' }]);
    });

    it('a client that leaves a streamed answer the handler never ends rolls its transaction back after the lease: the row is gone, the key free, other keys not stuck behind the lock', async function () {
      this.timeout(10_000);
      const app = express();
      // The lease is the time a streamed answer whose client left has to end.
      const guard = createRouteGuard({ ...contract, leaseMs: 300 }, options(store));
      app.post('/things/:tenant', express.json(), guard.inTransaction, (req, res) => {
        calls += 1;
        idempotencyOf<Database.Database>(res).tx!.prepare('INSERT INTO things (id, tenant) VALUES (?, ?)').run(`thing-${calls}`, String(req.params['tenant']));
        res.status(201).type('text/event-stream');
        if (req.get('x-short') !== undefined) {
          res.end('data: done\n\n');
          return;
        }
        const timer = setInterval(() => res.write('data: tick\n\n'), 40);
        res.on('close', () => clearInterval(timer));
      });
      server = await listen(app);
      await leaveAfter(server.port, '/things/t1', 'left', 150);
      await new Promise((resolve) => setTimeout(resolve, 100));
      const started = Date.now();
      const other = await post(server.port, '/things/t1', { key: 'other', user: 'u', body: {}, headers: { 'x-short': '1' } });
      assert.equal(other.status, 201, other.text);
      assert.ok(Date.now() - started < 1500, `answered in ${Date.now() - started} ms`);
      assert.deepEqual(db.prepare('SELECT id FROM things').all(), [{ id: 'thing-2' }]);
      const again = await post(server.port, '/things/t1', { key: 'left', user: 'u', body: {}, headers: { 'x-short': '1' } });
      assert.equal(again.status, 201, 'rolled back: the key is free');
      assert.equal(calls, 3);
    });

    it('a handler that never answers rolls its transaction back at leaseRenewalMaxMs, whether its client left or waits: other keys are not stuck behind the lock for good', async function () {
      this.timeout(15_000);
      const app = express();
      const guard = createRouteGuard({ ...contract, leaseMs: 300 }, options(store, { leaseRenewalMaxMs: 800 }));
      app.post('/things/:tenant', express.json(), guard.inTransaction, (req, res) => {
        calls += 1;
        idempotencyOf<Database.Database>(res).tx!.prepare('INSERT INTO things (id, tenant) VALUES (?, ?)').run(`thing-${calls}`, String(req.params['tenant']));
        // An async handler whose rejection Express 4 drops: no answer, ever.
        if (req.get('x-short') === undefined) return;
        res.status(201).json({ id: `thing-${calls}` });
      });
      server = await listen(app);
      // The client leaves: rolled back at leaseRenewalMaxMs.
      await leaveAfter(server.port, '/things/t1', 'left', 150);
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      const other = await post(server.port, '/things/t1', { key: 'other', user: 'u', body: {}, headers: { 'x-short': '1' } });
      assert.equal(other.status, 201, other.text);
      assert.deepEqual(db.prepare('SELECT id FROM things').all(), [{ id: 'thing-2' }]);
      // The client waits: rolled back at leaseRenewalMaxMs too, and answered: the outcome is unknown (what the
      // handler did outside its transaction), and a retry may follow.
      const stayed = await post(server.port, '/things/t1', { key: 'stays', user: 'u', body: {} });
      assert.equal(stayed.status, 503, stayed.text);
      assert.match(String(stayed.headers['content-type']), /^application\/problem\+json/);
      assert.equal(stayed.json['type'], 'https://idemkit.dev/problems/idempotency-outcome-unknown');
      assert.match(String(stayed.json['detail']), /given up: its transaction was rolled back/);
      assert.equal(stayed.headers['retry-after'], '1');
      const after = await post(server.port, '/things/t1', { key: 'after', user: 'u', body: {}, headers: { 'x-short': '1' } });
      assert.equal(after.status, 201, after.text);
      assert.deepEqual(db.prepare('SELECT id FROM things ORDER BY id').all(), [{ id: 'thing-2' }, { id: 'thing-4' }]);
      assert.equal(calls, 4);
    });

    it('a handler given up at the bound that answers late: its client has the guard’s answer, the late one goes nowhere and ends no process, the retry runs once', async function () {
      this.timeout(10_000);
      const app = express();
      const guard = createRouteGuard({ ...contract, leaseMs: 200 }, options(store, { leaseRenewalMaxMs: 400 }));
      let late: Promise<unknown> | undefined;
      const uncaught: unknown[] = [];
      const onUncaught = (error: unknown): void => {
        uncaught.push(error);
      };
      process.on('uncaughtException', onUncaught);
      try {
        app.post('/things/:tenant', express.json(), guard.inTransaction, (req, res) => {
          calls += 1;
          idempotencyOf<Database.Database>(res).tx!.prepare('INSERT INTO things (id, tenant) VALUES (?, ?)').run(`thing-${calls}`, String(req.params['tenant']));
          if (req.get('x-slow') === undefined) {
            res.status(201).json({ id: `thing-${calls}` });
            return;
          }
          // Answers after the bound, from a timer (a throw there is uncaught, as in a callback of a driver).
          late = new Promise((resolve) => {
            setTimeout(() => {
              res.status(201).set('location', '/things/late').json({ id: 'late' });
              res.write('more', (written) => {
                // A late pipeline (a file, say) ends at once, closing its source, rather than waiting for a 'drain'.
                const endless = new Readable({ read() { this.push('x'.repeat(1024)); } });
                const sourceClosed = new Promise((closed) => endless.once('close', closed));
                pipeline(endless, res, (piped) => void sourceClosed.then(() => resolve([written, piped])));
              });
            }, 700);
          });
        });
        server = await listen(app);
        const first = await post(server.port, '/things/t1', { key: 'slow', user: 'u', body: {}, headers: { 'x-slow': '1' } });
        assert.equal(first.status, 503, first.text);
        assert.equal(first.json['type'], 'https://idemkit.dev/problems/idempotency-outcome-unknown');
        assert.equal(first.headers['location'], undefined);
        await new Promise((resolve) => setTimeout(resolve, 100));
        assert.ok(late !== undefined);
        const [written, piped] = (await late) as [Error, Error];
        assert.match(String(written), /write after the guard answered/);
        assert.match(String(piped), /Premature close/);
        assert.deepEqual(uncaught, []);
        // Keep-alive connections go on, and the retry runs the handler once.
        const retry = await post(server.port, '/things/t1', { key: 'slow', user: 'u', body: {} });
        assert.equal(retry.status, 201, retry.text);
        const replay = await post(server.port, '/things/t1', { key: 'slow', user: 'u', body: {} });
        assert.equal(replay.headers['idempotent-replayed'], 'true');
        assert.deepEqual(db.prepare('SELECT id FROM things ORDER BY id').all(), [{ id: 'thing-2' }]);
        assert.equal(calls, 2);
      } finally {
        process.off('uncaughtException', onUncaught);
      }
    });

    it('without leaseRenewalMaxMs, a handler that never answers is rolled back at the TTL: other keys go on', async function () {
      this.timeout(10_000);
      const app = express();
      const guard = createRouteGuard({ ...contract, leaseMs: 200, ttlMs: 400 }, options(store));
      app.post('/things/:tenant', express.json(), guard.inTransaction, (req, res) => {
        calls += 1;
        idempotencyOf<Database.Database>(res).tx!.prepare('INSERT INTO things (id, tenant) VALUES (?, ?)').run(`thing-${calls}`, String(req.params['tenant']));
        if (req.get('x-short') === undefined) return;
        res.status(201).json({ id: `thing-${calls}` });
      });
      server = await listen(app);
      await leaveAfter(server.port, '/things/t1', 'left', 100);
      await new Promise((resolve) => setTimeout(resolve, 700));
      const other = await post(server.port, '/things/t1', { key: 'other', user: 'u', body: {}, headers: { 'x-short': '1' } });
      assert.equal(other.status, 201, other.text);
      assert.deepEqual(db.prepare('SELECT id FROM things').all(), [{ id: 'thing-2' }]);
    });

    it('a slow handler whose client left keeps its transaction until it answers (within the bound): one row, the retry replays it', async function () {
      this.timeout(10_000);
      const app = express();
      const guard = createRouteGuard({ ...contract, leaseMs: 300 }, options(store, { leaseRenewalMaxMs: 5_000 }));
      app.post('/things/:tenant', express.json(), guard.inTransaction, async (req, res) => {
        calls += 1;
        const { tx } = idempotencyOf<Database.Database>(res);
        tx!.prepare('INSERT INTO things (id, tenant) VALUES (?, ?)').run(`before-${calls}`, String(req.params['tenant']));
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        tx!.prepare('INSERT INTO things (id, tenant) VALUES (?, ?)').run(`after-${calls}`, String(req.params['tenant']));
        res.status(201).json({ id: `thing-${calls}` });
      });
      server = await listen(app);
      await leaveAfter(server.port, '/things/t1', 'slow', 100);
      await new Promise((resolve) => setTimeout(resolve, 1_600));
      const retry = await post(server.port, '/things/t1', { key: 'slow', user: 'u', body: {} });
      assert.equal(retry.headers['idempotent-replayed'], 'true', retry.text);
      assert.deepEqual(db.prepare('SELECT id FROM things ORDER BY id').all(), [{ id: 'after-1' }, { id: 'before-1' }]);
      assert.equal(calls, 1);
    });

    it("answers a failed commit with the guard's problem alone: none of the handler's headers, the whole body", async () => {
      // The completion fails inside the transaction, so the commit does not happen after the handler answered.
      db.exec("CREATE TRIGGER refuse_completion BEFORE UPDATE ON idempotency_records WHEN NEW.state = 'completed' BEGIN SELECT RAISE(ABORT, 'disk full'); END");
      const app = express();
      app.use((_req, res, next) => {
        res.setHeader('access-control-allow-origin', '*');
        next();
      });
      const guard = createRouteGuard(contract, options(store));
      for (const [path, body] of [['/short/:tenant', { id: 1 }], ['/long/:tenant', { id: 'x'.repeat(2000) }]] as const) {
        app.post(path, express.json(), guard.inTransaction, (_req, res) => {
          calls += 1;
          res.statusMessage = 'Made';
          res.setHeader('location', '/things/rolled-back');
          res.setHeader('set-cookie', ['a=1', 'b=2']);
          res.status(201).json(body);
        });
      }
      server = await listen(app);
      for (const path of ['/short/t1', '/long/t1']) {
        const answer = await post(server.port, path, { key: `tx-fail-${path}`, user: 'u', body: {} });
        assert.equal(answer.status, 503);
        assert.match(String(answer.headers['content-type']), /^application\/problem\+json/);
        assert.equal(answer.json['type'], 'https://idemkit.dev/problems/idempotency-outcome-unknown');
        // Framed by the answer itself: the handler's Content-Length (of its own body) is gone.
        const length = answer.headers['content-length'];
        if (length === undefined) assert.equal(answer.headers['transfer-encoding'], 'chunked');
        else assert.equal(Number(length), Buffer.byteLength(answer.text));
        for (const name of ['location', 'etag', 'set-cookie']) assert.equal(answer.headers[name], undefined, name);
        assert.equal(answer.headers['access-control-allow-origin'], '*', 'what ran before the handler stays');
      }
      assert.equal(calls, 2);
    });

    it("sends the handler's own answer as it wrote it (each cookie apart), with the guard's header added", async () => {
      const app = express();
      const guard = createRouteGuard(contract, options(store));
      app.post('/things/:tenant', express.json(), guard.inTransaction, (_req, res) => {
        res.setHeader('set-cookie', ['a=1', 'b=2']);
        res.status(201).json({ id: 'one' });
      });
      server = await listen(app);
      const answer = await post(server.port, '/things/t1', { key: 'tx-cookies', user: 'u', body: {} });
      assert.equal(answer.status, 201);
      assert.deepEqual(answer.headers['set-cookie'], ['a=1', 'b=2']);
      assert.equal(answer.headers['idempotent-replayed'], 'false');
      assert.deepEqual(answer.json, { id: 'one' });
    });

    it('refuses inTransaction where the route is declared on a store without transactions; the plain guard is there', () => {
      const guard = createRouteGuard(contract, options(new MemoryStore()));
      assert.throws(() => guard.inTransaction, /^TypeError: one-transaction mode cannot guard createThing: it needs a store with transactions \(SqliteStore or PostgresStore\), and MemoryStore has none/);
      assert.doesNotThrow(() => ({ ...guard }));
      assert.equal(typeof guard, 'function');
    });

    it('refuses inTransaction where the route is declared for an external effect without a provider key', async () => {
      const external = { ...contract, effect: { owner: 'things', external: true, providerKey: 'none' as const } };
      const guard = createRouteGuard(external, options(store));
      assert.throws(() => guard.inTransaction, /one-transaction mode cannot guard createThing: .*providerKey: none/);
      // Copying the guard (an app that never uses the mode) does not read it.
      assert.doesNotThrow(() => ({ ...guard }));
      // The plain guard (reservation committed before the handler) still serves the route.
      const app = express();
      app.post('/things/:tenant', express.json(), guard, (_req, res) => {
        calls += 1;
        res.status(201).json({ id: 'one' });
      });
      server = await listen(app);
      assert.equal((await post(server.port, '/things/t1', { key: 'ext-1', user: 'u', body: {} })).status, 201);
      assert.equal((await post(server.port, '/things/t1', { key: 'ext-1', user: 'u', body: {} })).headers['idempotent-replayed'], 'true');
      assert.equal(calls, 1);
    });

    it('a 5xx after the write rolls back the row and frees the key; the retry runs again', async () => {
      let status: number | undefined = 500;
      server = await listen(txApp(() => status));
      const failed = await post(server.port, '/things/t1', { key: 'tx-2', user: 'u', body: { n: 2 } });
      assert.equal(failed.status, 500);
      assert.equal((db.prepare('SELECT count(*) AS n FROM things').get() as { n: number }).n, 0);
      assert.equal((db.prepare('SELECT count(*) AS n FROM idempotency_records').get() as { n: number }).n, 0);
      status = undefined;
      const retry = await post(server.port, '/things/t1', { key: 'tx-2', user: 'u', body: { n: 2 } });
      assert.equal(retry.status, 201);
      assert.equal(retry.headers['idempotent-replayed'], 'false');
      assert.equal((db.prepare('SELECT count(*) AS n FROM things').get() as { n: number }).n, 1);
    });
  });

  describe('among the middleware and handlers of real apps (a middleware review)', () => {
    it("a streamed answer's head counts as sent at its first write: a second answer throws as in Node instead of being appended and recorded", async () => {
      const seen: { sentAfterWrite?: boolean; errors: string[] } = { errors: [] };
      const app = express();
      app.post('/things/:tenant', express.json(), createRouteGuard(contract, options(new MemoryStore())), (_req, res) => {
        calls += 1;
        res.status(201).type('application/json');
        res.write('[1,');
        seen.sentAfterWrite = res.headersSent;
        try {
          res.status(400).json({ error: 'late' });
        } catch (error) {
          seen.errors.push((error as { code?: string }).code ?? String(error));
        }
        res.end('2]');
      });
      server = await listen(app);
      const first = await post(server.port, '/things/t1', { key: 'streamed-head', user: 'u', body: {} });
      assert.deepEqual([first.status, first.text, first.headers['content-type']], [201, '[1,2]', 'application/json; charset=utf-8']);
      assert.equal(seen.sentAfterWrite, true);
      assert.deepEqual(seen.errors, ['ERR_HTTP_HEADERS_SENT']);
      const retry = await post(server.port, '/things/t1', { key: 'streamed-head', user: 'u', body: {} });
      assert.deepEqual([retry.status, retry.text, retry.headers['idempotent-replayed']], [201, '[1,2]', 'true']);
      assert.equal(calls, 1);
    });

    it('a handler that fails after writing part of its answer (next(err)) loses the connection, as unguarded; nothing is recorded, the retry reconciles', async () => {
      const { guard, reconciled } = reconcilingGuard('unknown');
      const app = express();
      app.set('env', 'test'); // Express's final handler logs the error otherwise
      app.post('/things/:tenant', express.json(), guard, (_req, res, next) => {
        calls += 1;
        res.status(201).type('application/json').write('[1,');
        next(new Error('failed half-way'));
      });
      // Express's own error handler after this one: headers sent, so it destroys the connection.
      app.use((error: Error, _req: express.Request, res: express.Response, next: express.NextFunction) => {
        if (res.headersSent) return next(error);
        res.status(500).json({ error: error.message });
      });
      server = await listen(app);
      await assert.rejects(post(server.port, '/things/t1', { key: 'half-way', user: 'u', body: {} }), /socket hang up|ECONNRESET/);
      await new Promise((resolve) => setTimeout(resolve, 900));
      const retry = await post(server.port, '/things/t1', { key: 'half-way', user: 'u', body: {} });
      assert.equal(retry.status, 409, retry.text);
      assert.equal(retry.headers['idempotency-problem'], 'idempotency-request-abandoned');
      assert.equal(reconciled.length, 1);
      assert.equal(calls, 1);
    });

    it('a writer that reuses its buffer after each write callback gets its bytes recorded and sent as written', async () => {
      const app = express();
      app.post('/things/:tenant', express.json(), createRouteGuard(contract, options(new MemoryStore())), (_req, res) => {
        calls += 1;
        res.status(201).type('text/plain');
        const buffer = Buffer.alloc(4);
        let line = 0;
        const writeNext = (): void => {
          if (line === 3) {
            res.end();
            return;
          }
          buffer.write(`ab${line}\n`);
          line += 1;
          res.write(buffer, () => writeNext());
        };
        writeNext();
      });
      server = await listen(app);
      const first = await post(server.port, '/things/t1', { key: 'reused-buffer', user: 'u', body: {} });
      assert.equal(first.text, 'ab0\nab1\nab2\n');
      assert.equal((await post(server.port, '/things/t1', { key: 'reused-buffer', user: 'u', body: {} })).text, 'ab0\nab1\nab2\n');
    });

    for (const wiring of ['app.use and again on the route', "next('route') to another guarded route"] as const) {
      it(`a request that reaches the guard twice (${wiring}) runs its handler once and records its answer, not the guard's own 409`, async () => {
        const guard = createRouteGuard(contract, options(new MemoryStore()));
        const app = express();
        app.use(express.json());
        if (wiring === 'app.use and again on the route') {
          app.use('/things', guard);
          app.post('/things/:tenant', guard, (_req, res) => {
            calls += 1;
            res.status(201).json({ id: `thing-${calls}` });
          });
        } else {
          app.post('/things/:tenant', guard, (req, _res, next) => next(req.get('x-version') === '2' ? 'route' : undefined));
          app.post('/things/:tenant', guard, (_req, res) => {
            calls += 1;
            res.status(201).json({ id: `thing-${calls}` });
          });
        }
        server = await listen(app);
        const headers = { 'x-version': '2' };
        const first = await post(server.port, '/things/t1', { key: 'twice', user: 'u', body: {}, headers });
        assert.deepEqual([first.status, first.text], [201, '{"id":"thing-1"}']);
        const retry = await post(server.port, '/things/t1', { key: 'twice', user: 'u', body: {}, headers });
        assert.deepEqual([retry.status, retry.text, retry.headers['idempotent-replayed']], [201, '{"id":"thing-1"}', 'true']);
        assert.equal(calls, 1);
      });
    }

    it("a replay keeps the headers its status needs (206 Content-Range, 401 WWW-Authenticate, 405 Allow) and the handler's Cache-Control", async () => {
      const answers: Record<string, [number, Record<string, string>]> = {
        range: [206, { 'content-range': 'bytes 0-1/10', 'cache-control': 'no-store, private' }],
        auth: [401, { 'www-authenticate': 'Bearer realm="things"' }],
        method: [405, { allow: 'GET, PUT' }],
      };
      const app = express();
      app.post('/things/:tenant', express.json(), createRouteGuard(contract, options(new MemoryStore())), (req, res) => {
        calls += 1;
        const [status, headers] = answers[(req.body as { kind: string }).kind]!;
        res.status(status).set(headers).send('ab');
      });
      server = await listen(app);
      for (const [kind, [status, headers]] of Object.entries(answers)) {
        await post(server.port, '/things/t1', { key: `status-${kind}`, user: 'u', body: { kind } });
        const retry = await post(server.port, '/things/t1', { key: `status-${kind}`, user: 'u', body: { kind } });
        assert.equal(retry.status, status);
        assert.equal(retry.headers['idempotent-replayed'], 'true');
        for (const [name, value] of Object.entries(headers)) assert.equal(retry.headers[name], value, `${kind}: ${name}`);
      }
      assert.equal(calls, 3);
    });
  });
});
