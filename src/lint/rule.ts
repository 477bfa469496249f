/** The rule API: a rule is `meta` + a pure `check` over one operation. */
import type { ApiDocument, IdempotencyContract, Location, OperationView } from '../parser/model.js';

export type Severity = 'error' | 'warn' | 'info';

/** The readiness question a rule serves (the article's five, plus the tests that prove them). */
export type Criterion = 'scope' | 'payload' | 'owner' | 'replay' | 'unknown-outcome' | 'contract';

export interface RuleMeta<M extends string> {
  /** Stable kebab-case id, e.g. `scope-too-wide`. */
  readonly id: string;
  readonly severity: Severity;
  /** One line: what the rule flags. */
  readonly description: string;
  readonly criterion: Criterion;
  /** One sentence: which readiness criterion of the article this rule enforces. */
  readonly rationale: string;
  /** Message templates by id; `{name}` placeholders are filled from `data`. */
  readonly messages: Readonly<Record<M, string>>;
}

/** Settings a rule may read (from the config file). */
export interface LintSettings {
  /** Lower-case methods that count as unsafe (default post, patch). */
  readonly unsafeMethods: readonly string[];
  /** Extra header names that carry an idempotency key. */
  readonly keyHeaders: readonly string[];
}

export interface RuleContext<M extends string> {
  readonly document: ApiDocument;
  readonly operation: OperationView;
  readonly contract: IdempotencyContract | undefined;
  readonly settings: LintSettings;
  report(messageId: M, at: Location, data?: Readonly<Record<string, string | number>>): void;
}

/** What a rule sees when it checks the document once, outside any operation (e.g. its `x-idempotency` defaults). */
export interface DocumentContext<M extends string> {
  readonly document: ApiDocument;
  readonly settings: LintSettings;
  /** Reports a finding about the document; the engine adds the operations that report the same fault. */
  report(messageId: M, at: Location, data?: Readonly<Record<string, string | number>>): void;
}

/**
 * The operations a rule's `check` can report on: `contracted`, those that carry `x-idempotency` (`false`
 * included); `unsafe`, those whose method the settings count as unsafe; `writes`, those whose method is not
 * safe (anything but GET, HEAD, OPTIONS and TRACE) or that the settings count as unsafe. The engine calls
 * `check` on those only.
 */
export type RuleOperations = 'contracted' | 'unsafe' | 'writes';

export interface Rule<M extends string = string> {
  readonly meta: RuleMeta<M>;
  /** Which operations `check` looks at (every operation when omitted); see {@link RuleOperations}. */
  readonly operations?: RuleOperations;
  check(ctx: RuleContext<M>): void;
  /** Optional: runs once per document, after `check` has run on every operation. */
  checkDocument?(ctx: DocumentContext<M>): void;
}

export function defineRule<M extends string>(rule: Rule<M>): Rule<M> {
  return rule;
}

/** One finding after the engine added severity and position. */
export interface Finding {
  readonly ruleId: string;
  readonly severity: Severity;
  readonly message: string;
  readonly messageId: string;
  readonly file: string;
  readonly pointer: string;
  readonly line: number;
  readonly column: number;
  /** Every operation the finding is about (one, or several when the node is a shared component). */
  readonly operations: readonly string[];
  /**
   * The display label of each entry of `operations`, in the same order: `POST /payouts (createPayout)`.
   * Set by the engine when the finding names operations.
   */
  readonly operationLabels?: readonly string[];
  /** Set when an `x-idempotency-lint` suppression silenced it. */
  readonly suppressed?: { readonly reason: string };
}
