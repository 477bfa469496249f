import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { contractsIn, deployNotes } from '../../src/generate/deploy-notes.js';
import type { CompiledContract } from '../../src/runtime/contract.js';

/** The contracts of the golden Express + SQLite output: what `generate` writes. */
const GOLDEN = readFileSync('test/golden/server/express-sqlite/contracts.ts', 'utf8');

function base(): CompiledContract {
  const contracts = contractsIn(GOLDEN);
  assert.ok(contracts !== undefined && contracts.length > 0);
  return structuredClone(contracts[0]!);
}

function notes(edit: (c: { -readonly [K in keyof CompiledContract]: CompiledContract[K] } & Record<string, unknown>) => void): string[] {
  const before = base();
  const after = structuredClone(before) as never;
  edit(after);
  return deployNotes([before], [after]);
}

describe('generate: deploy notes', () => {
  it('reads the contracts generate writes, and those of before 2026-12-03 (`satisfies`); a file it did not write gives none', () => {
    assert.equal(contractsIn(GOLDEN)?.[0]?.operationId, 'createDemoRequest');
    const older = GOLDEN.replace(/^export const (\w+): CompiledContract = /m, 'export const $1 = ').replace(/^\};$/m, '} satisfies CompiledContract;');
    assert.notEqual(older, GOLDEN);
    assert.equal(contractsIn(older)?.[0]?.operationId, 'createDemoRequest');
    assert.equal(contractsIn('export const x = 1;\n'), undefined);
  });

  it('a hand-edited contract of another shape is left out, never a crash', () => {
    for (const [from, to] of [
      ['"name": "Idempotency-Key"', '"nom": "Idempotency-Key"'],
      ['"include": [', '"include": 5, "x": ['],
      ['"kind": "principal"', '"kind": 7'],
    ] as const) {
      const edited = GOLDEN.replace(from, to);
      assert.notEqual(edited, GOLDEN, from);
      const contracts = contractsIn(edited);
      assert.deepEqual(contracts, [], from);
      assert.doesNotThrow(() => deployNotes(contracts!, contractsIn(GOLDEN)!));
    }
  });

  it('says nothing for edits a retry does not notice: the same contract, include order, a re-cased key header, a loosened budget', () => {
    assert.deepEqual(notes(() => {}), []);
    assert.deepEqual(
      notes((c) => {
        c.fingerprint = { ...c.fingerprint, include: [...(c.fingerprint.include as string[])].reverse() };
      }),
      [],
    );
    assert.deepEqual(
      notes((c) => {
        c.key = { ...c.key, name: 'IDEMPOTENCY-KEY' };
      }),
      [],
    );
    // A budget already past the ttl before (a rule set to warn) is no edit.
    const before = base();
    const wide = { ...before, retry: { ...before.retry, deadlineMs: before.ttlMs * 2 } };
    assert.deepEqual(deployNotes([wide], [wide]), []);
  });

  it('a query or body key re-cased is another key; an optional key moved runs again, a required one answers 400', () => {
    const recased = notes((c) => {
      c.key = { in: 'query', name: 'IdempotencyKey', required: true, maxLength: 255 } as never;
    });
    assert.match(recased.join('\n'), /key header Idempotency-Key → query IdempotencyKey: .* answers 400/);
    const before = { ...base(), key: { in: 'query', name: 'idempotencyKey', required: false, maxLength: 255 } } as CompiledContract;
    const after = { ...before, key: { ...before.key, name: 'IdempotencyKey' } } as CompiledContract;
    const [note] = deployNotes([before], [after]);
    assert.match(note!, /key query idempotencyKey → query IdempotencyKey: the key is optional, so .* runs unguarded \(a second effect\)/);
  });

  it('names the status route only for a contract that has one', () => {
    const rescoped = (c: Parameters<Parameters<typeof notes>[0]>[0]) => {
      c.scope = [{ kind: 'principal' }, { kind: 'header', name: 'X-Tenant-Id' }];
    };
    assert.ok(base().effect.statusRoute !== undefined);
    assert.match(notes(rescoped).join('\n'), /runs again \(a second effect\), and the status route answers 404 for it/);
    const { statusRoute: _, ...effect } = base().effect;
    const before = { ...base(), effect } as CompiledContract;
    const [without] = deployNotes([before], [{ ...before, scope: [{ kind: 'principal' }, { kind: 'header', name: 'X-Tenant-Id' }] }]);
    assert.match(without!, /runs again \(a second effect\); deploy it/);
  });
});
