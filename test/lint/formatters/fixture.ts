/** A small lint report shared by the formatter tests: hand-made rules and findings, nasty characters included. */
import { defineRule } from '../../../src/lint/rule.js';
import type { Finding, Rule } from '../../../src/lint/rule.js';
import type { FormatterInput } from '../../../src/lint/formatters/common.js';
import { fakeContract, fakeDocument, fakeFinding, withContract } from '../fake-document.js';

export const cwd = '/repo';
export const spec = '/repo/api/open api.yaml';
export const payout = 'POST /payouts (createPayout)';
export const refund = 'POST /refunds (createRefund)';
/** How the engine names them in `Finding.operations`. */
export const payoutName = 'createPayout';
export const refundName = 'createRefund';

const rule = (id: string, criterion: Rule['meta']['criterion'], severity: Rule['meta']['severity']) =>
  defineRule({
    meta: { id, severity, criterion, description: `${id} description`, rationale: `${id} rationale`, messages: { problem: `${id}: {detail}` } },
    check() {},
  }) as Rule;

export const rules: Rule[] = [
  rule('scope-too-wide', 'scope', 'error'),
  rule('ttl-missing', 'replay', 'warn'),
  rule('contract-missing', 'contract', 'error'),
  rule('effect-owner-missing', 'owner', 'info'),
];

export function report(overrides: Partial<FormatterInput> = {}): FormatterInput {
  let document = fakeDocument(spec, {
    openapi: '3.1.0',
    paths: {
      '/payouts': { post: { operationId: 'createPayout', 'x-idempotency': {} } },
      '/refunds': { post: { operationId: 'createRefund' } },
      '/payouts/{id}': { get: { operationId: 'getPayout' } },
    },
  });
  document = withContract(document, payout, fakeContract(document.operations[0]!.at, { ttl: undefined }));
  const findings: Finding[] = [
    fakeFinding({
      ruleId: 'scope-too-wide',
      file: spec,
      pointer: '/paths/~1payouts/post/x-idempotency/scope',
      line: 12,
      column: 7,
      message: 'Scope 100% global: keys, of <tenants> & "owners" collide\nacross accounts | `x`',
      operations: [payoutName],
    }),
    fakeFinding({ ruleId: 'ttl-missing', file: spec, pointer: '/paths/~1payouts/post/x-idempotency', line: 10, column: 5, severity: 'warn', message: 'No ttl.', operations: [payoutName] }),
    fakeFinding({
      ruleId: 'effect-owner-missing',
      file: spec,
      pointer: '/paths/~1payouts/post/x-idempotency',
      line: 10,
      column: 5,
      severity: 'info',
      message: 'Owner?',
      operations: [payoutName],
      suppressed: { reason: 'owned by the ledger team' },
    }),
    fakeFinding({ ruleId: 'contract-missing', file: spec, pointer: '/paths/~1refunds/post', line: 30, column: 5, message: 'POST /refunds takes Idempotency-Key but has no x-idempotency.', operations: [refundName] }),
  ];
  return { cwd, findings, documents: [document], rules, ...overrides };
}
