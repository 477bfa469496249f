import assert from 'node:assert/strict';
import vm from 'node:vm';
import { compileTemplate, isIdentifier, packageRoot, renderTemplate, toCommentText, toIdentifier, toJsLiteral } from '../../src/generate/render.js';
import { InternalError } from '../../src/errors.js';

/** Strings that would break out of a literal, a comment or a template string if pasted raw. */
export const HOSTILE = [
  `'; globalThis.canary = 1; '`,
  `"; globalThis.canary = 1; "`,
  '`; globalThis.canary = 1; `',
  '${globalThis.canary = 1}',
  '*/ globalThis.canary = 1; /*',
  '</script><script>globalThis.canary = 1</script>',
  'line\nglobalThis.canary = 1;//',
  'ls\u2028globalThis.canary = 1;//',
  'ps\u2029globalThis.canary = 1;//',
  'cr\rglobalThis.canary = 1;//',
  '\\\'; globalThis.canary = 1; //',
  'ünïcödé — 名前 🧨',
  // Trojan Source: bidirectional controls that make a review read the line in another order than it runs.
  'admin\u202e \u2066// check\u2069 \u2067x\u2068\u061c\u200e\u200f\u202a\u202b\u202c\u202d',
  '{{canary}}',
];

function run(code: string): Record<string, unknown> {
  const sandbox: Record<string, unknown> = {};
  vm.runInNewContext(code, sandbox);
  return sandbox;
}

describe('generate/render', () => {
  describe('toJsLiteral', () => {
    for (const text of HOSTILE) {
      it(`keeps ${JSON.stringify(text)} inert in code, in a block comment and in a line comment`, () => {
        const literal = toJsLiteral(text);
        assert.doesNotMatch(literal, /[\n\r\u2028\u2029]/);
        assert.doesNotMatch(literal, /\*\//);
        assert.doesNotMatch(literal, /<\//);
        assert.doesNotMatch(literal, /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/, 'a raw bidirectional control');
        const sandbox = run(
          `// header ${toCommentText(text)}\n/** doc ${toCommentText(text)} */\nvar value = ${literal};\nvar nested = { [${literal}]: [${literal}] };`,
        );
        assert.equal(sandbox['canary'], undefined);
        assert.equal(sandbox['value'], text);
        assert.deepEqual(Object.keys(sandbox['nested'] as object), [text]);
      });
    }

    it('emits objects, numbers, booleans, null and undefined as JS literals', () => {
      const value = { a: [1, 'x', true, null], 'b c': { d: -2.5 } };
      assert.deepEqual(JSON.parse(JSON.stringify(run(`var v = ${toJsLiteral(value, 2)};`)['v'])), value);
      assert.equal(toJsLiteral(undefined), 'undefined');
      assert.throws(() => toJsLiteral(Number.NaN), InternalError);
      assert.throws(() => toJsLiteral(() => 1), InternalError);
    });

    it('writes a member named __proto__ as an own member, not the prototype (also when the text holds the same words)', () => {
      const value = JSON.parse('{"__proto__": {"style": "form"}, "b": {"__proto__": 1, "t": "\\"__proto__\\": x"}}') as Record<string, unknown>;
      for (const indent of [undefined, 2]) {
        const v = run(`var v = ${toJsLiteral(value, indent)};`)['v'] as Record<string, unknown>;
        assert.ok(Object.hasOwn(v, '__proto__'), 'an own member');
        assert.equal(typeof (Object.getPrototypeOf(v) as { hasOwnProperty?: unknown }).hasOwnProperty, 'function', "the prototype is the context's Object.prototype");
        assert.equal(JSON.stringify(v), JSON.stringify(value));
      }
    });
  });

  describe('toIdentifier', () => {
    const cases: [string, string][] = [
      ['createDemoRequest', 'createDemoRequest'],
      ['create-demo request', 'createDemoRequest'],
      ['POST /v1/demo-requests', 'postV1DemoRequests'],
      ['1st', '_1st'],
      ['delete', 'delete_'],
      ['', 'operation'],
      ['`; globalThis.canary=1 ${x}*/', 'globalThisCanary1X'],
      ['créer-demande', 'creerDemande'],
      ['名前', 'operation'],
    ];
    for (const [input, expected] of cases) {
      it(`${JSON.stringify(input)} -> ${expected}`, () => {
        assert.equal(toIdentifier(input), expected);
        assert.ok(isIdentifier(toIdentifier(input)));
      });
    }
  });

  describe('templates', () => {
    it('renders spec text only through the quoting helpers', () => {
      const template = compileTemplate(
        '{{#each ops}}// {{comment label}}\nvar {{ident name}} = {{json value}};\n{{#if (eq kind "x")}}var flag_{{ident name}} = true;\n{{/if}}{{/each}}',
      );
      const ops = HOSTILE.map((text, index) => ({ label: text, name: `op${index}`, value: text, kind: index === 0 ? 'x' : 'y' }));
      const sandbox = run(template({ ops }));
      assert.equal(sandbox['canary'], undefined);
      HOSTILE.forEach((text, index) => assert.equal(sandbox[`op${index}`], text));
      assert.equal(sandbox['flag_op0'], true);
      assert.equal(sandbox['flag_op1'], undefined);
    });

    it('writes a string in single quotes with quote="single", the same value', () => {
      const template = compileTemplate('{{#each ops}}var {{ident name}} = {{json value quote="single"}};\n{{/each}}');
      const texts = [...HOSTILE, `it's "quoted" \\' \\" \\`, "'", '\\', './runtime/adapters/express.js'];
      const source = template({ ops: texts.map((text, index) => ({ name: `op${index}`, value: text })) });
      for (const line of source.trim().split('\n')) assert.match(line, /^var op\d+ = '.*';$/);
      const sandbox = run(source);
      assert.equal(sandbox['canary'], undefined);
      texts.forEach((text, index) => assert.equal(sandbox[`op${index}`], text));
    });

    it('rejects a bare {{field}} mustache when the template is loaded', () => {
      assert.throws(() => compileTemplate('var x = "{{label}}";'), /must go through \{\{json/);
      assert.throws(() => compileTemplate('{{#each ops}}{{this}}{{/each}}'), /must go through/);
      assert.throws(() => compileTemplate('{{{label}}}'), /must go through/);
    });

    it('rejects unknown helpers and missing view-model fields', () => {
      assert.throws(() => compileTemplate('{{json (lowercase x)}}')({ x: 'A' }));
      assert.throws(() => compileTemplate('{{json missing}}')({}), /lacks this field/);
      assert.throws(() => compileTemplate('{{json a.missing}}')({ a: {} }), /lacks this field/);
    });

    it('refuses a non-identifier in {{ident}}', () => {
      assert.throws(() => compileTemplate('var {{ident name}} = 1;')({ name: 'a; globalThis.canary=1' }), /not a safe identifier/);
    });

    it('loads templates from the package root and fails clearly on a missing one', () => {
      assert.match(packageRoot(), /\S/);
      assert.throws(() => renderTemplate('no/such-template', {}), /template not found: templates\/no\/such-template\.hbs/);
    });
  });
});
