/**
 * Lazy source positions. Nothing here runs until a finding needs a line: JSON positions come from a small
 * scanner that indexes only the containers on the way to the pointer (each scanned once, then memoised);
 * YAML positions come from the node ranges of the `yaml` Document the loader already built.
 */
import type { Position } from './model.js';
import { escapeRegExp, jsonStringSource, mayEscapeName } from './regexp.js';

/** Offsets of a node: where its key starts (for an object member) and where its value starts. */
export interface NodeOffsets {
  readonly keyOffset: number | undefined;
  readonly valueOffset: number;
}

/** Result of locating a pointer: the deepest node found and how many tokens it consumed. */
export interface Located extends NodeOffsets {
  /** Number of pointer tokens matched; equal to the token count when the node exists. */
  readonly depth: number;
}

/**
 * Maps offsets to 1-based line/column. The table grows on demand, only as far as the furthest offset asked
 * for (a finding near the top of a 10 MB file does not index every line), and keeps the start of every
 * {@link LINES_PER_CHECKPOINT}th line only: a line is found by a binary search over those, then a native
 * search for the few newlines between the checkpoint and the offset.
 *
 * A line ends at LF, CRLF or a lone CR, as in YAML 1.2 and editors. LFs alone are counted while the text
 * before the offsets asked for holds no lone CR (checked from CR to CR, as far as asked); once one is found
 * (a classic Mac file, or a stray CR) the table starts over with a regex search for every line break.
 */
export class LineTable {
  /** `checkpoints[k]` is the offset where line `k * LINES_PER_CHECKPOINT + 1` starts. */
  private checkpoints: number[] = [0];
  /** Lines known so far (line `known` starts at `lastStart`); the next newline is searched from `lastStart`. */
  private known = 1;
  private lastStart = 0;
  private complete = false;
  /** The text before this offset holds no lone CR (while {@link loneCr} is false). */
  private crFreeTo = 0;
  /** The first CR at or after {@link crFreeTo} (-1: none); found on first use. */
  private nextCr = -2;
  /** Whether a lone CR was found: every line break is then searched for with {@link LINE_BREAK}. */
  private loneCr = false;
  constructor(private readonly text: string) {}

  position(offset: number): Position {
    const text = this.text;
    if (!this.loneCr && offset > this.crFreeTo) this.checkLoneCr(offset);
    if (!this.complete && this.lastStart <= offset) this.extendPast(offset);
    const loneCr = this.loneCr;
    const checkpoints = this.checkpoints;
    let low = 0;
    let high = checkpoints.length - 1;
    while (low < high) {
      const mid = (low + high + 1) >> 1;
      if (checkpoints[mid]! <= offset) low = mid;
      else high = mid - 1;
    }
    let line = low * LINES_PER_CHECKPOINT + 1;
    let start = checkpoints[low]!;
    for (;;) {
      const next = loneCr ? nextBreakEnd(text, start) : text.indexOf('\n', start) + 1;
      if (next === 0 || next > offset) break;
      line += 1;
      start = next;
    }
    return { line, column: offset - start + 1 };
  }

  /**
   * Counts lines on from the last one known until one starts after `offset` (or the text ends), keeping a
   * checkpoint every {@link LINES_PER_CHECKPOINT} lines. The count runs in locals, written back once: this
   * loop takes one native search per line of a big file, so a property write per line would be its cost.
   */
  private extendPast(offset: number): void {
    const text = this.text;
    const loneCr = this.loneCr;
    const checkpoints = this.checkpoints;
    let known = this.known;
    let start = this.lastStart;
    while (start <= offset) {
      const next = loneCr ? nextBreakEnd(text, start) : text.indexOf('\n', start) + 1;
      if (next === 0) {
        this.complete = true;
        break;
      }
      start = next;
      if (known++ % LINES_PER_CHECKPOINT === 0) checkpoints.push(start);
    }
    this.known = known;
    this.lastStart = start;
  }

  /**
   * Looks for a lone CR before `offset` in the part of the text not checked yet, stepping from CR to CR (a
   * native search each; a text without CR costs one search, once); on finding one the table starts over,
   * counting every line break.
   */
  private checkLoneCr(offset: number): void {
    const text = this.text;
    let cr = this.nextCr === -2 ? text.indexOf('\r') : this.nextCr;
    while (cr !== -1 && cr < offset) {
      if (text.charCodeAt(cr + 1) !== 10) {
        this.loneCr = true;
        this.checkpoints = [0];
        this.known = 1;
        this.lastStart = 0;
        this.complete = false;
        return;
      }
      cr = text.indexOf('\r', cr + 1);
    }
    this.nextCr = cr;
    this.crFreeTo = cr === -1 ? Infinity : offset;
  }
}

const LINE_BREAK = /\r\n?|\n/g;
const LONE_CR = /\r(?!\n)/g;

/** Offset just past the first line break (LF, CRLF or lone CR) at or after `from`; 0 when there is none. */
function nextBreakEnd(text: string, from: number): number {
  LINE_BREAK.lastIndex = from;
  return LINE_BREAK.test(text) ? LINE_BREAK.lastIndex : 0;
}

/** Offset of the first CR not followed by LF in `text` (a line break only a CR-aware count sees), or -1. */
export function loneCrOffset(text: string): number {
  const cr = text.indexOf('\r');
  if (cr === -1) return -1;
  LONE_CR.lastIndex = cr;
  return LONE_CR.test(text) ? LONE_CR.lastIndex - 1 : -1;
}

/** How many lines apart {@link LineTable} keeps a line start. */
const LINES_PER_CHECKPOINT = 64;

/** Something that can find the offsets of a pointer's tokens in one file's text. */
export interface PositionIndex {
  locate(tokens: readonly string[]): Located;
  /**
   * The first key written twice in the object at `tokens` (in its nested objects too when `deep`), with the
   * offsets of both occurrences; `undefined` when there is none or the format rejects duplicates when parsing.
   */
  duplicateKey?(tokens: readonly string[], deep: boolean): DuplicateKey | undefined;
  /**
   * Every member named `key` written anywhere in the text: how many there are, and how many member names
   * are written inside their values (nested ones too; at least as many: an escaped quote followed by `:` in
   * a string may count as one). JSON.parse keeps one of two equal keys, so parsed values holding exactly
   * this many names lost none.
   */
  membersNamed?(key: string): { readonly count: number; readonly names: number };
  /** The first key written twice inside the value of any member named `key` (the slow, exact scan). */
  duplicateInMembers?(key: string): DuplicateKey | undefined;
}

/** A key written twice in one object. */
export interface DuplicateKey {
  readonly key: string;
  readonly firstOffset: number;
  readonly secondOffset: number;
  /** Offset just past the first occurrence's value (set by one-level JSON scans). */
  readonly firstValueEnd?: number;
}

const QUOTE = 34; // "
const BACKSLASH = 92;
const OPEN_BRACE = 123;
const CLOSE_BRACE = 125;
const OPEN_BRACKET = 91;
const CLOSE_BRACKET = 93;
const COMMA = 44;
const COLON = 58;

/**
 * A quote followed by `:`: the end of a member name, or an escaped quote inside a string (see countNames).
 * Global: countNames steps from match to match with `lastIndex`.
 */
const NAME_END = /"[ \t\r\n]*:/g;

/**
 * From a position outside any string, everything up to and including the next bracket outside strings.
 * Written unrolled (no nested alternation under `*`) so it cannot backtrack badly; `y` anchors each match.
 */
const BRACKET_OUTSIDE_STRINGS = /[^"{}[\]]*(?:"[^"\\]*(?:\\[\s\S][^"\\]*)*"[^"{}[\]]*)*[{}[\]]/y;

/** Texts shorter than this index the root object to find a member (one scan of a small text costs nothing). */
const LATE_MEMBER_MIN_TEXT = 1 << 20;
/** Occurrences of a root member's name tried from the end before indexing the root instead. */
const LATE_MEMBER_TRIES = 8;

type ContainerIndex =
  | { readonly kind: 'object'; readonly members: Map<string, NodeOffsets>; readonly duplicate?: DuplicateKey }
  | { readonly kind: 'array'; readonly items: number[] };

/**
 * Positions in JSON text that `JSON.parse` already accepted. Containers are indexed on demand, so finding
 * one node costs a scan of the containers on its path, not of the file.
 */
export class JsonPositionIndex implements PositionIndex {
  private readonly containers = new Map<number, ContainerIndex>();
  /** Offset just past a container, by its opening offset, for containers a scan already stepped over. */
  private readonly ends = new Map<number, number>();
  constructor(private readonly text: string) {}

  locate(tokens: readonly string[]): Located {
    let offset = this.skipWhitespace(0);
    let keyOffset: number | undefined;
    let depth = 0;
    for (const token of tokens) {
      if (depth === 0 && !this.containers.has(offset)) {
        const member = this.lateRootMember(offset, token);
        if (member) {
          keyOffset = member.keyOffset;
          offset = member.valueOffset;
          depth += 1;
          continue;
        }
      }
      const container = this.index(offset);
      if (!container) break;
      if (container.kind === 'object') {
        const member = container.members.get(token);
        if (!member) break;
        keyOffset = member.keyOffset;
        offset = member.valueOffset;
      } else {
        const item = /^(0|[1-9]\d*)$/.test(token) ? container.items[Number(token)] : undefined;
        if (item === undefined) break;
        keyOffset = undefined;
        offset = item;
      }
      depth += 1;
    }
    return { keyOffset, valueOffset: offset, depth };
  }

  /**
   * A member of the root object written in the second half of a big text (`components` after a 10 MB
   * `paths`), found without indexing the root: indexing it steps over every member before this one. The
   * last textual occurrence of the name that is a member of the root is the one JSON.parse kept; it is one
   * when the members that follow it run up to the root's closing brace, the text's last character.
   * `undefined` when there is no such occurrence; {@link index} then finds the member (or its absence).
   */
  private lateRootMember(rootOffset: number, token: string): NodeOffsets | undefined {
    const text = this.text;
    if (text.length < LATE_MEMBER_MIN_TEXT || text.charCodeAt(rootOffset) !== OPEN_BRACE) return undefined;
    let rootEnd = text.length - 1;
    while (rootEnd > rootOffset && isJsonSpace(text.charCodeAt(rootEnd))) rootEnd -= 1;
    if (text.charCodeAt(rootEnd) !== CLOSE_BRACE) return undefined;
    const needle = JSON.stringify(token);
    const half = text.length >> 1;
    for (let at = text.lastIndexOf(needle, rootEnd), tries = 0; at >= half && tries < LATE_MEMBER_TRIES; at = text.lastIndexOf(needle, at - 1), tries++) {
      const valueOffset = this.memberValueAt(at, needle.length);
      if (valueOffset === undefined) continue;
      const run = this.membersRunTo(valueOffset, rootEnd, token);
      // A later member spelling the same name with escapes is the one JSON.parse kept.
      if (run !== undefined) return run.twin ?? { keyOffset: at, valueOffset };
    }
    return undefined;
  }

  /** Where the value of the member whose name (`length` characters, quotes included) is written at `at` starts; `undefined` when the text there is not a member name. */
  private memberValueAt(at: number, length: number): number | undefined {
    const text = this.text;
    let before = at - 1;
    while (before >= 0 && isJsonSpace(text.charCodeAt(before))) before -= 1;
    const opener = text.charCodeAt(before);
    if (opener !== OPEN_BRACE && opener !== COMMA) return undefined;
    const colon = this.skipWhitespace(at + length);
    return text.charCodeAt(colon) === COLON ? this.skipWhitespace(colon + 1) : undefined;
  }

  /**
   * Whether, from the value at `offset`, the text is that value and then members of the same object (`, "name":
   * value`…) up to the closing brace at `end`: then the value's member belongs to the object that closes there
   * (`undefined` otherwise). `twin`: the last of those members whose name, written with escapes, is `token`.
   */
  private membersRunTo(offset: number, end: number, token: string): { twin?: NodeOffsets } | undefined {
    const text = this.text;
    let twin: NodeOffsets | undefined;
    let i = this.skipWhitespace(this.skipValue(offset));
    while (text.charCodeAt(i) === COMMA) {
      const name = this.skipWhitespace(i + 1);
      if (text.charCodeAt(name) !== QUOTE) return undefined;
      const nameEnd = this.skipString(name);
      const colon = this.skipWhitespace(nameEnd);
      if (text.charCodeAt(colon) !== COLON) return undefined;
      const valueOffset = this.skipWhitespace(colon + 1);
      const raw = text.slice(name, nameEnd);
      if (raw.includes('\\') && (JSON.parse(raw) as string) === token) twin = { keyOffset: name, valueOffset };
      i = this.skipWhitespace(this.skipValue(valueOffset));
    }
    return i === end ? (twin === undefined ? {} : { twin }) : undefined;
  }

  duplicateKey(tokens: readonly string[], deep: boolean): DuplicateKey | undefined {
    const located = this.locate(tokens);
    if (located.depth !== tokens.length) return undefined;
    if (deep) return this.findDuplicateDeep(located.valueOffset);
    // One level: the scan that indexes the object for positions already noticed it.
    const container = this.index(located.valueOffset);
    return container?.kind === 'object' ? container.duplicate : undefined;
  }

  membersNamed(key: string): { readonly count: number; readonly names: number } {
    let count = 0;
    let names = 0;
    for (const value of this.memberValues(key)) {
      count += 1;
      names += this.countNames(value);
    }
    return { count, names };
  }

  duplicateInMembers(key: string): DuplicateKey | undefined {
    for (const value of this.memberValues(key)) {
      const duplicate = this.findDuplicateDeep(value);
      if (duplicate) return duplicate;
    }
    return undefined;
  }

  /** Offsets of the values of every member named `key`, in text order. */
  private *memberValues(key: string): Generator<number> {
    const text = this.text;
    // A native search instead of a scan: in valid JSON the quoted key followed by `:` is a member name exactly
    // when `{` or `,` precedes it (quotes inside strings are escaped). A regex, not indexOf: on text full of
    // quotes it skips ahead on the whole name, three times faster on a 10 MB file.
    // Every spelling of the name (`"x-idem\\u0070otency"` is `x-idempotency` too) when the text has escapes.
    const quoted = mayEscapeName(text, key) ? jsonStringSource(key) : escapeRegExp(JSON.stringify(key));
    const name = new RegExp(`${quoted}[ \\t\\r\\n]*:`, 'g');
    for (let found = name.exec(text); found !== null; found = name.exec(text)) {
      let before = found.index - 1;
      while (before >= 0 && isJsonSpace(text.charCodeAt(before))) before -= 1;
      const opener = text.charCodeAt(before);
      if (opener === OPEN_BRACE || opener === COMMA) yield this.skipWhitespace(name.lastIndex);
    }
  }

  /**
   * How many member names are written in the value at `offset` and the values nested in it, or more when a
   * string in it holds an escaped quote followed by `:`. In JSON text that JSON.parse accepted every member
   * name is a quote followed by `:` (blanks between), so a native regex search counts them; an escaped quote
   * can only add to the count, never hide a name, so a parsed value that holds as many names lost none.
   * The search runs over the text itself, match to match, and stops at the first match past the value: no
   * substring and no array of pieces (a 10 MB document's contracts would otherwise be copied and split).
   * A match that starts inside the value ends inside it, before its closing bracket (quote, blanks, colon).
   */
  private countNames(offset: number): number {
    const text = this.text;
    const first = text.charCodeAt(offset);
    if (first !== OPEN_BRACE && first !== OPEN_BRACKET) return 0;
    // Its children's ends are not kept: a position inside a contract is rarely asked for.
    const end = this.skipValue(offset, false);
    const nameEnd = NAME_END;
    nameEnd.lastIndex = offset;
    let names = 0;
    while (nameEnd.test(text) && nameEnd.lastIndex <= end) names += 1;
    nameEnd.lastIndex = 0;
    return names;
  }

  /**
   * The first key written twice in the value at `offset` or any value nested in it, in one pass over its
   * text (JSON.parse keeps the last of two equal keys silently).
   */
  private findDuplicateDeep(offset: number): DuplicateKey | undefined {
    const text = this.text;
    const first = text.charCodeAt(offset);
    if (first !== OPEN_BRACE && first !== OPEN_BRACKET) return undefined;
    // One key list per open object (`null` for an array); a string right after `{` or `,` in an object is a
    // key. Contract objects hold a handful of keys, so a list beats a Map; a charCode loop beats a regex.
    const stack: (string[] | null)[] = [];
    const starts: number[][] = [];
    let expectKey = false;
    for (let i = offset; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c === QUOTE) {
        const end = this.skipString(i);
        if (expectKey) {
          const keys = stack[stack.length - 1]!;
          const raw = text.slice(i + 1, end - 1);
          const key = raw.includes('\\') ? (JSON.parse(text.slice(i, end)) as string) : raw;
          const seen = keys.indexOf(key);
          if (seen !== -1) return { key, firstOffset: starts[starts.length - 1]![seen]!, secondOffset: i };
          keys.push(key);
          starts[starts.length - 1]!.push(i);
          expectKey = false;
        }
        i = end - 1;
      } else if (c === OPEN_BRACE) {
        stack.push([]);
        starts.push([]);
        expectKey = true;
      } else if (c === OPEN_BRACKET) {
        stack.push(null);
        starts.push([]);
        expectKey = false;
      } else if (c === COMMA) {
        expectKey = stack[stack.length - 1] !== null;
      } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
        stack.pop();
        starts.pop();
        expectKey = false;
        if (stack.length === 0) return undefined;
      }
    }
    return undefined;
  }

  private index(offset: number): ContainerIndex | undefined {
    const cached = this.containers.get(offset);
    if (cached) return cached;
    const code = this.text.charCodeAt(offset);
    let built: ContainerIndex;
    if (code === OPEN_BRACE) built = { kind: 'object', ...this.scanObject(offset) };
    else if (code === OPEN_BRACKET) built = { kind: 'array', items: this.scanArray(offset) };
    else return undefined;
    this.containers.set(offset, built);
    return built;
  }

  private scanObject(start: number): { members: Map<string, NodeOffsets>; duplicate?: DuplicateKey } {
    const text = this.text;
    const members = new Map<string, NodeOffsets>();
    let duplicate: DuplicateKey | undefined;
    let i = this.skipWhitespace(start + 1);
    while (i < text.length && text.charCodeAt(i) !== CLOSE_BRACE) {
      const keyOffset = i;
      const keyEnd = this.skipString(i);
      const raw = text.slice(i + 1, keyEnd - 1);
      const key = raw.includes('\\') ? (JSON.parse(text.slice(i, keyEnd)) as string) : raw;
      i = this.skipWhitespace(keyEnd);
      if (text.charCodeAt(i) === COLON) i = this.skipWhitespace(i + 1);
      const valueOffset = i;
      // Later duplicates win, as they do in JSON.parse; the first one found is remembered.
      if (duplicate === undefined) {
        const first = members.get(key);
        if (first) duplicate = { key, firstOffset: first.keyOffset!, secondOffset: keyOffset, firstValueEnd: this.skipValue(first.valueOffset) };
      }
      members.set(key, { keyOffset, valueOffset });
      i = this.skipWhitespace(this.skipValue(i));
      if (text.charCodeAt(i) === COMMA) i = this.skipWhitespace(i + 1);
      else break;
    }
    return duplicate ? { members, duplicate } : { members };
  }

  private scanArray(start: number): number[] {
    const text = this.text;
    const items: number[] = [];
    let i = this.skipWhitespace(start + 1);
    while (i < text.length && text.charCodeAt(i) !== CLOSE_BRACKET) {
      items.push(i);
      i = this.skipWhitespace(this.skipValue(i));
      if (text.charCodeAt(i) === COMMA) i = this.skipWhitespace(i + 1);
      else break;
    }
    return items;
  }

  /**
   * Offset just past the value starting at `i`. With `record`, the ends of a container and of its direct
   * children are kept for the scans that index it later.
   */
  private skipValue(i: number, record = true): number {
    const text = this.text;
    const code = text.charCodeAt(i);
    if (code === QUOTE) return this.skipString(i);
    if (code === OPEN_BRACE || code === OPEN_BRACKET) {
      const known = this.ends.get(i);
      if (known !== undefined) return known;
      // Jump from bracket to bracket with a native regex scan that also steps over whole strings (a 10 MB
      // `paths` object is skipped in one pass without a JavaScript iteration per string or character).
      // The ends of the direct children are kept: indexing the container later (locating a node below it)
      // then steps over each child at once instead of scanning the same text again, level after level.
      const toBracket = BRACKET_OUTSIDE_STRINGS;
      toBracket.lastIndex = i;
      let depth = 0;
      let childStart = -1;
      while (toBracket.test(text)) {
        const j = toBracket.lastIndex - 1;
        const c = text.charCodeAt(j);
        if (c === OPEN_BRACE || c === OPEN_BRACKET) {
          depth += 1;
          if (depth === 2) childStart = j;
        } else {
          depth -= 1;
          if (depth === 1) {
            if (record) this.ends.set(childStart, j + 1);
          } else if (depth === 0) {
            if (record) this.ends.set(i, j + 1);
            return j + 1;
          }
        }
      }
      return text.length;
    }
    let j = i;
    while (j < text.length) {
      const c = text.charCodeAt(j);
      if (c === COMMA || c === CLOSE_BRACE || c === CLOSE_BRACKET || c <= 32) break;
      j += 1;
    }
    return j;
  }

  /** Offset just past the string literal whose opening quote is at `i`. */
  private skipString(i: number): number {
    const text = this.text;
    let j = i + 1;
    for (;;) {
      const close = text.indexOf('"', j);
      if (close === -1) return text.length;
      let backslashes = 0;
      for (let k = close - 1; k > i && text.charCodeAt(k) === BACKSLASH; k--) backslashes += 1;
      if (backslashes % 2 === 0) return close + 1;
      j = close + 1;
    }
  }

  private skipWhitespace(i: number): number {
    const text = this.text;
    while (i < text.length) {
      const c = text.charCodeAt(i);
      // space, tab, CR, LF, and a UTF-8 BOM at the start
      if (c === 32 || c === 10 || c === 13 || c === 9 || c === 0xfeff) i += 1;
      else break;
    }
    return i;
  }
}

function isJsonSpace(code: number): boolean {
  return code === 32 || code === 10 || code === 13 || code === 9;
}
