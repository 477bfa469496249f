import assert from 'node:assert/strict';
import { displayPath } from '../../../src/lint/formatters/paths.js';
import { relativePath } from '../../../src/lint/formatters/common.js';
import { main } from '../../../src/cli/main.js';
import { bufferIo } from '../../helpers/io.js';

describe('formatters/paths: how a file is named to a person', () => {
  it('relative to the working directory, also a few levels up; absolute once the way up reaches the root', () => {
    assert.equal(displayPath('/work/api', '/work/api/openapi.yaml'), 'openapi.yaml');
    assert.equal(displayPath('/work/api/sub', '/work/api/openapi.yaml'), '../openapi.yaml');
    assert.equal(displayPath('/work/api', '/work/shared/specs/a.yaml'), '../shared/specs/a.yaml');
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
});
