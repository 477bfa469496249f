/**
 * What makes a file's bytes unreadable as UTF-8 text, told from its first bytes: a UTF-16 or UTF-32 file (a
 * BOM, or the NULs beside each ASCII character; PowerShell 5's `>` writes UTF-16), or a binary file; and where
 * a file stops being UTF-8 (a Latin-1 `é`), which decoding would turn into U+FFFD without a word.
 */
import { isUtf8 } from 'node:buffer';

/** Bytes looked at for a NUL: enough for any text file's start, cheap for any size. */
const HEAD = 8192;

/** Why `bytes` is not UTF-8 text, as `what it is — how to fix`; `undefined` when it may well be. */
export function encodingProblem(bytes: Uint8Array): string | undefined {
  const [b0, b1, b2, b3] = bytes;
  if ((b0 === 0xff && b1 === 0xfe && b2 === 0 && b3 === 0) || (b0 === 0 && b1 === 0 && b2 === 0xfe && b3 === 0xff)) return UTF32;
  if ((b0 === 0xff && b1 === 0xfe) || (b0 === 0xfe && b1 === 0xff)) return UTF16;
  const head = bytes.subarray(0, HEAD);
  const nul = head.indexOf(0);
  if (nul === -1) return undefined;
  if (head.every((byte) => byte === 0)) return BINARY;
  // Without a BOM: ASCII text in UTF-32 has three NULs beside each character, in UTF-16 one.
  if (bytes.length >= 4 && ((b0 === 0 && b1 === 0 && b2 === 0) || (b1 === 0 && b2 === 0 && b3 === 0))) return UTF32;
  if (bytes.length >= 2 && (b0 === 0) !== (b1 === 0)) return UTF16;
  return BINARY;
}

const BINARY = 'the file is binary (it holds NUL bytes), not YAML or JSON text — name the OpenAPI document';

const UTF16 = 'the file is UTF-16 — save it as UTF-8';
const UTF32 = 'the file is UTF-32 — save it as UTF-8';

/** The first byte of `bytes` that is not UTF-8, as a line and column (UTF-16 code units, as findings count them; a BOM is not counted), or `undefined`. */
export function notUtf8(bytes: Uint8Array): { readonly line: number; readonly column: number; readonly message: string } | undefined {
  if (isUtf8(bytes)) return undefined;
  const at = firstInvalidUtf8(bytes);
  let line = 1;
  let start = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
  for (let i = start; i < at; i += 1) {
    const b = bytes[i];
    // CRLF, LF and a lone CR each end a line, as the line tables of findings count them.
    if (b === 0x0a || (b === 0x0d && bytes[i + 1] !== 0x0a)) {
      line += 1;
      start = i + 1;
    }
  }
  const column = Buffer.from(bytes.buffer, bytes.byteOffset + start, at - start).toString('utf8').length + 1;
  const byte = bytes[at]!.toString(16).toUpperCase().padStart(2, '0');
  return { line, column, message: `${NOT_UTF8}${byte} is not UTF-8 (the file is in another encoding, such as Latin-1 or Windows-1252) — save it as UTF-8` };
}

/** How the message of {@link notUtf8} starts, for telling its error (positioned inside the file) from whole-file ones. */
export const NOT_UTF8 = 'byte 0x';

/** Offset of the first byte that does not belong to a well-formed UTF-8 sequence (RFC 3629), or `bytes.length`. */
function firstInvalidUtf8(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i]!;
    if (b < 0x80) {
      i += 1;
      continue;
    }
    // The sequence's length and the range of its second byte (the rest are 0x80–0xBF).
    let length: number;
    let low = 0x80;
    let high = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) length = 2;
    else if (b >= 0xe0 && b <= 0xef) {
      length = 3;
      if (b === 0xe0) low = 0xa0;
      else if (b === 0xed) high = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
      length = 4;
      if (b === 0xf0) low = 0x90;
      else if (b === 0xf4) high = 0x8f;
    } else return i;
    if (i + length > bytes.length) return i;
    const second = bytes[i + 1]!;
    if (second < low || second > high) return i;
    for (let k = 2; k < length; k += 1) {
      const next = bytes[i + k]!;
      if (next < 0x80 || next > 0xbf) return i;
    }
    i += length;
  }
  return bytes.length;
}
