/** A scripted runtime for the client engine's unit tests: a fake clock, fake timers and a fake fetch. */
import type { ClientRuntime } from '../../src/runtime/client/engine.js';

export interface SeenRequest {
  readonly url: string;
  readonly method: string;
  readonly headers: Record<string, string>;
  /** Header names exactly as sent (to catch one header sent twice in different letter case). */
  readonly headerNames: string[];
  readonly body: string | undefined;
  /** The `redirect` mode the request was sent with. */
  readonly redirect: RequestRedirect | undefined;
  /** Fake-clock time when the attempt started. */
  readonly at: number;
}

/** One scripted answer: a Response, a thrown network error, or a stall until the attempt's signal aborts. */
export type Step = Response | Error | 'stall' | ((req: SeenRequest) => Response);

export interface FakeRuntime extends ClientRuntime {
  readonly seen: SeenRequest[];
  readonly sleeps: number[];
  clock: number;
}

export function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  const type = status >= 400 ? 'application/problem+json' : 'application/json';
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': type, ...headers } });
}

export function fakeRuntime(steps: Step[], options: { start?: number; random?: number } = {}): FakeRuntime {
  const timers: { at: number; fn: () => void; live: boolean }[] = [];
  let n = 0;
  const rt: FakeRuntime = {
    seen: [],
    sleeps: [],
    clock: options.start ?? 1_000_000,
    now: () => rt.clock,
    random: () => options.random ?? 0.5,
    newRequestId: () => `req-${++n}`,
    sleep: async (ms) => {
      rt.sleeps.push(ms);
      rt.clock += ms;
    },
    setTimer: (ms, fn) => {
      const t = { at: rt.clock + ms, fn, live: true };
      timers.push(t);
      return () => {
        t.live = false;
      };
    },
    fetch: async (url, init) => {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries((init.headers ?? {}) as Record<string, string>)) headers[k.toLowerCase()] = v;
      const headerNames = Object.keys((init.headers ?? {}) as Record<string, string>);
      const req: SeenRequest = { url, method: String(init.method), headers, headerNames, body: init.body as string | undefined, redirect: init.redirect, at: rt.clock };
      rt.seen.push(req);
      const step = steps.shift();
      if (step === undefined) throw new Error(`unexpected attempt ${rt.seen.length}`);
      if (step instanceof Error) throw step;
      if (step === 'stall') {
        // The server never answers: time runs until the attempt's own timer (the deadline) fires.
        const due = timers.filter((t) => t.live).sort((a, b) => a.at - b.at)[0];
        if (due === undefined) throw new Error('a stalled attempt without a deadline timer would hang forever');
        rt.clock = Math.max(rt.clock, due.at);
        due.live = false;
        due.fn();
        const signal = init.signal as AbortSignal;
        throw signal.reason instanceof Error ? signal.reason : new Error('aborted');
      }
      return typeof step === 'function' ? step(req) : step;
    },
  };
  return rt;
}
