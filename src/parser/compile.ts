/**
 * `compileContract`: turns an operation's normalised contract into the runtime's {@link CompiledContract},
 * filling every default the design names. Generators call it; it never throws on user input.
 */
import type { CompiledBackoff, CompiledContract, ProviderKey, ScopePart } from '../runtime/contract.js';
import { isPlainObject } from './merge.js';
import type { ApiDocument, Duration, Location, OperationView, StateName } from './model.js';

/** The values a contract gets for fields it leaves out. */
export const CONTRACT_DEFAULTS = {
  keyHeader: 'Idempotency-Key',
  keyRequired: true,
  keyMaxLength: 255,
  /** Real clients send 54–57 characters (`stripe-node-retry-<uuid>`) in a key header: never accept less than this there. */
  keyMinMaxLength: 64,
  /** The generated client's keys are UUIDs (`crypto.randomUUID()`): a query or body key is never bounded below this. */
  keyUuidLength: 36,
  transient: [429, 503],
  /**
   * For an external effect: a 503 from a handler that called a provider does not prove the provider did
   * nothing (DESIGN §4.6), so only a 429 releases the key unless the contract writes its own list.
   */
  externalTransient: [429],
  replayHeader: 'Idempotent-Replayed',
  statuses: { missingKey: 400, invalidKey: 400, mismatch: 422, inProgress: 409, abandoned: 409, storeUnavailable: 503 },
  leaseMs: 30_000,
  ttlMs: 86_400_000,
  retry: { deadlineMs: 30_000, maxAttempts: 4, backoff: { initialMs: 200, maxMs: 5_000, jitter: 'full' } },
} as const satisfies {
  statuses: Record<StateName, number>;
  retry: { deadlineMs: number; maxAttempts: number; backoff: CompiledBackoff };
  [key: string]: unknown;
};

const QUERY_PARAMETER = 'query';

/**
 * Compiles one operation's contract. The operation must carry an enabled contract
 * (`op.contract?.enabled`); for `x-idempotency: false` or none it throws a `TypeError` (a caller bug).
 */
export function compileContract(op: OperationView, doc?: Pick<ApiDocument, 'deref'>): CompiledContract {
  const contract = op.contract;
  if (!contract || !contract.enabled) {
    throw new TypeError(`${op.label} has no enabled x-idempotency contract to compile`);
  }
  const defaults = CONTRACT_DEFAULTS;
  const ms = (duration: Duration | undefined, fallback: number) => duration?.ms ?? fallback;
  const status = (name: StateName) => contract.responses[name]?.status ?? defaults.statuses[name];
  const backoff = contract.retry?.backoff;
  const external = contract.effect?.external ?? false;
  const statusRoute = contract.effect?.statusRoute;
  const providerKey: ProviderKey = contract.effect?.providerKey ?? (external ? 'forward' : 'none');
  const jitter = backoff?.jitter === 'full' || backoff?.jitter === 'equal' || backoff?.jitter === 'none' ? backoff.jitter : defaults.retry.backoff.jitter;
  // A key header may come from an SDK that makes its own (`<sdk>-retry-<uuid>`): never fewer than 64 there. A query or
  // body key is the API's own convention, which no SDK fills: its documented bound is the bound (Square's 45) — but
  // never below a UUID's 36, the key the generated client makes.
  const ownMaxLength = contract.key.maxLength ?? defaults.keyMaxLength;
  const maxLength = Math.max(ownMaxLength, contract.key.in === 'header' ? defaults.keyMinMaxLength : defaults.keyUuidLength);

  return {
    operationId: op.operationId ?? `${op.method.toUpperCase()} ${op.path}`,
    method: op.method.toUpperCase(),
    path: op.path,
    key: {
      in: contract.key.in,
      name: contract.key.name || defaults.keyHeader,
      required: contract.key.required ?? defaults.keyRequired,
      maxLength,
      ...(contract.key.pattern !== undefined ? { pattern: contract.key.pattern } : {}),
    },
    scope: scopeParts(op, contract.scope ?? []),
    fingerprint: {
      include: contract.fingerprint?.include ?? 'all',
      ...fingerprintExclusions(contract.fingerprint?.exclude ?? [], queryFingerprint(op, doc)),
    },
    ttlMs: ms(contract.ttl, defaults.ttlMs),
    leaseMs: ms(contract.lease, defaults.leaseMs),
    retry: {
      deadlineMs: ms(contract.retry?.deadline, defaults.retry.deadlineMs),
      maxAttempts: contract.retry?.maxAttempts ?? defaults.retry.maxAttempts,
      backoff: {
        initialMs: ms(backoff?.initial, defaults.retry.backoff.initialMs),
        maxMs: ms(backoff?.max, defaults.retry.backoff.maxMs),
        jitter,
      },
    },
    effect: {
      owner: contract.effect?.owner ?? op.operationId ?? `${op.method.toUpperCase()} ${op.path}`,
      external,
      providerKey,
      ...(statusRoute !== undefined ? { statusRoute } : {}),
    },
    transient: contract.transient ?? [...(external ? defaults.externalTransient : defaults.transient)],
    responses: {
      replayHeader: contract.responses.replay?.header ?? defaults.replayHeader,
      missingKey: status('missingKey'),
      invalidKey: status('invalidKey'),
      mismatch: status('mismatch'),
      inProgress: status('inProgress'),
      abandoned: status('abandoned'),
      storeUnavailable: status('storeUnavailable'),
      ...(contract.responses.replay?.sendOnFirst === false ? { replayOnFirst: false } : {}),
    },
    unknownOutcome: contract.unknownOutcome ?? (statusRoute !== undefined ? 'status-route' : 'surface'),
  };
}

/**
 * `fingerprint.exclude` split in two: the body pointers, and `query:NAME` entries, which take their parameters out of
 * the fingerprint's query names (and, when every query parameter counts, are listed for the guard to leave out).
 */
function fingerprintExclusions(
  exclude: readonly string[],
  query: { query: string[]; queryAll?: true },
): { exclude: string[]; query: string[]; queryAll?: true; queryExclude?: string[] } {
  const body = exclude.filter((entry) => !entry.startsWith(QUERY_EXCLUSION));
  const names = exclude.filter((entry) => entry.startsWith(QUERY_EXCLUSION)).map((entry) => entry.slice(QUERY_EXCLUSION.length));
  if (names.length === 0) return { exclude: body, ...query };
  const left = new Set(names);
  return {
    exclude: body,
    query: query.query.filter((name) => !left.has(name)),
    ...(query.queryAll ? { queryAll: true as const, queryExclude: [...left].sort() } : {}),
  };
}

/** How `fingerprint.exclude` names a query parameter. */
export const QUERY_EXCLUSION = 'query:';

/**
 * The scope parts, each header or query part whose parameter the operation declares optional (`required` not true,
 * as OpenAPI defaults it) marked so when the scope also holds `principal`: the guard scopes a request without it by
 * its absence, within its caller's keys. A part of no declared parameter (lint's scope-unresolvable), a required one,
 * or any part of a scope without `principal` stays as it is: a request without it is answered 400 — there its
 * absence would be one key space for every caller without it (an API key header that bearer callers leave out).
 */
function scopeParts(op: OperationView, scope: readonly ScopePart[]): ScopePart[] {
  const parameters = op.parameters;
  if (parameters === undefined || !scope.some((part) => part.kind === 'principal')) return [...scope];
  return scope.map((part) => {
    if (part.kind !== 'header' && part.kind !== 'query') return part;
    const declared = parameters.find((p) => p.in === part.kind && (part.kind === 'header' ? p.name.toLowerCase() === part.name.toLowerCase() : p.name === part.name));
    return declared !== undefined && declared.node['required'] !== true ? { ...part, optional: true as const } : part;
  });
}

/**
 * The query part of a fingerprint: the names of the query parameters that apply to the operation (path-level ones
 * too), sorted — the names a request carries them under. An object parameter in the default `form` style with
 * `explode: true` is sent as its own properties (`?status=paid&limit=2` for `filter`), so its properties' names
 * (through `allOf`/`oneOf`/`anyOf`, with `doc` to follow `$ref`s) join its own name, under which it is sent when it
 * holds lists or objects. When such an object is free-form (`additionalProperties`, `patternProperties`, or no
 * `properties` at all), any name may be one of its members: `queryAll` then says every query parameter counts.
 */
export function queryFingerprint(op: OperationView, doc: Pick<ApiDocument, 'deref'> | undefined): { query: string[]; queryAll?: true } {
  const names = new Set<string>();
  let all = false;
  const parameters: { readonly node: Record<string, unknown>; readonly at?: Location }[] =
    op.parameters?.map((parameter) => ({ node: parameter.node, at: parameter.valueAt })) ??
    [op.pathItem.parameters, op.node.parameters].flatMap((list) => (Array.isArray(list) ? list.filter(isPlainObject) : [])).map((node) => ({ node }));
  for (const { node, at } of parameters) {
    if (node['in'] !== QUERY_PARAMETER || typeof node['name'] !== 'string') continue;
    // The name itself too: an object holding a list or an object is sent under it (`filter[tags][0]=a`).
    names.add(node['name']);
    const exploded = explodedMembers(node, at, doc);
    for (const member of exploded.names) names.add(member);
    all ||= exploded.open;
  }
  return { query: [...names].sort(), ...(all ? { queryAll: true as const } : {}) };
}

/**
 * The property names an exploded `form` object parameter is sent as (none when it is sent under its own name), and
 * whether it is open: free-form, so a request may send it under names no schema lists.
 */
function explodedMembers(node: Record<string, unknown>, at: Location | undefined, doc: Pick<ApiDocument, 'deref'> | undefined): { names: string[]; open: boolean } {
  const style = node['style'] ?? 'form';
  if (style !== 'form' || (node['explode'] ?? true) !== true) return { names: [], open: false };
  const names = new Set<string>();
  let object = false;
  let open = false;
  // Each schema once: `$ref` cycles through the composition keywords would otherwise branch without end.
  const seen = new Set<object>();
  const visit = (schema: unknown, where: Location | undefined, depth: number): void => {
    if (depth > 16) return;
    let value = schema;
    let place = where;
    if (isPlainObject(value) && typeof value['$ref'] === 'string') {
      const followed = doc !== undefined && place !== undefined ? doc.deref(value, place) : undefined;
      value = followed?.value;
      place = followed?.at;
    }
    if (!isPlainObject(value) || seen.has(value)) return;
    seen.add(value);
    const type = value['type'];
    if (type !== undefined && type !== 'object' && !(Array.isArray(type) && type.includes('object'))) return;
    if (type !== undefined || value['properties'] !== undefined || value['additionalProperties'] !== undefined) object = true;
    if (isPlainObject(value['properties'])) for (const name of Object.keys(value['properties'])) names.add(name);
    const extra = value['additionalProperties'];
    if ((extra !== undefined && extra !== false) || value['patternProperties'] !== undefined) open = true;
    for (const keyword of ['allOf', 'oneOf', 'anyOf']) {
      const list = value[keyword];
      if (Array.isArray(list)) list.forEach((member, i) => visit(member, place && { file: place.file, pointer: `${place.pointer}/${keyword}/${i}` }, depth + 1));
    }
  };
  visit(node['schema'], at && { file: at.file, pointer: `${at.pointer}/schema` }, 0);
  return { names: [...names], open: open || (object && names.size === 0) };
}
