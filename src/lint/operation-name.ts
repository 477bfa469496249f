/** How findings name operations, and matching those names back to operations. */
import type { ApiDocument, OperationView } from '../parser/model.js';

/** The name the engine puts in `Finding.operations`: the operationId, else `METHOD /path`. */
export function operationName(operation: OperationView): string {
  return operation.operationId ?? `${operation.method.toUpperCase()} ${operation.path}`;
}

/** Whether a name from `Finding.operations` denotes `operation` (its engine name or its display label). */
export function namesOperation(name: string, operation: OperationView): boolean {
  return name === operationName(operation) || name === operation.label;
}

/** The operation of `documents` that `name` denotes, preferring `preferFile`'s document; else `undefined`. */
export function findOperationByName(name: string, documents: readonly ApiDocument[], preferFile?: string): OperationView | undefined {
  const ordered = preferFile === undefined ? documents : [...documents].sort((a, b) => Number(b.file === preferFile) - Number(a.file === preferFile));
  for (const document of ordered) {
    const operation = document.operations.find((candidate) => namesOperation(name, candidate));
    if (operation) return operation;
  }
  return undefined;
}
