import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const DEMO = path.join(ROOT, 'dist', 'src', 'demo', 'run.js');

describe('npm run demo', function () {
  this.timeout(120_000);

  it('replays the article case against the generated guard and client and ends with effects: 1', async () => {
    assert.ok(existsSync(DEMO), `${DEMO} is missing: npm test builds it first (npm run build)`);
    const tmp = mkdtempSync(path.join(os.tmpdir(), 'idemkit-demo-test-'));
    try {
      // Exactly what `npm run demo` runs; TMPDIR points at a directory we can check is left empty.
      const { stdout } = await promisify(execFile)(process.execPath, [DEMO], { cwd: ROOT, env: { ...process.env, TMPDIR: tmp } });
      const lines = stdout.trimEnd().split('\n');
      assert.equal(lines.at(-1), 'effects: 1');
      assert.match(stdout, /^lint {6}samples\/demo-requests\/openapi\.yaml: 0 errors/m);
      assert.match(stdout, /^generate {2}server guard \(express \+ sqlite\): \d+ files · typed client: \d+ files$/m);
      // The README's sample output says how many files each part has: a runtime file added since made it stale.
      const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
      const shown = /^generate {2}server guard .*$/m.exec(readme)?.[0];
      assert.ok(shown !== undefined, "the README's Quickstart shows the demo's generate line");
      assert.ok(lines.includes(shown), `README says "${shown}"; the demo printed "${lines.find((l) => l.startsWith('generate'))}"`);
      assert.match(stdout, /Idempotency-Key: demo-key-retry-2020-06-a7f1/);
      assert.match(stdout, /^ {2}req-51 {2}guard: reserved → completed demo-request-42 · the response is lost/m);
      assert.match(stdout, /^ {2}req-52 {2}guard: replay demo-request-42 · Idempotent-Replayed: true$/m);
      assert.match(stdout, /^ {2}result {2}completed · 201 · id demo-request-42 · replayed: true$/m);
      assert.match(stdout, /^ {2}req-53 {2}guard: mismatch/m);
      assert.match(stdout, /^ {2}result {2}rejected \(mismatch\) · 422 .* · not retried$/m);
      assert.deepEqual(readdirSync(tmp), [], 'the demo removes its temporary directory');
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});
