/**
 * One loaded file: its text, its parsed value and a lazy position index. JSON is parsed with `JSON.parse`
 * (the `yaml` package is not even loaded for JSON inputs); YAML with `yaml` once, keeping the Document for
 * positions.
 */
import { isAscii } from 'node:buffer';
import { closeSync, openSync, readFileSync, readSync, realpathSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { extname } from 'node:path';
import type * as JsYamlModule from 'js-yaml';
import type * as YamlModule from 'yaml';
import { DocumentError } from '../errors.js';
import type { Position } from './model.js';
import { encodingProblem, notUtf8 } from './encoding.js';
import { describeJsonSyntaxError, isSpace } from './json-errors.js';
import { appendPointer, parsePointer } from './pointer.js';
import { JsonPositionIndex, LineTable, type PositionIndex } from './positions.js';
import { jsonStringSource } from './regexp.js';
import { describeYamlSyntaxError } from './yaml-errors.js';
import { YamlEventIndex } from './yaml-positions.js';

const require = createRequire(import.meta.url);
// js-yaml reads documents (fast, with offsets on every event); `yaml` only explains syntax errors.
let jsYamlModule: typeof JsYamlModule | undefined;
let yamlSchema: JsYamlModule.Schema | undefined;
function loadJsYaml(): typeof JsYamlModule {
  return (jsYamlModule ??= require('js-yaml') as typeof JsYamlModule);
}
let yamlModule: typeof YamlModule | undefined;
function loadYaml(): typeof YamlModule {
  return (yamlModule ??= require('yaml') as typeof YamlModule);
}

/** A problem in a file that does not stop it from loading. */
export interface SourceWarning {
  readonly pointer: string;
  readonly message: string;
  /** Set when the warning has a known offset in the text (YAML warnings). */
  readonly offset?: number;
  /** A key written twice: its name and where it was first written (YAML duplicate-key warnings). */
  readonly duplicate?: { readonly key: string; readonly firstOffset: number };
}

/**
 * The text of a JSON file read with its non-ASCII characters escaped (see {@link escapedText}), and what can be
 * read without making the file's own text.
 */
interface EscapedText {
  /** The file's text with every non-ASCII character written as a `\u` escape: ASCII, what JSON.parse read. */
  readonly scanText: string;
  /** Makes the file's own text. */
  readonly decode: () => string;
  /** Whether the file's own text writes a `\u` escape. */
  readonly writesUnicodeEscape: boolean;
  /** The runs of non-ASCII characters, in text order. */
  readonly runs: readonly EscapedRun[];
  /** `grown[k]`: how many characters longer the escapes of the runs before run `k` are than what they stand for. */
  readonly grown: readonly number[];
}

/** A parsed file with on-demand positions. */
export class SourceFile {
  #text: string | undefined;
  readonly #escaped: EscapedText | undefined;
  /** Lines of {@link text} (for {@link positionAt}), and of {@link scanText} (for offsets the index finds). */
  #lines: LineTable | undefined;
  #scanLines: LineTable | undefined;
  #index: PositionIndex | undefined;

  /** `text` is the file's text, or for a JSON file read with escapes, that text's parts (the index is then made on first use). */
  constructor(
    readonly file: string,
    readonly format: 'json' | 'yaml',
    text: string | EscapedText,
    readonly value: unknown,
    index: PositionIndex | undefined,
    readonly warnings: readonly SourceWarning[] = [],
  ) {
    if (typeof text === 'string') this.#text = text;
    else this.#escaped = text;
    this.#index = index;
  }

  /** The file's text, without a byte-order mark. */
  get text(): string {
    return (this.#text ??= this.#escaped!.decode());
  }

  /**
   * JSON text for searches: {@link text}, or for a big JSON file with non-ASCII characters the text JSON.parse
   * read, each such character a `\u` escape. Both hold the same members, names and literals; the escaped one is
   * one byte per character, while the file's own text would be two throughout (making it costs more than the
   * parse). Its offsets differ after an escape on the same line: positions come from {@link position}.
   */
  get scanText(): string {
    return this.#escaped?.scanText ?? this.text;
  }

  /** Whether the file's text writes a `\u` escape ({@link scanText}'s own escapes not counted). */
  writesUnicodeEscape(): boolean {
    return this.#escaped?.writesUnicodeEscape ?? this.text.includes('\\u');
  }

  private get lines(): LineTable {
    return (this.#lines ??= new LineTable(this.text));
  }

  // The index reads the escaped text when there is one: key names are compared decoded, so it finds the same
  // members and duplicates; its offsets are the escaped text's, turned into the file's by scanPosition.
  private get index(): PositionIndex {
    return (this.#index ??= new JsonPositionIndex(this.scanText));
  }

  /** Line/column in the file of an offset in {@link scanText}: each escape before it on its line counts as the characters it stands for. */
  private scanPosition(offset: number): Position {
    const escaped = this.#escaped;
    if (escaped === undefined) return this.lines.position(offset);
    const position = (this.#scanLines ??= new LineTable(escaped.scanText)).position(offset);
    const { runs, grown } = escaped;
    const lineStart = offset - position.column + 1;
    const from = firstRunFrom(runs, lineStart);
    const to = firstRunFrom(runs, offset);
    return from === to ? position : { line: position.line, column: position.column - (grown[to]! - grown[from]!) };
  }

  /**
   * Line/column of the node at `pointer`: the key's position for an object member (the line a person points
   * at), the value's for an array item or the root. A pointer that does not resolve maps to its deepest
   * existing ancestor.
   */
  position(pointer: string): Position {
    let tokens: string[];
    try {
      tokens = parsePointer(pointer);
    } catch {
      tokens = [];
    }
    const located = this.index.locate(tokens);
    return this.scanPosition(located.keyOffset ?? located.valueOffset);
  }

  /**
   * The first key written twice in the object at `pointer` (and its nested objects when `deep`): the key,
   * and the positions of both occurrences. YAML files never get here with one (see parseYaml).
   */
  duplicateKey(pointer: string, deep: boolean): { key: string; first: Position; second: Position } | undefined {
    const found = this.index.duplicateKey?.(parsePointer(pointer), deep);
    if (!found) return undefined;
    return { key: found.key, first: this.scanPosition(found.firstOffset), second: this.scanPosition(found.secondOffset) };
  }

  /**
   * The first key written twice in the object at `pointer` (one level) when the dropped first value holds a
   * member named `key`: JSON.parse keeps the second, so what the first held vanishes silently. `undefined`
   * otherwise, and for YAML.
   */
  duplicateKeyDropping(pointer: string, key: string): { key: string; first: Position; second: Position } | undefined {
    if (this.format !== 'json') return undefined;
    const found = this.index.duplicateKey?.(parsePointer(pointer), false);
    if (!found) return undefined;
    // The name in every spelling the text searched may write it: `"x-idem\u0070otency"` is `x-idempotency` too.
    const name = new RegExp(jsonStringSource(key), 'g');
    name.lastIndex = found.firstOffset;
    const held = name.exec(this.scanText)?.index ?? -1;
    if (held === -1 || held >= (found.firstValueEnd ?? found.secondOffset)) return undefined;
    return { key: found.key, first: this.scanPosition(found.firstOffset), second: this.scanPosition(found.secondOffset) };
  }

  /**
   * How many members named `key` the file has and how many member names their values hold (JSON only;
   * `undefined` for YAML, whose duplicates parseYaml handles).
   */
  membersNamed(key: string): { count: number; names: number } | undefined {
    return this.index.membersNamed?.(key);
  }

  /** The first key written twice inside the value of any member named `key` (JSON only). */
  duplicateInMembers(key: string): { key: string; first: Position; second: Position } | undefined {
    const dup = this.index.duplicateInMembers?.(key);
    return dup && { key: dup.key, first: this.scanPosition(dup.firstOffset), second: this.scanPosition(dup.secondOffset) };
  }

  /** Line/column of a character offset. */
  positionAt(offset: number): Position {
    return this.lines.position(offset);
  }
}

/** Reads and parses a file synchronously. Throws {@link DocumentError} for unreadable or unparsable files. */
export function readSource(file: string): SourceFile {
  let text: string | EscapedText;
  try {
    const stats = statSync(file);
    if (stats.isDirectory()) {
      throw new DocumentError('is a directory, not an OpenAPI file — name the .yaml or .json file', file, '', 1, 1);
    }
    // Read the bytes, then decode: faster than readFileSync's own 'utf8' path on big files (Node 20).
    const { bytes, room } = stats.isFile() ? readBytes(file, stats.size) : { bytes: readStream(file), room: 0 };
    const problem = encodingProblem(bytes);
    if (problem !== undefined) throw new DocumentError(problem, file, '', 1, 1);
    const invalid = notUtf8(bytes);
    if (invalid !== undefined) throw new DocumentError(invalid.message, file, '', invalid.line, invalid.column);
    // Decoded here: a file too long for one string (ERR_STRING_TOO_LONG) cannot be read, like an unreadable one.
    text = (room > 0 ? escapedText(file, bytes, room) : undefined) ?? bytes.toString('utf8');
  } catch (error) {
    if (error instanceof DocumentError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT'
        ? 'file not found — check the path (relative paths start at the current directory)'
        : code === 'EACCES'
          ? 'permission denied — make the file readable'
          : code === 'ELOOP'
            ? 'a symbolic link loop (the link leads back to itself) — point the link at the file'
            : code === 'ENOTDIR'
              ? 'a part of the path is a file, not a directory — check the path'
              : `cannot read the file (${code ?? String(error)}) — check the path and permissions`;
    throw new DocumentError(why, file, '', 1, 1);
  }
  return typeof text === 'string' ? parseSource(file, text) : parseEscaped(file, text);
}

/** Files from this size on are read with room to escape their non-ASCII characters in place (see escapedText). */
const ESCAPE_FROM = 256 * 1024;
/** That room: ~21,000 non-ASCII bytes' escapes. Never written unless needed, it costs no memory. */
const ESCAPE_ROOM = 64 * 1024;

/** Files from this size on are read as before: readFileSync then says what is wrong with a file too big to read. */
const ESCAPE_UP_TO = 1024 * 1024 * 1024;

/** Most bytes read from a file that is not a regular one (a pipe, `/dev/stdin`, a device): no spec comes near it. */
const STREAM_LIMIT = 256 * 1024 * 1024;

/**
 * The bytes of a pipe or device, read until its end: stopped at its first bytes when they are no UTF-8 text
 * (`/dev/zero`), and at {@link STREAM_LIMIT} when it has no end.
 */
function readStream(file: string): Buffer {
  const fd = openSync(file, 'r');
  try {
    const chunks: Buffer[] = [];
    let total = 0;
    let checked = false;
    for (;;) {
      const chunk = Buffer.allocUnsafe(64 * 1024);
      const read = readSync(fd, chunk, 0, chunk.length, null);
      if (read === 0) return Buffer.concat(chunks, total);
      chunks.push(chunk.subarray(0, read));
      total += read;
      if (!checked && total >= 8192) {
        checked = true;
        const problem = encodingProblem(Buffer.concat(chunks, total));
        if (problem !== undefined) throw new DocumentError(problem, file, '', 1, 1);
      }
      if (total > STREAM_LIMIT) {
        throw new DocumentError(`not a regular file, and more than ${STREAM_LIMIT / 1024 / 1024} MiB came from it without an end — name the OpenAPI document's file`, file, '', 1, 1);
      }
    }
  } finally {
    closeSync(fd);
  }
}

/** The file's bytes, and how many bytes after them the buffer has free (`bytes` is a view of its start). */
function readBytes(file: string, size: number): { bytes: Buffer; room: number } {
  if (size < ESCAPE_FROM || size > ESCAPE_UP_TO) return { bytes: readFileSync(file), room: 0 };
  const fd = openSync(file, 'r');
  try {
    const buffer = Buffer.allocUnsafeSlow(size + ESCAPE_ROOM);
    let length = 0;
    for (;;) {
      const read = readSync(fd, buffer, length, buffer.length - length, null);
      if (read === 0) return { bytes: buffer.subarray(0, length), room: buffer.length - length };
      length += read;
      // Grown by more than the room while being read: read it again, whole.
      if (length === buffer.length) return { bytes: readFileSync(file), room: 0 };
    }
  } finally {
    closeSync(fd);
  }
}

/** One run of non-ASCII bytes, as escaped in the parsed text. */
interface EscapedRun {
  /** Where its escapes start in the escaped text. */
  readonly at: number;
  /** The escapes: `\uXXXX` for each UTF-16 code unit of `text`. */
  readonly escapes: string;
  /** The run decoded: what the file's text holds there. */
  readonly text: string;
}

const BACKSLASH_BYTE = 0x5c;

/**
 * The text of a JSON file with non-ASCII characters, made from its bytes with each run of them rewritten in place
 * as `\u` escapes, in the room `readBytes` left after them. Outside a string a non-ASCII byte is a syntax error,
 * and inside one an escape means the same characters, so JSON.parse gives the same value (see parseEscaped); but it reads a
 * one-byte string, where decoding the file gives a two-byte one throughout for a single `é` (on GitHub's 13 MB
 * description: 140 non-ASCII bytes, and 26 MB of text to decode and hold instead of 13). The file's own text
 * is made from the escaped one only when asked for: positions are read off the escaped text (see scanPosition).
 *
 * `undefined` — and the bytes untouched — when that does not apply: not JSON by name or start, only ASCII
 * (decoding it is as cheap), not enough room, or a non-ASCII byte right after a backslash (an invalid escape,
 * which the rewrite would make valid).
 */
function escapedText(file: string, bytes: Buffer, room: number): EscapedText | undefined {
  const ext = extname(file).toLowerCase();
  if (ext === '.yaml' || ext === '.yml') return undefined;
  // UTF-8's byte-order mark, which parseSource drops too.
  const start = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
  let first = start;
  while (first < bytes.length && isSpace(bytes[first]!)) first += 1;
  if (bytes[first] !== 0x7b && bytes[first] !== 0x5b) return undefined;
  const body = bytes.subarray(start);
  if (isAscii(body)) return undefined;
  // Each non-ASCII byte grows by at least 1 as an escape (a 3-byte character: 6 for 3).
  const runs = nonAsciiRuns(body, room);
  if (runs === undefined) return undefined;
  const escaped: EscapedRun[] = [];
  let grown = 0;
  for (const [from, to] of runs) {
    let backslashes = 0;
    while (from - backslashes - 1 >= 0 && body[from - backslashes - 1] === BACKSLASH_BYTE) backslashes += 1;
    if (backslashes % 2 === 1) return undefined;
    const text = body.toString('utf8', from, to);
    const escapes = unicodeEscapes(text);
    escaped.push({ at: from + grown, escapes, text });
    grown += escapes.length - (to - from);
  }
  if (grown > room) return undefined;
  const writesUnicodeEscape = body.indexOf('\\u') !== -1;
  // In place, from the end: each byte moves once.
  const whole = Buffer.from(body.buffer, body.byteOffset, body.length + room);
  let source = body.length;
  let target = body.length + grown;
  for (let k = runs.length - 1; k >= 0; k--) {
    const [from, to] = runs[k]!;
    const { escapes } = escaped[k]!;
    whole.copyWithin(target - (source - to), to, source);
    target -= source - to + escapes.length;
    whole.write(escapes, target, 'latin1');
    source = from;
  }
  const scanText = whole.toString('latin1', 0, body.length + grown);
  const decode = (): string => {
    const parts: string[] = [];
    let at = 0;
    for (const run of escaped) {
      parts.push(scanText.slice(at, run.at), run.text);
      at = run.at + run.escapes.length;
    }
    parts.push(scanText.slice(at));
    return parts.join('');
  };
  const longer = [0];
  for (const run of escaped) longer.push(longer[longer.length - 1]! + run.escapes.length - run.text.length);
  return { scanText, decode, writesUnicodeEscape, runs: escaped, grown: longer };
}

/** The index of the first run at or after `offset` of the escaped text (`runs.length` when none is). */
function firstRunFrom(runs: readonly EscapedRun[], offset: number): number {
  let low = 0;
  let high = runs.length;
  while (low < high) {
    const middle = (low + high) >> 1;
    if (runs[middle]!.at < offset) low = middle + 1;
    else high = middle;
  }
  return low;
}

/** `text` with each non-ASCII character written as escapedText writes it. */
function asciiEscaped(text: string): string {
  return text.replace(/[^\x00-\x7f]+/g, unicodeEscapes);
}

/** Parses what escapedText made; invalid JSON is parsed again from the file's own text, for the error as it always was. */
function parseEscaped(file: string, escaped: EscapedText): SourceFile {
  let value: unknown;
  try {
    value = JSON.parse(escaped.scanText);
  } catch {
    return parseSource(file, escaped.decode());
  }
  return new SourceFile(file, 'json', escaped, value, undefined);
}

/**
 * The runs of non-ASCII bytes, found by native checks of halves of ever smaller spans (a loop only over the 256
 * bytes around each run); `undefined` once they hold more than `limit` bytes, which could not be escaped in place.
 */
function nonAsciiRuns(bytes: Uint8Array, limit: number): [number, number][] | undefined {
  const runs: [number, number][] = [];
  let count = 0;
  const collect = (from: number, to: number): boolean => {
    if (isAscii(bytes.subarray(from, to))) return true;
    if (to - from > 256) {
      const middle = from + Math.floor((to - from) / 2);
      return collect(from, middle) && collect(middle, to);
    }
    for (let i = from; i < to; i++) {
      if (bytes[i]! < 0x80) continue;
      let j = i + 1;
      while (j < to && bytes[j]! >= 0x80) j += 1;
      // A run cut by a span's end goes on in the next span.
      const last = runs[runs.length - 1];
      if (last !== undefined && last[1] === i) last[1] = j;
      else runs.push([i, j]);
      count += j - i;
      i = j;
    }
    return count <= limit;
  };
  return collect(0, bytes.length) ? runs : undefined;
}

/** Each UTF-16 code unit of `text` as a JSON `\uXXXX` escape. */
function unicodeEscapes(text: string): string {
  let escaped = '';
  for (let i = 0; i < text.length; i++) escaped += `\\u${text.charCodeAt(i).toString(16).padStart(4, '0')}`;
  return escaped;
}

/** Parses file text as JSON or YAML (by extension, then by content). */
export function parseSource(file: string, text: string): SourceFile {
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (text.trim() === '') {
    throw new DocumentError('the file is empty — write an OpenAPI document (openapi: 3.1.0, info, paths)', file, '', 1, 1);
  }
  const ext = extname(file).toLowerCase();
  const looksLikeJson = /^\s*[{[]/.test(text);
  if (ext === '.json' || (looksLikeJson && ext !== '.yaml' && ext !== '.yml')) {
    return parseJson(file, text);
  }
  if (looksLikeJson) {
    // JSON is YAML; the JSON parser is an order of magnitude faster, so try it first.
    try {
      return new SourceFile(file, 'json', text, JSON.parse(text), new JsonPositionIndex(text));
    } catch {
      // not strict JSON: fall through to YAML
    }
  }
  return parseYaml(file, text);
}

function parseJson(file: string, text: string): SourceFile {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    const { offset, message, hint } = describeJsonSyntaxError(error, text);
    const { line, column } = new LineTable(text).position(offset);
    throw new DocumentError(`invalid JSON: ${message} — ${hint}`, file, undefined, line, column);
  }
  return new SourceFile(file, 'json', text, value, new JsonPositionIndex(text));
}

function parseYaml(file: string, text: string): SourceFile {
  const jsYaml = loadJsYaml();
  // The member name the loader makes of a plain key: the core schema reads `0x1F7` as 503, `~` as null.
  const plainKey = (plain: string): string => {
    try {
      return String(jsYaml.load(plain, { schema: yamlSchema }));
    } catch {
      return plain;
    }
  };
  // YAML 1.2 core schema (no timestamps: `2024-01-01` stays a string) plus `<<` merge keys. js-yaml rejects
  // a key written twice; the error path below decides whether it matters to a contract.
  // Local tags (`!Sub`, `!Ref`, `!GetAtt` of AWS SAM / CloudFormation templates that embed an API) are read
  // as the plain value they tag: they are valid YAML, and nothing idemkit reads sits under one.
  yamlSchema ??= jsYaml.CORE_SCHEMA.withTags(jsYaml.mergeTag, ...localTags(jsYaml));
  let events: JsYamlModule.Event[];
  let documents: unknown[];
  try {
    events = jsYaml.parseEvents(text, { filename: file, maxDepth: 1_000 });
  } catch (error) {
    throw yamlError(file, text, error);
  }
  const warnings: SourceWarning[] = [];
  try {
    documents = jsYaml.constructFromEvents(events, { source: text, filename: file, schema: yamlSchema, maxTotalMergeKeys: -1 });
  } catch (error) {
    if ((error as { reason?: string }).reason !== 'duplicated mapping key') throw yamlError(file, text, error);
    // A key written twice where it could change a contract stays an error; elsewhere (two `description`s in
    // a schema) the document loads with the last one, as lenient YAML tools do, and each gets a warning.
    const index = new YamlEventIndex(text, events, jsYaml.getScalarValue, plainKey);
    const duplicates = index.duplicates();
    const lines = new LineTable(text);
    const fatal = duplicates.find((duplicate) => duplicate.contract);
    if (fatal || duplicates.length === 0) {
      const offset = fatal?.secondOffset ?? (error as { mark?: { position?: number } }).mark?.position;
      const key = fatal?.key ?? index.duplicateAt(offset ?? -1)?.key;
      const firstOffset = fatal?.firstOffset ?? index.duplicateAt(offset ?? -1)?.firstOffset;
      if (key === undefined || offset === undefined || firstOffset === undefined) throw yamlError(file, text, error);
      throw duplicateKeyDocumentError(file, key, lines.position(firstOffset), lines.position(offset));
    }
    try {
      documents = jsYaml.constructFromEvents(events, { source: text, filename: file, schema: yamlSchema, maxTotalMergeKeys: -1, json: true });
    } catch (retryError) {
      throw yamlError(file, text, retryError);
    }
    for (const duplicate of duplicates) {
      const first = lines.position(duplicate.firstOffset);
      warnings.push({
        pointer: appendPointer('', ...duplicate.path),
        message: `duplicate key \`${duplicate.key}\` (first at line ${first.line}): the last one is used — keep one`,
        offset: duplicate.secondOffset,
        duplicate: { key: duplicate.key, firstOffset: duplicate.firstOffset },
      });
    }
  }
  // A `---` at the end with nothing after it (common in hand-kept files) opens an empty document: no content lost.
  while (documents.length > 1 && (documents[documents.length - 1] === null || documents[documents.length - 1] === undefined)) documents.pop();
  if (documents.length > 1) {
    const { line, column } = new LineTable(text).position(secondDocumentOffset(text, events));
    throw new DocumentError('invalid YAML: the file holds several documents — keep one document per file (remove the extra --- and what follows, or move it to its own file)', file, undefined, line, column);
  }
  const value = documents[0];
  if (value === undefined || value === null) {
    throw new DocumentError('the file has no content (only comments or blank lines) — write an OpenAPI document (openapi: 3.1.0, info, paths)', file, '', 1, 1);
  }
  return new SourceFile(file, 'yaml', text, value, new YamlEventIndex(text, events, jsYaml.getScalarValue, plainKey), warnings);
}

/** Where the second document of a YAML stream starts: its `---` marker, else its first node. */
function secondDocumentOffset(text: string, events: readonly JsYamlModule.Event[]): number {
  let documents = 0;
  for (const event of events) {
    if (event.type === 1) documents += 1;
    else if (documents === 2) {
      const start = 'valueStart' in event ? event.valueStart : 'start' in event ? event.start : -1;
      if (start < 0) continue;
      // Its `---` line, the last document marker before it; after a `...` end marker a document may start bare.
      let marker: RegExpExecArray | null = null;
      for (const match of text.slice(0, start).matchAll(/^(?:---|\.\.\.)(?=[ \t\r\n]|$)/gm)) marker = match;
      return marker !== null && marker[0] === '---' ? marker.index : start;
    }
  }
  return 0;
}

/** Tags for any local tag (`!Name`): a scalar is its text, a sequence a list, a mapping an object. */
function localTags(jsYaml: typeof JsYamlModule): JsYamlModule.TagDefinition[] {
  const loadOnly = { matchByTagPrefix: true, identify: () => false };
  return [
    jsYaml.defineScalarTag('!', { ...loadOnly, resolve: (source: string) => source }),
    jsYaml.defineSequenceTag('!', { ...jsYaml.seqTag, ...loadOnly }),
    jsYaml.defineMappingTag('!', { ...jsYaml.mapTag, ...loadOnly }),
  ];
}

/** `duplicate key `x` (first at line N) — keep one`, at the second occurrence. */
export function duplicateKeyDocumentError(file: string, key: string, first: Position, second: Position, pointer?: string): DocumentError {
  return new DocumentError(`duplicate key \`${key}\` (first at line ${first.line}) — keep one`, file, pointer, second.line, second.column);
}

/**
 * The error for YAML that does not parse. The `yaml` package explains syntax errors better (and points at
 * an unclosed quote where it opens), so it is consulted on this path only.
 */
function yamlError(file: string, text: string, error: unknown): DocumentError {
  const lines = new LineTable(text);
  const mark = (error as { mark?: { position?: number } }).mark;
  // js-yaml stops at its depth limit; `yaml` would overflow the stack explaining it.
  const depth = /nesting exceeded maxDepth \((\d+)\)/.exec((error as { reason?: string }).reason ?? '');
  if (depth) {
    const { line, column } = lines.position(Math.min(mark?.position ?? 0, text.length));
    return new DocumentError(`invalid YAML: nested too deeply (over ${depth[1]} levels) — flatten the structure here`, file, undefined, line, column);
  }
  const yaml = loadYaml();
  // `yaml` breaks lines at LF only; a lone CR (old Mac files, which js-yaml reads) becomes an LF of the same length,
  // so its offsets still point into `text`.
  const lf = text.replace(/\r(?!\n)/g, '\n');
  // `yaml` has no depth limit: a syntax error in a deeply nested file (js-yaml stops at the error, before its own
  // limit) overflowed the stack here — "internal error", or its message at a wrong place. Then js-yaml's own word goes.
  let document: ReturnType<typeof yaml.parseDocument> | undefined;
  try {
    document = yaml.parseDocument(lf, { merge: true, prettyErrors: false, keepSourceTokens: false, uniqueKeys: false });
  } catch {
    document = undefined;
  }
  // A stack overflow it reports as one of the document's errors says nothing of the syntax either.
  if (document?.errors.some((candidate) => /call stack/i.test(candidate.message)) === true) document = undefined;
  const first = document?.errors[0];
  if (first) {
    const { offset, message } = describeYamlSyntaxError(yaml, lf, first);
    const { line, column } = lines.position(offset);
    return new DocumentError(`invalid YAML: ${message}`, file, undefined, line, column);
  }
  const reason = (error as { reason?: string }).reason ?? (error instanceof Error ? error.message : String(error));
  if (/complex keys/.test(reason) && document !== undefined) {
    // Valid YAML (`? [201, 202]`) that no JSON object can hold; js-yaml gives no position, `yaml` has the key's.
    let at: number | undefined;
    yaml.visit(document, {
      Pair(_key, pair) {
        const key = pair.key as { range?: [number, number, number] } | null;
        if (key && !yaml.isScalar(key) && key.range) {
          at = key.range[0];
          return yaml.visit.BREAK;
        }
        return undefined;
      },
    });
    if (at !== undefined) {
      const { line, column } = lines.position(at);
      return new DocumentError('invalid YAML: a mapping key must be a string, not a list or a map (OpenAPI keys are names) — write it as a plain key', file, undefined, line, column);
    }
  }
  const at = Math.min(mark?.position ?? 0, text.length);
  const { line, column } = lines.position(at);
  // Valid YAML 1.2 (`yaml` read it) that js-yaml refuses: a tab separating the items of a flow collection.
  const end = text.indexOf('\n', at);
  const lineText = text.slice(text.lastIndexOf('\n', at - 1) + 1, end === -1 ? text.length : end);
  if (/indentation/.test(reason) && /[[{][^\]}]*\t/.test(lineText)) {
    return new DocumentError('invalid YAML for idemkit: a tab between the items of a flow collection ({…} or […]) — valid YAML 1.2 that its YAML reader does not take; put spaces there', file, undefined, line, column);
  }
  return new DocumentError(`invalid YAML: ${reason} — fix the YAML here`, file, undefined, line, column);
}

/** Files loaded in one run, by absolute path; entry documents and the external files they share. */
export class SourceCache {
  private readonly files = new Map<string, SourceFile | DocumentError>();
  /** The path each real file was first named by, by its real path. */
  private readonly names = new Map<string, string>();

  /**
   * The path `file` was first named by in this run when it is a file named before under another path (through a
   * symbolic link, or a `$ref` spelled another way): one file, one name, so its findings are reported once.
   * `file` itself otherwise, and when it cannot be resolved (a missing file is reported under its own name).
   */
  name(file: string): string {
    let real: string;
    try {
      real = realpathSync(file);
    } catch {
      return file;
    }
    const known = this.names.get(real);
    if (known !== undefined) return known;
    this.names.set(real, file);
    return file;
  }

  /** Returns the parsed file, reading it on first use; rethrows the same error for a bad file. */
  get(file: string): SourceFile {
    let entry = this.files.get(file);
    if (!entry) {
      try {
        entry = readSource(file);
      } catch (error) {
        if (!(error instanceof DocumentError)) throw error;
        entry = error;
      }
      this.files.set(file, entry);
    }
    if (entry instanceof DocumentError) throw entry;
    return entry;
  }

  /** Whether the file is loaded (successfully). */
  has(file: string): boolean {
    return this.files.get(file) instanceof SourceFile;
  }
}
