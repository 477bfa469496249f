/**
 * What the framework adapters share: the options every route guard takes and small request helpers.
 * Imports `../guard.js`, `../multipart.js` and Node built-ins; copied into users' generated code with the adapter.
 */
import { routePath, type CompiledContract } from '../contract.js';
import type { GuardOptions, GuardResponse } from '../guard.js';
import { readFile } from 'node:fs/promises';
import { decodeContent } from '../content-coding.js';
import { FilePart, multipartBoundary, multipartFields, type JsonValue } from '../multipart.js';
import { bracketPath } from '../form-names.js';
import { parseJsonExact } from '../fingerprint.js';

/**
 * Options of a route guard: the guard core's options (the store, the reconciliation hook, timeouts, …)
 * plus how to read the principal and the delivery's request id from the framework's request.
 */
export interface RouteGuardOptionsFor<Req> extends GuardOptions {
  /**
   * The authenticated owner of the request (user, account, API client id) for `principal` key scopes: a string, a
   * finite number (`42` and `"42"` are two owners: return one type every time) or a bigint (its decimal text).
   * Return `undefined` or `null` when the request has none: a principal-scoped operation then answers 400.
   * Runs after your authentication middleware, so read what it attached.
   */
  readonly principal?: ((request: Req) => Principal | Promise<Principal>) | undefined;
  /** The delivery's request id, for logs only (default: the `X-Request-Id` header). */
  readonly requestId?: ((request: Req) => string | undefined) | undefined;
}

/** What a principal hook answers: the owner's id, or none. */
export type Principal = string | number | bigint | null | undefined;

/** Header map for the guard: lower-case names; a header sent several times stays an array. */
export type GuardHeaders = Record<string, string | readonly string[] | undefined>;

/**
 * Builds the guard's header map from `[name, values]` pairs, keeping repeated headers as arrays. No prototype: a
 * header named `constructor` or `__proto__` is a header like any other. A name sent many times is appended to one
 * array (not copied at each repeat: quadratic where a runtime takes long header sections).
 */
export function headersFromEntries(entries: Iterable<readonly [string, readonly string[] | string | undefined]>): GuardHeaders {
  const headers = Object.create(null) as Record<string, string | string[]>;
  for (const [name, value] of entries) {
    if (value === undefined) continue;
    const lower = name.toLowerCase();
    const previous = headers[lower];
    if (previous === undefined) {
      if (typeof value === 'string') headers[lower] = value;
      else if (value.length > 0) headers[lower] = value.length === 1 ? value[0]! : [...value];
    } else if (typeof previous === 'string') {
      headers[lower] = typeof value === 'string' ? [previous, value] : [previous, ...value];
    } else if (typeof value === 'string') {
      previous.push(value);
    } else {
      for (const one of value) previous.push(one);
    }
  }
  return headers;
}

/** The single value of a header, or `undefined` when absent or sent several times. */
export function singleHeader(headers: GuardHeaders, name: string): string | undefined {
  const value = headers[name.toLowerCase()];
  return typeof value === 'string' ? value : undefined;
}

/**
 * Query parameters as the guard reads them, from a URL's query (`?` and all after it; a `#` ends it): repeated
 * names become arrays, each name and value decoded by {@link decodeFormComponent}. No prototype: `?constructor=a`
 * or `?__proto__=b` are parameters like any other.
 */
export function queryFromSearch(search: string): Record<string, string | readonly string[]> {
  const query = Object.create(null) as Record<string, string | string[]>;
  for (const [name, value] of formEntries(search)) {
    const previous = query[name];
    // Appended, not copied at each repeat (quadratic in a long query of one name).
    if (previous === undefined) query[name] = value;
    else if (typeof previous === 'string') query[name] = [previous, value];
    else previous.push(value);
  }
  return query;
}

/**
 * The query of a request target as `new URL(target).search` has it, without building a URL: from the first `?`
 * (included) to a `#`, if any.
 */
export function searchOf(target: string): string {
  const hash = target.indexOf('#');
  const end = hash < 0 ? target.length : hash;
  const question = target.indexOf('?');
  return question < 0 || question > end ? '' : target.slice(question, end);
}

/**
 * The `name=value` pairs of urlencoded text (a query, with or without its `?`; a form body), in order, as
 * `URLSearchParams` reads them — split at `&`, `+` a space, percent-escapes decoded — except bytes that are not
 * UTF-8: `URLSearchParams` makes each one U+FFFD, so `%E9` and `%E8` (é and è in Latin-1, which Express's and
 * Fastify's parsers hand the handler as they came) would be one payload, and the second the first's replay.
 * Each such byte becomes the lone surrogate U+DC00 + byte instead (Python's "surrogateescape"), which no UTF-8
 * text decodes to: every byte sequence stays its own value, and a key holding one is refused as malformed.
 */
export function formEntries(text: string): [string, string][] {
  const entries: [string, string][] = [];
  let from = text.startsWith('?') ? 1 : 0;
  while (from <= text.length) {
    let to = text.indexOf('&', from);
    if (to < 0) to = text.length;
    if (to > from) {
      // The `=` looked for in this pair alone: a search of the whole rest would be quadratic in `a&a&a…`.
      const pair = text.slice(from, to);
      const equals = pair.indexOf('=');
      entries.push(equals < 0 ? [decodeFormComponent(pair), ''] : [decodeFormComponent(pair.slice(0, equals)), decodeFormComponent(pair.slice(equals + 1))]);
    }
    from = to + 1;
  }
  return entries;
}

/** One urlencoded name or value, decoded as {@link formEntries} says. */
function decodeFormComponent(text: string): string {
  const spaced = text.includes('+') ? text.replaceAll('+', ' ') : text;
  if (!spaced.includes('%')) return spaced;
  try {
    return decodeURIComponent(spaced);
  } catch {
    return decodeEscaping(spaced);
  }
}

const HEX = /^[0-9A-Fa-f]{2}$/;

/** `text` with its percent-escapes decoded as UTF-8, each byte that is not UTF-8 a lone surrogate; a `%` without two hex digits stays. */
function decodeEscaping(text: string): string {
  let out = '';
  let bytes: number[] = [];
  for (let i = 0; i < text.length; i += 1) {
    if (text[i] === '%' && HEX.test(text.slice(i + 1, i + 3))) {
      bytes.push(Number.parseInt(text.slice(i + 1, i + 3), 16));
      i += 2;
      continue;
    }
    if (bytes.length > 0) {
      out += utf8Escaping(bytes);
      bytes = [];
    }
    out += text[i]!;
  }
  return bytes.length > 0 ? out + utf8Escaping(bytes) : out;
}

/** UTF-8 `bytes` as text; a byte that starts no well-formed sequence becomes U+DC00 + byte. */
function utf8Escaping(bytes: readonly number[]): string {
  let out = '';
  let i = 0;
  while (i < bytes.length) {
    const lead = bytes[i]!;
    const length = lead < 0x80 ? 0 : lead >= 0xc2 && lead <= 0xdf ? 1 : lead >= 0xe0 && lead <= 0xef ? 2 : lead >= 0xf0 && lead <= 0xf4 ? 3 : -1;
    let point = length === 0 ? lead : length === 1 ? lead & 0x1f : length === 2 ? lead & 0x0f : lead & 0x07;
    let valid = length >= 0;
    for (let k = 1; valid && k <= length; k += 1) {
      const next = bytes[i + k];
      if (next === undefined || (next & 0xc0) !== 0x80) valid = false;
      else point = (point << 6) | (next & 0x3f);
    }
    const least = length === 1 ? 0x80 : length === 2 ? 0x800 : length === 3 ? 0x10000 : 0;
    if (valid && point >= least && point <= 0x10ffff && !(point >= 0xd800 && point <= 0xdfff)) {
      out += String.fromCodePoint(point);
      i += length + 1;
    } else {
      out += String.fromCharCode(0xdc00 + lead);
      i += 1;
    }
  }
  return out;
}

/** One segment of a path template: literals around its parameters (`{name}.{ext}`: `['', '.', '']`, names `name`, `ext`). */
interface TemplateSegment {
  readonly literals: readonly string[];
  readonly names: readonly string[];
}

/**
 * Compiles an OpenAPI path template into a matcher for the end of a URL path (so mount prefixes work; one
 * trailing slash is ignored). Linear in the path: the template's segments are compared with the path's last
 * ones, and a segment holding several parameters (`{year}-{month}-{day}`) is split at its literals from the
 * right — each parameter before a literal as long as it can be, as a greedy RegExp would, without the
 * backtracking that made such a RegExp cubic on a long path that does not match.
 */
export function pathMatcher(template: string): (pathname: string) => Record<string, string> | undefined {
  const path = routePath(template);
  // An OpenAPI path starts with '/'; one that does not is matched as if it did (whole segments, never a suffix of one).
  const segments: TemplateSegment[] = (path.startsWith('/') ? path : `/${path}`)
    .split('/')
    .slice(1)
    .map((segment) => {
      const literals: string[] = [];
      const names: string[] = [];
      segment.split(/(\{[^}]+\})/).forEach((part, index) => {
        if (index % 2 === 1) names.push(part.slice(1, -1));
        else literals.push(urlPathForm(part));
      });
      return { literals, names };
    });
  const matchSegments = (pathname: string): Record<string, string> | undefined => {
    const parts = pathname.split('/');
    // A '/' before the template's first segment: the path has at least one more part than the template has segments.
    if (parts.length <= segments.length) return undefined;
    const params: Record<string, string> = {};
    const offset = parts.length - segments.length;
    for (let i = 0; i < segments.length; i++) {
      if (!matchSegment(segments[i]!, parts[offset + i]!, params)) return undefined;
    }
    return params;
  };
  return (pathname) => {
    if (pathname.endsWith('/')) return matchSegments(pathname.slice(0, -1)) ?? matchSegments(pathname);
    return matchSegments(pathname);
  };
}

/** Matches one path segment against a template segment, adding its parameters (percent-decoded) to `params`. */
function matchSegment(segment: TemplateSegment, part: string, params: Record<string, string>): boolean {
  const { literals, names } = segment;
  if (names.length === 0) return part === literals[0];
  const head = literals[0]!;
  const tail = literals[literals.length - 1]!;
  if (!part.startsWith(head) || !part.endsWith(tail)) return false;
  let start = head.length;
  let end = part.length - tail.length;
  const values: string[] = new Array<string>(names.length);
  // From the right: the last parameter as short as it can be, so every earlier one is as long as it can be.
  for (let n = names.length - 1; n > 0; n--) {
    const literal = literals[n]!;
    // Each parameter takes at least one character: the literal ends before `end - 1` and starts after the ones before.
    const at = literal === '' ? end - 1 : part.lastIndexOf(literal, end - 1 - literal.length);
    if (at < start + n || at + literal.length >= end) return false;
    values[n] = part.slice(at + literal.length, end);
    end = at;
  }
  if (end <= start) return false;
  values[0] = part.slice(start, end);
  for (let n = 0; n < names.length; n++) params[names[n]!] = decodeSegment(values[n]!);
  return true;
}

/** A percent-decoded path segment; a malformed escape (`%E0%A4%A`) stays as it was rather than throw. */
function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/**
 * A literal part of a path template as `new URL(…).pathname` spells it: the WHATWG path percent-encode set
 * (controls, space, `"`, `#`, `<`, `>`, `?`, `` ` ``, `{`, `}`, non-ASCII) as UTF-8 `%XX`, so `/v1/ünïcode`
 * matches the `/v1/%C3%BCn%C3%AFcode` a request URL carries.
 */
function urlPathForm(literal: string): string {
  let out = '';
  for (const char of literal) {
    const code = char.codePointAt(0)!;
    out += code <= 0x20 || code >= 0x7f || '"#<>?`{}'.includes(char) ? encodeURIComponent(char) : char;
  }
  return out;
}

/** The parameter names of an OpenAPI path template: `/v1/items/{item.id}/x/{id}` → `['item.id', 'id']`. */
export function templateParamNames(template: string): string[] {
  return [...template.matchAll(/\{([^}]+)\}/g)].map((match) => match[1]!);
}

/** The path of a request target (`/a/b?x=1`, or an absolute URL) as `new URL(…).pathname` spells it. */
export function requestPathname(target: string): string {
  try {
    // Prefixing keeps `//x` a path, not a host.
    return new URL(target.startsWith('/') ? `http://localhost${target}` : target, 'http://localhost').pathname;
  } catch {
    return target.split(/[?#]/)[0] ?? '';
  }
}

/**
 * Path parameters for the guard from a router that names them itself (Express `req.params`, Fastify
 * `request.params`). OpenAPI names such as `{item.id}` or `{action-name}` cannot be router param names, so a
 * route says `:itemId` and the contract's name is missing: those are then read by matching the contract's
 * template against the request path (percent-decoded). The router's values come first. The template is
 * matched only when a name is missing.
 */
export function routerPathParams(template: string): (routerParams: unknown, target: () => string) => Record<string, string> {
  const names = templateParamNames(template);
  let match: ((pathname: string) => Record<string, string> | undefined) | undefined;
  return (routerParams, target) => {
    const params: Record<string, string> = {};
    if (routerParams !== null && typeof routerParams === 'object') {
      // Taken as the router gives them (Express 5 wildcards are arrays), so existing fingerprints do not change.
      for (const name of Object.keys(routerParams)) {
        const value = (routerParams as Record<string, unknown>)[name];
        if (value !== undefined) params[name] = value as string;
      }
    }
    if (hasAll(params, names)) return params;
    match ??= pathMatcher(template);
    const matched = match(requestPathname(target()));
    if (matched === undefined) return params;
    for (const name of names) {
      // Read once: TypeScript before 5.5 does not narrow `matched[name]` between two reads.
      const value = matched[name];
      if (!Object.hasOwn(params, name) && value !== undefined) params[name] = value;
    }
    return params;
  };
}

/** Whether `params` has an own member for each of `names`. */
function hasAll(params: Record<string, string>, names: readonly string[]): boolean {
  for (const name of names) if (!Object.hasOwn(params, name)) return false;
  return true;
}

/** Concatenates byte chunks into one `Uint8Array`. */
export function concatBytes(chunks: readonly Uint8Array[]): Uint8Array {
  let length = 0;
  for (const chunk of chunks) length += chunk.length;
  const out = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.length;
  }
  return out;
}

/**
 * The answer a record holds for one sent with a `Content-Encoding` (compression middleware behind the guard,
 * a handler passing on an upstream's gzip): its body decoded (gzip, deflate, br, also chained) and the header
 * gone, so a replay is the body itself, compressed afresh for its own client where the app compresses. An
 * encoding it cannot undo leaves the answer as it is, and the guard records the header with the bytes. No
 * encoding, no promise: the usual answer is returned as it came.
 */
export function identityAnswer(sent: GuardResponse): GuardResponse | Promise<GuardResponse> {
  const encoding = sent.headers['content-encoding'];
  return encoding === undefined ? sent : decodeAnswer(sent, encoding);
}

async function decodeAnswer(sent: GuardResponse, encoding: string): Promise<GuardResponse> {
  const body = await decodeContent(sent.body, encoding);
  if (body === undefined) return sent;
  const { 'content-encoding': _encoding, ...headers } = sent.headers;
  return { status: sent.status, headers, body };
}

/** Whether the guard reads query parameters for this contract (a query scope part or fingerprinted query). */
export function readsQuery(contract: CompiledContract): boolean {
  return contract.key.in === 'query' || contract.fingerprint.query.length > 0 || contract.fingerprint.queryAll === true || contract.scope.some((part) => part.kind === 'query');
}

/**
 * Each header's values as sent, from Node's flat `rawHeaders` (`[name, value, …]`): what `headersDistinct` gives on
 * HTTP/1, for requests that lack it (Node's HTTP/2 compatibility API: Fastify with `http2: true`).
 */
export function distinctFromRaw(raw: readonly string[]): Record<string, string[]> {
  const distinct: Record<string, string[]> = Object.create(null) as Record<string, string[]>;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    (distinct[name] ??= []).push(raw[i + 1]!);
  }
  return distinct;
}

/**
 * The guard's header map from Node's parsed headers: `headers` (repeated headers joined with `, `, as Node
 * does) with the key header's separate values from `distinct()` when it may have been sent several times —
 * asked only then, because Node builds that map on demand. `keyHeader` is undefined for a query or body key.
 */
export function nodeHeaders(
  headers: Readonly<Record<string, string | readonly string[] | undefined>>,
  distinct: () => Readonly<Record<string, readonly string[] | undefined>> | undefined,
  keyHeader: string | undefined,
): GuardHeaders {
  if (keyHeader === undefined) return headers;
  const joined = headers[keyHeader];
  if (typeof joined === 'string' && joined.includes(',')) {
    const values = distinct()?.[keyHeader];
    if (values !== undefined && values.length > 1) return { ...headers, [keyHeader]: values };
  }
  // The guard only reads the map: Node's own object serves as it is (no copy per request).
  return headers;
}

/**
 * A request body as the fingerprint sees it, whatever its declared `Content-Type` (clients often send JSON
 * as `text/plain`): a form's fields for a form (urlencoded, or multipart parts with files by digest, so a
 * retry's new boundary changes nothing); the JSON value when text or bytes parse as JSON; otherwise
 * the exact text or bytes, which the fingerprint hashes byte for byte. A body a framework already parsed
 * (an object) is kept as it is. Never lets two different payloads look alike.
 */
export function bodyForFingerprint(body: unknown, contentType: string | readonly string[] | undefined): unknown {
  const form = isFormContentType(contentType);
  // Each multipart body has its own random boundary: its parts are the payload, not its bytes.
  const boundary = multipartBoundary(contentType);
  if (typeof body !== 'string' && !(body instanceof Uint8Array)) {
    if (form) return formFields(body);
    // Parts a parser already read (`@fastify/multipart` with `attachFieldsToBody: 'keyValues'`): files are bytes.
    return boundary !== undefined ? withFileDigests(body) : body;
  }
  if (boundary !== undefined) {
    const parts = multipartFields(typeof body === 'string' ? Buffer.from(body, 'utf8') : body, boundary);
    if (parts !== undefined) return nestFields(parts.map(({ name, value }) => [name, [value]]));
  }
  let text: string;
  if (typeof body === 'string') {
    text = body;
  } else {
    try {
      text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(body);
    } catch {
      return body;
    }
  }
  if (form) return formFields(text);
  // JSON nested absurdly deep (a 16 KiB gzip of `[[[…]]]` inflates to 16 MiB, 8 million levels) costs seconds to
  // parse and write canonically, with the loop blocked: it is fingerprinted by its bytes, in one pass.
  if (text.length > 2 * MAX_PARSED_DEPTH && nestsDeeperThan(text, MAX_PARSED_DEPTH)) return body;
  try {
    // Numbers a double cannot hold stay exact: a handler that reads the text losslessly acts on them as sent.
    return parseJsonExact(text);
  } catch {
    // Not JSON: the exact text or bytes; the handler answers whatever is wrong with it.
    return body;
  }
}

/** How deep a JSON body the guard parses for its fingerprint; a deeper one is fingerprinted by its bytes. */
const MAX_PARSED_DEPTH = 1000;

/** Whether `text`'s brackets (outside strings) nest deeper than `limit`: one pass, stopping there. */
function nestsDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth -= 1;
    } else if (c === 0x22) {
      // A string: to its closing quote, over escapes.
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c) i++;
        else if (d === 0x22) break;
      }
    }
  }
  return false;
}

/** A file an upload middleware took out of the body (multer's shape: `req.file`, `req.files`). */
interface UploadedFile {
  readonly fieldname: string;
  readonly originalname?: string;
  readonly mimetype?: string;
  readonly buffer?: Uint8Array;
  readonly path?: string;
}

function isUploadedFile(value: unknown): value is UploadedFile {
  return value !== null && typeof value === 'object' && typeof (value as { fieldname?: unknown }).fieldname === 'string';
}

/**
 * The fingerprint body of a multipart request a middleware such as multer already parsed: its text fields
 * (`body`) plus each file it moved to `req.file` / `req.files` (an array, or arrays by field name), by name,
 * type, size and SHA-256 of its bytes — read from `buffer` (memory storage) or `path` (disk storage). Without
 * the files, two uploads of different files under one key would look alike and the second would get the
 * first one's replay. A file whose bytes cannot be read fails the request rather than being left out.
 */
export async function withUploadedFiles(body: unknown, file: unknown, files: unknown): Promise<unknown> {
  const uploaded: UploadedFile[] = [];
  if (isUploadedFile(file)) uploaded.push(file);
  if (Array.isArray(files)) uploaded.push(...files.filter(isUploadedFile));
  else if (files !== null && typeof files === 'object') {
    for (const list of Object.values(files as Record<string, unknown>)) if (Array.isArray(list)) uploaded.push(...list.filter(isUploadedFile));
  }
  if (uploaded.length === 0) return body;
  const parts: (readonly [string, readonly FormLeaf[]])[] = [];
  for (const upload of uploaded) {
    let bytes: Uint8Array;
    if (upload.buffer instanceof Uint8Array) bytes = upload.buffer;
    else if (typeof upload.path === 'string') bytes = await readFile(upload.path);
    else throw new Error(`the uploaded file '${upload.fieldname}' has neither a buffer nor a path: the idempotency fingerprint cannot read it`);
    parts.push([upload.fieldname, [FilePart.of(upload.originalname ?? '', upload.mimetype ?? '', bytes)]]);
  }
  const fields = formFields(body ?? {});
  const merged: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  if (fields !== null && typeof fields === 'object' && !Array.isArray(fields)) Object.assign(merged, fields);
  else merged[''] = fields;
  for (const [name, value] of Object.entries(nestFields(parts) as Record<string, unknown>)) {
    // A file part under a text field's name sits beside the text (`[text, file]`), never in place of it.
    merged[name] = Object.hasOwn(merged, name) ? [merged[name], value] : value;
  }
  return merged;
}

/**
 * Whether a request announces a body (a non-zero Content-Length, or Transfer-Encoding) that no parser put
 * in front of the guard: fingerprinting `undefined` would make every payload under a key look alike, so the
 * adapters refuse such a request instead of guessing.
 */
/**
 * How long one-transaction mode lets a handler hold its transaction before it is rolled back: `leaseRenewalMaxMs`
 * when set, else the contract's TTL. Rolling back does not stop the handler: what it writes after goes outside the
 * transaction (SQLite: on the store's connection, committed on its own; PostgreSQL: the connection is closed under
 * it, so it fails), and the freed key lets a retry run it again. So the default is the TTL, past which the key is
 * forgotten anyway — not the lease, which rolled a 40-second handler back and ran it twice (the diff review's); a
 * bound below the TTL (for SQLite, whose write lock a hung handler holds for every request) must sit above the
 * slowest handler. Capped at setTimeout's own limit (about 24.8 days), past which a timer fires at once.
 */
export function transactionBoundMs(contract: CompiledContract, options: GuardOptions): number {
  return Math.min(options.leaseRenewalMaxMs ?? contract.ttlMs, 2 ** 31 - 1);
}

/** Whether `method` reads (`GET`, `HEAD`, in any letter case): the only requests a status route answers. */
export function isRead(method: string): boolean {
  const upper = method.toUpperCase();
  return upper === 'GET' || upper === 'HEAD';
}

export function bodyNotParsed(body: unknown, headers: Readonly<Record<string, string | readonly string[] | undefined>>): boolean {
  const length = headers['content-length'];
  return body === undefined && ((length !== undefined && length !== '0') || headers['transfer-encoding'] !== undefined);
}

/**
 * A parsed multipart body with each file's bytes (a member, or an item of a repeated member) as a {@link FilePart},
 * its bracketed part names nested (`doc[front]`, `docs[0]`) as the raw multipart path and multer nest them, so a
 * pointer such as `/doc/front` sees the file (`@fastify/multipart` keeps the names flat).
 */
function withFileDigests(body: unknown): unknown {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return body;
  const digest = (value: unknown): FormLeaf => (value instanceof Uint8Array ? FilePart.of('', '', value) : (attachedPart(value) ?? (value as FormLeaf)));
  // A repeated part comes as a list of two or more; a shorter list is one JSON part's own value (`[]`, `["a"]`), a leaf.
  return nestFields(Object.entries(body).map(([name, value]) => [name, Array.isArray(value) && value.length > 1 ? value.map(digest) : [digest(value)]]));
}

/**
 * A part `@fastify/multipart` attached to the body with `attachFieldsToBody: true`: `{ type: 'field', value }` — its
 * value — or `{ type: 'file', filename, mimetype, _buf }` — the file, by digest, as the same part read from the raw
 * body would be; each also holds `fields`, the whole body again (walked as data, it contains itself). Undefined for
 * any other value.
 */
function attachedPart(value: unknown): FormLeaf | undefined {
  if (value === null || typeof value !== 'object' || !('fieldname' in value) || !('fields' in value)) return undefined;
  const part = value as { type?: unknown; value?: unknown; filename?: unknown; mimetype?: unknown; _buf?: unknown };
  if (part.type === 'field') return part.value as FormLeaf;
  if (part.type !== 'file') return undefined;
  if (!(part._buf instanceof Uint8Array)) {
    // An `onFile` handler took the file's stream: its bytes are not in the body, and without them another file
    // under the same key would be taken for this one.
    throw new Error(
      "idempotency guard: a multipart file part reached the guard without its bytes (@fastify/multipart's onFile consumed it); let the plugin read files into the body (attachFieldsToBody: true without onFile, or 'keyValues')",
    );
  }
  return FilePart.of(typeof part.filename === 'string' ? part.filename : '', typeof part.mimetype === 'string' ? part.mimetype : '', part._buf);
}

/** Whether a `Content-Type` value is an HTML form body (`application/x-www-form-urlencoded`). */
export function isFormContentType(type: string | readonly string[] | undefined): boolean {
  return typeof type === 'string' && /^\s*application\/x-www-form-urlencoded\s*(;|$)/i.test(type);
}

/** A form field's value: text, a file by digest, or (multipart) a JSON part's value. */
type FormLeaf = string | FilePart | JsonValue;

/** An object the nesting builds (never a JSON part's own object, which is a leaf). Map: `__proto__` is data. */
class FormNode {
  readonly members = new Map<string, FormNode | FormList | FormLeaf>();
}

/** The values of one field sent several times, in order. */
class FormList {
  readonly items: FormLeaf[];
  // Fields, not parameter properties: the runtime stays erasable TypeScript (Node's type stripping, erasableSyntaxOnly).
  constructor(items: FormLeaf[]) {
    this.items = items;
  }
}

/** How many items `a[]` has appended to `node`: its members but a plain value kept under the empty name (`a=1&a[]=2`). */
function itemCount(node: FormNode): number {
  return node.members.size - (node.members.has('') ? 1 : 0);
}

/** Whether `node` already holds the member path `tokens[from…]` (a later `[]` in it counts as not held). */
function hasPath(node: FormNode, tokens: readonly string[], from: number): boolean {
  let current: FormNode | FormList | FormLeaf | undefined = node;
  for (let i = from; i < tokens.length; i += 1) {
    if (tokens[i] === '' || !(current instanceof FormNode)) return false;
    current = current.members.get(tokens[i]!);
    if (current === undefined) return false;
  }
  return true;
}

/** Plain values out of the nesting: nodes whose member names are exactly `0`…`n-1` become arrays (`a[]=x&a[]=y`, `a[0]=x`). */
function finishForm(value: FormNode | FormList | FormLeaf): unknown {
  if (value instanceof FormList) return value.items;
  if (!(value instanceof FormNode)) return value;
  const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  const size = value.members.size;
  let sequence = size > 0;
  for (const [name, member] of value.members) {
    out[name] = finishForm(member);
    // Names 0…n-1 in any order (`a[1]=x&a[0]=y` too): the member names are distinct.
    sequence &&= /^(0|[1-9]\d*)$/.test(name) && Number(name) < size;
  }
  return sequence ? Array.from({ length: size }, (_, index) => out[String(index)]) : out;
}

/**
 * The fields of a form body as the contract's JSON Pointers address them. Stripe-style clients send nested
 * fields in brackets (`metadata[order_id]=1`, `expand[]=a`); `/metadata/order_id` must reach them whatever
 * parsed the body — raw text (fetch), a flat parser (`express.urlencoded()`, `@fastify/formbody`) or a
 * nesting one (`express.urlencoded({ extended: true })`, returned as it is). Without this a pointer would
 * miss its field and two different payloads would share a fingerprint. Objects have no prototype, so a
 * field named `__proto__` is data.
 */
export function formFields(body: unknown): unknown {
  if (typeof body === 'string') return nestFields(formEntries(body).map(([name, value]) => [name, [value]]));
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return body;
  const names = Object.keys(body);
  if (!names.some((name) => name.includes('['))) return body;
  return nestFields(
    names.map((name) => {
      const raw = (body as Record<string, string | readonly string[]>)[name]!;
      return [name, typeof raw === 'string' ? [raw] : raw.map(String)];
    }),
  );
}

/** Form fields (name → values, in order) nested by their bracketed names; see {@link formFields}. */
function nestFields(entries: readonly (readonly [string, readonly FormLeaf[]])[]): unknown {
  const root = new FormNode();
  for (const [name, values] of entries) {
    const tokens = bracketPath(name) ?? [name];
    let node = root;
    for (let i = 0; i < tokens.length - 1; i += 1) {
      let token = tokens[i]!;
      if (token === '') {
        // `a[]` in the middle (`items[][price]=1&items[][qty]=2`) fills the last item until it already has the
        // rest of the name, then starts the next one (Rack's rule; qs and flat parsers group such fields per name instead).
        const size = itemCount(node);
        const lastItem = size > 0 ? node.members.get(String(size - 1)) : undefined;
        token = lastItem instanceof FormNode && !hasPath(lastItem, tokens, i + 1) ? String(size - 1) : String(size);
      }
      const next = node.members.get(token);
      if (next instanceof FormNode) node = next;
      else {
        // A field both plain and nested (`a=1&a[b]=2`, in either order): the plain values sit beside the nested
        // ones, under the empty name.
        const created = new FormNode();
        if (next !== undefined) created.members.set('', next);
        node.members.set(token, created);
        node = created;
      }
    }
    const last = tokens[tokens.length - 1]!;
    for (const value of values) {
      const leaf = last === '' ? String(itemCount(node)) : last;
      const previous = node.members.get(leaf);
      if (previous === undefined) node.members.set(leaf, value);
      else if (previous instanceof FormList) previous.items.push(value);
      else if (!(previous instanceof FormNode)) node.members.set(leaf, new FormList([previous, value]));
      else {
        // `a[b]=1&a=2`: the plain values sit beside the nested ones, under the empty name.
        const plain = previous.members.get('');
        if (plain === undefined) previous.members.set('', value);
        else if (plain instanceof FormList) plain.items.push(value);
        else if (!(plain instanceof FormNode)) previous.members.set('', new FormList([plain, value]));
      }
    }
  }
  return finishForm(root);
}
