/**
 * `idemkit init <spec>`: propose `x-idempotency` contracts for operations that already take an idempotency
 * key (in a header, the query or the body). Prints what it would insert, and which contracts leave `scope`
 * open; writes (atomically) only with `--write`, each contract into the file where its operation is written
 * (the spec, or a path-item file it references). Re-running is a no-op.
 */
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import type { Argv } from 'yargs';
import type { Command } from '../main.js';
import { describeDocumentError, displayPath } from '../display.js';
import { nonEmpty } from '../options.js';
import { printable } from '../../parser/printable.js';

export const initCommand: Command = {
  command: 'init <spec>',
  documents: 'spec',
  missingArguments: 'name the OpenAPI document to scaffold contracts in',
  describe: 'Scaffold x-idempotency contracts for operations that already take an idempotency key (comments and layout kept)',
  builder: (y: Argv) =>
    y
      .positional('spec', { type: 'string', describe: 'OpenAPI document (YAML or JSON)', demandOption: true })
      .option('write', { type: 'boolean', default: false, describe: 'Write the contracts into the file (default: only show them)' })
      .option('config', { alias: 'c', type: 'string', requiresArg: true, coerce: nonEmpty('--config'), describe: 'Config file for extra key header names (default: discovered upward from the spec)' })
      .example('$0 init openapi.yaml', 'show the contracts it would add')
      .example('$0 init openapi.yaml --write', 'add them, then run `idemkit lint openapi.yaml`'),
  async run(args, io) {
    const shown = String(args.spec);
    const file = path.resolve(io.cwd, shown);
    // Loaded here, not when `lint` starts: main imports every command module.
    const [{ catalogue }, { loadConfig }, { scaffoldContracts, scopeNotices }, { assertWritable, writeUserFile }, { loadDocument }] = await Promise.all([
      import('../../lint/catalogue.js'),
      import('../../lint/config.js'),
      import('../../lint/scaffold.js'),
      import('../../lint/output-file.js'),
      import('../../parser/load.js'),
    ]);
    const config = loadConfig({
      cwd: io.cwd,
      specFile: file,
      configFile: args.config === undefined ? undefined : String(args.config),
      knownRuleIds: catalogue().map((rule) => rule.meta.id),
    });
    const document = await loadDocument(file);
    // The files as they are on disk (a byte-order mark and all, which the edits keep); a pipe (`init /dev/stdin`) is read
    // once, so its text is the one the document was loaded from.
    const readText = (name: string): string => (statSync(name).isFile() ? readFileSync(name, 'utf8') : (document.source?.(name)?.text ?? ''));
    const result = scaffoldContracts(document, readText, config.settings, (error) => describeDocumentError(error, io.cwd));
    // The spec as the user named it; an external file it references, as lint names files.
    const name = (changed: string) => (changed === document.file ? shown : displayPath(io.cwd, changed));
    const lines: string[] = [];
    const snippet = new Set<number>();
    for (const change of result.changes) {
      // With --write, where the block is in the written file; without, where its operation is in the file as it is.
      const { line, column } = args.write === true ? change : document.position(change.at);
      lines.push(`${name(change.file)}:${line}:${column}  ${change.operation}  (key ${change.key.in} ${change.key.name})`);
      // The block as it would be written (a tab-indented JSON file's tabs are its layout): not escaped below.
      for (const line of change.lines) snippet.add(lines.push(`+ ${line}`) - 1);
      lines.push('');
    }
    for (const skip of result.skipped) {
      // Where the operation is in the file as it will be: with --write, once the contracts are in; without, as it is.
      const at = document.position(skip.at);
      const { line, column } = args.write === true ? result.moved(skip.at.file, at) : at;
      lines.push(`${name(skip.at.file)}:${line}:${column}: skipped ${skip.operation}: ${skip.reason}`);
    }
    if (result.skipped.length > 0) lines.push('');
    lines.push(...scopeNotices(result.changes, name));
    const count = result.changes.length;
    const byHand = result.skipped.filter((skip) => !skip.needsNone).length;
    const shared = result.skipped.filter((skip) => skip.sharesContract === true).length;
    const needNone = result.skipped.length - byHand - shared;
    // Skipped operations do take a key: the summary must not say that none does, nor ask for a contract a
    // safe method does not need.
    const writeByHand = `write ${byHand === 1 ? 'its' : 'their'} x-idempotency by hand`;
    const noneNeeded = `${needNone} safe operation${needNone === 1 ? ' needs' : 's need'} no contract`;
    const alsoSkipped = [
      ...(byHand === 0 ? [] : [`${byHand} operation${byHand === 1 ? '' : 's'} skipped (see above) — ${writeByHand}`]),
      ...(needNone === 0 ? [] : [noneNeeded]),
      ...(shared === 0 ? [] : [`${shared} YAML alias${shared === 1 ? ' shares its' : 'es share their'} operation's contract`]),
    ]
      .map((clause) => `; ${clause}`)
      .join('');
    const takeKey = (n: number) => (n === 1 ? '1 operation that takes an idempotency key' : `${n} operations that take an idempotency key`);
    if (count === 0 && result.skipped.length === 0) {
      lines.push(`nothing to scaffold in ${shown}: no operation without x-idempotency takes an idempotency key`);
    } else if (count === 0 && byHand === 0) {
      lines.push(`nothing to scaffold in ${shown}: ${takeKey(needNone)} ${needNone === 1 ? 'is a safe method and needs' : 'are safe methods and need'} no contract (see above)`);
    } else if (count === 0) {
      lines.push(`nothing written to ${shown}: ${takeKey(byHand)} ${byHand === 1 ? 'was' : 'were'} skipped (see above) — ${writeByHand}${needNone === 0 ? '' : `; ${noneNeeded}`}`);
    } else if (args.write === true) {
      // All or none: a file that cannot be written is said before any other is changed.
      for (const edited of result.files) assertWritable(edited.file, '', name(edited.file));
      for (const edited of result.files) writeUserFile(edited.file, edited.text, '', name(edited.file));
      const where = result.files.map((edited) => name(edited.file)).join(', ');
      lines.push(`wrote ${count} contract${count === 1 ? '' : 's'} to ${where}${alsoSkipped}; next: idemkit lint ${shown}`);
    } else {
      lines.push(`${count} contract${count === 1 ? '' : 's'} to add${alsoSkipped}; nothing written — run again with --write to apply`);
    }
    // Each line one line, whatever the document's names hold (a newline in an operationId, ESC sequences).
    io.stdout(`${lines.map((line, i) => (snippet.has(i) ? line : printable(line))).join('\n')}\n`);
    return 0;
  },
};
