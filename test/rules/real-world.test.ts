/**
 * Real documents are messy. Shapes that are invalid elsewhere in a document (a 3.1 `type: 'null'` in a 3.0
 * document, a null schema, null entries where objects belong) must not stop the idempotency rules: every
 * rule runs without throwing, the contract's findings still come, and the CLI exits 1 (findings), not 2.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { main } from '../../src/cli/main.js';
import { schemaShapeWarnings } from '../../src/lint/document-shapes.js';
import { lintDocument } from '../../src/lint/engine.js';
import { loadDocument } from '../../src/parser/index.js';
import { rules } from '../../rules/index.js';
import { CONTRACT, payouts, type Tree } from '../helpers/api-docs.js';
import { bufferIo } from '../helpers/io.js';
import { REPO_ROOT } from '../helpers/rule-tester.js';

const post = (t: Tree): Tree => t.paths['/payouts'].post;

/** Shapes written for these tests (not copied from any real spec), each with one idempotency fault. */
const shapes: { name: string; text: string; expect: string[]; warnings: number }[] = [
  {
    name: "type: 'null' in a 3.0 body, under oneOf",
    text: payouts((t, c) => {
      t.openapi = '3.0.3';
      t.components.schemas.PayoutInput.properties.note = { oneOf: [{ type: 'string' }, { type: 'null' }] };
      c.fingerprint.include = ['/amount', '/currency', '/destination', '/nott'];
    }),
    expect: [`fingerprint-field-unknown ${CONTRACT}/fingerprint/include/3`],
    warnings: 1,
  },
  {
    name: 'a null property schema and a null request body schema',
    text: payouts((t, c) => {
      t.openapi = '3.0.3';
      t.components.schemas.PayoutInput.properties.extra = null;
      t.paths['/payouts/{id}'].post = { ...structuredClone(post(t)), operationId: 'amendPayout' };
      t.paths['/payouts/{id}'].post.requestBody.content['application/json'].schema = null;
      delete c.lease;
    }),
    expect: [`lease-missing ${CONTRACT}`],
    // the two null schemas, and the helper's 3.1 type array (`note`) that is invalid in 3.0
    warnings: 3,
  },
  {
    name: 'null parameters, responses and headers',
    text: payouts((t, c) => {
      post(t).parameters.push(null);
      post(t).responses['201'].headers['X-Extra'] = null;
      post(t).responses['418'] = null;
      t.paths['/payouts'].parameters = [null];
      delete c.ttl;
    }),
    expect: [`ttl-missing ${CONTRACT}`],
    warnings: 0,
  },
  {
    name: 'a schema that is a bare boolean and a type array with an unknown type',
    text: payouts((t, c) => {
      t.components.schemas.Destination = true;
      t.components.schemas.PayoutInput.properties.amount = { type: ['integer', 'money'] };
      c.fingerprint.include = ['/amount', '/currency', '/destination/anything'];
      c.scope = [];
    }),
    expect: [`scope-missing ${CONTRACT}/scope`],
    warnings: 0,
  },
];

describe('real-world shapes', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'idemkit-real-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  for (const [index, shape] of shapes.entries()) {
    it(`still lints the contract: ${shape.name}`, async () => {
      const file = path.join(dir, `shape-${index}.yaml`);
      await writeFile(file, shape.text);
      const findings = lintDocument(await loadDocument(file), { rules });
      const idempotency = findings.filter((f) => f.ruleId !== 'document-invalid').map((f) => `${f.ruleId} ${f.pointer}`);
      assert.deepEqual(idempotency, shape.expect);
      // The unrelated invalidity, when the parser reports it, is one warning per node, never an error.
      const warnings = findings.filter((f) => f.ruleId === 'document-invalid');
      assert.equal(warnings.length, shape.warnings, warnings.map((w) => `${w.pointer} ${w.message}`).join('\n'));
      assert.ok(warnings.every((w) => w.severity === 'warn'));
      assert.equal(new Set(warnings.map((w) => `${w.pointer} ${w.message}`)).size, warnings.length);
    });
  }

  it('exits 1 with the findings, not 2, on samples/broken/real-world.yaml', async () => {
    const io = bufferIo(REPO_ROOT);
    const code = await main(['lint', 'samples/broken/real-world.yaml', '--format', 'json'], io);
    assert.equal(code, 1, io.err);
    const report = JSON.parse(io.out) as { findings: { ruleId: string; pointer: string }[] };
    const ids = report.findings.map((f) => f.ruleId).filter((id) => id !== 'document-invalid');
    assert.deepEqual(ids.sort(), ['fingerprint-field-unknown', 'ttl-missing']);
    assert.equal(io.err, '');
  });

  it('reports each unrelated invalidity of samples/broken/real-world.yaml once, as a warning at its line', async () => {
    const io = bufferIo(REPO_ROOT);
    await main(['lint', 'samples/broken/real-world.yaml', '--format', 'json'], io);
    const report = JSON.parse(io.out) as { findings: { ruleId: string; severity: string; pointer: string; line: number }[] };
    const invalid = report.findings.filter((f) => f.ruleId === 'document-invalid');
    assert.deepEqual(
      invalid.map((f) => [f.severity, f.pointer]),
      [
        ['warn', '/components/schemas/ListingInput/properties/discontinuedAt/oneOf/1/type'],
        ['warn', '/components/schemas/ListingInput/properties/extra'],
        ['warn', '/components/schemas/Listing/description'],
      ],
    );
    const lines = (await readFile(path.join(REPO_ROOT, 'samples/broken/real-world.yaml'), 'utf8')).split('\n');
    assert.match(lines[invalid[0]!.line - 1]!, /type: 'null'/);
    assert.match(lines[invalid[1]!.line - 1]!, /^\s*extra:/);
    assert.match(lines[invalid[2]!.line - 1]!, /^\s*description: A listing as sold\./);
  });

  it('lets --fail-on decide the exit code when the only problems are unrelated invalidities (never 2)', async () => {
    const file = path.join(dir, 'only-shapes.yaml');
    await writeFile(
      file,
      payouts((t) => {
        t.openapi = '3.0.3';
        t.components.schemas.PayoutInput.properties.note = { oneOf: [{ type: 'string' }, { type: 'null' }] };
        t.components.schemas.PayoutInput.properties.extra = null;
      }),
    );
    const run = async (...extra: string[]) => {
      const io = bufferIo(dir);
      const code = await main(['lint', 'only-shapes.yaml', ...extra], io);
      return { code, out: io.out, err: io.err };
    };
    const byDefault = await run();
    assert.equal(byDefault.code, 0, byDefault.out + byDefault.err);
    assert.equal(byDefault.out.match(/document-invalid/g)?.length, 2, byDefault.out);
    assert.equal(byDefault.err, '');
    const strict = await run('--fail-on', 'warn');
    assert.equal(strict.code, 1, strict.out + strict.err);
    const json = await run('--format', 'json');
    const findings = (JSON.parse(json.out) as { findings: { ruleId: string }[] }).findings;
    assert.deepEqual(findings.map((f) => f.ruleId), ['document-invalid', 'document-invalid']);
  });

  it('finds the unrelated schema-shape problems once each, where they are written', async () => {
    const doc = await loadDocument(path.join(REPO_ROOT, 'samples/broken/real-world.yaml'));
    assert.deepEqual(
      schemaShapeWarnings(doc).map((w) => [w.at.pointer, w.message.split(':')[0]]),
      [
        ['/components/schemas/ListingInput/properties/extra', 'a schema is null here'],
        ['/components/schemas/ListingInput/properties/discontinuedAt/oneOf/1/type', "type 'null' is OpenAPI 3.1 (JSON Schema 2020-12); in 3.0 mark the other alternative `nullable"],
      ],
    );
    for (const clean of ['samples/demo-requests/openapi.yaml', 'samples/broken/openapi31.yaml', 'samples/broken/swagger2.yaml']) {
      assert.deepEqual(schemaShapeWarnings(await loadDocument(path.join(REPO_ROOT, clean))), [], clean);
    }
  });

  it('finds the shapes in JSON documents too (a type array without any null, a null schema, an escaped key)', async () => {
    const write = async (name: string, doc: unknown) => {
      const file = path.join(dir, name);
      await writeFile(file, JSON.stringify(doc, null, 2));
      return schemaShapeWarnings(await loadDocument(file)).map((w) => w.at.pointer);
    };
    const base = { info: { title: 't', version: '1' }, paths: {} };
    assert.deepEqual(await write('array.json', { openapi: '3.0.3', ...base, components: { schemas: { A: { type: ['string', 'integer'] } } } }), ['/components/schemas/A/type']);
    assert.deepEqual(await write('null.json', { openapi: '3.1.0', ...base, components: { schemas: { A: { properties: { b: null } } } } }), ['/components/schemas/A/properties/b']);
    assert.deepEqual(await write('clean.json', { openapi: '3.0.3', ...base, components: { schemas: { A: { type: 'string' } } } }), []);
    // 3.1: `"null"` in type arrays is valid; a null inside a schema list is not, written compactly or not.
    const listed = { openapi: '3.1.0', ...base, components: { schemas: { A: { type: ['string', 'null'] }, B: { allOf: [null] } } } };
    assert.deepEqual(await write('listed.json', listed), ['/components/schemas/B/allOf/0']);
    const compact = path.join(dir, 'compact.json');
    await writeFile(compact, JSON.stringify(listed));
    assert.deepEqual(schemaShapeWarnings(await loadDocument(compact)).map((w) => w.at.pointer), ['/components/schemas/B/allOf/0']);
    const escaped = path.join(dir, 'escaped.json');
    await writeFile(escaped, '{"openapi":"3.0.3","info":{"title":"t","version":"1"},"paths":{},"components":{"schemas":{"A":{"typ\\u0065":["string","integer"]}}}}');
    assert.deepEqual(schemaShapeWarnings(await loadDocument(escaped)).map((w) => w.at.pointer), ['/components/schemas/A/type']);
  });

  it('flags 3.1 type arrays in Swagger 2.0 and skips examples and extensions', async () => {
    const file = path.join(dir, 'swagger.yaml');
    await writeFile(
      file,
      `swagger: '2.0'
info: { title: t, version: '1' }
paths: {}
definitions:
  A:
    type: [string, 'null']
    example: { schema: null, type: 'null' }
    x-shape: { schema: null }
    properties:
      b: { items: null }
`,
    );
    const warnings = schemaShapeWarnings(await loadDocument(file));
    assert.deepEqual(warnings.map((w) => w.at.pointer), ['/definitions/A/type', '/definitions/A/properties/b/items']);
  });
});
