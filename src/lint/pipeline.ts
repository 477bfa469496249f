/**
 * The parts of a lint run around the engine: the config that applies to each spec (found once per
 * directory), suppressions, and the baseline. The `lint` command strings these together.
 */
import path from 'node:path';
import { UsageError } from '../errors.js';
import type { ApiDocument } from '../parser/model.js';
import { applyBaseline, readBaseline, writeBaseline } from './baseline.js';
import type { BaselineResult } from './baseline.js';
import { findConfigFile, loadConfig } from './config.js';
import type { LintConfig } from './config.js';
import { lintDocument } from './engine.js';
import type { Finding, Rule } from './rule.js';
import { displayPath } from './formatters/paths.js';
import { applySuppressions } from './suppress.js';

/** Resolves the config for each spec: `--config` for all of them, else discovery (each file parsed once). */
export function createConfigResolver(options: { cwd: string; configFile?: string; knownRuleIds: readonly string[] }): (specFile: string) => LintConfig {
  const loaded = new Map<string, LintConfig>();
  const load = (specFile?: string) => withDisplayPath(options.cwd, () => loadConfig({ cwd: options.cwd, specFile, configFile: options.configFile, knownRuleIds: options.knownRuleIds }));
  if (options.configFile !== undefined) {
    const config = load();
    return () => config;
  }
  return (specFile) => {
    const key = findConfigFile(path.dirname(specFile)) ?? '';
    let config = loaded.get(key);
    if (!config) {
      config = load(specFile);
      loaded.set(key, config);
    }
    return config;
  };
}

/** Runs `fn`, re-throwing a usage error about a file with that file relative to `cwd` (as other errors print). */
function withDisplayPath<T>(cwd: string, fn: () => T): T {
  try {
    return fn();
  } catch (error) {
    if (error instanceof UsageError && error.file !== undefined && path.isAbsolute(error.file)) {
      throw new UsageError(error.message, displayPath(cwd, error.file), error.line, error.column);
    }
    throw error;
  }
}

/** Lints one document under a config and marks what its suppressions silence. */
export function lintWithConfig(document: ApiDocument, rules: readonly Rule[], config: LintConfig): Finding[] {
  const findings = lintDocument(document, { rules, severities: config.rules, settings: config.settings });
  return applySuppressions(document, findings, rules.map((rule) => rule.meta.id));
}

/** What `--baseline` / `--write-baseline` did to a run. */
export interface BaselineStep {
  /** The findings left to report. */
  readonly findings: readonly Finding[];
  /** Set with `--baseline`. */
  readonly compared?: BaselineResult;
  /** Set with `--write-baseline`: how many entries were written, and where. */
  readonly written?: { readonly file: string; readonly entries: number; readonly findings: number };
}

/** Applies `--write-baseline FILE` (records, then reports nothing as new) or `--baseline FILE` (filters). */
export function baselineStep(
  report: { readonly findings: readonly Finding[]; readonly documents: readonly ApiDocument[] },
  options: { cwd: string; baseline?: string; writeBaseline?: string },
): BaselineStep {
  if (options.writeBaseline !== undefined) {
    const file = path.resolve(options.cwd, options.writeBaseline);
    const baseline = writeBaseline(report, file, options.writeBaseline);
    const recorded = baseline.entries.reduce((sum, entry) => sum + entry.count, 0);
    // Everything recorded is now known: only suppressed findings remain to show.
    return { findings: report.findings.filter((finding) => finding.suppressed), written: { file, entries: baseline.entries.length, findings: recorded } };
  }
  if (options.baseline !== undefined) {
    const file = path.resolve(options.cwd, options.baseline);
    const compared = applyBaseline(report, readBaseline(file, options.baseline), file);
    return { findings: compared.findings, compared };
  }
  return { findings: report.findings };
}
