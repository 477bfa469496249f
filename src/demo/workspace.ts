/**
 * Generates a document's server guard (Express + SQLite) and typed client into a directory and makes them
 * runnable in this process: every generated `.ts` file is transpiled (type-stripped with TypeScript's
 * `transpileModule`, no type check — the golden tests type-check the same output) and imported.
 *
 * Used by the demo and the client end-to-end tests. Needs the repository's dev dependencies (`typescript`,
 * `express`, `better-sqlite3`), which `npm ci` installs.
 */
import { mkdir, readdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { generateClient } from '../generate/client/index.js';
import { writeOutput, type OutputFile } from '../generate/output.js';
import { generateServer } from '../generate/server.js';
import { loadDocument } from '../parser/load.js';

/** What {@link generateWorkspace} produced. */
export interface Workspace {
  /** The generated TypeScript: `<dir>/server` and `<dir>/client`. */
  readonly serverDir: string;
  readonly clientDir: string;
  readonly serverFiles: readonly OutputFile[];
  readonly clientFiles: readonly OutputFile[];
  /** Entry points of the runnable JavaScript. */
  readonly serverEntry: string;
  readonly clientEntry: string;
}

async function tsFiles(dir: string, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(path.join(dir, prefix), { withFileTypes: true })) {
    const rel = path.join(prefix, entry.name);
    if (entry.isDirectory()) out.push(...(await tsFiles(dir, rel)));
    else if (entry.name.endsWith('.ts')) out.push(rel);
  }
  return out.sort();
}

/** Type-strips every `.ts` file of `from` into `.js` files under `to`, keeping the layout. */
async function transpileTree(from: string, to: string): Promise<void> {
  const ts = (await import('typescript')).default;
  for (const rel of await tsFiles(from)) {
    const source = await readFile(path.join(from, rel), 'utf8');
    const { outputText } = ts.transpileModule(source, {
      fileName: rel,
      compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, verbatimModuleSyntax: false },
    });
    const target = path.join(to, rel.replace(/\.ts$/, '.js'));
    await mkdir(path.dirname(target), { recursive: true });
    await writeFile(target, outputText);
  }
}

/** The `node_modules` directory that holds `name` as this package sees it. */
function nodeModulesOf(name: string): string {
  const require = createRequire(import.meta.url);
  const pkg = require.resolve(`${name}/package.json`);
  return path.dirname(path.dirname(pkg));
}

/**
 * Generates `specFile`'s server guard (Express, SQLite store) and client into `dir`, and runnable JavaScript
 * into `<dir>/run`. `source` is the spec name the generated headers show.
 */
export async function generateWorkspace(specFile: string, dir: string, source = path.basename(specFile)): Promise<Workspace> {
  const doc = await loadDocument(specFile);
  const serverFiles = generateServer(doc, { framework: 'express', store: 'sqlite', source });
  const clientFiles = generateClient(doc, { source });
  const serverDir = path.join(dir, 'server');
  const clientDir = path.join(dir, 'client');
  await writeOutput(serverDir, serverFiles);
  await writeOutput(clientDir, clientFiles);
  const run = path.join(dir, 'run');
  await transpileTree(serverDir, path.join(run, 'server'));
  await transpileTree(clientDir, path.join(run, 'client'));
  await writeFile(path.join(run, 'package.json'), JSON.stringify({ type: 'module', private: true }));
  // The generated guard imports `express` and `better-sqlite3`; resolve them from this package's tree.
  await symlink(nodeModulesOf('better-sqlite3'), path.join(dir, 'node_modules'), 'dir');
  return {
    serverDir,
    clientDir,
    serverFiles,
    clientFiles,
    serverEntry: path.join(run, 'server', 'index.js'),
    clientEntry: path.join(run, 'client', 'index.js'),
  };
}

/** Imports a generated entry point. */
export async function importGenerated<T>(file: string): Promise<T> {
  return (await import(pathToFileURL(file).href)) as T;
}
