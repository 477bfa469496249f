import { describeServerScenarios, sqliteControl } from './scenarios.js';

describeServerScenarios({ framework: 'fastify', store: 'memory' });
describeServerScenarios({ framework: 'fastify', store: 'sqlite' }, { durable: sqliteControl() });
