import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { gzipSync } from 'node:zlib';
import type { CompiledContract } from '../../src/runtime/contract.js';
import { createGuard, type GuardLogEvent, type GuardRequest, type GuardResponse, type ReconcileHook } from '../../src/runtime/guard.js';
import { PROBLEM_BASE, type GuardProblem } from '../../src/runtime/problem.js';
import { StoreError, type IdempotencyStore, type ReserveInput, type ReserveResult, type TransactionStep, type TransactionalStore } from '../../src/runtime/store.js';
import { MemoryStore } from '../../src/runtime/stores/memory.js';
import { bodyJson, demoContract, demoRequest, jsonResponse } from './fixtures.js';
import { computeRecordId } from '../../src/runtime/fingerprint.js';

const KEY = 'stripe-node-retry-7c9f0b1e-3c1d-4a51-9a43-0d9d1b2a5f10';

function setup(options: Partial<Parameters<typeof createGuard>[1]> = {}, contract = demoContract()) {
  let t = 1_800_000_000_000;
  const clock = () => t;
  const store = new MemoryStore({ clock });
  const events: GuardLogEvent[] = [];
  const guard = createGuard(contract, { store, now: clock, log: (e) => events.push(e), ...options });
  let runs = 0;
  const handler = async (): Promise<GuardResponse> => {
    runs += 1;
    return jsonResponse(201, { id: `dr_${runs}`, topic: 'pricing' }, { location: `/v1/demo-requests/dr_${runs}`, 'set-cookie': 'session=secret' });
  };
  return {
    guard,
    store,
    events,
    handler,
    runs: () => runs,
    advance: (ms: number) => {
      t += ms;
    },
  };
}

/**
 * A round trip through another process (`cat`), which answers while this one is blocked: a store's or a provider's
 * reply that arrives during a stall. Kill `cat` when done.
 */
async function catRoundTrips(): Promise<{ roundTrip: () => Promise<void>; cat: import('node:child_process').ChildProcessWithoutNullStreams }> {
  const { spawn } = await import('node:child_process');
  const cat = spawn('cat', [], { stdio: ['pipe', 'pipe', 'pipe'] });
  const roundTrip = () =>
    new Promise<void>((resolve) => {
      cat.stdout.once('data', () => resolve());
      cat.stdin.write('x');
    });
  return { roundTrip, cat };
}

/** A memory store with some methods replaced (slow, hanging, failing, counted); the others run on the store itself. */
function withMethods(memory: MemoryStore, methods: Readonly<Record<string, unknown>>): MemoryStore {
  return new Proxy(memory, {
    get(target, property) {
      if (typeof property === 'string' && Object.hasOwn(methods, property)) return methods[property];
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/**
 * `withReservation` over a memory store, for one-transaction tests: the work gets the transaction handle `'tx'`;
 * a commit completes the record, a rollback releases the reservation it made.
 */
function memoryTransaction(inner: MemoryStore): TransactionalStore<string>['withReservation'] {
  return async <T>(input: ReserveInput, work: (r: ReserveResult, tx: string) => Promise<TransactionStep<T>>): Promise<T> => {
    const reservation = await inner.reserve(input);
    const step = await work(reservation, 'tx');
    if (step.commit) await inner.complete(input.id, input.token, step.complete);
    else if (reservation.outcome === 'reserved') await inner.release(input.id, input.token);
    return step.value;
  };
}

/**
 * A `reserve` whose first call runs twice, as a store client resending an unanswered command would: `between` runs
 * between the two runs, and the answer is the second run's, shaped by `answer`.
 */
function resentOnce(
  memory: MemoryStore,
  between: () => unknown,
  answer: (first: ReserveResult, resent: ReserveResult) => ReserveResult = (_, resent) => resent,
): (input: ReserveInput) => Promise<ReserveResult> {
  let resend = true;
  return async (input) => {
    const first = await memory.reserve(input);
    if (!resend) return first;
    resend = false;
    between();
    return answer(first, await memory.reserve(input));
  };
}

/** A memory store whose `extend` is `extend`. */
function withExtend(memory: MemoryStore, extend: NonNullable<IdempotencyStore['extend']>): IdempotencyStore {
  return withMethods(memory, { extend });
}

function problemType(response: GuardResponse): string {
  return bodyJson(response).type;
}

describe('runtime/guard: key and scope', () => {
  it('answers 400 idempotency-key-missing as problem+json without running the handler', async () => {
    const s = setup();
    const response = await s.guard.handle(demoRequest(undefined), s.handler);
    assert.equal(response.status, 400);
    assert.equal(response.headers['content-type'], 'application/problem+json');
    assert.equal(response.headers['cache-control'], 'no-store');
    assert.deepEqual(bodyJson(response), {
      type: `${PROBLEM_BASE}idempotency-key-missing`,
      title: 'Idempotency key missing',
      status: 400,
      detail: 'Send the Idempotency-Key header: one key per intent, kept across retries.',
      requestId: 'req-1',
    });
    assert.equal(s.runs(), 0);
  });

  it('uses the statuses the contract names', async () => {
    const s = setup({}, demoContract({ responses: { ...demoContract().responses, missingKey: 428, invalidKey: 422 } }));
    assert.equal((await s.guard.handle(demoRequest(undefined), s.handler)).status, 428);
    assert.equal((await s.guard.handle(demoRequest('bad key'), s.handler)).status, 422);
  });

  for (const [name, raw] of [
    ['several values', ['a', 'b']],
    ['empty', ''],
    ['non-printable', 'a\u0007b'],
    ['too long', 'k'.repeat(256)],
    ['off-pattern', 'a/b'],
  ] as const) {
    it(`answers 400 idempotency-key-invalid for a key that is ${name}`, async () => {
      const s = setup();
      const response = await s.guard.handle(demoRequest(raw), s.handler);
      assert.equal(response.status, 400);
      assert.equal(problemType(response), `${PROBLEM_BASE}idempotency-key-invalid`);
      assert.equal(s.runs(), 0);
      assert.deepEqual(await s.store.listAbandoned(), []);
    });
  }

  it('runs unguarded when the key is optional and absent', async () => {
    const contract = demoContract({ key: { ...demoContract().key, required: false } });
    const s = setup({}, contract);
    const first = await s.guard.handle(demoRequest(undefined), s.handler);
    const second = await s.guard.handle(demoRequest(undefined), s.handler);
    assert.equal(first.status, 201);
    assert.equal(second.status, 201);
    assert.equal(s.runs(), 2);
    assert.equal(first.headers['idempotent-replayed'], undefined);
  });

  it('begin() answers a request whose own getters throw with a rejected promise, never a synchronous throw', async () => {
    const contract = demoContract({ key: { ...demoContract().key, required: false } });
    // No logger: the unguarded path then reads requestId outside of prepare().
    const s = setup({ log: undefined }, contract);
    const request = Object.defineProperty({ ...demoRequest(undefined) }, 'requestId', {
      get(): never {
        throw new Error('no request id');
      },
    });
    let begun: Promise<unknown> | undefined;
    assert.doesNotThrow(() => {
      begun = s.guard.begin(request);
    });
    await assert.rejects(begun!, /no request id/);
  });

  it('treats the quoted and the bare form as one key', async () => {
    const s = setup();
    await s.guard.handle(demoRequest(KEY), s.handler);
    const replay = await s.guard.handle(demoRequest(`"${KEY}"`), s.handler);
    assert.equal(replay.headers['idempotent-replayed'], 'true');
    assert.equal(s.runs(), 1);
  });

  it('answers 400 idempotency-scope-unresolved when the scope needs a principal and there is none', async () => {
    const s = setup();
    const response = await s.guard.handle(demoRequest(KEY, undefined, { principal: undefined }), s.handler);
    assert.equal(response.status, 400);
    assert.equal(problemType(response), `${PROBLEM_BASE}idempotency-scope-unresolved`);
    assert.equal(s.runs(), 0);
  });

  it('answers 400 idempotency-scope-unresolved when a header, path or query scope part is absent (no shared key space)', async () => {
    const cases: [CompiledContract['scope'], Parameters<typeof demoRequest>[2]][] = [
      [[{ kind: 'header', name: 'X-Tenant-Id' }], { headers: { 'idempotency-key': KEY } }],
      [[{ kind: 'header', name: 'X-Tenant-Id' }], { headers: { 'idempotency-key': KEY, 'x-tenant-id': '' } }],
      [[{ kind: 'path', name: 'account' }], { pathParams: {} }],
      [[{ kind: 'query', name: 'tenant' }], { query: {} }],
    ];
    for (const [scope, extra] of cases) {
      const s = setup({}, demoContract({ scope }));
      const response = await s.guard.handle(demoRequest(KEY, undefined, extra), s.handler);
      assert.equal(response.status, 400, JSON.stringify(scope));
      assert.equal(problemType(response), `${PROBLEM_BASE}idempotency-scope-unresolved`);
      assert.match(bodyJson(response).detail, /X-Tenant-Id|account|tenant/);
      assert.equal(s.runs(), 0);
    }
  });

  it('scopes a request without an optional header or query part by its absence: guarded, replayed, apart from every value', async () => {
    for (const [kind, without, withValue] of [
      ['header', { headers: { 'idempotency-key': KEY } }, { headers: { 'idempotency-key': KEY, 'for-user-id': 'sub-1' } }],
      ['query', { query: {} }, { query: { for_user_id: 'sub-1' } }],
    ] as const) {
      const s = setup({}, demoContract({ scope: [{ kind: 'principal' }, { kind, name: kind === 'header' ? 'For-User-Id' : 'for_user_id', optional: true }] }));
      const first = await s.guard.handle(demoRequest(KEY, undefined, without), s.handler);
      assert.equal(first.status, 201, kind);
      assert.equal((await s.guard.handle(demoRequest(KEY, undefined, without), s.handler)).headers['idempotent-replayed'], 'true');
      const empty = kind === 'header' ? { headers: { 'idempotency-key': KEY, 'for-user-id': '' } } : { query: { for_user_id: '' } };
      assert.equal((await s.guard.handle(demoRequest(KEY, undefined, empty), s.handler)).headers['idempotent-replayed'], 'true', 'empty is absent');
      assert.equal((await s.guard.handle(demoRequest(KEY, undefined, withValue), s.handler)).headers['idempotent-replayed'], 'false', 'a value is another scope');
      assert.equal(s.runs(), 2);
    }
    // Without principal in the scope, absence would be every such caller's one key space: 400, as for a required part.
    const alone = setup({}, demoContract({ scope: [{ kind: 'header', name: 'For-User-Id', optional: true }] }));
    assert.equal(problemType(await alone.guard.handle(demoRequest(KEY, undefined, { headers: { 'idempotency-key': KEY } }), alone.handler)), `${PROBLEM_BASE}idempotency-scope-unresolved`);
    assert.equal(alone.runs(), 0);
  });

  it('keeps the keys of different principals and tenants apart', async () => {
    const s = setup();
    const body = { topic: 'pricing', contact: { email: 'a@example.com' } };
    await s.guard.handle(demoRequest(KEY, body, { principal: 'alice' }), s.handler);
    const bob = await s.guard.handle(demoRequest(KEY, body, { principal: 'bob' }), s.handler);
    const otherTenant = await s.guard.handle(demoRequest(KEY, body, { principal: 'alice', headers: { 'idempotency-key': KEY, 'x-tenant-id': 't2' } }), s.handler);
    assert.equal(bob.headers['idempotent-replayed'], 'false');
    assert.equal(otherTenant.headers['idempotent-replayed'], 'false');
    assert.equal(s.runs(), 3);
  });

  it('never merges owners whose principal hook answers with something else than a string (null, an ObjectId, a URL)', async () => {
    const s = setup();
    const as = (principal: unknown) => demoRequest(KEY, undefined, { principal: principal as string });
    for (const none of [null, '', '   ']) {
      const response = await s.guard.handle(as(none), s.handler);
      assert.equal(problemType(response), `${PROBLEM_BASE}idempotency-scope-unresolved`, JSON.stringify(none));
    }
    class ObjectId {
      constructor(readonly hex: string) {}
    }
    // Each would hash as `{}`: every owner one scope, each replaying the others' answers.
    for (const object of [new ObjectId('alice'), new URL('https://id.example/alice'), { id: 'alice' }]) {
      await assert.rejects(s.guard.handle(as(object), s.handler), (error: Error) => error instanceof TypeError && /principal hook returned (an object of class ObjectId|an object of class URL|a plain object),/.test(error.message));
    }
    // A numeric id (a numeric user column) is hashed as a number, as before this check: records made then are still found.
    await s.guard.handle(as(42), s.handler);
    assert.equal((await s.guard.handle(as(42), s.handler)).headers['idempotent-replayed'], 'true');
    assert.equal((await s.guard.handle(as(43), s.handler)).headers['idempotent-replayed'], 'false');
    assert.equal(s.runs(), 2);
    const before = setup();
    await before.guard.handle(as(42), before.handler);
    assert.equal(firstEventKeyId(before.events), computeRecordId([['principal', 42], ['header', 'X-Tenant-Id', 't1']], demoContract().operationId, KEY));
  });
});

describe('runtime/guard: createGuard', () => {
  it('refuses a contract with a bad key pattern or fingerprint pointer at creation', () => {
    const store = new MemoryStore();
    assert.throws(() => createGuard(demoContract({ key: { ...demoContract().key, pattern: '[unclosed' } }), { store }), SyntaxError);
    assert.throws(() => createGuard(demoContract({ fingerprint: { include: ['topic'], exclude: [], query: [] } }), { store }), SyntaxError);
    assert.throws(() => createGuard(demoContract({ fingerprint: { include: 'all', exclude: ['/a~2'], query: [] } }), { store }), SyntaxError);
  });

  it('refuses credentials in replayHeaders at creation (a replay would hand them to whoever retries)', () => {
    for (const name of ['Set-Cookie', 'authorization', 'Cookie', 'Proxy-Authorization', 'Set-Cookie2', 'Authentication-Info', 'Proxy-Authentication-Info']) {
      assert.throws(() => createGuard(demoContract(), { store: new MemoryStore(), replayHeaders: ['content-type', name] }), new RegExp(name.toLowerCase()));
    }
    assert.doesNotThrow(() => createGuard(demoContract(), { store: new MemoryStore(), replayHeaders: ['content-type', 'x-trace'] }));
  });

  it('refuses a message\'s framing, hop-by-hop headers and date in replayHeaders: a replay is framed and dated by the server that sends it', () => {
    // A review's: with content-length listed, a gzip answer the adapter decoded was replayed with the gzip length, and
    // the client read the next answer on the connection as the rest of this one.
    for (const name of ['Content-Length', 'transfer-encoding', 'Connection', 'keep-alive', 'proxy-connection', 'TE', 'trailer', 'upgrade', 'date']) {
      assert.throws(() => createGuard(demoContract(), { store: new MemoryStore(), replayHeaders: ['content-type', name] }), new RegExp(`must not include ${name.toLowerCase()}: it belongs to one message`));
    }
  });

  it('a record settled by hand with a provider\'s answer copied whole is replayed without its framing, date and cookies', async () => {
    const s = setup();
    const begun = await s.guard.begin(demoRequest(KEY));
    assert.equal(begun.kind, 'proceed');
    if (begun.kind !== 'proceed') return;
    const provider = jsonResponse(201, { id: 'dr_settled' }, { 'Content-Length': '63', 'transfer-encoding': 'chunked', date: 'Tue, 15 Nov 1994 08:12:31 GMT', connection: 'close', 'Set-Cookie': 'provider-session=1', location: '/v1/demo-requests/dr_settled' });
    assert.ok(await s.store.complete(begun.reservation.recordId!, begun.reservation.token!, { response: provider, ttlMs: 60_000 }));
    const replay = await s.guard.handle(demoRequest(KEY), s.handler);
    assert.equal(replay.status, 201);
    assert.deepEqual(Object.keys(replay.headers).sort(), ['content-type', 'idempotent-replayed', 'location']);
    assert.equal(bodyJson(replay).id, 'dr_settled');
  });

  it('refuses the key header in replayHeaders (a handler echoing the key would have it stored in the clear)', () => {
    assert.throws(() => createGuard(demoContract(), { store: new MemoryStore(), replayHeaders: ['content-type', 'Idempotency-Key'] }), /idempotency-key, the key header/);
  });

  it('fingerprints the declared query parameters and path params', async () => {
    const contract = demoContract({ fingerprint: { include: 'all', exclude: [], query: ['dryRun'] } });
    const s = setup({}, contract);
    await s.guard.handle(demoRequest(KEY, {}, { query: { dryRun: 'true', page: '1' }, pathParams: { id: '7' } }), s.handler);
    const undeclared = await s.guard.handle(demoRequest(KEY, {}, { query: { dryRun: 'true', page: '2' }, pathParams: { id: '7' } }), s.handler);
    assert.equal(undeclared.headers['idempotent-replayed'], 'true');
    const declared = await s.guard.handle(demoRequest(KEY, {}, { query: { dryRun: 'false' }, pathParams: { id: '7' } }), s.handler);
    assert.equal(declared.status, 422);
    const path = await s.guard.handle(demoRequest(KEY, {}, { query: { dryRun: 'true' }, pathParams: { id: '8' } }), s.handler);
    assert.equal(path.status, 422);
  });

  it('fingerprints every query parameter sent when the operation takes a free-form query object (queryAll)', async () => {
    const contract = demoContract({ fingerprint: { include: 'all', exclude: [], query: ['meta'], queryAll: true } });
    const s = setup({}, contract);
    const first = await s.guard.handle(demoRequest(KEY, {}, { query: { colour: 'red', size: ['s', 'm'] } }), s.handler);
    assert.equal(first.status, 201);
    const same = await s.guard.handle(demoRequest(KEY, {}, { query: { size: ['s', 'm'], colour: 'red' } }), s.handler);
    assert.equal(same.headers['idempotent-replayed'], 'true', 'the same members in another order are the same request');
    for (const query of [{ colour: 'blue', size: ['s', 'm'] }, { colour: 'red', size: ['s'] }, { colour: 'red', size: ['s', 'm'], extra: '1' }, { colour: 'red' }]) {
      const other = await s.guard.handle(demoRequest(KEY, {}, { query }), s.handler);
      assert.equal(other.status, 422, `${JSON.stringify(query)} is another payload under the same key`);
    }
    assert.equal(s.runs(), 1);
  });
});

describe('runtime/guard: states', () => {
  it("replays the header an Azure long-running create names its result in (Operation-Location), as Location", async () => {
    const s = setup();
    const accepted = async (): Promise<GuardResponse> => jsonResponse(202, { status: 'Running' }, { 'operation-location': '/operations/op_1' });
    await s.guard.handle(demoRequest(KEY), accepted);
    const again = await s.guard.handle(demoRequest(KEY), accepted);
    assert.equal(again.status, 202);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.headers['operation-location'], '/operations/op_1');
  });

  it('runs once, then replays status, allow-listed headers and the byte-identical body', async () => {
    const s = setup();
    const first = await s.guard.handle(demoRequest(KEY), s.handler);
    assert.equal(first.status, 201);
    assert.equal(first.headers['idempotent-replayed'], 'false');
    const again = await s.guard.handle(demoRequest(KEY), s.handler);
    assert.equal(s.runs(), 1);
    assert.equal(again.status, 201);
    assert.deepEqual(again.headers, { 'content-type': 'application/json', location: '/v1/demo-requests/dr_1', 'idempotent-replayed': 'true' });
    assert.deepEqual(Buffer.from(again.body), Buffer.from(first.body));
    const record = await s.store.get(firstEventKeyId(s.events));
    assert.equal(record?.state, 'completed');
    assert.equal(record?.resultId, 'dr_1');
  });

  it('records the id of a wrapped resource: {data: {id}}, {payments: {id}, links}; none when two resources sit side by side', async () => {
    const bodies: [unknown, string | undefined][] = [
      [{ data: { id: 'D1' } }, 'D1'],
      [{ payments: { id: 'PM1', amount: 5 }, links: { mandate: 'MD1' } }, 'PM1'],
      [{ payment: { id: 'PM2' }, customer: { id: 'CU1' } }, undefined],
      [{ id: 7, data: { id: 'inner' } }, '7'],
    ];
    for (const [index, [body, expected]] of bodies.entries()) {
      const s = setup();
      await s.guard.handle(demoRequest(`${KEY}-${index}`), async () => jsonResponse(201, body));
      const record = await s.store.get(firstEventKeyId(s.events));
      assert.equal(record?.resultId, expected, JSON.stringify(body));
    }
  });

  it('replays an empty body and a non-JSON body byte for byte', async () => {
    const s = setup();
    const bytes = new Uint8Array([0, 255, 10, 13, 0xc3]);
    await s.guard.handle(demoRequest('k1'), async () => ({ status: 204, headers: {}, body: new Uint8Array() }));
    await s.guard.handle(demoRequest('k2'), async () => ({ status: 200, headers: { 'content-type': 'application/octet-stream' }, body: bytes }));
    const empty = await s.guard.handle(demoRequest('k1'), s.handler);
    const binary = await s.guard.handle(demoRequest('k2'), s.handler);
    assert.equal(empty.status, 204);
    assert.equal(empty.body.length, 0);
    assert.deepEqual([...binary.body], [...bytes]);
    assert.equal(s.runs(), 0);
  });

  it('replays a recorded 4xx too (a terminal answer is a result)', async () => {
    const s = setup();
    await s.guard.handle(demoRequest(KEY), async () => jsonResponse(409, { error: 'slot taken' }));
    const again = await s.guard.handle(demoRequest(KEY), s.handler);
    assert.equal(again.status, 409);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(s.runs(), 0);
  });

  it('answers 422 idempotency-key-reused for another payload, before the handler, also over a completed record', async () => {
    const s = setup();
    await s.guard.handle(demoRequest(KEY), s.handler);
    const other = await s.guard.handle(demoRequest(KEY, { topic: 'support', contact: { email: 'a@example.com' } }), s.handler);
    assert.equal(other.status, 422);
    assert.equal(problemType(other), `${PROBLEM_BASE}idempotency-key-reused`);
    assert.equal(s.runs(), 1);
  });

  it('answers 422 before 409 while the first is still in progress', async () => {
    const s = setup();
    const first = await s.guard.begin(demoRequest(KEY));
    assert.equal(first.kind, 'proceed');
    const other = await s.guard.begin(demoRequest(KEY, { topic: 'other' }));
    assert.equal(other.kind === 'respond' && other.response.status, 422);
  });

  it('ignores fields outside the fingerprint', async () => {
    const s = setup();
    await s.guard.handle(demoRequest(KEY, { topic: 'pricing', contact: { email: 'a@example.com' }, clientSentAt: 1 }), s.handler);
    const again = await s.guard.handle(demoRequest(KEY, { contact: { email: 'a@example.com' }, clientSentAt: 2, topic: 'pricing' }), s.handler);
    assert.equal(again.headers['idempotent-replayed'], 'true');
  });

  it('answers 409 idempotency-request-in-progress; Retry-After is how long the first has run (≥ 1 s), at most the lease left', async () => {
    const s = setup();
    const first = await s.guard.begin(demoRequest(KEY));
    assert.equal(first.kind, 'proceed');
    const retryAfter = async () => {
      const again = await s.guard.begin(demoRequest(KEY));
      assert.equal(again.kind, 'respond');
      if (again.kind !== 'respond') return undefined;
      assert.equal(again.response.status, 409);
      assert.equal(problemType(again.response), `${PROBLEM_BASE}idempotency-request-in-progress`);
      return again.response.headers['retry-after'];
    };
    // A duplicate right behind the first: a second later it is likely done (not the 30 s lease).
    s.advance(50);
    assert.equal(await retryAfter(), '1');
    s.advance(10_450);
    assert.equal(await retryAfter(), '11');
    // Never past the lease: then the record is abandoned, and the retry should come to reconciliation.
    s.advance(14_000);
    assert.equal(await retryAfter(), '6');
  });

  it('waits a bounded time for an in-progress duplicate and replays its result', async () => {
    const s = setup({ waitInProgressMs: 2000, pollIntervalMs: 5, now: Date.now });
    const first = await s.guard.begin(demoRequest(KEY));
    assert.equal(first.kind, 'proceed');
    if (first.kind !== 'proceed') return;
    const waiting = s.guard.begin(demoRequest(KEY));
    setTimeout(() => void s.guard.complete(first.reservation, jsonResponse(201, { id: 'dr_w' })), 30);
    const second = await waiting;
    assert.equal(second.kind === 'respond' && second.response.headers['idempotent-replayed'], 'true');
    assert.equal(second.kind === 'respond' && bodyJson(second.response).id, 'dr_w');
  });

  it('stops waiting once its client has gone: answered at once, and a reservation freed meanwhile is not taken to run the handler for nobody', async () => {
    const s = setup({ waitInProgressMs: 2000, pollIntervalMs: 5, now: Date.now });
    const first = await s.guard.begin(demoRequest(KEY));
    assert.equal(first.kind, 'proceed');
    if (first.kind !== 'proceed') return;
    let gone = false;
    const started = Date.now();
    const waiting = s.guard.begin({ ...demoRequest(KEY), clientGone: () => gone });
    setTimeout(() => (gone = true), 30);
    const second = await waiting;
    assert.equal(second.kind === 'respond' && second.response.status, 409);
    assert.ok(Date.now() - started < 1000, `answered after ${Date.now() - started} ms`);
    // Gone from the start, and the first request's key freed (a rolled-back transaction) while it would have waited.
    const left = s.guard.begin({ ...demoRequest(KEY), clientGone: () => true });
    setTimeout(() => void s.guard.abort(first.reservation, { rolledBack: true }), 15);
    const third = await left;
    assert.equal(third.kind, 'respond', 'no reservation for a client that left');
  });

  it('answers 409 after the bounded wait when the first is still running', async () => {
    const s = setup({ waitInProgressMs: 30, pollIntervalMs: 5, now: Date.now });
    await s.guard.begin(demoRequest(KEY));
    const second = await s.guard.begin(demoRequest(KEY));
    assert.equal(second.kind === 'respond' && second.response.status, 409);
  });

  it('the in-progress wait is bounded on a monotonic clock: a wall clock stepped back an hour does not stretch it', async () => {
    let wall = Date.now();
    const stepped = () => wall;
    const store = new MemoryStore({ clock: () => Date.now() });
    const guard = createGuard(demoContract(), { store, now: stepped, waitInProgressMs: 200, pollIntervalMs: 10 });
    await guard.begin(demoRequest(KEY));
    setTimeout(() => (wall -= 3_600_000), 50);
    const started = performance.now();
    const second = await guard.begin(demoRequest(KEY));
    assert.equal(second.kind === 'respond' && second.response.status, 409);
    assert.ok(performance.now() - started < 1_000, `waited ${Math.round(performance.now() - started)} ms`);
  });

  it('a reply that came in time is not thrown away when the loop stalled past storeTimeoutMs (timers run before the network is read)', async () => {
    // The store's round trip goes through another process (cat), which answers while this one is blocked.
    const { roundTrip, cat } = await catRoundTrips();
    try {
      const inner = new MemoryStore();
      const store = Object.assign(Object.create(inner) as MemoryStore, {
        reserve: async (input: Parameters<MemoryStore['reserve']>[0]) => {
          await roundTrip();
          return inner.reserve(input);
        },
      });
      await roundTrip(); // cat is up
      const guard = createGuard(demoContract(), { store, storeTimeoutMs: 100 });
      const pending = guard.begin(demoRequest(KEY));
      await new Promise((resolve) => setImmediate(resolve)); // the reservation is on its way
      const until = performance.now() + 300;
      while (performance.now() < until) {
        // A GC pause, a synchronous handler elsewhere in the process.
      }
      const begun = await pending;
      assert.equal(begun.kind, 'proceed', begun.kind === 'respond' ? String(begun.response.status) : '');
    } finally {
      cat.kill();
    }
  });

  it('answers 409 idempotency-request-abandoned past the lease and keeps the record (no hook)', async () => {
    const s = setup();
    const first = await s.guard.begin(demoRequest(KEY));
    s.advance(30_000);
    const second = await s.guard.handle(demoRequest(KEY), s.handler);
    assert.equal(second.status, 409);
    assert.equal(problemType(second), `${PROBLEM_BASE}idempotency-request-abandoned`);
    assert.equal(s.runs(), 0);
    const abandoned = await s.store.listAbandoned();
    assert.equal(abandoned.length, 1);
    assert.equal(first.kind === 'proceed' && abandoned[0]!.id, first.kind === 'proceed' && first.reservation.recordId);
  });

  it('reconcile "completed" records the found result and replays it', async () => {
    const seen: string[] = [];
    const tokens: string[] = [];
    const reconcile: ReconcileHook = (abandoned) => {
      seen.push(abandoned.idempotencyKey);
      tokens.push(abandoned.leaseToken);
      return { outcome: 'completed', response: jsonResponse(201, { id: 'dr_found' }) };
    };
    const s = setup({ reconcile });
    const first = await s.guard.begin(demoRequest(KEY));
    s.advance(31_000);
    const second = await s.guard.handle(demoRequest(KEY), s.handler);
    assert.deepEqual(seen, [KEY]);
    // The abandoned owner's token, what a hook settling the record itself fences on (a chaos review's ask).
    assert.deepEqual(tokens, [first.kind === 'proceed' ? first.reservation.token : 'none']);
    assert.equal(second.status, 201);
    assert.equal(second.headers['idempotent-replayed'], 'true');
    assert.equal(bodyJson(second).id, 'dr_found');
    assert.equal(s.runs(), 0);
    assert.deepEqual(await s.store.listAbandoned(), []);
  });

  it('a reconcile hook answering anything but its verdicts (a string, {}, nothing) leaves the record abandoned: the effect never runs twice', async () => {
    for (const answer of ['unknown', 'not-happened', {}, undefined, null, { outcome: 'NOT-HAPPENED' }, { outcome: 'retry' }]) {
      const s = setup({ reconcile: () => answer as never });
      const original = await s.guard.begin(demoRequest(KEY));
      assert.equal(original.kind, 'proceed');
      s.advance(31_000);
      const retry = await s.guard.handle(demoRequest(KEY), s.handler);
      assert.equal(retry.status, 409, JSON.stringify(answer));
      assert.equal(retry.headers['idempotency-problem'], 'idempotency-request-abandoned', JSON.stringify(answer));
      assert.equal(s.runs(), 0, JSON.stringify(answer));
    }
  });

  it('reconcile "not-happened" takes over and runs; the late original is fenced out', async () => {
    const s = setup({ reconcile: () => ({ outcome: 'not-happened' }) });
    const original = await s.guard.begin(demoRequest(KEY));
    assert.equal(original.kind, 'proceed');
    if (original.kind !== 'proceed') return;
    s.advance(31_000);
    const retry = await s.guard.handle(demoRequest(KEY), s.handler);
    assert.equal(retry.status, 201);
    assert.equal(retry.headers['idempotent-replayed'], 'false');
    assert.equal(s.runs(), 1);
    await s.guard.complete(original.reservation, jsonResponse(201, { id: 'late' }));
    const replay = await s.guard.handle(demoRequest(KEY), s.handler);
    assert.equal(bodyJson(replay).id, 'dr_1');
    assert.ok(s.events.some((e) => e.decision === 'fenced'));
  });

  it('a takeover that lands after the guard gave up on it (503) is given back: the next retry runs, not 409 in progress for a lease', async () => {
    const s = setup({ reconcile: () => ({ outcome: 'not-happened' }), storeTimeoutMs: 50 });
    const takeover = s.store.takeover.bind(s.store);
    let slow = true;
    s.store.takeover = async (...args: Parameters<MemoryStore['takeover']>) => {
      if (slow) await new Promise((resolve) => setTimeout(resolve, 150));
      return takeover(...args);
    };
    await s.guard.begin(demoRequest(KEY));
    s.advance(31_000);
    const late = await s.guard.handle(demoRequest(KEY), s.handler);
    assert.equal(late.status, 503);
    slow = false;
    await new Promise((resolve) => setTimeout(resolve, 300));
    const retry = await s.guard.handle(demoRequest(KEY), s.handler);
    assert.equal(retry.status, 201, JSON.stringify(bodyJson(retry)));
    assert.equal(s.runs(), 1);
  });

  it('a completion refused because the record is gone (a store that lost its data) is logged as record-lost, not fenced', async () => {
    const s = setup();
    const begun = await s.guard.begin(demoRequest(KEY));
    assert.equal(begun.kind, 'proceed');
    if (begun.kind !== 'proceed') return;
    // Redis restarted without persistence: every record is gone while the handler runs.
    await s.store.release(begun.reservation.recordId!, begun.reservation.token!);
    await s.guard.complete(begun.reservation, jsonResponse(201, { id: 'r1' }));
    const last = s.events.at(-1)!;
    assert.equal(last.decision, 'record-lost');
    assert.equal(last.state, 'absent');
    assert.equal(last.keyId, begun.reservation.recordId);
  });

  it('reconcile "unknown" (or a throwing hook) keeps the record', async () => {
    for (const reconcile of [() => ({ outcome: 'unknown' as const }), () => { throw new Error('provider down'); }]) {
      const s = setup({ reconcile });
      await s.guard.begin(demoRequest(KEY));
      s.advance(31_000);
      const second = await s.guard.handle(demoRequest(KEY), s.handler);
      assert.equal(problemType(second), `${PROBLEM_BASE}idempotency-request-abandoned`);
      assert.equal((await s.store.listAbandoned()).length, 1);
    }
  });

  it('a reconcile hook that never answers counts as unknown after reconcileTimeoutMs: 409 abandoned, logged as reconcile-failed (timeout), and the next retry asks again', async () => {
    // A review's: a provider lookup that hung held every retry of the key forever, with nothing logged.
    let hang = true;
    let asked = 0;
    const reconcile: ReconcileHook = () => {
      asked += 1;
      return hang ? new Promise<never>(() => {}) : { outcome: 'completed', response: jsonResponse(201, { id: 'dr_found' }) };
    };
    const s = setup({ reconcile, reconcileTimeoutMs: 100 });
    await s.guard.begin(demoRequest(KEY));
    s.advance(31_000);
    const started = performance.now();
    const stuck = await s.guard.handle(demoRequest(KEY), s.handler);
    const took = performance.now() - started;
    assert.equal(stuck.status, 409);
    assert.equal(stuck.headers['idempotency-problem'], 'idempotency-request-abandoned');
    assert.ok(took >= 90 && took < 2000, `answered after ${took} ms`);
    const failed = s.events.find((e) => e.decision === 'reconcile-failed');
    assert.deepEqual(failed && { reason: failed.reason, state: failed.state, keyId: typeof failed.keyId }, { reason: 'timeout', state: 'in_progress', keyId: 'string' });
    assert.equal((await s.store.listAbandoned()).length, 1, 'the record is kept');
    hang = false;
    const settled = await s.guard.handle(demoRequest(KEY), s.handler);
    assert.equal(settled.status, 201);
    assert.equal(bodyJson(settled).id, 'dr_found');
    assert.equal(asked, 2);
    assert.equal(s.runs(), 0);
  });

  it('retries that find one abandoned reservation while its hook runs share that one call: a completed verdict replays to all, not-happened runs the handler once', async () => {
    // Before: each of them asked the provider (20 retries → 20 lookups while it was slow).
    for (const outcome of ['completed', 'not-happened'] as const) {
      let asked = 0;
      const reconcile: ReconcileHook = async () => {
        asked += 1;
        await sleep(50);
        return outcome === 'completed' ? { outcome, response: jsonResponse(201, { id: 'dr_found' }), resultId: 'dr_found' } : { outcome };
      };
      const s = setup({ reconcile });
      await s.guard.begin(demoRequest(KEY));
      s.advance(31_000);
      const answers = await Promise.all(Array.from({ length: 20 }, () => s.guard.handle(demoRequest(KEY), s.handler)));
      assert.equal(asked, 1, outcome);
      if (outcome === 'completed') {
        assert.deepEqual([...new Set(answers.map((a) => `${a.status} ${bodyJson(a).id}`))], ['201 dr_found']);
        assert.equal(s.events.filter((e) => e.decision === 'reconciled').length, 1);
        assert.equal(s.runs(), 0);
      } else {
        assert.equal(s.runs(), 1, 'one takeover runs the handler');
        assert.equal(answers.filter((a) => a.status === 201).length, 1);
        assert.deepEqual([...new Set(answers.filter((a) => a.status !== 201).map((a) => `${a.status} ${a.headers['idempotency-problem']}`))], ['409 idempotency-request-in-progress']);
      }
    }
  });

  it('a hook call past reconcileTimeoutMs has its signal aborted, is logged once for all the retries that waited on it, and the next retry calls again', async () => {
    const calls: AbortSignal[] = [];
    const reconcile: ReconcileHook = ({ signal }) => {
      calls.push(signal);
      return new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted lookup'))));
    };
    const s = setup({ reconcile, reconcileTimeoutMs: 100 });
    await s.guard.begin(demoRequest(KEY));
    s.advance(31_000);
    const answers = await Promise.all(Array.from({ length: 10 }, () => s.guard.handle(demoRequest(KEY), s.handler)));
    assert.deepEqual([...new Set(answers.map((a) => `${a.status} ${a.headers['idempotency-problem']}`))], ['409 idempotency-request-abandoned']);
    assert.equal(calls.length, 1);
    assert.equal(calls[0]!.aborted, true, 'the provider lookup is told to stop');
    assert.deepEqual(s.events.filter((e) => e.decision === 'reconcile-failed').map((e) => e.reason), ['timeout']);
    assert.equal(s.events.filter((e) => e.decision === 'abandoned').length, 10);
    await s.guard.handle(demoRequest(KEY), s.handler);
    assert.equal(calls.length, 2);
    assert.equal(s.runs(), 0);
  });

  it('with reconcileTimeoutMs Infinity, a hook call that never ends does not hold the retries after it: each asks again', async () => {
    // A diff review's: the shared call was only dropped when it ended, so one hung call held every later retry for good.
    let asked = 0;
    const reconcile: ReconcileHook = () => (++asked === 1 ? new Promise<never>(() => {}) : { outcome: 'completed', response: jsonResponse(201, { id: 'dr_found' }) });
    const s = setup({ reconcile, reconcileTimeoutMs: Infinity });
    await s.guard.begin(demoRequest(KEY));
    s.advance(31_000);
    void s.guard.handle(demoRequest(KEY), s.handler);
    await sleep(20);
    const later = await Promise.race([s.guard.handle(demoRequest(KEY), s.handler), sleep(500).then(() => undefined)]);
    assert.equal(later?.status, 201);
    assert.equal(asked, 2);
  });

  it('a verdict that came in the turn the bound ran out is taken, and its call is not aborted', async () => {
    // A diff review's: the bound's expiry, deferred one turn for I/O, aborted the signal of a call whose verdict was used.
    let seen: AbortSignal | undefined;
    const { roundTrip, cat } = await catRoundTrips();
    try {
      let asked!: () => void;
      const hookRuns = new Promise<void>((resolve) => (asked = resolve));
      const reconcile: ReconcileHook = async ({ signal }) => {
        seen = signal;
        const reply = roundTrip();
        asked();
        await reply;
        return { outcome: 'completed', response: jsonResponse(201, { id: 'dr_found' }) };
      };
      const s = setup({ reconcile, reconcileTimeoutMs: 100 });
      await s.guard.begin(demoRequest(KEY));
      s.advance(31_000);
      const answer = s.guard.handle(demoRequest(KEY), s.handler);
      await hookRuns;
      // Stall the loop past the bound while the verdict comes through the other process.
      const until = performance.now() + 300;
      while (performance.now() < until);
      assert.equal((await answer).status, 201);
      await sleep(20);
      assert.equal(seen?.aborted, false);
    } finally {
      cat.kill();
    }
  });

  it('a hook that answers in time gets a signal that is never aborted', async () => {
    let seen: AbortSignal | undefined;
    const s = setup({ reconcile: ({ signal }) => ((seen = signal), { outcome: 'completed', response: jsonResponse(201, { id: 'dr_found' }) }), reconcileTimeoutMs: 50 });
    await s.guard.begin(demoRequest(KEY));
    s.advance(31_000);
    assert.equal((await s.guard.handle(demoRequest(KEY), s.handler)).status, 201);
    await sleep(100);
    assert.equal(seen?.aborted, false);
  });

  it('a "completed" verdict without an answer the record can hold leaves the record abandoned (409), logged as invalid-verdict — never a 500 or a 503', async () => {
    const body = new TextEncoder().encode('{"id":"dr_found"}');
    const verdicts: unknown[] = [
      { outcome: 'completed' },
      { outcome: 'completed', response: null },
      { outcome: 'completed', response: { status: 'abc', headers: {}, body } },
      { outcome: 'completed', response: { status: 201.5, headers: {}, body } },
      { outcome: 'completed', response: { status: 100, headers: {}, body } },
      { outcome: 'completed', response: { status: 600, headers: {}, body } },
      { outcome: 'completed', response: { status: 201, headers: {}, body: { id: 'dr_found' } } },
      { outcome: 'completed', response: { status: 201, headers: {}, body: '{"id":"dr_found"}' } },
      { outcome: 'completed', response: { status: 201, body } },
      { outcome: 'completed', response: { status: 201, headers: { 'content-type': 42 }, body } },
      { outcome: 'completed', response: { status: 201, headers: {}, body }, resultId: 7 },
      'unknown',
      undefined,
      { outcome: 'retry' },
    ];
    for (const verdict of verdicts) {
      const label = JSON.stringify(verdict) ?? 'undefined';
      const s = setup({ reconcile: () => verdict as never });
      await s.guard.begin(demoRequest(KEY));
      s.advance(31_000);
      const retry = await s.guard.handle(demoRequest(KEY), s.handler);
      assert.equal(retry.status, 409, label);
      assert.equal(retry.headers['idempotency-problem'], 'idempotency-request-abandoned', label);
      assert.deepEqual(s.events.filter((e) => e.decision === 'reconcile-failed').map((e) => e.reason), ['invalid-verdict'], label);
      const [kept] = await s.store.listAbandoned();
      assert.equal(kept?.state, 'in_progress', label);
      assert.equal(s.runs(), 0, label);
    }
  });

  it('a verdict that throws while it is read, or answers the check one thing and the guard another, is invalid-verdict: 409, never a 500 or a second run', async () => {
    // A diff review's: a getter that threw gave a 500 (Fastify's showing the hook's message); one that said `completed`
    // to the check and `not-happened` after it had the handler run again.
    const body = new TextEncoder().encode('{"id":"dr_found"}');
    const throwing = (what: string) => {
      throw new Error(`lazy provider field ${what}`);
    };
    let reads = 0;
    const verdicts: Array<[string, unknown]> = [
      ['outcome getter throws', { get outcome() { return throwing('outcome'); } }],
      ['response getter throws', { outcome: 'completed', get response() { return throwing('response'); } }],
      ['body getter throws', { outcome: 'completed', response: { status: 201, headers: {}, get body() { return throwing('body'); } } }],
      ['headers proxy throws', { outcome: 'completed', response: { status: 201, headers: new Proxy({}, { ownKeys: () => throwing('headers') }), body } }],
      ['outcome flips after the check', { get outcome() { reads += 1; return reads === 1 ? 'completed' : 'not-happened'; }, response: { status: 201, headers: {}, body: 42 } }],
      ['header value past Latin-1', { outcome: 'completed', response: { status: 201, headers: { 'x-note': 'snow \u2603' }, body } }],
      ['header value with CR LF', { outcome: 'completed', response: { status: 201, headers: { 'x-note': 'a\r\nset-cookie: s=1' }, body } }],
      ['header name with a space', { outcome: 'completed', response: { status: 201, headers: { 'x note': 'a' }, body } }],
    ];
    for (const [label, verdict] of verdicts) {
      reads = 0;
      const s = setup({ reconcile: () => verdict as never });
      await s.guard.begin(demoRequest(KEY));
      s.advance(31_000);
      const retry = await s.guard.handle(demoRequest(KEY), s.handler);
      assert.equal(retry.status, 409, label);
      assert.deepEqual(s.events.filter((e) => e.decision === 'reconcile-failed').map((e) => e.reason), ['invalid-verdict'], label);
      assert.equal((await s.store.listAbandoned()).length, 1, label);
      assert.equal(s.runs(), 0, label);
      assert.ok(!JSON.stringify(s.events).includes('lazy provider'), label);
    }
  });

  it('a "completed" verdict may carry a fetch Headers: its fields are recorded as the replay headers allow', async () => {
    const headers = new Headers({ 'content-type': 'application/json', location: '/v1/demo-requests/dr_found', 'set-cookie': 'provider-session=1' });
    const s = setup({ reconcile: () => ({ outcome: 'completed', response: { status: 201, headers: headers as never, body: new TextEncoder().encode('{"id":"dr_found"}') } }) });
    await s.guard.begin(demoRequest(KEY));
    s.advance(31_000);
    const replay = await s.guard.handle(demoRequest(KEY), s.handler);
    assert.equal(replay.status, 201);
    assert.deepEqual(replay.headers, { 'content-type': 'application/json', location: '/v1/demo-requests/dr_found', 'idempotent-replayed': 'true' });
  });

  it('a verdict that came in time is not thrown away when the loop stalled past reconcileTimeoutMs, nor one that still has to be decoded', async () => {
    // The provider's answer goes through another process (cat), which answers while this one is blocked. A diff review's:
    // a gzip answer decoded inside the hook's bound timed out after the stall where a plain one did not.
    const { roundTrip, cat } = await catRoundTrips();
    try {
      await roundTrip(); // cat is up
      const gzipped = gzipSync(JSON.stringify({ id: 'dr_found', pad: 'x'.repeat(200_000) }));
      for (const verdict of [{ outcome: 'not-happened' }, { outcome: 'completed', response: { status: 201, headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, body: gzipped } }] as const) {
        let asked = false;
        const s = setup({
          reconcileTimeoutMs: 100,
          reconcile: async () => {
            asked = true;
            await roundTrip();
            return verdict;
          },
        });
        await s.guard.begin(demoRequest(KEY));
        s.advance(31_000);
        const pending = s.guard.handle(demoRequest(KEY), s.handler);
        while (!asked) await new Promise((resolve) => setImmediate(resolve));
        const until = performance.now() + 300;
        while (performance.now() < until) {
          // A GC pause, a synchronous handler elsewhere in the process.
        }
        const answer = await pending;
        assert.equal(answer.status, 201, JSON.stringify(s.events));
        assert.equal(s.runs(), verdict.outcome === 'completed' ? 0 : 1);
        if (verdict.outcome === 'completed') {
          assert.equal(bodyJson(answer).id, 'dr_found');
          assert.equal(answer.headers['content-encoding'], undefined);
        }
      }
    } finally {
      cat.kill();
    }
  });

  it('a gzip verdict is recorded decoded; one already decoded (fetch) without its header; one past 16 MiB, or in a coding it cannot undo, as it came with its header', async () => {
    const json = '{"id":"dr_found"}';
    const huge = gzipSync(Buffer.alloc(17 * 1024 * 1024, 32));
    const cases: Array<[string, Record<string, string>, Uint8Array, string | undefined, Uint8Array]> = [
      ['gzip', { 'Content-Encoding': 'gzip' }, gzipSync(json), undefined, new TextEncoder().encode(json)],
      ['decoded already', { 'content-encoding': 'gzip' }, new TextEncoder().encode(json), undefined, new TextEncoder().encode(json)],
      ['past 16 MiB', { 'content-encoding': 'gzip' }, huge, 'gzip', huge],
      ['zstd', { 'content-encoding': 'zstd' }, new Uint8Array([40, 181, 47, 253]), 'zstd', new Uint8Array([40, 181, 47, 253])],
      ['two spellings', { 'Content-Encoding': 'gzip', 'content-encoding': 'gzip' }, gzipSync(json), undefined, new TextEncoder().encode(json)],
      ['truncated gzip', { 'content-encoding': 'gzip' }, gzipSync(json).subarray(0, 20), 'gzip', gzipSync(json).subarray(0, 20)],
      ['gzip with trailing bytes', { 'content-encoding': 'gzip' }, Buffer.concat([gzipSync(json), Buffer.from('junk')]), 'gzip', Buffer.concat([gzipSync(json), Buffer.from('junk')])],
    ];
    for (const [label, encoding, body, replayedEncoding, replayedBody] of cases) {
      const s = setup({ reconcile: () => ({ outcome: 'completed', response: { status: 201, headers: { 'content-type': 'application/json', ...encoding }, body } }) });
      await s.guard.begin(demoRequest(KEY));
      s.advance(31_000);
      const replay = await s.guard.handle(demoRequest(KEY), s.handler);
      assert.equal(replay.status, 201, label);
      assert.equal(replay.headers['content-encoding'], replayedEncoding, label);
      assert.ok(Buffer.from(replay.body).equals(Buffer.from(replayedBody)), label);
    }
  });

  it('time bounds are checked at creation: NaN, 0, negative or past a timer\'s reach throw; reconcileTimeoutMs may be Infinity (no bound)', async () => {
    for (const value of [Number.NaN, 0, -5, 2 ** 31, Infinity]) {
      assert.throws(() => createGuard(demoContract(), { store: new MemoryStore(), storeTimeoutMs: value }), /storeTimeoutMs must be a number of milliseconds above 0/, String(value));
    }
    assert.throws(() => createGuard(demoContract(), { store: new MemoryStore(), storeTimeoutMs: '2000' as never }), /storeTimeoutMs must be .*; got string "2000"/);
    assert.doesNotThrow(() => createGuard(demoContract(), { store: new MemoryStore(), storeTimeoutMs: null as never, reconcileTimeoutMs: null as never }));
    for (const value of [Number.NaN, 0, -5, 2 ** 31]) {
      assert.throws(() => createGuard(demoContract(), { store: new MemoryStore(), reconcileTimeoutMs: value }), /reconcileTimeoutMs must be .* or Infinity for no bound/, String(value));
    }
    const s = setup({
      reconcileTimeoutMs: Infinity,
      reconcile: async () => {
        await new Promise((resolve) => setTimeout(resolve, 20));
        return { outcome: 'not-happened' };
      },
    });
    await s.guard.begin(demoRequest(KEY));
    s.advance(31_000);
    assert.equal((await s.guard.handle(demoRequest(KEY), s.handler)).status, 201);
    assert.equal(s.runs(), 1);
  });

  it('a throwing hook is logged as reconcile-failed (threw) without its message; an honest "unknown" only as abandoned', async () => {
    const thrower = setup({
      reconcile: () => {
        throw new Error(`provider lookup failed for ${KEY}`);
      },
    });
    await thrower.guard.begin(demoRequest(KEY));
    thrower.advance(31_000);
    assert.equal((await thrower.guard.handle(demoRequest(KEY), thrower.handler)).status, 409);
    assert.deepEqual(thrower.events.filter((e) => e.decision === 'reconcile-failed').map((e) => e.reason), ['threw']);
    assert.ok(!JSON.stringify(thrower.events).includes('provider lookup failed'));
    const honest = setup({ reconcile: () => ({ outcome: 'unknown' }) });
    await honest.guard.begin(demoRequest(KEY));
    honest.advance(31_000);
    assert.equal((await honest.guard.handle(demoRequest(KEY), honest.handler)).status, 409);
    assert.deepEqual(honest.events.map((e) => e.decision), ['reserved', 'abandoned']);
  });

  it('recordId gives the id of the record a key maps to in its scope, as the logs and the store name it', async () => {
    const s = setup();
    const begun = await s.guard.begin(demoRequest(KEY));
    assert.equal(begun.kind, 'proceed');
    const before = s.events.length;
    const id = s.guard.recordId({ pathParams: {}, query: {}, headers: { 'idempotency-key': KEY, 'x-tenant-id': 't1' }, body: undefined, principal: 'user-1' });
    assert.equal(id, begun.kind === 'proceed' ? begun.reservation.recordId : 'not reserved');
    assert.equal((await s.store.get(id!))?.state, 'in_progress');
    assert.equal(s.events.find((e) => e.decision === 'reserved')?.keyId, id);
    // Another owner, another tenant: another record.
    assert.notEqual(s.guard.recordId(demoRequest(KEY, undefined, { principal: 'user-2' })), id);
    assert.notEqual(s.guard.recordId(demoRequest(KEY, undefined, { headers: { 'idempotency-key': KEY, 'x-tenant-id': 't2' } })), id);
    // No usable key, or a scope the request cannot resolve: no id, and nothing logged.
    assert.equal(s.guard.recordId(demoRequest(undefined)), undefined);
    assert.equal(s.guard.recordId(demoRequest('x'.repeat(10_000))), undefined);
    assert.equal(s.guard.recordId(demoRequest(KEY, undefined, { principal: undefined as never })), undefined);
    assert.equal(s.guard.recordId(demoRequest(KEY, undefined, { headers: { 'idempotency-key': KEY } })), undefined);
    assert.equal(s.events.length, before);
  });

  it('only one of many concurrent "not-happened" takeovers runs the handler', async () => {
    const s = setup({ reconcile: () => ({ outcome: 'not-happened' }) });
    await s.guard.begin(demoRequest(KEY));
    s.advance(31_000);
    const answers = await Promise.all(Array.from({ length: 20 }, () => s.guard.handle(demoRequest(KEY), s.handler)));
    assert.equal(s.runs(), 1);
    assert.equal(answers.filter((a) => a.headers['idempotent-replayed'] === 'false').length, 1);
  });

  it('treats an expired completed record as absent', async () => {
    const s = setup();
    await s.guard.handle(demoRequest(KEY), s.handler);
    s.advance(86_400_000);
    const again = await s.guard.handle(demoRequest(KEY, { topic: 'something else' }), s.handler);
    assert.equal(again.headers['idempotent-replayed'], 'false');
    assert.equal(s.runs(), 2);
  });
});

describe('runtime/guard: recording the outcome', () => {
  for (const status of [429, 503]) {
    it(`releases the key on the transient status ${status}`, async () => {
      const s = setup();
      const first = await s.guard.handle(demoRequest(KEY), async () => jsonResponse(status, { error: 'busy' }));
      assert.equal(first.status, status);
      const retry = await s.guard.handle(demoRequest(KEY), s.handler);
      assert.equal(retry.status, 201);
      assert.equal(s.runs(), 1);
    });
  }

  it('with an external effect (compiled transient [429]), a handler 503 keeps the key (the provider may have acted); 429 still releases', async () => {
    const external = demoContract({ effect: { owner: 'pay', external: true, providerKey: 'none' }, transient: [429] });
    const s = setup({}, external);
    await s.guard.handle(demoRequest(KEY), async () => jsonResponse(503, { error: 'provider timed out' }));
    const retry = await s.guard.handle(demoRequest(KEY), s.handler);
    assert.equal(retry.status, 409);
    assert.equal(s.runs(), 0);
    const other = 'another-key-for-the-429-case';
    await s.guard.handle(demoRequest(other), async () => jsonResponse(429, { error: 'slow down' }));
    assert.equal((await s.guard.handle(demoRequest(other), s.handler)).status, 201);
    // A list the contract chose itself is kept as written, even [429, 503] (the compiler's non-external default).
    for (const written of [[503], [429, 503]]) {
      const chosen = setup({}, demoContract({ effect: { owner: 'pay', external: true, providerKey: 'none' }, transient: written }));
      await chosen.guard.handle(demoRequest(KEY), async () => jsonResponse(503, {}));
      assert.equal((await chosen.guard.handle(demoRequest(KEY), chosen.handler)).status, 201, JSON.stringify(written));
    }
  });

  it('keeps the reservation on a non-transient 5xx (the effect may have happened), and ends its lease: a retry is abandoned, not in progress', async () => {
    const s = setup();
    await s.guard.handle(demoRequest(KEY), async () => jsonResponse(500, { error: 'boom' }));
    const retry = await s.guard.handle(demoRequest(KEY), s.handler);
    assert.equal(retry.status, 409);
    assert.equal(problemType(retry), `${PROBLEM_BASE}idempotency-request-abandoned`, 'the handler has finished: nothing is in progress');
    assert.equal(s.runs(), 0);
    assert.equal((await s.store.listAbandoned()).length, 1);
  });

  it('after a 5xx or a throw, the retry goes to the reconcile hook at once (no wait for the lease)', async () => {
    let verdicts = 0;
    const s = setup({ reconcile: () => ((verdicts += 1), { outcome: 'not-happened' }) });
    await s.guard.handle(demoRequest(KEY), async () => jsonResponse(500, { error: 'boom' }));
    const retry = await s.guard.handle(demoRequest(KEY), s.handler);
    assert.equal(verdicts, 1);
    assert.equal(retry.status, 201);
    assert.equal(s.runs(), 1);
    const other = 'thrown-then-retried';
    await assert.rejects(s.guard.handle(demoRequest(other), async () => { throw new Error('crash'); }), /crash/);
    assert.equal((await s.guard.handle(demoRequest(other), s.handler)).status, 201);
    assert.equal(verdicts, 2);
    assert.equal(s.runs(), 2);
  });

  it('an external effect keeps its lease after a 5xx: work handed to a provider may still act', async () => {
    const s = setup({}, demoContract({ effect: { owner: 'payments', external: true, providerKey: 'forward', statusRoute: 'getDemoRequest' }, transient: [429] }));
    await s.guard.handle(demoRequest(KEY), async () => jsonResponse(504, { error: 'provider timed out' }));
    const retry = await s.guard.handle(demoRequest(KEY), s.handler);
    assert.equal(problemType(retry), `${PROBLEM_BASE}idempotency-request-in-progress`);
    assert.deepEqual(await s.store.listAbandoned(), []);
    s.advance(30_000);
    assert.equal((await s.store.listAbandoned()).length, 1, 'the lease runs its course');
  });

  it('ending the lease waits for a heartbeat still on its way — even one past its time bound — so none renews it afterwards', async () => {
    let t = 1_800_000_000_000;
    const clock = () => t;
    const memory = new MemoryStore({ clock });
    const calls: number[] = [];
    let heartbeatSent: () => void = () => undefined;
    const sent = new Promise<void>((resolve) => (heartbeatSent = resolve));
    let leaseEnded: () => void = () => undefined;
    const ended = new Promise<void>((resolve) => (leaseEnded = resolve));
    let releaseBeat: () => void = () => undefined;
    // A heartbeat (extend with the lease) that lands late, as on another pooled connection, after its 20 ms bound.
    const store = withExtend(memory, async (id, token, leaseMs) => {
      calls.push(leaseMs);
      if (leaseMs > 0) {
        heartbeatSent();
        await new Promise<void>((resolve) => (releaseBeat = resolve));
      } else leaseEnded();
      return memory.extend(id, token, leaseMs);
    });
    const guard = createGuard(demoContract({ leaseMs: 90 }), { store, now: clock, storeTimeoutMs: 20, leaseRenewalMaxMs: 45 });
    const begun = await guard.begin(demoRequest(KEY));
    assert.equal(begun.kind, 'proceed');
    if (begun.kind !== 'proceed') return;
    await sent; // the first heartbeat (at 30 ms) went out and hangs; renewals stop at 45 ms: no second one
    await new Promise((resolve) => setTimeout(resolve, 50)); // well past its 20 ms bound
    await guard.complete(begun.reservation, jsonResponse(500, { error: 'boom' }));
    assert.deepEqual(calls, [90], 'the lease end waits for the heartbeat');
    releaseBeat();
    await ended;
    assert.deepEqual(calls, [90, 0], 'then ends the lease, last');
    t += 1;
    assert.equal((await memory.listAbandoned()).length, 1);
  });

  it('a 5xx goes out without waiting for the lease end', async () => {
    const memory = new MemoryStore();
    let answerEnd: (extended: boolean) => void = () => undefined;
    let endSettled = false;
    const store = withExtend(memory, () =>
      new Promise<boolean>((resolve) => (answerEnd = resolve)).then((extended) => ((endSettled = true), extended)),
    );
    const guard = createGuard(demoContract(), { store });
    const answer = await guard.handle(demoRequest(KEY), async () => jsonResponse(500, { error: 'boom' }));
    assert.equal(answer.status, 500);
    assert.equal(endSettled, false, 'the answer came while the store still had the lease end');
    answerEnd(true);
  });

  it('keeps the reservation when the handler throws, and rethrows', async () => {
    const s = setup();
    await assert.rejects(s.guard.handle(demoRequest(KEY), async () => { throw new Error('db write failed?'); }), /db write failed/);
    s.advance(31_000);
    assert.equal((await s.store.listAbandoned()).length, 1);
  });

  it('abort with rolledBack releases; without it keeps', async () => {
    const s = setup();
    const a = await s.guard.begin(demoRequest('k-a'));
    const b = await s.guard.begin(demoRequest('k-b'));
    assert.ok(a.kind === 'proceed' && b.kind === 'proceed');
    if (a.kind !== 'proceed' || b.kind !== 'proceed') return;
    await s.guard.abort(a.reservation, { rolledBack: true });
    await s.guard.abort(b.reservation, { rolledBack: false, error: new Error('x') });
    assert.equal(await s.store.get(a.reservation.recordId!), undefined);
    assert.equal((await s.store.get(b.reservation.recordId!))?.state, 'in_progress');
  });

  it('records only allow-listed headers and a custom result id', async () => {
    const s = setup({ replayHeaders: ['Location', 'X-Trace'], resultId: (body) => (body as { ref: string }).ref });
    const first = await s.guard.begin(demoRequest(KEY));
    if (first.kind !== 'proceed') throw new Error('expected proceed');
    await s.guard.complete(first.reservation, jsonResponse(201, { ref: 'R-9' }, { Location: '/x', 'X-Trace': 't', 'Set-Cookie': 's=1' }));
    const record = await s.store.get(first.reservation.recordId!);
    assert.deepEqual(record?.response?.headers, { location: '/x', 'x-trace': 't' });
    assert.equal(record?.resultId, 'R-9');
  });

  it('refuses one-transaction mode on a store without transactions', async () => {
    const s = setup();
    await assert.rejects(s.guard.handle(demoRequest(KEY), s.handler, { transaction: true }), (e: unknown) => e instanceof StoreError && e.kind === 'unsupported');
  });

  it('lets exactly one of 50 concurrent deliveries run the handler', async () => {
    const s = setup();
    const answers = await Promise.all(Array.from({ length: 50 }, () => s.guard.handle(demoRequest(KEY), s.handler)));
    assert.equal(s.runs(), 1);
    assert.equal(answers.filter((a) => a.headers['idempotent-replayed'] === 'false').length, 1);
    assert.ok(answers.every((a) => a.status === 201 || a.status === 409));
  });
});

describe('runtime/guard: lease renewal', () => {
  it('renews a running owner\'s lease (store with extend), so a slow handler is in progress, not abandoned; renewal stops at the end', async () => {
    const store = new MemoryStore();
    const contract = demoContract({ leaseMs: 90 });
    const reconciled: number[] = [];
    const guard = createGuard(contract, { store, reconcile: (a) => { reconciled.push(a.leaseUntil - a.createdAt); return { outcome: 'not-happened' }; } });
    let runs = 0;
    const slow = guard.handle(demoRequest(KEY), async () => {
      runs += 1;
      await new Promise((resolve) => setTimeout(resolve, 400));
      return jsonResponse(201, { id: 'slow' });
    });
    await new Promise((resolve) => setTimeout(resolve, 250));
    const duplicate = await guard.handle(demoRequest(KEY), async () => { runs += 1; return jsonResponse(201, { id: 'second' }); });
    assert.equal(problemType(duplicate), `${PROBLEM_BASE}idempotency-request-in-progress`, 'the live owner is not abandoned');
    assert.deepEqual(reconciled, []);
    assert.equal((await slow).status, 201);
    assert.equal(runs, 1);
    // Renewal stopped with the completion: nothing extends a finished record.
    const other = 'kept-after-a-throw';
    await assert.rejects(guard.handle(demoRequest(other), async () => { throw new Error('crash'); }));
    await new Promise((resolve) => setTimeout(resolve, 150));
    assert.equal((await store.listAbandoned()).length, 1, 'after abort the lease runs out into reconciliation');
  });
});

describe('runtime/guard: lease renewal keeps one effect when clocks or calls misbehave', () => {
  // A handler that outlives its 90–300 ms lease; a retry comes while it still runs.
  async function retryDuringSlowHandler(store: IdempotencyStore, options: { leaseMs: number; now?: () => number; retryAfterMs: number; onStarted?: () => void }) {
    const guard = createGuard(demoContract({ leaseMs: options.leaseMs }), {
      store,
      ...(options.now ? { now: options.now } : {}),
      reconcile: () => ({ outcome: 'not-happened' }),
    });
    let effects = 0;
    const handler = async () => {
      effects += 1;
      options.onStarted?.();
      await new Promise((resolve) => setTimeout(resolve, options.retryAfterMs + 300));
      return jsonResponse(201, { id: `effect-${effects}` });
    };
    const first = guard.handle(demoRequest(KEY), handler);
    await new Promise((resolve) => setTimeout(resolve, options.retryAfterMs));
    const retry = await guard.handle(demoRequest(KEY), handler);
    await first;
    return { retry, effects: () => effects };
  }

  it('renews on real elapsed time, not on the guard clock: a frozen `now` still keeps the owner in progress', async () => {
    const { retry, effects } = await retryDuringSlowHandler(new MemoryStore(), { leaseMs: 90, now: () => 1_800_000_000_000, retryAfterMs: 250 });
    assert.equal(problemType(retry), `${PROBLEM_BASE}idempotency-request-in-progress`);
    assert.equal(effects(), 1);
  });

  it('renews on real elapsed time: the guard host\'s wall clock stepping back (NTP) does not stop renewals', async () => {
    let offset = 0;
    const { retry, effects } = await retryDuringSlowHandler(new MemoryStore(), {
      leaseMs: 90,
      now: () => Date.now() - offset,
      retryAfterMs: 250,
      onStarted: () => setTimeout(() => (offset = 3_600_000), 10),
    });
    assert.equal(problemType(retry), `${PROBLEM_BASE}idempotency-request-in-progress`);
    assert.equal(effects(), 1);
  });

  it('one renewal that never answers does not hold back the next ones', async () => {
    const inner = new MemoryStore();
    let extendCalls = 0;
    const store: IdempotencyStore = {
      reserve: (input) => inner.reserve(input),
      complete: (...args) => inner.complete(...args),
      release: (...args) => inner.release(...args),
      takeover: (...args) => inner.takeover(...args),
      get: (id) => inner.get(id),
      listAbandoned: (...args) => inner.listAbandoned(...args),
      purgeExpired: (...args) => inner.purgeExpired(...args),
      now: () => inner.now(),
      // The first renewal is lost on the way (a dead connection); later ones get through.
      extend: (id, token, leaseMs) => (++extendCalls === 1 ? new Promise<boolean>(() => undefined) : inner.extend(id, token, leaseMs)),
    };
    const { retry, effects } = await retryDuringSlowHandler(store, { leaseMs: 300, retryAfterMs: 600 });
    assert.equal(problemType(retry), `${PROBLEM_BASE}idempotency-request-in-progress`);
    assert.equal(effects(), 1);
    assert.ok(extendCalls >= 2, `extend called ${extendCalls} time(s)`);
  });
});

describe('runtime/guard: answers in the API\'s own error format (renderProblem)', () => {
  const gocardless = (p: GuardProblem) => ({ body: { error: { type: 'invalid_api_usage', code: p.status, reason: p.name, message: p.detail, request_id: p.requestId } } });

  it('renders every guard answer with the hook; status, Retry-After and no-store stay the guard\'s', async () => {
    const seen: string[] = [];
    const s = setup({ renderProblem: (p) => (seen.push(p.name), gocardless(p)) });
    const missing = await s.guard.handle(demoRequest(undefined), s.handler);
    assert.equal(missing.status, 400);
    assert.equal(missing.headers['content-type'], 'application/json');
    assert.deepEqual(bodyJson(missing), {
      error: { type: 'invalid_api_usage', code: 400, reason: 'idempotency-key-missing', message: 'Send the Idempotency-Key header: one key per intent, kept across retries.', request_id: 'req-1' },
    });
    const first = await s.guard.begin(demoRequest(KEY));
    assert.equal(first.kind, 'proceed');
    const busy = await s.guard.handle(demoRequest(KEY), s.handler);
    assert.equal(busy.status, 409);
    assert.equal(busy.headers['retry-after'], '1');
    assert.equal(busy.headers['cache-control'], 'no-store');
    assert.equal((bodyJson(busy) as unknown as { error: { reason: string } }).error.reason, 'idempotency-request-in-progress');
    const other = await s.guard.handle(demoRequest(KEY, { topic: 'other', contact: { email: 'a@example.com' } }), s.handler);
    assert.equal(other.status, 422);
    assert.deepEqual(seen, ['idempotency-key-missing', 'idempotency-request-in-progress', 'idempotency-key-reused']);
    assert.equal(s.runs(), 0);
  });

  it('text and bytes go as they are with the given media type; a throwing or empty renderer leaves problem details', async () => {
    const text = setup({ renderProblem: (p) => ({ body: `error: ${p.name}`, contentType: 'text/plain; charset=utf-8' }) });
    const plain = await text.guard.handle(demoRequest(undefined), text.handler);
    assert.equal(plain.headers['content-type'], 'text/plain; charset=utf-8');
    assert.equal(Buffer.from(plain.body).toString('utf8'), 'error: idempotency-key-missing');
    for (const renderProblem of [() => { throw new Error('renderer bug'); }, () => undefined as never, () => ({ body: undefined })]) {
      const s = setup({ renderProblem });
      const answer = await s.guard.handle(demoRequest(undefined), s.handler);
      assert.equal(answer.status, 400);
      assert.equal(answer.headers['content-type'], 'application/problem+json');
      assert.equal(problemType(answer), `${PROBLEM_BASE}idempotency-key-missing`);
    }
    // Extra headers (Stainless SDKs obey x-should-retry); the guard's own headers win; malformed lines are dropped.
    const stainless = setup({
      renderProblem: (p) => ({
        body: { error: { message: p.detail } },
        headers: { 'X-Should-Retry': p.status === 409 && p.name === 'idempotency-request-in-progress' ? 'true' : 'false', 'Retry-After': '99', 'x-bad': 'a\r\nx-injected: 1', 'bad name': 'x' },
      }),
    });
    const rejected = await stainless.guard.handle(demoRequest(undefined), stainless.handler);
    assert.equal(rejected.headers['x-should-retry'], 'false');
    assert.equal(rejected.headers['retry-after'], undefined, 'a renderer cannot invent a Retry-After the guard did not give');
    assert.equal(rejected.headers['x-bad'], undefined);
    assert.equal(Object.keys(rejected.headers).some((name) => name.includes(' ')), false);
    await stainless.guard.begin(demoRequest(KEY));
    const busy = await stainless.guard.handle(demoRequest(KEY), stainless.handler);
    assert.equal(busy.headers['x-should-retry'], 'true');
    assert.equal(busy.headers['retry-after'], '1', "the guard's Retry-After wins");
    // Every guard answer names its problem in a header a renderer cannot change, nor can it set the replay header.
    assert.equal(rejected.headers['idempotency-problem'], 'idempotency-key-missing');
    const sneaky = setup({ renderProblem: () => ({ body: {}, headers: { 'Idempotent-Replayed': 'true', 'Idempotency-Problem': 'x' } }) });
    const sneaked = await sneaky.guard.handle(demoRequest(undefined), sneaky.handler);
    assert.equal(sneaked.headers['idempotent-replayed'], undefined);
    assert.equal(sneaked.headers['idempotency-problem'], 'idempotency-key-missing');
    // Bodies: an ArrayBuffer as bytes; one JSON cannot write, or headers that are not an object, leave problem details / no headers.
    const buffer = setup({ renderProblem: () => ({ body: new TextEncoder().encode('raw').buffer, contentType: 'text/plain', headers: 'abc' as never }) });
    const raw = await buffer.guard.handle(demoRequest(undefined), buffer.handler);
    assert.equal(Buffer.from(raw.body).toString('utf8'), 'raw');
    assert.equal(raw.headers['0'], undefined);
    const bigint = setup({ renderProblem: () => ({ body: { n: 1n } }) });
    const fallback = await bigint.guard.handle(demoRequest(undefined), bigint.handler);
    assert.equal(fallback.headers['content-type'], 'application/problem+json');
    // A media type that is not one header line is not sent.
    const bad = setup({ renderProblem: () => ({ body: {}, contentType: 'application/json\r\nx-injected: 1' }) });
    assert.equal((await bad.guard.handle(demoRequest(undefined), bad.handler)).headers['content-type'], 'application/json');
  });
});

describe('runtime/guard: OASIS Repeatable Requests (Repeatability-Request-ID, as Azure SDKs send it)', () => {
  const contract = demoContract({ key: { in: 'header', name: 'Repeatability-Request-ID', required: true, maxLength: 64 }, ttlMs: 300_000 });
  const request = (id: string, firstSent: string | undefined, body?: unknown) => {
    const base = demoRequest(undefined, body);
    return { ...base, headers: { ...base.headers, 'repeatability-request-id': id, ...(firstSent === undefined ? {} : { 'repeatability-first-sent': firstSent }) } };
  };

  it('accepted: the first answer and the replay say Repeatability-Result: accepted', async () => {
    const s = setup({}, contract);
    const sent = new Date(1_800_000_000_000 - 60_000).toUTCString();
    const first = await s.guard.handle(request('r-1', sent), s.handler);
    assert.equal(first.status, 201);
    assert.equal(first.headers['repeatability-result'], 'accepted');
    const again = await s.guard.handle(request('r-1', sent), s.handler);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.headers['repeatability-result'], 'accepted');
    assert.equal(s.runs(), 1);
    const changed = await s.guard.handle(request('r-1', sent, { topic: 'other', contact: { email: 'a@example.com' } }), s.handler);
    assert.equal(changed.status, 422);
    assert.equal(changed.headers['repeatability-result'], 'rejected');
  });

  it('a request first sent longer ago than the records kept is refused with 412, not run again; a bad date is 400', async () => {
    const s = setup({}, contract);
    const stale = await s.guard.handle(request('r-2', new Date(1_800_000_000_000 - 301_000).toUTCString()), s.handler);
    assert.equal(stale.status, 412);
    assert.equal(stale.headers['repeatability-result'], 'rejected');
    assert.equal(stale.headers['idempotency-problem'], 'idempotency-request-expired');
    const bad = await s.guard.handle(request('r-3', 'yesterday'), s.handler);
    assert.equal(bad.status, 400);
    assert.equal(problemType(bad), `${PROBLEM_BASE}idempotency-key-invalid`);
    // Only an IMF-fixdate: other forms Date.parse would read (ISO, "1", asctime in local time) are 400.
    for (const text of ['2026-11-30T10:00:00Z', '1', 'Sun Nov  6 08:49:37 1994', 'Mon, 31 Feb 2027 00:00:00 GMT']) {
      assert.equal((await s.guard.handle(request(`r-bad-${text}`, text), s.handler)).status, 400, text);
    }
    // A client clock ahead by more than the tolerance (a tenth of the 5 min TTL) is refused; a little ahead is fine.
    assert.equal((await s.guard.handle(request('r-future', new Date(1_800_000_000_000 + 31_000).toUTCString()), s.handler)).status, 400);
    assert.equal((await s.guard.handle(request('r-ahead', new Date(1_800_000_000_000 + 20_000).toUTCString()), s.handler)).status, 201);
    // The window shrinks by the tolerance: first sent 290 s ago (under the 300 s TTL, over 270 s) is already stale.
    assert.equal((await s.guard.handle(request('r-edge', new Date(1_800_000_000_000 - 290_000).toUTCString()), s.handler)).status, 412);
    assert.ok(s.events.some((e) => e.decision === 'expired' && e.keyId !== undefined), 'the 412 is logged with the hashed key id');
    // Without the header (or with an ordinary key header) nothing changes.
    assert.equal((await s.guard.handle(request('r-4', undefined), s.handler)).status, 201);
    assert.equal(s.runs(), 2);
    const plain = setup();
    const answer = await plain.guard.handle(demoRequest(KEY), plain.handler);
    assert.equal(answer.headers['repeatability-result'], undefined);
  });
});

describe('runtime/guard: OASIS answers beyond the first', () => {
  const contract = demoContract({ key: { in: 'header', name: 'Repeatability-Request-ID', required: true, maxLength: 64 } });
  const request = (id: string) => {
    const base = demoRequest(undefined);
    return { ...base, headers: { ...base.headers, 'repeatability-request-id': id } };
  };

  it('in progress is accepted; a store outage says nothing; a renderer cannot set the result', async () => {
    const s = setup({ renderProblem: () => ({ body: {}, headers: { 'Repeatability-Result': 'accepted' } }) }, contract);
    await s.guard.begin(request('r-1'));
    const busy = await s.guard.handle(request('r-1'), s.handler);
    assert.equal(busy.status, 409);
    assert.equal(busy.headers['repeatability-result'], 'accepted');
    const missing = await s.guard.handle({ ...request('x'), headers: { 'x-tenant-id': 't1' } }, s.handler);
    assert.equal(missing.headers['repeatability-result'], 'rejected', "the guard's value, not the renderer's");
    const fail = () => Promise.reject(new Error('ECONNREFUSED'));
    const broken: IdempotencyStore = { reserve: fail, complete: fail, release: fail, takeover: fail, get: fail, listAbandoned: fail, purgeExpired: fail, now: fail };
    const down = createGuard(contract, { store: broken, storeTimeoutMs: 50, renderProblem: () => ({ body: {}, headers: { 'Repeatability-Result': 'accepted' } }) });
    const outage = await down.handle(request('r-2'), s.handler);
    assert.equal(outage.status, 503);
    assert.equal(outage.headers['repeatability-result'], undefined);
  });
});

describe('runtime/guard: names that are Object.prototype members', () => {
  it('a query parameter named constructor is absent unless sent, and fingerprinted when sent', async () => {
    const s = setup({}, demoContract({ fingerprint: { include: ['/topic'], exclude: [], query: ['constructor', '__proto__'] } }));
    const first = await s.guard.handle(demoRequest(KEY), s.handler);
    assert.equal(first.status, 201, 'no "function has no JSON form" from Object.prototype.constructor');
    const withQuery = await s.guard.handle(demoRequest(KEY, undefined, { query: JSON.parse('{"constructor":"a","__proto__":"b"}') as Record<string, string> }), s.handler);
    assert.equal(withQuery.status, 422, 'another query is another request');
  });
});

describe('runtime/guard: store failures', () => {
  function brokenStore(mode: 'reject' | 'hang' | 'throw'): IdempotencyStore {
    const fail = (): Promise<never> => {
      // 'throw': a store written without async that throws instead of returning a rejected promise.
      if (mode === 'throw') throw new Error('ECONNREFUSED');
      return mode === 'reject' ? Promise.reject(new Error('ECONNREFUSED')) : new Promise<never>(() => undefined);
    };
    return {
      reserve: fail, complete: fail, release: fail, takeover: fail, get: fail, listAbandoned: fail, purgeExpired: fail, now: fail,
    };
  }

  it('logs what the store said as its kind and code, never its message: a read-only server reads apart from an outage', async () => {
    const events: GuardLogEvent[] = [];
    const readOnly = Object.assign(new Error('cannot execute INSERT in a read-only transaction (key stripe-secret-123)'), { code: '25006' });
    const cases: [IdempotencyStore['reserve'], string][] = [
      [() => Promise.reject(new StoreError('unavailable', 'PostgreSQL store operation failed (25006)', { cause: readOnly })), 'unavailable 25006'],
      [() => Promise.reject(new StoreError('unavailable', 'Redis store operation failed', { cause: new Error("READONLY You can't write against a read only replica.") })), 'unavailable READONLY'],
      [() => Promise.reject(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })), 'unavailable ECONNREFUSED'],
      [() => new Promise<never>(() => undefined), 'unavailable timeout'],
    ];
    for (const [reserve, expected] of cases) {
      events.length = 0;
      const guard = createGuard(demoContract(), { store: withMethods(new MemoryStore(), { reserve }), storeTimeoutMs: 100, log: (e) => events.push(e) });
      assert.equal((await guard.handle(demoRequest(KEY), async () => jsonResponse(201, {}))).status, 503);
      assert.deepEqual(events.map((e) => [e.decision, e.storeError]), [['store-unavailable', expected]]);
      assert.doesNotMatch(JSON.stringify(events), /stripe-secret|read-only transaction|127\.0\.0\.1/);
    }
  });

  for (const mode of ['reject', 'hang', 'throw'] as const) {
    it(`fails closed with 503 + Retry-After when the store ${mode === 'reject' ? 'errors' : mode === 'throw' ? 'throws' : 'does not answer'}`, async () => {
      let runs = 0;
      const guard = createGuard(demoContract(), { store: brokenStore(mode), storeTimeoutMs: 100, storeRetryAfterSeconds: 2 });
      const started = Date.now();
      const response = await guard.handle(demoRequest(KEY), async () => { runs += 1; return jsonResponse(201, {}); });
      const elapsed = Date.now() - started;
      assert.equal(response.status, 503);
      assert.equal(response.headers['retry-after'], '2');
      assert.equal(problemType(response), `${PROBLEM_BASE}idempotency-store-unavailable`);
      assert.equal(runs, 0);
      // "never hangs": generous slack over the 100 ms bound for a loaded machine.
      assert.ok(elapsed < 2000, `answered after ${elapsed} ms`);
    });
  }

  /** `inner` whose reservations land only once `releaseLater()` is called; `methods` override the rest. */
  function lateStore(inner: MemoryStore, methods: Partial<IdempotencyStore>): { slow: IdempotencyStore; releaseLater: () => void } {
    let releaseLater!: () => void;
    const gate = new Promise<void>((resolve) => { releaseLater = resolve; });
    const slow: IdempotencyStore = Object.assign(Object.create(inner) as IdempotencyStore, {
      reserve: async (input: Parameters<IdempotencyStore['reserve']>[0]) => { await gate; return inner.reserve(input); },
      ...methods,
    });
    return { slow, releaseLater };
  }

  for (const [verdict, method] of [['completed', 'complete'], ['completed', 'get'], ['not-happened', 'takeover']] as const) {
    it(`answers 503 + Retry-After when the store's ${method} throws instead of rejecting while an abandoned record is reconciled (${verdict})`, async () => {
      let t = 1_800_000_000_000;
      const memory = new MemoryStore({ clock: () => t });
      // The memory store, except that once armed its `method` throws synchronously, like a store written without async.
      let armed = false;
      const original = memory[method].bind(memory) as (...args: unknown[]) => unknown;
      const store = withMethods(memory, {
        [method]: (...args: unknown[]) => {
          if (armed) throw new Error('ECONNRESET');
          return original(...args);
        },
      });
      const reconcile: ReconcileHook = () =>
        verdict === 'completed' ? { outcome: 'completed', response: jsonResponse(201, { id: 'dr_found' }) } : { outcome: 'not-happened' };
      const guard = createGuard(demoContract(), { store, now: () => t, reconcile });
      await guard.begin(demoRequest(KEY));
      t += 31_000;
      armed = true;
      let runs = 0;
      const answer = await guard.handle(demoRequest(KEY), async () => (runs++, jsonResponse(201, {})));
      assert.equal(answer.status, 503);
      assert.ok(answer.headers['retry-after']);
      assert.equal(runs, 0);
    });
  }

  it('works with a frozen store, and finds a store method added after the guard was built, run on the store itself', async () => {
    const memory = new MemoryStore();
    const frozen: IdempotencyStore = Object.freeze({
      reserve: (input: ReserveInput) => memory.reserve(input),
      complete: (...args: Parameters<MemoryStore['complete']>) => memory.complete(...args),
      release: (id: string, token: string) => memory.release(id, token),
      takeover: (...args: Parameters<MemoryStore['takeover']>) => memory.takeover(...args),
      get: (id: string) => memory.get(id),
      listAbandoned: () => memory.listAbandoned(),
      purgeExpired: () => memory.purgeExpired(),
      now: () => memory.now(),
    });
    const guard = createGuard(demoContract(), { store: frozen });
    assert.equal((await guard.handle(demoRequest(KEY), async () => jsonResponse(201, { id: 'a' }))).status, 201);
    assert.equal((await guard.handle(demoRequest(KEY), async () => jsonResponse(201, { id: 'b' }))).headers['idempotent-replayed'], 'true');

    // A store without `extend` when the guard is built; a method using a private field is attached later.
    class LateStore {
      readonly #inner = new MemoryStore();
      #renewals = 0;
      extend?: (id: string, token: string, leaseMs: number) => Promise<boolean>;
      renewals(): number {
        return this.#renewals;
      }
      enableRenewal(): void {
        this.extend = LateStore.prototype.renew;
      }
      renew(id: string, token: string, leaseMs: number): Promise<boolean> {
        this.#renewals += 1;
        return this.#inner.extend!(id, token, leaseMs);
      }
      reserve(input: ReserveInput) { return this.#inner.reserve(input); }
      complete(...args: Parameters<MemoryStore['complete']>) { return this.#inner.complete(...args); }
      release(id: string, token: string) { return this.#inner.release(id, token); }
      takeover(...args: Parameters<MemoryStore['takeover']>) { return this.#inner.takeover(...args); }
      get(id: string) { return this.#inner.get(id); }
      listAbandoned() { return this.#inner.listAbandoned(); }
      purgeExpired() { return this.#inner.purgeExpired(); }
      now() { return this.#inner.now(); }
    }
    const late = new LateStore();
    const renewing = createGuard(demoContract({ leaseMs: 60 }), { store: late });
    late.enableRenewal();
    const answer = await renewing.handle(demoRequest('late-extend'), async () => {
      await new Promise((resolve) => setTimeout(resolve, 150));
      return jsonResponse(201, { id: 'slow' });
    });
    assert.equal(answer.status, 201);
    assert.ok(late.renewals() >= 1, 'the lease was renewed through the method added later');
  });

  it('runs the handler when the store ran the reservation twice and answers "existing" with the request\'s own token (a resent command)', async () => {
    const memory = new MemoryStore();
    // Like ioredis resending an unanswered EVALSHA after a reconnect: the first run reserved, the answer seen is the second's.
    const resending = withMethods(memory, { reserve: async (input: ReserveInput) => (await memory.reserve(input), memory.reserve(input)) });
    const guard = createGuard(demoContract(), { store: resending });
    let runs = 0;
    const first = await guard.handle(demoRequest(KEY), async () => (runs++, jsonResponse(201, { id: 'once' })));
    assert.equal(first.status, 201);
    assert.equal(runs, 1);
    const retry = await guard.handle(demoRequest(KEY), async () => (runs++, jsonResponse(201, { id: 'twice' })));
    assert.equal(retry.headers['idempotent-replayed'], 'true');
    assert.equal(runs, 1);
  });

  it('a late reservation whose release throws leaves no unhandled rejection behind', async () => {
    const { slow, releaseLater } = lateStore(new MemoryStore(), {
      release: (): Promise<boolean> => {
        throw new Error('ECONNRESET');
      },
    });
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const guard = createGuard(demoContract(), { store: slow, storeTimeoutMs: 20 });
      assert.equal((await guard.handle(demoRequest(KEY), async () => jsonResponse(201, {}))).status, 503);
      releaseLater();
      await new Promise((resolve) => setTimeout(resolve, 30));
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
    assert.deepEqual(unhandled, []);
  });

  it('frees a late reservation once the store takes the release again (it failed twice): the retry runs, not 409 then abandoned', async () => {
    const inner = new MemoryStore();
    let failures = 2;
    const { slow, releaseLater } = lateStore(inner, {
      release: async (id: string, token: string) => {
        if (failures > 0) {
          failures -= 1;
          throw new Error('ECONNREFUSED');
        }
        return inner.release(id, token);
      },
      get: (id: string) => inner.get(id),
    });
    // A 400 ms lease: the release is tried again 100 ms apart.
    const guard = createGuard(demoContract({ leaseMs: 400 }), { store: slow, storeTimeoutMs: 20 });
    assert.equal((await guard.handle(demoRequest(KEY), async () => jsonResponse(201, {}))).status, 503);
    releaseLater();
    await new Promise((resolve) => setTimeout(resolve, 350));
    assert.equal(failures, 0);
    const after = createGuard(demoContract(), { store: inner });
    assert.equal((await after.handle(demoRequest(KEY), async () => jsonResponse(201, { id: 'ok' }))).headers['idempotent-replayed'], 'false');
  });

  it('frees a reservation that lands after the guard gave up', async () => {
    const inner = new MemoryStore();
    const { slow, releaseLater } = lateStore(inner, {
      release: (id: string, token: string) => inner.release(id, token),
      get: (id: string) => inner.get(id),
    });
    const guard = createGuard(demoContract(), { store: slow, storeTimeoutMs: 20 });
    const response = await guard.handle(demoRequest(KEY), async () => jsonResponse(201, {}));
    assert.equal(response.status, 503);
    releaseLater();
    await new Promise((resolve) => setTimeout(resolve, 20));
    const after = createGuard(demoContract(), { store: inner });
    assert.equal((await after.handle(demoRequest(KEY), async () => jsonResponse(201, { id: 'ok' }))).headers['idempotent-replayed'], 'false');
  });

  it('frees a reservation the store made though its call failed (a command timeout after the write): the retry runs, not 409', async () => {
    const inner = new MemoryStore();
    let failing = true;
    // The store writes the reservation, then its client reports a failure (ioredis's commandTimeout, a reset after send).
    const ambiguous: IdempotencyStore = Object.assign(Object.create(inner) as IdempotencyStore, {
      reserve: async (input: ReserveInput) => {
        const result = await inner.reserve(input);
        if (failing) throw new Error('Command timed out');
        return result;
      },
      release: (id: string, token: string) => inner.release(id, token),
      get: (id: string) => inner.get(id),
    });
    const guard = createGuard(demoContract(), { store: ambiguous });
    let runs = 0;
    const handler = async () => (runs++, jsonResponse(201, { id: 'dr_1' }));
    assert.equal((await guard.handle(demoRequest(KEY), handler)).status, 503);
    await new Promise((resolve) => setImmediate(resolve));
    failing = false;
    const retry = await guard.handle(demoRequest(KEY), handler);
    assert.equal(retry.status, 201);
    assert.equal(retry.headers['idempotent-replayed'], 'false');
    assert.equal(runs, 1);
    // The release is fenced on the failed call's token: the record of the key that another request holds stays.
    const held = await createGuard(demoContract(), { store: inner }).begin(demoRequest('held-key'));
    assert.equal(held.kind, 'proceed');
    const { recordId, token } = (held as Extract<typeof held, { kind: 'proceed' }>).reservation;
    const rejecting: IdempotencyStore = Object.assign(Object.create(inner) as IdempotencyStore, {
      reserve: async () => {
        throw new Error('Command timed out');
      },
      release: (id: string, releaseToken: string) => inner.release(id, releaseToken),
      get: (id: string) => inner.get(id),
    });
    assert.equal((await createGuard(demoContract(), { store: rejecting }).handle(demoRequest('held-key'), handler)).status, 503);
    await new Promise((resolve) => setImmediate(resolve));
    const record = await inner.get(recordId!);
    assert.equal(record?.state, 'in_progress');
    assert.equal(record?.leaseToken, token);
    assert.equal(runs, 1);
  });

  it('runs the handler unguarded only with the explicit failOpen opt-in', async () => {
    const events: GuardLogEvent[] = [];
    const guard = createGuard(demoContract(), { store: brokenStore('reject'), failOpen: true, log: (e) => events.push(e) });
    const response = await guard.handle(demoRequest(KEY), async () => jsonResponse(201, { id: 'x' }));
    assert.equal(response.status, 201);
    assert.ok(events.some((e) => e.decision === 'fail-open'));
  });

  it('failOpen never runs the handler once the guard has seen a record someone else owns', async () => {
    // The store answers the reservation (an in-progress record owned by another request), then goes away.
    const inner = new MemoryStore();
    await inner.reserve({ id: 'seed', operation: 'x', fingerprint: 'f', token: 't', leaseMs: 30_000, ttlMs: 60_000 });
    let up = true;
    const flaky: IdempotencyStore = Object.assign(Object.create(inner) as IdempotencyStore, {
      reserve: (input: ReserveInput) => inner.reserve(input),
      get: (id: string) => (up ? inner.get(id) : Promise.reject(new Error('ECONNRESET'))),
      now: () => (up ? inner.now() : Promise.reject(new Error('ECONNRESET'))),
      takeover: () => Promise.reject(new Error('ECONNRESET')),
    });
    let runs = 0;
    const handler = async () => { runs += 1; return jsonResponse(201, {}); };
    const waiting = createGuard(demoContract(), { store: flaky, failOpen: true, waitInProgressMs: 200, pollIntervalMs: 5 });
    const owner = await waiting.begin(demoRequest(KEY));
    assert.equal(owner.kind, 'proceed');
    up = false;
    const during = await waiting.handle(demoRequest(KEY), handler);
    assert.equal(during.status, 503, 'the wait for an owned record fails closed');
    up = true;
    // Past the lease, the reconcile hook says not-happened, and the takeover call fails: still closed.
    const later = createGuard(demoContract({ leaseMs: 1 }), { store: flaky, failOpen: true, reconcile: () => ({ outcome: 'not-happened' }) });
    const other = 'key-owned-by-an-abandoned-request';
    assert.equal((await later.begin(demoRequest(other))).kind, 'proceed');
    await new Promise((resolve) => setTimeout(resolve, 10));
    const taken = await later.handle(demoRequest(other), handler);
    assert.equal(taken.status, 503);
    assert.equal(runs, 0);
  });

  it('fingerprints a declared query parameter sent with bracketed members (deepObject): another list under the same key is refused', async () => {
    const base = demoContract();
    const guard = createGuard(demoContract({ fingerprint: { ...base.fingerprint, query: ['expand'] } }), { store: new MemoryStore() });
    const handler = async () => jsonResponse(201, { id: 'r1' });
    const sent = (query: Record<string, string | string[]>) => demoRequest(KEY, undefined, { query });
    assert.equal((await guard.handle(sent({ 'expand[0]': 'customer', 'expand[1]': 'invoice' }), handler)).status, 201);
    // The same members in another order are the same payload; another member value, a dropped member or a bare value are not.
    assert.equal((await guard.handle(sent({ 'expand[1]': 'invoice', 'expand[0]': 'customer' }), handler)).headers['idempotent-replayed'], 'true');
    assert.equal((await guard.handle(sent({ 'expand[0]': 'customer', 'expand[1]': 'charge' }), handler)).status, 422);
    assert.equal((await guard.handle(sent({ 'expand[0]': 'customer' }), handler)).status, 422);
    assert.equal((await guard.handle(sent({ expand: 'customer', 'expand[0]': 'customer', 'expand[1]': 'invoice' }), handler)).status, 422);
    // A name that only starts like it (`expanded`) is another parameter.
    assert.equal((await guard.handle(sent({ 'expand[0]': 'customer', 'expand[1]': 'invoice', expanded: 'x' }), handler)).headers['idempotent-replayed'], 'true');
  });

  it('with replayOnFirst: false, the first answer carries no replay flag and a replay carries true', async () => {
    const base = demoContract();
    const guard = createGuard(demoContract({ responses: { ...base.responses, replayOnFirst: false } }), { store: new MemoryStore() });
    const handler = async () => jsonResponse(201, { id: 'r1' });
    const first = await guard.handle(demoRequest(KEY), handler);
    assert.equal(first.status, 201);
    assert.equal(Object.keys(first.headers).some((name) => name.toLowerCase() === 'idempotent-replayed'), false);
    const again = await guard.handle(demoRequest(KEY), handler);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    const begun = await guard.begin(demoRequest('another-key-for-begin'));
    assert.equal(begun.kind, 'proceed');
    if (begun.kind === 'proceed') assert.deepEqual(begun.headers, {});
  });

  it('refuses one-transaction mode for an external effect without a provider key (a rolled-back reservation would let a retry call the provider again)', async () => {
    const inner = new MemoryStore();
    let reserved = 0;
    const store: TransactionalStore<string> = Object.assign(Object.create(inner) as IdempotencyStore, {
      withReservation: async <T>(input: ReserveInput, work: (r: ReserveResult, tx: string) => Promise<TransactionStep<T>>): Promise<T> => {
        reserved += 1;
        return (await work(await inner.reserve(input), 'tx')).value;
      },
    });
    const external = demoContract({ effect: { owner: 'payments', external: true, providerKey: 'none' } });
    const guard = createGuard<string>(external, { store });
    let runs = 0;
    await assert.rejects(
      guard.handle(demoRequest(KEY), async () => { runs += 1; return jsonResponse(201, {}); }, { transaction: true }),
      (error: Error) => error instanceof TypeError && /providerKey: none/.test(error.message) && /plain guard/.test(error.message),
    );
    assert.equal(runs, 0);
    assert.equal(reserved, 0);
    // A forwarded provider key makes a repeated call harmless: allowed.
    const forwarded = createGuard<string>(demoContract({ effect: { owner: 'payments', external: true, providerKey: 'forward' } }), { store });
    assert.equal((await forwarded.handle(demoRequest(KEY), async () => { runs += 1; return jsonResponse(201, {}); }, { transaction: true })).status, 201);
    assert.equal(runs, 1);
  });

  it('never runs a transactional handler twice when the commit fails, even with failOpen', async () => {
    const inner = new MemoryStore();
    const store: TransactionalStore<string> = Object.assign(Object.create(inner) as IdempotencyStore, {
      reserve: (input: ReserveInput) => inner.reserve(input),
      withReservation: async <T>(input: ReserveInput, work: (r: ReserveResult, tx: string) => Promise<TransactionStep<T>>): Promise<T> => {
        await work({ outcome: 'reserved', record: (await inner.reserve(input)).record, now: Date.now() }, 'tx-handle');
        throw new StoreError('unavailable', 'connection lost during COMMIT');
      },
    });
    const guard = createGuard<string>(demoContract(), { store, failOpen: true });
    let runs = 0;
    const response = await guard.handle(demoRequest(KEY), async (ctx) => { runs += 1; assert.equal(ctx.tx, 'tx-handle'); return jsonResponse(201, {}); }, { transaction: true });
    assert.equal(response.status, 503);
    // Not "store unavailable" (which tells clients the handler never ran): the handler ran, the commit's fate is unknown.
    assert.equal(problemType(response), `${PROBLEM_BASE}idempotency-outcome-unknown`);
    assert.equal(response.headers['retry-after'], '1');
    assert.equal(runs, 1);
  });

  it('one-transaction mode answers 503 outcome-unknown within storeTimeoutMs when the commit stalls after the handler, instead of hanging', async () => {
    const inner = new MemoryStore();
    let releaseCommit: () => void = () => {};
    const commitDone = new Promise<void>((resolve) => {
      releaseCommit = resolve;
    });
    const store: TransactionalStore<string> = Object.assign(Object.create(inner) as IdempotencyStore, {
      reserve: (input: ReserveInput) => inner.reserve(input),
      withReservation: async <T>(input: ReserveInput, work: (r: ReserveResult, tx: string) => Promise<TransactionStep<T>>): Promise<T> => {
        const reserved = await inner.reserve(input);
        const step = await work(reserved, 'tx');
        await commitDone; // the database stalls on COMMIT
        if (step.commit) await inner.complete(input.id, input.token, step.complete);
        return step.value;
      },
    });
    const guard = createGuard<string>(demoContract(), { store, storeTimeoutMs: 50 });
    let runs = 0;
    const started = Date.now();
    const response = await guard.handle(demoRequest(KEY), async () => { runs += 1; await new Promise((resolve) => setTimeout(resolve, 120)); return jsonResponse(201, { id: 'r1' }); }, { transaction: true });
    // The handler's own 120 ms are never cut short; the stalled commit after it is.
    assert.ok(Date.now() - started >= 120);
    assert.equal(response.status, 503);
    assert.equal(problemType(response), `${PROBLEM_BASE}idempotency-outcome-unknown`);
    assert.equal(runs, 1);
    // The commit lands late: a retry then finds the record completed and replays it, the handler not run again.
    releaseCommit();
    await new Promise((resolve) => setTimeout(resolve, 10));
    const retry = await guard.handle(demoRequest(KEY), async () => { runs += 1; return jsonResponse(201, { id: 'r2' }); }, { transaction: true });
    assert.equal(retry.status, 201);
    assert.equal(retry.headers['idempotent-replayed'], 'true');
    assert.equal(runs, 1);
  });

  it('one-transaction mode bounds the rollback after a thrown handler too: 503 outcome-unknown, not a hang', async () => {
    const inner = new MemoryStore();
    const store: TransactionalStore<string> = Object.assign(Object.create(inner) as IdempotencyStore, {
      reserve: (input: ReserveInput) => inner.reserve(input),
      withReservation: async <T>(input: ReserveInput, work: (r: ReserveResult, tx: string) => Promise<TransactionStep<T>>): Promise<T> => {
        try {
          return (await work(await inner.reserve(input), 'tx')).value;
        } catch (error) {
          await new Promise((resolve) => setTimeout(resolve, 400)); // the database stalls on ROLLBACK
          throw error;
        }
      },
    });
    const guard = createGuard<string>(demoContract(), { store, storeTimeoutMs: 50 });
    const started = Date.now();
    const response = await guard.handle(demoRequest(KEY), async () => { throw new Error('handler failed'); }, { transaction: true });
    assert.ok(Date.now() - started < 300, 'answered before the rollback ended');
    assert.equal(response.status, 503);
    assert.equal(problemType(response), `${PROBLEM_BASE}idempotency-outcome-unknown`);
    // A rollback in time lets the handler's error through, as before.
    const quick = createGuard<string>(demoContract(), { store: Object.assign(Object.create(inner) as IdempotencyStore, { withReservation: memoryTransaction(inner) }) as TransactionalStore<string>, storeTimeoutMs: 50 });
    await assert.rejects(quick.handle(demoRequest('another-key'), async () => { throw new Error('handler failed'); }, { transaction: true }), /handler failed/);
  });

  it('never fails open in one-transaction mode: a reservation that failed while it may have waited for a duplicate answers 503', async () => {
    const inner = new MemoryStore();
    const store: TransactionalStore<string> = Object.assign(Object.create(inner) as IdempotencyStore, {
      // What PostgreSQL's statement_timeout or SQLite's busy timeout gives while another request's transaction holds the key.
      withReservation: async (): Promise<never> => {
        throw new StoreError('unavailable', 'canceling statement due to statement timeout');
      },
    });
    const guard = createGuard<string>(demoContract(), { store, failOpen: true });
    let runs = 0;
    const response = await guard.handle(demoRequest(KEY), async () => { runs += 1; return jsonResponse(201, {}); }, { transaction: true });
    assert.equal(response.status, 503);
    assert.equal(problemType(response), `${PROBLEM_BASE}idempotency-store-unavailable`);
    assert.equal(runs, 0);
  });

  it('in one-transaction mode, a record that goes away while the request waits answers 409 "retry", never unguarded (even with failOpen)', async () => {
    const inner = new MemoryStore();
    let reserveFails = false;
    // withReservation over the memory store; the plain reserve fails once armed (a store blip).
    const store = withMethods(inner, {
      reserve: (input: ReserveInput) => (reserveFails ? Promise.reject(new Error('ECONNRESET')) : inner.reserve(input)),
      withReservation: memoryTransaction(inner),
    }) as unknown as TransactionalStore<string>;
    const guard = createGuard<string>(demoContract(), { store, failOpen: true, waitInProgressMs: 2000 });
    const holder = await guard.begin(demoRequest(KEY));
    assert.equal(holder.kind, 'proceed');
    if (holder.kind !== 'proceed') return;
    const seen: { guarded: boolean; tx: unknown }[] = [];
    const waiting = guard.handle(demoRequest(KEY), async (ctx) => (seen.push({ guarded: ctx.reservation.guarded, tx: ctx.tx }), jsonResponse(201, {})), { transaction: true });
    await new Promise((resolve) => setTimeout(resolve, 100));
    // The holder answers a transient status (its key is released) while the store blips.
    reserveFails = true;
    await guard.complete(holder.reservation, jsonResponse(503, {}));
    const answer = await waiting;
    assert.deepEqual(seen, []);
    assert.equal(answer.status, 409);
    assert.ok(answer.headers['retry-after']);
  });

  it('in one-transaction mode, a reconciliation takeover gives the record back and answers 409: the retry runs inside a transaction, with its tx', async () => {
    let t = 1_800_000_000_000;
    const inner = new MemoryStore({ clock: () => t });
    const store = withMethods(inner, {
      withReservation: memoryTransaction(inner),
    }) as unknown as TransactionalStore<string>;
    const guard = createGuard<string>(demoContract(), { store, now: () => t, reconcile: () => ({ outcome: 'not-happened' }) });
    // A reservation whose owner died: abandoned once its lease has run out.
    assert.equal((await guard.begin(demoRequest(KEY))).kind, 'proceed');
    t += 31_000;
    const seen: unknown[] = [];
    const handler = async (ctx: { tx: string | undefined }) => (seen.push(ctx.tx), jsonResponse(201, { id: 'once' }));
    const taken = await guard.handle(demoRequest(KEY), handler, { transaction: true });
    assert.equal(taken.status, 409);
    assert.ok(taken.headers['retry-after']);
    assert.deepEqual(seen, []);
    // Given back: the retry is not told "in progress" by the takeover's own lease.
    const retry = await guard.handle(demoRequest(KEY), handler, { transaction: true });
    assert.equal(retry.status, 201);
    assert.deepEqual(seen, ['tx']);
  });

  it('a resent reservation found under its own token after its lease ran out is not taken as reserved: one delivery runs', async () => {
    let t = 1_800_000_000_000;
    const memory = new MemoryStore({ clock: () => t });
    // The answer was lost; the client resent the command after a reconnect that outlasted the lease — with the
    // time it was first sent (a store that takes its clock on the client side), so the answer's `now` is stale.
    const store = withMethods(memory, {
      reserve: resentOnce(memory, () => (t += 31_000), (first, resent) => ({ ...resent, now: first.now })),
    });
    // No reconcile hook: the request's own unused reservation must not be left to look abandoned either.
    const guard = createGuard(demoContract(), { store, now: () => t });
    const first = await guard.begin(demoRequest(KEY));
    const second = await guard.begin(demoRequest(KEY));
    assert.deepEqual([first.kind, second.kind], ['proceed', 'respond']);
    assert.equal(second.kind === 'respond' && second.response.status, 409);
  });

  it('gives its own resent reservation back and reserves again when the store clock cannot be read, instead of leaving it stuck', async () => {
    const memory = new MemoryStore();
    let nowFails = false;
    const store = withMethods(memory, {
      reserve: resentOnce(memory, () => (nowFails = true)),
      now: () => {
        if (!nowFails) return memory.now();
        nowFails = false;
        return Promise.reject(new Error('ECONNRESET'));
      },
    });
    const guard = createGuard(demoContract(), { store });
    let runs = 0;
    const answer = await guard.handle(demoRequest(KEY), async () => (runs++, jsonResponse(201, { id: 'once' })));
    assert.equal(answer.status, 201);
    assert.equal(runs, 1);
  });

  it('a completion the store failed is tried again behind the answer, within the lease: the retry replays instead of 409', async () => {
    // A review's: a PostgreSQL restart of a few seconds, well inside the 30 s lease, left every request in flight at
    // 201 with its record in progress — each retry 409, then abandoned until reconciliation.
    const memory = new MemoryStore();
    let failures = 2;
    const store = withMethods(memory, {
      complete: (...args: Parameters<MemoryStore['complete']>) => (failures-- > 0 ? Promise.reject(new Error('ECONNREFUSED')) : memory.complete(...args)),
    });
    const events: GuardLogEvent[] = [];
    const guard = createGuard({ ...demoContract(), leaseMs: 400 }, { store, log: (e) => events.push(e) });
    let runs = 0;
    const first = await guard.handle(demoRequest(KEY), async () => (runs++, jsonResponse(201, { id: 'once' })));
    assert.equal(first.status, 201, 'the answer goes out at once');
    assert.deepEqual(events.map((e) => e.decision), ['reserved', 'record-failed']);
    assert.equal((await guard.handle(demoRequest(KEY), async () => (runs++, jsonResponse(201, { id: 'twice' })))).status, 409);
    await new Promise((resolve) => setTimeout(resolve, 350));
    const retry = await guard.handle(demoRequest(KEY), async () => (runs++, jsonResponse(201, { id: 'twice' })));
    assert.equal(retry.status, 201);
    assert.equal(retry.headers['idempotent-replayed'], 'true');
    assert.equal(bodyJson(retry).id, 'once');
    assert.equal(runs, 1);
    assert.ok(events.some((e) => e.decision === 'completed'), events.map((e) => e.decision).join(' '));
  });

  it('while a failed completion is tried again its lease is renewed: a duplicate hears 409 in progress, never abandoned, until it replays', async () => {
    // A diff review's: the heartbeat stopped before the first attempt, so the later attempts came after the lease — a
    // duplicate meanwhile heard 409 abandoned (and a reconcile hook ran on a record still being recorded).
    const memory = new MemoryStore();
    let failures = 3;
    const store = withMethods(memory, {
      complete: async (...args: Parameters<MemoryStore['complete']>) => {
        await new Promise((resolve) => setTimeout(resolve, 60));
        return failures-- > 0 ? Promise.reject(new Error('ECONNREFUSED')) : memory.complete(...args);
      },
    });
    let reconciled = 0;
    const guard = createGuard({ ...demoContract(), leaseMs: 300 }, { store, storeTimeoutMs: 100, reconcile: () => (reconciled++, { outcome: 'unknown' }) });
    assert.equal((await guard.handle(demoRequest(KEY), async () => jsonResponse(201, { id: 'once' }))).status, 201);
    const seen = new Set<string>();
    for (let elapsed = 0; elapsed < 900; elapsed += 30) {
      const answer = await guard.handle(demoRequest(KEY), async () => jsonResponse(201, { id: 'twice' }));
      seen.add(answer.status === 409 ? String(bodyJson(answer).type).replace(/^.*\//, '') : `${answer.status} ${answer.headers['idempotent-replayed']}`);
      await new Promise((resolve) => setTimeout(resolve, 30));
    }
    assert.deepEqual([...seen].sort(), ['201 true', 'idempotency-request-in-progress']);
    assert.equal(reconciled, 0);
  });

  it('a completion tried again behind the answer logs how it ended: fenced, record-lost, or record-failed (gave-up) when no attempt landed', async () => {
    // A review's: only a completion that landed was logged; a fenced, lost or never-recorded one was silent.
    for (const ending of ['fenced', 'record-lost', 'gave-up'] as const) {
      const memory = new MemoryStore();
      let first = true;
      const store = withMethods(memory, {
        complete: async (...args: Parameters<MemoryStore['complete']>) => {
          if (first || ending === 'gave-up') {
            first = false;
            throw new Error('ECONNREFUSED');
          }
          const record = (await memory.get(args[0]))!;
          await memory.release(args[0], args[1]);
          // Fenced: another request reserved the key meanwhile (a reconciliation's takeover); lost: nothing did.
          if (ending === 'fenced') await memory.reserve({ id: args[0], operation: record.operation, fingerprint: record.fingerprint, token: 'another-request', leaseMs: 1000, ttlMs: 60_000 });
          return memory.complete(...args);
        },
      });
      const events: GuardLogEvent[] = [];
      // Tried until the TTL: a short one, for the gave-up case to end within the test.
      const guard = createGuard({ ...demoContract(), leaseMs: 200, ttlMs: 500 }, { store, log: (e) => events.push(e) });
      assert.equal((await guard.handle(demoRequest(KEY), async () => jsonResponse(201, { id: 'once' }))).status, 201);
      await new Promise((resolve) => setTimeout(resolve, ending === 'gave-up' ? 900 : 250));
      const last = events.at(-1)!;
      if (ending === 'gave-up') assert.deepEqual([last.decision, last.reason, last.status], ['record-failed', 'gave-up', 201], ending);
      else assert.deepEqual([last.decision, last.status], [ending, 201], ending);
    }
  });

  /** A guard whose handler answered 201 while the store refuses completions and lease renewals (`store.down`). */
  async function answeredWhileCompletionsFail() {
    const memory = new MemoryStore();
    const store = { down: true };
    const refusing = withMethods(memory, {
      complete: (...args: Parameters<MemoryStore['complete']>) => (store.down ? Promise.reject(new Error('ECONNREFUSED')) : memory.complete(...args)),
      extend: (...args: Parameters<MemoryStore['extend']>) => (store.down ? Promise.reject(new Error('ECONNREFUSED')) : memory.extend(...args)),
    });
    const events: GuardLogEvent[] = [];
    const guard = createGuard({ ...demoContract(), leaseMs: 200 }, { store: refusing, log: (e) => events.push(e) });
    let count = 0;
    const handler = async () => (count++, jsonResponse(201, { id: 'once' }));
    assert.equal((await guard.handle(demoRequest(KEY), handler)).status, 201);
    return { guard, events, handler, runs: () => count, store };
  }

  it('a completion that fails past the lease is tried on until the TTL: once the store is back the record is completed and the retry replays, not 409 abandoned', async () => {
    // A chaos review's: every try within the lease failed, and a key whose effect had run answered 409 abandoned for good.
    const { guard, events, handler, runs, store } = await answeredWhileCompletionsFail();
    await new Promise((resolve) => setTimeout(resolve, 600));
    store.down = false;
    // The tries past the lease come 25-50, 50-100, … 400-800 ms apart: one lands within 1.3 s of the store's return.
    await new Promise((resolve) => setTimeout(resolve, 1300));
    const retry = await guard.handle(demoRequest(KEY), handler);
    assert.deepEqual([retry.status, retry.headers['idempotent-replayed'], bodyJson(retry).id], [201, 'true', 'once'], events.map((e) => e.decision).join(' '));
    assert.equal(runs(), 1);
    assert.equal(events.filter((e) => e.decision === 'completed').length, 1);
  });

  it('a retry that comes while the completion behind its answer waits out a long gap records it then and replays', async () => {
    // A chaos review's: keys whose effect had run answered 409 abandoned for up to 50 s after the store came back, the
    // completion's next try still minutes away.
    const { guard, events, handler, runs, store } = await answeredWhileCompletionsFail();
    // Down long enough for the tries past the lease to be some 800 ms apart.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    store.down = false;
    const retry = await guard.handle(demoRequest(KEY), handler);
    assert.deepEqual([retry.status, retry.headers['idempotent-replayed'], bodyJson(retry).id], [201, 'true', 'once'], events.map((e) => e.decision).join(' '));
    assert.equal(runs(), 1);
    // The retry behind then finds it done, and logs it once.
    for (let waited = 0; waited < 3000 && !events.some((e) => e.decision === 'completed'); waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(events.filter((e) => e.decision === 'completed').length, 1);
  });

  it('a completion the store applied after the guard gave up on it is logged completed when the retry behind finds it done under its own token', async () => {
    const memory = new MemoryStore();
    let first = true;
    const store = withMethods(memory, {
      complete: async (...args: Parameters<MemoryStore['complete']>) => {
        if (!first) return memory.complete(...args);
        first = false;
        await new Promise((resolve) => setTimeout(resolve, 120));
        return memory.complete(...args);
      },
    });
    const events: GuardLogEvent[] = [];
    const guard = createGuard({ ...demoContract(), leaseMs: 1000 }, { store, storeTimeoutMs: 50, log: (e) => events.push(e) });
    assert.equal((await guard.handle(demoRequest(KEY), async () => jsonResponse(201, { id: 'once' }))).status, 201);
    await new Promise((resolve) => setTimeout(resolve, 600));
    assert.deepEqual(events.map((e) => e.decision), ['reserved', 'record-failed', 'completed']);
  });

  it('a completion refused after a reconcile verdict settled the record under its lapsed token is fenced, not completed', async () => {
    // A diff review's: the verdict's record holds the owner's token, so "completed under my token" logged the owner's
    // refused answer as recorded.
    const s = setup({ reconcile: () => ({ outcome: 'completed', response: jsonResponse(201, { id: 'from-hook' }) }) });
    const owner = await s.guard.begin(demoRequest(KEY));
    assert.equal(owner.kind, 'proceed');
    if (owner.kind !== 'proceed') return;
    s.advance(31_000);
    assert.equal(bodyJson(await s.guard.handle(demoRequest(KEY), s.handler)).id, 'from-hook');
    await s.guard.complete(owner.reservation, jsonResponse(201, { id: 'from-owner' }));
    const last = s.events.at(-1)!;
    assert.deepEqual([last.decision, last.resultId], ['fenced', 'from-owner']);
    assert.equal(bodyJson(await s.guard.handle(demoRequest(KEY), s.handler)).id, 'from-hook');
    // An empty 201 tells its resource by Location alone: another Location is another answer.
    const empty = (location: string): GuardResponse => ({ status: 201, headers: { location }, body: new Uint8Array(0) });
    const t = setup({ reconcile: () => ({ outcome: 'completed', response: empty('/orders/456') }) });
    const first = await t.guard.begin(demoRequest(KEY));
    t.advance(31_000);
    assert.equal((await t.guard.handle(demoRequest(KEY), t.handler)).headers['location'], '/orders/456');
    if (first.kind === 'proceed') await t.guard.complete(first.reservation, empty('/orders/123'));
    assert.equal(t.events.at(-1)!.decision, 'fenced');
  });

  it('a reservation that landed after the guard gave up is released even when the store stays down past the lease: the retry runs, not 409 abandoned for good', async () => {
    // A chaos review's: PostgreSQL unreachable for 25 s after reservations committed unanswered — the four releases within
    // the 30 s lease all failed, and 12-18 of 200 keys answered 409 abandoned for a handler that never ran.
    const memory = new MemoryStore();
    let down = true;
    const store = withMethods(memory, {
      reserve: async (input: ReserveInput) => {
        if (down) await new Promise((resolve) => setTimeout(resolve, 100));
        return memory.reserve(input);
      },
      release: (...args: Parameters<MemoryStore['release']>) => (down ? Promise.reject(new Error('ECONNREFUSED')) : memory.release(...args)),
    });
    const events: GuardLogEvent[] = [];
    const guard = createGuard({ ...demoContract(), leaseMs: 200 }, { store, storeTimeoutMs: 50, log: (e) => events.push(e) });
    let runs = 0;
    const handler = async () => (runs++, jsonResponse(201, { id: 'once' }));
    assert.equal((await guard.handle(demoRequest(KEY), handler)).status, 503);
    await new Promise((resolve) => setTimeout(resolve, 600));
    assert.equal((await memory.get(computeRecordId([['principal', 'user-1'], ['header', 'X-Tenant-Id', 't1']], 'createDemoRequest', KEY)))?.state, 'in_progress', 'the late reservation is there');
    down = false;
    await new Promise((resolve) => setTimeout(resolve, 900));
    assert.ok(events.some((e) => e.decision === 'released'), events.map((e) => e.decision).join(' '));
    const retry = await guard.handle(demoRequest(KEY), handler);
    assert.equal(retry.status, 201, JSON.stringify(bodyJson(retry)));
    assert.equal(runs, 1);
  });

  it('a reservation the store made but never answered (a connection gone silent, no reset) is released: the retry runs once, not 409 abandoned for good', async () => {
    // A chaos review's: a half-open PostgreSQL connection left the reserve() promise pending for good; nothing released
    // its committed record, and every retry heard 409 abandoned with no handler ever run.
    for (const via of ['reserve', 'takeover'] as const) {
      const memory = new MemoryStore();
      let hang = true;
      const store = withMethods(memory, {
        reserve: (input: ReserveInput) => {
          if (via !== 'reserve' || !hang) return memory.reserve(input);
          hang = false;
          void memory.reserve(input);
          return new Promise<never>(() => {});
        },
        takeover: (...args: Parameters<MemoryStore['takeover']>) => {
          if (via !== 'takeover' || !hang) return memory.takeover(...args);
          hang = false;
          void memory.takeover(...args);
          return new Promise<never>(() => {});
        },
      });
      const events: GuardLogEvent[] = [];
      // Only the takeover's own reconciliation says the effect did not happen; then no verdict moves the record on.
      let asked = via === 'takeover' ? 0 : 1;
      const reconcile: ReconcileHook = () => ({ outcome: asked++ === 0 ? 'not-happened' : 'unknown' });
      const guard = createGuard({ ...demoContract(), leaseMs: 200 }, { store, storeTimeoutMs: 50, log: (e) => events.push(e), reconcile });
      let runs = 0;
      const handler = async () => (runs++, jsonResponse(201, { id: 'once' }));
      if (via === 'takeover') {
        // An owner that died: its record, past its lease, is reconciled and taken over — by a call that never answers.
        const dead = createGuard({ ...demoContract(), leaseMs: 200 }, { store: withMethods(memory, { extend: undefined }) });
        assert.equal((await dead.begin(demoRequest(KEY))).kind, 'proceed');
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      assert.equal((await guard.handle(demoRequest(KEY), handler)).status, 503, via);
      await new Promise((resolve) => setTimeout(resolve, 500));
      const retry = await guard.handle(demoRequest(KEY), handler);
      assert.equal(retry.status, 201, `${via}: ${JSON.stringify(bodyJson(retry))} ${events.map((e) => e.decision).join(' ')}`);
      assert.equal(runs, 1, via);
    }
  });

  it('the late releases of one key are one loop, however many of its requests an outage failed: its store calls do not grow with the retries', async () => {
    // A chaos review's: a 90 s Redis outage answered 48,600 requests of 2,000 keys with 503, and each left a release loop
    // of its own (1.5 KB apiece, heap 12 → 85 MB, one release per try each: 418,000 calls).
    const memory = new MemoryStore();
    let down = true;
    let calls = 0;
    const refused = () => Promise.reject(new Error('ECONNREFUSED'));
    const store = withMethods(memory, {
      reserve: (input: ReserveInput) => (down ? refused() : memory.reserve(input)),
      get: (id: string) => (calls++, down ? refused() : memory.get(id)),
      release: (...args: Parameters<MemoryStore['release']>) => (calls++, down ? refused() : memory.release(...args)),
    });
    const guard = createGuard({ ...demoContract(), leaseMs: 200 }, { store, storeTimeoutMs: 50 });
    let runs = 0;
    const handler = async () => (runs++, jsonResponse(201, {}));
    for (let round = 0; round < 20; round++) {
      const answers = await Promise.all(Array.from({ length: 5 }, (_, i) => guard.handle(demoRequest(`key-${i}`), handler)));
      assert.deepEqual([...new Set(answers.map((a) => a.status))], [503]);
    }
    calls = 0;
    await new Promise((resolve) => setTimeout(resolve, 150));
    // Five loops trying about every 50 ms: some fifteen calls; one loop per failed request made three hundred.
    assert.ok(calls <= 40, `${calls} store calls in 150 ms for 5 keys`);
    down = false;
    await new Promise((resolve) => setTimeout(resolve, 100));
    const after = await Promise.all(Array.from({ length: 5 }, (_, i) => guard.handle(demoRequest(`key-${i}`), handler)));
    assert.deepEqual([...new Set(after.map((a) => a.status))], [201]);
    assert.equal(runs, 5);
  });

  describe('a reservation an outage left behind, its answer lost', () => {
    // A chaos review's: PostgreSQL replies dropped for 20 s while a client retried every second — each retry's failure woke
    // the key's release loop, and each woken try doubled its gap; after the store came back nothing woke it, and the
    // retries heard 409 abandoned for 45 s before the handler ever ran.
    function outage() {
      const memory = new MemoryStore();
      const state = { down: true };
      const refused = () => Promise.reject(new Error('ECONNRESET'));
      const store = withMethods(memory, {
        // Down: the reservation is made, but its answer is lost.
        reserve: async (input: ReserveInput) => {
          const made = await memory.reserve(input);
          return state.down ? Promise.reject(new Error('ETIMEDOUT')) : made;
        },
        get: (id: string) => (state.down ? refused() : memory.get(id)),
        release: (...args: Parameters<MemoryStore['release']>) => (state.down ? refused() : memory.release(...args)),
      });
      return { memory, store, state };
    }

    /** The first reservation lands after the guard gave up on it (storeTimeoutMs under 100 ms); releases fail until `releasesBack`. */
    function landsLateReleasesFail() {
      const memory = new MemoryStore();
      let slow = true;
      let releaseDown = true;
      const store = withMethods(memory, {
        reserve: async (input: ReserveInput) => {
          if (slow) {
            slow = false;
            await sleep(100);
          }
          return memory.reserve(input);
        },
        release: (...args: Parameters<MemoryStore['release']>) => (releaseDown ? Promise.reject(new Error('ECONNRESET')) : memory.release(...args)),
      });
      return { store, releasesBack: () => void (releaseDown = false) };
    }

    it('is freed by the first retry after the store is back, which runs the handler', async () => {
      const { store, state } = outage();
      const guard = createGuard({ ...demoContract(), leaseMs: 10_000 }, { store, storeTimeoutMs: 50 });
      let runs = 0;
      const handler = async () => (runs++, jsonResponse(201, {}));
      for (let i = 0; i < 5; i++) assert.equal((await guard.handle(demoRequest(KEY), handler)).status, 503);
      state.down = false;
      // Before: 409 in progress for the lease (here 10 s), then 409 abandoned until the loop's next try.
      assert.equal((await guard.handle(demoRequest(KEY), handler)).status, 201);
      assert.equal(runs, 1);
      assert.equal((await guard.handle(demoRequest(KEY), handler)).headers['idempotent-replayed'], 'true');
    });

    it('is freed on the loop\'s own schedule however many retries failed meanwhile', async () => {
      const { memory, store, state } = outage();
      const guard = createGuard({ ...demoContract(), leaseMs: 200 }, { store, storeTimeoutMs: 20 });
      const handler = async () => jsonResponse(201, {});
      for (let i = 0; i < 30; i++) {
        assert.equal((await guard.handle(demoRequest(KEY), handler)).status, 503);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const id = guard.recordId(demoRequest(KEY))!;
      assert.equal((await memory.get(id))?.state, 'in_progress');
      state.down = false;
      // No retry comes: the loop alone frees it. Before: 30 woken tries had doubled its gap to the 5-minute cap.
      for (let waited = 0; waited < 3000 && (await memory.get(id)) !== undefined; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(await memory.get(id), undefined);
    });

    it('a release that fails after a transient answer or a rollback is made later: the retry runs', async () => {
      // A read-only review's: one failed release after a 429 left the key at 409 in progress for the lease, then 409
      // abandoned for good, no handler running under it.
      for (const how of ['429', 'rolled back'] as const) {
        const memory = new MemoryStore();
        let fail = 1;
        const store = withMethods(memory, {
          release: (...args: Parameters<MemoryStore['release']>) => (fail-- > 0 ? Promise.reject(new Error('ECONNRESET')) : memory.release(...args)),
        });
        const guard = createGuard({ ...demoContract(), leaseMs: 200 }, { store, storeTimeoutMs: 50 });
        if (how === '429') {
          assert.equal((await guard.handle(demoRequest(KEY), async () => jsonResponse(429, {}))).status, 429);
        } else {
          const begun = await guard.begin(demoRequest(KEY));
          assert.equal(begun.kind, 'proceed');
          if (begun.kind === 'proceed') await guard.abort(begun.reservation, { rolledBack: true });
        }
        let runs = 0;
        const retry = await guard.handle(demoRequest(KEY), async () => (runs++, jsonResponse(201, {})));
        assert.equal(retry.status, 201, how);
        assert.equal(runs, 1, how);
      }
    });

    it('a duplicate waiting on a handler whose completion failed once gets the replay when the store is back', async () => {
      // A read-only review's: the wait polled the record, never tried the completion retried behind the answer, and
      // ended 409 in progress after waitInProgressMs; a retry a moment later was replayed at once.
      const memory = new MemoryStore();
      let fail = 1;
      const store = withMethods(memory, {
        complete: (...args: Parameters<MemoryStore['complete']>) => (fail-- > 0 ? Promise.reject(new Error('ECONNRESET')) : memory.complete(...args)),
      });
      const guard = createGuard({ ...demoContract(), leaseMs: 8000 }, { store, waitInProgressMs: 1000, pollIntervalMs: 20 });
      const first = await guard.begin(demoRequest(KEY));
      assert.equal(first.kind, 'proceed');
      const waiting = guard.begin(demoRequest(KEY));
      await sleep(50);
      if (first.kind === 'proceed') await guard.complete(first.reservation, jsonResponse(201, { id: 'once' }));
      const started = performance.now();
      const waited = await waiting;
      assert.equal(waited.kind === 'respond' && waited.replayed, true);
      assert.ok(performance.now() - started < 500, 'answered before the wait ran out');
    });

    it('a duplicate waiting on it waits on while its release fails, and runs once the release goes through', async () => {
      // A diff review's: the waiting duplicate stopped at its first failed release with 409 in progress, its wait
      // (waitInProgressMs) cut short.
      const { store, releasesBack } = landsLateReleasesFail();
      const guard = createGuard({ ...demoContract(), leaseMs: 2000 }, { store, storeTimeoutMs: 50, waitInProgressMs: 1500, pollIntervalMs: 20 });
      let runs = 0;
      const handler = async () => (runs++, jsonResponse(201, {}));
      assert.equal((await guard.handle(demoRequest(KEY), handler)).status, 503);
      await sleep(100);
      setTimeout(releasesBack, 250);
      assert.equal((await guard.handle(demoRequest(KEY), handler)).status, 201);
      assert.equal(runs, 1);
    });

    it('two retries that meet it at once: one frees it and runs, the other hears in progress, not abandoned', async () => {
      // A read-only review's: the second retry's release was refused (the first had freed the key and reserved it), and
      // it answered from its stale read — 409 abandoned, "do not retry", while the handler ran under the key.
      const { store, releasesBack } = landsLateReleasesFail();
      const guard = createGuard({ ...demoContract(), leaseMs: 200 }, { store, storeTimeoutMs: 50 });
      let runs = 0;
      const handler = async () => (runs++, await sleep(100), jsonResponse(201, {}));
      assert.equal((await guard.handle(demoRequest(KEY), handler)).status, 503);
      // The reservation has landed and its lease passed; the loop's releases failed.
      await sleep(300);
      releasesBack();
      const both = await Promise.all([guard.handle(demoRequest(KEY), handler), guard.handle(demoRequest(KEY), handler)]);
      const answers = both.map((r) => (r.status === 409 ? `409 ${bodyJson(r).type.slice(PROBLEM_BASE.length)}` : String(r.status))).sort();
      assert.deepEqual(answers, ['201', '409 idempotency-request-in-progress']);
      assert.equal(runs, 1);
    });

    it('keeps backing off while retries meet it and its release still fails', async () => {
      // A read-through review's: each retry whose release failed woke the loop with a restart, its gap back to the first
      // and four quick tries after every retry — the backoff undone for as long as a client kept retrying.
      const { memory, store: lossy, state } = outage();
      const releases: number[] = [];
      const store = withMethods(lossy, {
        get: (id: string) => memory.get(id),
        release: () => (releases.push(performance.now()), Promise.reject(new Error('ECONNRESET'))),
      });
      const guard = createGuard({ ...demoContract(), leaseMs: 80 }, { store, storeTimeoutMs: 20 });
      const handler = async () => jsonResponse(201, {});
      assert.equal((await guard.handle(demoRequest(KEY), handler)).status, 503);
      state.down = false;
      const until = performance.now() + 1500;
      while (performance.now() < until) {
        assert.equal((await guard.handle(demoRequest(KEY), handler)).status, 409);
        await sleep(10);
      }
      const quiet = performance.now();
      await sleep(1000);
      // The loop's gap had grown past 300 ms by then; restarted, it would try ten times in that second.
      const late = releases.filter((at) => at >= quiet).length;
      assert.ok(late <= 4, `${late} releases in the second after the retries stopped`);
    });
  });

  it('keeps releasing at most lateReleaseLimit tokens an outage left: one past it is logged untracked and left to reconciliation', async () => {
    // An outage's failed requests each held about 600 bytes (2.4 kB for a key of its own) until the store could be read
    // again or the TTL passed: a million 503s for distinct keys, 2.4 GB of heap.
    const memory = new MemoryStore();
    let down = true;
    const store = withMethods(memory, {
      // Down: the reservation is made, but its answer is lost (a command timeout at the client).
      reserve: async (input: ReserveInput) => {
        const made = await memory.reserve(input);
        return down ? Promise.reject(new Error('ETIMEDOUT')) : made;
      },
    });
    const logged: GuardLogEvent[] = [];
    const guard = createGuard({ ...demoContract(), leaseMs: 200 }, { store, storeTimeoutMs: 50, lateReleaseLimit: 2, log: (e) => logged.push(e) });
    let runs = 0;
    const handler = async () => (runs++, jsonResponse(201, {}));
    const keys = ['key-0', 'key-1', 'key-2'];
    for (const key of keys) assert.equal((await guard.handle(demoRequest(key), handler)).status, 503);
    const untracked = () => logged.filter((e) => e.decision === 'record-failed' && e.reason === 'untracked').map((e) => e.keyId);
    const ids = keys.map((key) => guard.recordId(demoRequest(key)));
    assert.deepEqual(untracked(), [ids[2]]);
    down = false;
    await new Promise((resolve) => setTimeout(resolve, 400));
    // The two it kept are released once their lease has passed; the third holds its key for reconciliation.
    const after = await Promise.all(keys.map((key) => guard.handle(demoRequest(key), handler)));
    assert.deepEqual(after.map((a) => a.status), [201, 201, 409]);
    assert.equal(bodyJson(after[2]!).type.endsWith('idempotency-request-abandoned'), true);
    assert.equal(runs, 2);
    // Released, they count no more: the next outage's failures are kept again.
    down = true;
    for (const key of ['key-3', 'key-4']) assert.equal((await guard.handle(demoRequest(key), handler)).status, 503);
    assert.equal(untracked().length, 1);
    // Calls that never answer (a half-open connection) take no place while the store answers the others.
    const hung = new Set(['hung-0', 'hung-1', 'hung-2']);
    const hanging = withMethods(memory, {
      reserve: async (input: ReserveInput) => {
        if (hung.has(String(input.id))) return new Promise<ReserveResult>(() => {});
        const made = await memory.reserve(input);
        return down ? Promise.reject(new Error('ETIMEDOUT')) : made;
      },
    });
    const logs2: GuardLogEvent[] = [];
    const guard2 = createGuard({ ...demoContract(), leaseMs: 200 }, { store: hanging, storeTimeoutMs: 50, lateReleaseLimit: 2, log: (e) => logs2.push(e) });
    for (const key of ['hung-0', 'hung-1', 'hung-2']) hung.add(guard2.recordId(demoRequest(key))!);
    for (const key of ['hung-0', 'hung-1', 'hung-2', 'lost']) assert.equal((await guard2.handle(demoRequest(key), handler)).status, 503);
    assert.deepEqual(logs2.filter((e) => e.reason === 'untracked'), []);
    down = false;
    await new Promise((resolve) => setTimeout(resolve, 400));
    assert.equal((await guard2.handle(demoRequest('lost'), handler)).status, 201);
    for (const value of [-1, 1.5, Number.NaN]) {
      assert.throws(() => createGuard(demoContract(), { store: new MemoryStore(), lateReleaseLimit: value }), /lateReleaseLimit must be a whole number of 0 or more, or Infinity/, String(value));
    }
  });

  it('a reservation made again under a token its late release just freed (a resent command) is freed too, whatever the interleaving', async () => {
    // A diff review's: the news of the second landing came while the release of the first was in flight, or just after the
    // loop had ended, and was dropped: the retry heard 409 abandoned for good.
    const lost: string[] = [];
    for (let turns = 0; turns < 8; turns++) {
      const memory = new MemoryStore();
      let first: ReserveInput | undefined;
      let answer!: (r: ReserveResult) => void;
      let open!: () => void;
      const gate = new Promise<void>((resolve) => (open = resolve));
      let gated = true;
      const store = withMethods(memory, {
        reserve: (input: ReserveInput) => {
          if (first !== undefined) return memory.reserve(input);
          first = input;
          void memory.reserve(input);
          return new Promise<ReserveResult>((resolve) => (answer = resolve));
        },
        release: async (...args: Parameters<MemoryStore['release']>) => {
          if (gated) {
            gated = false;
            await gate;
          }
          return memory.release(...args);
        },
      });
      const guard = createGuard({ ...demoContract(), leaseMs: 200 }, { store, storeTimeoutMs: 30 });
      let runs = 0;
      const handler = async () => (runs++, jsonResponse(201, { id: 'once' }));
      assert.equal((await guard.handle(demoRequest(KEY), handler)).status, 503);
      await sleep(20);
      open();
      for (let i = 0; i < turns; i++) await Promise.resolve();
      answer(await memory.reserve(first!));
      await sleep(600);
      const retry = await guard.handle(demoRequest(KEY), handler);
      if (retry.status !== 201 || runs !== 1) lost.push(`${turns} turns: ${retry.status}`);
    }
    assert.deepEqual(lost, []);
  });

  it('a late reservation that lands while its release loop reads the record is judged by what came after the read: released, the retry runs', async () => {
    // A diff review's: the loop's first read (no record yet) answered after the reservation had landed, and the token,
    // now known to have made the record, was dropped on that older read — 409 abandoned for good.
    const memory = new MemoryStore();
    let slowRead = true;
    let slowReserve = true;
    let replied!: () => void;
    const reservationAnswered = new Promise<void>((resolve) => (replied = resolve));
    const store = withMethods(memory, {
      // Applied at 60 ms, answered at 65 ms (the guard gave up at 50); the read taken at 50 ms answers after that.
      reserve: async (input: ReserveInput) => {
        if (!slowReserve) return memory.reserve(input);
        slowReserve = false;
        await sleep(60);
        const result = await memory.reserve(input);
        await sleep(5);
        setTimeout(replied, 10);
        return result;
      },
      get: async (id: string) => {
        const snapshot = await memory.get(id);
        if (slowRead) {
          slowRead = false;
          await reservationAnswered;
        }
        return snapshot;
      },
    });
    const guard = createGuard({ ...demoContract(), leaseMs: 400 }, { store, storeTimeoutMs: 50 });
    let runs = 0;
    const handler = async () => (runs++, jsonResponse(201, { id: 'once' }));
    assert.equal((await guard.handle(demoRequest(KEY), handler)).status, 503);
    await sleep(700);
    assert.equal((await guard.handle(demoRequest(KEY), handler)).status, 201);
    assert.equal(runs, 1);
  });

  it('a takeover applied after the guard gave up whose answer says it took nothing (a resent command) is still released: the retry runs', async () => {
    // A diff review's: the answer `undefined` dropped the token while it held the record — 409 abandoned for good.
    const memory = new MemoryStore();
    let resent = true;
    const store = withMethods(memory, {
      takeover: async (...args: Parameters<MemoryStore['takeover']>) => {
        if (!resent) return memory.takeover(...args);
        resent = false;
        await sleep(60);
        await memory.takeover(...args);
        await sleep(40);
        return undefined;
      },
    });
    const dead = createGuard({ ...demoContract(), leaseMs: 200 }, { store: withMethods(memory, { extend: undefined }) });
    assert.equal((await dead.begin(demoRequest(KEY))).kind, 'proceed');
    await sleep(250);
    let asked = 0;
    const reconcile: ReconcileHook = () => ({ outcome: asked++ === 0 ? 'not-happened' : 'unknown' });
    const guard = createGuard({ ...demoContract(), leaseMs: 200 }, { store, storeTimeoutMs: 50, reconcile });
    let runs = 0;
    const handler = async () => (runs++, jsonResponse(201, { id: 'once' }));
    assert.equal((await guard.handle(demoRequest(KEY), handler)).status, 503);
    await sleep(500);
    assert.equal((await guard.handle(demoRequest(KEY), handler)).status, 201);
    assert.equal(runs, 1);
  });

  /**
   * The first reservation goes through `firstCall` (which applies it to `memory` when the test says and answers late,
   * never, or with a failure), the guard gives up on it (503); `waitMs` later the retry must run the handler, once.
   */
  async function retryRunsOnceAfter(leaseMs: number, waitMs: number, firstCall: (input: ReserveInput, memory: MemoryStore) => Promise<ReserveResult>): Promise<void> {
    const memory = new MemoryStore();
    let first = true;
    const store = withMethods(memory, {
      reserve: (input: ReserveInput) => {
        if (!first) return memory.reserve(input);
        first = false;
        return firstCall(input, memory);
      },
    });
    const guard = createGuard({ ...demoContract(), leaseMs }, { store, storeTimeoutMs: 50 });
    let runs = 0;
    const handler = async () => (runs++, jsonResponse(201, { id: 'once' }));
    assert.equal((await guard.handle(demoRequest(KEY), handler)).status, 503);
    await sleep(waitMs);
    assert.equal((await guard.handle(demoRequest(KEY), handler)).status, 201);
    assert.equal(runs, 1);
  }

  it('a reservation whose call failed (a command timeout) and that the store applies after the loop first read the record is released: the retry runs', async () => {
    // A third diff review's: the failed call's token was dropped on the first read, before the queued command landed.
    await retryRunsOnceAfter(400, 800, (input, memory) => {
      // Queued at the server, applied at 200 ms; the client's command timeout rejects it at 70 ms.
      void sleep(200).then(() => memory.reserve(input));
      return sleep(70).then(() => Promise.reject(new Error('Command timed out')));
    });
  });

  it('a reservation that never answers and that the store applies after its lease (a server-side lock wait) is released: the retry runs', async () => {
    await retryRunsOnceAfter(200, 1200, (input, memory) => {
      void sleep(350).then(() => memory.reserve(input));
      return new Promise<never>(() => {});
    });
  });

  it('no fenced line when an earlier release the loop gave up on lands between its read and its next release', async () => {
    const memory = new MemoryStore();
    let reserves = 0;
    let releases = 0;
    let land!: () => void;
    const store = withMethods(memory, {
      reserve: async (input: ReserveInput) => {
        if (reserves++ > 0) return memory.reserve(input);
        await sleep(60);
        return memory.reserve(input);
      },
      release: async (...args: Parameters<MemoryStore['release']>) => {
        if (releases++ === 0) {
          await new Promise<void>((resolve) => (land = resolve));
          return memory.release(...args);
        }
        land();
        await sleep(1);
        return memory.release(...args);
      },
    });
    const events: GuardLogEvent[] = [];
    const guard = createGuard({ ...demoContract(), leaseMs: 100 }, { store, storeTimeoutMs: 50, log: (e) => events.push(e) });
    assert.equal((await guard.handle(demoRequest(KEY), async () => jsonResponse(201, {}))).status, 503);
    await sleep(600);
    assert.deepEqual(events.filter((e) => e.decision === 'fenced'), [], events.map((e) => e.decision).join(' '));
  });

  it('a resent reservation found as its own past its lease, whose give-back release fails, is released later: the retry runs', async () => {
    const memory = new MemoryStore();
    let resend = true;
    let failRelease = true;
    let clockDown = true;
    const store = withMethods(memory, {
      reserve: async (input: ReserveInput): Promise<ReserveResult> => {
        if (!resend) return memory.reserve(input);
        resend = false;
        await memory.reserve(input);
        return memory.reserve(input); // the second run answers the first run's record
      },
      now: async () => {
        if (clockDown) {
          clockDown = false;
          throw new Error('clock unreadable');
        }
        return memory.now();
      },
      release: async (...args: Parameters<MemoryStore['release']>) => {
        if (failRelease) {
          failRelease = false;
          throw new Error('ECONNRESET');
        }
        return memory.release(...args);
      },
    });
    const guard = createGuard({ ...demoContract(), leaseMs: 200 }, { store, storeTimeoutMs: 50 });
    let runs = 0;
    const handler = async () => (runs++, jsonResponse(201, { id: 'once' }));
    assert.equal((await guard.handle(demoRequest(KEY), handler)).status, 503);
    await sleep(400);
    assert.equal((await guard.handle(demoRequest(KEY), handler)).status, 201);
    assert.equal(runs, 1);
  });

  it('a late reservation answer of another shape than a store result leaves no unhandled rejection', async () => {
    const rejections: unknown[] = [];
    const onRejection = (reason: unknown) => rejections.push(reason);
    process.on('unhandledRejection', onRejection);
    try {
      const store = withMethods(new MemoryStore(), { reserve: async () => (await sleep(80), null) });
      const guard = createGuard({ ...demoContract(), leaseMs: 200 }, { store, storeTimeoutMs: 50 });
      assert.equal((await guard.handle(demoRequest(KEY), async () => jsonResponse(201, {}))).status, 503);
      await sleep(200);
    } finally {
      process.off('unhandledRejection', onRejection);
    }
    assert.deepEqual(rejections.map(String), []);
  });

  it('a late release whose own release the store applied after it gave up does not log fenced for the record nobody holds', async () => {
    // A diff review's: the next try found no record and said "fenced" (another holds it).
    const memory = new MemoryStore();
    const store = withMethods(memory, {
      reserve: async (input: ReserveInput) => (await sleep(100), memory.reserve(input)),
      release: async (...args: Parameters<MemoryStore['release']>) => (await sleep(80), memory.release(...args)),
    });
    const events: GuardLogEvent[] = [];
    const guard = createGuard({ ...demoContract(), leaseMs: 100 }, { store, storeTimeoutMs: 50, log: (e) => events.push(e) });
    assert.equal((await guard.handle(demoRequest(KEY), async () => jsonResponse(201, {}))).status, 503);
    await sleep(600);
    assert.equal(await memory.get(computeRecordId([['principal', 'user-1'], ['header', 'X-Tenant-Id', 't1']], 'createDemoRequest', KEY)), undefined, 'released');
    assert.deepEqual(events.filter((e) => e.decision === 'fenced'), []);
  });

  it('a completion the store refuses for good while it renews the lease is left abandoned past the lease: a retry goes to reconciliation, not 409 in progress for a day', async () => {
    // A diff review's: the lease renewal kept running while the completion was tried on until the TTL.
    const memory = new MemoryStore();
    const store = withMethods(memory, { complete: () => Promise.reject(new Error('value too long for type')) });
    let asked = 0;
    const guard = createGuard({ ...demoContract(), leaseMs: 200, ttlMs: 4000 }, { store, reconcile: () => (asked++, { outcome: 'unknown' }) });
    assert.equal((await guard.handle(demoRequest(KEY), async () => jsonResponse(201, { id: 'x' }))).status, 201);
    await sleep(1000);
    const retry = await guard.handle(demoRequest(KEY), async () => jsonResponse(201, { id: 'y' }));
    assert.equal(retry.headers['idempotency-problem'], 'idempotency-request-abandoned');
    assert.equal(asked, 1);
  });

  it('the late releases an outage left behind do not all go to the store at once: each wait past the lease is drawn between half the gap and all of it', async () => {
    // Before: every late release of one burst waited the same gaps, so a store that came back got them all in one go.
    const memory = new MemoryStore();
    const calls = new Map<string, number[]>();
    const store = withMethods(memory, {
      reserve: async (input: ReserveInput) => {
        await new Promise((resolve) => setTimeout(resolve, 100));
        return memory.reserve(input);
      },
      release: (id: string) => {
        calls.set(id, [...(calls.get(id) ?? []), performance.now()]);
        return Promise.reject(new Error('ECONNREFUSED'));
      },
    });
    const guard = createGuard({ ...demoContract(), leaseMs: 200, ttlMs: 1_000 }, { store, storeTimeoutMs: 50 });
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => guard.handle(demoRequest(`late-${i}`), async () => jsonResponse(201, {}))));
    assert.deepEqual([...new Set(answers.map((a) => a.status))], [503]);
    await new Promise((resolve) => setTimeout(resolve, 600));
    // The fifth call of each key is its first past the lease (four within it, a quarter of the lease apart).
    const waits = [...calls.values()].filter((times) => times.length >= 5).map((times) => times[4]! - times[3]!);
    assert.equal(waits.length, 40);
    // Drawn from 25-50 ms after the fourth: spread over about 25 ms, not all the same 50 ms.
    const spread = Math.max(...waits) - Math.min(...waits);
    assert.ok(spread >= 8 && Math.min(...waits) >= 20, `waits from ${Math.min(...waits).toFixed(1)} to ${Math.max(...waits).toFixed(1)} ms`);
  });

  it('a reservation call that failed outright (nothing made) logs nothing when its late release is refused past the lease', async () => {
    // A diff review's: every failed request of an outage longer than the lease logged `fenced` for a record never made.
    const memory = new MemoryStore();
    let down = true;
    const store = withMethods(memory, {
      reserve: (input: ReserveInput) => (down ? Promise.reject(new Error('ECONNREFUSED')) : memory.reserve(input)),
      release: (...args: Parameters<MemoryStore['release']>) => (down ? Promise.reject(new Error('ECONNREFUSED')) : memory.release(...args)),
    });
    const events: GuardLogEvent[] = [];
    const guard = createGuard({ ...demoContract(), leaseMs: 200 }, { store, storeTimeoutMs: 50, log: (e) => events.push(e) });
    assert.equal((await guard.handle(demoRequest(KEY), async () => jsonResponse(201, { id: 'once' }))).status, 503);
    await new Promise((resolve) => setTimeout(resolve, 400));
    down = false;
    await new Promise((resolve) => setTimeout(resolve, 700));
    assert.deepEqual(events.map((e) => e.decision), ['store-unavailable']);
  });

  it('a completion that every attempt timed out on but the store applied is logged completed; a refusal the store cannot explain, record-failed (unverified)', async () => {
    for (const ending of ['applied late', 'unverified'] as const) {
      const memory = new MemoryStore();
      let calls = 0;
      const store = withMethods(memory, {
        complete: async (...args: Parameters<MemoryStore['complete']>) => {
          calls += 1;
          if (ending === 'unverified') {
            if (calls === 1) throw new Error('ECONNRESET');
            return false;
          }
          await new Promise((resolve) => setTimeout(resolve, 120));
          return memory.complete(...args);
        },
        get: (...args: Parameters<MemoryStore['get']>) => (ending === 'unverified' && calls > 1 ? Promise.reject(new Error('ECONNRESET')) : memory.get(...args)),
      });
      const events: GuardLogEvent[] = [];
      const guard = createGuard({ ...demoContract(), leaseMs: 200 }, { store, storeTimeoutMs: 50, log: (e) => events.push(e) });
      assert.equal((await guard.handle(demoRequest(KEY), async () => jsonResponse(201, { id: 'once' }))).status, 201);
      await new Promise((resolve) => setTimeout(resolve, 900));
      const last = events.at(-1)!;
      if (ending === 'applied late') assert.deepEqual([last.decision, last.reason], ['completed', undefined], ending);
      else assert.deepEqual([last.decision, last.reason], ['record-failed', 'unverified'], ending);
    }
  });

  it('does not throw from complete when the store fails; logs record-failed', async () => {
    const events: GuardLogEvent[] = [];
    const guard = createGuard(demoContract(), { store: brokenStore('reject'), log: (e) => events.push(e) });
    await guard.complete({ guarded: true, operation: 'x', recordId: 'r', token: 't', requestId: undefined }, jsonResponse(201, {}));
    assert.deepEqual(events.map((e) => e.decision), ['record-failed']);
  });
});

describe('runtime/guard: logs', () => {
  it('carry only safe fields: no raw key, payload, headers or response body', async () => {
    const s = setup();
    const body = { topic: 'secret-topic', contact: { email: 'secret@example.com' } };
    await s.guard.handle(demoRequest(KEY, body, { headers: { 'idempotency-key': KEY, 'x-tenant-id': 't1', authorization: 'Bearer top-secret' } }), s.handler);
    await s.guard.handle(demoRequest(KEY, body, { headers: { 'idempotency-key': KEY, 'x-tenant-id': 't1', authorization: 'Bearer top-secret' } }), s.handler);
    const text = JSON.stringify(s.events);
    for (const secret of [KEY, 'secret-topic', 'secret@example.com', 'top-secret', 'session=secret', 'pricing']) {
      assert.ok(!text.includes(secret), `log leaks ${secret}`);
    }
    const allowed = new Set(['time', 'operation', 'requestId', 'keyId', 'decision', 'state', 'resultId', 'status']);
    for (const event of s.events) for (const field of Object.keys(event)) assert.ok(allowed.has(field), field);
    assert.deepEqual(s.events.map((e) => e.decision), ['reserved', 'completed', 'replay']);
    assert.equal(s.events[1]!.resultId, 'dr_1');
    assert.match(s.events[0]!.keyId!, /^[0-9a-f]{64}$/);
    assert.equal(s.events[0]!.time, new Date(1_800_000_000_000).toISOString());
  });
});

describe('runtime/guard: a contract keyed on the request-id header', () => {
  it('never logs the raw key as the request id', async () => {
    const contract = demoContract({ key: { ...demoContract().key, name: 'X-Request-Id' } });
    const s = setup({}, contract);
    const request = demoRequest(undefined, undefined, { headers: { 'x-request-id': KEY, 'x-tenant-id': 't1' }, requestId: KEY });
    await s.guard.handle(request, s.handler);
    await s.guard.handle(request, s.handler);
    assert.deepEqual(s.events.map((e) => e.decision), ['reserved', 'completed', 'replay']);
    assert.ok(!JSON.stringify(s.events).includes(KEY));
    assert.equal(s.runs(), 1);
  });

  it('nor a client\'s request id that is its key, when the key travels in the body or the query', async () => {
    const bodyKeyed = demoContract({ key: { in: 'body', name: '/payment/idempotency_key', required: true, maxLength: 64 }, fingerprint: { include: 'all', exclude: [], query: [] } });
    const queryKeyed = demoContract({ key: { in: 'query', name: 'requestId', required: true, maxLength: 64 } });
    for (const [contract, request] of [
      [bodyKeyed, demoRequest(undefined, { payment: { amount: 1, idempotency_key: KEY } }, { requestId: KEY })],
      [queryKeyed, demoRequest(undefined, undefined, { query: { requestId: KEY }, requestId: KEY })],
    ] as const) {
      const s = setup({}, contract);
      await s.guard.handle(request, s.handler);
      await s.guard.handle(request, s.handler);
      assert.deepEqual(s.events.map((e) => e.decision), ['reserved', 'completed', 'replay']);
      assert.ok(!JSON.stringify(s.events).includes(KEY), JSON.stringify(s.events));
    }
    // Another request id is logged as it is.
    const s = setup({}, queryKeyed);
    await s.guard.handle(demoRequest(undefined, undefined, { query: { requestId: KEY }, requestId: 'req-1' }), s.handler);
    assert.equal(s.events[0]!.requestId, 'req-1');
  });

  it('nor a request id that holds the key in another case or with more around it (req-<key>, "<key>")', async () => {
    for (const requestId of [`req-${KEY}`, `"${KEY}"`, KEY.toUpperCase(), `${KEY.toLowerCase()}-attempt-2`]) {
      const s = setup();
      await s.guard.handle(demoRequest(KEY, undefined, { requestId }), s.handler);
      assert.ok(!JSON.stringify(s.events).toLowerCase().includes(KEY.toLowerCase()), `${requestId}: ${JSON.stringify(s.events)}`);
      assert.equal(s.events[0]!.requestId, undefined, requestId);
    }
    // A short key inside an unrelated id is chance, not derivation: the id is kept.
    const short = setup();
    await short.guard.handle(demoRequest('k1', undefined, { requestId: 'req-k12' }), short.handler);
    assert.equal(short.events[0]!.requestId, 'req-k12');
  });
});

describe('runtime/guard: a key sent as an RFC 9651 quoted string', () => {
  it('is not logged as the request id either, when the client sends it as both', async () => {
    const s = setup();
    const headers = { 'idempotency-key': ` "${KEY}" `, 'x-tenant-id': 't1' };
    await s.guard.handle(demoRequest(undefined, undefined, { headers, requestId: KEY }), s.handler);
    await s.guard.handle(demoRequest(undefined, undefined, { headers, requestId: KEY }), s.handler);
    assert.deepEqual(s.events.map((e) => e.decision), ['reserved', 'completed', 'replay']);
    assert.ok(!JSON.stringify(s.events).includes(KEY), JSON.stringify(s.events));
  });
});

function firstEventKeyId(events: GuardLogEvent[]): string {
  return events.find((e) => e.keyId !== undefined)!.keyId!;
}

describe('runtime/guard: a key in the body or the query (AWS clientToken, Square idempotency_key, Google requestId)', () => {
  const bodyKeyed = demoContract({ key: { in: 'body', name: '/payment/idempotency_key', required: true, maxLength: 64 }, fingerprint: { include: 'all', exclude: [], query: [] } });
  const queryKeyed = demoContract({ key: { in: 'query', name: 'requestId', required: true, maxLength: 64 } });
  const order = (key: unknown, amount = 100) => ({ payment: { amount, ...(key === undefined ? {} : { idempotency_key: key }) } });
  /** A request that carries its key only where the contract says: no key header. */
  const inBody = (key: unknown, amount?: number) => demoRequest(undefined, order(key, amount));
  const inQuery = (key: string | readonly string[] | undefined) => demoRequest(undefined, undefined, key === undefined ? {} : { query: { requestId: key } });

  it('reads the key from the body field: the retry with the same body is replayed, another body with that key is 422', async () => {
    const s = setup({}, bodyKeyed);
    const first = await s.guard.handle(inBody('sq-7f1c'), s.handler);
    assert.equal(first.status, 201);
    const again = await s.guard.handle(inBody('sq-7f1c'), s.handler);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.deepEqual(bodyJson(again), bodyJson(first));
    assert.equal((await s.guard.handle(inBody('sq-7f1c', 999), s.handler)).status, 422);
    assert.equal((await s.guard.handle(inBody('sq-other'), s.handler)).status, 201, 'another key is another intent');
    assert.equal(s.runs(), 2);
  });

  it('ignores a key header when the contract keys on the body, and answers 400 naming the body field when the field is missing', async () => {
    const s = setup({}, bodyKeyed);
    const response = await s.guard.handle(demoRequest('header-key', order(undefined)), s.handler);
    assert.equal(response.status, 400);
    assert.equal(problemType(response), `${PROBLEM_BASE}idempotency-key-missing`);
    assert.match(bodyJson(response).detail, /Send the body field \/payment\/idempotency_key:/);
    assert.equal(s.runs(), 0);
  });

  for (const [what, key] of [
    ['a number', 42],
    ['an object', { id: 'k' }],
    ['an empty string', ''],
    ['a string with a line break', 'k\n1'],
    ['a string longer than maxLength', 'k'.repeat(65)],
    ['a list holding one string (JSON ["k"], a form\'s key[]=k)', ['k']],
    ['an empty list', []],
    ['a string with U+FFFD (bytes that were not UTF-8: %FF and %FE would be one key)', 'k\ufffd'],
    ['a string with a lone surrogate', 'k\ud800'],
    ['a string with a percent-escape that is no UTF-8 (Express\'s form parser keeps %FF as text)', 'k%FF'],
  ] as const) {
    it(`refuses a body key that is ${what} with 400 invalid, before the handler`, async () => {
      const s = setup({}, bodyKeyed);
      const response = await s.guard.handle(inBody(key), s.handler);
      assert.equal(response.status, 400);
      assert.equal(problemType(response), `${PROBLEM_BASE}idempotency-key-invalid`);
      assert.match(bodyJson(response).detail, /^The body field \/payment\/idempotency_key is not a valid key: /);
      assert.equal(s.runs(), 0);
    });
  }

  it('takes a body key as sent: commas, quotes and non-ASCII letters are part of it, not header syntax', async () => {
    const s = setup({}, bodyKeyed);
    for (const key of ['a,b', '"quoted"', 'ключ-1']) {
      assert.equal((await s.guard.handle(inBody(key), s.handler)).status, 201, key);
      assert.equal((await s.guard.handle(inBody(key), s.handler)).headers['idempotent-replayed'], 'true', key);
    }
    assert.equal(s.runs(), 3);
  });

  it('reads the key from the query parameter; repeated, it is 400 invalid; absent, 400 naming the parameter', async () => {
    const s = setup({}, queryKeyed);
    assert.equal((await s.guard.handle(inQuery('req-1f'), s.handler)).status, 201);
    assert.equal((await s.guard.handle(inQuery('req-1f'), s.handler)).headers['idempotent-replayed'], 'true');
    const twice = await s.guard.handle(inQuery(['req-1f', 'req-2f']), s.handler);
    assert.equal(problemType(twice), `${PROBLEM_BASE}idempotency-key-invalid`);
    // ?requestId=%FF and ?requestId=%FE both decode to U+FFFD: refused, never one record for two keys.
    assert.equal(problemType(await s.guard.handle(inQuery('\ufffd'), s.handler)), `${PROBLEM_BASE}idempotency-key-invalid`);
    const missing = await s.guard.handle(demoRequest('header-key'), s.handler);
    assert.equal(missing.status, 400);
    assert.match(bodyJson(missing).detail, /Send the requestId query parameter:/);
    assert.equal(s.runs(), 1);
  });

  it('keeps one owner\'s body-keyed replay away from another owner with the same key', async () => {
    const s = setup({}, bodyKeyed);
    await s.guard.handle(inBody('shared'), s.handler);
    const other = await s.guard.handle({ ...inBody('shared'), principal: 'user-2' }, s.handler);
    assert.equal(other.headers['idempotent-replayed'], 'false');
    assert.equal(s.runs(), 2);
  });

  it('never logs or stores the raw body key', async () => {
    const s = setup({}, bodyKeyed);
    await s.guard.handle(inBody('secret-key-value'), s.handler);
    assert.doesNotMatch(JSON.stringify(s.events), /secret-key-value/);
    const record = await s.store.get(computeRecordId([['principal', 'user-1'], ['header', 'X-Tenant-Id', 't1']], 'createDemoRequest', 'secret-key-value'));
    assert.ok(record, 'the record is found by the hashed key');
    assert.doesNotMatch(JSON.stringify(record, (_k, v: unknown) => (v instanceof Uint8Array ? Buffer.from(v).toString() : v)), /secret-key-value/);
  });

  it('allows the key header among replayHeaders when the key is not a header', () => {
    assert.doesNotThrow(() => createGuard(bodyKeyed, { store: new MemoryStore(), replayHeaders: ['content-type', 'idempotency-key'] }));
  });
});

describe('runtime/guard: the status route (status), after an unknown outcome', () => {
  /** A status-route GET carrying `key` (or none), with the caller and tenant of `demoRequest`. */
  const statusRequest = (key: string | undefined, extra: Partial<GuardRequest> = {}): GuardRequest => ({ ...demoRequest(key, undefined), requestId: 'status-1', ...extra });

  it('replays a completed request: the stored status, body and headers, the replay header true; the handler never runs again', async () => {
    const s = setup();
    const first = await s.guard.handle(demoRequest(KEY), s.handler);
    const answer = await s.guard.status(statusRequest(KEY));
    assert.ok(answer !== undefined);
    assert.equal(answer.status, 201);
    assert.deepEqual(bodyJson(answer), bodyJson(first));
    assert.equal(answer.headers['idempotent-replayed'], 'true');
    assert.equal(answer.headers['location'], '/v1/demo-requests/dr_1');
    // A GET answered from a caller's record: no shared cache may keep it for the next caller of the URL.
    assert.equal(answer.headers['cache-control'], 'no-store');
    assert.equal(s.runs(), 1);
    assert.deepEqual(
      s.events.filter((e) => e.decision === 'replay').map((e) => e.via),
      ['status'],
    );
  });

  it('answers 409 in progress with Retry-After while the request runs, and 409 abandoned past its lease (no reconcile: a read changes nothing)', async () => {
    let reconciled = 0;
    const s = setup({ reconcile: () => ((reconciled += 1), { outcome: 'not-happened' }) });
    const begun = await s.guard.begin(demoRequest(KEY));
    assert.equal(begun.kind, 'proceed');
    const running = await s.guard.status(statusRequest(KEY));
    assert.equal(running?.status, 409);
    assert.equal(bodyJson(running!).type, `${PROBLEM_BASE}idempotency-request-in-progress`);
    assert.ok(Number(running!.headers['retry-after']) >= 1);
    s.advance(31_000);
    const gone = await s.guard.status(statusRequest(KEY));
    assert.equal(gone?.status, 409);
    assert.equal(bodyJson(gone!).type, `${PROBLEM_BASE}idempotency-request-abandoned`);
    // Not "check the operation status": the caller is at the status route already.
    assert.match(String(bodyJson(gone!).detail), /Ask again later/);
    assert.doesNotMatch(String(bodyJson(gone!).detail), /operation status/);
    assert.equal(reconciled, 0);
    // Logged as the status route's reads, not as requests of the operation that were refused.
    assert.deepEqual(
      s.events.filter((e) => e.decision === 'in-progress' || e.decision === 'abandoned').map((e) => [e.decision, e.via]),
      [
        ['in-progress', 'status'],
        ['abandoned', 'status'],
      ],
    );
    assert.equal((await s.store.get(begun.kind === 'proceed' ? begun.reservation.recordId! : ''))?.state, 'in_progress');
  });

  it('answers 404 idempotency-key-unknown for a key never recorded, another caller\'s or tenant\'s key, and a record past its TTL', async () => {
    const s = setup();
    await s.guard.handle(demoRequest(KEY), s.handler);
    for (const [what, request] of [
      ['never sent', statusRequest('other-key-1')],
      ['another caller', statusRequest(KEY, { principal: 'user-2' })],
      ['another tenant', statusRequest(KEY, { headers: { 'idempotency-key': KEY, 'x-tenant-id': 't2' } })],
    ] as const) {
      const answer = await s.guard.status(request);
      assert.equal(answer?.status, 404, what);
      assert.equal(bodyJson(answer!).type, `${PROBLEM_BASE}idempotency-key-unknown`, what);
    }
    s.advance(86_400_001);
    assert.equal((await s.guard.status(statusRequest(KEY)))?.status, 404, 'past the TTL');
    assert.deepEqual(
      s.events.filter((e) => e.decision === 'not-found').map((e) => e.status),
      [404, 404, 404, 404],
    );
  });

  it('leaves a request without the key to the route\'s handler (undefined); refuses an invalid key or an unresolved scope with 400; 503 when the store is down', async () => {
    const s = setup();
    assert.equal(await s.guard.status(statusRequest(undefined)), undefined);
    assert.equal((await s.guard.status(statusRequest('bad key!')))?.status, 400);
    const unscoped = await s.guard.status(statusRequest(KEY, { principal: undefined }));
    assert.equal(bodyJson(unscoped!).type, `${PROBLEM_BASE}idempotency-scope-unresolved`);
    const down = createGuard(demoContract(), { store: withMethods(new MemoryStore(), { get: () => Promise.reject(new StoreError('unavailable', 'down')) }) });
    const answer = await down.status(statusRequest(KEY));
    assert.equal(answer?.status, 503);
    assert.equal(answer?.headers['retry-after'], '1');
  });

  it('never answers on a contract whose scope has no principal: a key alone is no credential to read a stored answer', async () => {
    // The diff review's: with `scope: [global]`, anyone who knew a key read its stored answer (a POST needs the payload).
    const s = setup({}, demoContract({ scope: [{ kind: 'global' }] }));
    await s.guard.handle(demoRequest(KEY), s.handler);
    assert.equal(await s.guard.status(statusRequest(KEY, { principal: 'mallory' })), undefined);
  });

  it('never answers for a key that travels in the body (a GET has none): the route\'s own input names the intent', async () => {
    const s = setup({}, demoContract({ key: { in: 'body', name: '/idempotency_key', required: true, maxLength: 255, pattern: undefined } }));
    assert.equal(await s.guard.status(statusRequest(KEY, { query: { idempotency_key: KEY } })), undefined);
  });
});
