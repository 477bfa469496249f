/**
 * A generated client with its default runtime (the real `fetch`, timers and clock) against scripted HTTP
 * servers on 127.0.0.1: what a caller sees for redirects, headers in any letter case, requests that cannot be
 * sent, bodies of the wrong kind, stalled answers and answers without a content type.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import vm from 'node:vm';
import { generateClient } from '../../src/generate/client/index.js';
import { writeOutput } from '../../src/generate/output.js';
import { loadDocument } from '../../src/parser/index.js';
import type { ApiResponse, ClientRuntime, IntentResult } from '../../src/runtime/client/engine.js';
import type { Intent } from '../../src/runtime/client/intent.js';
import { answer, startServer, type Handler, type TestServer } from './http-server.js';
import { contractYaml } from './contracts.js';

const SPEC = `openapi: 3.0.3
info: { title: A generated client over real HTTP, version: '1' }
servers: [{ url: /api }]
x-idempotency:
${contractYaml('  ')}
  retry: { deadline: PT10S, maxAttempts: 3, backoff: { initial: PT0.01S, max: PT0.02S, jitter: full } }
paths:
  /orders:
    post:
      operationId: createOrder
      requestBody:
        required: true
        content: { application/json: { schema: { $ref: '#/components/schemas/OrderInput' } } }
      responses:
        '201': { description: created, content: { application/json: { schema: { $ref: '#/components/schemas/Order' } } } }
        '422': { description: problem, content: { application/problem+json: { schema: { type: object } } } }
      x-idempotency:
        effect: { owner: orders, external: false, statusRoute: getOrder }
  /orders/{id}:
    get:
      operationId: getOrder
      parameters: [{ name: id, in: path, required: true, schema: { type: string } }]
      responses:
        '200': { description: ok, content: { application/json: { schema: { $ref: '#/components/schemas/Order' } } } }
  /traced-orders:
    post:
      operationId: createTracedOrder
      requestBody:
        required: true
        content: { application/json: { schema: { $ref: '#/components/schemas/OrderInput' } } }
      responses:
        '201': { description: created, content: { application/json: { schema: { $ref: '#/components/schemas/Order' } } } }
      x-idempotency:
        # The request-id header is the idempotency key.
        key: { header: X-Request-Id, required: true, maxLength: 255 }
        effect: { owner: orders, external: false }
  /forms:
    post:
      operationId: submitForm
      requestBody:
        required: true
        content:
          application/x-www-form-urlencoded:
            schema: { type: object, properties: { a: { type: string }, b: { type: string } } }
      responses:
        '201': { description: created, content: { application/json: { schema: { $ref: '#/components/schemas/Order' } } } }
      x-idempotency:
        effect: { owner: forms, external: false }
  /uploads:
    post:
      operationId: upload
      requestBody:
        required: true
        content:
          multipart/form-data:
            schema: { type: object, properties: { title: { type: string }, file: { type: string, format: binary } } }
      responses:
        '201': { description: created, content: { application/json: { schema: { $ref: '#/components/schemas/Order' } } } }
      x-idempotency:
        effect: { owner: uploads, external: false }
  # Shaped like AWS's documents, which tell operations on one path apart after a '#', and like those that write a query into the path.
  /lenses/{LensAlias}#ClientRequestToken:
    delete:
      operationId: deleteLens
      parameters:
        - { name: LensAlias, in: path, required: true, schema: { type: string } }
        - { name: ClientRequestToken, in: query, required: true, schema: { type: string } }
        - { name: LensStatus, in: query, required: true, schema: { type: string } }
      responses:
        '200': { description: deleted, content: { application/json: { schema: { $ref: '#/components/schemas/Order' } } } }
      x-idempotency:
        key: { query: ClientRequestToken }
        effect: { owner: lenses, external: false }
  /current/airquality?city={city}:
    get:
      operationId: getAirQuality
      parameters:
        - { name: city, in: path, required: true, schema: { type: string } }
        - { name: key, in: query, required: true, schema: { type: string } }
      responses:
        '200': { description: ok, content: { application/json: { schema: { type: object } } } }
  /pings:
    post:
      operationId: ping
      x-idempotency: false
      requestBody: { content: { application/json: { schema: { type: object } } } }
      responses:
        '200': { description: ok, content: { application/json: { schema: { type: object } } } }
components:
  schemas:
    OrderInput:
      type: object
      required: [item]
      properties: { item: { type: string } }
    Order:
      type: object
      required: [id]
      properties: { id: { type: string } }
`;

type Order = { id: string };
type Call = { readonly headers?: Readonly<Record<string, string>>; readonly signal?: AbortSignal; readonly timeoutMs?: number };
type StatusCall = (input: { path: { id: string } }, call?: Call) => Promise<ApiResponse<Order>>;

/** The part of the generated module this test drives (its runtime is the `src/runtime/client` code under test). */
interface HttpClientModule {
  Intent: typeof Intent;
  createClient(options: { baseUrl: string; headers?: Record<string, string>; timeoutMs?: number; runtime?: Partial<ClientRuntime> }): {
    intent(operation: 'createOrder', key?: string): Intent;
    createOrder(input: { body: unknown }, call?: Call & { intent?: Intent }): Promise<IntentResult<Order, unknown, StatusCall>>;
    createTracedOrder(input: { body: unknown }, call?: Call & { intent?: Intent }): Promise<IntentResult<Order, unknown, undefined>>;
    submitForm(input: { body: unknown }, call?: Call): Promise<IntentResult<Order, unknown, undefined>>;
    upload(input: { body: unknown }, call?: Call): Promise<IntentResult<Order, unknown, undefined>>;
    getOrder(input: { path: { id: string } }, call?: Call): Promise<ApiResponse<Order>>;
    ping(input?: { body?: unknown }, call?: Call): Promise<ApiResponse<object>>;
    deleteLens(input: { path: { LensAlias: string }; query: { LensStatus: string; ClientRequestToken?: string } }, call?: Call): Promise<IntentResult<Order, unknown, undefined>>;
    getAirQuality(input: { path: { city: string }; query: { key: string } }, call?: Call): Promise<ApiResponse<object>>;
  };
}

const order = { item: 'book' };

describe('generated client over real HTTP (127.0.0.1, default runtime)', function () {
  this.timeout(60_000);
  let dir: string;
  let module: HttpClientModule;
  const servers: TestServer[] = [];

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'idemkit-client-http-'));
    writeFileSync(path.join(dir, 'http.yaml'), SPEC);
    writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ type: 'module', private: true }));
    await writeOutput(path.join(dir, 'client'), generateClient(await loadDocument(path.join(dir, 'http.yaml')), { source: 'http.yaml' }));
    // Run as TypeScript through the test run's tsx loader (the golden tests type-check generated clients).
    module = (await import(pathToFileURL(path.join(dir, 'client', 'index.ts')).href)) as HttpClientModule;
  });

  after(() => rmSync(dir, { recursive: true, force: true }));

  afterEach(async () => {
    await Promise.all(servers.splice(0).map((server) => server.close()));
  });

  async function serve(handler: Handler): Promise<TestServer> {
    const server = await startServer(handler);
    servers.push(server);
    return server;
  }

  const client = (server: TestServer, options: { headers?: Record<string, string>; timeoutMs?: number; runtime?: Partial<ClientRuntime> } = {}) =>
    module.createClient({ baseUrl: server.url, ...options });

  describe('redirects', () => {
    for (const status of [301, 302, 303]) {
      it(`a ${status} to a command is rejected as redirected, with its location; the page it points to is never fetched`, async () => {
        const server = await serve((req, res) => {
          if (req.method === 'POST') return answer(res, status, undefined, { location: '/api/orders?page=1' });
          answer(res, 200, [{ id: 'some-list-item' }]);
        });
        const result = await client(server).createOrder({ body: order });
        assert.equal(result.kind, 'rejected', JSON.stringify(result));
        assert.ok(result.kind === 'rejected' && result.reason === 'redirected');
        assert.equal(result.status, status);
        assert.equal(result.location, `${server.url}/api/orders?page=1`);
        assert.equal(result.body, undefined);
        assert.deepEqual(server.arrivals.map((a) => a.method), ['POST'], 'no GET of the redirect target, no retry');
      });
    }

    it('a 307 or 308 to the same origin is followed with the same key, body and headers, as one more attempt', async () => {
      const server = await serve((req, res) => {
        if (req.path === '/api/orders') return answer(res, 307, undefined, { location: '/api/orders-moved' });
        if (req.path === '/api/orders-moved') return answer(res, 308, undefined, { location: `${server.url}/api/orders-final` });
        answer(res, 201, { id: 'o-1' }, { 'idempotent-replayed': 'false' });
      });
      const result = await client(server, { headers: { authorization: 'Bearer t' } }).createOrder({ body: order });
      assert.ok(result.kind === 'completed', JSON.stringify(result));
      assert.deepEqual(result.body, { id: 'o-1' });
      assert.deepEqual(server.arrivals.map((a) => `${a.method} ${a.path}`), ['POST /api/orders', 'POST /api/orders-moved', 'POST /api/orders-final']);
      assert.equal(new Set(server.arrivals.map((a) => a.headers['idempotency-key']?.[0])).size, 1, 'one key');
      assert.ok(server.arrivals.every((a) => a.body === JSON.stringify(order) && a.headers['authorization']?.[0] === 'Bearer t'));
      assert.equal(result.intent.attempts, 3);
    });

    it('a 307 to another origin is rejected as redirected: neither the key nor the body goes there', async () => {
      const other = await serve((_req, res) => answer(res, 201, { id: 'from-the-other-origin' }));
      const server = await serve((_req, res) => answer(res, 307, undefined, { location: `${other.url}/x` }));
      const result = await client(server).createOrder({ body: order });
      assert.ok(result.kind === 'rejected' && result.reason === 'redirected', JSON.stringify(result));
      assert.equal(result.status, 307);
      assert.equal(result.location, `${other.url}/x`);
      assert.equal(other.arrivals.length, 0);
    });

    it('an operation without a contract gets the redirect itself (ok: false, its Location), never the page a 303 points to', async () => {
      const server = await serve((req, res) => {
        if (req.method === 'POST') return answer(res, 303, undefined, { location: '/api/pings/1' });
        answer(res, 200, { listed: true });
      });
      const pinged = await client(server).ping({ body: {} });
      assert.equal(pinged.ok, false);
      assert.equal(pinged.status, 303);
      assert.equal(pinged.headers.get('location'), '/api/pings/1');
      assert.deepEqual(server.arrivals.map((a) => a.method), ['POST']);
    });
    // A custom transport that does not pass `init.redirect` on: the platform's fetch follows every redirect itself.
    const followsAnyway: Partial<ClientRuntime> = {
      fetch: (url, init) => fetch(url, { method: init.method ?? 'GET', headers: init.headers ?? {}, body: init.body ?? null, signal: init.signal ?? null }),
    };

    it('a 307 the runtime\'s fetch followed anyway to a 201 ends unknown with the same key and a status check, never rejected', async () => {
      const server = await serve((req, res) => {
        if (req.path === '/api/orders' || req.path === '/api/pings') return answer(res, 307, undefined, { location: `${req.path}-moved` });
        answer(res, 201, { id: 'o-1' }, { 'idempotent-replayed': 'false' });
      });
      const result = await client(server, { runtime: followsAnyway }).createOrder({ body: order });
      assert.ok(result.kind === 'unknown' && result.reason === 'redirect-followed', JSON.stringify(result));
      assert.equal(result.lastStatus, 201, 'the effect ran where it landed');
      assert.equal(result.key, result.intent.key);
      assert.equal(typeof result.checkStatus, 'function');
      assert.deepEqual(server.arrivals.map((a) => `${a.method} ${a.path}`), ['POST /api/orders', 'POST /api/orders-moved'], 'no retry');
      // A call without a contract gets the hidden redirect (status 0, where it landed), not the page as its answer.
      const pinged = await client(server, { runtime: followsAnyway }).ping({ body: {} });
      assert.equal(pinged.ok, false);
      assert.equal(pinged.status, 0);
      assert.equal(pinged.body, undefined);
      assert.equal(pinged.headers.get('location'), `${server.url}/api/pings-moved`);
    });

    for (const [loop, next] of [
      ['a 308 to itself', (path: string) => path],
      ['two 307s to each other', (path: string) => (path === '/api/orders' ? '/api/orders-b' : '/api/orders')],
    ] as const) {
      it(`${loop} ends rejected as redirected once it comes back, without spending the attempts`, async () => {
        const server = await serve((req, res) => answer(res, loop.startsWith('a 308') ? 308 : 307, undefined, { location: next(req.path) }));
        const result = await client(server).createOrder({ body: order });
        assert.ok(result.kind === 'rejected' && result.reason === 'redirected', JSON.stringify(result));
        assert.equal(result.location, `${server.url}/api/orders`);
        assert.equal(server.arrivals.length, loop.startsWith('a 308') ? 1 : 2);
      });
    }

    it('a chain of same-origin 307s as long as the attempts ends rejected as redirected (no answer ran the command), not unknown', async () => {
      const server = await serve((req, res) => answer(res, 307, undefined, { location: `/api/orders-${server.arrivals.length}` }));
      const result = await client(server).createOrder({ body: order });
      assert.ok(result.kind === 'rejected' && result.reason === 'redirected', JSON.stringify(result));
      assert.equal(result.status, 307);
      assert.equal(server.arrivals.length, 3, "the contract's maxAttempts");
    });

    it('a same-origin 307 whose Location holds credentials is not followed (fetch refuses it) and not retried: rejected, the credentials not repeated', async () => {
      const server = await serve((_req, res) => answer(res, 307, undefined, { location: `${server.url.replace('//', '//user:pw@')}/api/orders-moved` }));
      const result = await client(server).createOrder({ body: order });
      assert.ok(result.kind === 'rejected' && result.reason === 'redirected', JSON.stringify(result));
      assert.equal(result.location, `${server.url}/api/orders-moved`);
      assert.equal(server.arrivals.length, 1);
    });
  });

  describe('headers', () => {
    const created = (res: Parameters<Handler>[1]) => answer(res, 201, { id: 'o-1' }, { 'idempotent-replayed': 'false' });
    const mixedCase = { 'Content-Type': 'application/json', Accept: 'application/json', 'X-Request-ID': 'trace-1', 'IDEMPOTENCY-KEY': 'not-the-key' };

    it('a caller header in another letter case is one header: the JSON request is read as JSON, the key and request id are the intent\'s', async () => {
      const server = await serve((req, res) => {
        if (req.headers['content-type']?.join() !== 'application/json') return answer(res, 400, { title: `content-type ${req.headers['content-type']?.join(' | ')}` });
        created(res);
      });
      const api = client(server, { headers: mixedCase });
      const result = await api.createOrder({ body: order }, { headers: { accept: 'application/vnd.orders+json' } });
      assert.ok(result.kind === 'completed', JSON.stringify(result));
      const seen = server.arrivals[0]!.headers;
      assert.deepEqual(seen['content-type'], ['application/json']);
      assert.deepEqual(seen['accept'], ['application/vnd.orders+json'], "the call's Accept wins, once");
      assert.deepEqual(seen['idempotency-key'], [result.intent.key]);
      assert.deepEqual(seen['x-request-id'], [result.requestId]);
      const pinged = await api.ping({ body: {} });
      assert.equal(pinged.ok, true);
      assert.deepEqual(server.arrivals[1]!.headers['x-request-id'], ['trace-1'], "a call without a contract keeps the caller's request id");
      assert.equal(pinged.requestId, 'trace-1');
    });

    it("the encoder's content type wins over a caller's: a form stays a form, a multipart body keeps its boundary", async () => {
      const server = await serve((_req, res) => created(res));
      const api = client(server, { headers: { 'Content-Type': 'application/json' } });
      assert.equal((await api.submitForm({ body: { a: '1', b: 'x y' } })).kind, 'completed');
      assert.equal((await api.upload({ body: { title: 't', file: new Blob(['bytes']) } }, { headers: { 'content-type': 'multipart/form-data' } })).kind, 'completed');
      assert.deepEqual(server.arrivals[0]!.headers['content-type'], ['application/x-www-form-urlencoded']);
      assert.equal(server.arrivals[0]!.body, 'a=1&b=x%20y');
      const [multipart] = server.arrivals[1]!.headers['content-type']!;
      const boundary = /^multipart\/form-data; boundary=(.+)$/.exec(multipart!)?.[1];
      assert.ok(boundary !== undefined, multipart);
      assert.ok(server.arrivals[1]!.body.startsWith(`--${boundary}\r\n`));
    });

    it('a contract keyed on X-Request-Id sends its key there on every attempt; no per-attempt id replaces it', async () => {
      const server = await serve((_req, res) => (server.arrivals.length < 3 ? answer(res, 503, { title: 'busy' }, { 'retry-after': '0' }) : created(res)));
      const result = await client(server).createTracedOrder({ body: order });
      assert.ok(result.kind === 'completed', JSON.stringify(result));
      const sent = server.arrivals.map((a) => a.headers['x-request-id']);
      assert.equal(sent.length, 3);
      assert.deepEqual(sent, [[result.intent.key], [result.intent.key], [result.intent.key]], 'one key, sent once per attempt');
      assert.deepEqual(result.intent.requestIds, [result.intent.key, result.intent.key, result.intent.key]);
    });
  });

  describe('what a path template writes after the path', () => {
    it("a fragment (AWS's `#ClientRequestToken`) is never sent: the query, the key in it, reaches the server on every attempt", async () => {
      const server = await serve((_req, res) => (server.arrivals.length < 2 ? answer(res, 503, { title: 'busy' }, { 'retry-after': '0' }) : answer(res, 200, { id: 'l-1' })));
      const result = await client(server).deleteLens({ path: { LensAlias: 'lens 1' }, query: { LensStatus: 'ALL' } });
      assert.ok(result.kind === 'completed', JSON.stringify(result));
      const key = encodeURIComponent(result.intent.key);
      assert.deepEqual(
        server.arrivals.map((a) => `${a.method} ${a.path}`),
        [`DELETE /api/lenses/lens%201?LensStatus=ALL&ClientRequestToken=${key}`, `DELETE /api/lenses/lens%201?LensStatus=ALL&ClientRequestToken=${key}`],
      );
    });

    it("a query written in the template is sent with the call's, joined by &: no second '?' inside a value", async () => {
      const server = await serve((_req, res) => answer(res, 200, {}));
      const result = await client(server).getAirQuality({ path: { city: 'Saint-Étienne & co' }, query: { key: 'K' } });
      assert.equal(result.ok, true, JSON.stringify(result));
      assert.equal(server.arrivals[0]!.path, '/api/current/airquality?city=Saint-%C3%89tienne%20%26%20co&key=K');
      assert.deepEqual([...new URL(server.arrivals[0]!.path, 'http://h').searchParams], [['city', 'Saint-Étienne & co'], ['key', 'K']]);
    });
  });

  describe('requests that cannot be sent', () => {
    it('a header value fetch refuses is a TypeError before anything is sent: no attempt, no unknown outcome', async () => {
      const server = await serve((_req, res) => answer(res, 201, { id: 'o-1' }));
      const api = client(server);
      const intent = api.intent('createOrder');
      await assert.rejects(api.createOrder({ body: order }, { intent, headers: { 'x-note': 'caf\u2615' } }), {
        name: 'TypeError',
        message: /the value of the header x-note cannot be sent/,
      });
      assert.equal(intent.attempts, 0);
      await assert.rejects(api.ping({ body: {} }, { headers: { 'x-note': 'a\nb' } }), { name: 'TypeError', message: /x-note cannot be sent/ });
      assert.equal(server.arrivals.length, 0);
    });

    it("a header fetch frames itself (Transfer-Encoding, Expect, a Content-Length) is a TypeError before anything is sent, not attempts that end unknown", async () => {
      const server = await serve((_req, res) => answer(res, 201, { id: 'o-1' }));
      const api = client(server);
      for (const headers of [{ 'Transfer-Encoding': 'chunked' }, { Expect: '100-continue' }, { 'Content-Length': '3' }, { Upgrade: 'h2c' }] as Record<string, string>[]) {
        const intent = api.intent('createOrder');
        await assert.rejects(api.createOrder({ body: order }, { intent, headers }), { name: 'TypeError', message: /cannot be set: fetch frames the message/ }, JSON.stringify(headers));
        assert.equal(intent.attempts, 0);
      }
      assert.equal(server.arrivals.length, 0);
    });

    it("a signal aborted before anything is sent rejects the call with the signal's reason: nothing ran, no unknown outcome", async () => {
      const server = await serve((_req, res) => answer(res, 201, { id: 'o-1' }));
      const api = client(server);
      const ctl = new AbortController();
      ctl.abort(new Error('the user left the page'));
      const intent = api.intent('createOrder');
      await assert.rejects(api.createOrder({ body: order }, { intent, signal: ctl.signal }), /the user left the page/);
      assert.equal(intent.attempts, 0);
      assert.equal(server.arrivals.length, 0);
      // The same intent is sent later as it was made.
      const result = await api.createOrder({ body: order }, { intent });
      assert.ok(result.kind === 'completed', JSON.stringify(result));
      assert.deepEqual(server.arrivals[0]!.headers['idempotency-key'], [intent.key]);
    });

    it('a key with a line break is a TypeError that does not show the key', async () => {
      const server = await serve((_req, res) => answer(res, 201, { id: 'o-1' }));
      const api = client(server);
      const intent = api.intent('createOrder', 'secret\nkey');
      await assert.rejects(api.createOrder({ body: order }, { intent }), (error: Error) => {
        assert.equal(error.name, 'TypeError');
        assert.match(error.message, /Idempotency-Key cannot be sent/);
        assert.doesNotMatch(error.message, /secret/);
        return true;
      });
      assert.equal(intent.attempts, 0);
      assert.equal(server.arrivals.length, 0);
    });

    it('a path-only baseUrl outside a web page is a TypeError saying so, not a retried network failure', async () => {
      const api = module.createClient({ baseUrl: '/api' });
      const intent = api.intent('createOrder');
      await assert.rejects(api.createOrder({ body: order }, { intent }), { name: 'TypeError', message: /"\/api\/orders" is not absolute: pass baseUrl as an http\(s\) URL/ });
      assert.equal(intent.attempts, 0);
    });
  });

  describe('deadline', () => {
    it('an intent made with the form and sent after its budget has passed is still sent: the deadline starts at the first attempt', async () => {
      const server = await serve((_req, res) => answer(res, 201, { id: 'o-1' }, { 'idempotent-replayed': 'false' }));
      let clock = Date.now();
      const api = client(server, { runtime: { now: () => clock } });
      const intent = api.intent('createOrder');
      clock += 60_000; // the contract's deadline is 10 s
      const result = await api.createOrder({ body: order }, { intent });
      assert.ok(result.kind === 'completed', JSON.stringify(result));
      assert.equal(server.arrivals.length, 1);
      assert.equal(intent.firstSentAt, clock);
    });
  });

  describe('status checks and calls without a contract never hang', () => {
    const abandoned = { type: 'https://idemkit.dev/problems/idempotency-request-abandoned', title: 'abandoned' };

    it("a status check takes the caller's signal: aborting it rejects the call, and it still sends the intent's key", async () => {
      const ctl = new AbortController();
      const server = await serve((req, res) => {
        if (req.method === 'POST') return answer(res, 409, abandoned, { 'idempotency-problem': 'idempotency-request-abandoned' });
        ctl.abort(new Error('the user left the page')); // and never answer
      });
      const result = await client(server).createOrder({ body: order });
      assert.ok(result.kind === 'unknown' && result.reason === 'abandoned', JSON.stringify(result));
      await assert.rejects(result.checkStatus({ path: { id: 'o-1' } }, { signal: ctl.signal, headers: { 'x-trace': 't' } }), /the user left the page/);
      assert.equal(server.arrivals[1]!.method, 'GET');
      assert.deepEqual(server.arrivals[1]!.headers['idempotency-key'], [result.key]);
      assert.deepEqual(server.arrivals[1]!.headers['x-trace'], ['t']);
    });

    it('a server that never answers (or stalls in the body) ends a call without a contract with a TimeoutError', async () => {
      const server = await serve((req, res) => {
        if (req.path === '/api/orders/stalled-body') res.writeHead(200, { 'content-type': 'application/json' }).write('{"id":');
        // otherwise: no answer at all
      });
      const api = client(server, { timeoutMs: 200 });
      await assert.rejects(api.ping({ body: {} }), { name: 'TimeoutError' });
      await assert.rejects(api.getOrder({ path: { id: 'stalled-body' } }), { name: 'TimeoutError' });
      await assert.rejects(client(server).getOrder({ path: { id: 'x' } }, { timeoutMs: 100 }), { name: 'TimeoutError' });
      assert.equal(server.arrivals.length, 3);
    });
  });

  describe('bodies', () => {
    it('a URLSearchParams for a form and a FormData for a multipart body are sent as the fields they hold, the same on a retry', async () => {
      const server = await serve((_req, res) =>
        server.arrivals.length % 2 === 1 ? answer(res, 503, { title: 'busy' }, { 'retry-after': '0' }) : answer(res, 201, { id: 'o-1' }),
      );
      const api = client(server);
      assert.equal((await api.submitForm({ body: new URLSearchParams({ a: '1', b: 'x y' }) })).kind, 'completed');
      const form = new FormData();
      form.append('title', 'report');
      form.append('file', new Blob(['%PDF-1.7'], { type: 'application/pdf' }), 'report.pdf');
      assert.equal((await api.upload({ body: form })).kind, 'completed');
      const [first, retry, upload, uploadRetry] = server.arrivals;
      assert.equal(first!.body, 'a=1&b=x%20y');
      assert.equal(retry!.body, first!.body);
      assert.match(upload!.body, /name="title"\r\n\r\nreport\r\n/);
      assert.match(upload!.body, /name="file"; filename="report.pdf"\r\nContent-Type: application\/pdf\r\n\r\n%PDF-1.7\r\n/);
      assert.equal(uploadRetry!.body, upload!.body, 'one boundary, the same bytes');
    });
    it('a form body given as a class instance or an object of another realm (vm, an iframe) is sent as its fields', async () => {
      const server = await serve((_req, res) => answer(res, 201, { id: 'o-1' }, { 'idempotent-replayed': 'false' }));
      class Fields {
        a = 'x';
        b = 'y z';
      }
      const api = client(server);
      for (const body of [new Fields(), vm.runInNewContext('({ a: "x", b: "y z" })') as object]) {
        const result = await api.submitForm({ body });
        assert.equal(result.kind, 'completed', JSON.stringify(result));
      }
      assert.deepEqual(server.arrivals.map((a) => a.body), ['a=x&b=y%20z', 'a=x&b=y%20z']);
    });
  });

  describe('input it cannot send', () => {
    it('rejects the promise with a TypeError, never throws from the call, and sends nothing', async () => {
      const server = await serve((_req, res) => answer(res, 201, { id: 'o-1' }));
      const api = client(server);
      const calls: [Promise<unknown>, RegExp][] = [];
      // Each call returns a promise even when its input is wrong (a throw here would fail the test).
      calls.push([api.createOrder({ body: { item: 'book', quantity: 10n } }), /BigInt/]);
      calls.push([api.createOrder({ body: new Blob(['{"item":"book"}']) }), /not a file or bytes/]);
      calls.push([api.submitForm({ body: new ReadableStream() }), /not a stream/]);
      calls.push([api.getOrder({ path: {} as { id: string } }), /path parameter "id" is missing/]);
      for (const [call, message] of calls) await assert.rejects(call, (error: Error) => error instanceof TypeError && message.test(error.message));
      assert.equal(server.arrivals.length, 0);
    });
  });

  describe('answers', () => {
    it('a JSON answer without a content type, or labelled text/plain, is read as the JSON the document describes', async () => {
      const server = await serve((req, res) => {
        const headers: Record<string, string> = req.path.endsWith('/plain') || (req.method === 'POST' && server.arrivals.length === 2) ? { 'content-type': 'text/plain; charset=utf-8' } : {};
        answer(res, req.method === 'POST' ? 201 : 200, '{"id":"o-1"}', headers);
      });
      const api = client(server);
      const bare = await api.createOrder({ body: order });
      assert.ok(bare.kind === 'completed', JSON.stringify(bare));
      assert.deepEqual(bare.body, { id: 'o-1' });
      const plain = await api.createOrder({ body: order });
      assert.ok(plain.kind === 'completed' && plain.body.id === 'o-1', JSON.stringify(plain));
      assert.deepEqual((await api.getOrder({ path: { id: 'bare' } })).body, { id: 'o-1' });
      assert.deepEqual((await api.getOrder({ path: { id: 'plain' } })).body, { id: 'o-1' });
    });

    it("a refusal whose body stalls after its headers is still the refusal at the deadline: a 422 mismatch rejected, an abandoned 409 unknown/abandoned (was unknown/deadline)", async () => {
      const mismatch = { 'content-type': 'application/problem+json', 'idempotency-problem': 'idempotency-key-reused' };
      const gone = { 'content-type': 'application/problem+json', 'idempotency-problem': 'idempotency-request-abandoned' };
      for (const [status, headers, kind, reason] of [[422, mismatch, 'rejected', 'mismatch'], [400, { 'content-type': 'application/problem+json' }, 'rejected', 'client-error'], [409, gone, 'unknown', 'abandoned']] as const) {
        const server = await serve((_req, res) => res.writeHead(status, headers).write('{"type":'));
        const intent = module.Intent.create({ operationId: 'createOrder', deadlineMs: 300, now: Date.now() });
        const result = await client(server).createOrder({ body: order }, { intent });
        assert.equal(result.kind, kind, JSON.stringify(result));
        assert.equal((result as { reason?: string }).reason, reason, JSON.stringify(result));
        assert.equal(server.arrivals.length, 1, 'not retried');
      }
    });

    it('a 201 whose body stalls after its headers ends unknown at the deadline with lastStatus 201 (the effect ran)', async () => {
      const server = await serve((_req, res) => res.writeHead(201, { 'content-type': 'application/json' }).write('{"id":'));
      const intent = module.Intent.create({ operationId: 'createOrder', deadlineMs: 300, now: Date.now() });
      const result = await client(server).createOrder({ body: order }, { intent });
      assert.ok(result.kind === 'unknown' && result.reason === 'deadline', JSON.stringify(result));
      assert.equal(result.lastStatus, 201);
      assert.equal(server.arrivals.length, 1);
    });
  });
});
