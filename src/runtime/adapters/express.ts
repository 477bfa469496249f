/**
 * Express adapter: a route middleware that runs the guard before the handler and records what the handler
 * really sent — through `writeHead`/`write`/`end`, so `res.send`, `res.json`, `res.sendStatus`, streams
 * piped into `res` and the error handler's answer are all captured, not only `send`.
 *
 * The response is held until it is recorded: the client never sees a first answer whose record could
 * still be missing, so a retry after a lost response always finds `completed`.
 *
 * Mount it after the body parser: `app.post(path, express.json(), guard, handler)`.
 * Imports only Express's types, Node built-ins and the runtime core; copied into users' generated code.
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { CompiledContract } from '../contract.js';
import { createGuard, type Guard, type GuardRequest, type GuardResponse, type HandlerContext } from '../guard.js';
import { bodyForFingerprint, concatBytes, nodeHeaders, queryFromSearchParams, readsQuery, routerPathParams, singleHeader, type RouteGuardOptionsFor } from './common.js';

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
   * record commit together, or roll back together (a 5xx, a transient status or a thrown handler).
   */
  readonly inTransaction: RequestHandler;
}

const CONTEXT = Symbol.for('idemkit.express.context');

// The query of a contract that reads none (the guard only reads it).
const NO_QUERY: Readonly<Record<string, string>> = Object.freeze({});

type ContextHolder = { [CONTEXT]?: HandlerContext<unknown> };

/**
 * The guard's context for this request: the reservation, the transaction in one-transaction mode and the
 * canonical key (to forward to a provider; never log it). Throws when no guard ran for the request.
 */
export function idempotencyOf<Tx = unknown>(res: Response): HandlerContext<Tx> {
  const context = (res.locals as ContextHolder)[CONTEXT];
  if (context === undefined) throw new Error('no idempotency guard ran for this request: mount the route guard before the handler');
  return context as HandlerContext<Tx>;
}

/** Builds the Express middleware that guards one operation. */
export function createRouteGuard(contract: CompiledContract, options: RouteGuardOptions): RouteGuard {
  const guard = createGuard(contract, options);
  const keyHeader = contract.key.header.toLowerCase();
  const withQuery = readsQuery(contract);
  const pathParamsOf = routerPathParams(contract.path);

  /** The principal hook's answer: a value, or a promise when the hook is asynchronous. */
  function principalOf(req: Request): string | undefined | Promise<string | undefined> {
    if (req.body === undefined && hasBody(req)) {
      // Without the parsed body every payload would share one fingerprint: refuse rather than replay wrongly.
      throw new Error(`idempotency guard for ${contract.operationId}: the request body was not parsed; mount express.json() before the guard`);
    }
    return options.principal === undefined ? undefined : options.principal(req);
  }

  function toGuardRequest(req: Request, principal: string | undefined): GuardRequest {
    // Express gives every req a V8 map of its own: each property read misses the inline caches, so read once.
    const raw = req.headers;
    const headers = nodeHeaders(raw, () => req.headersDistinct, keyHeader);
    const requestId = options.requestId !== undefined ? options.requestId(req) : singleHeader(headers, 'x-request-id');
    const request: { -readonly [K in keyof GuardRequest]: GuardRequest[K] } = {
      // `{item.id}` cannot be an Express param name: what req.params lacks is read from the path.
      pathParams: pathParamsOf(req.params, () => req.originalUrl || req.url),
      query: withQuery ? queryFromSearchParams(new URL(req.originalUrl || req.url, 'http://localhost').searchParams) : NO_QUERY,
      headers,
      body: bodyForFingerprint(req.body, raw['content-type']),
    };
    if (principal !== undefined) request.principal = principal;
    if (requestId !== undefined) request.requestId = requestId;
    return request;
  }

  /** The guard request, without a promise turn when the principal hook answers synchronously. */
  function guardRequestOf(req: Request): GuardRequest | Promise<GuardRequest> {
    const principal = principalOf(req);
    if (isThenable(principal)) return Promise.resolve(principal).then((value) => toGuardRequest(req, value));
    return toGuardRequest(req, principal);
  }

  function run(request: GuardRequest, res: Response, next: NextFunction): void {
    guard
      .begin(request)
      .then((decision) => {
        if (decision.kind === 'respond') {
          sendResponse(res, decision.response);
          return;
        }
        (res.locals as ContextHolder)[CONTEXT] = { reservation: decision.reservation, tx: undefined, idempotencyKey: decision.idempotencyKey };
        const hold = holdResponse(res);
        // Recorded, then sent: the client never sees an answer whose record could still be missing.
        hold.onSent = (sent) => {
          guard
            .complete(decision.reservation, sent)
            .then(() => hold.flush(decision.headers))
            .catch(next);
        };
        next();
      })
      .catch(next);
  }

  const middleware = (req: Request, res: Response, next: NextFunction): void => {
    let request: GuardRequest | Promise<GuardRequest>;
    try {
      request = guardRequestOf(req);
    } catch (error) {
      next(error);
      return;
    }
    if (request instanceof Promise) request.then((value) => run(value, res, next), next);
    else run(request, res, next);
  };

  const inTransaction: RequestHandler = (req: Request, res: Response, next: NextFunction): void => {
    void (async () => {
      const request = await guardRequestOf(req);
      let held: HeldResponse | undefined;
      const response = await guard.handle(
        request,
        async (context) => {
          (res.locals as ContextHolder)[CONTEXT] = context;
          held = holdResponse(res);
          next();
          return held.sent;
        },
        { transaction: true },
      );
      held?.restore();
      sendResponse(res, response);
    })().catch(next);
  };

  return Object.assign(middleware, { contract, guard, inTransaction });
}

function isThenable(value: unknown): value is PromiseLike<string | undefined> {
  return value !== null && typeof value === 'object' && typeof (value as { then?: unknown }).then === 'function';
}

function hasBody(req: Request): boolean {
  const length = req.headers['content-length'];
  return (length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined;
}

/** Writes a guard answer (problem, replay or the recorded first response) to `res`. */
function sendResponse(res: Response, response: GuardResponse): void {
  res.statusCode = response.status;
  for (const [name, value] of Object.entries(response.headers)) res.setHeader(name, value);
  res.end(Buffer.from(response.body.buffer, response.body.byteOffset, response.body.byteLength));
}

interface HeldResponse {
  /** Resolves with what the handler sent once it calls `end()`. */
  readonly sent: Promise<GuardResponse>;
  /** Called with what the handler sent once it calls `end()` (instead of waiting on {@link HeldResponse.sent}). */
  onSent: ((sent: GuardResponse) => void) | undefined;
  /** Puts the real `writeHead`/`write`/`end` back without sending. */
  restore(): void;
  /** Restores the methods and sends the held response with `extraHeaders` added. */
  flush(extraHeaders: Record<string, string>): void;
}

type Callback = (error?: Error | null) => void;

function toBytes(chunk: unknown, encoding: unknown): Uint8Array {
  if (chunk === undefined || chunk === null) return EMPTY;
  if (typeof chunk === 'string') return Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
  if (chunk instanceof Uint8Array) return chunk;
  throw new TypeError('response chunks must be strings or bytes');
}

const EMPTY = new Uint8Array(0);

// Express gives every `res` a map of its own (it re-points the prototype per request), so each property read or
// write on `res` misses V8's inline caches: the hold lives in a WeakMap, not on `res`, and once installed the
// interceptors stay (delegating to what they replaced) instead of being written back.
const holds = new WeakMap<object, Hold>();

type HeadersSnapshot = Record<string, number | string | string[]>;

/** The buffered response of one request; the interceptors below find it in `holds`. */
class Hold implements HeldResponse {
  // Most handlers send one chunk (`res.json`, `res.send`): it is the body as is, no joining.
  first: Uint8Array | undefined = undefined;
  more: Uint8Array[] | undefined = undefined;
  callbacks: Callback[] | undefined = undefined;
  ended = false;
  /** Restored: the interceptors pass every call through to what they replaced. */
  released = false;
  /** The body, once `end()` was called. */
  body: Uint8Array | undefined = undefined;
  onSent: ((sent: GuardResponse) => void) | undefined = undefined;
  #sent: Promise<GuardResponse> | undefined = undefined;
  #resolveSent: ((sent: GuardResponse) => void) | undefined = undefined;
  #response: GuardResponse | undefined = undefined;
  // What was there before (possibly another middleware's own wrapper, e.g. on-headers): what the calls go to.
  readonly writeHead: Response['writeHead'];
  readonly write: Response['write'];
  readonly end: Response['end'];
  /** Node's `headersSent` getter for this response (found on its prototype chain). */
  readonly headersSent: (this: Response) => boolean;

  /** Status and headers as they were when the handler called `end()`: exactly what is recorded and sent. */
  snapshot: { status: number; message: string; headers: HeadersSnapshot } | undefined = undefined;
  /** A socket `destroy()` asked for after `end()` (Express's final handler does it once `headersSent`). */
  destroyRequested = false;
  private socketDestroy: ((error?: Error) => unknown) | undefined = undefined;
  private socket: Response['socket'] = null;

  constructor(readonly res: Response) {
    this.writeHead = res.writeHead;
    this.write = res.write;
    this.end = res.end;
    this.headersSent = nodeHeadersSentOf(res);
  }

  get sent(): Promise<GuardResponse> {
    this.#sent ??= new Promise<GuardResponse>((resolve) => {
      if (this.#response !== undefined) resolve(this.#response);
      else this.#resolveSent = resolve;
    });
    return this.#sent;
  }

  push(chunk: Uint8Array): void {
    if (this.first === undefined) this.first = chunk;
    else (this.more ??= []).push(chunk);
  }

  deliver(response: GuardResponse): void {
    this.#response = response;
    if (this.#resolveSent !== undefined) this.#resolveSent(response);
    if (this.onSent !== undefined) this.onSent(response);
  }

  /**
   * After `end()` the response counts as sent, as in Node: `headersSent` reads true (see {@link holdResponse}),
   * so error handlers take their "already answered" path instead of rewriting status and headers; and a
   * socket destroy they ask for waits until the held bytes are out (unbuffered, they would already be).
   */
  markEnded(): void {
    const socket = this.res.socket;
    if (socket !== null && socket !== undefined && this.socketDestroy === undefined) {
      this.socket = socket;
      this.socketDestroy = socket.destroy;
      socket.destroy = ((_error?: Error) => {
        this.destroyRequested = true;
        return socket;
      }) as typeof socket.destroy;
    }
  }

  restore(): void {
    if (this.released) return;
    this.released = true;
    const snapshot = this.snapshot;
    if (snapshot === undefined) return;
    const res = this.res;
    // Whatever ran after end() (an error handler's status, Content-Type or Content-Length) is undone.
    if (res.statusCode !== snapshot.status) res.statusCode = snapshot.status;
    if (res.statusMessage !== snapshot.message) res.statusMessage = snapshot.message;
    const kept = snapshot.headers;
    const now = res.getHeaders();
    for (const name in now) if (!(name in kept)) res.removeHeader(name);
    for (const name in kept) {
      const value = kept[name]!;
      if (!sameHeader(now[name], value)) res.setHeader(name, value);
    }
    const socket = this.socket;
    if (socket !== null && this.socketDestroy !== undefined) {
      socket.destroy = this.socketDestroy as typeof socket.destroy;
      this.socketDestroy = undefined;
      if (this.destroyRequested) res.once('finish', () => socket.destroy());
    }
  }

  flush(extraHeaders: Record<string, string>): void {
    this.restore();
    const res = this.res;
    for (const name in extraHeaders) res.setHeader(name, extraHeaders[name]!);
    // The body heldEnd() already joined for the record: sent as one chunk, with the headers in one write.
    const body = this.body ?? joined(this);
    const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    const callbacks = this.callbacks;
    const end = this.end as (this: Response, ...args: unknown[]) => Response;
    if (callbacks === undefined) {
      end.call(res, bytes);
      return;
    }
    end.call(res, bytes, () => {
      for (const cb of callbacks) cb(null);
    });
  }
}

function sameHeader(current: unknown, kept: number | string | string[]): boolean {
  if (!Array.isArray(kept)) return current === kept;
  if (!Array.isArray(current) || current.length !== kept.length) return false;
  for (let i = 0; i < kept.length; i += 1) if (current[i] !== kept[i]) return false;
  return true;
}

function joined(hold: Hold): Uint8Array {
  if (hold.first === undefined) return EMPTY;
  return hold.more === undefined ? hold.first : concatBytes([hold.first, ...hold.more]);
}

// Node's own `headersSent` getter, per response prototype (found once, on the prototype chain).
const nodeHeadersSent = new WeakMap<object, (this: Response) => boolean>();

function nodeHeadersSentOf(res: Response): (this: Response) => boolean {
  const proto = Object.getPrototypeOf(res) as object;
  let getter = nodeHeadersSent.get(proto);
  if (getter === undefined) {
    for (let p: unknown = proto; p !== null && p !== undefined; p = Object.getPrototypeOf(p)) {
      const inherited = Object.getOwnPropertyDescriptor(p, 'headersSent');
      if (inherited === undefined) continue;
      getter = inherited.get ?? (() => Boolean(inherited.value));
      break;
    }
    getter ??= function (this: Response) {
      return (this as unknown as { _header?: unknown })._header != null;
    };
    nodeHeadersSent.set(proto, getter);
  }
  return getter;
}

// `res.headersSent` of a held response: true once the handler ended it (until restored), otherwise Node's value.
function heldHeadersSent(this: Response): boolean {
  const hold = holds.get(this)!;
  if (hold.ended && !hold.released) return true;
  return hold.headersSent.call(this);
}

function heldWriteHead(this: Response, status: number, ...rest: unknown[]): Response {
  const hold = holds.get(this)!;
  if (hold.released) return (hold.writeHead as (...args: unknown[]) => Response).call(this, status, ...rest);
  this.statusCode = status;
  let headers = rest[0];
  if (typeof headers === 'string') {
    this.statusMessage = headers;
    headers = rest[1];
  }
  if (Array.isArray(headers)) {
    for (let i = 0; i + 1 < headers.length; i += 2) this.setHeader(String(headers[i]), headers[i + 1] as string);
  } else if (headers !== undefined && headers !== null && typeof headers === 'object') {
    for (const [name, value] of Object.entries(headers as Record<string, unknown>)) {
      if (value !== undefined) this.setHeader(name, value as string | number | readonly string[]);
    }
  }
  return this;
}

function heldWrite(this: Response, chunk: unknown, encoding?: unknown, callback?: unknown): boolean {
  const hold = holds.get(this)!;
  if (hold.released) return (hold.write as (...args: unknown[]) => boolean).call(this, chunk, encoding, callback);
  const cb = typeof encoding === 'function' ? encoding : callback;
  if (hold.ended) {
    // As Node does: a write after end() sends nothing; only its callback hears of it.
    if (typeof cb === 'function') queueMicrotask(() => (cb as Callback)(new Error('write after end')));
    return false;
  }
  hold.push(toBytes(chunk, typeof encoding === 'function' ? undefined : encoding));
  if (typeof cb === 'function') queueMicrotask(() => (cb as Callback)(null));
  return true;
}

function heldEnd(this: Response, chunk?: unknown, encoding?: unknown, callback?: unknown): Response {
  const hold = holds.get(this)!;
  if (hold.released) return (hold.end as (...args: unknown[]) => Response).call(this, chunk, encoding, callback);
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
  if (typeof cb === 'function') (hold.callbacks ??= []).push(cb as Callback);
  if (chunk !== undefined && chunk !== null) hold.push(toBytes(chunk, encoding));
  const headers: Record<string, string> = {};
  // getHeaders() is a fresh object: it is the snapshot, with list values copied.
  const kept = this.getHeaders() as HeadersSnapshot;
  for (const name in kept) {
    const value = kept[name];
    if (value === undefined) {
      delete kept[name];
    } else if (Array.isArray(value)) {
      kept[name] = [...value];
      headers[name] = value.join(', ');
    } else {
      headers[name] = String(value);
    }
  }
  const status = this.statusCode;
  hold.snapshot = { status, message: this.statusMessage, headers: kept };
  hold.markEnded();
  const body = (hold.body = joined(hold));
  hold.deliver({ status, headers, body });
  return this;
}

/**
 * Shadows `writeHead`, `write` and `end` on `res` so the handler's status, headers and body are buffered
 * instead of sent. Headers given to `writeHead` are applied with `setHeader`, so they are captured too.
 */
function holdResponse(res: Response): HeldResponse {
  const hold = new Hold(res);
  holds.set(res, hold);
  // For the whole life of `res`: it reads Node's value again once the hold is restored.
  Object.defineProperty(res, 'headersSent', { configurable: true, enumerable: false, get: heldHeadersSent });
  res.writeHead = heldWriteHead as Response['writeHead'];
  res.write = heldWrite as Response['write'];
  res.end = heldEnd as Response['end'];
  return hold;
}
