/**
 * `multipart/form-data` bodies as the fingerprint sees them: the parts, not the bytes on the wire. A client
 * picks a new random boundary for every body it builds (`FormData` does), so a retry of the same upload never
 * repeats the first attempt's bytes; hashed raw, it would be refused as another payload. Node built-ins only.
 */
import { createHash } from 'node:crypto';

/** A part that carries a file: its name, type and a digest of its bytes stand for it in the fingerprint. */
export class FilePart {
  readonly filename: string;
  readonly type: string;
  readonly size: number;
  readonly sha256: string;

  constructor(filename: string, type: string, size: number, sha256: string) {
    this.filename = filename;
    this.type = type;
    this.size = size;
    this.sha256 = sha256;
  }

  /** The part of a file with these bytes (`type` is compared lower-cased). */
  static of(filename: string, type: string, bytes: Uint8Array): FilePart {
    return new FilePart(filename, type.toLowerCase(), bytes.byteLength, createHash('sha256').update(bytes).digest('hex'));
  }
}

/** A JSON part's value. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [name: string]: JsonValue };

/** One part: its field name and its value (text, a JSON part's value, or a file). */
export interface MultipartField {
  readonly name: string;
  readonly value: string | FilePart | JsonValue;
}

const CR = 13;
const LF = 10;
const DASH = 45;
const SPACE = 32;
const TAB = 9;

/** The `boundary` parameter of a `multipart/form-data` Content-Type, or undefined for any other type. */
export function multipartBoundary(contentType: string | readonly string[] | undefined): string | undefined {
  if (typeof contentType !== 'string' || !/^\s*multipart\/form-data\s*;/i.test(contentType)) return undefined;
  // RFC 2046: 1 to 70 characters. A longer one is not cut short (a prefix could match delimiters that are
  // not there): the body is then hashed byte for byte.
  const match = /;\s*boundary\s*=\s*(?:"((?:[^"\\]|\\.){1,70})"|([^\s;"]{1,70}))\s*(?:;|$)/i.exec(contentType);
  if (match === null) return undefined;
  return match[1] !== undefined ? match[1].replace(/\\(.)/g, '$1') : match[2];
}

/**
 * The fields of a multipart body in order (RFC 7578): a JSON part without a file name is its JSON value (a
 * client sends an object field so; fingerprint pointers reach into it); a part with a `filename` (or
 * another non-text type, or bytes that are not UTF-8) is a {@link FilePart}; any other is its text. `undefined` when the body is not
 * well-formed multipart with that boundary (no closing delimiter, a part without a name): the fingerprint
 * then hashes the exact bytes, which never makes two different payloads look alike.
 */
export function multipartFields(body: Uint8Array, boundary: string): MultipartField[] | undefined {
  const bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const delimiter = Buffer.from(`--${boundary}`, 'latin1');
  const between = Buffer.from(`\r\n--${boundary}`, 'latin1');
  // The first delimiter starts the body or a line (anything before it is preamble).
  let at = bytes.indexOf(delimiter);
  while (at > 0 && !(bytes[at - 1] === LF && bytes[at - 2] === CR)) at = bytes.indexOf(delimiter, at + 1);
  if (at === -1) return undefined;
  const fields: MultipartField[] = [];
  for (;;) {
    let cursor = at + delimiter.length;
    if (bytes[cursor] === DASH && bytes[cursor + 1] === DASH) return fields;
    while (bytes[cursor] === SPACE || bytes[cursor] === TAB) cursor += 1;
    if (bytes[cursor] !== CR || bytes[cursor + 1] !== LF) return undefined;
    cursor += 2;
    // A form-data part always has headers (its Content-Disposition), then an empty line, then its content;
    // an empty header block is no field (nor is a header-like line in its content).
    if (bytes[cursor] === CR && bytes[cursor + 1] === LF) return undefined;
    const headersEnd = bytes.indexOf('\r\n\r\n', cursor, 'latin1');
    if (headersEnd === -1) return undefined;
    const contentStart = headersEnd + 4;
    const next = bytes.indexOf(between, contentStart);
    if (next === -1) return undefined;
    const field = partField(bytes.toString('utf8', cursor, headersEnd), bytes.subarray(contentStart, next));
    if (field === undefined) return undefined;
    fields.push(field);
    at = next + 2;
  }
}

/** A part's field from its header block and content; undefined without a form-data name. */
function partField(headers: string, content: Buffer): MultipartField | undefined {
  let disposition: string | undefined;
  let type = '';
  for (const line of headers.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon === -1) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    if (name === 'content-disposition') disposition = line.slice(colon + 1);
    else if (name === 'content-type') type = line.slice(colon + 1).trim().toLowerCase();
  }
  const parameters = disposition === undefined ? undefined : formDataParameters(disposition);
  const name = parameters?.get('name');
  if (name === undefined) return undefined;
  const filename = extendedValue(parameters!.get('filename*')) ?? parameters!.get('filename');
  const json = /^application\/(?:[\w.+-]+\+)?json\s*(;|$)/.test(type);
  if (filename === undefined && (json || type === '' || type.startsWith('text/plain'))) {
    try {
      const text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(content);
      return { name, value: json ? (JSON.parse(text) as JsonValue) : text };
    } catch {
      // Not UTF-8 text (or not JSON): kept as a file, by digest.
    }
  }
  return { name, value: FilePart.of(filename ?? '', type, content) };
}

/**
 * The parameters of a `form-data` Content-Disposition value, read left to right (a quoted value may hold
 * `; name=`), by lower-case name; undefined for another disposition or a value that does not parse.
 */
function formDataParameters(value: string): Map<string, string> | undefined {
  const head = /^\s*form-data\s*/iy;
  if (!head.test(value)) return undefined;
  const parameter = /;\s*([^\s=;"]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s"]*))\s*/y;
  parameter.lastIndex = head.lastIndex;
  const out = new Map<string, string>();
  while (parameter.lastIndex < value.length) {
    const match = parameter.exec(value);
    if (match === null) return undefined;
    const key = match[1]!.toLowerCase();
    if (!out.has(key)) out.set(key, match[2] !== undefined ? match[2].replace(/\\(.)/g, '$1') : match[3]!);
  }
  return out;
}

/** An RFC 5987 value (`UTF-8''r%C3%A9sum%C3%A9.pdf`), decoded; undefined when absent or malformed. */
function extendedValue(value: string | undefined): string | undefined {
  const extended = value === undefined ? null : /^([\w!#$%&+^`{}~-]*)'[\w-]*'(.*)$/.exec(value);
  if (extended === null) return undefined;
  try {
    return decodeURIComponent(extended[2]!);
  } catch {
    return undefined;
  }
}
