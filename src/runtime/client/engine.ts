/**
 * The client retry engine: sends one {@link Intent} of a contracted operation until a terminal answer,
 * within the intent's single deadline, and says what happened as a discriminated union.
 *
 * Rules it keeps (DESIGN §5, the article's "one intent, one key, one deadline"):
 * - the key is the intent's, on every attempt; a new key is never made here;
 * - every attempt carries a fresh request id (unless the contract keys on the request-id header: then it carries
 *   the key); no attempt starts after the deadline, and each attempt's timeout is what is left of the deadline;
 * - `inProgress` → wait (`Retry-After`, else backoff) and retry with the same key;
 * - network errors, 5xx and 429 → retried with the same key only when repeating cannot duplicate the effect
 *   (a local effect, or a provider that dedupes by a forwarded/derived key); otherwise stop with `unknown`
 *   so the caller reads the status route;
 * - mismatch, missing/invalid key and other 4xx → `rejected`, never retried.
 *
 * This file is copied into users' generated output: it imports nothing outside `runtime/client`, the
 * compiled contract types and `wire.ts`.
 */
import type { CompiledContract } from '../contract.js';
import { isRepeatableRequestsKey, PROBLEM_BASE, PROBLEM_HEADER } from '../wire.js';
import { backoffDelay, parseRetryAfter } from './backoff.js';
import { headerName, mergeHeaders } from './headers.js';
import { Intent, randomKey } from './intent.js';
import { discardBody, redirectOf } from './redirect.js';
import { assertSendable } from './sendable.js';

/** Everything the engine needs from the outside world; inject fakes in tests. */
export interface ClientRuntime {
  readonly fetch: (url: string, init: RequestInit) => Promise<Response>;
  /** Wall clock, epoch milliseconds. */
  readonly now: () => number;
  /** Waits `ms`; rejects (or resolves early) when `signal` aborts. */
  readonly sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Calls `fn` after `ms`; returns a function that cancels it. Bounds each attempt by the deadline. */
  readonly setTimer: (ms: number, fn: () => void) => () => void;
  /** Uniform random in `[0, 1)` for jitter. */
  readonly random: () => number;
  /** A fresh request id for each attempt. */
  readonly newRequestId: () => string;
}

/** The real runtime: global `fetch`, `Date.now`, timers, `Math.random`, `crypto.randomUUID`. */
export function defaultRuntime(overrides: Partial<ClientRuntime> = {}): ClientRuntime {
  return {
    fetch: (url, init) => globalThis.fetch(url, init),
    now: () => Date.now(),
    sleep: (ms, signal) =>
      new Promise<void>((resolve) => {
        if (signal?.aborted) return resolve();
        const onAbort = (): void => {
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        }, ms);
        signal?.addEventListener('abort', onAbort, { once: true });
      }),
    setTimer: (ms, fn) => {
      // setTimeout fires at once beyond 2^31-1 ms; no sane deadline is that long, so clamp instead.
      const timer = setTimeout(fn, Math.min(ms, 2_147_483_647));
      return () => clearTimeout(timer);
    },
    random: () => Math.random(),
    newRequestId: () => randomKey(),
    ...overrides,
  };
}

/** One HTTP request, without the key and request id headers (the engine adds those per attempt). */
export interface PreparedRequest {
  readonly url: string;
  readonly method: string;
  readonly headers: Readonly<Record<string, string>>;
  /** Text, or bytes (binary media types, multipart forms); every attempt sends the same value again (none is a one-shot stream). */
  readonly body?: string | Blob | ArrayBuffer;
}

/**
 * Why an intent ended `rejected`: a terminal error answer (retrying it with the same key cannot help), or a
 * redirect the client will not follow (`redirected`, a {@link RedirectedResult}).
 */
export type RejectReason = 'mismatch' | 'missing-key' | 'invalid-key' | 'client-error' | 'redirected';

/** Why an intent ended `unknown`: the effect may or may not have happened. */
export type UnknownReason =
  /** The deadline was spent (or the next wait would pass it). */
  | 'deadline'
  /** The contract's attempt bound was spent. */
  | 'attempts'
  /** A network error or 5xx on an effect that a repeat could duplicate (external, no provider key). */
  | 'unsafe-to-retry'
  /** The server reports the first attempt's reservation abandoned: it goes to reconciliation. */
  | 'abandoned'
  /**
   * The server refused the intent as first sent longer ago than it keeps records (OASIS Repeatable Requests,
   * 412): it may have run already.
   */
  | 'expired'
  /**
   * The caller aborted the intent after an attempt may have reached a handler (an abort before that rejects the
   * promise with the signal's reason instead).
   */
  | 'aborted'
  /**
   * A redirect the client does not follow (see {@link RedirectedResult}) came after an earlier attempt of this
   * intent got no terminal answer (a network error, a retry or a wait): that attempt may have run the command.
   */
  | 'redirected'
  /**
   * A refusal that is neither the guard's nor the handler's (no replay flag, no guard problem: a proxy, a gateway, an
   * auth layer answering 401, 403, 404, 413…) came after an earlier attempt of this intent got no terminal answer:
   * that attempt may have run the command, and a new intent — a new key — would run it again.
   */
  | 'refused'
  /**
   * The runtime's `fetch` followed a redirect although sent with `redirect: 'manual'` (a custom `runtime.fetch` that
   * does not pass it on, a polyfill that always follows): the command may have run where it landed (`lastStatus` is
   * that answer's status), or been resent there as a `GET`.
   */
  | 'redirect-followed';

/** The operation's terminal success answer. `replayed` is read from the contract's replay header. */
export interface CompletedResult<TBody> {
  readonly kind: 'completed';
  readonly status: number;
  readonly body: TBody;
  /** `true` when the server replayed a stored result (a previous attempt had already run the effect). */
  readonly replayed: boolean;
  readonly headers: Headers;
  readonly intent: Intent;
  /** The request id of the attempt that got this answer. */
  readonly requestId: string;
}

/** A terminal error answer (e.g. 422 mismatch, 400 invalid key, other 4xx). Never retried. */
export interface RejectedResult<TError> {
  readonly kind: 'rejected';
  readonly reason: Exclude<RejectReason, 'redirected'>;
  readonly status: number;
  readonly body: TError;
  readonly headers: Headers;
  readonly intent: Intent;
  readonly requestIds: readonly string[];
}

/**
 * The server answered with a redirect the client does not follow: a 301, 302 or 303 (`fetch` would resend the
 * command as a `GET` and report the page it lands on), a 307 or 308 to another origin (the key and body would go
 * there), one to a URL this intent was already sent to (a loop) or past {@link MAX_INTENT_REDIRECTS} followed ones,
 * or any redirect a browser hides (`redirect: 'manual'` gives an opaque answer). The operation did not run here;
 * nothing of the redirect's target is reported. Never retried. Only when no earlier attempt of the intent may have
 * run it: after one that got no terminal answer, such a redirect ends `unknown` with reason `redirected`.
 */
export interface RedirectedResult {
  readonly kind: 'rejected';
  readonly reason: 'redirected';
  /** The redirect's status; `0` when a browser hides it (an opaque redirect). */
  readonly status: number;
  /** Where the server pointed (resolved against the request's URL), when it said so and it could be read. */
  readonly location: string | undefined;
  /** A redirect carries no answer of the operation. */
  readonly body: undefined;
  readonly headers: Headers;
  readonly intent: Intent;
  readonly requestIds: readonly string[];
}

/** No terminal answer within the budget. Keep the form, show a neutral state, and check the status route. */
export interface UnknownResult<TStatus> {
  readonly kind: 'unknown';
  readonly reason: UnknownReason;
  /** The intent's key: the status route and support find the outcome by it. */
  readonly key: string;
  /** Every attempt's request id, oldest first. */
  readonly requestIds: readonly string[];
  readonly intent: Intent;
  /**
   * The last HTTP status seen, if any attempt got an answer: read from its headers, so an answer whose body stalled
   * or broke off has one (a `2xx` here means the effect ran).
   */
  readonly lastStatus: number | undefined;
  /** The last network error message, if the last attempt failed without a whole answer. */
  readonly lastError: string | undefined;
  /**
   * How long the last answer asked to wait before a retry (its `Retry-After`, in ms from when it came), if it did. With
   * reason `deadline` it is the wait the budget had no room for (a 409 in progress, a 503 store down): the key is
   * kept, so the same intent can be sent again after it — or its outcome checked then.
   */
  readonly retryAfterMs: number | undefined;
  /** A call to the contract's status route for this intent (absent when the contract has none). */
  readonly checkStatus: TStatus;
}

/** What sending an intent ends with. */
export type IntentResult<TBody, TError = unknown, TStatus = undefined> =
  | CompletedResult<TBody>
  | RejectedResult<TError>
  | RedirectedResult
  | UnknownResult<TStatus>;

/** A single answer of an operation without a retry contract. */
export type ApiResponse<TBody, TError = unknown> =
  | { readonly ok: true; readonly status: number; readonly body: TBody; readonly headers: Headers; readonly requestId: string }
  | { readonly ok: false; readonly status: number; readonly body: TError; readonly headers: Headers; readonly requestId: string };

/** Options of one intent send. */
export interface SendOptions<TStatus> {
  readonly contract: CompiledContract;
  readonly intent: Intent;
  readonly request: PreparedRequest;
  readonly runtime: ClientRuntime;
  /**
   * Header carrying each attempt's request id (default `X-Request-Id`). When the contract's key goes in it, it
   * carries the key on every attempt, and the key is each attempt's request id.
   */
  readonly requestIdHeader?: string;
  /**
   * Aborts the whole intent: the result is then `unknown` / `aborted`, unless nothing of it had reached a handler
   * (not sent yet, or answered only by redirects): then the promise rejects with the signal's reason, as `fetch`'s.
   */
  readonly signal?: AbortSignal;
  /** The typed status-route call put on an `unknown` result. */
  readonly checkStatus: TStatus;
  /** The document has the operation answer in JSON only: see {@link readBody}. */
  readonly jsonAnswers?: boolean;
}

/**
 * Reads a response body: JSON for JSON media types, text otherwise, `undefined` when empty. With `jsonAnswers` (the
 * document has the operation answer in JSON only), a body without a content type or in `text/plain` is read as
 * JSON too. A body that does not parse is its text.
 */
export async function readBody(res: Response, jsonAnswers = false): Promise<unknown> {
  const text = await res.text();
  if (text === '') return undefined;
  const type = res.headers.get('content-type')?.trim() ?? '';
  if (/[/+]json\b/i.test(type) || (jsonAnswers && (type === '' || /^text\/plain\b/i.test(type)))) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return text;
    }
  }
  return text;
}

/**
 * `true` when repeating the request with the same key cannot duplicate the effect: a local effect (the guard's
 * record decides), or an external one whose provider dedupes — by our key forwarded, or by a stable id
 * derived from it (the article's "stable external identifier"). `providerKey: none` is the unsafe case.
 */
export function repeatIsSafe(contract: CompiledContract): boolean {
  return !contract.effect.external || contract.effect.providerKey !== 'none';
}

/** The guard's problem types that only ever mean "wait" or "outcome unknown" (read from a body without the header). */
const WAIT_OR_UNKNOWN = new Set(['idempotency-request-in-progress', 'idempotency-request-abandoned', 'idempotency-request-expired'].map((name) => PROBLEM_BASE + name));

function problemType(body: unknown): string {
  if (typeof body === 'object' && body !== null && typeof (body as { type?: unknown }).type === 'string') {
    return (body as { type: string }).type;
  }
  return '';
}

type Verdict =
  | { readonly act: 'complete' }
  | { readonly act: 'reject'; readonly reason: RejectedResult<unknown>['reason'] }
  | { readonly act: 'wait' }
  | { readonly act: 'retry-if-safe' }
  | { readonly act: 'retry' }
  | { readonly act: 'unknown'; readonly reason: UnknownReason };

/**
 * What one of the guard's problems stands for, named as its `Idempotency-Problem` header or problem `type` URI ends;
 * `undefined` for any other name. The guard's problem types are stable; they tell apart states that share a status
 * (e.g. 409, 400).
 */
function problemVerdict(type: string): Verdict | undefined {
  if (type.endsWith('idempotency-key-reused')) return { act: 'reject', reason: 'mismatch' };
  if (type.endsWith('idempotency-key-missing')) return { act: 'reject', reason: 'missing-key' };
  if (type.endsWith('idempotency-key-invalid')) return { act: 'reject', reason: 'invalid-key' };
  if (type.endsWith('idempotency-request-abandoned')) return { act: 'unknown', reason: 'abandoned' };
  if (type.endsWith('idempotency-request-expired')) return { act: 'unknown', reason: 'expired' };
  if (type.endsWith('idempotency-request-in-progress')) return { act: 'wait' };
  // The guard failed closed before reserving: the handler never ran, so a repeat is safe for any effect.
  if (type.endsWith('idempotency-store-unavailable')) return { act: 'retry' };
  // The handler ran and its outcome is unknown: a repeat is only for effects a repeat cannot duplicate.
  if (type.endsWith('idempotency-outcome-unknown')) return { act: 'retry-if-safe' };
  return undefined;
}

/**
 * Classifies one answer by the contract's state statuses and the guard's problem: named in its header, else
 * by the problem `type` URI of the body.
 */
function classify(contract: CompiledContract, status: number, body: unknown, replayed: boolean, handled: boolean, problem: string | null): Verdict {
  // A 2xx is the operation's answer, unless the guard names one of its problems on it: a state the contract answers
  // with a 2xx (lint's state-status-invalid), e.g. in progress as 202, is still that state.
  if (status >= 200 && status < 300) return (!replayed && !handled && problem !== null ? problemVerdict(problem.trim()) : undefined) ?? { act: 'complete' };
  // A replay is the stored answer of the first execution (e.g. a business 409): terminal, whatever its status.
  if (replayed) return { act: 'reject', reason: 'client-error' };
  // `Idempotent-Replayed: false` marks the handler's own first answer (the guard's problems never carry it):
  // a business 4xx is just as terminal; its 5xx and transient statuses fall through to the retry rules.
  if (handled && status < 500 && status !== 429 && !contract.transient.includes(status)) return { act: 'reject', reason: 'client-error' };
  // The handler's own answer (`Idempotent-Replayed: false`) is not the guard's: a problem name in it came from
  // elsewhere (an upstream service behind a gateway) and must not make an unsafe repeat look safe.
  const named = handled ? undefined : problemVerdict(problem !== null && problem !== '' ? problem.trim() : problemType(body));
  if (named !== undefined) return named;
  const r = contract.responses;
  if (status === r.mismatch) return { act: 'reject', reason: 'mismatch' };
  if (status === r.inProgress) return { act: 'wait' };
  if (status === r.abandoned) return { act: 'unknown', reason: 'abandoned' };
  // 408: a server or proxy gave up waiting for the request, not the handler's answer (that says `Idempotent-Replayed`).
  if (status >= 500 || status === 429 || status === 408 || contract.transient.includes(status)) return { act: 'retry-if-safe' };
  return { act: 'reject', reason: 'client-error' };
}

class DeadlineReached extends Error {}

/**
 * `promise`, or the signal's reason once it aborts. Node 20's `fetch` leaves a body read pending for good after a
 * corrupt gzip answer even when its signal aborts: raced so, the read ends with the deadline or the caller's abort.
 */
function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    promise.catch((): void => undefined);
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/**
 * Error codes (of the error or its `cause`, as undici's `fetch failed` carries them; Bun's `ConnectionRefused`) that
 * say the request never reached a server: the connection was refused or never made, the name did not resolve. Not
 * `EHOSTUNREACH` / `ENETUNREACH`: they also end a reused connection after the request went out.
 */
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT', 'ConnectionRefused']);

/** The first string `code` along an error's `cause` chain. */
function errorCode(err: unknown): string | undefined {
  let error = err;
  for (let depth = 0; depth < 4 && error !== null && typeof error === 'object'; depth++) {
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    error = (error as { cause?: unknown }).cause;
  }
  return undefined;
}

/** Whether a failed `fetch` certainly sent nothing (see {@link NOT_SENT}); an unknown shape may have sent it. */
function neverSent(err: unknown): boolean {
  const code = errorCode(err);
  return code !== undefined && NOT_SENT.has(code);
}

/** A failed `fetch`'s message with what its cause says (undici's is always `fetch failed`). */
function errorText(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = errorCode(err);
  const cause = err.cause instanceof Error ? err.cause.message : undefined;
  if (code !== undefined && !err.message.includes(code)) return `${err.message} (${code})`;
  if (cause !== undefined && cause !== err.message) return `${err.message} (${cause})`;
  return err.message;
}

/** How many same-origin 307/308 redirects one intent follows (each is an attempt); the next one ends it `redirected`. */
export const MAX_INTENT_REDIRECTS = 5;

/**
 * Sends an intent until a terminal answer or until its budget is spent. Never throws for network errors or
 * HTTP statuses; throws `TypeError` only for programming errors, before anything is sent: an intent of another
 * operation, or a request `fetch` would refuse (see `assertSendable`: a header value or key with a line break or a
 * character beyond Latin-1, a path-only URL outside a web page).
 */
export async function sendIntent<TBody, TError = unknown, TStatus = undefined>(
  options: SendOptions<TStatus>,
): Promise<IntentResult<TBody, TError, TStatus>> {
  const { contract, intent, request, runtime: rt } = options;
  if (intent.operationId !== contract.operationId) {
    throw new TypeError(`intent of ${intent.operationId} sent to ${contract.operationId}; make a new intent for a new command`);
  }
  const requestIdHeader = options.requestIdHeader ?? 'X-Request-Id';
  // A contract that keys on the request-id header (`X-Request-Id` as the idempotency key): the key goes in it on
  // every attempt, and no per-attempt id replaces it — a new value there would be a new key.
  // A key that travels in the query or the body is already in `request` (see `withIntentKey`).
  const keyHeader = contract.key.in === 'header' ? contract.key.name : undefined;
  const keyIsRequestId = keyHeader !== undefined && requestIdHeader.toLowerCase() === keyHeader.toLowerCase();
  // OASIS Repeatable Requests (a `Repeatability-Request-ID` key): every attempt also says when the intent was
  // first sent, the same on each, so a server can refuse a repeat that comes after it stopped keeping records.
  const firstSentHeader = keyHeader !== undefined && isRepeatableRequestsKey(keyHeader) ? 'Repeatability-First-Sent' : undefined;
  // The intent owns these headers: a caller's own copy (in any letter case) would be sent alongside
  // and turn one key into two values.
  const baseHeaders = mergeHeaders(request.headers);
  for (const name of [keyHeader, requestIdHeader, firstSentHeader].filter((owned): owned is string => owned !== undefined)) {
    const given = headerName(baseHeaders, name);
    if (given !== undefined) delete baseHeaders[given];
  }
  let lastStatus: number | undefined;
  let lastError: string | undefined;
  let lastRetryAfterMs: number | undefined;
  const unknown = (reason: UnknownReason): UnknownResult<TStatus> => ({
    kind: 'unknown',
    reason,
    key: intent.key,
    requestIds: intent.requestIds,
    intent,
    lastStatus,
    lastError,
    retryAfterMs: lastRetryAfterMs,
    checkStatus: options.checkStatus,
  });

  // A 307/308 to the same origin moves the rest of the intent there (see `redirectOf`), unless it loops back to a
  // URL already sent to or the intent has followed its share.
  let url = request.url;
  const visited = new Set([url]);
  // Whether an earlier attempt may have reached the handler without a terminal answer (a network error, a retry or
  // a wait; any attempt of an earlier call, before a reload): a redirect that then ends the intent cannot say the
  // command did not run.
  let mayHaveRun = intent.attempts > 0;
  // The last redirect followed: an intent whose every answer was a redirect did not run the command.
  let lastRedirect: { res: Response; location: string } | undefined;
  const redirected = (res: Response, location: string | undefined): RedirectedResult | UnknownResult<TStatus> => {
    if (mayHaveRun) return unknown('redirected');
    return {
      kind: 'rejected',
      reason: 'redirected',
      status: res.status,
      location,
      body: undefined,
      headers: res.headers,
      intent,
      requestIds: intent.requestIds,
    };
  };
  for (;;) {
    if (options.signal?.aborted) {
      // Nothing of the intent reached a handler (nothing sent yet, or only redirected): the promise rejects with the
      // signal's reason, as `fetch` does; the intent can be sent again.
      if (!mayHaveRun) options.signal.throwIfAborted();
      return unknown('aborted');
    }
    // The deadline runs from the first attempt (an intent made early, with its form, keeps its whole budget).
    const now = rt.now();
    const remaining = intent.remainingMs(now);
    if (remaining <= 0) return unknown('deadline');
    if (intent.attempts >= contract.retry.maxAttempts) {
      // Every answer so far was a redirect (each an attempt): the command did not run.
      return !mayHaveRun && lastRedirect !== undefined ? redirected(lastRedirect.res, lastRedirect.location) : unknown('attempts');
    }

    const requestId = keyIsRequestId ? intent.key : rt.newRequestId();
    const firstSent: Record<string, string> = firstSentHeader === undefined ? {} : { [firstSentHeader]: new Date(intent.firstSentAt ?? now).toUTCString() };
    // The key last: nothing replaces it.
    const headers = { ...baseHeaders, ...firstSent, ...(keyIsRequestId ? {} : { [requestIdHeader]: requestId }), ...(keyHeader === undefined ? {} : { [keyHeader]: intent.key }) };
    // A request fetch would refuse (a bad header value or key, a path-only URL under Node) never counts as an attempt.
    assertSendable(url, request.method, headers);
    intent.recordAttempt(requestId, now);
    const controller = new AbortController();
    const cancelTimer = rt.setTimer(remaining, () => controller.abort(new DeadlineReached('deadline')));
    const onCallerAbort = (): void => controller.abort(options.signal?.reason);
    options.signal?.addEventListener('abort', onCallerAbort, { once: true });

    let verdict: Verdict;
    let retryAfterMs: number | undefined;
    lastRetryAfterMs = undefined;
    let left = true;
    try {
      const res = await rt.fetch(url, {
        method: request.method,
        headers,
        // Left out when absent (not `undefined`), for projects with `exactOptionalPropertyTypes`.
        ...(request.body === undefined ? {} : { body: request.body }),
        // A followed 301/302/303 would turn the command into a GET and report that page as its result.
        redirect: 'manual',
        signal: controller.signal,
      });
      // Before the body: an answer whose body stalls after its headers still says what its status was.
      lastStatus = res.status;
      lastError = undefined;
      const redirect = redirectOf(res, url);
      if (redirect !== undefined) {
        await discardBody(res);
        if ('stop' in redirect) return redirected(res, redirect.location);
        if (visited.has(redirect.follow) || visited.size > MAX_INTENT_REDIRECTS) return redirected(res, redirect.follow);
        visited.add(redirect.follow);
        lastRedirect = { res, location: redirect.follow };
        url = redirect.follow;
        continue;
      }
      // The runtime's fetch followed a redirect itself: this answer is another request's, and the command may have
      // run (a 201 where a 307 led) — never `rejected` (a new intent would be a new key), never this page as its result.
      if (res.redirected) {
        await discardBody(res);
        return unknown('redirect-followed');
      }
      // A body that breaks off after the headers, or stalls until the deadline or the caller's abort: its status
      // still decides a terminal refusal (a 422 mismatch is not retried, nor turned unknown, for want of its body); a
      // success or anything retried is treated as the lost answer it is (below: thrown, so `unknown` / a retry).
      let body: unknown;
      let bodyLost: unknown;
      try {
        body = await abortable(readBody(res, options.jsonAnswers), controller.signal);
      } catch (error) {
        bodyLost = error;
      }
      const replayHeader = res.headers.get(contract.responses.replayHeader)?.trim().toLowerCase();
      const replayed = replayHeader === 'true';
      const problem = res.headers.get(PROBLEM_HEADER);
      // The handler's own first answer says `false`; a contract that sends the flag on replays only
      // (`replayOnFirst: false`) marks it by what it lacks: no flag and none of the guard's problem header — unless
      // its body is one of the guard's "wait" or "unknown" problems (a browser may not be allowed to read the header,
      // a proxy may drop it), which never make a repeat look safe.
      const handled =
        replayHeader === 'false' ||
        (contract.responses.replayOnFirst === false && !replayed && problem === null && !WAIT_OR_UNKNOWN.has(problemType(body)));
      verdict = classify(contract, res.status, body, replayed, handled, problem);
      if (bodyLost !== undefined && verdict.act !== 'reject' && verdict.act !== 'unknown') throw bodyLost;
      if (verdict.act === 'complete') {
        return {
          kind: 'completed',
          status: res.status,
          body: body as TBody,
          replayed,
          headers: res.headers,
          intent,
          requestId,
        };
      }
      if (verdict.act === 'reject') {
        // Not the stored answer, nor the handler's own first one (which would mean no attempt had reserved the key),
        // after an attempt that may have run: the refusal says nothing of that attempt.
        if (verdict.reason === 'client-error' && mayHaveRun && !replayed && replayHeader !== 'false') return unknown('refused');
        return {
          kind: 'rejected',
          reason: verdict.reason,
          status: res.status,
          body: body as TError,
          headers: res.headers,
          intent,
          requestIds: intent.requestIds,
        };
      }
      retryAfterMs = parseRetryAfter(res.headers.get('retry-after'), rt.now(), res.headers.get('date'));
      lastRetryAfterMs = retryAfterMs;
    } catch (err) {
      if (controller.signal.reason instanceof DeadlineReached) return unknown('deadline');
      if (options.signal?.aborted) return unknown('aborted');
      lastError = errorText(err);
      // A connection refused, a name that did not resolve: this attempt never left, and a repeat of it cannot
      // duplicate anything, whatever the effect.
      left = !neverSent(err);
      verdict = left ? { act: 'retry-if-safe' } : { act: 'retry' };
    } finally {
      cancelTimer();
      options.signal?.removeEventListener('abort', onCallerAbort);
    }
    // No terminal answer (a redirect `continue`s above): whatever follows, this attempt may have run the command —
    // unless it never left.
    if (left) mayHaveRun = true;

    if (verdict.act === 'unknown') return unknown(verdict.reason);
    if (verdict.act === 'retry-if-safe' && !repeatIsSafe(contract)) return unknown('unsafe-to-retry');
    if (intent.attempts >= contract.retry.maxAttempts) return unknown('attempts');

    const pause = Math.max(retryAfterMs ?? 0, backoffDelay(contract.retry.backoff, intent.attempts, rt.random));
    // A wait that reaches the deadline leaves no time for another attempt: say so now instead of sleeping.
    if (pause >= intent.remainingMs(rt.now())) return unknown('deadline');
    if (pause > 0) {
      try {
        await rt.sleep(pause, options.signal);
      } catch (err) {
        // A sleep may reject when the caller aborts (`ClientRuntime.sleep` allows it): that is an abort, not a failure —
        // of an intent nothing of which left (connections refused), the promise rejects with its reason.
        if (options.signal?.aborted) {
          if (!mayHaveRun) options.signal.throwIfAborted();
          return unknown('aborted');
        }
        throw err;
      }
    }
  }
}

/** How long {@link sendOnce} waits for an answer, its body included, unless told otherwise: 30 s. */
export const DEFAULT_TIMEOUT_MS = 30_000;

/** How many same-origin 307/308 redirects {@link sendOnce} follows, as `fetch` does. */
const MAX_REDIRECTS = 20;

/**
 * Sends one request once (operations without a contract, and `x-idempotency: false` ones, which are never
 * retried automatically), and status checks. Network errors reject the returned promise, and so does the end of
 * `timeoutMs` (default {@link DEFAULT_TIMEOUT_MS}: a `TimeoutError` `DOMException`) or `signal` (its reason) before the
 * whole answer is read; a request `fetch` would refuse rejects it with a `TypeError` before anything is sent (see
 * `assertSendable`).
 *
 * A `GET` or `HEAD` follows redirects as `fetch` does, unless `redirect` is `same-origin` (the status call of an
 * intent, which carries its key): then, as for any other method, it is sent with `redirect: 'manual'`. A redirect to
 * the same origin is followed (a 307 or 308 for a command, any for a GET or HEAD; the same method and body, up to 20
 * times), and any other redirect is the answer (`ok: false`, its status and `Location`; status 0 where a browser
 * hides it, or where the runtime's `fetch` followed it anyway, then with the URL it landed on as `Location`), never
 * the page it points to: the request's headers and body never go to another origin.
 */
export async function sendOnce<TBody, TError = unknown>(options: {
  readonly request: PreparedRequest;
  readonly runtime: ClientRuntime;
  readonly requestIdHeader?: string;
  readonly signal?: AbortSignal;
  /** Milliseconds the call may take, its answer's body included (default {@link DEFAULT_TIMEOUT_MS}). */
  readonly timeoutMs?: number | undefined;
  /** The document has the operation answer in JSON only: see {@link readBody}. */
  readonly jsonAnswers?: boolean;
  /** `same-origin`: a GET or HEAD follows no redirect to another origin either (see above). Default `follow`. */
  readonly redirect?: 'follow' | 'same-origin';
}): Promise<ApiResponse<TBody, TError>> {
  const { request, runtime: rt } = options;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!(timeoutMs > 0)) throw new TypeError(`timeoutMs must be a positive number of milliseconds, not ${String(timeoutMs)}`);
  const requestIdHeader = options.requestIdHeader ?? 'X-Request-Id';
  // A request id the caller set (in any letter case; a status call keyed on the request-id header sends the
  // intent's key in it) is kept; otherwise the call gets a fresh one.
  const given = headerName(request.headers, requestIdHeader);
  const requestId = given === undefined ? rt.newRequestId() : request.headers[given]!;
  const headers = given === undefined ? { ...request.headers, [requestIdHeader]: requestId } : request.headers;
  assertSendable(request.url, request.method, headers);
  const safe = request.method === 'GET' || request.method === 'HEAD';
  // Redirects the fetch follows itself (a GET or HEAD that may go anywhere), else followed here, to the same origin only.
  const fetchFollows = safe && options.redirect !== 'same-origin';
  // One signal for the caller's abort and the timeout; it also ends a body that stalls after the headers.
  const controller = new AbortController();
  const cancelTimer = rt.setTimer(timeoutMs, () => controller.abort(new DOMException(`no answer within ${timeoutMs} ms`, 'TimeoutError')));
  const onAbort = (): void => controller.abort(options.signal?.reason);
  if (options.signal?.aborted) onAbort();
  else options.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    let url = request.url;
    for (let hops = 0; ; hops++) {
      const res = await rt.fetch(url, {
        method: request.method,
        headers,
        ...(request.body === undefined ? {} : { body: request.body }),
        redirect: fetchFollows ? 'follow' : 'manual',
        signal: controller.signal,
      });
      const redirect = fetchFollows || hops >= MAX_REDIRECTS ? undefined : redirectOf(res, url, safe);
      if (redirect !== undefined && 'follow' in redirect) {
        await discardBody(res);
        url = redirect.follow;
        continue;
      }
      // A command the runtime's fetch followed a redirect for anyway: the redirect is hidden, as a browser hides one
      // (status 0); its Location is where the fetch landed. The page there is not this command's answer.
      if (!fetchFollows && res.redirected) {
        await discardBody(res);
        return { ok: false, status: 0, body: undefined as TError, headers: new Headers(res.url === '' ? {} : { location: res.url }), requestId };
      }
      const body = await abortable(readBody(res, options.jsonAnswers), controller.signal);
      if (res.ok) return { ok: true, status: res.status, body: body as TBody, headers: res.headers, requestId };
      return { ok: false, status: res.status, body: body as TError, headers: res.headers, requestId };
    }
  } finally {
    cancelTimer();
    options.signal?.removeEventListener('abort', onAbort);
  }
}
