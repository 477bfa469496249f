/**
 * The article's case, end to end: lint the sample contract, generate its server guard and typed client,
 * start the service on the embedded SQLite store, and replay "the first delivery was saved but its response
 * was lost; the retry with the same key gets the saved result; a changed body gets 422".
 *
 * Prints a short account through `print` and returns whether every expectation held. Touches no `process`.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { main } from '../cli/main.js';
import { packageRoot } from '../generate/render.js';
import type { IntentResult } from '../runtime/client/engine.js';
import type { Intent } from '../runtime/client/intent.js';
import { startDemoService, type DemoService, type GeneratedServer } from './app.js';
import { generateWorkspace, importGenerated } from './workspace.js';

/** The article's identifiers. */
export const DEMO_KEY = 'demo-key-retry-2020-06-a7f1';
export const DEMO_REQUEST_IDS = ['req-51', 'req-52', 'req-53'] as const;
export const DEMO_RESULT_ID = 'demo-request-42';

type DemoBody = { topic: string; contact: { email: string } };
type DemoAnswer = { id: string; state: string };

/** The part of the generated demo client this file uses. */
interface DemoClientModule {
  createClient(options: { baseUrl: string; runtime?: Record<string, unknown> }): {
    intent(operation: 'createDemoRequest', key?: string): Intent;
    createDemoRequest(input: { body: DemoBody }, call: { intent: Intent }): Promise<IntentResult<DemoAnswer, { type: string; title: string }, unknown>>;
  };
}

/** One attempt as the client saw it. */
interface Attempt {
  readonly requestId: string;
  readonly at: number;
  readonly outcome: string;
}

/** Thrown when the demo does not show what it should; the account says which step. */
export class DemoFailure extends Error {
  override readonly name = 'DemoFailure';
}

function expect(condition: boolean, what: string): void {
  if (!condition) throw new DemoFailure(what);
}

/** Runs the demo in a temporary directory it removes afterwards. */
export async function runDemo(print: (line: string) => void): Promise<void> {
  const root = packageRoot();
  const spec = path.join(root, 'samples', 'demo-requests', 'openapi.yaml');
  const shown = path.relative(root, spec).split(path.sep).join('/');
  const dir = await mkdtemp(path.join(os.tmpdir(), 'idemkit-demo-'));
  let service: DemoService | undefined;
  try {
    print("idemkit demo — the article's lost response, replayed against generated code (embedded SQLite)");
    print('');

    // 1. Lint, through the real CLI command.
    let lintOut = '';
    let lintErr = '';
    const code = await main(['lint', spec, '--format', 'json'], {
      cwd: root,
      env: {},
      stdout: (text) => (lintOut += text),
      stderr: (text) => (lintErr += text),
    });
    const summary = lintSummary(lintOut);
    print(`lint      ${shown}: ${summary ?? (lintOut + lintErr).trim()}`);
    expect(code === 0, `lint failed (exit ${code}): the sample contract must be clean\n${lintOut}${lintErr}`);

    // 2. Generate the server guard and the client, and make them runnable here.
    const ws = await generateWorkspace(spec, dir, shown);
    print(`generate  server guard (express + sqlite): ${ws.serverFiles.length} files · typed client: ${ws.clientFiles.length} files`);
    const server = await importGenerated<GeneratedServer>(ws.serverEntry);
    const clientModule = await importGenerated<DemoClientModule>(ws.clientEntry);

    // 3. Start the service.
    service = await startDemoService(server, path.join(dir, 'demo.sqlite'));
    const svc = service;
    print(`serve     POST /v1/demo-requests on ${svc.baseUrl} · records in an SQLite file of a temp dir`);
    print('');

    // The client's attempts get the article's request ids, and we watch each one.
    const ids: string[] = [...DEMO_REQUEST_IDS];
    const attempts: Attempt[] = [];
    const client = clientModule.createClient({
      baseUrl: svc.baseUrl,
      runtime: {
        newRequestId: () => ids.shift() ?? `req-${60 + attempts.length}`,
        fetch: async (url: string, init: RequestInit) => {
          const requestId = new Headers(init.headers).get('x-request-id') ?? '?';
          const at = Date.now();
          try {
            const res = await fetch(url, init);
            attempts.push({ requestId, at, outcome: `${res.status}` });
            return res;
          } catch (error) {
            attempts.push({ requestId, at, outcome: 'no response' });
            throw error;
          }
        },
      },
    });
    const decisions = (requestId: string) =>
      svc.log.filter((event) => event.requestId === requestId).map((event) => event.decision + (event.resultId ? ` ${event.resultId}` : ''));

    // 4. The first delivery is saved, but its response is lost on the way back.
    svc.faults.set('req-51', { kind: 'lose-response' });
    const body: DemoBody = { topic: 'bundle review', contact: { email: 'visitor@example.com' } };
    const intent = client.intent('createDemoRequest', DEMO_KEY);
    print(`intent    Idempotency-Key: ${intent.key} · body ${JSON.stringify(body)}`);
    const first = await client.createDemoRequest({ body }, { intent });
    const [a1, a2] = attempts;
    print(`  req-51  guard: ${decisions('req-51').join(' → ')} · the response is lost on the way back`);
    if (a1 !== undefined && a2 !== undefined) {
      print(`  client  no response to req-51; retries the same intent (same key) as req-52 after ${a2.at - a1.at} ms`);
    }
    print(`  req-52  guard: ${decisions('req-52').join(' → ')} · Idempotent-Replayed: ${first.kind === 'completed' ? String(first.replayed) : '-'}`);
    print(`  result  ${describe(first)}`);
    expect(first.kind === 'completed', `the retry should complete, got ${first.kind}`);
    expect(first.kind === 'completed' && first.replayed, 'the retry should be a replay of the saved result');
    expect(first.kind === 'completed' && first.body.id === DEMO_RESULT_ID, `the result id should be ${DEMO_RESULT_ID}`);
    expect(attempts.map((a) => a.requestId).join(',') === 'req-51,req-52', `expected attempts req-51, req-52, got ${attempts.map((a) => a.requestId).join(', ')}`);
    print('');

    // 5. The same key with a changed body is another command: conflict before the handler, no retry.
    const changed: DemoBody = { ...body, topic: 'other command' };
    print(`changed   same key · body ${JSON.stringify(changed)}`);
    const before = attempts.length;
    const conflict = await client.createDemoRequest({ body: changed }, { intent });
    print(`  req-53  guard: ${decisions('req-53').join(' → ')} · answered before the handler ran`);
    print(`  result  ${describe(conflict)}`);
    expect(conflict.kind === 'rejected' && conflict.reason === 'mismatch' && conflict.status === 422, 'a changed body should be rejected with 422');
    expect(attempts.length === before + 1, 'a rejected answer must not be retried');
    print('');

    const effects = svc.effects();
    expect(effects === 1, `exactly one effect expected, counted ${effects}`);
    print(`effects: ${effects}`);
  } finally {
    await service?.close();
    await rm(dir, { recursive: true, force: true });
  }
}

function lintSummary(json: string): string | undefined {
  try {
    const report = JSON.parse(json) as { summary?: Record<string, number> };
    const s = report.summary;
    if (s === undefined) return undefined;
    return `${s['error'] ?? 0} errors, ${s['warn'] ?? 0} warnings`;
  } catch {
    return undefined;
  }
}

function describe(result: IntentResult<DemoAnswer, { type: string; title: string }, unknown>): string {
  switch (result.kind) {
    case 'completed':
      return `completed · ${result.status} · id ${result.body.id} · replayed: ${String(result.replayed)}`;
    case 'rejected':
      return `rejected (${result.reason}) · ${result.status} ${result.body?.title ?? ''} · not retried`;
    case 'unknown':
      return `unknown (${result.reason}) · key ${result.key} · attempts ${result.requestIds.join(', ')}`;
  }
}
