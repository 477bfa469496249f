/**
 * A readiness card per contracted operation, for a review comment: the article's five questions (scope,
 * same payload, effect owner, replay answer, unknown outcome), each answered from the contract and marked
 * ✔ when it is answered and no finding of that criterion stands against it, ✘ otherwise; then the
 * operation's findings. Findings about operations without a contract follow the cards.
 */
import type { ApiDocument, IdempotencyContract, OperationView, ScopePart } from '../../parser/model.js';
import { printable } from '../../parser/printable.js';
import { catalogue } from '../catalogue.js';
import type { Criterion, Finding, Rule } from '../rule.js';
import { concernIndex, fewLabels, operationLabelsOf, sortDocuments, sortFindings } from './common.js';
import { displayPath } from './paths.js';
import type { FormatterInput } from './common.js';

const YES = '✔';
const NO = '✘';

/** A zero-width joiner: it does not show, and GitHub mentions no `@\u200Dname` and links no `https:\u200D//…`. */
const JOINER = '\u200D';

/**
 * Escapes text for Markdown prose and table cells (no HTML, no emphasis, no links, no cell breaks). The card is
 * posted to a pull request by a bot: GitHub turns `@user` and `@org/team` into mentions that notify, and a bare
 * `https://…` or `www.…` into a link, though markup escapes stop neither. A zero-width joiner after the `@` and
 * inside the scheme keeps the text as it reads and makes neither. A lone CR ends a line too (in a log).
 */
export function escapeMarkdown(text: string): string {
  return text
    // Control characters from spec text (an ESC in an operationId) are written out, never passed to a renderer.
    // eslint-disable-next-line no-control-regex
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, (char) => printable(char))
    .replace(/[\\`*_[\]<>|#~]/g, (char) => `\\${char}`)
    .replace(/\r\n?|\n/g, ' ')
    .replace(/@/g, `@${JOINER}`)
    .replace(/(https?:)(\/\/)/gi, `$1${JOINER}$2`)
    .replace(/(www)\./gi, `$1${JOINER}.`);
}

/**
 * A finding message as Markdown: its backtick spans stay code spans (rule messages quote names that way),
 * everything else is escaped. With an unbalanced backtick the whole message is escaped as text.
 */
export function messageMarkdown(text: string): string {
  const parts = text.split('`');
  if (parts.length % 2 === 0) return escapeMarkdown(text);
  return parts.map((part, index) => (index % 2 === 1 ? (part === '' ? '' : code(part)) : escapeMarkdown(part))).join('');
}

/** An inline code span that cannot be broken out of: its fence is longer than any run of backticks inside. */
function code(text: string): string {
  // eslint-disable-next-line no-control-regex
  const clean = text.replace(/\r\n?|\n/g, ' ').replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, (char) => printable(char));
  const longest = Math.max(0, ...(clean.match(/`+/g) ?? []).map((run) => run.length));
  const fence = '`'.repeat(longest + 1);
  return longest > 0 ? `${fence} ${clean} ${fence}` : `${fence}${clean}${fence}`;
}

/**
 * A table cell: GFM splits cells on every unescaped `|`, inside code spans too (where `\|` still renders as
 * `|`), so each is escaped; prose escaped by {@link escapeMarkdown} already has its `\|`.
 */
function cell(text: string): string {
  return text.replace(/\r\n?|\n/g, ' ').replace(/(?<!\\)\|/g, '\\|');
}

interface Question {
  readonly criterion: Criterion;
  readonly title: string;
  answer(contract: IdempotencyContract): string | undefined;
}

function scopePart(part: ScopePart): string {
  return part.kind === 'principal' || part.kind === 'global' ? part.kind : `${part.kind}:${part.name}`;
}

function raw(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

const QUESTIONS: readonly Question[] = [
  {
    criterion: 'scope',
    title: 'Scope — which scope binds the attempts?',
    answer: (c) => (c.scope && c.scope.length > 0 ? `operation + ${c.scope.map((p) => code(scopePart(p))).join(' + ')}` : undefined),
  },
  {
    criterion: 'payload',
    title: 'Same payload — which payload counts as the same?',
    answer: (c) => {
      if (!c.fingerprint) return undefined;
      const { include, exclude } = c.fingerprint;
      const base = include === 'all' ? 'the whole body' : include.length > 0 ? include.map(code).join(', ') : undefined;
      if (base === undefined) return undefined;
      return exclude.length > 0 ? `${base}, except ${exclude.map(code).join(', ')}` : base;
    },
  },
  {
    criterion: 'owner',
    title: 'Effect owner — who owns the effect?',
    answer: (c) => {
      if (!c.effect?.owner) return undefined;
      // Undeclared is not local: the generated code takes it so, but whether the effect leaves the service is the
      // reviewer's question (a handler that calls a provider would be retried as if it did not).
      const where =
        c.effect.external === true
          ? `external effect, provider key: ${code(c.effect.providerKey ?? 'undeclared')}`
          : c.effect.external === false
            ? 'local effect'
            : `reach undeclared: generated as a local effect — say ${code('external: true')} if it leaves the service`;
      return `${code(c.effect.owner)} (${where})`;
    },
  },
  {
    criterion: 'replay',
    title: 'Replay answer — what does a replay get?',
    answer: (c) => {
      if (!c.responses.replay) return undefined;
      const ttl = c.ttl ? `, kept for ${code(raw(c.ttl.raw))}` : '';
      return `the stored status and body, marked ${code(c.responses.replay.header)}${ttl}`;
    },
  },
  {
    criterion: 'unknown-outcome',
    title: 'Unknown outcome — what happens when no answer came?',
    answer: (c) => {
      if (!c.unknownOutcome) return undefined;
      const action = c.unknownOutcome === 'status-route' ? `read the status route ${code(c.effect?.statusRoute ?? 'undeclared')}` : 'surface it to the user, keep the form';
      const deadline = c.retry?.deadline ? ` after the ${code(raw(c.retry.deadline.raw))} deadline` : '';
      return `${action}${deadline}`;
    },
  },
];

/** Formats the report as Markdown readiness cards. */
export function formatMarkdown(report: FormatterInput): string {
  const rules: readonly Rule[] = report.rules ?? catalogue();
  const criterionOf = new Map(rules.map((rule) => [rule.meta.id, rule.meta.criterion]));
  const findings = sortFindings(report.findings);
  const concerning = concernIndex(findings, report.documents);
  // The findings some card shows: the rest are listed under "Operations without a contract".
  const carded = new Set<number>();
  const cards: string[] = [];
  const optedOut: string[] = [];
  let ready = 0;
  let contracted = 0;
  for (const document of sortDocuments(report.documents)) {
    for (const operation of document.operations) {
      if (!operation.contract) continue;
      if (!operation.contract.enabled) {
        optedOut.push(operation.label);
        continue;
      }
      contracted += 1;
      const mine = concerning(document, operation);
      for (const at of mine) carded.add(at);
      const own = mine.map((at) => findings[at]!);
      const card = renderCard(report, operation, operation.contract, own, criterionOf);
      if (card.ready) ready += 1;
      cards.push(card.text);
    }
  }
  const out: string[] = [`## Idempotency readiness: ${ready} of ${contracted} contracted operation${contracted === 1 ? '' : 's'} ready`, ''];
  out.push(...cards);
  if (optedOut.length > 0) {
    out.push(`**Knowingly not idempotent** (\`x-idempotency: false\`, never auto-retried): ${optedOut.map(code).join(', ')}`, '');
  }
  const others = findings.filter((_, at) => !carded.has(at));
  if (others.length > 0) {
    out.push('### Operations without a contract', '', ...others.map((f) => findingLine(report, f)), '');
  }
  if (report.baseline) {
    out.push(`_Baseline ${code(displayPath(report.cwd, report.baseline.file))}: ${report.baseline.matched} known finding(s) hidden, ${report.baseline.stale.length} stale entr${report.baseline.stale.length === 1 ? 'y' : 'ies'}._`, '');
  }
  if (contracted === 0 && others.length === 0) out.push('No contracted operations and no findings.', '');
  return out.join('\n');
}

function renderCard(
  report: FormatterInput,
  operation: OperationView,
  contract: IdempotencyContract,
  findings: readonly Finding[],
  criterionOf: ReadonlyMap<string, Criterion>,
): { ready: boolean; text: string } {
  const active = findings.filter((f) => !f.suppressed);
  const rows = QUESTIONS.map((question) => {
    const answer = question.answer(contract);
    const against = active.filter((f) => criterionOf.get(f.ruleId) === question.criterion);
    const ok = answer !== undefined && against.length === 0;
    // Each rule once, with how many findings it has here when more than one (a rule listed five times says less).
    const counts = new Map<string, number>();
    for (const f of against) counts.set(f.ruleId, (counts.get(f.ruleId) ?? 0) + 1);
    const note = counts.size > 0 ? ` — ${[...counts].map(([id, n]) => (n > 1 ? `${code(id)} ×${n}` : code(id))).join(', ')}` : '';
    return { ok, line: `| ${ok ? YES : NO} | ${question.title} | ${cell(`${answer ?? '_not answered_'}${note}`)} |` };
  });
  const ready = rows.every((row) => row.ok) && !active.some((f) => f.severity === 'error');
  const where = `${displayPath(report.cwd, operation.at.file)}:${positionLine(report, operation)}`;
  const lines = [
    `### ${ready ? YES : NO} ${code(operation.label)}`,
    '',
    `${code(where)}`,
    '',
    '| | Question | Answer |',
    '|---|---|---|',
    ...rows.map((row) => row.line),
    '',
  ];
  if (findings.length > 0) lines.push(...findings.map((f) => findingLine(report, f, operation.label)), '');
  return { ready, text: lines.join('\n') };
}

function positionLine(report: FormatterInput, operation: OperationView): number {
  const document = report.documents.find((d) => d.operations.includes(operation));
  return document ? document.position(operation.at).line : 1;
}

/**
 * One finding as a list item, naming the operation(s) it is about: all of them outside a card, the others
 * when it sits in the card of `cardLabel` (a shared component's fault names every operation using it).
 */
function findingLine(report: FormatterInput, finding: Finding, cardLabel?: string): string {
  const where = code(`${displayPath(report.cwd, finding.file)}:${finding.line}:${finding.column}`);
  const labels = operationLabelsOf(finding, report.documents).filter((label) => label !== cardLabel);
  // In a card (one per operation) the others are cut short: the list outside the cards names them all.
  const shown = cardLabel === undefined ? labels : fewLabels(labels);
  const about = shown.length > 0 ? ` ${cardLabel === undefined ? '' : 'also '}${shown.map((label) => (label.startsWith('… and ') ? escapeMarkdown(label) : code(label))).join(', ')}:` : '';
  const suppressed = finding.suppressed ? ` _(suppressed: ${escapeMarkdown(finding.suppressed.reason)})_` : '';
  const mark = finding.suppressed ? '~' : finding.severity === 'error' ? NO : '!';
  return `- ${mark} **${finding.severity}** ${code(finding.ruleId)} ${where}${about} ${messageMarkdown(finding.message)}${suppressed}`;
}
