/**
 * `loadDocument`: reads an OpenAPI 2.0 / 3.0 / 3.1 document (YAML or JSON), lists its operations and reads
 * their `x-idempotency` contracts. The document is never dereferenced as a whole: `$ref`s are followed on
 * demand (local, or external relative to the file that holds them), and only the ones a contract needs are
 * checked up front.
 */
import { existsSync, realpathSync, statSync, type Stats } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DocumentError } from '../errors.js';
import { buildContract, type ContractInputs } from './contract.js';
import { isKnownKeyHeader } from './key-headers.js';
import { isPlainObject } from './merge.js';
import type {
  ApiDocument,
  DocumentSource,
  DocumentWarning,
  DocumentedResponse,
  IdempotencyContract,
  Location,
  OpenApiVersion,
  OperationView,
  ParameterView,
  Position,
} from './model.js';
import { appendPointer, escapeToken, lazyChild, parsePointer, valueAt } from './pointer.js';
import { NOT_UTF8 } from './encoding.js';
import { duplicateKeyDocumentError, SourceCache } from './source.js';
import { summarise } from './summarise.js';

/**
 * A file a `$ref` reached that does not parse: the error stays where it is in that file, and {@link via} says
 * which `$ref` led there (the CLI prints it after the message).
 */
export class ReachedDocumentError extends DocumentError {
  constructor(
    cause: DocumentError,
    /** The `$ref` (as written) and where it is written. */
    readonly via: { readonly ref: string; readonly file: string; readonly line: number; readonly column: number },
  ) {
    super(cause.message, cause.file, cause.pointer, cause.line, cause.column);
  }
}

/** Options of {@link loadDocument}. */
export interface LoadOptions {
  /**
   * Files already loaded in this run. Pass one cache to several `loadDocument` calls so documents that
   * share external files read and parse them once.
   */
  readonly cache?: SourceCache;
}

/** HTTP methods a path item may hold, in the order OpenAPI lists them. */
export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

/** What a contract on a webhook or callback should be instead: its requests are sent by this API, not served. */
const SENT_REQUEST = "a webhook or callback is a request this API sends: the service that receives it keeps the contract, in its own API's document";

const MAX_REF_HOPS = 64;

/**
 * An operation's or path item's parameter entry, and an operation's response entry, or a named one of the
 * document's `parameters`/`responses` (a shorthand there chains to another of them) — not a schema property that
 * happens to be named `parameters` or `responses`.
 */
const METHOD = `(?:${HTTP_METHODS.join('|')})`;
const PARAMETER_ENTRY = new RegExp(`(?:^|/)(?:${METHOD}|paths/[^/]+)/parameters/\\d+$|^/parameters/[^/]+$`);
const RESPONSE_ENTRY = new RegExp(`(?:^|/)${METHOD}/responses/[^/]+$|^/responses/[^/]+$`);

// Made once: a literal in a method makes a new RegExp object each time it runs (per path item, per `$ref`).
const QUERY_OR_FRAGMENT = /[?#]/;
const REMOTE = /^https?:/i;
const SHORTHAND = /^[^#/\\.:]+$/;
const FILE_URL = /^file:/i;

/** Where a Swagger 2.0 `$ref: Name` shorthand looks when its location does not tell. */
type ShorthandSection = 'parameters' | 'responses';

type Followed =
  | { readonly ok: true; readonly value: unknown; readonly at: Location }
  | { readonly ok: false; readonly ref: string; readonly refAt: Location; readonly reason: string; readonly cause?: DocumentError };

/**
 * Loads an OpenAPI document. A relative `file` is resolved against the current directory.
 * @throws DocumentError (with file, line and column) when the file is missing, empty or unparsable, is not
 *   OpenAPI, or a `$ref` that an operation or contract needs points at a missing file or node.
 */
export async function loadDocument(file: string, options: LoadOptions = {}): Promise<ApiDocument> {
  const cache = options.cache ?? new SourceCache();
  return new DocumentLoader(cache.name(resolve(file)), cache).load();
}

/** A plain-name fragment (JSON Schema 2020-12's anchor syntax), as `#order-anchor`. */
const ANCHOR_NAME = /^[A-Za-z_][-A-Za-z0-9._]*$/;

/** Keys whose values are data, not schemas: an `$id` below one names no schema resource. */
const DATA_KEYS: ReadonlySet<string> = new Set(['example', 'examples', 'default', 'const', 'enum']);

/**
 * A `$ref`'s resolution from `cache` (per file, then per key: no key is joined for the thousands of lookups of a big
 * document), computed once; a failure is answered at the `$ref` asking (`refAt`), as each names its own place.
 */
function memoised(cache: Map<string, Map<string, Followed>>, from: Location, key: string, resolve: () => Followed): Followed {
  let perFile = cache.get(from.file);
  if (!perFile) {
    perFile = new Map();
    cache.set(from.file, perFile);
  }
  const cached = perFile.get(key);
  if (cached) return cached.ok ? cached : { ...cached, refAt: from };
  const result = resolve();
  perFile.set(key, result);
  return result;
}

class DocumentLoader implements ApiDocument {
  readonly version: OpenApiVersion = '3.1';
  readonly root: Record<string, unknown> = {};
  readonly operations: OperationView[] = [];
  readonly warnings: DocumentWarning[] = [];
  // The same `$ref` string in the same file always lands on the same node; big documents repeat a few
  // refs (`#/components/responses/Problem`) thousands of times.
  private readonly refs = new Map<string, Map<string, Followed>>();
  // OpenAPI 3.1 schema resources (`$id`) per file.
  private readonly resources = new Map<string, { readonly byPointer: Map<string, string>; readonly byUri: Map<string, string> } | undefined>();
  // OpenAPI 3.1 anchors (`$anchor`) per file.
  private readonly anchors = new Map<string, Map<string, string>>();
  // Shared components (a `#/components/responses/Problem` used by every operation) are checked once.
  private readonly checked = new WeakSet<object>();
  defaultsAt: Location | undefined;
  private readonly touched: string[] = [];
  // Operations in the entry file that carry `x-idempotency` (for rejectJsonDuplicates).
  // Broken `$ref`s already warned about (a path item's parameters are seen once per method).
  private readonly warnedRefs = new Set<string>();
  // Misplaced `x-idempotency` keys already warned about (a path item `$ref`'d from two paths is read twice).
  private readonly warnedMisplaced = new Set<string>();
  // Where contract `$ref`s (an operation's, the defaults') landed, as `file#pointer`: an `x-idempotency` there is read.
  private readonly contractTargets = new Set<string>();
  private readonly contractedHere: { readonly at: Location; readonly node: Record<string, unknown> }[] = [];

  constructor(
    readonly file: string,
    private readonly cache: SourceCache,
  ) {}

  get files(): readonly string[] {
    return this.touched;
  }

  #repository: string | null | undefined;

  /**
   * The git work tree the entry file is in (its real path: the nearest directory above it holding `.git`), which
   * file `$ref`s may not leave (after symbolic links); `undefined` outside any, where they are not confined.
   */
  private repository(): string | undefined {
    if (this.#repository === undefined) {
      this.#repository = null;
      for (let dir = dirname(realFile(this.file)); ; dir = dirname(dir)) {
        if (existsSync(join(dir, '.git'))) {
          this.#repository = dir;
          break;
        }
        if (dirname(dir) === dir) break;
      }
    }
    return this.#repository ?? undefined;
  }

  async load(): Promise<ApiDocument> {
    const source = this.cache.get(this.file);
    this.touch(this.file);
    const root = source.value;
    if (!isPlainObject(root) || (root.openapi === undefined && root.swagger === undefined)) {
      throw new DocumentError(
        "not an OpenAPI document: no 'openapi' or 'swagger' field at the top level — add `openapi: 3.1.0` or lint the right file",
        this.file,
        '',
        1,
        1,
      );
    }
    (this as { root: Record<string, unknown> }).root = root;
    (this as { version: OpenApiVersion }).version = this.detectVersion(root);
    this.readOperations();
    this.warnMisplacedContracts();
    this.warnUnreadOperations();
    this.rejectJsonDuplicates();
    return this;
  }

  private detectVersion(root: Record<string, unknown>): OpenApiVersion {
    // A version that is no string or number (`openapi: {toString: 1}`) cannot be read as text: said as unsupported.
    const scalar = (value: unknown): boolean => value === undefined || value === null || typeof value !== 'object';
    const fail = (field: string, value: unknown, hint: string): never => {
      const at = { file: this.file, pointer: `/${field}` };
      const { line, column } = this.position(at);
      throw new DocumentError(`unsupported ${field} version ${summarise(value)} — ${hint}`, this.file, at.pointer, line, column);
    };
    if (root.openapi !== undefined) {
      if (!scalar(root.openapi)) return fail('openapi', root.openapi, 'write the version as a string, e.g. `openapi: "3.0.3"`');
      const text = String(root.openapi);
      if (typeof root.openapi !== 'string') {
        this.warn({ file: this.file, pointer: '/openapi' }, `openapi version should be a string: write "${text}" in quotes`);
      }
      if (/^3\.0(\.|$)/.test(text)) return '3.0';
      // 3.2 keeps 3.1's shape for everything idemkit reads.
      if (/^3\.[12](\.|$)/.test(text)) return '3.1';
      // YAML reads an unquoted `openapi: 3.0` as the number 3.
      if (typeof root.openapi === 'number') {
        return fail('openapi', root.openapi, `YAML read it as a number: quote the version, e.g. \`openapi: "3.0.3"\``);
      }
      return fail('openapi', root.openapi, 'use 3.0.x or 3.1.x (or swagger: "2.0")');
    }
    if (scalar(root.swagger) && (String(root.swagger) === '2' || String(root.swagger) === '2.0')) return '2.0';
    return fail('swagger', root.swagger, 'idemkit reads swagger "2.0" and openapi 3.0.x / 3.1.x');
  }

  private readOperations(): void {
    const root = this.root;
    const rootAt: Location = { file: this.file, pointer: '' };
    if (!isPlainObject(root.info)) this.warn(rootAt, "the document has no 'info' object");
    const defaults = this.readDefaults();
    const paths = root.paths;
    if (paths === undefined) {
      // `paths` is required before 3.1; a document cut off before it would otherwise lint clean.
      if (this.version !== '3.1') {
        const source = this.cache.get(this.file);
        const { line, column } = source.positionAt(source.text.length);
        throw new DocumentError(
          `no \`paths\` — is the file truncated? OpenAPI ${this.version} requires a \`paths\` object (\`paths: {}\` when there are none)`,
          this.file,
          '',
          line,
          column,
        );
      }
      // 3.1 asks for at least one of paths, webhooks and components (a components-only library is valid).
      if (root.webhooks === undefined && root.components === undefined) {
        this.warn(rootAt, "the document has no 'paths', 'webhooks' or 'components'");
      }
      return;
    }
    const pathsAt: Location = { file: this.file, pointer: '/paths' };
    if (!isPlainObject(paths)) {
      this.warn(pathsAt, "'paths' must be an object of path items");
      return;
    }
    // `paths: {$ref: ./paths.yaml}` is not OpenAPI (the Paths Object has no `$ref`), but bundlers follow it
    // and multi-file layouts use it: follow it too, rather than lint none of the operations it holds.
    const followed = typeof paths.$ref === 'string' ? this.need(paths, pathsAt) : { value: paths, at: pathsAt };
    if (followed.at !== pathsAt) {
      this.warn(
        { file: this.file, pointer: '/paths/$ref' },
        "'paths' is a `$ref`, which OpenAPI does not allow (idemkit follows it; other tools may not): reference each path item instead (`/orders: {$ref: …}`)",
      );
      if (!isPlainObject(followed.value)) {
        this.warn(followed.at, "'paths' must be an object of path items");
        return;
      }
    }
    // Path items written beside the `$ref` are read too, after those of the file it names.
    const entries: { path: string; item: unknown; base: Location }[] = [];
    // Object.keys and a loop: no [name, value] pair and no iterator result per path item.
    const listed = followed.value as Record<string, unknown>;
    const names = Object.keys(listed);
    for (let i = 0; i < names.length; i++) entries.push({ path: names[i]!, item: listed[names[i]!], base: followed.at });
    if (followed.at !== pathsAt) {
      const beside = Object.keys(paths);
      for (let i = 0; i < beside.length; i++) if (beside[i] !== '$ref') entries.push({ path: beside[i]!, item: paths[beside[i]!], base: pathsAt });
    }
    const operationIds = new Map<string, Location>();
    // Misplaced `x-idempotency` of path items and responses, warned after every operation is read: a later
    // operation's contract may `$ref` one (`$ref: '#/paths/~1z/x-idempotency'`), which makes it read.
    const misplaced: [owner: Location, where: string, advice?: string][] = [];
    // Indexed loops over path items and methods: a cold process runs this unoptimised, where `for…of` (and
    // destructuring an array) allocates an iterator result per step.
    for (let e = 0; e < entries.length; e++) {
      const { path, item: rawItem, base } = entries[e]!;
      // The Paths Object may carry extensions (`x-codegen-contextRoot: /api`): they are not path items.
      if (path.startsWith('x-')) continue;
      const itemRef: Location = { file: base.file, pointer: `${base.pointer}/${escapeToken(path)}` };
      if (!path.startsWith('/')) {
        this.warn(itemRef, `path '${path}' does not start with '/': OpenAPI paths are appended to the server URL, so clients would call \`…${path}\` glued to it — write '/${path}'`);
      }
      const item = this.need(rawItem, itemRef);
      if (!isPlainObject(item.value)) {
        this.warn(itemRef, `path item '${path}' must be an object`);
        continue;
      }
      const pathItem = item.value;
      if (Object.prototype.hasOwnProperty.call(pathItem, 'x-idempotency')) misplaced.push([item.at, 'on a path item']);
      // Only where a guard would be made from the path: converters write `/#X-Amz-Target=…` keys by the thousand.
      const queryWarning = QUERY_OR_FRAGMENT.test(path) && hasContract(pathItem) ? pathQueryWarning(path, (bare) => entries.some((entry) => entry.path === bare)) : undefined;
      if (queryWarning !== undefined) this.warn(itemRef, queryWarning);
      for (let m = 0; m < HTTP_METHODS.length; m++) {
        const method = HTTP_METHODS[m]!;
        if (!Object.prototype.hasOwnProperty.call(pathItem, method)) continue;
        const node = pathItem[method];
        // A method name needs no escaping: the pointer is joined as is.
        const at: Location = { file: item.at.file, pointer: `${item.at.pointer}/${method}` };
        if (!isPlainObject(node)) {
          this.warn(at, `operation ${method.toUpperCase()} ${path} must be an object`);
          continue;
        }
        const operationId = typeof node.operationId === 'string' && node.operationId !== '' ? node.operationId : undefined;
        if (operationId !== undefined) {
          const first = operationIds.get(operationId);
          if (first) this.warn({ file: at.file, pointer: appendPointer(at.pointer, 'operationId') }, `operationId '${operationId}' is used twice`);
          else operationIds.set(operationId, at);
        }
        if (!isPlainObject(node.responses)) {
          if (this.version !== '3.1') this.warn(at, `operation ${method.toUpperCase()} ${path} has no 'responses'`);
        } else {
          for (const code in node.responses) {
            const response = node.responses[code];
            if (isPlainObject(response) && Object.prototype.hasOwnProperty.call(response, 'x-idempotency')) misplaced.push([lazyChild(at, 'responses', code), 'in a response']);
          }
        }
        // A callback's operations are requests this API sends: a contract there is the receiver's to keep, not read here.
        if (isPlainObject(node.callbacks)) {
          for (const name in node.callbacks) {
            const callback = node.callbacks[name];
            if (!isPlainObject(callback)) continue;
            for (const expression in callback) {
              const target = callback[expression];
              if (!isPlainObject(target)) continue;
              for (const verb of HTTP_METHODS) {
                if (isPlainObject(target[verb]) && Object.prototype.hasOwnProperty.call(target[verb], 'x-idempotency')) {
                  misplaced.push([{ file: at.file, pointer: appendPointer(at.pointer, 'callbacks', name, expression, verb) }, 'on a callback', SENT_REQUEST]);
                }
              }
            }
          }
        }
        const hasContract = Object.prototype.hasOwnProperty.call(node, 'x-idempotency');
        // JSON.parse keeps the last of two `x-idempotency` keys: operations in the entry file are checked
        // all at once after the loop (rejectJsonDuplicates), those in other files one by one.
        if (hasContract) {
          if (at.file === this.file) this.contractedHere.push({ at, node });
          else this.rejectDuplicateKeys(at, false);
        }
        const contract = hasContract ? this.readContract(node, at, pathItem, item.at, defaults) : undefined;
        // A contract's broken `$ref`s stop the load (readContract); elsewhere they are warnings, so a typo in
        // a key parameter's `$ref` does not silently hide the key from contract-missing.
        if (contract === undefined || contract.enabled === false) this.warnBrokenRefs(node, at, pathItem, item.at);
        const label = `${method.toUpperCase()} ${path}${operationId ? ` (${operationId})` : ''}`;
        this.operations.push(new LoadedOperation(this, method, path, operationId, node, at, pathItem, item.at, contract, label));
      }
    }
    for (let i = 0; i < misplaced.length; i++) this.misplaced(...misplaced[i]!);
  }

  /**
   * `x-idempotency` written where it is not read — under `components` (or 2.0's `definitions`, `parameters`,
   * `responses`) or one of their entries — and root keys that look like the defaults but are not
   * (`x-idempotency-defaults`): each is a warning at its key, so a contract written there is not silently
   * ignored. Path items and inline responses are checked once every operation is read.
   */
  private warnMisplacedContracts(): void {
    const root = this.root;
    for (const key in root) {
      if (/^x-idempoten/i.test(key) && key !== 'x-idempotency' && key !== 'x-idempotency-lint') {
        this.warn({ file: this.file, pointer: appendPointer('', key) }, `\`${key}\` is not read — the document-level defaults are \`x-idempotency\` at the root`);
      }
    }
    // OpenAPI 3.1 webhooks: requests this API sends; a contract there is the receiver's to keep, not read here.
    if (isPlainObject(root.webhooks)) {
      for (const name in root.webhooks) {
        const item = root.webhooks[name];
        if (!isPlainObject(item)) continue;
        for (const verb of HTTP_METHODS) {
          if (isPlainObject(item[verb]) && Object.prototype.hasOwnProperty.call(item[verb], 'x-idempotency')) {
            this.misplaced({ file: this.file, pointer: appendPointer('', 'webhooks', name, verb) }, 'on a webhook', SENT_REQUEST);
          }
        }
      }
    }
    const sections: [string, unknown][] = this.version === '2.0' ? [['definitions', root.definitions], ['parameters', root.parameters], ['responses', root.responses]] : [['components', root.components]];
    for (const [name, section] of sections) {
      if (!isPlainObject(section)) continue;
      const at = { file: this.file, pointer: appendPointer('', name) };
      if (Object.prototype.hasOwnProperty.call(section, 'x-idempotency')) this.misplaced(at, `under ${name}`);
      // components: `responses`, `pathItems`… hold entries; 2.0's sections are the entries' map itself.
      const groups: [string[], unknown][] = name === 'components' ? Object.keys(section).filter((group) => !group.startsWith('x-')).map((group) => [[name, group], section[group]]) : [[[name], section]];
      for (const [tokens, group] of groups) {
        if (!isPlainObject(group)) continue;
        for (const entry in group) {
          const value = group[entry];
          if (!entry.startsWith('x-') && isPlainObject(value) && Object.prototype.hasOwnProperty.call(value, 'x-idempotency')) {
            this.misplaced({ file: this.file, pointer: appendPointer('', ...tokens, entry) }, `in ${tokens.join('.')}.${entry}`);
          }
        }
      }
    }
  }

  /** Warns (once per place) that the `x-idempotency` of the object at `owner` is not read, and what to do instead. */
  private misplaced(owner: Location, where: string, advice = 'move it under each method (post:, patch:, …), or to the document root for defaults'): void {
    const at = { file: owner.file, pointer: appendPointer(owner.pointer, 'x-idempotency') };
    const key = `${at.file}#${at.pointer}`;
    if (this.warnedMisplaced.has(key) || this.contractTargets.has(key)) return;
    this.warnedMisplaced.add(key);
    this.warn(at, `x-idempotency ${where} is not read — ${advice}`);
  }

  /**
   * Operations under Azure's `x-ms-paths` (paths told apart by a query string, `/jobs?op=create`) are not read:
   * one that carries a contract or a key header is named, so it is not silently left unchecked.
   */
  private warnUnreadOperations(): void {
    const extra = this.root['x-ms-paths'];
    if (!isPlainObject(extra)) return;
    for (const path of Object.keys(extra)) {
      const item = extra[path];
      if (!isPlainObject(item)) continue;
      for (const method of HTTP_METHODS) {
        const node = item[method];
        if (!isPlainObject(node)) continue;
        const keyed = Array.isArray(node.parameters) && node.parameters.some((parameter) => isPlainObject(parameter) && parameter.in === 'header' && typeof parameter.name === 'string' && isKnownKeyHeader(parameter.name));
        if (!keyed && !Object.prototype.hasOwnProperty.call(node, 'x-idempotency')) continue;
        this.warn(
          { file: this.file, pointer: appendPointer('/x-ms-paths', path, method) },
          `operation ${method.toUpperCase()} ${path} is under \`x-ms-paths\`, which idemkit does not read (lint, init and generate see \`paths\` only): its idempotency key and contract are not checked — to check them, lint a copy of the document with the operation under \`paths\``,
        );
      }
    }
  }

  private readDefaults(): { value: Record<string, unknown>; at: Location } | undefined {
    if (!Object.prototype.hasOwnProperty.call(this.root, 'x-idempotency')) return undefined;
    this.warnRefSiblings(this.root['x-idempotency'], { file: this.file, pointer: '/x-idempotency' });
    const defaults = this.need(this.root['x-idempotency'], { file: this.file, pointer: '/x-idempotency' }, this.contractTargets);
    // Written in place, the defaults are checked with every `x-idempotency` value of the entry file.
    if (defaults.at.file !== this.file || defaults.at.pointer !== '/x-idempotency') this.rejectDuplicateKeys(defaults.at, true);
    this.defaultsAt = defaults.at;
    if (!isPlainObject(defaults.value)) {
      this.warn(defaults.at, 'the document-level x-idempotency holds defaults and must be an object; it is ignored');
      return undefined;
    }
    return { value: defaults.value, at: defaults.at };
  }

  /**
   * Warns at each key written beside a contract's `$ref` (`{$ref: '#/…/base', lease: PT1M}`): the contract is what
   * the `$ref` points at, so the key is neither read nor checked — saying nothing would let `lease: forever` pass.
   */
  private warnRefSiblings(value: unknown, at: Location): void {
    if (!isPlainObject(value) || typeof value.$ref !== 'string') return;
    for (const key of Object.keys(value)) {
      if (key === '$ref') continue;
      this.warn(
        { file: at.file, pointer: appendPointer(at.pointer, key) },
        `\`${key}\` beside \`$ref\` in x-idempotency is not read: the contract is the one the $ref points at — move \`${key}\` into that contract, or write this contract in full without the $ref`,
      );
    }
  }

  private readContract(
    node: Record<string, unknown>,
    at: Location,
    pathItem: Record<string, unknown>,
    pathItemAt: Location,
    defaults: { value: Record<string, unknown>; at: Location } | undefined,
  ): IdempotencyContract {
    const written: Location = { file: at.file, pointer: `${at.pointer}/x-idempotency` };
    this.warnRefSiblings(node['x-idempotency'], written);
    const own = this.need(node['x-idempotency'], written, this.contractTargets);
    // A contract written in place in the entry file is checked by rejectJsonDuplicates.
    if (own.at.file !== this.file || (own.at !== written && own.at.pointer !== written.pointer)) this.rejectDuplicateKeys(own.at, true);
    if (own.value !== false) this.checkNeededRefs(node, at, pathItem, pathItemAt);
    const inputs: ContractInputs = {
      own,
      defaults,
      // buildContract looks each status up once (states share statuses: 400 twice, 409 twice).
      documentedResponse: (status) => this.documentedResponse(node, at, status),
    };
    return buildContract(inputs);
  }

  /**
   * The `$ref`s a contract's rules and generators read: parameters, request body, responses and their headers.
   * `checked` holds the shared nodes already checked (the loader's own set; a fresh one to probe).
   */
  private checkNeededRefs(node: Record<string, unknown>, at: Location, pathItem: Record<string, unknown>, pathItemAt: Location, checked = this.checked): void {
    const list = (owner: Record<string, unknown>, ownerAt: Location) => {
      if (!Array.isArray(owner.parameters)) return;
      owner.parameters.forEach((parameter, index) => {
        const followed = this.need(parameter, lazyChild(ownerAt, 'parameters', index));
        if (isPlainObject(followed.value) && followed.value.in === 'body') this.needSchema(followed.value, followed.at);
      });
    };
    list(pathItem, pathItemAt);
    list(node, at);
    if (node.requestBody !== undefined) {
      const body = this.need(node.requestBody, lazyChild(at, 'requestBody'));
      this.needContentSchemas(body.value, body.at, checked);
    }
    if (isPlainObject(node.responses)) {
      for (const code in node.responses) {
        const response = this.need(node.responses[code], lazyChild(at, 'responses', code));
        if (!isPlainObject(response.value) || checked.has(response.value)) continue;
        checked.add(response.value);
        const headers = response.value.headers;
        if (isPlainObject(headers)) {
          // Only a `$ref` can be broken: a header written in place needs no location.
          for (const name in headers) if (isReference(headers[name])) this.need(headers[name], lazyChild(response.at, 'headers', name));
        }
        if (this.version === '2.0') this.needSchema(response.value, response.at);
        else this.needContentSchemas(response.value, response.at, checked);
      }
    }
  }

  contractRefProblem(operation: OperationView): DocumentError | undefined {
    try {
      this.checkNeededRefs(operation.node, operation.at, operation.pathItem, operation.pathItemAt, new WeakSet());
      return undefined;
    } catch (error) {
      if (error instanceof DocumentError) return error;
      throw error;
    }
  }

  /** Warns at each `$ref` among an operation's parameters, request body and responses that leads nowhere. */
  private warnBrokenRefs(node: Record<string, unknown>, at: Location, pathItem: Record<string, unknown>, pathItemAt: Location): void {
    // Plain loops and fixed arguments: this runs for every operation without a contract.
    const shared = pathItem.parameters;
    if (Array.isArray(shared)) for (let i = 0; i < shared.length; i++) if (i in shared) this.warnIfBroken(shared[i], pathItemAt, 'parameters', i);
    const own = node.parameters;
    if (Array.isArray(own)) for (let i = 0; i < own.length; i++) if (i in own) this.warnIfBroken(own[i], at, 'parameters', i);
    this.warnIfBroken(node.requestBody, at, 'requestBody', undefined);
    if (isPlainObject(node.responses)) for (const code in node.responses) this.warnIfBroken(node.responses[code], at, 'responses', code);
  }

  /**
   * Warns (once per `$ref`) when `value`, the entry `first`/`second` of the object at `owner`, is a `$ref` that
   * leads nowhere. Resolved from the owner's location (same file); the entry's own location is built only for a
   * warning.
   */
  private warnIfBroken(value: unknown, owner: Location, first: string, second: string | number | undefined): void {
    if (!isReference(value)) return;
    // A 2.0 shorthand `$ref: Name` here names a parameter or response (the owner's location does not say which).
    const followed = this.follow(value, owner, first === 'parameters' || first === 'responses' ? first : undefined);
    // A remote `$ref` is not broken, only out of reach (idemkit never uses the network): not worth a warning here.
    if (followed.ok || REMOTE.test(followed.ref)) return;
    const refAt = followed.refAt === owner ? { file: owner.file, pointer: second === undefined ? appendPointer(owner.pointer, first) : appendPointer(owner.pointer, first, second) } : followed.refAt;
    const key = `${refAt.file}#${refAt.pointer}`;
    if (this.warnedRefs.has(key)) return;
    this.warnedRefs.add(key);
    this.warn({ file: refAt.file, pointer: appendPointer(refAt.pointer, '$ref') }, followed.reason);
  }

  private needContentSchemas(value: unknown, at: Location, checked = this.checked): void {
    if (!isPlainObject(value) || !isPlainObject(value.content) || checked.has(value.content)) return;
    checked.add(value.content);
    for (const mediaType in value.content) {
      const media = value.content[mediaType];
      if (isPlainObject(media)) this.needSchema(media, lazyChild(at, 'content', mediaType));
    }
  }

  private needSchema(owner: Record<string, unknown>, at: Location): void {
    // Only a `$ref` can be broken: a schema written in place needs no location.
    if (isReference(owner.schema)) this.need(owner.schema, lazyChild(at, 'schema'));
  }

  private documentedResponse(node: Record<string, unknown>, at: Location, status: number): DocumentedResponse | undefined {
    if (!isPlainObject(node.responses)) return undefined;
    const exact = String(status);
    // The range (`4XX`) is joined only when the exact code is not documented.
    let code: string | undefined = exact;
    if (!Object.prototype.hasOwnProperty.call(node.responses, exact)) {
      const range = `${Math.floor(status / 100)}XX`;
      code = Object.keys(node.responses).find((candidate) => candidate.toUpperCase() === range);
    }
    if (code === undefined) return undefined;
    // Its pointer is joined only if a finding or a generator reads it.
    const entryAt = lazyChild(at, 'responses', code);
    const followed = this.deref(node.responses[code], entryAt);
    return {
      code,
      at: entryAt,
      value: followed && isPlainObject(followed.value) ? followed.value : undefined,
      valueAt: followed?.at ?? entryAt,
    };
  }

  /**
   * Duplicate keys in the entry file's JSON, cheaply. JSON.parse keeps the last of two equal keys, so when
   * the file writes exactly the `x-idempotency` members the root and the contracted operations account for,
   * and their parsed values hold as many member names as their text does, nothing inside them was dropped.
   * Otherwise the exact scans find where: inside a contract, or an operation, path item or `paths` object
   * written twice.
   */
  private rejectJsonDuplicates(): void {
    const source = this.cache.get(this.file);
    const members = source.membersNamed('x-idempotency');
    if (!members) return;
    const rootHas = Object.prototype.hasOwnProperty.call(this.root, 'x-idempotency');
    // Each operation written once: a path item `$ref`'d from another path is read under both, but its text is
    // counted once — counted twice, its names could balance a duplicate dropped elsewhere.
    const written = new Set<Record<string, unknown>>();
    for (let i = 0; i < this.contractedHere.length; i++) written.add(this.contractedHere[i]!.node);
    const expected = written.size + (rootHas ? 1 : 0);
    if (members.count === expected) {
      const pending: unknown[] = [];
      let names = rootHas ? countNames(this.root['x-idempotency'], pending) : 0;
      for (const node of written) names += countNames(node['x-idempotency'], pending);
      if (names === members.names) return;
    }
    const inside = source.duplicateInMembers('x-idempotency');
    if (inside) throw duplicateKeyDocumentError(this.file, inside.key, inside.first, inside.second);
    if (members.count <= expected) return;
    if (rootHas) this.rejectDuplicateKeys({ file: this.file, pointer: '' }, false);
    for (const { at } of this.contractedHere) this.rejectDuplicateKeys(at, false);
    // An x-idempotency nobody accounts for may sit in an operation, path item or `paths` object written
    // twice, whose first copy JSON.parse dropped: the contract would vanish without a word (YAML: exit 2 too).
    const containers = ['', '/paths'];
    if (isPlainObject(this.root.paths)) for (const path of Object.keys(this.root.paths)) containers.push(appendPointer('/paths', path));
    for (const pointer of containers) {
      const found = source.duplicateKeyDropping(pointer, 'x-idempotency');
      if (found) throw duplicateKeyDocumentError(this.file, found.key, found.first, found.second);
    }
  }

  /** A key written twice in the object at `at` (deep: in its nested objects too) is a DocumentError at the second one. */
  private rejectDuplicateKeys(at: Location, deep: boolean): void {
    const source = this.cache.get(at.file);
    if (source.format !== 'json') {
      // YAML loaded a key written twice with a warning, judging by its own file: a contract reached through
      // a `$ref` (another file, or components) sits under no `x-idempotency` key there, yet it is one.
      if (!deep) return;
      const inside = source.warnings.find((warning) => warning.duplicate && warning.offset !== undefined && warning.pointer.startsWith(`${at.pointer}/`));
      if (inside) {
        throw duplicateKeyDocumentError(at.file, inside.duplicate!.key, source.positionAt(inside.duplicate!.firstOffset), source.positionAt(inside.offset!));
      }
      return;
    }
    const found = source.duplicateKey(at.pointer, deep);
    if (found) throw duplicateKeyDocumentError(at.file, found.key, found.first, found.second);
  }

  /** Records a file as part of the document, with the warnings its parse left (duplicate YAML keys). */
  private touch(file: string): void {
    this.touched.push(file);
    const source = this.cache.get(file);
    for (const warning of source.warnings) {
      this.warnings.push({
        at: { file, pointer: warning.pointer },
        message: warning.message,
        position: warning.offset === undefined ? undefined : source.positionAt(warning.offset),
      });
    }
  }

  private warn(at: Location, message: string): void {
    this.warnings.push({ at, message });
  }

  /**
   * Follows `$ref`s; a broken one is a {@link DocumentError} at the `$ref`. Each node a `$ref` lands on is
   * added to `reached` (as `file#pointer`) when given.
   */
  private need(value: unknown, at: Location, reached?: Set<string>): { value: unknown; at: Location } {
    const followed = this.follow(value, at, undefined, reached);
    if (followed.ok) return followed;
    const refPointer = appendPointer(followed.refAt.pointer, '$ref');
    const { line, column } = this.position({ file: followed.refAt.file, pointer: refPointer });
    if (followed.cause) throw new ReachedDocumentError(followed.cause, { ref: followed.ref, file: followed.refAt.file, line, column });
    throw new DocumentError(followed.reason, followed.refAt.file, refPointer, line, column);
  }

  private follow(value: unknown, at: Location, section?: ShorthandSection, reached?: Set<string>): Followed {
    let current: unknown = value;
    let where = at;
    // Cycle check on the targets (concrete pointers), kept only along a chain of `$ref`s: a single hop (by
    // far the most common) builds no key and no set.
    let visited: Set<string> | undefined;
    // The last `$ref`'s target (cached per `$ref` string): what the chain ends on, returned as it is.
    let landed: Followed | undefined;
    for (let hop = 0; hop < MAX_REF_HOPS; hop++) {
      if (!isPlainObject(current) || typeof current.$ref !== 'string') return landed ?? { ok: true, value, at };
      const target = this.resolveRef(current.$ref, where, hop === 0 ? section : undefined);
      if (!target.ok) return target;
      landed = target;
      reached?.add(`${target.at.file}#${target.at.pointer}`);
      const next = target.value;
      if (isPlainObject(next) && typeof next.$ref === 'string') {
        const key = `${target.at.file}#${target.at.pointer}`;
        visited ??= new Set();
        if (visited.has(key)) return { ok: false, ref: current.$ref, refAt: where, reason: `$ref '${current.$ref}' is circular — point it at a real definition` };
        visited.add(key);
      }
      current = next;
      where = target.at;
    }
    return { ok: false, ref: String((current as { $ref: unknown }).$ref), refAt: where, reason: 'too many chained $refs — point at the definition directly' };
  }

  private resolveRef(written: string, from: Location, section?: ShorthandSection): Followed {
    if (this.version === '3.1') {
      const scoped = this.resolveInResource(written, from);
      if (scoped !== undefined) return scoped;
    }
    const ref = this.version === '2.0' ? this.expandShorthand(written, from, section) : written;
    return memoised(this.refs, from, ref, () => this.resolveRefUncached(ref, from));
  }

  /**
   * OpenAPI 3.1 (JSON Schema 2020-12): a `$ref` inside a schema resource (a schema with an `$id`, or below one) is
   * resolved against that resource's URI, not the file's: `#/$defs/Body` is a pointer into the resource itself, and a
   * reference that is, or resolves against the `$id` to, another `$id` of the same file (`https://example.com/a`,
   * `address`) is that schema. `undefined` when the file has no `$id`, or the reference names none of its resources
   * (it is then resolved as a file reference, as before).
   */
  private resolveInResource(ref: string, from: Location): Followed | undefined {
    const resources = this.resourcesOf(from.file);
    if (resources === undefined) return undefined;
    // The innermost resource holding the `$ref` (its own object included): the base its references resolve against.
    let base: { readonly pointer: string; readonly uri: string } | undefined;
    for (let pointer = from.pointer; ; pointer = pointer.slice(0, pointer.lastIndexOf('/'))) {
      const uri = resources.byPointer.get(pointer);
      if (uri !== undefined) {
        base = { pointer, uri };
        break;
      }
      if (pointer === '') break;
    }
    const hash = ref.indexOf('#');
    const target = hash === -1 ? ref : ref.slice(0, hash);
    const fragment = hash === -1 ? '' : ref.slice(hash + 1);
    let root: string | undefined;
    if (target === '') {
      // A fragment alone: inside the innermost resource, when there is one.
      root = base?.pointer;
    } else {
      let absolute: string;
      try {
        absolute = new URL(target, base?.uri).href;
      } catch {
        return undefined; // a relative file path outside any resource: a file reference
      }
      root = resources.byUri.get(absolute);
    }
    if (root === undefined || (root === '' && target === '')) return undefined;
    let tokens: string[];
    try {
      tokens = parsePointer(decodeURIComponent(fragment));
    } catch {
      return undefined; // said where the file resolution says it
    }
    const pointer = appendPointer(root, ...tokens);
    const value = valueAt(this.cache.get(from.file).value, parsePointer(pointer));
    // Not in the resource: resolved in the file, as before (documents made from JSON Schema files keep their `$id`s and
    // still point from the document's root).
    return value === undefined ? undefined : { ok: true, value, at: { file: from.file, pointer } };
  }

  /** The `$anchor` (and `$dynamicAnchor`) names of a file's schemas, each with its pointer; a name declared twice names none. */
  private anchorsOf(file: string, source: { readonly text: string; readonly value: unknown }): Map<string, string> {
    const known = this.anchors.get(file);
    if (known !== undefined) return known;
    const found = new Map<string, string>();
    // Most files declare none: one search of the text, no walk.
    if (/\$(?:dynamic)?[aA]nchor\b/.test(source.text)) {
      const twice = new Set<string>();
      const walk = (node: unknown, pointer: string, depth: number, seen: Set<object>): void => {
        if (depth > 256 || node === null || typeof node !== 'object' || seen.has(node)) return;
        seen.add(node);
        if (Array.isArray(node)) {
          node.forEach((item, i) => walk(item, `${pointer}/${i}`, depth + 1, seen));
          return;
        }
        for (const keyword of ['$anchor', '$dynamicAnchor']) {
          const name = (node as Record<string, unknown>)[keyword];
          if (typeof name !== 'string') continue;
          if (found.has(name) && found.get(name) !== pointer) twice.add(name);
          found.set(name, pointer);
        }
        for (const key in node) {
          if (DATA_KEYS.has(key) || key.startsWith('x-')) continue;
          walk((node as Record<string, unknown>)[key], appendPointer(pointer, key), depth + 1, seen);
        }
      };
      walk(source.value, '', 0, new Set());
      for (const name of twice) found.delete(name);
    }
    this.anchors.set(file, found);
    return found;
  }

  /** The schema resources (`$id`s) of a file, by pointer and by absolute URI; `undefined` when it has none. */
  private resourcesOf(file: string): { readonly byPointer: Map<string, string>; readonly byUri: Map<string, string> } | undefined {
    if (this.resources.has(file)) return this.resources.get(file);
    let found: { byPointer: Map<string, string>; byUri: Map<string, string> } | undefined;
    const source = this.cache.get(file);
    // Most files name no `$id`: one search of the text, no walk.
    if (/\$id\b/.test(source.text)) {
      found = { byPointer: new Map(), byUri: new Map() };
      const twice = new Set<string>();
      const walk = (node: unknown, pointer: string, baseUri: string | undefined, depth: number, seen: Set<object>): void => {
        if (depth > 256 || node === null || typeof node !== 'object' || seen.has(node)) return;
        seen.add(node);
        let uri = baseUri;
        if (!Array.isArray(node) && typeof (node as Record<string, unknown>)['$id'] === 'string') {
          try {
            uri = new URL((node as Record<string, string>)['$id']!, baseUri).href.replace(/#$/, '');
            found!.byPointer.set(pointer, uri);
            if (found!.byUri.has(uri)) twice.add(uri);
            found!.byUri.set(uri, pointer);
          } catch {
            // A relative $id with no absolute base: not a URI this resolver can use.
          }
        }
        if (Array.isArray(node)) node.forEach((item, i) => walk(item, `${pointer}/${i}`, uri, depth + 1, seen));
        else {
          for (const key in node) {
            // Data, not schemas: an example or a default may well hold an `$id` of its own (JSON-LD, a stored schema).
            if (DATA_KEYS.has(key) || key.startsWith('x-')) continue;
            walk((node as Record<string, unknown>)[key], appendPointer(pointer, key), uri, depth + 1, seen);
          }
        }
      };
      walk(source.value, '', undefined, 0, new Set());
      // One URI for two schemas names neither: such references resolve in the file.
      for (const uri of twice) found.byUri.delete(uri);
      if (found.byPointer.size === 0) found = undefined;
    }
    this.resources.set(file, found);
    return found;
  }

  /**
   * Swagger 2.0's `$ref: Pet` shorthand (no `#`, no path), as swagger tools read it: `#/parameters/Pet` for a
   * parameter entry, `#/responses/Pet` for a response entry, `#/definitions/Pet` elsewhere — when that entry
   * exists in the same file; otherwise the `$ref` stays a (missing) file name.
   */
  private expandShorthand(ref: string, from: Location, given?: ShorthandSection): string {
    if (!SHORTHAND.test(ref)) return ref;
    const source = this.cache.get(from.file).value;
    const pointer = from.pointer;
    const section = given ?? (PARAMETER_ENTRY.test(pointer) ? 'parameters' : RESPONSE_ENTRY.test(pointer) ? 'responses' : 'definitions');
    const entries = isPlainObject(source) ? source[section] : undefined;
    return isPlainObject(entries) && Object.prototype.hasOwnProperty.call(entries, ref) ? `#${appendPointer(`/${section}`, ref)}` : ref;
  }

  private resolveRefUncached(ref: string, from: Location): Followed {
    const hash = ref.indexOf('#');
    const filePart = hash === -1 ? ref : ref.slice(0, hash);
    const fragment = hash === -1 ? '' : ref.slice(hash + 1);
    let file = from.file;
    if (filePart !== '') {
      if (REMOTE.test(filePart)) {
        return { ok: false, ref, refAt: from, reason: `$ref '${ref}' is remote and idemkit never uses the network — save the file next to this one and use a relative path` };
      }
      try {
        const decoded = decodeURIComponent(filePart);
        file = this.cache.name(FILE_URL.test(decoded) ? fileURLToPath(decoded) : isAbsolute(decoded) ? decoded : resolve(dirname(from.file), decoded));
      } catch {
        return { ok: false, ref, refAt: from, reason: `$ref '${ref}' is not a valid reference — write a relative path and/or #/json/pointer` };
      }
      // A pipe, a socket or a device (`/dev/stdin`, a FIFO a pull request adds): reading it waits for a writer that
      // never comes, and lint hung. The document itself may be one (`lint <(curl …)`, `-`): a reference may not.
      if (file !== from.file && notRegularFile(file)) {
        return { ok: false, ref, refAt: from, reason: `$ref '${ref}' names a pipe, socket or device, not a file — point the $ref at a .yaml or .json file` };
      }
      const repository = this.repository();
      if (repository !== undefined && !isInside(realFile(file), repository)) {
        return {
          ok: false,
          ref,
          refAt: from,
          reason: `$ref '${ref}' leads out of the document's git repository (${repository}), and idemkit reads no file outside it (a change to the spec could otherwise make a report quote any file of the machine) — copy the file into the repository and point at the copy`,
        };
      }
    }
    let tokens: string[] = [];
    // OpenAPI 3.1 (JSON Schema 2020-12): a plain-name fragment (`#order`) names the schema whose `$anchor` it is.
    const anchor = ANCHOR_NAME.test(fragment) ? fragment : undefined;
    if (anchor === undefined) {
      try {
        tokens = parsePointer(decodeURIComponent(fragment));
      } catch {
        return { ok: false, ref, refAt: from, reason: `$ref '${ref}' has a fragment that is not a JSON Pointer — write it as #/components/…` };
      }
    }
    let source;
    try {
      source = this.cache.get(file);
    } catch (error) {
      if (!(error instanceof DocumentError)) throw error;
      if (/file not found/.test(error.message)) {
        return { ok: false, ref, refAt: from, reason: `$ref '${ref}' points at a missing file '${filePart}' — fix the path (it is relative to the file that holds the $ref)` };
      }
      // A byte that is not UTF-8: said where it is in that file, as a syntax error is, naming the $ref that led there.
      if (error.message.startsWith(NOT_UTF8)) {
        return { ok: false, ref, refAt: from, reason: `$ref '${ref}' points at '${filePart}', which is not UTF-8: ${error.message}`, cause: error };
      }
      // The file as a whole cannot be used (a directory, unreadable, UTF-16, empty): said at the $ref.
      if (error.pointer === '') {
        const why = error.message.startsWith('is a directory') ? `a directory, not a file — point it at the YAML or JSON file` : error.message;
        return { ok: false, ref, refAt: from, reason: `$ref '${ref}' points at '${filePart}': ${why}` };
      }
      // A syntax error in it: said where it is (the cause), naming the $ref that led there.
      return { ok: false, ref, refAt: from, reason: `$ref '${ref}' points at '${filePart}', which does not parse: ${error.message}`, cause: error };
    }
    // Another file whose whole content is one string, number or null is no document: a `.env`, a key, `/etc/passwd` —
    // text the findings would otherwise quote into a CI log. Refused at the $ref without a word of it. A boolean is a
    // JSON Schema of its own (`true`: any value, OpenAPI 3.1).
    if (filePart !== '' && (source.value === null || (typeof source.value !== 'object' && typeof source.value !== 'boolean'))) {
      return { ok: false, ref, refAt: from, reason: `$ref '${ref}' points at '${filePart}', which is plain text, not a YAML or JSON document (no mapping or list at its top) — point the $ref at an OpenAPI or JSON Schema file` };
    }
    if (!this.touched.includes(file)) this.touch(file);
    if (anchor !== undefined) {
      const pointer = this.anchorsOf(file, source).get(anchor);
      if (pointer === undefined) {
        const where = filePart === '' ? 'this file' : filePart;
        return { ok: false, ref, refAt: from, reason: `$ref '${ref}' names the anchor '${anchor}', which no schema of ${where} declares once (\$anchor) — fix the name, or write a JSON Pointer (#/components/…)` };
      }
      tokens = parsePointer(pointer);
    }
    const value = valueAt(source.value, tokens);
    if (value === undefined) {
      const where = filePart === '' ? 'this file' : filePart;
      return { ok: false, ref, refAt: from, reason: `$ref '${ref}' points at nothing: '#${fragment}' does not exist in ${where} — fix the pointer or add the definition` };
    }
    return { ok: true, value, at: { file, pointer: tokens.length === 0 ? '' : appendPointer('', ...tokens) } };
  }

  get(at: Location): unknown {
    try {
      return valueAt(this.cache.get(at.file).value, parsePointer(at.pointer));
    } catch {
      return undefined;
    }
  }

  deref(value: unknown, at: Location): { readonly value: unknown; readonly at: Location } | undefined {
    // Not a `$ref` (most nodes the rules ask about): itself, where it is — one object, not follow's and a copy.
    // A new object each call, never the cached target: the views hand it on as their own result.
    if (!isPlainObject(value) || typeof value.$ref !== 'string') return { value, at };
    const followed = this.follow(value, at);
    return followed.ok ? { value: followed.value, at: followed.at } : undefined;
  }

  source(file: string = this.file): DocumentSource | undefined {
    // The file itself: its text, for a big JSON file with non-ASCII characters, is made only when read.
    return this.cache.has(file) ? this.cache.get(file) : undefined;
  }

  position(at: Location): Position {
    try {
      return this.cache.get(at.file).position(at.pointer);
    } catch {
      return { line: 1, column: 1 };
    }
  }
}

/**
 * An operation as the loader lists it, its {@link OperationView.parameters} merged on first read. A class, not an
 * object literal with a getter: V8 keeps such a literal in dictionary mode, which makes every read of `op.node`,
 * `op.at` or `op.contract` by the rules of a big document a hash lookup.
 */
class LoadedOperation implements OperationView {
  // Private fields: a spread, `JSON.stringify` or deep comparison of an operation sees its data members only.
  readonly #document: ApiDocument;
  #parameters: readonly ParameterView[] | undefined;
  constructor(
    document: ApiDocument,
    readonly method: string,
    readonly path: string,
    readonly operationId: string | undefined,
    readonly node: Record<string, unknown>,
    readonly at: Location,
    readonly pathItem: Record<string, unknown>,
    readonly pathItemAt: Location,
    readonly contract: IdempotencyContract | undefined,
    readonly label: string,
  ) {
    this.#document = document;
  }

  get parameters(): readonly ParameterView[] {
    return (this.#parameters ??= operationParameters(this.#document, this.pathItem, this.pathItemAt, this.node, this.at));
  }
}

/**
 * The parameters that apply to an operation: path-level ones overridden by operation-level ones with the
 * same name and location (OpenAPI's rule; header names case-insensitive), `$ref`s followed, broken ones
 * left out. Path-level first, then operation-level; an overriding entry takes the operation-level place.
 */
export function operationParameters(
  document: ApiDocument,
  pathItem: Record<string, unknown>,
  pathItemAt: Location,
  node: Record<string, unknown>,
  at: Location,
): readonly ParameterView[] {
  const shared = Array.isArray(pathItem.parameters) ? pathItem.parameters : undefined;
  const own = Array.isArray(node.parameters) ? node.parameters : undefined;
  // No entries at all (`parameters: []` is common): nothing to merge.
  if ((shared === undefined || shared.length === 0) && (own === undefined || own.length === 0)) return [];
  const byKey = new Map<string, ParameterView>();
  if (shared !== undefined) readParameters(document, shared, pathItemAt, byKey);
  if (own !== undefined) readParameters(document, own, at, byKey);
  return [...byKey.values()];
}

/** Adds the entries of one `parameters` list to `byKey` (see {@link operationParameters}). */
function readParameters(document: ApiDocument, list: readonly unknown[], ownerAt: Location, byKey: Map<string, ParameterView>): void {
  for (let index = 0; index < list.length; index++) {
    if (!(index in list)) continue; // a hole in a list built in code, as forEach skips it
    // `parameters` and an index need no escaping: the pointer is joined as is.
    const entryAt = { file: ownerAt.file, pointer: `${ownerAt.pointer}/parameters/${index}` };
    const followed = document.deref(list[index], entryAt);
    if (!followed || !isPlainObject(followed.value)) continue;
    const parameter = followed.value;
    if (typeof parameter.name !== 'string' || typeof parameter.in !== 'string') continue;
    const key = `${parameter.in}\u0000${parameter.in === 'header' ? parameter.name.toLowerCase() : parameter.name}`;
    byKey.delete(key); // re-inserted, so an overriding entry keeps its operation-level order
    byKey.set(key, {
      name: parameter.name,
      in: parameter.in,
      required: parameter.required === true,
      node: parameter,
      at: entryAt,
      valueAt: followed.at,
    });
  }
}

/**
 * How many member names a parsed JSON value holds, nested ones included (any depth: no recursion). `pending` is
 * the caller's work list, lent so that counting many values grows one list: it is used as a stack up to `top`,
 * never shortened (popping would shrink it, to be grown again by the next value).
 */
function countNames(value: unknown, pending: unknown[]): number {
  let names = 0;
  let top = 0;
  pending[top++] = value;
  while (top > 0) {
    const node = pending[--top];
    if (node === null || typeof node !== 'object') continue;
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) pending[top++] = node[i];
      continue;
    }
    for (const key in node) {
      if (!Object.prototype.hasOwnProperty.call(node, key)) continue;
      names += 1;
      pending[top++] = (node as Record<string, unknown>)[key];
    }
  }
  return names;
}

/** A `$ref` object (anything else is followed no further). */
function isReference(value: unknown): value is Record<string, unknown> & { $ref: string } {
  return isPlainObject(value) && typeof value.$ref === 'string';
}

/**
 * The warning for a path template that holds a query (`/receipts?before={before}`, RFC 6570's `/search{?q}`) or a
 * fragment, or `undefined`. Requests carry the path alone: generated guards match the route of the path without
 * what follows it, and generated clients send no fragment. `written` tells whether the document has a path, to
 * say when the path alone is already one of them.
 */
function pathQueryWarning(path: string, written: (path: string) => boolean): string | undefined {
  let cut = path.search(/[?#]/);
  if (cut === -1) return undefined;
  const expansion = cut > 0 && path[cut - 1] === '{';
  if (expansion) cut -= 1;
  const bare = path.slice(0, cut);
  if (!expansion && path[cut] === '#') {
    const also = written(bare) ? `, which the document also has,` : '';
    return `path '${path}' holds a fragment, which no request carries: generated guards match the route of '${bare}'${also} and generated clients call it — if the fragment tells this operation apart from another of the same method there (AWS's \`#Action=…\`), give each its own path or mount each guard on its own handler, never both through one route`;
  }
  const what = expansion ? 'query expansion' : 'query string';
  const fix = written(bare) ? `move its operations to '${bare}', which the document already has,` : `write '${bare}'`;
  return `path '${path}' holds a ${what}: a path template is the path alone, so generated guards match the route of '${bare}' and read no parameter from its query — ${fix} and declare each query value as an \`in: query\` parameter`;
}

/** Whether an operation of a path item carries an `x-idempotency` contract that is not switched off. */
function hasContract(pathItem: Record<string, unknown>): boolean {
  return HTTP_METHODS.some((method) => {
    const operation = pathItem[method];
    return isPlainObject(operation) && operation['x-idempotency'] !== undefined && operation['x-idempotency'] !== false;
  });
}

/** A file's real path (symbolic links resolved), or the path as given when it does not exist. */
/** Whether `file` is a pipe, a socket or a device (`false` for a regular file, a directory, or none). */
function notRegularFile(file: string): boolean {
  let stats: Stats;
  try {
    stats = statSync(file);
  } catch {
    return false;
  }
  return stats.isFIFO() || stats.isSocket() || stats.isCharacterDevice() || stats.isBlockDevice();
}

function realFile(file: string): string {
  try {
    return realpathSync(file);
  } catch {
    return file;
  }
}

/** Whether `file` is `dir` or under it. */
function isInside(file: string, dir: string): boolean {
  const rel = relative(dir, file);
  // `..name` is a file under `dir`; `..` and `../…` are not.
  return rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel);
}
