import type { Argv } from 'yargs';
import { UsageError } from '../../errors.js';
import type { Command } from '../main.js';

export const lintCommand: Command = {
  command: 'lint',
  describe: 'lint (not built yet)',
  builder: (y: Argv) => y,
  async run() {
    throw new UsageError('idemkit lint is not built yet');
  },
};
