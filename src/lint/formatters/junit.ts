/**
 * JUnit XML: one test suite per file, one test case per operation. A case fails for its findings at or above
 * `--fail-on` (so CI's test view agrees with the exit code); lower and suppressed ones are its output.
 */
import type { ApiDocument, OperationView } from '../../parser/model.js';
import { namesOperation } from '../operation-name.js';
import type { Finding } from '../rule.js';
import { concernIndex, failsRun, fewLabels, messageNamesOperation, operationLabelsOf, sortDocuments, sortFindings } from './common.js';
import { displayPath } from './paths.js';
import type { FormatterInput } from './common.js';
import { printable } from '../../parser/printable.js';

/**
 * Escapes text for XML content and attribute values, dropping characters XML 1.0 cannot carry. A `:` that starts a
 * line (after blanks) is written `&#58;`, the same character to an XML reader: the report is often printed in a
 * GitHub Actions log, which runs a line starting with `::` as a workflow command, and a message quoting a key with a
 * line break in it (or a file named `::add-mask::…`) would start one.
 */
export function escapeXml(text: string): string {
  return text
    .replace(/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, '')
    // Bidi controls are legal XML, but reverse what follows them where the report is shown: written as escapes.
    .replace(/[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, (char) => printable(char))
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&apos;')
    .replace(/^(\s*):/gmu, '$1&#58;');
}

interface Case {
  readonly name: string;
  readonly findings: Finding[];
}

/** Formats the report as JUnit XML. */
export function formatJunit(report: FormatterInput): string {
  const suites = new Map<string, Map<string, Case>>();
  const suiteOf = (file: string) => {
    const name = displayPath(report.cwd, file);
    let suite = suites.get(name);
    if (!suite) suites.set(name, (suite = new Map()));
    return suite;
  };
  // Cases are keyed by the operation's display label; findings name operations by id or label, and a name
  // can repeat across documents, so a finding goes to the operations it concerns (see concernIndex).
  const operations: { document: ApiDocument; operation: OperationView; suite: Map<string, Case> }[] = [];
  for (const document of sortDocuments(report.documents)) {
    const suite = suiteOf(document.file);
    for (const operation of document.operations) {
      suite.set(operation.label, { name: operation.label, findings: [] });
      operations.push({ document, operation, suite });
    }
  }
  const sorted = sortFindings(report.findings);
  // For each finding (by index), the operations it concerns, in the operations' order.
  const concerning = concernIndex(sorted, report.documents);
  const concernedBy: (typeof operations)[number][][] = sorted.map(() => []);
  for (const entry of operations) for (const at of concerning(entry.document, entry.operation)) concernedBy[at]!.push(entry);
  for (const [at, finding] of sorted.entries()) {
    const concerned = concernedBy[at]!;
    for (const { suite, operation } of concerned) suite.get(operation.label)!.findings.push(finding);
    const named = new Set(concerned.flatMap(({ operation }) => finding.operations.filter((name) => namesOperation(name, operation))));
    // An operation no linted document declares still gets its own case, named by its label when the engine gave one.
    const labels = operationLabelsOf(finding, report.documents);
    const unmatched = finding.operations.length > 0 ? labels.filter((_, at) => !named.has(finding.operations[at]!)) : ['(document)'];
    for (const name of unmatched) {
      const suite = suiteOf(finding.file);
      let testCase = suite.get(name);
      if (!testCase) suite.set(name, (testCase = { name, findings: [] }));
      testCase.findings.push(finding);
    }
  }
  let tests = 0;
  let failures = 0;
  const body: string[] = [];
  for (const [suiteName, cases] of [...suites].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const suiteFailures = [...cases.values()].filter((c) => c.findings.some((f) => failsRun(f, report.failOn))).length;
    tests += cases.size;
    failures += suiteFailures;
    body.push(`  <testsuite name="${escapeXml(suiteName)}" tests="${cases.size}" failures="${suiteFailures}" errors="0" skipped="0">`);
    for (const testCase of cases.values()) body.push(...renderCase(report, suiteName, testCase));
    body.push('  </testsuite>');
  }
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="idemkit" tests="${tests}" failures="${failures}" errors="0">`,
    ...body,
    '</testsuites>',
    '',
  ].join('\n');
}

function renderCase(report: FormatterInput, suiteName: string, testCase: Case): string[] {
  const open = `    <testcase classname="${escapeXml(suiteName)}" name="${escapeXml(testCase.name)}">`;
  const failOn = report.failOn ?? 'error';
  const active = testCase.findings.filter((f) => failsRun(f, failOn));
  const below = testCase.findings.filter((f) => !f.suppressed && !failsRun(f, failOn));
  const suppressed = testCase.findings.filter((f) => f.suppressed);
  if (testCase.findings.length === 0) return [`    <testcase classname="${escapeXml(suiteName)}" name="${escapeXml(testCase.name)}"/>`];
  const lines = [open];
  // A finding several operations share names them all; one about this case's operation alone says nothing more.
  const others = (f: Finding) => operationLabelsOf(f, report.documents).filter((label) => label !== testCase.name);
  const describe = (f: Finding) => {
    const also = fewLabels(others(f));
    return `${displayPath(report.cwd, f.file)}:${f.line}:${f.column} ${f.severity} ${f.ruleId}: ${f.message}${also.length > 0 ? ` [also ${also.join('; ')}]` : ''}`;
  };
  if (active.length > 0) {
    const first = active[0]!;
    // The failure message names the operation (CI lists failures by message, away from the case name).
    const named = testCase.name === '(document)' || (active.length === 1 && messageNamesOperation(first.message, testCase.name));
    const summary = (named ? '' : `${testCase.name}: `) + (active.length === 1 ? first.message : `${active.length} findings, first: ${first.message}`);
    lines.push(`      <failure message="${escapeXml(summary)}" type="${escapeXml(first.ruleId)}">${escapeXml(active.map(describe).join('\n'))}</failure>`);
  }
  if (below.length > 0 || suppressed.length > 0) {
    const text = [...below.map((f) => `below --fail-on ${failOn}: ${describe(f)}`), ...suppressed.map((f) => `suppressed (${f.suppressed!.reason}): ${describe(f)}`)].join('\n');
    lines.push(`      <system-out>${escapeXml(text)}</system-out>`);
  }
  lines.push('    </testcase>');
  return lines;
}
