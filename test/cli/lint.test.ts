import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { main } from '../../src/cli/main.js';
import { bufferIo } from '../helpers/io.js';
import { assertBuilt, root, runBin } from './spawn.js';

async function lint(...argv: string[]) {
  const io = bufferIo(root);
  const code = await main(['lint', ...argv], io);
  return { code, out: io.out, err: io.err };
}

/** Runs the built binary's `lint`; resolves with the exit code instead of rejecting on a non-zero one. */
function spawnLint(...argv: string[]) {
  return runBin(['lint', ...argv]);
}

describe('idemkit lint', () => {
  describe('in process', () => {
    it('passes the demo sample, YAML and JSON, with every rule', async () => {
      for (const file of ['samples/demo-requests/openapi.yaml', 'samples/demo-requests/openapi.json', 'samples/external-refs/openapi.yaml']) {
        const result = await lint(file);
        assert.equal(result.code, 0, `${file}:\n${result.out}${result.err}`);
        assert.equal(result.out, '');
        assert.equal(result.err, '');
      }
    });

    it('exits 1 and prints ESLint-style findings with paths relative to the working directory', async () => {
      const result = await lint('test/fixtures/parser/invalid-contract.yaml');
      assert.equal(result.code, 1);
      const lines = result.out.split('\n');
      assert.equal(lines[0], 'test/fixtures/parser/invalid-contract.yaml');
      assert.match(result.out, /^ {2}11:9 +error +unknown field 'tll' in x-idempotency .* contract-invalid$/m);
      assert.match(result.out, /^ {2}4:3 +error +x-idempotency\.ttl is "one day".*\(in a, b\) +contract-invalid$/m);
      assert.match(result.out, /^✖ \d+ problems \(\d+ errors?, \d+ warnings?, \d+ info\)$/m);
    });

    it('names the operation of a finding whose node a YAML alias brought in from before the operation', async () => {
      const result = await lint('test/fixtures/parser/alias-merge-contract.yaml');
      assert.equal(result.code, 1);
      // `lease` is written at the anchor (line 12) and reaches createRefund through `<<: *contract`.
      assert.match(result.out, /^ {2}12:3 +error +`lease` PT30S is longer than `ttl` PT1S: .* \(in createRefund\) +lease-exceeds-ttl$/m);
      // Written inside createRefund itself: the line says which operation it is.
      assert.match(result.out, /^ {2}47:9 +error +unknown field 'tll' in x-idempotency \(allowed: [^)]*\) +contract-invalid$/m);
      // The ttl is short of the retry budget too, said in the same run (it used to wait for the lease to be fixed).
      assert.match(result.out, /^ {2}46:9 +error +`ttl` PT1S is shorter than the retry budget PT30S alone: .* +ttl-below-retry-budget$/m);
      assert.match(result.out, /^✖ 3 problems \(3 errors, 0 warnings, 0 info\)$/m);
    });

    it('reports a fault in an external shared contract once, in that file, naming both operations', async () => {
      const result = await lint('test/fixtures/parser/external/broken-contract.yaml', '--format', 'json');
      assert.equal(result.code, 1);
      const findings = (JSON.parse(result.out) as { findings: { ruleId: string; file: string; line: number; column: number; operations: string[] }[] }).findings;
      const invalid = findings.filter((finding) => finding.ruleId === 'contract-invalid');
      assert.deepEqual(invalid.map(({ file, line, column, operations }) => ({ file, line, column, operations })), [
        { file: 'test/fixtures/parser/external/components/contracts.yaml', line: 4, column: 3, operations: ['a', 'b'] },
      ]);
    });

    it('names the operations of each finding in every machine format (json, sarif, github, junit, markdown)', async () => {
      const file = 'test/fixtures/parser/external/broken-contract.yaml';
      const json = JSON.parse((await lint(file, '--format', 'json')).out) as { findings: { ruleId: string; operations: string[]; operationLabels: string[] }[] };
      const invalid = json.findings.find((finding) => finding.ruleId === 'contract-invalid')!;
      assert.deepEqual(invalid.operationLabels, ['POST /a (a)', 'POST /b (b)']);
      assert.ok(json.findings.every((finding) => finding.operationLabels.length === finding.operations.length));
      const sarif = JSON.parse((await lint(file, '--format', 'sarif')).out) as { runs: { results: { ruleId: string; message: { text: string }; properties: { operationLabels?: string[] } }[] }[] };
      const result = sarif.runs[0]!.results.find((r) => r.ruleId === 'contract-invalid')!;
      assert.deepEqual(result.properties.operationLabels, ['POST /a (a)', 'POST /b (b)']);
      assert.match(result.message.text, /\[POST \/a \(a\); POST \/b \(b\)\]$/);
      assert.match((await lint(file, '--format', 'github')).out, /title=contract-invalid::.*\[POST \/a \(a\); POST \/b \(b\)\] \(contract-invalid\)$/m);
      const junit = (await lint(file, '--format', 'junit')).out;
      assert.match(junit, /<testcase classname="[^"]*" name="POST \/b \(b\)">\n\s*<failure message="POST \/b \(b\): /);
      assert.match((await lint(file, '--format', 'markdown')).out, /`contract-invalid` `test\/fixtures\/parser\/external\/components\/contracts\.yaml:4:3` also `POST \/b \(b\)`:/);
    });

    it('reports a file named twice (a symbolic link on the command line, or two $ref spellings) once, under the first name', async () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'idemkit-lint-links-'));
      try {
        mkdirSync(path.join(dir, 'sub dir'));
        symlinkSync('sub dir', path.join(dir, 'sublink'));
        writeFileSync(path.join(dir, 'sub dir', 'contracts.yaml'), 'base:\n  key: {header: Idempotency-Key}\n  scope: [global]\n  ttl: P1D\n  lease: P2D\n');
        const operation = (id: string, ref: string) =>
          [`  /${id}:`, '    post:', `      operationId: ${id}`, '      parameters: [{name: Idempotency-Key, in: header, required: true, schema: {type: string}}]',
            "      responses: {'201': {description: ok}}", `      x-idempotency: {$ref: '${ref}#/base'}`];
        writeFileSync(
          path.join(dir, 'main.yaml'),
          ['openapi: 3.0.3', "info: {title: t, version: '1'}", 'paths:', ...operation('a', 'sub%20dir/contracts.yaml'), ...operation('b', 'sublink/contracts.yaml'), ''].join('\n'),
        );
        symlinkSync('main.yaml', path.join(dir, 'link.yaml'));
        for (const argv of [['main.yaml'], ['main.yaml', 'link.yaml'], ['main.yaml', './main.yaml']]) {
          const io = bufferIo(dir);
          assert.equal(await main(['lint', ...argv], io), 1, io.err);
          const leases = io.out.split('\n').filter((line) => line.endsWith('lease-exceeds-ttl'));
          assert.equal(leases.length, 1, `${argv.join(' ')}:\n${io.out}`);
          assert.match(leases[0]!, /\(in a, b\) +lease-exceeds-ttl$/);
          assert.match(io.out, /^sub dir\/contracts\.yaml$/m);
          assert.doesNotMatch(io.out, /sublink|link\.yaml/);
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('counts a lone CR as a line break, as editors do: a stray one, and a classic Mac file', async () => {
      for (const file of ['test/fixtures/parser/lone-cr/stray-cr.yaml', 'test/fixtures/parser/lone-cr/cr-only.yaml']) {
        const result = await lint(file);
        assert.equal(result.code, 1);
        assert.match(result.out, /^ {2}9:9 +error +x-idempotency\.ttl is "one day"; .* contract-invalid$/m, file);
        assert.match(result.out, /^ {2}8:15 +error .* key-header-undeclared$/m, file);
      }
    });

    it('warns at an x-idempotency written where it is not read, instead of ignoring it silently', async () => {
      const result = await lint('test/fixtures/parser/misplaced-contract.yaml', '--fail-on', 'warn');
      assert.equal(result.code, 1);
      assert.match(result.out, /^ {2}7:5 +warning +x-idempotency on a path item is not read — move it under each method \(post:, patch:, …\), or to the document root for defaults +document-invalid$/m);
      assert.equal(result.out.match(/document-invalid$/gm)?.length, 5);
    });

    it('prints machine-readable JSON with --format json', async () => {
      const result = await lint('test/fixtures/parser/invalid-contract.yaml', '--format', 'json');
      assert.equal(result.code, 1);
      const report = JSON.parse(result.out) as {
        files: string[];
        findings: { ruleId: string; file: string; line: number; column: number; pointer: string }[];
        summary: { error: number };
      };
      assert.deepEqual(report.files, ['test/fixtures/parser/invalid-contract.yaml']);
      const tll = report.findings.find((finding) => finding.pointer.endsWith('/tll'));
      assert.deepEqual(tll && { file: tll.file, line: tll.line, column: tll.column, ruleId: tll.ruleId }, {
        file: 'test/fixtures/parser/invalid-contract.yaml',
        line: 11,
        column: 9,
        ruleId: 'contract-invalid',
      });
      assert.equal(report.summary.error, report.findings.filter((finding) => (finding as { severity?: string }).severity === 'error').length);
    });

    it('--fail-on decides which severities fail the run', async () => {
      const file = 'test/fixtures/parser/warn-only.yaml';
      const lenient = await lint(file);
      assert.equal(lenient.code, 0, lenient.out);
      assert.match(lenient.out, /warning +the document has no 'info' object +document-invalid/);
      assert.equal((await lint(file, '--fail-on', 'warn')).code, 1);
      assert.equal((await lint(file, '--fail-on', 'info')).code, 1);
      assert.equal((await lint('test/fixtures/parser/invalid-contract.yaml', '--fail-on', 'error')).code, 1);
    });

    it('lints several files in one run, sorted by file whatever the argument order', async () => {
      const a = await lint('test/fixtures/parser/warn-only.yaml', 'test/fixtures/parser/invalid-contract.yaml', '--format', 'json');
      const b = await lint('test/fixtures/parser/invalid-contract.yaml', 'test/fixtures/parser/warn-only.yaml', '--format', 'json');
      assert.equal(a.code, 1);
      const files = (out: string) => (JSON.parse(out) as { findings: { file: string }[] }).findings.map((finding) => finding.file);
      assert.deepEqual(files(a.out), files(b.out));
      assert.deepEqual([...new Set(files(a.out))], ['test/fixtures/parser/invalid-contract.yaml', 'test/fixtures/parser/warn-only.yaml']);
    });

    it('exits 2 on a bad file but still reports the good ones', async () => {
      const result = await lint('test/fixtures/parser/invalid-contract.yaml', 'test/fixtures/parser/bad/syntax.json');
      assert.equal(result.code, 2);
      assert.match(result.out, /contract-invalid/);
      assert.match(result.err, /^test\/fixtures\/parser\/bad\/syntax\.json:3:\d+: invalid JSON: .* — fix the syntax/);
    });

    it('keeps a bad document to one line even with --verbose', async () => {
      const result = await lint('test/fixtures/parser/bad/missing-ref-pointer.yaml', '--verbose');
      assert.equal(result.code, 2);
      assert.equal(result.err.trimEnd().split('\n').length, 1, result.err);
      assert.match(result.err, /^test\/fixtures\/parser\/bad\/missing-ref-pointer\.yaml:9:11: /);
    });

    it('documents its options in --help', async () => {
      const result = await lint('--help');
      assert.equal(result.code, 0);
      assert.match(result.out, /--format[\s\S]*"stylish", "json"/);
      assert.match(result.out, /--fail-on[\s\S]*"info", "warn", "error"/);
      assert.match(result.out, /files +OpenAPI documents to lint +\[array\] \[required\]\n/, 'a required list shows no default');
    });

    it('exits 2 on usage errors: no file, an unknown format', async () => {
      const none = await lint();
      assert.equal(none.code, 2);
      assert.equal(none.err, 'name the OpenAPI documents to lint (YAML or JSON)\n');
      const format = await lint('samples/demo-requests/openapi.yaml', '--format', 'xml');
      assert.equal(format.code, 2);
      assert.match(format.err, /format/);
      assert.doesNotMatch(format.err, /internal error/);
    });
  });

  describe('the built binary', () => {
    before(assertBuilt);

    it('exits 0 on the demo sample', async () => {
      const result = await spawnLint('samples/demo-requests/openapi.yaml');
      assert.deepEqual(result, { code: 0, stdout: '', stderr: '' });
    });

    const badInputs: [string, RegExp][] = [
      ['test/fixtures/parser/bad/does-not-exist.yaml', /^test\/fixtures\/parser\/bad\/does-not-exist\.yaml:1:1: file not found — check the path/],
      ['test/fixtures/parser/bad/empty.yaml', /^test\/fixtures\/parser\/bad\/empty\.yaml:1:1: the file is empty — /],
      ['test/fixtures/parser/bad/truncated.yaml', /^test\/fixtures\/parser\/bad\/truncated\.yaml:3:10: invalid YAML: Missing closing "quote — close the quote/],
      ['test/fixtures/parser/bad/syntax.json', /^test\/fixtures\/parser\/bad\/syntax\.json:3:26: invalid JSON: .* — fix the syntax/],
      ['test/fixtures/parser/bad/truncated.json', /^test\/fixtures\/parser\/bad\/truncated\.json:3:\d+: invalid JSON: .* — fix the syntax/],
      // Node 20 gives no position (nor one line) for an unexpected token: at the token, without V8's excerpt.
      ['test/fixtures/parser/bad/unquoted-value.json', /^test\/fixtures\/parser\/bad\/unquoted-value\.json:5:46: invalid JSON: Unexpected token 'P' — fix the syntax here \(a missing comma, quote or bracket\?\)\n$/],
      ['test/fixtures/parser/bad/utf16.yaml', /^test\/fixtures\/parser\/bad\/utf16\.yaml:1:1: the file is UTF-16 — save it as UTF-8\n$/],
      ['test/fixtures/parser/bad/not-openapi.yaml', /^test\/fixtures\/parser\/bad\/not-openapi\.yaml:1:1: not an OpenAPI document: .* — add `openapi: 3.1.0`/],
      ['test/fixtures/parser/bad/missing-ref-file.yaml', /^test\/fixtures\/parser\/bad\/missing-ref-file\.yaml:10:11: \$ref '\.\/responses\.yaml#\/Created' points at a missing file '\.\/responses\.yaml' — fix the path/],
      ['test/fixtures/parser/bad/missing-ref-pointer.yaml', /^test\/fixtures\/parser\/bad\/missing-ref-pointer\.yaml:9:11: \$ref '#\/components\/parameters\/IdempotencyKey' points at nothing: .* — fix the pointer/],
      ['test/fixtures/parser/bad/unsupported-version.yaml', /^test\/fixtures\/parser\/bad\/unsupported-version\.yaml:1:1: unsupported openapi version "4\.0\.0" — use 3\.0\.x or 3\.1\.x/],
    ];
    for (const [file, expected] of badInputs) {
      it(`exits 2 with one line and no stack trace: ${path.basename(file)}`, async () => {
        const result = await spawnLint(file);
        assert.equal(result.code, 2, result.stderr);
        assert.equal(result.stdout, '');
        assert.match(result.stderr, expected);
        assert.equal(result.stderr.trimEnd().split('\n').length, 1, result.stderr);
        assert.doesNotMatch(result.stderr, /\bat .*\.(js|ts):\d+/);
      });
    }
  });
});
