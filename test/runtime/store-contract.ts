import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createGuard, type HandlerContext } from '../../src/runtime/guard.js';
import type { CompleteInput, IdempotencyStore, ReserveInput, TransactionalStore } from '../../src/runtime/store.js';
import { demoContract, demoRequest, jsonResponse } from './fixtures.js';

/** A store made for one test, on an injected clock, with a way to read back everything it stored. */
export interface StoreUnderTest {
  readonly store: IdempotencyStore;
  /** Everything the backend holds for this store (rows, hashes) as text, to look for leaks. */
  dump(): Promise<string>;
  /** Called after the test (drop the table, delete the keys). */
  dispose?(): Promise<void>;
}

/** How the conformance suite gets a fresh, empty store on the given clock. Called inside `it`, after `before`. */
export type MakeStore = (clock: () => number) => Promise<StoreUnderTest>;

const LEASE = 30_000;
const TTL = 3_600_000;

function reserveInput(id: string, overrides: Partial<ReserveInput> = {}): ReserveInput {
  return { id, operation: 'createDemoRequest', fingerprint: 'v1:aaaa', token: randomUUID(), leaseMs: LEASE, ttlMs: TTL, ...overrides };
}

function completion(body: Uint8Array, overrides: Partial<CompleteInput> = {}): CompleteInput {
  return { response: { status: 201, headers: { 'content-type': 'application/json', location: '/x/1' }, body }, resultId: 'dr_1', ttlMs: TTL, ...overrides };
}

const bytes = (text: string) => new TextEncoder().encode(text);

/**
 * The one conformance suite every store runs (memory, SQLite, PostgreSQL, Redis). Time is injected:
 * lease and TTL cases move the clock instead of sleeping.
 */
export function describeStoreContract(name: string, makeStore: MakeStore): void {
  describe(`store contract: ${name}`, () => {
    let t = 0;
    let sut: StoreUnderTest;
    let store: IdempotencyStore;
    const clock = () => t;

    beforeEach(async function () {
      t = 1_800_000_000_000;
      sut = await makeStore(clock);
      store = sut.store;
    });
    afterEach(async () => {
      await sut?.dispose?.();
    });

    it('reserves an absent record with the lease, expiry and creation time from its clock', async () => {
      const input = reserveInput('r1');
      const result = await store.reserve(input);
      assert.equal(result.outcome, 'reserved');
      assert.equal(result.now, t);
      assert.deepEqual(result.record, {
        id: 'r1', operation: 'createDemoRequest', fingerprint: 'v1:aaaa', state: 'in_progress', leaseToken: input.token,
        leaseUntil: t + LEASE, expiresAt: t + TTL, createdAt: t,
      });
      assert.deepEqual(await store.get('r1'), result.record);
      assert.equal(await store.get('absent'), undefined);
      assert.equal(await store.now(), t);
    });

    it('returns the existing record untouched to a second reservation', async () => {
      const first = await store.reserve(reserveInput('r1'));
      t += 1000;
      const second = await store.reserve(reserveInput('r1', { fingerprint: 'v1:bbbb' }));
      assert.equal(second.outcome, 'existing');
      assert.deepEqual(second.record, first.record);
      assert.equal(second.now, t);
    });

    it('gives exactly one of 50 concurrent reservations the record', async () => {
      const inputs = Array.from({ length: 50 }, () => reserveInput('hot'));
      const results = await Promise.all(inputs.map((input) => store.reserve(input)));
      const winners = results.filter((r) => r.outcome === 'reserved');
      assert.equal(winners.length, 1);
      const owner = winners[0]!.record.leaseToken;
      assert.ok(results.every((r) => r.record.leaseToken === owner));
      assert.equal((await store.get('hot'))?.leaseToken, owner);
    });

    it('completes with the owner token, byte-exact, and never overwrites a completed record', async () => {
      const input = reserveInput('r1');
      await store.reserve(input);
      t += 500;
      const body = new Uint8Array([0x7b, 0x00, 0xff, 0xc3, 0x28, 0x0a, 0x7d]);
      assert.equal(await store.complete('r1', input.token, completion(body)), true);
      const record = await store.get('r1');
      assert.equal(record?.state, 'completed');
      assert.equal(record?.expiresAt, t + TTL);
      assert.equal(record?.resultId, 'dr_1');
      assert.equal(record?.response?.status, 201);
      assert.deepEqual(record?.response?.headers, { 'content-type': 'application/json', location: '/x/1' });
      assert.deepEqual([...record!.response!.body], [...body]);
      assert.equal(await store.complete('r1', input.token, completion(bytes('other'))), false);
      assert.equal(await store.release('r1', input.token), false);
      assert.deepEqual(await store.get('r1'), record);
    });

    it('stores an empty body and no result id as such', async () => {
      const input = reserveInput('r1');
      await store.reserve(input);
      assert.equal(await store.complete('r1', input.token, { response: { status: 204, headers: {}, body: new Uint8Array() }, ttlMs: TTL }), true);
      const record = await store.get('r1');
      assert.equal(record?.response?.body.length, 0);
      assert.deepEqual(record?.response?.headers, {});
      assert.equal(record?.resultId, undefined);
    });

    it('stores a large body intact', async () => {
      const input = reserveInput('big');
      await store.reserve(input);
      const body = new Uint8Array(300_000).map((_, i) => (i * 31) % 256);
      assert.equal(await store.complete('big', input.token, completion(body)), true);
      assert.deepEqual(Buffer.from((await store.get('big'))!.response!.body), Buffer.from(body));
    });

    it('ignores a stale token on complete and release', async () => {
      const input = reserveInput('r1');
      await store.reserve(input);
      const before = await store.get('r1');
      assert.equal(await store.complete('r1', randomUUID(), completion(bytes('{}'))), false);
      assert.equal(await store.release('r1', randomUUID()), false);
      assert.equal(await store.complete('absent', input.token, completion(bytes('{}'))), false);
      assert.equal(await store.release('absent', input.token), false);
      assert.deepEqual(await store.get('r1'), before);
    });

    it('releases with the owner token, after which the id can be reserved again', async () => {
      const input = reserveInput('r1');
      await store.reserve(input);
      assert.equal(await store.release('r1', input.token), true);
      assert.equal(await store.get('r1'), undefined);
      assert.equal((await store.reserve(reserveInput('r1'))).outcome, 'reserved');
    });

    it('never overwrites an in_progress record by reserving, even past its lease and expiry', async () => {
      const input = reserveInput('r1');
      await store.reserve(input);
      t += TTL + LEASE;
      const again = await store.reserve(reserveInput('r1'));
      assert.equal(again.outcome, 'existing');
      assert.equal(again.record.leaseToken, input.token);
    });

    it('reserves over a completed record once it has expired', async () => {
      const input = reserveInput('r1');
      await store.reserve(input);
      await store.complete('r1', input.token, completion(bytes('{}')));
      t += TTL - 1;
      assert.equal((await store.reserve(reserveInput('r1'))).outcome, 'existing');
      t += 1;
      const fresh = reserveInput('r1', { fingerprint: 'v1:cccc' });
      const result = await store.reserve(fresh);
      assert.equal(result.outcome, 'reserved');
      assert.equal(result.record.fingerprint, 'v1:cccc');
      assert.equal(result.record.response, undefined);
      assert.equal(result.record.resultId, undefined);
    });

    it('lets exactly one of many take over an abandoned reservation, and fences the old owner out', async () => {
      const input = reserveInput('r1');
      await store.reserve(input);
      assert.equal(await store.takeover('r1', input.fingerprint, input.token, randomUUID(), LEASE), undefined, 'not before the lease ends');
      t += LEASE;
      const tokens: string[] = Array.from({ length: 20 }, () => randomUUID());
      const results = await Promise.all(tokens.map((token) => store.takeover('r1', input.fingerprint, input.token, token, LEASE)));
      const winners = results.filter((r) => r !== undefined);
      assert.equal(winners.length, 1);
      const winner = winners[0]!;
      assert.ok(tokens.includes(winner.leaseToken));
      assert.equal(winner.leaseUntil, t + LEASE);
      assert.equal(winner.createdAt, t);
      assert.equal(winner.state, 'in_progress');
      assert.equal(await store.complete('r1', input.token, completion(bytes('late'))), false);
      assert.equal(await store.release('r1', input.token), false);
      assert.equal(await store.complete('r1', winner.leaseToken, completion(bytes('{}'))), true);
    });

    it('never lets another fingerprint or a wrong stale token take over', async () => {
      const input = reserveInput('r1');
      await store.reserve(input);
      t += LEASE * 2;
      assert.equal(await store.takeover('r1', 'v1:other', input.token, randomUUID(), LEASE), undefined);
      assert.equal(await store.takeover('r1', input.fingerprint, randomUUID(), randomUUID(), LEASE), undefined);
      assert.equal(await store.takeover('absent', input.fingerprint, input.token, randomUUID(), LEASE), undefined);
      assert.equal((await store.get('r1'))?.leaseToken, input.token);
      await store.complete('r1', input.token, completion(bytes('{}')));
      assert.equal(await store.takeover('r1', input.fingerprint, input.token, randomUUID(), LEASE), undefined, 'never a completed record');
    });

    it('extend: renews the lease of the owner token only, while in_progress', async () => {
      // Optional in the interface, but every bundled store has it: without it the guard never renews a lease.
      assert.equal(typeof store.extend, 'function', `${name} has no extend (lease heartbeat)`);
      const extend = store.extend!.bind(store);
      const input = reserveInput('hb');
      await store.reserve(input);
      t += LEASE - 1;
      assert.equal(await extend('hb', input.token, LEASE), true);
      assert.equal((await store.get('hb'))?.leaseUntil, t + LEASE);
      t += LEASE - 1;
      assert.equal((await store.listAbandoned()).length, 0, 'a renewed owner is not abandoned');
      assert.equal(await extend('hb', 'someone-else', LEASE), false);
      assert.equal(await extend('absent', input.token, LEASE), false);
      // Past the lease but not taken over: the owner is alive, the renewal holds and fences takeovers out.
      t += 2;
      assert.equal(await extend('hb', input.token, LEASE), true);
      assert.equal(await store.takeover('hb', input.fingerprint, input.token, randomUUID(), LEASE), undefined);
      assert.equal(await store.complete('hb', input.token, completion(bytes('{}'))), true);
      assert.equal(await extend('hb', input.token, LEASE), false, 'a completed record is never extended');
      assert.equal((await store.get('hb'))?.state, 'completed');
    });

    it('lists abandoned reservations oldest lease first, and only those', async () => {
      const a = reserveInput('a');
      await store.reserve(a);
      t += 1000;
      await store.reserve(reserveInput('b'));
      t += 1000;
      const c = reserveInput('c');
      await store.reserve(c);
      await store.complete('c', c.token, completion(bytes('{}')));
      assert.deepEqual(await store.listAbandoned(), []);
      t += LEASE - 1000;
      assert.deepEqual((await store.listAbandoned()).map((r) => r.id), ['a', 'b']);
      assert.deepEqual((await store.listAbandoned({ limit: 1 })).map((r) => r.id), ['a']);
      assert.equal((await store.listAbandoned())[0]!.leaseToken, a.token);
    });

    it('pages through abandoned reservations with `after`: every record once, in (lease, id) order, ties included', async () => {
      // Three reserved in the same millisecond (one lease), then two more, one of them settled while paging.
      for (const id of ['t3', 't1', 't2']) await store.reserve(reserveInput(id));
      t += 5;
      const settled = reserveInput('u2');
      for (const input of [reserveInput('u1'), settled]) await store.reserve(input);
      t += LEASE + 10;
      const seen: string[] = [];
      let page = await store.listAbandoned({ limit: 2 });
      for (let pages = 1; page.length > 0; pages += 1) {
        assert.ok(pages <= 3, 'five records in pages of two end after three pages');
        seen.push(...page.map((r) => r.id));
        if (seen.length === 2) assert.equal(await store.release('u2', settled.token), true, 'a record settled between pages');
        const last = page.at(-1)!;
        page = await store.listAbandoned({ limit: 2, after: { leaseUntil: last.leaseUntil, id: last.id } });
      }
      assert.deepEqual(seen, ['t1', 't2', 't3', 'u1']);
      // A cursor whose own record left the list still places the page.
      assert.equal(await store.release('t2', (await store.get('t2'))!.leaseToken), true);
      const tieLease = (await store.get('t1'))!.leaseUntil;
      assert.deepEqual((await store.listAbandoned({ after: { leaseUntil: tieLease, id: 't2' } })).map((r) => r.id), ['t3', 'u1']);
      await assert.rejects(store.listAbandoned({ after: { leaseUntil: Number.NaN, id: 't2' } }), TypeError);
    });

    it('purgeAbandoned deletes in_progress records past both their lease and their TTL, in batches, and nothing else', async () => {
      assert.ok(store.purgeAbandoned !== undefined, 'every bundled store has it');
      for (const id of ['s1', 's2', 's3']) await store.reserve(reserveInput(id));
      const done = reserveInput('done');
      await store.reserve(done);
      await store.complete('done', done.token, completion(bytes('{}'), { ttlMs: TTL * 3 }));
      t += LEASE + 1;
      // Past the lease, within the TTL: abandoned, for reconciliation — kept.
      assert.deepEqual((await store.listAbandoned()).map((r) => r.id).sort(), ['s1', 's2', 's3']);
      assert.equal(await store.purgeAbandoned!(), 0);
      // A live handler's lease, renewed past the TTL, keeps its record too.
      const live = reserveInput('live');
      await store.reserve(live);
      t += TTL;
      if (store.extend !== undefined) assert.equal(await store.extend('live', live.token, LEASE), true);
      assert.equal(await store.purgeAbandoned!({ limit: 2 }), 2);
      assert.equal(await store.purgeAbandoned!({ limit: 10 }), 1);
      assert.equal(await store.purgeAbandoned!(), 0);
      for (const id of ['s1', 's2', 's3']) assert.equal(await store.get(id), undefined);
      assert.equal((await store.get('done'))?.state, 'completed');
      if (store.extend !== undefined) assert.equal((await store.get('live'))?.state, 'in_progress');
      // Its key is free again, as an expired completed record's is.
      assert.equal((await store.reserve(reserveInput('s1'))).outcome, 'reserved');
    });

    it('purgeAbandoned finds a record past its TTL behind many past their lease but not their TTL (operations of other TTLs)', async () => {
      for (let i = 0; i < 6; i += 1) await store.reserve(reserveInput(`long-${i}`, { ttlMs: TTL * 100 }));
      t += 1;
      await store.reserve(reserveInput('short'));
      t += TTL + LEASE;
      assert.equal(await store.purgeAbandoned!({ limit: 1 }), 1);
      assert.equal(await store.get('short'), undefined);
      assert.equal(await store.purgeAbandoned!({ limit: 1 }), 0);
      assert.equal((await store.listAbandoned()).length, 6);
    });

    it('purges expired completed records in batches and never in_progress ones', async () => {
      for (const id of ['c1', 'c2', 'c3']) {
        const input = reserveInput(id);
        await store.reserve(input);
        await store.complete(id, input.token, completion(bytes('{}'), { ttlMs: id === 'c3' ? TTL * 2 : TTL }));
      }
      await store.reserve(reserveInput('stuck'));
      assert.equal(await store.purgeExpired(), 0);
      t += TTL + LEASE;
      assert.equal(await store.purgeExpired({ limit: 1 }), 1);
      assert.equal(await store.purgeExpired({ limit: 10 }), 1);
      assert.equal(await store.purgeExpired(), 0);
      assert.equal(await store.get('c1'), undefined);
      assert.equal(await store.get('c2'), undefined);
      assert.equal((await store.get('c3'))?.state, 'completed');
      assert.equal((await store.get('stuck'))?.state, 'in_progress');
    });

    it('holds no raw key, request headers or request body once the guard has used it', async () => {
      const key = 'raw-key-6f1d0c4e-secret';
      const guard = createGuard(demoContract(), { store, now: clock });
      const request = demoRequest(key, { topic: 'body-topic-secret', contact: { email: 'body-mail@secret.example' } }, {
        headers: { 'idempotency-key': key, 'x-tenant-id': 'tenant-secret', authorization: 'Bearer header-secret', cookie: 'sid=cookie-secret' },
      });
      const response = await guard.handle(request, async () => jsonResponse(201, { id: 'dr_visible' }, { 'set-cookie': 'sid=set-cookie-secret' }));
      assert.equal(response.status, 201);
      const dump = await sut.dump();
      assert.ok(dump.includes('dr_visible'), 'the dump shows the stored response');
      for (const secret of [key, 'body-topic-secret', 'body-mail@secret.example', 'tenant-secret', 'header-secret', 'cookie-secret', 'set-cookie-secret', 'user-1']) {
        assert.ok(!dump.includes(secret), `the store holds ${secret}`);
      }
    });
  });
}

/** A transactional store for one test, with a business table written through the transaction handle. */
export interface TransactionalUnderTest<Tx> {
  readonly store: TransactionalStore<Tx>;
  /** Insert `value` into the business table through `tx`. */
  writeBusiness(tx: Tx, value: string): Promise<void>;
  /** Committed business rows, sorted. */
  businessRows(): Promise<string[]>;
  dispose?(): Promise<void>;
}

/**
 * One-transaction mode (PostgreSQL, SQLite): reservation, business write and completion commit together;
 * a duplicate waits for the open transaction and then reads `completed`; a failure frees the key.
 */
export function describeTransactionContract<Tx>(name: string, make: () => Promise<TransactionalUnderTest<Tx>>): void {
  describe(`one-transaction mode: ${name}`, () => {
    let sut: TransactionalUnderTest<Tx>;
    beforeEach(async () => {
      sut = await make();
    });
    afterEach(async () => {
      await sut?.dispose?.();
    });

    const guardOf = () => createGuard<Tx>(demoContract(), { store: sut.store, storeTimeoutMs: 5000 });
    const writer = (value: string, response = jsonResponse(201, { id: value })) => async (ctx: HandlerContext<Tx>) => {
      assert.ok(ctx.tx !== undefined, 'the handler gets the transaction');
      await sut.writeBusiness(ctx.tx, value);
      return response;
    };

    it('commits the reservation, the business write and completed together, then replays', async () => {
      const guard = guardOf();
      const first = await guard.handle(demoRequest('tx-1'), writer('row-1'), { transaction: true });
      assert.equal(first.status, 201);
      assert.equal(first.headers['idempotent-replayed'], 'false');
      const again = await guard.handle(demoRequest('tx-1'), writer('row-2'), { transaction: true });
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.deepEqual(Buffer.from(again.body), Buffer.from(first.body));
      assert.deepEqual(await sut.businessRows(), ['row-1']);
    });

    it('rolls everything back and frees the key when the handler throws', async () => {
      const guard = guardOf();
      const failing = async (ctx: HandlerContext<Tx>) => {
        await sut.writeBusiness(ctx.tx!, 'lost');
        throw new Error('constraint violated');
      };
      await assert.rejects(guard.handle(demoRequest('tx-2'), failing, { transaction: true }), /constraint violated/);
      assert.deepEqual(await sut.businessRows(), []);
      const retry = await guard.handle(demoRequest('tx-2'), writer('kept'), { transaction: true });
      assert.equal(retry.headers['idempotent-replayed'], 'false');
      assert.deepEqual(await sut.businessRows(), ['kept']);
    });

    for (const status of [503, 500]) {
      it(`rolls back and frees the key on a ${status} answer`, async () => {
        const guard = guardOf();
        const first = await guard.handle(demoRequest('tx-3'), writer('undone', jsonResponse(status, { error: 'x' })), { transaction: true });
        assert.equal(first.status, status);
        assert.deepEqual(await sut.businessRows(), []);
        const retry = await guard.handle(demoRequest('tx-3'), writer('done'), { transaction: true });
        assert.equal(retry.status, 201);
        assert.deepEqual(await sut.businessRows(), ['done']);
      });
    }

    it('makes a concurrent duplicate wait for the open transaction and then replay its result', async () => {
      const guard = guardOf();
      let open!: () => void;
      const gate = new Promise<void>((resolve) => { open = resolve; });
      let runs = 0;
      const slow = async (ctx: HandlerContext<Tx>) => {
        runs += 1;
        await sut.writeBusiness(ctx.tx!, `slow-${runs}`);
        await gate;
        return jsonResponse(201, { id: `slow-${runs}` });
      };
      const first = guard.handle(demoRequest('tx-4'), slow, { transaction: true });
      await new Promise((resolve) => setTimeout(resolve, 100));
      let secondSettled = false;
      const second = guard.handle(demoRequest('tx-4'), slow, { transaction: true }).finally(() => { secondSettled = true; });
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal(secondSettled, false, 'the duplicate waits while the first transaction is open');
      open();
      const [a, b] = await Promise.all([first, second]);
      assert.equal(a.headers['idempotent-replayed'], 'false');
      assert.equal(b.headers['idempotent-replayed'], 'true');
      assert.deepEqual(Buffer.from(b.body), Buffer.from(a.body));
      assert.equal(runs, 1);
      assert.deepEqual(await sut.businessRows(), ['slow-1']);
    });

    it('lets the waiting duplicate run when the first transaction rolls back', async () => {
      const guard = guardOf();
      let open!: () => void;
      const gate = new Promise<void>((resolve) => { open = resolve; });
      const failing = async (ctx: HandlerContext<Tx>) => {
        await sut.writeBusiness(ctx.tx!, 'first');
        await gate;
        throw new Error('first failed');
      };
      const first = guard.handle(demoRequest('tx-5'), failing, { transaction: true });
      await new Promise((resolve) => setTimeout(resolve, 100));
      const second = guard.handle(demoRequest('tx-5'), writer('second'), { transaction: true });
      await new Promise((resolve) => setTimeout(resolve, 100));
      open();
      await assert.rejects(first, /first failed/);
      const b = await second;
      assert.equal(b.status, 201);
      assert.equal(b.headers['idempotent-replayed'], 'false');
      assert.deepEqual(await sut.businessRows(), ['second']);
    });

    it('answers a duplicate that waits past its bound (409 where the store ends the lock wait, 503 where the guard gives up) and never runs it', async () => {
      // The first request's guard has the default bounds, so a loaded machine cannot time its reservation out; the
      // duplicate's waits 50 ms. The duplicate is sent once the first is inside its handler, holding the row.
      const patient = createGuard<Tx>(demoContract(), { store: sut.store });
      const guard = createGuard<Tx>(demoContract(), { store: sut.store, storeTimeoutMs: 50, transactionWaitMs: 50 });
      let open!: () => void;
      const gate = new Promise<void>((resolve) => { open = resolve; });
      let entered!: () => void;
      const inHandler = new Promise<void>((resolve) => { entered = resolve; });
      let runs = 0;
      const slow = async (ctx: HandlerContext<Tx>) => {
        runs += 1;
        await sut.writeBusiness(ctx.tx!, `bounded-${runs}`);
        entered();
        await gate;
        return jsonResponse(201, { id: `bounded-${runs}` });
      };
      const first = patient.handle(demoRequest('tx-7'), slow, { transaction: true });
      await Promise.race([inHandler, first.then((answer) => assert.fail(`the first request answered ${answer.status} before its handler ran`))]);
      const second = await guard.handle(demoRequest('tx-7'), slow, { transaction: true });
      // PostgreSQL's lock_timeout is the guard's transactionWaitMs: the wait ends as the key's being in progress (409),
      // and the connection goes back to the pool. SQLite's busy wait is the connection's own: the guard gives up (503).
      assert.equal(second.status, name === 'postgres' ? 409 : 503);
      assert.equal(second.headers['retry-after'], '1');
      open();
      assert.equal((await first).status, 201);
      // Let the abandoned duplicate's transaction get its turn and roll back.
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(runs, 1);
      assert.deepEqual(await sut.businessRows(), ['bounded-1']);
    });

    it('answers 422 to a duplicate with another payload after the first commits', async () => {
      const guard = guardOf();
      await guard.handle(demoRequest('tx-6'), writer('one'), { transaction: true });
      const other = await guard.handle(demoRequest('tx-6', { topic: 'different' }), writer('two'), { transaction: true });
      assert.equal(other.status, 422);
      assert.deepEqual(await sut.businessRows(), ['one']);
    });
  });
}
