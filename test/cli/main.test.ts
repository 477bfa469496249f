import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { main } from '../../src/cli/main.js';
import { bufferIo } from '../helpers/io.js';

describe('cli main', () => {
  it('exits 2 with a one-line hint when no command is given', async () => {
    const io = bufferIo();
    assert.equal(await main([], io), 2);
    assert.match(io.err, /Name a command/);
    assert.doesNotMatch(io.err, /at .*\.ts:\d+/);
  });

  it('prints the package version with --version and exits 0', async () => {
    const io = bufferIo();
    assert.equal(await main(['--version'], io), 0);
    const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    assert.equal(io.out, `${manifest.version}\n`);
    assert.equal(io.err, '');
    for (const argv of [['--verbose', '--version'], ['--version=true']]) {
      const other = bufferIo();
      assert.equal(await main(argv, other), 0, argv.join(' '));
      assert.equal(other.out, `${manifest.version}\n`);
    }
    // A command's help does not offer it.
    const help = bufferIo();
    assert.equal(await main(['lint', '--help'], help), 0);
    assert.doesNotMatch(help.out, /--version/);
  });

  it('prints help and exits 0', async () => {
    const io = bufferIo();
    assert.equal(await main(['--help'], io), 0);
    assert.match(io.out, /idemkit <command>/);
  });
});
