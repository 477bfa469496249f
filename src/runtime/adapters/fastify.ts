/**
 * Fastify adapter: route-level hooks. `preHandler` runs the guard once the body is parsed (answering
 * 400/409/422/503 or a replay, or reserving the key); `onSend` records the payload exactly as serialized —
 * the handler's, or the error handler's — before it leaves, and marks it `Idempotent-Replayed: false`.
 *
 *     app.post('/v1/orders', { ...guards.createOrder.hooks }, handler)
 *
 * or every contracted route at once: `await app.register(idempotencyPlugin(Object.values(guards)))` before
 * the routes. One-transaction mode: `app.post('/v1/orders', guards.createOrder.transactional(handler))`.
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

// Marks the handlers `transactional()` returns, so the plugin does not add hooks that would reserve twice.
const TRANSACTIONAL = Symbol.for('idemkit.fastify.transactional');

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
    return Object.assign(routeHandler, { [TRANSACTIONAL]: true });
  }

  return { contract, guard, preHandler, onSend, hooks: { preHandler, onSend }, transactional };
}

/**
 * A Fastify plugin that adds each guard's hooks to the route whose method and path match its contract
 * (`/v1/orders/{id}` matches the route `/v1/orders/:id`). Register it before the routes.
 */
export function idempotencyPlugin(guards: Iterable<RouteGuard>): (instance: FastifyInstance) => Promise<void> {
  const byRoute = new Map<string, RouteGuard>();
  for (const guard of guards) byRoute.set(`${guard.contract.method} ${toFastifyPath(guard.contract.path)}`, guard);
  const plugin = async (instance: FastifyInstance): Promise<void> => {
    instance.addHook('onRoute', (route: RouteOptions) => {
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      for (const method of methods) {
        const guard = byRoute.get(`${String(method).toUpperCase()} ${route.url}`);
        if (guard === undefined) continue;
        // A transactional handler runs the guard itself.
        if ((route.handler as unknown as Record<symbol, unknown>)[TRANSACTIONAL] === true) return;
        route.preHandler = [...asArray(route.preHandler), guard.preHandler] as NonNullable<RouteOptions['preHandler']>;
        route.onSend = [...asArray(route.onSend), guard.onSend] as NonNullable<RouteOptions['onSend']>;
        return;
      }
    });
  };
  // Like fastify-plugin: without its own encapsulation context, the onRoute hook sees the parent's routes.
  Object.assign(plugin, { [Symbol.for('skip-override')]: true });
  return plugin;
}

/** `/v1/orders/{id}` → `/v1/orders/:id`. */
export function toFastifyPath(path: string): string {
  return path.replace(/\{([^}]+)\}/g, ':$1');
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
