/** The explicit rule registry: every rule idemkit ships, in catalogue order. */
import type { Rule } from '../src/lint/rule.js';
import contractInvalid from './contract-invalid.js';
import contractMissing from './contract-missing.js';
import keyHeaderUndeclared from './key-header-undeclared.js';
import keyOptional from './key-optional.js';
import keyUnbounded from './key-unbounded.js';
import scopeMissing from './scope-missing.js';
import scopeTooWide from './scope-too-wide.js';
import scopeUnresolvable from './scope-unresolvable.js';
import fingerprintMissing from './fingerprint-missing.js';
import fingerprintFieldUnknown from './fingerprint-field-unknown.js';
import fingerprintRequiredUncovered from './fingerprint-required-uncovered.js';
import ttlMissing from './ttl-missing.js';
import ttlInvalid from './ttl-invalid.js';
import ttlBelowRetryBudget from './ttl-below-retry-budget.js';
import retryBudgetMissing from './retry-budget-missing.js';
import leaseMissing from './lease-missing.js';
import stateResponseMissing from './state-response-missing.js';
import stateStatusInvalid from './state-status-invalid.js';
import retryAfterUndeclared from './retry-after-undeclared.js';
import replayHeaderUndeclared from './replay-header-undeclared.js';
import leaseExceedsTtl from './lease-exceeds-ttl.js';
import replayUndefined from './replay-undefined.js';
import effectOwnerMissing from './effect-owner-missing.js';
import externalWithoutReconciliation from './external-without-reconciliation.js';
import statusRouteUnresolved from './status-route-unresolved.js';
import unknownOutcomeUndefined from './unknown-outcome-undefined.js';
import retryOnUnsafeWithoutContract from './retry-on-unsafe-without-contract.js';

export const rules: readonly Rule[] = [
  contractInvalid,
  contractMissing,
  keyHeaderUndeclared,
  keyOptional,
  keyUnbounded,
  scopeMissing,
  scopeTooWide,
  scopeUnresolvable,
  fingerprintMissing,
  fingerprintFieldUnknown,
  fingerprintRequiredUncovered,
  ttlMissing,
  ttlInvalid,
  ttlBelowRetryBudget,
  retryBudgetMissing,
  leaseMissing,
  stateResponseMissing,
  stateStatusInvalid,
  retryAfterUndeclared,
  replayHeaderUndeclared,
  leaseExceedsTtl,
  replayUndefined,
  effectOwnerMissing,
  externalWithoutReconciliation,
  statusRouteUnresolved,
  unknownOutcomeUndefined,
  retryOnUnsafeWithoutContract,
];
