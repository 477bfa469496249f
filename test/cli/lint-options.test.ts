import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { runCli } from '../helpers/io.js';

// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: Ajv) => Ajv;
const sarifSchema = JSON.parse(readFileSync(new URL('../fixtures/sarif/sarif-schema-2.1.0.json', import.meta.url), 'utf8'));

const demo = readFileSync(fileURLToPath(new URL('../../samples/demo-requests/openapi.yaml', import.meta.url)), 'utf8');
// The complete demo with one fault: a global scope on an authenticated operation (scope-too-wide).
const globalScope = demo.replace(/^(\s*)scope: \[principal\]$/m, '$1scope: [global]');

describe('idemkit lint: config, suppressions, baselines, formats and --output', () => {
  let dir: string;
  const lint = (...argv: string[]) => runCli(['lint', ...argv], dir);
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'idemkit-lint-'));
    assert.notEqual(globalScope, demo, 'the fixture edit applied');
    writeFileSync(path.join(dir, 'api.yaml'), globalScope);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('fails on the planted fault without a config', async () => {
    const result = await lint('api.yaml');
    assert.equal(result.code, 1);
    assert.match(result.out, /error .*scope-too-wide/);
  });

  it('applies severities from a config discovered upward from the spec', async () => {
    writeFileSync(path.join(dir, '.idemkitrc.yaml'), '# ours\nrules:\n  scope-too-wide: warn\n');
    const warned = await lint('api.yaml');
    assert.equal(warned.code, 0);
    assert.match(warned.out, /warning .*scope-too-wide/);
    writeFileSync(path.join(dir, '.idemkitrc.yaml'), 'rules:\n  scope-too-wide: off\n');
    assert.deepEqual(await lint('api.yaml'), { code: 0, out: '', err: '' });
  });

  it('exits 2 naming the config line of an unknown rule id, before reading documents', async () => {
    writeFileSync(path.join(dir, 'strict.json'), '{\n  "rules": {\n    "scope-to-wide": "off"\n  }\n}\n');
    const result = await lint('api.yaml', 'missing.yaml', '--config', 'strict.json');
    assert.equal(result.code, 2);
    assert.equal(result.out, '');
    assert.equal(result.err, 'strict.json:3:5: unknown rule id "scope-to-wide" in rules (did you mean "scope-too-wide"?); run `idemkit rules` for the list\n');
  });

  it('reads extra key headers and unsafe methods from the config', async () => {
    // A PUT that takes a vendor key header: only a contract-missing finding once the config names both.
    const put = [
      'openapi: 3.1.0',
      'info: { title: t, version: "1" }',
      'paths:',
      '  /orders/{id}:',
      '    put:',
      '      operationId: putOrder',
      '      parameters:',
      '        - { name: id, in: path, required: true, schema: { type: string } }',
      '        - { name: X-Op-Token, in: header, required: true, schema: { type: string } }',
      '      responses:',
      "        '200': { description: ok }",
      '',
    ].join('\n');
    writeFileSync(path.join(dir, 'put.yaml'), put);
    assert.deepEqual(await lint('put.yaml'), { code: 0, out: '', err: '' });
    writeFileSync(path.join(dir, 'idemkit.config.json'), '{ "unsafeMethods": ["post", "patch", "put"], "keyHeaders": ["X-Op-Token"] }');
    const result = await lint('put.yaml', '--fail-on', 'warn');
    assert.equal(result.code, 1, result.out + result.err);
    assert.match(result.out, /X-Op-Token.*contract-missing/);
  });

  it('honours a suppression with a reason and reports it as suppressed in JSON', async () => {
    const suppressed = globalScope.replace(/^(\s*)x-idempotency:$/m, '$1x-idempotency-lint: { ignore: [scope-too-wide], reason: "public demo, one caller" }\n$1x-idempotency:');
    writeFileSync(path.join(dir, 'api.yaml'), suppressed);
    const stylish = await lint('api.yaml');
    assert.equal(stylish.code, 0);
    assert.equal(stylish.out, '1 finding suppressed\n');
    const json = await lint('api.yaml', '--format', 'json');
    const report = JSON.parse(json.out);
    assert.deepEqual(report.findings.map((f: { ruleId: string; suppressed?: unknown }) => [f.ruleId, f.suppressed]), [['scope-too-wide', { reason: 'public demo, one caller' }]]);
    assert.equal(report.summary.suppressed, 1);
  });

  it('reports a suppression without a reason (and does not suppress)', async () => {
    const noReason = globalScope.replace(/^(\s*)x-idempotency:$/m, '$1x-idempotency-lint: { ignore: [scope-too-wide] }\n$1x-idempotency:');
    writeFileSync(path.join(dir, 'api.yaml'), noReason);
    const result = await lint('api.yaml');
    assert.equal(result.code, 1);
    assert.match(result.out, /has no reason.*suppression-invalid/);
    assert.match(result.out, /scope-too-wide/);
  });

  it('writes a baseline, then reports only new findings and lists stale entries', async () => {
    const written = await lint('api.yaml', '--write-baseline', 'idemkit-baseline.json');
    assert.equal(written.code, 0);
    assert.equal(written.out, '');
    assert.equal(written.err, 'wrote baseline idemkit-baseline.json: 1 finding(s) in 1 entry\n');
    const baseline = JSON.parse(readFileSync(path.join(dir, 'idemkit-baseline.json'), 'utf8'));
    assert.deepEqual(baseline.entries.map((e: Record<string, unknown>) => [e.rule, e.file, e.operation, e.pointer]), [
      ['scope-too-wide', 'api.yaml', 'createDemoRequest', '/x-idempotency/scope/0'],
    ]);

    // Lines move (a comment above the operation): still known.
    writeFileSync(path.join(dir, 'api.yaml'), `# moved down\n# twice\n${globalScope}`);
    const known = await lint('api.yaml', '--baseline', 'idemkit-baseline.json');
    assert.equal(known.code, 0, known.out);
    assert.equal(known.out, 'baseline idemkit-baseline.json: 1 known finding hidden\n');

    // The fault is fixed and another appears: the new one fails, the old entry is stale.
    const keyOptional = demo.replace(/(header: Idempotency-Key\n\s*)required: true/, '$1required: false');
    assert.notEqual(keyOptional, demo);
    writeFileSync(path.join(dir, 'api.yaml'), keyOptional);
    const json = JSON.parse((await lint('api.yaml', '--baseline', 'idemkit-baseline.json', '--format', 'json')).out);
    const ids = json.findings.map((f: { ruleId: string }) => f.ruleId);
    assert.ok(ids.includes('key-optional'), ids.join());
    assert.ok(!ids.includes('scope-too-wide'), ids.join());
    assert.deepEqual(json.baseline, {
      file: 'idemkit-baseline.json',
      matched: 0,
      stale: [{ rule: 'scope-too-wide', file: 'api.yaml', operation: 'createDemoRequest', pointer: '/x-idempotency/scope/0', count: 1 }],
    });
    const stylish = await lint('api.yaml', '--baseline', 'idemkit-baseline.json');
    assert.equal(stylish.code, 1);
    assert.match(stylish.out, /1 stale entry \(no longer found; regenerate with --write-baseline\):\n {2}api\.yaml {2}createDemoRequest {2}\/x-idempotency\/scope\/0 {2}scope-too-wide\n/);
  });

  it('rejects a missing baseline and both baseline flags at once', async () => {
    const missing = await lint('api.yaml', '--baseline', 'nope.json');
    assert.equal(missing.code, 2);
    assert.match(missing.err, /baseline file nope\.json does not exist/);
    const both = await lint('api.yaml', '--baseline', 'a.json', '--write-baseline', 'b.json');
    assert.equal(both.code, 2);
    assert.match(both.err, /not both/);
  });

  it('produces every format, and --output writes the report to a file instead of stdout', async () => {
    for (const format of ['stylish', 'json', 'sarif', 'github', 'junit', 'markdown']) {
      const result = await lint('api.yaml', '--format', format, '--output', `report.${format}`);
      assert.equal(result.code, 1, `${format}: ${result.err}`);
      assert.equal(result.out, '');
      const text = readFileSync(path.join(dir, `report.${format}`), 'utf8');
      assert.match(text, /scope-too-wide/, format);
    }
    type Sarif = { runs: { tool: { driver: { rules: unknown[] } }; results: { locations: { physicalLocation: { artifactLocation: { uri: string } } }[] }[] }[] };
    const sarif = JSON.parse(readFileSync(path.join(dir, 'report.sarif'), 'utf8')) as Sarif;
    const ajv = new Ajv({ allErrors: true, strict: false });
    addFormats(ajv);
    const validate = ajv.compile(sarifSchema);
    assert.equal(validate(sarif), true, JSON.stringify(validate.errors));
    assert.ok(sarif.runs[0].tool.driver.rules.length >= 27, 'the whole catalogue is described');
    assert.equal(sarif.runs[0].results[0].locations[0].physicalLocation.artifactLocation.uri, 'api.yaml');
    assert.match(readFileSync(path.join(dir, 'report.github'), 'utf8'), /^::error file=api\.yaml,line=\d+,col=\d+,title=scope-too-wide::/);
    assert.match(readFileSync(path.join(dir, 'report.markdown'), 'utf8'), /### ✘ `POST \/v1\/demo-requests \(createDemoRequest\)`/);
  });

  it('junit agrees with the exit code: a warning fails no test case unless --fail-on warn', async () => {
    writeFileSync(path.join(dir, '.idemkitrc.yaml'), 'rules:\n  scope-too-wide: warn\n');
    const passing = await lint('api.yaml', '--format', 'junit');
    assert.equal(passing.code, 0, passing.err);
    assert.doesNotMatch(passing.out, /<failure/);
    assert.match(passing.out, /<system-out>below --fail-on error: api\.yaml:\d+:\d+ warn scope-too-wide: /);
    const failing = await lint('api.yaml', '--format', 'junit', '--fail-on', 'warn');
    assert.equal(failing.code, 1);
    assert.match(failing.out, /<failure message="[^"]*" type="scope-too-wide">/);
  });

  it('a report on stdout says which documents could not be loaded: JSON errors (not listed as linted), SARIF a failed invocation', async () => {
    writeFileSync(path.join(dir, 'empty.yaml'), '');
    const json = await lint('api.yaml', 'empty.yaml', '--format', 'json');
    assert.equal(json.code, 2);
    const report = JSON.parse(json.out) as { files: string[]; errors?: { file: string; line: number; column: number; message: string }[] };
    assert.deepEqual(report.files, ['api.yaml']);
    assert.deepEqual(report.errors, [{ file: 'empty.yaml', line: 1, column: 1, message: 'the file is empty — write an OpenAPI document (openapi: 3.1.0, info, paths)' }]);
    const sarif = await lint('api.yaml', 'empty.yaml', '--format', 'sarif');
    assert.equal(sarif.code, 2);
    type Invocation = { executionSuccessful: boolean; toolExecutionNotifications: { level: string; message: { text: string }; locations: { physicalLocation: { artifactLocation: { uri: string } } }[] }[] };
    const log = JSON.parse(sarif.out) as { runs: { invocations?: Invocation[] }[] };
    const ajv = new Ajv({ allErrors: true, strict: false });
    addFormats(ajv);
    const validate = ajv.compile(sarifSchema);
    assert.equal(validate(log), true, JSON.stringify(validate.errors));
    const [invocation] = log.runs[0]!.invocations!;
    assert.equal(invocation!.executionSuccessful, false);
    assert.equal(invocation!.toolExecutionNotifications[0]!.level, 'error');
    assert.equal(invocation!.toolExecutionNotifications[0]!.locations[0]!.physicalLocation.artifactLocation.uri, 'empty.yaml');
    // A clean run has no invocation to report on, as before.
    assert.equal((JSON.parse((await lint('api.yaml', '--format', 'sarif')).out) as { runs: { invocations?: unknown }[] }).runs[0]!.invocations, undefined);
  });

  it('does not write --output when a document cannot be read, and keeps the previous file', async () => {
    writeFileSync(path.join(dir, 'report.sarif'), 'previous');
    const result = await lint('api.yaml', 'missing.yaml', '--format', 'sarif', '--output', 'report.sarif');
    assert.equal(result.code, 2);
    assert.equal(result.err, 'missing.yaml:1:1: file not found — check the path (relative paths start at the current directory)\n', 'one line per unreadable document, nothing more');
    assert.equal(readFileSync(path.join(dir, 'report.sarif'), 'utf8'), 'previous');
    assert.ok(!existsSync(path.join(dir, 'idemkit-baseline.json')));
  });
});
