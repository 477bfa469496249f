/**
 * The lint engine: runs every rule over the operations it looks at (all, or those a rule's `operations`
 * names), adds severity and position, merges the same fault reached through several operations (a shared
 * `$ref` component) into one finding, reports the document's own warnings once, and sorts. Pure: no I/O
 * beyond the document's lazy positions.
 */
import { InternalError } from '../errors.js';
import type { ApiDocument, DocumentWarning, Location, OperationView, Position } from '../parser/model.js';
import { schemaShapeWarnings } from './document-shapes.js';
import type { Finding, LintSettings, Rule, RuleContext, RuleOperations, Severity } from './rule.js';
import { isSafeMethod, isUnsafe } from './views.js';

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** Rule id under which the document's warnings (problems unrelated to idempotency) are reported. */
export const DOCUMENT_INVALID_RULE_ID = 'document-invalid';

/** The settings rules see unless the caller overrides them. */
export const DEFAULT_LINT_SETTINGS: LintSettings = { unsafeMethods: ['post', 'patch'], keyHeaders: [] };

/** Options of {@link lintDocument}. */
export interface LintOptions {
  /** The rules to run, in catalogue order. */
  readonly rules: readonly Rule[];
  /** Severity per rule id (overrides `meta.severity`); `off` skips the rule. */
  readonly severities?: Readonly<Record<string, Severity | 'off'>>;
  readonly settings?: Partial<LintSettings>;
}

/** A finding as a rule reports it, before it is placed (line and column) and merged across operations. */
type Pending = { ruleId: string; severity: Severity; message: string; messageId: string; at: Location; position?: Position };

/** A finding as merged across the operations that report it. */
type Merged = { pending: Pending; operations: Set<string> };

/**
 * A rule's `report`: fills the message for its id (an unknown id is the rule's bug) and hands the finding to `add`.
 * A report that repeats the rule's previous one — the same message id, the same location object and equal data
 * (a shared component reached from operation after operation) — is that finding: it joins it through `again`
 * without filling the message and joining its key once more.
 */
function reporter(rule: Rule, severity: Severity, add: (pending: Pending) => Merged, again: (entry: Merged) => void): RuleContext<string>['report'] {
  const messages = rule.meta.messages as Record<string, string>;
  let last: Merged | undefined;
  let lastId: string | undefined;
  let lastAt: Location | undefined;
  let lastData: Readonly<Record<string, string | number>> | undefined;
  return (messageId, at, data) => {
    const template = messages[messageId];
    if (template === undefined) throw new InternalError(`rule ${rule.meta.id} reported unknown message id '${messageId}'`);
    if (last !== undefined && messageId === lastId && at === lastAt && sameData(data, lastData)) {
      again(last);
      return;
    }
    last = add({ ruleId: rule.meta.id, severity, message: fill(template, data), messageId, at });
    lastId = messageId;
    lastAt = at;
    lastData = data;
  };
}

/**
 * Whether two reports' data fill any template alike: both absent, or two objects with the same own members and
 * values. The same object twice does not count: a rule may have changed it in between.
 */
function sameData(data: Readonly<Record<string, string | number>> | undefined, previous: Readonly<Record<string, string | number>> | undefined): boolean {
  if (data === undefined || previous === undefined) return data === previous;
  if (data === previous) return false;
  let members = 0;
  for (const name in data) {
    if (!Object.prototype.hasOwnProperty.call(data, name)) continue;
    if (!Object.prototype.hasOwnProperty.call(previous, name) || data[name] !== previous[name]) return false;
    members += 1;
  }
  for (const name in previous) if (Object.prototype.hasOwnProperty.call(previous, name)) members -= 1;
  return members === 0;
}

/** Lints one loaded document. Findings are sorted by file, line, column, rule, then message. */
export function lintDocument(doc: ApiDocument, options: LintOptions): Finding[] {
  const settings: LintSettings = { ...DEFAULT_LINT_SETTINGS, ...stripUndefined(options.settings ?? {}) };
  const severities = options.severities ?? {};
  // Merge first, place later: a fault in a shared component is reported once per operation that reaches it,
  // and its position is computed once.
  const merged = new Map<string, Merged>();
  const add = (pending: Pending, operation: string | undefined): Merged => {
    const where = pending.position ? `${pending.position.line}:${pending.position.column}` : '';
    const key = `${pending.ruleId}\u0000${pending.at.file}\u0000${pending.at.pointer}\u0000${where}\u0000${pending.message}`;
    let entry = merged.get(key);
    if (!entry) {
      entry = { pending, operations: new Set() };
      merged.set(key, entry);
    }
    if (operation !== undefined) entry.operations.add(operation);
    return entry;
  };

  const operations = doc.operations;
  const names = operations.map((operation) => operation.operationId ?? `${operation.method.toUpperCase()} ${operation.path}`);
  const unsafeFlags = operations.map((operation) => isUnsafe(operation, settings.unsafeMethods));
  // Operation by operation, each rule in catalogue order: the views a rule asks of an operation (its
  // parameters, body, responses) are then computed while the operation is current and let go after it, so a
  // big document's views die young instead of piling up for the garbage collector to copy.
  let name = '';
  const active: { rule: Rule; severity: Severity; ctx: Mutable<RuleContext<string>>; scope: RuleOperations | undefined }[] = [];
  for (const rule of options.rules) {
    const severity = severities[rule.meta.id] ?? rule.meta.severity;
    if (severity === 'off') continue;
    // One context per rule, pointed at each operation in turn (checks are synchronous): a 2,000-operation
    // document would otherwise allocate a context and a closure for every rule × operation pair.
    const ctx: Mutable<RuleContext<string>> = {
      document: doc,
      operation: operations[0]!,
      contract: undefined,
      settings,
      report: reporter(
        rule,
        severity,
        (pending) => add(pending, name),
        (entry) => entry.operations.add(name),
      ),
    };
    active.push({ rule, severity, ctx, scope: rule.operations });
  }
  // Indexed loops here and in the views: a cold process runs them unoptimised, where `for…of` allocates
  // an iterator result per step.
  for (let index = 0; index < operations.length; index++) {
    const operation = operations[index]!;
    name = names[index]!;
    const unsafe = unsafeFlags[index]!;
    for (let r = 0; r < active.length; r++) {
      const { rule, ctx, scope } = active[r]!;
      if (!looksAt(scope, operation, unsafe)) continue;
      ctx.operation = operation;
      ctx.contract = operation.contract;
      try {
        rule.check(ctx);
      } catch (error) {
        if (error instanceof InternalError) throw error;
        const reason = error instanceof Error ? error.message : String(error);
        const wrapped = new InternalError(`rule ${rule.meta.id} failed on ${operation.label}: ${reason}`);
        (wrapped as { cause?: unknown }).cause = error;
        if (error instanceof Error && error.stack) wrapped.stack = `${wrapped.stack}\nCaused by: ${error.stack}`;
        throw wrapped;
      }
    }
  }
  for (let r = 0; r < active.length; r++) {
    const { rule, severity } = active[r]!;
    if (!rule.checkDocument) continue;
    // Document-level faults (e.g. invalid defaults no operation uses) merge with the same fault found
    // through operations, which add their names.
    rule.checkDocument({
      document: doc,
      settings,
      report: reporter(
        rule,
        severity,
        (pending) => add(pending, undefined),
        () => undefined,
      ),
    });
  }

  const warningSeverity = severities[DOCUMENT_INVALID_RULE_ID] ?? 'warn';
  if (warningSeverity !== 'off') {
    for (const warning of documentWarnings(doc)) {
      add(
        {
          ruleId: DOCUMENT_INVALID_RULE_ID,
          severity: warningSeverity,
          message: warning.message,
          messageId: 'documentInvalid',
          at: warning.at,
          ...(warning.position ? { position: warning.position } : {}),
        },
        undefined,
      );
    }
  }

  // A YAML alias (`x-idempotency: *contract`) reaches one written node through several pointers: the same
  // fault at the same line and column is one finding (at the first pointer) naming every operation.
  const placed = new Map<string, Finding & { operations: string[] }>();
  for (const { pending, operations } of merged.values()) {
    const { line, column } = pending.position ?? doc.position(pending.at);
    const key = `${pending.ruleId}\u0000${pending.at.file}\u0000${line}:${column}\u0000${pending.message}`;
    const existing = placed.get(key);
    if (existing) {
      for (const operation of operations) if (!existing.operations.includes(operation)) existing.operations.push(operation);
      continue;
    }
    placed.set(key, {
      ruleId: pending.ruleId,
      severity: pending.severity,
      message: pending.message,
      messageId: pending.messageId,
      file: pending.at.file,
      pointer: pending.at.pointer,
      line,
      column,
      operations: [...operations],
    });
  }
  // Every finding also carries the display label of each operation it names (`POST /payouts (createPayout)`),
  // so a format can say which operation a finding is about without looking the name up.
  // Made on the first finding that names an operation: a clean document needs no label of its 2,000 operations.
  let labels: Map<string, string> | undefined;
  const label = (name: string): string => {
    if (labels === undefined) {
      labels = new Map();
      for (let index = operations.length - 1; index >= 0; index--) labels.set(names[index]!, operations[index]!.label);
    }
    return labels.get(name) ?? name;
  };
  const findings = [...placed.values()].map((finding) =>
    finding.operations.length === 0 ? finding : { ...finding, operationLabels: finding.operations.map(label) },
  );
  return findings.sort(compareFindings);
}

/** Whether a rule that looks at `scope` operations (see {@link RuleOperations}; all when undefined) looks at this one. */
function looksAt(scope: RuleOperations | undefined, operation: OperationView, unsafe: boolean): boolean {
  switch (scope) {
    case undefined:
      return true;
    case 'contracted':
      return operation.contract !== undefined;
    case 'unsafe':
      return unsafe;
    case 'writes':
      return unsafe || !isSafeMethod(operation.method);
  }
}

const shapeWarnings = new WeakMap<ApiDocument, readonly DocumentWarning[]>();

/**
 * The loader's warnings plus the schema shapes the document gets wrong (a null schema, 3.1 idioms in 3.0),
 * found once per document however often it is linted.
 */
function documentWarnings(doc: ApiDocument): readonly DocumentWarning[] {
  let shapes = shapeWarnings.get(doc);
  if (!shapes) {
    shapes = schemaShapeWarnings(doc);
    shapeWarnings.set(doc, shapes);
  }
  return shapes.length === 0 ? doc.warnings : [...doc.warnings, ...shapes];
}

/** Orders findings by file, line, column, rule id, then message: the same input always prints the same. */
export function compareFindings(a: Finding, b: Finding): number {
  return (
    compareText(a.file, b.file) ||
    a.line - b.line ||
    a.column - b.column ||
    compareText(a.ruleId, b.ruleId) ||
    compareText(a.message, b.message) ||
    compareText(a.pointer, b.pointer)
  );
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Fills `{name}` placeholders; unknown ones stay as written so a missing datum is visible, not blank. */
export function fill(template: string, data: Readonly<Record<string, string | number>> | undefined): string {
  if (!data) return template;
  return template.replace(/\{(\w+)\}/g, (whole, name: string) =>
    Object.prototype.hasOwnProperty.call(data, name) ? String(data[name]) : whole,
  );
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== undefined)) as Partial<T>;
}
