import type { Argv } from 'yargs';
import { UsageError } from '../../errors.js';
import type { Command } from '../main.js';

export const rulesCommand: Command = {
  command: 'rules',
  describe: 'rules (not built yet)',
  builder: (y: Argv) => y,
  async run() {
    throw new UsageError('idemkit rules is not built yet');
  },
};
