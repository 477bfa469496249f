/**
 * `idemkit generate server`: the view model of a document's contracted operations, the runtime files a
 * framework + store target needs, and the rendered file set.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { ApiDocument, Location, OperationView } from '../parser/model.js';
import type { CompiledContract } from '../runtime/contract.js';
import { compileContract } from '../parser/compile.js';
import { DocumentError, UsageError } from '../errors.js';
import { documentServers, operationServer } from './client/servers.js';
import { isBasePath } from '../runtime/adapters/fastify-routes.js';
import { fileSet, generatedHeader, runtimeClosure, runtimeFiles, type OutputFile } from './output.js';
import { OBJECT_PROTOCOL_NAMES, packageRoot, renderTemplate, toIdentifier } from './render.js';

/** Frameworks a guard can be generated for. */
export const FRAMEWORKS = ['express', 'fastify', 'fetch'] as const;
/** One of {@link FRAMEWORKS}. */
export type Framework = (typeof FRAMEWORKS)[number];

/** Stores a guard can keep its records in. */
export const STORES = ['sqlite', 'postgres', 'redis', 'memory'] as const;
/** One of {@link STORES}. */
export type StoreKind = (typeof STORES)[number];

/** Options of {@link generateServer}. */
export interface ServerOptions {
  readonly framework: Framework;
  readonly store: StoreKind;
  /** The spec's file name as it should appear in the generated header (relative, `/`-separated). */
  readonly source: string;
}

/** One contracted operation as the templates see it. */
export interface GuardOperation {
  readonly operationId: string;
  /** `METHOD /path (operationId)`. */
  readonly label: string;
  /** Unique identifier of the operation: the property of `createGuards()`'s result. */
  readonly name: string;
  /** Unique identifier of the guard factory export in `guards.ts` (`<name>Guard`). */
  readonly guardName: string;
  /** Unique identifier of the contract constant in `contracts.ts` (`<name>Contract`). */
  readonly contractName: string;
  readonly contract: CompiledContract;
}

/** Everything the server templates render from. */
export interface ServerModel {
  readonly framework: Framework;
  readonly store: StoreKind;
  /** Module specifier of the framework adapter, relative to the output root. */
  readonly adapterModule: string;
  /** Module specifier of the store backend, relative to the output root. */
  readonly storeModule: string;
  readonly operations: readonly GuardOperation[];
}

/**
 * The runtime files (paths under `src/runtime/`) a framework + store target needs, sorted: the adapter,
 * the store backend, the contract type and whatever they import.
 */
export function serverRuntimeFiles(framework: Framework, store: StoreKind): string[] {
  return runtimeClosure(['contract.ts', `adapters/${framework}.ts`, `stores/${store}.ts`]);
}

function isContracted(op: OperationView): boolean {
  return op.contract !== undefined && op.contract.enabled;
}

/** The first reason a contract cannot become a guard (a guard must never run on silently defaulted values). */
function contractProblem(op: OperationView): { at: Location; message: string } | undefined {
  const contract = op.contract!;
  const [schemaError] = contract.schemaErrors;
  if (schemaError !== undefined) return schemaError;
  for (const name of ['ttl', 'lease'] as const) {
    const duration = contract[name];
    if (duration !== undefined && duration.raw !== undefined && duration.ms === undefined) {
      return { at: contract.at(name), message: `${name} ${JSON.stringify(duration.raw)} is not an ISO 8601 duration (e.g. PT30S, P1D)` };
    }
  }
  if (contract.key.pattern !== undefined) {
    try {
      new RegExp(contract.key.pattern);
    } catch (error) {
      return { at: contract.at('key', 'pattern'), message: `key.pattern is not a valid regular expression (${(error as Error).message})` };
    }
  }
  return undefined;
}

/**
 * Throws a {@link DocumentError} (file:line:column) for the first contracted operation whose contract is
 * invalid: generating from it would fall back to defaults the author did not choose.
 */
export function assertContractsGeneratable(doc: ApiDocument): void {
  // The record id hashes the operationId: two operations sharing one would share each other's keys.
  const seen = new Map<string, OperationView>();
  for (const op of doc.operations.filter(isContracted)) {
    const id = op.operationId ?? `${op.method.toUpperCase()} ${op.path}`;
    const first = seen.get(id);
    if (first === undefined) {
      seen.set(id, op);
      continue;
    }
    const at: Location = { file: op.at.file, pointer: `${op.at.pointer}/operationId` };
    const position = doc.position(at);
    throw new DocumentError(
      `${op.label}: operationId ${JSON.stringify(id)} is also the operationId of ${first.label}; the guard keys records by operationId, so the two would share idempotency keys — give each operation a unique operationId`,
      at.file,
      at.pointer,
      position.line,
      position.column,
    );
  }
  assertContractsValid(doc);
}

/**
 * Throws a {@link DocumentError} (file:line:column) for the first contracted operation whose contract breaks the
 * schema (or holds a duration or key pattern the code cannot use): a guard or a client made from it would run on
 * defaults its author did not choose (`maxAttempts: 0`, `external: "true"` read as a local effect).
 */
export function assertContractsValid(doc: ApiDocument): void {
  for (const op of doc.operations.filter(isContracted)) {
    const problem = contractProblem(op);
    if (problem === undefined) continue;
    const position = doc.position(problem.at);
    throw new DocumentError(
      `${op.label}: ${problem.message} — fix the x-idempotency contract (idemkit lint lists every problem)`,
      problem.at.file,
      problem.at.pointer,
      position.line,
      position.column,
    );
  }
}

/**
 * The paths `doc` serves `op` under, other than the root, in document order without repeats: the path of the
 * operation's own 3.x server (operation- or path-level `servers`, the one a generated client uses) when it has
 * one, else of each document server (3.x `servers`, Swagger 2.0 `basePath`). Queries are not part of a path.
 */
function basePathsOf(doc: ApiDocument, op: OperationView): string[] {
  // '' is no server URL, so operationServer answers the operation's own server whenever it has one.
  const own = operationServer(doc, op);
  const urls = own !== null ? [own] : documentServers(doc).servers.map((server) => server.url);
  // Decoded, as routers are written and match them (`/café`, not `/caf%C3%A9`).
  const paths = urls.map((url) => decodedPath(new URL(url, 'http://localhost/').pathname).replace(/\/+$/, ''));
  return [...new Set(paths)].filter((path) => path !== '');
}

/**
 * A URL path with its percent-escapes decoded (`/caf%C3%A9` → `/café`), or as it is when decoding would make it
 * something a base path cannot be (`%20`, `%3F`, `%2F`: a space, a query, another segment) or an escape is malformed.
 */
function decodedPath(path: string): string {
  let decoded: string;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    return path;
  }
  return !isBasePath(decoded) || decoded.split('/').length !== path.split('/').length ? path : decoded;
}

/** The compiled contract with the operation's base paths after its path, when it has any. */
function withBasePaths(contract: CompiledContract, basePaths: readonly string[]): CompiledContract {
  if (basePaths.length === 0) return contract;
  const { operationId, method, path, ...rest } = contract;
  return { operationId, method, path, basePaths, ...rest };
}

/**
 * Builds the view model: every operation with an enabled `x-idempotency` contract, compiled, with unique
 * identifiers, sorted by operationId so the output does not depend on document order.
 */
export function buildServerModel(doc: ApiDocument, options: Omit<ServerOptions, 'source'>): ServerModel {
  assertContractsGeneratable(doc);
  const compiled = doc.operations.filter(isContracted).map((op) => ({ op, contract: withBasePaths(compileContract(op, doc), basePathsOf(doc, op)) }));
  compiled.sort((a, b) => compare(a.contract.operationId, b.contract.operationId) || compare(a.contract.path, b.contract.path));
  // Every name the generated modules declare, import or export besides the operations' own: a guard named
  // `createRouteGuard` (operationId `createRoute`) would clash with the import and index.ts's `export *`.
  const taken = new Set<string>([
    ...GENERATED_LOCALS,
    ...OBJECT_PROTOCOL_NAMES,
    ...exportedNames(readFileSync(path.join(packageRoot(), 'templates', 'server', 'index.ts.hbs'), 'utf8')),
    ...[`adapters/${options.framework}.ts`, `stores/${options.store}.ts`].flatMap((name) =>
      exportedNames(readFileSync(path.join(packageRoot(), 'src', 'runtime', ...name.split('/')), 'utf8')),
    ),
  ]);
  const operations = compiled.map(({ op, contract }) => {
    const base = toIdentifier(contract.operationId);
    let name = base;
    for (let n = 2; [name, `${name}Guard`, `${name}Contract`].some((id) => taken.has(id)); n += 1) name = `${base}${n}`;
    for (const id of [name, `${name}Guard`, `${name}Contract`]) taken.add(id);
    return {
      operationId: contract.operationId,
      label: op.label,
      name,
      guardName: `${name}Guard`,
      contractName: `${name}Contract`,
      contract,
    };
  });
  return {
    framework: options.framework,
    store: options.store,
    adapterModule: `./runtime/adapters/${options.framework}.js`,
    storeModule: `./runtime/stores/${options.store}.js`,
    operations,
  };
}

/** What guards.ts and contracts.ts declare or import themselves. */
const GENERATED_LOCALS = ['contracts', 'createGuards', 'Guards', 'GuardOptions', 'createRouteGuard', 'RouteGuard', 'RouteGuardOptions', 'CompiledContract'];

/** The names a TypeScript module's text exports by declaration or in an `export { … }` list (aliases by their exported name). */
export function exportedNames(text: string): string[] {
  const names: string[] = [];
  for (const match of text.matchAll(/^export\s+(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?(?:function\*?|class|const|let|var|type|interface|enum)\s+([A-Za-z_$][\w$]*)/gm)) {
    names.push(match[1]!);
  }
  for (const match of text.matchAll(/^export\s+(?:type\s+)?\{([^}]*)\}/gm)) {
    for (const item of match[1]!.split(',')) {
      const words = item.trim().replace(/^type\s+/, '').split(/\s+as\s+/);
      const name = words[words.length - 1]!.trim();
      if (/^[A-Za-z_$][\w$]*$/.test(name)) names.push(name);
    }
  }
  return names;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The complete output of `generate server`: runtime files plus `contracts.ts`, `guards.ts` and `index.ts`.
 * Throws UsageError when the document has no contracted operation.
 */
export function generateServer(doc: ApiDocument, options: ServerOptions): OutputFile[] {
  if (!(FRAMEWORKS as readonly string[]).includes(options.framework)) {
    throw new UsageError(`unknown framework ${JSON.stringify(options.framework)}; use one of ${FRAMEWORKS.join(', ')}`);
  }
  if (!(STORES as readonly string[]).includes(options.store)) {
    throw new UsageError(`unknown store ${JSON.stringify(options.store)}; use one of ${STORES.join(', ')}`);
  }
  const model = buildServerModel(doc, options);
  if (model.operations.length === 0) {
    throw new UsageError('no operation has an x-idempotency contract, so there is no guard to generate', doc.file);
  }
  const header = generatedHeader(options.source);
  return fileSet([
    ...runtimeFiles(serverRuntimeFiles(options.framework, options.store), options.source),
    { path: 'contracts.ts', contents: header + renderTemplate('server/contracts.ts', model) },
    { path: 'guards.ts', contents: header + renderTemplate('server/guards.ts', model) },
    { path: 'index.ts', contents: header + renderTemplate('server/index.ts', model) },
  ]);
}
