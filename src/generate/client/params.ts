/**
 * How a generated client writes each parameter: OpenAPI 3 `style` / `explode`, Swagger 2.0 `collectionFormat`
 * mapped onto the same {@link ParamFormat}s the runtime's `buildRequest` reads.
 */
import type { ParameterView } from '../../parser/model.js';
import type { ParamFormat, ParamFormats } from '../../runtime/client/params.js';

/** Where a parameter goes, as {@link ParamFormats} names it. */
type Place = keyof ParamFormats;

const PLACES: Readonly<Record<string, Place>> = { path: 'path', query: 'query', header: 'headers', cookie: 'cookies' };

/** 2.0 `collectionFormat` → style; `multi` is exploded `form`, the others are lists in one value. */
const COLLECTION_STYLES: Readonly<Record<string, ParamFormat['style']>> = {
  ssv: 'spaceDelimited',
  tsv: 'tabDelimited',
  pipes: 'pipeDelimited',
};

const STYLES = new Set<ParamFormat['style']>(['form', 'simple', 'label', 'matrix', 'spaceDelimited', 'pipeDelimited', 'deepObject']);

/** The default of a location: query and cookie `form` exploded, path and header `simple` not exploded (both OpenAPI versions). */
function defaultFormat(place: Place): ParamFormat {
  return place === 'query' || place === 'cookies' ? { style: 'form', explode: true } : { style: 'simple', explode: false };
}

/** The format `param` is written in, by the document's version rules. */
export function paramFormat(version: string, place: Place, param: ParameterView): ParamFormat {
  const node = param.node;
  if (version === '2.0') {
    // `collectionFormat` applies to arrays only; its default is `csv`.
    if (node['type'] !== 'array') return defaultFormat(place);
    const collection = typeof node['collectionFormat'] === 'string' ? node['collectionFormat'] : 'csv';
    if (collection === 'multi') return place === 'query' ? { style: 'form', explode: true } : defaultFormat(place);
    const style = COLLECTION_STYLES[collection] ?? (place === 'query' ? 'form' : 'simple');
    return { style, explode: false };
  }
  const given = node['style'];
  const style = typeof given === 'string' && STYLES.has(given as ParamFormat['style']) ? (given as ParamFormat['style']) : defaultFormat(place).style;
  // OpenAPI 3: `explode` defaults to true for `form` only.
  const explode = typeof node['explode'] === 'boolean' ? node['explode'] : style === 'form';
  return { style, explode };
}

/** The formats of the parameters in `params` that are not their location's default, or `undefined` when all are. */
export function paramFormats(version: string, params: readonly ParameterView[]): ParamFormats | undefined {
  const out: Partial<Record<Place, [string, ParamFormat][]>> = {};
  for (const param of [...params].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    const place = Object.hasOwn(PLACES, param.in) ? PLACES[param.in] : undefined;
    if (place === undefined) continue;
    const format = paramFormat(version, place, param);
    const fallback = defaultFormat(place);
    if (format.style === fallback.style && format.explode === fallback.explode) continue;
    (out[place] ??= []).push([param.name, format]);
  }
  // Built from entries: a parameter named `__proto__` is an own member, not the object's prototype.
  const places = Object.entries(out).map(([place, entries]) => [place, Object.fromEntries(entries)] as const);
  return places.length === 0 ? undefined : (Object.fromEntries(places) as ParamFormats);
}

/**
 * The formats of Swagger 2.0 `in: formData` array fields (`csv` by default): each is written as its
 * `collectionFormat` says, where form fields without one are bracketed (`tags[0]=…`).
 */
export function formFieldFormats(fields: readonly ParameterView[]): Readonly<Record<string, ParamFormat>> | undefined {
  const arrays = fields.filter((field) => field.node['type'] === 'array');
  if (arrays.length === 0) return undefined;
  return Object.fromEntries(arrays.map((field) => [field.name, paramFormat('2.0', 'query', field)]));
}

/** What a 3.x form body's `encoding` object says about its fields, for the runtime's `fields` and `partTypes`. */
export interface FormEncoding {
  /** Fields written with an explicit `style` / `explode` (urlencoded; not-exploded arrays in multipart). */
  readonly fields?: Readonly<Record<string, ParamFormat>>;
  /** The `Content-Type` of multipart parts whose `encoding` names one (its first media type without a wildcard). */
  readonly partTypes?: Readonly<Record<string, string>>;
}

const FORM_STYLES = new Set<ParamFormat['style']>(['form', 'spaceDelimited', 'pipeDelimited', 'deepObject']);

/**
 * The 3.x Encoding Objects of a `application/x-www-form-urlencoded` or `multipart/form-data` body: `style` and
 * `explode` (defaults `form`, and exploded for `form`, as for query parameters) and, for multipart, `contentType`.
 */
export function formEncoding(multipart: boolean, encoding: unknown): FormEncoding {
  if (typeof encoding !== 'object' || encoding === null || Array.isArray(encoding)) return {};
  // Entries, not assignments: a field named `__proto__` stays an own member.
  const fields: [string, ParamFormat][] = [];
  const partTypes: [string, string][] = [];
  for (const name of Object.keys(encoding).sort()) {
    const entry = (encoding as Record<string, unknown>)[name];
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) continue;
    const { style, explode, contentType } = entry as Record<string, unknown>;
    if (typeof style === 'string' || typeof explode === 'boolean') {
      const written = typeof style === 'string' && FORM_STYLES.has(style as ParamFormat['style']) ? (style as ParamFormat['style']) : 'form';
      fields.push([name, { style: written, explode: typeof explode === 'boolean' ? explode : written === 'form' }]);
    }
    if (multipart && typeof contentType === 'string') {
      const first = contentType.split(',')[0]!.trim();
      // A header value: printable ASCII only (spec text never reaches the wire as anything else), no wildcard.
      if (/^[\x21-\x7e][\x20-\x7e]*$/.test(first) && !first.includes('*')) partTypes.push([name, first]);
    }
  }
  return {
    ...(fields.length === 0 ? {} : { fields: Object.fromEntries(fields) }),
    ...(partTypes.length === 0 ? {} : { partTypes: Object.fromEntries(partTypes) }),
  };
}
