/**
 * One user intent of a contracted operation: the idempotency key made once before the first attempt,
 * the single deadline every attempt spends from (counted from the first attempt), and the request id of each
 * attempt so far.
 * Serialisable, so a UI can keep it across a reload and resume with the same key.
 *
 * This file is copied into users' generated output: it imports nothing.
 */

/** The JSON form of an {@link Intent} (`JSON.stringify(intent)` writes it). */
export interface IntentJson {
  readonly v: 2;
  readonly operationId: string;
  readonly key: string;
  /** Epoch milliseconds when the intent was made. */
  readonly createdAt: number;
  /** The budget: no attempt starts more than this many milliseconds after the first one. */
  readonly deadlineMs: number;
  /** Epoch milliseconds when the first attempt started; absent before it. */
  readonly firstSentAt?: number;
  /** The `X-Request-Id` of every attempt made so far, oldest first. */
  readonly requestIds: readonly string[];
}

/** What earlier versions wrote (the deadline counted from the intent's creation), still read by {@link Intent.fromJSON}. */
interface IntentJsonV1 {
  readonly v: 1;
  readonly operationId: string;
  readonly key: string;
  readonly createdAt: number;
  readonly deadlineAt: number;
  readonly requestIds: readonly string[];
}

/** The part of Web Crypto {@link randomKey} uses. */
interface WebCrypto {
  readonly randomUUID?: () => string;
  getRandomValues(array: Uint8Array): Uint8Array;
}

/**
 * Makes a fresh key: a random (version 4) UUID from Web Crypto (Node ≥ 19 and browsers) — `randomUUID`, or where a
 * browser leaves it out (a page served over plain http is no secure context) the same from `getRandomValues`.
 */
export function randomKey(): string {
  // Read structurally: @types/node 18 does not declare `globalThis.crypto`, and a Node 18 without the flag has none.
  const crypto = (globalThis as unknown as { crypto?: WebCrypto }).crypto;
  if (crypto === undefined) throw new TypeError('no Web Crypto (globalThis.crypto) to make a key: Node 18 needs --experimental-global-webcrypto (Node >= 19 and browsers have it), or pass the key yourself');
  if (typeof crypto.randomUUID === 'function') return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6]! & 0x0f) | 0x40; // version 4
  bytes[8] = (bytes[8]! & 0x3f) | 0x80; // RFC 9562 variant
  const hex = Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

// The contracts' key patterns, compiled once each (this file imports nothing, so not through runtime/key.ts).
const patterns = new Map<string, RegExp>();

function patternOf(source: string): RegExp {
  let compiled = patterns.get(source);
  if (compiled === undefined) {
    compiled = new RegExp(`^(?:${source})$`);
    patterns.set(source, compiled);
  }
  return compiled;
}

/**
 * A fresh key the contract's server takes: a random UUID, or its 32 hex digits without the dashes when the contract's
 * `maxLength` or `pattern` refuses the dashed form (`^[A-Za-z0-9]+$`). When neither fits, the UUID (the server will
 * refuse it: make the intent with a key of your own, `client.intent(operation, key)`).
 */
export function fittingKey(rules: { readonly maxLength: number; readonly pattern?: string | undefined }): string {
  const uuid = randomKey();
  if (rules.pattern === undefined && uuid.length <= rules.maxLength) return uuid;
  const pattern = rules.pattern === undefined ? undefined : patternOf(rules.pattern);
  for (const key of [uuid, uuid.replace(/-/g, '')]) {
    if (key.length <= rules.maxLength && (pattern === undefined || pattern.test(key))) return key;
  }
  return uuid;
}

/**
 * An intent. The key never changes: a changed command is a new intent, made explicitly with
 * {@link Intent.create}. Attempts are appended by the retry engine.
 */
export class Intent {
  /** The operation this intent belongs to; sending it to another operation is a programming error. */
  readonly operationId: string;
  /** The idempotency key, sent unchanged on every attempt. */
  readonly key: string;
  readonly createdAt: number;
  /** The budget of the whole intent, counted from its first attempt. */
  readonly deadlineMs: number;
  #firstSentAt: number | undefined;
  readonly #requestIds: string[];

  private constructor(json: IntentJson) {
    this.operationId = json.operationId;
    this.key = json.key;
    this.createdAt = json.createdAt;
    this.deadlineMs = json.deadlineMs;
    this.#firstSentAt = json.firstSentAt;
    this.#requestIds = [...json.requestIds];
  }

  /**
   * Makes a new intent whose deadline is `deadlineMs` after its first attempt (an intent made early, with the
   * form, still has its whole budget when it is sent).
   * @param options.now when the intent is made (`createdAt`).
   * @param options.key an explicit key (e.g. one a server handed out); by default a random UUID.
   */
  static create(options: { operationId: string; deadlineMs: number; now: number; key?: string }): Intent {
    const key = options.key ?? randomKey();
    if (key.length === 0) throw new TypeError('an idempotency key must not be empty');
    return new Intent({ v: 2, operationId: options.operationId, key, createdAt: options.now, deadlineMs: Math.max(0, options.deadlineMs), requestIds: [] });
  }

  /**
   * Restores an intent from {@link Intent.toJSON} output (an object or its JSON text), also as earlier versions
   * wrote it (their deadline counted from the intent's creation, and still does). Throws `TypeError` on anything else.
   */
  static fromJSON(value: unknown): Intent {
    const json: unknown = typeof value === 'string' ? JSON.parse(value) : value;
    if (typeof json !== 'object' || json === null) throw new TypeError('not a serialised intent');
    const o = json as Record<string, unknown>;
    const common =
      typeof o['operationId'] === 'string' &&
      typeof o['key'] === 'string' &&
      o['key'] !== '' &&
      Number.isFinite(o['createdAt']) &&
      Array.isArray(o['requestIds']) &&
      o['requestIds'].every((id) => typeof id === 'string');
    if (common && o['v'] === 1 && Number.isFinite(o['deadlineAt'])) {
      const old = o as unknown as IntentJsonV1;
      const sent = old.requestIds.length > 0 ? { firstSentAt: old.createdAt } : {};
      return new Intent({ v: 2, operationId: old.operationId, key: old.key, createdAt: old.createdAt, deadlineMs: Math.max(0, old.deadlineAt - old.createdAt), ...sent, requestIds: old.requestIds });
    }
    const sent = o['firstSentAt'];
    const ok =
      common &&
      o['v'] === 2 &&
      Number.isFinite(o['deadlineMs']) &&
      (o['deadlineMs'] as number) >= 0 &&
      (sent === undefined ? (o['requestIds'] as unknown[]).length === 0 : Number.isFinite(sent));
    if (!ok) throw new TypeError('not a serialised intent (expected v, operationId, key, createdAt, deadlineMs, firstSentAt once sent, requestIds)');
    return new Intent(o as unknown as IntentJson);
  }

  /** Request ids of the attempts made so far, oldest first. */
  get requestIds(): readonly string[] {
    return [...this.#requestIds];
  }

  /** Number of attempts made so far (across reloads). */
  get attempts(): number {
    return this.#requestIds.length;
  }

  /** Epoch milliseconds when the first attempt started; `undefined` before it. */
  get firstSentAt(): number | undefined {
    return this.#firstSentAt;
  }

  /** Epoch milliseconds after which no attempt may start; `undefined` until the first attempt starts the deadline. */
  get deadlineAt(): number | undefined {
    return this.#firstSentAt === undefined ? undefined : this.#firstSentAt + this.deadlineMs;
  }

  /** Milliseconds left of the deadline at `now` (never negative): the whole budget before the first attempt. */
  remainingMs(now: number): number {
    return this.#firstSentAt === undefined ? this.deadlineMs : Math.max(0, this.#firstSentAt + this.deadlineMs - now);
  }

  /** Records the start of an attempt at `now`; the first starts the deadline. Called by the retry engine. */
  recordAttempt(requestId: string, now: number): void {
    this.#firstSentAt ??= now;
    this.#requestIds.push(requestId);
  }

  toJSON(): IntentJson {
    return {
      v: 2,
      operationId: this.operationId,
      key: this.key,
      createdAt: this.createdAt,
      deadlineMs: this.deadlineMs,
      ...(this.#firstSentAt === undefined ? {} : { firstSentAt: this.#firstSentAt }),
      requestIds: [...this.#requestIds],
    };
  }
}
