/**
 * A table-driven tester for idemkit rules, in the spirit of ESLint's RuleTester.
 *
 * Each case's document (inline YAML/JSON text, or a path relative to the repository root) is written to a
 * temporary directory, loaded with `loadDocument` and linted by the engine with ONLY the rule under test.
 * The tester fails when the table is malformed (no valid or no invalid case, a repeated name, an invalid
 * case without errors, an expected message id the rule does not define), when the findings differ from
 * the expected ones in count, order, message id or pointer, when a reported pointer does not resolve in
 * the document, or when a message keeps an unfilled `{placeholder}`.
 */
import assert from 'node:assert/strict';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { lintDocument } from '../../src/lint/engine.js';
import type { Finding, LintSettings, Rule } from '../../src/lint/rule.js';
import { loadDocument } from '../../src/parser/index.js';
import type { ApiDocument } from '../../src/parser/model.js';

/** The repository root (fixture paths in cases are relative to it). */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

interface CaseBase {
  /** Unique within the rule's table. */
  readonly name: string;
  /** Inline YAML/JSON text (anything with a line break), or a file path relative to the repository root. */
  readonly document: string;
  /** Extra files written next to an inline document (for external `$ref`s), by relative name. */
  readonly files?: Readonly<Record<string, string>>;
  /** When set, every finding must name this operation (operationId, or `METHOD /path`). */
  readonly operation?: string;
  /** Settings passed to the engine (unsafe methods, extra key headers). */
  readonly settings?: Partial<LintSettings>;
}

/** A document on which the rule must report nothing. */
export type ValidCase = CaseBase;

/** One expected finding, in the engine's order (file, line, column). */
export interface ExpectedError {
  readonly messageId: string;
  /** JSON Pointer of the reported node. */
  readonly pointer: string;
  /** File of the node relative to the case's directory, when not the main document. */
  readonly file?: string;
  /** Operations the (merged) finding must name, in order. */
  readonly operations?: readonly string[];
  /** A pattern the rendered message must match. */
  readonly message?: RegExp;
}

/** A document on which the rule must report exactly `errors`. */
export interface InvalidCase extends CaseBase {
  readonly errors: readonly ExpectedError[];
}

/** A rule's test table. */
export interface RuleTable {
  readonly valid: readonly ValidCase[];
  readonly invalid: readonly InvalidCase[];
}

/** Problems with the table itself (empty when it is well formed). */
export function tableProblems(rule: Rule, table: RuleTable): string[] {
  const problems: string[] = [];
  if (table.valid.length === 0) problems.push(`rule ${rule.meta.id} has no valid case`);
  if (table.invalid.length === 0) problems.push(`rule ${rule.meta.id} has no invalid case`);
  const seen = new Set<string>();
  for (const c of [...table.valid, ...table.invalid]) {
    if (seen.has(c.name)) problems.push(`case name '${c.name}' repeats`);
    seen.add(c.name);
  }
  for (const c of table.invalid) {
    if (c.errors.length === 0) problems.push(`invalid case '${c.name}' expects no error (make it a valid case)`);
    for (const e of c.errors) {
      if (!Object.hasOwn(rule.meta.messages, e.messageId)) {
        problems.push(`invalid case '${c.name}' expects message id '${e.messageId}', which rule ${rule.meta.id} does not define`);
      }
    }
  }
  return problems;
}

/** The outcome of linting one case with one rule. */
export interface CaseRun {
  readonly document: ApiDocument;
  /** The rule's findings, in engine order. */
  readonly findings: readonly Finding[];
  /** The case's directory (inline documents) or the fixture's directory. */
  readonly dir: string;
  /** Findings whose pointer does not resolve in the document (checked while the files exist). */
  readonly unresolved: readonly Finding[];
}

/** Loads a case's document and lints it with `rule` alone. */
export async function lintCase(rule: Rule, c: CaseBase): Promise<CaseRun> {
  const inline = /[\r\n]/.test(c.document);
  let dir: string;
  let file: string;
  let cleanup: string | undefined;
  if (inline) {
    dir = cleanup = await mkdtemp(path.join(tmpdir(), 'idemkit-rule-'));
    file = path.join(dir, c.document.trimStart().startsWith('{') ? 'openapi.json' : 'openapi.yaml');
    await writeFile(file, c.document);
    for (const [name, text] of Object.entries(c.files ?? {})) {
      await mkdir(path.dirname(path.join(dir, name)), { recursive: true });
      await writeFile(path.join(dir, name), text);
    }
  } else {
    file = path.resolve(REPO_ROOT, c.document);
    dir = path.dirname(file);
  }
  try {
    const document = await loadDocument(file);
    const findings = lintDocument(document, { rules: [rule], settings: c.settings }).filter((f) => f.ruleId === rule.meta.id);
    const unresolved = findings.filter((f) => document.get({ file: f.file, pointer: f.pointer }) === undefined);
    return { document, findings, dir, unresolved };
  } finally {
    if (cleanup) await rm(cleanup, { recursive: true, force: true });
  }
}

function describeFindings(findings: readonly Finding[]): string {
  return findings.map((f) => `  ${f.messageId} at ${f.pointer} (${f.line}:${f.column}): ${f.message}`).join('\n') || '  (none)';
}

/** Runs one case and asserts its outcome. */
export async function checkCase(rule: Rule, c: ValidCase | InvalidCase): Promise<void> {
  const { document, findings, dir, unresolved } = await lintCase(rule, c);
  assert.deepEqual(
    unresolved.map((f) => `${f.file}#${f.pointer}`),
    [],
    `reported pointers must resolve in the document:\n${describeFindings(unresolved)}`,
  );
  for (const f of findings) {
    // Only the template's own placeholders count: a filled-in path template (`/payouts/{id}`) keeps its braces.
    const template = (rule.meta.messages as Record<string, string>)[f.messageId] ?? '';
    for (const [placeholder] of template.matchAll(/\{\w+\}/g)) {
      assert.ok(!f.message.includes(placeholder), `message keeps an unfilled placeholder ${placeholder}: ${f.message}`);
    }
    assert.ok(f.operations.length > 0, `finding ${f.messageId} at ${f.pointer} names no operation`);
    if (c.operation !== undefined) {
      assert.ok(f.operations.includes(c.operation), `finding ${f.messageId} at ${f.pointer} names ${f.operations.join(', ')}, not ${c.operation}`);
    }
  }
  const expected = 'errors' in c ? c.errors : [];
  assert.equal(findings.length, expected.length, `expected ${expected.length} finding(s), got ${findings.length}:\n${describeFindings(findings)}`);
  expected.forEach((e, i) => {
    const f = findings[i]!;
    const where = `finding ${i + 1} of ${findings.length}:\n${describeFindings(findings)}`;
    assert.equal(f.messageId, e.messageId, `message id of ${where}`);
    assert.equal(f.pointer, e.pointer, `pointer of ${where}`);
    const file = e.file === undefined ? document.file : path.resolve(dir, e.file);
    assert.equal(f.file, file, `file of ${where}`);
    if (e.operations) assert.deepEqual(f.operations, e.operations, `operations of ${where}`);
    if (e.message) assert.match(f.message, e.message, `message of ${where}`);
  });
}

/** The tester: `ruleTester.run(rule, { valid, invalid })` declares one mocha suite per rule. */
export const ruleTester = {
  run(rule: Rule, table: RuleTable): void {
    describe(rule.meta.id, () => {
      it('has a well-formed test table', () => {
        assert.deepEqual(tableProblems(rule, table), []);
      });
      for (const c of table.valid) it(`valid: ${c.name}`, () => checkCase(rule, c));
      for (const c of table.invalid) it(`invalid: ${c.name}`, () => checkCase(rule, c));
    });
  },
};
