import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { main } from '../../src/cli/main.js';
import { bufferIo } from '../helpers/io.js';

const demo = readFileSync(fileURLToPath(new URL('../../samples/demo-requests/openapi.yaml', import.meta.url)), 'utf8');
// The complete demo with one fault (scope-too-wide), so a lint that runs prints a report.
const faulty = demo.replace(/^(\s*)scope: \[principal\]$/m, '$1scope: [global]');

describe('idemkit usage errors: one line, exit 2, nothing run or written', () => {
  let dir: string;
  const run = async (...argv: string[]) => {
    const io = bufferIo(dir);
    const code = await main(argv, io);
    return { code, out: io.out, err: io.err };
  };
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'idemkit-usage-'));
    assert.notEqual(faulty, demo, 'the fixture edit applied');
    writeFileSync(path.join(dir, 'api.yaml'), faulty);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('rejects a bad --fail-on before linting: no report, no output file', async () => {
    const printed = await run('lint', 'api.yaml', '--fail-on', 'fatal');
    assert.equal(printed.code, 2);
    assert.equal(printed.out, '');
    assert.equal(printed.err, '--fail-on "fatal" is not one of: info, warn, error\n');
    const written = await run('lint', 'api.yaml', '--fail-on', 'fatal', '-o', 'fo.txt');
    assert.equal(written.code, 2);
    assert.ok(!existsSync(path.join(dir, 'fo.txt')), 'no report file');
    assert.equal(written.err.split('\n').length, 2, written.err);
  });

  it('rejects a bad lint --format and rules --format before running', async () => {
    const lint = await run('lint', 'api.yaml', '--format', 'xml');
    assert.equal(lint.code, 2);
    assert.equal(lint.out, '');
    assert.match(lint.err, /^--format "xml" is not one of: stylish, json, sarif, github, junit, markdown\n$/);
    const rules = await run('rules', '--format', 'xml');
    assert.equal(rules.code, 2);
    assert.equal(rules.out, '');
    assert.equal(rules.err, '--format "xml" is not one of: table, json\n');
  });

  it('names a bad positional without dashes', async () => {
    const bad = await run('generate', 'sdk', 'api.yaml', '--out', 'gen');
    assert.deepEqual(bad, { code: 2, out: '', err: 'target "sdk" is not one of: server, client\n' });
    assert.ok(!existsSync(path.join(dir, 'gen')));
  });

  it('says what to name when a command misses its arguments', async () => {
    assert.deepEqual(await run('lint'), { code: 2, out: '', err: 'name the OpenAPI documents to lint (YAML or JSON)\n' });
    assert.deepEqual(await run('init'), { code: 2, out: '', err: 'name the OpenAPI document to scaffold contracts in\n' });
    assert.deepEqual(await run('generate', 'server'), { code: 2, out: '', err: 'name what to generate (server or client) and the OpenAPI document\n' });
  });

  it('keeps other yargs errors on one line too', async () => {
    const unknown = await run('lint', 'api.yaml', '--nope');
    assert.equal(unknown.code, 2);
    assert.equal(unknown.out, '');
    assert.equal(unknown.err, 'Unknown argument: nope\n');
  });
});
