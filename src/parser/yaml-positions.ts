/** Positions in YAML text, read from the node ranges of a parsed `yaml` Document (aliases and `<<` merges followed). */
import type { Document, Node as YamlNode, Pair, YAMLMap, YAMLSeq } from 'yaml';
import type { Located, PositionIndex } from './positions.js';
import type * as YamlModule from 'yaml';

export class YamlPositionIndex implements PositionIndex {
  // Big maps (`paths`, `components/schemas`) are searched often: memoise a key → pair table for them.
  private readonly tables = new WeakMap<YAMLMap, Map<string, Pair>>();
  constructor(
    private readonly yaml: typeof YamlModule,
    private readonly document: Document,
  ) {}

  locate(tokens: readonly string[]): Located {
    const { yaml } = this;
    let node: unknown = this.document.contents;
    let keyOffset: number | undefined;
    let valueOffset = rangeStart(node) ?? 0;
    let depth = 0;
    for (const token of tokens) {
      node = this.resolve(node);
      let next: unknown;
      let nextKeyOffset: number | undefined;
      if (yaml.isMap(node)) {
        const pair = this.findPair(node, token, 0);
        if (!pair) break;
        next = pair.value;
        nextKeyOffset = rangeStart(pair.key);
      } else if (yaml.isSeq(node)) {
        if (!/^(0|[1-9]\d*)$/.test(token)) break;
        next = (node as YAMLSeq).items[Number(token)];
        if (next === undefined) break;
        nextKeyOffset = undefined;
      } else {
        break;
      }
      const start = rangeStart(next) ?? nextKeyOffset;
      if (start === undefined) break;
      node = next;
      keyOffset = nextKeyOffset;
      valueOffset = start;
      depth += 1;
    }
    return { keyOffset, valueOffset, depth };
  }

  private resolve(node: unknown): unknown {
    let current = node;
    for (let guard = 0; guard < 100 && this.yaml.isAlias(current); guard++) {
      current = current.resolve(this.document);
    }
    return current;
  }

  private findPair(map: YAMLMap, token: string, level: number): Pair | undefined {
    let table = this.tables.get(map);
    if (!table) {
      table = new Map();
      for (const item of map.items) {
        const key = keyString(this.yaml, item.key);
        // Later duplicates win, as in the JS value.
        if (key !== undefined) table.set(key, item as Pair);
      }
      this.tables.set(map, table);
    }
    const own = table.get(token);
    if (own || level > 10) return own;
    // `<<: *base` (YAML merge key): the field lives where the merged mapping defines it.
    for (const item of map.items) {
      if (!isMergeKey(item.key)) continue;
      const sources = this.resolve(item.value);
      const list = this.yaml.isSeq(sources) ? sources.items : [sources];
      for (const source of list) {
        const resolved = this.resolve(source);
        if (this.yaml.isMap(resolved)) {
          const found = this.findPair(resolved, token, level + 1);
          if (found) return found;
        }
      }
    }
    return undefined;
  }
}

function rangeStart(node: unknown): number | undefined {
  const range = (node as YamlNode | null | undefined)?.range;
  return range ? range[0] : undefined;
}

function isMergeKey(key: unknown): boolean {
  const value = (key as { value?: unknown } | null)?.value;
  return typeof value === 'symbol' ? value.description === '<<' : false;
}

function keyString(yaml: typeof YamlModule, key: unknown): string | undefined {
  if (yaml.isScalar(key)) {
    const value = key.value;
    if (typeof value === 'symbol') return undefined;
    return String(value);
  }
  if (key === null || key === undefined) return undefined;
  if (typeof key !== 'object') return String(key);
  return undefined;
}
