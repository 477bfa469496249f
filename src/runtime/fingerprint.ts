/**
 * Canonical JSON (RFC 8785, JCS), JSON Pointer selection (RFC 6901), the request fingerprint and the
 * record id (DESIGN §4 steps 2–3). Node built-ins only; copied into users' generated code.
 */
import * as nodeCrypto from 'node:crypto';

/** Thrown for a value that has no JSON form (NaN, Infinity, bigint, function, symbol, undefined in an array). */
export class CanonicalJsonError extends TypeError {
  override readonly name = 'CanonicalJsonError';
}

/**
 * Serialise `value` as RFC 8785 canonical JSON: no whitespace, object members sorted by the UTF-16 code
 * units of their names, numbers in ECMAScript Number-to-String form (`1e21`, `0.1`, `-0` → `0`),
 * strings escaped as `JSON.stringify` does. Object members whose value is `undefined` are left out,
 * as in `JSON.stringify`; `toJSON` is not consulted.
 */
export function canonicalJson(value: unknown): string {
  return write(value, 0, true);
}

/**
 * A JSON number kept as the text the request sent, where a double cannot hold its value: more significant digits
 * than a double keeps (`9007199254740993`, `0.12345678901234567891`), or out of its range (`1e400`, `1e-400`).
 * {@link parseJsonExact} makes them; the fingerprint writes them exactly, so two payloads that differ only past
 * a double's precision do not share a fingerprint (one would be replayed the other's answer).
 */
export class JsonNumberText {
  readonly text: string;

  constructor(text: string) {
    this.text = text;
  }
}

// A JSON text that may hold a number a double cannot: 16 digits in a row (a decimal point may sit among them) or a
// three-digit exponent. Bodies without one (most) are parsed once, by JSON.parse alone.
const MAYBE_INEXACT = /\d[\d.]{15}|[eE][+-]?\d{3}/;
/**
 * `JSON.parse(text)`, except that a number a double cannot hold exactly becomes a {@link JsonNumberText} of its
 * text (numbers that round-trip stay numbers). Throws as `JSON.parse` does on text that is no JSON.
 */
export function parseJsonExact(text: string): unknown {
  const value: unknown = JSON.parse(text);
  if (!MAYBE_INEXACT.test(text)) return value;
  const spans = inexactNumbers(text);
  if (spans.length === 0) return value;
  // Each inexact number becomes a string that starts with a random mark no request can know, then back a number text.
  const mark = `${nodeCrypto.randomBytes(16).toString('hex')}:`;
  let marked = '';
  let from = 0;
  for (let k = 0; k < spans.length; k += 2) {
    marked += `${text.slice(from, spans[k])}"${mark}${text.slice(spans[k], spans[k + 1])}"`;
    from = spans[k + 1]!;
  }
  marked += text.slice(from);
  return JSON.parse(marked, (_name, item: unknown) => (typeof item === 'string' && item.startsWith(mark) ? new JsonNumberText(item.slice(mark.length)) : item));
}

/**
 * The numbers of a valid JSON text that a double cannot hold exactly, as start and end offsets in turn. One pass
 * over the characters, skipping strings; only a number of 16 characters or more, or with an exponent, is looked at
 * closer (one of at most 15 digits and no exponent is always exact).
 */
function inexactNumbers(text: string): number[] {
  const spans: number[] = [];
  const end = text.length;
  let i = 0;
  while (i < end) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // A string: to its closing quote, one not escaped (an even run of backslashes before it).
      let close = text.indexOf('"', i + 1);
      for (;;) {
        if (close < 0) return spans; // not reached: the text parsed as JSON, so every string ends
        let before = close - 1;
        while (text.charCodeAt(before) === 0x5c) before -= 1;
        if ((close - 1 - before) % 2 === 0) break;
        close = text.indexOf('"', close + 1);
      }
      i = close + 1;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      const start = i;
      let exponent = false;
      for (i += 1; i < end; i += 1) {
        const d = text.charCodeAt(i);
        if (d === 0x65 || d === 0x45) exponent = true;
        else if (!((d >= 0x30 && d <= 0x39) || d === 0x2e || d === 0x2b || d === 0x2d)) break;
      }
      if ((exponent || i - start >= 16) && !isExactNumber(text.slice(start, i))) spans.push(start, i);
    } else {
      i += 1;
    }
  }
  return spans;
}

/** Whether a JSON number's value is exactly what its double prints: the same decimal, however written. */
function isExactNumber(text: string): boolean {
  const double = Number(text);
  return Number.isFinite(double) && decimalOf(text) === decimalOf(String(double));
}

/**
 * A JSON number's value as `<sign><digits>e<exponent>`, digits without leading or trailing zeros (`0` for any
 * zero): the same text for the same value however it is written (`1.50`, `15e-1`, `0.15E1`).
 */
function decimalOf(text: string): string {
  const parts = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (parts === null) return text;
  const fraction = parts[3] ?? '';
  const all = `${parts[2]!}${fraction}`;
  const first = all.search(/[1-9]/);
  if (first < 0) return '0';
  // A loop, not /0+$/: that regex retries from every zero of a long inner run (quadratic in the number's length).
  let end = all.length;
  while (all.charCodeAt(end - 1) === 0x30) end -= 1;
  const digits = all.slice(first, end);
  const trailing = all.length - first - digits.length;
  // BigInt: an exponent may have more digits than a double counts exactly.
  const exponent = BigInt(parts[4] ?? '0') - BigInt(fraction.length) + BigInt(trailing);
  return `${parts[1]!}${digits}e${exponent.toString()}`;
}

/** A number given as decimal text (a {@link JsonNumberText}, a bigint): as JCS writes its double when that is exact, else exactly, marked. */
function numberText(text: string): string {
  return isExactNumber(text) ? JSON.stringify(Number(text)) : `~${decimalOf(text)}`;
}

const MAX_DEPTH = 1000;

/** What `JSON.stringify` escapes in a string: `"`, `\\`, control characters and (lone) surrogates, code unit by code unit. */
const ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/;

/** `JSON.stringify(text)`. Most names and values need no escape: quoting them here skips the serialiser's setup. */
function quote(text: string): string {
  return ESCAPED.test(text) ? JSON.stringify(text) : `"${text}"`;
}

// Builds the text by concatenation (V8 ropes, flattened once when hashed): no parts array, no closures.
// `strict` is RFC 8785 ({@link canonicalJson}). Otherwise (fingerprints, record ids) a value some body parser can make
// that has no JSON form is written in a form no JSON value has, so it neither throws (a 500 before the handler) nor
// collapses into another payload: a bigint or {@link JsonNumberText} exactly, NaN and ±Infinity by name, a Map or Set
// by its entries, a class instance with `toJSON` (a Date, a decimal library's number) as `JSON.stringify` would.
function write(value: unknown, depth: number, strict: boolean): string {
  if (depth > MAX_DEPTH) return writeDeep(value, strict);
  switch (typeof value) {
    case 'string':
      return quote(value);
    case 'number':
      if (!Number.isFinite(value)) {
        if (strict) throw new CanonicalJsonError(`${value} has no JSON form`);
        return `~${value}`;
      }
      // ECMAScript Number::toString is exactly JCS's number form; JSON.stringify applies it (and maps -0 to 0).
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object': {
      if (value === null) return 'null';
      if (Array.isArray(value)) {
        let out = '[';
        for (let i = 0; i < value.length; i += 1) {
          const item: unknown = value[i];
          if (item === undefined && strict) throw new CanonicalJsonError('undefined has no JSON form inside an array');
          const text = item === undefined ? '~undefined' : write(item, depth + 1, strict);
          out += i > 0 ? `,${text}` : text;
        }
        return `${out}]`;
      }
      if (!strict) {
        const special = nonPlain(value, depth);
        if (special !== undefined) return special;
      }
      const record = value as Record<string, unknown>;
      const names = sortedNames(Object.keys(record));
      let out = '{';
      let first = true;
      for (let i = 0; i < names.length; i += 1) {
        const name = names[i]!;
        const member = record[name];
        if (member === undefined) continue;
        out += `${first ? '' : ','}${quote(name)}:${write(member, depth + 1, strict)}`;
        first = false;
      }
      return `${out}}`;
    }
    case 'bigint':
      if (strict) throw new CanonicalJsonError('a bigint has no JSON form');
      return numberText(value.toString());
    default:
      if (strict) throw new CanonicalJsonError(`a ${typeof value} has no JSON form`);
      return `~${typeof value}`;
  }
}

/** An array or object {@link writeDeep} is inside of: its text so far and the members still to write. */
interface Open {
  readonly value: object;
  readonly items: readonly unknown[] | undefined;
  readonly names: readonly string[];
  index: number;
  out: string;
  empty: boolean;
}

/**
 * {@link write} for a value nested deeper than the call stack goes (`[[[…]]]` of 100,000 levels is 200 KB that
 * `JSON.parse` reads): the same text, written with a stack of its own, so a request body any parser accepted is
 * fingerprinted, never a 500 before the handler. A value that contains itself (only a body parser's `toJSON`, Map
 * or Set can make one) throws, as in `JSON.stringify`.
 */
function writeDeep(root: unknown, strict: boolean): string {
  const open: Open[] = [];
  const inside = new Set<object>();
  let next: unknown = root;
  for (;;) {
    // Down: open `next` when it is an array or an object, else write it.
    let text: string | undefined;
    let prefix = '';
    for (let hops = 0; ; hops += 1) {
      if (hops > MAX_DEPTH) throw new CanonicalJsonError('toJSON answers with values that have toJSON without end');
      if (typeof next !== 'object' || next === null) {
        text = write(next, 0, strict);
        break;
      }
      if (!Array.isArray(next) && !strict) {
        const prototype: unknown = Object.getPrototypeOf(next);
        if (prototype !== Object.prototype && prototype !== null) {
          if (next instanceof JsonNumberText) {
            text = `${prefix}${numberText(next.text)}`;
            break;
          }
          if (next instanceof Map || next instanceof Set) {
            prefix += next instanceof Map ? '~Map' : '~Set';
            next = [...next];
            continue;
          }
          const toJSON = (next as { toJSON?: unknown }).toJSON;
          if (typeof toJSON === 'function') {
            const json: unknown = toJSON.call(next);
            // A toJSON that answers with its own object: that object, as written (write() ends there too, at its depth).
            if (json !== next) {
              next = json;
              continue;
            }
          }
        }
      }
      if (inside.has(next)) throw new CanonicalJsonError('value contains itself');
      inside.add(next);
      const items = Array.isArray(next) ? (next as unknown[]) : undefined;
      open.push({ value: next, items, names: items === undefined ? sortedNames(Object.keys(next)) : [], index: 0, out: `${prefix}${items === undefined ? '{' : '['}`, empty: true });
      break;
    }
    // Up: add the text to its container, close the containers written in full, and find the next member.
    for (;;) {
      const top = open[open.length - 1];
      if (top === undefined) return text!;
      if (text !== undefined) top.out += text;
      text = undefined;
      if (top.items !== undefined) {
        if (top.index < top.items.length) {
          const item = top.items[top.index];
          if (!top.empty) top.out += ',';
          top.empty = false;
          top.index += 1;
          if (item === undefined) {
            if (strict) throw new CanonicalJsonError('undefined has no JSON form inside an array');
            top.out += '~undefined';
            continue;
          }
          next = item;
          break;
        }
      } else {
        let member: unknown;
        while (top.index < top.names.length && (member = (top.value as Record<string, unknown>)[top.names[top.index]!]) === undefined) top.index += 1;
        if (top.index < top.names.length) {
          top.out += `${top.empty ? '' : ','}${quote(top.names[top.index]!)}:`;
          top.empty = false;
          top.index += 1;
          next = member;
          break;
        }
      }
      open.pop();
      inside.delete(top.value);
      text = `${top.out}${top.items === undefined ? '}' : ']'}`;
    }
  }
}

/** The fingerprint form of an object that is not a plain one (see {@link write}), or undefined for a plain object. */
function nonPlain(value: object, depth: number): string | undefined {
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype === Object.prototype || prototype === null) return undefined;
  if (value instanceof JsonNumberText) return numberText(value.text);
  if (value instanceof Map) return `~Map${write([...value], depth + 1, false)}`;
  if (value instanceof Set) return `~Set${write([...value], depth + 1, false)}`;
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') return write(toJSON.call(value), depth + 1, false);
  return undefined;
}

/** Above this many members a name list is sorted by `Array.prototype.sort`, below by insertion (no call setup). */
const INSERTION_SORT_MAX = 16;

/**
 * `names` sorted in place by their UTF-16 code units, as RFC 8785 §3.2.3 asks: what the default `sort()` and the
 * `<` of two strings both compare. Request bodies have few members per object, where `sort()`'s setup costs more
 * than the sorting.
 */
function sortedNames(names: string[]): string[] {
  if (names.length > INSERTION_SORT_MAX) return names.sort();
  for (let i = 1; i < names.length; i += 1) {
    const name = names[i]!;
    let j = i - 1;
    while (j >= 0 && names[j]! > name) {
      names[j + 1] = names[j]!;
      j -= 1;
    }
    names[j + 1] = name;
  }
  return names;
}

/** Split an RFC 6901 JSON Pointer into unescaped reference tokens. `''` is the whole document. */
export function parseJsonPointer(pointer: string): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw new SyntaxError(`JSON Pointer ${JSON.stringify(pointer)} must start with "/"`);
  return pointer
    .slice(1)
    .split('/')
    .map((token) => {
      if (/~(?![01])/.test(token)) throw new SyntaxError(`JSON Pointer ${JSON.stringify(pointer)} has a bad ~ escape`);
      return token.replace(/~1/g, '/').replace(/~0/g, '~');
    });
}

function child(container: unknown, token: string): { found: boolean; value?: unknown } {
  if (Array.isArray(container)) {
    if (!/^(0|[1-9][0-9]*)$/.test(token)) return { found: false };
    const index = Number(token);
    return index < container.length ? { found: true, value: container[index] } : { found: false };
  }
  if (container !== null && typeof container === 'object' && !(container instanceof JsonNumberText) && Object.prototype.hasOwnProperty.call(container, token)) {
    return { found: true, value: (container as Record<string, unknown>)[token] };
  }
  return { found: false };
}

/** Resolve a pointer; `found: false` when any step is missing (an absent optional field). */
export function resolveJsonPointer(document: unknown, pointer: string | readonly string[]): { found: boolean; value?: unknown } {
  const tokens = typeof pointer === 'string' ? parseJsonPointer(pointer) : pointer;
  let current: unknown = document;
  for (const token of tokens) {
    const next = child(current, token);
    if (!next.found) return { found: false };
    current = next.value;
  }
  return { found: true, value: current };
}

/** A deep copy of `value` with the member at `tokens[from…]` removed (array items are spliced out). */
function without(value: unknown, tokens: readonly string[], from: number): unknown {
  if (from >= tokens.length) return undefined;
  const head = tokens[from]!;
  const last = from === tokens.length - 1;
  if (Array.isArray(value)) {
    const here = child(value, head);
    if (!here.found) return value;
    const copy = value.slice();
    const index = Number(head);
    if (last) copy.splice(index, 1);
    else copy[index] = without(copy[index], tokens, from + 1);
    return copy;
  }
  if (value !== null && typeof value === 'object' && !(value instanceof JsonNumberText)) {
    const record = value as Record<string, unknown>;
    if (!Object.prototype.hasOwnProperty.call(record, head)) return value;
    const copy: Record<string, unknown> = { ...record };
    if (last) delete copy[head];
    else copy[head] = without(copy[head], tokens, from + 1);
    return copy;
  }
  return value;
}

/** Whether `pointer` is `prefix` or below it. */
function isUnder(pointer: readonly string[], prefix: readonly string[]): boolean {
  if (pointer.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i += 1) if (pointer[i] !== prefix[i]) return false;
  return true;
}

/** Which body fields are significant: `'all'` or a list of pointers, minus `exclude`. */
export interface FieldSelection {
  readonly include: 'all' | readonly string[];
  readonly exclude: readonly string[];
}

interface ParsedPointer {
  readonly pointer: string;
  readonly tokens: readonly string[];
}

// A guard passes the same selection object (its contract's) on every request: its pointers are parsed once.
const parsedSelections = new WeakMap<FieldSelection, { includes: ParsedPointer[]; excludes: ParsedPointer[] }>();

function parsedSelection(selection: FieldSelection): { includes: ParsedPointer[]; excludes: ParsedPointer[] } {
  const cached = parsedSelections.get(selection);
  // Keyed by the object, so checked against its current lists too: a caller may reuse a mutable selection.
  if (cached !== undefined && sameParsed(cached.includes, selection.include === 'all' ? [''] : selection.include) && sameParsed(cached.excludes, selection.exclude)) {
    return cached;
  }
  const parse = (pointer: string): ParsedPointer => ({ pointer, tokens: parseJsonPointer(pointer) });
  const parsed = { includes: (selection.include === 'all' ? [''] : selection.include).map(parse), excludes: selection.exclude.map(parse) };
  parsedSelections.set(selection, parsed);
  return parsed;
}

function sameParsed(parsed: readonly ParsedPointer[], pointers: readonly string[]): boolean {
  if (parsed.length !== pointers.length) return false;
  for (let i = 0; i < parsed.length; i += 1) if (parsed[i]!.pointer !== pointers[i]) return false;
  return true;
}

/**
 * Select the significant part of a body as a map from include pointer to value (`''` for `'all'`).
 * A pointer that does not resolve (a missing optional field) is left out of the map, so "absent"
 * differs from `null`. Excluded pointers under an included one are removed from its value.
 */
export function selectFields(body: unknown, selection: FieldSelection): Record<string, unknown> {
  if (body === undefined) return {};
  const { includes, excludes } = parsedSelection(selection);
  const selected: Record<string, unknown> = {};
  for (const { pointer, tokens } of includes) {
    const hit = resolveJsonPointer(body, tokens);
    if (!hit.found) continue;
    let value = hit.value;
    let dropped = false;
    for (const ex of excludes) {
      if (!isUnder(ex.tokens, tokens)) continue;
      if (ex.tokens.length === tokens.length) {
        dropped = true;
        break;
      }
      value = without(value, ex.tokens, tokens.length);
    }
    if (!dropped) selected[pointer] = value;
  }
  return selected;
}

type OneShotHash = (algorithm: string, data: string | Uint8Array, outputEncoding: 'hex') => string;

// One-shot `crypto.hash` (Node >= 20.12, 21.7) hashes without building a Hash object per call; the guard hashes
// twice per request. Older Node (and older @types/node) lack it, hence the lookup instead of a named import.
const oneShotHash = (nodeCrypto as { hash?: OneShotHash }).hash;

/** Lower-case hex SHA-256 of a string (as UTF-8) or of bytes. */
function sha256(data: string | Uint8Array): string {
  if (oneShotHash !== undefined) return oneShotHash('sha256', data, 'hex');
  return nodeCrypto.createHash('sha256').update(data).digest('hex');
}

/** Lower-case hex SHA-256 of a UTF-8 string. */
export function sha256Hex(text: string): string {
  return sha256(text);
}

/** The fingerprint format version; bump when what goes into it changes. */
export const FINGERPRINT_VERSION = 'v1';

/** A query parameter's value(s) as the fingerprint takes them (see {@link FingerprintInput.query}). */
export type QueryValue = string | readonly string[] | Readonly<Record<string, string | readonly string[]>>;

/** Everything that makes two requests "the same payload" (DESIGN §4 step 3). */
export interface FingerprintInput {
  readonly operationId: string;
  readonly pathParams: Readonly<Record<string, string>>;
  /**
   * Declared query parameters only, as the request carried them; a parameter also (or only) sent with
   * bracketed members (`expand[0]=a`, `filter[k]=v`: deepObject) maps each bracketed suffix to its value, with
   * the bare name's value under `''`.
   */
  readonly query: Readonly<Record<string, QueryValue | undefined>>;
  readonly body: unknown;
  readonly selection: FieldSelection;
}

/**
 * The exact bytes of a body that field selection cannot see into — text or bytes (a body no parser turned
 * into JSON), or a JSON scalar under include pointers — or undefined when the selection applies (objects,
 * arrays, an absent body, any JSON value under `'all'`). Without this every such payload would select `{}`
 * and share one fingerprint: a changed payload would be replayed instead of refused.
 */
function opaqueBody(body: unknown, selection: FieldSelection): Uint8Array | string | undefined {
  if (body === undefined) return undefined;
  if (body instanceof Uint8Array) return body;
  if (body !== null && typeof body === 'object' && !(body instanceof JsonNumberText)) return undefined;
  if (selection.include === 'all') return undefined;
  return typeof body === 'string' ? body : write(body, 0, false);
}

/**
 * `v1:` + SHA-256 of the canonical JSON of operation, path params, declared query params and selected body
 * fields — or, for a body the selection cannot see into, the SHA-256 of its exact bytes.
 */
export function computeFingerprint(input: FingerprintInput): string {
  return fingerprintFor(input.operationId, input.selection)(input.pathParams, input.query, input.body);
}

/**
 * {@link computeFingerprint} of one operation and field selection, for a guard to build once: the canonical
 * material `{"body"|"bodyBytes":…,"operation":…,"path":…,"query":…,"v":"v1"}` (members in JCS order) is
 * written straight into one string around the operation's text made here, with no material object to sort per
 * request.
 */
export function fingerprintFor(
  operationId: string,
  selection: FieldSelection,
): (pathParams: FingerprintInput['pathParams'], query: FingerprintInput['query'], body: unknown) => string {
  const operation = `,"operation":${JSON.stringify(operationId)},"path":`;
  const version = `,"v":${JSON.stringify(FINGERPRINT_VERSION)}}`;
  return (pathParams, query, body) => {
    const opaque = opaqueBody(body, selection);
    const head = opaque === undefined ? `{"body":${write(selectFields(body, selection), 1, false)}` : `{"bodyBytes":${JSON.stringify(sha256(opaque))}`;
    return `${FINGERPRINT_VERSION}:${sha256(`${head}${operation}${write(pathParams, 1, false)},"query":${write(query, 1, false)}${version}`)}`;
  };
}

/**
 * Record id = SHA-256 over the canonical JSON array of scope values, operation id and key. A JSON array
 * keeps the parts apart (no `"ab"+"c"` = `"a"+"bc"` collisions); the raw key never leaves this function.
 */
export function computeRecordId(scopeValues: readonly unknown[], operationId: string, key: string): string {
  return recordIdFor(operationId)(scopeValues, key);
}

/** {@link computeRecordId} of one operation, for a guard to build once: the array's constant text is made here. */
export function recordIdFor(operationId: string): (scopeValues: readonly unknown[], key: string) => string {
  const operation = `,${JSON.stringify(operationId)},`;
  return (scopeValues, key) => sha256(`["idemkit-record/v1",${write(scopeValues, 1, false)}${operation}${quote(key)}]`);
}
