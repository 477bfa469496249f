import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DocumentError } from '../../src/errors.js';
import { loadDocument } from '../../src/parser/load.js';
import type { ApiDocument, OperationView } from '../../src/parser/model.js';
import { SourceCache } from '../../src/parser/source.js';
import { fixture, spot } from './helpers.js';

function op(doc: ApiDocument, operationId: string): OperationView {
  const found = doc.operations.find((candidate) => candidate.operationId === operationId);
  assert.ok(found, `operation ${operationId}`);
  return found;
}

/** Loads `lines` written as a YAML file in a temporary directory, removed afterwards. */
async function withYaml(lines: readonly string[], use: (doc: ApiDocument, file: string) => Promise<void> | void): Promise<void> {
  const dir = mkdtempSync(path.join(tmpdir(), 'idemkit-load-'));
  try {
    const file = path.join(dir, 'api.yaml');
    writeFileSync(file, `${lines.join('\n')}\n`);
    await use(await loadDocument(file), file);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The error loading a fixture (or an absolute path) throws. */
async function loadError(name: string): Promise<DocumentError> {
  try {
    await loadDocument(path.isAbsolute(name) ? name : fixture(name));
  } catch (error) {
    assert.ok(error instanceof DocumentError, `a DocumentError, got ${String(error)}`);
    return error;
  }
  assert.fail(`${name} loaded without an error`);
}

describe('loadDocument', () => {
  describe('defaults and merge', () => {
    let doc: ApiDocument;
    before(async () => {
      doc = await loadDocument(fixture('defaults.yaml'));
    });

    it('`true` takes the defaults alone', () => {
      const contract = op(doc, 'usesTrue').contract!;
      assert.equal(contract.enabled, true);
      assert.equal(contract.key.maxLength, 128);
      assert.equal(contract.key.name, 'Idempotency-Key');
      assert.deepEqual(contract.scope, [{ kind: 'principal' }]);
      assert.deepEqual(contract.ttl, { raw: 'P1D', ms: 86_400_000 });
      assert.equal(contract.responses.mismatch?.status, 422);
      assert.equal(contract.lease, undefined, 'a field neither sets stays undefined');
      assert.deepEqual(contract.raw, { key: { maxLength: 128 }, scope: ['principal'], ttl: 'P1D', responses: { mismatch: { status: 422 } } });
    });

    it('an object is deep-merged over the defaults: nested objects merge, scalars and arrays replace', () => {
      const contract = op(doc, 'overrides').contract!;
      assert.equal(contract.key.name, 'X-Request-Key');
      assert.equal(contract.key.maxLength, 128, 'key.maxLength still comes from the defaults');
      assert.deepEqual(contract.scope, [{ kind: 'header', name: 'X-Tenant-Id' }], 'the array replaced, not appended');
      assert.equal(contract.ttl?.ms, 2 * 3_600_000);
      assert.equal(contract.effect?.external, true);
      // Locations: overridden fields in the operation, inherited ones in the defaults.
      assert.match(contract.at('key', 'header').pointer, /^\/paths\/~1overrides\/post\/x-idempotency\/key\/header$/);
      assert.equal(contract.at('key', 'maxLength').pointer, '/x-idempotency/key/maxLength');
      assert.equal(contract.at('responses', 'mismatch', 'status').pointer, '/x-idempotency/responses/mismatch/status');
    });

    it('`false` marks the operation knowingly not idempotent, with no defaults', () => {
      const contract = op(doc, 'optedOut').contract!;
      assert.equal(contract.enabled, false);
      assert.equal(contract.scope, undefined);
      assert.equal(contract.ttl, undefined);
      assert.equal(contract.responses.mismatch, undefined);
      assert.deepEqual(contract.schemaErrors, []);
    });

    it('the defaults reach only operations that carry x-idempotency themselves', () => {
      assert.equal(op(doc, 'noContract').contract, undefined);
      assert.deepEqual(doc.defaultsAt, { file: fixture('defaults.yaml'), pointer: '/x-idempotency' });
    });

    it('resolves state statuses against the documented responses, exact code first, then the range', () => {
      const contract = op(doc, 'usesTrue').contract!;
      assert.equal(contract.responses.mismatch?.response?.code, '4XX');
      assert.equal(contract.responses.mismatch?.response?.value?.description, 'client error');
      const overrides = op(doc, 'overrides').contract!;
      assert.equal(overrides.responses.mismatch?.status, 422);
      assert.equal(overrides.responses.mismatch?.response, undefined, '422 is not documented there');
    });

    it('lists path-level and operation-level parameters', () => {
      assert.deepEqual(
        op(doc, 'overrides').parameters!.map((parameter) => `${parameter.in}:${parameter.name}`),
        ['query:tenant'],
      );
      assert.deepEqual(
        op(doc, 'usesTrue').parameters!.map((parameter) => `${parameter.in}:${parameter.name}`),
        ['query:dryRun'],
      );
    });
  });

  describe('versions and formats', () => {
    it('OpenAPI 3.1: a plain-name fragment names the schema whose $anchor it is; an unknown or twice-declared anchor is a broken $ref', async () => {
      // The real-spec review's: `$ref: '#order-anchor'` under a contracted body made lint exit 2 ("not a JSON Pointer").
      await withYaml(
        [
          'openapi: 3.1.0',
          "info: {title: t, version: '1'}",
          'paths: {}',
          'components:',
          '  schemas:',
          '    Order: {$anchor: order-anchor, type: object}',
          '    Line: {$dynamicAnchor: line, type: object}',
          "    UsesOrder: {$ref: '#order-anchor'}",
          "    UsesLine: {$ref: '#line'}",
          "    UsesNone: {$ref: '#nowhere'}",
          '    Twin1: {$anchor: twin}',
          '    Twin2: {$anchor: twin}',
          "    UsesTwin: {$ref: '#twin'}",
          '  examples:',
          '    Stored: {value: {$anchor: order-anchor}}',
        ],
        (doc, file) => {
          const at = (name: string) => ({ file, pointer: `/components/schemas/${name}` });
          const target = (name: string) => doc.deref(doc.get(at(name)), at(name));
          assert.equal(target('UsesOrder')?.at.pointer, '/components/schemas/Order');
          assert.equal(target('UsesLine')?.at.pointer, '/components/schemas/Line');
          assert.equal(target('UsesNone'), undefined);
          assert.equal(target('UsesTwin'), undefined);
        },
      );
    });

    it('OpenAPI 3.1: a $ref inside a schema with an $id resolves against that resource, by pointer and by URI', async () => {
      await withYaml(
        [
          'openapi: 3.1.0',
          "info: {title: t, version: '1'}",
          'paths: {}',
          'components:',
          '  schemas:',
          '    Order:',
          "      $id: 'https://example.com/schemas/order'",
          "      $ref: '#/$defs/Body'",
          '      $defs:',
          '        Body: {type: object, properties: {id: {type: string}, ship: {$ref: address}}}',
          '    Refund:',
          "      $id: 'https://example.com/schemas/refund'",
          "      $ref: '#/$defs/Body'",
          '      $defs:',
          '        Body: {type: object, properties: {amount: {type: integer}}}',
          '    Address:',
          "      $id: 'https://example.com/schemas/address'",
          '      type: object',
          '    ByUri:',
          "      $ref: 'https://example.com/schemas/order#/$defs/Body'",
          '    Plain:',
          "      $ref: '#/components/schemas/Address'",
          '    Customer:',
          "      $id: 'https://example.com/schemas/customer'",
          '      type: object',
          "      properties: {home: {$ref: '#/components/schemas/Address'}, refund: {$ref: refund}}",
          '  examples:',
          '    Stored:',
          "      value: {$id: 'https://example.com/schemas/refund', note: an example that holds an $id}",
        ],
        (doc, file) => {
          const at = (name: string) => ({ file, pointer: `/components/schemas/${name}` });
          const body = (name: string) => doc.deref(doc.get(at(name)), at(name));
          // The same `#/$defs/Body` in two resources: each its own.
          assert.equal(body('Order')?.at.pointer, '/components/schemas/Order/$defs/Body');
          assert.equal(body('Refund')?.at.pointer, '/components/schemas/Refund/$defs/Body');
          // An absolute $id with a fragment, from outside any resource; a relative one against the resource's $id.
          assert.equal(body('ByUri')?.at.pointer, '/components/schemas/Order/$defs/Body');
          const ship = { file, pointer: '/components/schemas/Order/$defs/Body/properties/ship' };
          assert.equal(doc.deref(doc.get(ship), ship)?.at.pointer, '/components/schemas/Address');
          // Outside any resource a fragment is the file's, as always.
          assert.equal(body('Plain')?.at.pointer, '/components/schemas/Address');
          // Inside one, a pointer the resource does not hold is the file's (a document made from JSON Schema files);
          // an example's $id names no schema (review, helper-125: the example had taken the reference).
          const home = { file, pointer: '/components/schemas/Customer/properties/home' };
          assert.equal(doc.deref(doc.get(home), home)?.at.pointer, '/components/schemas/Address');
          const refund = { file, pointer: '/components/schemas/Customer/properties/refund' };
          assert.equal(doc.deref(doc.get(refund), refund)?.at.pointer, '/components/schemas/Refund/$defs/Body'); // Refund, followed on
        },
      );
    });

    it('reads OpenAPI 3.1 YAML, 3.0 JSON and Swagger 2.0', async () => {
      const sample = await loadDocument(fixture('../../../samples/demo-requests/openapi.yaml'));
      assert.equal(sample.version, '3.1');
      assert.deepEqual(sample.operations.map((operation) => operation.label), [
        'POST /v1/demo-requests (createDemoRequest)',
        'GET /v1/demo-request-outcome (getDemoRequestOutcome)',
        'GET /v1/demo-requests/{id} (getDemoRequest)',
      ]);
      const json = await loadDocument(fixture('positions.json'));
      assert.equal(json.version, '3.0');
      const v2 = await loadDocument(fixture('swagger2.yaml'));
      assert.equal(v2.version, '2.0');
      const create = op(v2, 'createOrder');
      assert.equal(create.contract?.responses.inProgress?.response?.code, '4XX');
      assert.deepEqual(create.parameters!.map((parameter) => parameter.name), ['Idempotency-Key', 'body', 'dryRun']);
    });

    it("follows Swagger 2.0's `$ref: Name` shorthand to the definition, parameter or response of that name", async () => {
      const doc = await loadDocument(fixture('swagger2-shorthand-refs.yaml'));
      const operation = op(doc, 'createCharge');
      assert.deepEqual(doc.warnings, []);
      assert.deepEqual(
        operation.parameters!.map((parameter) => [parameter.in, parameter.name, parameter.valueAt.pointer]),
        [
          ['header', 'Idempotency-Key', '/parameters/IdemKey'],
          ['body', 'body', '/paths/~1charges/post/parameters/1'],
        ],
      );
      assert.equal(operation.contract!.responses.mismatch!.response!.valueAt.pointer, '/responses/Problem');
      const notFound = { file: doc.file, pointer: '/paths/~1charges/post/responses/404' };
      assert.equal(doc.deref(doc.get(notFound), notFound)?.at.pointer, '/responses/Gone');
      assert.deepEqual(doc.deref({ $ref: 'Charge' }, { file: doc.file, pointer: '/paths/~1charges/post/responses/201/schema' })?.at.pointer, '/definitions/Charge');
      for (const property of ['responses', 'parameters']) {
        const items = { file: doc.file, pointer: `/definitions/Charge/properties/${property}/items` };
        assert.equal(doc.deref(doc.get(items), items)?.at.pointer, '/definitions/Answer', property);
      }
    });

    it('follows the shorthand where no contract needs it too, a parameter entry to the parameter of that name', async () => {
      const doc = await loadDocument(fixture('swagger2-shorthand-no-contract.yaml'));
      assert.deepEqual(doc.warnings, []);
      assert.deepEqual(
        op(doc, 'createPet').parameters!.map((parameter) => [parameter.in, parameter.name, parameter.valueAt.pointer]),
        [
          ['header', 'Idempotency-Key', '/parameters/IdemKey'],
          ['query', 'limit', '/parameters/Limit'],
        ],
      );
    });

    it('a 3.1 document holding only components (or only webhooks) is valid: no operations, no warning', async () => {
      const components = await loadDocument(fixture('components-only-31.yaml'));
      assert.deepEqual([components.operations.length, components.warnings], [0, []]);
    });

    it('extensions of the Paths Object (`x-codegen-contextRoot`) are not path items: no operation, no warning', async () => {
      const doc = await loadDocument(fixture('paths-extensions.yaml'));
      assert.deepEqual([doc.operations.map((operation) => operation.label), doc.warnings], [['GET /a'], []]);
    });

    it('loads the JSON twin of the demo sample to the same model', async () => {
      const yaml = await loadDocument(fixture('../../../samples/demo-requests/openapi.yaml'));
      const json = await loadDocument(fixture('../../../samples/demo-requests/openapi.json'));
      assert.deepEqual(json.root, yaml.root);
      assert.deepEqual(op(json, 'createDemoRequest').contract!.raw, op(yaml, 'createDemoRequest').contract!.raw);
    });
  });

  describe('leniency', () => {
    it('warns at a key written beside a contract\'s $ref, which is not read (an invalid `lease: forever` passed silently)', async () => {
      await withYaml(
        [
          'openapi: 3.1.0',
          "info: {title: t, version: '1'}",
          "x-idempotency: {$ref: '#/x-contracts/defaults', ttl: P2D}",
          'x-contracts:',
          '  defaults: {ttl: P1D}',
          '  base: {key: {header: Idempotency-Key}, scope: [principal], lease: PT30S}',
          'paths:',
          '  /a:',
          '    post:',
          '      operationId: a',
          "      x-idempotency: {$ref: '#/x-contracts/base', lease: forever}",
          "      responses: {'201': {description: ok}}",
        ],
        (doc, file) => {
          const contract = op(doc, 'a').contract!;
          assert.equal(contract.lease?.ms, 30_000, 'the contract is the one the $ref points at');
          assert.equal(contract.ttl?.ms, 86_400_000);
          const beside = doc.warnings.filter((warning) => warning.message.includes('beside `$ref`'));
          assert.deepEqual(beside.map((warning) => [warning.message.split(' ')[0], doc.position(warning.at)]), [
            ['`ttl`', spot(file, "x-idempotency: {$ref: '#/x-contracts/defaults'", 'ttl')],
            ['`lease`', spot(file, 'lease: forever', 'lease')],
          ]);
          assert.match(beside[1]!.message, /^`lease` beside `\$ref` in x-idempotency is not read: the contract is the one the \$ref points at — move `lease` into that contract, or write this contract in full without the \$ref$/);
        },
      );
    });

    it('loads a document that is invalid elsewhere and lists the problems as warnings', async () => {
      const file = fixture('lenient.yaml');
      const doc = await loadDocument(file);
      assert.deepEqual(op(doc, 'x').contract!.scope, [{ kind: 'principal' }]);
      const messages = doc.warnings.map((warning) => warning.message);
      assert.ok(messages.includes("the document has no 'info' object"), messages.join('\n'));
      assert.ok(messages.includes("operationId 'x' is used twice"), messages.join('\n'));
      assert.ok(messages.includes('operation PUT /broken-elsewhere must be an object'), messages.join('\n'));
      const relative = doc.warnings.find((warning) => warning.message.startsWith("path 'business-accounts/{id}' does not start with '/'"));
      assert.ok(relative, messages.join('\n'));
      assert.match(relative.message, /write '\/business-accounts\/\{id\}'/);
      assert.deepEqual(doc.position(relative.at), spot(file, 'business-accounts/{id}:'));
      const query = doc.warnings.find((warning) => warning.message.startsWith("path '/voice/receipts-read?date_before={date_before}' holds a query string"));
      assert.ok(query, messages.join('\n'));
      assert.match(query.message, /write '\/voice\/receipts-read' and declare each query value as an `in: query` parameter/);
      assert.deepEqual(doc.position(query.at), spot(file, '/voice/receipts-read?'));
      // RFC 6570's query expansion is cut before its brace; a path the document already has is named as such.
      const expansion = doc.warnings.find((warning) => warning.message.startsWith("path '/search{?q,limit}' holds a query expansion"));
      assert.ok(expansion, messages.join('\n'));
      assert.match(expansion.message, /move its operations to '\/search', which the document already has, and declare each query value/);
      assert.ok(!messages.some((message) => message.startsWith("path '/voice/receipts?before")), 'no contract there, no warning');
      const twice = doc.warnings.find((warning) => warning.message.includes('used twice'))!;
      assert.deepEqual(doc.position(twice.at), spot(file, "operationId: 'x'"), 'the second one');
    });

    it('a broken $ref away from any contract (parameters, request body, responses) is a warning at the $ref, once; a remote one is not', async () => {
      const file = fixture('dangling-refs.yaml');
      const doc = await loadDocument(file);
      const broken = doc.warnings.map((warning) => [warning.at.pointer, doc.position(warning.at).line] as const).sort((a, b) => a[1] - b[1]);
      assert.deepEqual(broken, [
        ['/paths/~1payments/parameters/0/$ref', 6],
        ['/paths/~1payments/post/parameters/0/$ref', 10],
        ['/paths/~1payments/post/requestBody/$ref', 11],
        ['/paths/~1payments/post/responses/400/$ref', 14],
        ['/paths/~1payments/put/responses/200/$ref', 20],
      ]);
      const typo = doc.warnings.find((warning) => warning.at.pointer === '/paths/~1payments/post/parameters/0/$ref')!;
      assert.match(typo.message, /\$ref '#\/components\/parameters\/IdempotencyKye' points at nothing/);
    });

    it('loads a YAML key written twice away from any contract, the last one winning, with one warning at the second key', async () => {
      const file = fixture('duplicate-elsewhere.yaml');
      const doc = await loadDocument(file);
      assert.deepEqual(op(doc, 'createPayout').contract!.scope, [{ kind: 'principal' }]);
      const schemas = (doc.root.components as { schemas: Record<string, { description?: string; 'x-owner'?: string }> }).schemas;
      assert.equal(schemas.PayoutInput!.description, 'second words');
      assert.equal(schemas.Tagged!['x-owner'], 'b');
      assert.deepEqual(
        doc.warnings.map((warning) => [warning.at.pointer, warning.message, warning.position]),
        [
          ['/components/schemas/PayoutInput/description', 'duplicate key `description` (first at line 20): the last one is used — keep one', spot(file, 'second words')],
          ['/components/schemas/Tagged/x-owner', 'duplicate key `x-owner` (first at line 26): the last one is used — keep one', spot(file, 'x-owner: b')],
        ],
      );
      assert.deepEqual(doc.position(doc.warnings[0]!.at), spot(file, 'second words'));
    });

    it('reads local tags (CloudFormation `!Sub`, `!GetAtt`, `!If`, `!Ref`) as the values they tag, and a trailing `---` as nothing', async () => {
      const doc = await loadDocument(fixture('cloudformation-tags.yaml'));
      const operation = op(doc, 'createOrder');
      const integration = operation.node['x-amazon-apigateway-integration'] as Record<string, unknown>;
      assert.match(String(integration['uri']), /^arn:aws:apigateway:\$\{AWS::Region\}/);
      assert.equal(integration['credentials'], 'ApiRole.Arn');
      assert.deepEqual(integration['requestParameters'], ['HasTenant', { tenant: 'Tenant' }, 'AWS::NoValue']);
      assert.deepEqual(operation.contract!.scope, [{ kind: 'principal' }]);
      assert.deepEqual(doc.warnings, []);
    });

    it("names an operation with a key under Azure's x-ms-paths, which it does not read, and only such one", async () => {
      const file = fixture('x-ms-paths.json');
      const doc = await loadDocument(file);
      assert.deepEqual(doc.operations, []);
      assert.deepEqual(
        doc.warnings.map((warning) => [warning.at.pointer, doc.position(warning.at)]),
        [['/x-ms-paths/~1jobs?op=create/post', spot(file, '"post"', '"post"')]],
      );
      assert.match(doc.warnings[0]!.message, /POST \/jobs\?op=create is under `x-ms-paths`, which idemkit does not read/);
    });

    it('warns at an x-idempotency on a webhook or a callback: requests the API sends, whose receiver keeps the contract', async () => {
      await withYaml(
        [
          'openapi: 3.1.0',
          "info: {title: t, version: '1'}",
          'paths:',
          '  /subscriptions:',
          '    post:',
          '      responses: {"201": {description: ok}}',
          '      callbacks:',
          '        onEvent:',
          "          '{$request.body#/url}':",
          '            post:',
          '              x-idempotency: {key: {header: Idempotency-Key}}',
          '              responses: {"200": {description: ok}}',
          'webhooks:',
          '  orderPaid:',
          '    post:',
          '      x-idempotency: true',
          '      responses: {"200": {description: ok}}',
        ],
        (doc) => {
          const advice = 'a webhook or callback is a request this API sends: the service that receives it keeps the contract, in its own API\'s document';
          assert.deepEqual(
            doc.warnings.map((warning) => [warning.at.pointer, warning.message, doc.position(warning.at).line]),
            [
              ['/paths/~1subscriptions/post/callbacks/onEvent/{$request.body#~1url}/post/x-idempotency', `x-idempotency on a callback is not read — ${advice}`, 11],
              ['/webhooks/orderPaid/post/x-idempotency', `x-idempotency on a webhook is not read — ${advice}`, 16],
            ],
          );
        },
      );
    });

    it('warns at each x-idempotency written where it is not read (path item, response, components), once each (a path item read through a $ref and under components)', async () => {
      const file = fixture('misplaced-contract.yaml');
      const doc = await loadDocument(file);
      const warnings = doc.warnings.map((warning) => ({ pointer: warning.at.pointer, message: warning.message }));
      const notRead = (where: string) => `x-idempotency ${where} is not read — move it under each method (post:, patch:, …), or to the document root for defaults`;
      assert.deepEqual(warnings, [
        { pointer: '/paths/~1orders/x-idempotency', message: notRead('on a path item') },
        { pointer: '/paths/~1orders/post/responses/201/x-idempotency', message: notRead('in a response') },
        { pointer: '/components/pathItems/Refunds/x-idempotency', message: notRead('on a path item') },
        { pointer: '/x-idempotency-defaults', message: '`x-idempotency-defaults` is not read — the document-level defaults are `x-idempotency` at the root' },
        { pointer: '/components/x-idempotency', message: notRead('under components') },
      ]);
      assert.deepEqual(doc.position(doc.warnings[0]!.at), spot(file, /^ {4}x-idempotency:$/), 'at the key');
    });

    it('does not call an x-idempotency under components "not read" when a contract $ref reads it (3.x and 2.0); an unreferenced one still is', async () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'idemkit-misplaced-'));
      try {
        const contract = ['key: {header: Idempotency-Key, required: true}', 'ttl: P1D'];
        const operation = (indent: string, id: string, ref: string) =>
          [`${indent}post:`, `${indent}  operationId: ${id}`, `${indent}  x-idempotency: {$ref: '${ref}'}`, `${indent}  responses: {'201': {description: ok}}`];
        const nested = (indent: string, lines: string[]) => lines.map((line) => indent + line);
        const response = (indent: string, name: string, description: string) => [`${indent}${name}:`, `${indent}  description: ${description}`, `${indent}  x-idempotency:`, ...nested(`${indent}    `, contract)];
        writeFileSync(
          path.join(dir, 'v3.yaml'),
          [
            'openapi: 3.1.0',
            'info: {title: t, version: "1"}',
            "x-idempotency: {$ref: '#/components/x-idempotency'}",
            'paths:',
            '  /a:',
            ...operation('    ', 'a', '#/components/responses/Shared/x-idempotency'),
            '  /b:',
            ...operation('    ', 'b', '#/components/responses/Chained/x-idempotency'),
            'components:',
            '  x-idempotency: {ttl: P1D}',
            '  responses:',
            ...response('    ', 'Shared', 'shared'),
            '    Chained:',
            '      description: a $ref to a $ref',
            "      x-idempotency: {$ref: '#/components/responses/Shared/x-idempotency'}",
            ...response('    ', 'Unread', 'nobody points here'),
            '',
          ].join('\n'),
        );
        writeFileSync(
          path.join(dir, 'v2.yaml'),
          [
            'swagger: "2.0"',
            'info: {title: t, version: "1"}',
            'paths:',
            '  /a:',
            ...operation('    ', 'a', '#/responses/Shared/x-idempotency'),
            'responses:',
            ...response('  ', 'Shared', 'shared'),
            ...response('  ', 'Unread', 'nobody points here'),
            '',
          ].join('\n'),
        );
        const misplaced = (doc: ApiDocument) => doc.warnings.filter((warning) => / is not read/.test(warning.message)).map((warning) => warning.at.pointer);
        const v3 = await loadDocument(path.join(dir, 'v3.yaml'));
        assert.deepEqual(v3.operations.map((operation) => operation.contract?.key.name), ['Idempotency-Key', 'Idempotency-Key'], 'both contracts are read from components');
        assert.deepEqual(misplaced(v3), ['/components/responses/Unread/x-idempotency']);
        const v2 = await loadDocument(path.join(dir, 'v2.yaml'));
        assert.equal(v2.operations[0]!.contract?.key.name, 'Idempotency-Key');
        assert.deepEqual(misplaced(v2), ['/responses/Unread/x-idempotency']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it("does not call a path item's or a response's x-idempotency \"not read\" when a later operation's contract $refs it (whatever the order of the paths)", async () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'idemkit-misplaced-'));
      try {
        const source = ['  /z:', '    x-idempotency: {key: {header: Idempotency-Key, required: true}, ttl: P1D}', "    get: {responses: {'200': {description: ok, x-idempotency: {ttl: P1D}}}}"];
        const readers = ['  /c:', '    post:', "      responses: {'201': {description: ok}}", "      x-idempotency: {$ref: '#/paths/~1z/x-idempotency'}"];
        readers.push('  /d:', '    post:', "      responses: {'201': {description: ok}}", "      x-idempotency: {$ref: '#/paths/~1z/get/responses/200/x-idempotency'}");
        const header = ['openapi: 3.1.0', 'info: {title: t, version: "1"}', 'paths:'];
        writeFileSync(path.join(dir, 'first.yaml'), [...header, ...source, ...readers, ''].join('\n'));
        writeFileSync(path.join(dir, 'last.yaml'), [...header, ...readers, ...source, ''].join('\n'));
        for (const name of ['first.yaml', 'last.yaml']) {
          const doc = await loadDocument(path.join(dir, name));
          assert.equal(doc.operations.find((operation) => operation.path === '/c')?.contract?.key.name, 'Idempotency-Key', name);
          assert.deepEqual(doc.warnings.map((warning) => warning.message), [], name);
        }
        writeFileSync(path.join(dir, 'unread.yaml'), [...header, ...source, ''].join('\n'));
        const unread = await loadDocument(path.join(dir, 'unread.yaml'));
        assert.deepEqual(unread.warnings.map((warning) => warning.at.pointer), ['/paths/~1z/x-idempotency', '/paths/~1z/get/responses/200/x-idempotency'], 'unreferenced: still warned');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('follows no $ref that no contract needs', async () => {
      const doc = await loadDocument(fixture('lenient.yaml'));
      const broken = doc.operations.find((operation) => operation.path === '/broken-elsewhere')!;
      assert.deepEqual(broken.parameters, [], 'the broken reference is left out');
    });
  });

  describe('bad input', () => {
    it('a missing file', async () => {
      const error = await loadError('bad/does-not-exist.yaml');
      assert.equal(error.file, fixture('bad/does-not-exist.yaml'));
      assert.match(error.message, /file not found — check the path/);
    });

    it('an empty file and a file with only a comment', async () => {
      for (const name of ['bad/empty.yaml', 'bad/comment-only.yaml']) {
        const error = await loadError(name);
        assert.match(error.message, /the file is empty|the file has no content/);
        assert.deepEqual([error.line, error.column], [1, 1]);
      }
    });

    it('truncated YAML, at the quote that never closes', async () => {
      const error = await loadError('bad/truncated.yaml');
      assert.match(error.message, /^invalid YAML: .* — /);
      assert.deepEqual({ line: error.line, column: error.column }, spot(fixture('bad/truncated.yaml'), 'title: "truncated', '"'));
    });

    it('YAML with lone-CR line breaks that does not parse: the same message and position as with LF (was 1:10, "Nested mappings…")', async () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'idemkit-load-'));
      try {
        const lf = await loadError('bad/truncated.yaml');
        const file = path.join(dir, 'cr.yaml');
        writeFileSync(file, readFileSync(fixture('bad/truncated.yaml'), 'utf8').replace(/\n/g, '\r'));
        const cr = await loadError(file);
        assert.deepEqual([cr.message, cr.line, cr.column], [lf.message, lf.line, lf.column]);
        // A complex key, which js-yaml refuses without a position.
        writeFileSync(file, 'openapi: 3.1.0\rinfo: {title: t, version: "1"}\rpaths:\r  ? [a, b]\r  : {}\r');
        const key = await loadError(file);
        assert.match(key.message, /^invalid YAML: a mapping key must be a string/);
        assert.deepEqual([key.line, key.column], [4, 5]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('the fuzzer\'s: a syntax error deep in nesting, an object for a version, a $ref to a pipe — each a clear error, no crash or hang', async function () {
      const dir = mkdtempSync(path.join(tmpdir(), 'idemkit-load-'));
      try {
        // 2,000 levels with one line mis-indented: the second parser (for the message) overflowed its stack.
        const lines = ['x:', ...Array.from({ length: 2000 }, (_, j) => `${' '.repeat(j + 1)}a:`)];
        lines[lines.length - 1] += ' 1';
        lines[2] = `${' '.repeat(9)}a:`;
        writeFileSync(path.join(dir, 'deep.yaml'), `${lines.join('\n')}\ny: 1\n`);
        const deep = await loadError(path.join(dir, 'deep.yaml'));
        assert.match(deep.message, /^invalid YAML: /);
        assert.doesNotMatch(deep.message, /call stack/i);
        // A control character before 5,000 nested brackets: said where it is, not "Maximum call stack" at the brackets.
        writeFileSync(path.join(dir, 'flow.yaml'), `openapi: 3.1.0\ntitle: a\u001bb\nx: ${'['.repeat(5000)}${']'.repeat(5000)}\n`);
        const flow = await loadError(path.join(dir, 'flow.yaml'));
        assert.doesNotMatch(flow.message, /call stack/i);
        assert.equal(flow.line, 2);
        for (const field of ['openapi', 'swagger']) {
          writeFileSync(path.join(dir, 'v.yaml'), `${field}: {toString: 1}\ninfo: {title: t, version: "1"}\npaths: {}\n`);
          assert.match((await loadError(path.join(dir, 'v.yaml'))).message, new RegExp(`^unsupported ${field} version \\{"toString":1\\}`));
        }
        if (process.platform !== 'win32') {
          const { execFileSync } = await import('node:child_process');
          execFileSync('mkfifo', [path.join(dir, 'fifo')]);
          writeFileSync(path.join(dir, 'ref.yaml'), 'openapi: 3.0.3\ninfo: {title: t, version: "1"}\npaths:\n  /a:\n    post:\n      parameters:\n        - $ref: "./fifo"\n      responses: {"200": {description: ok}}\n');
          const doc = await loadDocument(path.join(dir, 'ref.yaml'));
          const said = doc.warnings.map((warning) => warning.message).join('\n');
          assert.match(said, /\$ref '\.\/fifo' names a pipe, socket or device, not a file/);
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('a tab between the items of a flow collection (valid YAML 1.2 its reader refuses) is said so, at the line, not "deficient indentation"', async () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'idemkit-load-'));
      try {
        const file = path.join(dir, 'tab.yaml');
        writeFileSync(file, 'openapi: 3.0.3\ninfo: {title: x,\tversion: "1"}\npaths: {}\n');
        const error = await loadError(file);
        assert.match(error.message, /^invalid YAML for idemkit: a tab between the items of a flow collection .* put spaces there$/);
        assert.equal(error.line, 2);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('a JSON syntax error, at the token', async () => {
      const error = await loadError('bad/syntax.json');
      assert.match(error.message, /^invalid JSON: .* — fix the syntax/);
      assert.deepEqual({ line: error.line, column: error.column }, spot(fixture('bad/syntax.json'), '"title": "x" "version"', '"version"'));
      const truncated = await loadError('bad/truncated.json');
      assert.match(truncated.message, /invalid JSON/);
      assert.equal(truncated.line, 3);
    });

    it('a JSON syntax error V8 gives no position for, at the token, on one line', async () => {
      const error = await loadError('bad/unquoted-value.json');
      assert.equal(error.message, "invalid JSON: Unexpected token 'P' — fix the syntax here (a missing comma, quote or bracket?)");
      assert.deepEqual({ line: error.line, column: error.column }, spot(fixture('bad/unquoted-value.json'), '"ttl": P1D', 'P1D'));
    });

    it('a UTF-16 or UTF-32 file (with a BOM or without), a binary file and a symbolic link loop say what they are', async () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'idemkit-encoding-'));
      try {
        const text = 'openapi: 3.1.0\ninfo: {title: t, version: "1"}\npaths: {}\n';
        const utf16be = Buffer.from(text, 'utf16le').swap16();
        const utf32le = Buffer.concat([...text].map((c) => Buffer.from([c.charCodeAt(0), 0, 0, 0])));
        const files: [string, Buffer, string][] = [
          ['le-bom.yaml', Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')]), 'the file is UTF-16 — save it as UTF-8'],
          ['be-bom.json', Buffer.concat([Buffer.from([0xfe, 0xff]), utf16be]), 'the file is UTF-16 — save it as UTF-8'],
          ['le.yaml', Buffer.from(text, 'utf16le'), 'the file is UTF-16 — save it as UTF-8'],
          ['be.yaml', utf16be, 'the file is UTF-16 — save it as UTF-8'],
          ['utf32.yaml', utf32le, 'the file is UTF-32 — save it as UTF-8'],
          ['binary.yaml', Buffer.from([0x1e, 0x4c, 0x21, 0x65, 0x09, 0xae, 0x00, 0x25, 0xde]), 'the file is binary (it holds NUL bytes), not YAML or JSON text — name the OpenAPI document'],
        ];
        for (const [name, bytes, message] of files) {
          writeFileSync(path.join(dir, name), bytes);
          const error = await loadError(path.join(dir, name));
          assert.deepEqual({ message: error.message, line: error.line, column: error.column }, { message, line: 1, column: 1 }, name);
        }
        if (process.platform !== 'win32') {
          symlinkSync('loop2.yaml', path.join(dir, 'loop1.yaml'));
          symlinkSync('loop1.yaml', path.join(dir, 'loop2.yaml'));
          assert.equal((await loadError(path.join(dir, 'loop1.yaml'))).message, 'a symbolic link loop (the link leads back to itself) — point the link at the file');
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('a file that is not OpenAPI, and an unsupported version', async () => {
      const error = await loadError('bad/not-openapi.yaml');
      assert.match(error.message, /not an OpenAPI document: .* add `openapi: 3.1.0`/);
      const version = await loadError('bad/unsupported-version.yaml');
      assert.match(version.message, /unsupported openapi version "4.0.0"/);
      assert.equal(version.line, 1);
    });

    it('an unquoted `openapi: 3.0` (a YAML number): says to quote it', async () => {
      const error = await loadError('bad/unquoted-version.yaml');
      assert.match(error.message, /quote the version, e\.g\. `openapi: "3\.0\.3"`/);
      assert.equal(error.line, 1);
    });

    it('a key written twice (YAML: x-idempotency twice; JSON: in an operation with a contract, and inside the contract), at the second one', async () => {
      const yaml = await loadError('bad/duplicate-key.yaml');
      assert.equal(yaml.message, 'duplicate key `x-idempotency` (first at line 41) — keep one');
      assert.deepEqual([yaml.line, yaml.column], [43, 7]);
      const json = await loadError('bad/duplicate-key.json');
      assert.equal(json.message, 'duplicate key `ttl` (first at line 20) — keep one');
      assert.deepEqual({ line: json.line, column: json.column }, spot(fixture('bad/duplicate-key.json'), '"ttl": "PT1H"', '"ttl"'));
      const contract = await loadError('bad/duplicate-contract.json');
      assert.equal(contract.message, 'duplicate key `x-idempotency` (first at line 11) — keep one');
      assert.deepEqual({ line: contract.line, column: contract.column }, spot(fixture('bad/duplicate-contract.json'), '"x-idempotency": {', '"x-idempotency"'));
    });

    it('a YAML operation written twice when one of them carries a contract, at the second one', async () => {
      const error = await loadError('bad/duplicate-operation.yaml');
      assert.equal(error.message, 'duplicate key `post` (first at line 5) — keep one');
      assert.deepEqual({ line: error.line, column: error.column }, { line: 11, column: 5 });
    });

    it('a JSON operation (or `paths`) written twice when the dropped one carries a contract, at the second one', async () => {
      // JSON.parse keeps the last one: the contract would vanish without a word.
      const operation = await loadError('bad/duplicate-operation.json');
      assert.equal(operation.message, 'duplicate key `post` (first at line 6) — keep one');
      assert.deepEqual({ line: operation.line, column: operation.column }, { line: 11, column: 7 });
      const paths = await loadError('bad/duplicate-paths.json');
      assert.equal(paths.message, 'duplicate key `paths` (first at line 4) — keep one');
      assert.deepEqual({ line: paths.line, column: paths.column }, { line: 12, column: 3 });
    });

    it('a JSON key written twice is found when `x-idempotency` is spelled with an escape (`"x-idem\\u0070otency"` is the same member to JSON.parse)', async () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'idemkit-load-'));
      try {
        // The contract's name escaped (its ttl twice), the second of two contracts escaped, the dropped operation's contract escaped.
        for (const [name, nth, message] of [
          ['bad/duplicate-key.json', 0, 'duplicate key `ttl` (first at line 20) — keep one'],
          ['bad/duplicate-contract.json', 1, 'duplicate key `x-idempotency` (first at line 11) — keep one'],
          ['bad/duplicate-operation.json', 0, 'duplicate key `post` (first at line 6) — keep one'],
        ] as const) {
          const plain = await loadError(name);
          let seen = -1;
          const text = readFileSync(fixture(name), 'utf8').replace(/"x-idempotency"/g, (whole) => (++seen === nth ? '"x-idem\\u0070otency"' : whole));
          assert.ok(seen >= nth, name);
          const file = path.join(dir, path.basename(name));
          writeFileSync(file, text);
          const error = await loadError(file);
          assert.equal(error.message, message, name);
          assert.deepEqual([error.line, error.column], [plain.line, plain.column], name);
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('a JSON contract whose strings hold an escaped quote followed by `:` loads, and a key written twice beside one is still found', async () => {
      // `\":` inside a string looks like the end of a member name to a text scan; it is not one.
      const doc = await loadDocument(fixture('escaped-quote-contract.json'));
      assert.equal(doc.operations[0]!.contract?.effect?.owner, 'payments \\": not a name": nor this');
      const error = await loadError('bad/duplicate-key-escaped-quote.json');
      assert.equal(error.message, 'duplicate key `ttl` (first at line 20) — keep one');
      assert.deepEqual({ line: error.line, column: error.column }, spot(fixture('bad/duplicate-key-escaped-quote.json'), '"ttl": "PT1H"', '"ttl"'));
    });

    it('a JSON key written twice in a contract whose path item another path `$ref`s is still found', async () => {
      // The operation is read under both paths but written once: counted twice, its names balanced the dropped key
      // against a stray `x-idempotency` member (and an escaped quote followed by `:`), and the document loaded.
      for (const name of ['bad/duplicate-key-shared-path-item.json', 'bad/duplicate-key-shared-path-item-plain.json']) {
        const error = await loadError(name);
        // Both `ttl`s are on one line: the error points at the second.
        const second = spot(fixture(name), '"ttl": "PT2', '"ttl": "PT2');
        assert.equal(error.message, `duplicate key \`ttl\` (first at line ${second.line}) — keep one`, name);
        assert.deepEqual({ line: error.line, column: error.column }, second, name);
      }
    });

    it('a JSON key written twice whose dropped value holds no contract is not an error, even with contracts between', async () => {
      // The webhook's x-idempotency is no operation's, so the loader looks for a dropped copy holding one.
      const doc = await loadDocument(fixture('duplicate-info-webhook-contract.json'));
      assert.equal((doc.root.info as { title: string }).title, 'Second');
    });

    it('a YAML mapping key that is not a scalar (`? [201, 202]`), at that key', async () => {
      const error = await loadError('bad/complex-key.yaml');
      assert.match(error.message, /^invalid YAML: a mapping key must be a string/);
      assert.deepEqual({ line: error.line, column: error.column }, { line: 7, column: 11 });
    });

    it('a YAML key written twice in a contract reached through a $ref (another file, or a local one), at the second one', async () => {
      // Away from any `x-idempotency` key in its own file, the node would load with a warning; it is a contract.
      const external = await loadError('bad/dup-external/openapi.yaml');
      assert.equal(external.message, 'duplicate key `ttl` (first at line 3) — keep one');
      assert.match(external.file ?? '', /contracts\.yaml$/);
      assert.deepEqual({ line: external.line, column: external.column }, { line: 5, column: 3 });
      const local = await loadError('bad/dup-local-ref.yaml');
      assert.equal(local.message, 'duplicate key `deadline` (first at line 14) — keep one');
      assert.deepEqual({ line: local.line, column: local.column }, spot(fixture('bad/dup-local-ref.yaml'), 'deadline: PT1M', 'deadline: PT1M'));
    });

    it('a YAML key written twice in an anchored node that an x-idempotency aliases, at the second one', async () => {
      const error = await loadError('bad/duplicate-in-anchor.yaml');
      assert.equal(error.message, 'duplicate key `scope` (first at line 6) — keep one');
      assert.deepEqual({ line: error.line, column: error.column }, spot(fixture('bad/duplicate-in-anchor.yaml'), 'scope: [principal, tenant]'));
    });

    it('a 3.0 document without `paths` (cut off before it), at the end of the file', async () => {
      const error = await loadError('bad/no-paths.yaml');
      assert.match(error.message, /^no `paths` — is the file truncated\?/);
      assert.deepEqual([error.line, error.column], [5, 28]);
    });

    it('a $ref a contract needs that points at a missing file, at the $ref', async () => {
      const error = await loadError('bad/missing-ref-file.yaml');
      assert.match(error.message, /\$ref '.\/responses.yaml#\/Created' points at a missing file/);
      assert.deepEqual({ line: error.line, column: error.column }, spot(fixture('bad/missing-ref-file.yaml'), "$ref: './responses.yaml", '$ref'));
    });

    it('a $ref to a plain text file (.env, /etc/passwd) is refused at the $ref without quoting a word of the file', async () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'idemkit-load-'));
      try {
        writeFileSync(path.join(dir, '.env'), 'DB_PASSWORD=hunter2secret\nAPI_TOKEN=sk_live_abcdef\n');
        writeFileSync(path.join(dir, 'key.pem'), '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n');
        for (const target of ['./.env', './key.pem']) {
          const file = path.join(dir, 'api.yaml');
          writeFileSync(file, ['openapi: 3.0.3', 'info: {title: t, version: "1"}', 'paths:', '  /a:', '    post:', '      operationId: a', `      x-idempotency: {$ref: '${target}'}`, '      responses:', "        '201': {description: ok}", ''].join('\n'));
          const error = await loadError(file);
          assert.equal(error.message, `$ref '${target}' points at '${target}', which is plain text, not a YAML or JSON document (no mapping or list at its top) — point the $ref at an OpenAPI or JSON Schema file`);
          assert.deepEqual([error.file, error.line, error.column], [file, 7, 23]);
          assert.doesNotMatch(error.message, /hunter2|sk_live|MIIE/);
        }
        // A boolean schema file (`true`, OpenAPI 3.1's JSON Schema) is a document: it loads.
        writeFileSync(path.join(dir, 'any.json'), 'true\n');
        const file = path.join(dir, 'schema-ref.yaml');
        writeFileSync(file, ['openapi: 3.1.0', 'info: {title: t, version: "1"}', 'paths:', '  /a:', '    post:', '      operationId: a', '      requestBody:', '        content:', '          application/json:', "            schema: {$ref: './any.json'}", '      x-idempotency: true', '      responses:', "        '201': {description: ok}", ''].join('\n'));
        assert.equal((await loadDocument(file)).operations.length, 1);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('a $ref into another file whose pointer is missing, at the $ref in the referring file', async () => {
      const error = await loadError('bad/external-missing-pointer.yaml');
      assert.match(error.message, /\$ref '\.\.\/external\/components\/paths\.yaml#\/nothing' points at nothing: '#\/nothing' does not exist in \.\.\/external\/components\/paths\.yaml/);
      assert.equal(error.file, fixture('bad/external-missing-pointer.yaml'));
      assert.deepEqual({ line: error.line, column: error.column }, spot(fixture('bad/external-missing-pointer.yaml'), '$ref:', '$ref'));
    });

    it('a circular $ref a contract needs', async () => {
      const error = await loadError('bad/circular-ref.yaml');
      assert.match(error.message, /\$ref '#\/components\/parameters\/[AB]' is circular — point it at a real definition/);
      assert.equal(typeof error.line, 'number');
    });

    it('several YAML documents in one file, at the second one', async () => {
      const error = await loadError('bad/two-documents.yaml');
      assert.match(error.message, /several documents|one document per file/);
      assert.deepEqual({ line: error.line, column: error.column }, { line: 4, column: 1 });
      // After a `...` end marker a document may start without `---`: at its first line, not at a `---` inside the first.
      const bare = await loadError('bad/two-documents-after-end.yaml');
      assert.deepEqual({ line: bare.line, column: bare.column }, { line: 9, column: 1 });
    });

    it('a $ref a contract needs that points at a missing node, at the $ref', async () => {
      const error = await loadError('bad/missing-ref-pointer.yaml');
      assert.match(error.message, /'#\/components\/parameters\/IdempotencyKey' does not exist in this file/);
      assert.deepEqual({ line: error.line, column: error.column }, spot(fixture('bad/missing-ref-pointer.yaml'), "- $ref: '#/components", '$ref'));
    });
  });

  describe('external files', () => {
    it('shares external files between documents through one cache', async () => {
      const cache = new SourceCache();
      const first = await loadDocument(fixture('external/openapi.yaml'), { cache });
      const second = await loadDocument(fixture('external/second.yaml'), { cache });
      const a = op(first, 'createThing');
      const b = op(second, 'createThing');
      assert.equal(a.node, b.node, 'the same parsed object, read once');
      assert.equal(a.contract!.ttl?.ms, 86_400_000);
    });

    it('follows `paths: {$ref}` into the other file (not OpenAPI, so with a warning) instead of linting no operation', async () => {
      const doc = await loadDocument(fixture('external/paths-ref/openapi.yaml'));
      // Path items beside the `$ref` are read too, after the file's.
      assert.deepEqual(doc.operations.map((o) => o.operationId), ['createOrder', 'createRefund']);
      assert.deepEqual(op(doc, 'createRefund').at, { file: fixture('external/paths-ref/openapi.yaml'), pointer: '/paths/~1refunds/post' });
      const order = op(doc, 'createOrder');
      assert.deepEqual(order.at, { file: fixture('external/paths-ref/paths.yaml'), pointer: '/~1orders/post' });
      assert.equal(order.contract!.ttl?.ms, 86_400_000);
      assert.deepEqual(doc.position(order.contract!.at('ttl')), { line: 9, column: 7 });
      assert.deepEqual(
        doc.warnings.map((w) => [w.at.pointer, w.message.slice(0, 40)]),
        [['/paths/$ref', "'paths' is a `$ref`, which OpenAPI does "]],
      );
    });

    it('derefs on demand and returns undefined for a broken reference', async () => {
      const doc = await loadDocument(fixture('lenient.yaml'));
      const file = fixture('lenient.yaml');
      assert.equal(doc.deref({ $ref: '#/components/parameters/Nope' }, { file, pointer: '' }), undefined);
      assert.equal(doc.deref({ $ref: './nowhere.yaml#/a' }, { file, pointer: '' }), undefined);
      assert.deepEqual(doc.deref({ $ref: '#/openapi' }, { file, pointer: '' }), { value: '3.0.3', at: { file, pointer: '/openapi' } });
      assert.equal(doc.get({ file, pointer: '/paths/~1x/post/operationId' }), 'x');
    });
  });
});
