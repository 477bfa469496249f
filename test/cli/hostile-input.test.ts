/**
 * What a review threw at the CLI, each once a defect: an output named like an input, options given twice, a device
 * as a document, bytes that are not UTF-8, `--out` through a link, at a wrong directory, or where the file system
 * refuses, and a `$ref` out of the repository. Each ends in exit 2 with a one-line reason, and nothing of the
 * user's is changed.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runCli } from '../helpers/io.js';
import { requireBinary } from '../helpers/servers.js';

const demo = readFileSync(fileURLToPath(new URL('../../samples/demo-requests/openapi.yaml', import.meta.url)), 'utf8');
// The demo with one fault, so a lint prints a report and exits 1.
const faulty = demo.replace(/^(\s*)scope: \[principal\]$/m, '$1scope: [global]');

describe('idemkit on hostile input: exit 2, one line, nothing of the user changed', () => {
  let dir: string;
  const run = (...argv: string[]) => runCli(argv, dir);
  const file = (name: string) => path.join(dir, name);
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'idemkit-hostile-'));
    assert.notEqual(faulty, demo);
    writeFileSync(file('api.yaml'), faulty);
    writeFileSync(file('ok.yaml'), demo);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  describe('lint writes nothing over what it reads', () => {
    it('refuses -o and --write-baseline naming the spec (also through a link), a $ref target, or each other; the spec stays byte for byte', async () => {
      writeFileSync(file('paths.yaml'), 'post:\n  responses:\n    "201": {description: created}\n');
      writeFileSync(file('refs.yaml'), 'openapi: 3.0.3\ninfo: {title: t, version: "1"}\npaths:\n  /x:\n    $ref: "./paths.yaml"\n');
      symlinkSync('api.yaml', file('link.yaml'));
      // A link to a baseline not written yet: the report written through it would be the baseline (left empty).
      symlinkSync('bl.json', file('rep.txt'));
      const cases: [string[], RegExp][] = [
        [['lint', 'api.yaml', '--write-baseline', 'bl.json', '-o', 'rep.txt'], /^--output and --write-baseline name the same file \(bl\.json\) — give each its own$/],
        [['lint', 'api.yaml', '--write-baseline', 'rep.txt', '-o', 'bl.json'], /^--output and --write-baseline name the same file \(rep\.txt\) — give each its own$/],
        [['lint', 'api.yaml', '-o', 'api.yaml'], /^--output api\.yaml is a file this run reads — writing there would replace it; name another file$/],
        [['lint', 'api.yaml', '-o', 'link.yaml'], /^--output link\.yaml is the file api\.yaml, which this run reads/],
        [['lint', 'api.yaml', '--write-baseline', 'api.yaml'], /^--write-baseline api\.yaml is a file this run reads/],
        [['lint', 'api.yaml', '--write-baseline', 'b.json', '-o', 'b.json'], /^--output and --write-baseline name the same file \(b\.json\) — give each its own$/],
        [['lint', 'refs.yaml', '-o', 'paths.yaml'], /^--output paths\.yaml is a file this run reads/],
      ];
      const before = new Map(['api.yaml', 'paths.yaml', 'refs.yaml'].map((name) => [name, readFileSync(file(name))]));
      for (const [argv, message] of cases) {
        const result = await run(...argv);
        assert.equal(result.code, 2, argv.join(' '));
        assert.match(result.err.trimEnd(), message, argv.join(' '));
        assert.equal(result.err.trimEnd().split('\n').length, 1, result.err);
      }
      for (const [name, bytes] of before) assert.deepEqual(readFileSync(file(name)), bytes, name);
      assert.ok(!existsSync(file('b.json')));
      assert.ok(!existsSync(file('bl.json')));
      assert.ok(lstatSync(file('link.yaml')).isSymbolicLink());
    });
  });

  describe('a YAML alias bomb (16 levels of 4 aliases: 1.3 KB of text, 4^16 paths)', () => {
    const bomb = (): string => {
      const levels = 'abcdefghijklmnop'.split('');
      const lines = ['openapi: 3.0.3', 'info: {title: t, version: "1"}', 'x-l:', '  a: &a {type: object, properties: {p0: {type: string}, p1: {type: string}}}'];
      for (let i = 1; i < levels.length; i++) {
        const [name, inner] = [levels[i]!, levels[i - 1]!];
        lines.push(`  ${name}: &${name} {type: object, properties: {q0: *${inner}, q1: *${inner}, q2: *${inner}, q3: *${inner}}}`);
      }
      lines.push('paths:', '  /x:', '    post:', '      operationId: x', '      requestBody: {content: {application/json: {schema: *p}}}', '      responses: {"201": {description: ok}}');
      return `${lines.join('\n')}\n`;
    };

    it('lint walks each shared node once and answers (it ran past 120 s); generate client refuses it with where and the fix', async () => {
      writeFileSync(file('bomb.yaml'), bomb());
      const linted = await run('lint', 'bomb.yaml');
      assert.ok(linted.code === 0 || linted.code === 1, linted.err);
      const generated = await run('generate', 'client', 'bomb.yaml', '--out', 'client');
      assert.equal(generated.code, 2);
      assert.match(generated.err.trimEnd(), /^bomb\.yaml:\d+:\d+: the schemas are written out more than 100,000 times over through YAML aliases .* give the aliased schemas names under components\/schemas and \$ref them$/);
      assert.ok(!existsSync(file('client')));
    });
  });

  describe('an option given twice', () => {
    it('is refused, naming it: --fail-on twice no longer lints with nothing failing, -o twice writes no file "a,b"', async () => {
      const once = await run('lint', 'api.yaml', '--fail-on', 'error');
      assert.equal(once.code, 1);
      for (const [argv, message] of [
        [['lint', 'api.yaml', '--fail-on', 'error', '--fail-on', 'error'], '--fail-on was given more than once (error, error) — give it once'],
        [['lint', 'api.yaml', '-o', 'r1.txt', '-o', 'r2.txt'], '--output was given more than once (r1.txt, r2.txt) — give it once'],
        [['lint', 'api.yaml', '-f', 'json', '--format', 'sarif'], '--format was given more than once (json, sarif) — give it once'],
        [['generate', 'server', 'api.yaml', '--out', 'o1', '--out', 'o2'], '--out was given more than once (o1, o2) — give it once'],
      ] as const) {
        const result = await run(...argv);
        assert.deepEqual({ code: result.code, err: result.err, out: result.out }, { code: 2, err: `${message}\n`, out: '' }, argv.join(' '));
      }
      assert.deepEqual(readdirSync(dir).sort(), ['api.yaml', 'ok.yaml']);
      // The documents are a list: naming one twice lints it once.
      assert.equal((await run('lint', 'api.yaml', 'api.yaml')).code, 1);
    });
  });

  describe('documents that are no UTF-8 text', () => {
    it('a device that never ends (/dev/zero), as the document or a $ref target, is refused at its first bytes', async function () {
      if (process.platform === 'win32') this.skip();
      const direct = await run('lint', '/dev/zero');
      assert.equal(direct.code, 2);
      assert.equal(direct.err, '/dev/zero:1:1: the file is binary (it holds NUL bytes), not YAML or JSON text — name the OpenAPI document\n');
      writeFileSync(file('zeroref.yaml'), 'openapi: 3.0.3\ninfo: {title: t, version: "1"}\npaths:\n  /a:\n    post:\n      x-idempotency:\n        $ref: "/dev/zero"\n      responses: {"201": {description: ok}}\n');
      const viaRef = await run('lint', 'zeroref.yaml');
      assert.equal(viaRef.code, 2);
      // Refused before it is read at all, as a pipe is (a FIFO hung lint): a $ref names a file.
      assert.match(viaRef.err, /^zeroref\.yaml:7:9: \$ref '\/dev\/zero' names a pipe, socket or device, not a file — point the \$ref at a \.yaml or \.json file/);
    });

    it('bytes that are not UTF-8 are refused at the first of them (line and column), by lint, init --write and generate; the file stays as it was', async () => {
      // "café" in Latin-1 in the title: 0xE9 where UTF-8 would have two bytes.
      const text = Buffer.from(demo);
      const at = text.indexOf('\n', text.indexOf('title:'));
      const bytes = Buffer.concat([text.subarray(0, at), Buffer.from(' caf\xe9', 'latin1'), text.subarray(at)]);
      writeFileSync(file('latin1.yaml'), bytes);
      const line = text.subarray(0, at).toString('utf8').split('\n').length;
      const column = text.subarray(text.lastIndexOf('\n', at - 1) + 1, at).toString('utf8').length + ' caf'.length + 1;
      const expected = `latin1.yaml:${line}:${column}: byte 0xE9 is not UTF-8 (the file is in another encoding, such as Latin-1 or Windows-1252) — save it as UTF-8\n`;
      for (const argv of [['lint', 'latin1.yaml'], ['init', 'latin1.yaml', '--write'], ['generate', 'server', 'latin1.yaml', '--out', 'gen'], ['generate', 'client', 'latin1.yaml', '--out', 'gen']]) {
        const result = await run(...argv);
        assert.equal(result.code, 2, argv.join(' '));
        assert.equal(result.err, expected, argv.join(' '));
      }
      assert.deepEqual(readFileSync(file('latin1.yaml')), bytes);
      assert.ok(!existsSync(file('gen')));
      // In a file a $ref reached: said at the byte in that file, naming the $ref.
      writeFileSync(file('contract.yaml'), Buffer.concat([Buffer.from('key: {header: Idempotency-Key}\nlease: "caf'), Buffer.from([0xe9]), Buffer.from('"\n')]));
      writeFileSync(file('uses.yaml'), 'openapi: 3.0.3\ninfo: {title: t, version: "1"}\npaths:\n  /a:\n    post:\n      x-idempotency:\n        $ref: "./contract.yaml"\n      responses: {"201": {description: ok}}\n');
      const reached = await run('lint', 'uses.yaml');
      assert.equal(reached.code, 2);
      assert.equal(reached.err, "contract.yaml:2:12: byte 0xE9 is not UTF-8 (the file is in another encoding, such as Latin-1 or Windows-1252) — save it as UTF-8 (reached through $ref './contract.yaml' at uses.yaml:7:9)\n");
    });
  });

  describe('generate --out', () => {
    it('through a symbolic link replaces the directory it names, and the link stays; the directory keeps its mode, a new one gets the umask', async () => {
      mkdirSync(file('real'), { mode: 0o750 });
      symlinkSync('real', file('lnk'));
      for (let round = 0; round < 2; round += 1) {
        const result = await run('generate', 'server', 'ok.yaml', '--out', 'lnk');
        assert.equal(result.code, 0, result.err);
      }
      assert.ok(lstatSync(file('lnk')).isSymbolicLink());
      assert.ok(existsSync(file('real/guards.ts')));
      assert.equal(statSync(file('real')).mode & 0o777, 0o750);
      mkdirSync(file('probe'));
      assert.equal((await run('generate', 'server', 'ok.yaml', '--out', 'a/b/new')).code, 0);
      for (const made of ['a', 'a/b', 'a/b/new']) assert.equal(statSync(file(made)).mode & 0o777, statSync(file('probe')).mode & 0o777, made);
    });

    it('at a directory holding a FIFO or other files is refused at the first of them, without reading on', async function () {
      mkdirSync(file('out'));
      execFileSync(requireBinary(this, 'mkfifo'), [file('out/pipe')]);
      // Read whole, the FIFO would block the check forever (no writer); it is not a generated file, whatever it holds.
      const result = await run('generate', 'server', 'ok.yaml', '--out', 'out');
      assert.equal(result.code, 2);
      assert.match(result.err, /out holds files idemkit did not generate \(pipe\); choose an empty or generated-only directory for --out\n$/);
    });

    it('that is the current directory or holds it is refused; the directory is kept', async () => {
      mkdirSync(file('gen'));
      const here = await runCli(['generate', 'server', '../ok.yaml', '--out', '.'], file('gen'));
      assert.equal(here.code, 2);
      assert.match(here.err, /gen is the current directory, which generate would replace whole; name a subdirectory for --out\n$/);
      mkdirSync(file('gen/sub'));
      const above = await runCli(['generate', 'server', '../../ok.yaml', '--out', '..'], file('gen/sub'));
      assert.equal(above.code, 2);
      assert.match(above.err, /gen is a directory that holds the current directory/);
      assert.ok(existsSync(file('gen/sub')));
    });

    it('where the file system refuses says what and where, and leaves nothing; --check of a file says it is no directory', async () => {
      writeFileSync(file('afile'), 'mine\n');
      const under = await run('generate', 'server', 'ok.yaml', '--out', 'afile/sub');
      assert.equal(under.code, 2);
      assert.equal(under.err, 'cannot write --out afile/sub: a part of the path is a file, not a directory (EEXIST at afile) — nothing was written; fix it or choose another --out\n');
      const check = await run('generate', 'server', 'ok.yaml', '--out', 'afile', '--check');
      assert.equal(check.code, 2);
      assert.match(check.err, /afile exists and is not a directory; name the generated directory for --out\n$/);
      // Under it, --check does not list the files as missing: there is no output directory to compare.
      const checkUnder = await run('generate', 'server', 'ok.yaml', '--out', 'afile/sub', '--check');
      assert.equal(checkUnder.code, 2);
      assert.match(checkUnder.err, /afile \(in .*afile\/sub\) exists and is not a directory/);
      assert.equal(checkUnder.out, '');
      symlinkSync('nowhere', file('dangle'));
      const dangling = await run('generate', 'server', 'ok.yaml', '--out', 'dangle');
      assert.equal(dangling.code, 2);
      assert.match(dangling.err, /dangle is a symbolic link to nothing \(nowhere\); create the directory it names, or remove the link\n$/);
      assert.ok(lstatSync(file('dangle')).isSymbolicLink());
      // A link to nothing on the way to --out: mkdir fails with ENOENT, which was an internal error.
      const through = await run('generate', 'client', 'ok.yaml', '--out', 'dangle/client');
      assert.equal(through.code, 2);
      assert.equal(through.err, 'cannot write --out dangle/client: a part of the path is a link to nothing, or the file system makes no directories there (ENOENT at dangle) — nothing was written; fix it or choose another --out\n');
      assert.equal(readFileSync(file('afile'), 'utf8'), 'mine\n');
      assert.deepEqual(readdirSync(dir).sort(), ['afile', 'api.yaml', 'dangle', 'ok.yaml']);
    });
  });

  describe('a $ref out of the git repository', () => {
    it('is refused (a link out of it too), so that no report quotes a file of the machine; outside any repository refs are not confined', async () => {
      const repo = file('repo');
      mkdirSync(path.join(repo, '.git'), { recursive: true });
      mkdirSync(path.join(repo, 'api'));
      mkdirSync(path.join(repo, 'common'));
      writeFileSync(file('secret.yaml'), 'token: s3cr3t-value\n');
      writeFileSync(path.join(repo, 'common/contract.yaml'), 'key: {header: Idempotency-Key}\n');
      symlinkSync(file('secret.yaml'), path.join(repo, 'api/link.yaml'));
      const spec = (ref: string) =>
        `openapi: 3.0.3\ninfo: {title: t, version: "1"}\npaths:\n  /a:\n    post:\n      x-idempotency:\n        $ref: "${ref}"\n      responses: {"201": {description: ok}}\n`;
      for (const ref of ['../../secret.yaml', file('secret.yaml'), './link.yaml']) {
        writeFileSync(path.join(repo, 'api/openapi.yaml'), spec(ref));
        const result = await run('lint', 'repo/api/openapi.yaml', '-f', 'github');
        assert.equal(result.code, 2, ref);
        assert.equal(result.out, '', ref);
        assert.doesNotMatch(result.err, /s3cr3t/, ref);
        assert.match(result.err, /^repo\/api\/openapi\.yaml:7:9: \$ref '.*' leads out of the document's git repository \(.*repo\), and idemkit reads no file outside it/, ref);
      }
      // Inside the repository, a ref up and over is read, and so is one into a directory whose name starts with `..`.
      mkdirSync(path.join(repo, '..dots'));
      writeFileSync(path.join(repo, '..dots/contract.yaml'), 'key: {header: Idempotency-Key}\n');
      for (const ref of ['../common/contract.yaml', '../..dots/contract.yaml']) {
        writeFileSync(path.join(repo, 'api/openapi.yaml'), spec(ref));
        const inside = await run('lint', 'repo/api/openapi.yaml');
        assert.equal(inside.code, 1, `${ref}: ${inside.err}`);
      }
      // With no repository above, as before: a ref may lead anywhere (here, to a sibling directory).
      rmSync(path.join(repo, '.git'), { recursive: true });
      writeFileSync(path.join(repo, 'api/openapi.yaml'), spec('../../secret.yaml'));
      const unconfined = await run('lint', 'repo/api/openapi.yaml');
      assert.equal(unconfined.code, 1);
    });
  });

  describe('broken side files', () => {
    it('a baseline that is not JSON is named with its line and column; a config of aliases past the limit is a usage error, not an internal one', async () => {
      writeFileSync(file('baseline.json'), '{\n  "version": 1,\n  entries: []\n}\n');
      const baseline = await run('lint', 'api.yaml', '--baseline', 'baseline.json');
      assert.equal(baseline.code, 2);
      assert.match(baseline.err, /^baseline\.json:3:3: baseline file is not valid JSON: .* — regenerate it with --write-baseline\n$/);
      const bomb = ['a: &a ["x","x","x","x","x","x","x","x","x"]', ...Array.from({ length: 8 }, (_, i) => `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [${Array(9).fill(`*${String.fromCharCode(97 + i)}`).join(',')}]`), 'rules: {}'].join('\n');
      writeFileSync(file('bomb.yaml'), `${bomb}\n`);
      for (const argv of [['lint', 'api.yaml', '-c', 'bomb.yaml'], ['generate', 'server', 'api.yaml', '--out', 'gen', '-c', 'bomb.yaml']]) {
        const result = await run(...argv);
        assert.equal(result.code, 2, argv.join(' '));
        assert.doesNotMatch(result.err, /internal error/, argv.join(' '));
        assert.match(result.err, /^bomb\.yaml:1:1: config could not be read: .* — write the values out instead of through anchors and aliases\n$/, argv.join(' '));
      }
      assert.ok(!existsSync(file('gen')));
    });
  });

  describe('names that hold line breaks or terminal escapes', () => {
    it('generate and init print each message on one line: an operationId cannot start a GitHub Actions command or restyle the terminal', async () => {
      const hostile = 'createDemoRequest\n::error file=README.md,line=1::injected\n::stop-commands::pwn\n\u001b]0;TITLE\u0007\u001b[2J\r';
      // The sample without its defaults and with the operation's effect reach left out, so generate prints notes naming it.
      const spec = demo.replace('operationId: createDemoRequest', `operationId: ${JSON.stringify(hostile)}`);
      assert.notEqual(spec, demo);
      writeFileSync(file('hostile.yaml'), spec.replace(/^\s*external: false$/m, ''));
      // init finds the operation without a contract only when its x-idempotency is gone.
      writeFileSync(file('bare.yaml'), spec.replace(/\n {6}x-idempotency:\n(?: {8}.*\n)+/, '\n'));
      for (const argv of [['generate', 'server', 'hostile.yaml', '--out', 'gen'], ['generate', 'client', 'hostile.yaml', '--out', 'gen2'], ['init', 'bare.yaml']]) {
        const result = await run(...argv);
        const text = result.out + result.err;
        assert.ok(text.includes('injected'), `${argv.join(' ')} names the operation:\n${text}`);
        assert.doesNotMatch(text, /^::/m, argv.join(' '));
        // eslint-disable-next-line no-control-regex
        assert.doesNotMatch(text, /[\u0000-\u0009\u000b-\u001f\u007f]/, argv.join(' '));
      }
      // The block init would write keeps its layout: a tab-indented JSON file's tabs are tabs, not `\t`.
      writeFileSync(file('tabs.json'), JSON.stringify(JSON.parse(JSON.stringify({ openapi: '3.0.3', info: { title: 't', version: '1' }, paths: { '/a': { post: { operationId: 'a', parameters: [{ name: 'Idempotency-Key', in: 'header', required: true, schema: { type: 'string' } }], responses: { '201': { description: 'ok' } } } } } })), null, '\t'));
      const preview = await run('init', 'tabs.json');
      assert.match(preview.out, /^\+ \t+"x-idempotency": \{$/m, preview.out);
    });
  });

  describe('patterns from the document', () => {
    it('lint never runs a patternProperties pattern that backtracks for long on a fingerprint pointer (a pull request could hang CI)', async () => {
      for (const pattern of ['^(a+)+$', '^[a-z]*[a-z]*[a-z]*[a-z]*[a-z]*$']) {
        writeFileSync(
          file('redos.yaml'),
          [
            'openapi: 3.0.3',
            'info: {title: t, version: "1"}',
            'paths:',
            '  /a:',
            '    post:',
            '      parameters: [{name: Idempotency-Key, in: header, required: true, schema: {type: string, maxLength: 64}}]',
            `      requestBody: {content: {application/json: {schema: {type: object, patternProperties: {'${pattern}': {type: string}}}}}}`,
            '      responses: {"201": {description: ok}}',
            `      x-idempotency: {scope: [global], fingerprint: {include: [/${'a'.repeat(200)}!]}}`,
            '',
          ].join('\n'),
        );
        const result = await run('lint', 'redos.yaml', '--format', 'json');
        assert.equal(result.code, 1, result.err);
        const ids = (JSON.parse(result.out) as { findings: { ruleId: string }[] }).findings.map((finding) => finding.ruleId);
        assert.ok(!ids.includes('fingerprint-field-unknown'), `${pattern}: a pattern not run is taken to declare the field: ${ids.join(', ')}`);
      }
    });
  });
});
