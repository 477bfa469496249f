/**
 * What makes a file's bytes unreadable as UTF-8 text, told from its first bytes: a UTF-16 or UTF-32 file (a
 * BOM, or the NULs beside each ASCII character; PowerShell 5's `>` writes UTF-16), or a binary file.
 */

/** Bytes looked at for a NUL: enough for any text file's start, cheap for any size. */
const HEAD = 8192;

/** Why `bytes` is not UTF-8 text, as `what it is — how to fix`; `undefined` when it may well be. */
export function encodingProblem(bytes: Uint8Array): string | undefined {
  const [b0, b1, b2, b3] = bytes;
  if ((b0 === 0xff && b1 === 0xfe && b2 === 0 && b3 === 0) || (b0 === 0 && b1 === 0 && b2 === 0xfe && b3 === 0xff)) return UTF32;
  if ((b0 === 0xff && b1 === 0xfe) || (b0 === 0xfe && b1 === 0xff)) return UTF16;
  const nul = bytes.subarray(0, HEAD).indexOf(0);
  if (nul === -1) return undefined;
  // Without a BOM: ASCII text in UTF-32 has three NULs beside each character, in UTF-16 one.
  if (bytes.length >= 4 && ((b0 === 0 && b1 === 0 && b2 === 0) || (b1 === 0 && b2 === 0 && b3 === 0))) return UTF32;
  if (bytes.length >= 2 && (b0 === 0) !== (b1 === 0)) return UTF16;
  return 'the file is binary (it holds NUL bytes), not YAML or JSON text — name the OpenAPI document';
}

const UTF16 = 'the file is UTF-16 — save it as UTF-8';
const UTF32 = 'the file is UTF-32 — save it as UTF-8';
