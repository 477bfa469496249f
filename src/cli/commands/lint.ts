/**
 * `idemkit lint <files..>`: load each document, run the rule catalogue, print one report, and exit 0 (nothing
 * at or above `--fail-on`), 1 (findings) or 2 (an unreadable or invalid document). The parser loads `yaml`
 * and `ajv` only when a document needs them, so importing this module stays cheap.
 */
import { realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import type { Argv } from 'yargs';
import { DocumentError, UsageError } from '../../errors.js';
import { catalogue } from '../../lint/catalogue.js';
import { compareFindings } from '../../lint/engine.js';
import { baselineStep, createConfigResolver, lintWithConfig } from '../../lint/pipeline.js';
import { writeUserFile } from '../../lint/output-file.js';
import { landingPath } from '../../lint/write-file.js';
import { formatNames, isFormatName, loadFormatter } from '../../lint/formatters/index.js';
import type { DocumentFailure } from '../../lint/formatters/common.js';
import { repositoryRoot } from '../../lint/formatters/paths.js';
import type { Finding, Severity } from '../../lint/rule.js';
import { loadDocument } from '../../parser/load.js';
import type { ApiDocument } from '../../parser/model.js';
import { SourceCache } from '../../parser/source.js';
import { describeDocumentError, displayPath } from '../display.js';
import { standardStream, type CliIo, type ExitCode } from '../io.js';
import type { Command } from '../main.js';
import { nonEmpty } from '../options.js';

const SEVERITY_RANK: Record<Severity, number> = { info: 0, warn: 1, error: 2 };

/** The parsed options of one `idemkit lint` run. */
export interface LintArgs {
  readonly files: readonly string[];
  readonly format: string;
  readonly failOn: Severity;
  readonly verbose: boolean;
  /** `--config FILE`: use this config for every spec instead of discovering one. */
  readonly config?: string;
  /** `--baseline FILE`: report only findings the baseline does not know. */
  readonly baseline?: string;
  /** `--write-baseline FILE`: record today's findings as the baseline. */
  readonly writeBaseline?: string;
  /** `--output FILE`: write the report there (atomically) instead of stdout. */
  readonly output?: string;
}

/** Reads yargs' result into {@link LintArgs}. */
export function readLintArgs(args: Record<string, unknown>): LintArgs {
  return {
    files: ((args.files as unknown[] | undefined) ?? []).map(String),
    format: String(args.format ?? 'stylish'),
    failOn: (args.failOn ?? args['fail-on'] ?? 'error') as Severity,
    verbose: args.verbose === true,
    config: optionalString(args.config),
    baseline: optionalString(args.baseline),
    writeBaseline: optionalString(args.writeBaseline ?? args['write-baseline']),
    output: optionalString(args.output),
  };
}

function optionalString(value: unknown): string | undefined {
  return value === undefined || value === null ? undefined : String(value);
}

/** The files a run writes, with the option that names each: the report (not a standard stream) and the baseline. */
function writtenFiles(options: LintArgs, cwd: string): { readonly flag: string; readonly file: string }[] {
  const targets: { flag: string; file: string }[] = [];
  if (options.output !== undefined && options.output !== '-') {
    const file = path.resolve(cwd, options.output);
    if (standardStream(file) === undefined) targets.push({ flag: '--output', file });
  }
  if (options.writeBaseline !== undefined) {
    const file = path.resolve(cwd, options.writeBaseline);
    if (targets.some((target) => sameFile(target.file, file))) throw new UsageError(`--output and --write-baseline name the same file (${options.writeBaseline}) — give each its own`);
    targets.push({ flag: '--write-baseline', file });
  }
  return targets;
}

/** Refuses to write any of `targets` over one of `inputs`. */
function refuseOverwrite(targets: readonly { readonly flag: string; readonly file: string }[], inputs: readonly string[], cwd: string): void {
  for (const target of targets) {
    const input = inputs.find((file) => sameFile(target.file, file));
    if (input !== undefined) {
      const [written, read] = [displayPath(cwd, target.file), displayPath(cwd, input)];
      throw new UsageError(`${target.flag} ${written} is ${written === read ? 'a file this run reads' : `the file ${read}, which this run reads`} — writing there would replace it; name another file`);
    }
  }
}

/**
 * Whether two paths are one file: the same path, the same file once links are followed (also a link to a file not
 * there yet: writing through it creates that file), or (both existing) the same device and inode.
 */
function sameFile(a: string, b: string): boolean {
  if (a === b || linkTarget(a) === linkTarget(b)) return true;
  try {
    const [x, y] = [statSync(a), statSync(b)];
    return x.dev === y.dev && x.ino === y.ino;
  } catch {
    return false;
  }
}

/** Where writing `file` lands ({@link landingPath}), in its real directory; `file` itself when that cannot be told. */
function linkTarget(file: string): string {
  let target: string;
  try {
    target = landingPath(file);
  } catch {
    return file;
  }
  try {
    return path.join(realpathSync(path.dirname(target)), path.basename(target));
  } catch {
    return target;
  }
}

/** The config file a resolved config was read from, if any. */
function configFileOf(config: { readonly file?: string | undefined }): string[] {
  return config.file === undefined ? [] : [config.file];
}

/** Whether any unsuppressed finding is at or above `failOn`. */
export function hasFailures(findings: readonly Finding[], failOn: Severity): boolean {
  return findings.some((finding) => !finding.suppressed && SEVERITY_RANK[finding.severity] >= SEVERITY_RANK[failOn]);
}

/** Runs a lint with parsed options; the command handler and tests call it. */
export async function runLint(options: LintArgs, io: CliIo): Promise<ExitCode> {
  if (!isFormatName(options.format)) throw new UsageError(`unknown format '${options.format}' — use one of: ${formatNames.join(', ')}`);
  const formatter = await loadFormatter(options.format);
  if (options.baseline !== undefined && options.writeBaseline !== undefined) {
    throw new UsageError('use --baseline FILE or --write-baseline FILE, not both');
  }
  const cache = new SourceCache();
  // A file named twice (also through a symbolic link) is one document, linted once.
  const files = [...new Set(options.files.map((file) => cache.name(path.resolve(io.cwd, file))))];
  // What this run writes must not be what it reads: a report written over the spec replaced it.
  const targets = writtenFiles(options, io.cwd);
  refuseOverwrite(targets, [...files, ...[options.config, options.baseline].flatMap((file) => (file === undefined ? [] : [path.resolve(io.cwd, file)]))], io.cwd);
  const configFor = createConfigResolver({ cwd: io.cwd, configFile: options.config, knownRuleIds: catalogue().map((rule) => rule.meta.id) });
  const documents: ApiDocument[] = [];
  const failures: DocumentError[] = [];
  const failed: DocumentFailure[] = [];
  for (const file of files) {
    configFor(file); // a broken config is a usage error before any document is read
    try {
      documents.push(await loadDocument(file, { cache }));
    } catch (error) {
      if (!(error instanceof DocumentError)) throw error;
      failures.push(error);
      failed.push({ entry: file, file: error.file, ...(error.line === undefined ? {} : { line: error.line }), ...(error.column === undefined ? {} : { column: error.column }), message: error.message });
    }
  }
  // And not a file a `$ref` led to, or a config found beside a spec.
  refuseOverwrite(targets, documents.flatMap((doc) => [...(doc.files ?? [doc.file]), ...configFileOf(configFor(doc.file))]), io.cwd);
  const rules = catalogue();
  const linted = documents.flatMap((doc) => lintWithConfig(doc, rules, configFor(doc.file))).sort(compareFindings);
  // A baseline written from a run that could not read every document would be wrong: write none then.
  const step =
    failures.length > 0 && options.writeBaseline !== undefined
      ? { findings: linted, compared: undefined, written: undefined }
      : baselineStep({ findings: linted, documents }, { cwd: io.cwd, baseline: options.baseline, writeBaseline: options.writeBaseline });
  const findings = step.findings;
  const baseline = step.compared && { file: step.compared.file, matched: step.compared.matched, stale: step.compared.stale };
  const root = repositoryRoot(io.cwd);
  const output = formatter({ cwd: io.cwd, ...(root === undefined ? {} : { root }), files, findings, documents, rules, failOn: options.failOn, ...(baseline ? { baseline } : {}), ...(failed.length > 0 ? { failures: failed } : {}) });
  // A report that misses an unreadable document is not written: each one's own line below says why (exit 2).
  const stream = options.output === undefined || options.output === '-' ? 'stdout' : standardStream(path.resolve(io.cwd, options.output));
  if (stream !== undefined) {
    if (output !== '') io[stream](output);
  } else if (options.output !== undefined && failures.length === 0) {
    writeUserFile(path.resolve(io.cwd, options.output), output, '--output', options.output);
  }
  if (step.written) {
    const { file, findings: recorded, entries } = step.written;
    io.stderr(`wrote baseline ${displayPath(io.cwd, file)}: ${recorded} finding(s) in ${entries} entr${entries === 1 ? 'y' : 'ies'}\n`);
  }
  for (const failure of failures) io.stderr(`${describeDocumentError(failure, io.cwd)}\n`);
  if (failures.length > 0) return 2;
  return hasFailures(findings, options.failOn) ? 1 : 0;
}

export const lintCommand: Command = {
  command: 'lint <files..>',
  documents: 'files',
  missingArguments: 'name the OpenAPI documents to lint (YAML or JSON)',
  describe: 'Lint the x-idempotency contracts of OpenAPI documents (YAML or JSON)',
  builder: (y: Argv) =>
    y
      .positional('files', { type: 'string', array: true, describe: 'OpenAPI documents to lint' })
      // yargs gives a variadic positional a `[]` default, which its help printed beside [required].
      .default('files', undefined)
      .option('format', {
        alias: 'f',
        type: 'string',
        choices: formatNames,
        requiresArg: true,
        default: 'stylish',
        describe: 'Output format',
      })
      .option('fail-on', {
        type: 'string',
        choices: ['info', 'warn', 'error'],
        requiresArg: true,
        default: 'error',
        describe: 'Lowest severity that makes the exit code 1',
      })
      .option('config', { alias: 'c', type: 'string', requiresArg: true, coerce: nonEmpty('--config'), describe: 'Config file (default: .idemkitrc.yaml, .idemkitrc.yml, .idemkitrc.json or idemkit.config.json found upward from each spec)' })
      .option('baseline', { type: 'string', requiresArg: true, coerce: nonEmpty('--baseline'), describe: 'Report only findings not recorded in this baseline file, and list its stale entries' })
      .option('write-baseline', { type: 'string', requiresArg: true, coerce: nonEmpty('--write-baseline'), describe: "Record today's findings in this baseline file (exit 0 unless a document is unreadable)" })
      .option('output', { alias: 'o', type: 'string', requiresArg: true, coerce: nonEmpty('--output'), describe: 'Write the report to this file (atomically) instead of stdout (`-`: stdout)' })
      .example('$0 lint openapi.yaml', 'lint one document')
      .example('$0 lint api/*.yaml --format json --fail-on warn', 'machine-readable output; warnings fail too')
      .example('$0 lint openapi.yaml --format sarif --output idemkit.sarif', 'for code scanning')
      .example('$0 lint openapi.yaml --write-baseline .idemkit-baseline.json', 'adopt on an existing API, then lint with --baseline'),
  async run(args, io) {
    return runLint(readLintArgs(args), io);
  },
};
