/** The parser's public API. */
export { loadDocument, HTTP_METHODS, type LoadOptions } from './load.js';
export { SourceCache, SourceFile, readSource, parseSource } from './source.js';
export { parseDuration } from './duration.js';
export { deepMerge } from './merge.js';
export { parseScopePart } from './contract.js';
export { validateContractValue, loadContractSchema, schemaPath, type SchemaViolation } from './schema.js';
export { parsePointer, formatPointer, appendPointer, escapeToken, unescapeToken, valueAt } from './pointer.js';
export * from './model.js';
export { compileContract, CONTRACT_DEFAULTS } from './compile.js';
