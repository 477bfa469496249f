import type { Argv } from 'yargs';
import { UsageError } from '../../errors.js';
import type { Command } from '../main.js';

export const initCommand: Command = {
  command: 'init',
  describe: 'init (not built yet)',
  builder: (y: Argv) => y,
  async run() {
    throw new UsageError('idemkit init is not built yet');
  },
};
