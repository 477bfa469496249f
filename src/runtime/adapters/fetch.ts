/**
 * Fetch adapter: wraps a `(request: Request, ...rest) => Promise<Response>` handler — the shape of Bun's
 * `fetch`, Deno.serve, Next.js route handlers, Cloudflare-style workers and Hono (`(c) => h(c.req.raw)`) —
 * into one with the same signature that runs the guard first and records the response it returns.
 *
 *     export const POST = guards.createOrder.wrap(async (request) => Response.json(await create(request), { status: 201 }));
 *
 * A Hono route that validates the body mounts the guard's `middleware` (or, for one-transaction mode, its
 * `inTransaction`) before the validator instead:
 *
 *     app.post('/v1/orders', guards.createOrder.middleware, validator('json', check), handler);
 *
 * The handler reads the guard's context with `idempotencyOf(request)`. Path parameters for path scopes
 * and the fingerprint come from matching the contract's path template against the URL (or `options.params`).
 * Imports only Node built-ins / web globals and the runtime core; copied into users' generated code.
 */
import type { CompiledContract } from '../contract.js';
import { createGuard, transactionRefusal, unrefTimer, type Guard, type GuardRequest, type GuardResponse, type HandlerContext } from '../guard.js';
import { handlerGivenUp } from '../store.js';
import { decodeContent } from '../content-coding.js';
import { bodyForFingerprint, concatBytes, headersFromEntries, identityAnswer, isRead, pathMatcher, queryFromSearch, singleHeader, transactionBoundMs, type RouteGuardOptionsFor } from './common.js';

// The matcher lives in common.ts (Express and Fastify use it too); re-exported for existing importers.
export { pathMatcher };

/** Options of a fetch route guard. */
export interface RouteGuardOptions extends RouteGuardOptionsFor<Request> {
  /** Path parameters of a request, when the router knows them better than the contract's path template. */
  readonly params?: ((request: Request) => Record<string, string> | undefined) | undefined;
}

/** Options of {@link RouteGuard.wrap}. */
export interface WrapOptions {
  /**
   * One-transaction mode (SQLite, PostgreSQL): the handler runs inside the reserving transaction. `wrap` throws a
   * `TypeError` for an external effect without a provider key (see `transactionRefusal`).
   */
  readonly transaction?: boolean;
}

/**
 * What the Hono-style {@link RouteGuard.middleware} needs of a context: the request, and the response it reads and
 * replaces. A Hono `Context` is one; typed structurally, so the adapter imports no framework.
 */
export interface MiddlewareContext {
  /** `routePath`: the route the middleware was mounted on (Hono's `c.req.routePath`), `/v1/*` under `app.use('/v1/*', …)`. */
  readonly req: { readonly raw: Request; readonly routePath?: string };
  /** Hono's setter copies the headers of the response it replaces into the new one; setting `undefined` first clears it. */
  res: Response;
}

/** A fetch route guard. */
export interface RouteGuard {
  readonly contract: CompiledContract;
  /** The framework-agnostic guard underneath. */
  readonly guard: Guard;
  /**
   * Wraps a fetch handler; extra arguments (Next.js context, Bun server, …) pass through unchanged. A request of a
   * safe method (a CORS preflight, a GET on the same path) goes to the handler unguarded; one of another unsafe
   * method than the contract's rejects, as one whose path the template does not match does.
   */
  wrap<Rest extends unknown[]>(
    handler: (request: Request, ...rest: Rest) => Response | Promise<Response>,
    options?: WrapOptions,
  ): (request: Request, ...rest: Rest) => Promise<Response>;
  /**
   * The guard as Hono middleware, for routes that validate the body before the handler. Mount it first:
   *
   *     app.post('/v1/orders', guards.createOrder.middleware, validator('json', check), (c) => c.json(create(c.req.valid('json')), 201));
   *
   * It reads the body (from a clone, so the validator and the handler still can) before any validator, and runs
   * the guard: a replay or a problem (400, 409, 422, 503) is answered at once, without calling `next()`.
   * Otherwise it awaits `next()`, records `c.res` as the handler's answer and sets `c.res` to it with the guard's
   * headers (`Idempotent-Replayed`, …). A thrown error is recorded as what Hono's `onError` answered, as the Express
   * guard records what the error handler sends: a 5xx is kept for reconciliation, a 4xx (`HTTPException(400)`) is
   * replayed — where a handler {@link RouteGuard.wrap}ped throws past the guard with no answer, so its key is always
   * kept. Requests of another method (mounted with `app.use`) pass through unguarded, as the contract is one
   * method's. Handlers read the guard's context with `idempotencyOf(c.req.raw)`.
   */
  readonly middleware: Middleware;
  /**
   * {@link RouteGuard.middleware} in one-transaction mode (SQLite, PostgreSQL stores): the rest of the chain (the
   * validator, the handler) runs inside the transaction that reserved the key. The handler writes its rows through
   * `idempotencyOf(c.req.raw).tx`; they and the `completed` record commit together, or roll back together (a 5xx, a
   * transient status, or a thrown error that `onError` answered with one), which frees the key. Mount it first, as
   * the middleware. Reading it throws a `TypeError` where the mode cannot guard the operation (see `transactionRefusal`).
   */
  readonly inTransaction: Middleware;
  /**
   * Wraps the handler of the contract's status route (a `GET`, e.g. `export const GET = guards.createOrder.status(read)`):
   * a request carrying this operation's key — in the same header, or the same query parameter — is answered from the
   * key's record in the caller's scope (the stored answer replayed, 409 in progress or abandoned, 404
   * `idempotency-key-unknown`), never by the handler; one without the key goes on to the handler. A `path:` scope
   * part is read from `options.params` (the status route's path parameters).
   */
  status<Rest extends unknown[]>(
    handler: (request: Request, ...rest: Rest) => Response | Promise<Response>,
    options?: StatusOptions,
  ): (request: Request, ...rest: Rest) => Promise<Response>;
}

/** Options of {@link RouteGuard.status}. */
export interface StatusOptions {
  /** The status route's path parameters, for a contract scoped by a path parameter. */
  readonly params?: (request: Request) => Record<string, string> | undefined;
}

/** A Hono-style middleware: a context and `next`; it answers by returning a `Response` or by setting `c.res`. */
export type Middleware = (c: MiddlewareContext, next: () => Promise<void>) => Promise<Response | void>;

const contexts = new WeakMap<Request, HandlerContext<unknown>>();

/** RFC 9110 §9.2.1: methods without an effect to repeat. */
const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE']);

/** The guard's context for a request (reservation, transaction, canonical key), or throws when no guard ran. */
export function idempotencyOf<Tx = unknown>(request: Request): HandlerContext<Tx> {
  const context = contexts.get(request);
  if (context === undefined) throw new Error('no idempotency guard ran for this request: wrap the handler with the route guard');
  return context as HandlerContext<Tx>;
}

/** Builds the fetch guard of one operation. */
export function createRouteGuard(contract: CompiledContract, options: RouteGuardOptions): RouteGuard {
  const guard = createGuard(contract, options);
  const matchPath = pathMatcher(contract.path);
  // Only a guard that waits for a duplicate's first request asks whether the client is still there.
  const waits = (options.waitInProgressMs ?? 0) > 0;
  const transactionMaxMs = transactionBoundMs(contract, options);

  const contractMethod = contract.method.toUpperCase();
  /** Whether `request` is of the contract's method in any letter case (fetch normalises `post` to `POST`, not `patch`). */
  function ofContractMethod(request: Request): boolean {
    return request.method === contractMethod || request.method.toUpperCase() === contractMethod;
  }

  /** The guard's view of `request` without its body (read by {@link readBody} once the guard does not refuse it at once). */
  async function toGuardRequest(request: Request): Promise<GuardRequest> {
    const url = new URL(request.url);
    let pathParams = options.params?.(request);
    try {
      pathParams ??= contractParams(url.pathname);
    } catch {
      // A malformed escape (`%E0%A4%A`): no path a router reached.
    }
    if (pathParams === undefined) {
      throw new Error(`idempotency guard for ${contract.operationId}: ${url.pathname} does not match ${contract.path}; pass options.params`);
    }
    const entries: [string, string][] = [];
    request.headers.forEach((value, name) => entries.push([name, value]));
    const headers = headersFromEntries(entries);
    const principal = options.principal === undefined ? undefined : await options.principal(request);
    const requestId = options.requestId !== undefined ? options.requestId(request) : singleHeader(headers, 'x-request-id');
    return {
      pathParams,
      query: queryFromSearch(url.search),
      headers,
      body: undefined,
      ...(principal !== undefined && principal !== null ? { principal } : {}),
      ...(requestId !== undefined ? { requestId } : {}),
      // Where the runtime aborts the request's signal when its client leaves (Node servers, Bun, Deno, Next.js).
      ...(waits ? { clientGone: () => (request.signal as AbortSignal | undefined)?.aborted === true } : {}),
    };
  }

  /**
   * Runs the guard around `invoke` (the wrapped handler, or the rest of a Hono chain) for `request`; resolves to
   * the answer to send, and `invoked` tells whether `invoke` ran.
   */
  async function run(request: Request, invoke: () => Promise<Response>, transaction: boolean): Promise<{ response: Response; invoked: boolean }> {
    const head = await toGuardRequest(request);
    // Refused whatever the body holds (no key, an invalid one, no principal): answered before the body is read,
    // decompressed and parsed — a request without a key costs no more than its headers.
    const refused = guard.refuse(head);
    if (refused !== undefined) return { response: toResponse(refused, new Headers(refused.headers)), invoked: false };
    const guardRequest: GuardRequest = { ...head, body: await readBody(request, contract.operationId) };
    let original: { response: Response; captured: GuardResponse; recorded: GuardResponse } | undefined;
    const answer = await guard.handle(
      guardRequest,
      async (context) => {
        contexts.set(request, context);
        // One transaction (and SQLite's lock) is held no longer than transactionBoundMs: a handler or a streamed
        // answer that never ends is then rolled back, as under the Express guard.
        const attempt = new Attempt(contract.operationId, request, contract.leaseMs, transaction ? transactionMaxMs : undefined);
        try {
          const response = await attempt.bounded(invoke());
          const captured = await capture(response, attempt);
          const recorded = await identityAnswer(captured);
          original = { response, captured, recorded };
          return recorded;
        } finally {
          attempt.end();
        }
      },
      transaction ? { transaction: true } : {},
    );
    if (original !== undefined && answer.body === original.recorded.body) {
      // The handler's own answer: its bytes and headers as sent (repeated Set-Cookie, Content-Encoding included)
      // plus the guard's.
      const headers = new Headers(original.response.headers);
      for (const [name, value] of Object.entries(answer.headers)) {
        if (original.captured.headers[name] !== value) headers.set(name, value);
      }
      return { response: toResponse({ ...answer, body: original.captured.body }, headers), invoked: true };
    }
    return { response: toResponse(answer, new Headers(answer.headers)), invoked: original !== undefined };
  }

  /**
   * Whether `pathname` may be the contract's path, as sent or percent-decoded: Hono routes the decoded path
   * (`/v1/demo%2Drequests` reaches `/v1/demo-requests`), so a guard passing on what only the raw form fails to match
   * let that route run unguarded.
   */
  function mayBeContractPath(pathname: string): boolean {
    if (matchPath(pathname) !== undefined) return true;
    try {
      return contractParams(pathname) !== undefined;
    } catch {
      return true;
    }
  }

  /** The contract path's parameters in `pathname` as sent, else percent-decoded as routers route it; throws on bad escapes. */
  function contractParams(pathname: string): Record<string, string> | undefined {
    const params = matchPath(pathname);
    if (params !== undefined) return params;
    const decoded = decodeURI(pathname);
    return decoded === pathname ? undefined : matchPath(decoded);
  }

  function middlewareOf(transaction: boolean): Middleware {
    return async (c, next) => {
      if (!ofContractMethod(c.req.raw)) return next();
      // Mounted wider than its route (`app.use('/v1/*', …)`): another path under it is another route's, passed on
      // unguarded as the Express guard does. Mounted on a route of its own, a path the template does not match is
      // still refused (a route and a contract that disagree must not run unguarded).
      if (options.params === undefined && c.req.routePath?.includes('*') === true && !mayBeContractPath(new URL(c.req.raw.url).pathname)) return next();
      const { response, invoked } = await run(
        c.req.raw,
        async () => {
          await next();
          return c.res;
        },
        transaction,
      );
      // Not invoked: the guard's own answer, which Hono sends as the middleware's. Invoked: the chain has answered
      // (c.res is final), so the answer replaces it — in one-transaction mode also by the guard's own problem, when
      // the commit after the handler failed.
      if (!invoked) return response;
      // Cleared first: Hono's setter would copy the replaced response's headers into this one, and a problem that
      // replaces the handler's answer (a failed commit) must not carry its Location or Content-Length.
      (c as { res: Response | undefined }).res = undefined;
      c.res = response;
      return undefined;
    };
  }

  const routeGuard = {
    contract,
    guard,
    wrap<Rest extends unknown[]>(handler: (request: Request, ...rest: Rest) => Response | Promise<Response>, wrapOptions?: WrapOptions) {
      // Refused when the handler is wrapped, not on its first request.
      const transaction = wrapOptions?.transaction === true;
      const refusal = transaction ? transactionRefusal(contract, options.store) : undefined;
      if (refusal !== undefined) throw new TypeError(refusal);
      return async (request: Request, ...rest: Rest) => {
        if (!ofContractMethod(request)) {
          // A safe method (a CORS preflight, a GET with a POST's key) has nothing to guard and is not this operation:
          // the handler answers it. Another unsafe method is another operation routed here by mistake: said, as a
          // path the template does not match is, rather than run unguarded or under this operation's records.
          if (SAFE_METHODS.has(request.method.toUpperCase())) return handler(request, ...rest);
          throw new Error(`idempotency guard for ${contract.operationId}: a ${request.method} request reached the guard of ${contractMethod} ${contract.path}; route only ${contractMethod} requests to it`);
        }
        return (await run(request, async () => handler(request, ...rest), transaction)).response;
      };
    },
    middleware: middlewareOf(false),
    status<Rest extends unknown[]>(handler: (request: Request, ...rest: Rest) => Response | Promise<Response>, statusOptions?: StatusOptions) {
      return async (request: Request, ...rest: Rest) => {
        // A read only: a catch-all handler wrapped so must never answer the contracted POST by its key.
        if (!isRead(request.method)) return handler(request, ...rest);
        const url = new URL(request.url);
        const entries: [string, string][] = [];
        request.headers.forEach((value, name) => entries.push([name, value]));
        const headers = headersFromEntries(entries);
        const principal = options.principal === undefined ? undefined : await options.principal(request);
        const requestId = options.requestId !== undefined ? options.requestId(request) : singleHeader(headers, 'x-request-id');
        const answer = await guard.status({
          pathParams: statusOptions?.params?.(request) ?? {},
          query: queryFromSearch(url.search),
          headers,
          body: undefined,
          ...(principal !== undefined && principal !== null ? { principal } : {}),
          ...(requestId !== undefined ? { requestId } : {}),
        });
        return answer === undefined ? handler(request, ...rest) : toResponse(answer, new Headers(answer.headers));
      };
    },
  };
  const refusal = transactionRefusal(contract, options.store);
  if (refusal === undefined) return { ...routeGuard, inTransaction: middlewareOf(true) };
  // Refused where the route is declared (`guards.x.inTransaction`), not on its first request.
  return Object.defineProperty(routeGuard, 'inTransaction', {
    // Not enumerable: spreading or copying the guard must not throw in an app that never uses the mode.
    enumerable: false,
    get(): never {
      throw new TypeError(refusal);
    },
  }) as RouteGuard;
}

async function readBody(request: Request, operationId: string): Promise<unknown> {
  if (request.body === null) return undefined;
  if (request.bodyUsed) {
    // A clone of a read body cannot be made ("Body is unusable"), and without the body every payload would share
    // one fingerprint: say what read it and where the guard goes instead.
    throw new Error(
      `idempotency guard for ${operationId}: the request body was already read before the guard (by a validator such as Hono's validator('json', …) or zValidator, or a body parser), so it cannot be fingerprinted; mount the route guard's middleware before the validator (app.post(path, guards.<operation>.middleware, validator('json', …), handler)), or read and validate the body inside the wrapped handler`,
    );
  }
  // A clone, so the handler can still read the body itself. Bytes, not text: a binary body is fingerprinted
  // exactly, not through UTF-8 replacement characters.
  let bytes: Uint8Array = new Uint8Array(await request.clone().arrayBuffer());
  if (bytes.length === 0) return undefined;
  // A compressed request (fetch runtimes do not decode one; Express and Fastify parsers do): its content is the
  // payload, not its bytes — gzip writes a time into each member, so every retry's bytes differ. One the guard
  // cannot decode is fingerprinted by its bytes, as before.
  const encoding = request.headers.get('content-encoding');
  if (encoding !== null) bytes = (await decodeContent(bytes, encoding)) ?? bytes;
  return bodyForFingerprint(bytes, request.headers.get('content-type') ?? undefined);
}

/**
 * One run of a handler and the reading of its answer: what stops the reading before the answer's body ends — its
 * client leaving while the body is streamed, a client already gone and a body not ended within the lease, or (one
 * transaction) the handler not answering within `transactionBoundMs`. A stopped answer is not recorded: it is thrown,
 * so the key is kept for reconciliation (one transaction: rolled back and freed).
 */
class Attempt {
  /** Why the answer was given up, once it was. */
  stopped: string | undefined;
  readonly #operationId: string;
  readonly #request: Request;
  readonly #graceMs: number;
  readonly #timers: ReturnType<typeof setTimeout>[] = [];
  readonly #onStop: ((reason: string) => void)[] = [];
  readonly #expired: Promise<never> | undefined;

  constructor(operationId: string, request: Request, graceMs: number, limitMs: number | undefined) {
    this.#operationId = operationId;
    this.#request = request;
    this.#graceMs = graceMs;
    if (limitMs !== undefined) {
      this.#expired = new Promise<never>((_, reject) => {
        this.#onStop.push(() => reject(this.error()));
        this.#timer(() => this.stop(`the handler did not answer within the one-transaction bound (${limitMs} ms: leaseRenewalMaxMs, or the TTL)`), limitMs);
      });
      this.#expired.catch((): undefined => undefined);
    }
  }

  /** `work` (the handler's answer), or a rejection once the handler is given up; a late answer's body is cancelled. */
  bounded(work: Response | Promise<Response>): Promise<Response> {
    if (this.#expired === undefined) return Promise.resolve(work);
    const answer = Promise.resolve(work);
    answer.then((late) => this.stopped !== undefined && cancelBody(late), (): undefined => undefined);
    return Promise.race([answer, this.#expired]);
  }

  /** Reads `body` whole, unless the attempt is stopped first (see the class). */
  async read(body: ReadableStream<Uint8Array>): Promise<Uint8Array> {
    const reader = body.getReader();
    const cancel = (): void => {
      reader.cancel(this.stopped).catch((): undefined => undefined);
    };
    this.#onStop.push(cancel);
    const signal = this.#request.signal as AbortSignal | undefined;
    const left = (): void => this.stop('its client left while the answer was streamed, so it may have been cut short');
    // Gone before the answer began: a handler still at work ends it all the same, and that answer is what the
    // client's retry wants — but one that never ends (an event stream) would be read forever.
    if (signal?.aborted === true) this.#timer(() => this.stop(`its client had left and the answer did not end within the lease (${this.#graceMs} ms)`), this.#graceMs);
    else signal?.addEventListener('abort', left, { once: true });
    const chunks: Uint8Array[] = [];
    let ended = false;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        if (this.stopped !== undefined) continue;
        chunks.push(bytesOf(value as unknown));
      }
      ended = true;
    } finally {
      signal?.removeEventListener('abort', left);
      // Left on a throw (a chunk of no bytes, a stream that errored): cancelled, so a producer that never ends stops.
      if (!ended) reader.cancel().catch((): undefined => undefined);
    }
    if (this.stopped !== undefined) throw this.error();
    return chunks.length === 1 ? chunks[0]! : concatBytes(chunks);
  }

  stop(reason: string): void {
    if (this.stopped !== undefined) return;
    this.stopped = reason;
    for (const listener of this.#onStop) listener(reason);
  }

  error(): Error {
    return handlerGivenUp(`idempotency guard for ${this.#operationId}: ${this.stopped}; the answer is not recorded (the key is kept for reconciliation, or rolled back with its transaction)`);
  }

  end(): void {
    for (const timer of this.#timers) clearTimeout(timer);
  }

  #timer(fire: () => void, ms: number): void {
    const timer = setTimeout(fire, ms);
    unrefTimer(timer);
    this.#timers.push(timer);
  }
}

/**
 * A body chunk as bytes. Streams should carry `Uint8Array`s, but runtimes take others (Bun sends strings): a string is
 * its UTF-8, an `ArrayBuffer` or another view its own bytes — never `new Uint8Array(x)`, which reads a string as
 * nothing and a `Uint16Array` one byte per element. Anything else is no body chunk: a `TypeError`, the key kept.
 */
function bytesOf(chunk: unknown): Uint8Array {
  if (chunk instanceof Uint8Array) return chunk;
  if (typeof chunk === 'string') return new TextEncoder().encode(chunk);
  if (chunk instanceof ArrayBuffer) return new Uint8Array(chunk);
  if (ArrayBuffer.isView(chunk)) return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  throw new TypeError(`the handler guarded by idempotency streamed a body chunk that is no bytes (${chunk === null ? 'null' : typeof chunk}): enqueue Uint8Array chunks`);
}

function cancelBody(response: unknown): void {
  const body = (response as { body?: unknown } | null | undefined)?.body;
  if (body instanceof ReadableStream && !body.locked) body.cancel().catch((): undefined => undefined);
}

/** What a fetch handler answered, read whole for the record; throws for no `Response` or a network error. */
async function capture(response: Response, attempt: Attempt): Promise<GuardResponse> {
  // Structural: a framework's own Response class (@hono/node-server's) is one too.
  const shaped = response as Partial<Response> | null | undefined;
  if (typeof shaped !== 'object' || shaped === null || typeof shaped.status !== 'number' || typeof shaped.headers?.forEach !== 'function') {
    const what = shaped === null ? 'null' : typeof shaped === 'object' ? 'an object that is no Response' : typeof shaped;
    throw new TypeError(`the handler guarded by idempotency answered ${what}, not a Response: return a Response (e.g. Response.json(body, { status: 201 }))`);
  }
  // Response.error(): a network error, which no runtime can send, and every replay would throw while sending it.
  if (response.type === 'error' || response.status < 200) {
    throw new TypeError(`the handler guarded by idempotency answered ${response.type === 'error' ? 'Response.error()' : `status ${response.status}`}, which is no answer to record or replay; the key is kept`);
  }
  const body = response.body === null || response.body === undefined ? new Uint8Array(0) : await attempt.read(response.body);
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    headers[name.toLowerCase()] = value;
  });
  return { status: response.status, headers, body };
}

const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

function toResponse(answer: GuardResponse, headers: Headers): Response {
  const body = NULL_BODY_STATUSES.has(answer.status) ? null : new Uint8Array(answer.body);
  return new Response(body, { status: answer.status, headers });
}
