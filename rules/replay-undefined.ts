import { wrapperMembers } from '../src/runtime/result-id.js';
import { RESULT_HEADERS } from '../src/runtime/wire.js';
import { defineRule } from '../src/lint/rule.js';
import { activeContract, child, isObject, propertyNames, responseSchema, successResponses, type ResponseView } from '../src/lint/views.js';

// A property that names the created/affected resource: id, uuid, paymentId, payment_id, orderID, InvoiceID;
// Twilio's `sid`/`account_sid`/`AccountSid`; AWS's ARNs (`ScheduleArn`, `resource_arn`: its create operations
// answer with the new resource's ARN); Adyen's `pspReference` (its id of a payment or modification).
// Case is spelled out, not ignored: `paid`, `valid`, `void` end in `id`, `yarn` in `arn`, but name no resource.
const RESULT_ID =
  /^(?:id|Id|ID|uuid|Uuid|UUID|sid|Sid|SID|arn|Arn|ARN)$|[a-z0-9](?:Id|ID|Uuid|UUID|Sid|SID|Arn|ARN)$|_(?:id|ID|uuid|UUID|sid|SID|arn|ARN)$|^pspReference$/;

/** No replay behaviour, or nothing that identifies the result a replay must return again. */
export default defineRule({
  meta: {
    id: 'replay-undefined',
    severity: 'error',
    description: 'The contract has no replay behaviour, or the success response carries no result id to replay.',
    criterion: 'replay',
    rationale:
      'Readiness question 4: a lost response then a retry must give exactly one effect and the same result ID, so the replay answer and that ID must be part of the contract.',
    messages: {
      noReplay:
        'no `responses.replay`: the contract does not say what a retry of a completed request gets; add `responses.replay: {header: Idempotent-Replayed}` (the stored status and body, marked with that header)',
      noSuccess: 'the operation documents no 2xx response, so there is nothing to replay: document the success response and its result id',
      noResultId:
        'the {status} success response carries no result id (no `id`, `…Id`, `…_id`, `sid`, `…Arn` or `pspReference` property, also inside a wrapping member or its list items; no `Location` or `Operation-Location` header): a client cannot tell that a replay returned the same result; add the created resource\'s id to the response',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    if (!contract) return;
    if (!contract.responses.replay) {
      ctx.report('noReplay', contract.at('responses', 'replay'));
      return;
    }
    const { document: doc, operation: op } = ctx;
    const successes = successResponses(doc, op);
    if (successes.length === 0) {
      ctx.report('noSuccess', isObject(op.node['responses']) ? child(op.at, 'responses') : op.at);
      return;
    }
    // The first success by status (the first of equals, as a stable sort puts it): a loop, no sorted copy.
    let primary = successes[0]!;
    for (let i = 1; i < successes.length; i++) if (successes[i]!.status.localeCompare(primary.status) < 0) primary = successes[i]!;
    // A header that names the result: Location, Content-Location (RFC 9110), Azure's Operation-Location.
    if (primary.status === '204' || namesResultHeader(primary)) return;
    const schema = responseSchema(doc, primary);
    if (schema) {
      const names = propertyNames(doc, schema.value, schema.at);
      if (namesResultId(names)) return;
      // The resource wrapped in an envelope (`{data: {…}}`) or alone beside metadata (`{payments: {…}, links}`), as the guard reads it.
      const wrappers = new Set(wrapperMembers(names.map((p) => p.name)));
      for (const envelope of names.filter((p) => wrappers.has(p.name))) {
        let inner = doc.deref(doc.get(envelope.at), envelope.at);
        // A list of what was created (`{Invoices: [{InvoiceID}]}`, as Xero answers): its items carry the ids.
        if (inner && isObject(inner.value) && isObject(inner.value['items'])) inner = doc.deref(inner.value['items'], child(inner.at, 'items'));
        if (inner && propertyNames(doc, inner.value, inner.at).some((p) => RESULT_ID.test(p.name))) return;
      }
    }
    ctx.report('noResultId', schema?.at ?? primary.valueAt, { status: primary.status });
  },
});

/** Whether a response declares a header that names the result (loops, no closures: this runs for every contract). */
function namesResultHeader(response: ResponseView): boolean {
  for (let i = 0; i < RESULT_HEADERS.length; i++) if (response.headers.has(RESULT_HEADERS[i]!)) return true;
  return false;
}

/** Whether one of the property names names the created resource. */
function namesResultId(names: readonly { readonly name: string }[]): boolean {
  for (let i = 0; i < names.length; i++) if (RESULT_ID.test(names[i]!.name)) return true;
  return false;
}
