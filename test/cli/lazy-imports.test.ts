import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const root = fileURLToPath(new URL('../..', import.meta.url));
// A module hook that names every project file Node loads, on stderr.
const hook = `data:text/javascript,${encodeURIComponent(
  `import { register } from 'node:module';
register('data:text/javascript,' + encodeURIComponent('export async function load(url, context, next) { if (url.startsWith("file:") && !url.includes("/node_modules/")) process.stderr.write("LOADED " + url + "\\\\n"); return next(url, context); }'));`,
)}`;

async function loadedBy(...argv: string[]): Promise<string[]> {
  const result = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--import', hook, 'src/cli/bin.ts', ...argv], { cwd: root });
  const lines = result.stderr.split('\n');
  const other = lines.filter((line) => line !== '' && !line.startsWith('LOADED '));
  assert.deepEqual(other, [], 'the lint ran cleanly');
  return lines.filter((line) => line.startsWith('LOADED ')).map((line) => fileURLToPath(line.slice('LOADED '.length)).slice(root.length));
}

describe('cold start: lint loads only what it needs', () => {
  it('a stylish lint loads no other command, scaffold, rule pages or other formatter', async () => {
    const loaded = await loadedBy('lint', 'samples/demo-requests/openapi.yaml');
    assert.ok(loaded.includes('src/cli/commands/lint.ts'), loaded.join('\n'));
    assert.ok(loaded.includes('src/lint/formatters/stylish.ts'), 'the hook sees project files');
    for (const file of ['src/lint/scaffold.ts', 'src/lint/rule-docs.ts', 'src/lint/builtin-docs.ts', 'src/lint/formatters/sarif.ts', 'src/lint/formatters/markdown.ts', 'src/lint/formatters/junit.ts', 'src/lint/formatters/github.ts', 'src/generate/server.ts']) {
      assert.ok(!loaded.includes(file), `${file} loaded`);
    }
  });

  it('the format asked for is loaded', async () => {
    const loaded = await loadedBy('lint', 'samples/demo-requests/openapi.yaml', '-f', 'sarif');
    assert.ok(loaded.includes('src/lint/formatters/sarif.ts'), loaded.join('\n'));
    assert.ok(!loaded.includes('src/lint/formatters/stylish.ts'));
  });
});
