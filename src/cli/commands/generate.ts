import { realpathSync } from 'node:fs';
import path from 'node:path';
import type { Argv } from 'yargs';
import type { ImportExtension } from '../../generate/output.js';
import type { Framework, StoreKind } from '../../generate/server.js';
import type { ApiDocument, OperationView } from '../../parser/model.js';
import type { Finding } from '../../lint/rule.js';
import type { CompiledContract } from '../../runtime/contract.js';
import { UsageError } from '../../errors.js';
import type { Command } from '../main.js';
import { displayPath } from '../display.js';
import { nonEmpty } from '../options.js';
import type { CliIo, ExitCode } from '../io.js';
import { printable } from '../../parser/printable.js';

const TARGETS = ['server', 'client'] as const;

// The generator (and handlebars under it) loads inside `run`: `idemkit lint` never pays for it. The choice
// lists are copied here so the builder needs no import; the checks below fail to compile if they drift.
const FRAMEWORKS = ['express', 'fastify', 'fetch'] as const satisfies readonly Framework[];
const STORES = ['sqlite', 'postgres', 'redis', 'memory'] as const satisfies readonly StoreKind[];
const IMPORT_EXTENSIONS = ['js', 'ts', 'none'] as const satisfies readonly ImportExtension[];
type Exhaustive<All, Listed> = [Exclude<All, Listed>] extends [never] ? true : never;
const frameworksListed: Exhaustive<Framework, (typeof FRAMEWORKS)[number]> = true;
const storesListed: Exhaustive<StoreKind, (typeof STORES)[number]> = true;
const extensionsListed: Exhaustive<ImportExtension, (typeof IMPORT_EXTENSIONS)[number]> = true;
void frameworksListed;
void storesListed;
void extensionsListed;

/**
 * The spec file name as generated headers show it: relative to the output directory, `/`-separated — between their
 * real paths, so a spec or output reached through a symlink (a shell's `$PWD` keeps the link, Node resolves it) names
 * the same file, and `--check` finds no drift where there is none (a review's: all 18 files "changed").
 */
function sourceName(specFile: string, outDir: string): string {
  return path.relative(realPath(outDir), realPath(specFile)).split(path.sep).join('/');
}

/** `file` with symlinks resolved as far as it exists (an output directory not made yet keeps the rest as written). */
function realPath(file: string): string {
  const absolute = path.resolve(file);
  for (let base = absolute, rest = ''; ; ) {
    try {
      return path.join(realpathSync(base), rest);
    } catch {
      const parent = path.dirname(base);
      if (parent === base) return absolute;
      rest = path.join(path.basename(base), rest);
      base = parent;
    }
  }
}

/**
 * `idemkit generate server|client <spec> --out DIR [--check]`: writes the generated files atomically, or with
 * `--check` lists the drift and exits 1. A bad document is a DocumentError (exit 2, one line).
 */
export const generateCommand: Command = {
  command: 'generate <target> <spec>',
  documents: 'spec',
  missingArguments: 'name what to generate (server or client) and the OpenAPI document',
  describe: 'Generate server guards or a retrying client from the x-idempotency contracts of an OpenAPI document',
  builder: (y: Argv) =>
    y
      .positional('target', { choices: TARGETS, describe: 'What to generate', demandOption: true })
      .positional('spec', { type: 'string', describe: 'OpenAPI document (JSON or YAML)', demandOption: true })
      .option('out', { type: 'string', demandOption: true, requiresArg: true, coerce: nonEmpty('--out'), describe: 'Output directory (replaced whole; generated files only)' })
      // No yargs defaults for the server's options: `generate client` must tell one given from one left out.
      .option('framework', { choices: FRAMEWORKS, requiresArg: true, describe: 'server: the framework the guards plug into (default: express)' })
      .option('store', { choices: STORES, requiresArg: true, describe: 'server: where idempotency records live (default: sqlite)' })
      .option('import-extension', {
        choices: IMPORT_EXTENSIONS,
        requiresArg: true,
        default: 'js',
        describe:
          'How the generated files import each other: js (./x.js: tsc with NodeNext, Node, Bun), none (./x: Next.js and other bundlers; tsc with moduleResolution bundler), ts (./x.ts: Deno, Node type stripping)',
      })
      .option('check', { type: 'boolean', default: false, describe: 'Write nothing; exit 1 when the output directory differs from what would be generated' })
      .option('config', {
        alias: 'c',
        type: 'string',
        requiresArg: true,
        coerce: nonEmpty('--config'),
        describe: 'server: the lint config whose rule levels decide which unsafe contracts are refused (default: found upward from the spec, as lint finds it)',
      })
      .example('$0 generate server openapi.yaml --framework express --store postgres --out src/idempotency', '')
      .example('$0 generate client openapi.yaml --out src/api-client', '')
      .example('$0 generate server openapi.yaml --framework fetch --import-extension none --out lib/idempotency   # Next.js', '')
      .example('$0 generate server openapi.yaml --out src/idempotency --check   # CI: exit 1 if stale', ''),
  async run(args: Record<string, unknown>, io: CliIo): Promise<ExitCode> {
    const target = args['target'] as (typeof TARGETS)[number];
    if (target === 'client') {
      // A client has no framework, store or refusing config: one given was meant for something — said, not ignored
      // (a `--config` naming a file that is not there passed silently).
      const serverOnly = ['framework', 'store', 'config'].filter((name) => args[name] !== undefined).map((name) => `--${name}`);
      if (serverOnly.length > 0) {
        io.stderr(`idemkit generate client: ${serverOnly.join(', ')} ${serverOnly.length === 1 ? 'is an option' : 'are options'} of generate server only; leave ${serverOnly.length === 1 ? 'it' : 'them'} out for a client\n`);
        return 2;
      }
    }
    const specFile = path.resolve(io.cwd, String(args['spec']));
    const outArg = String(args['out']);
    const outDir = path.resolve(io.cwd, outArg);
    const [{ loadDocument }, { compileContract, CONTRACT_DEFAULTS }, { checkOutput, withImportExtension, writeOutput }, { generateClient }, { generateServer }, { toIdentifier }] = await Promise.all([
      import('../../parser/load.js'),
      import('../../parser/compile.js'),
      import('../../generate/output.js'),
      import('../../generate/client/index.js'),
      import('../../generate/server.js'),
      import('../../generate/render.js'),
    ]);
    const doc = await loadDocument(specFile);
    let acceptedRisks: readonly Accepted[] = [];
    if (target === 'server') {
      const { refused: unsafe, accepted } = await unsafeContracts(doc, io.cwd, args['config'] === undefined ? undefined : String(args['config']));
      acceptedRisks = accepted;
      if (unsafe.length > 0) {
        for (const finding of unsafe) io.stderr(`${printable(`error: ${displayPath(io.cwd, finding.file)}:${finding.line}:${finding.column}: ${finding.message} (${finding.ruleId})`)}\n`);
        io.stderr(
          `refused: ${unsafe.length === 1 ? 'this contract' : 'these contracts'} would make a guard that replays one caller's answer to another or runs an effect twice; ` +
            'fix the contract (idemkit explain <rule> says how), or, to accept the risk, set the rule to off or warn in .idemkitrc.yaml or suppress it on the operation with a reason. Nothing was written.\n',
        );
        return 2;
      }
    }
    const source = sourceName(specFile, outDir);
    const files = withImportExtension(
      target === 'server'
        ? generateServer(doc, { framework: (args['framework'] ?? 'express') as Framework, store: (args['store'] ?? 'sqlite') as StoreKind, source })
        : generateClient(doc, { source }),
      args['import-extension'] as ImportExtension,
    );
    // What lint reports as document-invalid warnings shapes what was generated (a path with a fragment matches no
    // route, a contract on a path item guards nothing): said here too, for whoever generates (or checks) without linting.
    for (const warning of doc.warnings) {
      const { line, column } = warning.position ?? doc.position(warning.at);
      io.stderr(`${printable(`warning: ${displayPath(io.cwd, warning.at.file)}:${line}:${column}: ${warning.message}`)}\n`);
    }
    // What the regenerated guards do to requests the previous ones took (a rolling deploy, keys still within their TTL).
    const deploy = target === 'server' ? await deployWarnings(outDir, files) : [];
    if (args['check'] === true) {
      for (const note of deploy) io.stderr(`${printable(`warning: ${note}`)}\n`);
      const drift = await checkOutput(outDir, files).catch((error: unknown) => {
        throw fileSystemProblem(error, 'read', outArg, io.cwd) ?? error;
      });
      if (drift.length === 0) {
        io.stdout(`${outArg} is up to date (${files.length} files)\n`);
        return 0;
      }
      for (const item of drift) io.stdout(`${item.kind.padEnd(7)} ${path.posix.join(outArg.split(path.sep).join('/'), item.path)}\n`);
      io.stderr(`${outArg} is stale: ${drift.length} file(s) differ; run the same command without --check\n`);
      return 1;
    }
    const written = await writeOutput(outDir, files, io.cwd).catch((error: unknown) => {
      throw fileSystemProblem(error, 'write', outArg, io.cwd) ?? error;
    });
    io.stdout(`wrote ${files.length} files to ${outArg}\n`);
    for (const note of deploy) io.stderr(`${printable(`warning: ${note}`)}\n`);
    if (written.leftover !== undefined) {
      const { code, message } = written.leftover.error as NodeJS.ErrnoException;
      io.stderr(`warning: the previous ${outArg} could not be removed and is kept as ${displayPath(io.cwd, written.leftover.path)} (${code ?? message}); remove it by hand\n`);
    }
    for (const note of localEffectNotes(doc, target, compileContract)) io.stderr(`note: ${note}\n`);
    if (target === 'server') for (const note of optionalKeyNotes(doc, compileContract)) io.stderr(`note: ${note}\n`);
    for (const note of defaultedNotes(doc, target, CONTRACT_DEFAULTS)) io.stderr(`note: ${note}\n`);
    for (const note of sharedNameNotes(doc, target, toIdentifier)) io.stderr(`${printable(`note: ${note}`)}\n`);
    // What the guards were made with anyway, so that accepting a risk is never silent.
    for (const { finding, why } of acceptedRisks) {
      io.stderr(`${printable(`note: ${displayPath(io.cwd, finding.file)}:${finding.line}:${finding.column}: ${finding.message} (${finding.ruleId}); generated anyway: ${why}`)}\n`);
    }
    return 0;
  },
};

/** What the file system said, for the errors a user can fix: permissions, space, a file in the path. */
const FILE_SYSTEM_PROBLEMS: Readonly<Record<string, string>> = {
  EACCES: 'permission denied',
  EPERM: 'the operation is not permitted (an immutable or protected directory?)',
  ENOSPC: 'no space left on the device',
  EDQUOT: 'the disk quota is used up',
  EROFS: 'the file system is read-only',
  ENOTDIR: 'a part of the path is a file, not a directory',
  // mkdir of a path through a link to nothing, or in a file system that makes no directories (/proc).
  ENOENT: 'a part of the path is a link to nothing, or the file system makes no directories there',
  EEXIST: 'a part of the path is a file, not a directory',
  ENAMETOOLONG: 'the path is too long',
  ELOOP: 'a symbolic link loop in the path',
  EBUSY: 'the directory is busy (a mount point?)',
  EFBIG: 'a file would pass the size limit (ulimit -f) or the file system\'s largest file',
  EMFILE: 'too many open files (ulimit -n)',
  ENOTEMPTY: 'another run replaced the directory at the same time (one generate per --out at a time)',
  EIO: 'an input/output error of the device',
};

/** A {@link UsageError} for a file-system error of reading or writing `--out`, or `undefined` for any other error. */
function fileSystemProblem(error: unknown, doing: 'read' | 'write', outArg: string, cwd: string): UsageError | undefined {
  const { code, path: where } = (error ?? {}) as NodeJS.ErrnoException;
  // Any other error the file system names with a code and a call is still the file system's, not idemkit's.
  const why = code === undefined ? undefined : (FILE_SYSTEM_PROBLEMS[code] ?? ((error as NodeJS.ErrnoException).syscall !== undefined ? 'the file system refused it' : undefined));
  if (why === undefined) return undefined;
  const at = where === undefined ? '' : ` at ${displayPath(cwd, where)}`;
  return new UsageError(`cannot ${doing} --out ${outArg}: ${why} (${code}${at}) — ${doing === 'write' ? 'nothing was written; ' : ''}fix it or choose another --out`);
}

/**
 * Lint rules whose error means the generated guard itself is unsafe, not only the document: a scope that lets one
 * owner's key reach another's record (a replay of their answer), or a retention or lease under which a record can
 * go while a retry may still come or the effect still runs (a second effect). Not among them: `scope-unresolvable`
 * (the guard answers 400 to a request without the part, it never widens the scope), `ttl-missing` and
 * `lease-missing` (the guard keeps a day and leases 30 s: safe, only undocumented for clients), and `scope-missing`
 * on an operation without security (no owners to keep apart: its keys are one space, as `global` says).
 */
const GUARD_SAFETY_RULES: ReadonlySet<string> = new Set(['scope-missing', 'scope-too-wide', 'ttl-invalid', 'ttl-below-retry-budget', 'lease-exceeds-ttl']);

/** A finding of {@link GUARD_SAFETY_RULES} that does not stop `generate server`, and why. */
interface Accepted {
  readonly finding: Finding;
  readonly why: string;
}

/**
 * The findings of {@link GUARD_SAFETY_RULES} on `doc`, under the lint config that applies to it (its rule levels and
 * the document's suppressions count, as in `idemkit lint`), in report order (the engine's): the errors that refuse
 * the guard, and those accepted — set to `warn` in the config, suppressed with a reason, or `scope-missing` on an
 * operation without security — which are said as notes.
 */
async function unsafeContracts(doc: ApiDocument, cwd: string, configFile: string | undefined): Promise<{ refused: readonly Finding[]; accepted: readonly Accepted[] }> {
  const [{ catalogue }, { createConfigResolver, lintWithConfig }, { effectiveSecurity }] = await Promise.all([
    import('../../lint/catalogue.js'),
    import('../../lint/pipeline.js'),
    import('../../lint/views.js'),
  ]);
  const all = catalogue();
  const config = createConfigResolver({ cwd, ...(configFile === undefined ? {} : { configFile }), knownRuleIds: all.map((rule) => rule.meta.id) })(doc.file);
  const rules = all.filter((rule) => GUARD_SAFETY_RULES.has(rule.meta.id));
  const secured = new Set(doc.operations.filter((op) => effectiveSecurity(doc, op).secured).map((op) => op.label));
  const refused: Finding[] = [];
  const accepted: Accepted[] = [];
  for (const finding of lintWithConfig(doc, rules, config)) {
    // The engine adds the document's own warnings (`document-invalid`): generate prints those as warnings already.
    if (!GUARD_SAFETY_RULES.has(finding.ruleId)) continue;
    if (finding.suppressed !== undefined) accepted.push({ finding, why: `suppressed on the operation (${finding.suppressed.reason})` });
    else if (finding.severity !== 'error') accepted.push({ finding, why: `the lint config sets ${finding.ruleId} to ${finding.severity}` });
    else if (finding.ruleId === 'scope-missing' && !(finding.operationLabels ?? []).some((label) => secured.has(label))) {
      accepted.push({ finding, why: 'the operation names no security, so every caller shares its keys (as `scope: [global]` says); give it a scope if callers are told apart another way' });
    } else refused.push(finding);
  }
  return { refused, accepted };
}

/**
 * A note on the contracts that say nothing of their effect's reach (`effect.external`, here or in the document's
 * defaults): they are generated as local ones, which decides what a handler's 5xx does to the key and what the
 * client repeats. One note per consequence: alone, an operation gets a sentence of its own; several share one,
 * with the fix said once and their labels listed one per line (a big document would otherwise repeat it for each).
 */
/**
 * A note on the operations whose operationIds make one identifier (`create_charge`, `create-charge`, `createCharge`;
 * an unnamed `POST /charges` and `postCharges`): they are numbered in operationId order, so adding or renaming one
 * of them moves the names — an app that mounts `guards.createCharge` would then guard another operation (another
 * payload's replay), and `client.createCharge` call another endpoint, with nothing for the compiler to see.
 */
function sharedNameNotes(doc: ApiDocument, target: string, toIdentifier: (text: string) => string): string[] {
  const byName = new Map<string, string[]>();
  for (const op of doc.operations) {
    if (target === 'server' && op.contract?.enabled !== true) continue;
    const id = op.operationId ?? `${op.method.toUpperCase()} ${op.path}`;
    const name = toIdentifier(id);
    byName.set(name, [...(byName.get(name) ?? []), id]);
  }
  const notes: string[] = [];
  for (const [name, ids] of byName) {
    if (ids.length < 2) continue;
    const sorted = [...ids].sort();
    notes.push(
      `${sorted.map((id) => JSON.stringify(id)).join(', ')} all make the name ${name}: they are numbered in operationId order (${name}, ${name}2, …), ` +
        'so adding or renaming one of them gives its name to another operation, which the compiler cannot see; give them operationIds that differ in more than case and punctuation',
    );
  }
  return notes;
}

function localEffectNotes(doc: ApiDocument, target: string, compile: (op: OperationView) => CompiledContract): string[] {
  const byConsequence = new Map<string, string[]>();
  for (const op of doc.operations) {
    if (op.contract?.enabled !== true || op.contract.effect?.external !== undefined) continue;
    const transient = compile(op).transient.filter((status) => status >= 500);
    const consequence =
      target === 'server'
        ? `${transient.length > 0 ? `a ${transient.join(' or ')} from the handler releases its key, so a retry runs the handler again, and ` : ''}another 5xx ends its lease at once, so a retry goes to reconciliation`
        : 'the client repeats a 5xx or a lost answer with the same key';
    const labels = byConsequence.get(consequence);
    if (labels === undefined) byConsequence.set(consequence, [printable(op.label)]);
    else labels.push(printable(op.label));
  }
  const fix = 'write effect: {owner: …, external: true, providerKey: forward|derived|none}';
  return [...byConsequence].map(([consequence, labels]) =>
    labels.length === 1
      ? `${labels[0]!} does not say whether its effect leaves the service (effect.external), so it is generated as a local effect: ${consequence}; ` +
        `if the handler calls another service, ${fix}`
      : `${labels.length} operations do not say whether their effect leaves the service (effect.external), so they are generated as local effects: ` +
        `${consequence}; where a handler calls another service, ${fix} on its operation (or once in the document's x-idempotency defaults):\n` +
        labels.map((label) => `  ${label}`).join('\n'),
  );
}

/** The defaults {@link defaultedNotes} names. */
type Defaults = { readonly ttlMs: number; readonly leaseMs: number; readonly retry: { readonly deadlineMs: number; readonly maxAttempts: number } };

/**
 * The deploy notes (see `generate/deploy-notes.ts`) for the contracts `generate` wrote into `outDir` before, against
 * the ones it writes now; none when there is no such file or it cannot be read as one.
 */
async function deployWarnings(outDir: string, files: readonly { readonly path: string; readonly contents: string }[]): Promise<string[]> {
  const next = files.find((file) => file.path === 'contracts.ts');
  if (next === undefined) return [];
  const [{ readFile }, { contractsIn, deployNotes }] = await Promise.all([import('node:fs/promises'), import('../../generate/deploy-notes.js')]);
  let previous: string;
  try {
    previous = await readFile(path.join(outDir, 'contracts.ts'), 'utf8');
  } catch {
    return [];
  }
  const before = contractsIn(previous);
  const after = contractsIn(next.contents);
  if (before === undefined || after === undefined) return [];
  try {
    return deployNotes(before, after);
  } catch {
    // A previous file edited by hand into a shape the notes do not foresee: no notes, never a failed generate.
    return [];
  }
}

/** `ms` as an ISO 8601 duration, as a contract writes it: `P1D`, `PT30S`, `PT0.5S`. */
function isoDuration(ms: number): string {
  return ms % 86_400_000 === 0 ? `P${ms / 86_400_000}D` : `PT${ms / 1000}S`;
}

/**
 * A note on the contracts that leave out what the generated code runs by — the guard's `ttl` and `lease`, the
 * client's `retry.deadline` and `retry.maxAttempts` (lint's ttl-missing, lease-missing, retry-budget-missing):
 * the defaults they get, said where the code is made, so that a retention or lease nobody chose is never silent.
 */
function defaultedNotes(doc: ApiDocument, target: string, defaults: Defaults): string[] {
  const byDefaults = new Map<string, string[]>();
  for (const op of doc.operations) {
    const contract = op.contract;
    if (contract?.enabled !== true) continue;
    const left: [what: string, used: string][] = [];
    if (target === 'server') {
      if (contract.ttl === undefined) left.push(['how long a replay is kept', `ttl ${isoDuration(defaults.ttlMs)}`]);
      if (contract.lease === undefined) left.push(['how long a crashed request holds its key', `lease ${isoDuration(defaults.leaseMs)}`]);
    } else {
      if (contract.retry?.deadline === undefined) left.push(['how long the client retries', `retry.deadline ${isoDuration(defaults.retry.deadlineMs)}`]);
      if (contract.retry?.maxAttempts === undefined) left.push(['how often it tries', `retry.maxAttempts ${defaults.retry.maxAttempts}`]);
    }
    if (left.length === 0) continue;
    const key = `${left.map(([what]) => what).join(' and ')}: generated with ${left.map(([, used]) => used).join(', ')}`;
    const labels = byDefaults.get(key);
    if (labels === undefined) byDefaults.set(key, [printable(op.label)]);
    else labels.push(printable(op.label));
  }
  return [...byDefaults].map(([said, labels]) =>
    labels.length === 1
      ? `${labels[0]!} leaves out ${said}; write it in its x-idempotency`
      : `${labels.length} operations leave out ${said}; write it in their x-idempotency (or once in the document's defaults):\n${labels.map((label) => `  ${label}`).join('\n')}`,
  );
}

/**
 * A note on the contracts whose key is optional (`key.required: false`, lint's `key-optional`): their guards let a
 * request without a key through unguarded, so its retry runs the handler again. One line for one operation; several
 * share one, their labels one per line.
 */
function optionalKeyNotes(doc: ApiDocument, compile: (op: OperationView) => CompiledContract): string[] {
  const labels = doc.operations.filter((op) => op.contract?.enabled === true && !compile(op).key.required).map((op) => printable(op.label));
  if (labels.length === 0) return [];
  const what = 'a request without a key runs unguarded, so a retry of it (an SDK retrying a 502 or a lost answer) runs the handler again; require the key where clients can send one (idemkit explain key-optional)';
  return [
    labels.length === 1
      ? `${labels[0]!} takes requests without a key (key.required: false): ${what}`
      : `${labels.length} operations take requests without a key (key.required: false): ${what}:\n${labels.map((label) => `  ${label}`).join('\n')}`,
  ];
}
