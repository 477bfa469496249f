// Hand-written usage of the generated kitchen-sink client (3.0: $ref, allOf, oneOf, anyOf, enums, nullable,
// x-idempotency: false, header and query parameters). Type-checked with tsc --strict in the test run.
import { createClient, type ApiResponse } from '../kitchen-sink-3.0/index.js';
import type { NewOrder, Order, TreeNode } from '../kitchen-sink-3.0/schema.js';
import { createClient as createNotes } from '../type-arrays-3.1/index.js';
import { createClient as createPayments } from '../swagger-2.0/index.js';

const client = createClient({ baseUrl: 'http://127.0.0.1:8080' });
const order: NewOrder = { items: [{ sku: 'a', qty: 2 }], payment: { kind: 'card', token: 't' }, note: null, metadata: { a: 'b' } };

export async function use(): Promise<void> {
  const created = await client.createOrder({ headers: { 'X-Tenant-Id': 't1' }, body: order, query: { dryRun: true } });
  if (created.kind === 'completed') {
    const o: Order = created.body;
    const total: number = o.total.amount;
    const tags: string | string[] | undefined = o.tags;
    void total;
    void tags;
  }
  if (created.kind === 'unknown') await created.checkStatus({ path: { orderId: 'o1' } });
  // Not idempotent (x-idempotency: false): a plain answer, sent once.
  const cancelled: ApiResponse<undefined, unknown> = await client.cancelOrderEvil({ path: { orderId: 'o1' } });
  void cancelled;
  const list = await client.listOrders({ headers: { 'X-Tenant-Id': 't1' }, query: { status: ['open', 'paid "*/ now'], limit: null } });
  if (list.ok) void list.body.items.map((item) => item.id);
  const tree: TreeNode = { name: 'root', children: [{ name: 'leaf', children: [] }] };
  await client.putV1Tree({ body: tree });

  const notes = createNotes({ baseUrl: 'http://127.0.0.1:8080' });
  const note = await notes.createNote({ body: { text: 'x', priority: null, kind: 'note', pinned: 'yes' } });
  if (note.kind === 'completed') {
    const deleted: string | null | undefined = note.body.deletedAt;
    void deleted;
  }
  // unknownOutcome: surface with no status route: nothing to call.
  if (note.kind === 'unknown') {
    const none: undefined = note.checkStatus;
    void none;
  }
  const payments = createPayments({ baseUrl: 'http://127.0.0.1:8080/api' });
  const paid = await payments.createPayment({ body: { amount: 100, memo: null } });
  if (paid.kind === 'completed') void paid.body.id;
  await payments.getPayment({ path: { id: 'p1' }, query: { expand: ['refunds'] } });
}

export async function wrong(): Promise<void> {
  // @ts-expect-error the X-Tenant-Id header parameter is required
  await client.createOrder({ body: order });
  // @ts-expect-error payment is a Card or an Invoice
  await client.createOrder({ headers: { 'X-Tenant-Id': 't' }, body: { ...order, payment: { kind: 'cash' } } });
  // @ts-expect-error qty is 1, 2 or 3
  await client.createOrder({ headers: { 'X-Tenant-Id': 't' }, body: { ...order, items: [{ sku: 'a', qty: 7 }] } });
  // @ts-expect-error not an OrderStatus
  await client.listOrders({ headers: { 'X-Tenant-Id': 't' }, query: { status: ['lost'] } });
  // @ts-expect-error cancelOrder is not idempotent, so it has no intent
  client.intent('cancelOrderEvil');
  const notes = createNotes({ baseUrl: 'http://x' });
  // @ts-expect-error the 3.1 priority is an integer or null
  await notes.createNote({ body: { text: 'x', priority: 'high' } });
  const payments = createPayments({ baseUrl: 'http://x' });
  // @ts-expect-error the 2.0 amount is an integer
  await payments.createPayment({ body: { amount: '100' } });
}
