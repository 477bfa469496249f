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
 * complete, fenced release, takeover, lease extension, purge. Batching (default): the reservations and completions
 * that concurrent requests ask for within one turn of the event loop go to the server as one script, which runs
 * each call as its own script would, one after the other (see {@link RedisStoreOptions.batch}). Time is the server's (`TIME`) unless a `clock` is
 * injected. Layout, all under one hash tag so a script's keys share a Cluster slot:
 * `{prefix}:r:<id>` (hash: the record), `{prefix}:leases` (sorted set of `in_progress` ids by lease end).
 * A completed record gets a Redis TTL of its retention, from the same server clock as its `expiresAt`, so
 * Redis drops it when it expires without anyone calling {@link RedisStore.purgeExpired}. `{prefix}:expiry`
 * (sorted set of `completed` ids by expiry) is written only with an injected clock, which Redis's TTL does
 * not follow; earlier versions of this store wrote it for every completion, and `purgeExpired` drains those entries.
 *
 * Durability: records must never be evicted (an evicted record lets a retry run the effect again), so
 * {@link RedisStore.migrate} refuses a server whose `maxmemory-policy` is not `noeviction` while
 * `maxmemory` is set. Use AOF (`appendonly yes`; `appendfsync everysec` may lose the last second of
 * reservations on a crash, `always` does not but costs a disk sync per write); {@link RedisStore.verify} warns
 * when AOF is off or left to the OS to flush. Replication is
 * asynchronous: a failover can lose a reservation or a completion that the old primary acknowledged.
 * Bodies are stored base64-encoded, byte-exact.
 */
import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import {
  StoreError,
  checkStoreName,
  cursorLease,
  queuePerTurn,
  reservedRecord,
  type BatchOptions,
  type CompleteInput,
  type IdempotencyRecord,
  type ListAbandonedOptions,
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
  /**
   * Batch the reservations and completions asked for within one event-loop turn into one script of up to 32 calls
   * (default true), run one after the other on the server as their single scripts would. Concurrent requests then
   * share a round trip and a script, which cuts the app's CPU per request (and the server's, under load); a call alone in its
   * turn runs its own script, one turn later. A call whose command fails in the batch (READONLY after a failover,
   * a key of another type under the prefix) runs again on its own, so ioredis's `reconnectOnError` sees its error
   * as for a call never batched; so does every call of a script that fails as a whole. With ioredis's
   * `commandTimeout`, a store that stops answering therefore fails a batched call after up to twice that timeout
   * (the guard's `storeTimeoutMs` still bounds the wait), and a stall shorter than that is ridden out. `false`:
   * every call is its own script, sent at once.
   */
  readonly batch?: boolean;
}

/** A reservation or completion waiting for the next batch (see {@link RedisStoreOptions.batch}). */
interface Queued {
  /** The call's record key. */
  readonly key: string;
  /** Its part of the batch's ARGV: its kind, then its fields. */
  readonly args: readonly string[];
  /** Settles the call with its reply in the batch. */
  readonly settle: (reply: unknown) => void;
  readonly reject: (error: unknown) => void;
  /** Runs the call as its own script instead, settling it; `retried` when its batch may already have run it. */
  readonly alone: (retried: boolean) => void;
}

/** Most calls in one batch script; a larger turn goes as several. */
const MAX_BATCH_CALLS = 32;

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

// Shared prologue: ARGV[1] is the injected time in ms, or '' for the server clock (TIME: seconds and
// microseconds, as strings that Lua's arithmetic reads as numbers).
const NOW = `
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
end
`;

// The two calls of every request, as Lua functions: the single scripts below call one, BATCH calls them in turn.
// Times are written as whole numbers ('%.0f': exact for any double; '%d' would overflow a 32-bit build's long).

// A reservation answers only the time, as an integer: the caller knows every field it just wrote (no
// HGETALL, the smallest reply). Otherwise {time, the record's fields}.
const RESERVE_FN = `
local function reserve(key, leases, now, id, operation, fingerprint, token, lease_ms, ttl_ms)
  local r = redis.call('HMGET', key, 'state', 'expires_at')
  if r[1] and not (r[1] == 'completed' and tonumber(r[2]) <= now) then
    return {string.format('%.0f', now), redis.call('HGETALL', key)}
  end
  if r[1] then redis.call('DEL', key) end
  local lease_until = string.format('%.0f', now + lease_ms)
  redis.call('HSET', key, 'id', id, 'operation', operation, 'fingerprint', fingerprint, 'state', 'in_progress',
    'lease_token', token, 'lease_until', lease_until, 'expires_at', string.format('%.0f', now + ttl_ms),
    'created_at', string.format('%.0f', now))
  redis.call('ZADD', leases, lease_until, id)
  return now
end
`;

// The record's Redis TTL (its retention, from the same server clock as expires_at) removes it; an injected clock
// is not Redis's, so then (expiry given) the completion is also indexed by expiry for purgeExpired. Answers 1 or 0.
const COMPLETE_FN = `
local function complete(key, leases, expiry, now, id, token, status, headers, body, ttl_ms, result_id)
  local r = redis.call('HMGET', key, 'state', 'lease_token')
  if r[1] ~= 'in_progress' or r[2] ~= token then
    return 0
  end
  local expires_at = string.format('%.0f', now + ttl_ms)
  local fields = {'state', 'completed', 'status', status, 'headers', headers, 'body', body, 'expires_at', expires_at}
  if result_id then fields[11] = 'result_id'; fields[12] = result_id end
  redis.call('HSET', key, unpack(fields))
  redis.call('ZREM', leases, id)
  if expiry then redis.call('ZADD', expiry, expires_at, id) end
  redis.call('PEXPIRE', key, ttl_ms)
  return 1
end
`;

// KEYS: record, leases. ARGV: now, id, operation, fingerprint, token, leaseMs, ttlMs.
const RESERVE = script(`${NOW}${RESERVE_FN}
return reserve(KEYS[1], KEYS[2], now, ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7])
`);

// KEYS: record, leases, and the expiry index only with an injected clock.
// ARGV: now, id, token, status, headers, body (base64), ttlMs, and the result id when there is one.
const COMPLETE = script(`${NOW}${COMPLETE_FN}
return complete(KEYS[1], KEYS[2], KEYS[3], now, ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8])
`);

// The reservations and completions of one event-loop turn (see RedisStoreOptions.batch), one after the other in
// the order they were asked for, each exactly as its single script runs it.
// KEYS: leases, expiry, then each call's record. ARGV: each call's kind, its time (the injected clock's reading
// when it was asked for, or '' for the server's TIME, read once for the script), then its fields:
//   'r' id, operation, fingerprint, token, leaseMs, ttlMs;
//   'c' id, token, status, headers, body (base64), ttlMs — 'C' the same and the result id.
// Answers one reply per call, in order; a call whose command failed (READONLY after a failover, a key of another
// type under the prefix) answers its error in its place, and the calls after it still run. The expiry index is
// written only for a completion timed by an injected clock, as COMPLETE does.
const BATCH = script(`${RESERVE_FN}${COMPLETE_FN}
local server_now = nil
local out = {}
local a = 1
for i = 3, #KEYS do
  local kind = ARGV[a]
  local now = tonumber(ARGV[a + 1])
  local expiry = nil
  if now then
    expiry = KEYS[2]
  else
    if not server_now then
      local t = redis.call('TIME')
      server_now = t[1] * 1000 + math.floor(t[2] / 1000)
    end
    now = server_now
  end
  local ok, reply
  if kind == 'r' then
    ok, reply = pcall(reserve, KEYS[i], KEYS[1], now, ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6], ARGV[a + 7])
    a = a + 8
  else
    local result_id = nil
    if kind == 'C' then result_id = ARGV[a + 8] end
    ok, reply = pcall(complete, KEYS[i], KEYS[1], expiry, now, ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6], ARGV[a + 7], result_id)
    if kind == 'C' then a = a + 9 else a = a + 8 end
  end
  if ok then
    out[i - 2] = reply
  else
    -- A string on Redis 7.0; an error table ({err = …}) where redis.call raises one.
    if type(reply) == 'table' and reply.err then reply = reply.err end
    out[i - 2] = redis.error_reply(tostring(reply))
  end
end
return out
`);

// KEYS: record, leases. ARGV: now, id, token.
const RELEASE = script(`
local r = redis.call('HMGET', KEYS[1], 'state', 'lease_token')
if r[1] ~= 'in_progress' or r[2] ~= ARGV[3] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[2])
return 1
`);

// KEYS: record, leases. ARGV: now, id, fingerprint, staleToken, newToken, leaseMs.
const TAKEOVER = script(`${NOW}
local r = redis.call('HMGET', KEYS[1], 'state', 'lease_token', 'fingerprint', 'lease_until')
if r[1] ~= 'in_progress' or r[2] ~= ARGV[4] or r[3] ~= ARGV[3] or tonumber(r[4]) > now then
  return false
end
local lease_until = string.format('%.0f', now + ARGV[6])
redis.call('HSET', KEYS[1], 'lease_token', ARGV[5], 'lease_until', lease_until, 'created_at', string.format('%.0f', now))
redis.call('ZADD', KEYS[2], lease_until, ARGV[2])
return redis.call('HGETALL', KEYS[1])
`);

// KEYS: record, leases. ARGV: now, id, token, leaseMs.
const EXTEND = script(`${NOW}
local r = redis.call('HMGET', KEYS[1], 'state', 'lease_token')
if r[1] ~= 'in_progress' or r[2] ~= ARGV[3] then
  return 0
end
local lease_until = string.format('%.0f', now + ARGV[4])
redis.call('HSET', KEYS[1], 'lease_until', lease_until)
redis.call('ZADD', KEYS[2], lease_until, ARGV[2])
return 1
`);

// KEYS: leases. ARGV: now, record key prefix, limit, and for a next page the cursor's lease and id.
// Entries are in (lease, id) order (a sorted set orders equal scores by member); a page after a cursor starts at its
// lease and skips that lease's entries up to its id. Entries whose record is gone leave the index (and the window).
const ABANDONED = script(`${NOW}
local limit = tonumber(ARGV[3])
local lease, after = ARGV[4], ARGV[5]
local out = {}
local offset = 0
while #out < limit do
  local page = redis.call('ZRANGEBYSCORE', KEYS[1], lease or '-inf', string.format('%.0f', now), 'WITHSCORES', 'LIMIT', offset, limit)
  local removed = 0
  for i = 1, #page, 2 do
    local id = page[i]
    if #out >= limit then break end
    if not (after and tonumber(page[i + 1]) == tonumber(lease) and id <= after) then
      local record = redis.call('HGETALL', ARGV[2] .. id)
      if #record > 0 then table.insert(out, record) else redis.call('ZREM', KEYS[1], id); removed = removed + 1 end
    end
  end
  if #page < 2 * limit then break end
  offset = offset + #page / 2 - removed
end
return out
`);

// KEYS: expiry. ARGV: now, record key prefix, limit.
// The expiry index holds completions made with an injected clock, and every completion of the layout before
// Redis TTLs replaced it; records the TTL already removed, or that were reserved again, leave the index here.
// An entry of a record that was completed again later moves to its new expiry.
const PURGE = script(`${NOW}
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now), 'LIMIT', 0, tonumber(ARGV[3]))
local deleted = 0
for _, id in ipairs(ids) do
  local key = ARGV[2] .. id
  local r = redis.call('HMGET', key, 'state', 'expires_at')
  if r[1] == 'completed' and tonumber(r[2]) > now then
    redis.call('ZADD', KEYS[1], r[2], id)
  else
    if r[1] == 'completed' then
      redis.call('DEL', key)
      deleted = deleted + 1
    end
    redis.call('ZREM', KEYS[1], id)
  end
end
return deleted
`);

// KEYS: leases, parked, cursor. ARGV: now, record key prefix, limit, window.
// purgeAbandoned's own bookkeeping, written by no other call, so reservations and completions pay nothing for it:
// `parked` holds, by TTL, the records it found past their lease but within their TTL, and `cursor` the lease
// up to which it has read the lease index — every entry at or below it was freed, dropped or parked — and when that
// reading began. A call first visits the parked records whose TTL has passed, then reads on in the lease index past
// the cursor; so an abandoned record is read about twice (its lease past, then its TTL), not on every call (a scale
// review's 300,000 kept records cost 1.7 s per call when every call read them all). An entry reaches the index below
// the cursor only through a clock that went back by more than a lease, or repairLeaseIndex (which drops the cursor):
// an hour after a reading from the start began, the next call reads the whole index again, a bound on how long such an
// entry can be missed. Reads up to `window` records, finishing the group of equal leases it is in (a cursor is a
// lease, so a group is read whole). Answers {deleted, done}: done = 1 once nothing is left to read, 0 when the window
// or the limit cut the call short.
const PURGE_ABANDONED = script(`${NOW}
local limit, window, prefix = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[2]
-- Whole milliseconds, as every score and time it compares with is written: an injected clock's fraction, rounded up
-- in the range read but not in the comparisons, made a record at the range's end read as leased forever.
now = math.floor(now)
local now_s = string.format('%.0f', now)
local deleted, read = 0, 0
-- A record in progress past both its lease and its TTL is deleted; one past its lease within its TTL is parked by
-- TTL; any other leaves 'parked' (completed or gone: and the lease index too; leased again: its lease entry is put at
-- that lease, above the cursor). Answers whether its lease entry stays at or below now.
local function visit(id)
  read = read + 1
  local key = prefix .. id
  local r = redis.call('HMGET', key, 'state', 'lease_until', 'expires_at')
  if r[1] ~= 'in_progress' then
    redis.call('ZREM', KEYS[1], id)
    redis.call('ZREM', KEYS[2], id)
    return false
  end
  local lease, expires = tonumber(r[2]) or now, tonumber(r[3]) or now
  if lease > now then
    redis.call('ZREM', KEYS[2], id)
    redis.call('ZADD', KEYS[1], r[2], id)
    -- Out of the range read now (at its lease, past now); were its score still within it, it stays in the page.
    return tonumber(redis.call('ZSCORE', KEYS[1], id)) <= now
  end
  if expires <= now then
    redis.call('DEL', key)
    redis.call('ZREM', KEYS[1], id)
    redis.call('ZREM', KEYS[2], id)
    deleted = deleted + 1
    return false
  end
  redis.call('ZADD', KEYS[2], string.format('%.0f', expires), id)
  return true
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now_s, 'LIMIT', 0, window)) do
  if deleted >= limit then return {deleted, 0} end
  visit(id)
end
if read >= window then return {deleted, 0} end
-- The cursor: when the reading began, then the lease it has read to.
local since, from = string.match(redis.call('GET', KEYS[3]) or '', '^(%d+) (.+)$')
since = tonumber(since)
if not since or since > now or now - since >= 3600000 then
  from, since = nil, now
end
local lower = from and ('(' .. from) or '-inf'
local function stop(to, done)
  if to then redis.call('SET', KEYS[3], string.format('%.0f', since) .. ' ' .. to) end
  return {deleted, done}
end
local group, offset = nil, 0
while true do
  local page = redis.call('ZRANGEBYSCORE', KEYS[1], lower, now_s, 'WITHSCORES', 'LIMIT', offset, 256)
  for i = 1, #page, 2 do
    local id, score = page[i], page[i + 1]
    if score ~= group then
      -- A new group: the one before it was read whole.
      if group then
        from = group
        if read >= window then return stop(from, 0) end
      end
      group = score
    end
    if deleted >= limit then return stop(from, 0) end
    if visit(id) then offset = offset + 1 end
  end
  if #page < 512 then return stop(now_s, 1) end
end
`);

/** Lease entries one {@link PURGE_ABANDONED} script reads at most. */
const PURGE_WINDOW = 1000;

// KEYS: leases, then record keys. ARGV: the records' ids, in the order of their keys.
// Puts every in_progress record back in the lease index (NX: an entry already there keeps its score), reading
// each record in the script so that one completed or released since it was listed stays out. Answers how many
// entries it added. A key of another type under the record prefix is skipped.
const REPAIR = script(`
local added = 0
for i = 2, #KEYS do
  if redis.call('TYPE', KEYS[i]).ok == 'hash' then
    local r = redis.call('HMGET', KEYS[i], 'state', 'lease_until')
    if r[1] == 'in_progress' and tonumber(r[2]) then
      added = added + redis.call('ZADD', KEYS[1], 'NX', r[2], ARGV[i - 1])
    end
  end
end
return added
`);

/** `COUNT` of each SCAN step of {@link RedisStore.repairLeaseIndex}: a hint to Redis, so about how many records one repair script reads. */
const SCAN_COUNT = 1000;

type RedisClient = Redis | Cluster;

/**
 * Redis store. The caller creates and closes the client; the store never does. Not transactional.
 *
 * Upgrading from a version before the `keyPrefix` fix: with an ioredis client created with `keyPrefix`,
 * earlier versions' {@link RedisStore.listAbandoned} missed every record and dropped its entry from the lease
 * index, so those reservations stay `in_progress` where reconciliation never lists them. Once every instance
 * runs this version, call {@link RedisStore.repairLeaseIndex} once to put them back.
 */
export class RedisStore implements IdempotencyStore {
  readonly #redis: RedisClient;
  readonly #clock: (() => number) | undefined;
  readonly #onWarning: ((message: string) => void) | undefined;
  readonly #recordPrefix: string;
  /** {@link RedisStore.#recordPrefix} as Redis sees it: ioredis puts the client's `keyPrefix` before KEYS, not ARGV. */
  readonly #serverRecordPrefix: string;
  readonly #leases: string;
  readonly #expiry: string;
  /** {@link PURGE_ABANDONED}'s own: records past their lease within their TTL, by TTL, and how far it has read. */
  readonly #parked: string;
  readonly #purgeCursor: string;
  readonly #batch: boolean;
  // The calls of one turn, sent as batch scripts once the turn has asked all it will (see queuePerTurn).
  readonly #enqueue = queuePerTurn<Queued>((calls) => {
    for (let start = 0; start < calls.length; start += MAX_BATCH_CALLS) this.#runBatch(calls.slice(start, start + MAX_BATCH_CALLS));
  });

  constructor(redis: RedisClient, options: RedisStoreOptions = {}) {
    this.#redis = redis;
    this.#clock = options.clock;
    this.#onWarning = options.onWarning;
    const prefix = checkStoreName(options.prefix ?? 'idem', 'Redis key prefix', /^[A-Za-z0-9_:-]{1,100}$/);
    this.#recordPrefix = `{${prefix}}:r:`;
    this.#serverRecordPrefix = (redis.options.keyPrefix ?? '') + this.#recordPrefix;
    this.#leases = `{${prefix}}:leases`;
    this.#expiry = `{${prefix}}:expiry`;
    this.#parked = `{${prefix}}:parked`;
    this.#purgeCursor = `{${prefix}}:purge-cursor`;
    this.#batch = options.batch ?? true;
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
   * `StoreError` (`unsupported`) when the policy is not `noeviction` and `maxmemory` is set; a Cluster client is
   * waited for (and connected, if `lazyConnect`) until it knows its masters. Where `CONFIG`
   * is renamed, denied or answers without the setting (managed Redis, proxies), returns `checked: false` with a warning instead of throwing: make
   * sure the policy is `noeviction` in your provider's settings. Connection errors throw `unavailable`.
   */
  async verify(): Promise<RedisVerifyResult> {
    const servers = await this.#servers();
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
            warning: joinWarnings([
              ...warnings,
              `could not read the Redis eviction policy (${message.split('\n')[0]}): if Redis evicts idempotency records, a retry runs the effect again; ${EVICTION_FIX}`,
            ])!,
          };
        }
        throw wrap(error);
      }
      policies.push(policy);
      const persistence = await persistenceWarning(server);
      if (persistence !== undefined) warnings.push(persistence);
      if (policy === 'noeviction') continue;
      if (maxmemory > 0) {
        throw new StoreError(
          'unsupported',
          `Redis maxmemory-policy is ${policy} with maxmemory ${maxmemory}: Redis may evict idempotency records under memory pressure, and a retry would then run the effect again; ${EVICTION_FIX}`,
        );
      }
      warnings.push(`Redis maxmemory-policy is ${policy}: records are safe only while maxmemory stays 0 (no limit); ${EVICTION_FIX}`);
    }
    const warning = joinWarnings(warnings);
    return { checked: true, policies, ...(warning !== undefined ? { warning } : {}) };
  }

  // reserve and complete, once per request each, are not async functions: the reply's own promise, continued
  // with one .then, is the answer (no async frames around #eval's).
  reserve(input: ReserveInput): Promise<ReserveResult> {
    if (!this.#batch) return this.#reserveAlone(input);
    return new Promise<ReserveResult>((resolve, reject) => {
      // An injected clock is read now, when the call is made, as the single call does.
      const now = this.#now();
      const args = ['r', now, input.id, input.operation, input.fingerprint, input.token, String(input.leaseMs), String(input.ttlMs)];
      this.#enqueue({
        key: this.#key(input.id),
        args,
        settle: (reply) => resolve(reserveResultOf(reply, input)),
        reject,
        // Run again after its batch, a reservation that landed is found `existing` under the call's own token,
        // which the guard takes for its own.
        alone: () => this.#reserveAlone(input, now).then(resolve, reject),
      });
    });
  }

  complete(id: string, token: string, input: CompleteInput): Promise<boolean> {
    // Encoded now, whenever the script runs, so the caller may reuse its body buffer: status, headers, body, ttlMs.
    let fields: string[];
    try {
      const r = input.response;
      fields = [String(r.status), JSON.stringify(r.headers), base64(r.body), String(input.ttlMs)];
    } catch (error) {
      return Promise.reject(error);
    }
    const resultId = input.resultId;
    if (!this.#batch) return this.#completeAlone(id, token, fields, resultId);
    return new Promise<boolean>((resolve, reject) => {
      const now = this.#now();
      const args = [resultId === undefined ? 'c' : 'C', now, id, token, ...fields];
      if (resultId !== undefined) args.push(resultId);
      const alone = (retried: boolean): void => {
        const done = this.#completeAlone(id, token, fields, resultId, now);
        // Run again after a batch whose reply was lost, a completion that landed finds its record completed: under
        // its own token (nobody else holds it), that is this call's completion, not a fenced one.
        (retried ? done.then((ok) => ok || this.#completedUnder(id, token)) : done).then(resolve, reject);
      };
      this.#enqueue({ key: this.#key(id), args, settle: (reply) => resolve(isOne(reply)), reject, alone });
    });
  }

  /** RESERVE, at `now` (the injected clock's reading when the call was made; by default read now). */
  #reserveAlone(input: ReserveInput, now?: string): Promise<ReserveResult> {
    let args: string[];
    try {
      args = [this.#key(input.id), this.#leases, now ?? this.#now(), input.id, input.operation, input.fingerprint, input.token, String(input.leaseMs), String(input.ttlMs)];
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#eval(RESERVE, 2, args).then((reply) => reserveResultOf(reply, input));
  }

  /** COMPLETE with `fields` encoded by {@link RedisStore.complete} (status, headers, body, ttlMs), at `now` as {@link RedisStore.#reserveAlone}. */
  #completeAlone(id: string, token: string, fields: readonly string[], resultId: string | undefined, now?: string): Promise<boolean> {
    const clocked = this.#clock !== undefined;
    let args: string[];
    try {
      args = [this.#key(id), this.#leases];
      if (clocked) args.push(this.#expiry);
      args.push(now ?? this.#now(), id, token, ...fields);
      if (resultId !== undefined) args.push(resultId);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#eval(COMPLETE, clocked ? 3 : 2, args).then(isOne);
  }

  /** Whether the record is completed under `token`; false when it cannot be read. */
  #completedUnder(id: string, token: string): Promise<boolean> {
    return this.get(id).then(
      (record) => record?.state === 'completed' && record.leaseToken === token,
      () => false,
    );
  }

  /**
   * One turn's calls (at most {@link MAX_BATCH_CALLS}) in one BATCH script; a call alone runs its own script. When
   * the script fails as a whole (the connection, the server refusing it, a reply of another shape) each call runs
   * on its own, as it would have without batching: a reservation the script did make is then found as `existing`
   * under the call's own token, which the guard takes for its own.
   */
  #runBatch(calls: readonly Queued[]): void {
    if (calls.length === 1) return calls[0]!.alone(false);
    const args = [this.#leases, this.#expiry];
    for (const call of calls) args.push(call.key);
    for (const call of calls) for (const arg of call.args) args.push(arg);
    this.#eval(BATCH, 2 + calls.length, args).then(
      (reply) => {
        if (!Array.isArray(reply) || reply.length !== calls.length) {
          for (const call of calls) call.alone(true);
          return;
        }
        for (let i = 0; i < calls.length; i += 1) {
          const call = calls[i]!;
          const one: unknown = reply[i];
          if (one instanceof Error) {
            // Run on its own: the same error then reaches the client as a reply of its own, where ioredis's
            // reconnectOnError follows a failover (READONLY) and resends, as it does for a call never batched.
            // Safe to run again: READONLY and OOM refuse the call's first write, so it wrote nothing; a call that
            // failed further on (a key of another type at the lease index) finds its own record, as above.
            call.alone(true);
            continue;
          }
          try {
            call.settle(one);
          } catch (error) {
            call.reject(wrap(error));
          }
        }
      },
      () => {
        for (const call of calls) call.alone(true);
      },
    );
  }

  async release(id: string, token: string): Promise<boolean> {
    return Number(await this.#eval(RELEASE, 2, [this.#key(id), this.#leases, '', id, token])) === 1;
  }

  async takeover(id: string, fingerprint: string, staleToken: string, newToken: string, leaseMs: number): Promise<IdempotencyRecord | undefined> {
    const reply = await this.#eval(TAKEOVER, 2, [this.#key(id), this.#leases, this.#now(), id, fingerprint, staleToken, newToken, String(leaseMs)]);
    return Array.isArray(reply) ? toRecord(reply as string[]) : undefined;
  }

  /**
   * Lease heartbeat: one script setting `lease_until = now + leaseMs` (server `TIME`) while the record is
   * `in_progress` under `token` (also past the lease, as long as nobody took it over).
   */
  async extend(id: string, token: string, leaseMs: number): Promise<boolean> {
    return Number(await this.#eval(EXTEND, 2, [this.#key(id), this.#leases, this.#now(), id, token, String(leaseMs)])) === 1;
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

  async listAbandoned(options: ListAbandonedOptions = {}): Promise<IdempotencyRecord[]> {
    const after = options.after;
    const cursor = after === undefined ? [] : [String(cursorLease(after)), after.id];
    const reply = (await this.#eval(ABANDONED, 1, [this.#leases, this.#now(), this.#serverRecordPrefix, String(limitOf(options)), ...cursor])) as string[][];
    return reply.map(toRecord).sort((a, b) => a.leaseUntil - b.leaseUntil || (a.id < b.id ? -1 : 1));
  }

  /**
   * Puts every `in_progress` record missing from the lease index back in it, so that
   * {@link RedisStore.listAbandoned} (and the guard's reconciliation) sees it again; answers how many it put
   * back. Run it once after upgrading every instance from a version before the `keyPrefix` fix if the
   * client had a `keyPrefix` and reconciliation ran: those versions dropped the index entries of such
   * records, which then stayed `in_progress` forever. Instances of the earlier version still running keep
   * dropping entries, so upgrade them all first.
   *
   * Walks the store's record keys with `SCAN` (on every master of a Cluster; never `KEYS`, so Redis is not
   * blocked), then one script per batch re-reads each record and adds its `lease_until` only while it is
   * still `in_progress` and not indexed (`ZADD NX`): a record completed, released, taken over or extended
   * meanwhile is left as it is. Idempotent: a second run answers 0. Records of other prefixes, and of other
   * `keyPrefix`es, are not touched. A Cluster resharding while it runs may hide records from the scan: run it
   * again afterwards.
   */
  async repairLeaseIndex(): Promise<number> {
    const servers = await this.#servers();
    const prefix = this.#serverRecordPrefix;
    const pattern = `${globEscape(prefix)}*`;
    let repaired = 0;
    for (const server of servers) {
      let cursor = '0';
      do {
        let keys: string[];
        try {
          [cursor, keys] = await server.scan(cursor, 'MATCH', pattern, 'COUNT', SCAN_COUNT);
        } catch (error) {
          throw wrap(error);
        }
        if (keys.length === 0) continue;
        const ids = keys.map((key) => key.slice(prefix.length));
        repaired += Number(await this.#eval(REPAIR, 1 + ids.length, [this.#leases, ...ids.map((id) => this.#key(id)), ...ids]));
      } while (cursor !== '0');
    }
    // Entries put back may lie below where purgeAbandoned has read to: it reads the whole index again.
    if (repaired > 0) {
      try {
        await this.#redis.del(this.#purgeCursor);
      } catch (error) {
        throw wrap(error);
      }
    }
    return repaired;
  }

  /**
   * Deletes up to `limit` expired completed records still in Redis. On the server clock a completed
   * record's Redis TTL, set from the same clock as its `expiresAt`, removes it within a millisecond or two
   * of `expiresAt`, so this only drains the expiry index that earlier versions of this store wrote for every
   * completion (entries whose record is gone are dropped, and the records they still point to deleted once
   * expired). With an injected clock, which Redis's TTL does not follow, completions are indexed and purged
   * here as on the other stores.
   */
  async purgeExpired(options: BatchOptions = {}): Promise<number> {
    return Number(await this.#eval(PURGE, 1, [this.#expiry, this.#now(), this.#serverRecordPrefix, String(limitOf(options))]));
  }

  /**
   * See {@link IdempotencyStore.purgeAbandoned}: records past their lease and TTL, those it has seen before by TTL, then
   * the others in lease order. Keeps its own index of the records it found past their lease but within their TTL, and
   * how far it has read the lease index (`{prefix}:parked`, `{prefix}:purge-cursor`), so a call reads what it deletes
   * and what is new since the last one, not every record it keeps.
   */
  async purgeAbandoned(options: BatchOptions = {}): Promise<number> {
    // Short scripts, one after the other, so Redis serves other clients between them.
    const limit = limitOf(options);
    const now = this.#now();
    let deleted = 0;
    for (;;) {
      const reply = (await this.#eval(PURGE_ABANDONED, 3, [this.#leases, this.#parked, this.#purgeCursor, now, this.#serverRecordPrefix, String(limit - deleted), String(PURGE_WINDOW)])) as number[];
      const [gone, done] = reply.map(Number) as [number, number];
      deleted += gone;
      if (deleted >= limit || done === 1) return deleted;
    }
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

  /**
   * The servers to visit one by one: the client, or every master of a Cluster. A Cluster knows its masters
   * only once connected (until then `nodes('master')` is empty, and a `lazyConnect` one never connects by
   * itself), so it waits for the Cluster to be ready first (see `clusterReady`).
   */
  async #servers(): Promise<Redis[]> {
    const redis = this.#redis;
    if (!isCluster(redis)) return [redis];
    await clusterReady(redis);
    const masters = redis.nodes('master');
    if (masters.length === 0) throw new StoreError('unavailable', 'Redis Cluster has no master connected');
    return masters;
  }

  #key(id: string): string {
    return this.#recordPrefix + id;
  }

  /** ARGV[1] of a script that reads the time: the injected clock's reading, or '' for the server's `TIME`. */
  #now(): string {
    const clock = this.#clock;
    return clock === undefined ? '' : String(clock());
  }

  /**
   * EVALSHA, loading the script with EVAL the first time the server does not know it. `args` holds the
   * `numKeys` keys, then ARGV.
   */
  #eval(script: Script, numKeys: number, args: string[]): Promise<unknown> {
    const redis = this.#redis;
    let sent: Promise<unknown>;
    try {
      sent = redis.evalsha(script.sha, numKeys, args);
    } catch (error) {
      return Promise.reject(wrap(error));
    }
    return sent.then(undefined, (error: unknown) => {
      if (!String((error as Error | null)?.message).startsWith('NOSCRIPT')) throw wrap(error);
      let loaded: Promise<unknown>;
      try {
        loaded = redis.eval(script.text, numKeys, args);
      } catch (failure) {
        throw wrap(failure);
      }
      return loaded.then(undefined, (failure: unknown) => {
        throw wrap(failure);
      });
    });
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

/**
 * A warning when the server loses acknowledged records on a restart or crash: AOF off (snapshots at best), or AOF
 * left for the OS to flush. None when the settings are safe or cannot be read (the eviction check says what it can).
 */
async function persistenceWarning(server: Pick<Redis, 'config'>): Promise<string | undefined> {
  try {
    const appendonly = configValue(await server.config('GET', 'appendonly'), 'appendonly');
    if (appendonly !== 'yes') {
      return `Redis appendonly is ${appendonly}: a restart or crash of Redis loses the reservations and completions written since its last snapshot (if any), and a retry of a lost key runs the effect again; ${PERSISTENCE_FIX}`;
    }
    if (configValue(await server.config('GET', 'appendfsync'), 'appendfsync') === 'no') {
      return `Redis appendfsync is no: the OS writes the append-only file to disk when it likes (about every 30 s), so a crash of the machine loses the records of that window, and a retry of a lost key runs the effect again; ${PERSISTENCE_FIX}`;
    }
  } catch {
    // Unknown: managed services often refuse CONFIG; their persistence is a setting of the service.
  }
  return undefined;
}

/** The warnings of several servers (a Cluster's masters) as one, each said once. */
function joinWarnings(warnings: readonly string[]): string | undefined {
  return warnings.length === 0 ? undefined : [...new Set(warnings)].join('; ');
}

const PERSISTENCE_FIX = 'set appendonly yes with appendfsync everysec (can lose the last second or two on a crash) or always (loses nothing, one disk sync per write)';

function configValue(reply: unknown, name: string): string {
  if (Array.isArray(reply)) {
    for (let i = 0; i + 1 < reply.length; i += 2) if (String(reply[i]).toLowerCase() === name) return String(reply[i + 1]);
  } else if (reply !== null && typeof reply === 'object' && name in reply) {
    return String((reply as Record<string, unknown>)[name]);
  }
  throw new StoreError('unsupported', `Redis CONFIG GET ${name} gave no value`);
}

/** `text` as a literal in a `SCAN MATCH` glob (a client's `keyPrefix` may hold `*`, `?`, `[`, `]` or a backslash). */
function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

/** A Lua script and its SHA-1, the name EVALSHA runs it by. */
interface Script {
  readonly text: string;
  readonly sha: string;
}

function script(text: string): Script {
  return { text, sha: createHash('sha1').update(text).digest('hex') };
}

/** A reservation's reply: the time it reserved at (an integer, or a string with ioredis's `stringNumbers`), or {time, the existing record's fields}. */
function reserveResultOf(reply: unknown, input: ReserveInput): ReserveResult {
  if (!Array.isArray(reply)) {
    const now = Number(reply);
    return { outcome: 'reserved', now, record: reservedRecord(input, now) };
  }
  const [now, fields] = reply as [string, string[]];
  return { outcome: 'existing', now: Number(now), record: toRecord(fields) };
}

/** Whether a script answered 1 (a number, or a string with ioredis's `stringNumbers`). */
function isOne(reply: unknown): boolean {
  return Number(reply) === 1;
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

/** How long {@link RedisStore.verify}, `migrate` and `repairLeaseIndex` wait for a Cluster client to be ready. */
const CLUSTER_READY_MS = 10_000;

/**
 * Waits until a Cluster client is ready (connecting a `lazyConnect` one): its masters are known only then. Bounded:
 * with ioredis's default retry strategy a Cluster that cannot be reached never fails its queued commands, and with
 * `enableOfflineQueue: false` a command fails at once, so this waits for the client's own `ready`, not a command.
 */
function clusterReady(redis: Cluster): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  if (redis.status === 'end') return Promise.reject(new StoreError('unavailable', 'the Redis Cluster client was disconnected (quit or disconnect)'));
  // Concurrent callers share one wait (one pair of listeners per client).
  const pending = clusterWaits.get(redis);
  if (pending !== undefined) return pending;
  const wait = new Promise<void>((resolve, reject) => {
    const done = (error?: Error): void => {
      clearTimeout(timer);
      redis.off('ready', onReady);
      redis.off('end', onEnd);
      if (error === undefined) resolve();
      else reject(error);
    };
    const onReady = (): void => done();
    const onEnd = (): void => done(new StoreError('unavailable', 'the Redis Cluster connection ended before it was ready'));
    const timer = setTimeout(() => done(new StoreError('unavailable', `the Redis Cluster was not ready within ${CLUSTER_READY_MS / 1000} s (status ${redis.status}): check its startup nodes`)), CLUSTER_READY_MS);
    redis.once('ready', onReady);
    redis.once('end', onEnd);
    if (redis.status === 'wait') redis.connect().catch((error: unknown) => done(wrap(error)));
  }).finally(() => clusterWaits.delete(redis));
  clusterWaits.set(redis, wait);
  return wait;
}

const clusterWaits = new WeakMap<Cluster, Promise<void>>();
