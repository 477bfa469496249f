import type { Argv } from 'yargs';
import { UsageError } from '../../errors.js';
import type { Command } from '../main.js';

export const explainCommand: Command = {
  command: 'explain',
  describe: 'explain (not built yet)',
  builder: (y: Argv) => y,
  async run() {
    throw new UsageError('idemkit explain is not built yet');
  },
};
