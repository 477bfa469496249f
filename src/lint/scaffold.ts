/**
 * `idemkit init`: scaffold `x-idempotency` contracts for operations that already take an idempotency key
 * (in a header, a query parameter or a body field), by inserting text into the spec — never by
 * re-serialising it — so the user's comments, quoting, key order and layout survive byte for byte. The inserted block holds only what can be read off
 * the operation (where the key travels, whether it is required, its maxLength, a principal scope when the
 * operation is authenticated, the documented state responses) plus conservative defaults; everything
 * else is left for `idemkit lint` to ask about.
 */
import { InternalError, type DocumentError } from '../errors.js';
import { compileKeyPattern } from '../runtime/key.js';
import { CONTRACT_DEFAULTS } from '../parser/compile.js';
import { isPlainObject } from '../parser/merge.js';
import { exponentialBacktracking, slowKeyPatternDegree } from '../parser/regex-ambiguity.js';
import type { ApiDocument, KeyPlace, Location, OperationView, Position } from '../parser/model.js';
import { JsonPositionIndex, LineTable, loneCrOffset } from '../parser/positions.js';
import { parseSource } from '../parser/source.js';
import { YamlNodeFinder, yamlModule } from './scaffold-yaml.js';
import type { LintSettings } from './rule.js';
import { bodyKey, declaredResponses, effectiveSecurity, escapePointerToken, isSafeMethod, keyDeclaration, keyEvidence, keyPlaceOf, parsePointer } from './views.js';
import type { Node as YamlNode, YAMLMap } from 'yaml';

/** One contract that was (or would be) inserted. */
export interface ScaffoldChange {
  /** Absolute path of the file the contract goes into: where the operation is written. */
  readonly file: string;
  readonly operation: string;
  /** Where the contract reads the key. */
  readonly key: KeyPlace;
  /**
   * Why the contract has no `scope`, when it has none: the operation names no security (`no-security`) or
   * also accepts anonymous requests (`anonymous`), so init cannot tell whose keys collide and does not guess.
   */
  readonly scopeOpen: ScopeOpen | undefined;
  /** Where the operation is (its method's key) in the file as read: what a dry run, which writes nothing, names. */
  readonly at: Location;
  /** 1-based line of the inserted block in the new text. */
  readonly line: number;
  /** 1-based column (UTF-16 code units, after any BOM) where the block starts in the new text. */
  readonly column: number;
  /** The inserted lines, without line breaks. */
  readonly lines: readonly string[];
  /** The contract object that was inserted. */
  readonly contract: Record<string, unknown>;
}

/** Why a scaffolded contract leaves `scope` open (see {@link ScaffoldChange.scopeOpen}). */
export type ScopeOpen = 'no-security' | 'anonymous';

/** An operation that looks like it wants a contract but was left alone, and why. */
export interface ScaffoldSkip {
  readonly operation: string;
  /** Where the operation is (its method's key), for the `file:line:column` init prints. */
  readonly at: Location;
  readonly reason: string;
  /**
   * `true` when the operation needs no contract at all (a safe method); `false` when it does and the user
   * has to write it by hand.
   */
  readonly needsNone: boolean;
  /** Set when the operation is a YAML alias of one that gets a contract: it shares that contract. */
  readonly sharesContract?: boolean;
}

/** A file that changes: its absolute path and its whole new text. */
export interface ScaffoldedFile {
  readonly file: string;
  readonly text: string;
}

/** Result of {@link scaffoldContracts}. */
export interface ScaffoldResult {
  /** The files that change, each with its whole new text, in the order of their first operation; empty when nothing changes. */
  readonly files: readonly ScaffoldedFile[];
  /** The inserted contracts, file by file, in text order within a file. */
  readonly changes: readonly ScaffoldChange[];
  readonly skipped: readonly ScaffoldSkip[];
  /**
   * Where a position of the document as it was read (a skipped operation's) is in the new text of its file: moved
   * past the contracts inserted before it. Unchanged for a file that does not change.
   */
  readonly moved: (file: string, position: Position) => Position;
}

const STATE_STATUSES: readonly (readonly [string, readonly number[]])[] = [
  ['missingKey', [400]],
  ['invalidKey', [400]],
  ['mismatch', [422]],
  ['inProgress', [409]],
  ['abandoned', [409]],
  ['storeUnavailable', [503]],
];

/**
 * The comment above a scaffolded contract, naming what it leaves open: what only the author can answer, the
 * replay, and the states whose response the operation does not document yet (each needs one before lint passes).
 */
function scaffoldComment(contract: Record<string, unknown>): string {
  // What the document-level defaults already answer is not open (they merge under the contract).
  const defaults = DEFAULTS_OF.get(contract) ?? {};
  const given = (field: string): boolean => field in contract || field in defaults;
  const defaultResponses = isPlainObject(defaults['responses']) ? defaults['responses'] : {};
  const answered = { ...defaultResponses, ...((contract['responses'] ?? {}) as Record<string, unknown>) };
  const undocumented = STATE_STATUSES.filter(([state]) => !(state in answered)).map(([state, [status]]) => `${state} ${status}`);
  const effect = isPlainObject(defaults['effect']) ? defaults['effect'] : {};
  const open = [
    ...(given('scope') ? [] : ['scope']),
    ...('owner' in effect ? [] : ['effect owner']),
    ...(given('retry') ? [] : ['retry budget']),
    ...(given('unknownOutcome') ? [] : ['unknown outcome']),
    ...('replay' in answered ? [] : ['replay']),
    ...(undocumented.length > 0 ? [`a documented response for ${undocumented.join(', ')}`] : []),
  ];
  if (open.length === 0) return 'Scaffolded by `idemkit init` over the document\'s x-idempotency defaults: `idemkit lint` checks it.';
  return `Scaffolded by \`idemkit init\`: \`idemkit lint\` lists what is still open (${open.join(', ')}).`;
}

/** Why the operation's contract gets no `scope` (see {@link ScaffoldChange.scopeOpen}), or `undefined` when it is the caller. */
function openScope(document: ApiDocument, operation: OperationView): ScopeOpen | undefined {
  const security = effectiveSecurity(document, operation);
  if (!security.secured) return 'no-security';
  return security.anonymousAllowed ? 'anonymous' : undefined;
}

/** The document-level `x-idempotency` defaults a proposed contract was made over, for its comment. */
const DEFAULTS_OF = new WeakMap<Record<string, unknown>, Record<string, unknown>>();

/** The document-level `x-idempotency` defaults (a `$ref` followed), or `{}`. */
function documentDefaults(document: ApiDocument): Record<string, unknown> {
  if (document.defaultsAt === undefined) return {};
  const found = document.deref(document.get(document.defaultsAt), document.defaultsAt);
  return found !== undefined && isPlainObject(found.value) ? found.value : {};
}

/**
 * The contract idemkit proposes for an operation whose key travels at `place`. What the document-level defaults
 * already say is left out: written into the contract, it would be deep-merged over them (a team's tenant scope, its
 * ttl and lease, silently replaced by the scaffold's).
 */
export function proposeContract(document: ApiDocument, operation: OperationView, place: KeyPlace): Record<string, unknown> {
  const proposed = proposeOwnContract(document, operation, place);
  const defaults = documentDefaults(document);
  if (Object.keys(defaults).length === 0) return proposed;
  const contract: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(proposed)) {
    const fromDefaults = defaults[field];
    if (fromDefaults === undefined) contract[field] = value;
    else if (isPlainObject(fromDefaults) && isPlainObject(value) && (field === 'key' || field === 'responses')) {
      // Only what the defaults leave open: the key's place when they name none (or this one), and the states they do not answer.
      const own = Object.fromEntries(Object.entries(value).filter(([name]) => !(name in fromDefaults)));
      if (Object.keys(own).length > 0) contract[field] = own;
    }
  }
  DEFAULTS_OF.set(contract, defaults);
  return contract;
}

function proposeOwnContract(document: ApiDocument, operation: OperationView, place: KeyPlace): Record<string, unknown> {
  // The bounds the API documents for its key (3.x: the parameter's or field's schema, `$ref` followed; 2.0: the parameter).
  const declaration = keyDeclaration(document, operation, place);
  const schema = declaration.schema?.value;
  const maxLength = schema?.['maxLength'];
  const pattern = schema?.['pattern'];
  const key: Record<string, unknown> = { [place.in]: place.name, required: declaration.required ?? false };
  if (typeof maxLength === 'number' && Number.isInteger(maxLength)) key.maxLength = maxLength;
  // An OpenAPI pattern matches anywhere in the value, `key.pattern` the whole key: only an anchored one means the same.
  // One that can take exponential time (or cannot be checked), or a high power of the key's bound, is not copied: the guard would run it on every key (the document's own
  // validator is the API's to mend; the bound above still holds).
  if (typeof pattern === 'string' && isAnchored(pattern) && isRegExp(pattern) && exponentialBacktracking(pattern) === null && !slowPolynomial(pattern, key)) key.pattern = pattern;
  const contract: Record<string, unknown> = { key };
  // The caller is the scope only when every request names one: an anonymous alternative (`{}`) leaves it to the author.
  if (openScope(document, operation) === undefined) contract.scope = ['principal'];
  contract.fingerprint = { include: 'all' };
  contract.ttl = 'P1D';
  contract.lease = 'PT30S';
  const declared = new Set(declaredResponses(document, operation).map((response) => response.status));
  const responses: Record<string, unknown> = {};
  for (const [state, statuses] of STATE_STATUSES) {
    const status = statuses.find((candidate) => declared.has(String(candidate)));
    if (status !== undefined) responses[state] = { status };
  }
  if (Object.keys(responses).length > 0) contract.responses = responses;
  return contract;
}

/** Whether a pattern is anchored at both ends (`^…$`, the final `$` not escaped), so it matches whole values only. */
function isAnchored(pattern: string): boolean {
  if (!pattern.startsWith('^') || !pattern.endsWith('$')) return false;
  let backslashes = 0;
  for (let i = pattern.length - 2; i >= 0 && pattern[i] === '\\'; i--) backslashes += 1;
  if (backslashes % 2 !== 0) return false;
  // `^a|b$` is two alternatives, each anchored at one end only: not a whole-value pattern.
  let depth = 0;
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '\\') i += 1;
    else if (inClass) inClass = c !== ']';
    else if (c === '[') inClass = true;
    else if (c === '(') depth += 1;
    else if (c === ')') depth -= 1;
    else if (c === '|' && depth === 0) return false;
  }
  return true;
}

/** Whether `pattern` backtracks as a power of the key's bound past the budget `contract-invalid` refuses (see `polynomialDegree`). */
function slowPolynomial(pattern: string, key: Record<string, unknown>): boolean {
  const own = typeof key.maxLength === 'number' ? key.maxLength : CONTRACT_DEFAULTS.keyMaxLength;
  const bound = key.header !== undefined ? Math.max(own, CONTRACT_DEFAULTS.keyMinMaxLength) : own;
  return slowKeyPatternDegree(pattern, bound) !== undefined;
}

/** Whether the guard can compile `pattern` (a documented pattern it cannot is left for lint to report). */
function isRegExp(pattern: string): boolean {
  try {
    compileKeyPattern(pattern);
    return true;
  } catch {
    return false;
  }
}

/** An operation that gets a contract, and the contract. */
interface Plan {
  readonly operation: OperationView;
  readonly key: KeyPlace;
  readonly scopeOpen: ScopeOpen | undefined;
  readonly contract: Record<string, unknown>;
}

/**
 * Scaffolds contracts for the operations of `document` that take an idempotency key. Each contract goes into the
 * file where its operation is written — the entry file or an external path-item file — read with `readText`
 * (the file's bytes decoded as UTF-8, as the user wrote them: a byte order mark is kept).
 */
export function scaffoldContracts(
  document: ApiDocument,
  readText: (file: string) => string,
  settings: Pick<LintSettings, 'keyHeaders'>,
  describe: (error: DocumentError) => string,
): ScaffoldResult {
  const planned = new Map<string, Map<string, Plan>>();
  const skipped: ScaffoldSkip[] = [];
  for (const operation of document.operations) {
    if ('x-idempotency' in operation.node) continue;
    const evidence = keyEvidence(document, operation, settings.keyHeaders);
    if (!evidence) continue;
    if (isSafeMethod(operation.method)) {
      // A repeated safe request has no effect to guard; a key on it is usually a copy-paste leftover.
      skipped.push({ operation: operation.label, at: operation.at, reason: `is a ${operation.method.toUpperCase()}, which HTTP defines as safe (a repeat has no effect to guard), so it gets no contract; if this API's ${operation.method.toUpperCase()} does act, write the contract by hand`, needsNone: true });
      continue;
    }
    const place = keyPlaceOf(evidence);
    if (!place) {
      skipped.push({ operation: operation.label, at: operation.at, reason: `is marked \`${evidence.name}\` but takes no idempotency key, and a guard needs one: declare where clients send it (a header such as \`Idempotency-Key\`, a query parameter or a body field) and write the contract by hand`, needsNone: false });
      continue;
    }
    // A key header beside a body key field: which one the server reads is the author's to say (a contract on the
    // header makes lint report the field, since clients that send it there would get 400).
    const inBody = place.in === 'header' ? bodyKey(document, operation) : undefined;
    if (inBody !== undefined) {
      skipped.push({ operation: operation.label, at: operation.at, reason: `takes a key both in the header \`${evidence.name}\` and in the ${inBody.kind === 'form' ? 'form' : 'body'} field \`${inBody.name}\`: write the contract by hand for the one the server reads (\`key: { header: ${evidence.name} }\` or \`key: { body: /${escapePointerToken(inBody.name)} }\`), and drop or deprecate the other`, needsNone: false });
      continue;
    }
    const unreadable = place.in === 'body' ? keyDeclaration(document, operation, place).unreadableMedia : undefined;
    if (unreadable !== undefined) {
      skipped.push({ operation: operation.label, at: operation.at, reason: `takes its key in the body field \`${evidence.name}\` of a \`${unreadable}\` body, and a guard reads a body key from a JSON body or a form's fields only: to guard it, take the key in a header or the query and write the contract by hand`, needsNone: false });
      continue;
    }
    // A contract makes every `$ref` it needs mandatory: one broken now would make the file unloadable.
    const broken = document.contractRefProblem?.(operation);
    if (broken) {
      skipped.push({ operation: operation.label, at: operation.at, reason: `${describe(broken)}; a contract needs every $ref of the operation's parameters, body and responses, so fix it first and run init again`, needsNone: false });
      continue;
    }
    let inFile = planned.get(operation.at.file);
    if (!inFile) planned.set(operation.at.file, (inFile = new Map()));
    // A path item reached by two paths (a `$ref` to it) is written once: one contract serves both.
    if (!inFile.has(operation.at.pointer)) {
      inFile.set(operation.at.pointer, { operation, key: place, scopeOpen: openScope(document, operation), contract: proposeContract(document, operation, place) });
    }
  }
  const files: ScaffoldedFile[] = [];
  const changes: ScaffoldChange[] = [];
  const movers = new Map<string, (position: Position) => Position>();
  // Operation nodes a contract was written into, and the operations left out in the files' text.
  const written = new Map<object, OperationView>();
  const notWritten: { operation: OperationView; reason: string }[] = [];
  for (const [file, plans] of planned) {
    const edited = scaffoldFile(file, readText(file), [...plans.values()]);
    notWritten.push(...edited.skipped);
    for (const operation of edited.written) written.set(operation.node, operation);
    changes.push(...edited.changes);
    if (edited.changes.length > 0) {
      files.push({ file, text: edited.text });
      movers.set(file, edited.moved);
    }
  }
  for (const { operation, reason } of notWritten) {
    // A YAML alias (`put: *create`) is the anchored operation itself: the contract written there is its own.
    const anchor = written.get(operation.node);
    if (anchor && anchor !== operation) skipped.push({ operation: operation.label, at: operation.at, reason: `is a YAML alias of ${anchor.label}, so it shares the contract written there`, needsNone: true, sharesContract: true });
    else skipped.push({ operation: operation.label, at: operation.at, reason, needsNone: false });
  }
  return { files, changes, skipped, moved: (file, position) => movers.get(file)?.(position) ?? position };
}

const SCOPE_OPEN_REASONS: Readonly<Record<ScopeOpen, readonly [one: string, many: string]>> = {
  'no-security': ['its operation names no security', 'their operations name no security'],
  anonymous: ['its operation also accepts anonymous requests (`{}` in its security)', 'their operations also accept anonymous requests (`{}` in their security)'],
};

/**
 * One line per file (and reason) for the scaffolded contracts without `scope`, which `idemkit lint` reports as
 * `scope-missing` until the author writes one: init does not guess it, since a scope too wide (`global`) lets one
 * caller's key replay another's response. `name` shows a file as the command names it.
 */
export function scopeNotices(changes: readonly ScaffoldChange[], name: (file: string) => string): string[] {
  const counts = new Map<string, { file: string; reason: ScopeOpen; count: number }>();
  for (const change of changes) {
    if (change.scopeOpen === undefined) continue;
    const id = `${change.file}\u0000${change.scopeOpen}`;
    const entry = counts.get(id) ?? { file: change.file, reason: change.scopeOpen, count: 0 };
    entry.count += 1;
    counts.set(id, entry);
  }
  return [...counts.values()].map(({ file, reason, count }) => {
    const [one, many] = SCOPE_OPEN_REASONS[reason];
    const subject = count === 1 ? `1 contract has no scope: ${one}` : `${count} contracts have no scope: ${many}`;
    return `${name(file)}: ${subject}, so init cannot tell whose keys collide — write \`scope: [header:X-Tenant-Id]\` (whatever names the caller) or \`scope: [global]\` (see \`idemkit explain scope-missing\`)`;
  });
}

/** Inserts the planned contracts into one file's text, in one pass, and checks the result. */
function scaffoldFile(
  file: string,
  raw: string,
  plans: readonly Plan[],
): { text: string; changes: ScaffoldChange[]; written: OperationView[]; skipped: { operation: OperationView; reason: string }[]; moved: (position: Position) => Position } {
  // The parser reads past a byte order mark (AutoRest files start with one); the written file keeps it.
  const bom = raw.charCodeAt(0) === 0xfeff ? raw.slice(0, 1) : '';
  const text = raw.slice(bom.length);
  const format = /^\s*[{[]/.test(text) ? 'json' : 'yaml';
  const newline = text.includes('\r\n') ? '\r\n' : '\n';
  // Edits find lines by LF; a line that ends with a lone CR would be misread (and written around wrongly).
  const loneCr = loneCrOffset(text);
  if (loneCr !== -1) {
    const { line } = new LineTable(text).position(loneCr);
    const reason = `line ${line} of ${format === 'json' ? 'the file' : 'the YAML'} ends with a lone CR (a classic Mac line break), which init does not edit around — save the file with LF or CRLF line breaks and run init again, or add x-idempotency by hand`;
    return { text: raw, changes: [], written: [], skipped: plans.map((plan) => ({ operation: plan.operation, reason })), moved: (position) => position };
  }
  const skipped: { operation: OperationView; reason: string }[] = [];
  const inserts: (Insert & Plan)[] = [];
  // One YAML Document (or JSON index) for every operation of the file: parsing once per operation took seconds.
  let finder: YamlNodeFinder | undefined;
  let index: JsonPositionIndex | undefined;
  for (const plan of plans) {
    const insert =
      format === 'json'
        ? planJson(text, (index ??= new JsonPositionIndex(text)), plan.operation, plan.contract, newline)
        : planYaml(text, (finder ??= new YamlNodeFinder(text)), plan.operation, plan.contract, newline);
    if (typeof insert === 'string') skipped.push({ operation: plan.operation, reason: insert });
    else inserts.push({ ...insert, ...plan });
  }
  if (inserts.length === 0) return { text: raw, changes: [], written: [], skipped, moved: (position) => position };
  // Build the new text once, front to back, counting lines on the way (no copy of the text per insert).
  inserts.sort((a, b) => a.offset - b.offset);
  const parts: string[] = [];
  // Where each block starts in the new text: placed once it is built (several blocks may share a line of JSON).
  const starts: number[] = [];
  let from = 0;
  let length = 0;
  for (const insert of inserts) {
    // The block's first line, at its first character past the indentation (where an editor should land).
    const first = insert.lines[0]!;
    const lead = Math.max(0, insert.text.indexOf(first)) + (first.length - first.trimStart().length);
    starts.push(length + (insert.offset - from) + lead);
    parts.push(text.slice(from, insert.offset), insert.text);
    length += insert.offset - from + insert.text.length;
    from = insert.offset;
  }
  parts.push(text.slice(from));
  const out = parts.join('');
  verify(out, file, inserts);
  const lines = new LineTable(out);
  const changes: ScaffoldChange[] = inserts.map((insert, i) => {
    const { line, column } = lines.position(starts[i]!);
    return { file, operation: insert.operation.label, at: insert.operation.at, key: insert.key, scopeOpen: insert.scopeOpen, line, column, lines: insert.lines, contract: insert.contract };
  });
  // A position of the text as read: its offset, moved past every block inserted at or before it.
  const lineStarts = [0];
  for (let at = text.indexOf('\n'); at !== -1; at = text.indexOf('\n', at + 1)) lineStarts.push(at + 1);
  const moved = (position: Position): Position => {
    const offset = (lineStarts[position.line - 1] ?? text.length) + position.column - 1;
    let shift = 0;
    for (const insert of inserts) if (insert.offset <= offset) shift += insert.text.length;
    return lines.position(offset + shift);
  };
  return { text: bom + out, changes, written: inserts.map((insert) => insert.operation), skipped, moved };
}

interface Insert {
  readonly offset: number;
  readonly text: string;
  readonly lines: string[];
}

function planYaml(text: string, finder: YamlNodeFinder, operation: OperationView, contract: Record<string, unknown>, newline: string): Insert | string {
  const yaml = yamlModule();
  const tokens = parsePointer(operation.at.pointer);
  const { node, shift } = tokens ? finder.find(tokens) : { node: undefined, shift: 0 };
  if (!yaml.isMap(node) || (node as YAMLMap).flow || (node as YAMLMap).items.length === 0) {
    return 'is not a block mapping in the YAML (flow style or an alias); add x-idempotency by hand';
  }
  const map = node as YAMLMap<YamlNode, YamlNode>;
  const firstKey = map.items[0]!.key as YamlNode;
  const last = map.items[map.items.length - 1]!;
  const keyStart = firstKey.range![0] + shift;
  const lineStart = text.lastIndexOf('\n', keyStart - 1) + 1;
  const indent = text.slice(lineStart, keyStart);
  if (!/^[ ]*$/.test(indent)) return 'shares a line with other YAML syntax; add x-idempotency by hand';
  const parentIndent = parentKeyIndent(text, node.range![0] + shift, indent.length);
  const step = Math.max(1, indent.length - parentIndent);
  const end = ((last.value as YamlNode | null)?.range ?? (last.key as YamlNode).range)![1] + shift;
  let offset = end;
  if (text[offset - 1] !== '\n') {
    const next = text.indexOf('\n', offset);
    offset = next === -1 ? text.length : next + 1;
  }
  offset = afterNestedComments(text, offset, indent.length);
  // At the end of a file without a final newline, the contract starts on a line of its own.
  const prefix = offset === text.length && offset > 0 && text[offset - 1] !== '\n' ? newline : '';
  const body = yaml.stringify({ 'x-idempotency': contract }, { indent: step, lineWidth: 0, flowCollectionPadding: false }).trimEnd().split('\n');
  // Short lists read best inline, as the DESIGN examples write them.
  const lines = [`# ${scaffoldComment(contract)}`, ...inlineShortLists(body, step)].map((line) => indent + line);
  return { offset, text: prefix + lines.join(newline) + newline, lines };
}

/**
 * Where the operation's last entry really ends: past the comment lines right after it that are indented deeper
 * than the operation's own keys (`# '409': …` commented out inside `responses`), so the contract does not land
 * between a block and its commented-out lines. Blank lines between such comments are passed over; a comment at
 * the keys' level or shallower, or any other line, stops the walk.
 */
function afterNestedComments(text: string, offset: number, keyIndent: number): number {
  let end = offset;
  for (let line = offset; line < text.length; ) {
    const next = text.indexOf('\n', line);
    const stop = next === -1 ? text.length : next + 1;
    const content = text.slice(line, stop);
    const trimmed = content.trimStart();
    if (trimmed.startsWith('#') && content.length - trimmed.length > keyIndent) end = stop;
    else if (trimmed.trim() !== '') break;
    line = stop;
  }
  return end;
}

/** Indentation of the key that holds the operation (the method), to learn the file's indent step. */
function parentKeyIndent(text: string, mapStart: number, childIndent: number): number {
  let cursor = text.lastIndexOf('\n', mapStart - 1);
  while (cursor > 0) {
    const start = text.lastIndexOf('\n', cursor - 1) + 1;
    const line = text.slice(start, cursor);
    const indent = line.length - line.trimStart().length;
    if (line.trim() !== '' && !line.trimStart().startsWith('#') && indent < childIndent) return indent;
    cursor = start - 1;
  }
  return Math.max(0, childIndent - 2);
}

function inlineShortLists(lines: string[], step: number): string[] {
  const out: string[] = [];
  for (let index = 0; index < lines.length; index += 1) {
    const line = lines[index]!;
    const items: string[] = [];
    const depth = line.length - line.trimStart().length;
    let next = index + 1;
    while (next < lines.length && lines[next]!.startsWith(`${' '.repeat(depth + step)}- `) && !lines[next]!.includes(': ')) {
      items.push(lines[next]!.trim().slice(2));
      next += 1;
    }
    const only = lines[index + 1];
    const after = lines[index + 2];
    const onlyDepth = only === undefined ? -1 : only.length - only.trimStart().length;
    if (line.endsWith(':') && items.length > 0 && next - index - 1 === items.length) {
      out.push(`${line} [${items.join(', ')}]`);
      index = next - 1;
    } else if (
      line.endsWith(':') &&
      only !== undefined &&
      onlyDepth === depth + step &&
      /^[\w-]+: [^\s{[]/.test(only.trim()) &&
      (after === undefined || after.length - after.trimStart().length <= depth)
    ) {
      // A one-entry mapping (`mismatch: { status: 422 }`) reads best on one line.
      out.push(`${line} { ${only.trim()} }`);
      index += 1;
    } else out.push(line);
  }
  return out;
}

function planJson(text: string, index: JsonPositionIndex, operation: OperationView, contract: Record<string, unknown>, newline: string): Insert | string {
  const tokens = parsePointer(operation.at.pointer);
  if (!tokens) return 'cannot be located in the JSON text';
  const located = index.locate(tokens);
  if (located.depth !== tokens.length || text[located.valueOffset] !== '{') return 'cannot be located in the JSON text';
  const open = located.valueOffset;
  const close = matchingBrace(text, open);
  if (close === -1) return 'cannot be located in the JSON text';
  let lastMember = close - 1;
  while (lastMember > open && /\s/.test(text[lastMember]!)) lastMember -= 1;
  const empty = lastMember === open;
  const inner = text.slice(open + 1, close);
  const multiline = inner.includes('\n');
  if (!multiline) {
    const value = JSON.stringify(contract);
    // Minified JSON stays minified; a one-line object written with spaces gets spaces.
    const space = empty || spacedMembers(inner) ? ' ' : '';
    const member = `"x-idempotency":${space}${value}`;
    const insertion = `${empty ? '' : `,${space}`}${member}`;
    return { offset: lastMember + 1, text: insertion, lines: [member] };
  }
  const closeLineStart = text.lastIndexOf('\n', close - 1) + 1;
  const closeIndent = /^[ \t]*/.exec(text.slice(closeLineStart, close))![0];
  const firstMember = open + 1 + (inner.length - inner.trimStart().length);
  const memberLineStart = text.lastIndexOf('\n', firstMember - 1) + 1;
  const memberIndent = empty ? `${closeIndent}  ` : /^[ \t]*/.exec(text.slice(memberLineStart, firstMember))![0];
  const step = memberIndent.startsWith(closeIndent) && memberIndent.length > closeIndent.length ? memberIndent.slice(closeIndent.length) : '  ';
  const value = JSON.stringify(contract, null, step).split('\n');
  const block = [`"x-idempotency": ${value[0]}`, ...value.slice(1)];
  const lines = block.map((line) => memberIndent + line);
  const insertion = `${empty ? '' : ','}${newline}${lines.join(newline)}`;
  return { offset: lastMember + 1, text: insertion, lines };
}

/**
 * Whether the first member separator of one-line JSON object text is followed by a space (`"a": 1`), read
 * outside strings: a string value holding escaped JSON (a code sample: `"{\"a\": 1}"`) says nothing of the file's style.
 */
function spacedMembers(inner: string): boolean {
  for (let index = 0; index < inner.length; index += 1) {
    const char = inner[index];
    if (char === '"') {
      index += 1;
      while (index < inner.length && inner[index] !== '"') index += inner[index] === '\\' ? 2 : 1;
    } else if (char === ':') {
      return /\s/.test(inner[index + 1] ?? '');
    }
  }
  return false;
}

function matchingBrace(text: string, open: number): number {
  let depth = 0;
  for (let index = open; index < text.length; index += 1) {
    const char = text[index];
    if (char === '"') {
      index += 1;
      while (index < text.length && text[index] !== '"') index += text[index] === '\\' ? 2 : 1;
    } else if (char === '{' || char === '[') depth += 1;
    else if (char === '}' || char === ']') {
      depth -= 1;
      if (depth === 0) return index;
    }
  }
  return -1;
}

/**
 * Re-parses the new text with the parser `idemkit lint` reads it with: it must parse, and each scaffolded
 * operation must now carry exactly its contract.
 */
function verify(text: string, file: string, inserts: readonly Plan[]): void {
  let root: unknown;
  try {
    root = parseSource(file, text).value;
  } catch (error) {
    throw new InternalError(`init produced text that does not parse (${(error as Error).message}); nothing was written`);
  }
  for (const { operation, contract } of inserts) {
    let node: unknown = root;
    for (const token of parsePointer(operation.at.pointer) ?? []) node = (node as Record<string, unknown> | undefined)?.[token];
    const written = (node as Record<string, unknown> | undefined)?.['x-idempotency'];
    if (JSON.stringify(written) !== JSON.stringify(contract)) {
      throw new InternalError(`init could not place the contract of ${operation.label} in ${file}; nothing was written`);
    }
  }
}
