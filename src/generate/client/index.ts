/**
 * `idemkit generate client`: a typed `fetch` client for every operation of a document, with the contract's
 * retry behaviour (the runtime client engine, copied into the output) for contracted operations.
 *
 * Output: `schema.ts` (types from the document's schemas, written by {@link SchemaTypes}), `contracts.ts`
 * and `client.ts` (Handlebars), `index.ts`, and the runtime files under `runtime/`.
 */
import { UsageError } from '../../errors.js';
import { compileContract } from '../../parser/compile.js';
import type { ApiDocument, Location, OperationView, ParameterView } from '../../parser/model.js';
import { JSON_MEDIA } from '../../runtime/client/body.js';
import type { ParamFormat, ParamFormats } from '../../runtime/client/params.js';
import type { RequestFormat } from '../../runtime/client/request.js';
import type { CompiledContract } from '../../runtime/contract.js';
import { fileSet, generatedHeader, runtimeClosure, runtimeFiles, type OutputFile } from '../output.js';
import { assertContractsValid } from '../server.js';
import { OBJECT_PROTOCOL_NAMES, renderTemplate, toIdentifier, toJsLiteral } from '../render.js';
import { formEncoding, formFieldFormats, paramFormats } from './params.js';
import { ClientRefs } from './refs.js';
import { SchemaTypes } from './schema-types.js';
import { documentServers, isAbsoluteServer, operationServer, type ServerEntry } from './servers.js';

/** Options of {@link generateClient}. */
export interface ClientOptions {
  /** The spec's file name as it should appear in the generated header (relative, `/`-separated). */
  readonly source: string;
}

/** One operation as the client templates see it. Every `…Type` / `name` field is a safe identifier. */
export interface ClientOperation {
  readonly operationId: string;
  readonly label: string;
  readonly method: string;
  readonly path: string;
  /** The client's method name. */
  readonly name: string;
  /** Contracted operations: the `IntentResult` alias and the status-call alias declared in `client.ts`. */
  readonly resultType: string;
  readonly statusCallType: string;
  readonly inputType: string;
  /**
   * What `buildRequest` needs beyond the parts: the body's media type when it is not plain `application/json`
   * (form, text, `…+json`), the parameters not written their location's default way; `null` when neither.
   */
  readonly requestFormat: RequestFormat | null;
  /** `true` when the input has no required member (the method's input argument may be left out). */
  readonly inputOptional: boolean;
  readonly okType: string;
  readonly errorType: string;
  /**
   * `true` when the document has the operation answer in JSON only: an answer without a content type, or in
   * `text/plain`, is read as JSON (its body is typed from the JSON schema).
   */
  readonly jsonAnswers: boolean;
  /** `true` for `x-idempotency: false`: a knowingly non-idempotent operation (never retried). */
  readonly notIdempotent: boolean;
  /** The compiled contract, or `null` for operations without an enabled contract. */
  readonly contract: CompiledContract | null;
  /**
   * The server of the operation's own 3.x `servers` (path- or operation-level) when it differs from the document's,
   * else `null`; `absolute` when it names its host (else it is a path that replaces the document's).
   */
  readonly server: { readonly url: string; readonly absolute: boolean } | null;
  /**
   * The status-route operation of a contracted operation, or `null`; `keyHeader` when the key travels in a header,
   * which the status call then carries too (decided here: the contract constant's literal type would make a
   * comparison in the generated code a type error).
   */
  readonly status: {
    readonly name: string;
    readonly inputType: string;
    readonly inputOptional: boolean;
    readonly okType: string;
    readonly errorType: string;
    readonly keyHeader: boolean;
  } | null;
}

/** Everything the client templates render from. */
export interface ClientModel {
  readonly operations: readonly ClientOperation[];
  readonly contracted: readonly ClientOperation[];
  /** The document's servers (`SERVERS` in `client.ts`). */
  readonly servers: readonly ServerEntry[];
  /** The server the client sends to unless `baseUrl` says otherwise (`DEFAULT_SERVER_URL`). */
  readonly server: string;
  /** `true` when {@link server} is an absolute URL, so `baseUrl` may be left out. */
  readonly serverAbsolute: boolean;
  /** {@link server} moved to `http://localhost:8080` (its path kept), for the `baseUrl` TSDoc. */
  readonly localServer: string;
  /** `true` when {@link server}'s path is `/` and it names no host: the document does not say where the API is. */
  readonly serverUnknown: boolean;
  /** The query of {@link server} (`?api-version=…`), which every request carries, or `''`. */
  readonly serverQuery: string;
  /** `true` when some operation has a server of its own. */
  readonly hasOperationServers: boolean;
  /** `true` when some operation has no enabled contract (it is sent once). */
  readonly hasUncontracted: boolean;
  /** `true` for a Swagger 2.0 document. */
  readonly swagger: boolean;
}

/**
 * Names the client module exports besides the schema types (`index.ts` re-exports `client.ts`, `contracts.ts` and
 * `schema.ts` together): a schema or operation type of one of these names would be exported twice (TS2308).
 */
export const CLIENT_EXPORTS: readonly string[] = [
  'createClient', 'Client', 'ClientOptions', 'CallOptions', 'IntentOptions', 'ContractedOperation', 'Intent', 'ApiResponse',
  'ClientRuntime', 'IntentResult', 'CompletedResult', 'RejectedResult', 'RedirectedResult', 'UnknownResult', 'RejectReason', 'UnknownReason', 'contracts',
  'SERVERS', 'DEFAULT_SERVER_URL',
];

/**
 * Every other name `client.ts` declares or imports, in any scope (imports, functions, variables, parameters):
 * operation methods avoid them (and {@link CLIENT_EXPORTS}), since a method named like one is shadowed where the
 * template uses it, or shadows it (an operation `contract` used as a status route was called as the method's own
 * `const contract`). test/generate/client/locals.test.ts reads every declared name back from generated clients and
 * fails when one is missing here.
 */
export const CLIENT_LOCALS: readonly string[] = [
  // imports
  'T', 'CompiledContract', 'defaultRuntime', 'sendIntent', 'sendOnce', 'buildRequest', 'RequestParts', 'clientBase', 'operationBaseUrl', 'keyGiven', 'withIntentKey', 'fittingKey',
  'mergeHeaders', 'ParamInput',
  // `parts` and `createClient`
  'parts', 'given', 'headers', 'options', 'runtime', 'base', 'intent', 'operation', 'key',
  // an operation method
  'input', 'call', 'contract', 'sent', 'statusInput', 'statusCall',
];

/**
 * Globals `schema.ts` uses (`Record`, the types of binary bodies, `PropertyKey` in the key-optional helper): a schema
 * of such a name would shadow it there. test/generate/client/locals.test.ts reads every global type a generated
 * `schema.ts` refers to back and fails when one is missing here.
 */
export const SCHEMA_GLOBALS: readonly string[] = ['Record', 'Blob', 'ArrayBuffer', 'ArrayBufferView', 'PropertyKey'];

/** Runtime files (under `src/runtime/`) every client needs. */
export function clientRuntimeFiles(): string[] {
  return runtimeClosure(['contract.ts', 'client/engine.ts', 'client/intent.ts', 'client/key-place.ts', 'client/request.ts', 'client/server.ts']);
}

type Json = Record<string, unknown>;

/** The member names a JSON Pointer (`/payment/idempotency_key`) walks, unescaped; undefined for the whole body. */
function pointerPath(pointer: string): string[] | undefined {
  if (!pointer.startsWith('/')) return undefined;
  return pointer
    .slice(1)
    .split('/')
    .map((token) => token.replace(/~1/g, '/').replace(/~0/g, '~'));
}
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const child = (at: Location, ...segs: (string | number)[]): Location => ({
  file: at.file,
  pointer: at.pointer + segs.map((s) => '/' + String(s).replace(/~/g, '~0').replace(/\//g, '~1')).join(''),
});
const compare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** The member of an operation's input that holds the parameters of each location. */
const MEMBERS = { path: 'path', query: 'query', header: 'headers', cookie: 'cookies' } as const;

/** Header parameters the client sets itself (or that OpenAPI says to ignore). */
const MANAGED_HEADERS = new Set(['x-request-id', 'accept', 'content-type', 'authorization']);

interface OperationTypes {
  readonly input: string;
  /** The request body's media type, when the operation has a body. */
  readonly mediaType: string | undefined;
  /** The parameters not written their location's default way. */
  readonly params: ParamFormats | undefined;
  /** The Swagger 2.0 `collectionFormat` of array form fields. */
  readonly fields: Readonly<Record<string, ParamFormat>> | undefined;
  /** The `Content-Type` of multipart parts a 3.x `encoding` names. */
  readonly partTypes: Readonly<Record<string, string>> | undefined;
  readonly inputOptional: boolean;
  readonly ok: string;
  readonly error: string;
  /** The operation answers in JSON only (see `#responses`). */
  readonly jsonAnswers: boolean;
}

/** Builds the types of one operation's input and answers, declaring them on `types`. */
class OperationTyper {
  constructor(
    private readonly doc: ApiDocument,
    private readonly types: SchemaTypes,
    private readonly decls: string[],
    private readonly refs: ClientRefs,
  ) {}

  /**
   * The input and answer types of one operation. `key` is where its contract's key travels: a key header is the
   * client's own (left out of the input), and a key query parameter is optional in it (the intent's key fills it;
   * one the caller writes becomes the intent's key).
   */
  declare(op: OperationView, typeBase: string, key: { readonly in: string; readonly name: string } | undefined, guarded = false): OperationTypes {
    const members: string[] = [];
    let optional = true;
    const params = this.#parameters(op);
    const sent: ParameterView[] = [];
    const keyHeader = key?.in === 'header' ? key.name : undefined;
    const needed = (p: ParameterView, where: string): boolean => where === 'path' || (p.required && !(where === 'query' && key?.in === 'query' && p.name === key.name));
    for (const where of ['path', 'query', 'header', 'cookie'] as const) {
      const list = params.filter((p) => p.in === where && !(where === 'header' && this.#managed(p.name, keyHeader)));
      if (list.length === 0) continue;
      sent.push(...list);
      const fields = list
        .sort((a, b) => compare(a.name, b.name))
        .map((p) => `${toJsLiteral(p.name)}${needed(p, where) ? '' : '?'}: ${this.#paramType(p)};`);
      const required = list.some((p) => needed(p, where));
      if (required) optional = false;
      members.push(`${MEMBERS[where]}${required ? '' : '?'}: { ${fields.join(' ')} };`);
    }
    const body = this.#body(op, params);
    if (body !== undefined) {
      if (body.required) optional = false;
      // A key in a body field is the client's to fill from the intent: optional in the input, at any depth.
      const fields = key?.in === 'body' ? pointerPath(key.name) : undefined;
      const type = fields === undefined ? body.type : `${this.#keyOptional()}<${body.type}, [${fields.map(toJsLiteral).join(', ')}]>`;
      members.push(`body${body.required ? '' : '?'}: ${type};`);
    }
    const mediaType = body?.mediaType;
    const input = this.types.uniqueName(`${typeBase}Input`);
    this.decls.push(`/** The input of ${toJsLiteral(op.label)}. */\nexport type ${input} = ${members.length === 0 ? 'Record<string, never>' : `{ ${members.join(' ')} }`};`);
    const answers = this.#responses(op, guarded);
    const ok = this.types.uniqueName(`${typeBase}Ok`);
    const error = this.types.uniqueName(`${typeBase}Error`);
    this.decls.push(`/** The body of a 2xx answer of ${toJsLiteral(op.label)}. */\nexport type ${ok} = ${answers.ok};`);
    this.decls.push(`/** The body of an error answer of ${toJsLiteral(op.label)}. */\nexport type ${error} = ${answers.error};`);
    return { input, mediaType, params: paramFormats(this.doc.version, sent), fields: body?.fields, partTypes: body?.partTypes, inputOptional: optional, ok, error, jsonAnswers: answers.json };
  }

  #keyOptionalName: string | undefined;

  /**
   * The name of the helper type that makes the body's key field optional, declared on first use. A key-remapping
   * mapped type, not `Omit`: `Omit` over a schema with `additionalProperties` (an index signature) keeps only the
   * index signature, so every other required field would become optional.
   */
  #keyOptional(): string {
    if (this.#keyOptionalName === undefined) {
      this.#keyOptionalName = this.types.uniqueName('KeyOptional');
      this.decls.push(
        `/** \`T\` with the member at the path \`P\` optional: the body field that carries the idempotency key, which the client fills from the intent. */\n` +
          `export type ${this.#keyOptionalName}<T, P extends readonly PropertyKey[]> = P extends readonly [infer K extends PropertyKey]\n` +
          `  ? T extends object ? { [Q in keyof T as Q extends K ? never : Q]: T[Q] } & { [Q in K & keyof T]?: T[Q] } : T\n` +
          `  : P extends readonly [infer K extends PropertyKey, ...infer R extends readonly PropertyKey[]]\n` +
          `    ? T extends object ? { [Q in keyof T]: Q extends K ? ${this.#keyOptionalName}<T[Q], R> : T[Q] } : T\n` +
          `    : T;`,
      );
    }
    return this.#keyOptionalName;
  }

  #managed(name: string, keyHeader: string | undefined): boolean {
    const lower = name.toLowerCase();
    return MANAGED_HEADERS.has(lower) || (keyHeader !== undefined && lower === keyHeader.toLowerCase());
  }

  /**
   * Path-level parameters overridden by operation-level ones (same `in` and name; header names in any case), as the
   * loader merges them, but through {@link ClientRefs}: a 2.0 shorthand `$ref` is followed and a broken one reported,
   * not left out of the client.
   */
  #parameters(op: OperationView): ParameterView[] {
    const merged = new Map<string, ParameterView>();
    for (const [owner, at] of [[op.pathItem, op.pathItemAt], [op.node, op.at]] as const) {
      const list = owner['parameters'];
      if (!Array.isArray(list)) continue;
      list.forEach((entry, i) => {
        const entryAt = child(at, 'parameters', i);
        const target = this.refs.deref(entry, entryAt, 'parameters');
        if (target === undefined || !isObject(target.value)) return;
        const node = target.value;
        if (typeof node['name'] !== 'string' || typeof node['in'] !== 'string') return;
        const key = `${node['in']}:${node['in'] === 'header' ? node['name'].toLowerCase() : node['name']}`;
        merged.delete(key);
        merged.set(key, { name: node['name'], in: node['in'], required: node['required'] === true, node, at: entryAt, valueAt: target.at });
      });
    }
    return [...merged.values()];
  }

  #paramType(p: ParameterView): string {
    if (this.doc.version === '2.0') return this.types.typeOf(p.node, p.valueAt);
    if (p.node['schema'] !== undefined) return this.types.typeOf(p.node['schema'], child(p.valueAt, 'schema'));
    return 'string';
  }

  #body(
    op: OperationView,
    params: readonly ParameterView[],
  ): { type: string; required: boolean; mediaType?: string; fields?: Readonly<Record<string, ParamFormat>>; partTypes?: Readonly<Record<string, string>> } | undefined {
    if (this.doc.version === '2.0') {
      const consumes = this.#mediaTypes(op, 'consumes');
      const param = params.find((p) => p.in === 'body');
      if (param !== undefined) {
        // The media type is picked from `consumes` the way 3.0 picks it from `requestBody.content`.
        const media = requestMedia(consumes);
        const type = bodyType(media, () => this.types.typeOf(param.node['schema'], child(param.valueAt, 'schema')));
        return { type, required: param.required, ...(media !== undefined ? { mediaType: media } : {}) };
      }
      // 2.0 `in: formData` parameters are the fields of a form body.
      const fields = params.filter((p) => p.in === 'formData').sort((a, b) => compare(a.name, b.name));
      if (fields.length === 0) return undefined;
      const members = fields.map((p) => `${toJsLiteral(p.name)}${p.required ? '' : '?'}: ${p.node['type'] === 'file' ? BINARY_BODY : this.types.typeOf(p.node, p.valueAt)};`);
      // A file field can only be sent as multipart/form-data (Swagger 2.0 requires it to be consumed).
      const files = fields.some((p) => p.node['type'] === 'file');
      const form = files || (consumes.includes(MULTIPART_FORM) && !consumes.includes(FORM)) ? MULTIPART_FORM : FORM;
      const formats = formFieldFormats(fields);
      return { type: `{ ${members.join(' ')} }`, required: fields.some((p) => p.required), mediaType: form, ...(formats === undefined ? {} : { fields: formats }) };
    }
    const raw = op.node['requestBody'];
    if (raw === undefined) return undefined;
    const target = this.refs.deref(raw, child(op.at, 'requestBody'), 'requestBodies');
    if (target === undefined || !isObject(target.value)) return { type: 'unknown', required: false };
    const content = target.value['content'];
    const media = isObject(content) ? requestMedia(Object.keys(content)) : undefined;
    const entry = media === undefined || !isObject(content) ? undefined : content[media];
    const type =
      media === undefined || !isObject(content)
        ? 'undefined'
        : isMultipartForm(media)
          ? isObject(entry) ? this.#formDataType(entry['schema'], child(target.at, 'content', media, 'schema')) : 'unknown'
          : bodyType(media, () => (isObject(entry) ? this.types.typeOf(entry['schema'], child(target.at, 'content', media, 'schema')) : 'unknown'));
    const form = media !== undefined && isObject(entry) && (isMultipartForm(media) || /^application\/x-www-form-urlencoded\b/i.test(media));
    const encoding = form ? formEncoding(isMultipartForm(media!), entry['encoding']) : {};
    return { type, required: target.value['required'] === true, ...(media !== undefined ? { mediaType: media } : {}), ...encoding };
  }

  /**
   * The type of a 3.x `multipart/form-data` body: its schema's, except that binary properties (files: `format: binary`,
   * or 3.1 `contentMediaType`) of an object schema take bytes. Other schemas are typed as they are.
   */
  #formDataType(schema: unknown, at: Location): string {
    const target = this.refs.deref(schema, at, 'definitions');
    if (target === undefined || !isObject(target.value) || !isObject(target.value['properties'])) return this.types.typeOf(schema, at);
    const properties = target.value['properties'];
    const schemaAt = (value: unknown, where: Location): { node: Json; at: Location } | undefined => {
      const found = this.refs.deref(value, where, 'definitions');
      return found !== undefined && isObject(found.value) ? { node: found.value, at: found.at } : undefined;
    };
    const binary = (node: Json | undefined): boolean => node?.['type'] === 'string' && (node['format'] === 'binary' || typeof node['contentMediaType'] === 'string');
    const kinds = Object.keys(properties).map((name) => {
      const property = schemaAt(properties[name], child(target.at, 'properties', name));
      if (binary(property?.node)) return { name, type: BINARY_BODY };
      if (property?.node['type'] === 'array' && binary(schemaAt(property.node['items'], child(property.at, 'items'))?.node)) return { name, type: `(${BINARY_BODY})[]` };
      return { name, type: undefined };
    });
    if (kinds.every((kind) => kind.type === undefined)) return this.types.typeOf(schema, at);
    const required = new Set(Array.isArray(target.value['required']) ? target.value['required'] : []);
    const members = kinds.map(({ name, type }) => {
      const member = type ?? this.types.typeOf(properties[name], child(target.at, 'properties', name));
      return `${toJsLiteral(name)}${required.has(name) ? '' : '?'}: ${member};`;
    });
    const extra = target.value['additionalProperties'];
    if (extra !== undefined && extra !== false) members.push('[key: string]: unknown;');
    return `{ ${members.join(' ')} }`;
  }

  /** Swagger 2.0 media types an operation accepts (`consumes`) or answers in (`produces`): its own, else the document's. */
  #mediaTypes(op: OperationView, field: 'consumes' | 'produces'): string[] {
    const own = op.node[field];
    const list = Array.isArray(own) ? own : this.doc.get({ file: this.doc.file, pointer: `/${field}` });
    return Array.isArray(list) ? list.filter((t): t is string => typeof t === 'string').map((t) => t.trim().toLowerCase()) : [];
  }

  /** The type of a 3.x `content` map's JSON media type; `unknown` for other media types. */
  #content(owner: Json, at: Location): string {
    const content = owner['content'];
    if (!isObject(content)) return 'undefined';
    const media = Object.keys(content).find((type) => JSON_MEDIA.test(type));
    if (media === undefined) return Object.keys(content).length === 0 ? 'undefined' : 'unknown';
    const entry = content[media];
    if (!isObject(entry)) return 'unknown';
    return this.types.typeOf(entry['schema'], child(at, 'content', media, 'schema'));
  }

  /**
   * The types of an operation's 2xx and error bodies, and whether it answers in JSON only: some response has a body
   * in a JSON media type (2.0: a schema, `produces` naming JSON or nothing) and none has one in another type only.
   */
  #responses(op: OperationView, guarded: boolean): { ok: string; error: string; json: boolean } {
    const responses = op.node['responses'];
    const ok: string[] = [];
    const error: string[] = [];
    const media = { json: 0, other: 0 };
    if (isObject(responses)) {
      const produces = this.doc.version === '2.0' ? this.#mediaTypes(op, 'produces') : [];
      const json2 = produces.length === 0 || produces.some((type) => JSON_MEDIA.test(type));
      for (const code of Object.keys(responses).sort()) {
        const target = this.refs.deref(responses[code], child(op.at, 'responses', code), 'responses');
        if (target === undefined || !isObject(target.value)) continue;
        let type: string;
        if (this.doc.version === '2.0') {
          type = target.value['schema'] === undefined ? 'undefined' : this.types.typeOf(target.value['schema'], child(target.at, 'schema'));
          if (target.value['schema'] !== undefined) media[json2 ? 'json' : 'other']++;
        } else {
          type = this.#content(target.value, target.at);
          const content = target.value['content'];
          const types = isObject(content) ? Object.keys(content) : [];
          if (types.length > 0) media[types.some((t) => JSON_MEDIA.test(t)) ? 'json' : 'other']++;
        }
        const success = /^2(\d\d|XX)$/i.test(code);
        // An error a guard answers has a body (problem details, or the API's own format through renderProblem) though
        // the document shows none: `unknown`, not the `undefined` a reader would trust.
        (success ? ok : error).push(!success && guarded && type === 'undefined' ? 'unknown' : type);
      }
    }
    return { ok: unionOf(ok), error: unionOf(error), json: media.json > 0 && media.other === 0 };
  }
}

const FORM = 'application/x-www-form-urlencoded';
const MULTIPART_FORM = 'multipart/form-data';
const isMultipartForm = (media: string): boolean => /^multipart\/form-data\b/i.test(media);

/** The media type a client sends a request body in: JSON first, then a form, then text, else the first listed. */
function requestMedia(types: readonly string[]): string | undefined {
  return (
    types.find((t) => /^application\/json\b/i.test(t)) ??
    types.find((t) => JSON_MEDIA.test(t)) ??
    types.find((t) => t.toLowerCase() === FORM) ??
    types.find((t) => /^text\//i.test(t)) ??
    types[0]
  );
}

/** What a body in a media type other than JSON, form or text is sent as: the bytes (or text) themselves. */
const BINARY_BODY = 'string | Blob | ArrayBuffer | ArrayBufferView';

/**
 * The type of a request body sent as `media` (`undefined`: JSON): JSON, form and text bodies are typed from their
 * schema (`schemaType`), multipart other than `multipart/form-data` stays `unknown`, other media (octet-stream,
 * images, …) are bytes or text.
 */
function bodyType(media: string | undefined, schemaType: () => string): string {
  if (media === undefined || JSON_MEDIA.test(media) || media.toLowerCase() === FORM || /^text\//i.test(media)) return schemaType();
  return /^multipart\//i.test(media) ? 'unknown' : BINARY_BODY;
}

function unionOf(types: readonly string[]): string {
  const unique = [...new Set(types)];
  if (unique.length === 0 || unique.includes('unknown')) return 'unknown';
  if (unique.length === 1) return unique[0]!;
  return unique.map((t) => (/^[A-Za-z_$][\w$]*$/.test(t) ? t : `(${t})`)).join(' | ');
}

/** An operation's own server URL as the template describes it. */
function ownServer(url: string | null): ClientOperation['server'] {
  return url === null ? null : { url, absolute: isAbsoluteServer(url) };
}

/**
 * Builds the view model and the declarations of `schema.ts`. Throws DocumentError (with the line and column) for
 * the first invalid `x-idempotency` contract (as `generate server` does: a client must not run on defaults its author
 * did not choose), and for the first `$ref` in the file the client needs and cannot follow.
 */
export function buildClientModel(doc: ApiDocument): { model: ClientModel; schema: string } {
  assertContractsValid(doc);
  const refs = new ClientRefs(doc);
  // A schema named like a client export or a global `schema.ts` uses is renamed, with a note in `schema.ts`.
  const types = new SchemaTypes(doc, [...SCHEMA_GLOBALS, ...CLIENT_EXPORTS], refs);
  const decls: string[] = [];
  const typer = new OperationTyper(doc, types, decls, refs);
  const where = documentServers(doc);
  const taken = new Set([...CLIENT_EXPORTS, ...CLIENT_LOCALS, ...OBJECT_PROTOCOL_NAMES]);
  const sorted = [...doc.operations].sort((a, b) => compare(opId(a), opId(b)) || compare(a.path, b.path) || compare(a.method, b.method));
  const compiled = new Map(sorted.map((op) => [op, op.contract?.enabled === true ? compileContract(op, doc) : null] as const));
  // A status route that a contract's key header reaches: `checkStatus` sends the intent's key in it, so the route's
  // own declaration of that header is the client's, as on the contracted operation (left out of its input).
  const statusKeys = new Map<string, { readonly in: string; readonly name: string }>();
  for (const contract of compiled.values()) {
    const route = contract?.effect.statusRoute;
    if (route !== undefined && contract!.key.in === 'header' && !statusKeys.has(route)) statusKeys.set(route, contract!.key);
  }
  const drafts = sorted.map((op) => {
    const base = toIdentifier(opId(op));
    let name = base;
    for (let n = 2; taken.has(name); n++) name = `${base}${n}`;
    taken.add(name);
    const contract = compiled.get(op) ?? null;
    const statusKey = op.operationId === undefined ? undefined : statusKeys.get(op.operationId);
    const t = typer.declare(op, name, contract?.key ?? statusKey, contract !== null || statusKey !== undefined);
    const pascal = name.charAt(0).toUpperCase() + name.slice(1);
    // `client.ts` exports these next to the schema types, so they share the schema types' names (and reservations).
    return { op, name, contract, t, resultType: types.uniqueIdentifier(`${pascal}Result`), statusCallType: types.uniqueIdentifier(`${pascal}StatusCall`) };
  });
  const byOperationId = new Map(drafts.filter((d) => d.op.operationId !== undefined).map((d) => [d.op.operationId!, d]));
  const operations: ClientOperation[] = drafts.map(({ op, name, contract, t, resultType, statusCallType }) => {
    // A status route is a GET without a contract of its own (status-route-unresolved's error otherwise): another
    // operation — the contracted POST itself — would be typed as one and called to read an outcome. None then.
    const named = contract?.effect.statusRoute !== undefined ? byOperationId.get(contract.effect.statusRoute) : undefined;
    const route = named !== undefined && named.op.method === 'get' && named.contract === null ? named : undefined;
    return {
      operationId: opId(op),
      label: op.label,
      method: op.method.toUpperCase(),
      path: op.path,
      name,
      resultType,
      statusCallType,
      inputType: t.input,
      requestFormat: requestFormat(t),
      inputOptional: t.inputOptional,
      okType: t.ok,
      errorType: t.error,
      jsonAnswers: t.jsonAnswers,
      notIdempotent: op.contract !== undefined && !op.contract.enabled,
      contract,
      server: ownServer(operationServer(doc, op, where.server)),
      status:
        route === undefined
          ? null
          : { name: route.name, inputType: route.t.input, inputOptional: route.t.inputOptional, okType: route.t.ok, errorType: route.t.error, keyHeader: contract!.key.in === 'header' },
    };
  });
  const named = types.declarations().map((d) => `${d.renamed === undefined ? '' : `/** ${d.renamed} */\n`}export type ${d.name} = ${d.type};`);
  const schema = [...named, ...decls].join('\n\n') + '\n';
  refs.throwIfBroken();
  return {
    model: {
      operations,
      contracted: operations.filter((o) => o.contract !== null),
      servers: where.servers,
      server: where.server,
      serverAbsolute: where.absolute,
      localServer: `http://localhost:8080${where.absolute ? new URL(where.server).pathname.replace(/\/$/, '') : ''}`,
      serverUnknown: where.server.replace(/\?.*/s, '') === '/',
      serverQuery: where.server.includes('?') ? where.server.slice(where.server.indexOf('?')) : '',
      hasOperationServers: operations.some((o) => o.server !== null),
      hasUncontracted: operations.some((o) => o.contract === null),
      swagger: doc.version === '2.0',
    },
    schema,
  };
}

/** The `buildRequest` format of an operation, or `null` when it is all defaults. */
function requestFormat(t: OperationTypes): RequestFormat | null {
  // multipart/mixed, related, …: parts with their own headers that a request input cannot say yet; they stay JSON (a known gap).
  const other = /^multipart\//i.test(t.mediaType ?? '') && !isMultipartForm(t.mediaType!);
  const media = t.mediaType === undefined || /^application\/json$/i.test(t.mediaType) || other ? undefined : t.mediaType;
  if (media === undefined && t.params === undefined && t.fields === undefined) return null;
  return {
    ...(media === undefined ? {} : { mediaType: media }),
    ...(t.params === undefined ? {} : { params: t.params }),
    ...(t.fields === undefined ? {} : { fields: t.fields }),
    ...(t.partTypes === undefined ? {} : { partTypes: t.partTypes }),
  };
}

function opId(op: OperationView): string {
  return op.operationId ?? `${op.method.toUpperCase()} ${op.path}`;
}

/**
 * The complete output of `generate client`. Throws UsageError when the document has no operation.
 */
export function generateClient(doc: ApiDocument, options: ClientOptions): OutputFile[] {
  if (doc.operations.length === 0) throw new UsageError('the document has no operation, so there is no client to generate', doc.file);
  const { model, schema } = buildClientModel(doc);
  const header = generatedHeader(options.source);
  return fileSet([
    ...runtimeFiles(clientRuntimeFiles(), options.source),
    { path: 'schema.ts', contents: `${header}\n${schema}` },
    { path: 'contracts.ts', contents: header + renderTemplate('client/contracts.ts', model) },
    { path: 'client.ts', contents: header + renderTemplate('client/client.ts', model) },
    { path: 'index.ts', contents: header + renderTemplate('client/index.ts', model) },
  ]);
}
