/**
 * SARIF 2.1.0 for code scanning: the rule catalogue as `tool.driver.rules` (with help from each rule's
 * page), one result per finding with a physical location relative to the repository root (the working directory
 * outside a git work tree), and a
 * `partialFingerprints` entry built from the finding's stable identity (no line numbers), so a result keeps
 * its identity across edits. Suppressed findings are emitted with an in-source suppression.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { fingerprintIdentity, identityHash, textHash } from '../baseline.js';
import { catalogue } from '../catalogue.js';
import type { Rule, Severity } from '../rule.js';
import { packageVersion, ruleDocOrSummary } from '../rule-docs.js';
import { messageNamesOperation, operationLabelsOf, sortFindings } from './common.js';
import { relativePath } from './paths.js';
import type { FormatterInput } from './common.js';

const LEVEL: Record<Severity, 'error' | 'warning' | 'note'> = { error: 'error', warn: 'warning', info: 'note' };

/** Key of idemkit's fingerprint in `partialFingerprints`. */
export const FINGERPRINT_KEY = 'idemkitFindingIdentity/v1';

/** Encodes a `/`-separated relative path as a URI reference. */
function uriOf(relative: string): string {
  return relative.split('/').map(encodeURIComponent).join('/');
}

/**
 * A file's SARIF artifact location: relative to `%SRCROOT%` when it is under it, else its absolute `file:` URI
 * (`/dev/stdin`, a `$ref` to a file beside the checkout): a `../../dev/stdin` under the source root names no file a
 * code-scanning service can show. Results and the notifications of documents that failed to load use it alike.
 */
function artifactOf(base: string, file: string): { uri: string; uriBaseId?: string } {
  const relative = relativePath(base, file);
  if (relative === '..' || relative.startsWith('../') || path.isAbsolute(relative)) return { uri: pathToFileURL(file).href };
  return { uri: uriOf(relative), uriBaseId: '%SRCROOT%' };
}

function ruleName(id: string): string {
  return id.replace(/(^|-)([a-z0-9])/g, (_, __, letter: string) => letter.toUpperCase());
}

function plainText(markdown: string): string {
  return markdown
    .replace(/^#+\s*/gm, '')
    .replace(/`([^`]*)`/g, '$1')
    .replace(/\*\*([^*]*)\*\*/g, '$1')
    .trim();
}

/** Builds the SARIF log object (exported for tests that inspect it without parsing text). */
export function buildSarif(report: FormatterInput): Record<string, unknown> {
  const rules: readonly Rule[] = report.rules ?? catalogue();
  const ruleIndex = new Map(rules.map((rule, index) => [rule.meta.id, index]));
  const driverRules = rules.map((rule) => {
    const page = ruleDocOrSummary(rule);
    return {
      id: rule.meta.id,
      name: ruleName(rule.meta.id),
      shortDescription: { text: rule.meta.description },
      fullDescription: { text: rule.meta.rationale },
      help: { text: plainText(page), markdown: page },
      defaultConfiguration: { level: LEVEL[rule.meta.severity] },
      properties: { criterion: rule.meta.criterion, tags: ['idempotency', rule.meta.criterion] },
    };
  });
  // `%SRCROOT%`: the repository root, which GitHub reads every uri against (ignoring uriBaseId), so a step run in
  // `services/api` still names `services/api/openapi.yaml`, and a result's fingerprint (relative to it too) does not
  // change with the directory the step ran in. Outside a git work tree, the working directory.
  const base = report.root ?? report.cwd;
  const baseUri = pathToFileURL(base.endsWith('/') ? base : `${base}/`).href;
  // Findings may share an identity (one rule at one node: six states missing on one contract); code scanning
  // merges results with equal fingerprints, so each of several gets what it says appended (its message id and text,
  // hashed) — not its rank among them, which moved whenever another one came or went: a fixed `abandoned` gave
  // `inProgress` the plain fingerprint, and every later alert another's state and dismissal. Equal messages too get
  // their rank among themselves. A lone finding keeps the plain identity.
  const sorted = sortFindings(report.findings);
  const identities = sorted.map((finding) => identityHash(fingerprintIdentity(finding, report.documents, base)));
  const sharing = new Map<string, number>();
  for (const identity of identities) sharing.set(identity, (sharing.get(identity) ?? 0) + 1);
  const seen = new Map<string, number>();
  const results = sorted.map((finding, i) => {
    const identity = identities[i]!;
    let fingerprint = identity;
    if (sharing.get(identity)! > 1) {
      fingerprint = `${identity}:${textHash(`${finding.messageId}\n${finding.message}`).slice(0, 12)}`;
      const rank = (seen.get(fingerprint) ?? 0) + 1;
      seen.set(fingerprint, rank);
      if (rank > 1) fingerprint = `${fingerprint}:${rank}`;
    }
    const index = ruleIndex.get(finding.ruleId);
    const labels = operationLabelsOf(finding, report.documents);
    // The message names the operation(s) it does not already name; the fingerprint below does not read labels.
    const unnamed = labels.filter((label) => !messageNamesOperation(finding.message, label));
    const result: Record<string, unknown> = {
      ruleId: finding.ruleId,
      ...(index === undefined ? {} : { ruleIndex: index }),
      level: LEVEL[finding.severity],
      message: { text: unnamed.length > 0 ? `${finding.message} [${unnamed.join('; ')}]` : finding.message },
      locations: [
        {
          physicalLocation: {
            artifactLocation: artifactOf(base, finding.file),
            region: { startLine: Math.max(1, finding.line), startColumn: Math.max(1, finding.column) },
          },
          ...(finding.operations.length > 0
            ? { logicalLocations: finding.operations.map((name, at) => ({ name, fullyQualifiedName: labels[at], kind: 'function' })) }
            : {}),
        },
      ],
      partialFingerprints: { [FINGERPRINT_KEY]: fingerprint },
      properties: {
        pointer: finding.pointer,
        messageId: finding.messageId,
        ...(finding.operations.length > 0 ? { operations: [...finding.operations], operationLabels: labels } : {}),
      },
    };
    if (finding.suppressed) result.suppressions = [{ kind: 'inSource', justification: finding.suppressed.reason }];
    if (report.baseline) result.baselineState = 'new';
    return result;
  });
  return {
    $schema: 'https://json.schemastore.org/sarif-2.1.0.json',
    version: '2.1.0',
    runs: [
      {
        tool: { driver: { name: 'idemkit', semanticVersion: packageVersion(), rules: driverRules } },
        originalUriBaseIds: { '%SRCROOT%': { uri: baseUri } },
        results,
        columnKind: 'utf16CodeUnits',
        // A document that could not be loaded: the run did not succeed, and each such document is a notification (a
        // SARIF reader would otherwise take the missing document's results for none).
        ...(report.failures && report.failures.length > 0
          ? {
              invocations: [
                {
                  executionSuccessful: false,
                  toolExecutionNotifications: report.failures.map((failure) => ({
                    level: 'error',
                    message: { text: failure.message },
                    locations: [
                      {
                        physicalLocation: {
                          artifactLocation: artifactOf(base, failure.file),
                          ...(failure.line === undefined ? {} : { region: { startLine: Math.max(1, failure.line), ...(failure.column === undefined ? {} : { startColumn: Math.max(1, failure.column) }) } }),
                        },
                      },
                    ],
                  })),
                },
              ],
            }
          : {}),
      },
    ],
  };
}

/** Formats the report as a SARIF 2.1.0 log. */
export function formatSarif(report: FormatterInput): string {
  return `${JSON.stringify(buildSarif(report), null, 2)}\n`;
}
