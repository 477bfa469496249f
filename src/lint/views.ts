/**
 * Cross-reference views over an {@link ApiDocument} that rules share: an operation's effective
 * parameters, request body schema, declared responses and their headers, effective security, JSON
 * Pointer resolution through a schema, required properties and the operationId index.
 *
 * Every view is location-true: it follows `$ref`s with `doc.deref`, so each returned node carries the
 * pointer of the place it is written in the user's file (the shared component, not a dereferenced copy).
 * Views never throw on odd input; a broken reference or a node of the wrong type simply yields nothing.
 * Results are cached per document/operation so a rule catalogue stays linear in the number of operations.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ApiDocument, KeyPlace, Location, OperationView, ParameterView } from '../parser/model.js';
import { operationParameters } from '../parser/load.js';
import { appendPointer, escapeToken, lazyChild, unescapeToken } from '../parser/pointer.js';
import { isKnownKeyHeader } from '../parser/key-headers.js';
import { quickToRun } from '../parser/regex-ambiguity.js';
import { bracketPath } from '../runtime/form-names.js';

/** A node together with where it is written. */
export interface Located<T = unknown> {
  readonly value: T;
  readonly at: Location;
}

/** Escapes one JSON Pointer reference token (RFC 6901). */
export const escapePointerToken = escapeToken;

/** Splits a JSON Pointer into unescaped tokens; `undefined` when it is not a pointer (no leading `/`). */
export function parsePointer(pointer: string): string[] | undefined {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) return undefined;
  return pointer.slice(1).split('/').map(unescapeToken);
}

/**
 * The location of a child of `at`, e.g. `child(op.at, 'responses', '200')`, its pointer joined now. The views
 * locate the nodes they pass through with `lazyChild` instead: most of those locations are never read (only a
 * finding, or a cache of a shared schema, reads one).
 */
export function child(at: Location, ...tokens: (string | number)[]): Location {
  let pointer = at.pointer;
  for (let i = 0; i < tokens.length; i++) pointer += `/${escapePointerToken(tokens[i]!)}`;
  return { file: at.file, pointer };
}

/** A plain object (not an array, not null). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `doc.deref`, which makes a new object each call: a view may hand it on as its own result. */
function deref(doc: ApiDocument, value: unknown, at: Location): Located | undefined {
  try {
    return doc.deref(value, at);
  } catch {
    // A reference the loader cannot follow is a document problem, reported elsewhere; views only skip it.
    return undefined;
  }
}

/**
 * A per-document memo of the last operation asked: the lint engine goes operation by operation, and every rule
 * that asks a view of the current operation gets the one value; the values of earlier operations are let go,
 * so a big document's views die young instead of piling up for the garbage collector to copy.
 */
function memo<T>(compute: (doc: ApiDocument, op: OperationView) => T): (doc: ApiDocument, op: OperationView) => T {
  const cache = new WeakMap<ApiDocument, { op: OperationView; value: T }>();
  return (doc, op) => {
    const last = cache.get(doc);
    if (last !== undefined && last.op === op) return last.value;
    const value = compute(doc, op);
    if (last !== undefined) {
      last.op = op;
      last.value = value;
    } else {
      cache.set(doc, { op, value });
    }
    return value;
  };
}

// ---------------------------------------------------------------------------------------------------
// Parameters

export type { ParameterView } from '../parser/model.js';

function parameterKey(p: { name: string; in: string }): string {
  // Header names are case-insensitive (RFC 9110); other names are not.
  return `${p.in}:${p.in === 'header' ? p.name.toLowerCase() : p.name}`;
}

/**
 * The operation's effective parameters, as the parser merged them (`OperationView.parameters`), or merged
 * here the same way for a view built without them.
 */
export const effectiveParameters = memo(
  (doc: ApiDocument, op: OperationView): readonly ParameterView[] =>
    op.parameters ?? operationParameters(doc, op.pathItem, op.pathItemAt, op.node, op.at),
);

/** A declared parameter by location and name (header names compared case-insensitively). */
export function findParameter(doc: ApiDocument, op: OperationView, where: string, name: string): ParameterView | undefined {
  const params = effectiveParameters(doc, op);
  for (let i = 0; i < params.length; i++) if (sameParameter(params[i]!, where, name)) return params[i];
  return undefined;
}

/**
 * Whether `parameterKey(p)` equals `parameterKey({ in: where, name })`, without joining either key when the
 * locations are equal (or differ, and neither holds the `:` that could make two joined keys collide).
 */
function sameParameter(p: ParameterView, where: string, name: string): boolean {
  if (p.in === where) return where === 'header' ? p.name.toLowerCase() === name.toLowerCase() : p.name === name;
  if (!p.in.includes(':') && !where.includes(':')) return false;
  return parameterKey(p) === parameterKey({ in: where, name });
}

/** The schema of a parameter: 3.x `schema` (or `content[*].schema`), or the 2.0 parameter itself. */
export function parameterSchema(doc: ApiDocument, p: ParameterView): Located<Record<string, unknown>> | undefined {
  if (p.node['schema'] !== undefined) {
    const target = deref(doc, p.node['schema'], lazyChild(p.valueAt, 'schema'));
    return target && isObject(target.value) ? (target as Located<Record<string, unknown>>) : undefined;
  }
  const content = p.node['content'];
  if (isObject(content)) {
    const media = Object.keys(content)[0];
    if (media !== undefined && isObject(content[media])) {
      const at = lazyChild(lazyChild(p.valueAt, 'content', media), 'schema');
      const target = deref(doc, (content[media] as Record<string, unknown>)['schema'], at);
      return target && isObject(target.value) ? (target as Located<Record<string, unknown>>) : undefined;
    }
  }
  // Swagger 2.0 non-body parameters carry type/format/maxLength/pattern on the parameter itself.
  return doc.version === '2.0' && p.in !== 'body' ? { value: p.node, at: p.valueAt } : undefined;
}

// ---------------------------------------------------------------------------------------------------
// Request body

/** The request body an operation accepts. */
export interface RequestBodyView {
  /** The media type the schema was taken from (`application/json` for a Swagger 2.0 body parameter). */
  readonly mediaType: string | undefined;
  readonly required: boolean;
  /** Where the operation names it (its `requestBody`, or the parameter entry). */
  readonly at: Location;
  /** Where the request body object (3.x) or the `in: body` parameter (2.0) is defined. */
  readonly valueAt: Location;
  /** The body schema, when one is declared. */
  readonly schema: Located<Record<string, unknown> | boolean> | undefined;
  /** Swagger 2.0 `in: formData` parameters, by name (the form's fields). */
  readonly formFields?: readonly ParameterView[];
}

function pickMediaType(content: Record<string, unknown>): string | undefined {
  const types = Object.keys(content);
  return (
    // Written exactly so (most documents): no lower-cased copy and split of it to compare.
    types.find((t) => t === 'application/json' || t.toLowerCase().split(';')[0]!.trim() === 'application/json') ??
    // `+json`, and JSON under other names: AWS's `application/x-amz-json-1.1`, `text/json`.
    types.find((t) => JSON_LIKE.test(t)) ??
    types.find((t) => FORM_LIKE.test(t)) ??
    types[0]
  );
}

// The views' regular expressions are made once: a literal in a function makes a new RegExp object each time it
// runs, and these run for every operation, response or pointer token.
const JSON_LIKE = /[/+-]json\b/i;
const FORM_LIKE = /x-www-form-urlencoded|multipart\/form-data/i;
const FORM_MEDIA_TYPE = /^\s*(application\/x-www-form-urlencoded|multipart\/form-data)\s*(;|$)/i;
const ITEM_INDEX = /^(0|[1-9]\d*)$/;
const SUCCESS_STATUS = /^2(\d\d|XX)$/i;
const XML_MEDIA_TYPE = /(^|[/+])xml$/;
const MEDIA_MEDIA_TYPE = /^(image|audio|video|font|model)\//;

/**
 * The operation's request body: 3.x `requestBody.content` (JSON preferred, then `+json`, then forms),
 * Swagger 2.0 `in: body` (or `in: formData` fields). `undefined` when the operation takes no body.
 */
export const requestBody = memo((doc: ApiDocument, op: OperationView): RequestBodyView | undefined => {
  if (op.node['requestBody'] !== undefined) {
    const usedAt = lazyChild(op.at, 'requestBody');
    const target = deref(doc, op.node['requestBody'], usedAt);
    if (!target || !isObject(target.value)) return undefined;
    const body = target.value;
    const content = body['content'];
    let schema: RequestBodyView['schema'];
    let mediaType: string | undefined;
    if (isObject(content)) {
      mediaType = pickMediaType(content);
      const media = mediaType === undefined ? undefined : content[mediaType];
      if (mediaType !== undefined && isObject(media) && media['schema'] !== undefined) {
        const schemaTarget = deref(doc, media['schema'], lazyChild(lazyChild(target.at, 'content', mediaType), 'schema'));
        if (schemaTarget && (isObject(schemaTarget.value) || typeof schemaTarget.value === 'boolean')) {
          schema = schemaTarget as Located<Record<string, unknown> | boolean>;
        }
      }
    }
    return { mediaType, required: body['required'] === true, at: usedAt, valueAt: target.at, schema };
  }
  const params = effectiveParameters(doc, op);
  const bodyParam = params.find((p) => p.in === 'body');
  if (bodyParam) {
    const schemaTarget = deref(doc, bodyParam.node['schema'], lazyChild(bodyParam.valueAt, 'schema'));
    const schema =
      schemaTarget && (isObject(schemaTarget.value) || typeof schemaTarget.value === 'boolean')
        ? { value: schemaTarget.value as Record<string, unknown> | boolean, at: schemaTarget.at }
        : undefined;
    return { mediaType: 'application/json', required: bodyParam.required, at: bodyParam.at, valueAt: bodyParam.valueAt, schema };
  }
  const formFields = params.filter((p) => p.in === 'formData');
  if (formFields.length > 0) {
    return { mediaType: 'application/x-www-form-urlencoded', required: formFields.some((f) => f.required), at: formFields[0]!.at, valueAt: formFields[0]!.valueAt, schema: undefined, formFields };
  }
  return undefined;
});

/** What a fingerprint pointer walks for a Swagger 2.0 form field: its parameter minus the parameter-only keys. */
const PARAMETER_ONLY_KEYS = new Set(['in', 'name', 'required', 'allowEmptyValue', 'collectionFormat', 'description']);

/**
 * The schema fingerprint pointers resolve against: the body schema, or for Swagger 2.0 `in: formData`
 * fields (which the guard reads as one object, field name → value) an object schema with a property per
 * field, required as the fields are. An array field is one text on the wire (`tags=a,b` for csv, the 2.0
 * default) or, for `multi`, a text or a list depending on how many values came: only the whole field
 * (`/tags`) is certain to resolve, so it is typed as text. `at` is the operation's `parameters`, so
 * messages name the operation.
 *
 * A form's bracketed field names (`metadata[order_id]`, `expand[]`, 2.0 form fields or the top-level
 * properties of a 3.x form body) are nested as the guard nests them before fingerprinting: the field is
 * `/metadata/order_id`, and `/metadata[order_id]` resolves to nothing, as it matches nothing at run time.
 */
export const fingerprintSchema = memo((doc: ApiDocument, op: OperationView): Located<Record<string, unknown> | boolean> | undefined => {
  const body = requestBody(doc, op);
  if (body?.formFields) {
    const fields = body.formFields.map((field) => ({
      name: field.name,
      required: field.required,
      schema: field.node['type'] === 'array' ? { type: 'string' } : Object.fromEntries(Object.entries(field.node).filter(([key]) => !PARAMETER_ONLY_KEYS.has(key))),
    }));
    return { value: { type: 'object', ...nestFormFields(fields) }, at: child(op.at, 'parameters') };
  }
  const schema = body?.schema;
  if (!schema || !isObject(schema.value) || !isFormMediaType(body.mediaType)) return schema;
  // The body's fields through `allOf` and `$ref`s, as the other fingerprint views read a body.
  const names = propertyNames(doc, schema.value, schema.at);
  if (!names.some((property) => bracketPath(property.name) !== undefined)) return schema;
  const required = new Set(requiredProperties(doc, schema.value, schema.at).map((property) => property.name));
  // Each field refers to where its schema is written (another file, maybe), so its own `$ref`s resolve from there.
  const fields = names.map((property) => ({ name: property.name, required: required.has(property.name), schema: { $ref: absoluteRef(property.at) } }));
  // Its own location (under the operation), not the schema's: views cache by location, and a shared schema read
  // as JSON elsewhere must not meet this nested reading of it.
  return { value: { type: 'object', ...nestFormFields(fields) }, at: child(body.valueAt, 'content', body.mediaType!, 'schema', 'x-idemkit-form-fields') };
});

/** A `$ref` that reaches `at` from any file: the file's URL and the pointer. */
function absoluteRef(at: Location): string {
  return `${pathToFileURL(at.file).href}#${at.pointer.split('/').map(encodeURIComponent).join('/')}`;
}

function isFormMediaType(mediaType: string | undefined): boolean {
  return mediaType !== undefined && FORM_MEDIA_TYPE.test(mediaType);
}

/**
 * Object-schema `properties` and `required` for form fields nested by their bracketed names:
 * `metadata[order_id]` becomes property `order_id` of an object property `metadata`, `expand[]` (or
 * `lines[0]`) the items of an array property. A required nested field makes its top-level field required.
 * A name both plain and bracketed (`a` and `a[b]`, in either order) keeps the plain value in the nested
 * object under the empty name, as the guard does.
 */
function nestFormFields(fields: readonly { readonly name: string; readonly required: boolean; readonly schema: unknown }[]): {
  properties: Record<string, unknown>;
  required: string[];
} {
  const root: Record<string, unknown> = { type: 'object', properties: {}, required: [] };
  const made = new WeakSet<object>();
  const isIndex = (token: string | undefined) => token === '' || (token !== undefined && ITEM_INDEX.test(token));
  const container = (kind: 'object' | 'array') => {
    const node: Record<string, unknown> = kind === 'object' ? { type: 'object', properties: {}, required: [] } : { type: 'array' };
    made.add(node);
    return node;
  };
  for (const field of fields) {
    const tokens = bracketPath(field.name) ?? [field.name];
    let node = root;
    for (let i = 0; i < tokens.length - 1; i++) {
      const slot = node['type'] === 'array' ? 'items' : tokens[i]!;
      const holder = (node['type'] === 'array' ? node : node['properties']) as Record<string, unknown>;
      let next: unknown = holder[slot];
      if (!isObject(next) || !made.has(next)) {
        // Nothing there yet, or a plain field of the same name (`a` beside `a[b]`, in either order): the guard
        // keeps the plain value in the nested object under the empty name.
        const created = container(isIndex(tokens[i + 1]) ? 'array' : 'object');
        if (next !== undefined) {
          if (created['type'] === 'object') (created['properties'] as Record<string, unknown>)[''] = next;
          else created['items'] = next;
        }
        holder[slot] = next = created;
      }
      if (field.required && node['type'] === 'object') addRequired(node, tokens[i]!);
      node = next as Record<string, unknown>;
    }
    const last = tokens[tokens.length - 1]!;
    if (node['type'] === 'array') {
      node['items'] ??= field.schema;
    } else {
      const properties = node['properties'] as Record<string, unknown>;
      const existing = properties[last];
      // `a` beside `a[b]`: the plain value sits in the nested object under the empty name, as the guard puts it.
      if (isObject(existing) && made.has(existing) && existing['type'] === 'object') (existing['properties'] as Record<string, unknown>)[''] = field.schema;
      else properties[last] = field.schema;
      if (field.required) addRequired(node, last);
    }
  }
  return { properties: root['properties'] as Record<string, unknown>, required: root['required'] as string[] };
}

function addRequired(node: Record<string, unknown>, name: string): void {
  const required = node['required'] as string[];
  if (!required.includes(name)) required.push(name);
}

// ---------------------------------------------------------------------------------------------------
// Responses

/** One declared response of an operation. */
export interface ResponseView {
  /** The key under `responses`: `200`, `4XX`, `default`. */
  readonly status: string;
  /** The response object (after `$ref`). */
  readonly node: Record<string, unknown>;
  /** The entry under the operation's `responses` (where a `$ref` would sit). */
  readonly at: Location;
  /** Where the response object is defined (a shared component when it was referenced): where findings about it point. */
  readonly valueAt: Location;
  /** Declared headers by lower-case name; `at` is where each header is defined. */
  readonly headers: ReadonlyMap<string, { readonly name: string; readonly at: Location }>;
}

/** Every response an operation declares (2.0 and 3.x; response and header `$ref`s followed). */
export const declaredResponses = memo((doc: ApiDocument, op: OperationView): readonly ResponseView[] => {
  const responses = op.node['responses'];
  if (!isObject(responses)) return [];
  const out: ResponseView[] = [];
  // `for…in` with an own-key check lists what Object.keys lists, in its order, without a list of the codes.
  for (const status in responses) {
    if (!Object.hasOwn(responses, status) || status.startsWith('x-')) continue;
    const usedAt = lazyChild(op.at, 'responses', status);
    const target = deref(doc, responses[status], usedAt);
    if (!target || !isObject(target.value)) continue;
    out.push(new DeclaredResponse(doc, status, target.value, usedAt, target.at));
  }
  return out;
});

/** A {@link ResponseView} whose headers are built on first read (most rules never look at them). */
class DeclaredResponse implements ResponseView {
  private built: ReadonlyMap<string, { readonly name: string; readonly at: Location }> | undefined;
  constructor(
    private readonly doc: ApiDocument,
    readonly status: string,
    readonly node: Record<string, unknown>,
    readonly at: Location,
    readonly valueAt: Location,
  ) {}

  get headers(): ReadonlyMap<string, { readonly name: string; readonly at: Location }> {
    return (this.built ??= responseHeaders(this.doc, this.node, this.valueAt));
  }
}

const responseHeadersCache = new WeakMap<ApiDocument, WeakMap<object, { at: Location; headers: ReadonlyMap<string, { readonly name: string; readonly at: Location }> }>>();

function responseHeaders(doc: ApiDocument, node: Record<string, unknown>, valueAt: Location): ReadonlyMap<string, { readonly name: string; readonly at: Location }> {
  let perDoc = responseHeadersCache.get(doc);
  if (!perDoc) {
    perDoc = new WeakMap();
    responseHeadersCache.set(doc, perDoc);
  }
  // Kept with the location it was read at (a node sits in one file): a shared response is reached through the
  // one location object its `$ref` resolves to, so most lookups compare no pointer, and build none.
  const cached = perDoc.get(node);
  if (cached && (cached.at === valueAt || (cached.at.file === valueAt.file && cached.at.pointer === valueAt.pointer))) return cached.headers;
  const headers = new Map<string, { name: string; at: Location }>();
  const declared = node['headers'];
  if (isObject(declared)) {
    const names = Object.keys(declared);
    for (let i = 0; i < names.length; i++) {
      const name = names[i]!;
      const headerAt = lazyChild(valueAt, 'headers', name);
      const header = deref(doc, declared[name], headerAt);
      headers.set(name.toLowerCase(), { name, at: header ? header.at : headerAt });
    }
  }
  perDoc.set(node, { at: valueAt, headers });
  return headers;
}

/**
 * The response that documents `status`: the exact code, else its range (`4XX`). `default` does not
 * count: it documents "anything else", not this state's answer.
 */
export function findResponse(doc: ApiDocument, op: OperationView, status: number): ResponseView | undefined {
  // Plain loops: rules ask this for every state of every contract, in code a cold process runs unoptimised.
  const all = declaredResponses(doc, op);
  const code = String(status);
  for (let i = 0; i < all.length; i++) if (all[i]!.status === code) return all[i];
  const range = `${code[0]}XX`;
  for (let i = 0; i < all.length; i++) if (all[i]!.status.toUpperCase() === range) return all[i];
  return undefined;
}

/** The declared success responses (`2xx` codes and the `2XX` range). */
export const successResponses = memo((doc: ApiDocument, op: OperationView): readonly ResponseView[] => {
  // Two rules ask it of the current operation; a loop, and a list made at its size on the first success.
  const all = declaredResponses(doc, op);
  let out: ResponseView[] | undefined;
  for (let i = 0; i < all.length; i++) {
    if (!SUCCESS_STATUS.test(all[i]!.status)) continue;
    if (out === undefined) out = [all[i]!];
    else out.push(all[i]!);
  }
  return out ?? [];
});

/** The body schema of a response: 3.x `content` (JSON preferred), 2.0 `schema`. */
export function responseSchema(doc: ApiDocument, response: ResponseView): Located<Record<string, unknown>> | undefined {
  let raw: unknown;
  let at: Location;
  const content = response.node['content'];
  if (isObject(content)) {
    const media = pickMediaType(content);
    if (media === undefined || !isObject(content[media])) return undefined;
    raw = (content[media] as Record<string, unknown>)['schema'];
    at = lazyChild(lazyChild(response.valueAt, 'content', media), 'schema');
  } else {
    raw = response.node['schema'];
    at = lazyChild(response.valueAt, 'schema');
  }
  if (raw === undefined) return undefined;
  const target = deref(doc, raw, at);
  return target && isObject(target.value) ? (target as Located<Record<string, unknown>>) : undefined;
}

// ---------------------------------------------------------------------------------------------------
// Security

/** The security requirements that apply to an operation. */
export interface SecurityView {
  /** Where they come from: the operation's own `security`, the document's, or nowhere. */
  readonly source: 'operation' | 'document' | 'none';
  /** The `security` array that applies (`undefined` when none does). */
  readonly at: Location | undefined;
  /** The requirement objects (alternatives). */
  readonly requirements: readonly Record<string, unknown>[];
  /** At least one alternative names a scheme: requests are authenticated. */
  readonly secured: boolean;
  /** One alternative is `{}`: an anonymous request is also accepted. */
  readonly anonymousAllowed: boolean;
}

/** The effective security of an operation: its own `security` (even `[]`) wins over the document's. */
export const effectiveSecurity = memo((doc: ApiDocument, op: OperationView): SecurityView => {
  if (Array.isArray(op.node['security'])) return securityView('operation', op.node['security'], child(op.at, 'security'));
  const list = doc.root['security'];
  // The document's security, for every operation without its own: read once per document (per list).
  const cached = documentSecurityCache.get(doc);
  if (cached !== undefined && cached.list === list) return cached.view;
  const view = Array.isArray(list) ? securityView('document', list, { file: doc.file, pointer: '/security' }) : securityView('none', undefined, undefined);
  documentSecurityCache.set(doc, { list, view });
  return view;
});

const documentSecurityCache = new WeakMap<ApiDocument, { readonly list: unknown; readonly view: SecurityView }>();

function securityView(source: SecurityView['source'], list: unknown[] | undefined, at: Location | undefined): SecurityView {
  const requirements = Array.isArray(list) ? list.filter(isObject) : [];
  return {
    source,
    at,
    requirements,
    secured: requirements.some((r) => Object.keys(r).length > 0),
    anonymousAllowed: requirements.some((r) => Object.keys(r).length === 0),
  };
}

/**
 * An API key security scheme that applies to the operation (named in one of its effective requirements)
 * and sends its key in the `where` (`header`, `query`) parameter `name` (header names case-insensitive):
 * such a parameter is declared, by the scheme, even when no parameter lists it.
 */
export function securityParameter(doc: ApiDocument, op: OperationView, where: string, name: string): Located<Record<string, unknown>> | undefined {
  const components = doc.root['components'];
  const definitions = doc.version === '2.0' ? doc.root['securityDefinitions'] : isObject(components) ? components['securitySchemes'] : undefined;
  if (!isObject(definitions)) return undefined;
  const definitionsAt: Location = { file: doc.file, pointer: doc.version === '2.0' ? '/securityDefinitions' : '/components/securitySchemes' };
  const wanted = where === 'header' ? name.toLowerCase() : name;
  for (const requirement of effectiveSecurity(doc, op).requirements) {
    for (const schemeName of Object.keys(requirement)) {
      if (!Object.hasOwn(definitions, schemeName)) continue;
      const scheme = deref(doc, definitions[schemeName], child(definitionsAt, schemeName));
      if (!scheme || !isObject(scheme.value) || scheme.value['type'] !== 'apiKey' || scheme.value['in'] !== where) continue;
      const keyName = scheme.value['name'];
      if (typeof keyName === 'string' && (where === 'header' ? keyName.toLowerCase() : keyName) === wanted) return { value: scheme.value, at: scheme.at };
    }
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------------
// Schemas

const MAX_SCHEMA_DEPTH = 64;

/** The keywords whose branches a value matches one or more of. */
const BRANCH_KEYWORDS = ['oneOf', 'anyOf'] as const;

/** The keywords that compose a schema of others, in the order {@link schemaAlternatives} follows them. */
const COMPOSITION_KEYWORDS = ['allOf', ...BRANCH_KEYWORDS] as const;

/**
 * A schema and every schema it is composed of (`allOf`, `oneOf`, `anyOf`, `$ref` followed), each with
 * its location. Cycles and broken references are skipped.
 */
export function schemaAlternatives(doc: ApiDocument, schema: unknown, at: Location, withSubtypes = false): Located<Record<string, unknown>>[] {
  // A schema composed of no others (most of them): itself, without the walk's set of locations seen.
  const single = deref(doc, schema, at);
  if (!single || !isObject(single.value)) return [];
  if (!composed(single.value) && !(withSubtypes && single.value['discriminator'] !== undefined)) return [single as Located<Record<string, unknown>>];
  const out: Located<Record<string, unknown>>[] = [];
  const seen = new Set<string>();
  // A YAML alias is one object at many places: `&a1 {allOf: [*a0, *a0]}` twenty levels deep is 2^20 paths to the
  // same few nodes (a 1.5 KB document held lint 17 s and 800 MB). Each object is walked once, at its first place.
  const walked = new Set<object>();
  const visit = (value: unknown, where: Location, depth: number): void => {
    if (depth > MAX_SCHEMA_DEPTH) return;
    const target = deref(doc, value, where);
    if (!target || !isObject(target.value)) return;
    const id = `${target.at.file}#${target.at.pointer}`;
    if (seen.has(id) || walked.has(target.value)) return;
    seen.add(id);
    walked.add(target.value);
    const node = target.value;
    out.push({ value: node, at: target.at });
    for (let k = 0; k < COMPOSITION_KEYWORDS.length; k++) {
      const keyword = COMPOSITION_KEYWORDS[k]!;
      const members = node[keyword];
      if (Array.isArray(members)) members.forEach((m, i) => visit(m, lazyChild(target.at, keyword, i), depth + 1));
    }
    if (withSubtypes && node['discriminator'] !== undefined) {
      for (const subtype of discriminatorSubtypes(doc, node, target.at)) visit(subtype.value, subtype.at, depth + 1);
    }
  };
  visit(schema, at, 0);
  return out;
}

/** Whether a schema names others to be composed of (`allOf`, `oneOf`, `anyOf` lists). */
function composed(node: Record<string, unknown>): boolean {
  for (let k = 0; k < COMPOSITION_KEYWORDS.length; k++) if (Array.isArray(node[COMPOSITION_KEYWORDS[k]!])) return true;
  return false;
}

/**
 * The schemas a polymorphic base (one with a `discriminator`) stands for: those its 3.x
 * `discriminator.mapping` names, and the named schemas (`definitions`, `components.schemas`) that extend
 * it through `allOf` — the Swagger 2.0 way, and 3.x without a mapping. A body typed as the base may be any
 * of them, so a pointer at a subtype's property is a real field.
 */
function discriminatorSubtypes(doc: ApiDocument, base: Record<string, unknown>, at: Location): Located<unknown>[] {
  const out: Located<unknown>[] = [];
  const discriminator = base['discriminator'];
  const mapping = isObject(discriminator) ? discriminator['mapping'] : undefined;
  if (isObject(mapping)) {
    for (const [value, target] of Object.entries(mapping)) {
      if (typeof target !== 'string') continue;
      const ref = target.includes('#') || target.includes('/') ? target : `#/components/schemas/${target}`;
      out.push({ value: { $ref: ref }, at: child(at, 'discriminator', 'mapping', value) });
    }
  }
  out.push(...(extendersIndex(doc).get(`${at.file}#${at.pointer}`) ?? []));
  return out;
}

const extendersCache = new WeakMap<ApiDocument, ReadonlyMap<string, readonly Located<unknown>[]>>();

/** Named schemas of the entry file by the location of each schema their `allOf` references. */
function extendersIndex(doc: ApiDocument): ReadonlyMap<string, readonly Located<unknown>[]> {
  let index = extendersCache.get(doc);
  if (index) return index;
  const built = new Map<string, Located<unknown>[]>();
  const components = isObject(doc.root['components']) ? doc.root['components']['schemas'] : undefined;
  for (const [container, pointer] of [
    [doc.root['definitions'], '/definitions'],
    [components, '/components/schemas'],
  ] as const) {
    if (!isObject(container)) continue;
    for (const name of Object.keys(container)) {
      const schema = container[name];
      if (!isObject(schema) || !Array.isArray(schema['allOf'])) continue;
      const at: Location = { file: doc.file, pointer: appendPointer(pointer, name) };
      schema['allOf'].forEach((member, i) => {
        if (!isObject(member) || typeof member['$ref'] !== 'string') return;
        const target = deref(doc, member, child(at, 'allOf', i));
        if (!target) return;
        const key = `${target.at.file}#${target.at.pointer}`;
        const list = built.get(key);
        if (list) list.push({ value: schema, at });
        else built.set(key, [{ value: schema, at }]);
      });
    }
  }
  index = built;
  extendersCache.set(doc, index);
  return index;
}

/** Whether a schema has a `type` (a name, or a 3.1 list of names). */
function hasType(schema: Record<string, unknown>): boolean {
  const type = schema['type'];
  return typeof type === 'string' || Array.isArray(type);
}

/**
 * Whether a schema's `type` names `kind` (it is the name, or a list holding it). Read in place, no list of
 * names built: the pointer views ask this several times of every schema they pass.
 */
function typeNames(schema: Record<string, unknown>, kind: string): boolean {
  const type = schema['type'];
  if (typeof type === 'string') return type === kind;
  if (Array.isArray(type)) {
    for (let i = 0; i < type.length; i++) if (type[i] === kind) return true;
  }
  return false;
}

function mayBe(schema: Record<string, unknown>, kind: 'object' | 'array'): boolean {
  if (!hasType(schema)) {
    // No `type`: infer from the keywords it uses; a keyword-free schema accepts anything.
    if (kind === 'object') return !('items' in schema || 'prefixItems' in schema);
    return !('properties' in schema || 'additionalProperties' in schema);
  }
  return typeNames(schema, kind);
}

/** A `$ref` object: `doc.deref` returns anything else as it is. */
function isReference(value: unknown): boolean {
  return isObject(value) && typeof value['$ref'] === 'string';
}

/** How a JSON Pointer into a body resolved against the body's schema. */
export type PointerResolution =
  | {
      readonly ok: true;
      /** The schema the pointer lands on, and where it is written. */
      readonly schema: Located<unknown> | undefined;
      /** The pointer ran into a free-form object (a map), so any name below it may exist. */
      readonly open: boolean;
    }
  | {
      readonly ok: false;
      /** Index of the first token that does not resolve. */
      readonly failedToken: number;
      /** The pointer prefix that still resolved (`''` for the body itself). */
      readonly resolvedPrefix: string;
      /**
       * Why: `no-property` (the object has no such property), `not-container` (the value is a scalar) or
       * `not-index` (the value is an array and the token is not an item index).
       */
      readonly reason: 'no-property' | 'not-container' | 'not-index' | 'not-pointer';
      /** Property names the object at the prefix declares (for a "did you mean" hint). */
      readonly known: readonly string[];
    };

/**
 * Resolves a JSON Pointer into request data against the data's schema, following `$ref`, `allOf`,
 * `oneOf`/`anyOf` (a property of any branch counts), 3.1 type arrays and `nullable`, array `items`
 * (numeric tokens and `-`), 3.1 `prefixItems`, `additionalProperties` and `patternProperties`.
 */
export function resolveSchemaPointer(doc: ApiDocument, schema: unknown, at: Location, pointer: string): PointerResolution {
  // Request bodies share schemas through `$ref`: resolve each (schema, pointer) pair once per document.
  let perDoc = resolutionCache.get(doc);
  if (!perDoc) {
    perDoc = { byNode: new Map(), byKey: new Map() };
    resolutionCache.set(doc, perDoc);
  }
  // By the schema object and the location it was first read at (no pointer joined: most body schemas are written
  // in place, under their operation, and are never named in a finding); at another location (a YAML alias), by
  // the location's pointer.
  if (schema !== null && typeof schema === 'object') {
    const known = perDoc.byNode.get(schema);
    if (known === undefined) {
      const result = resolveUncached(doc, schema, at, pointer);
      perDoc.byNode.set(schema, { at, pointer, result, more: undefined });
      return result;
    }
    if (sameLocation(known.at, at)) {
      // The first pointer asked is kept beside the location; a map holds the others, made for a second one.
      if (known.pointer === pointer) return known.result;
      let result = known.more?.get(pointer);
      if (result === undefined) {
        result = resolveUncached(doc, schema, at, pointer);
        (known.more ??= new Map()).set(pointer, result);
      }
      return result;
    }
  }
  const key = `${at.file}#${at.pointer}\u0000${pointer}`;
  let result = perDoc.byKey.get(key);
  if (!result) {
    result = resolveUncached(doc, schema, at, pointer);
    perDoc.byKey.set(key, result);
  }
  return result;
}

const resolutionCache = new WeakMap<
  ApiDocument,
  {
    readonly byNode: Map<object, { readonly at: Location; readonly pointer: string; readonly result: PointerResolution; more: Map<string, PointerResolution> | undefined }>;
    readonly byKey: Map<string, PointerResolution>;
  }
>();

/** Whether two locations are one: the same object (a `$ref`'s cached target), or the same file and pointer. */
function sameLocation(a: Location, b: Location): boolean {
  return a === b || (a.file === b.file && a.pointer === b.pointer);
}

function resolveUncached(doc: ApiDocument, schema: unknown, at: Location, pointer: string): PointerResolution {
  const tokens = parsePointer(pointer);
  if (tokens === undefined) return { ok: false, failedToken: -1, resolvedPrefix: '', reason: 'not-pointer', known: [] };
  let current: Located<unknown>[] = [{ value: schema, at }];
  let prefix = '';
  for (let i = 0; i < tokens.length; i += 1) {
    const token = tokens[i]!;
    // Lists made on their first entry, at their size (an empty list grows to 17 slots on its first push): most
    // tokens land on one schema. The declared names only matter when the token does not resolve: their objects
    // are kept (the first one without a list), and read then.
    let next: Located<unknown>[] | undefined;
    let declaredFirst: Record<string, unknown> | undefined;
    let declaredMore: Record<string, unknown>[] | undefined;
    let container = false;
    let open = false;
    let array = false;
    for (let c = 0; c < current.length; c++) {
      const candidate = current[c]!;
      // `true` (or a reference to it) is the schema that accepts anything.
      if (candidate.value === true || (isReference(candidate.value) && deref(doc, candidate.value, candidate.at)?.value === true)) {
        open = true;
        continue;
      }
      const alternatives = schemaAlternatives(doc, candidate.value, candidate.at, true);
      // Plain loops over the alternatives, no filtered lists or closures: this runs for every token of every
      // fingerprint pointer. Objects are read first, then arrays, each in the alternatives' order.
      let objects = 0;
      let arrays = 0;
      let arrayItems = false;
      let typed = false;
      let containerTyped = false;
      for (let k = 0; k < alternatives.length; k++) {
        const alternative = alternatives[k]!.value;
        if (mayBe(alternative, 'object')) objects += 1;
        if (mayBe(alternative, 'array')) {
          arrays += 1;
          if ('items' in alternative) arrayItems = true;
        }
        if (hasType(alternative)) typed = true;
        if (typeNames(alternative, 'object') || typeNames(alternative, 'array')) containerTyped = true;
      }
      if (arrays > 0) array = true;
      if (alternatives.length > 0 && typed && !containerTyped) {
        continue; // only scalar types here
      }
      let declaresShape = false;
      for (let k = 0; k < alternatives.length; k++) {
        const o = alternatives[k]!;
        if (!mayBe(o.value, 'object')) continue;
        const props = o.value['properties'];
        if (isObject(props)) {
          declaresShape = true;
          if (declaredFirst === undefined) declaredFirst = props;
          else (declaredMore ??= []).push(props);
          if (Object.hasOwn(props, token)) {
            container = true;
            const found = { value: props[token], at: lazyChild(o.at, 'properties', token) };
            if (next === undefined) next = [found];
            else next.push(found);
          }
        }
        const patterns = o.value['patternProperties'];
        if (isObject(patterns)) {
          declaresShape = true;
          for (const [source, sub] of Object.entries(patterns)) {
            let matches = false;
            // The pattern is the document's: one that may backtrack for long on this token (exponential, not known, or a
            // high power of its length) is not run — a hostile spec must not hang a lint in CI — and is taken to match (the pointer
            // may be declared by it: no finding rests on a pattern not run).
            if (!quickToRun(source, token.length, true)) matches = true;
            else {
              try {
                matches = new RegExp(source, 'u').test(token);
              } catch {
                matches = false;
              }
            }
            if (matches) {
              container = true;
              (next ??= []).push({ value: sub, at: lazyChild(o.at, 'patternProperties', source) });
            }
          }
        }
        const extra = o.value['additionalProperties'];
        if (extra === false) declaresShape = true;
        else if (isObject(extra) && Object.keys(extra).length > 0) {
          declaresShape = true;
          container = true;
          (next ??= []).push({ value: extra, at: lazyChild(o.at, 'additionalProperties') });
        }
      }
      if (objects > 0 && !declaresShape && !arrayItems) {
        // A free-form object (a map): any member name may exist below it.
        open = true;
      }
      // `-` is not an index: in a JSON Pointer it names the slot after the last item, which never holds a value.
      if (arrays > 0 && ITEM_INDEX.test(token)) {
        for (let k = 0; k < alternatives.length; k++) {
          const a = alternatives[k]!;
          if (!mayBe(a.value, 'array')) continue;
          const prefixItems = a.value['prefixItems'];
          if (Array.isArray(prefixItems) && Number(token) < prefixItems.length) {
            container = true;
            (next ??= []).push({ value: prefixItems[Number(token)], at: lazyChild(a.at, 'prefixItems', Number(token)) });
          } else if (a.value['items'] !== undefined && typeof a.value['items'] !== 'boolean') {
            container = true;
            (next ??= []).push({ value: a.value['items'], at: lazyChild(a.at, 'items') });
          } else if (!('items' in a.value)) {
            open = true;
          }
        }
      }
    }
    if (open && next === undefined) return { ok: true, schema: undefined, open: true };
    if (next === undefined) {
      const known = new Set<string>();
      if (declaredFirst !== undefined) for (const name of Object.keys(declaredFirst)) known.add(name);
      if (declaredMore !== undefined) for (const props of declaredMore) for (const name of Object.keys(props)) known.add(name);
      return {
        ok: false,
        failedToken: i,
        resolvedPrefix: prefix,
        reason: known.size > 0 || container ? 'no-property' : array ? 'not-index' : 'not-container',
        known: [...known].sort(),
      };
    }
    current = next;
    prefix += `/${escapePointerToken(token)}`;
  }
  const first = current[0];
  return { ok: true, schema: first ? (deref(doc, first.value, first.at) ?? first) : undefined, open: false };
}

/** A per-document cache keyed by a schema's location (schemas are shared through `$ref`s). */
function schemaMemo<T>(compute: (doc: ApiDocument, schema: unknown, at: Location) => T): (doc: ApiDocument, schema: unknown, at: Location) => T {
  const cache = new WeakMap<ApiDocument, { readonly byNode: Map<object, { readonly at: Location; readonly value: T }>; readonly byKey: Map<string, T> }>();
  return (doc, schema, at) => {
    const target = deref(doc, schema, at);
    if (!target) return compute(doc, schema, at);
    let perDoc = cache.get(doc);
    if (!perDoc) {
      perDoc = { byNode: new Map(), byKey: new Map() };
      cache.set(doc, perDoc);
    }
    // By the schema object and the location it was first read at, as resolveSchemaPointer caches; at another
    // location, by its pointer.
    const node = target.value;
    if (node !== null && typeof node === 'object') {
      const known = perDoc.byNode.get(node);
      if (known === undefined) {
        const value = compute(doc, node, target.at);
        perDoc.byNode.set(node, { at: target.at, value });
        return value;
      }
      if (sameLocation(known.at, target.at)) return known.value;
    }
    const key = `${target.at.file}#${target.at.pointer}`;
    if (perDoc.byKey.has(key)) return perDoc.byKey.get(key) as T;
    const result = compute(doc, target.value, target.at);
    perDoc.byKey.set(key, result);
    return result;
  };
}

/** The required top-level properties of an object schema (through `allOf`; `oneOf`/`anyOf`: required in every branch). */
export const requiredProperties = schemaMemo((doc: ApiDocument, schema: unknown, at: Location): readonly { readonly name: string; readonly at: Location }[] => {
  // Each schema object's names, once: a `$ref` reached twice, or a YAML alias — one object at many places, which
  // `&a1 {allOf: [*a0, *a0]}` twenty levels deep makes 2^20 paths to (a 1.5 KB document held lint for minutes) —
  // is walked once. A cycle meets its own map while it is still being filled.
  const walked = new Map<object, Map<string, Location>>();
  const collect = (value: unknown, where: Location, depth: number): Map<string, Location> => {
    if (depth > MAX_SCHEMA_DEPTH) return new Map<string, Location>();
    const target = deref(doc, value, where);
    if (!target || !isObject(target.value)) return new Map<string, Location>();
    const known = walked.get(target.value);
    if (known !== undefined) return known;
    const result = new Map<string, Location>();
    walked.set(target.value, result);
    const node = target.value;
    if (Array.isArray(node['required'])) {
      node['required'].forEach((name, i) => {
        if (typeof name === 'string' && !result.has(name)) result.set(name, lazyChild(target.at, 'required', i));
      });
    }
    if (Array.isArray(node['allOf'])) {
      node['allOf'].forEach((m, i) => {
        collect(m, lazyChild(target.at, 'allOf', i), depth + 1).forEach((loc, name) => {
          if (!result.has(name)) result.set(name, loc);
        });
      });
    }
    for (let k = 0; k < BRANCH_KEYWORDS.length; k++) {
      const keyword = BRANCH_KEYWORDS[k]!;
      const branches = node[keyword];
      if (!Array.isArray(branches) || branches.length === 0) continue;
      const perBranch = branches.map((m, i) => collect(m, lazyChild(target.at, keyword, i), depth + 1));
      perBranch[0]!.forEach((loc, name) => {
        if (perBranch.every((b) => b.has(name)) && !result.has(name)) result.set(name, loc);
      });
    }
    return result;
  };
  return namedLocations(collect(schema, at, 0));
});

/** The top-level property names of an object schema (through `$ref`, `allOf`, `oneOf`, `anyOf`). */
export const propertyNames = schemaMemo((doc: ApiDocument, schema: unknown, at: Location): readonly { readonly name: string; readonly at: Location }[] => {
  const out = new Map<string, Location>();
  const alternatives = schemaAlternatives(doc, schema, at);
  for (let a = 0; a < alternatives.length; a++) {
    const alt = alternatives[a]!;
    const props = alt.value['properties'];
    if (!isObject(props)) continue;
    const names = Object.keys(props);
    for (let i = 0; i < names.length; i++) if (!out.has(names[i]!)) out.set(names[i]!, child(alt.at, 'properties', names[i]!));
  }
  return namedLocations(out);
});

/** A name → location map as a list, in the map's order. */
function namedLocations(map: ReadonlyMap<string, Location>): { readonly name: string; readonly at: Location }[] {
  const out: { readonly name: string; readonly at: Location }[] = [];
  // forEach, not for…of: no iterator result per entry in the unoptimised code of a cold process.
  map.forEach((at, name) => out.push({ name, at }));
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Operations

const operationIndexCache = new WeakMap<ApiDocument, ReadonlyMap<string, OperationView>>();

/** Operations by operationId (the first one wins when an id repeats). */
export function operationIndex(doc: ApiDocument): ReadonlyMap<string, OperationView> {
  let index = operationIndexCache.get(doc);
  if (!index) {
    const map = new Map<string, OperationView>();
    for (const op of doc.operations) if (op.operationId !== undefined && !map.has(op.operationId)) map.set(op.operationId, op);
    index = map;
    operationIndexCache.set(doc, index);
  }
  return index;
}

/** Where an operation declares the contract's key: a header or query parameter, or a field of the body schema. */
export interface KeyDeclaration {
  /** Whether the document declares it (a body field under a free-form object counts). */
  readonly found: boolean;
  /** The parameter's `required`, or whether the body field's object lists it as required; undefined when unknown. */
  readonly required: boolean | undefined;
  /** Where `required` is written (or would be): the parameter, or the object schema that holds the field. */
  readonly requiredAt: Location | undefined;
  /** The key's schema, when declared with one. */
  readonly schema: Located<Record<string, unknown>> | undefined;
  /** For a body field inside an optional object (`/options/idempotencyKey`): that object's member name (`options`). */
  readonly optionalOuter?: string;
  /** The name as declared (a header parameter's letter case), or the contract's pointer for a body field. */
  readonly name: string;
  /** The declaration for messages: "the header parameter `Idempotency-Key`", "the body field `/ClientToken`". */
  readonly label: string;
  /**
   * For a body key, the body's media type when the guard cannot read fields from it (`text/xml`): it reads a key
   * from a JSON body or a form's fields only.
   */
  readonly unreadableMedia?: string;
}

/**
 * Whether the guard may read fields from a body of this media type: anything but XML, raw bytes and media. The
 * adapters parse JSON whatever it is called (`application/x-amz-json-1.1`, `text/json`, `*\/*`, JSON sent as
 * `text/plain`) and forms; a `text/xml` body (EC2's `ClientToken`) has no fields they can read.
 */
export function readsBodyFields(mediaType: string): boolean {
  if (mediaType === 'application/json') return true; // most bodies: no copies to compare
  const type = mediaType.split(';')[0]!.trim().toLowerCase();
  return !(XML_MEDIA_TYPE.test(type) || type === 'application/octet-stream' || MEDIA_MEDIA_TYPE.test(type));
}

/** How the operation declares the key of `key` (see {@link KeyDeclaration}). */
export function keyDeclaration(doc: ApiDocument, op: OperationView, key: KeyPlace): KeyDeclaration {
  // Two rules (key-header-undeclared, key-unbounded) ask it of the current operation's contract key: once each
  // (kept for the operation and key last asked only, as the per-operation views are).
  const last = keyDeclarationCache.get(doc);
  if (last !== undefined && last.op === op && last.key === key) return last.declaration;
  const declaration = declareKey(doc, op, key);
  if (last !== undefined) {
    last.op = op;
    last.key = key;
    last.declaration = declaration;
  } else {
    keyDeclarationCache.set(doc, { op, key, declaration });
  }
  return declaration;
}

const keyDeclarationCache = new WeakMap<ApiDocument, { op: OperationView; key: KeyPlace; declaration: KeyDeclaration }>();

function declareKey(doc: ApiDocument, op: OperationView, key: KeyPlace): KeyDeclaration {
  if (key.in !== 'body') {
    const param = findParameter(doc, op, key.in, key.name);
    const name = param?.name ?? key.name;
    const label = `the ${key.in} parameter \`${name}\``;
    if (!param) return { found: false, required: undefined, requiredAt: undefined, schema: undefined, name, label };
    const requiredAt = param.node['required'] !== undefined ? lazyChild(param.valueAt, 'required') : param.valueAt;
    return { found: true, required: param.required, requiredAt, schema: parameterSchema(doc, param), name, label };
  }
  const name = key.name;
  const label = `the body field \`${name}\``;
  const none: KeyDeclaration = { found: false, required: undefined, requiredAt: undefined, schema: undefined, name, label };
  const media = requestBody(doc, op)?.mediaType;
  if (media !== undefined && !readsBodyFields(media)) return { ...none, unreadableMedia: media };
  const body = fingerprintSchema(doc, op);
  const tokens = parsePointer(key.name);
  if (!body || tokens === undefined || tokens.length === 0) return none;
  const field = resolveSchemaPointer(doc, body.value, body.at, key.name);
  if (!field.ok) return none;
  const schema = field.schema && isObject(field.schema.value) ? (field.schema as Located<Record<string, unknown>>) : undefined;
  // A field inside an optional object (`/options/idempotencyKey`, `options` not required) can be left out with it.
  for (let depth = 0; depth < tokens.length - 1; depth += 1) {
    const outerPointer = tokens.slice(0, depth).map(escapePointerToken).map((token) => `/${token}`).join('');
    const outer = outerPointer === '' ? { ok: true as const, schema: body as Located<unknown> } : resolveSchemaPointer(doc, body.value, body.at, outerPointer);
    const object = outer.ok && outer.schema ? deref(doc, outer.schema.value, outer.schema.at) : undefined;
    if (!object || !isObject(object.value) || !isObject(object.value['properties']) || !Object.hasOwn(object.value['properties'], tokens[depth]!)) continue;
    if (requiredProperties(doc, object.value, object.at).some((property) => property.name === tokens[depth])) continue;
    const list = object.value['required'];
    return { found: true, required: false, requiredAt: Array.isArray(list) ? lazyChild(object.at, 'required') : object.at, schema, name, label, optionalOuter: tokens[depth]! };
  }
  // `required` lives on the object that holds the field: read it when that object is one plain schema.
  const parentPointer = tokens.slice(0, -1).map(escapePointerToken).map((token) => `/${token}`).join('');
  const parent = parentPointer === '' ? { ok: true as const, schema: body as Located<unknown> } : resolveSchemaPointer(doc, body.value, body.at, parentPointer);
  const holder = parent.ok && parent.schema ? deref(doc, parent.schema.value, parent.schema.at) : undefined;
  if (!holder || !isObject(holder.value) || field.open) return { found: true, required: undefined, requiredAt: undefined, schema, name, label };
  // Listed at the object itself or in one of its `allOf` branches (`{allOf: [Tokened, …]}` with `required` in Tokened).
  const fieldName = tokens[tokens.length - 1]!;
  const required = requiredProperties(doc, holder.value, holder.at).some((property) => property.name === fieldName);
  const list = holder.value['required'];
  return { found: true, required, requiredAt: Array.isArray(list) ? lazyChild(holder.at, 'required') : holder.at, schema, name, label };
}

/** A safe read: `GET` (or `HEAD`), which has no effect to repeat. */
export function isSafeRead(op: OperationView): boolean {
  return op.method === 'get' || op.method === 'head';
}

/** Whether an HTTP method (lower case) is safe (RFC 9110 §9.2.1): a repeat of it has no effect to guard. */
export function isSafeMethod(method: string): boolean {
  return method === 'get' || method === 'head' || method === 'options' || method === 'trace';
}

/** Whether an operation's method counts as unsafe under the settings (default `post`, `patch`). */
export function isUnsafe(op: OperationView, unsafeMethods: readonly string[]): boolean {
  // A loop, not `some` with a closure: the engine and two rules ask this for every operation.
  for (let i = 0; i < unsafeMethods.length; i++) {
    // Settings from code, not the checked config, may hold holes or non-strings: they name no method.
    const method = unsafeMethods[i];
    // Lower-cased only when it may match: written as the method is, or as long (a mapping that changes a name's
    // length leaves a non-ASCII letter, which no method has).
    if (typeof method === 'string' && (method === op.method || (method.length === op.method.length && method.toLowerCase() === op.method))) return true;
  }
  return false;
}

/** Formats milliseconds as an ISO 8601 duration (`PT1M30S`, `P1D`) for messages. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return String(ms);
  let rest = Math.round(ms);
  const days = Math.floor(rest / 86_400_000);
  rest -= days * 86_400_000;
  const hours = Math.floor(rest / 3_600_000);
  rest -= hours * 3_600_000;
  const minutes = Math.floor(rest / 60_000);
  rest -= minutes * 60_000;
  const seconds = rest / 1000;
  let time = '';
  if (hours) time += `${hours}H`;
  if (minutes) time += `${minutes}M`;
  if (seconds) time += `${seconds}S`;
  if (!days && !time) return 'PT0S';
  return `P${days ? `${days}D` : ''}${time ? `T${time}` : ''}`;
}

/** The closest candidate to `name` (edit distance ≤ a third of its length), for "did you mean" hints. */
export function closest(name: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(name.length / 3)) + 1;
  const lower = name.toLowerCase();
  for (const candidate of candidates) {
    if (Math.abs(candidate.length - name.length) >= bestDistance) continue;
    const d = editDistance(lower, candidate.toLowerCase(), bestDistance);
    if (d < bestDistance) {
      bestDistance = d;
      best = candidate;
    }
  }
  return best;
}

function editDistance(a: string, b: string, limit: number): number {
  // Two rows, swapped after each character of `a` (not a new row per character): a document with many unknown
  // names asks this of every candidate for each of them.
  let prev = new Array<number>(b.length + 1);
  let row = new Array<number>(b.length + 1);
  for (let j = 0; j <= b.length; j += 1) prev[j] = j;
  for (let i = 1; i <= a.length; i += 1) {
    row[0] = i;
    let rowMin = i;
    const code = a.charCodeAt(i - 1);
    for (let j = 1; j <= b.length; j += 1) {
      const value = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (code === b.charCodeAt(j - 1) ? 0 : 1));
      row[j] = value;
      rowMin = Math.min(rowMin, value);
    }
    if (rowMin >= limit) return limit;
    const done = prev;
    prev = row;
    row = done;
  }
  return prev[b.length]!;
}

// ---------------------------------------------------------------------------------------------------
// Evidence that an operation takes an idempotency key or is retried

export { KNOWN_KEY_HEADERS } from '../parser/key-headers.js';

/** Body or query field names real APIs use for an idempotency key, normalised (lower case, no `_`/`-`). */
export const KNOWN_KEY_FIELDS: readonly string[] = [
  'idempotencykey',
  'idempotencytoken',
  'idempotencyid',
  'clienttoken',
  'clientrequesttoken',
  'requestid',
];

/**
 * Names that as often name some other request (`request_id` of the verification to check, of the sign-in
 * behind a risk event): they count only when their description speaks of retries or duplicates.
 */
const AMBIGUOUS_KEY_FIELDS: readonly string[] = ['requestid'];

/** What a description says when a field de-duplicates retried requests. */
const RETRY_WORDS =
  /idempot|\bretr(?:y|ies|ied|ying)\b|duplicat|de-?dup|replay|(?:only|exactly|at most) once|same request|already (?:been )?(?:completed|processed)|same (?:request[ _-]?)?id\b|request (?:will be |is )ignored|(?:runs?|executed|processed|applied|created) (?:more than once|multiple times|twice)|only the first|instead of creating/i;

function normaliseField(name: string): string {
  return name.toLowerCase().replace(/[-_\s]/g, '');
}

/** Whether a header name carries an idempotency key (known names, any `*idempotenc*`, plus `extra`). */
export function isKeyHeaderName(name: string, extra: readonly string[] = []): boolean {
  // `X-Request-Id` names one delivery, not one intent: it is deliberately not a key header.
  return isKnownKeyHeader(name) || extra.some((h) => h.toLowerCase() === name.toLowerCase());
}

/** The first letters of {@link KNOWN_KEY_FIELDS}, as character codes. */
const KEY_FIELD_INITIALS = new Set(KNOWN_KEY_FIELDS.map((name) => name.charCodeAt(0)));

/** Whether a body/query field name may carry an idempotency key (see {@link isKeyField} for the whole test). */
export function isKeyFieldName(name: string): boolean {
  // A name that starts with an ASCII letter keeps it first, lower-cased, once normalised: one that no known
  // name starts with is not one, without normalising it (most body properties of a big document).
  const initial = name.charCodeAt(0) | 0x20;
  if (initial >= 0x61 && initial <= 0x7a && !KEY_FIELD_INITIALS.has(initial)) return false;
  return KNOWN_KEY_FIELDS.includes(normaliseField(name));
}

/**
 * Whether a body property or query parameter carries an idempotency key: a key name, not read-only (the
 * server's output, like a session's `client_token`), not deprecated (the API moved the key elsewhere), and
 * for an ambiguous name (`request_id`) a description that speaks of retries or duplicates.
 * `nodes` are the property (or parameter and its schema), `$ref`s followed.
 */
export function isKeyField(name: string, ...nodes: unknown[]): boolean {
  const normalised = normaliseField(name);
  if (!KNOWN_KEY_FIELDS.includes(normalised)) return false;
  const objects = nodes.filter(isObject);
  if (objects.some((node) => node['readOnly'] === true || node['deprecated'] === true)) return false;
  if (!AMBIGUOUS_KEY_FIELDS.includes(normalised)) return true;
  return objects.some((node) => typeof node['description'] === 'string' && RETRY_WORDS.test(node['description']));
}

/** A vendor extension that tells clients to retry an operation, when it is switched on. */
export function retryExtension(node: Record<string, unknown>): string | undefined {
  const speakeasy = node['x-speakeasy-retries'];
  if (speakeasy === true || (isObject(speakeasy) && speakeasy['strategy'] !== 'none')) return 'x-speakeasy-retries';
  return undefined;
}

/** What shows that an operation takes an idempotency key or is declared retryable/idempotent. */
export type KeyEvidence =
  | { readonly kind: 'header' | 'query' | 'form'; readonly name: string; readonly at: Location }
  | { readonly kind: 'body'; readonly name: string; readonly at: Location }
  | { readonly kind: 'extension'; readonly name: string; readonly at: Location };

/**
 * The first sign that an operation handles idempotency keys: a key header parameter (known names plus
 * `keyHeaders`), a key field in the body (top level) or query, `x-fern-idempotent: true`, or an
 * operation-level retry extension. `undefined` when there is none.
 */
export function keyEvidence(doc: ApiDocument, op: OperationView, keyHeaders: readonly string[]): KeyEvidence | undefined {
  // Two rules (contract-missing, retry-on-unsafe-without-contract) ask for the current operation: once each
  // (kept for the operation last asked only, as the per-operation views are).
  const headersKey = keyHeaders.join('\u0000');
  const last = keyEvidenceCache.get(doc);
  if (last !== undefined && last.op === op && last.headersKey === headersKey) return last.evidence;
  const evidence = findKeyEvidence(doc, op, keyHeaders);
  keyEvidenceCache.set(doc, { op, headersKey, evidence });
  return evidence;
}

const keyEvidenceCache = new WeakMap<ApiDocument, { readonly op: OperationView; readonly headersKey: string; readonly evidence: KeyEvidence | undefined }>();

function findKeyEvidence(doc: ApiDocument, op: OperationView, keyHeaders: readonly string[]): KeyEvidence | undefined {
  const params = effectiveParameters(doc, op);
  const header = params.find((p) => p.in === 'header' && isKeyHeaderName(p.name, keyHeaders));
  if (header) return { kind: 'header', name: header.name, at: header.at };
  const inBody = bodyKey(doc, op);
  if (inBody) return inBody;
  const query = params.find((p) => p.in === 'query' && isKeyField(p.name, p.node, parameterSchema(doc, p)?.value));
  if (query) return { kind: 'query', name: query.name, at: query.at };
  if (op.node['x-fern-idempotent'] === true) return { kind: 'extension', name: 'x-fern-idempotent', at: child(op.at, 'x-fern-idempotent') };
  const retry = retryExtension(op.node);
  if (retry) return { kind: 'extension', name: retry, at: child(op.at, retry) };
  return undefined;
}

/**
 * Where a contract reads the key the evidence shows: the header or query parameter, or the body field (a form
 * field too: the guard reads a form's fields as the body) as a JSON Pointer. `undefined` for a marker
 * (`x-fern-idempotent`), which names no key.
 */
export function keyPlaceOf(evidence: KeyEvidence): KeyPlace | undefined {
  switch (evidence.kind) {
    case 'header':
    case 'query':
      return { in: evidence.kind, name: evidence.name };
    case 'body':
    case 'form':
      return { in: 'body', name: `/${escapePointerToken(evidence.name)}` };
    case 'extension':
      return undefined;
  }
}

/**
 * The idempotency key field of an operation's request body: a top-level property of its schema, or a form field,
 * whose name carries a key (see {@link isKeyField}); `undefined` when the body has none.
 */
export function bodyKey(doc: ApiDocument, op: OperationView): { readonly kind: 'body' | 'form'; readonly name: string; readonly at: Location } | undefined {
  const body = requestBody(doc, op);
  if (body?.schema) {
    const field = bodyKeyField(doc, body.schema);
    if (field !== undefined) {
      // Point at the property that carries the key (in a shared schema, one finding names every operation).
      const property = propertyNames(doc, body.schema.value, body.schema.at).find((p) => p.name === field);
      return { kind: 'body', name: field, at: property?.at ?? body.at };
    }
  }
  const form = body?.formFields?.find((f) => isKeyField(f.name, f.node));
  return form ? { kind: 'form', name: form.name, at: form.at } : undefined;
}

/**
 * The first top-level property of a body schema whose name carries an idempotency key — the first match
 * of {@link propertyNames} in the same order, without building a location per property (an operation
 * without a contract is asked this once, and most have no such field). Cached per schema object: bodies
 * share schemas through `$ref`, and an object's `$ref`s resolve the same way wherever it is reached.
 */
function bodyKeyField(doc: ApiDocument, schema: Located<Record<string, unknown> | boolean>): string | undefined {
  if (!isObject(schema.value)) return undefined;
  let perDoc = bodyKeyFieldCache.get(doc);
  if (!perDoc) {
    perDoc = new WeakMap();
    bodyKeyFieldCache.set(doc, perDoc);
  }
  const cached = perDoc.get(schema.value);
  if (cached !== undefined) return cached === null ? undefined : cached;
  let found: string | undefined;
  const alternatives = schemaAlternatives(doc, schema.value, schema.at);
  for (let a = 0; a < alternatives.length; a++) {
    const alt = alternatives[a]!;
    const props = alt.value['properties'];
    if (!isObject(props)) continue;
    // `for…in` with an own-key check lists what Object.keys lists, in its order, without a list of the names.
    for (const name in props) {
      if (!Object.hasOwn(props, name) || !isKeyFieldName(name)) continue;
      if (isKeyField(name, deref(doc, props[name], alt.at)?.value)) {
        found = name;
        break;
      }
    }
    if (found !== undefined) break;
  }
  perDoc.set(schema.value, found ?? null);
  return found;
}

const bodyKeyFieldCache = new WeakMap<ApiDocument, WeakMap<object, string | null>>();

/** The contract of an operation when it has one that is switched on (`x-idempotency` present and not `false`). */
export function activeContract<C extends { readonly enabled: boolean }>(contract: C | undefined): C | undefined {
  return contract && contract.enabled ? contract : undefined;
}

/** How a scope part is written in a contract: `principal`, `global`, `header:NAME`. */
export function formatScopePart(part: { readonly kind: string; readonly name?: string }): string {
  return part.name === undefined ? part.kind : `${part.kind}:${part.name}`;
}

/**
 * Index of a parsed scope part in the raw (merged) `scope` array, so a finding points at the exact
 * entry even when the parser dropped a malformed entry before it.
 */
export function rawScopeIndex(raw: unknown, part: { readonly kind: string; readonly name?: string }, fallback: number): number {
  const scope = isObject(raw) ? raw['scope'] : undefined;
  if (!Array.isArray(scope)) return fallback;
  // Each written entry normalised once per list (a rule asks once per part: a long scope would be quadratic).
  let indexes = scopeIndexes.get(scope);
  if (indexes === undefined) {
    indexes = new Map();
    for (let i = scope.length - 1; i >= 0; i--) {
      const entry: unknown = scope[i];
      if (typeof entry === 'string') indexes.set(entry.trim().toLowerCase().replace(/\s*:\s*/, ':'), i);
    }
    scopeIndexes.set(scope, indexes);
  }
  return indexes.get(formatScopePart(part).toLowerCase()) ?? fallback;
}

const scopeIndexes = new WeakMap<readonly unknown[], Map<string, number>>();

/**
 * Whether a field is written but breaks the schema (or the whole `x-idempotency` has the wrong type):
 * `contract-invalid` reports it, so the "missing" rules must not also call it absent.
 */
export function fieldInvalid(
  contract: { readonly raw: unknown; readonly schemaErrors: readonly { readonly at: Location }[]; at(...path: (string | number)[]): Location },
  ...path: (string | number)[]
): boolean {
  if (contract.schemaErrors.length === 0) return false;
  const root = contract.at();
  if (contract.schemaErrors.some((e) => e.at.file === root.file && e.at.pointer === root.pointer)) return true;
  let node: unknown = contract.raw;
  for (let i = 0; i < path.length; i++) {
    const token = path[i]!;
    if (!isObject(node) || !Object.hasOwn(node, String(token))) return false;
    node = node[String(token)];
  }
  const field = contract.at(...path);
  return contract.schemaErrors.some((e) => e.at.file === field.file && (e.at.pointer === field.pointer || e.at.pointer.startsWith(`${field.pointer}/`)));
}

/**
 * Whether `contract-invalid` already reports a schema violation at `at` (e.g. a duration that is not
 * ISO 8601), so a semantic rule does not say the same thing twice about one node.
 */
export function schemaFlagged(contract: { readonly schemaErrors: readonly { readonly at: Location }[] }, at: Location): boolean {
  return contract.schemaErrors.some((e) => e.at.file === at.file && e.at.pointer === at.pointer);
}

/**
 * A "did you mean" index over many names (e.g. every operationId of a large document): each name is
 * filed under itself and its one-character deletions, so a lookup touches only names within about one
 * edit (a typo, a swapped pair) of the query — O(length) per lookup instead of a scan of every name.
 */
export class NameIndex {
  private readonly byVariant = new Map<string, string[]>();

  constructor(names: Iterable<string>) {
    for (const name of names) {
      for (const variant of deletionVariants(name.toLowerCase())) {
        const list = this.byVariant.get(variant);
        if (list) list.push(name);
        else this.byVariant.set(variant, [name]);
      }
    }
  }

  /** The closest indexed name (edit distance ≤ 2), or `undefined`. */
  closest(name: string): string | undefined {
    const candidates = new Set<string>();
    for (const variant of deletionVariants(name.toLowerCase())) for (const hit of this.byVariant.get(variant) ?? []) candidates.add(hit);
    return candidates.has(name) ? name : closest(name, candidates);
  }
}

function deletionVariants(text: string): Set<string> {
  const out = new Set<string>([text]);
  for (let i = 0; i < text.length; i += 1) out.add(text.slice(0, i) + text.slice(i + 1));
  return out;
}

const readIndexCache = new WeakMap<ApiDocument, NameIndex>();

/** A {@link NameIndex} over the operationIds of the document's safe reads. */
export function safeReadIndex(doc: ApiDocument): NameIndex {
  let index = readIndexCache.get(doc);
  if (!index) {
    index = new NameIndex([...operationIndex(doc).values()].filter(isSafeRead).map((op) => op.operationId!));
    readIndexCache.set(doc, index);
  }
  return index;
}

/**
 * How a message names the operation a finding at `at` is about: its label (`POST /payouts (createPayout)`)
 * when `at` lies inside the operation; `the operation` when it lies in a node several operations share
 * (the document's `x-idempotency` defaults, a path item's parameters, a `$ref`'d contract). The engine then
 * merges the same fault of every operation that shares the node into one finding naming them all
 * (`… (in createA, createB)` in every format), instead of one line per operation at the same place.
 */
export function operationPhrase(op: OperationView, at: Location): string {
  return insideOperation(op, at) ? op.label : 'the operation';
}

function insideOperation(op: OperationView, at: Location): boolean {
  return at.file === op.at.file && (at.pointer === op.at.pointer || at.pointer.startsWith(`${op.at.pointer}/`));
}

/**
 * How a message names an operation's request body schema: the shared component (`schema \`PayoutInput\``)
 * when the schema is defined outside the operation — so operations that share it get one merged finding —
 * else the operation, as {@link operationPhrase} names it for a finding at `at`.
 */
export function bodySchemaPhrase(op: OperationView, schemaAt: Location, at: Location): string {
  if (insideOperation(op, schemaAt)) return `the request body schema of ${operationPhrase(op, at)}`;
  const tokens = parsePointer(schemaAt.pointer) ?? [];
  // A named schema (`#/components/schemas/PayoutInput`, a file's top-level `PayoutInput`) by its name; one
  // written inside something shared (a 2.0 `#/parameters/Body`, a 3.x request body component) by its place.
  if (tokens.length === 0) return `the request body schema \`${path.basename(schemaAt.file)}\``;
  if (tokens.length === 1 || SCHEMA_MAPS.includes(tokens[tokens.length - 2]!)) return `the request body schema \`${tokens[tokens.length - 1]}\``;
  return `the request body schema at \`#${schemaAt.pointer}\``;
}

/** Members that map names to schemas. */
const SCHEMA_MAPS = ['schemas', 'definitions', '$defs'];
