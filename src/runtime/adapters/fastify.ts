/**
 * Fastify adapter: route-level hooks. `preHandler` runs the guard once the body is parsed (answering
 * 400/409/422/503 or a replay, or reserving the key); `onSend` records the payload exactly as serialized —
 * the handler's, or the error handler's — before it leaves, and marks it `Idempotent-Replayed: false`.
 *
 *     app.post('/v1/orders', { ...guards.createOrder.hooks }, handler)
 *
 * or every contracted route at once: `await app.register(idempotencyPlugin(Object.values(guards)))` before
 * the routes (which routes serve a contract: ./fastify-routes.ts). One-transaction mode:
 * `app.post('/v1/orders', guards.createOrder.transactional(handler))`. On a route of several methods a
 * guard runs only for its contract's method. Imports only Fastify's types, Node built-ins and the runtime
 * core; copied into users' generated code.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { Readable } from 'node:stream';
import type { CompiledContract } from '../contract.js';
import { createGuard, transactionRefusal, type Guard, type GuardRequest, type GuardResponse, type HandlerContext } from '../guard.js';
import { handlerGivenUp } from '../store.js';
import {
  bodyForFingerprint,
  bodyNotParsed,
  concatBytes,
  distinctFromRaw,
  identityAnswer,
  isRead,
  nodeHeaders,
  queryFromSearch,
  readsQuery,
  routerPathParams,
  searchOf,
  singleHeader,
  transactionBoundMs,
  type RouteGuardOptionsFor,
} from './common.js';
import { contractRoutes, nearMiss, normaliseBasePath, servesPath, type ContractRoutes, type RouteAddress } from './fastify-routes.js';

export { toFastifyPath } from './fastify-routes.js';

/** Options of a Fastify route guard: the guard core's options plus principal and request-id hooks on the request. */
export type RouteGuardOptions = RouteGuardOptionsFor<FastifyRequest>;

/** The `preHandler` hook of a guard. */
export type GuardPreHandler = (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
/** The `onSend` hook of a guard. */
export type GuardOnSend = (request: FastifyRequest, reply: FastifyReply, payload: unknown) => Promise<unknown>;

/** A route handler run inside the guard's transaction: its return value is the response body. */
export type TransactionalHandler<Tx> = (request: FastifyRequest, reply: FastifyReply, context: HandlerContext<Tx>) => Promise<unknown>;

/** A Fastify route guard. */
export interface RouteGuard {
  readonly contract: CompiledContract;
  /** The framework-agnostic guard underneath. */
  readonly guard: Guard;
  readonly preHandler: GuardPreHandler;
  readonly onSend: GuardOnSend;
  /** `{ preHandler, onSend }`, to spread into the route's options. */
  readonly hooks: { readonly preHandler: GuardPreHandler; readonly onSend: GuardOnSend };
  /**
   * One-transaction mode (SQLite, PostgreSQL stores): a route handler that runs `handler` inside the
   * transaction that reserved the key (`context.tx`); the business writes and the `completed` record commit
   * together, or roll back together on a 5xx, a transient status or a throw. Use it instead of `hooks`.
   * Throws a `TypeError` for an external effect without a provider key (see `transactionRefusal`).
   */
  transactional<Tx = unknown>(handler: TransactionalHandler<Tx>): (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
  /**
   * `preHandler` of the contract's status route (a `GET`: `app.get('/v1/payments/outcome', { preHandler:
   * guards.x.status }, handler)`): a request carrying this operation's key — in the same header, or the same query
   * parameter — is answered from the key's record in the caller's scope (the stored answer replayed, 409 in progress
   * or abandoned, 404 `idempotency-key-unknown`), never by the handler; one without the key goes on to the handler.
   */
  readonly status: GuardPreHandler;
}

interface RequestState {
  /** The guard that set it: another guard's hooks on the same route leave it alone. */
  owner: Guard;
  context: HandlerContext<unknown>;
  headers: Record<string, string>;
  /** Set once the response was recorded (or needs no recording). */
  settled: boolean;
  /** A replay's recorded body: what the guard's onSend puts back after the app's onSend hooks ran. */
  replay?: Uint8Array;
  /** A replay's recorded `Content-Encoding` (a body recorded as sent, in a coding the guard could not undo). */
  replayEncoding?: string;
  /** The handler's answer is being recorded (this guard's onSend awaits the store). */
  recording?: boolean;
}

const states = new WeakMap<FastifyRequest, RequestState>();

// Marks the handlers `transactional()` returns with their guard, so the plugin does not add hooks that would reserve twice.
const TRANSACTIONAL = Symbol.for('idemkit.fastify.transactional');

// The guard of each `preHandler` hook, so the plugin knows a route that already runs one.
const guardsByPreHandler = new WeakMap<GuardPreHandler, RouteGuard>();

/** The guard's context for a request (reservation, transaction, canonical key), or throws when no guard ran. */
export function idempotencyOf<Tx = unknown>(request: FastifyRequest): HandlerContext<Tx> {
  const state = states.get(request);
  if (state === undefined) throw new Error('no idempotency guard ran for this request: add the guard hooks to the route');
  return state.context as HandlerContext<Tx>;
}

/** Builds the route hooks that guard one operation. */
export function createRouteGuard(contract: CompiledContract, options: RouteGuardOptions): RouteGuard {
  const guard = createGuard(contract, options);
  const keyHeader = contract.key.in === 'header' ? contract.key.name.toLowerCase() : undefined;
  const withQuery = readsQuery(contract);
  const pathParamsOf = routerPathParams(contract.path);
  // Only a guard that waits for a duplicate's first request asks whether the client is still there.
  const waits = (options.waitInProgressMs ?? 0) > 0;

  /**
   * Whether the guard runs for a request: on a route of several methods that include the contract's, only
   * for that method (each method runs its own contract, or none); on any other route, always.
   */
  function runsFor(request: FastifyRequest): boolean {
    // `routeOptions` is a getter that builds an object per read: the usual request, of the contract's method, needs none.
    return request.method === contract.method || runsForMethod(request.routeOptions.method, contract.method, request.method);
  }

  async function toGuardRequest(request: FastifyRequest): Promise<GuardRequest> {
    if (bodyNotParsed(request.body, request.headers)) {
      // A content-type parser that leaves the body to the handler (`@fastify/multipart` by default, `request.file()`).
      throw new Error(
        `idempotency guard for ${contract.operationId}: the request body was not parsed before the guard; give the route a body (for multipart, @fastify/multipart with attachFieldsToBody: true or 'keyValues')`,
      );
    }
    const headers = nodeHeaders(request.raw.headers, () => request.raw.headersDistinct ?? distinctFromRaw(request.raw.rawHeaders), keyHeader);
    const principal = options.principal === undefined ? undefined : await options.principal(request);
    const requestId = options.requestId !== undefined ? options.requestId(request) : singleHeader(headers, 'x-request-id');
    return {
      // `{item.id}` cannot be a Fastify param name: what request.params lacks is read from the path.
      pathParams: pathParamsOf(request.params, () => request.url),
      query: withQuery ? queryFromSearch(searchOf(request.url)) : {},
      headers,
      body: bodyForFingerprint(request.body, request.headers['content-type']),
      ...(principal !== undefined && principal !== null ? { principal } : {}),
      ...(requestId !== undefined ? { requestId } : {}),
      ...(waits ? { clientGone: () => request.raw.socket?.destroyed === true || (request.raw.destroyed && !request.raw.complete) } : {}),
    };
  }

  const preHandler: GuardPreHandler = async (request, reply) => {
    if (!runsFor(request)) return undefined;
    const guardRequest = await toGuardRequest(request);
    const decision = await guard.begin(guardRequest);
    if (decision.kind === 'respond') {
      const state: RequestState = { owner: guard, context: unguardedContext(contract), headers: {}, settled: true };
      // A replay is the recorded answer, which the app's onSend hooks already shaped: they run again (for the headers
      // they add: CORS, a request id), and this guard's onSend, which runs after them, puts the recorded bytes back.
      if (decision.replayed === true) {
        state.replay = decision.response.body;
        const headers = decision.response.headers;
        const encoding = Object.keys(headers).find((name) => name.toLowerCase() === 'content-encoding');
        if (encoding !== undefined) state.replayEncoding = headers[encoding]!;
      }
      states.set(request, state);
      return sendResponse(reply, decision.response);
    }
    const state: RequestState = {
      owner: guard,
      context: { reservation: decision.reservation, tx: undefined, idempotencyKey: decision.idempotencyKey },
      headers: decision.headers,
      settled: false,
    };
    states.set(request, state);
    // A hijacked reply (`reply.hijack()`, then `reply.raw`) never reaches onSend: once the handler has ended it,
    // the effect may have happened and nothing was recorded, so the record is kept for reconciliation instead of
    // waiting out the lease renewals. A socket that closes before (the client went away) says nothing of the
    // handler, which may still be at work: the heartbeat goes on. A reply not hijacked ends in onSend.
    reply.raw.once('close', () => {
      if (state.settled || !reply.sent || !reply.raw.writableFinished) return;
      state.settled = true;
      void guard.abort(state.context.reservation, { rolledBack: false });
    });
    return undefined;
  };

  const onSend: GuardOnSend = async (request, reply, payload) => {
    const state = states.get(request);
    if (state === undefined || state.owner !== guard) return payload;
    if (state.replay !== undefined) {
      // The recorded bytes, as recorded: an encoding or envelope an earlier hook applied again is undone, and the
      // coding they were recorded in (if any) is theirs again.
      if (state.replayEncoding === undefined) reply.removeHeader('content-encoding');
      else reply.header('content-encoding', state.replayEncoding);
      return Buffer.from(state.replay.buffer, state.replay.byteOffset, state.replay.byteLength);
    }
    if (state.recording === true) {
      // A second send of the same reply while the first is being recorded: an async handler that called
      // `reply.send()` without returning `reply` resolves before this hook (awaiting the store) has let the first
      // one out, and Fastify then sends again (`undefined`). Unguarded, the first send would be out already and the
      // second dropped: dropped here too — this chain never goes on — or its empty payload would reach the client
      // first, and the recorded answer only the retries.
      return new Promise<never>(() => undefined);
    }
    if (state.settled) return payload;
    state.settled = true;
    state.recording = true;
    let body: Uint8Array;
    try {
      try {
        body = await payloadBytes(payload);
      } catch (error) {
        // A stream payload that failed: Fastify answers 500, and the effect may have happened.
        await guard.abort(state.context.reservation, { rolledBack: false, error });
        throw error;
      }
      // App-level onSend hooks run before this route-level one, so a compression plugin may already have encoded
      // the payload: record the identity body (Content-Encoding is never replayed), send the encoded one.
      const recorded = await identityAnswer({ status: reply.statusCode, headers: replyHeaders(reply), body });
      await guard.complete(state.context.reservation, recorded);
    } finally {
      // Fastify's answer to a failure here (its 500) is a send of its own, which goes through.
      state.recording = false;
    }
    for (const [name, value] of Object.entries(state.headers)) reply.header(name, value);
    return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  };

  function transactional<Tx>(handler: TransactionalHandler<Tx>) {
    // Refused when the route is declared, not on its first request.
    const refusal = transactionRefusal(contract, options.store);
    if (refusal !== undefined) throw new TypeError(refusal);
    const boundMs = transactionBoundMs(contract, options);
    const routeHandler = async (request: FastifyRequest, reply: FastifyReply): Promise<unknown> => {
      // Another method of the route: its own guard's hooks (if any) ran before, and no transaction is opened.
      if (!runsFor(request)) return handler(request, reply, (states.get(request)?.context ?? unguardedContext(contract)) as HandlerContext<Tx>);
      const guardRequest = await toGuardRequest(request);
      const before = { ...reply.getHeaders() };
      let own: GuardResponse | undefined;
      const response = await guard.handle(
        guardRequest,
        async (context) => {
          states.set(request, { owner: guard, context, headers: {}, settled: true });
          // The transaction (and SQLite's lock) is held no longer than transactionBoundMs: a handler that never
          // answers is then rolled back (it is not stopped: what it does after is outside the transaction).
          const value = await sentOrReturned(reply, () =>
            withinBound(
              handler(request, reply, context as HandlerContext<Tx>),
              boundMs,
              () => handlerGivenUp(`idempotency guard for ${contract.operationId}: the handler did not answer within the one-transaction bound (${boundMs} ms: leaseRenewalMaxMs, or the TTL); its transaction is rolled back`),
            ),
          );
          own = await serialize(reply, value);
          return own;
        },
        { transaction: true },
      );
      if (own !== undefined && response.body === own.body) {
        // The handler's own answer: the reply holds its headers already; the guard's are added.
        for (const [name, value] of Object.entries(response.headers)) if (!reply.hasHeader(name)) reply.header(name, value);
        return reply.code(response.status).send(Buffer.from(response.body.buffer, response.body.byteOffset, response.body.byteLength));
      }
      // One of the guard's own answers after the handler ran (outcome unknown): none of the handler's headers
      // (a Location or ETag of what was rolled back) goes with it.
      if (own !== undefined) {
        for (const name of Object.keys(reply.getHeaders())) reply.removeHeader(name);
        for (const [name, value] of Object.entries(before)) if (value !== undefined) reply.header(name, value);
      }
      return sendResponse(reply, response);
    };
    return Object.assign(routeHandler, { [TRANSACTIONAL]: routeGuard });
  }

  const status: GuardPreHandler = async (request, reply) => {
    // A read only: added wider than its route (a global hook), it must never answer the contracted POST by its key.
    if (!isRead(request.method)) return undefined;
    const headers = nodeHeaders(request.raw.headers, () => request.raw.headersDistinct ?? distinctFromRaw(request.raw.rawHeaders), keyHeader);
    const principal = options.principal === undefined ? undefined : await options.principal(request);
    const requestId = options.requestId !== undefined ? options.requestId(request) : singleHeader(headers, 'x-request-id');
    const answer = await guard.status({
      // The status route's own path parameters: a `path:` scope part is read from them.
      pathParams: { ...(request.params as Record<string, string>) },
      query: queryFromSearch(searchOf(request.url)),
      headers,
      body: undefined,
      ...(principal !== undefined && principal !== null ? { principal } : {}),
      ...(requestId !== undefined ? { requestId } : {}),
    });
    return answer === undefined ? undefined : sendResponse(reply, answer);
  };

  const routeGuard: RouteGuard = { contract, guard, preHandler, onSend, hooks: { preHandler, onSend }, transactional, status };
  guardsByPreHandler.set(preHandler, routeGuard);
  return routeGuard;
}

/** What {@link idempotencyPlugin} does with a guard that no route matched once the app is ready. */
export type UnmatchedGuardAction = 'error' | 'warn';

/** Options of {@link idempotencyPlugin}. */
export interface IdempotencyPluginOptions {
  /**
   * A guard that no route registered after the plugin served would leave its operation unguarded (a retry
   * runs the handler again). `'error'` (default): `app.ready()` / `app.listen()` fail naming the operations,
   * the paths looked for and the routes that came close, with the reason each is not the operation's.
   * `'warn'`: a process warning (`IDEMKIT_UNMATCHED_GUARD`) instead, for an app that mounts some of the
   * operations elsewhere on purpose.
   */
  readonly unmatched?: UnmatchedGuardAction;
  /**
   * The paths the app serves the API under, instead of the base paths the contracts carry from the document
   * (`contract.basePaths`): `['/api']` when the app mounts the API at `/api` whatever its servers say, `[]` for
   * routes at the contract paths only. Each is a path from the root (`/v1`), else `TypeError`.
   */
  readonly basePaths?: readonly string[];
}

/**
 * A Fastify plugin that adds each guard's hooks to the routes registered after it (in its scope or below)
 * that serve the guard's operation: a route of the contract's method whose URL, or whose URL below the scope
 * the plugin was registered in, is the contract path or the path under one of the API's base paths. The base
 * paths are `contract.basePaths`, which `generate server` fills from the document (Swagger 2.0 `basePath`, the
 * path of each OpenAPI 3 `servers` URL), or the `basePaths` option. With base path `/v1`, `/charges/{id}` is
 * served by the routes `/charges/:id` and `/v1/charges/:chargeId` (a register prefix counts as part of the URL),
 * and, with the plugin registered in a scope with prefix `/api`, by `/api/charges/:id` or `/api/v1/charges/:id`;
 * never by `/admin/charges/:id` or `/v1/x/charges/:id`.
 * Path parameters match by position, whatever their names; a trailing slash is ignored; letter case is
 * ignored only when the router ignores it. On a route of several methods each method runs its own
 * contract's guard, or none.
 *
 * So that a contract never guards another operation's route, these are refused: two guards of one method
 * and path under the same base paths (at once); a route that two of its guards serve, or whose method
 * already runs another operation's guard (hooks wired by hand, `transactional`, another `idempotencyPlugin`
 * such as a second API document's), when the route is added. A route already running one of its guards is
 * left as it is. Once the app is ready, a guard that no route served is an error, see {@link IdempotencyPluginOptions}.
 */
export function idempotencyPlugin(guards: Iterable<RouteGuard>, options: IdempotencyPluginOptions = {}): (instance: FastifyInstance) => Promise<void> {
  const entries = pluginEntries(guards, options.basePaths);
  const plugin = async (instance: FastifyInstance): Promise<void> => {
    const caseSensitive = routerCaseSensitive(instance);
    // Without its own encapsulation context the plugin lives in the scope it was registered in: that scope's
    // register prefix is where the app mounts the API.
    const mount = typeof instance.prefix === 'string' ? instance.prefix : '';
    const candidates: RouteCandidate[] = entries.map(({ guard, basePaths }) => ({
      guard,
      routes: contractRoutes(guard.contract.method, guard.contract.path, basePaths, caseSensitive),
    }));
    const matched = new Set<RouteGuard>();
    const seen: SeenRoute[] = [];
    instance.addHook('onRoute', (route) => {
      const methods = (Array.isArray(route.method) ? route.method : [route.method]).map((method) => String(method).toUpperCase());
      const address: RouteAddress = { url: route.url, mount };
      seen.push({ address, methods });
      const present = guardsOnRoute(route);
      // Wired by hand (or a transactional handler, which runs the guard itself): adding hooks would reserve twice.
      for (const guard of present) if (candidates.some((candidate) => candidate.guard === guard)) matched.add(guard);
      for (const method of methods) {
        const guard = servingGuard(candidates, method, address);
        if (guard === undefined) continue;
        const running = present.find((other) => runsForMethod(route.method, other.contract.method, method));
        if (running === guard) continue;
        if (running !== undefined) throw new Error(claimedMessage(method, route.url, running, guard));
        matched.add(guard);
        route.preHandler = [...asArray(route.preHandler), guard.preHandler] as NonNullable<RouteOptions['preHandler']>;
        route.onSend = [...asArray(route.onSend), guard.onSend] as NonNullable<RouteOptions['onSend']>;
      }
    });
    instance.addHook('onReady', async () => {
      const missing = candidates.filter((candidate) => !matched.has(candidate.guard));
      if (missing.length === 0) return;
      const message = unmatchedMessage(missing, seen);
      if (options.unmatched === 'warn') process.emitWarning(message, { code: 'IDEMKIT_UNMATCHED_GUARD' });
      else throw new Error(message);
    });
  };
  // Like fastify-plugin: without its own encapsulation context, the onRoute hook sees the parent's routes.
  Object.assign(plugin, { [Symbol.for('skip-override')]: true });
  return plugin;
}

/** A guard with the routes that serve its operation. */
interface RouteCandidate {
  readonly guard: RouteGuard;
  readonly routes: ContractRoutes;
}

/** A route the plugin saw, for the advice about a guard no route served. */
interface SeenRoute {
  readonly address: RouteAddress;
  readonly methods: readonly string[];
}

/**
 * Whether a guard of a `contractMethod` contract runs for `requestMethod` on a route of `routeMethods`: for
 * its own method always; never for another method on a route of several methods that include its own, nor
 * for HEAD (the HEAD route Fastify adds beside a GET route copies its hooks; its empty answer must not be
 * recorded as the GET's); otherwise always, so hooks wired by hand onto a route of another method guard it
 * rather than leave it unguarded.
 */
function runsForMethod(routeMethods: unknown, contractMethod: string, requestMethod: string): boolean {
  if (requestMethod === contractMethod) return true;
  if (requestMethod === 'HEAD') return false;
  return !Array.isArray(routeMethods) || !routeMethods.includes(contractMethod);
}

/** The guards with their base paths (the option's, else their contracts'); refuses two that would serve the same routes. */
function pluginEntries(guards: Iterable<RouteGuard>, basePaths: readonly string[] | undefined): { guard: RouteGuard; basePaths: readonly string[] }[] {
  if (basePaths !== undefined && !Array.isArray(basePaths)) throw new TypeError("idempotencyPlugin: basePaths is a list of paths, e.g. ['/v1']");
  const forced = basePaths?.map(normaliseBasePath);
  const seen = new Map<string, RouteGuard>();
  return [...new Set(guards)].map((guard) => {
    const { method, path, operationId } = guard.contract;
    const own = forced ?? (guard.contract.basePaths ?? []).map(normaliseBasePath);
    const routes = contractRoutes(method, path, own, true);
    const key = `${method} ${[...routes.shapes].sort().join(' ')}`;
    const other = seen.get(key);
    if (other !== undefined) {
      throw new Error(
        `idempotencyPlugin: the guards of ${operationId} (${method} ${path}) and ${other.contract.operationId} (${other.contract.method} ${other.contract.path}) would match the same routes; ` +
          'give each its own plugin with its own basePaths, or register each in the prefixed scope of its routes',
      );
    }
    seen.set(key, guard);
    return { guard, basePaths: own };
  });
}

/** The one guard that serves a route's `method`; throws when two do. */
function servingGuard(candidates: readonly RouteCandidate[], method: string, route: RouteAddress): RouteGuard | undefined {
  const serving = candidates.filter((candidate) => candidate.routes.method === method && servesPath(candidate.routes, route));
  if (serving.length > 1) {
    throw new Error(
      `idempotencyPlugin: the route ${method} ${route.url} serves ${serving.map(describe).join(' and ')}; a route method runs one contract. ` +
        'Pass the guards to separate plugins with their own basePaths, or register each plugin in the prefixed scope of its routes',
    );
  }
  return serving[0]?.guard;
}

/** `createOrder (POST /orders or /v1/orders)`. */
function describe({ guard, routes }: RouteCandidate): string {
  return `${guard.contract.operationId} (${routes.method} ${routes.paths.join(' or ')})`;
}

function claimedMessage(method: string, url: string, running: RouteGuard, guard: RouteGuard): string {
  return (
    `idempotencyPlugin: the route ${method} ${url} already runs the guard of ${running.contract.operationId} (${running.contract.method} ${running.contract.path}), ` +
    `and the guard of ${guard.contract.operationId} (${guard.contract.method} ${guard.contract.path}) serves it too; a route method runs one contract. ` +
    'Two APIs with the same paths: give each its base path (its document\'s servers or basePath, or idempotencyPlugin(guards, { basePaths })), ' +
    'or register each plugin in the prefixed scope of its routes; hooks wired by hand onto the wrong route: move them'
  );
}

function unmatchedMessage(missing: readonly RouteCandidate[], seen: readonly SeenRoute[]): string {
  const list = missing.map((candidate) => {
    const close = seen.flatMap(({ address, methods }): string | string[] => nearMiss(candidate.routes, address, methods) ?? []);
    const shown = close.length > 3 ? [...close.slice(0, 3), `${close.length - 3} more`] : close;
    return `${describe(candidate)}${shown.length > 0 ? `, not ${shown.join(', ')}` : ''}`;
  });
  return (
    `idempotencyPlugin: no route served the guard of ${list.join('; ')}, so a retry would run its handler again. ` +
    "A route serves it at one of those paths (its register prefixes included), or below the scope the plugin was registered in, registered after the plugin in its scope " +
    "(the plugin shares its scope, so a prefix given to register(idempotencyPlugin(…), { prefix }) itself does nothing: register it inside the prefixed scope); " +
    "if the app serves the API under another path, pass idempotencyPlugin(guards, { basePaths: ['/that/path'] }); " +
    "or pass only the guards the plugin should wire ({ unmatched: 'warn' } if the operation is served elsewhere on purpose)"
  );
}

/** Whether the instance's router tells letter case apart (Fastify 5 `routerOptions`, or the v4 top-level option). */
function routerCaseSensitive(instance: FastifyInstance): boolean {
  const config = instance.initialConfig as { readonly caseSensitive?: boolean; readonly routerOptions?: { readonly caseSensitive?: boolean } };
  return (config.routerOptions?.caseSensitive ?? config.caseSensitive) !== false;
}

/** The guards a route already runs: its `preHandler` hooks', and a transactional handler's. */
function guardsOnRoute(route: RouteOptions): RouteGuard[] {
  const found: RouteGuard[] = [];
  const transactional = (route.handler as unknown as Record<symbol, unknown>)[TRANSACTIONAL];
  if (transactional !== undefined) found.push(transactional as RouteGuard);
  for (const hook of asArray(route.preHandler)) {
    const guard = guardsByPreHandler.get(hook as GuardPreHandler);
    if (guard !== undefined) found.push(guard);
  }
  return found;
}

function asArray(value: unknown): unknown[] {
  if (value === undefined || value === null) return [];
  return Array.isArray(value) ? value : [value];
}

/** The context of a request the guard answered itself, or of another method than its contract's. */
function unguardedContext(contract: CompiledContract): HandlerContext<unknown> {
  return {
    reservation: { guarded: false, operation: contract.operationId, recordId: undefined, token: undefined, requestId: undefined },
    tx: undefined,
    idempotencyKey: undefined,
  };
}

function replyHeaders(reply: FastifyReply): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(reply.getHeaders())) {
    // Node sends no line for an empty list: neither is one recorded (a replay would send `name: `).
    if (value === undefined || (Array.isArray(value) && value.length === 0)) continue;
    headers[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  return headers;
}

async function payloadBytes(payload: unknown): Promise<Uint8Array> {
  if (payload === undefined || payload === null) return new Uint8Array(0);
  if (typeof payload === 'string') return Buffer.from(payload, 'utf8');
  if (payload instanceof Uint8Array) return payload;
  if (payload instanceof Readable || (typeof payload === 'object' && Symbol.asyncIterator in payload)) {
    const chunks: Uint8Array[] = [];
    for await (const chunk of payload as AsyncIterable<unknown>) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Uint8Array));
    return concatBytes(chunks);
  }
  return Buffer.from(JSON.stringify(payload), 'utf8');
}

/** `work`, or a rejection with `late()` once `ms` have passed without it settling. */
function withinBound<T>(work: Promise<T>, ms: number, late: () => Error): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(late()), ms);
    timer.unref();
  });
  return Promise.race([work, expired]).finally(() => clearTimeout(timer));
}

/**
 * Runs a transactional handler and gives what it answers with: the payload of a `reply.send()` it calls (the usual
 * `return reply.code(201).send(body)`), which is held instead of sent until the transaction commits, else the value
 * it returns.
 */
async function sentOrReturned(reply: FastifyReply, run: () => Promise<unknown>): Promise<unknown> {
  let sent: { payload: unknown } | undefined;
  const shadowed = reply as unknown as Record<'send' | 'then', unknown>;
  const own = { send: Object.getOwnPropertyDescriptor(reply, 'send'), then: Object.getOwnPropertyDescriptor(reply, 'then') };
  shadowed.send = function heldSend(payload?: unknown): FastifyReply {
    sent ??= { payload };
    return reply;
  };
  // A reply is a thenable that settles once it is sent: an async handler returning it would wait for itself.
  shadowed.then = (fulfilled?: (value: undefined) => unknown) => fulfilled?.(undefined);
  let value: unknown;
  try {
    value = await run();
  } finally {
    for (const name of ['send', 'then'] as const) {
      const descriptor = own[name];
      if (descriptor !== undefined) Object.defineProperty(reply, name, descriptor);
      else delete shadowed[name];
    }
  }
  if (sent !== undefined) return sent.payload;
  return value === reply ? undefined : value;
}

/**
 * Turns a transactional handler's answer into bytes the way Fastify would send it: objects through the route's
 * serializer (its response schema for the status, or a custom serializer), streams read whole, an `Error` thrown
 * (it rolls the transaction back and goes to Fastify's error handler).
 */
async function serialize(reply: FastifyReply, value: unknown): Promise<GuardResponse> {
  if (value instanceof Error) throw value;
  let body: Uint8Array;
  if (value === undefined || value === null) body = new Uint8Array(0);
  else if (typeof value === 'string' || value instanceof Uint8Array || value instanceof Readable || (typeof value === 'object' && Symbol.asyncIterator in value)) {
    body = await payloadBytes(value);
  } else {
    if (!reply.hasHeader('content-type')) reply.header('content-type', 'application/json; charset=utf-8');
    const serialized: unknown = serializeObject(reply, value);
    body = typeof serialized === 'string' ? Buffer.from(serialized, 'utf8') : serialized instanceof Uint8Array ? serialized : new Uint8Array(serialized as ArrayBuffer);
  }
  return { status: reply.statusCode, headers: replyHeaders(reply), body };
}

/**
 * An object as Fastify's send path serializes it: a response schema keyed by content type (`{ 201: { content:
 * { 'application/json': … } } }`) by the reply's media type or `*\/*`, else `reply.serialize` (a custom serializer,
 * the route's schema for the status, or JSON).
 */
function serializeObject(reply: FastifyReply, value: unknown): unknown {
  const mediaType = String(reply.getHeader('content-type') ?? 'application/json').split(';')[0]!.trim().toLowerCase();
  for (const status of [String(reply.statusCode), `${String(reply.statusCode)[0]}xx`]) {
    const keyed: unknown = reply.getSerializationFunction(status, mediaType) ?? reply.getSerializationFunction(status, '*/*');
    if (typeof keyed === 'function') return (keyed as (data: unknown) => unknown)(value);
  }
  return reply.serialize(value);
}

function sendResponse(reply: FastifyReply, response: GuardResponse): FastifyReply {
  reply.code(response.status);
  for (const [name, value] of Object.entries(response.headers)) reply.header(name, value);
  // No payload for an empty body: an empty Buffer would make Fastify add `Content-Type: application/octet-stream`.
  if (response.body.byteLength === 0) return reply.send();
  return reply.send(Buffer.from(response.body.buffer, response.body.byteOffset, response.body.byteLength));
}

