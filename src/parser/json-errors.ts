/**
 * Explains a `JSON.parse` failure: where it is and what is wrong, on one line. Node 20's V8 gives no position
 * for an unexpected token (`Unexpected token 'P', ..."ttl": PT1S,\n"... is not valid JSON`, with a multi-line
 * excerpt of the text), so a small scanner finds the offset of the first character that is not JSON. Runs
 * on the error path only.
 */
import { printable } from './printable.js';

/** Where a JSON text stops being JSON, and the error's message without V8's excerpt. */
export interface JsonSyntaxError {
  /** Offset of the offending character (the text's length when it ends too early). */
  readonly offset: number;
  /** One line: what is wrong (no position, no excerpt of the text). */
  readonly message: string;
  /** How to fix it. */
  readonly hint: string;
}

/** Describes the error `JSON.parse(text)` threw. */
export function describeJsonSyntaxError(error: unknown, text: string): JsonSyntaxError {
  const raw = error instanceof Error ? error.message : String(error);
  // The scanner's offset is exact by construction; V8's position (when it gives one) is the fallback.
  const position = /at position (\d+)/.exec(raw);
  const lineColumn = /\(line (\d+) column (\d+)\)/.exec(raw);
  const scanned = scan(text);
  const offset =
    scanned?.offset ??
    (position ? Math.min(Number(position[1]), text.length) : lineColumn ? offsetOfLineColumn(text, Number(lineColumn[1]), Number(lineColumn[2])) : text.length);
  let message = raw
    .replace(/\s*\(line \d+ column \d+\)/, '')
    .replace(/ (?:in JSON )?at position \d+/, '')
    // V8's excerpt of the text: `, "…" is not valid JSON` or `, ..."…"... is not valid JSON` (it may span lines).
    .replace(/, (?:\.\.\.)?"[\s\S]*"(?:\.\.\.)? is not valid JSON$/, '')
    .replace(/^Unexpected non-whitespace character after JSON$/, 'more text after the end of the JSON value (a stray } or ]?)')
    .replace(/^Unexpected end of JSON input$/, 'the JSON ends too early (truncated file?)');
  let hint = 'fix the syntax here (a missing comma, quote or bracket?)';
  if (scanned?.unclosed) {
    message = 'a string that is not closed on its line';
    hint = 'close the quote';
  } else if (offset >= text.length) message = 'the JSON ends too early (truncated file?)';
  else if (!'{["'.includes(text[offset]!) && /^\s*$/.test(text.slice(0, offset))) {
    message = 'the text does not start with { or [';
    hint = 'is it YAML? name the file .yaml';
  }
  return { offset, message: printable(message), hint };
}

function offsetOfLineColumn(text: string, line: number, column: number): number {
  let offset = 0;
  for (let current = 1; current < line; current++) offset = text.indexOf('\n', offset) + 1;
  return Math.min(offset + column - 1, text.length);
}

const OBJECT = 1;
const ARRAY = 2;
/** What the scanner expects next. */
const enum Expect {
  Value,
  ValueOrClose,
  Key,
  KeyOrClose,
  Colon,
  After,
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const LITERALS = ['true', 'false', 'null'];

/**
 * Offset of the first character where `text` stops being one JSON value (RFC 8259), the text's length when
 * it ends too early, `undefined` when it is valid JSON. Iterative, so any depth of nesting is fine.
 */
export function firstJsonError(text: string): number | undefined {
  return scan(text)?.offset;
}

/** The first error in `text`; `unclosed` when it is a string that does not close on its line (at its quote). */
function scan(text: string): { offset: number; unclosed: boolean } | undefined {
  const at = (offset: number) => ({ offset, unclosed: false });
  const stack: number[] = [];
  let expect = Expect.Value;
  let i = 0;
  for (;;) {
    while (i < text.length && isSpace(text.charCodeAt(i))) i += 1;
    if (i >= text.length) return expect === Expect.After && stack.length === 0 ? undefined : at(text.length);
    const c = text[i]!;
    switch (expect) {
      case Expect.KeyOrClose:
      case Expect.Key: {
        if (expect === Expect.KeyOrClose && c === '}') {
          stack.pop();
          expect = Expect.After;
          i += 1;
          break;
        }
        if (c !== '"') return at(i);
        const end = stringEnd(text, i);
        if (typeof end !== 'number') return end;
        i = end;
        expect = Expect.Colon;
        break;
      }
      case Expect.Colon:
        if (c !== ':') return at(i);
        i += 1;
        expect = Expect.Value;
        break;
      case Expect.After: {
        const top = stack[stack.length - 1];
        if (top === undefined) return at(i);
        if (c === ',') expect = top === OBJECT ? Expect.Key : Expect.Value;
        else if (c === (top === OBJECT ? '}' : ']')) stack.pop();
        else return at(i);
        i += 1;
        break;
      }
      default: {
        if (expect === Expect.ValueOrClose && c === ']') {
          stack.pop();
          expect = Expect.After;
          i += 1;
        } else if (c === '{' || c === '[') {
          stack.push(c === '{' ? OBJECT : ARRAY);
          expect = c === '{' ? Expect.KeyOrClose : Expect.ValueOrClose;
          i += 1;
        } else if (c === '"') {
          const end = stringEnd(text, i);
          if (typeof end !== 'number') return end;
          i = end;
          expect = Expect.After;
        } else {
          NUMBER.lastIndex = i;
          const literal = LITERALS.find((word) => text.startsWith(word, i));
          if (literal !== undefined) i += literal.length;
          else if (NUMBER.test(text)) i = NUMBER.lastIndex;
          else return at(i);
          expect = Expect.After;
        }
      }
    }
  }
}

/**
 * Offset just past the string opening at `i`, or the error that breaks it: a bad escape or control character
 * where it is, or — a line break or the end of the text before the closing quote — the opening quote.
 */
function stringEnd(text: string, i: number): number | { offset: number; unclosed: boolean } {
  for (let j = i + 1; j < text.length; j++) {
    const code = text.charCodeAt(j);
    if (code === 34) return j + 1; // "
    if (code === 10 || code === 13) return { offset: i, unclosed: true };
    if (code < 32) return { offset: j, unclosed: false };
    if (code === 92) {
      const next = text[j + 1];
      if (next === 'u') {
        if (!/^[0-9a-fA-F]{4}$/.test(text.slice(j + 2, j + 6))) return { offset: j, unclosed: false };
        j += 5;
      } else if (next !== undefined && '"\\/bfnrt'.includes(next)) j += 1;
      else return { offset: j, unclosed: false };
    }
  }
  return { offset: i, unclosed: true };
}

/** JSON's whitespace: space, line feed, carriage return, tab. */
export function isSpace(code: number): boolean {
  return code === 32 || code === 10 || code === 13 || code === 9;
}
