/**
 * Text from a user's file made safe to print on one line: control characters (a key name holding ESC, CR or
 * LF would reach the terminal raw, recolour it or break the line) are written as escapes.
 */

const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t', '\u001b': '\\e' };

/** `text` with C0/C1 control characters and the Unicode line separators written as escapes (`\n`, `\e`, `\u0000`). */
export function printable(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, (c) => NAMED[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
