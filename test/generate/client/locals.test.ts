/**
 * Operation method names never collide with what `client.ts` declares for itself: CLIENT_LOCALS is checked against
 * every identifier a generated `client.ts` declares or imports (read back with the TypeScript parser), and a
 * document whose operationIds are all of those names compiles.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import ts from 'typescript';
import { buildClientModel, CLIENT_EXPORTS, CLIENT_LOCALS, generateClient } from '../../../src/generate/client/index.js';
import { writeOutput } from '../../../src/generate/output.js';
import { loadDocument } from '../../../src/parser/index.js';
import { contractYaml } from '../../client/contracts.js';
import { REPO_ROOT, STRICT_COMPILER_OPTIONS, tsFiles } from '../tsc.js';

/**
 * A document whose operationIds are every reserved name, covering each branch of the client template: contracted
 * operations with a status route (with and without required input, itself named like a local), operations without
 * a contract, and operations with servers of their own (absolute and a path).
 */
function collidingSpec(): string {
  // The names helper-70 found breaking a client (`contract` as a status route), whatever the lists hold.
  const reserved = [...new Set([...CLIENT_LOCALS, ...CLIENT_EXPORTS, 'contract', 'sent', 'statusInput'])];
  const ops = reserved.map((name, i) => {
    const own = name === 'base' ? "\n    servers: [{ url: 'https://uploads.example.com' }]" : name === 'call' ? "\n    servers: [{ url: '/v2' }]" : '';
    const param = name === 'contract' ? '/{id}' : '';
    const params = param === '' ? '' : '\n      parameters: [{ name: id, in: path, required: true, schema: { type: string } }]';
    return `  /ops/${i}${param}:${own}\n    get:\n      operationId: ${JSON.stringify(name)}${params}\n      responses: { '200': { description: ok, content: { application/json: { schema: { type: object } } } } }`;
  });
  const contracted = (id: string, status: string) => `  /commands/${id}:
    post:
      operationId: ${id}
      requestBody: { required: true, content: { application/json: { schema: { type: object } } } }
      responses: { '201': { description: created } }
      x-idempotency:
${contractYaml('        ')}
        effect: { owner: o, external: false, statusRoute: ${JSON.stringify(status)} }`;
  return `openapi: 3.0.3
info: { title: operationIds named like the client's own identifiers, version: '1' }
servers: [{ url: 'https://api.example.com' }]
paths:
${ops.join('\n')}
${contracted('createOrder', 'contract')}
${contracted('createOther', 'statusInput')}
`;
}

/** Every name a module declares or imports, in any scope (imports, functions, variables, parameters, types). */
function declaredNames(file: string): Set<string> {
  const source = ts.createSourceFile(file, ts.sys.readFile(file)!, ts.ScriptTarget.ES2022, true);
  const names = new Set<string>();
  const bind = (name: ts.BindingName | undefined): void => {
    if (name === undefined) return;
    if (ts.isIdentifier(name)) names.add(name.text);
    else for (const element of name.elements) if (!ts.isOmittedExpression(element)) bind(element.name);
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportSpecifier(node) || ts.isNamespaceImport(node)) names.add(node.name.text);
    else if (ts.isImportClause(node) && node.name !== undefined) names.add(node.name.text);
    else if (ts.isVariableDeclaration(node) || ts.isParameter(node) || ts.isBindingElement(node)) bind(node.name);
    else if ((ts.isFunctionDeclaration(node) || ts.isClassDeclaration(node) || ts.isInterfaceDeclaration(node) || ts.isTypeAliasDeclaration(node)) && node.name !== undefined) names.add(node.name.text);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return names;
}

describe('generate client: operation names never collide with the client\'s own identifiers', function () {
  this.timeout(120_000);
  let dir: string;
  before(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'idemkit-client-locals-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('CLIENT_LOCALS and CLIENT_EXPORTS hold every identifier a generated client.ts declares or imports besides its operations', async () => {
    const spec = path.join(dir, 'colliding.yaml');
    writeFileSync(spec, collidingSpec());
    const cases = [spec, ...['kitchen-sink-3.0', 'swagger-2.0', 'no-contracts', 'e2e', 'wire-2.0'].map((name) => path.join(REPO_ROOT, 'test', 'fixtures', 'client', `${name}.yaml`))];
    const reserved = new Set([...CLIENT_LOCALS, ...CLIENT_EXPORTS]);
    for (const [i, file] of cases.entries()) {
      const doc = await loadDocument(file);
      const out = path.join(dir, String(i));
      await writeOutput(out, generateClient(doc, { source: 'spec.yaml' }));
      const { model } = buildClientModel(doc);
      const own = new Set(model.operations.flatMap((op) => [op.name, op.resultType, op.statusCallType]));
      const missing = [...declaredNames(path.join(out, 'client.ts'))].filter((name) => !own.has(name) && !reserved.has(name));
      assert.deepEqual(missing, [], `${path.basename(file)}: add these to CLIENT_LOCALS`);
    }
  });

  it('a document whose operationIds are all of those names (one a status route) gives a client that compiles, methods renamed', async () => {
    const spec = path.join(dir, 'colliding.yaml');
    writeFileSync(spec, collidingSpec());
    const doc = await loadDocument(spec);
    const out = path.join(dir, 'compiled');
    await writeOutput(out, generateClient(doc, { source: 'colliding.yaml' }));
    const program = ts.createProgram(tsFiles(out), STRICT_COMPILER_OPTIONS);
    const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => `${d.file ? path.relative(out, d.file.fileName) : ''} TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
    assert.deepEqual(diagnostics, []);
    const methods = buildClientModel(doc).model.operations.map((op) => op.name);
    for (const name of ['contract2', 'sent2', 'statusInput2', 'intent2']) assert.ok(methods.includes(name), `${name} in ${methods.join(', ')}`);
  });
});
