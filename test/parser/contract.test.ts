import assert from 'node:assert/strict';
import { parseDuration } from '../../src/parser/duration.js';
import { deepMerge } from '../../src/parser/merge.js';
import { parseScopePart } from '../../src/parser/contract.js';
import { loadDocument } from '../../src/parser/load.js';
import { readFileSync, writeFileSync } from 'node:fs';
import { GENERATED_VALIDATOR, generateValidatorSource } from '../../src/parser/schema-codegen.js';
import { validateContractValue } from '../../src/parser/schema.js';
import { fixture, spot } from './helpers.js';

describe('contract pieces', () => {
  it('parses ISO 8601 durations to milliseconds', () => {
    assert.equal(parseDuration('PT30S'), 30_000);
    assert.equal(parseDuration('P1D'), 86_400_000);
    assert.equal(parseDuration('PT0.2S'), 200);
    assert.equal(parseDuration('P1DT12H'), 129_600_000);
    assert.equal(parseDuration('PT1M30S'), 90_000);
    assert.equal(parseDuration('P2W'), 14 * 86_400_000);
    assert.equal(parseDuration('pt5s'), 5_000);
    for (const bad of ['30s', 'P', 'PT', 'P1H', '', 'P-1D', 30, null]) assert.equal(parseDuration(bad), undefined, String(bad));
  });

  it('deep-merges objects and replaces arrays and scalars', () => {
    assert.deepEqual(deepMerge({ a: { b: 1, c: [1, 2] }, d: 1 }, { a: { c: [3] }, d: 2 }), { a: { b: 1, c: [3] }, d: 2 });
    assert.deepEqual(deepMerge({ a: { b: 1 } }, { a: 5 }), { a: 5 });
    const merged = deepMerge({}, JSON.parse('{"__proto__": {"polluted": true}}')) as Record<string, unknown>;
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assert.ok(Object.prototype.hasOwnProperty.call(merged, '__proto__'));
  });

  it('parses scope parts', () => {
    assert.deepEqual(['principal', 'global', 'header:X-Tenant-Id', 'path:accountId', 'query:q', 'tenant'].flatMap(parseScopePart), [
      { kind: 'principal' },
      { kind: 'global' },
      { kind: 'header', name: 'X-Tenant-Id' },
      { kind: 'path', name: 'accountId' },
      { kind: 'query', name: 'q' },
    ]);
  });

  describe('JSON Schema', () => {
    it('ships a validator compiled from the current schema (regenerate: UPDATE_GENERATED=1 npx mocha test/parser/contract.test.ts)', () => {
      const fresh = generateValidatorSource();
      if (process.env.UPDATE_GENERATED === '1') writeFileSync(GENERATED_VALIDATOR, fresh);
      assert.equal(readFileSync(GENERATED_VALIDATOR, 'utf8'), fresh, 'schemas/x-idempotency.schema.json changed: regenerate the validator');
    });

    it('quotes NaN and Infinity (YAML .nan, .inf; JSON 1e400) as they are, not as null', () => {
      const [infinite] = validateContractValue({ retry: { maxAttempts: Infinity } });
      assert.match(infinite!.message, /^x-idempotency\.retry\.maxAttempts is Infinity; it must be integer/);
      const [nan] = validateContractValue({ key: { maxLength: Number.NaN } });
      assert.match(nan!.message, /^x-idempotency\.key\.maxLength is NaN;/);
    });

    it('says an empty string is empty and names the repeated item of a list, in its own words', () => {
      assert.deepEqual(validateContractValue({ effect: { owner: '' } }), [{ path: ['effect', 'owner'], message: 'x-idempotency.effect.owner is empty; give it a value or leave the field out' }]);
      assert.deepEqual(validateContractValue({ transient: [429, 503, 429] }), [{ path: ['transient', 2], message: 'x-idempotency.transient lists 429 twice; remove one' }]);
    });

    it('accepts true, false and a complete object', () => {
      assert.deepEqual(validateContractValue(true), []);
      assert.deepEqual(validateContractValue(false), []);
      assert.deepEqual(
        validateContractValue({
          key: { header: 'Idempotency-Key', required: true, maxLength: 255, pattern: '^[a-z]+$' },
          scope: ['principal', 'header:X-Tenant-Id'],
          fingerprint: { include: 'all', exclude: ['/clientSentAt'] },
          ttl: 'P1D',
          lease: 'PT30S',
          retry: { deadline: 'PT30S', maxAttempts: 4, backoff: { initial: 'PT0.2S', max: 'PT5S', jitter: 'full' } },
          effect: { owner: 'demo', external: true, providerKey: 'forward', statusRoute: 'getDemo' },
          transient: [429, 503],
          responses: {
            replay: { header: 'Idempotent-Replayed' },
            missingKey: { status: 400 },
            invalidKey: { status: 400 },
            mismatch: { status: 422 },
            inProgress: { status: 409 },
            abandoned: { status: 409 },
            storeUnavailable: { status: 503 },
          },
          unknownOutcome: 'status-route',
        }),
        [],
      );
    });

    it('names the offending node and what to write instead', () => {
      assert.deepEqual(validateContractValue('yes'), [{ path: [], message: 'x-idempotency is "yes"; it must be boolean or object' }]);
      assert.deepEqual(validateContractValue({ fingerprint: { include: 'some' } }), [
        { path: ['fingerprint', 'include'], message: 'x-idempotency.fingerprint.include is "some"; it must be "all" or a list of JSON Pointers' },
      ]);
      assert.deepEqual(validateContractValue({ responses: { mismatch: {} } }), [
        { path: ['responses', 'mismatch'], message: "x-idempotency.responses.mismatch needs 'status'" },
      ]);
      assert.deepEqual(validateContractValue({ key: { requird: true } }), [
        { path: ['key', 'requird'], message: "unknown field 'requird' in x-idempotency.key (allowed: header, query, body, required, maxLength, pattern)" },
      ]);
    });

    it('reports each violation at its line through the contract model', async () => {
      const file = fixture('invalid-contract.yaml');
      const doc = await loadDocument(file);
      const a = doc.operations.find((operation) => operation.operationId === 'a')!.contract!;
      const byPlace = (x: { line: number; column: number }, y: { line: number; column: number }) => x.line - y.line || x.column - y.column;
      const found = a.schemaErrors.map((error) => ({ ...doc.position(error.at), message: error.message.split(';')[0] })).sort(byPlace);
      assert.deepEqual(found, [
        { ...spot(file, 'required: "yes"', 'required'), message: 'x-idempotency.key.required is "yes"' },
        { ...spot(file, 'tll: P1D'), message: "unknown field 'tll' in x-idempotency (allowed: key, scope, fingerprint, ttl, lease, retry, effect, transient, responses, unknownOutcome)" },
        { ...spot(file, 'lease: 30s'), message: 'x-idempotency.lease is "30s"' },
        { ...spot(file, 'include: [topic]', 'topic'), message: 'x-idempotency.fingerprint.include[0] is "topic"' },
        { ...spot(file, 'jitter: random', 'jitter'), message: 'x-idempotency.retry.backoff.jitter is "random"' },
        { ...spot(file, 'ttl: one day'), message: 'x-idempotency.ttl is "one day"' },
      ].sort(byPlace));
    });
  });
});
