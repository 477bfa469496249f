/**
 * Documents shaped like real public specs (test/fixtures/real-shapes: Stripe-like 3.0 JSON with form bodies
 * and huge anyOf unions, GitHub-like 3.0 with path-level and $ref'ed parameters, PayPal-like Swagger 2.0,
 * a 3.1 document full of odd names, and keys in the body and the query as Square, AWS and Google send them) through the whole pipeline: `lint` never crashes, `generate server`
 * for every framework and `generate client` produce code that compiles under `tsc --strict` (one run for
 * all outputs), `--check` finds no drift, and the compiled clients send what the documents describe.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import express, { type Request as ExpressRequest, type RequestHandler, type Response as ExpressResponse } from 'express';
import { main } from '../../src/cli/main.js';
import { DocumentError } from '../../src/errors.js';
import { generateServer } from '../../src/generate/server.js';
import { loadDocument } from '../../src/parser/index.js';
import { prepareTsProject, REPO_ROOT, runTsc } from '../generate/tsc.js';
import { bufferIo } from '../helpers/io.js';

const FIXTURES = path.join(REPO_ROOT, 'test', 'fixtures', 'real-shapes');
const DOCS = ['stripe-like.json', 'github-like.yaml', 'paypal-like.yaml', 'odd-31.yaml', 'body-query-keys.yaml'] as const;
const FRAMEWORKS = ['express', 'fastify', 'fetch'] as const;
const DUPLICATES = 'duplicate-operation-ids.yaml';
const STORES = ['sqlite', 'memory', 'postgres', 'redis'] as const;

const nameOf = (doc: string): string => doc.replace(/\.(json|yaml)$/, '');
/** Every store is generated for some document: the store turns with the framework and the document. */
const storeFor = (docIndex: number, frameworkIndex: number): string => STORES[(docIndex + frameworkIndex) % STORES.length]!;

/** One request a recording server received. */
interface Received {
  readonly method: string;
  readonly url: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

/** A loopback HTTP server that records requests and answers `201 {"id":"rec-<n>"}`. */
async function recordingServer(): Promise<{ port: number; received: Received[]; close: () => Promise<void> }> {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: `rec-${received.length}`, ok: true }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

type Client = Record<string, (input?: unknown, call?: unknown) => Promise<Record<string, unknown>>>;

describe('real-world spec shapes through lint, generate server (every framework) and generate client', function () {
  this.timeout(120_000);
  let root: string;
  const lint: Record<string, { code: number; out: string; err: string }> = {};
  let diagnostics = '';
  /** `generate … --check` right after each generation (no window for the source tree to change between). */
  const checks: Record<string, Record<string, { code: number; text: string }>> = {};
  async function generate(args: string[], target: string, doc: string): Promise<void> {
    const io = bufferIo();
    const code = await main(args, io);
    assert.equal(code, 0, `generate ${target} ${doc}: ${io.err}`);
    const check = bufferIo();
    const checked = await main([...args, '--check'], check);
    (checks[doc] ??= {})[target] = { code: checked, text: check.out + check.err };
  }

  before(async function () {
    this.timeout(300_000);
    root = mkdtempSync(path.join(os.tmpdir(), 'idemkit-real-shapes-'));
    writeFileSync(path.join(root, 'package.json'), JSON.stringify({ type: 'module', private: true }));
    for (const [d, doc] of DOCS.entries()) {
      const spec = path.join(FIXTURES, doc);
      const io = bufferIo();
      lint[doc] = { code: await main(['lint', spec], io), out: io.out, err: io.err };
      for (const [f, framework] of FRAMEWORKS.entries()) {
        const out = path.join(root, 'src', `${nameOf(doc)}-${framework}`);
        await generate(['generate', 'server', spec, '--framework', framework, '--store', storeFor(d, f), '--out', out], `server ${framework}`, doc);
      }
      await generate(['generate', 'client', spec, '--out', path.join(root, 'src', `${nameOf(doc)}-client`)], 'client', doc);
    }
    const dup = bufferIo();
    const dupCode = await main(['generate', 'client', path.join(FIXTURES, DUPLICATES), '--out', path.join(root, 'src', 'duplicates-client')], dup);
    assert.equal(dupCode, 0, dup.err);
    copyFileSync(path.join(FIXTURES, 'stripe-like-app.ts'), path.join(root, 'src', 'stripe-like-app.ts'));
    copyFileSync(path.join(FIXTURES, 'body-query-keys-usage.ts'), path.join(root, 'src', 'body-query-keys-usage.ts'));
    diagnostics = await runTsc(prepareTsProject(root, { outDir: path.join(root, 'dist'), include: ['src/**/*.ts'] }));
  });

  after(() => {
    if (root !== undefined) rmSync(root, { recursive: true, force: true });
  });

  const compiled = async (dir: string): Promise<{ createClient: (options: { baseUrl: string; headers?: Record<string, string> }) => Client }> =>
    (await import(pathToFileURL(path.join(root, 'dist', 'src', dir, 'index.js')).href)) as never;

  for (const doc of DOCS) {
    it(`${doc}: lint reports findings without crashing (exit 0 or 1, no stack trace)`, () => {
      const result = lint[doc]!;
      assert.ok(result.code === 0 || result.code === 1, `exit ${result.code}: ${result.err}`);
      assert.doesNotMatch(result.err, /\n\s+at /, 'no stack trace');
      // A clean document prints nothing (stylish, as eslint); one with findings ends with the count.
      if (result.code === 0 && result.out === '') return;
      assert.match(result.out, /problems?|no problems/i);
    });

    if (doc === 'body-query-keys.yaml') {
      it(`${doc}: lints clean — a body key and a query key declared where the contracts say`, () => {
        assert.equal(lint[doc]!.code, 0, lint[doc]!.out);
        assert.equal(lint[doc]!.out, '');
      });
    }

    it(`${doc}: generate --check finds the outputs deterministic (no drift)`, () => {
      for (const [target, result] of Object.entries(checks[doc]!)) assert.equal(result.code, 0, `${target}: ${result.text}`);
      assert.equal(Object.keys(checks[doc]!).length, FRAMEWORKS.length + 1);
    });
  }

  it('every generated server and client compiles under tsc --strict (one run over all outputs)', () => {
    assert.equal(diagnostics, '');
  });

  it('generate server refuses two contracted operations with one operationId (they would share keys), at file:line:column', async () => {
    const spec = path.join(FIXTURES, DUPLICATES);
    const doc = await loadDocument(spec);
    assert.throws(
      () => generateServer(doc, { framework: 'express', store: 'memory', source: DUPLICATES }),
      (error: unknown) =>
        error instanceof DocumentError &&
        error.line === 17 &&
        error.column === 7 &&
        /^POST \/b \(create\): operationId "create" is also the operationId of POST \/a \(create\)/.test(error.message),
    );
    const io = bufferIo();
    assert.equal(await main(['generate', 'server', spec, '--framework', 'express', '--store', 'memory', '--out', path.join(root, 'refused')], io), 2);
    assert.match(io.err, /operationId "create" is also the operationId of POST \/a \(create\)/);
    assert.equal(io.err.trim().split('\n').length, 1, 'one line, no stack trace');
  });

  it('stripe-like: the client sends form bodies with bracketed fields; the generated Express guard replays and refuses a changed field', async function () {
    assert.equal(diagnostics, '', 'needs the compiled output');
    const child: ChildProcess = spawn(process.execPath, [path.join(root, 'dist', 'src', 'stripe-like-app.js')], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    try {
      const port = await new Promise<number>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`the app did not start: ${stderr}`)), 20_000);
        child.stdout!.on('data', (chunk: Buffer) => {
          const match = /listening (\d+)/.exec(chunk.toString());
          if (match !== null) {
            clearTimeout(timer);
            resolve(Number(match[1]));
          }
        });
        child.once('exit', (how) => reject(new Error(`the app exited (${String(how)}): ${stderr}`)));
      });
      const { createClient } = await compiled('stripe-like-client');
      const client = createClient({ baseUrl: `http://127.0.0.1:${port}`, headers: { authorization: 'Bearer sk_test_shapes' } }) as Client & {
        intent: (operation: string) => unknown;
      };
      const intent = client.intent('postCustomers');
      const body = { email: 'ada@example.com', name: 'Ada', metadata: { order_id: 'o-1' }, expand: ['default_source'] };
      const first = await client['postCustomers']!({ body }, { intent });
      assert.equal(first['kind'], 'completed', JSON.stringify(first));
      assert.equal(first['replayed'], false);
      assert.deepEqual((first['body'] as Record<string, unknown>)['metadata'], { order_id: 'o-1' }, 'the server read metadata[order_id] as a nested field');
      const again = await client['postCustomers']!({ body }, { intent });
      assert.equal(again['kind'], 'completed');
      assert.equal(again['replayed'], true);
      assert.equal((again['body'] as Record<string, unknown>)['id'], (first['body'] as Record<string, unknown>)['id']);
      const changed = await client['postCustomers']!({ body: { ...body, metadata: { order_id: 'o-2' } } }, { intent });
      assert.equal(changed['kind'], 'rejected', JSON.stringify(changed));
      assert.equal(changed['reason'], 'mismatch');
      const effects = (await (await fetch(`http://127.0.0.1:${port}/test/effects`)).json()) as { effects: number };
      assert.equal(effects.effects, 1);
    } finally {
      if (child.exitCode === null && child.signalCode === null) {
        const gone = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await gone;
      }
    }
  });

  it('body and query keys: the generated client writes the intent\'s key where the contract says, the generated Express guard replays a lost answer, one effect', async () => {
    assert.equal(diagnostics, '', 'needs the compiled output');
    assert.equal(storeFor(DOCS.indexOf('body-query-keys.yaml'), FRAMEWORKS.indexOf('express')), 'sqlite');
    const generated = (await import(pathToFileURL(path.join(root, 'dist', 'src', 'body-query-keys-express', 'index.js')).href)) as {
      createGuards: (options: { store: unknown; principal: (req: ExpressRequest) => string | undefined }) => Record<string, RequestHandler>;
      SqliteStore: new (db: unknown) => { migrate(): Promise<void> };
    };
    const store = new generated.SqliteStore(new Database(':memory:'));
    await store.migrate();
    const guards = generated.createGuards({ store, principal: (req) => req.get('authorization') });
    let payments = 0;
    let clusters = 0;
    let loseNext = false;
    // The answer the guard finally writes (after it recorded it) is lost with the connection: the client retries.
    const lossy: RequestHandler = (req, res, next) => {
      if (loseNext) {
        loseNext = false;
        res.end = (() => (req.socket.destroy(), res)) as ExpressResponse['end'];
      }
      next();
    };
    const app = express();
    app.post('/v2/payments', lossy, express.json(), guards['createPayment']!, (req: ExpressRequest, res: ExpressResponse) => {
      payments += 1;
      res.json({ id: `pay-${payments}`, status: 'COMPLETED', key: (req.body as { idempotency_key: string }).idempotency_key });
    });
    app.post('/v1/projects/:project/clusters', lossy, express.json(), guards['createCluster']!, (req: ExpressRequest, res: ExpressResponse) => {
      clusters += 1;
      res.json({ clusterId: `c-${clusters}`, name: (req.body as { name: string }).name, requestId: req.query['requestId'] });
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    try {
      const { createClient } = await compiled('body-query-keys-client');
      const client = createClient({ baseUrl: `http://127.0.0.1:${(server.address() as { port: number }).port}`, headers: { authorization: 'Bearer shapes' } });
      const payment = { source_id: 'cnon:card-nonce-ok', amount_money: { amount: 100, currency: 'EUR' } };

      loseNext = true;
      const paid = await client['createPayment']!({ body: payment });
      assert.equal(paid['kind'], 'completed', JSON.stringify(paid));
      assert.equal(paid['replayed'], true, 'the first answer was lost: the retry with the same body key got the replay');
      const intentKey = (paid['intent'] as { key: string }).key;
      assert.equal((paid['body'] as { key: string }).key, intentKey, 'the client wrote the intent\'s key into idempotency_key');
      assert.equal(payments, 1);

      // A key the caller writes in the body is the intent's key: a second process sending it again gets the replay.
      const mine = await client['createPayment']!({ body: { ...payment, idempotency_key: 'sq-order-77' } });
      assert.equal((mine['intent'] as { key: string }).key, 'sq-order-77');
      const again = await client['createPayment']!({ body: { ...payment, idempotency_key: 'sq-order-77' } });
      assert.equal(again['replayed'], true);
      assert.equal((again['body'] as { id: string }).id, (mine['body'] as { id: string }).id);
      const changed = await client['createPayment']!({ body: { ...payment, amount_money: { amount: 999, currency: 'EUR' }, idempotency_key: 'sq-order-77' } });
      assert.equal(changed['reason'], 'mismatch', JSON.stringify(changed));
      assert.equal(payments, 2);

      loseNext = true;
      const cluster = await client['createCluster']!({ path: { project: 'p-1' }, body: { name: 'analytics' } });
      assert.equal(cluster['kind'], 'completed', JSON.stringify(cluster));
      assert.equal(cluster['replayed'], true);
      assert.equal((cluster['body'] as { requestId: string }).requestId, (cluster['intent'] as { key: string }).key, 'the client put the key in ?requestId=');
      assert.equal(clusters, 1);

      // A request without the key where the contract says it travels never reaches the handler.
      const bare = await fetch(`http://127.0.0.1:${(server.address() as { port: number }).port}/v2/payments`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer shapes', 'idempotency-key': 'in-a-header' },
        body: JSON.stringify(payment),
      });
      assert.equal(bare.status, 400);
      assert.match(((await bare.json()) as { detail: string }).detail, /body field \/idempotency_key/);
      assert.equal(payments, 2);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('paypal-like (Swagger 2.0): PayPal-Request-Id carries the key, `in: body` is JSON, formData parameters are a form', async () => {
    assert.equal(diagnostics, '', 'needs the compiled output');
    const server = await recordingServer();
    try {
      const { createClient } = await compiled('paypal-like-client');
      const client = createClient({ baseUrl: `http://127.0.0.1:${server.port}/v2` });
      const order = { intent: 'CAPTURE', purchase_units: [{ amount: { currency_code: 'EUR', value: '10.00' } }] };
      const created = await client['ordersCreate']!({ body: order, headers: { Prefer: 'return=representation' } });
      assert.equal(created['kind'], 'completed', JSON.stringify(created));
      const [sent] = server.received;
      assert.equal(sent!.url, '/v2/checkout/orders');
      assert.match(String(sent!.headers['paypal-request-id']), /^\S{8,108}$/);
      assert.equal(sent!.headers['idempotency-key'], undefined);
      assert.equal(sent!.headers['prefer'], 'return=representation');
      assert.match(String(sent!.headers['content-type']), /^application\/json/);
      assert.deepEqual(JSON.parse(sent!.body), order);

      const verified = await client['verifyWebhookSignaturePost']!({ body: { auth_algo: 'SHA256withRSA', transmission_id: 't "1"&x=y' } });
      assert.equal(verified['ok'], true);
      const form = server.received[1]!;
      assert.equal(form.headers['content-type'], 'application/x-www-form-urlencoded');
      assert.deepEqual(Object.fromEntries(new URLSearchParams(form.body)), { auth_algo: 'SHA256withRSA', transmission_id: 't "1"&x=y' });
    } finally {
      await server.close();
    }
  });

  it('paypal-like (Swagger 2.0): the generated fetch guard keys on PayPal-Request-Id under basePath, scoped by the order id', async () => {
    assert.equal(diagnostics, '', 'needs the compiled output');
    assert.equal(storeFor(DOCS.indexOf('paypal-like.yaml'), FRAMEWORKS.indexOf('fetch')), 'sqlite');
    type Wrap = (handler: (request: Request) => Promise<Response>) => (request: Request) => Promise<Response>;
    const generated = (await import(pathToFileURL(path.join(root, 'dist', 'src', 'paypal-like-fetch', 'index.js')).href)) as {
      createGuards: (options: { store: unknown; principal: (request: Request) => string | undefined }) => Record<string, { wrap: Wrap }>;
      SqliteStore: new (db: unknown) => { migrate(): Promise<void> };
    };
    const store = new generated.SqliteStore(new Database(':memory:'));
    await store.migrate();
    const guards = generated.createGuards({ store, principal: (request) => request.headers.get('authorization') ?? undefined });
    let runs = 0;
    const capture = guards['ordersCapture']!.wrap(async (request) => {
      runs += 1;
      return Response.json({ id: new URL(request.url).pathname.split('/')[4], status: 'COMPLETED', run: runs }, { status: 201 });
    });
    const send = (order: string, requestId: string) =>
      capture(
        new Request(`https://api-m.example.com/v2/checkout/orders/${order}/capture`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'PayPal-Request-Id': requestId, authorization: 'Bearer A21AA' },
          body: JSON.stringify({ payment_source: { token: { id: 'tok', type: 'BILLING_AGREEMENT' } } }),
        }),
      );
    const first = await send('5O190127TN364715T', 'capture-7f1c-2026');
    assert.equal(first.status, 201, await first.clone().text());
    assert.equal(first.headers.get('idempotent-replayed'), 'false');
    const again = await send('5O190127TN364715T', 'capture-7f1c-2026');
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.equal((await again.json() as { run: number }).run, 1);
    const otherOrder = await send('8AB12345CD678901E', 'capture-7f1c-2026');
    assert.equal(otherOrder.headers.get('idempotent-replayed'), 'false', 'path:id scopes the key per order');
    assert.equal(runs, 2);
  });

  it('odd 3.1 names: the generated fetch guard serves a unicode path and replays under the custom key header', async () => {
    assert.equal(diagnostics, '', 'needs the compiled output');
    assert.equal(storeFor(DOCS.indexOf('odd-31.yaml'), FRAMEWORKS.indexOf('fetch')), 'memory');
    type Wrap = (handler: (request: Request) => Promise<Response>) => (request: Request) => Promise<Response>;
    const generated = (await import(pathToFileURL(path.join(root, 'dist', 'src', 'odd-31-fetch', 'index.js')).href)) as {
      createGuards: (options: { store: unknown; principal: (request: Request) => string | undefined }) => Record<string, { wrap: Wrap }>;
      MemoryStore: new () => unknown;
    };
    const guards = generated.createGuards({ store: new generated.MemoryStore(), principal: (request) => request.headers.get('x-user') ?? undefined });
    let runs = 0;
    const handler = guards['operation']!.wrap(async () => Response.json({ id: `run-${(runs += 1)}` }));
    const send = (name: string) =>
      handler(
        new Request('http://127.0.0.1/v1/ünïcode/ресурсы', {
          method: 'PUT',
          headers: { 'content-type': 'application/json', 'x-idempotency-key': 'k-unicode-1', 'x-tenant-id': 't1', 'x-user': 'u1' },
          body: JSON.stringify({ имя: name }),
        }),
      );
    const first = await send('Ада');
    assert.equal(first.status, 200, await first.clone().text());
    const again = await send('Ада');
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(await again.json(), { id: 'run-1' });
    assert.equal((await send('Другое')).status, 422);
    assert.equal(runs, 1);
  });

  it('odd 3.1 names: `{item.id}` paths, quoted enum values, a custom key header, reserved-word operations, tuples', async () => {
    assert.equal(diagnostics, '', 'needs the compiled output');
    const server = await recordingServer();
    try {
      const { createClient } = await compiled('odd-31-client');
      const client = createClient({ baseUrl: `http://127.0.0.1:${server.port}` });
      for (const method of ['itemsActionsRunNow', 'getItemAction', 'delete_', 'class_', 'default_']) assert.equal(typeof client[method], 'function', method);
      const result = await client['itemsActionsRunNow']!({
        path: { 'item.id': 'a/b c', 'action-name': 'say "hi"' },
        query: { 'dry-run': true, 'filter[status]': ['open'] },
        headers: { 'X-Tenant-Id': 'tenant-1' },
        body: { delete: true, class: { interface: 'i' }, items: ['x', 1] },
      });
      assert.equal(result['kind'], 'completed', JSON.stringify(result));
      const [sent] = server.received;
      assert.equal(sent!.url, '/v1/items/a%2Fb%20c/actions/say%20%22hi%22?dry-run=true&filter%5Bstatus%5D=open');
      assert.match(String(sent!.headers['x-idempotency-key']), /\S+/);
      assert.equal(sent!.headers['x-tenant-id'], 'tenant-1');
      assert.deepEqual(JSON.parse(sent!.body), { delete: true, class: { interface: 'i' }, items: ['x', 1] });

      await client['delete_']!({ body: { tags: ['t'] } });
      assert.equal(server.received[1]!.headers['content-type'], 'application/merge-patch+json');
      await client['default_']!({ query: { 'tenant.id': 't' }, body: 'plain "text"' });
      assert.equal(server.received[2]!.headers['content-type'], 'text/plain');
      assert.equal(server.received[2]!.body, 'plain "text"');
    } finally {
      await server.close();
    }
  });
});
