import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { displayPath, relativePath } from '../../../src/lint/formatters/paths.js';
import { main } from '../../../src/cli/main.js';
import { bufferIo } from '../../helpers/io.js';

describe('formatters/paths: how a file is named to a person', () => {
  it('relative to the working directory, also a few levels up; absolute once the way up reaches the root', () => {
    assert.equal(displayPath('/work/api', '/work/api/openapi.yaml'), 'openapi.yaml');
    assert.equal(displayPath('/work/api/sub', '/work/api/openapi.yaml'), '../openapi.yaml');
    assert.equal(displayPath('/work/api', '/work/common/specs/a.yaml'), '../common/specs/a.yaml');
    assert.equal(displayPath('/work/api', '/dev/stdin'), '/dev/stdin', 'not ../../dev/stdin');
    assert.equal(displayPath('/', '/dev/null'), 'dev/null');
    assert.equal(displayPath('/work/api', '/work/api'), '/work/api');
    // SARIF locations stay relative to %SRCROOT% however far up.
    assert.equal(relativePath('/work/api', '/dev/stdin'), '../../dev/stdin');
  });

  it('lint names a file outside the working directory by its absolute path, in messages and reports', async () => {
    const io = bufferIo(process.cwd());
    assert.equal(await main(['lint', '/dev/null'], io), 2);
    assert.equal(io.err, '/dev/null:1:1: the file is empty — write an OpenAPI document (openapi: 3.1.0, info, paths)\n');
  });

  it('a config error names the config file the same way', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'idemkit-paths-'));
    try {
      writeFileSync(path.join(dir, 'bad.yaml'), 'rules:\n  no-such-rule: warn\n');
      const io = bufferIo(process.cwd());
      assert.equal(await main(['lint', path.resolve('samples/demo-requests/openapi.yaml'), '--config', path.join(dir, 'bad.yaml')], io), 2);
      // As any file is named (absolute here, where the way up from the checkout reaches the root).
      assert.ok(io.err.startsWith(`${displayPath(process.cwd(), path.join(dir, 'bad.yaml'))}:2:3: `), io.err);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
