/**
 * Contracts for the client tests: compiled ones for the engine tests (the runtime tests' demo contract, narrowed),
 * and the YAML of the contract the generated-client documents share.
 */
import type { CompiledContract } from '../../src/runtime/contract.js';
import { demoContract } from '../runtime/fixtures.js';

/** The demo operation with a local effect: principal scope, `/topic` fingerprint, no key pattern. */
export const localContract: CompiledContract = demoContract({
  key: { in: 'header', name: 'Idempotency-Key', required: true, maxLength: 255 },
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

/**
 * The fields of the `x-idempotency` contract the generated-client test documents share (an `Idempotency-Key` header
 * of at most 255 characters, global scope, the whole request fingerprinted, a day's TTL, a 30-second lease): YAML
 * lines, each indented by `indent`, joined by newlines, to put under an `x-idempotency:` key in a document template.
 */
export function contractYaml(indent: string): string {
  return ['key: { header: Idempotency-Key, required: true, maxLength: 255 }', 'scope: [global]', 'fingerprint: { include: all }', 'ttl: P1D', 'lease: PT30S']
    .map((line) => indent + line)
    .join('\n');
}
