import { describeServerScenarios, sqliteControl } from './scenarios.js';

describeServerScenarios({ framework: 'express', store: 'memory' });
describeServerScenarios({ framework: 'express', store: 'sqlite' }, { durable: sqliteControl() });
