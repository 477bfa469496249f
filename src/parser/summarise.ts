/**
 * A value as a message quotes it: JSON, but bounded — nested containers below {@link MAX_DEPTH} levels become
 * `{…}` / `[…]`, long containers and strings are cut, and the whole is at most {@link MAX_LENGTH} characters.
 * A message about a wrong value must not grow with it (a 200 KB value gave a 200 KB message) nor recurse
 * through all of it (a value nested 100,000 deep overflowed the stack in `JSON.stringify`).
 */

const MAX_DEPTH = 2;
const MAX_ITEMS = 5;
const MAX_STRING = 60;
const MAX_LENGTH = 100;

/** `value` as bounded JSON text (see the module comment). */
export function summarise(value: unknown): string {
  const text = write(value, 0);
  return text.length > MAX_LENGTH ? `${text.slice(0, MAX_LENGTH - 1)}…` : text;
}

function write(value: unknown, depth: number): string {
  if (typeof value === 'string') return JSON.stringify(value.length > MAX_STRING ? `${value.slice(0, MAX_STRING - 1)}…` : value);
  // NaN and ±Infinity (YAML's .nan, .inf; JSON's 1e400) as themselves: JSON would write null, a value not given.
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
  if (value === null || typeof value !== 'object') return value === undefined ? 'undefined' : String(JSON.stringify(value) ?? value);
  const array = Array.isArray(value);
  if (depth >= MAX_DEPTH) return array ? (value.length === 0 ? '[]' : '[…]') : Object.keys(value).length === 0 ? '{}' : '{…}';
  const items: string[] = [];
  const keys = array ? [] : Object.keys(value);
  const count = array ? value.length : keys.length;
  for (let i = 0; i < Math.min(count, MAX_ITEMS); i++) {
    items.push(array ? write(value[i], depth + 1) : `${JSON.stringify(keys[i])}:${write((value as Record<string, unknown>)[keys[i]!], depth + 1)}`);
  }
  if (count > MAX_ITEMS) items.push('…');
  return array ? `[${items.join(',')}]` : `{${items.join(',')}}`;
}
