import assert from 'node:assert/strict';
import { defineRule } from '../../src/lint/rule.js';
import keyOptional from '../../rules/key-optional.js';
import { CONTRACT, payouts } from '../helpers/api-docs.js';
import { checkCase, tableProblems } from '../helpers/rule-tester.js';

// A rule that reports wherever the case tells it to, to prove the tester's own checks can fail.
const reportAt = (pointer: string, message = 'found') =>
  defineRule({
    meta: { id: 'probe', severity: 'error', description: 'd', criterion: 'contract', rationale: 'r', messages: { hit: message } },
    check(ctx) {
      if (ctx.operation.operationId === 'createPayout') ctx.report('hit', { file: ctx.document.file, pointer });
    },
  });

const optional = payouts((_t, c) => (c.key.required = false));

describe('rule tester', () => {
  it('rejects a table without valid or invalid cases, repeated names, and unknown message ids', () => {
    assert.deepEqual(tableProblems(keyOptional, { valid: [], invalid: [] }), ['rule key-optional has no valid case', 'rule key-optional has no invalid case']);
    const problems = tableProblems(keyOptional, {
      valid: [{ name: 'a', document: payouts() }],
      invalid: [
        { name: 'a', document: optional, errors: [{ messageId: 'optionnal', pointer: '' }] },
        { name: 'b', document: optional, errors: [] },
      ],
    });
    assert.deepEqual(problems, [
      "case name 'a' repeats",
      "invalid case 'a' expects message id 'optionnal', which rule key-optional does not define",
      "invalid case 'b' expects no error (make it a valid case)",
    ]);
  });

  it('passes a matching case', async () => {
    await checkCase(keyOptional, { name: 'ok', document: optional, errors: [{ messageId: 'optional', pointer: `${CONTRACT}/key/required` }] });
    await checkCase(keyOptional, { name: 'ok', document: payouts() });
  });

  it('fails on a finding in a valid case, a wrong count, a wrong pointer or a wrong operation', async () => {
    await assert.rejects(checkCase(keyOptional, { name: 'x', document: optional }), /expected 0 finding/);
    await assert.rejects(
      checkCase(keyOptional, {
        name: 'x',
        document: optional,
        errors: [
          { messageId: 'optional', pointer: `${CONTRACT}/key/required` },
          { messageId: 'optional', pointer: `${CONTRACT}/key/required` },
        ],
      }),
      /expected 2 finding/,
    );
    await assert.rejects(checkCase(keyOptional, { name: 'x', document: optional, errors: [{ messageId: 'optional', pointer: `${CONTRACT}/key` }] }), /pointer of finding 1/);
    await assert.rejects(
      checkCase(keyOptional, { name: 'x', document: optional, operation: 'getPayout', errors: [{ messageId: 'optional', pointer: `${CONTRACT}/key/required` }] }),
      /not getPayout/,
    );
  });

  it('fails when a reported pointer does not resolve in the document', async () => {
    await assert.rejects(
      checkCase(reportAt('/paths/~1payouts/post/x-nothing'), { name: 'x', document: payouts(), errors: [{ messageId: 'hit', pointer: '/paths/~1payouts/post/x-nothing' }] }),
      /must resolve/,
    );
  });

  it('fails when a message keeps an unfilled placeholder', async () => {
    await assert.rejects(
      checkCase(reportAt('/paths/~1payouts/post', 'the {what} is wrong'), { name: 'x', document: payouts(), errors: [{ messageId: 'hit', pointer: '/paths/~1payouts/post' }] }),
      /unfilled placeholder/,
    );
  });
});
