// Hand-written usage of the generated demo-requests client. It is type-checked with tsc --strict in the test
// run; every `@ts-expect-error` line must really be an error (an unused one fails the run).
import { createClient, Intent, type CreateDemoRequestResult } from '../demo-requests/index.js';
import type { DemoRequestInput } from '../demo-requests/schema.js';

const client = createClient({ baseUrl: 'http://127.0.0.1:8080', headers: { authorization: 'Bearer demo' } });
const body: DemoRequestInput = { topic: 'bundle review', contact: { email: 'ops@example.com' } };

// Options read from configuration may be undefined: with exactOptionalPropertyTypes an undefined option is absent.
const config: { url?: string | undefined; timeoutMs?: number | undefined; signal?: AbortSignal | undefined } = {};
const configured = createClient({ baseUrl: config.url, timeoutMs: config.timeoutMs });
void configured.createDemoRequest({ body }, { signal: config.signal, intent: undefined });

export async function submit(saved: string | undefined): Promise<string> {
  // A UI keeps the intent across a reload so the retry after a lost response uses the same key.
  const intent = saved === undefined ? client.intent('createDemoRequest') : Intent.fromJSON(saved);
  const result: CreateDemoRequestResult = await client.createDemoRequest({ body }, { intent });
  switch (result.kind) {
    case 'completed': {
      const id: string = result.body.id;
      const state: 'received' | 'scheduled' | 'done' = result.body.state;
      return `${id} ${state} replayed=${String(result.replayed)}`;
    }
    case 'rejected':
      // A redirect is no answer of the operation: it has a location, not a body.
      if (result.reason === 'redirected') return `redirected (${result.status}) to ${result.location ?? 'a hidden location'}`;
      return `${result.reason} ${result.status} ${result.body.title}`;
    case 'unknown': {
      // The status route reads the outcome by the intent's key, which checkStatus sends: nothing else to give.
      const check = await result.checkStatus();
      const seen = check.ok ? check.body.state : check.body.title;
      return `unknown ${result.key} after ${result.requestIds.join(',')}: ${seen}`;
    }
  }
}

export async function wrongCalls(result: CreateDemoRequestResult): Promise<void> {
  // @ts-expect-error the topic is a string
  await client.createDemoRequest({ body: { topic: 42, contact: { email: 'a@b' } } });
  // @ts-expect-error contact is required
  await client.createDemoRequest({ body: { topic: 'x' } });
  // @ts-expect-error the body schema has additionalProperties: false
  await client.createDemoRequest({ body: { ...body, priority: 'high' } });
  // @ts-expect-error there is no such operation
  await client.deleteDemoRequest({ path: { id: 'demo-request-42' } });
  // @ts-expect-error a body is required
  await client.createDemoRequest({});
  // @ts-expect-error getDemoRequest has no contract, so it has no intent
  client.intent('getDemoRequest');
  // @ts-expect-error the path parameter id is required
  await client.getDemoRequest({ path: {} });
  // @ts-expect-error an intent is an Intent, not a bare key string
  await client.createDemoRequest({ body }, { intent: 'demo-key-retry-2020-06-a7f1' });
  // @ts-expect-error the body is only known after narrowing to completed or rejected
  void result.body;
  if (result.kind === 'rejected') {
    // @ts-expect-error a rejected answer is never a replay
    void result.replayed;
    // @ts-expect-error a redirect has no body: narrow on the reason first
    void result.body.title;
  }
  if (result.kind === 'completed') {
    // @ts-expect-error the state is an enum
    const state: 'cancelled' = result.body.state;
    void state;
  }
}
