/**
 * Fetch adapter: wraps a `(request: Request, ...rest) => Promise<Response>` handler — the shape of Bun's
 * `fetch`, Deno.serve, Next.js route handlers, Cloudflare-style workers and Hono (`(c) => h(c.req.raw)`) —
 * into one with the same signature that runs the guard first and records the response it returns.
 *
 *     export const POST = guards.createOrder.wrap(async (request) => Response.json(await create(request), { status: 201 }));
 *
 * The handler reads the guard's context with `idempotencyOf(request)`. Path parameters for path scopes
 * and the fingerprint come from matching the contract's path template against the URL (or `options.params`).
 * Imports only Node built-ins / web globals and the runtime core; copied into users' generated code.
 */
import type { CompiledContract } from '../contract.js';
import { createGuard, transactionRefusal, type Guard, type GuardRequest, type GuardResponse, type HandlerContext } from '../guard.js';
import { bodyForFingerprint, headersFromEntries, identityAnswer, pathMatcher, queryFromSearchParams, singleHeader, type RouteGuardOptionsFor } from './common.js';

// The matcher lives in common.ts (Express and Fastify use it too); re-exported for existing importers.
export { pathMatcher };

/** Options of a fetch route guard. */
export interface RouteGuardOptions extends RouteGuardOptionsFor<Request> {
  /** Path parameters of a request, when the router knows them better than the contract's path template. */
  readonly params?: (request: Request) => Record<string, string> | undefined;
}

/** Options of {@link RouteGuard.wrap}. */
export interface WrapOptions {
  /**
   * One-transaction mode (SQLite, PostgreSQL): the handler runs inside the reserving transaction. `wrap` throws a
   * `TypeError` for an external effect without a provider key (see `transactionRefusal`).
   */
  readonly transaction?: boolean;
}

/** A fetch route guard. */
export interface RouteGuard {
  readonly contract: CompiledContract;
  /** The framework-agnostic guard underneath. */
  readonly guard: Guard;
  /** Wraps a fetch handler; extra arguments (Next.js context, Bun server, …) pass through unchanged. */
  wrap<Rest extends unknown[]>(
    handler: (request: Request, ...rest: Rest) => Response | Promise<Response>,
    options?: WrapOptions,
  ): (request: Request, ...rest: Rest) => Promise<Response>;
}

const contexts = new WeakMap<Request, HandlerContext<unknown>>();

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

  async function toGuardRequest(request: Request): Promise<GuardRequest> {
    const url = new URL(request.url);
    const pathParams = options.params?.(request) ?? matchPath(url.pathname);
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
      query: queryFromSearchParams(url.searchParams),
      headers,
      body: await readBody(request),
      ...(principal !== undefined ? { principal } : {}),
      ...(requestId !== undefined ? { requestId } : {}),
    };
  }

  return {
    contract,
    guard,
    wrap(handler, wrapOptions) {
      // Refused when the handler is wrapped, not on its first request.
      const refusal = wrapOptions?.transaction === true ? transactionRefusal(contract, options.store) : undefined;
      if (refusal !== undefined) throw new TypeError(refusal);
      return async (request, ...rest) => {
        const guardRequest = await toGuardRequest(request);
        let original: { response: Response; captured: GuardResponse; recorded: GuardResponse } | undefined;
        const answer = await guard.handle(
          guardRequest,
          async (context) => {
            contexts.set(request, context);
            const response = await handler(request, ...rest);
            const captured = await capture(response);
            const recorded = await identityAnswer(captured);
            original = { response, captured, recorded };
            return recorded;
          },
          wrapOptions?.transaction === true ? { transaction: true } : {},
        );
        if (original !== undefined && answer.body === original.recorded.body) {
          // The handler's own answer: its bytes and headers as sent (repeated Set-Cookie, Content-Encoding included)
          // plus the guard's.
          const headers = new Headers(original.response.headers);
          for (const [name, value] of Object.entries(answer.headers)) {
            if (original.captured.headers[name] !== value) headers.set(name, value);
          }
          return toResponse({ ...answer, body: original.captured.body }, headers);
        }
        return toResponse(answer, new Headers(answer.headers));
      };
    },
  };
}

async function readBody(request: Request): Promise<unknown> {
  if (request.body === null) return undefined;
  // A clone, so the handler can still read the body itself. Bytes, not text: a binary body is fingerprinted
  // exactly, not through UTF-8 replacement characters.
  const bytes = new Uint8Array(await request.clone().arrayBuffer());
  if (bytes.length === 0) return undefined;
  return bodyForFingerprint(bytes, request.headers.get('content-type') ?? undefined);
}

async function capture(response: Response): Promise<GuardResponse> {
  const body = new Uint8Array(await response.arrayBuffer());
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
