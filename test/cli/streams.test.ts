import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { assertBuilt, bin, runProcess } from './spawn.js';

const demo = readFileSync(fileURLToPath(new URL('../../samples/demo-requests/openapi.yaml', import.meta.url)), 'utf8');
// The demo with one fault, so the report has findings (exit code 1).
const faulty = demo.replace(/^(\s*)scope: \[principal\]$/m, '$1scope: [global]');

describe('idemkit on a pipe whose reader goes away', () => {
  let dir: string;
  before(assertBuilt);
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'idemkit-pipe-'));
    writeFileSync(path.join(dir, 'api.yaml'), faulty);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** Runs `idemkit …argv | head -c 100` in bash: idemkit's exit code and its stderr. */
  async function intoHead(...argv: string[]): Promise<{ code: string; stderr: string }> {
    const quoted = [process.execPath, bin, ...argv].map((arg) => `'${arg.replace(/'/g, `'\\''`)}'`).join(' ');
    const ran = await runProcess('bash', ['-c', `${quoted} 2>err.txt | head -c 100 >/dev/null; echo "\${PIPESTATUS[0]}"`], { cwd: dir });
    assert.equal(ran.code, 0, ran.stderr);
    return { code: ran.stdout.trim(), stderr: readFileSync(path.join(dir, 'err.txt'), 'utf8') };
  }

  it('stops writing quietly: no stack trace, the exit code of the lint', async function () {
    if (process.platform === 'win32') this.skip();
    // SARIF with the rule help is over 100 KB, more than a pipe holds: the write after `head` exits fails.
    assert.deepEqual(await intoHead('lint', 'api.yaml', '-f', 'sarif'), { code: '1', stderr: '' });
    assert.deepEqual(await intoHead('explain', 'scope-too-wide'), { code: '0', stderr: '' });
  });
});
