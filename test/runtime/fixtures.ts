import type { CompiledContract } from '../../src/runtime/contract.js';
import type { GuardRequest, GuardResponse } from '../../src/runtime/guard.js';

/** The article's demo operation as a compiled contract; `overrides` replace top-level members. */
export function demoContract(overrides: Partial<CompiledContract> = {}): CompiledContract {
  return {
    operationId: 'createDemoRequest',
    method: 'POST',
    path: '/v1/demo-requests',
    key: { in: 'header', name: 'Idempotency-Key', required: true, maxLength: 255, pattern: '^[A-Za-z0-9._:-]+$' },
    scope: [{ kind: 'principal' }, { kind: 'header', name: 'X-Tenant-Id' }],
    fingerprint: { include: ['/topic', '/contact/email'], exclude: [], query: [] },
    ttlMs: 86_400_000,
    leaseMs: 30_000,
    retry: { deadlineMs: 30_000, maxAttempts: 4, backoff: { initialMs: 200, maxMs: 5000, jitter: 'full' } },
    effect: { owner: 'demo-requests', external: false, providerKey: 'forward', statusRoute: 'getDemoRequest' },
    transient: [429, 503],
    responses: {
      replayHeader: 'Idempotent-Replayed',
      missingKey: 400,
      invalidKey: 400,
      mismatch: 422,
      inProgress: 409,
      abandoned: 409,
      storeUnavailable: 503,
    },
    unknownOutcome: 'status-route',
    ...overrides,
  };
}

/** A request to the demo operation with `key` (omit with `undefined`). */
export function demoRequest(key: string | readonly string[] | undefined, body: unknown = { topic: 'pricing', contact: { email: 'a@example.com' } }, extra: Partial<GuardRequest> = {}): GuardRequest {
  return {
    pathParams: {},
    query: {},
    headers: { ...(key !== undefined ? { 'idempotency-key': key } : {}), 'x-tenant-id': 't1' },
    body,
    principal: 'user-1',
    requestId: 'req-1',
    ...extra,
  };
}

/** A JSON response as a handler would send it. */
export function jsonResponse(status: number, value: unknown, headers: Record<string, string> = {}): GuardResponse {
  return { status, headers: { 'content-type': 'application/json', ...headers }, body: new TextEncoder().encode(JSON.stringify(value)) };
}

/** Parse a guard response body as JSON. */
export function bodyJson(response: GuardResponse): any {
  return JSON.parse(new TextDecoder().decode(response.body));
}
