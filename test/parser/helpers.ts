import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Position } from '../../src/parser/model.js';

/** Absolute path of a parser fixture. */
export function fixture(name: string): string {
  return fileURLToPath(new URL(`../fixtures/parser/${name}`, import.meta.url));
}

/**
 * The position a person would point at: the (only) line containing `lineText`, at the first occurrence of
 * `token` on it (default: the line's first non-blank character). 1-based.
 */
export function spot(file: string, lineText: string | RegExp, token?: string): Position {
  const lines = readFileSync(file, 'utf8').split('\n');
  const matches = lines.flatMap((line, index) => ((typeof lineText === 'string' ? line.includes(lineText) : lineText.test(line)) ? [index] : []));
  assert.equal(matches.length, 1, `exactly one line of ${file} contains ${String(lineText)}`);
  const line = lines[matches[0]!]!;
  const column = token === undefined ? line.search(/\S/) : line.indexOf(token);
  assert.ok(column >= 0, `${JSON.stringify(token)} is on the line ${JSON.stringify(line)}`);
  return { line: matches[0]! + 1, column: column + 1 };
}
