/**
 * Content codings the guard undoes before it records an answer (RFC 9110 §8.4.1): gzip, deflate and br, also chained,
 * up to {@link MAX_DECODED_BYTES}.
 */
import { promisify } from 'node:util';
import { brotliDecompress, gunzip, inflate } from 'node:zlib';

/**
 * The largest body decoded for a record (16 MiB): a small gzip can inflate to gigabytes in memory and in the
 * store. A larger one is recorded encoded, with its `Content-Encoding`.
 */
export const MAX_DECODED_BYTES = 16 * 1024 * 1024;

const DECODE_OPTIONS = { maxOutputLength: MAX_DECODED_BYTES };
const gunzipBytes = promisify(gunzip);
const inflateBytes = promisify(inflate);
const brotliBytes = promisify(brotliDecompress);
const DECODERS: Readonly<Record<string, (bytes: Uint8Array) => Promise<Buffer>>> = {
  gzip: (bytes) => gunzipBytes(bytes, DECODE_OPTIONS),
  'x-gzip': (bytes) => gunzipBytes(bytes, DECODE_OPTIONS),
  deflate: (bytes) => inflateBytes(bytes, DECODE_OPTIONS),
  br: (bytes) => brotliBytes(bytes, DECODE_OPTIONS),
};

/**
 * How `bytes` sent with `Content-Encoding: encoding` decode: `decoded` (gzip, deflate, br, also chained); `unknown` for
 * a coding it cannot undo (zstd); `too-large` past {@link MAX_DECODED_BYTES}; `not-encoded` when the outermost coding
 * does not take them and they do not open as it does — bytes decoded already under a header that still names the
 * coding; `corrupt` when they do open so (truncated, trailing bytes), or an inner coding does not take them.
 */
export type Decoding =
  | { readonly kind: 'decoded'; readonly body: Uint8Array }
  | { readonly kind: 'unknown' | 'too-large' | 'not-encoded' | 'corrupt' };

/** {@link Decoding} of `bytes` under `encoding`. Never rejects. */
export async function decodeCodings(bytes: Uint8Array, encoding: string): Promise<Decoding> {
  const codings = encoding.split(',').map((coding) => coding.trim().toLowerCase()).filter((coding) => coding !== '' && coding !== 'identity');
  if (codings.some((coding) => !Object.hasOwn(DECODERS, coding))) return { kind: 'unknown' };
  let body = bytes;
  // The last coding listed was applied last: it is undone first.
  for (let i = codings.length - 1; i >= 0; i -= 1) {
    try {
      body = await DECODERS[codings[i]!]!(body);
    } catch (error) {
      if ((error as { code?: unknown }).code === 'ERR_BUFFER_TOO_LARGE' || error instanceof RangeError) return { kind: 'too-large' };
      // Bytes that start as the coding does (gzip's magic, a zlib header) are that coding, broken (truncated, trailing
      // bytes): not text decoded already.
      return { kind: i === codings.length - 1 && !looksCoded(body, codings[i]!) ? 'not-encoded' : 'corrupt' };
    }
  }
  return { kind: 'decoded', body };
}

/** Whether `bytes` open as `coding`'s format does: gzip's magic number, or a zlib header (RFC 1950: CM 8, FCHECK). */
function looksCoded(bytes: Uint8Array, coding: string): boolean {
  if (bytes.length < 2) return false;
  if (coding === 'gzip' || coding === 'x-gzip') return bytes[0] === 0x1f && bytes[1] === 0x8b;
  if (coding === 'deflate') return (bytes[0]! & 0x0f) === 8 && (bytes[0]! * 256 + bytes[1]!) % 31 === 0;
  return false;
}

/**
 * `bytes` sent with `Content-Encoding: encoding`, decoded, or undefined for an encoding it cannot undo: an unknown
 * coding, bytes that are not what the header says, a body that would inflate past the limit.
 */
export async function decodeContent(bytes: Uint8Array, encoding: string): Promise<Uint8Array | undefined> {
  const decoding = await decodeCodings(bytes, encoding);
  return decoding.kind === 'decoded' ? decoding.body : undefined;
}
