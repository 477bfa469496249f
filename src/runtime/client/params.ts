/**
 * How generated clients write parameter values: OpenAPI 3 `style` / `explode` (Swagger 2.0 `collectionFormat`
 * maps onto them) for the URL, headers and form fields.
 *
 * This file is copied into users' generated output: it imports nothing outside `runtime/client`.
 */

/** A scalar parameter value. */
export type ParamValue = string | number | boolean;

/** A member of a structured value: a scalar, `null` / `undefined`, or an array or object of them at any depth. */
export type ParamMember = ParamValue | null | undefined | readonly ParamMember[] | ParamObject;

/** An object value: its members by name. */
export interface ParamObject {
  readonly [key: string]: ParamMember;
}

/**
 * A parameter's (or form field's) value: a scalar, an array or an object. Members that are themselves arrays or
 * objects are written bracket-nested (`a[0][b]=…`) whatever the style in a query or a form body (see
 * {@link queryPairs}); a path or header value cannot hold them. A `Date` is written as its ISO time.
 */
export type ParamInput = ParamValue | readonly ParamMember[] | ParamObject;

/**
 * How a parameter's value is written: OpenAPI 3 `style` and `explode`. Swagger 2.0 `collectionFormat` maps onto
 * these: `csv` → `form` (query) / `simple`, `ssv` → `spaceDelimited`, `pipes` → `pipeDelimited`,
 * `tsv` → `tabDelimited` (2.0 only), `multi` → exploded `form`; all but `multi` not exploded.
 */
export interface ParamFormat {
  readonly style: 'form' | 'simple' | 'label' | 'matrix' | 'spaceDelimited' | 'pipeDelimited' | 'tabDelimited' | 'deepObject';
  readonly explode: boolean;
}

/**
 * The formats of the parameters not written their location's default way: query and cookie `form` exploded
 * (`?id=1&id=2`), path and header `simple` not exploded (`1,2`).
 */
export interface ParamFormats {
  readonly path?: Readonly<Record<string, ParamFormat>>;
  readonly query?: Readonly<Record<string, ParamFormat>>;
  readonly headers?: Readonly<Record<string, ParamFormat>>;
  readonly cookies?: Readonly<Record<string, ParamFormat>>;
}

/** The default of a query or cookie parameter (and a form field): `form`, exploded. */
export const QUERY_DEFAULT: ParamFormat = { style: 'form', explode: true };
/** The default of a path or header parameter: `simple`, not exploded. */
export const SIMPLE_DEFAULT: ParamFormat = { style: 'simple', explode: false };

/** The separator of a not-exploded list, as written in a URL. */
export const URL_DELIMITER: Readonly<Record<string, string>> = { spaceDelimited: '%20', pipeDelimited: '|', tabDelimited: '%09' };
/** The same separators in a header value or a multipart field. */
export const TEXT_DELIMITER: Readonly<Record<string, string>> = { spaceDelimited: ' ', pipeDelimited: '|', tabDelimited: '\t' };

/**
 * The deepest a structured value may nest: a bracketed name has at most this many parts (`a[b][c]` has 3), as deep
 * as the guard reads one (`MAX_FORM_DEPTH` in the guard's form-names). A deeper value is a `TypeError`, not a stack
 * overflow or a field the guard would fingerprint under another name.
 */
const MAX_FORM_DEPTH = 32;

/** `null` or `undefined`: a member that is left out (or, in a form body, sent empty). */
function isAbsent(value: unknown): value is null | undefined {
  return value === null || value === undefined;
}

/** A file or bytes: a `Blob` (a `File` too), an `ArrayBuffer` or a view of one (a typed array, a `DataView`). */
export type Binary = Blob | ArrayBuffer | ArrayBufferView;

/** Whether `value` is a file or bytes ({@link Binary}). */
export function isBinary(value: unknown): value is Binary {
  return value instanceof Blob || value instanceof ArrayBuffer || ArrayBuffer.isView(value);
}

/**
 * An array or a plain object (its prototype an `Object.prototype`, of this realm or another — `vm`, an iframe,
 * jsdom — or `null`): a value whose members are written. A `Date`, a file, a `Map` or any other class instance is not
 * walked: its own enumerable properties are not its data.
 */
function isStructured(value: unknown): value is readonly unknown[] | Readonly<Record<string, unknown>> {
  if (Array.isArray(value)) return true;
  if (typeof value !== 'object' || value === null) return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  // Every realm's `Object.prototype` is the end of its chain; a class's prototype is not.
  return prototype === null || (Object.getPrototypeOf(prototype) === null && Object.prototype.toString.call(value) === '[object Object]');
}

/** A value written as one piece of text: a string, number, boolean, bigint or `Date`. */
export function isScalar(value: unknown): value is ParamValue | bigint | Date {
  return ['string', 'number', 'boolean', 'bigint'].includes(typeof value) || value instanceof Date;
}

/** What `value` is, for an error message: `a Map`, `a File`, `a function`. */
function kindOf(value: unknown): string {
  const constructor = typeof value === 'object' && value !== null ? (value as { constructor?: { name?: unknown } }).constructor?.name : undefined;
  return `a ${typeof constructor === 'string' && constructor !== '' ? constructor : typeof value}`;
}

/**
 * The text of a scalar `value`: a string, number, boolean or bigint as `String` writes it, a `Date` as its ISO 8601
 * time (`2026-01-02T03:04:05.000Z`, as `JSON.stringify` writes it in a JSON body). Throws `TypeError` naming
 * `field` for anything else (a `Map`, a `Set`, a class instance, a function, an invalid `Date`; a file or bytes
 * outside a multipart body).
 */
export function scalarText(field: string, value: unknown): string {
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new TypeError(`"${field}" is an invalid Date: it cannot be written as form fields or parameters`);
    return value.toISOString();
  }
  if (isScalar(value)) return String(value);
  const hint = isBinary(value) ? 'files and bytes go in a multipart/form-data body' : 'give strings, numbers, booleans, Dates, arrays or plain objects';
  return unwritable(field, `is ${kindOf(value)}`, hint);
}

/** Throws the `TypeError` of a value that cannot be written: `"field" <what>: it cannot be written as form fields or parameters (<hint>)`. */
function unwritable(field: string, what: string, hint: string): never {
  throw new TypeError(`"${field}" ${what}: it cannot be written as form fields or parameters (${hint})`);
}

/** The `[key, member]` entries of an array (keys are the indices; a hole is `undefined`) or an object. */
function entriesOf(value: readonly unknown[] | Readonly<Record<string, unknown>>): [string, unknown][] {
  if (!Array.isArray(value)) return Object.entries(value);
  const entries: [string, unknown][] = [];
  for (let index = 0; index < value.length; index++) entries.push([String(index), value[index]]);
  return entries;
}

/**
 * The scalars of an array value, or the `[key, value]` pairs of an object value (`null` / `undefined` members left
 * out, or sent as `''` with `keepNull`), or `undefined` when a member is itself an array or object — a value no
 * style but bracket nesting can write. Throws `TypeError` for a member that is not a scalar (see {@link scalarText}).
 */
function membersOf(name: string, value: readonly unknown[] | Readonly<Record<string, unknown>>, keepNull = false): { list: string[] } | { pairs: [string, string][] } | undefined {
  const entries = entriesOf(value);
  if (entries.some(([, member]) => isStructured(member))) return undefined;
  const kept = entries
    .filter(([, member]) => (keepNull ? member !== undefined : !isAbsent(member)))
    .map(([key, member]): [string, string] => [key, isAbsent(member) ? '' : scalarText(`${name}[${key}]`, member)]);
  return Array.isArray(value) ? { list: kept.map(([, text]) => text) } : { pairs: kept };
}

/**
 * The leaves of `value` as `[keys, leaf]`: `name` then the key of each level (`['line_items', '0', 'price']`), as
 * qs and Stripe write nested fields (`line_items[0][price]=…`): every key of an array or plain object bracketed,
 * at every depth, and each leaf as its text ({@link scalarText}: a `Date` is its ISO time). With `files` (a
 * multipart body), a file or bytes is a leaf of its own. `undefined`, array holes, empty arrays and empty objects
 * add nothing; `null` adds `''` with `keepNull` (a form body's "unset"), nothing otherwise. Throws `TypeError`
 * naming the field for a leaf that cannot be written, a value that contains itself, or one nested deeper than
 * {@link MAX_FORM_DEPTH}.
 */
export function bracketLeaves(name: string, value: unknown, keepNull?: boolean): [readonly string[], string][];
export function bracketLeaves(name: string, value: unknown, keepNull: boolean, files: true): [readonly string[], string | Binary][];
export function bracketLeaves(name: string, value: unknown, keepNull = false, files = false): [readonly string[], string | Binary][] {
  const leaves: [readonly string[], string | Binary][] = [];
  const open = new Set<unknown>();
  const walk = (keys: readonly string[], member: unknown): void => {
    if (member === undefined || (member === null && !keepNull)) return;
    if (keys.length > MAX_FORM_DEPTH) unwritable(name, `is nested more than ${MAX_FORM_DEPTH} names deep`, `a bracketed name has at most ${MAX_FORM_DEPTH} parts`);
    if (member === null) leaves.push([keys, '']);
    else if (files && isBinary(member)) leaves.push([keys, member]);
    else if (!isStructured(member)) leaves.push([keys, scalarText(bracketName(keys, String), member)]);
    else {
      if (open.has(member)) throw new TypeError(`"${name}" contains itself: it cannot be written as form fields`);
      open.add(member);
      for (const [key, item] of entriesOf(member)) walk([...keys, key], item);
      open.delete(member);
    }
  };
  walk([name], value);
  return leaves;
}

/** `keys` as one bracketed name, `a[b][0]`, each key passed through `encode`. */
export function bracketName(keys: readonly string[], encode: (text: string) => string): string {
  return keys.map((key, index) => (index === 0 ? encode(key) : `[${encode(key)}]`)).join('');
}

/**
 * Percent-encoding of a path segment, query or form value: every character but RFC 3986's unreserved ones
 * (`A-Z a-z 0-9 - . _ ~`), so `!'()*` too, as RFC 6570 expands `{x}` and as stripe-node (qs) writes form bodies.
 * A lone surrogate is sent as U+FFFD (as `URLSearchParams` does), never a `URIError`.
 */
export function percentEncode(text: string): string {
  const wellFormed = text.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
  return encodeURIComponent(wellFormed).replace(/[!'()*]/g, (char) => `%${char.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** `deepObject`: the style structured form-body fields without an `encoding` are written in. */
export const DEEP_OBJECT: ParamFormat = { style: 'deepObject', explode: true };

/**
 * `name=value` pairs (encoded) of one query parameter or form field, as OpenAPI 3 `style` / `explode` say:
 * `form` exploded repeats the name for each item (`id=1&id=2`) and writes an object's members as their own
 * fields; not exploded joins them (`id=1,2`, `|` for `pipeDelimited`, `%20` for `spaceDelimited`);
 * `deepObject` brackets keys and indices at every depth (`filter[color]=red`, `expand[0]=a`,
 * `line_items[0][price]=p`). A value with an array or object inside it is bracket-nested in any style (no
 * other style can write it). An empty array or object adds no pair; `null` / `undefined` members are left out,
 * or (`keepNull`, for form bodies) sent empty when they would be a pair of their own. Throws `TypeError` for a
 * value that cannot be written (see {@link bracketLeaves}).
 */
export function queryPairs(name: string, value: ParamInput, format: ParamFormat, keepNull = false): string[] {
  const e = percentEncode;
  if (!isStructured(value)) return [`${e(name)}=${e(scalarText(name, value))}`];
  const members = format.style === 'deepObject' ? undefined : membersOf(name, value, keepNull && format.explode);
  if (members === undefined) return bracketLeaves(name, value, keepNull).map(([keys, text]) => `${bracketName(keys, e)}=${e(text)}`);
  const delimiter = URL_DELIMITER[format.style] ?? ',';
  if ('list' in members) {
    if (members.list.length === 0) return [];
    if (format.explode) return members.list.map((v) => `${e(name)}=${e(v)}`);
    return [`${e(name)}=${members.list.map(e).join(delimiter)}`];
  }
  if (members.pairs.length === 0) return [];
  if (format.explode) return members.pairs.map(([k, v]) => `${e(k)}=${e(v)}`);
  return [`${e(name)}=${members.pairs.flatMap(([k, v]) => [e(k), e(v)]).join(delimiter)}`];
}

/**
 * A path segment (`encode` = percent-encoding) or header value (`encode` = none) in `simple`, `label` or `matrix`
 * style (RFC 6570 `{x}`, `{.x}`, `{;x}`), or joined by a 2.0 `collectionFormat` separator. Throws `TypeError` for
 * an array or object with an array or object inside it (no style writes one there), or a member that is not a
 * scalar (see {@link scalarText}).
 */
export function expand(name: string, value: ParamInput, format: ParamFormat, encode: (text: string) => string, delimiters: Readonly<Record<string, string>>): string {
  const prefix = format.style === 'label' ? '.' : format.style === 'matrix' ? ';' : '';
  const named = (text: string): string => (format.style === 'matrix' ? `${encode(name)}=${text}` : text);
  if (!isStructured(value)) return prefix + named(encode(scalarText(name, value)));
  // Exploded label and matrix values repeat their prefix; everything else is one list.
  const separator = format.explode && prefix !== '' ? prefix : (delimiters[format.style] ?? ',');
  const members = membersOf(name, value);
  // No style here can write a nested value, and brackets mean nothing in a path segment or a header.
  if (members === undefined) return unwritable(name, 'holds an array or object inside it', `${format.style} style writes one level of members in a path or header`);
  if ('list' in members) {
    const items = members.list.map(encode);
    return prefix + (format.explode && format.style === 'matrix' ? items.map(named) : [named(items.join(separator))]).join(separator);
  }
  const pairs = members.pairs.map(([k, v]) => [encode(k), encode(v)] as const);
  if (format.explode) return prefix + pairs.map(([k, v]) => `${k}=${v}`).join(separator);
  return prefix + named(pairs.flatMap(([k, v]) => [k, v]).join(separator));
}

/** `name`'s format in `formats`, own members only: a parameter named `constructor` or `toString` is no `Object.prototype` member. */
export function formatOf(formats: Readonly<Record<string, ParamFormat>> | undefined, name: string): ParamFormat | undefined {
  return formats !== undefined && Object.hasOwn(formats, name) ? formats[name] : undefined;
}
