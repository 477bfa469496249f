/** Helpers shared by the machine-readable and review formatters (sarif, github, junit, markdown). */
import path from 'node:path';
import type { ApiDocument, OperationView } from '../../parser/model.js';
import { escapeRegExp } from '../../parser/regexp.js';
import type { BaselineEntry } from '../baseline.js';
import { findOperationByName, operationName } from '../operation-name.js';
import type { Finding, Rule, Severity } from '../rule.js';

/**
 * What these formatters read of a lint report. The registry's `LintReport` satisfies it; the optional
 * members are filled by the lint command when it has them.
 */
export interface FormatterInput {
  /** Directory paths in the output are relative to. */
  readonly cwd: string;
  /**
   * The git work tree `cwd` is in (`repositoryRoot` in `paths.ts`), when there is one: SARIF locations and fingerprints and
   * the github format's `file=` are relative to it, as code scanning reads them; without it, to `cwd`.
   */
  readonly root?: string;
  /**
   * The documents that could not be read or loaded (the run exits 2): machine-readable formats say so, so that a tool
   * reading the report does not take a missing document for a clean one.
   */
  readonly failures?: readonly DocumentFailure[];
  readonly findings: readonly Finding[];
  readonly documents: readonly ApiDocument[];
  /** The catalogue to describe rules from (defaults to idemkit's). */
  readonly rules?: readonly Rule[];
  /** Set when `--baseline` hid known findings. */
  readonly baseline?: { readonly file: string; readonly matched: number; readonly stale: readonly BaselineEntry[] };
  /** `--fail-on` (default `error`): findings below it do not fail the run. */
  readonly failOn?: Severity;
}


/** Findings in a stable order: file, line, column, rule. */
export function sortFindings(findings: readonly Finding[]): Finding[] {
  return [...findings].sort(
    (a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0) || a.line - b.line || a.column - b.column || (a.ruleId < b.ruleId ? -1 : a.ruleId > b.ruleId ? 1 : 0),
  );
}

/** Documents in a stable order (by file), whatever order the files were named in. */
export function sortDocuments(documents: readonly ApiDocument[]): ApiDocument[] {
  return [...documents].sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0));
}

/**
 * For each operation of a document, the indexes into `findings` (in their order) of those about it: the findings
 * that name it (by engine name or label). Names repeat across documents (two specs with the same operationId), so a
 * finding located in one linted document belongs to that document's operations only; a finding in another file (a
 * shared component) belongs to every operation it names. Found by name in a map: testing every finding against
 * every operation made the markdown and junit formats grow as findings × operations (20,000 findings: 41 s, 25 s).
 */
export function concernIndex(findings: readonly Finding[], documents: readonly ApiDocument[]): (document: ApiDocument, operation: OperationView) => number[] {
  const byName = new Map<string, number[]>();
  findings.forEach((finding, at) => {
    for (const name of new Set(finding.operations)) {
      const list = byName.get(name);
      if (list === undefined) byName.set(name, [at]);
      else list.push(at);
    }
  });
  const files = new Set(documents.map((document) => document.file));
  return (document, operation) => {
    const engineName = operationName(operation);
    const named = byName.get(engineName) ?? [];
    const labelled = operation.label === engineName ? [] : (byName.get(operation.label) ?? []);
    const candidates = labelled.length === 0 ? named : [...new Set([...named, ...labelled])].sort((a, b) => a - b);
    return candidates.filter((at) => findings[at]!.file === document.file || !files.has(findings[at]!.file));
  };
}

const SEVERITY_RANK: Record<Severity, number> = { info: 0, warn: 1, error: 2 };

/** Whether `finding` fails the run: not suppressed, and at or above `failOn` (default `error`). */
export function failsRun(finding: Finding, failOn: Severity = 'error'): boolean {
  return !finding.suppressed && SEVERITY_RANK[finding.severity] >= SEVERITY_RANK[failOn];
}

/**
 * The display label of each operation `finding` names (`POST /payouts (createPayout)`), in the order of
 * `finding.operations`: the engine's `operationLabels`, else each name looked up in `documents` (findings
 * built by hand or read back from older reports), else the name itself.
 */
export function operationLabelsOf(finding: Finding, documents: readonly ApiDocument[]): string[] {
  const given = finding.operationLabels;
  if (given && given.length === finding.operations.length) return [...given];
  return finding.operations.map((name) => findOperationByName(name, documents, finding.file)?.label ?? name);
}

/**
 * `labels` as a report repeats them once per operation they name: the first few, then how many more. A finding on a
 * node hundreds of operations share (document defaults) named them all in each of their test cases or cards — a
 * review's JUnit and markdown reports of GitHub's spec were 30 MB, against 3 MB of JSON; the JSON and SARIF outputs,
 * and the finding's own line, still list them all.
 */
export function fewLabels(labels: readonly string[], shown = 5): string[] {
  return labels.length <= shown + 1 ? [...labels] : [...labels.slice(0, shown), `… and ${labels.length - shown} more`];
}

/**
 * Whether `message` already says which operation it is about: it quotes the label, or the label's
 * `METHOD /path` part (rule messages often start `POST /refunds takes …`).
 */
export function messageNamesOperation(message: string, label: string): boolean {
  if (message.includes(label)) return true;
  const route = /^([A-Z]+ \S+)(?: \(.*\))?$/.exec(label)?.[1];
  return route !== undefined && new RegExp(`(^|[^\\w/{}.-])${escapeRegExp(route)}(?![\\w/{}.-])`).test(message);
}

/** A document the run could not load, where and why (paths absolute). */
export interface DocumentFailure {
  /** The entry file given to lint. */
  readonly entry: string;
  /** Where the problem is: the entry file, or a file a `$ref` of it led to. */
  readonly file: string;
  readonly line?: number;
  readonly column?: number;
  readonly message: string;
}
