/**
 * Baselines for adopting the linter on an existing API: record today's findings, then report only new ones.
 *
 * A finding's identity never contains a line number: it is the rule id, the file (relative to the baseline
 * file, `/`-separated), the operation (its operationId, else `METHOD /path`) and the JSON Pointer inside
 * that operation. A finding that sits outside its operation (a shared component) keeps the pointer inside
 * its file and names every operation it is about, sorted. Edits elsewhere in the file do not disturb it.
 */
import type * as Crypto from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { UsageError } from '../errors.js';
import { describeJsonSyntaxError } from '../parser/json-errors.js';
import { LineTable } from '../parser/positions.js';
import type { ApiDocument, OperationView } from '../parser/model.js';
import type { Finding } from './rule.js';
import { findOperationByName, operationName } from './operation-name.js';
import { writeUserFile } from './output-file.js';

/** The stable identity of a finding. */
export interface FindingIdentity {
  readonly rule: string;
  readonly file: string;
  readonly operation: string;
  readonly pointer: string;
}

/** One recorded finding (or several identical ones: `count`). */
export interface BaselineEntry extends FindingIdentity {
  readonly count: number;
  /** The message when it was recorded, for people reading the file; not used for matching. */
  readonly message: string;
}

/** The baseline file's content. */
export interface Baseline {
  readonly version: 1;
  readonly entries: readonly BaselineEntry[];
}

/** What comparing findings with a baseline found. */
export interface BaselineResult {
  /** Absolute path of the baseline file. */
  readonly file: string;
  /** Findings that are not in the baseline (the ones to report). */
  readonly findings: readonly Finding[];
  /** How many current findings the baseline accounted for. */
  readonly matched: number;
  /** Entries (or parts of their count) of the files this run linted that no finding matched any more: fixed, or moved. */
  readonly stale: readonly BaselineEntry[];
}

/** The part of a lint report a baseline needs. */
export interface BaselineInput {
  readonly findings: readonly Finding[];
  readonly documents: readonly ApiDocument[];
}

/** Key of an operation in an identity: its operationId, else `METHOD /path`. */
export function operationKey(operation: OperationView): string {
  return operationName(operation);
}

/** Computes the stable identity of a finding; `baseDir` anchors the relative file name. */
export function findingIdentity(finding: Finding, documents: readonly ApiDocument[], baseDir: string): FindingIdentity {
  return anchoredIdentity(finding, documents, baseDir).identity;
}

/**
 * The identity SARIF fingerprints a result by: a finding inside one operation's object by that operation and its
 * pointer within it (so it survives the operation's move); one on a node shared by operations (document defaults, a
 * `$ref`'d contract) by its node alone — with the operations in it, adding or removing any operation that uses the node
 * made it another alert (a review's: one operation added to GitHub's spec re-opened a finding naming 392).
 */
export function fingerprintIdentity(finding: Finding, documents: readonly ApiDocument[], baseDir: string): FindingIdentity {
  const { identity, anchored } = anchoredIdentity(finding, documents, baseDir);
  return anchored ? identity : { ...identity, operation: '' };
}

function anchoredIdentity(finding: Finding, documents: readonly ApiDocument[], baseDir: string): { identity: FindingIdentity; anchored: boolean } {
  const operations = finding.operations
    .map((name) => findOperationByName(name, documents, finding.file))
    .filter((operation): operation is OperationView => operation !== undefined);
  const file = relativeFile(baseDir, finding.file);
  if (operations.length === 1) {
    const [operation] = operations as [OperationView];
    const prefix = operation.at.pointer;
    if (operation.at.file === finding.file && (finding.pointer === prefix || finding.pointer.startsWith(prefix + '/'))) {
      return { identity: { rule: finding.ruleId, file, operation: operationKey(operation), pointer: finding.pointer.slice(prefix.length) }, anchored: true };
    }
  }
  const names = operations.length > 0 ? operations.map(operationKey) : [...finding.operations];
  return { identity: { rule: finding.ruleId, file, operation: [...new Set(names)].sort().join(', '), pointer: finding.pointer }, anchored: false };
}

// node:crypto (~15 of Node's internal modules) is loaded on first use: a plain lint never hashes an identity.
const require = createRequire(import.meta.url);
let crypto: typeof Crypto | undefined;

/** A short stable hash of an identity (used for SARIF `partialFingerprints`). */
export function identityHash(identity: FindingIdentity): string {
  return textHash(identityKey(identity));
}

/** 32 hex digits of the SHA-256 of `text`. */
export function textHash(text: string): string {
  crypto ??= require('node:crypto') as typeof Crypto;
  return crypto.createHash('sha256').update(text).digest('hex').slice(0, 32);
}

function identityKey(identity: FindingIdentity): string {
  return JSON.stringify([identity.rule, identity.file, identity.operation, identity.pointer]);
}

/** Builds a baseline of the unsuppressed findings, relative to the baseline file's directory. */
export function createBaseline(report: BaselineInput, baselineFile: string): Baseline {
  const baseDir = path.dirname(path.resolve(baselineFile));
  const entries = new Map<string, BaselineEntry>();
  for (const finding of report.findings) {
    if (finding.suppressed) continue;
    const identity = findingIdentity(finding, report.documents, baseDir);
    const key = identityKey(identity);
    const known = entries.get(key);
    entries.set(key, known ? { ...known, count: known.count + 1 } : { ...identity, count: 1, message: finding.message });
  }
  const sorted = [...entries.values()].sort((a, b) => compare(a.file, b.file) || compare(a.operation, b.operation) || compare(a.pointer, b.pointer) || compare(a.rule, b.rule));
  return { version: 1, entries: sorted };
}

/**
 * Writes a baseline file atomically (stable order, so it diffs well in review); a path that cannot be
 * written is a {@link UsageError} naming it as `shownAs`.
 */
export function writeBaseline(report: BaselineInput, baselineFile: string, shownAs: string = baselineFile): Baseline {
  const baseline = createBaseline(report, baselineFile);
  writeUserFile(path.resolve(baselineFile), `${JSON.stringify(baseline, null, 2)}\n`, '--write-baseline', shownAs);
  return baseline;
}

/**
 * Reads and checks a baseline file; a missing or malformed one is a {@link UsageError}. `shownAs` is how
 * messages name it (the path as the user wrote it).
 */
export function readBaseline(baselineFile: string, shownAs: string = baselineFile): Baseline {
  const file = path.resolve(baselineFile);
  if (!existsSync(file)) {
    throw new UsageError(`baseline file ${shownAs} does not exist (create it with --write-baseline ${shownAs})`);
  }
  let text: string;
  try {
    // A device or a pipe (`/dev/zero`) would be read without an end.
    const stats = statSync(file);
    if (!stats.isFile() && !stats.isDirectory()) throw Object.assign(new Error('not a regular file'), { code: 'ENOTREG' });
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    const why =
      code === 'EISDIR' || code === 'ENOTREG'
        ? `it is ${code === 'EISDIR' ? 'a directory' : 'not a regular file'} — name the file --write-baseline wrote`
        : code === 'EACCES' || code === 'EPERM'
          ? 'permission denied'
          : (error as Error).message;
    throw new UsageError(`cannot read baseline file ${shownAs}: ${why}`);
  }
  let value: unknown;
  // A byte-order mark (an editor's "UTF-8 with BOM") is no part of the JSON, as in the documents linted.
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  try {
    value = JSON.parse(text);
  } catch (error) {
    const syntax = describeJsonSyntaxError(error, text);
    const at = new LineTable(text).position(syntax.offset);
    throw new UsageError(`baseline file is not valid JSON: ${syntax.message} — regenerate it with --write-baseline`, shownAs, at.line, at.column);
  }
  const entries = (value as { entries?: unknown } | null)?.entries;
  if ((value as { version?: unknown } | null)?.version !== 1 || !Array.isArray(entries)) {
    throw new UsageError('not an idemkit baseline (expected { "version": 1, "entries": [...] }); regenerate it with --write-baseline', shownAs);
  }
  entries.forEach((entry: unknown, index) => {
    const e = entry as Record<string, unknown> | null;
    const ok =
      e !== null &&
      typeof e === 'object' &&
      ['rule', 'file', 'operation', 'pointer'].every((field) => typeof e[field] === 'string') &&
      (e.count === undefined || (Number.isInteger(e.count) && (e.count as number) > 0));
    if (!ok) throw new UsageError(`baseline entry ${index} needs string rule, file, operation, pointer and a positive count; regenerate it with --write-baseline`, shownAs);
  });
  return {
    version: 1,
    entries: (entries as Record<string, unknown>[]).map((e) => ({
      rule: e.rule as string,
      file: e.file as string,
      operation: e.operation as string,
      pointer: e.pointer as string,
      count: (e.count as number | undefined) ?? 1,
      message: typeof e.message === 'string' ? e.message : '',
    })),
  };
}

/**
 * Splits the findings into those the baseline knows (dropped) and new ones (kept), and lists the entries of the
 * files linted that nothing matched any more. Suppressed findings pass through untouched.
 */
export function applyBaseline(report: BaselineInput, baseline: Baseline, baselineFile: string): BaselineResult {
  const file = path.resolve(baselineFile);
  const baseDir = path.dirname(file);
  const remaining = new Map<string, { entry: BaselineEntry; left: number }>();
  for (const entry of baseline.entries) {
    const key = identityKey(entry);
    const known = remaining.get(key);
    if (known) known.left += entry.count;
    else remaining.set(key, { entry, left: entry.count });
  }
  // Entries of findings on shared nodes (several operations named), by rule, file and pointer: the operations using a
  // node change as the spec grows, the node does not.
  const shared = new Map<string, { entry: BaselineEntry; left: number }[]>();
  for (const slot of remaining.values()) {
    if (!slot.entry.operation.includes(', ')) continue;
    const key = JSON.stringify([slot.entry.rule, slot.entry.file, slot.entry.pointer]);
    shared.set(key, [...(shared.get(key) ?? []), slot]);
  }
  const sharedSlot = (identity: FindingIdentity) => shared.get(JSON.stringify([identity.rule, identity.file, identity.pointer]))?.find((slot) => slot.left > 0);
  let matched = 0;
  const findings: Finding[] = [];
  for (const finding of report.findings) {
    if (finding.suppressed) {
      findings.push(finding);
      continue;
    }
    const { identity, anchored } = anchoredIdentity(finding, report.documents, baseDir);
    const slot = remaining.get(identityKey(identity)) ?? (anchored ? undefined : sharedSlot(identity));
    if (slot && slot.left > 0) {
      slot.left -= 1;
      // A finding on a node shared by operations is new only for the operations its entry did not name (one added to
      // the spec that uses the node): reported for those alone. Before, any operation added or removed made the whole
      // finding new and its entry stale.
      const known = new Set(slot.entry.operation.split(', '));
      const added = identity.operation.split(', ').filter((name) => !known.has(name));
      if (added.length === 0) matched += 1;
      else {
        const named = finding.operations.filter((name) => added.includes(name));
        findings.push(named.length > 0 ? { ...finding, operations: named } : finding);
      }
    } else findings.push(finding);
  }
  const checked = checkedEntries(report.documents, baseDir);
  const stale = [...remaining.values()].filter((slot) => slot.left > 0 && checked(slot.entry)).map((slot) => ({ ...slot.entry, count: slot.left }));
  return { file, findings, matched, stale };
}

/**
 * Which baseline entries this run could have matched. A baseline often holds more than one run lints (written from
 * `lint a.yaml c.yaml`, read by a pre-commit hook that lints the staged `a.yaml`): an entry of a file the run did not
 * read is not checked, rather than called stale — regenerating on that advice would drop it. An entry of a file the
 * run read only through a `$ref` (a shared component) is checked when it names an operation of a linted document;
 * one that names only another document's operations is that document's.
 */
function checkedEntries(documents: readonly ApiDocument[], baseDir: string): (entry: BaselineEntry) => boolean {
  const entryFiles = new Set(documents.map((document) => relativeFile(baseDir, document.file)));
  const read = new Set(documents.flatMap((document) => document.files ?? [document.file]).map((file) => relativeFile(baseDir, file)));
  return (entry) =>
    entryFiles.has(entry.file) ||
    (read.has(entry.file) && entry.operation.split(', ').some((name) => findOperationByName(name, documents) !== undefined));
}

function relativeFile(baseDir: string, file: string): string {
  return path.relative(baseDir, file).split(path.sep).join('/');
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
