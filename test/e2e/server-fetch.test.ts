import { describeServerScenarios, sqliteControl } from './scenarios.js';

describeServerScenarios({ framework: 'fetch', store: 'memory' });
describeServerScenarios({ framework: 'fetch', store: 'sqlite' }, { durable: sqliteControl() });
