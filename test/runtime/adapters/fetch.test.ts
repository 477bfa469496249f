import assert from 'node:assert/strict';
import { brotliCompressSync, deflateSync, gunzipSync, gzipSync } from 'node:zlib';
import type Database from 'better-sqlite3';
import { createRouteGuard, idempotencyOf, pathMatcher, type RouteGuardOptions } from '../../../src/runtime/adapters/fetch.js';
import { MemoryStore } from '../../../src/runtime/stores/memory.js';
import { bodyKeyContract, contract, endless, queryKeyContract, withSqliteStore } from './fixtures.js';
import { demoContract } from '../fixtures.js';

function options(store: RouteGuardOptions['store'], extra: Partial<RouteGuardOptions> = {}): RouteGuardOptions {
  return { store, principal: (request) => request.headers.get('x-user') ?? undefined, ...extra };
}

function request(url: string, key: string | undefined, body: unknown, headers: Record<string, string> = {}): Request {
  return new Request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-user': 'u', ...(key !== undefined ? { 'idempotency-key': key } : {}), ...headers },
    body: JSON.stringify(body),
  });
}

describe('runtime/adapters/fetch', () => {
  it('reads a key from a JSON body field, a form field or the query, as the contract says; a key header alone is no key', async () => {
    let calls = 0;
    const run = async () => Response.json({ id: (calls += 1) }, { status: 201 });
    const inBody = createRouteGuard(bodyKeyContract, options(new MemoryStore())).wrap(run);
    const json = (token: string | undefined, n: number) => request('http://x/things/t1', undefined, { n, ...(token === undefined ? {} : { client_token: token }) });
    assert.equal((await inBody(json('tok-1', 1))).status, 201);
    assert.equal((await inBody(json('tok-1', 1))).headers.get('idempotent-replayed'), 'true');
    assert.equal((await inBody(json('tok-1', 2))).status, 422);
    const form = (token: string) =>
      new Request('http://x/things/t1', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-user': 'u' }, body: `n=1&client_token=${token}` });
    assert.equal((await inBody(form('tok-form'))).status, 201);
    assert.equal((await inBody(form('tok-form'))).headers.get('idempotent-replayed'), 'true');
    const headerOnly = await inBody(request('http://x/things/t1', 'tok-1', { n: 1 }));
    assert.equal(headerOnly.status, 400);
    assert.match(((await headerOnly.json()) as { detail: string }).detail, /Send the body field \/client_token/);
    const inQuery = createRouteGuard(queryKeyContract, options(new MemoryStore())).wrap(run);
    assert.equal((await inQuery(request('http://x/things/t1?requestId=q-1', undefined, { n: 1 }))).status, 201);
    assert.equal((await inQuery(request('http://x/things/t1?requestId=q-1', undefined, { n: 1 }))).headers.get('idempotent-replayed'), 'true');
    assert.equal((await inQuery(request('http://x/things/t1?requestId=q-1&requestId=q-2', undefined, { n: 1 }))).status, 400);
    // Not UTF-8: both decode to U+FFFD, so both are refused rather than made one key.
    assert.equal((await inQuery(request('http://x/things/t1?requestId=%FF', undefined, { n: 1 }))).status, 400);
    assert.equal((await inQuery(request('http://x/things/t1?requestId=%FE', undefined, { n: 1 }))).status, 400);
    assert.equal(calls, 3);
  });

  it('status: wraps the status route; a GET with the key is answered from the record of its caller and path scope, one without it by the handler', async () => {
    let calls = 0;
    const route = createRouteGuard(contract, options(new MemoryStore()));
    const guarded = route.wrap(async () => Response.json({ id: (calls += 1) }, { status: 201 }));
    const outcome = route.status(async () => Response.json({ plain: true }), { params: (r) => ({ tenant: new URL(r.url).pathname.split('/')[2]! }) });
    const first = await guarded(request('http://x/things/t1', 'k-1', { n: 1 }));
    const get = (url: string, headers: Record<string, string>) => outcome(new Request(url, { headers }));
    const found = await get('http://x/things/t1/outcome', { 'x-user': 'u', 'idempotency-key': 'k-1' });
    assert.equal(found.status, 201);
    assert.equal(found.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(await found.json(), await first.json());
    assert.equal((await get('http://x/things/t1/outcome', { 'x-user': 'u2', 'idempotency-key': 'k-1' })).status, 404);
    assert.equal((await get('http://x/things/t2/outcome', { 'x-user': 'u', 'idempotency-key': 'k-1' })).status, 404);
    assert.deepEqual(await (await get('http://x/things/t1/outcome', { 'x-user': 'u' })).json(), { plain: true });
    // A read only: a POST with the key reaching a handler wrapped so is the handler's, never a replay by key.
    const posted = await outcome(request('http://x/things/t1/outcome', 'k-1', { n: 1 }));
    assert.deepEqual(await posted.json(), { plain: true });
    assert.equal(calls, 1);
  });

  it('takes headers and query names that are Object.prototype members, and many repeats of one name', async () => {
    let calls = 0;
    const guarded = createRouteGuard(contract, options(new MemoryStore())).wrap(async () => Response.json({ id: (calls += 1) }, { status: 201 }));
    const odd = { constructor: 'x', tostring: 'y', __proto__: 'z', hasownproperty: 'w' };
    const first = await guarded(request('http://x/things/t1?constructor=1&__proto__=2', 'k-proto', { n: 1 }, odd));
    assert.equal(first.status, 201, await first.clone().text());
    const again = await guarded(request('http://x/things/t1?constructor=1&__proto__=2', 'k-proto', { n: 1 }, odd));
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    // 200,000 repeats of one query name (a runtime that takes long URLs) are read in one pass, not copied at each.
    const many = `http://x/things/t1?${'a=1&'.repeat(200_000)}`;
    assert.equal((await guarded(request(many, 'k-many', { n: 1 }))).status, 201);
    assert.equal(calls, 2);
  });

  it('a body nested 50,000 levels deep reaches the handler and replays; another leaf is 422 (not a 500 before the handler)', async () => {
    let calls = 0;
    const guarded = createRouteGuard(contract, options(new MemoryStore())).wrap(async (req) => {
      await req.text();
      return Response.json({ id: (calls += 1) }, { status: 201 });
    });
    const deep = (leaf: string) =>
      new Request('http://x/things/t1', { method: 'POST', headers: { 'content-type': 'application/json', 'x-user': 'u', 'idempotency-key': 'k-deep' }, body: `{"n":${'['.repeat(50_000)}${leaf}${']'.repeat(50_000)}}` });
    const first = await guarded(deep('1'));
    assert.equal(first.status, 201, await first.clone().text());
    assert.equal((await guarded(deep('1'))).headers.get('idempotent-replayed'), 'true');
    assert.equal((await guarded(deep('2'))).status, 422);
    assert.equal(calls, 1);
  });

  it('a request refused whatever its body (no key, an invalid key, no principal) is answered before its body is read: a body that never ends gets its 400', async () => {
    let calls = 0;
    const guarded = createRouteGuard(contract, options(new MemoryStore())).wrap(async () => Response.json({ id: (calls += 1) }, { status: 201 }));
    const endless = (headers: Record<string, string>) =>
      new Request('http://x/things/t1', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-encoding': 'gzip', ...headers },
        body: new ReadableStream({ pull: () => new Promise<void>(() => undefined) }),
        duplex: 'half',
      } as RequestInit);
    for (const [headers, problem] of [
      [{ 'x-user': 'u' }, 'idempotency-key-missing'],
      [{ 'x-user': 'u', 'idempotency-key': 'a, b' }, 'idempotency-key-invalid'],
      [{ 'idempotency-key': 'k' }, 'idempotency-scope-unresolved'],
    ] as const) {
      const answer = await guarded(endless(headers));
      assert.equal(answer.status, 400, problem);
      assert.equal(answer.headers.get('idempotency-problem'), problem);
    }
    assert.equal(calls, 0);
  });

  it('JSON nested deeper than the guard parses (a 16 KiB gzip of 16 MiB of [[[…]]]) is fingerprinted by its bytes: the same bytes replay, others are 422', async () => {
    let calls = 0;
    const guarded = createRouteGuard(contract, options(new MemoryStore())).wrap(async () => Response.json({ id: (calls += 1) }, { status: 201 }));
    const levels = 8 * 1024 * 1024;
    const bomb = (leaf: string) => gzipSync(Buffer.from(`${'['.repeat(levels)}${leaf}${']'.repeat(levels)}`));
    const send = (bytes: Buffer) =>
      guarded(new Request('http://x/things/t1', { method: 'POST', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip', 'x-user': 'u', 'idempotency-key': 'bomb' }, body: new Uint8Array(bytes) }));
    const first = bomb('1');
    assert.ok(first.length < 32 * 1024, `${first.length} bytes`);
    assert.equal((await send(first)).status, 201);
    assert.equal((await send(first)).headers.get('idempotent-replayed'), 'true');
    assert.equal((await send(bomb('2'))).status, 422);
    assert.equal(calls, 1);
  });

  it('wrap guards the contract’s method in any letter case; a CORS preflight and a GET with a used key reach the handler unguarded; another unsafe method is refused', async () => {
    let calls = 0;
    const run = async (req: Request) => {
      calls += 1;
      return req.method === 'OPTIONS' ? new Response(null, { status: 204, headers: { allow: 'GET, POST' } }) : Response.json({ id: calls, method: req.method }, { status: req.method === 'GET' ? 200 : 201 });
    };
    const guarded = createRouteGuard(contract, options(new MemoryStore())).wrap(run);
    assert.equal((await guarded(request('http://x/things/t1', 'used', { n: 1 }))).status, 201);
    const preflight = await guarded(new Request('http://x/things/t1', { method: 'OPTIONS', headers: { 'access-control-request-method': 'POST' } }));
    assert.equal(preflight.status, 204);
    const read = await guarded(new Request('http://x/things/t1', { headers: { 'idempotency-key': 'used', 'x-user': 'u' } }));
    assert.equal(read.status, 200);
    assert.equal(read.headers.get('idempotent-replayed'), null);
    assert.deepEqual(await read.json(), { id: 3, method: 'GET' });
    const patching = createRouteGuard({ ...contract, method: 'PATCH' }, options(new MemoryStore())).wrap(run);
    const lower = () => new Request('http://x/things/t1', { method: 'patch', headers: { 'content-type': 'application/json', 'x-user': 'u', 'idempotency-key': 'p' }, body: '{}' });
    assert.equal((await patching(lower())).status, 201);
    assert.equal((await patching(lower())).headers.get('idempotent-replayed'), 'true', 'a lower-case patch is still the PATCH contract’s');
    // Another unsafe method is another operation routed here by mistake: refused, neither unguarded nor this one's records.
    const deleting = new Request('http://x/things/t1', { method: 'DELETE', headers: { 'x-user': 'u', 'idempotency-key': 'used' } });
    await assert.rejects(guarded(deleting), /a DELETE request reached the guard of POST \/things\/\{tenant\}; route only POST requests to it/);
    assert.equal(calls, 4);
  });

  it('a compressed request body is fingerprinted by its content: gzip with another time, plain, deflate or br is the replay; a body key inside it is found', async () => {
    let calls = 0;
    const run = async () => Response.json({ id: (calls += 1) }, { status: 201 });
    const guarded = createRouteGuard(contract, options(new MemoryStore())).wrap(run);
    const json = Buffer.from(JSON.stringify({ n: 1, note: 'x'.repeat(200) }));
    const gzipAt = (seconds: number) => {
      const bytes = gzipSync(json);
      bytes.writeUInt32LE(seconds, 4); // MTIME: each gzip member carries the time it was written
      return bytes;
    };
    const send = (bytes: Buffer, encoding: string | undefined, key = 'gz') =>
      guarded(new Request('http://x/things/t1', { method: 'POST', headers: { 'content-type': 'application/json', 'x-user': 'u', 'idempotency-key': key, ...(encoding === undefined ? {} : { 'content-encoding': encoding }) }, body: new Uint8Array(bytes) }));
    assert.notDeepEqual(gzipAt(1), gzipAt(2));
    assert.equal((await send(gzipAt(1), 'gzip')).status, 201);
    for (const [bytes, encoding] of [[gzipAt(2), 'gzip'], [json, undefined], [deflateSync(json), 'deflate'], [brotliCompressSync(json), 'br'], [gzipSync(brotliCompressSync(json)), 'br, gzip']] as const) {
      assert.equal((await send(bytes, encoding)).headers.get('idempotent-replayed'), 'true', String(encoding));
    }
    assert.equal((await send(gzipSync(Buffer.from('{"n":2}')), 'gzip')).status, 422);
    assert.equal((await send(json, 'zstd', 'unknown')).status, 201, 'an encoding it cannot undo: fingerprinted by its bytes');
    const inBody = createRouteGuard(bodyKeyContract, options(new MemoryStore())).wrap(run);
    const keyed = (seconds: number) => {
      const bytes = gzipSync(Buffer.from('{"n":1,"client_token":"tok-gz"}'));
      bytes.writeUInt32LE(seconds, 4);
      return new Request('http://x/things/t1', { method: 'POST', headers: { 'content-type': 'application/json', 'x-user': 'u', 'content-encoding': 'gzip' }, body: new Uint8Array(bytes) });
    };
    assert.equal((await inBody(keyed(1))).status, 201);
    assert.equal((await inBody(keyed(2))).headers.get('idempotent-replayed'), 'true');
    assert.equal(calls, 3);
  });

  it('a principal hook may answer a number, a bigint or null, as its type says: 42 and "42" are two owners, null is none', async () => {
    let calls = 0;
    const run = async () => Response.json({ id: (calls += 1) }, { status: 201 });
    const store = new MemoryStore();
    const owners: Record<string, () => string | number | bigint | null> = { number: () => 42, text: () => '42', big: () => 42n, none: () => null };
    for (const [name, principal] of Object.entries(owners)) {
      const guarded = createRouteGuard(contract, { store, principal }).wrap(run);
      const answer = await guarded(request('http://x/things/t1', 'same-key', { n: 1 }));
      assert.equal(answer.status, name === 'none' ? 400 : 201, name);
      if (name === 'big') assert.equal(answer.headers.get('idempotent-replayed'), 'true', 'a bigint is its decimal text: the owner "42"');
    }
    assert.equal(calls, 2);
  });

  it('matches path templates at the end of the URL path, decoding parameters', () => {
    const match = pathMatcher('/things/{tenant}/items/{id}');
    assert.deepEqual(match('/things/t%201/items/42'), { tenant: 't 1', id: '42' });
    assert.deepEqual(match('/api/v2/things/a/items/b/'), { tenant: 'a', id: 'b' });
    assert.equal(match('/things/a/other/b'), undefined);
    assert.deepEqual(pathMatcher('/a.b/{x}')('/a.b/1'), { x: '1' });
    assert.equal(pathMatcher('/a.b/{x}')('/aXb/1'), undefined);
    // What a document writes after the path (AWS's fragments, a query) never reaches the server's path.
    assert.deepEqual(pathMatcher('/lenses/{LensAlias}#ClientRequestToken&LensStatus')('/lenses/l%201'), { LensAlias: 'l 1' });
    assert.deepEqual(pathMatcher('/#Action=DescribeInstances')('/'), {});
    assert.deepEqual(pathMatcher('/current/airquality?city={city}')('/current/airquality'), {});
  });

  it('wraps a handler with the same signature; the handler still reads the body; extra arguments pass through', async () => {
    let calls = 0;
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    const handler = guard.wrap(async (req: Request, context: { params: { tenant: string } }) => {
      calls += 1;
      const body = (await req.json()) as { n: number };
      const headers = new Headers({ location: `/things/${context.params.tenant}/${calls}` });
      headers.append('set-cookie', 'a=1');
      headers.append('set-cookie', 'b=2');
      return Response.json({ id: calls, n: body.n, key: idempotencyOf(req).idempotencyKey }, { status: 201, headers });
    });
    const first = await handler(request('http://x/things/t1', 'k1', { n: 7 }), { params: { tenant: 't1' } });
    assert.equal(first.status, 201);
    assert.equal(first.headers.get('idempotent-replayed'), 'false');
    assert.deepEqual(first.headers.getSetCookie(), ['a=1', 'b=2'], 'the first answer keeps every Set-Cookie');
    const firstText = await first.text();
    assert.deepEqual(JSON.parse(firstText), { id: 1, n: 7, key: 'k1' });
    const replay = await handler(request('http://x/things/t1', 'k1', { n: 7 }), { params: { tenant: 't1' } });
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
    assert.equal(replay.headers.get('location'), '/things/t1/1');
    assert.deepEqual(replay.headers.getSetCookie(), []);
    assert.equal(await replay.text(), firstText);
    const mismatch = await handler(request('http://x/things/t1', 'k1', { n: 8 }), { params: { tenant: 't1' } });
    assert.equal(mismatch.status, 422);
    assert.equal(mismatch.headers.get('content-type'), 'application/problem+json');
    assert.equal(calls, 1);
  });

  it('a JSON body without a JSON content-type is still parsed for the pointers; text that is not JSON is fingerprinted by its bytes', async () => {
    const pointers = demoContract({ scope: [{ kind: 'global' }] });
    const seen: string[] = [];
    const guard = createRouteGuard(pointers, options(new MemoryStore()));
    const handler = guard.wrap(async (req: Request) => {
      seen.push(await req.text());
      return Response.json({ id: `demo-${seen.length}` }, { status: 201 });
    });
    // fetch's default type for a string body is text/plain.
    const send = (key: string, body: string) => handler(new Request('http://x/v1/demo-requests', { method: 'POST', headers: { 'idempotency-key': key }, body }));
    assert.equal((await send('k', JSON.stringify({ topic: 'pricing', contact: { email: 'a@example.com' } }))).status, 201);
    const changed = await send('k', JSON.stringify({ topic: 'refund-everything', contact: { email: 'a@example.com' } }));
    assert.equal(changed.status, 422, 'a changed payload is refused, not replayed');
    // Parsed, so key order and unselected fields still do not matter.
    const same = await send('k', JSON.stringify({ note: 'ignored', contact: { email: 'a@example.com' }, topic: 'pricing' }));
    assert.equal(same.headers.get('idempotent-replayed'), 'true');
    assert.equal((await send('t', 'plain words')).status, 201);
    assert.equal((await send('t', 'other words')).status, 422);
    assert.equal(seen.length, 2);
  });

  it('numbers past a double: a body that differs only there is 422, not another intent’s replay; the same text replays', async () => {
    const seen: string[] = [];
    const handler = createRouteGuard(contract, options(new MemoryStore())).wrap(async (req: Request) => {
      // A handler that reads amounts losslessly (as int64 amounts must be) acts on the text as sent.
      seen.push(/"amount":\s*([-\d.eE+]+)/.exec(await req.text())![1]!);
      return Response.json({ id: seen.length }, { status: 201 });
    });
    const send = (key: string, raw: string) =>
      handler(new Request('http://x/things/t1', { method: 'POST', headers: { 'content-type': 'application/json', 'x-user': 'u', 'idempotency-key': key }, body: raw }));
    assert.equal((await send('big', '{"amount":9007199254740993}')).status, 201);
    const other = await send('big', '{"amount":9007199254740992}');
    assert.equal(other.status, 422, 'JSON.parse makes both 9007199254740992: the second was replayed the first one’s answer');
    assert.equal((await send('big', '{"amount": 9007199254740993}')).headers.get('idempotent-replayed'), 'true');
    assert.equal((await send('dec', '{"amount":0.12345678901234567891}')).status, 201);
    assert.equal((await send('dec', '{"amount":0.12345678901234567899}')).status, 422);
    // Out of a double's range: no 500, and two such values are two payloads.
    assert.equal((await send('huge', '{"amount":1e400}')).status, 201);
    assert.equal((await send('huge', '{"amount":1e401}')).status, 422);
    assert.deepEqual(seen, ['9007199254740993', '0.12345678901234567891', '1e400']);
  });

  it('runs where timers are numbers, as in Cloudflare Workers, Vercel Edge and browsers (no ref/unref to call)', async function () {
    this.timeout(10_000); // on the earlier code the first request never settled
    const real = { setTimeout: globalThis.setTimeout, setInterval: globalThis.setInterval };
    // The web's timers: a number, which clearTimeout/clearInterval take (Node's take its timers' ids too).
    globalThis.setTimeout = ((callback: () => void, ms?: number) => Number(real.setTimeout(callback, ms))) as typeof setTimeout;
    globalThis.setInterval = ((callback: () => void, ms?: number) => Number(real.setInterval(callback, ms))) as typeof setInterval;
    try {
      let calls = 0;
      // MemoryStore has extend: the lease heartbeat's interval runs too, with the store calls' time bound.
      const handler = createRouteGuard(contract, options(new MemoryStore(), { storeTimeoutMs: 1000 })).wrap(async (req: Request) => {
        calls += 1;
        return Response.json({ id: calls, n: ((await req.json()) as { n: number }).n }, { status: 201 });
      });
      const first = await handler(request('http://x/things/t1', 'numbers', { n: 1 }));
      assert.equal(first.status, 201);
      const replay = await handler(request('http://x/things/t1', 'numbers', { n: 1 }));
      assert.equal(replay.headers.get('idempotent-replayed'), 'true');
      assert.equal((await handler(request('http://x/things/t1', 'numbers', { n: 2 }))).status, 422);
      assert.equal(calls, 1);
    } finally {
      globalThis.setTimeout = real.setTimeout;
      globalThis.setInterval = real.setInterval;
    }
  });

  it('answers 204 without a body, and fails loudly on a URL that does not match the contract path', async () => {
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    const handler = guard.wrap(async () => new Response(null, { status: 204 }));
    const first = await handler(request('http://x/things/t1', 'k', {}));
    assert.equal(first.status, 204);
    const replay = await handler(request('http://x/things/t1', 'k', {}));
    assert.equal(replay.status, 204);
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
    assert.equal(replay.body, null);
    await assert.rejects(handler(request('http://x/elsewhere', 'k', {})), /does not match \/things\/\{tenant\}; pass options\.params/);
    const routed = createRouteGuard(contract, options(new MemoryStore(), { params: () => ({ tenant: 'from-router' }) }));
    assert.equal((await routed.wrap(async () => new Response('ok'))(request('http://x/elsewhere', 'k', {}))).status, 200);
  });

  it('a streamed answer whose client leaves while it is read is cancelled and not recorded: the key is kept, the handler not run again', async () => {
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    let runs = 0;
    const body = endless();
    const handler = guard.wrap(async () => {
      runs += 1;
      return new Response(body.stream, { status: 200 });
    });
    const client = new AbortController();
    const first = handler(new Request(request('http://x/things/t1', 'gone', { n: 1 }), { signal: client.signal }));
    setTimeout(() => client.abort(), 50);
    await assert.rejects(first, /its client left while the answer was streamed, so it may have been cut short; the answer is not recorded/);
    assert.equal(body.cancelled(), true, 'the handler\'s stream is cancelled, not read on forever');
    const retry = await handler(request('http://x/things/t1', 'gone', { n: 1 }));
    assert.equal(retry.status, 409, 'kept for reconciliation: no cut-short answer replayed');
    assert.equal(runs, 1);
  });

  it('a client already gone when the answer begins: an answer that ends is recorded (the retry\'s replay); one that does not end within the lease is cancelled', async () => {
    const short = { ...contract, leaseMs: 200 };
    const guard = createRouteGuard(short, options(new MemoryStore()));
    let stream: ReadableStream<Uint8Array> | undefined;
    const handler = guard.wrap(async () => new Response(stream ?? 'done', { status: 201 }));
    const gone = AbortSignal.abort();
    const lost = await handler(new Request(request('http://x/things/t1', 'lost', { n: 1 }), { signal: gone }));
    assert.equal(lost.status, 201);
    const replay = await handler(request('http://x/things/t1', 'lost', { n: 1 }));
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
    assert.equal(await replay.text(), 'done');
    const body = endless();
    stream = body.stream;
    const started = Date.now();
    await assert.rejects(handler(new Request(request('http://x/things/t1', 'endless', { n: 1 }), { signal: gone })), /its client had left and the answer did not end within the lease \(200 ms\)/);
    assert.ok(Date.now() - started < 2000);
    assert.equal(body.cancelled(), true);
  });

  it('one-transaction mode: a handler or a streamed answer that never ends is given up after leaseRenewalMaxMs, rolled back, and the key freed', async () => {
    await withSqliteStore(async (store, db) => {
      db.exec('CREATE TABLE things (id INTEGER PRIMARY KEY AUTOINCREMENT, n INTEGER)');
      const guard = createRouteGuard(contract, options(store, { leaseRenewalMaxMs: 300 }));
      let mode: 'stream' | 'hang' | 'answer' = 'stream';
      const body = endless();
      const handler = guard.wrap(
        async (req) => {
          const { tx } = idempotencyOf<Database.Database>(req);
          tx!.prepare('INSERT INTO things (n) VALUES (?)').run(((await req.json()) as { n: number }).n);
          if (mode === 'hang') return new Promise<Response>(() => undefined);
          return mode === 'stream' ? new Response(body.stream, { status: 201 }) : Response.json({ ok: true }, { status: 201 });
        },
        { transaction: true },
      );
      // The guard's answer: rolled back, the rest unknown (a 503 problem with Retry-After), not a rejection.
      const givenUp = async (answer: Response): Promise<void> => {
        assert.equal(answer.status, 503);
        assert.equal(answer.headers.get('retry-after'), '1');
        const problem = (await answer.json()) as { type: string; detail: string };
        assert.equal(problem.type, 'https://idemkit.dev/problems/idempotency-outcome-unknown');
        assert.match(problem.detail, /given up: its transaction was rolled back/);
      };
      await givenUp(await handler(request('http://x/things/t', 'tx-stream', { n: 1 })));
      assert.equal(body.cancelled(), true);
      mode = 'hang';
      await givenUp(await handler(request('http://x/things/t', 'tx-hang', { n: 2 })));
      assert.equal((db.prepare('SELECT count(*) AS n FROM things').get() as { n: number }).n, 0, 'both rolled back');
      mode = 'answer';
      assert.equal((await handler(request('http://x/things/t', 'tx-stream', { n: 1 }))).status, 201, 'the key was freed');
      assert.equal((db.prepare('SELECT count(*) AS n FROM things').get() as { n: number }).n, 1);
    });
  });

  it('a handler that answers Response.error() or no Response at all: a TypeError saying so, and the key is kept', async () => {
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    let answer: unknown = Response.error();
    const handler = guard.wrap(async () => answer as Response);
    await assert.rejects(handler(request('http://x/things/t1', 'err', {})), (error: Error) => error instanceof TypeError && /answered Response\.error\(\), which is no answer to record or replay/.test(error.message));
    assert.equal((await handler(request('http://x/things/t1', 'err', {}))).status, 409, 'kept: the handler may have acted');
    answer = { status: 201, body: 'x' };
    await assert.rejects(handler(request('http://x/things/t1', 'plain', {})), /answered an object that is no Response, not a Response: return a Response/);
    answer = undefined;
    await assert.rejects(handler(request('http://x/things/t1', 'nothing', {})), /answered undefined, not a Response/);
  });

  it('a duplicate waiting for the first request (waitInProgressMs) stops once its request is aborted: its client left', async () => {
    const guard = createRouteGuard(contract, options(new MemoryStore(), { waitInProgressMs: 5_000, pollIntervalMs: 5 }));
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const handler = guard.wrap(async () => {
      await held;
      return Response.json({ ok: true }, { status: 201 });
    });
    const first = handler(request('http://x/things/t1', 'wait', { n: 1 }));
    await new Promise((resolve) => setTimeout(resolve, 20));
    const client = new AbortController();
    const started = Date.now();
    const duplicate = handler(new Request(request('http://x/things/t1', 'wait', { n: 1 }), { signal: client.signal }));
    setTimeout(() => client.abort(), 30);
    assert.equal((await duplicate).status, 409);
    assert.ok(Date.now() - started < 1_000, `answered after ${Date.now() - started} ms, not the 5 s wait`);
    release();
    assert.equal((await first).status, 201);
  });

  it('records a streamed body of strings, ArrayBuffers and other views as their bytes (Bun streams strings); a chunk of no bytes is a TypeError', async () => {
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    let chunks: unknown[] = [];
    const handler = guard.wrap(async () => {
      const parts = chunks;
      const stream = new ReadableStream({
        start(controller) {
          for (const part of parts) controller.enqueue(part);
          controller.close();
        },
      });
      return new Response(stream as ReadableStream<Uint8Array>, { status: 201, headers: { 'content-type': 'text/event-stream' } });
    });
    chunks = ['data: héllo\n\n', new TextEncoder().encode('data: 2\n\n').buffer, new DataView(new TextEncoder().encode('xx3yy').buffer, 2, 1), new Uint16Array([0x4141])];
    const first = await handler(request('http://x/things/t1', 'strings', {}));
    const expected = 'data: héllo\n\ndata: 2\n\n3AA';
    assert.equal(await first.text(), expected);
    const replay = await handler(request('http://x/things/t1', 'strings', {}));
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
    assert.equal(await replay.text(), expected, 'the replay holds every chunk, not an empty body');
    chunks = [42];
    await assert.rejects(handler(request('http://x/things/t1', 'numbers', {})), /streamed a body chunk that is no bytes \(number\)/);
    // One that would go on for ever is cancelled, not left producing into a stream nobody reads.
    let cancelled = false;
    let timer: ReturnType<typeof setInterval> | undefined;
    const numbers = guard.wrap(async () => {
      const stream = new ReadableStream({
        start(controller) {
          timer = setInterval(() => controller.enqueue(7), 5);
        },
        cancel() {
          cancelled = true;
          clearInterval(timer);
        },
      });
      return new Response(stream as ReadableStream<Uint8Array>, { status: 201 });
    });
    await assert.rejects(numbers(request('http://x/things/t1', 'endless-numbers', {})), /no bytes \(number\)/);
    assert.equal(cancelled, true);
    clearInterval(timer);
  });

  it('one-transaction mode on SQLite', async () => {
    await withSqliteStore(async (store, db) => {
      db.exec('CREATE TABLE things (id INTEGER PRIMARY KEY AUTOINCREMENT, n INTEGER)');
      let status = 500;
      const guard = createRouteGuard(contract, options(store));
      const handler = guard.wrap(
        async (req) => {
          const { tx } = idempotencyOf<Database.Database>(req);
          const info = tx!.prepare('INSERT INTO things (n) VALUES (?)').run(((await req.json()) as { n: number }).n);
          return Response.json({ id: Number(info.lastInsertRowid) }, { status });
        },
        { transaction: true },
      );
      assert.equal((await handler(request('http://x/things/t', 'tx', { n: 1 }))).status, 500);
      assert.equal((db.prepare('SELECT count(*) AS n FROM things').get() as { n: number }).n, 0, 'rolled back');
      status = 201;
      const answers = await Promise.all([1, 2].map(() => handler(request('http://x/things/t', 'tx', { n: 1 }))));
      assert.deepEqual(answers.map((a) => a.status), [201, 201]);
      assert.deepEqual(answers.map((a) => a.headers.get('idempotent-replayed')).sort(), ['false', 'true']);
      assert.equal((db.prepare('SELECT count(*) AS n FROM things').get() as { n: number }).n, 1);
    });
  });

  it('sends an encoded answer as the handler made it and records its body decoded: the replay is readable', async () => {
    let calls = 0;
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    const handler = guard.wrap(async () => {
      calls += 1;
      const body = gzipSync(JSON.stringify({ id: calls }));
      return new Response(body, { status: 201, headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' } });
    });
    const first = await handler(request('http://x/things/t', 'gz', { n: 1 }));
    assert.equal(first.headers.get('content-encoding'), 'gzip');
    assert.equal(gunzipSync(new Uint8Array(await first.arrayBuffer())).toString(), '{"id":1}');
    const replay = await handler(request('http://x/things/t', 'gz', { n: 1 }));
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
    assert.equal(replay.headers.get('content-encoding'), null);
    assert.equal(await replay.text(), '{"id":1}');
    assert.equal(calls, 1);
  });

  it('refuses a transactional wrap for an external effect without a provider key, when the handler is wrapped', async () => {
    const external = { ...contract, effect: { owner: 'things', external: true, providerKey: 'none' as const } };
    const guard = createRouteGuard(external, options(new MemoryStore()));
    const handler = async () => Response.json({ id: 1 }, { status: 201 });
    assert.throws(() => guard.wrap(handler, { transaction: true }), /one-transaction mode cannot guard createThing: .*providerKey: none/);
    // Without the transaction: served.
    assert.equal((await guard.wrap(handler)(request('http://x/things/t', 'ext', { n: 1 }))).status, 201);
  });

  it('refuses a transactional wrap on a store without transactions when the handler is wrapped, not on its first request', async () => {
    const guard = createRouteGuard(contract, options(new MemoryStore()));
    const handler = async () => Response.json({ id: 1 }, { status: 201 });
    assert.throws(() => guard.wrap(handler, { transaction: true }), (error: unknown) => {
      assert.ok(error instanceof TypeError);
      assert.match(error.message, /^one-transaction mode cannot guard createThing: it needs a store with transactions \(SqliteStore or PostgresStore\), and MemoryStore has none/);
      return true;
    });
    assert.equal((await guard.wrap(handler)(request('http://x/things/t', 'plain', { n: 1 }))).status, 201);
  });
});
