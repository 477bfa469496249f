import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { main } from '../../src/cli/main.js';
import { describeWriteError } from '../../src/lint/output-file.js';
import { bufferIo } from '../helpers/io.js';

const demo = readFileSync(fileURLToPath(new URL('../../samples/demo-requests/openapi.yaml', import.meta.url)), 'utf8');
// The complete demo with one fault (scope-too-wide), so a lint that runs prints a report.
const faulty = demo.replace(/^(\s*)scope: \[principal\]$/m, '$1scope: [global]');

describe('idemkit usage errors: one line, exit 2, nothing run or written', () => {
  let dir: string;
  const run = async (...argv: string[]) => {
    const io = bufferIo(dir);
    const code = await main(argv, io);
    return { code, out: io.out, err: io.err };
  };
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'idemkit-usage-'));
    assert.notEqual(faulty, demo, 'the fixture edit applied');
    writeFileSync(path.join(dir, 'api.yaml'), faulty);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('rejects a bad --fail-on before linting: no report, no output file', async () => {
    const printed = await run('lint', 'api.yaml', '--fail-on', 'fatal');
    assert.equal(printed.code, 2);
    assert.equal(printed.out, '');
    assert.equal(printed.err, '--fail-on "fatal" is not one of: info, warn, error\n');
    const written = await run('lint', 'api.yaml', '--fail-on', 'fatal', '-o', 'fo.txt');
    assert.equal(written.code, 2);
    assert.ok(!existsSync(path.join(dir, 'fo.txt')), 'no report file');
    assert.equal(written.err.split('\n').length, 2, written.err);
  });

  it('refuses --help of a command that does not exist instead of printing the top help with exit 0', async () => {
    const baseline = await run('baseline', '--help');
    assert.equal(baseline.code, 2);
    assert.equal(baseline.out, '');
    assert.equal(baseline.err, "Unknown command: baseline — the commands are lint, generate, init, rules, explain (baselines are lint's options: idemkit lint --help)\n");
    const other = await run('frobnicate', '-h');
    assert.equal(other.code, 2);
    assert.equal(other.err, 'Unknown command: frobnicate — the commands are lint, generate, init, rules, explain\n');
    // The commands' own help, and `help` itself, are untouched.
    const help = await run('help', '--help');
    assert.equal(help.code, 0);
    assert.match(help.out, /^idemkit <command> \[options\]/);
    const lint = await run('lint', '--help');
    assert.equal(lint.code, 0);
    assert.match(lint.out, /^idemkit lint <files\.\.>/);
  });

  it('rejects a bad lint --format and rules --format before running', async () => {
    const lint = await run('lint', 'api.yaml', '--format', 'xml');
    assert.equal(lint.code, 2);
    assert.equal(lint.out, '');
    assert.match(lint.err, /^--format "xml" is not one of: stylish, json, sarif, github, junit, markdown\n$/);
    const rules = await run('rules', '--format', 'xml');
    assert.equal(rules.code, 2);
    assert.equal(rules.out, '');
    assert.equal(rules.err, '--format "xml" is not one of: table, json\n');
  });

  it('names a bad positional without dashes', async () => {
    const bad = await run('generate', 'sdk', 'api.yaml', '--out', 'gen');
    assert.deepEqual(bad, { code: 2, out: '', err: 'target "sdk" is not one of: server, client\n' });
    assert.ok(!existsSync(path.join(dir, 'gen')));
  });

  it('speaks English whatever the locale: idemkit\'s messages, and yargs\' words around them', async () => {
    const saved = { LC_ALL: process.env['LC_ALL'], LANG: process.env['LANG'] };
    process.env['LC_ALL'] = 'de_DE.UTF-8';
    process.env['LANG'] = 'de_DE.UTF-8';
    try {
      // yargs has German for "not enough arguments"; idemkit's own message must still be the one shown.
      assert.deepEqual(await run('lint'), { code: 2, out: '', err: 'name the OpenAPI documents to lint (YAML or JSON)\n' });
      const help = await run('--help');
      assert.equal(help.code, 0);
      assert.match(help.out, /^Commands:$/m);
      assert.match(help.out, /^Options:$/m);
      assert.doesNotMatch(help.out, /Kommandos|Optionen|Boolean\]|Anzeigen/);
      const unknown = await run('lint', 'api.yaml', '--bogus');
      assert.equal(unknown.code, 2);
      assert.match(unknown.err, /^Unknown argument: bogus/);
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });

  it('says what to name when a command misses its arguments', async () => {
    assert.deepEqual(await run('lint'), { code: 2, out: '', err: 'name the OpenAPI documents to lint (YAML or JSON)\n' });
    assert.deepEqual(await run('init'), { code: 2, out: '', err: 'name the OpenAPI document to scaffold contracts in\n' });
    assert.deepEqual(await run('generate', 'server'), { code: 2, out: '', err: 'name what to generate (server or client) and the OpenAPI document\n' });
  });

  it('an option given without its value is a usage error, not the working directory', async () => {
    for (const option of ['--output', '-o', '--baseline', '--write-baseline', '--config']) {
      const result = await run('lint', 'api.yaml', option);
      assert.equal(result.code, 2, option);
      assert.equal(result.out, '', option);
      assert.equal(result.err, `${option} needs a value\n`, option);
      const empty = await run('lint', 'api.yaml', option, '');
      assert.equal(empty.code, 2, option);
      assert.equal(empty.err, `${option === '-o' ? '--output' : option} needs a value\n`, option);
    }
    assert.ok(!existsSync(path.join(dir, 'idemkit-baseline.json')));
    assert.deepEqual(await run('init', 'api.yaml', '--config'), { code: 2, out: '', err: '--config needs a value\n' });
    for (const option of ['--format', '-f', '--fail-on']) {
      assert.deepEqual(await run('lint', 'api.yaml', option), { code: 2, out: '', err: `${option} needs a value\n` }, 'not the default');
    }
    assert.deepEqual(await run('rules', '--format'), { code: 2, out: '', err: '--format needs a value\n' });
    assert.deepEqual(await run('generate', 'server', 'api.yaml', '--out', 'gen', '--store'), { code: 2, out: '', err: '--store needs a value\n' });
    assert.deepEqual(await run('generate', 'server', 'api.yaml', '--out'), { code: 2, out: '', err: '--out needs a value\n' });
  });

  it('refuses `-` (standard input) where documents are named, instead of dropping it', async () => {
    const refused = { code: 2, out: '', err: 'reading a document from standard input (`-`) is not supported — name its file (a pipe can be named as /dev/stdin)\n' };
    assert.deepEqual(await run('lint', '-'), refused, 'linted nothing and exited 0');
    assert.deepEqual(await run('lint', '-', 'api.yaml', '-f', 'json'), refused, 'linted api.yaml alone');
    assert.deepEqual(await run('lint', 'api.yaml', '--', '-'), refused);
    assert.deepEqual(await run('init', '-'), refused);
    assert.deepEqual(await run('generate', 'server', '-', '--out', 'gen'), refused);
    assert.ok(!existsSync(path.join(dir, 'gen')));
  });

  it('refuses an empty file name instead of reading the working directory', async () => {
    const refused = { code: 2, out: '', err: "an empty file name ('') was given — name the OpenAPI document's file\n" };
    assert.deepEqual(await run('lint', ''), refused);
    assert.deepEqual(await run('lint', 'api.yaml', ' '), refused);
    assert.deepEqual(await run('init', ''), refused);
  });

  it('reads the names after `--` as documents, even one that starts with a dash', async () => {
    writeFileSync(path.join(dir, '-dash.yaml'), faulty);
    const result = await run('lint', '-f', 'json', '--', 'api.yaml', '-dash.yaml');
    assert.equal(result.code, 1, result.err);
    assert.deepEqual(JSON.parse(result.out).files, ['-dash.yaml', 'api.yaml']);
  });

  it('-o - writes the report to stdout, not to a file named -', async () => {
    const result = await run('lint', 'api.yaml', '-o', '-');
    assert.equal(result.code, 1);
    assert.match(result.out, /^api\.yaml\n.*scope-too-wide/);
    assert.ok(!existsSync(path.join(dir, '-')));
  });

  it('refuses `-` for --config, --baseline and --write-baseline (no file named - is read or written)', async () => {
    const refused = (err: string) => ({ code: 2, out: '', err: `${err}\n` });
    const config = refused('--config -: reading the config from standard input is not supported — name the config file');
    assert.deepEqual(await run('lint', 'api.yaml', '-c', '-'), config);
    assert.deepEqual(await run('lint', 'api.yaml', '--config', '-'), config);
    assert.deepEqual(await run('init', 'api.yaml', '-c', '-'), config);
    assert.deepEqual(await run('lint', 'api.yaml', '--baseline', '-'), refused('--baseline -: reading the baseline from standard input is not supported — name the baseline file'));
    assert.deepEqual(
      await run('lint', 'api.yaml', '--write-baseline', '-'),
      refused('--write-baseline -: writing the baseline to standard output is not supported (the report goes there) — name a file'),
    );
    assert.ok(!existsSync(path.join(dir, '-')), 'no file named -');
  });

  it('refuses `-` given as --option=- too (--write-baseline=- wrote a file named -, then --config=- read it)', async () => {
    const refused = (err: string) => ({ code: 2, out: '', err: `${err}\n` });
    const config = refused('--config -: reading the config from standard input is not supported — name the config file');
    assert.deepEqual(
      await run('lint', 'api.yaml', '--write-baseline=-'),
      refused('--write-baseline -: writing the baseline to standard output is not supported (the report goes there) — name a file'),
    );
    assert.ok(!existsSync(path.join(dir, '-')), 'no file named -');
    writeFileSync(path.join(dir, '-'), 'rules: {}\n'); // were `=-` taken as a name, these would read it
    assert.deepEqual(await run('lint', 'api.yaml', '--config=-'), config);
    assert.deepEqual(await run('lint', 'api.yaml', '-c=-'), config);
    assert.deepEqual(await run('init', 'api.yaml', '--config=-'), config);
    assert.deepEqual(await run('lint', 'api.yaml', '--baseline=-'), refused('--baseline -: reading the baseline from standard input is not supported — name the baseline file'));
  });

  it('keeps other yargs errors on one line too', async () => {
    const unknown = await run('lint', 'api.yaml', '--nope');
    assert.equal(unknown.code, 2);
    assert.equal(unknown.out, '');
    assert.equal(unknown.err, 'Unknown argument: nope\n');
  });

  describe('a report or baseline file that cannot be written', () => {
    it('-o naming a directory is a one-line usage error, not an internal error', async () => {
      mkdirSync(path.join(dir, 'odir'));
      const result = await run('lint', 'api.yaml', '-o', 'odir');
      assert.deepEqual(result, { code: 2, out: '', err: 'cannot write --output odir: it is a directory — name a file\n' });
    });

    it('-o under a path whose parent is a file is a one-line usage error', async () => {
      const result = await run('lint', 'api.yaml', '-o', 'api.yaml/report.txt');
      assert.deepEqual(result, { code: 2, out: '', err: 'cannot write --output api.yaml/report.txt: api.yaml is not a directory\n' });
    });

    it('-o into a directory that does not exist yet creates it', async () => {
      const result = await run('lint', 'api.yaml', '-o', 'reports/lint.txt');
      assert.equal(result.code, 1, result.err);
      assert.match(readFileSync(path.join(dir, 'reports/lint.txt'), 'utf8'), /scope-too-wide/);
    });

    it('--write-baseline naming a directory is a one-line usage error', async () => {
      mkdirSync(path.join(dir, 'bdir'));
      const result = await run('lint', 'api.yaml', '--write-baseline', 'bdir');
      assert.deepEqual(result, { code: 2, out: '', err: 'cannot write --write-baseline bdir: it is a directory — name a file\n' });
    });

    it('--baseline naming a directory says so, not "not valid JSON"', async () => {
      mkdirSync(path.join(dir, 'bdir'));
      const result = await run('lint', 'api.yaml', '--baseline', 'bdir');
      assert.deepEqual(result, { code: 2, out: '', err: 'cannot read baseline file bdir: it is a directory — name the file --write-baseline wrote\n' });
    });

    it('names permission, read-only and full-disk failures (errno mapping)', () => {
      const fsError = (code: string) => Object.assign(new Error(`${code}: failed`), { code, syscall: 'open' });
      assert.equal(describeWriteError(fsError('EACCES'), '--output', 'r.txt')?.message, 'cannot write --output r.txt: permission denied — choose a location you can write to');
      assert.equal(describeWriteError(fsError('EPERM'), '--output', 'r.txt')?.message, 'cannot write --output r.txt: permission denied — choose a location you can write to');
      assert.equal(describeWriteError(fsError('EROFS'), '--output', 'r.txt')?.message, 'cannot write --output r.txt: the file system is read-only');
      assert.equal(describeWriteError(fsError('ENOSPC'), '--output', 'r.txt')?.message, 'cannot write --output r.txt: no space left on the device');
      assert.equal(describeWriteError(fsError('EIO'), '--output', 'r.txt')?.message, 'cannot write --output r.txt: EIO: failed');
      assert.equal(describeWriteError(new Error('a bug'), '--output', 'r.txt'), undefined, 'not a file system error: left to be reported as internal');
    });
  });
});
