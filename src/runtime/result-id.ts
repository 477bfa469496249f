/**
 * The id of the resource a success answer created, read from its JSON body: the guard records it (`resultId`)
 * and the `replay-undefined` rule looks for it in the documented schema. This file imports nothing.
 */

/** Member names real APIs wrap the created resource in (`{data: {id}}`; UK Open Banking writes `Data`), lower case. */
export const RESULT_ENVELOPES: readonly string[] = ['data', 'result', 'object', 'item', 'resource'];
/**
 * Members beside a wrapped resource that are metadata about it, not another resource (lower case): links and
 * meta (`Links`, `Meta` in UK Open Banking), and the `errors`/`warnings` lists an answer carries beside what it
 * created (`{errors: [], refund: {id}}`, as Square writes it).
 */
export const ENVELOPE_METADATA: readonly string[] = ['links', '_links', 'meta', '_meta', 'included', 'linked', 'errors', 'warnings'];

/**
 * The members of an object (given by their names) that may wrap the resource: envelope names, or the one
 * member beside metadata (`{payments: {id}, links: {…}}`, as GoCardless writes it). Names compare without case.
 */
export function wrapperMembers(names: readonly string[]): string[] {
  const named = names.filter((name) => RESULT_ENVELOPES.includes(name.toLowerCase()));
  const others = names.filter((name) => !ENVELOPE_METADATA.includes(name.toLowerCase()));
  return others.length === 1 && !named.includes(others[0]!) ? [...named, others[0]!] : named;
}

/** The `id` of a parsed JSON body, or of the resource it wraps, as text; `undefined` when there is none. */
export function resultIdOf(body: unknown): string | undefined {
  const own = idOf(body);
  if (own !== undefined || body === null || typeof body !== 'object' || Array.isArray(body)) return own;
  for (const name of wrapperMembers(Object.keys(body))) {
    const wrapped = idOf((body as Record<string, unknown>)[name]);
    if (wrapped !== undefined) return wrapped;
  }
  return undefined;
}

/** The `id` member of a JSON object, as text. */
function idOf(value: unknown): string | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const id = (value as Record<string, unknown>)['id'];
  return typeof id === 'string' || typeof id === 'number' ? String(id) : undefined;
}
