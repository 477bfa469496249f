import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileContract } from '../../src/parser/compile.js';
import { loadDocument } from '../../src/parser/load.js';
import type { ApiDocument, OperationView } from '../../src/parser/model.js';

const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/parser/${name}`, import.meta.url));
const sample = fileURLToPath(new URL('../../samples/demo-requests/openapi.yaml', import.meta.url));

function operation(doc: ApiDocument, operationId: string): OperationView {
  const op = doc.operations.find((candidate) => candidate.operationId === operationId);
  assert.ok(op, `operation ${operationId} exists`);
  return op;
}

describe('compileContract', () => {
  it('compiles the demo sample exactly as written', async () => {
    const doc = await loadDocument(sample);
    assert.deepEqual(compileContract(operation(doc, 'createDemoRequest')), {
      operationId: 'createDemoRequest',
      method: 'POST',
      path: '/v1/demo-requests',
      key: { in: 'header', name: 'Idempotency-Key', required: true, maxLength: 255, pattern: '^[A-Za-z0-9._:+/=-]+$' },
      scope: [{ kind: 'principal' }],
      fingerprint: { include: ['/topic', '/contact/email'], exclude: ['/clientSentAt'], query: [] },
      ttlMs: 86_400_000,
      leaseMs: 30_000,
      retry: { deadlineMs: 30_000, maxAttempts: 4, backoff: { initialMs: 200, maxMs: 5_000, jitter: 'full' } },
      effect: { owner: 'demo-requests', external: false, providerKey: 'none', statusRoute: 'getDemoRequestOutcome' },
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
    });
  });

  it('fills every default for `x-idempotency: true` over sparse document defaults', async () => {
    const doc = await loadDocument(fixture('defaults.yaml'));
    const compiled = compileContract(operation(doc, 'usesTrue'));
    assert.deepEqual(compiled, {
      operationId: 'usesTrue',
      method: 'POST',
      path: '/uses-true',
      key: { in: 'header', name: 'Idempotency-Key', required: true, maxLength: 128 },
      scope: [{ kind: 'principal' }],
      fingerprint: { include: 'all', exclude: [], query: ['dryRun'] },
      ttlMs: 86_400_000,
      leaseMs: 30_000,
      retry: { deadlineMs: 30_000, maxAttempts: 4, backoff: { initialMs: 200, maxMs: 5_000, jitter: 'full' } },
      effect: { owner: 'usesTrue', external: false, providerKey: 'none' },
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
      unknownOutcome: 'surface',
    });
  });

  it('marks a header or query scope part optional where the operation declares its parameter optional and the scope holds principal ($ref followed, header case-blind)', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'idemkit-compile-'));
    try {
      const file = path.join(dir, 'api.yaml');
      writeFileSync(
        file,
        [
          'openapi: 3.0.3',
          'info: {title: t, version: "1"}',
          'components:',
          '  parameters:',
          '    ForUser: {name: for-user-id, in: header, schema: {type: string}}',
          'paths:',
          '  /payouts/{id}:',
          '    parameters: [{name: id, in: path, required: true, schema: {type: string}}]',
          '    post:',
          '      operationId: createPayout',
          '      security: [{key: []}]',
          '      parameters:',
          '        - $ref: "#/components/parameters/ForUser"',
          '        - {name: X-Region, in: header, required: true, schema: {type: string}}',
          '        - {name: channel, in: query, required: false, schema: {type: string}}',
          '      responses: {"201": {description: created}}',
          '      x-idempotency: {key: {header: Idempotency-Key}, scope: [principal, "header:For-User-Id", "header:X-Region", "query:channel", "path:id", "header:X-Undeclared"]}',
          '  /transfers:',
          '    post:',
          '      operationId: createTransfer',
          '      parameters: [{$ref: "#/components/parameters/ForUser"}]',
          '      responses: {"201": {description: created}}',
          '      x-idempotency: {key: {header: Idempotency-Key}, scope: ["header:for-user-id"]}',
          '',
        ].join('\n'),
      );
      const doc = await loadDocument(file);
      assert.deepEqual(compileContract(operation(doc, 'createPayout')).scope, [
        { kind: 'principal' },
        { kind: 'header', name: 'For-User-Id', optional: true },
        { kind: 'header', name: 'X-Region' },
        { kind: 'query', name: 'channel', optional: true },
        { kind: 'path', name: 'id' },
        { kind: 'header', name: 'X-Undeclared' },
      ]);
      // Without principal, the absence would be one key space for every caller without it: a request lacking it stays 400.
      assert.deepEqual(compileContract(operation(doc, 'createTransfer')).scope, [{ kind: 'header', name: 'for-user-id' }]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('deep-merges an override, forwards the provider key for external effects and reads path-level query parameters', async () => {
    const doc = await loadDocument(fixture('defaults.yaml'));
    const compiled = compileContract(operation(doc, 'overrides'));
    assert.deepEqual(compiled.key, { in: 'header', name: 'X-Request-Key', required: true, maxLength: 128 });
    assert.deepEqual(compiled.scope, [{ kind: 'header', name: 'X-Tenant-Id' }]);
    assert.equal(compiled.ttlMs, 2 * 3_600_000);
    assert.equal(compiled.effect.providerKey, 'forward');
    assert.equal(compiled.effect.external, true);
    assert.deepEqual(compiled.fingerprint.query, ['tenant']);
  });

  it('defaults transient to [429] for an external effect (a provider 503 may have acted) and keeps a written list', async () => {
    const doc = await loadDocument(fixture('defaults.yaml'));
    const op = operation(doc, 'overrides');
    assert.equal(op.contract!.transient, undefined, 'the fixture writes no transient list');
    assert.deepEqual(compileContract(op).transient, [429]);
    const written: OperationView = { ...op, contract: { ...op.contract!, transient: [429, 503] } };
    assert.deepEqual(compileContract(written).transient, [429, 503]);
    assert.deepEqual(compileContract(operation(doc, 'usesTrue')).transient, [429, 503], 'not external: the usual default');
  });

  it('compiles responses.replay.sendOnFirst: false (the flag on replays only) and leaves the default out', async () => {
    const doc = await loadDocument(fixture('defaults.yaml'));
    const op = operation(doc, 'usesTrue');
    const contract = op.contract!;
    assert.equal('replayOnFirst' in compileContract(op).responses, false, 'the default is not written into generated contracts');
    const quiet: OperationView = { ...op, contract: { ...contract, responses: { ...contract.responses, replay: { header: 'Chargebee-Idempotency-Replayed', sendOnFirst: false } } } };
    assert.equal(compileContract(quiet).responses.replayOnFirst, false);
    assert.equal(compileContract(quiet).responses.replayHeader, 'Chargebee-Idempotency-Replayed');
  });

  it('fingerprints an exploded form object query parameter by the names it is sent under (its properties, $ref followed)', async () => {
    const doc = await loadDocument(fixture('query-styles.yaml'));
    const op = operation(doc, 'createInvoice');
    // The parameter's own name stays: an object holding lists or objects is sent under it (filter[tags][0]=a).
    assert.deepEqual(compileContract(op, doc).fingerprint.query, ['after', 'dry', 'expand', 'filter', 'limit', 'meta', 'node', 'page', 'range', 'size', 'status', 'tree']);
  });

  it('fingerprints every query parameter of a request when an exploded form object is free-form, and only the named ones otherwise', async () => {
    const doc = await loadDocument(fixture('query-styles.yaml'));
    // `meta` (additionalProperties) is sent as ?anything=…: every name may be one of its members.
    assert.equal(compileContract(operation(doc, 'createInvoice'), doc).fingerprint.queryAll, true);
    assert.equal(compileContract(operation(doc, 'createWithBareObject'), doc).fingerprint.queryAll, true, 'an object without properties');
    assert.equal(compileContract(operation(doc, 'createWithPatterned'), doc).fingerprint.queryAll, true, 'patternProperties');
    const closed = compileContract(operation(doc, 'createClosed'), doc).fingerprint;
    assert.equal('queryAll' in closed, false, 'named members, additionalProperties: false, a deepObject sent under its name: not written into generated contracts');
    assert.deepEqual(closed.query, ['a', 'dry', 'filter', 'limit', 'meta', 'status', 'strict']);
  });

  it('keeps a query or body key to its own maxLength (no SDK fills one: Square documents 45), even below 64, not below a UUID', async () => {
    const doc = await loadDocument(sample);
    const op = doc.operations.find((o) => o.contract?.enabled)!;
    const contract = op.contract!;
    for (const place of ['query', 'body'] as const) {
      const keyed: OperationView = { ...op, contract: { ...contract, key: { ...contract.key, in: place, name: place === 'body' ? '/idempotency_key' : 'requestId', maxLength: 45 } } };
      assert.equal(compileContract(keyed).key.maxLength, 45, place);
      // Never below a UUID: the generated client's keys.
      const short: OperationView = { ...keyed, contract: { ...keyed.contract!, key: { ...keyed.contract!.key, maxLength: 32 } } };
      assert.equal(compileContract(short).key.maxLength, 36, place);
    }
  });

  it('never accepts key headers shorter than 64 characters, whatever maxLength says', async () => {
    const doc = await loadDocument(fixture('defaults.yaml'));
    const op = operation(doc, 'usesTrue');
    const contract = op.contract!;
    const narrowed: OperationView = { ...op, contract: { ...contract, key: { ...contract.key, maxLength: 36 } } };
    assert.equal(compileContract(narrowed).key.maxLength, 64);
  });

  it('falls back to `METHOD path` without an operationId', async () => {
    const doc = await loadDocument(fixture('defaults.yaml'));
    const op = operation(doc, 'usesTrue');
    assert.equal(compileContract({ ...op, operationId: undefined }).operationId, 'POST /uses-true');
  });

  it('refuses operations without an enabled contract', async () => {
    const doc = await loadDocument(fixture('defaults.yaml'));
    assert.throws(() => compileContract(operation(doc, 'optedOut')), /no enabled x-idempotency contract/);
    assert.throws(() => compileContract(operation(doc, 'noContract')), /no enabled x-idempotency contract/);
  });
});
