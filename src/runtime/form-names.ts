/**
 * Bracketed form field names (`metadata[order_id]`, `expand[]`), as Stripe-style clients send nested fields
 * in `application/x-www-form-urlencoded` and `multipart/form-data` bodies. The guard nests such fields before
 * it fingerprints them, and lint resolves fingerprint pointers through the same nesting, so a pointer lint
 * accepts is one the guard can match. This file imports nothing.
 */

/** Deepest nesting a bracketed name may ask for; a deeper one is kept as a plain name. */
const MAX_FORM_DEPTH = 32;

/** `metadata[order_id]` → `['metadata', 'order_id']`; `expand[]` → `['expand', '']`; undefined when not bracketed. */
export function bracketPath(name: string): string[] | undefined {
  const match = /^([^[\]]+)((?:\[[^[\]]*\])+)$/.exec(name);
  if (match === null) return undefined;
  const tokens = [match[1]!, ...match[2]!.slice(1, -1).split('][')];
  return tokens.length > MAX_FORM_DEPTH ? undefined : tokens;
}
