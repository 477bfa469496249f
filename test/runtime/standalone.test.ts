import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, posix, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const runtime = join(root, 'src/runtime');

/** The runtime files the guard core needs, as a generator copies them (paths relative to src/runtime). */
const CORE = ['content-coding.ts', 'contract.ts', 'guard.ts', 'key.ts', 'fingerprint.ts', 'problem.ts', 'result-id.ts', 'store.ts', 'wire.ts'];
const STORES = readdirSync(join(runtime, 'stores')).filter((f) => f.endsWith('.ts')).map((f) => `stores/${f}`);

function importsOf(file: string): string[] {
  const text = readFileSync(join(runtime, file), 'utf8');
  return [...text.matchAll(/^(?:import|export)[^'";]*?from\s+'([^']+)'/gm)].map((m) => m[1]!);
}

describe('runtime: the guard core and each store stand alone', () => {
  it('imports only Node built-ins, its own files and the store driver', () => {
    const drivers: Record<string, string[]> = {
      'stores/sqlite.ts': ['better-sqlite3'],
      'stores/postgres.ts': ['pg'],
      'stores/redis.ts': ['ioredis'],
    };
    for (const file of [...CORE, ...STORES]) {
      for (const spec of importsOf(file)) {
        if (spec.startsWith('node:')) continue;
        if (spec.startsWith('.')) {
          const target = posix.normalize(posix.join(posix.dirname(file), spec)).replace(/\.js$/, '.ts');
          const allowed = file.startsWith('stores/') ? ['store.ts'] : CORE;
          assert.ok(allowed.includes(target), `${file} imports ${spec}; it may only need ${allowed.join(', ')}`);
          continue;
        }
        assert.ok((drivers[file] ?? []).includes(spec), `${file} imports the package ${spec}`);
      }
    }
  });

  it('compiles under tsc --strict as copied into a project of its own', function () {
    this.timeout(120_000);
    const dir = mkdtempSync(join(tmpdir(), 'idemkit-standalone-'));
    try {
      mkdirSync(join(dir, 'src/stores'), { recursive: true });
      for (const file of [...CORE, ...STORES]) cpSync(join(runtime, file), join(dir, 'src', file));
      symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir');
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
      writeFileSync(
        join(dir, 'tsconfig.json'),
        JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, skipLibCheck: true, types: ['node'] }, include: ['src/**/*.ts'] }),
      );
      const tsc = join(root, 'node_modules/typescript/bin/tsc');
      assert.ok(existsSync(tsc));
      try {
        execFileSync(process.execPath, [tsc, '-p', dir], { encoding: 'utf8', stdio: 'pipe' });
      } catch (error) {
        const e = error as { stdout?: string; stderr?: string };
        assert.fail(`tsc --strict failed:\n${e.stdout ?? ''}${e.stderr ?? ''}`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
