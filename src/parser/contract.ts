/** Builds an operation's normalised {@link IdempotencyContract} from its `x-idempotency` value and the defaults. */
import { parseDuration } from './duration.js';
import { deepMerge, isPlainObject } from './merge.js';
import {
  STATE_NAMES,
  type DocumentedResponse,
  type Duration,
  type IdempotencyContract,
  type KeyLocation,
  type Location,
  type ProviderKey,
  type ScopePart,
  type StateName,
  type StateResponse,
} from './model.js';
import { appendPointer } from './pointer.js';
import { CONTRACT_DEFAULTS } from './compile.js';
import { exponentialBacktracking, exponentialPatternMessage, polynomialPatternMessage, slowKeyPatternDegree } from './regex-ambiguity.js';
import { DEFAULT_REPLAY_HEADERS, PROBLEM_HEADER } from '../runtime/wire.js';
import { validateContractValue } from './schema.js';

/** A value and where it lives. */
export interface Located<T = unknown> {
  readonly value: T;
  readonly at: Location;
}

/** What the builder needs from the document: the operation's documented responses. */
export interface ContractInputs {
  /** The operation's own `x-idempotency` (after `$ref`). */
  readonly own: Located;
  /** The document-level defaults (after `$ref`), when they are an object. */
  readonly defaults: Located<Record<string, unknown>> | undefined;
  /** Finds the operation's documented response for a status (exact, then range). */
  documentedResponse(status: number): DocumentedResponse | undefined;
}

const DEFAULT_KEY_HEADER = 'Idempotency-Key';

/** Reads one operation's contract. Never throws on user input: problems become `schemaErrors`. */
export function buildContract(inputs: ContractInputs): IdempotencyContract {
  const { own, defaults } = inputs;
  const enabled = own.value !== false;
  const usesDefaults = enabled && defaults !== undefined;
  let raw: unknown;
  if (!enabled) raw = false;
  else if (isPlainObject(own.value)) raw = usesDefaults ? deepMerge(defaults.value, own.value) : own.value;
  else raw = usesDefaults ? defaults.value : own.value === true ? {} : own.value;
  if (usesDefaults && isPlainObject(own.value) && isPlainObject(raw)) raw = withOwnKeyPlace(raw, own.value, defaults.value);

  const at = (...path: (string | number)[]): Location => {
    const tokens = path.map(String);
    let depth = 0;
    while (depth < tokens.length && has(raw, tokens, depth + 1)) depth += 1;
    const prefix = tokens.slice(0, depth);
    if (depth > 0 && isPlainObject(own.value) && has(own.value, prefix)) {
      return { file: own.at.file, pointer: appendPointer(own.at.pointer, ...prefix) };
    }
    if (depth > 0 && usesDefaults && has(defaults.value, prefix)) {
      return { file: defaults.at.file, pointer: appendPointer(defaults.at.pointer, ...prefix) };
    }
    return own.at;
  };

  const schemaErrors: { at: Location; message: string }[] = [];
  // A non-boolean, non-object own value is reported as itself, not as the defaults it would have used.
  const violations = validateContractValue(enabled && !isPlainObject(own.value) && own.value !== true ? own.value : raw);
  for (const violation of violations) schemaErrors.push({ at: at(...violation.path), message: violation.message });

  const source = isPlainObject(raw) ? raw : {};
  const key = isPlainObject(source.key) ? source.key : {};
  const pattern = typeof key.pattern === 'string' ? key.pattern : undefined;
  if (pattern !== undefined) {
    let valid = true;
    try {
      new RegExp(pattern);
    } catch (error) {
      valid = false;
      schemaErrors.push({
        at: at('key', 'pattern'),
        message: `x-idempotency.key.pattern is not a valid regular expression (${(error as Error).message})`,
      });
    }
    if (valid) {
      // The guard runs the pattern on every key any client sends: one that may take exponential time, or that cannot be
      // checked for it, is refused.
      const exponential = exponentialBacktracking(pattern);
      if (exponential !== null) schemaErrors.push({ at: at('key', 'pattern'), message: exponentialPatternMessage(exponential) });
      else {
        // Polynomial: n^d ways to split a near-miss key of n characters among d repeats, n up to the key's bound.
        const own = typeof key.maxLength === 'number' ? key.maxLength : CONTRACT_DEFAULTS.keyMaxLength;
        const bound = key.query === undefined && key.body === undefined ? Math.max(own, CONTRACT_DEFAULTS.keyMinMaxLength) : own;
        const degree = slowKeyPatternDegree(pattern, bound);
        if (degree !== undefined) schemaErrors.push({ at: at('key', 'pattern'), message: polynomialPatternMessage(degree, bound) });
      }
    }
  }

  // A transient status frees the key for a retry to run the handler again: only for answers that did not act.
  if (Array.isArray(source.transient)) {
    const effect = isPlainObject(source.effect) ? source.effect : {};
    // An external effect whose provider dedupes nothing: a 503 may come after the provider acted.
    const unkeyedExternal = effect.external === true && effect.providerKey === 'none';
    source.transient.forEach((status, i) => {
      if (!Number.isInteger(status)) return;
      const code = status as number;
      if (code >= 100 && code < 400) {
        schemaErrors.push({
          at: at('transient', i),
          message: `x-idempotency.transient lists ${String(code)}, which is no failure: a transient answer frees the key, so a retry would run the handler again after every ${String(code)} — list only failures that did not act, such as 429 and 503`,
        });
      } else if (code >= 500 && code < 600 && code !== 503) {
        // A 500 is what a handler that threw half-way answers; 502 and 504 what one answers when its call to another
        // service failed or timed out — which that service may have carried out. The key stays for reconciliation.
        schemaErrors.push({
          at: at('transient', i),
          message: `x-idempotency.transient lists ${String(code)}, an answer that may follow an effect (a handler that failed half-way, or a call to another service whose outcome is unknown): freeing the key would let a retry run the effect twice — remove it; a 5xx keeps the key for reconciliation, and only 503 (the handler declined to start) may be transient`,
        });
      } else if (code === 503 && unkeyedExternal) {
        schemaErrors.push({
          at: at('transient', i),
          message: 'x-idempotency.transient lists 503 for an external effect with `providerKey: none`: a provider (or a proxy in front of it) may answer 503 after it acted, and nothing there would stop a retry from acting again — remove 503 (the default for external effects is [429]), or forward a provider key (`providerKey: forward`)',
        });
      }
    });
  }

  // The first two places the key names (a loop, no list: most keys name one).
  let firstPlace: (typeof KEY_PLACES)[number] | undefined;
  let secondPlace: (typeof KEY_PLACES)[number] | undefined;
  for (let i = 0; i < KEY_PLACES.length && secondPlace === undefined; i++) {
    if (key[KEY_PLACES[i]!] === undefined) continue;
    if (firstPlace === undefined) firstPlace = KEY_PLACES[i]!;
    else secondPlace = KEY_PLACES[i]!;
  }
  if (secondPlace !== undefined) {
    schemaErrors.push({
      at: at('key', secondPlace),
      message: `x-idempotency.key names two places for the key (\`${firstPlace}\` and \`${secondPlace}\`): a request carries it in one — keep one of them`,
    });
  }
  const place = keyPlace(key);

  const replayHeader = isPlainObject(source.responses) && isPlainObject(source.responses.replay) ? source.responses.replay.header : undefined;
  if (typeof replayHeader === 'string' && place.in === 'header') {
    const clash = replayHeaderClash(replayHeader, place.name);
    if (clash) schemaErrors.push({ at: at('responses', 'replay', 'header'), message: `x-idempotency.responses.replay.header \`${replayHeader}\` ${clash} — name another header, e.g. \`Idempotent-Replayed\`` });
  }

  if (!enabled) {
    return {
      enabled: false,
      key: { in: 'header', name: DEFAULT_KEY_HEADER, required: undefined, maxLength: undefined, pattern: undefined },
      scope: undefined,
      fingerprint: undefined,
      ttl: undefined,
      lease: undefined,
      retry: undefined,
      effect: undefined,
      transient: undefined,
      responses: {
        replay: undefined,
        missingKey: undefined,
        invalidKey: undefined,
        mismatch: undefined,
        inProgress: undefined,
        abandoned: undefined,
        storeUnavailable: undefined,
      },
      unknownOutcome: undefined,
      raw,
      schemaErrors,
      at,
    };
  }

  const retry = isPlainObject(source.retry) ? source.retry : undefined;
  const backoff = retry && isPlainObject(retry.backoff) ? retry.backoff : undefined;
  const effect = isPlainObject(source.effect) ? source.effect : undefined;
  const responses = isPlainObject(source.responses) ? source.responses : {};
  const replay = isPlainObject(responses.replay) ? responses.replay : undefined;

  // The contract's `responses`: the replay, then each state in STATE_NAMES order, written in place (no object of
  // states to copy in).
  const answers = {
    replay: replay ? { header: typeof replay.header === 'string' ? replay.header : 'Idempotent-Replayed', sendOnFirst: replay.sendOnFirst !== false } : undefined,
  } as { replay: { header: string; sendOnFirst: boolean } | undefined } & Record<StateName, StateResponse | undefined>;
  const states = answers as Record<StateName, StateResponse | undefined>;
  for (let i = 0; i < STATE_NAMES.length; i++) {
    const name = STATE_NAMES[i]!;
    const state = responses[name];
    if (state === undefined) {
      states[name] = undefined;
      continue;
    }
    const status = isPlainObject(state) ? integer(state.status) : integer(state);
    let response: DocumentedResponse | undefined;
    if (status !== undefined) {
      // States share statuses (400 twice, 409 twice): each status is looked up once per contract, and states
      // with one status share its response.
      let same = 0;
      while (same < i && states[STATE_NAMES[same]!]?.status !== status) same += 1;
      response = same < i ? states[STATE_NAMES[same]!]!.response : inputs.documentedResponse(status);
    }
    states[name] = response ? { status, response } : { status };
  }

  return {
    enabled: true,
    key: {
      ...place,
      required: typeof key.required === 'boolean' ? key.required : undefined,
      maxLength: integer(key.maxLength),
      pattern,
    },
    scope: Array.isArray(source.scope) ? scopeParts(source.scope) : undefined,
    fingerprint: readFingerprint(source.fingerprint),
    ttl: duration(source, 'ttl'),
    lease: duration(source, 'lease'),
    retry: retry
      ? {
          deadline: duration(retry, 'deadline'),
          maxAttempts: integer(retry.maxAttempts),
          backoff: backoff
            ? {
                initial: duration(backoff, 'initial'),
                max: duration(backoff, 'max'),
                jitter: typeof backoff.jitter === 'string' ? backoff.jitter : undefined,
              }
            : undefined,
        }
      : undefined,
    effect: effect
      ? {
          owner: typeof effect.owner === 'string' && effect.owner !== '' ? effect.owner : undefined,
          external: typeof effect.external === 'boolean' ? effect.external : undefined,
          providerKey: isProviderKey(effect.providerKey) ? effect.providerKey : undefined,
          statusRoute: typeof effect.statusRoute === 'string' && effect.statusRoute !== '' ? effect.statusRoute : undefined,
        }
      : undefined,
    transient: Array.isArray(source.transient)
      ? source.transient.filter((status): status is number => Number.isInteger(status))
      : undefined,
    responses: answers,
    unknownOutcome:
      source.unknownOutcome === 'status-route' || source.unknownOutcome === 'surface' ? source.unknownOutcome : undefined,
    raw,
    schemaErrors,
    at,
  };
}

// Made once: a literal in a function makes a new RegExp object each time it runs.
const SCOPE_PART = /^(header|path|query):(.+)$/;
const ITEM_INDEX = /^(0|[1-9]\d*)$/;

/** The members of `key` that each name where the key travels. */
const KEY_PLACES = ['header', 'query', 'body'] as const;

/**
 * Where the key travels, read from the contract's `key`: its `body` pointer or `query` name when it gives one
 * (a schema error already names a second place), else its header (default `Idempotency-Key`).
 */
function keyPlace(key: Record<string, unknown>): { in: KeyLocation; name: string } {
  if (typeof key.header === 'string' && key.header !== '') return { in: 'header', name: key.header };
  if (typeof key.query === 'string' && key.query !== '') return { in: 'query', name: key.query };
  if (typeof key.body === 'string' && key.body !== '') return { in: 'body', name: key.body };
  return { in: 'header', name: DEFAULT_KEY_HEADER };
}

/**
 * The merged contract with the key's place taken from the operation alone when the operation names one: defaults
 * that say `header: X-Key` and an operation that says `body: /ClientToken` mean the body, not both.
 */
function withOwnKeyPlace(merged: Record<string, unknown>, own: Record<string, unknown>, defaults: Record<string, unknown>): Record<string, unknown> {
  const ownKey = own.key;
  const defaultKey = defaults.key;
  if (!isPlainObject(ownKey) || !isPlainObject(defaultKey) || !isPlainObject(merged.key)) return merged;
  if (!KEY_PLACES.some((place) => ownKey[place] !== undefined)) return merged;
  const key: Record<string, unknown> = {};
  for (const name of Object.keys(merged.key)) {
    if ((KEY_PLACES as readonly string[]).includes(name) && ownKey[name] === undefined) continue;
    Object.defineProperty(key, name, { value: merged.key[name], enumerable: true, writable: true, configurable: true });
  }
  const result: Record<string, unknown> = {};
  for (const name of Object.keys(merged)) {
    Object.defineProperty(result, name, { value: name === 'key' ? key : merged[name], enumerable: true, writable: true, configurable: true });
  }
  return result;
}

/**
 * Why a replay header cannot carry the replay flag (`true`/`false`), when it cannot: the guard (or HTTP) sets
 * that header itself, so the flag would overwrite it or be overwritten.
 */
function replayHeaderClash(header: string, keyHeader: string): string | undefined {
  const name = header.trim().toLowerCase();
  if (name === REPEATABILITY_RESULT) {
    return "is OASIS Repeatable Requests' result header, which the guard sets to `accepted` or `rejected` itself; as the replay flag it would say `true`/`false`, which OASIS clients (Azure SDKs) do not read";
  }
  if (name === PROBLEM_HEADER) return 'is the header the guard names its own answers\' problem in';
  if (name === keyHeader.toLowerCase()) return 'is the idempotency key header itself';
  if (HTTP_OWNED_HEADERS.includes(name)) return 'is a header HTTP and the guard set on every answer';
  if (DEFAULT_REPLAY_HEADERS.includes(name)) return "is a header the guard records and replays with the handler's answer (the flag would overwrite it)";
  return undefined;
}

const REPEATABILITY_RESULT = 'repeatability-result';
const HTTP_OWNED_HEADERS: readonly string[] = ['content-length', 'transfer-encoding', 'connection', 'retry-after', 'cache-control', 'date'];

/** Parses `principal`, `global`, `header:NAME`, `path:NAME`, `query:NAME`; anything else yields nothing. */
export function parseScopePart(part: unknown): ScopePart[] {
  const parsed = scopePart(part);
  return parsed === undefined ? [] : [parsed];
}

/** {@link parseScopePart} of one entry, as the part itself or `undefined`. */
function scopePart(part: unknown): ScopePart | undefined {
  if (typeof part !== 'string') return undefined;
  const text = part.trim();
  if (text === 'principal' || text === 'global') return { kind: text };
  const match = SCOPE_PART.exec(text);
  return match ? { kind: match[1] as 'header' | 'path' | 'query', name: match[2]!.trim() } : undefined;
}

/** Every entry of a `scope` list parsed (as `flatMap(parseScopePart)`, without a list per entry). */
function scopeParts(list: readonly unknown[]): ScopePart[] {
  const out: ScopePart[] = [];
  for (let i = 0; i < list.length; i++) {
    if (!(i in list)) continue; // a hole, as flatMap skips it
    const part = scopePart(list[i]);
    if (part !== undefined) out.push(part);
  }
  return out;
}

/** The strings of a fingerprint list (none when it is not a list). */
function pointers(list: unknown): string[] {
  return Array.isArray(list) ? list.filter((p): p is string => typeof p === 'string') : [];
}

function readFingerprint(value: unknown): IdempotencyContract['fingerprint'] {
  if (!isPlainObject(value)) return undefined;
  if (value.include === undefined && value.exclude === undefined) return undefined;
  // Only `exclude` given: everything else in the body counts.
  const include = value.include === undefined || value.include === 'all' ? 'all' : pointers(value.include);
  return { include, exclude: pointers(value.exclude) };
}

function duration(container: Record<string, unknown>, field: string): Duration | undefined {
  const raw = container[field];
  return raw === undefined ? undefined : { raw, ms: parseDuration(raw) };
}

function integer(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) ? value : undefined;
}

function isProviderKey(value: unknown): value is ProviderKey {
  return value === 'forward' || value === 'derived' || value === 'none';
}

/** Whether `root` holds a node at the first `length` of `tokens` (all of them by default). */
function has(root: unknown, tokens: readonly string[], length = tokens.length): boolean {
  let node = root;
  for (let i = 0; i < length; i++) {
    const token = tokens[i]!;
    if (Array.isArray(node)) {
      if (!ITEM_INDEX.test(token) || Number(token) >= node.length) return false;
      node = node[Number(token)];
    } else if (isPlainObject(node) && Object.prototype.hasOwnProperty.call(node, token)) {
      node = node[token];
    } else {
      return false;
    }
  }
  return true;
}
