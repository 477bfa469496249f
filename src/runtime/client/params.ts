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
 * objects are written bracket-nested (`a[0][b]=…`) whatever the style; see {@link queryPairs}.
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

/** `null` or `undefined`: a member that is left out (or, in a form body, sent empty). */
function isAbsent(value: unknown): value is null | undefined {
  return value === null || value === undefined;
}

/** An array or an object: a value with members. */
function isStructured(value: unknown): value is readonly unknown[] | Readonly<Record<string, unknown>> {
  return typeof value === 'object' && value !== null;
}

/** The `[key, member]` entries of an array (keys are the indices) or an object. */
function entriesOf(value: readonly unknown[] | Readonly<Record<string, unknown>>): [string, unknown][] {
  return Array.isArray(value) ? value.map((item, index) => [String(index), item]) : Object.entries(value);
}

/**
 * The scalars of an array value, or the `[key, value]` pairs of an object value (`null` / `undefined` members left
 * out, or sent as `''` with `keepNull`), or `undefined` for a scalar or a value with a structured member — a
 * value no style but bracket nesting can write.
 */
function membersOf(value: ParamInput, keepNull = false): { list: string[] } | { pairs: [string, string][] } | undefined {
  if (!isStructured(value)) return undefined;
  const entries = entriesOf(value);
  if (entries.some(([, member]) => isStructured(member))) return undefined;
  const kept = entries
    .filter(([, member]) => (keepNull ? member !== undefined : !isAbsent(member)))
    .map(([key, member]): [string, string] => [key, isAbsent(member) ? '' : String(member)]);
  return Array.isArray(value) ? { list: kept.map(([, text]) => text) } : { pairs: kept };
}

/**
 * The leaves of `value` as `[keys, text]`: `name` then the key of each level (`['line_items', '0', 'price']`), as
 * qs and Stripe write nested fields (`line_items[0][price]=…`): every object key and array index bracketed, at
 * every depth. `undefined`, empty arrays and empty objects add nothing; `null` adds `''` with `keepNull` (a form
 * body's "unset"), nothing otherwise. Throws `TypeError` for a value that contains itself.
 */
export function bracketLeaves(name: string, value: unknown, keepNull = false): [readonly string[], string][] {
  const leaves: [readonly string[], string][] = [];
  const open = new Set<unknown>();
  const walk = (keys: readonly string[], member: unknown): void => {
    if (member === undefined || (member === null && !keepNull)) return;
    if (!isStructured(member)) {
      leaves.push([keys, member === null ? '' : String(member)]);
      return;
    }
    if (open.has(member)) throw new TypeError(`"${name}" contains itself: it cannot be written as form fields`);
    open.add(member);
    for (const [key, item] of entriesOf(member)) walk([...keys, key], item);
    open.delete(member);
  };
  walk([name], value);
  return leaves;
}

/** `keys` as one bracketed name, `a[b][0]`, each key passed through `encode`. */
export function bracketName(keys: readonly string[], encode: (text: string) => string): string {
  return keys.map((key, index) => (index === 0 ? encode(key) : `[${encode(key)}]`)).join('');
}

/** Percent-encoding of a URL or form value; a lone surrogate is sent as U+FFFD (as `URLSearchParams` does), never a `URIError`. */
export function percentEncode(text: string): string {
  return encodeURIComponent(text.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD'));
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
 * or (`keepNull`, for form bodies) sent empty when they would be a pair of their own.
 */
export function queryPairs(name: string, value: ParamInput, format: ParamFormat, keepNull = false): string[] {
  const e = percentEncode;
  if (!isStructured(value)) return [`${e(name)}=${e(String(value))}`];
  const members = format.style === 'deepObject' ? undefined : membersOf(value, keepNull && format.explode);
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
 * style (RFC 6570 `{x}`, `{.x}`, `{;x}`), or joined by a 2.0 `collectionFormat` separator.
 */
export function expand(name: string, value: ParamInput, format: ParamFormat, encode: (text: string) => string, delimiters: Readonly<Record<string, string>>): string {
  const prefix = format.style === 'label' ? '.' : format.style === 'matrix' ? ';' : '';
  const named = (text: string): string => (format.style === 'matrix' ? `${encode(name)}=${text}` : text);
  if (!isStructured(value)) return prefix + named(encode(String(value)));
  // Exploded label and matrix values repeat their prefix; everything else is one list.
  const separator = format.explode && prefix !== '' ? prefix : (delimiters[format.style] ?? ',');
  const members = membersOf(value);
  // No style here can write a nested value: its bracketed leaves, as exploded pairs (`c[a][b]=1`).
  if (members === undefined) return prefix + bracketLeaves(name, value).map(([keys, text]) => `${bracketName(keys, encode)}=${encode(text)}`).join(separator);
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
