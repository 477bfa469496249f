// Hand-written usage of the generated Fastify guards (type-checked with the golden output).
import Fastify from 'fastify';
import pg from 'pg';
import { createGuards, PostgresStore, idempotencyPlugin } from '../fastify-postgres/index.js';

const pool = new pg.Pool({ connectionString: process.env['DATABASE_URL'] });
const store = new PostgresStore(pool);
await store.migrate();
const guards = createGuards({ store, principal: (request) => request.headers['x-user'] as string | undefined });

const app = Fastify();
// Route-level hooks…
app.post('/v1/demo-requests', { ...guards.createDemoRequest.hooks }, async (_request, reply) => {
  reply.code(201);
  return { id: 'dr_1' };
});
// …or every contracted route at once, registered before the routes.
await app.register(idempotencyPlugin(Object.values(guards)));

// One-transaction mode: the handler writes through the transaction that reserved the key.
app.post(
  '/v1/demo-requests-tx',
  guards.createDemoRequest.transactional<pg.PoolClient>(async (_request, reply, { tx }) => {
    await tx?.query('INSERT INTO demo_requests (id) VALUES ($1)', ['dr_2']);
    reply.code(201);
    return { id: 'dr_2' };
  }),
);

// @ts-expect-error — hooks are not a handler
app.post('/x', guards.createDemoRequest.hooks);
// @ts-expect-error — the plugin takes guards, not contracts
idempotencyPlugin([guards.createDemoRequest.contract]);
// @ts-expect-error — the transaction is a PoolClient here, not a string
guards.createDemoRequest.transactional<pg.PoolClient>(async (_request, _reply, { tx }) => tx?.toUpperCase());
