/**
 * One user intent of a contracted operation: the idempotency key made once before the first attempt,
 * the single deadline every attempt spends from, and the request id of each attempt so far.
 * Serialisable, so a UI can keep it across a reload and resume with the same key.
 *
 * This file is copied into users' generated output: it imports nothing.
 */

/** The JSON form of an {@link Intent} (`JSON.stringify(intent)` writes it). */
export interface IntentJson {
  readonly v: 1;
  readonly operationId: string;
  readonly key: string;
  /** Epoch milliseconds when the intent was made. */
  readonly createdAt: number;
  /** Epoch milliseconds after which no attempt may start. */
  readonly deadlineAt: number;
  /** The `X-Request-Id` of every attempt made so far, oldest first. */
  readonly requestIds: readonly string[];
}

/** Makes a fresh key: a random UUID from Web Crypto (Node ≥ 19 and browsers). */
export function randomKey(): string {
  return globalThis.crypto.randomUUID();
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
  readonly deadlineAt: number;
  readonly #requestIds: string[];

  private constructor(json: IntentJson) {
    this.operationId = json.operationId;
    this.key = json.key;
    this.createdAt = json.createdAt;
    this.deadlineAt = json.deadlineAt;
    this.#requestIds = [...json.requestIds];
  }

  /**
   * Makes a new intent whose deadline is `deadlineMs` from `now`.
   * @param options.key an explicit key (e.g. one a server handed out); by default a random UUID.
   */
  static create(options: { operationId: string; deadlineMs: number; now: number; key?: string }): Intent {
    const key = options.key ?? randomKey();
    if (key.length === 0) throw new TypeError('an idempotency key must not be empty');
    return new Intent({
      v: 1,
      operationId: options.operationId,
      key,
      createdAt: options.now,
      deadlineAt: options.now + Math.max(0, options.deadlineMs),
      requestIds: [],
    });
  }

  /** Restores an intent from {@link Intent.toJSON} output (an object or its JSON text). Throws `TypeError` on anything else. */
  static fromJSON(value: unknown): Intent {
    const json: unknown = typeof value === 'string' ? JSON.parse(value) : value;
    if (typeof json !== 'object' || json === null) throw new TypeError('not a serialised intent');
    const o = json as Record<string, unknown>;
    const ok =
      o['v'] === 1 &&
      typeof o['operationId'] === 'string' &&
      typeof o['key'] === 'string' &&
      o['key'] !== '' &&
      Number.isFinite(o['createdAt']) &&
      Number.isFinite(o['deadlineAt']) &&
      Array.isArray(o['requestIds']) &&
      o['requestIds'].every((id) => typeof id === 'string');
    if (!ok) throw new TypeError('not a serialised intent (expected v, operationId, key, createdAt, deadlineAt, requestIds)');
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

  /** Milliseconds left of the deadline at `now` (never negative). */
  remainingMs(now: number): number {
    return Math.max(0, this.deadlineAt - now);
  }

  /** Records the start of an attempt. Called by the retry engine. */
  recordAttempt(requestId: string): void {
    this.#requestIds.push(requestId);
  }

  toJSON(): IntentJson {
    return {
      v: 1,
      operationId: this.operationId,
      key: this.key,
      createdAt: this.createdAt,
      deadlineAt: this.deadlineAt,
      requestIds: [...this.#requestIds],
    };
  }
}
