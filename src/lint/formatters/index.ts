/** The output formats of `idemkit lint`, by name. */
import type { ApiDocument } from '../../parser/model.js';
import type { Finding } from '../rule.js';
import { formatJson } from './json.js';
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
}

/** Renders a report as text (the whole output, ending in a newline when not empty). */
export type Formatter = (report: LintReport) => string;

/** Formatter registry; `--format` offers exactly these names. */
export const formatters: Record<string, Formatter> = {
  stylish: formatStylish,
  json: formatJson,
};
