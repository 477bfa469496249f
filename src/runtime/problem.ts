/**
 * RFC 9457 problem details for the guard's own answers, with stable `type` URIs. Imports nothing but
 * Node's `TextEncoder` global; copied into users' generated code.
 */

/** Base of every problem type URI idemkit answers with. */
export const PROBLEM_BASE = 'https://idemkit.dev/problems/';

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
 * Build an `application/problem+json` answer with `Cache-Control: no-store`, plus `extraHeaders`
 * (e.g. `retry-after`). Header names are lower-case.
 */
export function problemResponse(
  name: ProblemName,
  status: number,
  detail: string,
  extraHeaders: Record<string, string> = {},
  requestId?: string,
): ProblemResponse {
  const body: ProblemBody = {
    type: problemType(name),
    title: PROBLEM_TITLES[name],
    status,
    detail,
    ...(requestId !== undefined ? { requestId } : {}),
  };
  return {
    status,
    headers: { 'content-type': 'application/problem+json', 'cache-control': 'no-store', ...extraHeaders },
    body: new TextEncoder().encode(JSON.stringify(body)),
  };
}
