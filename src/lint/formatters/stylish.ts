/** ESLint-style text: findings grouped by file, `line:column  severity  message  rule-id`, then a summary. */
import type { Finding, Severity } from '../rule.js';
import type { LintReport } from './index.js';
import { messageNamesOperation, operationLabelsOf } from './common.js';
import { documentOfOperation, findOperationByName } from '../operation-name.js';
import { printable } from '../../parser/printable.js';
import { displayPath, notACommand } from './paths.js';

const LABEL: Record<Severity, string> = { error: 'error', warn: 'warning', info: 'info' };

/** Prints nothing when there is nothing to report, like ESLint. */
export function formatStylish(report: LintReport): string {
  return formatFindings(report) + formatBaseline(report);
}

/** The baseline's part: how many known findings it hid, and each stale entry (fixed, or moved). */
function formatBaseline(report: LintReport): string {
  const baseline = report.baseline;
  if (!baseline || (baseline.matched === 0 && baseline.stale.length === 0)) return '';
  const lines = [`baseline ${displayPath(report.cwd, baseline.file)}: ${plural(baseline.matched, 'known finding')} hidden`];
  if (baseline.stale.length > 0) {
    const stale = baseline.stale.length;
    lines.push(`${stale} stale ${stale === 1 ? 'entry' : 'entries'} (no longer found; regenerate with --write-baseline):`);
    for (const entry of baseline.stale) {
      // The file as the baseline records it (text of the baseline, read back): GitHub Actions takes a line that starts
      // with `::` even after blanks for a workflow command.
      lines.push(printable(`  ${notACommand(entry.file)}  ${entry.operation}  ${entry.pointer || '(operation)'}  ${entry.rule}${entry.count > 1 ? ` x${entry.count}` : ''}`));
    }
  }
  return `${lines.join('\n')}\n`;
}

function formatFindings(report: LintReport): string {
  const shown = report.findings.filter((finding) => !finding.suppressed);
  const suppressed = report.findings.length - shown.length;
  if (shown.length === 0) return suppressed > 0 ? `${plural(suppressed, 'finding')} suppressed\n` : '';
  const byFile = new Map<string, Finding[]>();
  for (const finding of shown) {
    const list = byFile.get(finding.file) ?? [];
    list.push(finding);
    byFile.set(finding.file, list);
  }
  const lines: string[] = [];
  for (const [file, findings] of byFile) {
    lines.push(printable(displayPath(report.cwd, file)));
    // Messages quote key names and values from the user's file: a control character there must not reach the terminal.
    const rows = findings.map((finding) => {
      const scope = namesOperation(finding, report) ? '' : ` (in ${finding.operations.join(', ')})`;
      return [`${finding.line}:${finding.column}`, LABEL[finding.severity], printable(`${finding.message}${scope}`), finding.ruleId];
    });
    const width = [0, 1].map((column) => Math.max(...rows.map((row) => row[column]!.length)));
    for (const row of rows) {
      lines.push(`  ${row[0]!.padEnd(width[0]!)}  ${row[1]!.padEnd(width[1]!)}  ${row[2]}  ${row[3]}`);
    }
    lines.push('');
  }
  const count = (severity: Severity) => shown.filter((finding) => finding.severity === severity).length;
  const parts = [plural(count('error'), 'error'), plural(count('warn'), 'warning'), plural(count('info'), 'info')];
  lines.push(`✖ ${plural(shown.length, 'problem')} (${parts.join(', ')})${suppressed > 0 ? `, ${suppressed} suppressed` : ''}`);
  return `${lines.join('\n')}\n`;
}

const OPERATION_POINTER = /^\/paths\/[^/]+\/(get|put|post|delete|options|head|patch|trace)(\/|$)/;

/**
 * Whether the finding's place already says which operation it is about: a node inside that one operation
 * (`/paths/~1payouts/post/…`). A finding in the document defaults, a shared component, a path item's
 * shared parameters or an external operation file (`/post/…`) gets the operation appended; so does any
 * finding several operations share — unless the message already names each of them.
 */
function namesOperation(finding: Finding, report: LintReport): boolean {
  if (finding.operations.length === 0) return true;
  if (finding.operations.length === 1 && OPERATION_POINTER.test(finding.pointer) && writtenInOperation(finding, report)) return true;
  // The message itself may already say it (`… of POST /payouts (createPayout): …`).
  return operationLabelsOf(finding, report.documents).every((label) => messageNamesOperation(finding.message, label));
}

/**
 * Whether the line a finding points at is inside the text of the operation it names. A YAML alias
 * (`x-idempotency: *contract`) gives an operation-local pointer whose node is written at the anchor, in
 * the document's extensions or another operation, before the operation itself: there the line alone does
 * not say which operation the finding is about.
 */
function writtenInOperation(finding: Finding, report: LintReport): boolean {
  const operation = findOperationByName(finding.operations[0]!, report.documents, finding.file);
  const document = operation && documentOfOperation(operation, report.documents);
  if (!operation || !document || operation.at.file !== finding.file) return false;
  return finding.line >= document.position(operation.at).line;
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 || noun === 'info' ? '' : 's'}`;
}
