/**
 * Redis idempotency store on ioredis. Imports only `../store.js` and ioredis's types; copied into users'
 * generated code.
 *
 * ```ts
 * import { Redis } from 'ioredis';
 * const redis = new Redis(process.env.REDIS_URL);
 * const store = new RedisStore(redis, { prefix: 'idem' });
 * await store.migrate();   // no schema: checks that Redis never evicts records (maxmemory-policy noeviction)
 * ```
 *
 * Every operation that checks and writes is one Lua script (atomic on the server): reserve, fenced
 * complete, fenced release, takeover, lease extension, purge. Time is the server's (`TIME`) unless a `clock` is
 * injected. Layout, all under one hash tag so a script's keys share a Cluster slot:
 * `{prefix}:r:<id>` (hash: the record), `{prefix}:leases` (sorted set of `in_progress` ids by lease end),
 * `{prefix}:expiry` (sorted set of `completed` ids by expiry). A completed record also gets a Redis TTL
 * of its retention, so Redis drops it even if nobody calls {@link RedisStore.purgeExpired}.
 *
 * Durability: records must never be evicted (an evicted record lets a retry run the effect again), so
 * {@link RedisStore.migrate} refuses a server whose `maxmemory-policy` is not `noeviction` while
 * `maxmemory` is set. Use AOF (`appendonly yes`; `appendfsync everysec` may lose the last second of
 * reservations on a crash, `always` does not but costs a disk sync per write). Replication is
 * asynchronous: a failover can lose a reservation or a completion that the old primary acknowledged.
 * Bodies are stored base64-encoded, byte-exact.
 */
import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import {
  StoreError,
  checkStoreName,
  reservedRecord,
  type BatchOptions,
  type CompleteInput,
  type IdempotencyRecord,
  type IdempotencyStore,
  type ReserveInput,
  type ReserveResult,
} from '../store.js';

/** Options of {@link RedisStore}. */
export interface RedisStoreOptions {
  /** Key prefix (letters, digits, `_`, `-`, `:`; default `idem`). */
  readonly prefix?: string;
  /** Injected clock (ms since the epoch) instead of the server's `TIME`; for tests. */
  readonly clock?: () => number;
  /**
   * Receives the warning of {@link RedisStore.migrate} when the eviction policy could not be checked
   * (`CONFIG` renamed or denied, as on many managed services). Default: ignored — call
   * {@link RedisStore.verify} yourself to see it.
   */
  readonly onWarning?: (message: string) => void;
}

/** What {@link RedisStore.verify} found out about the server's eviction settings. */
export interface RedisVerifyResult {
  /** Whether `CONFIG GET` answered on every server checked. */
  readonly checked: boolean;
  /** `maxmemory-policy` of each server checked (one for a single server, one per master on a Cluster). */
  readonly policies: readonly string[];
  /** Set when the settings are not certainly safe but not refused (the check could not run, or a policy that would evict once `maxmemory` is set). */
  readonly warning?: string;
}

const EVICTION_FIX =
  'set maxmemory-policy noeviction (redis.conf, or CONFIG SET maxmemory-policy noeviction), ideally on a Redis instance dedicated to idempotency records';

// Shared prologue: ARGV[1] is the injected time in ms, or '' for the server clock.
const NOW = `
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function ms(x) return string.format('%.0f', x) end
`;

// KEYS: record, leases, expiry. ARGV: now, id, operation, fingerprint, token, leaseMs, ttlMs.
// A reservation returns only the time: the caller knows every field it just wrote (no HGETALL, smaller reply).
const RESERVE = `${NOW}
local r = redis.call('HMGET', KEYS[1], 'state', 'expires_at')
if r[1] and not (r[1] == 'completed' and tonumber(r[2]) <= now) then
  return {'existing', ms(now), redis.call('HGETALL', KEYS[1])}
end
if r[1] then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[3], ARGV[2])
end
local lease_until = now + tonumber(ARGV[6])
redis.call('HSET', KEYS[1], 'id', ARGV[2], 'operation', ARGV[3], 'fingerprint', ARGV[4], 'state', 'in_progress',
  'lease_token', ARGV[5], 'lease_until', ms(lease_until), 'expires_at', ms(now + tonumber(ARGV[7])), 'created_at', ms(now))
redis.call('ZADD', KEYS[2], ms(lease_until), ARGV[2])
return {'reserved', ms(now)}
`;

// KEYS: record, leases, expiry. ARGV: now, id, token, status, headers, body (base64), resultId ('' = none), hasResultId, ttlMs.
const COMPLETE = `${NOW}
local r = redis.call('HMGET', KEYS[1], 'state', 'lease_token')
if r[1] ~= 'in_progress' or r[2] ~= ARGV[3] then
  return 0
end
local expires_at = now + tonumber(ARGV[9])
redis.call('HSET', KEYS[1], 'state', 'completed', 'status', ARGV[4], 'headers', ARGV[5], 'body', ARGV[6], 'expires_at', ms(expires_at))
if ARGV[8] == '1' then redis.call('HSET', KEYS[1], 'result_id', ARGV[7]) end
redis.call('ZREM', KEYS[2], ARGV[2])
redis.call('ZADD', KEYS[3], ms(expires_at), ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[9])
return 1
`;

// KEYS: record, leases. ARGV: now, id, token.
const RELEASE = `
local r = redis.call('HMGET', KEYS[1], 'state', 'lease_token')
if r[1] ~= 'in_progress' or r[2] ~= ARGV[3] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[2])
return 1
`;

// KEYS: record, leases. ARGV: now, id, fingerprint, staleToken, newToken, leaseMs.
const TAKEOVER = `${NOW}
local r = redis.call('HMGET', KEYS[1], 'state', 'lease_token', 'fingerprint', 'lease_until')
if r[1] ~= 'in_progress' or r[2] ~= ARGV[4] or r[3] ~= ARGV[3] or tonumber(r[4]) > now then
  return false
end
local lease_until = now + tonumber(ARGV[6])
redis.call('HSET', KEYS[1], 'lease_token', ARGV[5], 'lease_until', ms(lease_until), 'created_at', ms(now))
redis.call('ZADD', KEYS[2], ms(lease_until), ARGV[2])
return redis.call('HGETALL', KEYS[1])
`;

// KEYS: record, leases. ARGV: now, id, token, leaseMs.
const EXTEND = `${NOW}
local r = redis.call('HMGET', KEYS[1], 'state', 'lease_token')
if r[1] ~= 'in_progress' or r[2] ~= ARGV[3] then
  return 0
end
local lease_until = now + tonumber(ARGV[4])
redis.call('HSET', KEYS[1], 'lease_until', ms(lease_until))
redis.call('ZADD', KEYS[2], ms(lease_until), ARGV[2])
return 1
`;

// KEYS: leases. ARGV: now, record key prefix, limit.
const ABANDONED = `${NOW}
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ms(now), 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, id in ipairs(ids) do
  local record = redis.call('HGETALL', ARGV[2] .. id)
  if #record > 0 then table.insert(out, record) else redis.call('ZREM', KEYS[1], id) end
end
return out
`;

// KEYS: expiry. ARGV: now, record key prefix, limit.
const PURGE = `${NOW}
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ms(now), 'LIMIT', 0, tonumber(ARGV[3]))
local deleted = 0
for _, id in ipairs(ids) do
  local key = ARGV[2] .. id
  local r = redis.call('HMGET', key, 'state', 'expires_at')
  if r[1] == 'completed' and tonumber(r[2]) <= now then
    redis.call('DEL', key)
    deleted = deleted + 1
  end
  if r[1] ~= 'completed' or tonumber(r[2]) <= now then redis.call('ZREM', KEYS[1], id) end
end
return deleted
`;

type RedisClient = Redis | Cluster;

/** Redis store. The caller creates and closes the client; the store never does. Not transactional. */
export class RedisStore implements IdempotencyStore {
  readonly #redis: RedisClient;
  readonly #clock: (() => number) | undefined;
  readonly #onWarning: ((message: string) => void) | undefined;
  readonly #recordPrefix: string;
  readonly #leases: string;
  readonly #expiry: string;

  constructor(redis: RedisClient, options: RedisStoreOptions = {}) {
    this.#redis = redis;
    this.#clock = options.clock;
    this.#onWarning = options.onWarning;
    const prefix = checkStoreName(options.prefix ?? 'idem', 'Redis key prefix', /^[A-Za-z0-9_:-]{1,100}$/);
    this.#recordPrefix = `{${prefix}}:r:`;
    this.#leases = `{${prefix}}:leases`;
    this.#expiry = `{${prefix}}:expiry`;
  }

  /**
   * Redis needs no schema; call it at start-up like the other stores' `migrate()`: it runs
   * {@link RedisStore.verify} and throws a `StoreError` (`unsupported`) when the server may evict records.
   * A warning (the check could not run) goes to `options.onWarning`.
   */
  async migrate(): Promise<void> {
    const result = await this.verify();
    if (result.warning !== undefined) this.#onWarning?.(result.warning);
  }

  /**
   * Check that Redis never evicts records: an evicted record lets a retry run the effect again. Reads
   * `maxmemory-policy` and `maxmemory` with `CONFIG GET` (on every master of a Cluster) and throws a
   * `StoreError` (`unsupported`) when the policy is not `noeviction` and `maxmemory` is set. Where `CONFIG`
   * is renamed, denied or answers without the setting (managed Redis, proxies), returns `checked: false` with a warning instead of throwing: make
   * sure the policy is `noeviction` in your provider's settings. Connection errors throw `unavailable`.
   */
  async verify(): Promise<RedisVerifyResult> {
    const redis = this.#redis;
    const servers: Redis[] = isCluster(redis) ? redis.nodes('master') : [redis];
    const policies: string[] = [];
    const warnings: string[] = [];
    for (const server of servers) {
      let policy: string;
      let maxmemory: number;
      try {
        policy = configValue(await server.config('GET', 'maxmemory-policy'), 'maxmemory-policy');
        maxmemory = Number(configValue(await server.config('GET', 'maxmemory'), 'maxmemory'));
      } catch (error) {
        const message = String((error as Error)?.message ?? error);
        // Managed Redis refuses CONFIG in many wordings (renamed, ACL, "not available", "unsupported", …), and
        // proxies may answer without the setting: any answer from the server but a transient state means the
        // check cannot run here. Only a failure to reach the server is an error.
        if (refusesConfig(error, message)) {
          return {
            checked: false,
            policies,
            warning: `could not read the Redis eviction policy (${message.split('\n')[0]}): if Redis evicts idempotency records, a retry runs the effect again; ${EVICTION_FIX}`,
          };
        }
        throw wrap(error);
      }
      policies.push(policy);
      if (policy === 'noeviction') continue;
      if (maxmemory > 0) {
        throw new StoreError(
          'unsupported',
          `Redis maxmemory-policy is ${policy} with maxmemory ${maxmemory}: Redis may evict idempotency records under memory pressure, and a retry would then run the effect again; ${EVICTION_FIX}`,
        );
      }
      warnings.push(`Redis maxmemory-policy is ${policy}: records are safe only while maxmemory stays 0 (no limit); ${EVICTION_FIX}`);
    }
    return { checked: true, policies, ...(warnings.length > 0 ? { warning: warnings.join('; ') } : {}) };
  }

  async reserve(input: ReserveInput): Promise<ReserveResult> {
    const reply = (await this.#eval(RESERVE, [this.#key(input.id), this.#leases, this.#expiry], [
      input.id,
      input.operation,
      input.fingerprint,
      input.token,
      String(input.leaseMs),
      String(input.ttlMs),
    ])) as [string, string, string[]?];
    const now = Number(reply[1]);
    if (reply[0] !== 'reserved') return { outcome: 'existing', now, record: toRecord(reply[2] ?? []) };
    const record = reservedRecord(input, now);
    return { outcome: 'reserved', now, record };
  }

  async complete(id: string, token: string, input: CompleteInput): Promise<boolean> {
    const reply = await this.#eval(COMPLETE, [this.#key(id), this.#leases, this.#expiry], [
      id,
      token,
      String(input.response.status),
      JSON.stringify(input.response.headers),
      base64(input.response.body),
      input.resultId ?? '',
      input.resultId === undefined ? '0' : '1',
      String(input.ttlMs),
    ]);
    return reply === 1;
  }

  async release(id: string, token: string): Promise<boolean> {
    return (await this.#eval(RELEASE, [this.#key(id), this.#leases], [id, token])) === 1;
  }

  async takeover(id: string, fingerprint: string, staleToken: string, newToken: string, leaseMs: number): Promise<IdempotencyRecord | undefined> {
    const reply = await this.#eval(TAKEOVER, [this.#key(id), this.#leases], [id, fingerprint, staleToken, newToken, String(leaseMs)]);
    return Array.isArray(reply) ? toRecord(reply as string[]) : undefined;
  }

  /**
   * Lease heartbeat: one script setting `lease_until = now + leaseMs` (server `TIME`) while the record is
   * `in_progress` under `token` (also past the lease, as long as nobody took it over).
   */
  async extend(id: string, token: string, leaseMs: number): Promise<boolean> {
    return (await this.#eval(EXTEND, [this.#key(id), this.#leases], [id, token, String(leaseMs)])) === 1;
  }

  async get(id: string): Promise<IdempotencyRecord | undefined> {
    let fields: Record<string, string>;
    try {
      fields = await this.#redis.hgetall(this.#key(id));
    } catch (error) {
      throw wrap(error);
    }
    return Object.keys(fields).length === 0 ? undefined : fromFields(fields);
  }

  async listAbandoned(options: BatchOptions = {}): Promise<IdempotencyRecord[]> {
    const reply = (await this.#eval(ABANDONED, [this.#leases], [this.#recordPrefix, String(limitOf(options))])) as string[][];
    return reply.map(toRecord).sort((a, b) => a.leaseUntil - b.leaseUntil || (a.id < b.id ? -1 : 1));
  }

  async purgeExpired(options: BatchOptions = {}): Promise<number> {
    return Number(await this.#eval(PURGE, [this.#expiry], [this.#recordPrefix, String(limitOf(options))]));
  }

  async now(): Promise<number> {
    const clock = this.#clock;
    if (clock !== undefined) return clock();
    try {
      const [seconds, micros] = await this.#redis.time();
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    } catch (error) {
      throw wrap(error);
    }
  }

  #key(id: string): string {
    return this.#recordPrefix + id;
  }

  /** EVALSHA, loading the script with EVAL the first time the server does not know it. */
  async #eval(script: string, keys: string[], args: string[]): Promise<unknown> {
    const now = this.#clock === undefined ? '' : String(this.#clock());
    // ioredis flattens array arguments: keys, then ARGV (the time first).
    const argv = [...keys, now, ...args];
    const sha = sha1(script);
    try {
      try {
        return await this.#redis.evalsha(sha, keys.length, argv);
      } catch (error) {
        if (!String((error as Error).message).startsWith('NOSCRIPT')) throw error;
        return await this.#redis.eval(script, keys.length, argv);
      }
    } catch (error) {
      throw wrap(error);
    }
  }
}

function isCluster(client: RedisClient): client is Cluster {
  return (client as Partial<Cluster>).isCluster === true;
}

// CONFIG GET answers [name, value] (a flat list; RESP3 servers may answer a map, which ioredis gives as an object).
/** CONFIG GET could not read the setting on a server that does answer (not a connection failure, not a transient state). */
function refusesConfig(error: unknown, message: string): boolean {
  if (error instanceof StoreError) return error.kind === 'unsupported';
  if ((error as { name?: unknown } | null)?.name !== 'ReplyError') return false;
  return !/^(LOADING|BUSY|TRYAGAIN|CLUSTERDOWN|MASTERDOWN|MOVED|ASK)\b/.test(message);
}

function configValue(reply: unknown, name: string): string {
  if (Array.isArray(reply)) {
    for (let i = 0; i + 1 < reply.length; i += 2) if (String(reply[i]).toLowerCase() === name) return String(reply[i + 1]);
  } else if (reply !== null && typeof reply === 'object' && name in reply) {
    return String((reply as Record<string, unknown>)[name]);
  }
  throw new StoreError('unsupported', `Redis CONFIG GET ${name} gave no value`);
}

const shas = new Map<string, string>();
function sha1(script: string): string {
  let sha = shas.get(script);
  if (sha === undefined) {
    sha = createHash('sha1').update(script).digest('hex');
    shas.set(script, sha);
  }
  return sha;
}

/** Base64 of the bytes, read in place (no copy of the body first). */
function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

function limitOf(options: BatchOptions): number {
  return Math.max(1, Math.floor(options.limit ?? 500));
}

function wrap(error: unknown): StoreError {
  if (error instanceof StoreError) return error;
  return new StoreError('unavailable', `Redis store operation failed: ${(error as Error)?.message ?? String(error)}`, { cause: error });
}

function toRecord(flat: string[]): IdempotencyRecord {
  const fields: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
  return fromFields(fields);
}

function fromFields(f: Record<string, string>): IdempotencyRecord {
  const base = {
    id: f['id']!,
    operation: f['operation']!,
    fingerprint: f['fingerprint']!,
    state: f['state'] as 'in_progress' | 'completed',
    leaseToken: f['lease_token']!,
    leaseUntil: Number(f['lease_until']),
    expiresAt: Number(f['expires_at']),
    createdAt: Number(f['created_at']),
  };
  if (base.state !== 'completed') return base;
  return {
    ...base,
    response: {
      status: Number(f['status']),
      headers: JSON.parse(f['headers'] ?? '{}') as Record<string, string>,
      body: new Uint8Array(Buffer.from(f['body'] ?? '', 'base64')),
    },
    ...(f['result_id'] !== undefined ? { resultId: f['result_id'] } : {}),
  };
}
