/**
 * Request bodies of generated clients in their media type: JSON, `application/x-www-form-urlencoded`,
 * `multipart/form-data`, text and bytes.
 *
 * A body is encoded once per call, so every attempt of an intent sends the same bytes (a multipart body keeps
 * its boundary: a guard that fingerprints raw bytes sees the retry as the same request).
 *
 * This file is copied into users' generated output: it imports nothing outside `runtime/client`.
 */
import type { PreparedRequest } from './engine.js';
import { randomKey } from './intent.js';
import { bracketLeaves, bracketName, DEEP_OBJECT, formatOf, isBinary, isScalar, percentEncode, QUERY_DEFAULT, queryPairs, scalarText, TEXT_DELIMITER, type ParamFormat, type ParamInput } from './params.js';

/** A request body ready to send, and the `content-type` to send it with. */
export interface EncodedBody {
  readonly body: NonNullable<PreparedRequest['body']>;
  readonly contentType: string;
}

/** JSON media types (`application/json`, `application/problem+json`, `…+json`), as the generator types them too. */
export const JSON_MEDIA = /^application\/([\w.-]+\+)?json\b|\+json\b/i;
const FORM = /^application\/x-www-form-urlencoded\b/i;
const MULTIPART_FORM = /^multipart\/form-data\b/i;
/** A concrete media type (`type/subtype`, no `*`), parameters allowed: what a `Content-Type` can say. */
const CONCRETE = /^[\w!#$&^.+-]+\/[\w!#$&^.+-]+\s*(;|$)/;

/**
 * `value` in `mediaType`'s encoding: JSON for `…json` types; form fields for `application/x-www-form-urlencoded`
 * and `multipart/form-data` (a plain object of fields, or a `URLSearchParams` or `FormData`); a string or bytes
 * (`Blob`, `ArrayBuffer`, a typed array) as they are for other types (`text/*`, `application/octet-stream`, …).
 * `fields`: the format of form fields that have one (2.0 `collectionFormat`, 3.x `encoding` style/explode);
 * `partTypes`: the `Content-Type` of multipart parts (3.x `encoding`); `given`: the caller's `Content-Type`, which
 * a string or bytes body is sent with when the document allows it (see {@link rawContentType}); a form's, a
 * multipart body's (it names the boundary) and JSON's are the document's.
 * Throws `TypeError` for a value the media type cannot carry, rather than send it empty or as `{}`: a stream
 * (every attempt must send the same bytes again: read it into a `Blob` first), a `Map` or `Set`, form data or
 * bytes in a JSON body, anything but fields in a form.
 */
export function encodeBody(
  value: unknown,
  mediaType: string,
  fields: Readonly<Record<string, ParamFormat>> = {},
  partTypes: Readonly<Record<string, string>> = {},
  given?: string,
): EncodedBody {
  const kind = unsendableKind(value);
  if (FORM.test(mediaType)) return { body: urlencoded(value, kind, fields), contentType: mediaType };
  if (MULTIPART_FORM.test(mediaType)) return multipart(value, kind, mediaType, fields, partTypes);
  if (!JSON_MEDIA.test(mediaType)) {
    if (typeof value === 'string' || value instanceof Blob) return { body: value, contentType: rawContentType(value, mediaType, given) };
    const bytes = bytesOf(value);
    if (bytes !== undefined) return { body: bytes, contentType: rawContentType(value, mediaType, given) };
    const opaque = kind ?? opaqueKind(value);
    if (opaque !== undefined) throw new TypeError(`a ${mediaType} body is a string, a Blob or bytes, not ${opaque}`);
  } else {
    const opaque = kind ?? opaqueKind(value);
    if (opaque !== undefined) {
      throw new TypeError(`a ${mediaType} body is JSON data, not ${opaque}${opaque === 'a stream' || opaque.startsWith('a Promise') ? '' : ' (its JSON text would be {} or empty)'}`);
    }
  }
  return { body: JSON.stringify(value, jsonMember(mediaType)), contentType: mediaType };
}

/**
 * Tags (`Object.prototype.toString`) of built-in and platform objects whose data JSON does not write (`{}`): their
 * state is internal. A class of the app's own that names itself (`Symbol.toStringTag`) is not one of them.
 */
const OPAQUE_TAGS = new Set([
  'Response', 'Request', 'Headers', 'AbortSignal', 'AbortController', 'EventTarget', 'RegExp', 'WeakMap', 'WeakSet',
  'WeakRef', 'Symbol', 'MessagePort', 'MessageChannel', 'BroadcastChannel', 'WebSocket', 'Worker', 'CryptoKey',
]);

/**
 * What `value` is when `JSON.stringify` would write it as `{}`, as numbers, or not at all, though it holds data —
 * so a JSON body or part would silently lose it — or `undefined`: a file or bytes (a `Buffer` too, before its own
 * `toJSON`), a stream, form data, a `Map` or `Set`, a `Promise` or other thenable (a forgotten `await`), an `Error`
 * with no fields of its own, a `Response`, `Request`, `Headers`, `RegExp`, `WeakMap`, `AbortSignal` and the like.
 * An object with its own `toJSON` (a `Date`, a `URL`, a decimal, an Effect `Option`) says how it is written, and
 * plain objects, arrays and class instances (their own enumerable fields, as JSON writes them) are data.
 */
function opaqueKind(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  if (isBinary(value)) return 'a file or bytes';
  if (typeof (value as { toJSON?: unknown }).toJSON === 'function') return undefined;
  const kind = unsendableKind(value);
  if (kind !== undefined) return kind;
  if (typeof (value as { then?: unknown }).then === 'function') return 'a Promise or other thenable (a forgotten await?)';
  const fieldless = Object.keys(value).length === 0;
  if (value instanceof Error) return fieldless ? 'an Error' : undefined;
  const tag = Object.prototype.toString.call(value).slice(8, -1);
  return fieldless && OPAQUE_TAGS.has(tag) ? `${/^[AEIOU]/.test(tag) ? 'an' : 'a'} ${tag}` : undefined;
}

/**
 * The `JSON.stringify` replacer of a JSON body: a member that is an {@link opaqueKind} (as held, or as its own
 * `toJSON` made it) is a `TypeError` naming its key, instead of being written as `{}` or numbers.
 */
function jsonMember(mediaType: string): (this: unknown, key: string, member: unknown) => unknown {
  return function (this: unknown, key, member) {
    if (key === '') return member;
    const original: unknown = this === null || typeof this !== 'object' ? member : (this as Record<string, unknown>)[key];
    const kind = opaqueKind(original) ?? opaqueKind(member);
    if (kind === undefined) return member;
    throw new TypeError(`a ${mediaType} body holds ${kind} at \`${key}\`: JSON would write it as {} or leave it out`);
  };
}

/**
 * The `Content-Type` of a string or bytes body documented as `mediaType`, which may be a range (`image/*`, `*\/*`):
 * the caller's `given` type when it is concrete and the document allows it, else a `Blob`'s own type when it is,
 * else `mediaType` when concrete, else `application/octet-stream` (a range is no `Content-Type`).
 */
function rawContentType(value: unknown, mediaType: string, given: string | undefined): string {
  for (const own of [given?.trim(), value instanceof Blob ? value.type : undefined]) {
    if (own !== undefined && CONCRETE.test(own) && allows(mediaType, own)) return own;
  }
  return CONCRETE.test(mediaType) ? mediaType : 'application/octet-stream';
}

/** Whether a body documented as `mediaType` may say it is `type`: `*\/*` and `application/octet-stream` allow any type, `image/*` any image type, another type only itself (with any parameters). */
function allows(mediaType: string, type: string): boolean {
  const documented = essence(mediaType);
  if (documented === '*/*' || documented === 'application/octet-stream') return true;
  return documented.endsWith('/*') ? essence(type).startsWith(documented.slice(0, -1)) : essence(type) === documented;
}

/** `type/subtype` of a media type, lower case, without parameters. */
function essence(mediaType: string): string {
  return mediaType.split(';')[0]!.trim().toLowerCase();
}

/** Field data of another encoding: a `URLSearchParams` or a `FormData` (sent as form fields). */
type FieldData = URLSearchParams | FormData;

/**
 * What `value` is when no encoding but a form's (field data) or none at all (a stream) can send it: `a stream`
 * (a web `ReadableStream`, a Node stream, any async iterable: read once, it could not be sent again on a retry),
 * `a URLSearchParams`, `a FormData`, `a Map`, `a Set`; `undefined` for anything else.
 */
function unsendableKind(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as { getReader?: unknown; pipe?: unknown; [Symbol.asyncIterator]?: unknown };
  if (typeof v.getReader === 'function' || typeof v.pipe === 'function' || v[Symbol.asyncIterator] !== undefined) return 'a stream';
  if (value instanceof URLSearchParams) return 'a URLSearchParams';
  if (typeof FormData === 'function' && value instanceof FormData) return 'a FormData';
  return value instanceof Map ? 'a Map' : value instanceof Set ? 'a Set' : undefined;
}

/** A copy of `value`'s bytes when it is an `ArrayBuffer` or a view: later changes to the caller's buffer do not reach a retry. */
function bytesOf(value: unknown): ArrayBuffer | undefined {
  if (value instanceof ArrayBuffer) return value.slice(0);
  if (!ArrayBuffer.isView(value)) return undefined;
  const bytes = new Uint8Array(value.byteLength);
  bytes.set(new Uint8Array(value.buffer, value.byteOffset, value.byteLength));
  return bytes.buffer;
}

/** The tags (`Object.prototype.toString`) of built-in objects that hold no form fields. */
const NOT_FIELDS = new Set([
  'Array', 'Arguments', 'Function', 'Error', 'Boolean', 'Number', 'String', 'Symbol', 'BigInt', 'Date', 'RegExp',
  'Map', 'Set', 'WeakMap', 'WeakSet', 'WeakRef', 'Promise', 'ArrayBuffer', 'SharedArrayBuffer', 'DataView',
  'Generator', 'AsyncGenerator', 'Blob', 'File', 'ReadableStream', 'Iterator',
]);

/**
 * The fields of a form body: an object's own enumerable members (a plain object, a class instance such as a DTO, an
 * object of another realm), or a `URLSearchParams`' or `FormData`'s entries (`kind`, from {@link unsendableKind});
 * anything else cannot be one — a stream, a `Map`, a `Set`, a file or bytes, an array, a `Date`, an `Error`, a
 * `RegExp`, a `Promise` (refused as a forgotten `await`), a scalar: a built-in whose tag says it holds no fields.
 * `fieldData` is `true` for the entries (their values are strings and files, written as they are).
 */
function formMembers(value: unknown, kind: string | undefined, mediaType: string): { members: [string, unknown][]; fieldData: boolean } {
  if (kind === 'a URLSearchParams' || kind === 'a FormData') {
    const members: [string, unknown][] = [];
    (value as FieldData).forEach((member: unknown, name: string) => members.push([name, member]));
    return { members, fieldData: true };
  }
  if (typeof (value as { then?: unknown } | null)?.then === 'function') {
    throw new TypeError(`a ${mediaType} body must be an object of fields, not a Promise or other thenable (a forgotten await?)`);
  }
  // A built-in that holds no fields (an Error, a RegExp, a WeakMap, a Date or Map of another realm) would be sent as
  // an empty form; any other object (a plain object, a class instance — with its own Symbol.toStringTag too — of
  // any realm) holds fields.
  const tag = Object.prototype.toString.call(value).slice(8, -1);
  if (kind !== undefined || NOT_FIELDS.has(tag) || isBinary(value) || typeof value !== 'object' || value === null) {
    const got =
      kind ??
      (isBinary(value) ? 'a file or bytes' : Array.isArray(value) ? 'an array' : value === null ? 'null' : typeof value !== 'object' ? typeof value : `${/^[AEIOU]/.test(tag) ? 'an' : 'a'} ${tag}`);
    throw new TypeError(`a ${mediaType} body must be an object of fields (or a URLSearchParams or FormData), not ${got}`);
  }
  return { members: Object.entries(value), fieldData: false };
}

/**
 * `application/x-www-form-urlencoded`: each field as its format says (3.x `encoding` style/explode, 2.0
 * `collectionFormat`; see `queryPairs`: `deepObject` is `line_items[0][price]=…`). A field without one is
 * written in OpenAPI's default for forms, `form` exploded, when it is a scalar or a list of scalars
 * (`MediaUrl=a&MediaUrl=b`), and bracket-nested at every depth otherwise (`metadata[order_id]=…`,
 * `items[0][id]=…`), as Stripe-style APIs read them. `null` is sent empty (Stripe's "unset": `a=`,
 * `metadata[k]=`) wherever it would be a pair of its own, `undefined` is left out; a `Date` is its ISO time. A file,
 * bytes, a `Map`, a `Set` or another class instance, at any depth, is a `TypeError` naming the field.
 */
function urlencoded(value: unknown, kind: string | undefined, fields: Readonly<Record<string, ParamFormat>>): string {
  const pairs: string[] = [];
  const { members, fieldData } = formMembers(value, kind, 'application/x-www-form-urlencoded');
  if (fieldData) {
    for (const [name, member] of members) {
      if (typeof member !== 'string') throw new TypeError(`"${name}" holds a file: files go in a multipart/form-data body`);
      pairs.push(...queryPairs(name, member, QUERY_DEFAULT, true));
    }
    return pairs.join('&');
  }
  for (const [name, member] of members) {
    if (member === undefined) continue;
    if (member === null) {
      pairs.push(`${percentEncode(name)}=`);
      continue;
    }
    const format = formatOf(fields, name) ?? (Array.isArray(member) ? QUERY_DEFAULT : DEEP_OBJECT);
    pairs.push(...queryPairs(name, member as ParamInput, format, true));
  }
  return pairs.join('&');
}

/** A `name` or `filename` in a `Content-Disposition` header, escaped as browsers do (HTML's form encoding). */
function quoted(text: string): string {
  return `"${text.replace(/"/g, '%22').replace(/\r/g, '%0D').replace(/\n/g, '%0A')}"`;
}

/**
 * The `JSON.stringify` replacer of a multipart JSON part: a file or bytes (a `Buffer` too, read before its own
 * `toJSON` turns it into `{type, data}`), a stream, a `Promise`, a `Map` or a `Set` — any {@link opaqueKind} —
 * inside it would be written as `{}` or as numbers and the file never sent, so it is a `TypeError` naming the field
 * and the member instead; so is a field that is itself a stream, a `Promise` or another opaque object. Other
 * objects (class instances with fields, Dates) are written as JSON writes them.
 */
function jsonPartMember(field: string): (this: unknown, key: string, member: unknown) => unknown {
  return function (this: unknown, key, member) {
    const original: unknown = key === '' || this === null || typeof this !== 'object' ? member : (this as Record<string, unknown>)[key];
    // The value as held, and what its own `toJSON` made of it.
    const kind = opaqueKind(original) ?? opaqueKind(member);
    if (kind === undefined) return member;
    if (key === '') {
      throw new TypeError(
        `"${field}" is ${kind}: a multipart/form-data field is text, a file (a Blob: read a stream into one first, so every attempt sends the same bytes) or JSON data`,
      );
    }
    throw new TypeError(
      `"${field}" holds ${kind} inside a JSON part (at \`${key}\`): it cannot be written there (send a file as a field of its own, or give the field \`encoding: {style: deepObject}\` to send its members as parts)`,
    );
  };
}

/**
 * `multipart/form-data`, one part per field: strings, numbers, booleans and `Date`s (their ISO time) as text; a
 * `Blob` (its `name` as the file name when it has one, as a `File` does), an `ArrayBuffer` or a typed array as a
 * file; other objects as `application/json`. An array is one part per item, unless its format joins it into one
 * text part (a list of scalars only). A `deepObject` field (3.1 `encoding`, as Stripe's file uploads use) is one
 * part per leaf, named as in a urlencoded form (`file_link_data[metadata][k]`, `documents[0]`): a file or bytes
 * leaf is a file part, any other a text part.
 * A part type from `partTypes` labels bytes that have no type of their own and text fields; a `Blob`'s own type
 * wins, and objects stay JSON. `null` and `undefined` fields are left out.
 */
function multipart(
  value: unknown,
  kind: string | undefined,
  mediaType: string,
  fields: Readonly<Record<string, ParamFormat>>,
  partTypes: Readonly<Record<string, string>>,
): EncodedBody {
  const boundary = `idemkit-${randomKey()}`;
  const chunks: (string | Blob | ArrayBuffer)[] = [];
  const part = (name: string, item: unknown): void => {
    if (item === undefined || item === null) return;
    const given = Object.hasOwn(partTypes, name) ? partTypes[name] : undefined;
    let headers = `Content-Disposition: form-data; name=${quoted(name)}`;
    let content: string | Blob | ArrayBuffer;
    const bytes = bytesOf(item);
    if (item instanceof Blob) {
      const file = (item as { name?: unknown }).name;
      headers += `; filename=${quoted(typeof file === 'string' && file !== '' ? file : 'blob')}\r\nContent-Type: ${item.type || given || 'application/octet-stream'}`;
      content = item;
    } else if (bytes !== undefined) {
      headers += `; filename="blob"\r\nContent-Type: ${given ?? 'application/octet-stream'}`;
      content = bytes;
    } else if (typeof item === 'object' && !isScalar(item)) {
      headers += `\r\nContent-Type: ${given !== undefined && JSON_MEDIA.test(given) ? given : 'application/json'}`;
      content = JSON.stringify(item, jsonPartMember(name));
    } else {
      // Text is text/plain unless the document names another type.
      if (given !== undefined && !/^text\/plain\s*(;|$)/i.test(given)) headers += `\r\nContent-Type: ${given}`;
      content = scalarText(name, item);
    }
    chunks.push(`--${boundary}\r\n${headers}\r\n\r\n`, content, '\r\n');
  };
  const { members, fieldData } = formMembers(value, kind, 'multipart/form-data');
  for (const [name, member] of members) {
    // A FormData's entries are one part each, as they are (a name given twice is two parts).
    if (fieldData) {
      part(name, member);
      continue;
    }
    const format = formatOf(fields, name);
    if (format?.style === 'deepObject' && typeof member === 'object' && member !== null && !isBinary(member)) {
      for (const [keys, leaf] of bracketLeaves(name, member, false, true)) part(bracketName(keys, String), leaf);
    } else if (!Array.isArray(member)) part(name, member);
    else if (format !== undefined && !format.explode && member.every((item) => item === undefined || item === null || isScalar(item))) {
      const items = member.filter((item) => item !== undefined && item !== null);
      if (items.length > 0) part(name, items.map((item) => scalarText(name, item)).join(TEXT_DELIMITER[format.style] ?? ','));
    } else for (const item of member) part(name, item);
  }
  chunks.push(`--${boundary}--\r\n`);
  return { body: new Blob(chunks), contentType: `${mediaType}; boundary=${boundary}` };
}
