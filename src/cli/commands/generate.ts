import path from 'node:path';
import type { Argv } from 'yargs';
import type { Framework, StoreKind } from '../../generate/server.js';
import type { ApiDocument, OperationView } from '../../parser/model.js';
import type { CompiledContract } from '../../runtime/contract.js';
import { UsageError } from '../../errors.js';
import type { Command } from '../main.js';
import { displayFile } from '../display.js';
import { nonEmpty } from '../options.js';
import type { CliIo, ExitCode } from '../io.js';

const TARGETS = ['server', 'client'] as const;

// The generator (and handlebars under it) loads inside `run`: `idemkit lint` never pays for it. The choice
// lists are copied here so the builder needs no import; the checks below fail to compile if they drift.
const FRAMEWORKS = ['express', 'fastify', 'fetch'] as const satisfies readonly Framework[];
const STORES = ['sqlite', 'postgres', 'redis', 'memory'] as const satisfies readonly StoreKind[];
type Exhaustive<All, Listed> = [Exclude<All, Listed>] extends [never] ? true : never;
const frameworksListed: Exhaustive<Framework, (typeof FRAMEWORKS)[number]> = true;
const storesListed: Exhaustive<StoreKind, (typeof STORES)[number]> = true;
void frameworksListed;
void storesListed;

/** The spec file name as generated headers show it: relative to the output directory, `/`-separated. */
function sourceName(specFile: string, outDir: string): string {
  return path.relative(outDir, specFile).split(path.sep).join('/');
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
      .option('framework', { choices: FRAMEWORKS, requiresArg: true, describe: 'server: the framework the guards plug into', default: 'express' })
      .option('store', { choices: STORES, requiresArg: true, describe: 'server: where idempotency records live', default: 'sqlite' })
      .option('check', { type: 'boolean', default: false, describe: 'Write nothing; exit 1 when the output directory differs from what would be generated' })
      .example('$0 generate server openapi.yaml --framework express --store postgres --out src/idempotency', '')
      .example('$0 generate client openapi.yaml --out src/api-client', '')
      .example('$0 generate server openapi.yaml --out src/idempotency --check   # CI: exit 1 if stale', ''),
  async run(args: Record<string, unknown>, io: CliIo): Promise<ExitCode> {
    const target = args['target'] as (typeof TARGETS)[number];
    const specFile = path.resolve(io.cwd, String(args['spec']));
    const outArg = String(args['out']);
    const outDir = path.resolve(io.cwd, outArg);
    const [{ loadDocument }, { compileContract }, { checkOutput, writeOutput }, { generateClient }, { generateServer }] = await Promise.all([
      import('../../parser/load.js'),
      import('../../parser/compile.js'),
      import('../../generate/output.js'),
      import('../../generate/client/index.js'),
      import('../../generate/server.js'),
    ]);
    const doc = await loadDocument(specFile);
    const source = sourceName(specFile, outDir);
    const files =
      target === 'server'
        ? generateServer(doc, { framework: args['framework'] as Framework, store: args['store'] as StoreKind, source })
        : generateClient(doc, { source });
    // What lint reports as document-invalid warnings shapes what was generated (a path with a fragment matches no
    // route, a contract on a path item guards nothing): said here too, for whoever generates (or checks) without linting.
    for (const warning of doc.warnings) {
      const { line, column } = warning.position ?? doc.position(warning.at);
      io.stderr(`warning: ${displayFile(io.cwd, warning.at.file)}:${line}:${column}: ${warning.message}\n`);
    }
    if (args['check'] === true) {
      const drift = await checkOutput(outDir, files);
      if (drift.length === 0) {
        io.stdout(`${outArg} is up to date (${files.length} files)\n`);
        return 0;
      }
      for (const item of drift) io.stdout(`${item.kind.padEnd(7)} ${path.posix.join(outArg.split(path.sep).join('/'), item.path)}\n`);
      io.stderr(`${outArg} is stale: ${drift.length} file(s) differ; run the same command without --check\n`);
      return 1;
    }
    await writeOutput(outDir, files);
    io.stdout(`wrote ${files.length} files to ${outArg}\n`);
    for (const note of localEffectNotes(doc, target, compileContract)) io.stderr(`note: ${note}\n`);
    return 0;
  },
};

/**
 * A note for each contract that says nothing of its effect's reach (`effect.external`, here or in the document's
 * defaults): it is generated as a local one, which decides what a handler's 5xx does to the key and what the
 * client repeats.
 */
function localEffectNotes(doc: ApiDocument, target: string, compile: (op: OperationView) => CompiledContract): string[] {
  const notes: string[] = [];
  for (const op of doc.operations) {
    if (op.contract?.enabled !== true || op.contract.effect?.external !== undefined) continue;
    const transient = compile(op).transient.filter((status) => status >= 500);
    const consequence =
      target === 'server'
        ? `${transient.length > 0 ? `a ${transient.join(' or ')} from the handler releases its key, so a retry runs the handler again, and ` : ''}another 5xx ends its lease at once, so a retry goes to reconciliation`
        : 'the client repeats a 5xx or a lost answer with the same key';
    notes.push(
      `${op.label} does not say whether its effect leaves the service (effect.external), so it is generated as a local effect: ${consequence}; ` +
        'if the handler calls another service, write effect: {owner: …, external: true, providerKey: forward|derived|none}',
    );
  }
  return notes;
}
