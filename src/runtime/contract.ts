/**
 * The compiled form of one operation's `x-idempotency` contract: what generated `contracts.ts`
 * files emit as typed constants and what the guard core and the client engine run on.
 * Plain data only (no functions), so it can be written as a literal and compared in tests.
 *
 * This file is copied into users' generated output: it imports nothing.
 */

/** One part of the key scope besides the operation itself. */
export type ScopePart =
  | { readonly kind: 'principal' }
  | { readonly kind: 'global' }
  | {
      readonly kind: 'header' | 'path' | 'query';
      readonly name: string;
      /**
       * The operation declares the parameter optional (`required` not true): a request without it is scoped by its
       * absence (xendit's `for-user-id`: none is the account itself) instead of answered 400.
       */
      readonly optional?: true;
    };

/** Where a request carries its idempotency key. */
export type KeyLocation = 'header' | 'query' | 'body';

/** Where one operation's key travels and under which name. */
export interface KeyPlace {
  /** A request header (the default), a query parameter, or a field of the body. */
  readonly in: KeyLocation;
  /**
   * The header name as declared (compare case-insensitively), the query parameter's name, or the JSON Pointer
   * (RFC 6901) to the body field, e.g. `/ClientToken`.
   */
  readonly name: string;
}

/** Backoff between attempts of one intent. Times in milliseconds. */
export interface CompiledBackoff {
  readonly initialMs: number;
  readonly maxMs: number;
  readonly jitter: 'full' | 'equal' | 'none';
}

/** How the provider of an external effect deduplicates a repeated call. */
export type ProviderKey = 'forward' | 'derived' | 'none';

/** The status each guard state answers with, and the replay marker header. */
export interface CompiledResponses {
  /** Header that marks a replayed (or first) response: `Idempotent-Replayed`. */
  readonly replayHeader: string;
  /**
   * `false` when the replay header is sent on replays only (`true`), never as `false` on the first answer
   * (`responses.replay.sendOnFirst: false`: for SDKs that read any value as "replayed"). Default `true`. A
   * generated client then takes an answer with neither the flag nor the guard's `Idempotency-Problem` header for
   * the handler's own.
   */
  readonly replayOnFirst?: boolean;
  readonly missingKey: number;
  readonly invalidKey: number;
  readonly mismatch: number;
  readonly inProgress: number;
  readonly abandoned: number;
  readonly storeUnavailable: number;
}

export interface CompiledContract {
  /** operationId, or `METHOD path` when the document has none. Part of the record id. */
  readonly operationId: string;
  /** Upper-case HTTP method. */
  readonly method: string;
  /** The OpenAPI path template, e.g. `/v1/demo-requests/{id}`. */
  readonly path: string;
  /**
   * The paths the document serves the operation under, when not the root: the path of each OpenAPI 3
   * `servers` URL (the operation's or its path's own `servers` when it has them), or Swagger 2.0 `basePath`;
   * e.g. `['/v1']` makes the operation's address `/v1` + {@link path}. Absent when the document names none.
   */
  readonly basePaths?: readonly string[];
  readonly key: KeyPlace & {
    readonly required: boolean;
    /** Longest accepted key, in characters (default 255; at least 64). */
    readonly maxLength: number;
    /** Optional ECMAScript regular expression source the whole key must match. */
    readonly pattern?: string;
  };
  /** Ordered scope parts; empty means the operation alone (treated as global). */
  readonly scope: readonly ScopePart[];
  readonly fingerprint: {
    /** JSON Pointers into the body, or `'all'` for the whole body. */
    readonly include: 'all' | readonly string[];
    /** JSON Pointers removed from what `include` selected (a `query:NAME` exclusion is out of {@link query} instead). */
    readonly exclude: readonly string[];
    /** Declared query parameter names that take part in the fingerprint. */
    readonly query: readonly string[];
    /**
     * Set when the operation takes a free-form object in the query (an exploded `form` object parameter with
     * `additionalProperties`, `patternProperties` or no `properties`): any name a request carries may be one of its
     * members, so every query parameter of the request takes part, not only those of {@link query}.
     */
    readonly queryAll?: true;
    /** With {@link queryAll}: the query parameters left out all the same (`fingerprint.exclude: [query:NAME]`). */
    readonly queryExclude?: readonly string[];
  };
  /** Retention of terminal records (replay window), in milliseconds. */
  readonly ttlMs: number;
  /** How long an `in_progress` reservation is owned before it counts as abandoned, in ms. */
  readonly leaseMs: number;
  readonly retry: {
    /** One deadline for the whole intent, in ms. */
    readonly deadlineMs: number;
    readonly maxAttempts: number;
    readonly backoff: CompiledBackoff;
  };
  readonly effect: {
    readonly owner: string;
    readonly external: boolean;
    readonly providerKey: ProviderKey;
    /** operationId of the safe GET that reads an intent's outcome. */
    readonly statusRoute?: string;
  };
  /** Handler statuses that release the key instead of completing it (default 429, 503). */
  readonly transient: readonly number[];
  readonly responses: CompiledResponses;
  /** What a client does when no terminal result came within the deadline. */
  readonly unknownOutcome: 'status-route' | 'surface';
}

/**
 * The path of a contract's path template as requests carry it: without a fragment or query the document writes after
 * it (AWS's `/lenses/{LensAlias}#ClientRequestToken`, `/#Action=…`, a `?city={city}`), which no route holds. `{?x}` and
 * `{#x}` (RFC 6570 expansions) are a parameter's name, not cut.
 */
export function routePath(template: string): string {
  return template.replace(/(?<!\{)[?#][^]*$/, '');
}
