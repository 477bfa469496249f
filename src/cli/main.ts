import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import yargs from 'yargs';
import type { Argv } from 'yargs';
import { DocumentError, UsageError } from '../errors.js';
import { printable } from '../parser/printable.js';
import { describeDocumentError, displayPath } from './display.js';
import type { CliIo, ExitCode } from './io.js';
import { lintCommand } from './commands/lint.js';
import { generateCommand } from './commands/generate.js';
import { rulesCommand } from './commands/rules.js';
import { explainCommand } from './commands/explain.js';
import { initCommand } from './commands/init.js';

/** A command module: yargs builder plus a handler that returns the exit code instead of exiting. */
export interface Command {
  readonly command: string;
  readonly describe: string;
  builder(y: Argv): Argv;
  /** The positional that names the documents the command reads (`-` and an empty name are refused there). */
  readonly documents?: string;
  /** The one-line usage error when a required positional is missing (yargs' own says only how many). */
  readonly missingArguments?: string;
  run(args: Record<string, unknown>, io: CliIo): Promise<ExitCode>;
}

const commands: readonly Command[] = [lintCommand, generateCommand, initCommand, rulesCommand, explainCommand];

/**
 * Whether `error` is one of idemkit's typed errors. Checked by name as well: commands import the library
 * lazily, and a test runner that loads the static graph as CommonJS gets a second copy of `errors.ts` then.
 */
function isError<T extends Error>(error: unknown, type: new (...args: never[]) => T): error is T {
  return error instanceof type || (error instanceof Error && error.name === type.name && 'file' in error);
}

/**
 * Formats an error for the terminal: one line for a user's mistake, the stack only with `--verbose`. A
 * document's path is shown relative to `cwd`, as `idemkit lint` shows it.
 */
export function describeError(error: unknown, verbose: boolean, cwd: string): string {
  if (isError(error, DocumentError)) return describeDocumentError(error, cwd);
  if (isError(error, UsageError)) {
    const file = error.file !== undefined && path.isAbsolute(error.file) ? displayPath(cwd, error.file) : error.file;
    const where = [file, error.line, error.column].filter((part) => part !== undefined).join(':');
    return printable(where ? `${where}: ${error.message}` : error.message);
  }
  if (verbose && error instanceof Error && error.stack) return `internal error: ${error.stack}`;
  // One line, as every other error: a message of several lines (a template's parse error draws the spot) says
  // the rest with --verbose.
  const text = error instanceof Error ? error.message : String(error);
  const first = text.split(/\r?\n/, 1)[0]!;
  return `internal error: ${printable(first)}${first.length < text.length ? ' …' : ''} (run with --verbose for details, and please report it)`;
}

/**
 * yargs' validation messages span lines ("Invalid values:\n  Argument: x, Given: …, Choices: …"); an error is
 * one line, so each invalid value becomes `--x "given" is not one of: a, b` (no dashes for a positional of the
 * command being parsed) and other messages are joined.
 */
function oneLineUsage(message: string, commandLine: string): string {
  const positional = (name: string) => new RegExp(`[<\\[]${name.replace(/[^\w-]/g, '')}(\\.\\.)?[>\\]]`).test(commandLine);
  const missingValue = /^Not enough arguments following: (\S+)$/.exec(message);
  if (missingValue) return `${missingValue[1]!.length === 1 ? '-' : '--'}${missingValue[1]} needs a value`;
  const invalid = [...message.matchAll(/Argument: ([^,\n]+), Given: (.*?), Choices: (.*)$/gm)];
  if (invalid.length > 0) {
    return invalid
      .map(([, name, given, choices]) => `${positional(name!) ? '' : '--'}${name} ${given} is not one of: ${choices!.split(', ').map((choice) => choice.replace(/^"(.*)"$/, '$1')).join(', ')}`)
      .join('; ');
  }
  return message
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '')
    .join(' ');
}

/**
 * yargs renders the running command's help after starting its handler (through cliui and string-width,
 * ~15–20 ms of every cold start), only to print it should the handler reject. idemkit's handlers never
 * reject (errors are caught and reported by `main`) and `--help` renders its own text, so skip it.
 */
function skipHelpCache(parser: Argv): void {
  type Internals = { getInternalMethods?: () => { getUsageInstance?: () => { cacheHelpMessage?: () => void } } };
  const usage = (parser as unknown as Internals).getInternalMethods?.().getUsageInstance?.();
  if (usage && typeof usage.cacheHelpMessage === 'function') usage.cacheHelpMessage = () => {};
}

/** idemkit's version, from its `package.json` (next to `src/` when run from source, to `dist/` when built). */
export function packageVersion(): string {
  for (const relative of ['../../package.json', '../../../package.json']) {
    const candidate = fileURLToPath(new URL(relative, import.meta.url));
    if (!existsSync(candidate)) continue;
    const manifest = JSON.parse(readFileSync(candidate, 'utf8')) as { name?: unknown; version?: unknown };
    if (manifest.name === 'idemkit' && typeof manifest.version === 'string') return manifest.version;
  }
  return 'unknown';
}

/**
 * Stands in for a bare `-` while yargs parses: yargs drops one given as a positional (`idemkit lint -` linted
 * nothing and exited 0), so it is swapped for this before parsing and back after.
 */
const DASH = '\u0000-';

/**
 * `argv` as yargs is given it: a bare `-` swapped for {@link DASH}, and what follows `--` (which yargs leaves
 * out of the positionals: `lint a.yaml -- b.yaml` linted only a.yaml) made plain positionals — a name that
 * starts with `-` is written `./-name`, the same file.
 */
function forYargs(argv: readonly string[]): string[] {
  const end = argv.indexOf('--');
  const swap = (arg: string) => (arg === '-' ? DASH : arg);
  if (end === -1) return argv.map(swap);
  const rest = argv.slice(end + 1).map((arg) => (arg !== '-' && arg.startsWith('-') ? `.${path.sep}${arg}` : swap(arg)));
  return [...argv.slice(0, end).map(swap), ...rest];
}

/**
 * Options naming a file that cannot be a standard stream, with why `-` (given apart or as `--option=-`) is
 * refused for each (`-o -` is stdout).
 */
const NO_STREAM: Readonly<Record<string, string>> = {
  config: '--config -: reading the config from standard input is not supported — name the config file',
  baseline: '--baseline -: reading the baseline from standard input is not supported — name the baseline file',
  'write-baseline': '--write-baseline -: writing the baseline to standard output is not supported (the report goes there) — name a file',
};

/**
 * The parsed arguments with every stand-in for `-` given back as `-` (an option's value: `-o -` is stdout),
 * after refusing one — or an empty string — given for the documents the command reads, and one given to an
 * option of {@link NO_STREAM} (it would be read or written as a file named `-`).
 */
function checkedArgs(command: Command, args: Record<string, unknown>): Record<string, unknown> {
  const restored: Record<string, unknown> = {};
  // yargs gathers an option given twice into an array, which a string option then reads as `a,b` (a file of that
  // name, `--fail-on error,error` failing on nothing): refused, named as written long (`--output`, not `-o` or `outputFile`).
  const repeated = Object.keys(args).find((key) => key !== '_' && key !== command.documents && key.length > 1 && !/[A-Z]/.test(key) && Array.isArray(args[key]));
  if (repeated !== undefined) {
    throw new UsageError(`--${repeated} was given more than once (${(args[repeated] as unknown[]).map(String).join(', ')}) — give it once`);
  }
  for (const [key, value] of Object.entries(args)) {
    const values = Array.isArray(value) ? value : [value];
    // `--config -` arrives as the stand-in, `--config=-` (or `-c=-`) as `-` itself: yargs splits the latter.
    if (Object.prototype.hasOwnProperty.call(NO_STREAM, key) && (values.includes(DASH) || values.includes('-'))) throw new UsageError(NO_STREAM[key]!);
    if (key === command.documents) {
      if (values.includes(DASH)) {
        throw new UsageError('reading a document from standard input (`-`) is not supported — name its file (a pipe can be named as /dev/stdin)');
      }
      if (values.some((item) => typeof item === 'string' && item.trim() === '')) {
        throw new UsageError("an empty file name ('') was given — name the OpenAPI document's file");
      }
    }
    restored[key] = Array.isArray(value) ? value.map((item) => (item === DASH ? '-' : item)) : value === DASH ? '-' : value;
  }
  return restored;
}

/** Runs the CLI on `argv` (without `node` and the script) and resolves to the exit code. */
export async function main(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  let exit: ExitCode = 0;
  let failure: unknown;
  // yargs runs a command's builder only when that command was named, so this is the command being parsed.
  let active: Command | undefined;
  const parsed = forYargs(argv);
  let parser = yargs(parsed)
    // idemkit's messages and help are English, so yargs' words around them are too, whatever LANG says: else help
    // mixes languages, and yargs' translated "not enough arguments" hides the message below that names the fix.
    .locale('en')
    .scriptName('idemkit')
    .usage('$0 <command> [options]')
    .option('verbose', { type: 'boolean', default: false, describe: 'Show stack traces for internal errors' })
    .strict()
    .demandCommand(1, 'Name a command: lint, generate, init, rules or explain.')
    .recommendCommands()
    .help()
    .alias('h', 'help')
    // Read only when asked: yargs' own lookup walks the directories up on every run.
    .version(false)
    .option('version', { type: 'boolean', describe: 'Show the version number', global: false })
    .wrap(Math.min(100, process.stdout.columns ?? 100))
    .exitProcess(false)
    .fail((message, error) => {
      // Throwing stops yargs here: a custom fail handler that returns lets it run the command anyway.
      if (!error && active?.missingArguments && message?.startsWith('Not enough non-option arguments')) {
        throw new UsageError(active.missingArguments);
      }
      // yargs reports some of its own validation (requiresArg) as an error object, not a message.
      if (error?.name === 'YError') throw new UsageError(oneLineUsage(error.message, active?.command ?? ''));
      throw error ?? new UsageError(oneLineUsage(message ?? 'invalid arguments', active?.command ?? ''));
    });
  // `--version` (with `--verbose` or `--version=true` too) when no command is named.
  const names = new Set(commands.map((command) => command.command.split(' ')[0]));
  if (argv.some((arg) => arg === '--version' || arg === '--version=true') && !argv.some((arg) => names.has(arg))) {
    io.stdout(`${packageVersion()}\n`);
    return 0;
  }
  // `idemkit <unknown> --help`: yargs prints the top-level help and exits 0, as if the command existed.
  const first = argv.find((arg) => !arg.startsWith('-'));
  if (first !== undefined && first !== 'help' && !names.has(first) && argv.some((arg) => arg === '--help' || arg === '-h')) {
    const hint = first === 'baseline' ? " (baselines are lint's options: idemkit lint --help)" : '';
    io.stderr(`Unknown command: ${first} — the commands are ${[...names].join(', ')}${hint}\n`);
    return 2;
  }
  for (const command of commands) {
    parser = parser.command({
      command: command.command,
      describe: command.describe,
      builder: (y: Argv) => {
        active = command;
        return command.builder(y);
      },
      handler: async (args: Record<string, unknown>) => {
        try {
          exit = await command.run(checkedArgs(command, args), io);
        } catch (error) {
          failure = error;
        }
      },
    });
  }
  skipHelpCache(parser);
  let helpText = '';
  try {
    await parser.parseAsync(parsed, {}, (error, _argv, output) => {
      if (error && !failure) failure = error;
      helpText = output;
    });
  } catch (error) {
    failure ??= error;
  }
  if (helpText && !failure) io.stdout(helpText.endsWith('\n') ? helpText : `${helpText}\n`);
  if (failure !== undefined) {
    const verbose = argv.includes('--verbose');
    if (helpText && !isError(failure, DocumentError)) io.stderr(`${helpText}\n\n`);
    io.stderr(`${describeError(failure, verbose, io.cwd)}\n`);
    return 2;
  }
  return exit;
}
