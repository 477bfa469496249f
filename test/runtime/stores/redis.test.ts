import assert from 'node:assert/strict';
import { Redis, ReplyError } from 'ioredis';
import { createGuard } from '../../../src/runtime/guard.js';
import { StoreError } from '../../../src/runtime/store.js';
import { RedisStore } from '../../../src/runtime/stores/redis.js';
import { requireBinary, startRedis, type RedisServer } from '../../helpers/servers.js';
import { demoContract, demoRequest, jsonResponse } from '../fixtures.js';
import { describeStoreContract } from '../store-contract.js';
import { reserveFromProcesses } from './multi-process.js';

const bytes = (text: string) => new TextEncoder().encode(text);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('RedisStore (real redis-server)', function () {
  this.timeout(120_000);
  let server: RedisServer;
  let redis: Redis;
  // The client option the README recommends for throughput: commands of one event-loop turn share one write.
  let pipelined: Redis;
  // ioredis's stringNumbers: integer replies arrive as strings.
  let stringNumbers: Redis;
  // ioredis's keyPrefix: put before every key the client sends (KEYS of a script too, not ARGV).
  let keyPrefixed: Redis;
  let n = 0;
  const prefix = () => `idem-${process.pid}-${(n += 1)}`;

  before(async function () {
    requireBinary(this, 'redis-server');
    server = await startRedis();
    redis = new Redis({ host: server.host, port: server.port, maxRetriesPerRequest: 1, lazyConnect: true });
    redis.on('error', () => undefined);
    await redis.connect();
    pipelined = new Redis({ host: server.host, port: server.port, maxRetriesPerRequest: 1, lazyConnect: true, enableAutoPipelining: true });
    pipelined.on('error', () => undefined);
    await pipelined.connect();
    stringNumbers = new Redis({ host: server.host, port: server.port, maxRetriesPerRequest: 1, lazyConnect: true, stringNumbers: true });
    stringNumbers.on('error', () => undefined);
    await stringNumbers.connect();
    keyPrefixed = new Redis({ host: server.host, port: server.port, maxRetriesPerRequest: 1, lazyConnect: true, keyPrefix: 'app:' });
    keyPrefixed.on('error', () => undefined);
    await keyPrefixed.connect();
  });
  after(async () => {
    redis?.disconnect();
    pipelined?.disconnect();
    stringNumbers?.disconnect();
    keyPrefixed?.disconnect();
    await server?.stop();
  });

  // The store's keys, also under a client's keyPrefix.
  const keysOf = (p: string) => redis.keys(`*{${p}}:*`);

  async function dumpPrefix(p: string): Promise<string> {
    const keys = (await keysOf(p)).sort();
    const out: Record<string, unknown> = {};
    for (const key of keys) {
      const type = await redis.type(key);
      out[key] = type === 'hash' ? await redis.hgetall(key) : type === 'string' ? await redis.get(key) : await redis.zrangebyscore(key, '-inf', '+inf', 'WITHSCORES');
    }
    // Bodies are base64 in Redis: decode them so the leak check sees the bytes too.
    return JSON.stringify(out, (k, v) => (k === 'body' && typeof v === 'string' ? Buffer.from(v, 'base64').toString('latin1') : v));
  }

  for (const [name, client, batch] of [
    ['redis (batch: true by default, the calls of one turn in one script)', () => redis, undefined],
    ['redis (batch: false, every call its own script)', () => redis, false],
    ['redis (ioredis enableAutoPipelining)', () => pipelined, undefined],
    ['redis (ioredis stringNumbers)', () => stringNumbers, undefined],
    ['redis (ioredis keyPrefix)', () => keyPrefixed, undefined],
  ] as const) {
    describeStoreContract(name, async (clock) => {
      const p = prefix();
      const store = new RedisStore(client(), { prefix: p, clock, ...(batch !== undefined ? { batch } : {}) });
      await store.migrate();
      return {
        store,
        dump: () => dumpPrefix(p),
        dispose: async () => {
          const keys = await keysOf(p);
          if (keys.length > 0) await redis.del(...keys);
        },
      };
    });
  }

  describe('batching (calls of one event-loop turn in one script)', () => {
    const reserveInput = (id: string, token = `t-${id}`) => ({ id, operation: 'op', fingerprint: `v1:${id}`, token, leaseMs: 60_000, ttlMs: 600_000 });
    /** How many scripts the server ran (EVALSHA and EVAL calls) since `CONFIG RESETSTAT`. */
    async function scriptsRun(): Promise<number> {
      const info = await redis.info('commandstats');
      let calls = 0;
      for (const match of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) calls += Number(match[1]);
      return calls;
    }
    /** Runs each script once first (a call alone, then a batch of two), so the counts below hold no NOSCRIPT round. */
    async function warm(store: RedisStore): Promise<void> {
      await store.reserve(reserveInput('warm-0'));
      await store.complete('warm-0', 't-warm-0', { response: { status: 201, headers: {}, body: bytes('{}') }, ttlMs: 60_000 });
      await Promise.all([store.reserve(reserveInput('warm-1')), store.reserve(reserveInput('warm-2'))]);
      await redis.config('RESETSTAT');
    }

    for (const [name, client] of [
      ['', () => redis],
      [' (ioredis stringNumbers)', () => stringNumbers],
      [' (ioredis keyPrefix)', () => keyPrefixed],
    ] as const) {
      it(`reserves 35 calls of one turn in two scripts, each as alone: one winner per id, the duplicates of an id see it${name}`, async () => {
        const store = new RedisStore(client(), { prefix: prefix() });
        await warm(store);
        const ids = Array.from({ length: 30 }, (_, i) => `b-${String(i).padStart(2, '0')}`);
        const calls = [...ids.map((id) => reserveInput(id)), ...Array.from({ length: 5 }, (_, i) => reserveInput('b-07', `dup-${i}`))];
        const results = await Promise.all(calls.map((input) => store.reserve(input)));
        // 35 calls: one script of 32 and one of 3, all in one turn.
        assert.equal(await scriptsRun(), 2);
        for (const [i, result] of results.entries()) {
          const input = calls[i]!;
          assert.deepEqual(result.record, await store.get(input.id), input.id);
          if (i < 30) {
            assert.equal(result.outcome, 'reserved', input.id);
            assert.equal(result.record.leaseToken, input.token);
          } else {
            // b-07 came first in the turn: every duplicate after it found that reservation.
            assert.equal(result.outcome, 'existing', input.token);
            assert.equal(result.record.leaseToken, 't-b-07');
          }
        }
      });
    }

    for (const [name, client] of [
      ['', () => redis],
      [' (ioredis stringNumbers)', () => stringNumbers],
      [' (ioredis keyPrefix)', () => keyPrefixed],
    ] as const) {
      it(`completes in a batch byte-exact, each completion fenced by its own token, in the order asked, with reservations in between${name}`, async () => {
        const p = prefix();
        const store = new RedisStore(client(), { prefix: p });
        for (const id of ['c-1', 'c-2', 'c-3']) await store.reserve(reserveInput(id));
        await warm(store);
        const every = new Uint8Array(256).map((_, i) => i);
        const headers = { 'content-type': 'application/octet-stream', location: '/x/1' };
        const [one, two, stale, missing, fresh, replay] = await Promise.all([
          store.complete('c-1', 't-c-1', { response: { status: 201, headers, body: every }, resultId: 'r-1', ttlMs: 60_000 }),
          store.complete('c-2', 't-c-2', { response: { status: 200, headers: {}, body: new Uint8Array() }, ttlMs: 60_000 }),
          store.complete('c-3', 'stale', { response: { status: 201, headers: {}, body: every }, ttlMs: 60_000 }),
          store.complete('missing', 't-x', { response: { status: 201, headers: {}, body: every }, ttlMs: 60_000 }),
          store.reserve(reserveInput('n-1')),
          // After c-1's completion in the same turn: it finds the completed record.
          store.reserve(reserveInput('c-1', 'again')),
        ]);
        assert.equal(await scriptsRun(), 1);
        assert.deepEqual([one, two, stale, missing], [true, true, false, false]);
        const c1 = await store.get('c-1');
        assert.equal(c1?.state, 'completed');
        assert.deepEqual(c1?.response, { status: 201, headers, body: every });
        assert.equal(c1?.resultId, 'r-1');
        const c2 = await store.get('c-2');
        assert.deepEqual(c2?.response, { status: 200, headers: {}, body: new Uint8Array() });
        assert.equal(c2?.resultId, undefined);
        assert.equal((await store.get('c-3'))?.state, 'in_progress');
        assert.equal(await store.get('missing'), undefined);
        assert.equal(fresh.outcome, 'reserved');
        assert.equal(replay.outcome, 'existing');
        assert.deepEqual(replay.record, c1);
        // Completed records left the lease index (and got their Redis TTL); the in_progress ones are in it.
        const keyPrefix = client().options.keyPrefix ?? '';
        assert.deepEqual((await redis.zrange(`${keyPrefix}{${p}}:leases`, '0', '-1')).sort(), ['c-3', 'n-1', 'warm-1', 'warm-2']);
        assert.ok((await redis.pttl(`${keyPrefix}{${p}}:r:c-2`)) > 0);
      });
    }

    it('with an injected clock: each call timed when it was asked for, and batched completions indexed by expiry and purged', async () => {
      let t = 1_000_000;
      const store = new RedisStore(redis, { prefix: prefix(), clock: () => t });
      const reserving = [store.reserve(reserveInput('k-1')), store.reserve(reserveInput('k-2'))];
      t = 2_000_000; // before the turn ends and the batch goes
      const reserved = await Promise.all(reserving);
      assert.deepEqual(reserved.map((r) => [r.outcome, r.now, r.record.createdAt]), [['reserved', 1_000_000, 1_000_000], ['reserved', 1_000_000, 1_000_000]]);
      assert.equal((await store.get('k-1'))?.createdAt, 1_000_000);
      t = 3_000_000;
      const completing = ['k-1', 'k-2'].map((id) => store.complete(id, `t-${id}`, { response: { status: 201, headers: {}, body: bytes(id) }, ttlMs: 1000 }));
      t = 9_000_000;
      assert.deepEqual(await Promise.all(completing), [true, true]);
      assert.equal((await store.get('k-2'))?.expiresAt, 3_001_000);
      // Not Redis's clock, so the TTL does not remove them: purgeExpired does, from the expiry index.
      assert.equal(await store.purgeExpired(), 2);
      assert.equal(await store.get('k-1'), undefined);
    });

    it('a call refused with READONLY in the script (a failover) is resent by ioredis reconnectOnError and succeeds, as one never batched', async () => {
      // No diskless-sync delay (5 s by default in Redis 7): a replica is in sync as soon as it can be.
      const servers = [await startRedis(['--repl-diskless-sync-delay', '0']), await startRedis(['--repl-diskless-sync-delay', '0'])] as const;
      const admins = servers.map((server) => new Redis({ host: server.host, port: server.port, lazyConnect: true }));
      for (const admin of admins) admin.on('error', () => undefined);
      await Promise.all(admins.map((admin) => admin.connect()));
      const [ours, other] = admins as [Redis, Redis];
      /** Makes `admin`'s server a replica of the other one (its data replaced by the other's), once in sync. */
      const demote = async (admin: Redis, of: RedisServer): Promise<void> => {
        await admin.replicaof(of.host, String(of.port));
        for (let i = 0; i < 1200 && !(await admin.info('replication')).includes('master_link_status:up'); i += 1) await sleep(25);
        assert.match(await admin.info('replication'), /master_link_status:up/, 'the replica did not come in sync within 30 s');
      };
      let hooked = 0;
      // The documented ioredis failover recipe: on READONLY reconnect and resend the command (here the endpoint's
      // server is promoted, as a failover moves the endpoint to the new primary).
      const client = new Redis({
        host: servers[0].host,
        port: servers[0].port,
        lazyConnect: true,
        reconnectOnError: (error) => {
          if (!error.message.startsWith('READONLY')) return false;
          hooked += 1;
          void ours.replicaof('NO', 'ONE');
          return 2;
        },
      });
      client.on('error', () => undefined);
      try {
        await client.connect();
        const store = new RedisStore(client, { prefix: prefix() });
        await store.reserve(reserveInput('w-0'));
        await store.complete('w-0', 't-w-0', { response: { status: 201, headers: {}, body: bytes('{}') }, ttlMs: 60_000 });
        await Promise.all([store.reserve(reserveInput('w-1')), store.reserve(reserveInput('w-2'))]); // every script loaded
        await demote(ours, servers[1]);
        const reserved = await Promise.all(['a', 'b', 'c', 'd'].map((id) => store.reserve(reserveInput(id))));
        assert.deepEqual(reserved.map((r) => r.outcome), ['reserved', 'reserved', 'reserved', 'reserved']);
        assert.ok(hooked >= 1, 'reconnectOnError saw READONLY');
        // Completions, sent as the answers go: one refused would leave its key in progress. The records move to
        // the other server and back, so that ours is a replica holding them.
        await demote(other, servers[0]);
        await other.replicaof('NO', 'ONE');
        await demote(ours, servers[1]);
        hooked = 0;
        const completed = await Promise.all(['a', 'b', 'c', 'd'].map((id) => store.complete(id, `t-${id}`, { response: { status: 201, headers: {}, body: bytes(id) }, ttlMs: 60_000 })));
        assert.deepEqual(completed, [true, true, true, true]);
        assert.ok(hooked >= 1, 'reconnectOnError saw READONLY');
        for (const id of ['a', 'b', 'c', 'd']) assert.equal((await store.get(id))?.state, 'completed');
      } finally {
        client.disconnect();
        for (const admin of admins) admin.disconnect();
        for (const server of servers) await server.stop();
      }
    });

    it('a call whose command fails in the script runs again on its own, failing alone: the other calls of its script are answered', async () => {
      const p = prefix();
      const store = new RedisStore(redis, { prefix: p });
      await warm(store);
      await redis.set(`{${p}}:r:bad`, 'a string where a record would be');
      const settled = await Promise.allSettled<unknown>([
        store.reserve(reserveInput('ok-1')),
        store.reserve(reserveInput('bad')),
        store.complete('bad', 't-bad', { response: { status: 201, headers: {}, body: bytes('{}') }, ttlMs: 60_000 }),
        store.reserve(reserveInput('ok-2')),
      ]);
      // The batch, then each failed call on its own.
      assert.equal(await scriptsRun(), 3);
      for (const ok of [settled[0]!, settled[3]!]) {
        assert.equal(ok.status, 'fulfilled');
        assert.equal(((ok as PromiseFulfilledResult<unknown>).value as { outcome: string }).outcome, 'reserved');
      }
      for (const failed of [settled[1]!, settled[2]!]) {
        assert.equal(failed.status, 'rejected');
        const error = (failed as PromiseRejectedResult).reason as unknown;
        assert.ok(error instanceof StoreError && error.kind === 'unavailable' && /WRONGTYPE/.test(error.message), String(error));
      }
      assert.equal(await redis.get(`{${p}}:r:bad`), 'a string where a record would be');
    });

    it('when its script fails as a whole, runs each call on its own', async () => {
      // A client whose batch scripts (more than the 3 keys of a single call) fail: refused by a proxy, say.
      const refusing = Object.create(redis, {
        evalsha: { value: (sha: string, keys: number, args: string[]) => (keys > 3 ? Promise.reject(new ReplyError('ERR refused by a proxy')) : redis.evalsha(sha, keys, args)) },
      }) as Redis;
      const store = new RedisStore(refusing, { prefix: prefix() });
      const reserved = await Promise.all([store.reserve(reserveInput('f-1')), store.reserve(reserveInput('f-2')), store.reserve(reserveInput('f-1', 'late'))]);
      assert.deepEqual(reserved.map((r) => [r.outcome, r.record.leaseToken]), [['reserved', 't-f-1'], ['reserved', 't-f-2'], ['existing', 't-f-1']]);
      const completed = await Promise.all(['f-1', 'f-2'].map((id) => store.complete(id, `t-${id}`, { response: { status: 201, headers: {}, body: bytes(id) }, ttlMs: 60_000 })));
      assert.deepEqual(completed, [true, true]);
      assert.deepEqual((await store.get('f-2'))?.response?.body, bytes('f-2'));
    });

    it('when the reply of a script that ran is lost, each call runs again on its own and the guard takes its own reservation: one run per key', async () => {
      // The script ran on the server, then the connection failed before its reply came back.
      const losing = Object.create(redis, {
        evalsha: { value: (sha: string, keys: number, args: string[]) => redis.evalsha(sha, keys, args).then((reply) => (keys > 3 ? Promise.reject(new Error('read ECONNRESET')) : reply)) },
      }) as Redis;
      const guard = createGuard(demoContract(), { store: new RedisStore(losing, { prefix: prefix() }) });
      const runs = new Map<string, number>();
      const keys = ['k-1', 'k-2', 'k-3', 'k-4'];
      const responses = await Promise.all(keys.map((key) => guard.handle(demoRequest(key), async () => {
        runs.set(key, (runs.get(key) ?? 0) + 1);
        return jsonResponse(201, { key });
      })));
      assert.deepEqual(responses.map((r) => r.status), [201, 201, 201, 201]);
      assert.deepEqual([...runs.values()], [1, 1, 1, 1]);
      // And the results were recorded: the same keys again are replays.
      const again = await Promise.all(keys.map((key) => guard.handle(demoRequest(key), async () => jsonResponse(500, {}))));
      assert.deepEqual(again.map((r) => [r.status, r.headers['idempotent-replayed']]), keys.map(() => [201, 'true']));
      // The store answers as it happened: each reservation its own, each completion done (not fenced).
      const store = new RedisStore(losing, { prefix: prefix() });
      const reserved = await Promise.all(['s-1', 's-2', 's-3'].map((id) => store.reserve(reserveInput(id))));
      assert.deepEqual(reserved.map((r) => [r.outcome, r.record.leaseToken]), [['existing', 't-s-1'], ['existing', 't-s-2'], ['existing', 't-s-3']]);
      const completed = await Promise.all(['s-1', 's-2', 's-3'].map((id) => store.complete(id, `t-${id}`, { response: { status: 201, headers: {}, body: bytes(id) }, ttlMs: 60_000 })));
      assert.deepEqual(completed, [true, true, true]);
      // A stale token is still refused after its batch's reply was lost.
      assert.deepEqual(await Promise.all([store.complete('s-1', 'stale', { response: { status: 201, headers: {}, body: bytes('x') }, ttlMs: 60_000 }), store.complete('s-2', 'stale', { response: { status: 201, headers: {}, body: bytes('x') }, ttlMs: 60_000 })]), [false, false]);
    });
  });

  it('uses the server TIME when no clock is injected', async () => {
    const store = new RedisStore(redis, { prefix: prefix() });
    const serverNow = await store.now();
    assert.ok(Math.abs(serverNow - Date.now()) < 60_000);
    const result = await store.reserve({ id: 'clock', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 1000, ttlMs: 5000 });
    assert.equal(result.record.leaseUntil - result.record.createdAt, 1000);
    assert.ok(result.now >= serverNow);
  });

  it('extends a lease from the server TIME and moves it in the lease index', async () => {
    const p = prefix();
    const store = new RedisStore(redis, { prefix: p });
    await store.reserve({ id: 'hb', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 1000, ttlMs: 5000 });
    const before = await store.now();
    assert.equal(await store.extend('hb', 't', 600_000), true);
    const after = await store.now();
    const leaseUntil = (await store.get('hb'))!.leaseUntil;
    assert.ok(leaseUntil >= before + 600_000 && leaseUntil <= after + 600_000, `${before} ≤ ${leaseUntil - 600_000} ≤ ${after}`);
    assert.equal(Number(await redis.zscore(`{${p}}:leases`, 'hb')), leaseUntil);
    assert.equal(await store.extend('hb', 'stale', 900_000), false);
    assert.equal((await store.get('hb'))!.leaseUntil, leaseUntil);
  });

  // Earlier versions' listAbandoned, on a client with ioredis keyPrefix, dropped the lease index entry of every
  // due reservation and left the record in_progress, where reconciliation never listed it again.
  describe('purgeAbandoned (its own index of the records it keeps)', () => {
    const LEASE = 60_000;
    const TTL = 600_000;
    const input = (id: string, token = `t-${id}`, ttlMs = TTL) => ({ id, operation: 'op', fingerprint: `v1:${id}`, token, leaseMs: LEASE, ttlMs });
    /** How many records the server has read (HMGET, in the store's scripts) since `CONFIG RESETSTAT`. */
    async function recordsRead(): Promise<number> {
      return Number(/^cmdstat_hmget:calls=(\d+)/m.exec(await redis.info('commandstats'))?.[1] ?? 0);
    }

    it('reads a record it keeps when its lease has passed and again when its TTL has, not on every call', async () => {
      let t = 1_700_000_000_000;
      const store = new RedisStore(redis, { prefix: prefix(), clock: () => t });
      await Promise.all(Array.from({ length: 50 }, (_, i) => store.reserve(input(`k-${i}`))));
      t += LEASE + 1;
      // Past the lease, within the TTL: kept for reconciliation (read once, here).
      assert.equal(await store.purgeAbandoned(), 0);
      await redis.config('RESETSTAT');
      for (let i = 0; i < 3; i += 1) assert.equal(await store.purgeAbandoned(), 0);
      // Before: every call read all 50 again (150 reads), and a scale review's 300,000 took 1.7 s per call.
      assert.equal(await recordsRead(), 0);
      t += TTL;
      assert.equal(await store.purgeAbandoned({ limit: 20 }), 20);
      assert.equal(await store.purgeAbandoned(), 30);
      assert.equal(await store.get('k-7'), undefined);
      assert.equal(await store.purgeAbandoned(), 0);
    });

    it('leaves a kept record settled, released and reserved again, or taken over meanwhile to its new state', async () => {
      let t = 1_700_000_000_000;
      const start = t;
      const store = new RedisStore(redis, { prefix: prefix(), clock: () => t });
      for (const id of ['done', 'freed', 'taken', 'left']) await store.reserve(input(id));
      t += LEASE + 1;
      assert.equal(await store.purgeAbandoned(), 0);
      // Reconciliation settles one, gives one back (and its key is reserved again), and takes one over.
      assert.equal(await store.complete('done', 't-done', { response: { status: 201, headers: {}, body: bytes('{}') }, ttlMs: TTL }), true);
      assert.equal(await store.release('freed', 't-freed'), true);
      await store.reserve(input('freed', 't-freed-2'));
      t = start + TTL - 1_000;
      assert.ok((await store.takeover('taken', 'v1:taken', 't-taken', 't-taken-2', LEASE)) !== undefined);
      t = start + TTL + 1;
      // Only the record past both its lease and its TTL under the reservation it was kept for.
      assert.equal(await store.purgeAbandoned(), 1);
      assert.equal(await store.get('left'), undefined);
      assert.equal((await store.get('done'))?.state, 'completed');
      assert.equal((await store.get('freed'))?.leaseToken, 't-freed-2');
      assert.equal((await store.get('taken'))?.leaseToken, 't-taken-2');
      // The takeover's lease ends, then the second reservation's TTL passes: each is purged in its turn.
      t = start + TTL + LEASE;
      assert.equal(await store.purgeAbandoned(), 1);
      assert.equal(await store.get('taken'), undefined);
      t = start + LEASE + 1 + TTL + 1;
      assert.equal(await store.purgeAbandoned(), 1);
      assert.equal(await store.get('freed'), undefined);
      assert.equal((await store.get('done'))?.state, 'completed');
    });

    it('goes on over several scripts when more records are past their lease than one reads, deleting only those past their TTL', async () => {
      let t = 1_700_000_000_000;
      const store = new RedisStore(redis, { prefix: prefix(), clock: () => t });
      // 2,500 records in groups of equal leases (a batch of one turn shares one), every other one of a longer TTL.
      for (let turn = 0; turn < 25; turn += 1) {
        await Promise.all(Array.from({ length: 100 }, (_, i) => store.reserve(input(`k-${turn}-${i}`, undefined, i % 2 === 0 ? TTL : TTL * 10))));
        t += 1;
      }
      t += TTL;
      const counts = [];
      for (let n = await store.purgeAbandoned(); ; n = await store.purgeAbandoned()) {
        counts.push(n);
        if (n < 500) break;
      }
      assert.deepEqual(counts, [500, 500, 250]);
      assert.equal((await store.get('k-24-98')), undefined);
      assert.equal((await store.get('k-24-99'))?.state, 'in_progress');
      assert.equal(await store.purgeAbandoned(), 0);
      t += TTL * 10;
      assert.equal(await store.purgeAbandoned({ limit: 5000 }), 1250);
    });

    it('finds, within an hour, a record whose lease lies below where it has read (a clock gone back)', async () => {
      let t = 1_700_000_000_000;
      const store = new RedisStore(redis, { prefix: prefix(), clock: () => t });
      await store.reserve(input('ahead'));
      t += LEASE + 1;
      assert.equal(await store.purgeAbandoned(), 0);
      const readTo = t;
      t = readTo - 200_000;
      await store.reserve(input('behind'));
      t = readTo + TTL;
      // Its lease entry lies below the cursor: not read until the reading from the start is an hour old.
      assert.equal(await store.purgeAbandoned(), 1);
      assert.equal((await store.get('behind'))?.state, 'in_progress');
      t = readTo + 3_600_000;
      assert.equal(await store.purgeAbandoned(), 1);
      assert.equal(await store.get('behind'), undefined);
    });

    it('reads whole milliseconds of an injected clock that gives fractions (performance.timeOrigin + performance.now())', async () => {
      // A diff review's: the range read was rounded up and the comparisons were not — 256 records whose lease ended in
      // the rounded millisecond spun the script for good (Redis BUSY, SCRIPT KILL refused); fewer were missed for an hour.
      let t = 1_700_000_000_000;
      const start = t;
      const store = new RedisStore(redis, { prefix: prefix(), clock: () => t });
      await Promise.all(Array.from({ length: 300 }, (_, i) => store.reserve(input(`k-${i}`))));
      t = start + LEASE - 0.5;
      assert.equal(await store.purgeAbandoned(), 0);
      assert.equal(await redis.ping(), 'PONG');
      t = start + LEASE + TTL + 0.25;
      assert.equal(await store.purgeAbandoned({ limit: 1000 }), 300);
    });

    it('reads the whole lease index again after repairLeaseIndex put entries back', async () => {
      const p = prefix();
      let t = 1_700_000_000_000;
      const store = new RedisStore(redis, { prefix: p, clock: () => t });
      await store.reserve(input('orphan'));
      await redis.zrem(`{${p}}:leases`, 'orphan');
      t += LEASE + 1;
      assert.equal(await store.purgeAbandoned(), 0);
      t += TTL;
      assert.equal(await store.purgeAbandoned(), 0);
      assert.equal(await store.repairLeaseIndex(), 1);
      assert.equal(await store.purgeAbandoned(), 1);
      assert.equal(await store.get('orphan'), undefined);
    });
  });

  describe('repairLeaseIndex (records an earlier version dropped from the lease index)', () => {
    const leasesOf = (p: string, keyPrefix = '') => `${keyPrefix}{${p}}:leases`;
    const reserve = (store: RedisStore, id: string) =>
      store.reserve({ id, operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 1000, ttlMs: 600_000 });
    const completion = { response: { status: 201, headers: {}, body: bytes('{"ok":1}') }, ttlMs: 600_000 };
    const ids = (records: { id: string }[]) => records.map((r) => r.id);

    it('puts orphaned in_progress records back, so listAbandoned and a takeover see them again; nothing else changes; a second run does nothing', async () => {
      const p = prefix();
      const other = prefix();
      let t = 1_700_000_000_000;
      const clock = () => t;
      const store = new RedisStore(redis, { prefix: p, clock });
      const otherStore = new RedisStore(redis, { prefix: other, clock });
      for (const id of ['orphan-1', 'orphan-2', 'indexed', 'done', 'released']) await reserve(store, id);
      await reserve(otherStore, 'orphan-other');
      assert.equal(await store.complete('done', 't', completion), true);
      assert.equal(await store.release('released', 't'), true);
      await redis.zrem(leasesOf(p), 'orphan-1', 'orphan-2');
      await redis.zrem(leasesOf(other), 'orphan-other');
      t += 5000;
      assert.deepEqual(ids(await store.listAbandoned()), ['indexed']);
      const orphan = await store.get('orphan-1');
      const done = await store.get('done');

      assert.equal(await store.repairLeaseIndex(), 2);
      const abandoned = await store.listAbandoned();
      assert.deepEqual(ids(abandoned), ['indexed', 'orphan-1', 'orphan-2']);
      assert.deepEqual(abandoned[1], orphan);
      assert.equal(Number(await redis.zscore(leasesOf(p), 'orphan-2')), orphan!.leaseUntil);
      assert.deepEqual(await store.get('done'), done);
      assert.equal(await redis.zscore(leasesOf(p), 'done'), null);
      assert.equal(await store.get('released'), undefined);
      assert.equal(await redis.zscore(leasesOf(p), 'released'), null);
      assert.deepEqual(await otherStore.listAbandoned(), []);
      assert.equal(await redis.zcard(leasesOf(other)), 0);

      const dump = await dumpPrefix(p);
      assert.equal(await store.repairLeaseIndex(), 0);
      assert.equal(await dumpPrefix(p), dump);
      // Reconciliation can now take the reservation over and settle it.
      const taken = await store.takeover('orphan-1', 'v1:x', 't', 't2', 1000);
      assert.equal(taken?.leaseToken, 't2');
      assert.equal(await store.complete('orphan-1', 't2', completion), true);
      assert.deepEqual(ids(await store.listAbandoned()), ['indexed', 'orphan-2']);
    });

    it('on a client with keyPrefix, repairs the records under that prefix (applied once) and not those of a client without it', async () => {
      const p = prefix();
      let t = 1_700_000_000_000;
      const clock = () => t;
      const prefixed = new RedisStore(keyPrefixed, { prefix: p, clock });
      const plain = new RedisStore(redis, { prefix: p, clock });
      await reserve(prefixed, 'x');
      await reserve(plain, 'y');
      await redis.zrem(leasesOf(p, 'app:'), 'x');
      await redis.zrem(leasesOf(p), 'y');
      t += 5000;

      assert.equal(await prefixed.repairLeaseIndex(), 1);
      assert.deepEqual(ids(await prefixed.listAbandoned()), ['x']);
      assert.deepEqual(await plain.listAbandoned(), []);
      // No key under the prefix twice, and no index written without it.
      assert.deepEqual((await keysOf(p)).sort(), [`app:{${p}}:leases`, `app:{${p}}:r:x`, `{${p}}:r:y`]);
      assert.equal(await prefixed.repairLeaseIndex(), 0);
      assert.equal(await plain.repairLeaseIndex(), 1);
      assert.deepEqual(ids(await plain.listAbandoned()), ['y']);
    });

    it('reads a keyPrefix holding glob characters literally', async () => {
      const p = prefix();
      const keyPrefix = 'app[v2*?:';
      const globby = new Redis({ host: server.host, port: server.port, maxRetriesPerRequest: 1, lazyConnect: true, keyPrefix });
      globby.on('error', () => undefined);
      try {
        await globby.connect();
        let t = 1_700_000_000_000;
        const store = new RedisStore(globby, { prefix: p, clock: () => t });
        await reserve(store, 'x');
        await redis.zrem(leasesOf(p, keyPrefix), 'x');
        t += 5000;
        assert.equal(await store.repairLeaseIndex(), 1);
        assert.deepEqual(ids(await store.listAbandoned()), ['x']);
      } finally {
        globby.disconnect();
      }
    });

    it('repairs records over many SCAN steps, each once', async () => {
      const p = prefix();
      let t = 1_700_000_000_000;
      const store = new RedisStore(pipelined, { prefix: p, clock: () => t });
      const count = 2500;
      await Promise.all(Array.from({ length: count }, (_, i) => reserve(store, `r${i}`)));
      await redis.del(leasesOf(p));
      t += 5000;
      assert.equal(await store.repairLeaseIndex(), count);
      assert.equal((await store.listAbandoned({ limit: 2 * count })).length, count);
      assert.equal(await store.repairLeaseIndex(), 0);
    });

    it('leaves out a record completed or released between the scan and its repair', async () => {
      const p = prefix();
      const racing = new Redis({ host: server.host, port: server.port, maxRetriesPerRequest: 1, lazyConnect: true });
      racing.on('error', () => undefined);
      try {
        await racing.connect();
        let t = 1_700_000_000_000;
        const clock = () => t;
        const store = new RedisStore(racing, { prefix: p, clock });
        // Another instance settles two of the records once the repair's scan has listed them, before it reads them.
        const instance = new RedisStore(redis, { prefix: p, clock });
        const scanned: string[] = [];
        const scan = racing.scan.bind(racing) as (...args: unknown[]) => Promise<[string, string[]]>;
        (racing as unknown as { scan: (...args: unknown[]) => Promise<[string, string[]]> }).scan = async (...args) => {
          const reply = await scan(...args);
          scanned.push(...reply[1]);
          if (reply[1].includes(`{${p}}:r:completed-meanwhile`)) assert.equal(await instance.complete('completed-meanwhile', 't', completion), true);
          if (reply[1].includes(`{${p}}:r:released-meanwhile`)) assert.equal(await instance.release('released-meanwhile', 't'), true);
          return reply;
        };
        for (const id of ['orphan', 'completed-meanwhile', 'released-meanwhile']) await reserve(store, id);
        await redis.del(leasesOf(p));
        t += 5000;

        assert.equal(await store.repairLeaseIndex(), 1);
        assert.deepEqual(scanned.sort(), [`{${p}}:r:completed-meanwhile`, `{${p}}:r:orphan`, `{${p}}:r:released-meanwhile`]);
        assert.deepEqual(await redis.zrange(leasesOf(p), '0', '-1'), ['orphan']);
        assert.equal((await store.get('completed-meanwhile'))?.state, 'completed');
        assert.equal(await store.get('released-meanwhile'), undefined);
      } finally {
        racing.disconnect();
      }
    });
  });

  describe('eviction check (migrate / verify)', () => {
    beforeEach(async () => {
      // The persistence check's safe settings, so that each eviction case below reports only its own finding.
      await redis.config('SET', 'appendonly', 'yes');
      await redis.config('SET', 'appendfsync', 'everysec');
    });
    afterEach(async () => {
      await redis.config('SET', 'maxmemory-policy', 'noeviction');
      await redis.config('SET', 'maxmemory', '0');
      await redis.config('SET', 'appendonly', 'no');
    });

    it('accepts noeviction', async () => {
      const store = new RedisStore(redis, { prefix: prefix() });
      assert.deepEqual(await store.verify(), { checked: true, policies: ['noeviction'] });
      await store.migrate();
    });

    it('warns when Redis would lose acknowledged records on a restart or crash: AOF off, or left to the OS to flush', async () => {
      const warnings: string[] = [];
      const store = new RedisStore(redis, { prefix: prefix(), onWarning: (m) => warnings.push(m) });
      await redis.config('SET', 'appendonly', 'no');
      const off = await store.verify();
      assert.equal(off.checked, true);
      assert.match(off.warning ?? '', /appendonly is no: a restart or crash of Redis loses the reservations and completions.*set appendonly yes/);
      await redis.config('SET', 'appendonly', 'yes');
      await redis.config('SET', 'appendfsync', 'no');
      await store.migrate();
      assert.equal(warnings.length, 1);
      assert.match(warnings[0]!, /appendfsync is no: the OS writes the append-only file to disk when it likes/);
      await redis.config('SET', 'appendfsync', 'always');
      assert.equal((await store.verify()).warning, undefined);
    });

    for (const policy of ['allkeys-lru', 'volatile-ttl', 'volatile-lru', 'allkeys-random']) {
      it(`refuses maxmemory-policy ${policy} with maxmemory set: records could be evicted`, async () => {
        await redis.config('SET', 'maxmemory', '512mb');
        await redis.config('SET', 'maxmemory-policy', policy);
        const store = new RedisStore(redis, { prefix: prefix() });
        for (const call of [() => store.migrate(), () => store.verify()]) {
          await assert.rejects(call(), (e: unknown) => {
            assert.ok(e instanceof StoreError);
            assert.equal(e.kind, 'unsupported');
            assert.match(e.message, new RegExp(`maxmemory-policy is ${policy}`));
            assert.match(e.message, /evict/);
            assert.match(e.message, /maxmemory-policy noeviction/);
            return true;
          });
        }
      });
    }

    it('warns, without refusing, about an evicting policy while maxmemory is 0 (no limit)', async () => {
      await redis.config('SET', 'maxmemory-policy', 'volatile-lru');
      const warnings: string[] = [];
      const store = new RedisStore(redis, { prefix: prefix(), onWarning: (m) => warnings.push(m) });
      await store.migrate();
      assert.equal(warnings.length, 1);
      assert.match(warnings[0]!, /volatile-lru.*maxmemory stays 0/);
      assert.equal((await store.verify()).checked, true);
    });

    it('warns instead of throwing where CONFIG is denied (managed Redis), and still throws when the server is unreachable', async () => {
      await redis.call('ACL', 'SETUSER', 'idem-app', 'on', '>app-pass', '~*', '+@all', '-config');
      const limited = new Redis({ host: server.host, port: server.port, username: 'idem-app', password: 'app-pass', maxRetriesPerRequest: 1, lazyConnect: true });
      limited.on('error', () => undefined);
      try {
        await limited.connect();
        const warnings: string[] = [];
        const store = new RedisStore(limited, { prefix: prefix(), onWarning: (m) => warnings.push(m) });
        const result = await store.verify();
        assert.equal(result.checked, false);
        assert.match(result.warning ?? '', /could not read the Redis eviction policy \(NOPERM/);
        await store.migrate();
        assert.equal(warnings.length, 1);
        assert.match(warnings[0]!, /maxmemory-policy noeviction/);
      } finally {
        limited.disconnect();
        await redis.call('ACL', 'DELUSER', 'idem-app');
      }
      const nowhere = new Redis({ host: '127.0.0.1', port: 1, maxRetriesPerRequest: 0, lazyConnect: true, retryStrategy: () => null });
      nowhere.on('error', () => undefined);
      try {
        await assert.rejects(new RedisStore(nowhere).verify(), (e: unknown) => e instanceof StoreError && e.kind === 'unavailable');
      } finally {
        nowhere.disconnect();
      }
    });

    // Managed Redis words its refusal of CONFIG in many ways (Upstash, proxies, Redis-compatible servers):
    // any error reply from the server means "could not check", never a start-up failure.
    for (const reply of ["ERR Command is not available: 'CONFIG'", 'ERR unsupported command', 'ERR CONFIG is blocked on this endpoint']) {
      it(`warns instead of throwing when the server answers CONFIG GET with ${JSON.stringify(reply)}`, async () => {
        const managed = new Redis({ host: server.host, port: server.port, maxRetriesPerRequest: 1, lazyConnect: true });
        managed.on('error', () => undefined);
        try {
          await managed.connect();
          // Only CONFIG is refused, as a real server reply would be; every other command reaches redis-server.
          (managed as unknown as { config: () => Promise<never> }).config = async () => {
            throw new ReplyError(reply);
          };
          const warnings: string[] = [];
          const store = new RedisStore(managed, { prefix: prefix(), onWarning: (m) => warnings.push(m) });
          const result = await store.verify();
          assert.equal(result.checked, false);
          assert.match(result.warning ?? '', /could not read the Redis eviction policy/);
          await store.migrate();
          assert.equal(warnings.length, 1);
          assert.equal((await store.reserve({ id: 'm', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 1000, ttlMs: 5000 })).outcome, 'reserved');
        } finally {
          managed.disconnect();
        }
      });
    }

    it('warns instead of throwing when CONFIG GET answers without the setting (a proxy or Redis-compatible server)', async () => {
      const managed = new Redis({ host: server.host, port: server.port, maxRetriesPerRequest: 1, lazyConnect: true });
      managed.on('error', () => undefined);
      try {
        await managed.connect();
        (managed as unknown as { config: () => Promise<unknown[]> }).config = async () => [];
        const result = await new RedisStore(managed, { prefix: prefix() }).verify();
        assert.equal(result.checked, false);
        assert.match(result.warning ?? '', /could not read the Redis eviction policy/);
      } finally {
        managed.disconnect();
      }
    });
  });

  it('gives a completed record a Redis TTL of its retention and leaves in_progress ones without one', async () => {
    const p = prefix();
    const store = new RedisStore(redis, { prefix: p });
    await store.reserve({ id: 'a', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 1000, ttlMs: 50_000 });
    assert.equal(await redis.pttl(`{${p}}:r:a`), -1);
    await store.complete('a', 't', { response: { status: 200, headers: {}, body: new Uint8Array() }, ttlMs: 50_000 });
    const ttl = await redis.pttl(`{${p}}:r:a`);
    assert.ok(ttl > 40_000 && ttl <= 50_000, String(ttl));
  });

  it('leaves an expired completed record to its Redis TTL on the server clock: no expiry index, nothing left to purge', async () => {
    const p = prefix();
    const store = new RedisStore(redis, { prefix: p });
    await store.reserve({ id: 'short', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 1000, ttlMs: 5000 });
    assert.equal(await store.complete('short', 't', { response: { status: 201, headers: {}, body: bytes('{}') }, resultId: 'r1', ttlMs: 40 }), true);
    const record = await store.get('short');
    assert.equal(record?.state, 'completed');
    assert.equal(record?.resultId, 'r1');
    assert.deepEqual((await redis.keys(`{${p}}:*`)).sort(), [`{${p}}:r:short`]);
    for (let i = 0; i < 200 && (await redis.exists(`{${p}}:r:short`)) === 1; i += 1) await sleep(10);
    assert.equal(await store.get('short'), undefined);
    assert.equal(await store.purgeExpired(), 0);
    assert.equal((await store.reserve({ id: 'short', operation: 'op', fingerprint: 'v1:y', token: 'u', leaseMs: 1000, ttlMs: 5000 })).outcome, 'reserved');
  });

  it('drains the expiry index an earlier version wrote for every completion, and reads its records', async () => {
    const p = prefix();
    const store = new RedisStore(redis, { prefix: p });
    const now = await store.now();
    const index = `{${p}}:expiry`;
    // What the earlier layout left: a record, its expiry in the index, and the TTL of its retention.
    const completedEarlier = async (id: string, expiresAt: number) => {
      await redis.hset(`{${p}}:r:${id}`, { id, operation: 'op', fingerprint: 'v1:x', state: 'completed', lease_token: 'old', lease_until: String(now - 60_000),
        expires_at: String(expiresAt), created_at: String(now - 90_000), status: '201', headers: '{"location":"/x/1"}', body: Buffer.from('{"ok":1}').toString('base64'), result_id: 'r-old' });
      await redis.zadd(index, expiresAt, id);
      await redis.pexpireat(`{${p}}:r:${id}`, expiresAt + 1);
    };
    await completedEarlier('alive', now + 600_000);
    await completedEarlier('again', now - 10_000); // its TTL removes it at once; it is then reserved and completed anew
    await redis.zadd(index, now - 20_000, 'gone'); // removed by its TTL
    await redis.zadd(index, now - 30_000, 'reserved'); // reserved again after its TTL removed it
    await store.reserve({ id: 'reserved', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 60_000, ttlMs: 600_000 });
    await store.reserve({ id: 'again', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 60_000, ttlMs: 600_000 });
    await store.complete('again', 't', { response: { status: 200, headers: {}, body: bytes('new') }, ttlMs: 600_000 });

    assert.equal(await store.purgeExpired(), 0);
    assert.deepEqual((await redis.zrange(index, '0', '-1')).sort(), ['again', 'alive']);
    const again = await store.get('again');
    assert.equal(Number(await redis.zscore(index, 'again')), again?.expiresAt);
    assert.deepEqual(await store.get('alive'), {
      id: 'alive', operation: 'op', fingerprint: 'v1:x', state: 'completed', leaseToken: 'old', leaseUntil: now - 60_000, expiresAt: now + 600_000,
      createdAt: now - 90_000, response: { status: 201, headers: { location: '/x/1' }, body: bytes('{"ok":1}') }, resultId: 'r-old',
    });
    const replay = await store.reserve({ id: 'alive', operation: 'op', fingerprint: 'v1:x', token: 'u', leaseMs: 1000, ttlMs: 5000 });
    assert.equal(replay.outcome, 'existing');
    assert.equal(replay.record.resultId, 'r-old');
    assert.equal((await store.get('reserved'))?.state, 'in_progress');
  });

  it('reloads its scripts after SCRIPT FLUSH', async () => {
    const store = new RedisStore(redis, { prefix: prefix() });
    await store.reserve({ id: 'a', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 1000, ttlMs: 5000 });
    await redis.script('FLUSH');
    assert.equal((await store.reserve({ id: 'a', operation: 'op', fingerprint: 'v1:x', token: 'u', leaseMs: 1000, ttlMs: 5000 })).outcome, 'existing');
  });

  it('rejects with a StoreError, never throws, when the client throws as it sends a script', async () => {
    // A client that throws instead of rejecting (a wrapper, a closed client of another library): the guard is
    // told by a rejection, as for any other failure of the store.
    const throwing = Object.create(redis, { evalsha: { value: () => { throw new TypeError('the client is closed'); } } }) as Redis;
    const store = new RedisStore(throwing, { prefix: prefix() });
    let reserving: Promise<unknown> | undefined;
    let completing: Promise<unknown> | undefined;
    assert.doesNotThrow(() => {
      reserving = store.reserve({ id: 'a', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 1000, ttlMs: 5000 });
      completing = store.complete('a', 't', { response: { status: 201, headers: {}, body: bytes('{}') }, ttlMs: 5000 });
    });
    const unavailable = (error: unknown) => error instanceof StoreError && error.kind === 'unavailable' && /the client is closed/.test(error.message);
    await assert.rejects(reserving!, unavailable);
    await assert.rejects(completing!, unavailable);
  });

  it('refuses a prefix that could break out of its keys', () => {
    assert.throws(() => new RedisStore(redis, { prefix: 'a}{b' }), StoreError);
    assert.throws(() => new RedisStore(redis, { prefix: '' }), StoreError);
  });

  it('gives exactly one of 4 OS processes × 25 concurrent reservations the record', async () => {
    const { won, seen } = await reserveFromProcesses('redis', String(server.port), prefix(), 'multi');
    assert.equal(won.length, 1);
    assert.deepEqual(seen, won);
  });

  it('prints reserve latency (figure, not an assertion)', async () => {
    const store = new RedisStore(redis, { prefix: prefix() });
    const count = 1000;
    const started = process.hrtime.bigint();
    for (let i = 0; i < count; i += 1) await store.reserve({ id: `lat-${i}`, operation: 'op', fingerprint: 'v1:x', token: `t${i}`, leaseMs: 1000, ttlMs: 10_000 });
    const micros = Number(process.hrtime.bigint() - started) / 1000 / count;
    process.stdout.write(`      redis reserve: ${micros.toFixed(1)} µs/op over ${count} sequential reservations (loopback)\n`);
    assert.equal((await store.get('lat-0'))?.state, 'in_progress');
  });

  describe('when the server dies', () => {
    it('throws a typed error and the guard answers 503 within its bound', async () => {
      const store = new RedisStore(redis, { prefix: prefix() });
      await store.reserve({ id: 'before', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 1000, ttlMs: 5000 });
      await server.kill();
      await assert.rejects(
        store.reserve({ id: 'x', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 1, ttlMs: 1 }),
        (e: unknown) => e instanceof StoreError && e.kind === 'unavailable',
      );
      const guard = createGuard(demoContract(), { store, storeTimeoutMs: 1000 });
      let runs = 0;
      const started = Date.now();
      const response = await guard.handle(demoRequest('after-kill'), async () => { runs += 1; return jsonResponse(201, {}); });
      const elapsed = Date.now() - started;
      assert.equal(response.status, 503);
      assert.equal(runs, 0);
      assert.ok(elapsed < 3000, `answered after ${elapsed} ms`);
    });

    it('answers 503 within its bound even when the client queues commands while reconnecting', async () => {
      // Default ioredis settings: commands wait in the offline queue through 20 reconnect attempts.
      const patient = new Redis({ host: server.host, port: server.port, lazyConnect: true });
      patient.on('error', () => undefined);
      const guard = createGuard(demoContract(), { store: new RedisStore(patient, { prefix: prefix() }), storeTimeoutMs: 300 });
      const started = Date.now();
      const response = await guard.handle(demoRequest('queued'), async () => jsonResponse(201, {}));
      const elapsed = Date.now() - started;
      patient.disconnect();
      assert.equal(response.status, 503);
      assert.ok(elapsed < 2500, `answered after ${elapsed} ms`);
    });
  });
});
