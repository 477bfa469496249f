/**
 * The catalogue is consistent: every rule file is registered, documented and tested, fires on some file
 * under samples/, each broken sample trips exactly the rules its header names, and the demo is clean.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { lintDocument } from '../../src/lint/engine.js';
import type { Finding, Rule } from '../../src/lint/rule.js';
import { loadDocument } from '../../src/parser/index.js';
import { rules } from '../../rules/index.js';
import { REPO_ROOT } from '../helpers/rule-tester.js';

const rulesDir = path.join(REPO_ROOT, 'rules');
const ruleFiles = readdirSync(rulesDir)
  .filter((name) => name.endsWith('.ts') && name !== 'index.ts')
  .map((name) => name.slice(0, -3))
  .sort();
const testSources = readdirSync(path.join(REPO_ROOT, 'test', 'rules'))
  .filter((name) => name.endsWith('.test.ts'))
  .map((name) => readFileSync(path.join(REPO_ROOT, 'test', 'rules', name), 'utf8'));

const brokenDir = path.join(REPO_ROOT, 'samples', 'broken');
const brokenSamples = readdirSync(brokenDir).filter((name) => /\.(ya?ml|json)$/.test(name)).sort();

/** The rule ids a sample's `# trips: a, b` header line names. */
function declaredTrips(file: string): string[] {
  const match = /^#\s*trips:\s*(.+)$/m.exec(readFileSync(file, 'utf8'));
  assert.ok(match, `${path.relative(REPO_ROOT, file)} has no "# trips: rule-id, …" header line`);
  return match[1]!.split(',').map((id) => id.trim()).filter(Boolean).sort();
}

async function lintAll(file: string): Promise<Finding[]> {
  return lintDocument(await loadDocument(file), { rules });
}

describe('rule catalogue consistency', () => {
  it('has rule files', () => assert.ok(ruleFiles.length >= 27, `only ${ruleFiles.length} rule files`));

  it('registers every rule file once, under its file name, in rules/index.ts', async () => {
    const registered = rules.map((rule) => rule.meta.id);
    assert.equal(new Set(registered).size, registered.length, 'a rule id is registered twice');
    assert.deepEqual([...registered].sort(), ruleFiles);
    for (const id of ruleFiles) {
      const module = (await import(pathToFileURL(path.join(rulesDir, `${id}.js`)).href)) as { default: Rule };
      assert.equal(module.default.meta.id, id, `rules/${id}.ts exports a rule with id ${module.default.meta.id}`);
    }
  });

  it('gives every rule complete meta', () => {
    for (const { meta } of rules) {
      assert.match(meta.id, /^[a-z]+(-[a-z]+)*$/);
      assert.ok(meta.description.length > 20, `${meta.id}: description`);
      assert.ok(meta.rationale.length > 40, `${meta.id}: rationale`);
      assert.ok(Object.keys(meta.messages).length > 0, `${meta.id}: messages`);
    }
  });

  it('documents every rule: a page with its id, why, and a bad and a good example', () => {
    for (const id of ruleFiles) {
      const page = readFileSync(path.join(rulesDir, `${id}.md`), 'utf8');
      assert.match(page, new RegExp(`^# ${id}\\n`), `rules/${id}.md must start with "# ${id}"`);
      assert.match(page, /^## Why$/m, `rules/${id}.md: a "## Why" section`);
      assert.match(page, /^## (Invalid|Bad)$/m, `rules/${id}.md: an invalid example`);
      assert.match(page, /^## (Valid|Good)$/m, `rules/${id}.md: a valid example`);
      assert.ok((page.match(/```yaml/g) ?? []).length >= 2, `rules/${id}.md: YAML examples`);
    }
  });

  it('tests every rule with a rule tester table', () => {
    for (const id of ruleFiles) {
      const tested = testSources.some((source) => source.includes(`rules/${id}.js'`) && source.includes('ruleTester.run('));
      assert.ok(tested, `no test/rules/*.test.ts imports rules/${id}.js and runs ruleTester.run on it`);
    }
  });

  it('lints the complete samples (the demo, YAML and JSON) clean with every rule', async () => {
    const complete = readdirSync(path.join(REPO_ROOT, 'samples'), { withFileTypes: true })
      .filter((entry) => entry.isDirectory() && entry.name !== 'broken')
      .flatMap((entry) =>
        readdirSync(path.join(REPO_ROOT, 'samples', entry.name))
          .filter((name) => /^openapi\.(ya?ml|json)$/.test(name))
          .map((name) => path.join(REPO_ROOT, 'samples', entry.name, name)),
      );
    assert.ok(complete.includes(path.join(REPO_ROOT, 'samples', 'demo-requests', 'openapi.yaml')), 'the demo sample exists');
    for (const file of complete) {
      const findings = await lintAll(file);
      assert.deepEqual(findings.map((f) => `${f.ruleId} ${f.pointer}: ${f.message}`), [], path.relative(REPO_ROOT, file));
    }
  });

  for (const name of brokenSamples) {
    it(`samples/broken/${name} trips exactly the rules its header names`, async () => {
      const file = path.join(brokenDir, name);
      const fired = [...new Set((await lintAll(file)).map((f) => f.ruleId))].sort();
      assert.deepEqual(fired, declaredTrips(file));
    });
  }

  it('makes every rule fire on at least one sample', async () => {
    const fired = new Set<string>();
    for (const name of brokenSamples) for (const f of await lintAll(path.join(brokenDir, name))) fired.add(f.ruleId);
    assert.deepEqual(ruleFiles.filter((id) => !fired.has(id)), []);
  });
});
