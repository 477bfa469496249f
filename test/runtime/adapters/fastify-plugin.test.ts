/**
 * `idempotencyPlugin` against real specs' paths: OpenAPI paths are relative to the base path (Swagger 2.0
 * `basePath`, a 3.x `servers` URL path), so the app's routes carry a prefix the contract does not — but only
 * that base path or the register prefix, never any prefix (`/admin/orders` is another operation than
 * `/orders`); custom methods (`/emails:send`) need Fastify's `::` escape; a route of several methods runs each
 * method's own contract; two plugins never share a route silently; a guard that no route served must not pass silently.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { createRouteGuard, idempotencyOf, idempotencyPlugin, toFastifyPath, type RouteGuard, type RouteGuardOptions } from '../../../src/runtime/adapters/fastify.js';
import type { CompiledContract } from '../../../src/runtime/contract.js';
import { MemoryStore } from '../../../src/runtime/stores/memory.js';
import { buildServerModel } from '../../../src/generate/server.js';
import { loadDocument } from '../../../src/parser/index.js';
import { REPO_ROOT } from '../../generate/tsc.js';
import { post } from '../../e2e/harness.js';
import { contract, withSqliteStore } from './fixtures.js';

function options(): RouteGuardOptions {
  return { store: new MemoryStore(), principal: (request) => (typeof request.headers['x-user'] === 'string' ? request.headers['x-user'] : undefined) };
}

function guardFor(path: string, operationId: string, method = 'POST', basePaths?: readonly string[]): RouteGuard {
  const compiled: CompiledContract = {
    ...contract,
    operationId,
    method,
    path,
    ...(basePaths !== undefined ? { basePaths } : {}),
    scope: [{ kind: 'principal' }],
    fingerprint: { include: 'all', exclude: [], query: [] },
  };
  return createRouteGuard(compiled, options());
}

/** Why `app.ready()` failed, or `'ready'`. */
async function readiness(app: FastifyInstance): Promise<string> {
  try {
    await app.ready();
    return 'ready';
  } catch (error) {
    return (error as Error).message;
  }
}

async function listen(app: FastifyInstance): Promise<number> {
  const address = await app.listen({ port: 0, host: '127.0.0.1' });
  return Number(new URL(address).port);
}

/** The operation whose guard ran for the request ('none' when none did). */
function operationOf(request: FastifyRequest): string {
  try {
    return idempotencyOf(request).reservation.operation;
  } catch {
    return 'none';
  }
}

describe('runtime/adapters/fastify: idempotencyPlugin route matching', () => {
  let app: FastifyInstance;
  let calls: Record<string, number>;
  beforeEach(() => {
    calls = {};
    app = Fastify();
  });
  afterEach(async () => {
    await app.close();
  });

  /** A handler that counts its runs per route and names the guard that ran. */
  const handler = (route: string) => async (request: FastifyRequest) => {
    calls[route] = (calls[route] ?? 0) + 1;
    return { route, run: calls[route], operation: operationOf(request) };
  };

  it('a Swagger 2.0 spec with basePath /v2: its routes at /v2/… (written out, or under a register prefix) are guarded', async () => {
    const doc = await loadDocument(path.join(REPO_ROOT, 'test', 'fixtures', 'real-shapes', 'paypal-like.yaml'));
    const guards = buildServerModel(doc, { framework: 'fastify', store: 'memory' }).operations.map((op) => createRouteGuard(op.contract, options()));
    assert.deepEqual(guards.map((guard) => [guard.contract.path, guard.contract.basePaths]).sort(), [
      ['/checkout/orders', ['/v2']],
      ['/checkout/orders/{id}/capture', ['/v2']],
    ]);
    await app.register(idempotencyPlugin(guards));
    app.post('/v2/checkout/orders', handler('create'));
    await app.register(async (v2) => void v2.post('/checkout/orders/:orderId/capture', handler('capture')), { prefix: '/v2' });
    const port = await listen(app);

    const order = { intent: 'CAPTURE', purchase_units: [{ amount: { currency_code: 'USD', value: '10.00' } }] };
    const send = (url: string, key: string) => post(port, url, { user: 'u', body: order, headers: { 'paypal-request-id': key } });
    for (const [url, route, operation] of [
      ['/v2/checkout/orders', 'create', 'orders.create'],
      ['/v2/checkout/orders/O-1/capture', 'capture', 'orders.capture'],
    ] as const) {
      const first = await send(url, `k-${route}`);
      assert.equal(first.status, 200, first.text);
      assert.deepEqual(first.json, { route, run: 1, operation });
      assert.equal(first.headers['idempotent-replayed'], 'false');
      const retry = await send(url, `k-${route}`);
      assert.equal(retry.headers['idempotent-replayed'], 'true', `${url} is guarded`);
      assert.equal(retry.text, first.text);
      assert.equal(calls[route], 1, `${url}: the handler ran once`);
    }
    // The capture guard reads {id} by position from /v2/checkout/orders/:orderId/capture: another order is another key scope.
    assert.equal((await send('/v2/checkout/orders/O-2/capture', 'k-capture')).headers['idempotent-replayed'], 'false');
  });

  it('a custom-method path (POST /emails:send) is registered as /emails::send and guarded', async () => {
    assert.equal(toFastifyPath('/emails:send'), '/emails::send');
    // Fastify ends a parameter name only at `/`, `-`, `.` or `(`: `:id::cancel` would be one parameter `id::cancel`.
    assert.equal(toFastifyPath('/v1/{name}:cancel'), '/v1/:name([^/]+)::cancel');
    assert.equal(toFastifyPath('/things/{tenant}/x/{id}'), '/things/:tenant/x/:id');
    assert.equal(toFastifyPath('/v1/items/{item.id}/actions/{action-name}'), '/v1/items/:itemId/actions/:actionName');
    assert.equal(toFastifyPath('/flights/{from}-{to}/{a}{b}'), '/flights/:from-:to/:a([^/]+):b');
    const send = guardFor('/emails:send', 'Email_Send');
    const cancel = guardFor('/operations/{id}:cancel', 'Operation_Cancel');
    await app.register(idempotencyPlugin([send, cancel]));
    app.post(toFastifyPath(send.contract.path), handler('send'));
    app.post(toFastifyPath(cancel.contract.path), handler('cancel'));
    const port = await listen(app);
    for (const [url, route] of [
      ['/emails:send', 'send'],
      ['/operations/op-1:cancel', 'cancel'],
    ] as const) {
      assert.equal((await post(port, url, { user: 'u', body: {} })).status, 400, `${url}: a request without a key is refused`);
      assert.equal((await post(port, url, { key: 'k', user: 'u', body: { a: 1 } })).headers['idempotent-replayed'], 'false');
      const retry = await post(port, url, { key: 'k', user: 'u', body: { a: 1 } });
      assert.equal(retry.headers['idempotent-replayed'], 'true');
      assert.equal(calls[route], 1);
    }
  });

  it('which routes serve a contract: its path or that path under a base path of the API, register prefixes included; parameters by position, trailing slash ignored', async () => {
    const charges = guardFor('/charges', 'charges', 'POST', ['/v1', '/v2/']);
    const refunds = guardFor('/charges/{id}/refunds', 'refunds', 'POST', ['/v1']);
    await app.register(idempotencyPlugin([charges, refunds]));
    app.post('/charges', handler('bare'));
    app.post('/v1/charges', handler('v1'));
    app.post('/v2/charges/', handler('v2-slash'));
    await app.register(async (scope) => void scope.post('/charges', handler('prefixed')), { prefix: '/api' });
    await app.register(async (scope) => void scope.post('/v1/charges', handler('prefixed-base')), { prefix: '/api' });
    await app.register(async (scope) => void scope.post('', handler('prefix-is-path')), { prefix: '/v3/charges' });
    app.post('/v1/charges/:chargeId/refunds', handler('refunds'));
    app.post('/acct/:acct/charges/:chargeId/refunds', handler('acct-refunds'));
    app.post('/v1/charges/refunds/:x', handler('other-shape'));
    app.post('/v1/charges-archive', handler('archive'));
    app.put('/v1/charges', handler('put'));
    const operations: Record<string, string> = {};
    for (const [url, route] of [
      ['/charges', 'bare'],
      ['/v1/charges', 'v1'],
      ['/v2/charges/', 'v2-slash'],
      ['/api/charges', 'prefixed'],
      ['/api/v1/charges', 'prefixed-base'],
      ['/v3/charges', 'prefix-is-path'],
      ['/v1/charges/ch_1/refunds', 'refunds'],
      ['/acct/a1/charges/ch_1/refunds', 'acct-refunds'],
      ['/v1/charges/refunds/r1', 'other-shape'],
      ['/v1/charges-archive', 'archive'],
    ] as const) {
      const answer = await app.inject({ method: 'POST', url, headers: { 'idempotency-key': url, 'x-user': 'u' }, payload: {} });
      assert.equal(answer.json().route, route);
      operations[route] = String(answer.json().operation);
    }
    assert.deepEqual(operations, {
      bare: 'charges',
      v1: 'charges',
      'v2-slash': 'charges',
      // With the plugin at the root, a register prefix is part of the URL: /api is no base path, so /api/charges
      // is another operation (as /admin/orders is for /orders).
      prefixed: 'none',
      'prefixed-base': 'none',
      'prefix-is-path': 'none',
      refunds: 'refunds',
      'acct-refunds': 'none',
      'other-shape': 'none',
      archive: 'none',
    });
  });

  it('a contract never guards another operation ending with its path: POST /orders leaves /v1/users/:userId/orders and /admin/orders alone, and a key of /v1/orders replays nothing there', async () => {
    await app.register(idempotencyPlugin([guardFor('/orders', 'createOrder', 'POST', ['/v1'])]));
    app.post('/v1/orders', handler('orders'));
    app.post('/v1/users/:userId/orders', handler('userOrders'));
    app.post('/admin/orders', handler('adminOrders'));
    app.post('/v1/orders/:id/sub/orders', handler('subOrders'));
    const send = (url: string, key?: string) =>
      app.inject({ method: 'POST', url, headers: { 'x-user': 'u', ...(key !== undefined ? { 'idempotency-key': key } : {}) }, payload: { a: 1 } });
    assert.equal((await send('/v1/orders', 'k1')).json().operation, 'createOrder');
    for (const [url, route] of [
      ['/admin/orders', 'adminOrders'],
      ['/v1/users/7/orders', 'userOrders'],
      ['/v1/orders/1/sub/orders', 'subOrders'],
    ] as const) {
      const answer = await send(url, 'k1');
      assert.equal(answer.headers['idempotent-replayed'], undefined, `${url}: not a replay of /v1/orders`);
      assert.deepEqual(answer.json(), { route, run: 1, operation: 'none' });
      assert.equal((await send(url)).statusCode, 200, `${url}: no key needed`);
    }
    assert.equal((await send('/v1/orders', 'k1')).headers['idempotent-replayed'], 'true');
    assert.equal(calls['orders'], 1);
  });

  it('a contract path of one parameter (/{id}) guards /:id and /v1/:id under its base path, not every route ending in a parameter', async () => {
    await app.register(idempotencyPlugin([guardFor('/{id}', 'byId', 'POST', ['/v1'])]));
    for (const url of ['/:id', '/v1/:id', '/v1/users/:uid', '/v2/:id']) app.post(url, handler(url));
    const operations: Record<string, string> = {};
    for (const url of ['/x', '/v1/x', '/v1/users/5', '/v2/x']) {
      operations[url] = (await app.inject({ method: 'POST', url, headers: { 'idempotency-key': 'k', 'x-user': 'u' }, payload: {} })).json().operation;
    }
    assert.deepEqual(operations, { '/x': 'byId', '/v1/x': 'byId', '/v1/users/5': 'none', '/v2/x': 'none' });
  });

  it("a fragment or query a document writes after the path (AWS's `/lenses/{LensAlias}#ClientRequestToken`, `/current?city={city}`) is no part of the route: the route of the path alone is guarded", async () => {
    await app.register(idempotencyPlugin([guardFor('/lenses/{LensAlias}#ClientRequestToken', 'deleteLens', 'DELETE'), guardFor('/current?city={city}', 'current')]));
    app.delete('/lenses/:LensAlias', handler('lens'));
    app.post('/current', handler('current'));
    assert.equal(await readiness(app), 'ready');
    const lens = await app.inject({ method: 'DELETE', url: '/lenses/l-1', headers: { 'idempotency-key': 'k-1', 'x-user': 'u' } });
    assert.equal(lens.json().operation, 'deleteLens');
    const again = await app.inject({ method: 'DELETE', url: '/lenses/l-1', headers: { 'idempotency-key': 'k-1', 'x-user': 'u' } });
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal((await app.inject({ method: 'POST', url: '/current?city=Paris', headers: { 'idempotency-key': 'k-2', 'x-user': 'u' }, payload: {} })).json().operation, 'current');
    assert.deepEqual(calls, { lens: 1, current: 1 });
  });

  it('a root contract (/) is served at its base path, and below the scope the plugin is registered in, with or without the trailing slash, and by no other route', async () => {
    await app.register(idempotencyPlugin([guardFor('/', 'rootCreate', 'POST', ['/v1'])]));
    app.post('/v1', handler('v1'));
    app.post('/v1/other', handler('other'));
    // A module-style app: another resource's root under its own register prefix is another operation.
    await app.register(async (scope) => void scope.post('/', handler('refunds')), { prefix: '/v2/refunds' });
    await app.register(
      async (scope) => {
        await scope.register(idempotencyPlugin([guardFor('/', 'scopedRoot', 'POST')]));
        scope.post('/', handler('scoped'));
      },
      { prefix: '/v3' },
    );
    const operations: Record<string, string> = {};
    for (const url of ['/v1', '/v1/other', '/v2/refunds', '/v3', '/v3/']) {
      operations[url] = (await app.inject({ method: 'POST', url, headers: { 'idempotency-key': url, 'x-user': 'u' }, payload: {} })).json().operation;
    }
    assert.deepEqual(operations, { '/v1': 'rootCreate', '/v1/other': 'none', '/v2/refunds': 'none', '/v3': 'scopedRoot', '/v3/': 'scopedRoot' });
  });

  it('with the plugin at the root, a route under another register prefix is another operation: POST /admin/orders never replays /v1/orders', async () => {
    await app.register(idempotencyPlugin([guardFor('/orders', 'createOrder', 'POST', ['/v1'])]));
    app.post('/v1/orders', handler('orders'));
    await app.register(async (scope) => void scope.post('/orders', handler('adminOrders')), { prefix: '/admin' });
    await app.register(async (scope) => void scope.post('/orders', handler('userOrders')), { prefix: '/v1/users/:id' });
    const send = (url: string) => app.inject({ method: 'POST', url, headers: { 'x-user': 'u', 'idempotency-key': 'k1' }, payload: { a: 1 } });
    assert.equal((await send('/v1/orders')).json().operation, 'createOrder');
    for (const [url, route] of [
      ['/admin/orders', 'adminOrders'],
      ['/v1/users/7/orders', 'userOrders'],
    ] as const) {
      const answer = await send(url);
      assert.equal(answer.headers['idempotent-replayed'], undefined, url);
      assert.deepEqual([answer.json().route, answer.json().operation], [route, 'none'], url);
    }
  });

  it('a plugin registered in a prefixed scope serves the API mounted there: /api/charges and /api/v1/charges', async () => {
    await app.register(
      async (scope) => {
        await scope.register(idempotencyPlugin([guardFor('/charges', 'charges', 'POST', ['/v1'])]));
        scope.post('/charges', handler('prefixed'));
        scope.post('/v1/charges', handler('prefixed-base'));
        scope.post('/admin/charges', handler('admin'));
      },
      { prefix: '/api' },
    );
    const operations: Record<string, string> = {};
    for (const url of ['/api/charges', '/api/v1/charges', '/api/admin/charges']) {
      operations[url] = (await app.inject({ method: 'POST', url, headers: { 'idempotency-key': url, 'x-user': 'u' }, payload: {} })).json().operation;
    }
    assert.deepEqual(operations, { '/api/charges': 'charges', '/api/v1/charges': 'charges', '/api/admin/charges': 'none' });
  });

  it('a route of several methods runs each method its own contract, or none: GET beside a POST contract needs no key, POST and PUT keep their own records', async () => {
    const create = guardFor('/things', 'createThing');
    const replace = guardFor('/things', 'replaceThing', 'PUT');
    const order = guardFor('/orders', 'createOrder', 'POST', ['/v1']);
    await app.register(idempotencyPlugin([create, replace, order]));
    app.route({ method: ['GET', 'POST'], url: '/v1/orders', handler: handler('orders') });
    app.route({ method: ['POST', 'PUT', 'PATCH'], url: '/things', handler: handler('things') });
    // Hooks spread in by hand on a route of several methods guard only their contract's method too.
    const byHand = guardFor('/hand', 'byHand');
    app.route({ method: ['GET', 'POST'], url: '/hand', ...byHand.hooks, handler: handler('hand') });
    const send = (method: 'GET' | 'POST' | 'PUT' | 'PATCH', url: string, key?: string) =>
      app.inject({ method, url, headers: { 'x-user': 'u', ...(key !== undefined ? { 'idempotency-key': key } : {}) }, ...(method === 'GET' ? {} : { payload: { a: 1 } }) });

    for (const url of ['/v1/orders', '/hand']) {
      const get = await send('GET', url);
      assert.equal(get.statusCode, 200, `GET ${url}: ${get.body}`);
      assert.equal(get.json().operation, 'none');
      // The HEAD route Fastify adds for the GET copies the route's hooks.
      assert.equal((await app.inject({ method: 'HEAD', url })).statusCode, 200, `HEAD ${url}`);
      assert.equal((await send('POST', url)).statusCode, 400, `POST ${url} without a key is refused`);
    }
    const post = await send('POST', '/things', 'k1');
    assert.equal(post.json().operation, 'createThing');
    const put = await send('PUT', '/things', 'k1');
    assert.equal(put.headers['idempotent-replayed'], 'false', 'PUT is not a replay of the POST with the same key');
    assert.equal(put.json().operation, 'replaceThing');
    assert.equal((await send('POST', '/things', 'k1')).headers['idempotent-replayed'], 'true');
    assert.equal((await send('PUT', '/things', 'k1')).body, put.body);
    const patch = await send('PATCH', '/things');
    assert.equal(patch.statusCode, 200, 'PATCH has no contract');
    assert.equal(patch.json().operation, 'none');
    assert.equal(calls['things'], 3);
  });

  it('a transactional handler on a route of several methods runs its guard and transaction for its own method only; the plugin guards the other method with its contract', async () => {
    await withSqliteStore(async (store) => {
      const guardOf = (method: string, operationId: string) => createRouteGuard({ ...contract, method, operationId, path: '/things', scope: [{ kind: 'global' }], fingerprint: { include: 'all', exclude: [], query: [] } }, { store });
      const create = guardOf('POST', 'createThing');
      await app.register(idempotencyPlugin([guardOf('PUT', 'replaceThing')]));
      app.route({
        method: ['POST', 'PUT'],
        url: '/things',
        handler: create.transactional(async (request, _reply, { tx, reservation }) => {
          calls[request.method] = (calls[request.method] ?? 0) + 1;
          return { operation: reservation.operation, tx: tx !== undefined };
        }),
      });
      const send = (method: 'POST' | 'PUT') => app.inject({ method, url: '/things', headers: { 'idempotency-key': 'k' }, payload: { a: 1 } });
      assert.deepEqual((await send('POST')).json(), { operation: 'createThing', tx: true });
      assert.deepEqual((await send('PUT')).json(), { operation: 'replaceThing', tx: false });
      for (const method of ['POST', 'PUT'] as const) assert.equal((await send(method)).headers['idempotent-replayed'], 'true', method);
      assert.deepEqual(calls, { POST: 1, PUT: 1 });
    }, () => app.close());
  });

  it('a route two guards of one plugin serve is refused when added, and so is a route running another operation\'s guard by hand', async () => {
    await app.register(idempotencyPlugin([guardFor('/orders', 'createOrder', 'POST', ['/v1']), guardFor('/v1/orders', 'legacyCreate')]));
    assert.throws(
      () => app.post('/v1/orders', handler('orders')),
      /the route POST \/v1\/orders serves createOrder \(POST \/orders or \/v1\/orders\) and legacyCreate \(POST \/v1\/orders\); a route method runs one contract/,
    );
    const other = guardFor('/refunds', 'createRefund');
    assert.throws(() => app.post('/orders', { ...other.hooks }, handler('orders')), /the route POST \/orders already runs the guard of createRefund \(POST \/refunds\), and the guard of createOrder/);
  });

  it('two API documents, one plugin each at the root: each guard takes the routes under its own base path', async () => {
    await app.register(idempotencyPlugin([guardFor('/orders', 'a.createOrder', 'POST', ['/a'])]));
    await app.register(idempotencyPlugin([guardFor('/orders', 'b.createOrder', 'POST', ['/b'])]));
    app.post('/a/orders', handler('a'));
    app.post('/b/orders', handler('b'));
    for (const [url, operation] of [
      ['/a/orders', 'a.createOrder'],
      ['/b/orders', 'b.createOrder'],
    ] as const) {
      const answer = await app.inject({ method: 'POST', url, headers: { 'idempotency-key': 'k', 'x-user': 'u' }, payload: {} });
      assert.equal(answer.json().operation, operation);
      assert.equal(answer.headers['idempotent-replayed'], 'false');
    }
  });

  it('two plugins whose guards serve one route: the route is refused when added, naming both operations', async () => {
    await app.register(idempotencyPlugin([guardFor('/orders', 'a.createOrder')]));
    await app.register(idempotencyPlugin([guardFor('/orders', 'b.createOrder')]));
    assert.throws(
      () => app.post('/orders', handler('orders')),
      /the route POST \/orders already runs the guard of a\.createOrder \(POST \/orders\), and the guard of b\.createOrder \(POST \/orders\) serves it too.*basePaths/,
    );
  });

  it('a route under a prefix that is not the base path: the unmatched error names it and why; { basePaths } says where the app serves the API', async () => {
    await app.register(idempotencyPlugin([guardFor('/orders', 'a.createOrder')]));
    await app.register(idempotencyPlugin([guardFor('/orders', 'b.createOrder')], { basePaths: ['/b'] }));
    app.post('/a/orders', handler('a'));
    app.post('/b/orders', handler('b'));
    app.get('/orders', handler('list'));
    const message = await readiness(app);
    assert.match(message, /no route served the guard of a\.createOrder \(POST \/orders\)/);
    assert.match(message, /POST \/a\/orders \(\/orders under \/a, which is not a base path of the API nor the scope the plugin was registered in/);
    assert.match(message, /GET \/orders \(another method\)/);
    assert.match(message, /\{ basePaths: \['\/that\/path'\] \}/);
    assert.doesNotMatch(message, /b\.createOrder/);
    assert.throws(() => idempotencyPlugin([], { basePaths: ['v1'] }), /a base path is a path from the root such as '\/v1', not "v1"/);
  });

  it('letter case follows the router: a case-insensitive router matches /V1/Charges, the default one does not', async () => {
    for (const caseSensitive of [true, false]) {
      const instance = Fastify({ routerOptions: { caseSensitive } });
      try {
        await instance.register(idempotencyPlugin([guardFor('/charges', 'charges', 'POST', ['/v1'])], { unmatched: 'warn' }));
        instance.post('/V1/Charges', async (request) => ({ operation: operationOf(request) }));
        const warnings: string[] = [];
        const onWarning = (warning: Error) => warnings.push(warning.message);
        process.on('warning', onWarning);
        try {
          await instance.ready();
          await new Promise((resolve) => setImmediate(resolve));
        } finally {
          process.off('warning', onWarning);
        }
        const answer = await instance.inject({ method: 'POST', url: '/V1/Charges', headers: { 'idempotency-key': 'k', 'x-user': 'u' }, payload: {} });
        assert.equal(answer.json().operation, caseSensitive ? 'none' : 'charges', `caseSensitive: ${caseSensitive}`);
        assert.equal(warnings.length, caseSensitive ? 1 : 0);
      } finally {
        await instance.close();
      }
    }
  });

  it('a guard that matched no route fails app.ready(), naming the operation and the paths it looked for', async () => {
    const missing = guardFor('/charges/{id}/capture', 'CaptureCharge', 'POST', ['/v1']);
    await app.register(idempotencyPlugin([guardFor('/charges', 'charges', 'POST', ['/v1']), missing]));
    app.post('/v1/charges', handler('charges'));
    app.post('/v1/charges/:id/captures', handler('typo'));
    await assert.rejects(async () => void (await app.ready()), (error: Error) => {
      assert.match(error.message, /no route served the guard of CaptureCharge \(POST \/charges\/\{id\}\/capture or \/v1\/charges\/\{id\}\/capture\)/);
      assert.doesNotMatch(error.message, /guard of charges/);
      return true;
    });
  });

  it("{ unmatched: 'warn' } reports the unmatched guard as a process warning and starts", async () => {
    await app.register(idempotencyPlugin([guardFor('/refunds', 'CreateRefund')], { unmatched: 'warn' }));
    app.post('/v1/charges', handler('charges'));
    const warning = new Promise<Error & { code?: string }>((resolve) => process.once('warning', resolve));
    await app.ready();
    const reported = await warning;
    assert.equal(reported.code, 'IDEMKIT_UNMATCHED_GUARD');
    assert.match(reported.message, /CreateRefund \(POST \/refunds/);
  });

  it('a route that carries its guard already (hooks spread in) is not guarded twice, and counts as matched', async () => {
    const guard = guardFor('/charges', 'charges');
    await app.register(idempotencyPlugin([guard]));
    for (const url of ['/charges', '/v1/charges']) app.post(url, { ...guard.hooks }, handler(url));
    const port = await listen(app);
    for (const url of ['/charges', '/v1/charges']) {
      const first = await post(port, url, { key: url, user: 'u', body: {} });
      assert.equal(first.status, 200, first.text);
      assert.equal(first.headers['idempotent-replayed'], 'false');
      assert.equal((await post(port, url, { key: url, user: 'u', body: {} })).headers['idempotent-replayed'], 'true');
      assert.equal(calls[url], 1);
    }
  });

  it('refuses two guards with the same method and path shape (they would guard the same routes)', () => {
    assert.throws(
      () => idempotencyPlugin([guardFor('/charges/{id}', 'a'), guardFor('/charges/{chargeId}', 'b'), guardFor('/charges/{id}', 'c', 'PUT')]),
      /the guards of b \(POST \/charges\/\{chargeId\}\) and a \(POST \/charges\/\{id\}\) would match the same routes/,
    );
    // Two operations a document tells apart only after the path (AWS's `#X-Amz-Target=…`) are one route: refused too.
    assert.throws(
      () => idempotencyPlugin([guardFor('/#X-Amz-Target=Svc.CreateTable', 'createTable'), guardFor('/#X-Amz-Target=Svc.ImportTable', 'importTable')]),
      /the guards of importTable \(POST \/#X-Amz-Target=Svc\.ImportTable\) and createTable \(POST \/#X-Amz-Target=Svc\.CreateTable\) would match the same routes/,
    );
  });
});
