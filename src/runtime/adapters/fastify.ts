/**
 * Fastify adapter: route-level hooks. `preHandler` runs the guard once the body is parsed (answering
 * 400/409/422/503 or a replay, or reserving the key); `onSend` records the payload exactly as serialized —
 * the handler's, or the error handler's — before it leaves, and marks it `Idempotent-Replayed: false`.
 *
 *     app.post('/v1/orders', { ...guards.createOrder.hooks }, handler)
 *
 * or every contracted route at once: `await app.register(idempotencyPlugin(Object.values(guards)))` before
 * the routes (a route under the API's base path or a prefix, `/v1/orders` for the contract path `/orders`,
 * matches too). One-transaction mode: `app.post('/v1/orders', guards.createOrder.transactional(handler))`.
 * Imports only Fastify's types, Node built-ins and the runtime core; copied into users' generated code.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { Readable } from 'node:stream';
import { brotliDecompress, gunzip, inflate } from 'node:zlib';
import { promisify } from 'node:util';
import type { CompiledContract } from '../contract.js';
import { createGuard, type Guard, type GuardRequest, type GuardResponse, type HandlerContext } from '../guard.js';
import { bodyForFingerprint, bodyNotParsed, concatBytes, nodeHeaders, queryFromSearchParams, readsQuery, routerPathParams, singleHeader, type RouteGuardOptionsFor } from './common.js';

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
   */
  transactional<Tx = unknown>(handler: TransactionalHandler<Tx>): (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
}

interface RequestState {
  context: HandlerContext<unknown>;
  headers: Record<string, string>;
  /** Set once the response was recorded (or needs no recording). */
  settled: boolean;
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
  const keyHeader = contract.key.header.toLowerCase();
  const withQuery = readsQuery(contract);
  const pathParamsOf = routerPathParams(contract.path);

  async function toGuardRequest(request: FastifyRequest): Promise<GuardRequest> {
    if (bodyNotParsed(request.body, request.headers)) {
      // A content-type parser that leaves the body to the handler (`@fastify/multipart` by default, `request.file()`).
      throw new Error(
        `idempotency guard for ${contract.operationId}: the request body was not parsed before the guard; give the route a body (for multipart, @fastify/multipart with attachFieldsToBody: 'keyValues')`,
      );
    }
    const headers = nodeHeaders(request.raw.headers, () => request.raw.headersDistinct, keyHeader);
    const principal = options.principal === undefined ? undefined : await options.principal(request);
    const requestId = options.requestId !== undefined ? options.requestId(request) : singleHeader(headers, 'x-request-id');
    return {
      // `{item.id}` cannot be a Fastify param name: what request.params lacks is read from the path.
      pathParams: pathParamsOf(request.params, () => request.url),
      query: withQuery ? queryFromSearchParams(new URL(request.url, 'http://localhost').searchParams) : {},
      headers,
      body: bodyForFingerprint(request.body, request.headers['content-type']),
      ...(principal !== undefined ? { principal } : {}),
      ...(requestId !== undefined ? { requestId } : {}),
    };
  }

  const preHandler: GuardPreHandler = async (request, reply) => {
    const guardRequest = await toGuardRequest(request);
    const decision = await guard.begin(guardRequest);
    if (decision.kind === 'respond') {
      states.set(request, { context: { reservation: unguardedReservation(contract), tx: undefined, idempotencyKey: undefined }, headers: {}, settled: true });
      return sendResponse(reply, decision.response);
    }
    states.set(request, {
      context: { reservation: decision.reservation, tx: undefined, idempotencyKey: decision.idempotencyKey },
      headers: decision.headers,
      settled: false,
    });
    return undefined;
  };

  const onSend: GuardOnSend = async (request, reply, payload) => {
    const state = states.get(request);
    if (state === undefined || state.settled) return payload;
    state.settled = true;
    const body = await payloadBytes(payload);
    // App-level onSend hooks run before this route-level one, so a compression plugin may already have encoded
    // the payload: record the identity body (Content-Encoding is never replayed), send the encoded one.
    const recorded = await identityBytes(body, reply.getHeader('content-encoding'));
    await guard.complete(state.context.reservation, { status: reply.statusCode, headers: replyHeaders(reply), body: recorded });
    for (const [name, value] of Object.entries(state.headers)) reply.header(name, value);
    return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  };

  function transactional<Tx>(handler: TransactionalHandler<Tx>) {
    const routeHandler = async (request: FastifyRequest, reply: FastifyReply): Promise<unknown> => {
      const guardRequest = await toGuardRequest(request);
      const response = await guard.handle(
        guardRequest,
        async (context) => {
          states.set(request, { context, headers: {}, settled: true });
          const value = await handler(request, reply, context as HandlerContext<Tx>);
          return serialize(reply, value);
        },
        { transaction: true },
      );
      return sendResponse(reply, response);
    };
    return Object.assign(routeHandler, { [TRANSACTIONAL]: routeGuard });
  }

  const routeGuard: RouteGuard = { contract, guard, preHandler, onSend, hooks: { preHandler, onSend }, transactional };
  guardsByPreHandler.set(preHandler, routeGuard);
  return routeGuard;
}

/** What {@link idempotencyPlugin} does with a guard that no route matched once the app is ready. */
export type UnmatchedGuardAction = 'error' | 'warn';

/** Options of {@link idempotencyPlugin}. */
export interface IdempotencyPluginOptions {
  /**
   * A guard whose contract no route registered after the plugin matched would leave its operation
   * unguarded (a retry runs the handler again). `'error'` (default): `app.ready()` / `app.listen()` fail
   * naming the operations and the paths looked for. `'warn'`: a process warning (`IDEMKIT_UNMATCHED_GUARD`)
   * instead, for an app that mounts some of the operations elsewhere on purpose.
   */
  readonly unmatched?: UnmatchedGuardAction;
}

/**
 * A Fastify plugin that adds each guard's hooks to every route registered after it (in its scope or below)
 * whose method and path match the guard's contract. The contract's path is relative to the API's base path
 * (Swagger 2.0 `basePath`, the path of an OpenAPI 3 `servers` URL), so a route matches when its URL is the
 * contract path or ends with it after a prefix: `/charges/{id}` matches `/charges/:id`, `/v1/charges/:chargeId`
 * and a `/charges/:id` route under `register(…, { prefix: '/v1' })`. Path parameters match by position,
 * whatever their names; a trailing slash is ignored; letter case is ignored only when the router ignores it.
 * When several contracts match one route, the exact match wins, else the longest contract path; two guards
 * with the same method and path shape are refused (register each in its own prefixed scope).
 * A route that already carries a guard (`...guard.hooks`, `guard.transactional(…)`) is left as it is.
 * Once the app is ready, a guard that matched no route is an error, see {@link IdempotencyPluginOptions}.
 */
export function idempotencyPlugin(guards: Iterable<RouteGuard>, options: IdempotencyPluginOptions = {}): (instance: FastifyInstance) => Promise<void> {
  const candidates = routeCandidates(guards);
  const plugin = async (instance: FastifyInstance): Promise<void> => {
    const caseSensitive = routerCaseSensitive(instance);
    const matched = new Set<RouteGuard>();
    instance.addHook('onRoute', (route: RouteOptions) => {
      const present = guardOnRoute(route);
      if (present !== undefined) {
        // Wired by hand (or a transactional handler, which runs the guard itself): adding hooks would reserve twice.
        if (candidates.some((candidate) => candidate.guard === present)) matched.add(present);
        return;
      }
      const shape = routeShape(route.url, caseSensitive);
      const methods = (Array.isArray(route.method) ? route.method : [route.method]).map((method) => String(method).toUpperCase());
      const guard = bestCandidate(candidates, methods, shape, caseSensitive);
      if (guard === undefined) return;
      matched.add(guard);
      route.preHandler = [...asArray(route.preHandler), guard.preHandler] as NonNullable<RouteOptions['preHandler']>;
      route.onSend = [...asArray(route.onSend), guard.onSend] as NonNullable<RouteOptions['onSend']>;
    });
    instance.addHook('onReady', async () => {
      const missing = candidates.filter((candidate) => !matched.has(candidate.guard)).map(({ guard }) => guard.contract);
      if (missing.length === 0) return;
      const message = unmatchedMessage(missing);
      if (options.unmatched === 'warn') process.emitWarning(message, { code: 'IDEMKIT_UNMATCHED_GUARD' });
      else throw new Error(message);
    });
  };
  // Like fastify-plugin: without its own encapsulation context, the onRoute hook sees the parent's routes.
  Object.assign(plugin, { [Symbol.for('skip-override')]: true });
  return plugin;
}

/** A guard with its contract's method and path shape (parameters as one placeholder, see {@link routeShape}). */
interface RouteCandidate {
  readonly guard: RouteGuard;
  readonly method: string;
  readonly shape: string;
}

function routeCandidates(guards: Iterable<RouteGuard>): RouteCandidate[] {
  const candidates: RouteCandidate[] = [];
  const seen = new Map<string, RouteGuard>();
  for (const guard of new Set(guards)) {
    const { method, path, operationId } = guard.contract;
    const shape = contractShape(path);
    const other = seen.get(`${method} ${shape}`);
    if (other !== undefined) {
      throw new Error(
        `idempotencyPlugin: the guards of ${operationId} (${method} ${path}) and ${other.contract.operationId} (${other.contract.method} ${other.contract.path}) would match the same routes; register each with its own plugin in its own prefixed scope`,
      );
    }
    seen.set(`${method} ${shape}`, guard);
    candidates.push({ guard, method, shape });
  }
  return candidates;
}

/** The guard for a route: an exact path match, else the longest contract path the route's URL ends with. */
function bestCandidate(candidates: readonly RouteCandidate[], methods: readonly string[], shape: string, caseSensitive: boolean): RouteGuard | undefined {
  let best: RouteCandidate | undefined;
  for (const candidate of candidates) {
    if (!methods.includes(candidate.method)) continue;
    const wanted = caseSensitive ? candidate.shape : candidate.shape.toLowerCase();
    // A root contract (`/`, shape '') would end every URL: it matches the root route only.
    const matches = shape === wanted || (wanted.startsWith('/') && shape.endsWith(wanted));
    if (matches && (best === undefined || candidate.shape.length > best.shape.length)) best = candidate;
  }
  return best?.guard;
}

// A path parameter in a shape: a character no route or contract path spells.
const PARAM = '\u0000';

/** `/charges/{id}/` → `/charges/\0`: literal text as it is, each parameter one placeholder, no trailing slash. */
function contractShape(path: string): string {
  return withoutTrailingSlash(path.replace(/\{[^}]*\}/g, PARAM));
}

/**
 * A Fastify route URL in the shape of {@link contractShape}: `::` is a literal `:`; `:name`, `:name(regex)`
 * and `:a-:b` parameters (a name ends at `-`, `.`, `/` or `(`) become placeholders; `*` stays a wildcard,
 * which no contract parameter matches. Lower-cased for a case-insensitive router.
 */
function routeShape(url: string, caseSensitive: boolean): string {
  let shape = '';
  for (let i = 0; i < url.length; i += 1) {
    const char = url[i]!;
    if (char !== ':') {
      shape += caseSensitive ? char : char.toLowerCase();
      continue;
    }
    if (url[i + 1] === ':') {
      shape += ':';
      i += 1;
      continue;
    }
    let end = i + 1;
    while (end < url.length && !'-./('.includes(url[end]!)) end += 1;
    if (url[end] === '(') end = closingParenthesis(url, end);
    shape += PARAM;
    i = end - 1;
  }
  return withoutTrailingSlash(shape);
}

/** The index after the `)` closing the regular expression that opens at `start`. */
function closingParenthesis(text: string, start: number): number {
  let depth = 0;
  for (let i = start; i < text.length; i += 1) {
    if (text[i] === '\\') i += 1;
    else if (text[i] === '(') depth += 1;
    else if (text[i] === ')' && (depth -= 1) === 0) return i + 1;
  }
  return text.length;
}

function withoutTrailingSlash(shape: string): string {
  return shape.endsWith('/') ? shape.slice(0, -1) : shape;
}

/** Whether the instance's router tells letter case apart (Fastify 5 `routerOptions`, or the v4 top-level option). */
function routerCaseSensitive(instance: FastifyInstance): boolean {
  const config = instance.initialConfig as { readonly caseSensitive?: boolean; readonly routerOptions?: { readonly caseSensitive?: boolean } };
  return (config.routerOptions?.caseSensitive ?? config.caseSensitive) !== false;
}

/** The guard a route already runs: its `preHandler` hooks, or a transactional handler. */
function guardOnRoute(route: RouteOptions): RouteGuard | undefined {
  const transactional = (route.handler as unknown as Record<symbol, unknown>)[TRANSACTIONAL];
  if (transactional !== undefined) return transactional as RouteGuard;
  for (const hook of asArray(route.preHandler)) {
    const guard = guardsByPreHandler.get(hook as GuardPreHandler);
    if (guard !== undefined) return guard;
  }
  return undefined;
}

function unmatchedMessage(contracts: readonly CompiledContract[]): string {
  const list = contracts.map(({ operationId, method, path }) => `${operationId} (${method} ${path}, or that path under a prefix)`).join('; ');
  return (
    `idempotencyPlugin: no route matched the guard of ${list}, so a retry would run its handler again. ` +
    'Register the route after the plugin, in its scope; or pass only the guards the plugin should wire ' +
    "(or { unmatched: 'warn' } if the operation is served elsewhere on purpose)"
  );
}

/**
 * The Fastify route for a contract path: `/v1/orders/{id}` → `/v1/orders/:id`. A literal `:` becomes `::`,
 * Fastify's escape for it (`/emails:send` → `/emails::send`); a parameter name Fastify cannot spell becomes
 * camel case (`{item.id}` → `:itemId`); and a parameter followed by text that would run into its name
 * (`{name}:cancel`) gets the pattern `([^/]+)` to end it (`/:name([^/]+)::cancel`).
 */
export function toFastifyPath(path: string): string {
  const parts = path.split(/\{([^}]*)\}/);
  let out = '';
  parts.forEach((part, index) => {
    if (index % 2 === 0) {
      out += part.replaceAll(':', '::');
      return;
    }
    const name = part.replace(/[^A-Za-z0-9_$]+(.?)/g, (_, next: string) => next.toUpperCase()) || 'param';
    // Fastify ends a parameter name only at `/`, `-`, `.` or `(`.
    const next = parts[index + 1]!;
    const ended = next === '' ? index + 2 === parts.length : '/-.'.includes(next[0]!);
    out += ended ? `:${name}` : `:${name}([^/]+)`;
  });
  return out;
}

function asArray(value: unknown): unknown[] {
  if (value === undefined || value === null) return [];
  return Array.isArray(value) ? value : [value];
}

function unguardedReservation(contract: CompiledContract): HandlerContext<unknown>['reservation'] {
  return { guarded: false, operation: contract.operationId, recordId: undefined, token: undefined, requestId: undefined };
}

function replyHeaders(reply: FastifyReply): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(reply.getHeaders())) {
    if (value !== undefined) headers[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  return headers;
}

const DECODERS: Record<string, (bytes: Uint8Array) => Promise<Buffer>> = {
  gzip: promisify(gunzip),
  'x-gzip': promisify(gunzip),
  deflate: promisify(inflate),
  br: promisify(brotliDecompress),
};

/**
 * The payload without its `Content-Encoding` (gzip, deflate, br, also chained), so the record holds the body
 * itself and a replay is compressed afresh for its own client. An encoding it cannot undo keeps the bytes.
 */
async function identityBytes(body: Uint8Array, encoding: unknown): Promise<Uint8Array> {
  if (typeof encoding !== 'string') return body;
  const codings = encoding.split(',').map((coding) => coding.trim().toLowerCase()).filter((coding) => coding !== '' && coding !== 'identity');
  let bytes = body;
  for (const coding of codings.reverse()) {
    const decode = DECODERS[coding];
    if (decode === undefined) return body;
    try {
      bytes = await decode(bytes);
    } catch {
      return body;
    }
  }
  return bytes;
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

/** Turns a transactional handler's return value into bytes the way Fastify would send it. */
async function serialize(reply: FastifyReply, value: unknown): Promise<GuardResponse> {
  let body: Uint8Array;
  if (value === undefined || value === null) body = new Uint8Array(0);
  else if (typeof value === 'string' || value instanceof Uint8Array) body = await payloadBytes(value);
  else {
    if (!reply.hasHeader('content-type')) reply.header('content-type', 'application/json; charset=utf-8');
    body = Buffer.from(JSON.stringify(value), 'utf8');
  }
  return { status: reply.statusCode, headers: replyHeaders(reply), body };
}

function sendResponse(reply: FastifyReply, response: GuardResponse): FastifyReply {
  reply.code(response.status);
  for (const [name, value] of Object.entries(response.headers)) reply.header(name, value);
  return reply.send(Buffer.from(response.body.buffer, response.body.byteOffset, response.body.byteLength));
}
