/** `idemkit explain <rule>`: a rule's documentation page, rendered for the terminal. */
import type { Argv } from 'yargs';
import { UsageError } from '../../errors.js';
import type { Command } from '../main.js';

/**
 * Turns a rule page (Markdown) into plain terminal text: headings underlined, code blocks indented,
 * emphasis and link syntax removed; inline code keeps its backticks so names stay recognisable.
 */
export function renderMarkdownForTerminal(markdown: string): string {
  const out: string[] = [];
  let inFence = false;
  for (const raw of markdown.replace(/\r\n/g, '\n').split('\n')) {
    if (/^\s*(```|~~~)/.test(raw)) {
      inFence = !inFence;
      continue;
    }
    if (inFence) {
      out.push(`    ${raw}`);
      continue;
    }
    const heading = /^(#{1,6})\s+(.*?)\s*#*\s*$/.exec(raw);
    if (heading) {
      const text = inline(heading[2]!);
      if (out.length > 0 && out[out.length - 1] !== '') out.push('');
      out.push(text, (heading[1]!.length === 1 ? '=' : '-').repeat(Math.max(3, text.length)));
      continue;
    }
    out.push(inline(raw));
  }
  return `${out.join('\n').replace(/\n{3,}/g, '\n\n').trim()}\n`;
}

function inline(text: string): string {
  return text
    .replace(/!?\[([^\]]*)\]\(([^)]*)\)/g, (_, label: string, url: string) => (url && url !== label ? `${label} (${url})` : label))
    .replace(/\*\*([^*]+)\*\*/g, '$1')
    .replace(/__([^_]+)__/g, '$1')
    .replace(/(^|[^*\w])\*([^*\s][^*]*)\*/g, '$1$2');
}

export const explainCommand: Command = {
  command: 'explain <rule>',
  describe: "Show a rule's documentation: what it flags, why, and how to fix it",
  missingArguments: 'name a rule id (idemkit rules lists them)',
  builder: (y: Argv) =>
    y
      .positional('rule', { type: 'string', describe: 'Rule id (see `idemkit rules`)', demandOption: true })
      .example('$0 explain scope-too-wide', ''),
  async run(args, io) {
    const id = typeof args.rule === 'string' ? args.rule.trim() : '';
    if (id === '') throw new UsageError(explainCommand.missingArguments!);
    // Loaded here, not when `lint` starts: main imports every command module.
    const [{ catalogue, findRule }, { suggestionSuffix }, { ruleDocOrSummary }] = await Promise.all([
      import('../../lint/catalogue.js'),
      import('../../lint/did-you-mean.js'),
      import('../../lint/rule-docs.js'),
    ]);
    const rule = findRule(id);
    if (!rule) {
      const ids = catalogue().map((candidate) => candidate.meta.id);
      throw new UsageError(`unknown rule "${id}"${suggestionSuffix(id, ids)}; run \`idemkit rules\` for the list`);
    }
    io.stdout(renderMarkdownForTerminal(ruleDocOrSummary(rule)));
    return 0;
  },
};
