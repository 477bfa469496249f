import assert from 'node:assert/strict';
import { closeSync, constants, existsSync, lstatSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { main } from '../../src/cli/main.js';
import { bufferIo } from '../helpers/io.js';
import { assertBuilt, bin, runBin, runProcess } from './spawn.js';

const demo = readFileSync(fileURLToPath(new URL('../../samples/demo-requests/openapi.yaml', import.meta.url)), 'utf8');
// The demo with one fault (scope-too-wide), so every run has a report to write.
const faulty = demo.replace(/^(\s*)scope: \[principal\]$/m, '$1scope: [global]');
const linux = process.platform === 'linux';

describe('idemkit output targets: what is not a regular file is written into, never replaced', () => {
  let dir: string;
  const run = async (...argv: string[]) => {
    const io = bufferIo(dir);
    const code = await main(argv, io);
    return { code, out: io.out, err: io.err };
  };
  before(assertBuilt);
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'idemkit-out-'));
    assert.notEqual(faulty, demo, 'the fixture edit applied');
    writeFileSync(path.join(dir, 'api.yaml'), faulty);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** Reads a FIFO with `cat` while `write` runs; resolves with what came through and `write`'s result. */
  async function throughFifo<T>(fifo: string, write: () => Promise<T>): Promise<{ read: string; result: T }> {
    const reader = runProcess('cat', [fifo], { cwd: dir, killAfterMs: 30_000 });
    const result = await write();
    const { code, stdout } = await reader;
    assert.equal(code, 0, 'cat read the FIFO to its end (it was not replaced under it)');
    return { read: stdout, result };
  }

  it('-o and --write-baseline into a FIFO: the report goes through it and the FIFO stays a FIFO', async function () {
    if (!linux) this.skip();
    const fifo = path.join(dir, 'report.fifo');
    const made = await runProcess('mkfifo', [fifo], { cwd: dir });
    if (made.code !== 0) this.skip();
    const lint = await throughFifo(fifo, () => runBin(['lint', 'api.yaml', '-f', 'sarif', '-o', 'report.fifo'], { cwd: dir }));
    assert.deepEqual({ code: lint.result.code, stdout: lint.result.stdout, stderr: lint.result.stderr }, { code: 1, stdout: '', stderr: '' });
    assert.match(lint.read, /"ruleId": "scope-too-wide"/);
    assert.equal(JSON.parse(lint.read).version, '2.1.0', 'the whole report came through (121 KB, more than a pipe holds)');
    assert.ok(lstatSync(fifo).isFIFO(), 'still a FIFO');

    const baseline = await throughFifo(fifo, () => run('lint', 'api.yaml', '--write-baseline', 'report.fifo'));
    assert.equal(baseline.result.code, 0, baseline.result.err);
    assert.equal(JSON.parse(baseline.read).entries[0].rule, 'scope-too-wide');
    assert.ok(lstatSync(fifo).isFIFO(), 'still a FIFO');
    assert.deepEqual(readdirNames(dir), ['api.yaml', 'report.fifo'], 'no temporary file left behind');
  });

  it('-o into a character device (as /dev/null): written into, not replaced', async function () {
    if (!linux || process.getuid?.() !== 0) this.skip(); // mknod needs root
    const device = path.join(dir, 'null');
    if ((await runProcess('mknod', ['-m', '666', device, 'c', '1', '3'], { cwd: dir })).code !== 0) this.skip();
    try {
      closeSync(openSync(device, constants.O_WRONLY)); // a file system mounted nodev refuses to open devices
    } catch {
      this.skip();
    }
    const result = await run('lint', 'api.yaml', '-f', 'json', '-o', 'null');
    assert.deepEqual(result, { code: 1, out: '', err: '' });
    assert.ok(lstatSync(device).isCharacterDevice(), 'still the device');
    assert.equal(readFileSync(device, 'utf8'), '', 'still reads as /dev/null does');
  });

  it('-o /dev/stdout writes the report to standard output', async function () {
    if (!linux) this.skip();
    const result = await runBin(['lint', 'api.yaml', '-o', '/dev/stdout'], { cwd: dir });
    assert.equal(result.code, 1, result.stderr);
    assert.equal(result.stderr, '');
    assert.match(result.stdout, /^api\.yaml\n.*scope-too-wide/);
  });

  it("-o and --write-baseline naming one of idemkit's own descriptors above 2 (Node's event loop) refuse with exit 2, and write nothing there", async function () {
    if (!linux || !existsSync('/proc/self/fd')) this.skip();
    const refused = (option: string, shown: string) => ({
      code: 2,
      stdout: '',
      stderr: `cannot write ${option} ${shown}: it is one of Node's own descriptors (its event loop) — name a file, or a descriptor the shell opened (3>file)\n`,
    });
    // None of these was opened by the caller: in the child they are Node's epoll (3), libuv wakeup pipes (4-7), eventfd (8).
    for (const target of ['/dev/fd/3', '/dev/fd/4', '/dev/fd/7', '/proc/self/fd/5', '/proc/thread-self/fd/6', '/dev/fd/8']) {
      assert.deepEqual(await runBin(['lint', 'api.yaml', '-o', target], { cwd: dir, killAfterMs: 30_000 }), refused('--output', target), target);
    }
    assert.deepEqual(await runBin(['lint', 'api.yaml', '--write-baseline', '/dev/fd/7'], { cwd: dir, killAfterMs: 30_000 }), refused('--write-baseline', '/dev/fd/7'));
    symlinkSync('/dev/fd/7', path.join(dir, 'report.txt'));
    assert.deepEqual(await runBin(['lint', 'api.yaml', '-o', 'report.txt'], { cwd: dir, killAfterMs: 30_000 }), refused('--output', 'report.txt'), 'a link to one too');
    assert.ok(lstatSync(path.join(dir, 'report.txt')).isSymbolicLink(), 'the link stays');
    // Standard output named through a link is still written into (here the shell opened it onto a file).
    symlinkSync('/proc/self/fd/1', path.join(dir, 'out.txt'));
    const toStdout = await runProcess('sh', ['-c', `"${process.execPath}" "${bin}" lint api.yaml -o out.txt > captured.txt`], { cwd: dir, killAfterMs: 30_000 });
    assert.deepEqual(toStdout, { code: 1, stdout: '', stderr: '' });
    assert.match(readFileSync(path.join(dir, 'captured.txt'), 'utf8'), /scope-too-wide/);
  });

  it('-o naming a descriptor the shell opened (3>file, a process substitution) writes the report into it', async function () {
    if (!linux || !existsSync('/proc/self/fd')) this.skip();
    const idemkit = `"${process.execPath}" "${bin}" lint api.yaml`;
    const toFile = await runProcess('bash', ['-c', `${idemkit} -o /dev/fd/3 3>fd3.txt; echo "exit $?"`], { cwd: dir, killAfterMs: 30_000 });
    assert.deepEqual(toFile, { code: 0, stdout: 'exit 1\n', stderr: '' });
    assert.match(readFileSync(path.join(dir, 'fd3.txt'), 'utf8'), /^api\.yaml\n.*scope-too-wide/);
    // A process substitution is a pipe whose other end is the substituted command's, not idemkit's.
    const substituted = await runProcess('bash', ['-c', `${idemkit} -o >(cat > sub.txt); echo "exit $?"; wait $!`], { cwd: dir, killAfterMs: 30_000 });
    assert.deepEqual(substituted, { code: 0, stdout: 'exit 1\n', stderr: '' });
    assert.match(readFileSync(path.join(dir, 'sub.txt'), 'utf8'), /^api\.yaml\n.*scope-too-wide/);
  });

  it('-o naming a descriptor open only for reading (3<file, </dev/stdin) refuses with exit 2 and leaves the file byte for byte', async function () {
    if (!linux || !existsSync('/proc/self/fd')) this.skip();
    const idemkit = `"${process.execPath}" "${bin}" lint api.yaml`;
    writeFileSync(path.join(dir, 'in.yaml'), demo);
    const fd3 = await runProcess('bash', ['-c', `${idemkit} -o /dev/fd/3 3<in.yaml; echo "exit $?"`], { cwd: dir, killAfterMs: 30_000 });
    assert.deepEqual(fd3, { code: 0, stdout: 'exit 2\n', stderr: 'cannot write --output /dev/fd/3: descriptor 3 is not open for writing\n' });
    symlinkSync('/proc/self/fd/0', path.join(dir, 'report.txt'));
    const stdin = await runProcess('bash', ['-c', `${idemkit} -o report.txt < in.yaml; echo "exit $?"`], { cwd: dir, killAfterMs: 30_000 });
    assert.deepEqual(stdin, { code: 0, stdout: 'exit 2\n', stderr: 'cannot write --output report.txt: descriptor 0 is not open for writing\n' });
    assert.equal(readFileSync(path.join(dir, 'in.yaml'), 'utf8'), demo, 'the input is unchanged');
  });

  it('-o /dev/fd/3 3>&1 onto a pipe (two copies of its write end, no read end here) writes the report through the pipe', async function () {
    if (!linux || !existsSync('/proc/self/fd')) this.skip();
    const idemkit = `"${process.execPath}" "${bin}" lint api.yaml`;
    const piped = await runProcess('bash', ['-c', `${idemkit} -o /dev/fd/3 3>&1 | cat > out.txt; echo "exit \${PIPESTATUS[0]}"`], { cwd: dir, killAfterMs: 30_000 });
    assert.deepEqual(piped, { code: 0, stdout: 'exit 1\n', stderr: '' });
    assert.match(readFileSync(path.join(dir, 'out.txt'), 'utf8'), /^api\.yaml\n.*scope-too-wide/);
  });

  it('-o /proc/self/fd/N or /dev/fd/N where /proc is not mounted says no such descriptor is open, and creates nothing', async function () {
    if (!linux || process.getuid?.() !== 0) this.skip(); // a private mount namespace needs root
    const script = `umount -l /proc || exit 9
for target in /proc/self/fd/7 /dev/fd/7 /proc/thread-self/fd/9; do "${process.execPath}" "${bin}" lint api.yaml -o "$target"; echo "exit $?"; done
ls -A /proc; rm -rf /proc/self /proc/thread-self`; // what a regression would create lies on the root file system under the mount point
    const result = await runProcess('unshare', ['-m', '--propagation', 'private', 'bash', '-c', script], { cwd: dir, killAfterMs: 60_000 });
    if (result.code === 9 || /unshare: /.test(result.stderr)) this.skip(); // no mount namespaces here
    const none = (target: string) => `cannot write --output ${target}: no such descriptor is open — name a file\n`;
    assert.deepEqual(result, {
      code: 0,
      stdout: 'exit 2\nexit 2\nexit 2\n',
      stderr: none('/proc/self/fd/7') + none('/dev/fd/7') + none('/proc/thread-self/fd/9'),
    });
  });

  it('-o where a directory cannot be created (under /proc) is a usage error, not a hang', async function () {
    if (!linux || !existsSync('/proc/self')) this.skip();
    // Node's recursive mkdir spins forever here: the process is killed after a while if it does.
    const result = await runBin(['lint', 'api.yaml', '-o', '/proc/idemkit-nope/report.txt'], { cwd: dir, killAfterMs: 30_000 });
    assert.deepEqual(result, {
      code: 2,
      stdout: '',
      stderr: 'cannot write --output /proc/idemkit-nope/report.txt: cannot create the directory /proc/idemkit-nope — choose a location where files can be written\n',
    });
  });

  it('-o through a symbolic link that names nothing says which link, and writes through one whose directory exists', async function () {
    if (process.platform === 'win32') this.skip();
    symlinkSync(path.join(dir, 'gone', 'dir'), path.join(dir, 'reports'));
    assert.deepEqual(await run('lint', 'api.yaml', '-o', 'reports/r.txt'), {
      code: 2,
      out: '',
      err: `cannot write --output reports/r.txt: reports is a symbolic link to ${path.join(dir, 'gone', 'dir')}, which does not exist — create it or fix the link\n`,
    });
    symlinkSync(path.join(dir, 'gone', 'r.txt'), path.join(dir, 'r.txt'));
    assert.deepEqual(await run('lint', 'api.yaml', '-o', 'r.txt'), {
      code: 2,
      out: '',
      err: `cannot write --output r.txt: r.txt is a symbolic link to ${path.join(dir, 'gone', 'r.txt')}, which does not exist — create it or fix the link\n`,
    });
    assert.ok(!existsSync(path.join(dir, 'gone')), 'nothing created where the link points');
    mkdirSync(path.join(dir, 'gone'));
    assert.equal((await run('lint', 'api.yaml', '-o', 'r.txt')).code, 1);
    assert.ok(lstatSync(path.join(dir, 'r.txt')).isSymbolicLink(), 'the link stays a link');
    assert.match(readFileSync(path.join(dir, 'gone', 'r.txt'), 'utf8'), /scope-too-wide/);
  });

  it('-o through a symbolic link loop is a usage error', async function () {
    if (process.platform === 'win32') this.skip();
    symlinkSync('b.txt', path.join(dir, 'a.txt'));
    symlinkSync('a.txt', path.join(dir, 'b.txt'));
    assert.deepEqual(await run('lint', 'api.yaml', '-o', 'a.txt'), { code: 2, out: '', err: 'cannot write --output a.txt: a symbolic link on the path leads in a loop — fix the link\n' });
  });
});

function readdirNames(dir: string): string[] {
  return readdirSync(dir).sort();
}
