/** The output formats of `idemkit lint`, by name; each loads only when asked for (a lint prints one). */
import type { ApiDocument } from '../../parser/model.js';
import type { BaselineEntry } from '../baseline.js';
import type { Finding, Rule, Severity } from '../rule.js';
import type { DocumentFailure } from './common.js';

/** Everything a formatter may print from. */
export interface LintReport {
  /** Directory that printed paths are relative to. */
  readonly cwd: string;
  /**
   * The git work tree `cwd` is in (`repositoryRoot` in `paths.ts`), when there is one: SARIF locations and fingerprints and
   * the github format's `file=` are relative to it, as code scanning reads them; without it, to `cwd`.
   */
  readonly root?: string;
  /** The entry files that could not be loaded (see {@link FormatterInput.failures}). */
  readonly failures?: readonly DocumentFailure[];
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

/** The formats, in the order `--format` offers them. */
export const formatNames = ['stylish', 'json', 'sarif', 'github', 'junit', 'markdown'] as const;

/** One of {@link formatNames}. */
export type FormatName = (typeof formatNames)[number];

// Loaded on demand: the rule pages SARIF embeds, the catalogue markdown reads, and the rest stay out of a
// cold `idemkit lint` that prints stylish.
const loaders: Record<FormatName, () => Promise<Formatter>> = {
  stylish: async () => (await import('./stylish.js')).formatStylish,
  json: async () => (await import('./json.js')).formatJson,
  sarif: async () => (await import('./sarif.js')).formatSarif,
  github: async () => (await import('./github.js')).formatGithub,
  junit: async () => (await import('./junit.js')).formatJunit,
  markdown: async () => (await import('./markdown.js')).formatMarkdown,
};

/** Whether `name` is a format `--format` accepts. */
export function isFormatName(name: string): name is FormatName {
  return (formatNames as readonly string[]).includes(name);
}

/** Loads the formatter called `name`. */
export function loadFormatter(name: FormatName): Promise<Formatter> {
  return loaders[name]();
}
