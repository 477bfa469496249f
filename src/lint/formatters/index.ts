/** The output formats of `idemkit lint`, by name. */
import type { ApiDocument } from '../../parser/model.js';
import type { BaselineEntry } from '../baseline.js';
import type { Finding, Rule, Severity } from '../rule.js';
import { formatGithub } from './github.js';
import { formatJson } from './json.js';
import { formatJunit } from './junit.js';
import { formatMarkdown } from './markdown.js';
import { formatSarif } from './sarif.js';
import { formatStylish } from './stylish.js';

/** Everything a formatter may print from. */
export interface LintReport {
  /** Directory that printed paths are relative to. */
  readonly cwd: string;
  /** The entry files linted, absolute, in the order given. */
  readonly files: readonly string[];
  /** Sorted findings of every file (suppressed ones included, marked). */
  readonly findings: readonly Finding[];
  readonly documents: readonly ApiDocument[];
  /** The rule catalogue that ran (formatters that describe rules fall back to idemkit's). */
  readonly rules?: readonly Rule[];
  /** Set when `--baseline` hid known findings: how many, and the entries nothing matched any more. */
  readonly baseline?: { readonly file: string; readonly matched: number; readonly stale: readonly BaselineEntry[] };
  /** `--fail-on`: the lowest severity that fails the run (formats with a pass/fail notion follow it; default `error`). */
  readonly failOn?: Severity;
}

/** Renders a report as text (the whole output, ending in a newline when not empty). */
export type Formatter = (report: LintReport) => string;

/** Formatter registry; `--format` offers exactly these names. */
export const formatters: Record<string, Formatter> = {
  stylish: formatStylish,
  json: formatJson,
  sarif: formatSarif,
  github: formatGithub,
  junit: formatJunit,
  markdown: formatMarkdown,
};
