import assert from 'node:assert/strict';
import http from 'node:http';
import http2 from 'node:http2';
import { Readable } from 'node:stream';
import { brotliCompressSync, gunzipSync, gzipSync } from 'node:zlib';
import type Database from 'better-sqlite3';
import Fastify, { type FastifyInstance, type RouteShorthandOptions } from 'fastify';
import type { Http2Server } from 'node:http2';
import { createRouteGuard, idempotencyOf, idempotencyPlugin, toFastifyPath, type RouteGuardOptions } from '../../../src/runtime/adapters/fastify.js';
import { MemoryStore } from '../../../src/runtime/stores/memory.js';
import { post } from '../../e2e/harness.js';
import { bodyKeyContract, contract, oddPathContract, queryKeyContract, slowCompletionStore, withSqliteStore } from './fixtures.js';
import { computeRecordId } from '../../../src/runtime/fingerprint.js';

function options(store: RouteGuardOptions['store']): RouteGuardOptions {
  return { store, principal: (request) => (typeof request.headers['x-user'] === 'string' ? request.headers['x-user'] : undefined) };
}

async function listen(app: FastifyInstance): Promise<number> {
  const address = await app.listen({ port: 0, host: '127.0.0.1' });
  return Number(new URL(address).port);
}

describe('runtime/adapters/fastify', () => {
  let app: FastifyInstance;
  let calls = 0;
  beforeEach(() => {
    calls = 0;
    app = Fastify();
  });
  afterEach(async () => {
    await app.close();
  });

  /** POST `path` (default /things/:tenant) behind `guard`'s hooks: each run creates `thing-<n>` with 201. */
  function thingsRoute(guard: ReturnType<typeof createRouteGuard>, path = '/things/:tenant'): void {
    app.post(path, { ...guard.hooks }, async (_request, reply) => {
      calls += 1;
      reply.code(201);
      return { id: `thing-${calls}` };
    });
  }

  it('status: the status route answers a GET with the key from the record of its caller and path scope; without the key, its handler', async () => {
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    thingsRoute(guard);
    app.get('/things/:tenant/outcome', { preHandler: guard.status }, async () => ({ plain: true }));
    app.post('/other/:tenant', { preHandler: guard.status }, async () => ({ posted: true }));
    const port = await listen(app);
    const first = await post(port, '/things/t1', { user: 'u', key: 'k-1', body: { a: 1 } });
    assert.equal(first.status, 201);
    const get = (url: string, headers: Record<string, string>) => fetch(`http://127.0.0.1:${port}${url}`, { headers });
    const found = await get('/things/t1/outcome', { 'x-user': 'u', 'idempotency-key': 'k-1' });
    assert.equal(found.status, 201);
    assert.equal(found.headers.get('idempotent-replayed'), 'true');
    assert.equal(await found.text(), first.text);
    assert.equal((await get('/things/t1/outcome', { 'x-user': 'u2', 'idempotency-key': 'k-1' })).status, 404, 'another caller');
    assert.equal((await get('/things/t2/outcome', { 'x-user': 'u', 'idempotency-key': 'k-1' })).status, 404, 'another tenant');
    assert.deepEqual(await (await get('/things/t1/outcome', { 'x-user': 'u' })).json(), { plain: true });
    // A read only: added to a POST route, it lets the POST through (the route's own hooks guard it).
    assert.deepEqual(JSON.parse((await post(port, '/other/t1', { user: 'u', key: 'k-1', body: { a: 1 } })).text), { posted: true });
    assert.equal(calls, 1);
  });

  it('route hooks: a key in a body field or in the query, as the contract says', async () => {
    thingsRoute(createRouteGuard(bodyKeyContract, options(new MemoryStore())));
    thingsRoute(createRouteGuard(queryKeyContract, options(new MemoryStore())), '/queried/:tenant');
    const port = await listen(app);
    const first = await post(port, '/things/t1', { user: 'u', body: { a: 1, client_token: 'tok-1' } });
    assert.equal(first.status, 201);
    const again = await post(port, '/things/t1', { user: 'u', body: { a: 1, client_token: 'tok-1' } });
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.text, first.text);
    assert.equal((await post(port, '/things/t1', { user: 'u', key: 'tok-1', body: { a: 1 } })).status, 400, 'a key header is not the body key');
    assert.equal((await post(port, '/queried/t1?requestId=q-1', { user: 'u', body: { a: 1 } })).status, 201);
    assert.equal((await post(port, '/queried/t1?requestId=q-1', { user: 'u', body: { a: 1 } })).headers['idempotent-replayed'], 'true');
    assert.equal((await post(port, '/queried/t1', { user: 'u', key: 'q-1', body: { a: 1 } })).status, 400);
    assert.equal(calls, 2);
  });

  it('over HTTP/2 (http2: true, which has no headersDistinct): a key with a comma, and a repeated key header, are read as on HTTP/1', async () => {
    const h2 = Fastify({ http2: true });
    try {
      // The hooks are typed for Fastify's default (HTTP/1) server: an HTTP/2 app casts them (README).
      const hooks = createRouteGuard(contract, options(new MemoryStore())).hooks as unknown as RouteShorthandOptions<Http2Server>;
      h2.post('/things/:tenant', hooks, async (_request, reply) => {
        calls += 1;
        reply.code(201);
        return { id: `thing-${calls}` };
      });
      const address = await h2.listen({ port: 0, host: '127.0.0.1' });
      const session = http2.connect(address);
      const send = (keys: string[]) =>
        new Promise<{ status: number; replayed: unknown; text: string }>((resolve, reject) => {
          const headers: http2.OutgoingHttpHeaders = { ':method': 'POST', ':path': '/things/t1', 'content-type': 'application/json', 'x-user': 'u' };
          // Two entries of one name: an array sends each as its own header field.
          headers['idempotency-key'] = keys.length === 1 ? keys[0]! : keys;
          const stream = session.request(headers);
          let status = 0;
          let replayed: unknown;
          const chunks: Buffer[] = [];
          stream.on('response', (head) => {
            status = Number(head[':status']);
            replayed = head['idempotent-replayed'];
          });
          stream.on('data', (chunk: Buffer) => chunks.push(chunk));
          stream.on('end', () => resolve({ status, replayed, text: Buffer.concat(chunks).toString('utf8') }));
          stream.on('error', reject);
          stream.end('{"n":1}');
        });
      try {
        const first = await send(['"k,x"']);
        assert.equal(first.status, 201, first.text);
        const again = await send(['"k,x"']);
        assert.equal(again.replayed, 'true');
        assert.equal(again.text, first.text);
        const two = await send(['a', 'b']);
        assert.equal(two.status, 400, two.text);
        assert.match(two.text, /idempotency-key-invalid/);
        assert.equal(calls, 1);
      } finally {
        session.close();
      }
    } finally {
      await h2.close();
    }
  });

  it('a fingerprinted query value of bytes that are not UTF-8 is its own payload: ?mode=%E9 then %E8 (or U+FFFD) is 422, not the replay', async () => {
    thingsRoute(createRouteGuard(contract, options(new MemoryStore())));
    const port = await listen(app);
    assert.equal((await post(port, '/things/t1?mode=%E9', { user: 'u', key: 'latin1', body: {} })).status, 201);
    assert.equal((await post(port, '/things/t1?mode=%E9', { user: 'u', key: 'latin1', body: {} })).headers['idempotent-replayed'], 'true');
    assert.equal((await post(port, '/things/t1?mode=%E8', { user: 'u', key: 'latin1', body: {} })).status, 422);
    assert.equal((await post(port, '/things/t1?mode=%EF%BF%BD', { user: 'u', key: 'latin1', body: {} })).status, 422);
    assert.equal(calls, 1);
  });

  it('route hooks: replays the serialized payload and headers; the handler runs once', async () => {
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    app.post('/things/:tenant', { ...guard.hooks }, async (request, reply) => {
      calls += 1;
      reply.code(201).header('location', '/things/1').header('set-cookie', 'session=secret');
      return { id: `thing-${calls}`, key: idempotencyOf(request).idempotencyKey, params: request.params };
    });
    const port = await listen(app);
    const first = await post(port, '/things/t1', { key: 'k1', user: 'u', body: { a: 1 } });
    assert.equal(first.status, 201);
    assert.deepEqual(first.json, { id: 'thing-1', key: 'k1', params: { tenant: 't1' } });
    assert.equal(first.headers['idempotent-replayed'], 'false');
    const replay = await post(port, '/things/t1', { key: 'k1', user: 'u', body: { a: 1 } });
    assert.equal(replay.text, first.text);
    assert.equal(replay.headers['location'], '/things/1');
    assert.equal(replay.headers['idempotent-replayed'], 'true');
    assert.equal(replay.headers['set-cookie'], undefined);
    assert.equal((await post(port, '/things/t1', { key: 'k1', user: 'u', body: { a: 2 } })).status, 422);
    assert.equal((await post(port, '/things/t1', { user: 'u', body: { a: 2 } })).status, 400);
    assert.equal(calls, 1);
  });

  it('records no line for a header set to an empty list, as Node sends none: the replay has none either', async () => {
    const guard = createRouteGuard(contract, { ...options(new MemoryStore()), replayHeaders: ['content-type', 'x-empty'] });
    app.post('/things/:tenant', { ...guard.hooks }, async (_request, reply) => {
      reply.code(201).header('x-empty', []);
      return { id: 'e1' };
    });
    const port = await listen(app);
    const first = await post(port, '/things/t1', { key: 'k-empty', user: 'u', body: { a: 1 } });
    const replay = await post(port, '/things/t1', { key: 'k-empty', user: 'u', body: { a: 1 } });
    assert.deepEqual([first.status, replay.status, replay.headers['idempotent-replayed']], [201, 201, 'true']);
    assert.equal(first.headers['x-empty'], undefined);
    assert.equal(replay.headers['x-empty'], undefined);
  });

  it('records the identity body under an app-level compression hook (which runs before the route hook): the replay is not gzip labelled as JSON', async () => {
    // What @fastify/compress does, for any payload it sees.
    app.addHook('onSend', async (request, reply, payload) => {
      const accept = String(request.headers['accept-encoding'] ?? '');
      const bytes = typeof payload === 'string' ? Buffer.from(payload) : payload instanceof Buffer ? payload : undefined;
      if (bytes === undefined) return payload;
      if (accept.includes('gzip')) {
        reply.header('content-encoding', 'gzip').removeHeader('content-length');
        return gzipSync(bytes);
      }
      if (accept.includes('br')) {
        reply.header('content-encoding', 'br').removeHeader('content-length');
        return brotliCompressSync(bytes);
      }
      return payload;
    });
    thingsRoute(createRouteGuard(contract, options(new MemoryStore())));
    const send = (key: string, encoding: string) =>
      app.inject({ method: 'POST', url: '/things/t1', headers: { 'idempotency-key': key, 'x-user': 'u', 'accept-encoding': encoding }, payload: { a: 1 } });
    const first = await send('k', 'gzip');
    assert.equal(first.headers['content-encoding'], 'gzip');
    assert.equal(gunzipSync(first.rawPayload).toString(), '{"id":"thing-1"}');
    const plain = await send('k', 'identity');
    assert.equal(plain.headers['idempotent-replayed'], 'true');
    assert.equal(plain.headers['content-encoding'], undefined);
    assert.equal(plain.payload, '{"id":"thing-1"}');
    // A replay is sent as recorded, past the onSend hooks: the identity body, never the gzip bytes unlabelled.
    const again = await send('k', 'gzip');
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.headers['content-encoding'], undefined);
    assert.equal(again.payload, '{"id":"thing-1"}');
    await send('b', 'br');
    assert.equal((await send('b', 'identity')).payload, '{"id":"thing-2"}');
    assert.equal(calls, 2);
  });

  it('records a streamed payload byte for byte, and a thrown handler keeps the key', async () => {
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    app.post('/things/:tenant', { ...guard.hooks }, async (request, reply) => {
      calls += 1;
      if ((request.body as { fail?: boolean }).fail) throw new Error('boom after the effect');
      reply.code(201).type('text/plain');
      return Readable.from([Buffer.from('chunk-1 '), Buffer.from('chunk-2')]);
    });
    const port = await listen(app);
    const first = await post(port, '/things/t1', { key: 'stream', user: 'u', body: {} });
    assert.equal(first.text, 'chunk-1 chunk-2');
    const replay = await post(port, '/things/t1', { key: 'stream', user: 'u', body: {} });
    assert.equal(replay.text, 'chunk-1 chunk-2');
    assert.equal(replay.headers['idempotent-replayed'], 'true');
    const failed = await post(port, '/things/t1', { key: 'fail', user: 'u', body: { fail: true } });
    assert.equal(failed.status, 500);
    const retry = await post(port, '/things/t1', { key: 'fail', user: 'u', body: { fail: true } });
    assert.equal(retry.status, 409);
    assert.equal(calls, 2);
  });

  it("replays past other plugins' payload-changing onSend hooks (an envelope is not applied twice), with the headers earlier hooks set", async () => {
    app.addHook('onRequest', async (_request, reply) => {
      reply.header('access-control-allow-origin', '*');
    });
    // A plugin that wraps every JSON answer, as many APIs do (whatever form the payload has).
    app.addHook('onSend', async (_request, reply, payload) => {
      if (!String(reply.getHeader('content-type')).startsWith('application/json')) return payload;
      const text = typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString() : undefined;
      return text === undefined ? payload : JSON.stringify({ data: JSON.parse(text), meta: { v: 1 } });
    });
    // Headers set in onSend (@fastify/cors with hook: 'onSend', a request-id echo) go with replays too.
    app.addHook('onSend', async (request, reply, payload) => {
      reply.header('x-request-id', request.id);
      return payload;
    });
    thingsRoute(createRouteGuard(contract, options(new MemoryStore())));
    const port = await listen(app);
    const first = await post(port, '/things/t1', { key: 'env', user: 'u', body: {} });
    assert.deepEqual(first.json, { data: { id: 'thing-1' }, meta: { v: 1 } });
    const replay = await post(port, '/things/t1', { key: 'env', user: 'u', body: {} });
    assert.equal(replay.headers['idempotent-replayed'], 'true');
    assert.equal(replay.status, 201);
    assert.equal(replay.text, first.text);
    assert.equal(replay.headers['content-type'], first.headers['content-type']);
    assert.equal(replay.headers['access-control-allow-origin'], '*');
    assert.ok(replay.headers['x-request-id'], 'an onSend hook header');
    assert.equal(calls, 1);
  });

  it('a hijacked reply or a stream payload that fails keeps the record and ends its lease: the retry is reconciled, not told "in progress" for the TTL', async () => {
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    app.post('/things/:tenant', { ...guard.hooks }, async (request, reply) => {
      calls += 1;
      if ((request.body as { hijack?: boolean }).hijack) {
        reply.hijack();
        reply.raw.writeHead(201, { 'content-type': 'application/json' });
        reply.raw.end('{"id":"raw"}');
        return reply;
      }
      reply.code(201).type('text/plain');
      return new Readable({
        read() {
          this.push('partial ');
          this.destroy(new Error('upstream went away'));
        },
      });
    });
    const port = await listen(app);
    const hijacked = await post(port, '/things/t1', { key: 'hj', user: 'u', body: { hijack: true } });
    assert.equal(hijacked.text, '{"id":"raw"}');
    const afterHijack = await post(port, '/things/t1', { key: 'hj', user: 'u', body: { hijack: true } });
    assert.equal(afterHijack.status, 409);
    assert.equal(afterHijack.json['type'], 'https://idemkit.dev/problems/idempotency-request-abandoned');
    const broken = await post(port, '/things/t1', { key: 'bs', user: 'u', body: {} }).catch((error: Error) => error);
    const afterBroken = await post(port, '/things/t1', { key: 'bs', user: 'u', body: {} });
    assert.equal(afterBroken.json['type'], 'https://idemkit.dev/problems/idempotency-request-abandoned', String(broken));
    assert.equal(calls, 2);
  });

  it('one-transaction mode: `return reply.code(201).send(body)` is held until the commit; the route serializer and streams are used as Fastify would', async () => {
    await withSqliteStore(async (store) => {
      const guard = createRouteGuard(contract, options(store));
      app.post(
        '/things/:tenant',
        // A response schema keyed by content type, as OpenAPI-generated routes write it.
        { schema: { response: { 201: { content: { 'application/json': { schema: { type: 'object', properties: { id: { type: 'string' } } } } } } } } },
        guard.transactional(async (request, reply) => {
          calls += 1;
          const kind = (request.body as { kind: string }).kind;
          if (kind === 'stream') return reply.code(201).type('text/plain').send(Readable.from(['a', 'b']));
          if (kind === 'returned') {
            reply.code(201);
            return { id: `u-${calls}`, passwordHash: 'secret' };
          }
          return reply.code(201).send({ id: `s-${calls}`, passwordHash: 'secret' });
        }),
      );
      const port = await listen(app);
      for (const [kind, expected] of [
        ['sent', '{"id":"s-1"}'],
        ['returned', '{"id":"u-2"}'],
        ['stream', 'ab'],
      ] as const) {
        const first = await post(port, '/things/t1', { key: `tx-${kind}`, user: 'u', body: { kind } });
        assert.deepEqual([first.status, first.text, first.headers['idempotent-replayed']], [201, expected, 'false'], kind);
        const replay = await post(port, '/things/t1', { key: `tx-${kind}`, user: 'u', body: { kind } });
        assert.deepEqual([replay.status, replay.text, replay.headers['idempotent-replayed']], [201, expected, 'true'], kind);
      }
      assert.equal(calls, 3);
    }, () => app.close());
  });

  it('one-transaction mode: a handler that never answers is rolled back at the TTL (the default bound), and other keys go on', async () => {
    await withSqliteStore(async (store, db) => {
      db.exec('CREATE TABLE things (id TEXT PRIMARY KEY)');
      const guard = createRouteGuard({ ...contract, leaseMs: 200, ttlMs: 400 }, options(store));
      app.setErrorHandler((error, _request, reply) => reply.code(500).send({ error: (error as Error).message }));
      app.post(
        '/things/:tenant',
        guard.transactional<Database.Database>(async (request, reply, { tx }) => {
          calls += 1;
          tx!.prepare('INSERT INTO things (id) VALUES (?)').run(`thing-${calls}`);
          if ((request.body as { hang?: boolean }).hang === true) return new Promise(() => undefined);
          return reply.code(201).send({ id: `thing-${calls}` });
        }),
      );
      const port = await listen(app);
      const started = Date.now();
      const hung = await post(port, '/things/t1', { key: 'hang', user: 'u', body: { hang: true } });
      // The guard's answer, not the app's error handler's: the transaction is rolled back, the rest unknown.
      assert.equal(hung.status, 503, hung.text);
      assert.equal(hung.json['type'], 'https://idemkit.dev/problems/idempotency-outcome-unknown');
      assert.match(String(hung.json['detail']), /given up: its transaction was rolled back/);
      assert.equal(hung.headers['retry-after'], '1');
      assert.ok(Date.now() - started < 3000, `answered after ${Date.now() - started} ms, not the TTL`);
      const other = await post(port, '/things/t1', { key: 'other', user: 'u', body: {} });
      assert.equal(other.status, 201, other.text);
      const again = await post(port, '/things/t1', { key: 'hang', user: 'u', body: {} });
      assert.equal(again.status, 201, 'rolled back: the key is free');
      assert.deepEqual(db.prepare('SELECT id FROM things ORDER BY id').all(), [{ id: 'thing-2' }, { id: 'thing-3' }]);
    }, () => app.close());
  });

  it('a hijacked reply whose client goes away while the handler still works keeps its lease: the retry is told "in progress", never reconciled beside it', async () => {
    const guard = createRouteGuard({ ...contract, leaseMs: 60 }, { ...options(new MemoryStore()), reconcile: async () => ({ outcome: 'not-happened' }) });
    let release!: () => void;
    const working = new Promise<void>((resolve) => (release = resolve));
    app.post('/things/:tenant', { ...guard.hooks }, async (_request, reply) => {
      calls += 1;
      reply.hijack();
      reply.raw.writeHead(202, { 'content-type': 'text/plain' });
      reply.raw.write('working…\n');
      await working;
      reply.raw.end('done\n');
      return reply;
    });
    const port = await listen(app);
    await new Promise<void>((resolve, reject) => {
      const request = http.request({ host: '127.0.0.1', port, path: '/things/t1', method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': 'stream', 'x-user': 'u' } }, (response) => {
        response.once('data', () => {
          request.destroy();
          resolve();
        });
      });
      request.on('error', () => undefined);
      request.on('close', () => resolve());
      request.end('{}');
    });
    await new Promise((resolve) => setTimeout(resolve, 150));
    const retry = await post(port, '/things/t1', { key: 'stream', user: 'u', body: {} });
    assert.equal(retry.json['type'], 'https://idemkit.dev/problems/idempotency-request-in-progress');
    release();
    assert.equal(calls, 1);
  });

  it('resolves path parameters Fastify cannot name ({item.id}) from the request path, percent-decoded, under a prefix', async () => {
    const guard = createRouteGuard(oddPathContract, options(new MemoryStore()));
    await app.register(
      async (scope) => {
        scope.post('/v1/items/:itemId/actions/:actionName', { ...guard.hooks }, async (request, reply) => {
          calls += 1;
          reply.code(201);
          return { call: calls, item: (request.params as Record<string, string>)['itemId'], record: idempotencyOf(request).reservation.recordId };
        });
      },
      { prefix: '/api' },
    );
    const port = await listen(app);
    const path = '/api/v1/items/a%20b%2F%C3%BC/actions/run';
    const first = await post(port, path, { key: 'k1', user: 'u', body: { n: 1 } });
    assert.equal(first.status, 201, first.text);
    assert.deepEqual(first.json, {
      call: 1,
      item: 'a b/ü',
      record: computeRecordId([['principal', 'u'], ['path', 'item.id', 'a b/ü']], 'items.actions-run now', 'k1'),
    });
    const replay = await post(port, path, { key: 'k1', user: 'u', body: { n: 1 } });
    assert.equal(replay.headers['idempotent-replayed'], 'true');
    assert.equal(replay.text, first.text);
    assert.equal((await post(port, '/api/v1/items/other/actions/run?x=1', { key: 'k1', user: 'u', body: { n: 1 } })).status, 201);
    assert.equal((await post(port, '/api/v1/items/a%20b%2F%C3%BC/actions/stop', { key: 'k1', user: 'u', body: { n: 1 } })).status, 422);
    assert.equal(calls, 2);
  });

  it('the plugin guards exactly the route whose method and path match the contract', async () => {
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    assert.equal(toFastifyPath('/things/{tenant}/x/{id}'), '/things/:tenant/x/:id');
    await app.register(idempotencyPlugin([guard]));
    app.post('/things/:tenant', async (_request, reply) => {
      calls += 1;
      reply.code(201);
      return { id: calls };
    });
    app.put('/things/:tenant', async () => ({ unguarded: true }));
    const port = await listen(app);
    assert.equal((await post(port, '/things/t1', { user: 'u', body: {} })).status, 400, 'POST is guarded');
    assert.equal((await post(port, '/things/t1', { key: 'p', user: 'u', body: {} })).headers['idempotent-replayed'], 'false');
    assert.equal((await post(port, '/things/t1', { key: 'p', user: 'u', body: {} })).headers['idempotent-replayed'], 'true');
    assert.equal(calls, 1);
  });

  it('the plugin leaves a transactional route to its own guard (no double reservation)', async () => {
    await withSqliteStore(async (store) => {
      const guard = createRouteGuard(contract, options(store));
      await app.register(idempotencyPlugin([guard]));
      app.post(
        '/things/:tenant',
        guard.transactional(async (_request, reply) => {
          calls += 1;
          reply.code(201);
          return { n: calls };
        }),
      );
      const port = await listen(app);
      const first = await post(port, '/things/t1', { key: 'tp', user: 'u', body: {} });
      assert.equal(first.status, 201, first.text);
      assert.equal(first.headers['idempotent-replayed'], 'false');
      assert.equal((await post(port, '/things/t1', { key: 'tp', user: 'u', body: {} })).headers['idempotent-replayed'], 'true');
      assert.equal(calls, 1);
    }, () => app.close());
  });

  it("one-transaction mode: a failed commit is answered with the guard's problem alone, none of the handler's headers", async () => {
    await withSqliteStore(async (store, db) => {
      db.exec("CREATE TRIGGER refuse_completion BEFORE UPDATE ON idempotency_records WHEN NEW.state = 'completed' BEGIN SELECT RAISE(ABORT, 'disk full'); END");
      app.addHook('onRequest', async (_request, reply) => {
        reply.header('access-control-allow-origin', '*');
      });
      const guard = createRouteGuard(contract, options(store));
      app.post(
        '/things/:tenant',
        guard.transactional(async (_request, reply) => {
          calls += 1;
          reply.code(201).header('location', '/things/rolled-back').header('etag', '"v1"');
          return { id: 'x'.repeat(2000) };
        }),
      );
      const port = await listen(app);
      const answer = await post(port, '/things/t1', { key: 'tx-fail', user: 'u', body: {} });
      assert.equal(answer.status, 503);
      assert.equal(answer.json['type'], 'https://idemkit.dev/problems/idempotency-outcome-unknown');
      assert.equal(Number(answer.headers['content-length']), Buffer.byteLength(answer.text));
      for (const name of ['location', 'etag']) assert.equal(answer.headers[name], undefined, name);
      assert.equal(answer.headers['access-control-allow-origin'], '*', 'what ran before the handler stays');
      assert.equal(calls, 1);
    }, () => app.close());
  });

  it('refuses a transactional handler where it is declared for an external effect without a provider key', () => {
    const external = { ...contract, effect: { owner: 'things', external: true, providerKey: 'none' as const } };
    const guard = createRouteGuard(external, options(new MemoryStore()));
    assert.throws(() => guard.transactional(async () => ({})), /one-transaction mode cannot guard createThing: .*providerKey: none/);
  });

  it('refuses a transactional handler where it is declared on a store without transactions', () => {
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    assert.throws(() => guard.transactional(async () => ({})), /^TypeError: one-transaction mode cannot guard createThing: it needs a store with transactions \(SqliteStore or PostgresStore\), and MemoryStore has none/);
  });

  it('one-transaction mode on SQLite: the row and the record commit together, or roll back together', async () => {
    await withSqliteStore(async (store, db) => {
      db.exec('CREATE TABLE things (id TEXT PRIMARY KEY)');
      const guard = createRouteGuard(contract, options(store));
      let failWith: number | undefined = 503;
      app.post(
        '/things/:tenant',
        guard.transactional<Database.Database>(async (_request, reply, { tx }) => {
          calls += 1;
          tx!.prepare('INSERT INTO things (id) VALUES (?)').run(`thing-${calls}`);
          reply.code(failWith ?? 201);
          return { id: `thing-${calls}` };
        }),
      );
      const port = await listen(app);
      assert.equal((await post(port, '/things/t1', { key: 'tx', user: 'u', body: {} })).status, 503);
      assert.equal((db.prepare('SELECT count(*) AS n FROM things').get() as { n: number }).n, 0);
      failWith = undefined;
      const answers = await Promise.all([1, 2].map(() => post(port, '/things/t1', { key: 'tx', user: 'u', body: {} })));
      assert.deepEqual(answers.map((a) => a.status), [201, 201]);
      assert.equal(new Set(answers.map((a) => a.json['id'])).size, 1);
      assert.deepEqual(answers.map((a) => a.headers['idempotent-replayed']).sort(), ['false', 'true']);
      assert.equal((db.prepare('SELECT count(*) AS n FROM things').get() as { n: number }).n, 1);
    }, () => app.close());
  });

  it("an async handler that calls reply.send() without returning reply: the first client gets the answer, not Fastify's second, empty send", async () => {
    // A store round trip: the guard's onSend is still recording when the handler's promise settles.
    const store = slowCompletionStore(30);
    const guard = createRouteGuard(contract, options(store));
    app.post('/things/:tenant', { ...guard.hooks }, async (_request, reply) => {
      calls += 1;
      reply.code(201).send({ id: `thing-${calls}` });
    });
    const port = await listen(app);
    const first = await post(port, '/things/t1', { key: 'send-no-return', user: 'u', body: {} });
    assert.deepEqual([first.status, first.text, first.headers['idempotent-replayed']], [201, '{"id":"thing-1"}', 'false']);
    const retry = await post(port, '/things/t1', { key: 'send-no-return', user: 'u', body: {} });
    assert.deepEqual([retry.status, retry.text, retry.headers['idempotent-replayed']], [201, '{"id":"thing-1"}', 'true']);
    assert.equal(calls, 1);
  });

  it('a replay of a body recorded in a coding the guard cannot undo carries that Content-Encoding again', async () => {
    const encoded = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x01, 0x02, 0x03]); // a zstd frame's magic, then bytes
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    app.post('/things/:tenant', { ...guard.hooks }, async (_request, reply) => {
      calls += 1;
      return reply.code(201).header('content-encoding', 'zstd').type('application/json').send(encoded);
    });
    const port = await listen(app);
    const raw = (key: string) =>
      new Promise<{ headers: http.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
        const request = http.request({ host: '127.0.0.1', port, path: '/things/t1', method: 'POST', headers: { 'content-type': 'application/json', 'x-user': 'u', 'idempotency-key': key } }, (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('end', () => resolve({ headers: response.headers, body: Buffer.concat(chunks) }));
        });
        request.on('error', reject);
        request.end('{}');
      });
    const first = await raw('zstd');
    const retry = await raw('zstd');
    assert.equal(retry.headers['idempotent-replayed'], 'true');
    assert.equal(retry.headers['content-encoding'], 'zstd');
    assert.deepEqual([first.body, retry.body], [encoded, encoded]);
    assert.equal(calls, 1);
  });
});
