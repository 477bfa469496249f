/**
 * Reading the idempotency key from a request (DESIGN §4 step 1).
 *
 * In a header the key may arrive as an IETF Structured-Field string (`"abc"`, RFC 9651 §3.3.3) or bare (`abc`);
 * both are the same key, the unquoted string. In a query parameter or a body field it is the value as sent.
 * This file imports nothing.
 */

/** Why a present key was refused. Each is a `400 idempotency-key-invalid`. */
export type KeyProblem = 'several-values' | 'empty' | 'non-printable' | 'too-long' | 'off-pattern' | 'malformed' | 'not-a-string';

/** Outcome of {@link parseIdempotencyKey}. */
export type ParsedKey =
  | { readonly kind: 'missing' }
  | { readonly kind: 'invalid'; readonly problem: KeyProblem; readonly detail: string }
  | { readonly kind: 'valid'; readonly key: string };

/** Limits a key is checked against (from the compiled contract). */
export interface KeyRules {
  /** Longest accepted key in characters. */
  readonly maxLength: number;
  /** Compiled whole-key pattern, when the contract has one. */
  readonly pattern?: RegExp | undefined;
}

// Compiled key patterns by source: a contract's few patterns, compiled once per process rather than per key checked
// (the client checks each intent's key, and makes fitting ones, against its contract's pattern).
const compiledPatterns = new Map<string, RegExp>();

/**
 * Compile a contract's key pattern so that it must match the whole key. Throws `SyntaxError` on a bad pattern. The
 * RegExp is shared (cached by source): it has neither `g` nor `y`, so `test` keeps no state between calls.
 */
export function compileKeyPattern(source: string | undefined): RegExp | undefined {
  if (source === undefined) return undefined;
  let compiled = compiledPatterns.get(source);
  if (compiled === undefined) {
    compiled = new RegExp(`^(?:${source})$`);
    compiledPatterns.set(source, compiled);
  }
  return compiled;
}

/**
 * Parse a key header value. `raw` is what the framework gave for the header: a string, an array of
 * repeated header lines, or undefined.
 */
export function parseIdempotencyKey(raw: string | readonly string[] | undefined, rules: KeyRules): ParsedKey {
  if (raw === undefined) return { kind: 'missing' };
  let value: string;
  if (typeof raw === 'string') {
    value = raw;
  } else {
    if (raw.length === 0) return { kind: 'missing' };
    if (raw.length > 1) return invalid('several-values', 'the key header was sent more than once');
    value = raw[0]!;
  }
  // Optional whitespace around a field value is not part of it (RFC 9110 §5.5); most keys have none to take off.
  // A loop, not /[ \t]+$/: that regex retries from every blank of a long inner run (quadratic in the header's length).
  let start = 0;
  let end = value.length;
  while (start < end && isOws(value.charCodeAt(start))) start += 1;
  while (end > start && isOws(value.charCodeAt(end - 1))) end -= 1;
  if (start > 0 || end < value.length) value = value.slice(start, end);
  if (value.length === 0) return invalid('empty', 'the key is empty');

  let key: string;
  if (value.startsWith('"')) {
    const parsed = parseSfString(value);
    if (typeof parsed !== 'string') return parsed;
    key = parsed;
  } else {
    // Node joins repeated header lines with ", "; a bare key with a comma is a list of values.
    if (value.includes(',')) return invalid('several-values', 'the key header holds several values');
    for (let i = 0; i < value.length; i += 1) {
      const c = value.charCodeAt(i);
      if (c < 0x21 || c > 0x7e) return invalid('non-printable', 'the key may hold only visible ASCII characters');
    }
    key = value;
  }
  return checkedKey(key, rules);
}

/**
 * Parse a key sent as a query parameter or a body field: `raw` is the query value (an array when the parameter
 * was repeated, with `repeated`) or the parsed body field. The value is the key as sent — no quoting, no
 * trimming — and must be a string that text decoding left whole (see {@link textKeyProblem}).
 */
export function parseFieldKey(raw: unknown, rules: KeyRules, repeated = false): ParsedKey {
  if (raw === undefined || raw === null) return { kind: 'missing' };
  let value = raw;
  if (Array.isArray(raw)) {
    if (raw.length > 1) return invalid('several-values', 'the key was sent more than once');
    // A body field holding a list (`["k"]`, a form's `key[]=k`) is not a key; a query parameter given once is.
    if (!repeated || raw.length === 0) return invalid('not-a-string', 'the key must be a string, not a list');
    value = raw[0];
  }
  if (typeof value !== 'string') return invalid('not-a-string', 'the key must be a string');
  const problem = textKeyProblem(value);
  if (problem !== undefined) return invalid(problem.problem, problem.detail);
  return checkedKey(value, rules);
}

/**
 * Why `value` cannot be a key sent as text (in a query or a body), or `undefined`: a control character; a U+FFFD
 * (bytes that were no UTF-8, decoded by one parser and kept as `%FF` by another) or a lone surrogate, either of
 * which would make two different keys one; or a percent-escape that is no UTF-8 left in the text — Express's form
 * parser keeps one it cannot decode, so it reads `%FF` and `%25FF` alike, where Fastify and fetch refuse the first.
 * The generated client asks it too, to refuse such a key before anything is sent.
 */
export function textKeyProblem(value: string): { readonly problem: KeyProblem; readonly detail: string } | undefined {
  for (let i = 0; i < value.length; i += 1) {
    const c = value.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return { problem: 'non-printable', detail: 'the key may not hold control characters' };
    if (c === 0xfffd) return { problem: 'malformed', detail: 'the key holds U+FFFD: it was sent as bytes that are not UTF-8' };
    if (c >= 0xd800 && c <= 0xdfff) {
      const next = value.charCodeAt(i + 1);
      if (c > 0xdbff || !(next >= 0xdc00 && next <= 0xdfff)) return { problem: 'malformed', detail: 'the key holds a lone surrogate: it is not well-formed text' };
      i += 1;
    }
  }
  if (value.includes('%') && /%[0-9A-Fa-f]{2}/.test(value) && !decodes(value)) {
    return { problem: 'malformed', detail: 'the key holds a percent-escape that is not UTF-8 (as %FF): form parsers disagree on what it means' };
  }
  return undefined;
}

function decodes(text: string): boolean {
  try {
    decodeURIComponent(text);
    return true;
  } catch {
    return false;
  }
}

/** `key` against the contract's bounds and pattern (already read as text): valid, empty, too long or off the pattern. */
export function checkedKey(key: string, rules: KeyRules): ParsedKey {
  if (key.length === 0) return invalid('empty', 'the key is empty');
  if (key.length > rules.maxLength) {
    return invalid('too-long', `the key is longer than ${rules.maxLength} characters`);
  }
  if (rules.pattern !== undefined && !rules.pattern.test(key)) {
    return invalid('off-pattern', 'the key does not match the documented pattern');
  }
  return { kind: 'valid', key };
}

/** Whether a character code is optional whitespace (space or horizontal tab); NaN (past the end) is not. */
function isOws(code: number): boolean {
  return code === 0x20 || code === 0x09;
}

function invalid(problem: KeyProblem, detail: string): ParsedKey {
  return { kind: 'invalid', problem, detail };
}

/** RFC 9651 sf-string: `"` *( unescaped / `\"` / `\\` ) `"`, printable ASCII only, nothing after. */
function parseSfString(value: string): string | ParsedKey {
  let out = '';
  for (let i = 1; i < value.length; i += 1) {
    const ch = value[i]!;
    const c = value.charCodeAt(i);
    if (ch === '\\') {
      const next = value[i + 1];
      if (next !== '"' && next !== '\\') return invalid('malformed', 'a quoted key may escape only " and \\');
      out += next;
      i += 1;
    } else if (ch === '"') {
      const rest = value.slice(i + 1);
      if (rest.length === 0) return out;
      if (/^[ \t]*,/.test(rest)) return invalid('several-values', 'the key header holds several values');
      return invalid('malformed', 'nothing may follow a quoted key');
    } else if (c < 0x20 || c > 0x7e) {
      return invalid('non-printable', 'the key may hold only printable ASCII characters');
    } else {
      out += ch;
    }
  }
  return invalid('malformed', 'the quoted key has no closing "');
}
