/** Machine-readable findings: one JSON object, paths relative to the working directory, stable key order. */
import type { Severity } from '../rule.js';
import { operationLabelsOf } from './common.js';
import type { LintReport } from './index.js';
import { displayPath } from './paths.js';

/** The shape `--format json` prints. */
export interface JsonReport {
  readonly files: readonly string[];
  readonly findings: readonly {
    readonly ruleId: string;
    readonly severity: Severity;
    readonly message: string;
    readonly file: string;
    readonly line: number;
    readonly column: number;
    readonly pointer: string;
    readonly operations: readonly string[];
    /** The display label of each of `operations`, same order: `POST /payouts (createPayout)`. */
    readonly operationLabels: readonly string[];
    readonly suppressed?: { readonly reason: string };
  }[];
  readonly summary: { readonly error: number; readonly warn: number; readonly info: number; readonly suppressed: number };
  /** The documents that could not be loaded (the run exits 2); absent when every document was linted. */
  readonly errors?: readonly { readonly file: string; readonly line?: number; readonly column?: number; readonly message: string }[];
  /** With `--baseline`: how many known findings it hid, and its entries that no longer occur. */
  readonly baseline?: {
    readonly file: string;
    readonly matched: number;
    readonly stale: readonly { readonly rule: string; readonly file: string; readonly operation: string; readonly pointer: string; readonly count: number }[];
  };
}

export function formatJson(report: LintReport): string {
  const active = report.findings.filter((finding) => !finding.suppressed);
  const output: JsonReport = {
    // Sorted like the findings (by absolute path), so the report does not depend on argument order. A document that
    // could not be loaded was not linted: it is under `errors`, not here.
    files: [...report.files]
      .filter((file) => !report.failures?.some((failure) => failure.entry === file))
      .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
      .map((file) => displayPath(report.cwd, file)),
    findings: report.findings.map((finding) => ({
      ruleId: finding.ruleId,
      severity: finding.severity,
      message: finding.message,
      file: displayPath(report.cwd, finding.file),
      line: finding.line,
      column: finding.column,
      pointer: finding.pointer,
      operations: finding.operations,
      operationLabels: operationLabelsOf(finding, report.documents),
      ...(finding.suppressed ? { suppressed: finding.suppressed } : {}),
    })),
    summary: {
      error: active.filter((finding) => finding.severity === 'error').length,
      warn: active.filter((finding) => finding.severity === 'warn').length,
      info: active.filter((finding) => finding.severity === 'info').length,
      suppressed: report.findings.length - active.length,
    },
    ...(report.baseline
      ? {
          baseline: {
            file: displayPath(report.cwd, report.baseline.file),
            matched: report.baseline.matched,
            stale: report.baseline.stale.map(({ rule, file, operation, pointer, count }) => ({ rule, file, operation, pointer, count })),
          },
        }
      : {}),
    ...(report.failures && report.failures.length > 0
      ? {
          errors: report.failures.map((failure) => ({
            file: displayPath(report.cwd, failure.file),
            ...(failure.line === undefined ? {} : { line: failure.line }),
            ...(failure.column === undefined ? {} : { column: failure.column }),
            message: failure.message,
          })),
        }
      : {}),
  };
  return `${JSON.stringify(output, null, 2)}\n`;
}
