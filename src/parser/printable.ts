/**
 * Text from a user's file made safe to print on one line: control characters (a key name holding ESC, CR or
 * LF would reach the terminal raw, recolour it or break the line) are written as escapes, and so are the
 * bidirectional controls (U+061C, U+200E/F, U+202A–E, U+2066–9: an operationId holding U+202E printed the rest of a
 * report's line reversed, in a terminal, a pull-request comment or a CI page — a review's).
 */

const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t', '\u001b': '\\e' };

/** `text` with C0/C1 control characters, the Unicode line separators and bidi controls written as escapes (`\n`, `\e`, `\u202e`). */
export function printable(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, (c) => NAMED[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
