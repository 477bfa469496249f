import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { renderMarkdownForTerminal } from '../../src/cli/commands/explain.js';
import { main } from '../../src/cli/main.js';
import { bufferIo } from '../helpers/io.js';

describe('idemkit explain', () => {
  it("prints the rule's page for the terminal", async () => {
    const io = bufferIo();
    assert.equal(await main(['explain', 'scope-too-wide'], io), 0);
    assert.match(io.out, /^scope-too-wide\n=+\n/);
    assert.match(io.out, /\nWhy\n---\n/);
    assert.doesNotMatch(io.out, /```|\*\*|^#/m);
    // The page's text comes from rules/scope-too-wide.md, found relative to the package.
    const page = readFileSync(new URL('../../rules/scope-too-wide.md', import.meta.url), 'utf8');
    const sentence = page.split('\n').find((line) => line.startsWith('On an authenticated API'));
    assert.ok(sentence && io.out.includes(sentence));
    assert.equal(io.err, '');
  });

  it('has pages for the built-in rules too', async () => {
    const io = bufferIo();
    assert.equal(await main(['explain', 'suppression-invalid'], io), 0);
    assert.match(io.out, /reason: "single-tenant internal API/);
  });

  it('exits 2 with a "did you mean" for an unknown rule', async () => {
    const io = bufferIo();
    assert.equal(await main(['explain', 'scope-to-wide'], io), 2);
    assert.equal(io.out, '');
    assert.equal(io.err, 'unknown rule "scope-to-wide" (did you mean "scope-too-wide"?); run `idemkit rules` for the list\n');
    const far = bufferIo();
    assert.equal(await main(['explain', 'zzz'], far), 2);
    assert.equal(far.err, 'unknown rule "zzz"; run `idemkit rules` for the list\n');
  });

  it('asks for a rule id when none is given (not "unknown rule undefined")', async () => {
    for (const argv of [['explain'], ['explain', '']]) {
      const io = bufferIo();
      assert.equal(await main(argv, io), 2, argv.join(' '));
      assert.equal(io.out, '');
      assert.equal(io.err, 'name a rule id (idemkit rules lists them)\n');
    }
  });

  it('renders headings, code blocks, emphasis and links', () => {
    const text = renderMarkdownForTerminal('# Title\n\n**Bold** and *it* and [docs](https://x.test).\n\n## Fix\n\n```yaml\na: 1\n```\n');
    assert.equal(text, 'Title\n=====\n\nBold and it and docs (https://x.test).\n\nFix\n---\n\n    a: 1\n');
  });

  it('finds the pages from the built package (dist/) too', async () => {
    const bin = fileURLToPath(new URL('../../dist/src/cli/bin.js', import.meta.url));
    assert.ok(existsSync(bin), `${bin} is missing: run \`npm run build\` first (npm test does)`);
    const { stdout } = await promisify(execFile)(process.execPath, [bin, 'explain', 'key-optional'], { cwd: '/' });
    assert.match(stdout, /^key-optional\n=+\n/);
  });
});
