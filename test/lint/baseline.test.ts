import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { UsageError } from '../../src/errors.js';
import { applyBaseline, findingIdentity, identityHash, readBaseline, writeBaseline } from '../../src/lint/baseline.js';
import type { Finding } from '../../src/lint/rule.js';
import { fakeDocument, fakeFinding } from './fake-document.js';

describe('baseline', () => {
  let dir: string;
  let spec: string;
  let baselineFile: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'idemkit-baseline-'));
    spec = path.join(dir, 'api', 'openapi.yaml');
    baselineFile = path.join(dir, 'idemkit-baseline.json');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  function doc() {
    return fakeDocument(spec, {
      paths: {
        '/payouts': { post: { operationId: 'createPayout' } },
        '/refunds/{id}': { patch: {} },
      },
    });
  }
  // How the engine names operations: the operationId, else METHOD /path.
  const payout = 'createPayout';
  const refund = 'PATCH /refunds/{id}';

  it('keys a finding by rule, relative file, operation and pointer inside the operation', () => {
    const finding = fakeFinding({ ruleId: 'scope-missing', file: spec, pointer: '/paths/~1payouts/post/x-idempotency', line: 40, operations: [payout] });
    assert.deepEqual(findingIdentity(finding, [doc()], dir), {
      rule: 'scope-missing',
      file: 'api/openapi.yaml',
      operation: 'createPayout',
      pointer: '/x-idempotency',
    });
    const noId = fakeFinding({ ruleId: 'ttl-missing', file: spec, pointer: '/paths/~1refunds~1{id}/patch', operations: [refund] });
    assert.deepEqual(findingIdentity(noId, [doc()], dir).operation, 'PATCH /refunds/{id}');
    assert.equal(findingIdentity(noId, [doc()], dir).pointer, '');
    const shared = fakeFinding({ ruleId: 'ttl-missing', file: spec, pointer: '/components/x-defaults', operations: [refund, payout] });
    assert.deepEqual(findingIdentity(shared, [doc()], dir), {
      rule: 'ttl-missing',
      file: 'api/openapi.yaml',
      operation: 'PATCH /refunds/{id}, createPayout',
      pointer: '/components/x-defaults',
    });
  });

  it('does not change when only the line moves', () => {
    const a = fakeFinding({ ruleId: 'scope-missing', file: spec, pointer: '/paths/~1payouts/post/x-idempotency', line: 10, operations: [payout] });
    const b = { ...a, line: 99, column: 7, message: 'reworded' };
    assert.equal(identityHash(findingIdentity(a, [doc()], dir)), identityHash(findingIdentity(b, [doc()], dir)));
    const other = { ...a, ruleId: 'ttl-missing' };
    assert.notEqual(identityHash(findingIdentity(a, [doc()], dir)), identityHash(findingIdentity(other, [doc()], dir)));
  });

  it('records today, then reports only new findings and lists stale entries', () => {
    const today: Finding[] = [
      fakeFinding({ ruleId: 'scope-missing', file: spec, pointer: '/paths/~1payouts/post/x-idempotency', operations: [payout] }),
      fakeFinding({ ruleId: 'ttl-missing', file: spec, pointer: '/paths/~1payouts/post/x-idempotency', operations: [payout] }),
      fakeFinding({ ruleId: 'ttl-missing', file: spec, pointer: '/paths/~1refunds~1{id}/patch', operations: [refund] }),
      fakeFinding({ ruleId: 'key-unbounded', file: spec, pointer: '/paths/~1refunds~1{id}/patch', operations: [refund], suppressed: { reason: 'legacy' } }),
    ];
    const written = writeBaseline({ findings: today, documents: [doc()] }, baselineFile);
    assert.equal(written.entries.length, 3, 'suppressed findings are not recorded');
    const onDisk = JSON.parse(readFileSync(baselineFile, 'utf8'));
    assert.equal(onDisk.version, 1);
    assert.ok(onDisk.entries.every((entry: Record<string, unknown>) => !('line' in entry)), 'no line numbers in the baseline');

    // Tomorrow: the payout scope was fixed, a line moved, and a new finding appeared.
    const tomorrow: Finding[] = [
      { ...today[1]!, line: 200 },
      today[2]!,
      today[3]!,
      fakeFinding({ ruleId: 'lease-missing', file: spec, pointer: '/paths/~1payouts/post/x-idempotency', operations: [payout] }),
    ];
    const result = applyBaseline({ findings: tomorrow, documents: [doc()] }, readBaseline(baselineFile), baselineFile);
    assert.deepEqual(
      result.findings.map((f) => f.ruleId),
      ['key-unbounded', 'lease-missing'],
    );
    assert.equal(result.matched, 2);
    assert.deepEqual(
      result.stale.map((entry) => [entry.rule, entry.operation, entry.pointer]),
      [['scope-missing', 'createPayout', '/x-idempotency']],
    );
  });

  it('counts repeated identical findings', () => {
    const one = fakeFinding({ ruleId: 'fingerprint-field-unknown', file: spec, pointer: '/paths/~1payouts/post/x-idempotency', operations: [payout] });
    writeBaseline({ findings: [one, one], documents: [doc()] }, baselineFile);
    const result = applyBaseline({ findings: [one, one, one], documents: [doc()] }, readBaseline(baselineFile), baselineFile);
    assert.equal(result.matched, 2);
    assert.equal(result.findings.length, 1);
  });

  it('is relative to the baseline file, so the repository can move', () => {
    const finding = fakeFinding({ ruleId: 'scope-missing', file: spec, pointer: '/paths/~1payouts/post', operations: [payout] });
    writeBaseline({ findings: [finding], documents: [doc()] }, baselineFile);
    const moved = mkdtempSync(path.join(tmpdir(), 'idemkit-moved-'));
    try {
      const movedSpec = path.join(moved, 'api', 'openapi.yaml');
      const movedDoc = fakeDocument(movedSpec, { paths: { '/payouts': { post: { operationId: 'createPayout' } } } });
      writeFileSync(path.join(moved, 'b.json'), readFileSync(baselineFile));
      const result = applyBaseline({ findings: [{ ...finding, file: movedSpec }], documents: [movedDoc] }, readBaseline(path.join(moved, 'b.json')), path.join(moved, 'b.json'));
      assert.equal(result.findings.length, 0);
    } finally {
      rmSync(moved, { recursive: true, force: true });
    }
  });

  it('reads a baseline saved with a byte-order mark (an editor\'s UTF-8 with BOM), as documents are read', () => {
    const written = writeBaseline({ findings: [fakeFinding({ ruleId: 'ttl-missing', file: spec, pointer: '/paths/~1payouts/post', operations: [payout] })], documents: [doc()] }, baselineFile);
    writeFileSync(baselineFile, `\ufeff${readFileSync(baselineFile, 'utf8')}`);
    assert.deepEqual(readBaseline(baselineFile).entries, written.entries);
  });

  it('rejects a missing or malformed baseline with a usage error', () => {
    assert.throws(() => readBaseline(path.join(dir, 'none.json')), (error: unknown) => error instanceof UsageError && /does not exist.*--write-baseline/.test(error.message));
    writeFileSync(baselineFile, '{ "entries": [] }');
    assert.throws(() => readBaseline(baselineFile), (error: unknown) => error instanceof UsageError && /not an idemkit baseline/.test(error.message));
    writeFileSync(baselineFile, '{ "version": 1, "entries": [{ "rule": 1 }] }');
    assert.throws(() => readBaseline(baselineFile), (error: unknown) => error instanceof UsageError && /entry 0/.test(error.message));
    writeFileSync(baselineFile, '{ "version": 1, ');
    assert.throws(() => readBaseline(baselineFile), (error: unknown) => error instanceof UsageError && /not valid JSON/.test(error.message));
  });
});
