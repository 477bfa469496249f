/** Compiled contracts used by the client engine tests. */
import type { CompiledContract } from '../../src/runtime/contract.js';

export const localContract: CompiledContract = {
  operationId: 'createDemoRequest',
  method: 'POST',
  path: '/v1/demo-requests',
  key: { header: 'Idempotency-Key', required: true, maxLength: 255 },
  scope: [{ kind: 'principal' }],
  fingerprint: { include: ['/topic'], exclude: [], query: [] },
  ttlMs: 86_400_000,
  leaseMs: 30_000,
  retry: { deadlineMs: 30_000, maxAttempts: 4, backoff: { initialMs: 200, maxMs: 5_000, jitter: 'full' } },
  effect: { owner: 'demo-requests', external: false, providerKey: 'none', statusRoute: 'getDemoRequest' },
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
};

/** The same operation, but its effect is an external call whose provider cannot deduplicate. */
export const externalNoKey: CompiledContract = {
  ...localContract,
  effect: { owner: 'mailer', external: true, providerKey: 'none', statusRoute: 'getDemoRequest' },
};

export const externalForward: CompiledContract = {
  ...localContract,
  effect: { owner: 'payments', external: true, providerKey: 'forward' },
};

export const externalDerived: CompiledContract = {
  ...localContract,
  effect: { owner: 'payments', external: true, providerKey: 'derived' },
};
