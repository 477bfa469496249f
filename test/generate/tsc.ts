import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import ts from 'typescript';
import { checkOutput, writeOutput, type OutputFile } from '../../src/generate/output.js';

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
  exactOptionalPropertyTypes: true,
  skipLibCheck: true,
  types: ['node'],
} as const;

/**
 * Makes `dir` a project tsc can check outside the repository: a `node_modules` link to the repo's (so
 * `express`, `fastify`, `better-sqlite3`, `pg`, `ioredis` and `@types/*` resolve) and a `tsconfig.json`.
 * With `outDir`, the project emits JavaScript there (for end-to-end tests that run the code); `compilerOptions` are
 * set over {@link STRICT_OPTIONS}.
 */
export function prepareTsProject(dir: string, options: { outDir?: string; include?: readonly string[]; compilerOptions?: Record<string, unknown> } = {}): string {
  const link = path.join(dir, 'node_modules');
  if (!existsSync(link)) symlinkSync(path.join(REPO_ROOT, 'node_modules'), link, 'dir');
  const tsconfig = path.join(dir, 'tsconfig.json');
  const compilerOptions = {
    ...STRICT_OPTIONS,
    typeRoots: [path.join(REPO_ROOT, 'node_modules', '@types')],
    ...(options.outDir !== undefined ? { outDir: options.outDir, rootDir: dir, noEmit: false } : { noEmit: true }),
    ...options.compilerOptions,
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

/** {@link STRICT_OPTIONS} for an in-process `ts.createProgram` (type check only). */
export const STRICT_COMPILER_OPTIONS: ts.CompilerOptions = {
  ...ts.convertCompilerOptionsFromJson(STRICT_OPTIONS, REPO_ROOT).options,
  typeRoots: [path.join(REPO_ROOT, 'node_modules', '@types')],
  noEmit: true,
};

/** Every `.ts` file below `dir`. */
export function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const full = path.join(dir, entry);
    if (statSync(full).isDirectory()) return tsFiles(full);
    return entry.endsWith('.ts') ? [full] : [];
  });
}

/**
 * Writes each case's full output (templated files and runtime copies; `generate` gives it) to `<tree>/<name>`
 * and copies `usageDir` to `<tree>/usage`, in a new temp tree shaped like the golden directory, so the usage
 * files' `../<name>/index.js` imports resolve. The caller removes the tree.
 */
export async function goldenTree(names: readonly string[], generate: (name: string) => Promise<readonly OutputFile[]>, usageDir: string): Promise<string> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'idemkit-golden-'));
  symlinkSync(path.join(REPO_ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ type: 'module', private: true }));
  for (const name of names) await writeOutput(path.join(dir, name), await generate(name));
  mkdirSync(path.join(dir, 'usage'));
  for (const file of readdirSync(usageDir)) copyFileSync(path.join(usageDir, file), path.join(dir, 'usage', file));
  return dir;
}

/** Fails unless the golden directory `out` holds exactly `files`; with UPDATE_GOLDEN=1 it rewrites `out` first. */
export async function assertGolden(out: string, files: readonly OutputFile[], testFile: string): Promise<void> {
  if (process.env['UPDATE_GOLDEN'] === '1') await writeOutput(out, files);
  assert.deepEqual(await checkOutput(out, files), [], `run UPDATE_GOLDEN=1 npx mocha ${testFile} after a deliberate change`);
}

/** Type-checks `files` under {@link STRICT_COMPILER_OPTIONS}; one line per diagnostic, file names relative to `base`. */
export function strictDiagnostics(files: readonly string[], base: string, host?: ts.CompilerHost): string[] {
  const program = ts.createProgram(files, STRICT_COMPILER_OPTIONS, host);
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const where = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined;
    const file = d.file ? path.relative(base, d.file.fileName).split(path.sep).join('/') : '';
    return `${file}${where ? `:${where.line + 1}:${where.character + 1}` : ''} TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
  });
}

/**
 * Type-checks the usage file `usage` with its `// @ts-expect-error` comments removed, so each line they
 * guarded must now report an error: `found` are the diagnostics, `expected` how many comments there were.
 */
export function diagnosticsWithoutExpectErrors(usage: string, base: string): { found: string[]; expected: number } {
  const host = ts.createCompilerHost(STRICT_COMPILER_OPTIONS);
  const read = host.readFile.bind(host);
  host.readFile = (file) => {
    const text = read(file);
    return path.resolve(file) === usage && text !== undefined ? text.replace(/\/\/ @ts-expect-error[^\n]*/g, '') : text;
  };
  const original = host.getSourceFile.bind(host);
  host.getSourceFile = (file, lang) => (path.resolve(file) === usage ? ts.createSourceFile(file, host.readFile(file) ?? '', lang) : original(file, lang));
  const expected = (read(usage) ?? '').match(/\/\/ @ts-expect-error/g)?.length ?? 0;
  return { found: strictDiagnostics([usage], base, host), expected };
}
