import { execFile } from 'node:child_process';
import { existsSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The repository root (this file lives in test/generate/). */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Compiler options generated code must pass: the house `--strict` plus the stricter flags users turn on. */
export const STRICT_OPTIONS = {
  target: 'ES2022',
  module: 'NodeNext',
  moduleResolution: 'NodeNext',
  lib: ['ES2023'],
  strict: true,
  noUncheckedIndexedAccess: true,
  noImplicitOverride: true,
  noImplicitReturns: true,
  skipLibCheck: true,
  types: ['node'],
} as const;

/**
 * Makes `dir` a project tsc can check outside the repository: a `node_modules` link to the repo's (so
 * `express`, `fastify`, `better-sqlite3`, `pg`, `ioredis` and `@types/*` resolve) and a `tsconfig.json`.
 * With `outDir`, the project emits JavaScript there (for end-to-end tests that run the code).
 */
export function prepareTsProject(dir: string, options: { outDir?: string; include?: readonly string[] } = {}): string {
  const link = path.join(dir, 'node_modules');
  if (!existsSync(link)) symlinkSync(path.join(REPO_ROOT, 'node_modules'), link, 'dir');
  const tsconfig = path.join(dir, 'tsconfig.json');
  const compilerOptions = {
    ...STRICT_OPTIONS,
    typeRoots: [path.join(REPO_ROOT, 'node_modules', '@types')],
    ...(options.outDir !== undefined ? { outDir: options.outDir, rootDir: dir, noEmit: false } : { noEmit: true }),
  };
  writeFileSync(tsconfig, JSON.stringify({ compilerOptions, include: options.include ?? ['**/*.ts'], exclude: ['node_modules'] }, null, 2));
  return tsconfig;
}

/** Runs the repository's tsc on a project; resolves to its diagnostics ('' when clean). */
export async function runTsc(tsconfig: string): Promise<string> {
  const tsc = path.join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  try {
    await run(process.execPath, [tsc, '-p', tsconfig, '--pretty', 'false'], { maxBuffer: 16 * 1024 * 1024 });
    return '';
  } catch (error) {
    const failure = error as { stdout?: string; stderr?: string; message: string };
    return `${failure.stdout ?? ''}${failure.stderr ?? ''}`.trim() || failure.message;
  }
}
