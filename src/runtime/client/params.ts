/**
 * How generated clients write parameter values: OpenAPI 3 `style` / `explode` (Swagger 2.0 `collectionFormat`
 * maps onto them) for the URL, headers and 2.0 form fields.
 *
 * This file is copied into users' generated output: it imports nothing outside `runtime/client`.
 */

/** A scalar parameter value. */
export type ParamValue = string | number | boolean;

/** A parameter's value: a scalar, an array of scalars, or an object of scalars (`null` / `undefined` members are left out). */
export type ParamInput = ParamValue | readonly (ParamValue | null | undefined)[] | Readonly<Record<string, ParamValue | null | undefined>>;

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

/** The scalars of an array value, or the `[key, value]` pairs of an object value, or `undefined` for a scalar. */
function membersOf(value: ParamInput): { list: string[] } | { pairs: [string, string][] } | undefined {
  if (Array.isArray(value)) return { list: (value as readonly unknown[]).filter((v) => v !== undefined && v !== null).map(String) };
  if (typeof value === 'object' && value !== null) {
    return { pairs: Object.entries(value).filter(([, v]) => v !== undefined && v !== null).map(([k, v]) => [k, String(v)]) };
  }
  return undefined;
}

/** `name=value` pairs (encoded) of one query parameter; an empty array or object adds none. */
export function queryPairs(name: string, value: ParamInput, format: ParamFormat): string[] {
  const e = encodeURIComponent;
  const members = membersOf(value);
  if (members === undefined) return [`${e(name)}=${e(String(value))}`];
  const delimiter = URL_DELIMITER[format.style] ?? ',';
  if ('list' in members) {
    if (members.list.length === 0) return [];
    if (format.explode || format.style === 'deepObject') return members.list.map((v) => `${e(name)}=${e(v)}`);
    return [`${e(name)}=${members.list.map(e).join(delimiter)}`];
  }
  if (members.pairs.length === 0) return [];
  if (format.style === 'deepObject') return members.pairs.map(([k, v]) => `${e(name)}[${e(k)}]=${e(v)}`);
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
  const members = membersOf(value);
  if (members === undefined) return prefix + named(encode(String(value)));
  // Exploded label and matrix values repeat their prefix; everything else is one list.
  const separator = format.explode && prefix !== '' ? prefix : (delimiters[format.style] ?? ',');
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
