/** `idemkit rules`: the rule catalogue as a table (or JSON): id, default severity, criterion, description. */
import type { Argv } from 'yargs';
import type { Command } from '../main.js';

/** One row of `idemkit rules --format json`. */
export interface RuleRow {
  readonly id: string;
  readonly severity: string;
  readonly criterion: string;
  readonly description: string;
  readonly rationale: string;
  /** Whether `idemkit explain <id>` has a documentation page for it. */
  readonly documented: boolean;
}

/** The rows, in catalogue order. The catalogue and the rule pages load here, not when `lint` starts. */
export async function ruleRows(): Promise<RuleRow[]> {
  const [{ catalogue }, { readRuleDoc }] = await Promise.all([import('../../lint/catalogue.js'), import('../../lint/rule-docs.js')]);
  return catalogue().map(({ meta }) => ({
    id: meta.id,
    severity: meta.severity,
    criterion: meta.criterion,
    description: meta.description,
    rationale: meta.rationale,
    documented: readRuleDoc(meta.id) !== undefined,
  }));
}

/** Renders rows as an aligned text table (descriptions are not cut). */
export function formatRuleTable(rows: readonly RuleRow[]): string {
  const header = ['RULE', 'SEVERITY', 'CRITERION', 'DESCRIPTION'];
  const cells = rows.map((row) => [row.id, row.severity, row.criterion, row.description]);
  const widths = [0, 1, 2].map((column) => Math.max(header[column]!.length, ...cells.map((cell) => cell[column]!.length)));
  const line = (cell: readonly string[]) => `${cell.slice(0, 3).map((text, column) => text.padEnd(widths[column]!)).join('  ')}  ${cell[3]}`;
  return `${[line(header), ...cells.map(line)].join('\n')}\n\n${rows.length} rules. \`idemkit explain <rule>\` shows a rule's page; severities can be changed in .idemkitrc.yaml.\n`;
}

export const rulesCommand: Command = {
  command: 'rules',
  describe: 'List the readiness rules: id, default severity, criterion, description',
  builder: (y: Argv) =>
    y
      .option('format', { alias: 'f', choices: ['table', 'json'], requiresArg: true, default: 'table', describe: 'Output format' })
      .example('$0 rules', 'the catalogue as a table')
      .example('$0 rules --format json', 'for tooling'),
  async run(args, io) {
    const rows = await ruleRows();
    io.stdout(args.format === 'json' ? `${JSON.stringify(rows, null, 2)}\n` : formatRuleTable(rows));
    return 0;
  },
};
