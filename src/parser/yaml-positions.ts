/**
 * Positions in YAML text from js-yaml's flat parser events (each carries source offsets). The events are
 * kept from the one parse that built the document's value; the tree structure over them (where each
 * collection ends, each mapping's key table) is built only when a finding first needs a position.
 * Aliases and `<<` merge keys are followed to where a field is written.
 */
import type { Event, ScalarEvent } from 'js-yaml';
import type { Located, PositionIndex } from './positions.js';

/** js-yaml's parse event ids (EVENT_ID), shared with init's node finder. */
export const DOCUMENT = 1;
export const SEQUENCE = 2;
export const MAPPING = 3;
export const SCALAR = 4;
export const ALIAS = 5;
export const POP = 6;
const PLAIN = 1;
const SINGLE_QUOTED = 2;
const DOUBLE_QUOTED = 3;
const LITERAL_BLOCK = 4;
const FOLDED_BLOCK = 5;
/** The end of a block scalar's header line: its `|` or `>` indicator, then chomping/indent digits and a comment. */
const BLOCK_HEADER_END = /[|>][0-9+-]*(?:[ \t]+#.*)?$/;

type ScalarReader = (input: string, scalar: ScalarEvent) => string;
/** The member name the loader makes of an untagged plain scalar key (`0x1F7` → `503`, `+409` → `409`, `~` → `null`). */
type KeyResolver = (plain: string) => string;
/** A plain scalar the core schema may read as something other than its text: a number, a boolean, a null. */
const MAY_NOT_BE_TEXT = /^(?:[-+.0-9~]|(?:true|false|null)$)/i;
/** A plain key that is a number written as the loader writes it back (`201`): its own name. */
const CANONICAL_INT = /^(?:0|[1-9][0-9]{0,14})$/;

/** A key written twice in one YAML mapping (see {@link YamlEventIndex.duplicates}). */
export interface YamlDuplicate {
  readonly key: string;
  readonly firstOffset: number;
  readonly secondOffset: number;
  /** Pointer tokens of the second key's member. */
  readonly path: readonly string[];
  /** Whether keeping either value silently could change a contract. */
  readonly contract: boolean;
}

export class YamlEventIndex implements PositionIndex {
  private ends: Int32Array | undefined;
  private anchors: Map<string, number[]> | undefined;
  private readonly tables = new Map<number, Map<string, { key: number; value: number }>>();
  private readonly childLists = new Map<number, number[]>();

  constructor(
    private readonly text: string,
    private readonly events: readonly Event[],
    private readonly readScalar: ScalarReader,
    private readonly resolveKey?: KeyResolver,
  ) {}

  locate(tokens: readonly string[]): Located {
    this.prepare();
    // The root node is the first event after DOCUMENT.
    let node = this.events[0]?.type === DOCUMENT ? 1 : 0;
    if (node >= this.events.length || this.events[node]!.type === POP) return { keyOffset: undefined, valueOffset: 0, depth: 0 };
    let keyOffset: number | undefined;
    let valueOffset = this.start(node) ?? 0;
    let depth = 0;
    for (const token of tokens) {
      const target = this.resolve(node);
      const event = this.events[target]!;
      let next: number | undefined;
      let nextKey: number | undefined;
      if (event.type === MAPPING) {
        const pair = this.findPair(target, token, 0);
        if (!pair) break;
        next = pair.value;
        nextKey = this.start(pair.key);
      } else if (event.type === SEQUENCE) {
        if (!/^(0|[1-9]\d*)$/.test(token)) break;
        next = this.child(target, Number(token));
        if (next === undefined) break;
      } else {
        break;
      }
      const start = this.start(next) ?? nextKey;
      if (start === undefined) break;
      node = next;
      keyOffset = nextKey;
      valueOffset = start;
      depth += 1;
    }
    return { keyOffset, valueOffset, depth };
  }

  /**
   * For a key that js-yaml rejected as a duplicate (it starts at `offset`): its name and where the same
   * key is first written in that mapping. Runs on the error path only.
   */
  duplicateAt(offset: number): { readonly key: string; readonly firstOffset: number } | undefined {
    this.prepare();
    for (let mapping = 0; mapping < this.events.length; mapping++) {
      if (this.events[mapping]!.type !== MAPPING) continue;
      const seen = new Map<string, number>();
      let cursor = mapping + 1;
      while (this.events[cursor] && this.events[cursor]!.type !== POP) {
        const name = this.keyName(cursor);
        const start = this.start(cursor);
        if (name !== undefined && start !== undefined) {
          const first = seen.get(name);
          if (start === offset && first !== undefined) return { key: name, firstOffset: first };
          if (first === undefined) seen.set(name, start);
        }
        const value = this.after(cursor);
        if (!this.events[value] || this.events[value]!.type === POP) break;
        cursor = this.after(value);
      }
    }
    return undefined;
  }

  /**
   * Every key written twice in one mapping, in document order, with the path of the second one and whether
   * it touches a contract: the key is `x-idempotency`, it sits inside an `x-idempotency` value (or in an
   * anchored node an `x-idempotency` value aliases), or one of the two values holds an `x-idempotency`
   * (an operation or path item written twice). Runs on the error path only.
   */
  duplicates(): YamlDuplicate[] {
    this.prepare();
    const events = this.events;
    const contractAnchors = this.anchorsUsedInContracts();
    const found: YamlDuplicate[] = [];
    const visit = (node: number, path: string[], inContract: boolean): void => {
      const event = events[node]!;
      if ((event.type === MAPPING || event.type === SEQUENCE) && event.anchorStart >= 0) {
        inContract ||= contractAnchors.has(this.text.slice(event.anchorStart, event.anchorEnd));
      }
      if (event.type === SEQUENCE) {
        for (let index = 0, item = this.child(node, 0); item !== undefined; index++, item = this.child(node, index)) {
          visit(item, [...path, String(index)], inContract);
        }
        return;
      }
      if (event.type !== MAPPING) return;
      const seen = new Map<string, { start: number; value: number }>();
      let cursor = node + 1;
      while (events[cursor] && events[cursor]!.type !== POP) {
        const key = cursor;
        const value = this.after(key);
        if (!events[value] || events[value]!.type === POP) break;
        const name = this.keyName(key);
        const start = this.start(key);
        if (name !== undefined && start !== undefined && name !== '<<') {
          const first = seen.get(name);
          if (first) {
            const contract = inContract || name === 'x-idempotency' || this.holdsKey(first.value, 'x-idempotency') || this.holdsKey(value, 'x-idempotency');
            found.push({ key: name, firstOffset: first.start, secondOffset: start, path: [...path, name], contract });
          } else {
            seen.set(name, { start, value });
          }
          visit(value, [...path, name], inContract || name === 'x-idempotency');
        }
        cursor = this.after(value);
      }
    };
    const root = events[0]?.type === DOCUMENT ? 1 : 0;
    if (events[root] && events[root]!.type !== POP) visit(root, [], false);
    return found;
  }

  /** Whether a key named `name` is written anywhere in the node at `index` (aliases not followed). */
  private holdsKey(index: number, name: string): boolean {
    let holds = false;
    this.walkPairs(index, (key) => {
      if (this.keyName(key) === name) holds = true;
      return holds;
    });
    return holds;
  }

  /** Anchors aliased (directly or through `<<`) inside an `x-idempotency` value, or as that value itself. */
  private anchorsUsedInContracts(): Set<string> {
    const names = new Set<string>();
    const root = this.events[0]?.type === DOCUMENT ? 1 : 0;
    if (!this.events[root] || this.events[root]!.type === POP) return names;
    this.walkPairs(root, (key, value) => {
      if (this.keyName(key) !== 'x-idempotency') return false;
      for (let j = value; j <= this.ends![value]!; j++) {
        const inner = this.events[j]!;
        if (inner.type === ALIAS) names.add(this.text.slice(inner.anchorStart, inner.anchorEnd));
      }
      return false;
    });
    return names;
  }

  /** Calls `visit` for every key/value pair in the node at `index` and below, in order, until it returns true. */
  private walkPairs(index: number, visit: (key: number, value: number) => boolean): boolean {
    const type = this.events[index]!.type;
    if (type !== MAPPING && type !== SEQUENCE) return false;
    let cursor = index + 1;
    while (this.events[cursor] && this.events[cursor]!.type !== POP) {
      if (type === SEQUENCE) {
        if (this.walkPairs(cursor, visit)) return true;
        cursor = this.after(cursor);
        continue;
      }
      const value = this.after(cursor);
      if (!this.events[value] || this.events[value]!.type === POP) break;
      if (visit(cursor, value) || this.walkPairs(value, visit)) return true;
      cursor = this.after(value);
    }
    return false;
  }

  /** One pass over the events: where each collection ends, and where each anchor is defined. */
  private prepare(): void {
    if (this.ends) return;
    const events = this.events;
    const ends = new Int32Array(events.length);
    const anchors = new Map<string, number[]>();
    const stack: number[] = [];
    for (let i = 0; i < events.length; i++) {
      const event = events[i]!;
      if (event.type === POP) {
        const open = stack.pop();
        if (open !== undefined) ends[open] = i;
        ends[i] = i;
        continue;
      }
      if ((event.type === MAPPING || event.type === SEQUENCE || event.type === SCALAR) && event.anchorStart >= 0) {
        const name = this.text.slice(event.anchorStart, event.anchorEnd);
        const list = anchors.get(name) ?? [];
        list.push(i);
        anchors.set(name, list);
      }
      if (event.type === MAPPING || event.type === SEQUENCE || event.type === DOCUMENT) stack.push(i);
      else ends[i] = i;
    }
    this.ends = ends;
    this.anchors = anchors;
  }

  /** Index of the event after the node starting at `index` (its POP + 1 for a collection). */
  private after(index: number): number {
    return this.ends![index]! + 1;
  }

  /** The `position`-th child of the collection at `index`. */
  private child(index: number, position: number): number | undefined {
    return this.children(index)[position];
  }

  /**
   * The start events of the collection at `index`'s children, found once: walking the siblings anew for each
   * child made a pass over a long sequence quadratic (a 10,000-item `scope` list linted in 4.8 s).
   */
  private children(index: number): number[] {
    let list = this.childLists.get(index);
    if (list === undefined) {
      list = [];
      for (let cursor = index + 1; this.events[cursor] !== undefined && this.events[cursor]!.type !== POP; cursor = this.after(cursor)) list.push(cursor);
      this.childLists.set(index, list);
    }
    return list;
  }

  /** An alias resolves to the nearest definition of its anchor before it. */
  private resolve(index: number): number {
    let current = index;
    for (let guard = 0; guard < 100; guard++) {
      const event = this.events[current]!;
      if (event.type !== ALIAS) return current;
      const name = this.text.slice(event.anchorStart, event.anchorEnd);
      const definitions = this.anchors!.get(name) ?? [];
      let found: number | undefined;
      for (const definition of definitions) if (definition < current) found = definition;
      if (found === undefined) return current;
      current = found;
    }
    return current;
  }

  private findPair(mapping: number, token: string, level: number): { key: number; value: number } | undefined {
    let table = this.tables.get(mapping);
    if (!table) {
      table = new Map();
      let cursor = mapping + 1;
      while (this.events[cursor] && this.events[cursor]!.type !== POP) {
        const key = cursor;
        const value = this.after(key);
        if (!this.events[value] || this.events[value]!.type === POP) break;
        const name = this.keyName(key);
        // Later duplicates win, as in the loaded value.
        if (name !== undefined) table.set(name, { key, value });
        cursor = this.after(value);
      }
      this.tables.set(mapping, table);
    }
    const own = table.get(token);
    if (own || level > 10) return own;
    const merge = table.get('<<');
    if (!merge) return undefined;
    const source = this.resolve(merge.value);
    const sources: number[] = [];
    if (this.events[source]!.type === SEQUENCE) {
      for (let i = 0, item = this.child(source, 0); item !== undefined; i++, item = this.child(source, i)) sources.push(this.resolve(item));
    } else {
      sources.push(source);
    }
    for (const candidate of sources) {
      if (this.events[candidate]!.type !== MAPPING) continue;
      const found = this.findPair(candidate, token, level + 1);
      if (found) return found;
    }
    return undefined;
  }

  private keyName(index: number): string | undefined {
    const event = this.events[this.resolve(index)]!;
    if (event.type !== SCALAR) return undefined;
    if (event.valueStart < 0) return '';
    const text = event.fast ? this.text.slice(event.valueStart, event.valueEnd) : this.readScalar(this.text, event);
    // `0x1F7:` is the member `503` of the loaded value, `+409:` the member `409`: named as the loader names it.
    if (this.resolveKey !== undefined && event.style === PLAIN && event.tagStart < 0 && MAY_NOT_BE_TEXT.test(text) && !CANONICAL_INT.test(text)) return this.resolveKey(text);
    return text;
  }

  /** Where a person would point at the node: its anchor or tag if it has one, else its first character. */
  private start(index: number): number | undefined {
    const event = this.events[index];
    if (!event) return undefined;
    switch (event.type) {
      case MAPPING:
      case SEQUENCE: {
        const property = firstNonNegative(event.anchorStart - 1, event.tagStart);
        return property ?? event.start;
      }
      case SCALAR: {
        const property = firstNonNegative(event.anchorStart - 1, event.tagStart);
        if (property !== undefined) return property;
        if (event.valueStart < 0) return undefined;
        if (event.style === LITERAL_BLOCK || event.style === FOLDED_BLOCK) return blockIndicator(this.text, event.valueStart) ?? event.valueStart;
        return event.style === SINGLE_QUOTED || event.style === DOUBLE_QUOTED ? event.valueStart - 1 : event.valueStart;
      }
      case ALIAS:
        return event.anchorStart - 1;
      default:
        return undefined;
    }
  }
}

/**
 * Where the `|` or `>` of a block scalar is written: js-yaml's offset for one is where its content starts, at
 * the start of the line after the header (`- >` then `  text`), which is not where a person points.
 */
function blockIndicator(text: string, contentStart: number): number | undefined {
  let end = contentStart;
  if (text.charCodeAt(end - 1) === 10) end -= 1;
  if (text.charCodeAt(end - 1) === 13) end -= 1;
  let start = end;
  while (start > 0 && text.charCodeAt(start - 1) !== 10 && text.charCodeAt(start - 1) !== 13) start -= 1;
  const header = BLOCK_HEADER_END.exec(text.slice(start, end));
  return header ? start + header.index : undefined;
}

function firstNonNegative(a: number, b: number): number | undefined {
  const candidates = [a, b].filter((value) => value >= 0);
  return candidates.length === 0 ? undefined : Math.min(...candidates);
}
