/** JSON Pointer (RFC 6901) helpers. */
import type { Location } from './model.js';

/** Escapes one reference token (`~` → `~0`, `/` → `~1`). */
export function escapeToken(token: string | number): string {
  const text = typeof token === 'string' ? token : String(token);
  // Most tokens need no escaping; the others (every path under `paths`) a plain substring replace, no regex.
  const tilde = text.includes('~');
  if (!tilde && !text.includes('/')) return text;
  return (tilde ? text.replaceAll('~', '~0') : text).replaceAll('/', '~1');
}

/** Unescapes one reference token. */
export function unescapeToken(token: string): string {
  if (!token.includes('~')) return token;
  return token.replace(/~1/g, '/').replace(/~0/g, '~');
}

/** Splits a pointer into its unescaped tokens (`''` → `[]`). Throws on a pointer without a leading `/`. */
export function parsePointer(pointer: string): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw new SyntaxError(`JSON Pointer must start with '/': ${pointer}`);
  return pointer.slice(1).split('/').map(unescapeToken);
}

/** Joins tokens into a pointer. */
export function formatPointer(tokens: readonly (string | number)[]): string {
  let pointer = '';
  for (let i = 0; i < tokens.length; i++) pointer += `/${escapeToken(tokens[i]!)}`;
  return pointer;
}

/** Appends tokens to a pointer. */
export function appendPointer(pointer: string, ...tokens: readonly (string | number)[]): string {
  return pointer + formatPointer(tokens);
}

/** An array index token; made once (a literal in valueAt would make a RegExp object per token). */
const ITEM_INDEX = /^(0|[1-9]\d*)$/;

/** Value at `tokens` inside `root`, or `undefined` (no `$ref` following). */
export function valueAt(root: unknown, tokens: readonly string[]): unknown {
  let node = root;
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    if (Array.isArray(node)) {
      if (!ITEM_INDEX.test(token)) return undefined;
      node = node[Number(token)];
    } else if (node !== null && typeof node === 'object') {
      if (!Object.prototype.hasOwnProperty.call(node, token)) return undefined;
      node = (node as Record<string, unknown>)[token];
    } else {
      return undefined;
    }
  }
  return node;
}

/**
 * A child location whose pointer is built only when read: the loader checks thousands of nodes for `$ref`s
 * and the lint views locate every parameter, response and header, yet only the few a finding points at need
 * their pointer. A class (the getter on its prototype), not an object literal with a getter: one shape for
 * all, no closure each. `pointer` is not an own property, so it must not be spread; JSON.stringify works.
 */
class LazyChild implements Location {
  readonly file: string;
  private built: string | undefined;
  constructor(
    private readonly parent: Location,
    // One or two tokens, held as fields: no list of them per location.
    private readonly first: string | number,
    private readonly second: string | number | undefined,
  ) {
    this.file = parent.file;
  }

  get pointer(): string {
    if (this.built === undefined) {
      const pointer = `${this.parent.pointer}/${escapeToken(this.first)}`;
      this.built = this.second === undefined ? pointer : `${pointer}/${escapeToken(this.second)}`;
    }
    return this.built;
  }

  toJSON(): Location {
    return { file: this.file, pointer: this.pointer };
  }
}

/**
 * The location of a child (`first`) or grandchild (`first`, `second`) of `parent`, its pointer joined on first
 * read (see {@link LazyChild}).
 */
export function lazyChild(parent: Location, first: string | number, second?: string | number): Location {
  return new LazyChild(parent, first, second);
}
