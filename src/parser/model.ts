/**
 * The typed, normalised view of an OpenAPI document and its `x-idempotency` contracts that rules and
 * generators read. Every node keeps a {@link Location}; positions (line/column) are computed lazily.
 */
import type { DocumentError } from '../errors.js';
import type { KeyLocation, KeyPlace, ScopePart, ProviderKey } from '../runtime/contract.js';

export type { KeyLocation, KeyPlace, ScopePart, ProviderKey };

/** Where a node lives: the file and the JSON Pointer inside that file (RFC 6901). */
export interface Location {
  /** Absolute path of the file that holds the node. */
  readonly file: string;
  /** JSON Pointer inside that file, `''` for the root. */
  readonly pointer: string;
}

/** 1-based line and column. */
export interface Position {
  readonly line: number;
  readonly column: number;
}

/** A duration as written and as milliseconds (`ms` undefined when it does not parse). */
export interface Duration {
  readonly raw: unknown;
  readonly ms: number | undefined;
}

export type StateName = 'missingKey' | 'invalidKey' | 'mismatch' | 'inProgress' | 'abandoned' | 'storeUnavailable';

/** Every state name, in the order the design lists them. */
export const STATE_NAMES: readonly StateName[] = ['missingKey', 'invalidKey', 'mismatch', 'inProgress', 'abandoned', 'storeUnavailable'];

/** An entry of the operation's `responses` that a state's status resolved to. */
export interface DocumentedResponse {
  /** The key as written under `responses`: the exact code (`'409'`) or its range (`'4XX'`). */
  readonly code: string;
  /** The entry under the operation's `responses` (where a `$ref` would sit). */
  readonly at: Location;
  /** The response object, `$ref`s followed (`undefined` when the reference is broken). */
  readonly value: Record<string, unknown> | undefined;
  /** Where the response object lives after following `$ref`s. */
  readonly valueAt: Location;
}

/** A state's answer: the status from the contract and, when documented, the operation's response for it. */
export interface StateResponse {
  readonly status: number | undefined;
  /** The operation's response for `status` (exact code first, then `4XX`-style range); absent when undocumented. */
  readonly response?: DocumentedResponse;
}

/**
 * One operation's contract after the document defaults were deep-merged under it.
 * Absent fields stay `undefined` so rules can tell "missing" from "set".
 */
export interface IdempotencyContract {
  /** `false` when the operation says `x-idempotency: false`; all other fields are then empty. */
  readonly enabled: boolean;
  readonly key: {
    /** Where the key travels: `header` (the default), `query` or `body`. */
    readonly in: KeyLocation;
    /** The header name (default `Idempotency-Key`), the query parameter's name, or the JSON Pointer into the body. */
    readonly name: string;
    readonly required: boolean | undefined;
    readonly maxLength: number | undefined;
    readonly pattern: string | undefined;
  };
  readonly scope: readonly ScopePart[] | undefined;
  readonly fingerprint: { readonly include: 'all' | readonly string[]; readonly exclude: readonly string[] } | undefined;
  readonly ttl: Duration | undefined;
  readonly lease: Duration | undefined;
  readonly retry:
    | {
        readonly deadline: Duration | undefined;
        readonly maxAttempts: number | undefined;
        readonly backoff: { readonly initial: Duration | undefined; readonly max: Duration | undefined; readonly jitter: string | undefined } | undefined;
      }
    | undefined;
  readonly effect:
    | {
        readonly owner: string | undefined;
        readonly external: boolean | undefined;
        readonly providerKey: ProviderKey | undefined;
        readonly statusRoute: string | undefined;
      }
    | undefined;
  readonly transient: readonly number[] | undefined;
  readonly responses: {
    /** `sendOnFirst`: whether the first answer carries the header as `false` (default true). */
    readonly replay: { readonly header: string; readonly sendOnFirst: boolean } | undefined;
  } & { readonly [S in StateName]: StateResponse | undefined };
  readonly unknownOutcome: 'status-route' | 'surface' | undefined;
  /** The merged raw value (after defaults). */
  readonly raw: unknown;
  /** Schema violations of the raw value (rule `contract-invalid` reports them). */
  readonly schemaErrors: readonly { readonly at: Location; readonly message: string }[];
  /**
   * Location of a field of the merged contract, e.g. `at('fingerprint', 'include', 2)`: the node in the
   * operation's `x-idempotency` or in the document defaults it came from; for an absent field, the
   * nearest present ancestor (so a "missing" finding points at the contract that lacks it).
   */
  at(...path: (string | number)[]): Location;
}

/** One operation of `paths` (path-level `$ref`s followed). */
export interface OperationView {
  /** Lower-case HTTP method. */
  readonly method: string;
  /** The path template as written under `paths`. */
  readonly path: string;
  readonly operationId: string | undefined;
  /** The operation object. */
  readonly node: Record<string, unknown>;
  readonly at: Location;
  /** The path item object that holds the operation (for path-level parameters). */
  readonly pathItem: Record<string, unknown>;
  readonly pathItemAt: Location;
  /** `undefined` when the operation has no `x-idempotency`. */
  readonly contract: IdempotencyContract | undefined;
  /** `METHOD /path` (operationId), for messages. */
  readonly label: string;
  /**
   * The parameters that apply to the operation: path-level ones overridden by operation-level ones with the
   * same `name` + `in`, `$ref`s followed (broken references left out). Computed on first access.
   */
  readonly parameters?: readonly ParameterView[];
}

/** One parameter that applies to an operation, `$ref` followed. */
export interface ParameterView {
  readonly name: string;
  /** `query`, `header`, `path`, `cookie` (or `body` / `formData` in 2.0). */
  readonly in: string;
  readonly required: boolean;
  /** The parameter object (after `$ref`). */
  readonly node: Record<string, unknown>;
  /** The entry in the `parameters` list (where a `$ref` would sit): where a finding about it should point. */
  readonly at: Location;
  /** Where the parameter object lives after following `$ref`s. */
  readonly valueAt: Location;
}

export type OpenApiVersion = '2.0' | '3.0' | '3.1';

/** A loaded file's format and text. */
export interface DocumentSource {
  readonly format: 'json' | 'yaml';
  /** The file's text, without a byte-order mark (made on first use for a big JSON file with non-ASCII characters). */
  readonly text: string;
  /**
   * JSON text for searches that need no offsets into the file: `text`, or for a big JSON file with non-ASCII
   * characters the ASCII text JSON.parse read, each such character a `\u` escape (same members, names and literals).
   */
  readonly scanText: string;
  /** Whether the file's text writes a `\u` escape (`scanText`'s own escapes not counted). */
  writesUnicodeEscape(): boolean;
}

/** A loaded document: its raw tree, its operations and lazy `$ref` / position services. */
export interface ApiDocument {
  /** Absolute path of the entry file. */
  readonly file: string;
  readonly version: OpenApiVersion;
  readonly root: Record<string, unknown>;
  readonly operations: readonly OperationView[];
  /** Location of the document-level `x-idempotency` defaults, when present. */
  readonly defaultsAt: Location | undefined;
  /** Value at a location (in any loaded file), or `undefined`. */
  get(at: Location): unknown;
  /**
   * Follow `$ref`s (local or external, relative to the file that holds them) from a node until a
   * non-reference; returns the target and where it lives, or `undefined` when a reference is broken.
   */
  deref(value: unknown, at: Location): { readonly value: unknown; readonly at: Location } | undefined;
  /** Line/column of a location, computed on demand. */
  position(at: Location): Position;
  /** Documents problems unrelated to idempotency (reported once as warnings). */
  readonly warnings: readonly DocumentWarning[];
  /** Every file loaded so far (the entry file first, then external `$ref` targets), absolute paths. */
  readonly files?: readonly string[];
  /** The format and text of a loaded file (the entry file when omitted), or `undefined` when it is not loaded. */
  source?(file?: string): DocumentSource | undefined;
  /**
   * The first broken `$ref` among those a contract on `operation` would need (parameters, request body and
   * response schemas and headers), as the error loading would stop with once the operation has a contract;
   * `undefined` when they all resolve. For `init`, which must not write a contract that makes the file unloadable.
   */
  contractRefProblem?(operation: OperationView): DocumentError | undefined;
}

/** A problem in a document unrelated to idempotency; it did not stop the document from loading. */
export interface DocumentWarning {
  readonly at: Location;
  readonly message: string;
  /** The exact position when it is known and the pointer cannot express it (e.g. a YAML syntax warning). */
  readonly position?: Position;
}
