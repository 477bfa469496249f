// Hand-written usage of the generated fetch guards (type-checked with the golden output): the shapes of
// Bun / Deno.serve, Next.js route handlers and Hono (a handler, and the middleware before a validator).
import { Hono } from 'hono';
import { validator } from 'hono/validator';
import { Redis } from 'ioredis';
import { createGuards, RedisStore, idempotencyOf } from '../fetch-redis/index.js';

const store = new RedisStore(new Redis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379'));
const guards = createGuards({ store, principal: (request) => request.headers.get('x-user') ?? undefined });

// Bun.serve({ fetch }) / Deno.serve(fetch): (request) => Promise<Response>
export const fetchHandler: (request: Request) => Promise<Response> = guards.createDemoRequest.wrap(async (request) => {
  const key = idempotencyOf(request).idempotencyKey; // forward to a payment provider; never log it
  return Response.json({ id: 'dr_1', forwarded: key !== undefined }, { status: 201 });
});

// Next.js app router: export const POST = …; the context argument passes through.
export const POST = guards.createDemoRequest.wrap(async (_request: Request, context: { params: Promise<{ id: string }> }) => {
  const { id } = await context.params;
  return Response.json({ id }, { status: 201 });
});

// Hono: app.post('/v1/demo-requests', (c) => guarded(c.req.raw))
export const honoRoute = (c: { req: { raw: Request } }) => fetchHandler(c.req.raw);

// Hono with a validator: the guard's middleware first, so it reads the body before the validator does.
export const app = new Hono();
app.post(
  '/v1/demo-requests',
  guards.createDemoRequest.middleware,
  validator('json', (value: { topic?: unknown }, c) => (typeof value.topic === 'string' ? { topic: value.topic } : c.json({ error: 'topic' }, 400))),
  (c) => c.json({ id: 'dr_1', topic: c.req.valid('json').topic, forwarded: idempotencyOf(c.req.raw).idempotencyKey !== undefined }, 201),
);

// @ts-expect-error — the handler must return a Response
guards.createDemoRequest.wrap(async () => ({ id: 'not a Response' }));
// @ts-expect-error — the wrapped handler keeps its signature: a Request comes first
void POST('not a request', { params: Promise.resolve({ id: 'x' }) });
// @ts-expect-error — wrap options only know `transaction`
guards.createDemoRequest.wrap(async () => new Response(), { retries: 3 });
// @ts-expect-error — the middleware takes a Hono context and next(), not a Request
void guards.createDemoRequest.middleware(new Request('http://localhost/v1/demo-requests'), async () => {});
