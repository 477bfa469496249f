/**
 * `idempotencyPlugin` against real specs' paths: OpenAPI paths are relative to the base path (Swagger 2.0
 * `basePath`, a 3.x `servers` URL path), so the app's routes carry a prefix the contract does not; custom
 * methods (`/emails:send`) need Fastify's `::` escape; and a guard that no route matched must not pass silently.
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
import { contract } from './fixtures.js';

function options(): RouteGuardOptions {
  return { store: new MemoryStore(), principal: (request) => (typeof request.headers['x-user'] === 'string' ? request.headers['x-user'] : undefined) };
}

function guardFor(path: string, operationId: string, method = 'POST'): RouteGuard {
  const compiled: CompiledContract = { ...contract, operationId, method, path, scope: [{ kind: 'principal' }], fingerprint: { include: 'all', exclude: [], query: [] } };
  return createRouteGuard(compiled, options());
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
    assert.deepEqual(guards.map((guard) => guard.contract.path).sort(), ['/checkout/orders', '/checkout/orders/{id}/capture']);
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

  it('which guard a route gets: exact path over a prefixed one, the longest contract path, parameters by position, trailing slash ignored', async () => {
    const charges = guardFor('/charges', 'charges');
    const v1Charges = guardFor('/v1/charges', 'v1Charges');
    const refunds = guardFor('/charges/{id}/refunds', 'refunds');
    await app.register(idempotencyPlugin([charges, v1Charges, refunds]));
    app.post('/v1/charges', handler('v1'));
    app.post('/v2/charges/', handler('v2-slash'));
    await app.register(async (scope) => void scope.post('', handler('v3-empty')), { prefix: '/v3/charges' });
    app.post('/acct/:acct/charges/:chargeId/refunds', handler('refunds'));
    app.post('/v1/charges/refunds/:x', handler('other-shape'));
    app.post('/v1/charges-archive', handler('archive'));
    app.put('/v1/charges', handler('put'));
    const port = await listen(app);

    const operations: Record<string, string> = {};
    for (const [url, route] of [
      ['/v1/charges', 'v1'],
      ['/v2/charges/', 'v2-slash'],
      ['/v3/charges', 'v3-empty'],
      ['/acct/a1/charges/ch_1/refunds', 'refunds'],
      ['/v1/charges/refunds/r1', 'other-shape'],
      ['/v1/charges-archive', 'archive'],
    ] as const) {
      const answer = await post(port, url, { key: 'k', user: 'u', body: {} });
      operations[route] = String(answer.json['operation']);
    }
    assert.deepEqual(operations, {
      v1: 'v1Charges',
      'v2-slash': 'charges',
      'v3-empty': 'charges',
      refunds: 'refunds',
      'other-shape': 'none',
      archive: 'none',
    });
  });

  it('letter case follows the router: a case-insensitive router matches /V1/Charges, the default one does not', async () => {
    for (const caseSensitive of [true, false]) {
      const instance = Fastify({ routerOptions: { caseSensitive } });
      try {
        await instance.register(idempotencyPlugin([guardFor('/charges', 'charges')], { unmatched: 'warn' }));
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

  it('a guard that matched no route fails app.ready(), naming the operation and the path it looked for', async () => {
    const missing = guardFor('/charges/{id}/capture', 'CaptureCharge');
    await app.register(idempotencyPlugin([guardFor('/charges', 'charges'), missing]));
    app.post('/v1/charges', handler('charges'));
    app.post('/v1/charges/:id/captures', handler('typo'));
    await assert.rejects(async () => void (await app.ready()), (error: Error) => {
      assert.match(error.message, /no route matched the guard of CaptureCharge \(POST \/charges\/\{id\}\/capture/);
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
  });
});
