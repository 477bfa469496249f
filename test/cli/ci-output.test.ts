import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { runCli } from '../helpers/io.js';

/** A 3.0 document whose one POST (operationId `name`) has `contract` (YAML flow text) as its x-idempotency. */
function spec(contract: string, name = 'a'): string {
  return `openapi: 3.0.3\ninfo: {title: refs, version: '1'}\npaths:\n  /${name}:\n    post:\n      operationId: ${name}\n      responses:\n        '201': {description: ok}\n      x-idempotency: ${contract}\n`;
}

/** A contract with findings, one of them `ttl-missing` (which `withTtl` fixes without adding any). */
const noTtl =
  '{scope: [principal], fingerprint: {include: all}, lease: PT30S, retry: {deadline: PT30S, maxAttempts: 4}, effect: {owner: a, external: false}, unknownOutcome: surface, responses: {replay: {header: Idempotent-Replayed}, inProgress: {status: 409}, mismatch: {status: 422}, missingKey: {status: 400}, invalidKey: {status: 400}, abandoned: {status: 409}, storeUnavailable: {status: 503}}}';
const withTtl = noTtl.replace('lease: PT30S, ', 'lease: PT30S, ttl: P1D, ');

/** GitHub Actions runs a log line that starts with `::` after blanks as a workflow command. */
const COMMAND_LINE = /^\s*::/;

function commandLines(text: string): string[] {
  return text.split(/\r\n?|\n/).filter((line) => COMMAND_LINE.test(line));
}

describe('idemkit lint in CI', () => {
  let dir: string;
  beforeEach(() => {
    // Real path: SARIF names files outside the repository by their absolute URI.
    dir = realpathSync(mkdtempSync(path.join(tmpdir(), 'idemkit-ci-')));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('keeps a finding on document defaults known to the baseline, and its SARIF fingerprint, when an operation is added', async () => {
    // A review's: on GitHub's spec one operation added made `key-header-undeclared` on the document defaults (392
    // operations) new — exit 1, its old entry stale — and gave it another SARIF fingerprint (a new alert).
    const ops = (names: string[]) => names.map((n) => `  /${n}:\n    post:\n      operationId: ${n}\n      responses: {'201': {description: ok}}\n      x-idempotency: true\n`).join('');
    const doc = (names: string[]) => `openapi: 3.0.3\ninfo: {title: t, version: '1'}\nx-idempotency:\n  key: {header: Idempotency-Key}\n  ttl: P1D\npaths:\n${ops(names)}`;
    const fingerprint = async () => {
      const sarif = JSON.parse((await runCli(['lint', 'api.yaml', '-f', 'sarif'], dir)).out);
      const result = sarif.runs[0].results.find((r: { ruleId: string }) => r.ruleId === 'key-header-undeclared');
      return JSON.stringify(result.partialFingerprints);
    };
    writeFileSync(path.join(dir, 'api.yaml'), doc(['a', 'b']));
    assert.equal((await runCli(['lint', 'api.yaml', '--write-baseline', 'base.json'], dir)).code, 0);
    const before = await fingerprint();
    writeFileSync(path.join(dir, 'api.yaml'), doc(['a', 'b', 'c']));
    const result = await runCli(['lint', 'api.yaml', '--baseline', 'base.json', '-f', 'json'], dir);
    const report = JSON.parse(result.out);
    // New: the added operation's own findings, and the shared one for it alone; nothing stale.
    assert.deepEqual(report.findings.filter((f: { ruleId: string }) => f.ruleId === 'key-header-undeclared').map((f: { operations: string[] }) => f.operations), [['c']]);
    assert.deepEqual([...new Set(report.findings.flatMap((f: { operations: string[] }) => f.operations))], ['c']);
    assert.deepEqual(report.baseline.stale, []);
    assert.equal(await fingerprint(), before);
    // An operation removed: known, nothing new.
    writeFileSync(path.join(dir, 'api.yaml'), doc(['a']));
    const fewer = await runCli(['lint', 'api.yaml', '--baseline', 'base.json', '-f', 'json'], dir);
    assert.deepEqual(JSON.parse(fewer.out).findings, []);
    assert.equal(fewer.code, 0);
  });

  it('names a few of the operations sharing a finding in each JUnit case and markdown card, not all of them', async () => {
    // A review's: a finding on GitHub's document defaults listed 392 operations in each of their cases: 30 MB reports.
    const names = Array.from({ length: 40 }, (_, i) => `op${i}`);
    const ops = names.map((n) => `  /${n}:\n    post:\n      operationId: ${n}\n      responses: {'201': {description: ok}}\n      x-idempotency: true\n`).join('');
    writeFileSync(path.join(dir, 'api.yaml'), `openapi: 3.0.3\ninfo: {title: t, version: '1'}\nx-idempotency:\n  key: {header: Idempotency-Key}\n  ttl: P1D\npaths:\n${ops}`);
    const junit = (await runCli(['lint', 'api.yaml', '-f', 'junit'], dir)).out;
    const also = [...junit.matchAll(/key-header-undeclared: [^\n]*\[also ([^\]]*)\]/g)].map((m) => m[1]!);
    assert.equal(also.length, 40);
    for (const list of also) assert.match(list, /^(?:[^;]+; ){5}… and 34 more$/);
    const markdown = (await runCli(['lint', 'api.yaml', '-f', 'markdown'], dir)).out;
    const cards = markdown.split('\n').filter((line) => line.includes('key-header-undeclared') && line.includes(' also '));
    assert.equal(cards.length, 40);
    for (const line of cards) assert.match(line, /… and 34 more:/);
    // The JSON report still names them all.
    const json = JSON.parse((await runCli(['lint', 'api.yaml', '-f', 'json'], dir)).out);
    assert.equal(json.findings.find((f: { ruleId: string }) => f.ruleId === 'key-header-undeclared').operations.length, 40);
  });

  it('prints no bidirectional control of an operationId raw, in any text format', async () => {
    // A review's: U+202E in an operationId reversed the rest of a markdown or JUnit report's line where it was shown.
    const name = 'pay\u202eyalp\u2066x\u2069';
    writeFileSync(path.join(dir, 'api.json'), JSON.stringify({ openapi: '3.1.0', info: { title: 't', version: '1' }, paths: { '/p': { post: { operationId: name, responses: { 201: { description: 'ok' } }, 'x-idempotency': { ttl: 'P1D' } } } } }));
    for (const format of ['stylish', 'junit', 'markdown', 'github']) {
      const result = await runCli(['lint', 'api.json', '-f', format], dir);
      assert.equal(result.code, 1, format);
      assert.doesNotMatch(result.out + result.err, /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/, format);
      assert.match(result.out, /\\{1,2}u202e/, format);
    }
  });

  describe('a file or key named like a workflow command', () => {
    const hostile = '::set-output name=passed::true';
    const ref = './%3A%3Aset-output%20name%3Dpassed%3A%3Atrue#/C';

    it('starts no line of any format, and the file is still named (./::…)', async () => {
      writeFileSync(path.join(dir, 'api.yaml'), spec(`{$ref: '${ref}'}`));
      writeFileSync(path.join(dir, hostile), 'C: {ttl: P1D}\n');
      // And a key of the entry document holding a line break then a command, quoted by contract-invalid.
      writeFileSync(
        path.join(dir, 'keys.json'),
        JSON.stringify({ openapi: '3.1.0', info: { title: 't', version: '1' }, paths: { '/k': { post: { operationId: 'k', responses: { 201: { description: 'ok' } }, 'x-idempotency': { 'x\n::stop-commands::tok': 1, ttl: 'P1D' } } } } }),
      );
      for (const format of ['stylish', 'json', 'sarif', 'junit', 'markdown']) {
        const result = await runCli(['lint', 'api.yaml', 'keys.json', '-f', format], dir);
        assert.equal(result.code, 1, format);
        assert.deepEqual(commandLines(result.out + result.err), [], format);
      }
      const stylish = await runCli(['lint', 'api.yaml'], dir);
      assert.equal(stylish.out.split('\n')[0], `./${hostile}`);
      // The github format's lines are its own commands, the file a property (`:` escaped).
      const github = await runCli(['lint', 'api.yaml', 'keys.json', '-f', 'github'], dir);
      for (const line of github.out.trimEnd().split('\n')) assert.match(line, /^::(error|warning|notice) file=[^:]*,line=\d+,col=\d+,title=[^:]*::/);
    });

    it('starts no error line when the file a $ref reached cannot be parsed', async () => {
      writeFileSync(path.join(dir, 'api.yaml'), spec(`{$ref: '${ref}'}`));
      writeFileSync(path.join(dir, hostile), 'C:\n  ttl: "P1D\n');
      const result = await runCli(['lint', 'api.yaml'], dir);
      assert.equal(result.code, 2);
      assert.deepEqual(commandLines(result.err), []);
      assert.ok(result.err.startsWith(`./${hostile}:2:8: invalid YAML`), result.err);
    });
  });

  describe('paths relative to the repository root, as code scanning reads them', () => {
    interface Sarif {
      runs: {
        originalUriBaseIds: Record<string, { uri: string }>;
        results: { locations: { physicalLocation: { artifactLocation: { uri: string; uriBaseId?: string } } }[]; partialFingerprints: Record<string, string> }[];
        invocations?: { toolExecutionNotifications: { locations: { physicalLocation: { artifactLocation: { uri: string; uriBaseId?: string } } }[] }[] }[];
      }[];
    }
    const sarif = async (argv: string[], cwd: string): Promise<Sarif> => JSON.parse((await runCli(['lint', ...argv, '-f', 'sarif'], cwd)).out) as Sarif;

    it('a step run in services/api names services/api/openapi.yaml, with the fingerprints of a run from the root', async () => {
      const repo = path.join(dir, 'repo');
      const api = path.join(repo, 'services', 'api');
      mkdirSync(path.join(repo, '.git'), { recursive: true });
      mkdirSync(api, { recursive: true });
      writeFileSync(path.join(api, 'openapi.yaml'), spec('{ttl: P1D}'));
      const inApi = await sarif(['openapi.yaml'], api);
      const atRoot = await sarif(['services/api/openapi.yaml'], repo);
      const run = inApi.runs[0]!;
      assert.ok(run.results.length > 0);
      assert.deepEqual(
        new Set(run.results.map((result) => JSON.stringify(result.locations[0]!.physicalLocation.artifactLocation))),
        new Set([JSON.stringify({ uri: 'services/api/openapi.yaml', uriBaseId: '%SRCROOT%' })]),
      );
      assert.equal(run.originalUriBaseIds['%SRCROOT%']!.uri, pathToFileURL(`${repo}/`).href);
      assert.deepEqual(
        run.results.map((result) => result.partialFingerprints),
        atRoot.runs[0]!.results.map((result) => result.partialFingerprints),
      );
      const github = (await runCli(['lint', 'openapi.yaml', '-f', 'github'], api)).out;
      assert.match(github, /^::error file=services\/api\/openapi\.yaml,line=/);
    });

    it('a file outside the repository: its absolute file: URI in SARIF (results and load failures alike), its absolute path in github', async () => {
      const repo = path.join(dir, 'repo');
      const api = path.join(repo, 'services', 'api');
      mkdirSync(path.join(repo, '.git'), { recursive: true });
      mkdirSync(api, { recursive: true });
      mkdirSync(path.join(dir, 'elsewhere'));
      const outside = path.join(dir, 'elsewhere', 'api.yaml');
      const broken = path.join(dir, 'elsewhere', 'broken.yaml');
      writeFileSync(outside, spec('{ttl: P1D}'));
      writeFileSync(broken, 'openapi: 3.0.3\npaths: [\n');
      const log = await sarif(['../../../elsewhere/api.yaml', '../../../elsewhere/broken.yaml'], api);
      const run = log.runs[0]!;
      assert.deepEqual(new Set(run.results.map((result) => JSON.stringify(result.locations[0]!.physicalLocation.artifactLocation))), new Set([JSON.stringify({ uri: pathToFileURL(outside).href })]));
      assert.deepEqual(run.invocations![0]!.toolExecutionNotifications.map((notification) => notification.locations[0]!.physicalLocation.artifactLocation), [{ uri: pathToFileURL(broken).href }]);
      const github = (await runCli(['lint', '../../../elsewhere/api.yaml', '-f', 'github'], api)).out;
      assert.match(github, new RegExp(`^::error file=${outside.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/:/g, '%3A')},line=`));
    });

    it('outside a git work tree, paths stay relative to the working directory', async () => {
      // (The temporary directory is in no repository: its parents hold no .git.)
      mkdirSync(path.join(dir, 'api'));
      writeFileSync(path.join(dir, 'api', 'openapi.yaml'), spec('{ttl: P1D}'));
      const run = (await sarif(['openapi.yaml'], path.join(dir, 'api'))).runs[0]!;
      assert.equal(run.results[0]!.locations[0]!.physicalLocation.artifactLocation.uri, 'openapi.yaml');
      assert.equal(run.originalUriBaseIds['%SRCROOT%']!.uri, pathToFileURL(`${path.join(dir, 'api')}/`).href);
    });
  });

  describe('a baseline that holds more files than the run lints', () => {
    it('lists as stale only entries of the files linted (a pre-commit hook lints the staged ones)', async () => {
      writeFileSync(path.join(dir, 'a.yaml'), spec(noTtl, 'a'));
      writeFileSync(path.join(dir, 'c.yaml'), spec(noTtl, 'c'));
      const written = await runCli(['lint', 'a.yaml', 'c.yaml', '--write-baseline', 'b.json'], dir);
      assert.equal(written.code, 0, written.err);
      const entries = (JSON.parse(readFileSync(path.join(dir, 'b.json'), 'utf8')) as { entries: { file: string }[] }).entries;
      assert.deepEqual(new Set(entries.map((entry) => entry.file)), new Set(['a.yaml', 'c.yaml']));

      const onlyA = await runCli(['lint', 'a.yaml', '--baseline', 'b.json'], dir);
      assert.deepEqual(onlyA, { code: 0, out: `baseline b.json: ${entries.filter((entry) => entry.file === 'a.yaml').length} known findings hidden\n`, err: '' });
      const json = JSON.parse((await runCli(['lint', 'a.yaml', '--baseline', 'b.json', '-f', 'json'], dir)).out) as { baseline: { stale: unknown[] } };
      assert.deepEqual(json.baseline.stale, []);

      // An entry of a file linted still goes stale when its finding is fixed.
      writeFileSync(path.join(dir, 'a.yaml'), spec(withTtl, 'a'));
      const fixed = await runCli(['lint', 'a.yaml', '--baseline', 'b.json'], dir);
      assert.equal(fixed.code, 0);
      assert.match(fixed.out, /stale entr/);
      assert.match(fixed.out, /^1 stale entry .*\n {2}a\.yaml {2}a {2}\/x-idempotency {2}ttl-missing$/m);
      assert.doesNotMatch(fixed.out, /c\.yaml/);
    });
  });
});
