/** Compiled contracts used by the client engine tests: the runtime tests' demo contract, narrowed. */
import type { CompiledContract } from '../../src/runtime/contract.js';
import { demoContract } from '../runtime/fixtures.js';

/** The demo operation with a local effect: principal scope, `/topic` fingerprint, no key pattern. */
export const localContract: CompiledContract = demoContract({
  key: { header: 'Idempotency-Key', required: true, maxLength: 255 },
  scope: [{ kind: 'principal' }],
  fingerprint: { include: ['/topic'], exclude: [], query: [] },
  effect: { owner: 'demo-requests', external: false, providerKey: 'none', statusRoute: 'getDemoRequest' },
});

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
