/**
 * The key where the contract says it travels — a header, or the query or the body (AWS's `ClientToken`, Google's
 * `requestId`, Square's `idempotency_key`): read from a call's parts (a key the caller wrote there becomes the
 * intent's), and for the query and the body written into them, so every attempt of an intent carries it. A header
 * key is written by the engine (see `sendIntent`). Used by generated clients.
 *
 * This file is copied into users' generated output: it imports nothing outside `runtime/`.
 */
import type { CompiledContract } from '../contract.js';
import { checkedKey, compileKeyPattern, textKeyProblem } from '../key.js';
import { headerName } from './headers.js';
import type { RequestParts } from './request.js';

type ContractKey = CompiledContract['key'];

/** Header names that carry a key elsewhere (lower case): sent to an operation keyed in its query or body, a mistake. */
const KEY_HEADERS = new Set(['idempotency-key', 'x-idempotency-key']);

/**
 * The key the caller wrote where the contract's key travels — the query parameter, or the body field at the
 * contract's pointer — or `undefined`. Throws `TypeError` when the value there is not a string.
 */
export function keyGiven(key: ContractKey, parts: RequestParts): string | undefined {
  if (key.in === 'header') return headerKey(key, parts);
  const value = key.in === 'query' ? ownValue(parts.query, key.name) : fieldAt(parts.body, pointerTokens(key.name));
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw new TypeError(`${placeOf(key)} holds the idempotency key: it must be a string`);
  return wellFormed(value, key);
}

/**
 * The key header the caller set (in any letter case; its value as `fetch` sends it, trimmed), or `undefined`. A key
 * the caller already holds (a retried job, a key stored with the order) must stay the intent's: replaced by a fresh
 * one, a repeat of the call would be a second intent and a second effect.
 */
function headerKey(key: ContractKey, parts: RequestParts): string | undefined {
  const headers = parts.headers ?? {};
  const name = headerName(headers, key.name);
  const value = name === undefined ? undefined : headers[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || value.trim() === '') throw new TypeError(`the ${key.name} header holds the idempotency key: it must be a non-empty string`);
  return value.trim();
}

/**
 * `parts` with `intentKey` where the contract's key travels in the query or the body (the caller's objects are
 * copied, never changed; a header key is the engine's to write). Throws `TypeError` when the caller wrote another
 * key there or in the key header (an intent carries one key on every attempt), or sends an `Idempotency-Key`
 * header to an operation keyed in its query or body, which ignores it.
 */
export function withIntentKey(key: ContractKey, parts: RequestParts, intentKey: string): RequestParts {
  if (key.in === 'header') {
    const given = headerKey(key, parts);
    if (given !== undefined && given !== intentKey) {
      throw new TypeError(`the ${key.name} header holds another key than the intent's: send the intent made with that key, or leave the header out`);
    }
    return parts;
  }
  // A caller moving over from header keys would send the same key header on every retry and believe it dedupes.
  for (const name of Object.keys(parts.headers ?? {})) {
    if (KEY_HEADERS.has(name.toLowerCase())) {
      throw new TypeError(`this operation takes its idempotency key in ${placeOf(key)}, so the header ${name} counts for nothing: make the intent with that key (client.intent(operation, key)) or write it there`);
    }
  }
  wellFormed(intentKey, key);
  const given = keyGiven(key, parts);
  if (given !== undefined && given !== intentKey) {
    throw new TypeError(`${placeOf(key)} holds another key than the intent's: send the intent made with that key, or leave the field out`);
  }
  if (key.in === 'query') return { ...parts, query: { ...parts.query, [key.name]: intentKey } };
  return { ...parts, body: setField(parts.body, pointerTokens(key.name), 0, intentKey, key) };
}

/** `text` when the server can take it as a key (see `textKeyProblem`), else a `TypeError` before anything is sent. */
function wellFormed(text: string, key: ContractKey): string {
  const problem = textKeyProblem(text);
  if (problem !== undefined) throw new TypeError(`the idempotency key for ${placeOf(key)} is refused by the server: ${problem.detail}`);
  // The contract's bounds and pattern too: the server refuses such a key with a 400 after an attempt is spent.
  const checked = checkedKey(text, { maxLength: key.maxLength, pattern: compileKeyPattern(key.pattern) });
  if (checked.kind === 'invalid') throw new TypeError(`the idempotency key for ${placeOf(key)} is refused by the server: ${checked.detail}`);
  return text;
}

function placeOf(key: ContractKey): string {
  return key.in === 'query' ? `the query parameter "${key.name}"` : `the body field ${key.name}`;
}

function pointerTokens(pointer: string): string[] {
  return pointer
    .slice(1)
    .split('/')
    .map((token) => token.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** The body (`from` 0) or the field at the first `from` tokens, as a message names it. */
function bodyPlace(tokens: readonly string[], from: number): string {
  return from === 0 ? 'the body' : `the body field /${tokens.slice(0, from).map(escapeToken).join('/')}`;
}

function escapeToken(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}

function isFields(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

function ownValue(record: Readonly<Record<string, unknown>> | undefined, name: string): unknown {
  return record !== undefined && Object.hasOwn(record, name) ? record[name] : undefined;
}

function fieldAt(body: unknown, tokens: readonly string[]): unknown {
  let current = body;
  for (const token of tokens) {
    if (!isFields(current)) return undefined;
    current = ownValue(current, token);
  }
  return current;
}

/**
 * A copy of `body` with `value` at `tokens[from…]`, objects made where none are. A `null` on the way is the
 * caller's value (`{ payment: null }`), not a missing object: replacing it with one would send another request.
 */
function setField(body: unknown, tokens: readonly string[], from: number, value: string, key: ContractKey): Record<string, unknown> {
  if (body === null) {
    throw new TypeError(`${bodyPlace(tokens, from)} is null, so it cannot carry the idempotency key at ${key.name}: send an object there, or leave it out`);
  }
  if (body !== undefined && !isFields(body)) {
    throw new TypeError(`the body must be an object of fields to carry the idempotency key at ${key.name}`);
  }
  if (body !== undefined && typeof (body as { toJSON?: unknown }).toJSON === 'function') {
    // JSON.stringify sends what toJSON returns: a key written beside it would never be sent.
    throw new TypeError(`${bodyPlace(tokens, from)} has its own toJSON, which decides what is sent, so the idempotency key at ${key.name} would not be: send its fields as a plain object`);
  }
  const copy: Record<string, unknown> = {};
  if (body !== undefined) {
    for (const name of Object.keys(body)) Object.defineProperty(copy, name, { value: (body as Record<string, unknown>)[name], enumerable: true, writable: true, configurable: true });
  }
  const token = tokens[from]!;
  const next = from === tokens.length - 1 ? value : setField(ownValue(copy, token), tokens, from + 1, value, key);
  Object.defineProperty(copy, token, { value: next, enumerable: true, writable: true, configurable: true });
  return copy;
}
