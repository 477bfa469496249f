import assert from 'node:assert/strict';
import { Cluster } from 'ioredis';
import { RedisStore } from '../../../src/runtime/stores/redis.js';
import { requireBinary, startRedisCluster, type RedisCluster } from '../../helpers/servers.js';
import { describeStoreContract } from '../store-contract.js';

// The store on a real Redis Cluster (3 masters, slots spread by redis-cli): every script's keys share the store's
// {prefix} hash tag, so each call (and each batch of calls) goes to one master, whichever holds the prefix's slot.
describe('RedisStore on a Redis Cluster (3 real masters, ioredis Cluster)', function () {
  this.timeout(120_000);
  let cluster: RedisCluster;
  let client: Cluster;
  let n = 0;
  const prefix = () => `idem-c-${process.pid}-${(n += 1)}`;

  before(async function () {
    requireBinary(this, 'redis-server');
    requireBinary(this, 'redis-cli');
    cluster = await startRedisCluster(3);
    client = new Cluster([{ host: '127.0.0.1', port: cluster.nodes[0]!.port }], { redisOptions: { maxRetriesPerRequest: 1 } });
    client.on('error', () => undefined);
    await new Promise<void>((resolve, reject) => {
      client.once('ready', () => resolve());
      client.once('end', () => reject(new Error('the Cluster client ended before it was ready')));
    });
  });
  after(async () => {
    client?.disconnect();
    await cluster?.stop();
  });

  /** The master holding a key's slot, and the keys of a prefix (all on that master). */
  async function masterOf(key: string) {
    const slot = Number(await client.cluster('KEYSLOT', key));
    const ranges = await client.cluster('SLOTS');
    const range = ranges.find(([from, to]) => slot >= from && slot <= to);
    const master = client.nodes('master').find((node) => node.options.port === Number(range?.[2]?.[1]));
    if (master === undefined) throw new Error(`no master holds slot ${slot}`);
    return master;
  }
  async function keysOf(p: string): Promise<string[]> {
    const keys: string[] = [];
    for (const node of client.nodes('master')) keys.push(...(await node.keys(`*{${p}}:*`)));
    return keys.sort();
  }

  /** Prefixes whose keys live on each master, `perMaster` of them each, by master port. */
  async function prefixesOnEveryMaster(perMaster: number): Promise<Map<number, string[]>> {
    const byMaster = new Map<number, string[]>(client.nodes('master').map((node) => [node.options.port!, []]));
    for (let i = 0; [...byMaster.values()].some((list) => list.length < perMaster) && i < 1000; i += 1) {
      const p = prefix();
      const list = byMaster.get((await masterOf(`{${p}}:leases`)).options.port!)!;
      if (list.length < perMaster) list.push(p);
    }
    assert.equal(byMaster.size, 3);
    for (const list of byMaster.values()) assert.equal(list.length, perMaster);
    return byMaster;
  }

  for (const batch of [true, false]) {
    describeStoreContract(`redis cluster (batch: ${batch})`, async (clock) => {
      const p = prefix();
      const store = new RedisStore(client, { prefix: p, clock, batch });
      await store.migrate();
      const master = await masterOf(`{${p}}:leases`);
      return {
        store,
        dump: async () => {
          const out: Record<string, unknown> = {};
          for (const key of await keysOf(p)) {
            const type = await master.type(key);
            out[key] = type === 'hash' ? await master.hgetall(key) : await master.zrangebyscore(key, '-inf', '+inf', 'WITHSCORES');
          }
          return JSON.stringify(out, (k, v) => (k === 'body' && typeof v === 'string' ? Buffer.from(v, 'base64').toString('latin1') : v));
        },
        dispose: async () => {
          for (const key of await keysOf(p)) await client.del(key);
        },
      };
    });
  }

  it('checks the eviction policy on every master', async () => {
    const result = await new RedisStore(client, { prefix: prefix() }).verify();
    assert.equal(result.checked, true);
    assert.deepEqual(result.policies, ['noeviction', 'noeviction', 'noeviction']);
  });

  /** Scripts (EVALSHA and EVAL calls) each master ran since its last `CONFIG RESETSTAT`, by port. */
  async function scriptsRun(): Promise<Map<number, number>> {
    const counts = new Map<number, number>();
    for (const node of client.nodes('master')) {
      let calls = 0;
      for (const match of (await node.info('commandstats')).matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) calls += Number(match[1]);
      counts.set(node.options.port!, calls);
    }
    return counts;
  }

  it('batches on the master of each prefix: 35 calls of one turn in two scripts there, prefixes on different masters', async () => {
    const prefixes = await prefixesOnEveryMaster(1);
    const stores = new Map([...prefixes].map(([port, [p]]) => [port, new RedisStore(client, { prefix: p! })]));
    // Every script loaded on every master (a call alone, then a batch), then the counts start.
    for (const store of stores.values()) {
      await store.reserve({ id: 'warm-0', operation: 'op', fingerprint: 'v1:w', token: 't', leaseMs: 60_000, ttlMs: 600_000 });
      await store.complete('warm-0', 't', { response: { status: 201, headers: {}, body: new Uint8Array() }, ttlMs: 600_000 });
      await Promise.all(['warm-1', 'warm-2'].map((id) => store.reserve({ id, operation: 'op', fingerprint: 'v1:w', token: 't', leaseMs: 60_000, ttlMs: 600_000 })));
    }
    for (const node of client.nodes('master')) await node.config('RESETSTAT');
    const reserving = [...stores.values()].map((store) =>
      Promise.all(Array.from({ length: 35 }, (_, i) => store.reserve({ id: `k-${i}`, operation: 'op', fingerprint: `v1:k-${i}`, token: `t-k-${i}`, leaseMs: 60_000, ttlMs: 600_000 }))),
    );
    for (const reserved of await Promise.all(reserving)) assert.deepEqual(new Set(reserved.map((r) => r.outcome)), new Set(['reserved']));
    // One script of 32 calls and one of 3 on each master, for the prefix it holds.
    assert.deepEqual([...(await scriptsRun()).values()], [2, 2, 2]);
    await Promise.all(
      [...stores].map(async ([port, store]) => {
        const p = prefixes.get(port)![0]!;
        const ids = Array.from({ length: 35 }, (_, i) => `k-${i}`);
        const completed = await Promise.all(ids.map((id) => store.complete(id, `t-${id}`, { response: { status: 201, headers: {}, body: new TextEncoder().encode(id) }, ttlMs: 600_000 })));
        assert.ok(completed.every(Boolean));
        const again = await Promise.all(ids.map((id) => store.reserve({ id, operation: 'op', fingerprint: `v1:${id}`, token: 'late', leaseMs: 60_000, ttlMs: 600_000 })));
        assert.deepEqual(again.map((r) => [r.outcome, r.record.state, new TextDecoder().decode(r.record.response?.body)]), ids.map((id) => ['existing', 'completed', id]));
        // The records (and the lease index, now empty) are on the master that holds the prefix's slot.
        const master = client.nodes('master').find((node) => node.options.port === port)!;
        assert.equal((await master.keys(`{${p}}:r:*`)).length, 38);
      }),
    );
  });

  it('repairs the lease index of records on every master', async () => {
    const prefixes = [...(await prefixesOnEveryMaster(2)).values()].flat();
    const stores = await Promise.all(
      prefixes.map(async (p) => {
        const store = new RedisStore(client, { prefix: p });
        await store.reserve({ id: 'orphan', operation: 'op', fingerprint: 'v1:x', token: 't', leaseMs: 1, ttlMs: 600_000 });
        // What an earlier version left: the record without its lease index entry.
        await client.zrem(`{${p}}:leases`, 'orphan');
        return store;
      }),
    );
    // Each store's repair scans every master and puts back the orphan of its own prefix, wherever that lives.
    let repaired = 0;
    for (const store of stores) repaired += await store.repairLeaseIndex();
    assert.equal(repaired, 6);
    await new Promise((resolve) => setTimeout(resolve, 5));
    for (const store of stores) assert.deepEqual((await store.listAbandoned()).map((r) => r.id), ['orphan']);
  });
});
