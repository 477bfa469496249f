/**
 * Explains a syntax error the `yaml` package found: where a person would point (an unclosed quote where it
 * opens, not where the file ends) and what is wrong, with how to fix it. Runs on the error path only; the
 * document loader and the config file share it.
 */
import type * as YamlModule from 'yaml';

/** Where a YAML syntax error is and what it says (one line, with a hint). */
export function describeYamlSyntaxError(yaml: typeof YamlModule, text: string, error: YamlModule.YAMLError): { offset: number; message: string } {
  const offset = (error.code === 'MISSING_CHAR' && unclosedQuoteOffset(yaml, text)) || error.pos[0];
  return { offset: Math.min(offset, text.length), message: yamlMessage(error.message, error.code) };
}

/**
 * `yaml` notices an unclosed quote where the file ends; a person wants the line where the quote opens.
 * Only runs on the error path.
 */
function unclosedQuoteOffset(yaml: typeof YamlModule, text: string): number | undefined {
  let found: number | undefined;
  for (const token of new yaml.Parser().parse(text)) {
    if (token.type !== 'document') continue;
    yaml.CST.visit(token, (item) => {
      for (const part of [item.key, item.value]) {
        if (found !== undefined || !part || (part.type !== 'double-quoted-scalar' && part.type !== 'single-quoted-scalar')) continue;
        const quote = part.type === 'double-quoted-scalar' ? '"' : "'";
        const source = part.source;
        const closed = source.length > 1 && source.endsWith(quote) && (quote === "'" || !/(^|[^\\])(\\\\)*\\"$/.test(source));
        if (!closed) found = part.offset;
      }
      return found === undefined ? undefined : yaml.CST.visit.BREAK;
    });
    if (found !== undefined) break;
  }
  return found;
}

function yamlMessage(message: string, code: string): string {
  const first = message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '');
  const hints: Record<string, string> = {
    MISSING_CHAR: 'close the quote, bracket or brace (truncated file?)',
    BAD_INDENT: 'fix the indentation',
    MULTIPLE_DOCS: 'keep one document per file (remove the extra ---)',
    UNEXPECTED_TOKEN: 'fix the syntax here',
    BLOCK_AS_IMPLICIT_KEY: 'fix the indentation or quote the key',
    TAB_AS_INDENT: 'indent with spaces, not tabs',
  };
  return `${first} — ${hints[code] ?? 'fix the YAML syntax here'}`;
}
