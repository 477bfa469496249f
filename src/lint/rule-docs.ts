/**
 * Rule documentation pages (`rules/<id>.md`), found relative to the installed package so they are read the
 * same way from `src/` (tests), from `dist/` and from an `npx` install.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BUILTIN_RULE_DOCS } from './builtin-docs.js';
import type { Rule } from './rule.js';

let root: string | undefined;

/** The directory that holds idemkit's own `package.json`. */
export function packageRoot(): string {
  if (root) return root;
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = path.join(dir, 'package.json');
    if (existsSync(manifest)) {
      try {
        if ((JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'idemkit') return (root = dir);
      } catch {
        // Not ours (or unreadable): keep walking up.
      }
    }
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('cannot find the idemkit package root');
    dir = parent;
  }
}

/** idemkit's version from its `package.json`. */
export function packageVersion(): string {
  return (JSON.parse(readFileSync(path.join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
}

/** The Markdown page of a rule, or `undefined` when the package has none for it. */
export function readRuleDoc(id: string): string | undefined {
  if (!/^[a-z0-9-]+$/.test(id)) return undefined;
  const file = path.join(packageRoot(), 'rules', `${id}.md`);
  return existsSync(file) ? readFileSync(file, 'utf8') : undefined;
}

/** The rule's page (`rules/<id>.md`, else a built-in rule's page), or one built from its `meta`. */
export function ruleDocOrSummary(rule: Rule): string {
  const page = readRuleDoc(rule.meta.id) ?? BUILTIN_RULE_DOCS[rule.meta.id];
  if (page !== undefined) return page;
  const { meta } = rule;
  const messages = Object.values<string>(meta.messages).map((text) => `- ${text}`);
  return [`# ${meta.id}`, '', meta.description, '', `**Criterion:** ${meta.criterion}. ${meta.rationale}`, '', `**Default severity:** ${meta.severity}`, '', '## Messages', '', ...messages, ''].join('\n');
}
