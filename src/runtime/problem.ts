/**
 * RFC 9457 problem details for the guard's own answers, with stable `type` URIs. Imports only `wire.ts` (and
 * Node's `TextEncoder` global); copied into users' generated code.
 */
import { PROBLEM_BASE, PROBLEM_HEADER } from './wire.js';

export { PROBLEM_BASE, PROBLEM_HEADER };

/** The guard's problem types and their titles. The names are stable once released. */
export const PROBLEM_TITLES = {
  'idempotency-key-missing': 'Idempotency key missing',
  'idempotency-key-invalid': 'Idempotency key invalid',
  'idempotency-scope-unresolved': 'Idempotency scope unresolved',
  'idempotency-key-reused': 'Idempotency key reused with another payload',
  'idempotency-request-in-progress': 'Request with this idempotency key in progress',
  'idempotency-request-abandoned': 'Request with this idempotency key abandoned',
  'idempotency-store-unavailable': 'Idempotency store unavailable',
  /** The handler ran but its result could not be recorded (e.g. a failed commit): the effect may have happened. */
  'idempotency-outcome-unknown': 'Outcome of the request unknown',
  /**
   * OASIS Repeatable Requests: the request says it was first sent longer ago than records are kept, so it may
   * have run already with its record gone; it is not run again (412).
   */
  'idempotency-request-expired': 'Request first sent before the records kept',
  /**
   * The status route (`Guard.status`): no record of a request with this key, in this scope — none reached the guard,
   * or its record outlived the TTL and was purged (404).
   */
  'idempotency-key-unknown': 'No request with this idempotency key recorded',
} as const;

/** One of the guard's problem type names. */
export type ProblemName = keyof typeof PROBLEM_TITLES;

/** An RFC 9457 problem body. */
export interface ProblemBody {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail: string;
  /** Extension member: the delivery's request id, when the request had one. */
  readonly requestId?: string;
}

/** A ready-to-send problem answer (same shape as the guard's `GuardResponse`). */
export interface ProblemResponse {
  status: number;
  headers: Record<string, string>;
  body: Uint8Array;
}

/** The full type URI of a problem name. */
export function problemType(name: ProblemName): string {
  return PROBLEM_BASE + name;
}

/**
 * Build a guard answer: `application/problem+json` (or what `render` makes of it), `Cache-Control: no-store`,
 * the {@link PROBLEM_HEADER}, plus `extraHeaders` (e.g. `retry-after`). Header names are lower-case.
 */
export function problemResponse(
  name: ProblemName,
  status: number,
  detail: string,
  extraHeaders: Record<string, string> = {},
  requestId?: string,
  render?: ProblemRenderer,
): ProblemResponse {
  const body: ProblemBody = {
    type: problemType(name),
    title: PROBLEM_TITLES[name],
    status,
    detail,
    ...(requestId !== undefined ? { requestId } : {}),
  };
  const custom = render === undefined ? undefined : rendered(render, { ...body, name });
  return {
    status,
    headers: {
      ...custom?.headers,
      'content-type': custom?.contentType ?? 'application/problem+json',
      'cache-control': 'no-store',
      [PROBLEM_HEADER]: name,
      ...extraHeaders,
    },
    body: custom?.body ?? new TextEncoder().encode(JSON.stringify(body)),
  };
}

/** One of the guard's own answers as a renderer sees it: the problem details and the stable problem name. */
export interface GuardProblem extends ProblemBody {
  readonly name: ProblemName;
}

/**
 * Writes the guard's own answers in the API's error format (for clients and SDKs that read their own error
 * body, not problem details): the body — bytes and text as they are, anything else as JSON — its media type
 * (default `application/json`) and extra headers (e.g. `x-should-retry: false`, which Stainless-generated SDKs
 * obey). The status, `Retry-After` (given or not), `Cache-Control` and the framing headers stay the guard's.
 */
export type ProblemRenderer = (problem: GuardProblem) => {
  readonly body: unknown;
  readonly contentType?: string;
  readonly headers?: Readonly<Record<string, string>>;
};

/** Headers whose meaning is the guard's: a renderer cannot set them. */
const GUARD_HEADERS = new Set(['content-type', 'cache-control', 'retry-after', 'content-length', 'transfer-encoding', PROBLEM_HEADER]);
/** An HTTP field name (RFC 9110 §5.1: a token). */
export const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const HEADER_VALUE = /^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/;

/**
 * The renderer's answer as bytes; `undefined` (problem details are sent instead) when it throws, gives nothing,
 * or gives a body that cannot be written (a `BigInt`, a cycle).
 */
function rendered(render: ProblemRenderer, problem: GuardProblem): { contentType: string; body: Uint8Array; headers: Record<string, string> } | undefined {
  try {
    const out = render(problem);
    if (out === undefined || out === null || typeof out !== 'object' || out.body === undefined) return undefined;
    const contentType = typeof out.contentType === 'string' && HEADER_VALUE.test(out.contentType) ? out.contentType : 'application/json';
    // Header lines the renderer adds: only well-formed ones (a CR LF in a value would split the answer).
    const headers: Record<string, string> = {};
    const given: unknown = out.headers;
    if (typeof given === 'object' && given !== null && !Array.isArray(given)) {
      for (const [name, value] of Object.entries(given)) {
        const lower = name.toLowerCase();
        if (HEADER_NAME.test(name) && !GUARD_HEADERS.has(lower) && typeof value === 'string' && HEADER_VALUE.test(value)) headers[lower] = value;
      }
    }
    return { contentType, body: bytesOf(out.body), headers };
  } catch {
    return undefined;
  }
}

/** A rendered body as bytes: bytes and text as they are, anything else as JSON (throws when it cannot be). */
function bytesOf(body: unknown): Uint8Array {
  if (body instanceof Uint8Array) return body;
  if (body instanceof ArrayBuffer) return new Uint8Array(body.slice(0));
  if (ArrayBuffer.isView(body)) return new Uint8Array(body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength));
  if (typeof body === 'string') return new TextEncoder().encode(body);
  const json = JSON.stringify(body);
  if (json === undefined) throw new TypeError('the rendered body has no JSON form');
  return new TextEncoder().encode(json);
}
