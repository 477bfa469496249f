import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  NameIndex,
  declaredResponses,
  effectiveParameters,
  effectiveSecurity,
  findResponse,
  formatDuration,
  isKeyHeaderName,
  isUnsafe,
  keyEvidence,
  rawScopeIndex,
  requestBody,
  requiredProperties,
  resolveSchemaPointer,
} from '../../src/lint/views.js';
import { loadDocument } from '../../src/parser/index.js';
import type { ApiDocument, OperationView } from '../../src/parser/model.js';
import { payouts, yamlOf } from '../helpers/api-docs.js';

describe('lint views', () => {
  let dir: string;
  let n = 0;
  const load = async (text: string): Promise<ApiDocument> => {
    const file = path.join(dir, `doc-${n++}.yaml`);
    await writeFile(file, text);
    return loadDocument(file);
  };
  const op = (doc: ApiDocument, id: string): OperationView => doc.operations.find((o) => o.operationId === id)!;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'idemkit-views-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('merges path-level and operation-level parameters, the operation overriding by name and location', async () => {
    const doc = await load(
      payouts((t) => {
        t.paths['/payouts'].parameters = [
          { name: 'idempotency-key', in: 'header', required: false, schema: { type: 'string' } },
          { name: 'X-Tenant', in: 'header', schema: { type: 'string' } },
        ];
      }),
    );
    const params = effectiveParameters(doc, op(doc, 'createPayout'));
    assert.deepEqual(
      params.map((p) => [p.name, p.required, p.at.pointer, p.valueAt.pointer]),
      [
        ['X-Tenant', false, '/paths/~1payouts/parameters/1', '/paths/~1payouts/parameters/1'],
        ['Idempotency-Key', true, '/paths/~1payouts/post/parameters/0', '/components/parameters/IdempotencyKey'],
      ],
    );
  });

  it('finds the request body in 3.x and in Swagger 2.0, with the schema where it is defined', async () => {
    const doc3 = await load(payouts());
    const body3 = requestBody(doc3, op(doc3, 'createPayout'))!;
    assert.equal(body3.mediaType, 'application/json');
    assert.equal(body3.at.pointer, '/paths/~1payouts/post/requestBody');
    assert.equal(body3.schema!.at.pointer, '/components/schemas/PayoutInput');
    const doc2 = await load(`swagger: '2.0'
info: { title: t, version: '1' }
paths:
  /a:
    post:
      operationId: a
      parameters: [{ in: body, name: b, schema: { $ref: '#/definitions/B' } }]
      responses: { '200': { $ref: '#/responses/Ok' } }
  /f:
    post:
      operationId: f
      parameters: [{ in: formData, name: client_token, type: string }]
      responses: { '200': { description: ok } }
definitions: { B: { type: object } }
responses: { Ok: { description: ok, headers: { Retry-After: { type: integer } } } }
`);
    const body2 = requestBody(doc2, op(doc2, 'a'))!;
    assert.equal(body2.schema!.at.pointer, '/definitions/B');
    assert.equal(requestBody(doc2, op(doc2, 'f'))!.formFields![0]!.name, 'client_token');
    assert.deepEqual(keyEvidence(doc2, op(doc2, 'f'), []), { kind: 'form', name: 'client_token', at: { file: doc2.file, pointer: '/paths/~1f/post/parameters/0' } });
    const [ok] = declaredResponses(doc2, op(doc2, 'a'));
    assert.equal(ok!.valueAt.pointer, '/responses/Ok');
    assert.equal(ok!.headers.get('retry-after')!.at.pointer, '/responses/Ok/headers/Retry-After');
  });

  it('documents a status by its exact code or its range, never by default', async () => {
    const doc = await load(
      payouts((t) => {
        const responses = t.paths['/payouts'].post.responses;
        responses['5XX'] = responses['503'];
        delete responses['503'];
        responses.default = { description: 'anything else' };
      }),
    );
    const create = op(doc, 'createPayout');
    assert.equal(findResponse(doc, create, 422)!.status, '422');
    assert.equal(findResponse(doc, create, 502)!.status, '5XX');
    assert.equal(findResponse(doc, create, 404), undefined);
  });

  it('takes security from the operation (even `[]`), else from the document', async () => {
    const doc = await load(
      payouts((t) => {
        t.paths['/payouts/{id}'].get.security = [];
        t.paths['/payouts'].post.security = [{}, { bearerAuth: [] }];
      }),
    );
    assert.deepEqual(
      [effectiveSecurity(doc, op(doc, 'getPayout'))].map((s) => [s.source, s.secured, s.at?.pointer]),
      [['operation', false, '/paths/~1payouts~1{id}/get/security']],
    );
    const post = effectiveSecurity(doc, op(doc, 'createPayout'));
    assert.deepEqual([post.secured, post.anonymousAllowed], [true, true]);
    const plain = await load(payouts());
    assert.deepEqual([effectiveSecurity(plain, op(plain, 'createPayout'))].map((s) => [s.source, s.at?.pointer]), [['document', '/security']]);
  });

  it('resolves body pointers through $ref, allOf, oneOf, type arrays, items and maps, and says where it stops', async () => {
    const doc = await load(
      yamlOf({
        openapi: '3.1.0',
        info: { title: 't', version: '1' },
        paths: {},
        components: {
          schemas: {
            Body: {
              allOf: [
                { $ref: '#/components/schemas/Base' },
                {
                  type: ['object', 'null'],
                  properties: {
                    pay: { oneOf: [{ properties: { iban: { type: 'string' } } }, { properties: { card: { $ref: '#/components/schemas/Card' } } }] },
                    lines: { type: 'array', items: { properties: { sku: { type: 'string' } } } },
                    tags: { type: 'object', additionalProperties: { type: 'string' } },
                    pair: { type: 'array', prefixItems: [{ type: 'string' }, { type: 'object', properties: { x: { type: 'integer' } } }] },
                  },
                },
              ],
            },
            Base: { type: 'object', required: ['amount'], properties: { amount: { type: 'integer' } } },
            Card: { type: 'object', properties: { last4: { type: 'string' } } },
          },
        },
      }),
    );
    const at = { file: doc.file, pointer: '/components/schemas/Body' };
    const schema = doc.get(at);
    const resolve = (pointer: string) => resolveSchemaPointer(doc, schema, at, pointer);
    const ok = (pointer: string) => {
      const r = resolve(pointer);
      assert.ok(r.ok, `${pointer} should resolve`);
      return r;
    };
    assert.equal((ok('/amount') as { schema: { at: { pointer: string } } }).schema.at.pointer, '/components/schemas/Base/properties/amount');
    assert.equal((ok('/pay/card/last4') as { schema: { at: { pointer: string } } }).schema.at.pointer, '/components/schemas/Card/properties/last4');
    ok('/pay/iban');
    ok('/lines/3/sku');
    // `-` is the slot past the last item (RFC 6901): the runtime finds nothing there, so it does not resolve.
    assert.deepEqual(resolve('/lines/-/sku'), { ok: false, failedToken: 1, resolvedPrefix: '/lines', reason: 'not-index', known: [] });
    ok('/tags/anything');
    ok('/pair/1/x');
    ok('');
    assert.deepEqual(resolve('/pay/card/last5'), { ok: false, failedToken: 2, resolvedPrefix: '/pay/card', reason: 'no-property', known: ['last4'] });
    assert.equal((resolve('/amount/cents') as { reason: string }).reason, 'not-container');
    assert.equal((resolve('amount') as { reason: string }).reason, 'not-pointer');
    assert.deepEqual(
      requiredProperties(doc, schema, at).map((r) => [r.name, r.at.pointer]),
      [['amount', '/components/schemas/Base/required/0']],
    );
  });

  it('recognises key headers but not a delivery id', () => {
    for (const name of ['Idempotency-Key', 'x-idempotency-key', 'PayPal-Request-Id', 'Cko-Idempotency-Key', 'X-Amzn-Idempotency-Token', 'Repeatability-Request-ID']) {
      assert.ok(isKeyHeaderName(name), name);
    }
    assert.ok(!isKeyHeaderName('X-Request-Id'));
    assert.ok(isKeyHeaderName('X-Dedupe', ['x-dedupe']));
  });

  it('tells unsafe methods case-blind, and names no method with a hole or a non-string in settings from code', () => {
    const post = { method: 'post' } as OperationView;
    assert.ok(isUnsafe(post, ['PUT', 'Post']));
    assert.ok(!isUnsafe(post, ['put', 'patch']));
    assert.ok(isUnsafe(post, ['get', , 'post'] as string[]));
    assert.ok(!isUnsafe(post, [1, null] as unknown as string[]));
  });

  it('finds near names through the deletion index', () => {
    const index = new NameIndex(['getPayout', 'getRefund', 'listPayouts']);
    assert.equal(index.closest('getPayuot'), 'getPayout');
    assert.equal(index.closest('getPayot'), 'getPayout');
    assert.equal(index.closest('getRefund'), 'getRefund');
    assert.equal(index.closest('somethingElse'), undefined);
  });

  it("reads a form body's bracketed fields nested, each resolving its own $refs from the file it is written in", async () => {
    const file = path.resolve('test/fixtures/lint/external-form/api.yaml');
    const doc = await loadDocument(file);
    const [{ catalogue }, { lintDocument }] = await Promise.all([import('../../src/lint/catalogue.js'), import('../../src/lint/engine.js')]);
    const fingerprint = lintDocument(doc, { rules: catalogue() }).filter((finding) => finding.ruleId.startsWith('fingerprint-'));
    // /amount/value (through #/Amount in schemas/charge.yaml), /customer/id (./customer.yaml next to it) and
    // /metadata/order_id resolve; /customer/name does not, and says so.
    assert.deepEqual(
      fingerprint.map((finding) => [finding.ruleId, finding.pointer]),
      [['fingerprint-field-unknown', '/paths/~1charges/post/x-idempotency/fingerprint/include/3']],
    );
    assert.match(fingerprint[0]!.message, /`\/customer` has no property `name`/);
  });

  it('formats durations for messages', () => {
    assert.deepEqual([0, 1500, 60_000, 90_061_000, 86_400_000].map(formatDuration), ['PT0S', 'PT1.5S', 'PT1M', 'P1DT1H1M1S', 'P1D']);
  });

  it('rawScopeIndex finds a part as written (first of repeats, spacing and case aside), in one pass over a long scope', () => {
    const raw = { scope: ['principal', 'Header : X-Tenant', 'header:x-tenant', ...Array.from({ length: 20_000 }, (_, i) => `query:q${i}`)] };
    assert.equal(rawScopeIndex(raw, { kind: 'header', name: 'X-Tenant' }, 99), 1);
    assert.equal(rawScopeIndex(raw, { kind: 'principal' }, 99), 0);
    assert.equal(rawScopeIndex(raw, { kind: 'path', name: 'id' }, 99), 99);
    // 20,000 lookups over a 20,000-part scope: each is a map lookup (a scan of the list each would be 4e8 steps).
    for (let i = 0; i < 20_000; i++) assert.equal(rawScopeIndex(raw, { kind: 'query', name: `q${i}` }, -1), i + 3);
  });
});
