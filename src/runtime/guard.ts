/**
 * The framework-agnostic idempotency guard (DESIGN §4 steps 1–8). Framework adapters turn a request
 * into a {@link GuardRequest}, call {@link Guard.begin}, run the handler when told to proceed, and report
 * what the handler really sent with {@link Guard.complete} (or {@link Guard.abort} when it threw).
 * {@link Guard.handle} does all of it for handlers that return a response, and runs one-transaction mode.
 *
 * Needs `contract.ts`, `key.ts`, `fingerprint.ts`, `problem.ts`, `result-id.ts`, `store.ts`, `wire.ts` and one `stores/*.ts`; Node
 * built-ins only. Copied into users' generated code.
 */
import { randomUUID } from 'node:crypto';
import type { CompiledContract } from './contract.js';
import { fingerprintFor, parseJsonPointer, recordIdFor, resolveJsonPointer, type QueryValue } from './fingerprint.js';
import { compileKeyPattern, parseFieldKey, parseIdempotencyKey, type ParsedKey } from './key.js';
import { resultIdOf as idInBody } from './result-id.js';
import { decodeCodings } from './content-coding.js';
import { DEFAULT_REPLAY_HEADERS, isRepeatableRequestsKey } from './wire.js';
import { HEADER_NAME, problemResponse as problemDetails, type ProblemName, type ProblemRenderer, type ProblemResponse } from './problem.js';
import {
  StoreError,
  isHandlerGivenUp,
  isTransactionalStore,
  type CompleteInput,
  type IdempotencyRecord,
  type IdempotencyStore,
  type ReserveInput,
  type ReserveResult,
  type StoredResponse,
} from './store.js';

/** The parts of a request the guard reads. Build one per request in the framework adapter. */
export interface GuardRequest {
  readonly pathParams: Readonly<Record<string, string>>;
  readonly query: Readonly<Record<string, string | readonly string[] | undefined>>;
  /** Lower-case header names; repeated headers as arrays. */
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  /** Parsed JSON body (undefined when none). */
  readonly body: unknown;
  /** From the user's principal hook (security scheme → owner id): a string, a finite number or a bigint. */
  readonly principal?: string | number | bigint;
  /** The delivery's request id (e.g. `X-Request-Id`), for logs only. */
  readonly requestId?: string;
  /**
   * Whether the client has gone away (its connection closed): a duplicate waiting for the first request
   * (`waitInProgressMs`) stops waiting then — it polled the store for nobody, and a reservation freed meanwhile would
   * have run the handler for nobody. The adapters set it when the guard waits.
   */
  readonly clientGone?: () => boolean;
}

/** A response: what the guard answers, or what the handler sent. Header names lower-case. */
export interface GuardResponse {
  status: number;
  headers: Record<string, string>;
  body: Uint8Array;
}

/**
 * The right to run the effect once. `guarded: false` when the request carried no key and the contract
 * does not require one, or when the store failed and `failOpen` let the request through: then
 * `complete` and `abort` do nothing.
 */
export interface Reservation {
  readonly guarded: boolean;
  readonly operation: string;
  /** Record id (hex SHA-256 of scope, operation and key); undefined when not guarded. */
  readonly recordId: string | undefined;
  /** Lease token that fences completion and release; undefined when not guarded. */
  readonly token: string | undefined;
  readonly requestId: string | undefined;
}

/** What {@link Guard.begin} decided. */
export type Decision =
  /** 400 / 409 / 412 / 422 / 503 / a replay (`replayed`): send `response` as is, do not run the handler. */
  | { readonly kind: 'respond'; readonly response: GuardResponse; readonly replayed?: true }
  /**
   * Run the handler, add `headers` (`idempotent-replayed: false` unless the contract sends the flag on replays
   * only, and `repeatability-result: accepted` for an OASIS contract) to its response, then call complete/abort.
   * `headers` is shared by every request of the guard: read it, never change it.
   */
  | {
      readonly kind: 'proceed';
      readonly reservation: Reservation;
      readonly headers: Readonly<Record<string, string>>;
      /** The canonical (unquoted) key, e.g. to forward to a provider; undefined when unguarded. Never log or store it. */
      readonly idempotencyKey?: string | undefined;
    };

/** What a handler run through {@link Guard.handle} gets. */
export interface HandlerContext<Tx = unknown> {
  readonly reservation: Reservation;
  /**
   * One-transaction mode: the transaction the key was reserved in (a `pg` `PoolClient`, a better-sqlite3
   * `Database`). Write the business rows through it. Undefined otherwise, and for unguarded requests.
   */
  readonly tx: Tx | undefined;
  /**
   * The canonical (unquoted) idempotency key as the client sent it. Never log or store it. It is not scoped: forwarded
   * to a provider whose keys your callers share (one payment account), two owners' equal keys meet there — forward
   * `reservation.recordId` (the key hashed with its scope and operation) unless the provider's keys are per caller.
   */
  readonly idempotencyKey: string | undefined;
}

/** What the reconciliation hook learns about an abandoned reservation. */
export interface AbandonedReservation {
  readonly operation: string;
  readonly recordId: string;
  /** The canonical key, to look the effect up at a provider that was given it. Never log or store it. */
  readonly idempotencyKey: string;
  readonly request: GuardRequest;
  /** Store-clock ms when the abandoned owner reserved. */
  readonly createdAt: number;
  /** Store-clock ms when its lease ran out. */
  readonly leaseUntil: number;
  /**
   * The abandoned owner's lease token, as the record holds it (`store.get(recordId)`): what a hook that settles the
   * record itself (`store.complete(recordId, leaseToken, …)`, `store.release`) fences on, and how it tells this owner
   * from a later one.
   */
  readonly leaseToken: string;
  /**
   * Aborted when the guard stops waiting for this call (`reconcileTimeoutMs`): pass it on to the provider lookup
   * (`fetch(url, { signal })`) so a call that hangs does not outlive its bound. Never aborted under `Infinity`.
   */
  readonly signal: AbortSignal;
}

/**
 * The reconciliation hook's verdict on an abandoned reservation:
 * `completed` — the effect happened, here is its terminal result (recorded, then replayed);
 * `not-happened` — the effect did not happen and **can no longer happen** (the owner is gone, or whatever would
 *   carry the effect out was cancelled): this request takes the reservation over and runs. "Not yet" is
 *   `unknown` — a slow owner may still be running. `createdAt` / `leaseUntil` tell how long it has been;
 *   with a store that has `extend`, a live owner's lease is renewed — but by a timer of its app's event loop, so a
 *   synchronous stall or a store outage of a good part of the lease lets it lapse under a live owner: a lapsed lease
 *   is no proof the owner stopped, and `not-happened` wants evidence that does not depend on time.
 *   For a local effect (`effect.external: false`) the lease also ends as soon as the handler answered a
 *   non-transient 5xx or threw: its request is over, so the record is reconciled at once (the effect's own
 *   data tells whether it happened). An external effect's lease runs its course: work handed to a provider
 *   may still act after the handler gave up;
 * `unknown` — keep the record, answer 409 `idempotency-request-abandoned`.
 */
export type ReconcileVerdict =
  | { readonly outcome: 'completed'; readonly response: GuardResponse; readonly resultId?: string }
  | { readonly outcome: 'not-happened' }
  | { readonly outcome: 'unknown' };

/** Called for an `in_progress` record past its lease. Without a hook the guard keeps the record (never deletes). */
export type ReconcileHook = (abandoned: AbandonedReservation) => Promise<ReconcileVerdict> | ReconcileVerdict;

/** The guard's decision names, as logged. */
export type GuardDecisionName =
  | 'unguarded'
  | 'missing-key'
  | 'invalid-key'
  | 'scope-unresolved'
  | 'reserved'
  | 'mismatch'
  | 'replay'
  | 'in-progress'
  | 'abandoned'
  | 'reconciled'
  | 'taken-over'
  | 'store-unavailable'
  | 'outcome-unknown'
  | 'expired'
  | 'fail-open'
  | 'completed'
  | 'released'
  | 'kept'
  | 'fenced'
  | 'record-lost'
  | 'rolled-back'
  | 'record-failed'
  /**
   * The reconcile hook gave no usable verdict (see {@link GuardLogEvent.reason}): the record is kept and the request
   * answered 409 abandoned, as for `unknown`.
   */
  | 'reconcile-failed'
  /** `status`: no record of the key (404). */
  | 'not-found';

/** One structured log event. Safe fields only: no raw key, headers, payload or response body. */
export interface GuardLogEvent {
  /** ISO 8601 time from the guard's clock. */
  readonly time: string;
  readonly operation: string;
  readonly requestId?: string;
  /** Hashed key id: the record id (SHA-256 of scope, operation and key). */
  readonly keyId?: string;
  readonly decision: GuardDecisionName;
  /** Record state the decision was taken on. */
  readonly state?: 'absent' | 'in_progress' | 'completed';
  readonly resultId?: string;
  /** HTTP status the guard answered or recorded. */
  readonly status?: number;
  /**
   * `status`: the status route's read by key (`Guard.status`), not a request of the operation — a `replay`,
   * `in-progress` or `abandoned` so marked ran and refused nothing.
   */
  readonly via?: 'status';
  /**
   * On `store-unavailable`, `outcome-unknown` and `fail-open`: what the store said, as its error's kind and code only —
   * `unavailable 25006` (PostgreSQL's SQLSTATE: a read-only server), `unavailable SQLITE_BUSY`, `unavailable READONLY`
   * (Redis), `unavailable timeout` (no answer within `storeTimeoutMs`) — never a message, which may quote data. A
   * permanent misconfiguration then reads apart from an outage.
   */
  readonly storeError?: string;
  /**
   * On `reconcile-failed`: `threw` (the hook threw or rejected; its error is not logged, it may quote data), `timeout`
   * (no verdict within `reconcileTimeoutMs`), `invalid-verdict` (a `completed` verdict whose `response` is no
   * `{status: 200-599, headers: {name: string}, body: Uint8Array}`, or whose `resultId` is no string). On
   * `record-failed`: `gave-up` when the completion retried behind an answer did not land within the lease, or a late
   * reservation's release did not within the record's TTL; `unverified` when a completion was refused and the store
   * could not be read to tell why; `untracked` when a reservation the guard gave up on is not released in the background:
   * `lateReleaseLimit` tokens are held already (if it did land, its key goes to reconciliation once the lease has passed).
   * On `rolled-back`: `gave-up` when the adapter gave the handler up (the one-transaction bound, or a streamed answer
   * whose client left) and the guard answered 503 outcome-unknown in its place.
   */
  readonly reason?: 'threw' | 'timeout' | 'invalid-verdict' | 'gave-up' | 'unverified' | 'untracked';
}

/** Guard configuration. Only `store` is required. */
export interface GuardOptions {
  readonly store: IdempotencyStore;
  /**
   * The guard's wall clock in ms (default `Date.now`): log times, the in-progress wait and the age of an OASIS
   * `Repeatability-First-Sent`. Lease maths uses the store clock.
   */
  readonly now?: (() => number) | undefined;
  /** Structured log sink; gets safe fields only. Exceptions it throws are ignored. */
  readonly log?: ((event: GuardLogEvent) => void) | undefined;
  /** Reconciliation hook for abandoned reservations (default: keep, answer 409 abandoned). */
  readonly reconcile?: ReconcileHook | undefined;
  /**
   * Longest wait (ms) for the reconcile hook's verdict (default 5000). A hook still running then — a provider that does
   * not answer — counts as `unknown`: the request gets 409 abandoned and `reconcile-failed` (`timeout`) is logged, so a
   * hung lookup never holds every retry of the key. A verdict that comes later is ignored; the next retry asks again.
   */
  readonly reconcileTimeoutMs?: number | undefined;
  /** Longest wait for any one store call before failing closed with 503 (default 2000 ms). */
  readonly storeTimeoutMs?: number | undefined;
  /** `Retry-After` seconds on a 503 `idempotency-store-unavailable` (default 1). */
  readonly storeRetryAfterSeconds?: number | undefined;
  /**
   * Explicit opt-in: when the store fails, run the handler unguarded instead of answering 503. A retry
   * during an outage can then run the effect twice. Default false (fail closed). Never in one-transaction
   * mode: a reservation that failed or did not arrive in time there may have been waiting for a duplicate's
   * open transaction on the same key, so it answers 503.
   */
  readonly failOpen?: boolean | undefined;
  /**
   * Response headers recorded and replayed (case-insensitive). Default: content-type, content-language,
   * content-disposition, location, content-location, operation-location, azure-asyncoperation, etag,
   * last-modified, content-range, www-authenticate, allow, cache-control. `set-cookie`, `set-cookie2`, `cookie`, `authorization`, `proxy-authorization`,
   * `authentication-info` and `proxy-authentication-info` are refused (`createGuard` throws), and so are the message's
   * framing and hop-by-hop headers (`content-length`, `transfer-encoding`, `connection`, `keep-alive`, `proxy-connection`,
   * `te`, `trailer`, `upgrade`) and `date`: a replay is framed and dated afresh by the server that sends it (a recorded
   * length of a body the adapter decoded would desynchronise the connection). A body the adapter could not decode is
   * recorded with its `content-encoding` whatever this says.
   */
  readonly replayHeaders?: readonly string[] | undefined;
  /**
   * Result id of a response, for the record and logs. Default: the JSON body's `id`, or that of the resource it
   * wraps (`{data: {id}}`, `{payment: {id}, links: {…}}`).
   */
  readonly resultId?: ((body: unknown, response: GuardResponse) => string | undefined) | undefined;
  /**
   * Writes the guard's own answers (400, 409, 412, 422, 503) in the API's error format instead of RFC 9457 problem
   * details, for clients and SDKs that read their own error body. Status and headers stay the guard's; a
   * renderer that throws or returns nothing leaves the problem details. Default: problem details.
   */
  readonly renderProblem?: ProblemRenderer | undefined;
  /** Optional bounded wait (ms) for an in-progress duplicate to complete before answering 409 (default 0). */
  readonly waitInProgressMs?: number | undefined;
  /** Poll interval of that wait (default 50 ms). */
  readonly pollIntervalMs?: number | undefined;
  /**
   * One-transaction mode: how long a duplicate may wait on the row lock of a transaction holding the same
   * key before answering 409 in progress (default: the contract's lease).
   */
  readonly transactionWaitMs?: number | undefined;
  /**
   * With a store that has `extend`: the longest time a running handler's lease is renewed (every lease/3),
   * so a hung handler still ends in reconciliation. Default: the contract's TTL.
   */
  readonly leaseRenewalMaxMs?: number | undefined;
  /**
   * Most lease tokens of reservations the guard gave up on (a store call that failed or did not answer in time, which
   * may still have made its record) that it keeps releasing in the background (default 50,000; `Infinity` for no
   * bound). Each costs about 170 bytes, and each record they are for about 2 kB, until the store can be read again and
   * the call's lease has passed — up to the record's TTL — so an outage's failed requests would otherwise grow the heap
   * without bound (a million 503s for distinct keys: 2 GB). One past the bound is logged `record-failed` (`untracked`): if its
   * reservation did land, the key answers 409 abandoned once the lease has passed, and goes to reconciliation. A call
   * that has not answered yet is counted only once it answers: the driver holds it meanwhile too, until its own timeout
   * (ioredis `commandTimeout`/`socketTimeout`, pg `query_timeout`), which bounds those.
   */
  readonly lateReleaseLimit?: number | undefined;
}

/** What {@link Guard.abort} is told about a request whose handler's answer is not recorded. */
export interface AbortInfo {
  /** The effect was rolled back with the reservation's transaction: the key is released. */
  readonly rolledBack: boolean;
  /** The handler may still be running: its lease is renewed on (up to `leaseRenewalMaxMs`) instead of ending now. */
  readonly handlerRunning?: boolean;
  readonly error?: unknown;
}

/** Options of {@link Guard.handle}. */
export interface HandleOptions {
  /** Reserve, run the handler and record `completed` in one database transaction (PostgreSQL, SQLite). */
  readonly transaction?: boolean;
}

/** A guard for one operation. */
export interface Guard<Tx = unknown> {
  /** Parse the key, derive the record, reserve it and classify an existing one. Never runs user code but the reconcile hook. */
  begin(req: GuardRequest): Promise<Decision>;
  /**
   * Record what the handler really sent (status, allow-listed headers, byte-exact body); transient
   * statuses release; a 5xx keeps the reservation for reconciliation; fenced by the lease token.
   * Never throws: a store failure is logged and the record stays `in_progress`.
   */
  complete(reservation: Reservation, sent: GuardResponse): Promise<void>;
  /**
   * Handler threw / 5xx with a possibly-happened effect: keep for reconciliation unless `rolledBack`. A kept
   * local effect's lease ends at once, unless `handlerRunning` says the handler may still be at work (another
   * middleware answered over it): then it is renewed on, as a running handler's, up to `leaseRenewalMaxMs`. Never throws.
   */
  abort(reservation: Reservation, info: AbortInfo): Promise<void>;
  /**
   * begin → handler → complete/abort, for handlers that return a response; the answer carries the replay
   * header (on a first answer only when the contract sends it there). With `{ transaction: true }` the store must be
   * transactional, and a contract {@link transactionRefusal} refuses rejects with a `TypeError` before anything is
   * reserved. A thrown handler error propagates.
   */
  handle(req: GuardRequest, handler: (ctx: HandlerContext<Tx>) => Promise<GuardResponse>, opts?: HandleOptions): Promise<GuardResponse>;
  /**
   * The answer to a request the guard refuses whatever its body holds — a missing or invalid key in a header or the
   * query, a scope the request cannot resolve — given the request without its body; `undefined` when the key is in the
   * body, or nothing is refused. An adapter that reads the whole body itself asks first, so a request it would refuse
   * is answered before its body is read, decompressed or parsed. Never touches the store.
   */
  refuse(req: GuardRequest): GuardResponse | undefined;
  /**
   * The status route's answer for a request that carries this operation's key (in the same header, or the same
   * query parameter), after an unknown outcome: the record of that key in the request's scope (principal, scope
   * headers and parameters read from this request), never the handler. `completed` → the stored answer replayed
   * (replay header `true`); in progress → 409 in progress + `Retry-After`; past its lease → 409 abandoned (the
   * reconcile hook is not run: a read changes nothing); no record → 404 `idempotency-key-unknown` (none reached the
   * guard, or it outlived the TTL; a one-transaction request still running is not committed, so not seen either); an
   * invalid key or unresolved scope → 400; the store down → 503. `undefined` when the request carries no key, the key
   * travels in the body, or the scope has no `principal` (a key alone is no credential): the route's own handler answers.
   */
  status(req: GuardRequest): Promise<GuardResponse | undefined>;
  /**
   * The id of the record a request's key maps to — what the logs call `keyId` and the store's methods take — from the
   * key and the scope as the guard reads them (principal, scope headers and parameters). An operator who has a key (a
   * customer's support ticket, a client's log) finds its record with it: `guard.recordId({ headers: { 'idempotency-key':
   * key }, principal: 'acct_1', pathParams: {}, query: {}, body: undefined })`, then `store.get(id)`. `undefined` when
   * the request carries no valid key or its scope cannot be resolved. Touches neither the store nor the log.
   */
  recordId(req: GuardRequest): string | undefined;
}

export { DEFAULT_REPLAY_HEADERS } from './wire.js';

// One strict decoder for every request (it keeps no state between whole-buffer decode() calls).
// ignoreBOM spelled out (false is the default): Cloudflare's workers-types declare both options required.
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/** Headers that carry credentials or session state: refused in `replayHeaders`. */
const NEVER_REPLAYED: readonly string[] = ['set-cookie', 'set-cookie2', 'cookie', 'authorization', 'proxy-authorization', 'authentication-info', 'proxy-authentication-info'];

/**
 * Headers of one message on one connection — its framing, hop-by-hop fields (RFC 9110 §7.6.1) and its date: refused in
 * `replayHeaders`. The server that sends a replay frames and dates it; a recorded `Content-Length` of a body the
 * adapter decoded (gzip) would announce more bytes than the replay has, and the next request on the connection would be
 * read as the rest of this answer.
 */
const PER_MESSAGE: readonly string[] = ['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade', 'date'];
/** What a replay never carries from a record: a message's own headers, and credentials. */
const NOT_FROM_RECORD: ReadonlySet<string> = new Set([...PER_MESSAGE, ...NEVER_REPLAYED]);

/** `Cache-Control` of a status-route replay. */
const NO_STORE: Readonly<Record<string, string>> = Object.freeze({ 'cache-control': 'no-store' });

/** The fingerprinted query of an operation that declares no query parameters: never written to. */
const NO_QUERY: Readonly<Record<string, QueryValue>> = Object.freeze(Object.create(null) as Record<string, QueryValue>);

type Prepared =
  | { readonly kind: 'respond'; readonly response: GuardResponse }
  | { readonly kind: 'unguarded' }
  | { readonly kind: 'ready'; readonly recordId: string; readonly fingerprint: string; readonly key: string };

type Respond = Extract<Decision, { kind: 'respond' }>;

/**
 * A record's headers without those of one message ({@link PER_MESSAGE}) and credentials ({@link NEVER_REPLAYED}): the
 * guard never records them, but a record settled by hand (`store.complete` with a provider's answer copied whole, its
 * session cookie too) may hold them. The same object when none.
 */
function replayable(headers: Readonly<Record<string, string>>): Readonly<Record<string, string>> {
  let kept: Record<string, string> | undefined;
  for (const name in headers) {
    if (!NOT_FROM_RECORD.has(name.toLowerCase())) continue;
    kept ??= { ...headers };
    delete kept[name];
  }
  return kept ?? headers;
}

/** `scopeOf`'s quiet refusal: a scope part the request does not carry. Never sent. */
const UNRESOLVED: Extract<Prepared, { kind: 'respond' }> = Object.freeze({ kind: 'respond', response: { status: 400, headers: {}, body: new Uint8Array(0) } });

/**
 * A running handler's lease heartbeat: renewed from `next` on, until `until` — both on the monotonic clock
 * (`performance.now()`), never the guard's `now`: a frozen test clock or a wall clock stepped back must not
 * stop renewals while the store's clock runs on.
 */
interface Renewal {
  readonly recordId: string;
  next: number;
  readonly until: number;
}

/** A store call the guard bounds in time (`performance.now()` deadline). */
interface Waiting {
  readonly deadline: number;
  settled: boolean;
  readonly reject: (error: unknown) => void;
}

type Begun =
  | Respond
  | { readonly kind: 'proceed'; readonly reservation: Reservation; readonly headers: Readonly<Record<string, string>>; readonly idempotencyKey: string | undefined };

/**
 * Why one-transaction mode cannot keep `contract`'s promise on `store`, or `undefined` when it can. The store must
 * have transactions (SQLite, PostgreSQL). Its reservation commits with the business writes, so a commit that
 * fails after the handler ran (or a 5xx, or a thrown handler) rolls the reservation back and a retry runs the
 * handler again: harmless for writes that rolled back with it, a second call for an external effect whose
 * provider cannot tell a repeat (`effect.providerKey: none`). The adapters ask when the route is declared.
 */
export function transactionRefusal(contract: CompiledContract, store: IdempotencyStore): string | undefined {
  if (contract.effect.external && contract.effect.providerKey === 'none') {
    return (
      `one-transaction mode cannot guard ${contract.operationId}: its effect is external with no provider key (effect.providerKey: none), ` +
      'and a commit that fails after the handler ran would roll the reservation back, so a retry would call the provider again. ' +
      'Use the plain guard (its reservation commits before the handler runs), or forward a key to the provider (effect.providerKey: forward)'
    );
  }
  if (isTransactionalStore(store)) return undefined;
  const name = (store as { constructor?: { name?: unknown } }).constructor?.name;
  return (
    `one-transaction mode cannot guard ${contract.operationId}: it needs a store with transactions (SqliteStore or PostgresStore), ` +
    `and ${typeof name === 'string' && name !== '' && name !== 'Object' ? name : 'this store'} has none. Use the plain guard, or a transactional store`
  );
}

/**
 * Whether a reservation answered `existing` found the caller's own record: the store ran the call twice (a client
 * that resent the unanswered command after a reconnect, as ioredis does) and the second run found what the first
 * wrote under this call's fresh token.
 */
function ownReservation(result: ReserveResult, token: string): boolean {
  return result.record.state === 'in_progress' && result.record.leaseToken === token;
}

/** What `classify` does when a record it saw is gone, instead of reserving again (plain mode): one-transaction mode answers. */
type Vanished = () => Promise<Begun>;

/** The store methods the guard calls. */
const GUARD_STORE_CALLS = ['reserve', 'complete', 'release', 'takeover', 'extend', 'get', 'now', 'withReservation'] as const;

/**
 * The store as the guard calls it: a method that throws instead of returning a rejected promise (a custom
 * store written without `async`) rejects instead, so every call site — reservation, completion, release,
 * reconciliation, lease renewal — treats it as the unavailable store it is (503 + Retry-After, or fail-open
 * where allowed), never as a 500. A plain object of getters, not a copy or a child of the store: each read
 * sees the store's member as it is then (an optional method added later is found; a frozen store is fine),
 * and each call runs the method on the store itself.
 */
function rejectingCalls<S extends IdempotencyStore>(store: S): S {
  const methods = store as unknown as Record<string, unknown>;
  const calls: Record<string, unknown> = {};
  for (const name of GUARD_STORE_CALLS) {
    const call = (...args: unknown[]): unknown => {
      try {
        return (methods[name] as (...a: unknown[]) => unknown).apply(store, args);
      } catch (error) {
        return Promise.reject(error);
      }
    };
    Object.defineProperty(calls, name, { get: () => (typeof methods[name] === 'function' ? call : methods[name]) });
  }
  return calls as S;
}

/**
 * Build the guard of one operation. Throws `SyntaxError` up front when the contract's key pattern is not a
 * valid RegExp or a fingerprint pointer is not a JSON Pointer, so a bad contract fails at start-up, not per request.
 */
export function createGuard<Tx = unknown>(contract: CompiledContract, options: GuardOptions): Guard<Tx> {
  const store = rejectingCalls(options.store);
  const clock = options.now ?? Date.now;
  const storeTimeoutMs = durationOption('storeTimeoutMs', options.storeTimeoutMs, 2000, false);
  const reconcileTimeoutMs = durationOption('reconcileTimeoutMs', options.reconcileTimeoutMs, DEFAULT_RECONCILE_TIMEOUT_MS, true);
  const lateReleaseLimit = countOption('lateReleaseLimit', options.lateReleaseLimit, DEFAULT_LATE_RELEASE_LIMIT);
  const storeRetryAfter = String(Math.max(1, Math.ceil(options.storeRetryAfterSeconds ?? 1)));
  const replayAllow = new Set((options.replayHeaders ?? DEFAULT_REPLAY_HEADERS).map((h) => h.toLowerCase()));
  for (const name of NEVER_REPLAYED) {
    // A replay goes to whoever retries with the key: recorded credentials would be handed to them.
    if (replayAllow.has(name)) throw new TypeError(`replayHeaders must not include ${name}: credentials are never recorded or replayed`);
  }
  for (const name of PER_MESSAGE) {
    if (replayAllow.has(name)) {
      throw new TypeError(`replayHeaders must not include ${name}: it belongs to one message on one connection, and the server that sends a replay frames and dates it itself`);
    }
  }
  // Lower case when the key travels in a header; undefined for a query or body key.
  const keyHeader = contract.key.in === 'header' ? contract.key.name.toLowerCase() : undefined;
  // A handler that echoes the key would have it stored in the clear.
  if (keyHeader !== undefined && replayAllow.has(keyHeader)) {
    throw new TypeError(`replayHeaders must not include ${keyHeader}, the key header: the raw key is never stored`);
  }
  const keyTokens = contract.key.in === 'body' ? parseJsonPointer(contract.key.name) : undefined;
  /** Where the key travels, for messages: `the Idempotency-Key header`, `the requestId query parameter`. */
  const keyPlace =
    contract.key.in === 'header' ? `the ${contract.key.name} header` : contract.key.in === 'query' ? `the ${contract.key.name} query parameter` : `the body field ${contract.key.name}`;
  const replayHeader = contract.responses.replayHeader.toLowerCase();
  // OASIS Repeatable Requests (Azure's `Repeatability-Request-ID`): answers say `Repeatability-Result`, and a
  // `Repeatability-First-Sent` older than the records kept (the TTL) is refused with 412 instead of run again.
  const repeatable = keyHeader !== undefined && isRepeatableRequestsKey(keyHeader);
  const acceptedHeaders: Record<string, string> = repeatable ? { [REPEATABILITY_RESULT]: 'accepted' } : {};
  replayAllow.delete(replayHeader);
  // The headers the guard adds to the handler's own (first) answer: the replay flag set to `false`, unless the
  // contract sends the flag on replays only (`responses.replay.sendOnFirst: false`). One object, never mutated.
  const firstHeaders: Readonly<Record<string, string>> = Object.freeze(
    contract.responses.replayOnFirst === false ? { ...acceptedHeaders } : { ...acceptedHeaders, [replayHeader]: 'false' },
  );
  const keyRules = { maxLength: contract.key.maxLength, pattern: compileKeyPattern(contract.key.pattern) };
  for (const pointer of [...(contract.fingerprint.include === 'all' ? [] : contract.fingerprint.include), ...contract.fingerprint.exclude]) {
    parseJsonPointer(pointer);
  }
  // DESIGN §4.6: a 5xx never releases a key whose effect may have happened. The compiler already defaults an
  // external effect's list to [429] (a provider that answered 503 may have acted); a written list is kept.
  const transient = new Set(contract.transient);
  const waitMs = options.waitInProgressMs ?? 0;
  const pollMs = Math.max(1, options.pollIntervalMs ?? 50);
  const txWaitMs = options.transactionWaitMs ?? contract.leaseMs;
  const operation = contract.operationId;
  const recordIdOf = recordIdFor(operation);
  const fingerprintOf = fingerprintFor(operation, contract.fingerprint);
  const scopedByPrincipal = contract.scope.some((part) => part.kind === 'principal');
  const fingerprintQuery = contract.fingerprint.query;
  const fingerprintAllQuery = contract.fingerprint.queryAll === true;
  const queryLeftOut = new Set(contract.fingerprint.queryExclude ?? []);
  const R = contract.responses;
  // Lease heartbeats of running handlers (stores with the optional `extend` only), by lease token. One shared
  // ticker renews every lease that is a third through, instead of an interval timer per request.
  const renewals = new Map<string, Renewal>();
  const renewEveryMs = Math.max(1, Math.floor(contract.leaseMs / 3));
  // Ticks at a quarter of the renewal period: a lease is renewed at most 5/12 of the way through, whatever
  // the phase, leaving more than half of it to absorb a renewal that fails.
  const renewTickMs = Math.max(1, Math.floor(renewEveryMs / 4));
  let renewTicker: ReturnType<typeof setInterval> | undefined;

  function renewDue(): void {
    if (renewals.size === 0) {
      clearInterval(renewTicker);
      renewTicker = undefined;
      return;
    }
    const now = performance.now();
    const extend = store.extend!;
    for (const [token, renewal] of renewals) {
      if (now >= renewal.until) {
        renewals.delete(token);
        continue;
      }
      if (now < renewal.next) continue;
      // Every period sends a fresh renewal, even while an earlier one hangs (each is bounded by
      // storeTimeoutMs): one stuck call must not let the lease lapse under a running handler.
      renewal.next = now + renewEveryMs;
      const call = extend.call(store, renewal.recordId, token, contract.leaseMs);
      bounded(call).then(
        (extended) => {
          // Completed, released or taken over: nothing left to renew.
          if (!extended) renewals.delete(token);
        },
        // A failed renewal is retried on the next beat; the lease still bounds an owner that is really gone.
        (): undefined => undefined,
      );
      trackHeartbeat(token, call);
    }
  }

  /** Lease heartbeat while the handler of a reservation runs (stores with the optional `extend` only). */
  function startRenewal(recordId: string, token: string): void {
    if (typeof store.extend !== 'function') return;
    const now = performance.now();
    renewals.set(token, { recordId, next: now + renewEveryMs, until: now + (options.leaseRenewalMaxMs ?? contract.ttlMs) });
    if (renewTicker === undefined) {
      renewTicker = setInterval(renewDue, renewTickMs);
      // The heartbeat never keeps a process alive on its own.
      unrefTimer(renewTicker);
    }
  }

  // Heartbeats sent and not yet landed, by lease token, however long they take (not only within their time
  // bound): ending a lease waits for them, or one landing later would renew the ended lease.
  const landing = new Map<string, Set<Promise<void>>>();

  function trackHeartbeat(token: string, call: Promise<boolean>): void {
    // `const`: TypeScript before 5.4 does not narrow a reassigned `let` inside the callbacks below.
    const set = landing.get(token) ?? new Set<Promise<void>>();
    if (!landing.has(token)) landing.set(token, set);
    const landed: Promise<void> = call.then(
      (): undefined => undefined,
      (): undefined => undefined,
    );
    set.add(landed);
    void landed.then(() => {
      set.delete(landed);
      if (set.size === 0 && landing.get(token) === set) landing.delete(token);
    });
  }

  /** Stops a reservation's heartbeat; returns the heartbeats still on their way. */
  function stopRenewal(reservation: Reservation): ReadonlySet<Promise<void>> | undefined {
    if (reservation.token === undefined) return undefined;
    renewals.delete(reservation.token);
    return landing.get(reservation.token);
  }

  /** One of the guard's own answers: problem details, or the API's own format through `renderProblem`. */
  function problemResponse(name: ProblemName, status: number, detail: string, headers: Record<string, string>, requestId: string | undefined): ProblemResponse {
    const result = repeatable ? repeatabilityResult(name) : undefined;
    const answer = problemDetails(name, status, detail, result === undefined ? headers : { ...headers, [REPEATABILITY_RESULT]: result }, requestId, options.renderProblem);
    // The replay header marks stored answers (true) and the handler's own (false): never a guard answer.
    if (options.renderProblem !== undefined) {
      delete answer.headers[replayHeader];
      if (result === undefined) delete answer.headers[REPEATABILITY_RESULT];
    }
    return answer;
  }

  // Call sites test this first, so no event object is built for a guard without a log sink.
  const logging = options.log !== undefined;
  /** A quarter of the lease (at least {@link FREE_LATE_MIN_GAP_MS}): the gap between tries within the lease, and the first past it. */
  const quarterLease = Math.max(FREE_LATE_MIN_GAP_MS, contract.leaseMs / FREE_LATE_ATTEMPTS);
  /** Late releases running, by record id: see {@link freeLate}. */
  const lateReleases = new Map<string, LateRelease>();
  // Completions retried behind an answer already sent, by record id (see `completeNow`).
  const pendingCompletions = new Map<string, { readonly token: string; readonly input: CompleteInput }>();
  // Tokens held in `lateReleases`, all records together: bounded by `lateReleaseLimit`.
  let lateTokens = 0;
  /** Reconcile hook calls running, by abandoned reservation (record id and its owner's token): see `reconcile`. */
  const reconciling = new Map<string, Promise<ReconcileVerdict | 'threw' | 'timeout' | 'invalid-verdict'>>();

  function log(event: Omit<GuardLogEvent, 'time' | 'operation'>, requestId: string | undefined): void {
    if (options.log === undefined) return;
    try {
      options.log({
        time: new Date(clock()).toISOString(),
        operation,
        ...(requestId !== undefined ? { requestId } : {}),
        ...event,
      });
    } catch {
      // A broken log sink must not change what the client gets.
    }
  }

  // Store calls waiting for an answer, oldest first. They all get the same bound, so their deadlines come in
  // order and one timer (armed for the oldest unsettled one) bounds all of them — no timer per call.
  const waiting: Waiting[] = [];
  let waitingHead = 0;
  let unsettled = 0;
  let waitTimer: ReturnType<typeof setTimeout> | undefined;

  /**
   * The bound's timer: one turn of I/O first. After a stall (a GC pause, a loop blocked, a process frozen) the timers
   * run before the network is read, so replies that came in time — a reservation, a takeover, a completion the store
   * made — would be thrown away as "no answer", and the request answered 503 for what the store did.
   */
  function expireWaiting(): void {
    // setImmediate runs after the poll phase (Node, Bun); a runtime without it gets the next timer turn.
    if (typeof setImmediate === 'function') setImmediate(expireDue);
    else setTimeout(expireDue, 0);
  }

  function expireDue(): void {
    waitTimer = undefined;
    const now = performance.now();
    while (waitingHead < waiting.length) {
      const call = waiting[waitingHead]!;
      if (!call.settled) {
        if (call.deadline > now) break;
        call.settled = true;
        unsettled -= 1;
        call.reject(new StoreError('unavailable', `the idempotency store did not answer within ${storeTimeoutMs} ms`));
      }
      waitingHead += 1;
    }
    compactWaiting();
    if (waitingHead < waiting.length) waitTimer = setTimeout(expireWaiting, Math.max(1, Math.ceil(waiting[waitingHead]!.deadline - now)));
  }

  function compactWaiting(): void {
    if (waitingHead === waiting.length) {
      waiting.length = 0;
      waitingHead = 0;
    } else if (waitingHead > 1024 && waitingHead * 2 > waiting.length) {
      waiting.splice(0, waitingHead);
      waitingHead = 0;
    }
  }

  function settleWaiting(call: Waiting): boolean {
    if (call.settled) return false;
    call.settled = true;
    unsettled -= 1;
    if (unsettled === 0) {
      // Nothing left to bound: forget the settled calls, and let the timer (re-armed by the next call, or
      // lapsing on its own) keep no process alive meanwhile.
      waiting.length = 0;
      waitingHead = 0;
      unrefTimer(waitTimer);
    }
    return true;
  }

  /** `promise`, or a StoreError `unavailable` once it has not settled within storeTimeoutMs. */
  function bounded<T>(promise: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const call: Waiting = { deadline: performance.now() + storeTimeoutMs, settled: false, reject };
      waiting.push(call);
      unsettled += 1;
      if (waitTimer === undefined) waitTimer = setTimeout(expireWaiting, storeTimeoutMs);
      else if (unsettled === 1) refTimer(waitTimer);
      promise.then(
        (value) => {
          if (settleWaiting(call)) resolve(value);
        },
        (error: unknown) => {
          if (settleWaiting(call)) reject(error instanceof StoreError ? error : new StoreError('unavailable', 'the idempotency store failed', { cause: error }));
        },
      );
    });
  }

  function unguarded(requestId: string | undefined): Reservation {
    return { guarded: false, operation, recordId: undefined, token: undefined, requestId };
  }

  function reservationOf(recordId: string, token: string, requestId: string | undefined): Reservation {
    return { guarded: true, operation, recordId, token, requestId };
  }

  /**
   * OASIS Repeatable Requests: a `Repeatability-First-Sent` that is no IMF-fixdate, or more than the clock
   * tolerance ahead (400); or older than the records kept, less that tolerance (412: it may have run with its
   * record gone, so it is not run again, even if a record is left — as Azure services answer); else nothing.
   * Without the header there is no window: the request is guarded like any other.
   */
  function staleRepeat(req: GuardRequest, recordId: string): Respond | undefined {
    const raw = own(req.headers, REPEATABILITY_FIRST_SENT);
    if (raw === undefined) return undefined;
    const sentAt = typeof raw === 'string' ? parseImfFixdate(raw) : undefined;
    const age = sentAt === undefined ? Number.NaN : clock() - sentAt;
    // Client and server clocks differ: a date this far in the future is refused, and the window shrinks by as much.
    const tolerance = Math.min(REPEAT_CLOCK_TOLERANCE_MS, contract.ttlMs / 10);
    if (!(age >= -tolerance)) {
      if (logging) log({ decision: 'invalid-key', keyId: recordId, status: R.invalidKey }, req.requestId);
      const detail = 'The Repeatability-First-Sent header must be the IMF-fixdate the request was first sent at (e.g. Tue, 15 Nov 1994 08:12:31 GMT), not in the future: check the client clock.';
      return { kind: 'respond', response: problemResponse('idempotency-key-invalid', R.invalidKey, detail, {}, req.requestId) };
    }
    if (age <= contract.ttlMs - tolerance) return undefined;
    if (logging) log({ decision: 'expired', keyId: recordId, status: 412 }, req.requestId);
    const detail = 'This request was first sent longer ago than this server keeps its records: it may have run already, so it is not run again. Check the operation status.';
    return { kind: 'respond', response: problemResponse('idempotency-request-expired', 412, detail, {}, req.requestId) };
  }

  /** The request's key, read from where the contract says it travels. */
  function readKey(req: GuardRequest): ParsedKey {
    if (keyHeader !== undefined) return parseIdempotencyKey(own(req.headers, keyHeader), keyRules);
    if (keyTokens === undefined) return parseFieldKey(own(req.query, contract.key.name), keyRules, true);
    const field = resolveJsonPointer(req.body, keyTokens);
    return parseFieldKey(field.found ? field.value : undefined, keyRules);
  }

  /**
   * The request's scope values, in the contract's order, or the guard's refusal when a part is missing — `quiet`: a
   * placeholder refusal, neither logged nor rendered.
   */
  function scopeOf(req: GuardRequest, quiet = false): unknown[] | Extract<Prepared, { kind: 'respond' }> {
    const scopeValues: unknown[] = [];
    for (const part of contract.scope) {
      if (part.kind === 'global') {
        scopeValues.push(['global']);
      } else if (part.kind === 'principal') {
        const principal = principalOf(req.principal);
        if (principal === undefined) {
          if (quiet) return UNRESOLVED;
          if (logging) log({ decision: 'scope-unresolved', status: R.invalidKey }, req.requestId);
          return {
            kind: 'respond',
            response: problemResponse('idempotency-scope-unresolved', R.invalidKey, 'The key is scoped to the caller, but the request has no authenticated principal.', {}, req.requestId),
          };
        }
        scopeValues.push(['principal', principal]);
      } else {
        const source = part.kind === 'header' ? own(req.headers, part.name.toLowerCase()) : part.kind === 'path' ? own(req.pathParams, part.name) : own(req.query, part.name);
        if ((source === undefined || source === '') && part.optional === true && scopedByPrincipal) {
          // A parameter the operation declares optional, beside the caller: its absence is a scope of its own (none
          // of any value's) within the caller's keys.
          scopeValues.push([part.kind, part.name]);
          continue;
        }
        if (source === undefined || source === '') {
          // An absent part must not become one shared key space (every caller without it would see the others' replays).
          if (quiet) return UNRESOLVED;
          if (logging) log({ decision: 'scope-unresolved', status: R.invalidKey }, req.requestId);
          const where = part.kind === 'header' ? `the ${part.name} header` : part.kind === 'path' ? `the path parameter ${part.name}` : `the query parameter ${part.name}`;
          return {
            kind: 'respond',
            response: problemResponse('idempotency-scope-unresolved', R.invalidKey, `The key is scoped by ${where}, but the request does not carry it.`, {}, req.requestId),
          };
        }
        scopeValues.push([part.kind, part.name, source]);
      }
    }
    return scopeValues;
  }

  /**
   * The request's key, record and fingerprint, or the guard's refusal. With `refusalOnly` (see `refuse`), only whether
   * it refuses: nothing is hashed that a refusal does not need (`unguarded` then stands for "not refused").
   */
  function prepare(req: GuardRequest, refusalOnly = false): Prepared {
    const parsed = readKey(req);
    if (parsed.kind === 'missing') {
      if (!contract.key.required) {
        if (logging) log({ decision: 'unguarded' }, req.requestId);
        return { kind: 'unguarded' };
      }
      if (logging) log({ decision: 'missing-key', status: R.missingKey }, req.requestId);
      return {
        kind: 'respond',
        response: problemResponse('idempotency-key-missing', R.missingKey, `Send ${keyPlace}: one key per intent, kept across retries.`, {}, req.requestId),
      };
    }
    if (parsed.kind === 'invalid') return invalidKey(parsed.detail, req.requestId);
    const scopeValues = scopeOf(req);
    if (!Array.isArray(scopeValues)) return scopeValues;
    if (refusalOnly && !repeatable) return NOT_REFUSED;
    const recordId = recordIdOf(scopeValues, parsed.key);
    if (repeatable) {
      const stale = staleRepeat(req, recordId);
      if (stale !== undefined) return stale;
    }
    if (refusalOnly) return NOT_REFUSED;
    // Null prototype and own members only: a query parameter named `constructor` or `__proto__` is just a name.
    // Without declared parameters, one shared empty map (a null-prototype object is a dictionary: costly to make).
    const query: Record<string, QueryValue> = fingerprintQuery.length === 0 && !fingerprintAllQuery ? NO_QUERY : (Object.create(null) as Record<string, QueryValue>);
    if (fingerprintAllQuery) {
      // A free-form object in the query: any name may be one of its members, so every parameter sent counts.
      for (const name in req.query) {
        const value = own(req.query, name);
        if (value !== undefined && !queryLeftOut.has(name)) query[name] = value;
      }
    } else {
      for (const name of fingerprintQuery) {
        const value = queryValue(req.query, name);
        if (value !== undefined) query[name] = value;
      }
    }
    const fingerprint = fingerprintOf(req.pathParams, query, req.body);
    return { kind: 'ready', recordId, fingerprint, key: parsed.key };
  }

  /**
   * The store failed. Fail-open (the opt-in) applies only here, where no record was seen yet; once the guard
   * has read a record someone else owns, it always answers 503 ({@link storeUnavailableResponse}).
   */
  function storeUnavailable(req: GuardRequest, recordId: string | undefined, key: string | undefined, error: unknown): Begun {
    if (options.failOpen === true) {
      if (logging) log({ decision: 'fail-open', ...(recordId !== undefined ? { keyId: recordId } : {}), ...storeErrorField(error) }, req.requestId);
      // Unguarded, but the handler still gets the key (e.g. for a provider that deduplicates on it).
      return { kind: 'proceed', reservation: unguarded(req.requestId), headers: {}, idempotencyKey: key };
    }
    return storeUnavailableResponse(req, recordId, error);
  }

  function storeUnavailableResponse(req: GuardRequest, recordId: string | undefined, error: unknown): Respond {
    if (logging) log({ decision: 'store-unavailable', status: R.storeUnavailable, ...(recordId !== undefined ? { keyId: recordId } : {}), ...storeErrorField(error) }, req.requestId);
    return {
      kind: 'respond',
      response: problemResponse(
        'idempotency-store-unavailable',
        R.storeUnavailable,
        'The idempotency store is not answering. Retry later with the same key: the retry replays the result or runs the request once.',
        { 'retry-after': storeRetryAfter },
        req.requestId,
      ),
    };
  }

  function outcomeUnknown(req: GuardRequest, recordId: string, error: unknown): Respond {
    if (logging) log({ decision: 'outcome-unknown', status: R.storeUnavailable, keyId: recordId, ...storeErrorField(error) }, req.requestId);
    return {
      kind: 'respond',
      response: problemResponse(
        'idempotency-outcome-unknown',
        R.storeUnavailable,
        'The request ran, but recording its result failed: it may or may not have taken effect. Retry with the same key only if a repeat is safe; otherwise check the operation status.',
        { 'retry-after': storeRetryAfter },
        req.requestId,
      ),
    };
  }

  /** A one-transaction handler given up while it may still run: its transaction is rolled back, the rest unknown. */
  function givenUp(req: GuardRequest): Respond {
    // Logged as rolled back by the caller.
    return {
      kind: 'respond',
      response: problemResponse(
        'idempotency-outcome-unknown',
        R.storeUnavailable,
        'The request did not finish in time and was given up: its transaction was rolled back, so nothing it wrote in it was kept, but it may still be running and what it did outside the transaction is not known. Retry with the same key only if a repeat is safe; otherwise check the operation status.',
        { 'retry-after': storeRetryAfter },
        req.requestId,
      ),
    };
  }

  function invalidKey(detail: string, requestId: string | undefined): Respond {
    if (logging) log({ decision: 'invalid-key', status: R.invalidKey }, requestId);
    const text = `${keyPlace.charAt(0).toUpperCase()}${keyPlace.slice(1)} is not a valid key: ${detail}.`;
    return { kind: 'respond', response: problemResponse('idempotency-key-invalid', R.invalidKey, text, {}, requestId) };
  }

  function replay(record: IdempotencyRecord, requestId: string | undefined, via?: 'status'): Respond {
    const stored = record.response!;
    if (logging) {
      log(
        { decision: 'replay', keyId: record.id, state: 'completed', status: stored.status, ...(record.resultId !== undefined ? { resultId: record.resultId } : {}), ...(via !== undefined ? { via } : {}) },
        requestId,
      );
    }
    return {
      kind: 'respond',
      // The record is the store's fresh copy (every get/reserve reads or copies it anew): its body is ours to send.
      // Read through the status route, a GET: a shared cache keys it by URL alone (neither the key header nor a cookie
      // or API-key principal is in its key), so one caller's stored answer must not be kept for the next.
      response: { status: stored.status, headers: { ...replayable(stored.headers), ...acceptedHeaders, [replayHeader]: 'true', ...(via === 'status' ? NO_STORE : {}) }, body: stored.body },
      replayed: true,
    };
  }

  /**
   * 409 in progress. `Retry-After` is as long as the first request has run so far (at least 1 s, at most the lease
   * left): a quick handler is replayed a second later, and waiting clients back off as a slow one goes on. The
   * lease left alone (renewed while the handler runs) would keep every duplicate waiting the whole lease.
   */
  function inProgress(recordId: string, msLeft: number, msRunning: number, requestId: string | undefined, via?: 'status'): Respond {
    // A store without a usable `createdAt` gives NaN: then the lease left is all there is to go by.
    const wait = Number.isFinite(msRunning) ? Math.min(msLeft, Math.max(1000, msRunning)) : msLeft;
    const seconds = Math.max(1, Math.ceil(wait / 1000));
    if (logging) log({ decision: 'in-progress', keyId: recordId, state: 'in_progress', status: R.inProgress, ...(via !== undefined ? { via } : {}) }, requestId);
    return {
      kind: 'respond',
      response: problemResponse(
        'idempotency-request-in-progress',
        R.inProgress,
        'A request with this key is still being processed. Retry after the indicated time with the same key.',
        { 'retry-after': String(seconds) },
        requestId,
      ),
    };
  }

  function abandoned(record: IdempotencyRecord, requestId: string | undefined, via?: 'status'): Respond {
    if (logging) log({ decision: 'abandoned', keyId: record.id, state: 'in_progress', status: R.abandoned, ...(via !== undefined ? { via } : {}) }, requestId);
    // Read through the status route, "check the operation status" would send the caller back where it is.
    const detail =
      via === 'status'
        ? 'A request with this key started but never finished, and its outcome is not settled yet: it is being reconciled. Ask again later; until then, do not send the intent under a new key.'
        : 'A request with this key started but never finished; its outcome is being reconciled. Check the operation status instead of retrying.';
    return { kind: 'respond', response: problemResponse('idempotency-request-abandoned', R.abandoned, detail, {}, requestId) };
  }

  function mismatch(record: IdempotencyRecord, requestId: string | undefined): Respond {
    if (logging) log({ decision: 'mismatch', keyId: record.id, state: record.state, status: R.mismatch }, requestId);
    return {
      kind: 'respond',
      response: problemResponse(
        'idempotency-key-reused',
        R.mismatch,
        'This key was already used for a different request (its payload or path differ). A changed request is a new intent: use a new key.',
        {},
        requestId,
      ),
    };
  }

  function toStored(sent: GuardResponse): CompleteInput {
    const headers: Record<string, string> = {};
    for (const name in sent.headers) {
      const lower = name.toLowerCase();
      // A body still encoded (the adapters decode gzip, deflate and br first) is unreadable without its coding.
      if (replayAllow.has(lower) || lower === 'content-encoding') headers[lower] = sent.headers[name]!;
    }
    // No copy of the body: every store serialises or copies it during the call.
    const response: StoredResponse = { status: sent.status, headers, body: sent.body };
    const resultId = resultIdOf(sent);
    return resultId === undefined ? { response, ttlMs: contract.ttlMs } : { response, ttlMs: contract.ttlMs, resultId };
  }

  function resultIdOf(sent: GuardResponse): string | undefined {
    let body: unknown;
    try {
      body = sent.body.length === 0 ? undefined : JSON.parse(UTF8.decode(sent.body));
    } catch {
      body = undefined;
    }
    return options.resultId !== undefined ? options.resultId(body, sent) : idInBody(body);
  }

  /** This request reserved the record under `token`: run the handler. */
  function reserved(req: GuardRequest, prep: Extract<Prepared, { kind: 'ready' }>, token: string): Begun {
    if (logging) log({ decision: 'reserved', keyId: prep.recordId, state: 'absent' }, req.requestId);
    startRenewal(prep.recordId, token);
    return {
      kind: 'proceed',
      reservation: reservationOf(prep.recordId, token, req.requestId),
      headers: firstHeaders,
      idempotencyKey: prep.key,
    };
  }

  async function classify(
    req: GuardRequest,
    prep: Extract<Prepared, { kind: 'ready' }>,
    result: ReserveResult,
    allowWait: boolean,
    vanished?: Vanished,
  ): Promise<Begun> {
    if (result.outcome === 'reserved') return reserved(req, prep, result.record.leaseToken);
    let record = result.record;
    let now = result.now;
    // The DESIGN order: a payload mismatch wins over every state, before the handler.
    if (record.fingerprint !== prep.fingerprint) return mismatch(record, req.requestId);
    if (record.state === 'completed') return replay(record, req.requestId);
    // Held by a reservation this process gave up on, or by its handler that answered with its completion retried
    // behind: freed, or recorded and replayed, now — rather than 409 until the background try comes round.
    const short = await shortcut(req, prep, record, vanished);
    if (short === 'refused') {
      // The token holds the record no more: another retry freed it (and may run the handler now), or it moved on.
      // Answered from what is there now — the read above is stale (a review's: the second of two concurrent retries
      // answered 409 abandoned, "do not retry", while the first ran the handler). Once: a read that still shows the
      // token (a lagging replica) goes on as a record held by another, not round again.
      const latest = await readAgain(req, prep, vanished);
      if (latest.kind !== 'read') return latest;
      record = latest.record;
      now = latest.now;
    } else if (short !== undefined) return short;
    if (record.leaseUntil > now && allowWait && waitMs > 0) {
      // Monotonic, as every bound of the guard's: a wall clock stepped back (NTP) would stretch the wait to the first
      // request's end, far past the client's per-attempt timeout this wait must stay under.
      const deadline = performance.now() + waitMs;
      while (performance.now() < deadline) {
        await sleep(Math.min(pollMs, Math.max(1, deadline - performance.now())));
        if (req.clientGone?.() === true) break;
        const latest = await readAgain(req, prep, vanished);
        if (latest.kind !== 'read') return latest;
        record = latest.record;
        now = latest.now;
        // The shortcuts too, rather than waiting out the lease (a review's: the waiting duplicate heard 409 in progress,
        // a retry a moment later the replay); one that did not settle it waits on, the next poll reading what is there.
        const waited = await shortcut(req, prep, record, vanished);
        if (waited !== undefined && waited !== 'refused') return waited;
        if (record.leaseUntil <= now) break;
      }
    }
    if (record.leaseUntil > now) return inProgress(record.id, record.leaseUntil - now, now - record.createdAt, req.requestId);
    return reconcile(req, prep, record, vanished);
  }

  /**
   * What a retry that finds `record` held by this process answers at once, if it can: the key reserved afresh when the
   * holder is a reservation the guard gave up on and its release succeeds (`refused` when that token holds the record no
   * more: the read is stale); the replay when the holder is a handler that answered and its completion, retried behind
   * the answer, lands now. `undefined` otherwise (held by another, or the store failed again).
   */
  async function shortcut(req: GuardRequest, prep: Extract<Prepared, { kind: 'ready' }>, record: IdempotencyRecord, vanished: Vanished | undefined): Promise<Begun | 'refused' | undefined> {
    if (record.state !== 'in_progress') return undefined;
    if (lateReleases.get(record.id)?.tokens.has(record.leaseToken) === true) {
      const freed = await freeGivenUp(record);
      if (freed === 'released') return vanished ? vanished() : reserveAndClassify(req, prep, false);
      return freed;
    }
    const completing = pendingCompletions.get(record.id);
    if (completing !== undefined && completing.token === record.leaseToken) {
      const latest = await completeNow(record.id, completing);
      if (latest !== undefined && latest.fingerprint === prep.fingerprint) return replay(latest, req.requestId);
    }
    return undefined;
  }

  /**
   * Reads the key's record and the store's clock again, for a classification whose read went stale. Answers them while
   * the record is in progress under this payload; else 422 for another payload, the replay once it is completed, what a
   * fresh reservation answers once it is gone, and 503 when the store fails (a record another request owns was seen:
   * failing open would run the effect beside it).
   */
  async function readAgain(
    req: GuardRequest,
    prep: Extract<Prepared, { kind: 'ready' }>,
    vanished: Vanished | undefined,
  ): Promise<{ readonly kind: 'read'; readonly record: IdempotencyRecord; readonly now: number } | Begun> {
    let latest: IdempotencyRecord | undefined;
    let now: number;
    try {
      latest = await bounded(store.get(prep.recordId));
      now = await bounded(store.now());
    } catch (error) {
      return storeUnavailableResponse(req, prep.recordId, error);
    }
    if (latest === undefined) return vanished ? vanished() : reserveAndClassify(req, prep, false);
    if (latest.fingerprint !== prep.fingerprint) return mismatch(latest, req.requestId);
    if (latest.state === 'completed') return replay(latest, req.requestId);
    return { kind: 'read', record: latest, now };
  }

  async function reconcile(req: GuardRequest, prep: Extract<Prepared, { kind: 'ready' }>, record: IdempotencyRecord, vanished?: Vanished): Promise<Begun> {
    if (options.reconcile === undefined) return abandoned(record, req.requestId);
    // One hook call per abandoned reservation at a time: the retries that find it while a call runs (a client's
    // retries, other clients' duplicates, a storm after an outage) share that call's verdict instead of each asking the
    // provider. Keyed on the owner's token too: once a takeover or a verdict moved the record on, a new call is made.
    // Not under `reconcileTimeoutMs: Infinity`: a call that never ends would hold every later retry of the key with it,
    // where each retry asking again lets one after the provider recovered get its verdict.
    const flightKey = `${record.id}\n${record.leaseToken}`;
    let flight = reconcileTimeoutMs === Infinity ? undefined : reconciling.get(flightKey);
    if (flight === undefined) {
      const started = askVerdict(options.reconcile, {
        operation,
        recordId: record.id,
        idempotencyKey: prep.key,
        request: req,
        createdAt: record.createdAt,
        leaseUntil: record.leaseUntil,
        leaseToken: record.leaseToken,
      }, record.id, req.requestId);
      flight = started;
      if (reconcileTimeoutMs !== Infinity) reconciling.set(flightKey, started);
      const done = (): void => {
        if (reconciling.get(flightKey) === started) reconciling.delete(flightKey);
      };
      started.then(done, done);
    }
    const verdict = await flight;
    if (typeof verdict === 'string' || verdict.outcome === 'unknown') return abandoned(record, req.requestId);
    try {
      if (verdict.outcome === 'completed') {
        const input = toStored(verdict.response);
        const done = await bounded(
          store.complete(record.id, record.leaseToken, verdict.resultId !== undefined ? { ...input, resultId: verdict.resultId } : input),
        );
        const latest = await bounded(store.get(record.id));
        if (latest !== undefined && latest.state === 'completed' && latest.fingerprint === prep.fingerprint) {
          if (done && logging) log({ decision: 'reconciled', keyId: record.id, state: 'in_progress', status: input.response.status }, req.requestId);
          return replay(latest, req.requestId);
        }
        return latest === undefined ? abandoned(record, req.requestId) : classify(req, prep, { outcome: 'existing', record: latest, now: await bounded(store.now()) }, false, vanished);
      }
      const token = newToken();
      const pendingTakeover = store.takeover(record.id, prep.fingerprint, record.leaseToken, token, contract.leaseMs);
      let taken: IdempotencyRecord | undefined;
      try {
        taken = await bounded(pendingTakeover);
      } catch (error) {
        // A takeover that lands after the guard gave up (or whose failure leaves it unknown) holds the record under a
        // token nobody runs: freed again, fenced on that token, as a late reservation is — or the key would answer
        // 409 in progress for a lease with nothing running. The reconcile hook said the effect did not happen.
        // A takeover that answers it took nothing may still have taken the record in an earlier run of the same
        // command (a client that resent it after a reconnect): unsure, so the loop reads the record before dropping it.
        releaseGivenUp(pendingTakeover, (late) => (late !== undefined ? 'landed' : 'unsure'), record.id, token, req.requestId);
        throw error;
      }
      if (taken !== undefined) {
        if (logging) log({ decision: 'taken-over', keyId: record.id, state: 'in_progress' }, req.requestId);
        startRenewal(record.id, token);
        return { kind: 'proceed', reservation: reservationOf(record.id, token, req.requestId), headers: firstHeaders, idempotencyKey: prep.key };
      }
      // Another request won the takeover (or the record moved on): answer from what is there now.
      const latest = await bounded(store.get(record.id));
      if (latest === undefined) return vanished ? vanished() : reserveAndClassify(req, prep, false);
      const now = await bounded(store.now());
      if (latest.fingerprint !== prep.fingerprint) return mismatch(latest, req.requestId);
      if (latest.state === 'completed') return replay(latest, req.requestId);
      return inProgress(latest.id, latest.leaseUntil - now, now - latest.createdAt, req.requestId);
    } catch (error) {
      // As above: an owned (abandoned) record was seen, so never fail open here.
      if (error instanceof StoreError) return storeUnavailableResponse(req, prep.recordId, error);
      throw error;
    }
  }

  /**
   * The hook's verdict as the guard acts on it — read once, checked, a `completed` answer decoded — or why there is
   * none (`threw`, `timeout`, `invalid-verdict`, logged here, once per call). Only a verdict it can act on acts:
   * `unknown`, a hook that threw or hung, and anything else a hook may return from plain JavaScript (`'unknown'`, `{}`,
   * nothing, a `completed` without a usable answer) leaves the record abandoned — never a takeover that runs the effect
   * again, never a broken record. The verdict is read once, into a copy: a getter that throws, or answers one thing to
   * the check and another after it (`completed`, then `not-happened`), can neither fail the request nor turn the check
   * into a takeover. Never rejects.
   */
  async function askVerdict(
    hook: ReconcileHook,
    abandonedReservation: Omit<AbandonedReservation, 'signal'>,
    keyId: string,
    requestId: string | undefined,
  ): Promise<ReconcileVerdict | 'threw' | 'timeout' | 'invalid-verdict'> {
    const answer = await askReconcile(hook, abandonedReservation);
    let verdict: ReconcileVerdict | 'threw' | 'timeout' | 'invalid-verdict' = answer === HOOK_THREW ? 'threw' : answer === HOOK_TIMED_OUT ? 'timeout' : verdictOf(answer);
    // Decoded after the hook's bound: decoding never makes a verdict late.
    if (typeof verdict !== 'string' && verdict.outcome === 'completed') {
      try {
        verdict = { ...verdict, response: await identityVerdict(verdict.response) };
      } catch {
        verdict = 'invalid-verdict';
      }
    }
    if (typeof verdict === 'string' && logging) log({ decision: 'reconcile-failed', keyId, state: 'in_progress', reason: verdict }, requestId);
    return verdict;
  }

  /**
   * The hook's verdict, {@link HOOK_THREW} when it threw or rejected, or {@link HOOK_TIMED_OUT} when it gave none within
   * `reconcileTimeoutMs` (its `signal` is aborted then). A verdict or error that comes later is dropped.
   */
  async function askReconcile(hook: ReconcileHook, reservation: Omit<AbandonedReservation, 'signal'>): Promise<unknown> {
    const controller = new AbortController();
    // Through a promise: a hook that throws synchronously rejects instead.
    const verdict = Promise.resolve({ ...reservation, signal: controller.signal }).then(hook);
    if (reconcileTimeoutMs === Infinity) {
      try {
        return await verdict;
      } catch {
        return HOOK_THREW;
      }
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    let answered = false;
    const timedOut = new Promise<typeof HOOK_TIMED_OUT>((resolve) => {
      // One turn of I/O first, as for a store call: after a stall of the process the timer runs before the network is
      // read, and a verdict that came in time would be thrown away.
      const expire = (): void => {
        // A verdict that came in the turn this waited for was taken: its call is not told to stop.
        if (answered) return;
        resolve(HOOK_TIMED_OUT);
        controller.abort();
      };
      timer = setTimeout(() => (typeof setImmediate === 'function' ? setImmediate(expire) : setTimeout(expire, 0)), reconcileTimeoutMs);
    });
    try {
      return await Promise.race([verdict, timedOut]);
    } catch {
      return HOOK_THREW;
    } finally {
      answered = true;
      clearTimeout(timer);
    }
  }

  /** What a new reservation of `prep`'s record asks the store for: a fresh lease token, the contract's lease and TTL. */
  function reserveInput(prep: Extract<Prepared, { kind: 'ready' }>): ReserveInput {
    return { id: prep.recordId, operation, fingerprint: prep.fingerprint, token: newToken(), leaseMs: contract.leaseMs, ttlMs: contract.ttlMs };
  }

  async function reserveAndClassify(req: GuardRequest, prep: Extract<Prepared, { kind: 'ready' }>, allowWait: boolean): Promise<Begun> {
    const input = reserveInput(prep);
    let pending: Promise<ReserveResult> | undefined;
    let result: ReserveResult;
    try {
      pending = store.reserve(input);
      result = await bounded(pending);
    } catch (error) {
      // If the reservation lands after we gave up, nobody runs the handler for it: free it again. So too when it
      // failed in a way that leaves it unknown whether the store made it (a client's command timeout, a connection
      // lost after the command was sent): the release is fenced on this call's token, so it frees only a record
      // this call made, and otherwise changes nothing. Without it the key would answer 409 until the lease ran out.
      // Nobody ran the handler under this token: its record is released whether or not its lease still runs.
      // A reservation that answers another's record made nothing (a resent one that made it in an earlier run answers
      // its own record: `ownReservation`).
      if (pending !== undefined) {
        releaseGivenUp(pending, (late) => (late.outcome === 'reserved' || ownReservation(late, input.token) ? 'landed' : 'nothing'), input.id, input.token, req.requestId);
      }
      return storeUnavailable(req, prep.recordId, prep.key, error);
    }
    // A fresh reservation (the common case) is answered here, without another async step; so is this request's own.
    if (result.outcome === 'reserved') return reserved(req, prep, input.token);
    if (ownReservation(result, input.token)) {
      // Ours while its lease runs, on the store's clock read now (a resent command may carry the time it was first
      // sent). Otherwise — run out, or the clock unreadable — nothing ran under it: give it back (fenced on this
      // token, so a takeover by another delivery stays) and reserve again, rather than leave it to look abandoned.
      if (await ownLeaseRuns(result.record)) return reserved(req, prep, input.token);
      try {
        await bounded(store.release(input.id, input.token));
      } catch (error) {
        // The record is this call's and nothing ran under it: released later, or it would look abandoned until its TTL.
        lateRelease(input.id, input.token, req.requestId, 'landed');
        return storeUnavailableResponse(req, prep.recordId, error);
      }
      return reserveAndClassify(req, prep, false);
    }
    return await classify(req, prep, result, allowWait);
  }

  /** Whether `record`'s lease still runs by the store's clock now (false if the store cannot say). */
  async function ownLeaseRuns(record: IdempotencyRecord): Promise<boolean> {
    try {
      return record.leaseUntil > (await bounded(store.now()));
    } catch {
      return false;
    }
  }

  /**
   * Frees what a reservation (or takeover) call the guard gave up on may have made, fenced on the call's token — one no
   * handler ever held, so a release frees only that record and changes nothing after a takeover. The token is handed
   * to its record's late release (see {@link LateRelease}) at once, as `unanswered` — a connection that went silent
   * without a reset (a hung pooler or middlebox, a store host that stopped answering) leaves the call pending for
   * good while the store may have committed it (a chaos review's half-open PostgreSQL connection: its key answered
   * 409 abandoned for good, no handler ever run) — then, when the call settles, as `landed` (its answer says it made
   * the record) or `failed` (it may have made it), or is forgotten (it made nothing).
   */
  function releaseGivenUp<T>(pending: Promise<T>, landed: (late: T) => 'landed' | 'nothing' | 'unsure', id: string, token: string, requestId: string | undefined): void {
    if (!lateRelease(id, token, requestId, 'unanswered')) return;
    pending.then(
      (late): void => {
        let made: 'landed' | 'nothing' | 'unsure';
        try {
          made = landed(late);
        } catch {
          // An answer of another shape than the store's contract says (a custom store): no knowing what it made.
          made = 'unsure';
        }
        if (made === 'nothing') forgetLate(id, token);
        else lateRelease(id, token, requestId, made === 'landed' ? 'landed' : 'failed');
      },
      (): void => {
        lateRelease(id, token, requestId, 'failed');
      },
    );
  }

  /**
   * Adds `token` to `id`'s late release (starting one if none runs), or updates what is known of it; wakes it. Answers
   * false, logging `untracked`, for a new token past `lateReleaseLimit`.
   */
  function lateRelease(id: string, token: string, requestId: string | undefined, mode: LateMode): boolean {
    const running = lateReleases.get(id);
    const known = running?.tokens.get(token);
    // A call not yet answered is not counted (the driver holds it too, until its own timeout: see `lateReleaseLimit`):
    // calls that hang for good would otherwise hold every place while the store answers the others (a diff review's).
    // It is counted once it answers: one that failed, past the bound, leaves (an outage's failures are most of what
    // the bound is for); one that made its record stays, past the bound if need be.
    const counts = mode !== 'unanswered' && (known === undefined || known.mode === 'unanswered');
    if (counts && mode !== 'landed' && lateTokens >= lateReleaseLimit) {
      if (logging) log({ decision: 'record-failed', keyId: id, state: 'in_progress', reason: 'untracked' }, requestId);
      if (known !== undefined) running!.tokens.delete(token);
      return false;
    }
    if (counts) lateTokens += 1;
    if (running !== undefined) {
      if (known === undefined) running.tokens.set(token, { mode, requestId, since: performance.now(), news: 0 });
      else {
        // A call that answered never goes back to unanswered; one known to have made the record stays so.
        if (mode !== 'unanswered') known.mode = known.mode === 'landed' ? 'landed' : mode;
        // A try running now decided on an older read: it keeps the token for another (a reservation resent after
        // its release lands again).
        known.news += 1;
      }
      // A try at once for a new token or one known to have made the record — its schedule begun again for the latter
      // only: under a steady stream of retries failing in an outage, the loop still backs off. A call that failed
      // tells nothing new to try on.
      if (known === undefined || mode === 'landed') running.wake(mode === 'landed');
      return true;
    }
    const late: LateRelease = { tokens: new Map([[token, { mode, requestId, since: performance.now(), news: 0 }]]), wake: () => {}, woken: false, restart: false };
    late.wake = (restart) => {
      late.woken = true;
      late.restart ||= restart;
    };
    lateReleases.set(id, late);
    void freeLate(id, late).finally(() => endLate(id, late));
    return true;
  }

  function endLate(id: string, late: LateRelease): void {
    if (lateReleases.get(id) === late) lateReleases.delete(id);
    // Empty when it ends (freeLate never rejects); kept honest if not.
    for (const t of late.tokens.values()) if (t.mode !== 'unanswered') lateTokens -= 1;
    late.tokens.clear();
  }

  function forgetLate(id: string, token: string): void {
    const late = lateReleases.get(id);
    if (late !== undefined) dropLate(late, token);
  }

  /** Takes `token` out of `late`, and out of the count `lateReleaseLimit` bounds. */
  function dropLate(late: LateRelease, token: string): void {
    const t = late.tokens.get(token);
    if (t === undefined) return;
    late.tokens.delete(token);
    if (t.mode !== 'unanswered') lateTokens -= 1;
  }

  /**
   * Runs one record's late release until none of its tokens is left; never rejects. Each try reads the record once: the
   * token that holds it is released; the others have nothing to free and leave — except an `unanswered` one within
   * its lease, whose reservation may still be on its way. A store that is down fails the try, and it comes again: at
   * once and a quarter of the lease apart within the lease ({@link FREE_LATE_ATTEMPTS} tries), then at gaps doubling
   * to {@link FREE_LATE_MAX_GAP_MS} (each wait drawn between half the gap and all of it, so the releases an outage left
   * do not reach the store that came back in one burst), until each token's TTL has passed; a token added meanwhile
   * starts the schedule again. One loop per record, whatever the number of requests behind it: an outage's retries
   * (48,600 answered 503 for 2,000 keys in a chaos review's 90 s Redis outage) each held a loop of their own, 1.5 KB
   * apiece and one release per try. Without any of it a store outage longer than the lease left the key answering 409
   * abandoned for a handler that never ran, for good (the review's PostgreSQL run: 12-18 of 200 keys). Past its lease a
   * token's outcome is logged: `released`; for one known to have made the record (`landed`), also `fenced` (another
   * holds it now) or `record-failed` (`gave-up`) when the TTL came first — a call that failed may have made nothing, so
   * nothing is said of it but a release.
   */
  async function freeLate(id: string, late: LateRelease): Promise<void> {
    const first = Math.min(FREE_LATE_MAX_GAP_MS, quarterLease);
    let tries = 0;
    let gap = first;
    // When the schedule's next try is due, and whether the try about to run is that one (the first, one its timer began,
    // or one after a restart). A try a new token woke early leaves the schedule where it was: a chaos review's outage
    // retries (one every second, each a wake) had doubled the gap to its 5-minute cap within half a minute, and a
    // reservation that landed then waited minutes after the store came back.
    let due = 0;
    let onSchedule = true;
    for (;;) {
      late.woken = false;
      late.restart = false;
      const now = performance.now();
      for (const [token, t] of late.tokens) {
        if (now - t.since < contract.ttlMs) continue;
        dropLate(late, token);
        if (logging && t.mode === 'landed') log({ decision: 'record-failed', keyId: id, state: 'in_progress', reason: 'gave-up' }, t.requestId);
      }
      // Out of the map in the same turn as the check: a token added after it starts a loop of its own, rather than
      // joining one that has ended.
      if (late.tokens.size === 0) return endLate(id, late);
      await tryLate(id, late);
      if (late.tokens.size === 0) return endLate(id, late);
      if (late.woken) {
        if (late.restart) {
          tries = 0;
          gap = first;
          onSchedule = true;
        }
        continue;
      }
      const tried = performance.now();
      if (onSchedule) {
        tries += 1;
        let next = first;
        if (tries >= FREE_LATE_ATTEMPTS) {
          next = jittered(gap);
          gap = Math.min(gap * 2, FREE_LATE_MAX_GAP_MS);
        }
        due = tried + next;
      }
      const wait = Math.max(0, due - tried);
      let expired = false;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          expired = true;
          resolve();
        }, wait);
        unrefTimer(timer);
        late.wake = (restart) => {
          late.woken = true;
          late.restart ||= restart;
          clearTimeout(timer);
          resolve();
        };
      });
      late.wake = (restart) => {
        late.woken = true;
        late.restart ||= restart;
      };
      onSchedule = expired;
      if (late.restart) {
        tries = 0;
        gap = first;
        onSchedule = true;
      }
    }
  }

  /**
   * Releases `record` when the token that holds it is one of this process's late releases — a reservation or takeover
   * the guard gave up on, under which no handler runs — as the release loop would on its next try. Answers `released`;
   * `refused` when the token holds the record no more (another retry freed it, or it moved on: the caller's read is
   * stale); `undefined` when the token is not a late release's or the store failed. A retry that meets such a record
   * no longer waits for that try (a chaos review's: 45 retries of one key heard 409 abandoned over 45 s after a
   * PostgreSQL outage, the handler never run). A release that fails leaves the loop to its schedule; one refused wakes
   * it to settle the token.
   */
  async function freeGivenUp(record: IdempotencyRecord): Promise<'released' | 'refused' | undefined> {
    if (record.state !== 'in_progress') return undefined;
    const late = lateReleases.get(record.id);
    const t = late?.tokens.get(record.leaseToken);
    if (late === undefined || t === undefined) return undefined;
    const news = t.news;
    let released: boolean;
    try {
      released = await bounded(store.release(record.id, record.leaseToken));
    } catch {
      // The store failed again: the loop tries on its own schedule. Woken with a restart here, every retry had set its
      // gap back to the first, the backoff undone for as long as a client kept retrying.
      return undefined;
    }
    if (!released) {
      // Refused: the token holds the record no more. The loop's next try, now, reads what does and settles the token.
      late.wake(false);
      return 'refused';
    }
    // As the loop settles a token: one told more meanwhile (its call answered that it made the record) stays for it.
    if (late.tokens.get(record.leaseToken) === t && t.news === news) {
      dropLate(late, record.leaseToken);
      if (logging && performance.now() - t.since >= contract.leaseMs) log({ decision: 'released', keyId: record.id, state: 'in_progress' }, t.requestId);
      // Its last token: the loop ends now rather than when its timer fires (up to FREE_LATE_MAX_GAP_MS later).
      if (late.tokens.size === 0) late.wake(false);
    }
    return 'released';
  }

  /**
   * Tries a completion the guard is retrying in the background once more, at once; answers the record when it is then
   * completed under that completion's token, else `undefined` (the background retries go on).
   */
  async function completeNow(id: string, completing: { readonly token: string; readonly input: CompleteInput }): Promise<IdempotencyRecord | undefined> {
    try {
      await bounded(store.complete(id, completing.token, completing.input));
      const latest = await bounded(store.get(id));
      return latest !== undefined && latest.state === 'completed' && latest.leaseToken === completing.token ? latest : undefined;
    } catch {
      return undefined;
    }
  }

  /** One try of {@link freeLate}: a read of the record, and the release of the token that holds it. */
  async function tryLate(id: string, late: LateRelease): Promise<void> {
    // What was known of each token when the record was read: one told more since (see `lateRelease`) stays.
    const seen = new Map([...late.tokens].map(([token, t]) => [token, t.news]));
    const settled = (token: string): boolean => {
      if (late.tokens.get(token)?.news !== seen.get(token)) return false;
      dropLate(late, token);
      return true;
    };
    let record: IdempotencyRecord | undefined;
    try {
      record = await bounded(store.get(id));
    } catch {
      return;
    }
    const holder = record !== undefined && record.state === 'in_progress' ? record.leaseToken : undefined;
    for (const token of seen.keys()) {
      const t = late.tokens.get(token);
      if (t === undefined) continue;
      const pastLease = performance.now() - t.since >= contract.leaseMs;
      if (token === holder) {
        let released: boolean;
        try {
          released = await bounded(store.release(id, token));
        } catch {
          continue;
        }
        // Refused: the record moved on since the read (an earlier release of this token that landed late, a
        // takeover) — the next read tells which, and what to log.
        if (!released) continue;
        if (settled(token) && logging && pastLease) log({ decision: 'released', keyId: id, state: 'in_progress' }, t.requestId);
        continue;
      }
      // Nothing of this token's to free — unless its reservation may still land: a call not yet answered (until it
      // answers or its TTL passes: a half-open socket or a server-side lock wait may apply it after the lease), or one
      // that failed (a client's command timeout leaves the command queued at the server), within its lease.
      if (t.mode === 'unanswered' || (t.mode === 'failed' && !pastLease)) continue;
      // `fenced` only when another token holds it: a record gone was freed (or purged), not taken.
      if (settled(token) && logging && pastLease && t.mode === 'landed' && record !== undefined) log({ decision: 'fenced', keyId: id, state: 'in_progress' }, t.requestId);
    }
  }

  /**
   * Runs a fenced store call until it answers, a quarter of the lease apart, within the lease; resolves to its answer,
   * or `undefined` when every attempt failed. Never rejects.
   */
  async function withinLease<T>(call: () => Promise<T>, attempt = 1): Promise<T | undefined> {
    for (; ; attempt++) {
      try {
        return await bounded(call());
      } catch {
        if (attempt >= FREE_LATE_ATTEMPTS) return undefined;
        await leaseGap();
      }
    }
  }

  /**
   * Runs a fenced store call until it answers, at gaps doubling from a quarter of the lease to
   * {@link FREE_LATE_MAX_GAP_MS} (each wait drawn between half the gap and all of it), until the TTL counted from
   * `since` has passed; resolves to its answer, or `undefined` when every attempt failed. Never rejects.
   */
  async function untilTtl<T>(call: () => Promise<T>, since: number): Promise<T | undefined> {
    const until = since + contract.ttlMs;
    for (let gap = Math.min(FREE_LATE_MAX_GAP_MS, quarterLease); ; gap = Math.min(gap * 2, FREE_LATE_MAX_GAP_MS)) {
      const wait = jittered(gap);
      if (performance.now() + wait > until) return undefined;
      await new Promise<void>((resolve) => unrefTimer(setTimeout(resolve, wait)));
      try {
        return await bounded(call());
      } catch {
        // Still down: wait longer.
      }
    }
  }

  /** A quarter of the lease (at least {@link FREE_LATE_MIN_GAP_MS}): the gap between {@link withinLease}'s attempts. */
  function leaseGap(): Promise<void> {
    return new Promise<void>((resolve) => unrefTimer(setTimeout(resolve, quarterLease)));
  }

  // Not async: the reservation's own promise is the answer, with no async frame and no extra turn around it.
  // Never throws: whatever the request's own getters throw comes back as a rejection, as from an async function.
  function beginInternal(req: GuardRequest): Promise<Begun> {
    try {
      return beginNow(req);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * The request without its request id when that id is the raw key — read from the key header itself (a contract
   * keyed on `X-Request-Id`, the adapters' default request-id header), or a client that sends its key as its request
   * id too, whatever the key's place: it would put the raw key in every log event.
   */
  function withoutKeyAsRequestId(request: GuardRequest): GuardRequest {
    if (request.requestId === undefined) return request;
    let raw: unknown;
    if (keyHeader !== undefined) raw = own(request.headers, keyHeader);
    else if (keyTokens === undefined) raw = own(request.query, contract.key.name);
    else {
      const field = resolveJsonPointer(request.body, keyTokens);
      raw = field.found ? field.value : undefined;
    }
    const id = request.requestId.toLowerCase();
    const holdsKey = (text: string): boolean => keyTexts(text).some((key) => carriesKey(id, key.toLowerCase()));
    const isKey = typeof raw === 'string' ? holdsKey(raw) : Array.isArray(raw) && raw.some((item) => typeof item === 'string' && holdsKey(item));
    return isKey ? withoutRequestId(request) : request;
  }

  /**
   * Whether a request id (lower-cased) carries the key `key` (lower-cased): equal to it, or — for a key of 6 characters
   * or more — holding it (`req-<key>`, `"<key>"`), as a client that derives its request id from the key sends it. A
   * shorter key inside an id is more likely chance than derivation, and dropping every id that holds one would lose them.
   */
  function carriesKey(id: string, key: string): boolean {
    if (key === '') return false;
    return id === key || (key.length >= 6 && id.includes(key));
  }

  /** The texts a key value may be logged as: as sent, trimmed, and the key inside an RFC 9651 quoted string (`"k"`). */
  function keyTexts(raw: string): string[] {
    const trimmed = raw.trim();
    const quoted = trimmed.length >= 2 && trimmed.startsWith('"') && trimmed.endsWith('"');
    return quoted ? [raw, trimmed, trimmed.slice(1, -1).replace(/\\(["\\])/g, '$1')] : [raw, trimmed];
  }

  function beginNow(request: GuardRequest): Promise<Begun> {
    const req = withoutKeyAsRequestId(request);
    const prep = prepare(req);
    if (prep.kind === 'respond') return Promise.resolve(prep);
    if (prep.kind === 'unguarded') return Promise.resolve({ kind: 'proceed', reservation: unguarded(req.requestId), headers: {}, idempotencyKey: undefined });
    return reserveAndClassify(req, prep, true);
  }

  async function release(reservation: Reservation, decision: 'released' | 'rolled-back', status?: number): Promise<void> {
    try {
      const released = await bounded(store.release(reservation.recordId!, reservation.token!));
      if (logging) log({ decision: released ? decision : 'fenced', keyId: reservation.recordId!, state: 'in_progress', ...(status !== undefined ? { status } : {}) }, reservation.requestId);
    } catch {
      if (logging) log({ decision: 'record-failed', keyId: reservation.recordId!, state: 'in_progress' }, reservation.requestId);
      // No handler runs under the token any more: released later, as a reservation the guard gave up on is (a review's:
      // one failed release after a 429 left the key at 409 in progress, then abandoned for good, nothing running).
      lateRelease(reservation.recordId!, reservation.token!, reservation.requestId, 'landed');
    }
  }

  async function complete(reservation: Reservation, sent: GuardResponse): Promise<void> {
    if (!reservation.guarded) return;
    const heartbeats = stopRenewal(reservation);
    const keyId = reservation.recordId!;
    if (transient.has(sent.status)) return release(reservation, 'released', sent.status);
    if (sent.status >= 500) {
      // A 5xx may follow a write that happened: keep the reservation for reconciliation.
      if (logging) log({ decision: 'kept', keyId, state: 'in_progress', status: sent.status }, reservation.requestId);
      return endLease(reservation, heartbeats);
    }
    const input = toStored(sent);
    try {
      const done = await bounded(store.complete(keyId, reservation.token!, input));
      if (logging) await logCompletion(reservation, input, done);
    } catch {
      if (logging) log({ decision: 'record-failed', keyId, state: 'in_progress', status: sent.status }, reservation.requestId);
      // The answer goes out now; the completion is tried again behind it, a quarter of the lease apart, its lease renewed
      // meanwhile (so no duplicate hears "abandoned", nor runs reconciliation, while it is still being recorded), and
      // fenced on the token (a takeover after a lapsed lease makes it change nothing). A short outage — a failover, a
      // restart — then no longer strands every request in flight at 409 until reconciliation: the retry replays.
      // Past the lease too, at the late releases' doubling gaps until the TTL (a chaos review's PostgreSQL runs left
      // 2-7 keys whose effect had run at 409 abandoned for good when every try within the lease failed): the record,
      // abandoned meanwhile, is completed once the store is back, unless a reconcile verdict or a takeover came first
      // (then the completion is fenced, and logged so).
      startRenewal(keyId, reservation.token!);
      const since = performance.now();
      const token = reservation.token!;
      const completing = { token, input };
      pendingCompletions.set(keyId, completing);
      const completeAgain = () => store.complete(keyId, token, input);
      // Past the lease, a try first reads the record: once it is no longer in progress under this token (an attempt the
      // guard gave up on that the store applied, a verdict, a takeover) there is nothing left to try, and the refusal
      // is logged by what the record holds.
      const completeIfOurs = async (): Promise<boolean> => {
        const record = await store.get(keyId);
        return record !== undefined && record.state === 'in_progress' && record.leaseToken === token ? completeAgain() : false;
      };
      void leaseGap()
        .then(() => withinLease(completeAgain, 2))
        .then((done) => {
          if (done !== undefined) return done;
          // Past the lease the record is left to look abandoned (a duplicate goes to reconciliation): a completion
          // the store refuses for good while it renews the lease would otherwise hold every retry at 409 in progress.
          stopRenewal(reservation);
          return untilTtl(completeIfOurs, since);
        })
        .then(async (done) => {
          stopRenewal(reservation);
          if (pendingCompletions.get(keyId) === completing) pendingCompletions.delete(keyId);
          if (logging) await logCompletion(reservation, input, done);
        });
    }
  }

  /**
   * Logs how a completion went — `done`: what the store answered, `undefined` when no attempt got an answer. `completed`:
   * recorded, or refused because it is recorded already with this very answer under this request's token (an attempt
   * the guard gave up on that the store applied late, a store client that resent the command after a reconnect; the
   * token alone is no proof: a reconcile verdict settles a lapsed record under its owner's token). `fenced`: another
   * request took the record over, or settled it with another answer. `record-lost`: the record is gone — a store that
   * lost its data (Redis restarted without persistence) or someone deleted it; a retry would run the effect again.
   * `record-failed`: the record is still this request's and in progress (`gave-up`: every attempt failed), or the store
   * could not be read to tell which (`unverified` after a refusal, `gave-up` after no answer).
   */
  async function logCompletion(reservation: Reservation, input: CompleteInput, done: boolean | undefined): Promise<void> {
    const keyId = reservation.recordId!;
    const record = done === true ? null : await bounded(store.get(keyId)).catch((): null => null);
    let decision: GuardDecisionName;
    let reason: GuardLogEvent['reason'];
    if (done === true) decision = 'completed';
    else if (record === undefined) decision = 'record-lost';
    else if (record !== null && record.state === 'completed' && record.leaseToken === reservation.token && sameAnswer(record, input)) decision = 'completed';
    else if (record !== null && (record.state === 'completed' || record.leaseToken !== reservation.token)) decision = 'fenced';
    else {
      decision = 'record-failed';
      reason = record === null && done === false ? 'unverified' : 'gave-up';
    }
    log(
      {
        decision,
        keyId,
        state: record === undefined ? 'absent' : 'in_progress',
        status: input.response.status,
        ...(input.resultId !== undefined ? { resultId: input.resultId } : {}),
        ...(reason !== undefined ? { reason } : {}),
      },
      reservation.requestId,
    );
  }

  async function abort(reservation: Reservation, info: AbortInfo): Promise<void> {
    if (!reservation.guarded) return;
    if (info.handlerRunning === true && !info.rolledBack) {
      // Still at work: its lease is renewed on (up to leaseRenewalMaxMs), as for any running handler, so neither a
      // duplicate nor reconciliation takes it over beside the handler.
      if (logging) log({ decision: 'kept', keyId: reservation.recordId!, state: 'in_progress' }, reservation.requestId);
      return;
    }
    const heartbeats = stopRenewal(reservation);
    if (info.rolledBack) return release(reservation, 'rolled-back');
    if (logging) log({ decision: 'kept', keyId: reservation.recordId!, state: 'in_progress' }, reservation.requestId);
    endLease(reservation, heartbeats);
  }

  /**
   * A kept reservation of a local effect whose handler has finished: its lease ends now, so a retry goes to
   * reconciliation (or 409 abandoned) at once instead of hearing "still being processed" until the lease runs
   * out. An external effect keeps its lease (a provider may still act). Not awaited by the answer: the 5xx goes
   * out at once; the heartbeats still on their way land first (however late), so none renews the lease after
   * it ended. Best effort: if the store cannot say it, or a heartbeat never lands, the lease runs out by itself.
   */
  function endLease(reservation: Reservation, heartbeats: ReadonlySet<Promise<void>> | undefined): void {
    const extend = store.extend;
    if (extend === undefined || contract.effect.external) return;
    const end = () => bounded(extend.call(store, reservation.recordId!, reservation.token!, 0));
    const ended = heartbeats === undefined || heartbeats.size === 0 ? end() : Promise.allSettled([...heartbeats]).then(end);
    ended.catch(() => {
      if (logging) log({ decision: 'record-failed', keyId: reservation.recordId!, state: 'in_progress' }, reservation.requestId);
    });
  }

  async function handleInTransaction(request: GuardRequest, handler: (ctx: HandlerContext<Tx>) => Promise<GuardResponse>): Promise<GuardResponse> {
    if (!isTransactionalStore<Tx>(store)) {
      throw new StoreError('unsupported', 'one-transaction mode needs a transactional store (PostgreSQL or SQLite)');
    }
    const refusal = transactionRefusal(contract, store);
    if (refusal !== undefined) throw new TypeError(refusal);
    const req = withoutKeyAsRequestId(request);
    const prep = prepare(req);
    if (prep.kind === 'respond') return prep.response;
    if (prep.kind === 'unguarded') return handler({ reservation: unguarded(req.requestId), tx: undefined, idempotencyKey: undefined });

    type Outcome =
      | { kind: 'existing'; result: ReserveResult }
      | { kind: 'done'; response: GuardResponse; committed: boolean; resultId?: string }
      | { kind: 'gave-up' }
      | { kind: 'commit-late' };
    // Set by the wait below: bounds the transaction's end (the completion and COMMIT, or the rollback) once the handler
    // returned or threw.
    let handlerReturned = (): void => {};
    let entered = false;
    let gaveUp = false;
    let handlerFailed = false;
    let handlerError: unknown;
    let handlerStarted = false;
    // 409 + Retry-After 1 s: the key was busy (a lock wait timed out, or the record changed hands); the retry reserves anew.
    const retrySoon = (): Respond => inProgress(prep.recordId, 1000, 0, req.requestId);
    const input = reserveInput(prep);
    const work = store.withReservation<Outcome>(
      input,
      async (reserved, tx) => {
        if (gaveUp) return { commit: false, value: { kind: 'gave-up' } };
        entered = true;
        if (reserved.outcome === 'existing') return { commit: false, value: { kind: 'existing', result: reserved } };
        const reservation = reservationOf(prep.recordId, input.token, req.requestId);
        let response: GuardResponse;
        handlerStarted = true;
        try {
          response = await handler({ reservation, tx, idempotencyKey: prep.key });
        } catch (error) {
          handlerFailed = true;
          handlerError = error;
          // Its rollback is bounded as a commit is: a stalled database answers outcome-unknown, not a hang.
          handlerReturned();
          throw error;
        }
        handlerReturned();
        // Transient and 5xx answers roll the business writes back with the reservation: nothing happened, the key is free.
        if (transient.has(response.status) || response.status >= 500) return { commit: false, value: { kind: 'done', response, committed: false } };
        const completion = toStored(response);
        return {
          commit: true,
          complete: completion,
          value: { kind: 'done', response, committed: true, ...(completion.resultId !== undefined ? { resultId: completion.resultId } : {}) },
        };
      },
      // A duplicate's lock wait ends with the guard's own (a lock-timeout: 409 + Retry-After), freeing its connection.
      { lockWaitMs: txWaitMs },
    );

    let outcome: Outcome;
    try {
      outcome = await new Promise<Outcome>((resolve, reject) => {
        // Bound the wait for the reservation (a lock held by a duplicate, or a dead store) and, once the handler has
        // returned, the wait for the transaction's end (a stalled database, a connection silently gone); never the handler.
        const timer = setTimeout(() => {
          if (!entered) {
            gaveUp = true;
            resolve({ kind: 'gave-up' });
          }
        }, storeTimeoutMs + txWaitMs);
        let late: ReturnType<typeof setTimeout> | undefined;
        handlerReturned = () => {
          late = setTimeout(() => resolve({ kind: 'commit-late' }), storeTimeoutMs);
        };
        const settled = (): void => {
          clearTimeout(timer);
          if (late !== undefined) clearTimeout(late);
        };
        work.then(
          (value) => {
            settled();
            resolve(value);
          },
          (error: unknown) => {
            settled();
            reject(error);
          },
        );
      });
    } catch (error) {
      // The handler's own error, its transaction rolled back (the store's error instead — the rollback failed, or the
      // handler had committed through `tx` — goes to outcome-unknown below).
      if (handlerFailed && error === handlerError) {
        const gaveUpOn = isHandlerGivenUp(error);
        if (logging) log({ decision: 'rolled-back', keyId: prep.recordId, state: 'in_progress', ...(gaveUpOn ? { reason: 'gave-up' as const } : {}) }, req.requestId);
        // Given up by its adapter (it did not answer within the one-transaction bound, or its streamed answer's client
        // left): the guard's own answer, as under every framework, not the app's error path — a handler that may still
        // be running must find its late answer refused, and its client learns what a retry means.
        if (gaveUpOn) return givenUp(req).response;
        throw error;
      }
      if (error instanceof StoreError && error.kind === 'lock-timeout') {
        return retrySoon().response;
      }
      // Once the handler has run, a failed commit leaves the outcome unknown (a lost COMMIT reply may have
      // committed; an external call may have happened even if it rolled back): never "store unavailable",
      // which tells clients the handler never ran, and never fail-open (it would run the handler again).
      if (handlerStarted) return outcomeUnknown(req, prep.recordId, error).response;
      // Never fail open here either: a reservation that failed may have been waiting for a duplicate's open
      // transaction on this very key (PostgreSQL's statement_timeout or a serialization failure, SQLite's busy
      // timeout on another connection), so running unguarded would repeat the effect beside it.
      return storeUnavailableResponse(req, prep.recordId, error).response;
    }
    // The handler ran and its transaction has not ended within storeTimeoutMs: it may still commit (a retry then
    // finds the record completed) or roll back (a retry runs the handler again, its writes undone). Unknown, not a hang.
    if (outcome.kind === 'commit-late') return outcomeUnknown(req, prep.recordId, new StoreError('unavailable', 'the transaction did not end in time')).response;
    if (outcome.kind === 'gave-up') {
      // Never fail open here: the wait may be a duplicate's open transaction holding this very key (a row lock,
      // SQLite's write lock, the connection's queue), so running unguarded would repeat the effect beside it.
      return storeUnavailableResponse(req, prep.recordId, new StoreError('unavailable', 'the reservation did not answer in time')).response;
    }
    if (outcome.kind === 'existing') {
      // If the record goes away while this request waits (its holder's transient answer released the key), answer
      // "retry" (409 + Retry-After): reserving again here would run the handler outside the transaction, without its
      // `tx`, and a store failure there would fail open beside whoever reserves the key next.
      const begun = await classify(req, prep, outcome.result, true, async () => retrySoon());
      if (begun.kind === 'respond') return begun.response;
      // A reconciliation takeover: the abandoned record is this request's now, but outside any transaction, where the
      // handler would run without its `tx`. Nothing ran under it: give it back and answer 409 + Retry-After, so the
      // retry reserves inside a transaction.
      await abort(begun.reservation, { rolledBack: true });
      return retrySoon().response;
    }
    if (logging) log(
      {
        decision: outcome.committed ? 'completed' : 'rolled-back',
        keyId: prep.recordId,
        state: 'in_progress',
        status: outcome.response.status,
        ...(outcome.resultId !== undefined ? { resultId: outcome.resultId } : {}),
      },
      req.requestId,
    );
    return withHeaders(outcome.response, firstHeaders);
  }

  async function runHandler(begun: Extract<Begun, { kind: 'proceed' }>, handler: (ctx: HandlerContext<Tx>) => Promise<GuardResponse>): Promise<GuardResponse> {
    let response: GuardResponse;
    try {
      response = await handler({ reservation: begun.reservation, tx: undefined, idempotencyKey: begun.idempotencyKey });
    } catch (error) {
      await abort(begun.reservation, { rolledBack: false, error });
      throw error;
    }
    await complete(begun.reservation, response);
    return withHeaders(response, begun.headers);
  }

  return {
    // A Begun is a Decision already: handed out as it is.
    begin: beginInternal,
    complete,
    abort,
    async handle(req, handler, opts) {
      if (opts?.transaction === true) return handleInTransaction(req, handler);
      const begun = await beginInternal(req);
      if (begun.kind === 'respond') return begun.response;
      return runHandler(begun, handler);
    },
    refuse(request) {
      // A key in the body needs the body; a missing optional key is no refusal (the request runs unguarded).
      if (keyTokens !== undefined) return undefined;
      const req = withoutKeyAsRequestId(request);
      if (!contract.key.required && readKey(req).kind === 'missing') return undefined;
      const prep = prepare(req, true);
      return prep.kind === 'respond' ? prep.response : undefined;
    },
    status,
    recordId(req) {
      const parsed = readKey(req);
      if (parsed.kind !== 'valid') return undefined;
      const scopeValues = scopeOf(req, true);
      return Array.isArray(scopeValues) ? recordIdOf(scopeValues, parsed.key) : undefined;
    },
  };

  async function status(request: GuardRequest): Promise<GuardResponse | undefined> {
    // A GET has no body to carry a body key in: the status route's own input names the intent. And a key alone is
    // no credential: without the caller in the scope, whoever knows (or guesses) a key would read its stored answer,
    // where a POST would at least need the same payload — the route's own handler answers then.
    if (keyTokens !== undefined || !scopedByPrincipal) return undefined;
    const req = withoutKeyAsRequestId(request);
    const parsed = readKey(req);
    if (parsed.kind === 'missing') return undefined;
    if (parsed.kind === 'invalid') return invalidKey(parsed.detail, req.requestId).response;
    const scopeValues = scopeOf(req);
    if (!Array.isArray(scopeValues)) return scopeValues.response;
    const recordId = recordIdOf(scopeValues, parsed.key);
    let record: IdempotencyRecord | undefined;
    let now: number;
    try {
      record = await bounded(store.get(recordId));
      now = await bounded(store.now());
    } catch (error) {
      return storeUnavailableResponse(req, recordId, error).response;
    }
    // A completed record past its retention counts as gone, as it does for a reservation (which would run anew).
    if (record === undefined || (record.state === 'completed' && record.expiresAt <= now)) {
      if (logging) log({ decision: 'not-found', keyId: recordId, status: 404, via: 'status' }, req.requestId);
      const detail =
        'No request with this key was recorded for you: none reached this service, one is still running in a transaction not yet committed, ' +
        'or its record outlived the time records are kept. Within that time, sending the same intent again with this key runs it at most once.';
      return problemResponse('idempotency-key-unknown', 404, detail, {}, req.requestId);
    }
    if (record.state === 'completed') return replay(record, req.requestId, 'status').response;
    if (record.leaseUntil > now) return inProgress(record.id, record.leaseUntil - now, now - record.createdAt, req.requestId, 'status').response;
    return abandoned(record, req.requestId, 'status').response;
  }
}

/** What `prepare` answers with `refusalOnly` for a request it does not refuse. */
const NOT_REFUSED = { kind: 'unguarded' } as const;

/**
 * What is known of a token in a late release: `unanswered` — its call has not settled (it may still make the record);
 * `landed` — the store's late answer said it made the record; `failed` — its call failed, and may or may not have.
 */
type LateMode = 'unanswered' | 'landed' | 'failed';

/** One record's late release: the tokens still to free, and how to cut its wait short when one is added. */
interface LateRelease {
  readonly tokens: Map<string, { mode: LateMode; readonly requestId: string | undefined; readonly since: number; news: number }>;
  /** Cuts the wait short for a try at once; `restart`: and begins the schedule again. */
  wake: (restart: boolean) => void;
  woken: boolean;
  restart: boolean;
}

/**
 * The log's `storeError` field: a store error's kind and the code of what caused it (a SQLSTATE, an errno or SQLite
 * code, a Redis error's first word) — short tokens that quote no data; `timeout` for no answer in time.
 */
function storeErrorField(error: unknown): { storeError?: string } {
  if (!(error instanceof StoreError)) return {};
  const cause = error.cause as { code?: unknown; message?: unknown } | null | undefined;
  let code: string | undefined;
  if (typeof cause?.code === 'string' && /^[A-Za-z0-9_]{1,40}$/.test(cause.code)) code = cause.code;
  else if (typeof cause?.message === 'string') code = /^([A-Z][A-Z_]{2,30})\b/.exec(cause.message)?.[1];
  else if (cause === undefined && /did not (?:answer|end)/.test(error.message)) code = 'timeout';
  return { storeError: code === undefined ? error.kind : `${error.kind} ${code}` };
}

/** A wait drawn between half `gap` and all of it: tries an outage left behind spread out instead of coming in one burst. */
function jittered(gap: number): number {
  return gap / 2 + Math.random() * (gap / 2);
}

/** How many times a late release or a completion is tried within the lease (see `freeLate`, `withinLease`). */
const FREE_LATE_ATTEMPTS = 4;

/** The longest delay a timer takes (2^31 - 1 ms, about 24.8 days): a longer one fires at once. */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * A time bound from the options: `fallback` when not given (or `null`); with `unbounded`, `Infinity` for no bound. Anything else but a positive number of milliseconds a timer can wait throws a `TypeError` at
 * start-up: `NaN`, a negative or an overlong bound would each become a 1 ms timer, and every call would time out.
 */
function durationOption(name: string, value: number | null | undefined, fallback: number, unbounded: boolean): number {
  if (value === undefined || value === null) return fallback;
  if (typeof value === 'number' && value > 0 && value <= MAX_TIMER_MS) return value;
  if (unbounded && value === Infinity) return Infinity;
  const got = typeof value === 'number' ? String(value) : `${typeof value} ${JSON.stringify(value) ?? String(value)}`;
  throw new TypeError(`${name} must be a number of milliseconds above 0 and at most ${MAX_TIMER_MS}${unbounded ? ', or Infinity for no bound' : ''}; got ${got}`);
}

/** A count from the options: `fallback` when not given (or `null`); a whole number ≥ 0 or `Infinity`, else a `TypeError` at start-up. */
function countOption(name: string, value: number | null | undefined, fallback: number): number {
  if (value === undefined || value === null) return fallback;
  if (typeof value === 'number' && (Number.isSafeInteger(value) || value === Infinity) && value >= 0) return value;
  const got = typeof value === 'number' ? String(value) : `${typeof value} ${JSON.stringify(value) ?? String(value)}`;
  throw new TypeError(`${name} must be a whole number of 0 or more, or Infinity for no bound; got ${got}`);
}

/** Default of `lateReleaseLimit`: about 9 MB of tokens, and at most about 100 MB with every token for another record. */
const DEFAULT_LATE_RELEASE_LIMIT = 50_000;

/**
 * A new lease token: a random UUID, made flat. Node builds `randomUUID()`'s string by concatenation, a rope of 14
 * parts (about 520 bytes) that a late release would hold for each failed request of an outage; flat, about 96.
 */
function newToken(): string {
  const token = randomUUID();
  // Reading a character flattens the rope in place (V8); the parts are garbage from here on.
  token.charCodeAt(0);
  return token;
}

/** Default of `reconcileTimeoutMs`: long enough for a provider lookup, short of a client's usual per-attempt timeout. */
const DEFAULT_RECONCILE_TIMEOUT_MS = 5000;

/** {@link askReconcile}'s answers when the hook gave no verdict. */
const HOOK_THREW = Symbol('threw');
const HOOK_TIMED_OUT = Symbol('timeout');

/**
 * A verdict's answer as a handler's is recorded (the adapters decode those): a body under a `Content-Encoding` the guard
 * can undo (gzip, deflate, br) decoded and the header dropped. A body the outermost coding does not take was decoded
 * already — a provider's answer read with `fetch`, whose `arrayBuffer()` is decoded while its headers still say `gzip`
 * — and only the header goes: kept, every replay would be unreadable. A coding it cannot undo (zstd), a body that would
 * inflate past 16 MiB or one corrupt inside is recorded as it came, with its header. Run on the checked copy, after the
 * hook's bound: a verdict that came too late is never decoded, and decoding never counts against the hook.
 */
async function identityVerdict(response: GuardResponse): Promise<GuardResponse> {
  const names = Object.keys(response.headers).filter((field) => field.toLowerCase() === 'content-encoding');
  if (names.length === 0) return response;
  // The same field under two spellings (`Content-Encoding` and `content-encoding`) must say one thing to be undone.
  const encoding = response.headers[names[0]!]!;
  if (names.some((name) => response.headers[name] !== encoding)) return response;
  const decoding = await decodeCodings(response.body, encoding);
  if (decoding.kind !== 'decoded' && decoding.kind !== 'not-encoded') return response;
  const headers: Record<string, string> = {};
  for (const name of Object.keys(response.headers)) if (!names.includes(name)) headers[name] = response.headers[name]!;
  return { status: response.status, headers, body: decoding.kind === 'decoded' ? decoding.body : response.body };
}

/**
 * Whether a record holds the answer `input` would record: the same status, recorded headers, body bytes and result id.
 * An empty 201 or 202 tells its resource by `Location` or result id alone.
 */
function sameAnswer(record: IdempotencyRecord, input: CompleteInput): boolean {
  const stored = record.response;
  const sent = input.response;
  if (stored === undefined || record.resultId !== input.resultId || stored.status !== sent.status || stored.body.byteLength !== sent.body.byteLength) return false;
  const names = Object.keys(sent.headers);
  if (Object.keys(stored.headers).length !== names.length || names.some((name) => stored.headers[name] !== sent.headers[name])) return false;
  for (let i = 0; i < sent.body.byteLength; i += 1) if (stored.body[i] !== sent.body[i]) return false;
  return true;
}

/** A field value Node sends: no CR, LF, NUL or other control, nothing past Latin-1. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * A reconcile hook's return value read once into a verdict the guard can act on — `{outcome: 'unknown' |
 * 'not-happened'}`, or `{outcome: 'completed'}` with a `response` the record can hold (an integer status 200-599, header
 * fields Node can send, a `Uint8Array` body) and a string `resultId` if any — or `'invalid-verdict'`, also when reading
 * it throws (a getter, a proxy). Checked before the store is asked: a body that is no byte array would fail inside the
 * store as an outage (503) or the guard as a 500, and a header value Node refuses would make every replay a 500.
 */
function verdictOf(answer: unknown): ReconcileVerdict | 'invalid-verdict' {
  try {
    if (typeof answer !== 'object' || answer === null) return 'invalid-verdict';
    const { outcome } = answer as { outcome?: unknown };
    if (outcome === 'unknown' || outcome === 'not-happened') return { outcome };
    if (outcome !== 'completed') return 'invalid-verdict';
    const { response, resultId } = answer as { response?: unknown; resultId?: unknown };
    if (resultId !== undefined && typeof resultId !== 'string') return 'invalid-verdict';
    if (typeof response !== 'object' || response === null) return 'invalid-verdict';
    const { status, headers, body } = response as { status?: unknown; headers?: unknown; body?: unknown };
    if (typeof status !== 'number' || !Number.isInteger(status) || status < 200 || status > 599) return 'invalid-verdict';
    if (!(body instanceof Uint8Array)) return 'invalid-verdict';
    if (typeof headers !== 'object' || headers === null || Array.isArray(headers)) return 'invalid-verdict';
    // A fetch `Headers` (a provider's answer passed on as it came) is read by its entries.
    let entries: [string, unknown][];
    if (typeof Headers === 'function' && headers instanceof Headers) {
      entries = [];
      headers.forEach((value, name) => entries.push([name, value]));
    } else {
      entries = Object.entries(headers as Record<string, unknown>);
    }
    const fields: Record<string, string> = {};
    for (const [name, value] of entries) {
      if (typeof value !== 'string' || !HEADER_NAME.test(name) || !FIELD_VALUE.test(value)) return 'invalid-verdict';
      fields[name] = value;
    }
    const copy: GuardResponse = { status, headers: fields, body };
    return typeof resultId === 'string' ? { outcome, response: copy, resultId } : { outcome, response: copy };
  } catch {
    return 'invalid-verdict';
  }
}

/** The least time between two tries of a late release or a completion. */
const FREE_LATE_MIN_GAP_MS = 50;

/** The longest gap between a late reservation's releases past its lease (5 min). */
const FREE_LATE_MAX_GAP_MS = 300_000;

/**
 * Node's and Bun's timers (and Deno's) are objects with `ref`/`unref`; the web's are numbers (Cloudflare Workers, Vercel
 * Edge, browsers), where a process-lifetime hint means nothing. Calling `unref()` on a number threw inside a store
 * call's settlement, so its promise never settled: every request hung.
 */
export function unrefTimer(timer: unknown): void {
  const unref = (timer as { unref?: unknown } | undefined)?.unref;
  if (typeof unref === 'function') unref.call(timer);
}

function refTimer(timer: unknown): void {
  const ref = (timer as { ref?: unknown } | undefined)?.ref;
  if (typeof ref === 'function') ref.call(timer);
}

/** `record[name]` when it is the record's own member (never an `Object.prototype` one such as `constructor`). */
function withoutRequestId(req: GuardRequest): GuardRequest {
  const { requestId: _dropped, ...rest } = req;
  return rest;
}

/**
 * The principal hook's answer as the owner id the record is scoped by: a non-blank string, a finite number (hashed
 * as a number, as it always was: records made before stay found), or a bigint as its decimal text. None
 * (`undefined`, `null`, blank) is `undefined`: 400 scope unresolved. Anything else (an ObjectId, a URL, a user
 * object) would hash as its JSON — `{}` for most classes, one scope for every owner, each replaying the others'
 * answers — so it is refused with a `TypeError`.
 */
function principalOf(value: unknown): string | number | undefined {
  if (typeof value === 'string') return value.trim() === '' ? undefined : value;
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  if (typeof value === 'bigint') return String(value);
  const kind = typeof value === 'object' ? (Object.getPrototypeOf(value) as { constructor?: { name?: string } } | null)?.constructor?.name ?? 'object' : typeof value;
  const what = typeof value === 'number' ? String(value) : typeof value !== 'object' ? `a ${kind}` : kind === 'Object' || kind === 'object' ? 'a plain object' : `an object of class ${kind}`;
  throw new TypeError(`the principal hook returned ${what}, not the owner's id: return it as a string (e.g. String(user.id))`);
}

function own<T>(record: Readonly<Record<string, T>>, name: string): T | undefined {
  return Object.hasOwn(record, name) ? record[name] : undefined;
}

/** How far a client's clock may be off for `Repeatability-First-Sent` (at most a tenth of the TTL). */
const REPEAT_CLOCK_TOLERANCE_MS = 300_000;
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const IMF_FIXDATE = /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d{2}) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/;

/** An RFC 9110 IMF-fixdate (`Tue, 15 Nov 1994 08:12:31 GMT`) in ms, or `undefined` for anything else. */
function parseImfFixdate(text: string): number | undefined {
  const match = IMF_FIXDATE.exec(text.trim());
  if (match === null) return undefined;
  const [, day, month, year, hours, minutes, seconds] = match;
  const ms = Date.UTC(Number(year), MONTHS.indexOf(month!), Number(day), Number(hours), Number(minutes), Number(seconds));
  // 31 Feb and 25:00 roll over in Date.UTC: refuse them rather than read another date.
  return new Date(ms).getUTCDate() === Number(day) && Number(hours) < 24 && Number(minutes) < 60 && Number(seconds) < 61 ? ms : undefined;
}

/** OASIS Repeatable Requests headers (lower-case). */
const REPEATABILITY_FIRST_SENT = 'repeatability-first-sent';
const REPEATABILITY_RESULT = 'repeatability-result';

/** `Repeatability-Result` of a guard answer: refused requests are `rejected`; a duplicate of an accepted one, `accepted`. */
function repeatabilityResult(name: ProblemName): 'accepted' | 'rejected' | undefined {
  if (name === 'idempotency-request-in-progress' || name === 'idempotency-request-abandoned') return 'accepted';
  if (name === 'idempotency-store-unavailable' || name === 'idempotency-outcome-unknown') return undefined;
  return 'rejected';
}

function withHeaders(response: GuardResponse, headers: Readonly<Record<string, string>>): GuardResponse {
  return { status: response.status, headers: { ...response.headers, ...headers }, body: response.body };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * What the request carried for the query parameter `name`: its value(s), or — when it also came with bracketed
 * members (deepObject: `expand[0]=a&expand[1]=b`, `filter[status]=paid`, as Stripe's SDKs and generated clients
 * write them) — each bracketed suffix mapped to its value(s) and the bare value under `''`, so another list or
 * filter under the same key is another payload. Without bracketed members the value is taken as it is (the
 * fingerprint of such requests is unchanged).
 */
function queryValue(query: GuardRequest['query'], name: string): QueryValue | undefined {
  const plain = own(query, name);
  const prefix = `${name}[`;
  let members: Record<string, string | readonly string[]> | undefined;
  for (const key in query) {
    if (!key.startsWith(prefix) || !Object.prototype.hasOwnProperty.call(query, key)) continue;
    const value = query[key];
    if (value === undefined) continue;
    members ??= Object.create(null) as Record<string, string | readonly string[]>;
    members[key.slice(name.length)] = value;
  }
  if (members === undefined) return plain;
  if (plain !== undefined) members[''] = plain;
  return members;
}