import { CONTRACT_DEFAULTS } from '../src/parser/compile.js';
import { defineRule } from '../src/lint/rule.js';
import { quickToRun } from '../src/parser/regex-ambiguity.js';
import { isRepeatableRequestsKey } from '../src/runtime/wire.js';
import { activeContract, child, keyDeclaration } from '../src/lint/views.js';

// DESIGN §4: accept at least 64 characters (SDK-generated keys are 54–57).
const MIN_KEY_LENGTH = 64;
// A key whose format is a UUID — OASIS Repeatable Requests' `Repeatability-Request-ID` (Azure SDKs send a
// UUID), or a header declared `format: uuid` — needs 36: its clients do not send `<sdk>-retry-<uuid>` keys.
const UUID_LENGTH = 36;
// What SDKs that make their own key send when the caller gives none: stripe-node and Stainless-generated clients
// (`<sdk>-retry-<uuid>`), and @mollie/api-client (18 random bytes in base64: `+` and `/` in about half of them).
// A pattern must take every form: a client whose keys it refuses gets `invalidKey` for every such request.
const SDK_KEYS = [
  'stripe-node-retry-1b4e28ba-2fa1-41d2-883f-0016d3cca427',
  'stainless-node-retry-1b4e28ba-2fa1-41d2-883f-0016d3cca427',
  'kN3+9aZ/Qm0xT7pL2v/8+wYc',
];

/** The key has no length bound, pattern or format, in the contract or on its header parameter. */
export default defineRule({
  meta: {
    id: 'key-unbounded',
    severity: 'warn',
    description: 'The idempotency key has no maxLength (and no pattern or format), neither in the contract nor where the document declares it.',
    criterion: 'contract',
    rationale:
      'The key is part of a durable record; an unbounded key lets a client store arbitrary data and leaves "invalid key" undefined, one of the states the contract must answer.',
    messages: {
      unbounded:
        'the key `{header}` has no bound: no `maxLength` or `pattern` in the contract, and none (nor `format: uuid`) where the document declares it: set `key.maxLength` (255 is a good default; accept at least 64 for generated `<sdk>-retry-<uuid>` keys) so overlong keys get `responses.invalidKey`',
      patternRejectsSdkKeys:
        '`key.pattern` rejects keys SDKs generate when the caller gives none (`stripe-node-retry-<uuid>`, `stainless-node-retry-<uuid>`, @mollie/api-client\'s base64 with `+` and `/`): the guard answers each such request with `responses.invalidKey`; allow letters, digits, `-`, `+`, `/` and `=` (for example `^[A-Za-z0-9._:+/=-]+$`), unless every client makes its own keys of this form',
      tooShort:
        '{where} `maxLength: {maxLength}` is shorter than the keys SDKs generate (`<sdk>-retry-<uuid>` keys are 54–57 characters): the generated guard accepts up to {accepted} anyway, so the documented limit tells clients and reviewers less than the server takes; accept at least 64 (255 is a good default), unless every client makes its own shorter keys',
      tooShortForUuid:
        '{where} `maxLength: {maxLength}` is shorter than a UUID (36 characters), which is what clients — the generated one among them — send as `{header}`: accept at least 36',
      disagrees:
        '`key.maxLength` is {maxLength} but {label} declares `maxLength: {declared}`: clients follow the documented limit and the guard enforces the contract one; make them agree',
    },
  },
  operations: 'contracted',
  check(ctx) {
    const contract = activeContract(ctx.contract);
    if (!contract) return;
    const key = contract.key;
    const declaration = keyDeclaration(ctx.document, ctx.operation, key);
    const schema = declaration.schema;
    const declared = typeof schema?.value['maxLength'] === 'number' ? (schema.value['maxLength'] as number) : undefined;
    const own = key.maxLength;
    const uuidKey = (key.in === 'header' && isRepeatableRequestsKey(key.name)) || schema?.value['format'] === 'uuid';
    // A query or body key: no SDK fills one, but the generated client sends a UUID there.
    const uuidBound = uuidKey || key.in !== 'header';
    const minimum = uuidBound ? UUID_LENGTH : MIN_KEY_LENGTH;
    const tooShort = uuidBound ? 'tooShortForUuid' : 'tooShort';
    // A UUID key's clients send UUIDs; any other key header may come from an SDK that makes its own (a key in the
    // query or body is the API's own convention, which generic SDKs do not fill).
    const takesSdkKeys = key.pattern === undefined || SDK_KEYS.every((sample) => matchesWhole(key.pattern!, sample));
    if (!uuidKey && key.in === 'header' && !takesSdkKeys) {
      ctx.report('patternRejectsSdkKeys', contract.at('key', 'pattern'), { header: key.name });
    }
    if (own !== undefined) {
      // A key header's pattern that refuses SDK keys (a UUID pattern caps keys at 36) decides what the guard takes:
      // that is patternRejectsSdkKeys' finding, and "the guard accepts up to 64 anyway" would be untrue.
      // A query or body key (no SDK fills one) is bounded by the API's own rule, down to the generated client's UUIDs.
      if (own < minimum && (uuidBound || takesSdkKeys)) {
        ctx.report(tooShort, contract.at('key', 'maxLength'), { where: 'the contract\'s', maxLength: own, header: key.name, accepted: Math.max(own, CONTRACT_DEFAULTS.keyMinMaxLength) });
      }
      else if (declared !== undefined && declared !== own) {
        ctx.report('disagrees', contract.at('key', 'maxLength'), { maxLength: own, header: key.name, declared, label: declaration.label });
      }
      return;
    }
    if (declared !== undefined && declared < minimum && key.pattern === undefined) {
      ctx.report(tooShort, child(schema!.at, 'maxLength'), {
        where: `${declaration.label}'s`,
        maxLength: declared,
        header: key.name,
        // The contract sets no bound of its own: the guard takes the default.
        accepted: CONTRACT_DEFAULTS.keyMaxLength,
      });
      return;
    }
    if (key.pattern !== undefined) return;
    // An undeclared key is key-header-undeclared's error, whose fix declares the bound too: one finding per fault.
    if (!declaration.found) return;
    if (schema && (declared !== undefined || typeof schema.value['pattern'] === 'string' || schema.value['format'] === 'uuid')) return;
    ctx.report('unbounded', contract.at('key'), { header: key.name });
  },
});

/**
 * Whether `pattern` matches the whole of `text`, as the guard tests a key; an invalid pattern, or one that can take
 * exponential time (not run here: lint must not hang on it), is contract-invalid's finding.
 */
function matchesWhole(pattern: string, text: string): boolean {
  // Not run when it may backtrack long on this text (exponential, not known, or a high power of its length): that is
  // contract-invalid's finding, and a lint in CI must not hang on a hostile spec.
  if (!quickToRun(pattern, text.length)) return true;
  try {
    return new RegExp(`^(?:${pattern})$`).test(text);
  } catch {
    return true;
  }
}
