/** `text` with every character that has a meaning in a regular expression escaped, to match it literally. */
export function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** JSON's short escapes (RFC 8259 §7), by the character they stand for. */
const SHORT_ESCAPES: Readonly<Record<string, string>> = { '"': '"', '\\': '\\', '/': '/', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't' };

/**
 * A regular expression source (for a pattern without the `u` flag: it matches UTF-16 code units) that matches `name`
 * as a JSON string, quotes included, in every spelling JSON allows: each code unit as itself (when it may stand
 * unescaped), as `\uXXXX` in either letter case, or as its short escape (`\/`, `\n`, …). `"x-idem\u0070otency"`
 * is the member `x-idempotency` to `JSON.parse`, so a text search for the plain spelling alone misses it.
 */
export function jsonStringSource(name: string): string {
  let source = '"';
  for (let i = 0; i < name.length; i++) {
    const char = name[i]!;
    const code = char.charCodeAt(0);
    const hex = code
      .toString(16)
      .padStart(4, '0')
      .replace(/[a-f]/g, (digit) => `[${digit}${digit.toUpperCase()}]`);
    const spellings = [`\\\\u${hex}`];
    if (code >= 0x20 && char !== '"' && char !== '\\') spellings.unshift(escapeRegExp(char));
    const short = SHORT_ESCAPES[char];
    if (short !== undefined) spellings.push(`\\\\${escapeRegExp(short)}`);
    source += `(?:${spellings.join('|')})`;
  }
  return `${source}"`;
}

/** Whether a JSON `text` may spell `name` with escapes: it holds a `\u` escape, or `name` has a character with a short one and `text` a backslash. */
export function mayEscapeName(text: string, name: string): boolean {
  return text.includes('\\u') || (/["\\/\b\f\n\r\t]/.test(name) && text.includes('\\'));
}
