import type { Argv } from 'yargs';
import { UsageError } from '../../errors.js';
import type { Command } from '../main.js';

export const generateCommand: Command = {
  command: 'generate',
  describe: 'generate (not built yet)',
  builder: (y: Argv) => y,
  async run() {
    throw new UsageError('idemkit generate is not built yet');
  },
};
