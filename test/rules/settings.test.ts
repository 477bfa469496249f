/**
 * The rules read the config file's settings through the CLI: extra key headers and extra unsafe methods
 * make contract-missing fire where the defaults would not, and an `off` rule stays silent.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { main } from '../../src/cli/main.js';
import { payouts } from '../helpers/api-docs.js';
import { bufferIo } from '../helpers/io.js';

// PUT /payouts/{id} takes an X-Dedupe-Token header and has no contract: invisible to the defaults.
const spec = payouts((t) => {
  t.paths['/payouts/{id}'].put = {
    operationId: 'replacePayout',
    parameters: [{ name: 'X-Dedupe-Token', in: 'header', required: true, schema: { type: 'string' } }],
    responses: { '200': { description: 'replaced' } },
  };
});

describe('rule settings from the config file', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'idemkit-settings-'));
    await writeFile(path.join(dir, 'openapi.yaml'), spec);
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const lint = async () => {
    const io = bufferIo(dir);
    const code = await main(['lint', 'openapi.yaml', '--format', 'json'], io);
    return { code, findings: io.out ? (JSON.parse(io.out) as { findings: { ruleId: string; pointer: string; operations: string[] }[] }).findings : [], err: io.err };
  };

  it('is clean with the defaults', async () => {
    const result = await lint();
    assert.equal(result.code, 0, result.err);
    assert.deepEqual(result.findings, []);
  });

  it('flags the PUT once X-Dedupe-Token is a key header (a key counts on every method but the safe ones)', async () => {
    await writeFile(path.join(dir, '.idemkitrc.yaml'), 'keyHeaders: [X-Dedupe-Token]\n');
    const result = await lint();
    assert.equal(result.code, 0, 'contract-missing is a warning: exit 0 under --fail-on error');
    assert.deepEqual(
      result.findings.map((f) => [f.ruleId, f.pointer, f.operations]),
      [['contract-missing', '/paths/~1payouts~1{id}/put/parameters/0', ['replacePayout']]],
    );
  });

  it('stays silent when the config turns the rule off', async () => {
    await writeFile(path.join(dir, '.idemkitrc.yaml'), 'unsafeMethods: [post, put]\nkeyHeaders: [X-Dedupe-Token]\nrules:\n  contract-missing: off\n');
    const result = await lint();
    assert.deepEqual(result.findings, []);
  });
});
