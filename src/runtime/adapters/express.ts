/**
 * Express adapter: a route middleware that runs the guard before the handler and records what the handler
 * really sent — through `writeHead`/`write`/`end`, so `res.send`, `res.json`, `res.sendStatus`, streams
 * piped into `res` and the error handler's answer are all captured, not only `send`.
 *
 * The response is held until it is recorded: the client never sees a first answer whose record could
 * still be missing, so a retry after a lost response finds `completed` — unless the completion itself could not be
 * written (the store failed after the handler ran): the answer is then sent all the same, the record stays in
 * progress, and a retry meets 409 until the lease ends, then reconciliation.
 *
 * Mount it after the body parser: `app.post(path, express.json(), guard, handler)`.
 * Imports only Express's types, Node built-ins and the runtime core; copied into users' generated code.
 */
import { finished } from 'node:stream';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { CompiledContract } from '../contract.js';
import { createGuard, transactionRefusal, type Guard, type GuardRequest, type GuardResponse, type HandlerContext } from '../guard.js';
import { handlerGivenUp } from '../store.js';
import {
  bodyForFingerprint,
  bodyNotParsed,
  isRead,
  concatBytes,
  identityAnswer,
  nodeHeaders,
  pathMatcher,
  queryFromSearch,
  readsQuery,
  routerPathParams,
  searchOf,
  singleHeader,
  transactionBoundMs,
  withUploadedFiles,
  type Principal,
  type RouteGuardOptionsFor,
} from './common.js';

/** Options of an Express route guard: the guard core's options plus principal and request-id hooks on `req`. */
export type RouteGuardOptions = RouteGuardOptionsFor<Request>;

/** An Express route guard: use it as route middleware, or `inTransaction` for one-transaction mode. */
export interface RouteGuard extends RequestHandler {
  readonly contract: CompiledContract;
  /** The framework-agnostic guard underneath. */
  readonly guard: Guard;
  /**
   * One-transaction mode (SQLite, PostgreSQL stores): the handler runs inside the transaction that reserved
   * the key and writes its business rows through `idempotencyOf(res).tx`; those rows and the `completed`
   * record commit together, or roll back together (a 5xx, a transient status or a thrown handler). Reading it
   * throws a `TypeError` for an external effect without a provider key (see `transactionRefusal`).
   */
  readonly inTransaction: RequestHandler;
  /**
   * Middleware for the contract's status route (a `GET`, e.g. `app.get('/v1/payments/outcome', guards.x.status,
   * handler)`): a request carrying this operation's key — in the same header, or the same query parameter — is answered
   * from the key's record in the caller's scope (the stored answer replayed, 409 in progress or abandoned, 404
   * `idempotency-key-unknown`), never by the handler; one without the key goes on to the handler.
   */
  readonly status: RequestHandler;
}

const CONTEXT = Symbol.for('idemkit.express.context');

/** `toGuardRequest`'s answer for a request whose client left before its body was read: nothing to guard or answer. */
const CLIENT_GONE = Symbol('idemkit.express.client-gone');

type ContextHolder = { [CONTEXT]?: HandlerContext<unknown> };

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

function isThenable<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof (value as Partial<PromiseLike<T>> | undefined)?.then === 'function';
}

/**
 * The guard's context for this request: the reservation, the transaction in one-transaction mode and the
 * canonical key (to forward to a provider; never log it). Throws when no guard ran for the request.
 */
export function idempotencyOf<Tx = unknown>(res: Response): HandlerContext<Tx> {
  const context = (res.locals as ContextHolder)[CONTEXT];
  if (context === undefined) throw new Error('no idempotency guard ran for this request: mount the route guard before the handler');
  return context as HandlerContext<Tx>;
}

/**
 * `req.body`, or `undefined` where it is Express 4's placeholder: body-parser 1.x sets `req.body = {}` when a body's
 * type is not the parser's (`express.json()` and a `text/plain` body) and marks a body it did parse with
 * `req._body`; fingerprinted, that `{}` would make every payload under a key look alike (another body replayed).
 * Express 4 is told by `req.param` (Express 5 removed it; its body-parser leaves an unparsed `req.body` undefined).
 * A parsed `{}`, multer's null-prototype fields, and every body under Express 5 are kept.
 */
function placeholderless(req: Request): unknown {
  const body: unknown = req.body;
  if (body === null || typeof body !== 'object' || Object.getPrototypeOf(body) !== Object.prototype || Object.keys(body).length > 0) return body;
  const express4 = typeof (req as { param?: unknown }).param === 'function';
  if (!express4 || (req as { _body?: unknown })._body === true) return body;
  // A JSON body read by another parser (body-parser 2, a custom one) is a real `{}`; the placeholder is what a JSON
  // parser leaves for a body of another type (a `text/plain` one under `express.json()`).
  const type = req.headers['content-type'];
  return type !== undefined && /^application\/(?:[\w.+-]*\+)?json\b|\+json\b/i.test(type) ? body : undefined;
}

/** Builds the Express middleware that guards one operation. */
export function createRouteGuard(contract: CompiledContract, options: RouteGuardOptions): RouteGuard {
  const guard = createGuard(contract, options);
  const keyHeader = contract.key.in === 'header' ? contract.key.name.toLowerCase() : undefined;
  const withQuery = readsQuery(contract);
  const pathParamsOf = routerPathParams(contract.path);
  // Only a guard that waits for a duplicate's first request asks whether the client is still there.
  const waits = (options.waitInProgressMs ?? 0) > 0;

  /**
   * The guard's view of `req`. Synchronous unless the principal hook or an upload's files answer with a
   * promise: a plain JSON request takes no extra promise.
   */
  function toGuardRequest(req: Request, res: Response): GuardRequest | Promise<GuardRequest> | typeof CLIENT_GONE {
    if (bodyNotParsed(placeholderless(req), req.headers)) {
      // A client that left before its body was read: body-parser skips a finished request, so the body is missing for
      // that reason, not for a missing parser. Nothing is reserved and nobody is left to answer.
      // (Not `req.destroyed` alone: Node 20 sets it too once a middleware read the whole body stream itself.)
      if (req.socket?.destroyed === true || res.destroyed || (req.destroyed && !req.complete)) return CLIENT_GONE;
      // Without the parsed body every payload would share one fingerprint: refuse rather than replay wrongly.
      // A parser mounted for another type skips the body (express.json() takes application/json only): say which.
      const type = req.get('content-type');
      const media = type?.split(';')[0]!.trim();
      throw new Error(
        type === undefined
          ? `idempotency guard for ${contract.operationId}: the request body (sent without a content-type) was not parsed before the guard; mount a parser that takes such bodies first, e.g. express.raw({ type: () => true }) (a '*/*' type matches only bodies that name one)`
          : `idempotency guard for ${contract.operationId}: the request body (content-type ${type}) was not parsed before the guard; mount a parser for it first, e.g. ${
              media?.toLowerCase() === 'application/json' ? 'express.json() before the guard' : `express.json() or express.json({ type: ['application/json', '${media}'] })`
            }`,
      );
    }
    const headers = nodeHeaders(req.headers, () => req.headersDistinct, keyHeader);
    const principal = options.principal === undefined ? undefined : options.principal(req);
    return isThenable(principal) ? Promise.resolve(principal).then((resolved) => withPrincipal(req, res, headers, resolved)) : withPrincipal(req, res, headers, principal);
  }

  function withPrincipal(req: Request, res: Response, headers: GuardRequest['headers'], principal: Principal): GuardRequest | Promise<GuardRequest> {
    const requestId = options.requestId !== undefined ? options.requestId(req) : singleHeader(headers, 'x-request-id');
    const body = fingerprintBody(req);
    const request: Mutable<GuardRequest> = {
      // `{item.id}` cannot be an Express param name: what req.params lacks is read from the path.
      pathParams: pathParamsOf(req.params, () => req.originalUrl || req.url),
      query: withQuery ? queryFromSearch(searchOf(req.originalUrl || req.url)) : {},
      headers,
      body: undefined,
    };
    if (principal !== undefined && principal !== null) request.principal = principal;
    if (requestId !== undefined) request.requestId = requestId;
    if (waits) request.clientGone = () => res.destroyed || req.socket?.destroyed === true;
    if (!(body instanceof Promise)) {
      request.body = body;
      return request;
    }
    return body.then((files) => {
      request.body = files;
      return request;
    });
  }

  const contractMethod = contract.method.toUpperCase();
  // Express routes without letter case by default (`/Things/t1` reaches `/things/:tenant`): compared the same way.
  const matchPath = pathMatcher(contract.path.toLowerCase());

  /**
   * Whether `req` is another operation's, passed on unguarded: where the guard is mounted for a path (`app.use`),
   * not on a route (`app.post`, `app.patch`: Express sets `req.route`, and the guard guards whatever the route
   * takes), a request of another method than the contract's (a CORS preflight, a GET with a POST's key) or to
   * another path under the mount (`app.use('/pay', guard)` also sees `POST /pay/p-1/refund`, which must not be
   * answered with `/pay`'s replay).
   */
  function otherOperation(req: Request): boolean {
    if ((req as { route?: unknown }).route !== undefined) return false;
    if (req.method !== contractMethod && req.method.toUpperCase() !== contractMethod) return true;
    // The path Express routed (after any rewrite of req.url), in any letter case.
    return matchPath(`${req.baseUrl}${req.path}`.toLowerCase()) === undefined;
  }

  const middleware = (req: Request, res: Response, next: NextFunction): void => {
    if (otherOperation(req) || guarded(res)) {
      next();
      return;
    }
    void (async () => {
      const pending = toGuardRequest(req, res);
      if (pending === CLIENT_GONE) return;
      // A plain JSON request's view is ready: awaiting it anyway would cost a turn.
      const request = pending instanceof Promise ? await pending : pending;
      const decision = await guard.begin(request);
      if (decision.kind === 'respond') {
        sendResponse(res, decision.response);
        return;
      }
      (res.locals as ContextHolder)[CONTEXT] = { reservation: decision.reservation, tx: undefined, idempotencyKey: decision.idempotencyKey };
      const held = holdResponse(res, contract.leaseMs);
      next();
      const sent = await held.sent;
      if (sent === undefined) {
        // Destroyed before it ended (a stream piped into it failed): nothing to record, the effect may have happened.
        held.destroy();
        await guard.abort(decision.reservation, { rolledBack: false });
        return;
      }
      // A timeout middleware (connect-timeout) answered over a handler still at work: not the handler's outcome. A
      // 2xx-4xx after the timeout (connect-timeout's `respond: false`) is the handler's own, and is recorded.
      if (timedOut(req) && sent.status >= 500) await guard.abort(decision.reservation, { rolledBack: false, handlerRunning: true });
      else {
        // An answer without Content-Encoding is recorded as sent: awaiting it anyway would cost a turn.
        const answer = identityAnswer(sent);
        await guard.complete(decision.reservation, answer instanceof Promise ? await answer : answer);
      }
      held.flush(decision.headers);
    })().catch(next);
  };

  const transactionMaxMs = transactionBoundMs(contract, options);
  const inTransaction: RequestHandler = (req: Request, res: Response, next: NextFunction): void => {
    if (otherOperation(req) || guarded(res)) {
      next();
      return;
    }
    void (async () => {
      const pending = toGuardRequest(req, res);
      if (pending === CLIENT_GONE) return;
      const request = await pending;
      let held: Hold | undefined;
      let recorded: GuardResponse | undefined;
      const response = await guard
        .handle(
          request,
          async (context) => {
            (res.locals as ContextHolder)[CONTEXT] = context;
            const hold = holdResponse(res, contract.leaseMs, true);
            held = hold;
            // The transaction (and SQLite's lock) is held no longer than transactionBoundMs: a handler that never
            // answers (an async one rejected under Express 4) is then rolled back.
            const bound = setTimeout(() => hold.giveUp(true), transactionMaxMs).unref();
            next();
            const sent = await hold.sent;
            clearTimeout(bound);
            // Destroyed before it ended, or given up (the bound, a streamed answer whose client left): as a throw, the
            // transaction rolls back — and a handler that may still run loses its PostgreSQL connection with it.
            if (sent === undefined) throw handlerGivenUp(`idempotency guard for ${contract.operationId}: the response was destroyed or given up before the handler ended it`);
            recorded = await identityAnswer(sent);
            return recorded;
          },
          { transaction: true },
        )
        .catch((error: unknown): undefined => {
          if (held?.destroyed === undefined) throw error;
          return undefined;
        });
      // Destroyed by the handler, or its client left: destroyed, as the handler asked or as nobody waits. Given up at
      // the bound with its client waiting: the guard's answer goes out, and the handler's late one is refused.
      if (response === undefined || (held?.destroyed !== undefined && (!held.atBound || res.destroyed || req.socket?.destroyed === true))) held!.destroy();
      else if (held === undefined) sendResponse(res, response);
      // The handler's own answer (the same bytes it sent) goes out as it was held, with the guard's headers added;
      // any other (a rolled-back 5xx's problem, outcome unknown) without the handler's headers.
      else if (recorded !== undefined && response.body === recorded.body) held.flush(addedHeaders(response.headers, held));
      else held.answer(response);
    })().catch(next);
  };

  const status: RequestHandler = (req: Request, res: Response, next: NextFunction): void => {
    // A read only: mounted wider than its route (`app.use`), it must never answer the contracted POST by its key.
    if (!isRead(req.method)) {
      next();
      return;
    }
    void (async () => {
      const headers = nodeHeaders(req.headers, () => req.headersDistinct, keyHeader);
      const pending = options.principal === undefined ? undefined : options.principal(req);
      const principal = isThenable(pending) ? await pending : pending;
      const requestId = options.requestId !== undefined ? options.requestId(req) : singleHeader(headers, 'x-request-id');
      const request: Mutable<GuardRequest> = {
        // The status route's own path parameters: a `path:` scope part is read from them.
        pathParams: { ...(req.params as Record<string, string>) },
        query: queryFromSearch(searchOf(req.originalUrl || req.url)),
        headers,
        body: undefined,
      };
      if (principal !== undefined && principal !== null) request.principal = principal;
      if (requestId !== undefined) request.requestId = requestId;
      const answer = await guard.status(request);
      if (answer === undefined) next();
      else sendResponse(res, answer);
    })().catch(next);
  };

  const refusal = transactionRefusal(contract, options.store);
  if (refusal === undefined) return Object.assign(middleware, { contract, guard, inTransaction, status });
  // Refused where the route is declared (`guards.x.inTransaction`), not on its first request.
  return Object.defineProperty(Object.assign(middleware, { contract, guard, status }), 'inTransaction', {
    // Not enumerable: spreading or copying the guard must not throw in an app that never uses the mode.
    enumerable: false,
    get(): never {
      throw new TypeError(refusal);
    },
  }) as RouteGuard;
}

/**
 * Whether a timeout middleware answered the request (connect-timeout's documented `req.timedout`), read as
 * {@link fromRequest} reads: most apps have no timeout middleware, and an absent `timedout` costs a full lookup.
 */
function timedOut(req: Request): boolean {
  return fromRequest(req, 'timedout') === true;
}

/** What other middleware may put on `req`: multer's files, connect-timeout's flag. */
type Extras = { file?: unknown; files?: unknown; timedout?: unknown };

/**
 * The body the fingerprint sees. The files of an upload middleware (read from disk, so asynchronously) join
 * it only when there are any: a JSON request takes no extra promise or tick.
 */
function fingerprintBody(req: Request): unknown {
  const body = bodyForFingerprint(req.body, req.headers['content-type']);
  const file = fromRequest(req, 'file');
  const files = fromRequest(req, 'files');
  return file === undefined && files === undefined ? body : withUploadedFiles(body, file, files);
}

/**
 * `req[name]`, read only when `req` or its prototype chain has it. Mostly it has not, and reading an absent
 * property of a request (whose hidden class is its own, Express having re-pointed its prototype) misses the
 * inline cache and walks the whole prototype chain in the runtime; the own check and the prototype's (a
 * long-lived object, so cached) cost a fraction of that. The two upload names, over 20000 Express requests (own hidden
 * classes, as in a server): 0.68-0.88 µs -> 0.31-0.38 µs per request.
 */
function fromRequest(req: Request, name: keyof Extras): unknown {
  if (Object.hasOwn(req, name)) return (req as Extras)[name];
  const prototype: unknown = Object.getPrototypeOf(req);
  return prototype !== null && name in (prototype as object) ? (req as Extras)[name] : undefined;
}

/** The headers of `response` that the handler did not send: the ones the guard adds to the handler's answer. */
function addedHeaders(headers: Record<string, string>, held: Hold): Record<string, string> {
  const sent = held.snapshot?.headers ?? {};
  const added: Record<string, string> = {};
  for (const name of Object.keys(headers)) if (!(name.toLowerCase() in sent)) added[name] = headers[name]!;
  return added;
}

/** Writes a guard answer (problem, replay or the recorded first response) to `res`. */
function sendResponse(res: Response, response: GuardResponse): void {
  toDictionary(res);
  res.statusCode = response.status;
  for (const name of Object.keys(response.headers)) res.setHeader(name, response.headers[name]!);
  // Framed by length, as Express's own `send` does (Node would chunk it): an HTTP/1.0 client keeps its connection
  // alive only for an answer whose length it knows. A 204 or 304 has no body to announce.
  const status = response.status;
  if (status !== 204 && status !== 304 && status >= 200) res.setHeader('content-length', response.body.byteLength);
  res.end(Buffer.from(response.body.buffer, response.body.byteOffset, response.body.byteLength));
}

type Callback = (error?: Error | null) => void;

function toBytes(chunk: unknown, encoding: unknown): Uint8Array {
  if (chunk === undefined || chunk === null) return new Uint8Array(0);
  if (typeof chunk === 'string') return Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
  if (chunk instanceof Uint8Array) return chunk;
  throw new TypeError('response chunks must be strings or bytes');
}

const HELD = Symbol('idemkit.express.held');

/**
 * Whether a guard holds `res` already: the request reached a guard a second time — mounted with `app.use` and again
 * on its route, or a guarded route's `next('route')` to another guarded route of the path (a version dispatch). It
 * passes on: the first guard's reservation covers the request, and the second's would answer its own 409 "in
 * progress" through the first's hold, which would record it as the answer to that key (the handler never run).
 */
function guarded(res: Response): boolean {
  return (res as HeldRes)[HELD] !== undefined;
}

/** A response's status line and headers at one moment (header arrays copied). */
interface ResponseHead {
  readonly status: number;
  readonly message: string;
  readonly headers: Readonly<Record<string, number | string | string[]>>;
}

/** `res`'s head now; with `joined`, its headers also go there as text (repeated values joined with `, `). */
function headOf(res: Response, joined?: Record<string, string>): ResponseHead {
  const headers: Record<string, number | string | string[]> = {};
  // Name by name: `getHeaders()` would build a null-prototype copy (a dictionary-mode object) of them all first.
  for (const name of res.getHeaderNames()) {
    const value = res.getHeader(name);
    if (value === undefined) continue;
    if (Array.isArray(value)) {
      headers[name] = [...(value as string[])];
      // Node sends no line for an empty list: neither is one recorded (a replay would send `name: `).
      if (joined !== undefined && value.length > 0) joined[name] = value.join(', ');
    } else {
      headers[name] = value as number | string;
      if (joined !== undefined) joined[name] = String(value);
    }
  }
  return { status: res.statusCode, message: res.statusMessage, headers };
}

/** Puts `res`'s status line and headers back to `head`. */
function resetHead(res: Response, head: ResponseHead): void {
  res.statusCode = head.status;
  res.statusMessage = head.message;
  for (const name of res.getHeaderNames()) if (!(name in head.headers)) res.removeHeader(name);
  for (const name of Object.keys(head.headers)) {
    if (res.getHeader(name) !== head.headers[name]) res.setHeader(name, head.headers[name]!);
  }
}

/** `headersSent` of a held response once its head counts as sent (its first `write()`, or `end()`). */
const ENDED: PropertyDescriptor = Object.freeze({ configurable: true, get: (): boolean => true });

/** Node's error for a header set after the head was sent (`ERR_HTTP_HEADERS_SENT`). */
function headersSentError(what: string): Error {
  return Object.assign(new Error(`Cannot ${what} headers after they are sent to the client`), { code: 'ERR_HTTP_HEADERS_SENT' });
}

/** The header setters of a held response whose head counts as sent: they throw, as Node's do. */
const SENT_HEAD: Readonly<Record<'setHeader' | 'appendHeader' | 'removeHeader', PropertyDescriptor>> = Object.freeze({
  setHeader: { configurable: true, writable: true, value: () => { throw headersSentError('set'); } },
  appendHeader: { configurable: true, writable: true, value: () => { throw headersSentError('append'); } },
  removeHeader: { configurable: true, writable: true, value: () => { throw headersSentError('remove'); } },
});

type HeldRes = Response & { [HELD]?: Hold | undefined };

/** The buffered response of one request; the interceptors below find it on `res[HELD]`. */
class Hold {
  readonly chunks: Uint8Array[] = [];
  readonly callbacks: Callback[] = [];
  ended = false;
  /** The chunks joined, once `end()` was called. */
  body: Uint8Array | undefined;
  /** Resolves with what the handler sent once it calls `end()`, or with undefined if it destroys the response first. */
  readonly sent: Promise<GuardResponse | undefined>;
  resolveSent!: (response: GuardResponse | undefined) => void;
  // What was there before (possibly another middleware's own wrapper, e.g. on-headers): put back as found.
  readonly original: Pick<Response, 'writeHead' | 'write' | 'end' | 'destroy'>;
  /** `res.destroy()` called before `end()` (`stream.pipeline` does it when its source fails), with its error. */
  destroyed: { error: Error | undefined } | undefined;

  /**
   * Status and headers as they were when the handler called `end()`, or its first `write()` (Node sends the head
   * then, and takes no later change): exactly what is recorded and sent.
   */
  snapshot: ResponseHead | undefined;
  /** The snapshot's headers as text (repeated values joined), what the record gets. */
  snapshotText: Record<string, string> | undefined;
  /**
   * Status and headers as they were before the handler ran (what earlier middleware set, e.g. CORS), kept in
   * one-transaction mode, where the guard may answer in place of the handler.
   */
  readonly before: ResponseHead | undefined;
  /** A socket `destroy()` asked for after `end()` (Express's final handler does it once `headersSent`). */
  destroyRequested = false;
  /** The handler has begun a streamed answer (`write()` before `end()`). */
  streaming = false;
  /** Given up at the one-transaction bound (see {@link Hold.giveUp}): the handler may still answer, late. */
  atBound = false;
  private socketDestroy: ((error?: Error) => unknown) | undefined;

  readonly res: HeldRes;
  /** How long a streamed answer whose client left may still take to end (see {@link Hold.streamed}). */
  readonly graceMs: number;

  constructor(res: HeldRes, keepBefore: boolean, graceMs: number) {
    this.res = res;
    this.graceMs = graceMs;
    this.original = { writeHead: res.writeHead, write: res.write, end: res.end, destroy: res.destroy };
    this.before = keepBefore ? headOf(res) : undefined;
    this.sent = new Promise<GuardResponse | undefined>((resolve) => {
      this.resolveSent = resolve;
    });
  }

  /**
   * The handler began a streamed answer. When its client goes away, Node marks the response destroyed without
   * calling `destroy()`: a `stream.pipeline` into it stops without ending or destroying it, as does a handler that
   * stops writing on `'close'` — and the guard would wait for an `end()` that never comes, renewing the lease (in
   * one-transaction mode holding the transaction, and SQLite's lock) up to `leaseRenewalMaxMs`. A handler still at
   * work ends it all the same, and that answer is the replay its client's retry wants (the guard held every byte,
   * so the client saw none). So a streamed answer whose client left has {@link Hold.graceMs} (the contract's lease) to end;
   * one that has not by then counts as destroyed: the record is kept for reconciliation (one transaction: rolled
   * back). A handler that has written nothing is waited for as before — it may still be at work on its answer, and
   * giving it up would lose that answer or, with a reconcile hook or a rolled-back transaction, run it twice — up to
   * `leaseRenewalMaxMs` (see the one-transaction bound in `inTransaction`).
   */
  streamed(): void {
    this.streaming = true;
    const res = this.res;
    const left = (): void => {
      if (this.ended || this.res[HELD] !== this) return;
      setTimeout(() => this.giveUp(), this.graceMs).unref();
    };
    if (res.destroyed) left();
    else res.once('close', left);
  }

  /**
   * Counts the answer as destroyed unless it has ended: nothing is recorded, the record goes to reconciliation (one
   * transaction: rolled back). `atBound`: given up at the one-transaction bound, the handler still at work.
   */
  giveUp(atBound = false): void {
    if (this.ended || this.res[HELD] !== this) return;
    this.ended = true;
    this.atBound = atBound;
    this.destroyed = { error: undefined };
    this.resolveSent(undefined);
  }

  /**
   * After `end()` the response counts as sent, as in Node: `headersSent` reads true, so error handlers take
   * their "already answered" path instead of rewriting status and headers; and a socket destroy they ask
   * for waits until the held bytes are out (unbuffered, they would already be).
   */
  markEnded(): void {
    const res = this.res;
    Object.defineProperty(res, 'headersSent', ENDED);
    const socket = res.socket;
    if (socket !== null && socket !== undefined && this.socketDestroy === undefined) {
      this.socketDestroy = socket.destroy;
      socket.destroy = ((_error?: Error) => {
        this.destroyRequested = true;
        return socket;
      }) as typeof socket.destroy;
    }
  }

  /**
   * The head counts as sent from now on (the first `write()`), as Node's is: `headersSent` reads true and setting a
   * header throws `ERR_HTTP_HEADERS_SENT`, so a handler (or Express's `res.json`, or an error handler after
   * `next(err)`) that answers again after writing part of a body fails as it would unguarded — Express's final
   * handler then destroys the connection and the record goes to reconciliation — instead of appending a second
   * answer to the first's bytes under the first's `Content-Length`, which would be recorded and replayed.
   */
  lockHead(): void {
    const res = this.res;
    const text: Record<string, string> = {};
    this.snapshot = headOf(res, text);
    this.snapshotText = text;
    Object.defineProperty(res, 'headersSent', ENDED);
    Object.defineProperties(res, SENT_HEAD);
  }

  /** Puts the real `writeHead`/`write`/`end` back without sending. */
  restore(): void {
    const res = this.res;
    if (this.streaming) {
      // The header setters of the prototype again (Node's, or Express's on `app.response`).
      const own = res as unknown as Record<string, unknown>;
      delete own.setHeader;
      delete own.appendHeader;
      delete own.removeHeader;
    }
    res.writeHead = this.original.writeHead;
    res.write = this.original.write;
    res.end = this.original.end;
    res.destroy = this.original.destroy;
    res[HELD] = undefined;
    if (this.snapshot === undefined) return;
    // Node's own `headersSent` again (res is a dictionary object already: the delete costs no hidden class).
    delete (res as { headersSent?: boolean }).headersSent;
    // Whatever ran after end() (an error handler's status, Content-Type or Content-Length) is undone.
    resetHead(res, this.snapshot);
    const socket = res.socket;
    if (socket !== null && socket !== undefined && this.socketDestroy !== undefined) {
      socket.destroy = this.socketDestroy as typeof socket.destroy;
      this.socketDestroy = undefined;
      if (this.destroyRequested) {
        // A socket that can no longer write (its client closed, and Node's auto-destroy — the call swallowed above —
        // was its only way out) would never see the response's 'finish': destroyed now, or it stayed open for good,
        // one descriptor per client that closed while the completion was being recorded (a soak review's EMFILE).
        if (socket.destroyed || socket.writableEnded || !socket.writable) socket.destroy();
        else finished(res, () => socket.destroy());
      }
    }
  }

  /**
   * Restores the methods and sends one of the guard's own answers instead of what the handler sent: status and
   * headers go back to what they were before the handler ran, so none of the handler's (its Content-Length and
   * ETag, the Location of a resource that was rolled back) reaches the answer.
   */
  answer(response: GuardResponse): void {
    this.restore();
    if (this.before !== undefined) resetHead(this.res, this.before);
    sendResponse(this.res, response);
    if (this.destroyed !== undefined) refuseLateAnswer(this.res);
  }

  /** Restores the methods and destroys the response as the handler asked, sending nothing it held. */
  destroy(): void {
    this.restore();
    this.res.destroy(this.destroyed?.error);
  }

  /** Restores the methods and sends the held response with `extraHeaders` added. */
  flush(extraHeaders: Record<string, string>): void {
    this.restore();
    const res = this.res;
    for (const name of Object.keys(extraHeaders)) res.setHeader(name, extraHeaders[name]!);
    // The body heldEnd() already joined for the record: sent as one chunk, with the headers in one write.
    const body = this.body ?? concatBytes(this.chunks);
    const bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    const callbacks = this.callbacks;
    if (callbacks.length === 0) {
      res.end(bytes);
      return;
    }
    res.end(bytes, () => {
      for (const cb of callbacks) cb(null);
    });
  }
}

/**
 * A handler given up before it answered may still answer, late, after the guard's answer went out: Node would throw
 * `ERR_HTTP_HEADERS_SENT` from its `res.json()`, in a callback or a promise that Express 4 leaves unhandled, which
 * ends the process. Its answer goes nowhere instead: header calls do nothing, a write's callback hears that it
 * failed, and each late write is followed by a 'close' — the response's own came before the handler listened, and
 * a late pipeline into it (a file) would wait for a 'drain' that never comes, holding its source open.
 */
function refuseLateAnswer(res: Response): void {
  const late = res as unknown as Record<string, unknown>;
  const self = (): Response => res;
  late.setHeader = self;
  late.appendHeader = self;
  late.removeHeader = self;
  late.writeHead = self;
  let closing = false;
  late.write = (...args: unknown[]): boolean => {
    const cb = args.find((arg) => typeof arg === 'function') as Callback | undefined;
    if (cb !== undefined) process.nextTick(cb, new Error('write after the guard answered'));
    if (!closing) {
      closing = true;
      process.nextTick(() => {
        closing = false;
        res.emit('close');
      });
    }
    return false;
  };
  late.end = (...args: unknown[]): Response => {
    const cb = args.find((arg) => typeof arg === 'function') as Callback | undefined;
    if (cb !== undefined) process.nextTick(cb, null);
    return res;
  };
}

function heldDestroy(this: HeldRes, error?: Error): Response {
  const hold = this[HELD]!;
  if (hold.ended) {
    // After end(), as a socket destroy is: once the held bytes are out.
    hold.destroyRequested = true;
    return this;
  }
  hold.ended = true;
  hold.destroyed = { error };
  hold.resolveSent(undefined);
  return this;
}

/**
 * Whether this Node's `writeHead`, given a raw array after `setHeader`, keeps a repeated name (`['Link', '<a>', 'Link',
 * '<b>']` sends both): Node 22.0.0 and later do (nodejs/node#50394, semver-major); Node 20 lets the last one win.
 */
const RAW_ARRAY_KEEPS_REPEATS = Number(process.versions.node.split('.')[0]) >= 22;

function heldWriteHead(this: HeldRes, status: number, ...rest: unknown[]): Response {
  if (this[HELD]!.streaming) {
    // The head went with the first write. A bare `writeHead(status)` is what a writer that checks Node's private
    // `_header` (compression, mounted after the guard) calls before every chunk: ignored, as the sent head is.
    if (rest.length === 0) return this;
    throw headersSentError('write');
  }
  this.statusCode = status;
  let headers = rest[0];
  if (typeof headers === 'string') {
    this.statusMessage = headers;
    headers = rest[1];
  }
  if (Array.isArray(headers)) {
    if (this.getHeaderNames().length === 0) {
      // As Node sends a raw array when no header was set before: every pair, a name repeated stays repeated
      // (`Link` twice), pairs flat (`[name, value, …]`) or nested (`[[name, value], …]`).
      const nested = Array.isArray(headers[0]);
      const step = nested ? 1 : 2;
      for (let i = 0; i < headers.length; i += step) {
        const [name, value] = nested ? (headers[i] as unknown[]) : [headers[i], headers[i + 1]];
        if (name) this.appendHeader(String(name), value as string | readonly string[]);
      }
    } else {
      // As Node does once headers were set: flat pairs only. Node 22 and later replace the headers of those names
      // and append every pair (a repeated name stays repeated); Node 20 passes each pair to setHeader (the last wins).
      if (headers.length % 2 !== 0) throw new TypeError('writeHead: a headers array holds name, value pairs (its length is odd)');
      if (RAW_ARRAY_KEEPS_REPEATS) {
        for (let i = 0; i < headers.length; i += 2) if (headers[i]) this.removeHeader(String(headers[i]));
        for (let i = 0; i < headers.length; i += 2) if (headers[i]) this.appendHeader(String(headers[i]), headers[i + 1] as string);
      } else {
        for (let i = 0; i < headers.length; i += 2) if (headers[i]) this.setHeader(String(headers[i]), headers[i + 1] as string);
      }
    }
  } else if (headers !== undefined && headers !== null && typeof headers === 'object') {
    for (const [name, value] of Object.entries(headers as Record<string, unknown>)) {
      if (value !== undefined) this.setHeader(name, value as string | number | readonly string[]);
    }
  }
  return this;
}

function heldWrite(this: HeldRes, chunk: unknown, encoding?: unknown, callback?: unknown): boolean {
  const hold = this[HELD]!;
  const cb = typeof encoding === 'function' ? encoding : callback;
  if (hold.ended) {
    // As Node does: a write after end() sends nothing; only its callback hears of it.
    if (typeof cb === 'function') queueMicrotask(() => (cb as Callback)(new Error('write after end')));
    return false;
  }
  // A copy: the write's callback runs now, and the writer may then fill the same buffer with its next chunk.
  const bytes = toBytes(chunk, typeof encoding === 'function' ? undefined : encoding);
  hold.chunks.push(typeof chunk === 'string' ? bytes : new Uint8Array(bytes));
  if (!hold.streaming) {
    hold.lockHead();
    hold.streamed();
  }
  if (typeof cb === 'function') queueMicrotask(() => (cb as Callback)(null));
  return true;
}

function heldEnd(this: HeldRes, chunk?: unknown, encoding?: unknown, callback?: unknown): Response {
  const hold = this[HELD]!;
  if (hold.ended) return this;
  hold.ended = true;
  let cb: unknown = callback;
  if (typeof chunk === 'function') {
    cb = chunk;
    chunk = undefined;
  } else if (typeof encoding === 'function') {
    cb = encoding;
    encoding = undefined;
  }
  if (typeof cb === 'function') hold.callbacks.push(cb as Callback);
  hold.chunks.push(toBytes(chunk, encoding));
  // A streamed answer's head is the one its first write sent.
  if (hold.snapshot === undefined) {
    hold.snapshotText = {};
    hold.snapshot = headOf(this, hold.snapshotText);
  }
  hold.markEnded();
  const body = (hold.body = concatBytes(hold.chunks));
  hold.resolveSent({ status: hold.snapshot.status, headers: hold.snapshotText!, body });
  return this;
}

/**
 * Shadows `writeHead`, `write` and `end` on `res` so the handler's status, headers and body are buffered
 * instead of sent. Headers given to `writeHead` are applied with `setHeader`, so they are captured too.
 */
function holdResponse(res: Response, graceMs: number, keepBefore = false): Hold {
  toDictionary(res);
  const held = res as HeldRes;
  const hold = new Hold(held, keepBefore, graceMs);
  held[HELD] = hold;
  res.writeHead = heldWriteHead as Response['writeHead'];
  res.write = heldWrite as Response['write'];
  res.end = heldEnd as Response['end'];
  res.destroy = heldDestroy as Response['destroy'];
  return hold;
}

const SCRATCH_A = Symbol('idemkit.express.scratch.a');
const SCRATCH_B = Symbol('idemkit.express.scratch.b');

/**
 * Puts `res` in V8's dictionary mode before the guard adds its own properties to it (the hold, the three
 * interceptors, `headersSent`). Express re-points every response's prototype (`Object.setPrototypeOf(res,
 * app.response)`), after which V8 caches no hidden-class transitions for it: each property added to `res`
 * builds a new hidden class (a copy of its ~50 property descriptors), and property accesses in Express and Node
 * miss their inline caches. Dictionary-mode objects share one hidden class, so those accesses hit again and
 * adding a property is a hash insert. Deleting a property that was not the last one added is what switches an
 * object to dictionary mode: `res.req` (set by Node's constructor and again by Express, long before the guard)
 * is deleted and defined again with its own descriptor, so nothing changes but the property order and no hidden
 * class is built on the way. Without an own configurable `req`, two scratch properties are added and deleted.
 * Only speed depends on it. Measured in one app process with the previous adapter and this one on two routes,
 * interleaved: app CPU per fresh request 148-158 -> 129-134 µs (SQLite), 174 -> 158 µs (Redis); per replay
 * 92-98 -> 84-88 µs (SQLite). Re-defining `req` instead of adding and deleting two scratch properties (two hidden
 * classes built and dropped per request): app instructions per request (callgrind, memory store) 815k -> 784k
 * fresh, 733k -> 669k replayed.
 */
function toDictionary(res: Response): void {
  const req = Object.getOwnPropertyDescriptor(res, 'req');
  if (req !== undefined && req.configurable === true) {
    delete (res as { req?: unknown }).req;
    Object.defineProperty(res, 'req', req);
    return;
  }
  const scratch = res as unknown as Record<symbol, number>;
  scratch[SCRATCH_A] = 0;
  scratch[SCRATCH_B] = 0;
  delete scratch[SCRATCH_A];
  delete scratch[SCRATCH_B];
}
