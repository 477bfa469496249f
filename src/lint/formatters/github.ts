/**
 * GitHub Actions workflow commands: one annotation per unsuppressed finding,
 * `::error file=…,line=…,col=…,title=<rule>::message [POST /payouts (createPayout)] (rule)` — the operation
 * is named unless the message already names it.
 */
import path from 'node:path';
import { printable } from '../../parser/printable.js';
import { messageNamesOperation, operationLabelsOf, sortFindings } from './common.js';
import { displayPath, isInside, relativePath } from './paths.js';
import type { FormatterInput } from './common.js';
import type { Severity } from '../rule.js';

const COMMAND: Record<Severity, string> = { error: 'error', warn: 'warning', info: 'notice' };

/**
 * Escapes a workflow command's message (`%`, CR, LF), as the Actions toolkit does; other control characters from
 * spec text (an ESC in an operationId would reach the job log as a terminal sequence) are written out as `\e`, `\u0007`.
 */
export function escapeData(text: string): string {
  // eslint-disable-next-line no-control-regex
  const shown = text.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, (c) => printable(c));
  return shown.replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
}

/** Escapes a workflow command property value (also `:` and `,`, which separate properties). */
export function escapeProperty(text: string): string {
  return escapeData(text).replace(/:/g, '%3A').replace(/,/g, '%2C');
}

/**
 * A file as an annotation names it: GitHub reads `file=` relative to the repository root, whatever directory the
 * step ran in, so inside a git work tree it is relative to the root, and a file outside the tree is its absolute
 * path (a `../x` would name a file of the repository). Outside any tree, as every format names files.
 */
function annotatedFile(report: FormatterInput, file: string): string {
  if (report.root === undefined) return displayPath(report.cwd, file);
  return isInside(report.root, file) ? relativePath(report.root, file) : file.split(path.sep).join('/');
}

/** Formats the report as GitHub workflow annotations. */
export function formatGithub(report: FormatterInput): string {
  const lines: string[] = [];
  for (const finding of sortFindings(report.findings)) {
    if (finding.suppressed) continue;
    const properties = [
      `file=${escapeProperty(annotatedFile(report, finding.file))}`,
      `line=${finding.line}`,
      `col=${finding.column}`,
      `title=${escapeProperty(finding.ruleId)}`,
    ].join(',');
    // Name the operation(s) unless the message already does (`POST /refunds takes …`).
    const labels = operationLabelsOf(finding, report.documents).filter((label) => !messageNamesOperation(finding.message, label));
    const about = labels.length > 0 ? ` [${labels.join('; ')}]` : '';
    lines.push(`::${COMMAND[finding.severity]} ${properties}::${escapeData(`${finding.message}${about} (${finding.ruleId})`)}`);
  }
  for (const entry of report.baseline?.stale ?? []) {
    lines.push(`::notice title=${escapeProperty('idemkit baseline')}::${escapeData(`stale baseline entry: ${entry.rule} at ${entry.file} ${entry.operation} ${entry.pointer || '(operation)'} no longer occurs; regenerate the baseline`)}`);
  }
  return lines.length > 0 ? `${lines.join('\n')}\n` : '';
}
