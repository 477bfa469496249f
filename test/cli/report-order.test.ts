import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runCli } from '../helpers/io.js';

const demo = readFileSync(fileURLToPath(new URL('../../samples/demo-requests/openapi.yaml', import.meta.url)), 'utf8');
const faulty = demo.replace(/^(\s*)scope: \[principal\]$/m, '$1scope: [global]');

describe('idemkit lint: reports do not depend on the order files are named in', () => {
  let dir: string;
  const lint = (...argv: string[]) => runCli(['lint', ...argv], dir);
  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'idemkit-order-'));
    assert.notEqual(faulty, demo, 'the fixture edit applied');
    writeFileSync(path.join(dir, 'a.yaml'), faulty);
    writeFileSync(path.join(dir, 'b.yaml'), faulty);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  for (const format of ['stylish', 'json', 'sarif', 'github', 'junit', 'markdown']) {
    it(`${format}: a.yaml b.yaml and b.yaml a.yaml give the same report, a.yaml first`, async () => {
      const forward = await lint('a.yaml', 'b.yaml', '-f', format);
      const reversed = await lint('b.yaml', 'a.yaml', '-f', format);
      assert.equal(forward.code, 1, forward.err);
      assert.equal(reversed.out, forward.out);
      const first = (text: string, name: string) => text.indexOf(name);
      assert.ok(first(forward.out, 'a.yaml') >= 0 && first(forward.out, 'a.yaml') < first(forward.out, 'b.yaml'), forward.out);
    });
  }

  it('markdown and junit give each document its own finding, though both name the same operationId', async () => {
    const markdown = (await lint('b.yaml', 'a.yaml', '-f', 'markdown')).out;
    const cards = markdown.split(/^### /m).slice(1);
    assert.equal(cards.filter((card) => card.includes('createDemoRequest')).length, 2);
    for (const [index, file] of ['a.yaml', 'b.yaml'].entries()) {
      const card = cards.filter((text) => text.includes('createDemoRequest'))[index]!;
      assert.match(card, new RegExp(`\`${file}:\\d+\`\\n`), 'the card is located in its file');
      assert.deepEqual(card.match(/`[ab]\.yaml:\d+:\d+`/g), [`\`${file}:71:17\``]);
    }
    const junit = (await lint('b.yaml', 'a.yaml', '-f', 'junit')).out;
    assert.match(junit, /<testsuite name="a\.yaml" tests="3" failures="1"[\s\S]*>a\.yaml:71:17 error[\s\S]*<testsuite name="b\.yaml" tests="3" failures="1"[\s\S]*>b\.yaml:71:17 error/);
    assert.equal(junit.match(/<failure /g)?.length, 2);
  });

  it('json lists the files sorted', async () => {
    const report = JSON.parse((await lint('b.yaml', 'a.yaml', '-f', 'json')).out) as { files: string[] };
    assert.deepEqual(report.files, ['a.yaml', 'b.yaml']);
  });
});
