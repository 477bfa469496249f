// The generated fetch guard under Bun: the app of fetch-routes.ts served by Bun.serve, run by the `bun` devDependency.
import { describeServerScenarios, describeWithRedis } from './scenarios.js';

describeServerScenarios({ framework: 'fetch', store: 'memory', runtime: 'bun' });

describeWithRedis('fetch under Bun on Redis', ({ durable }) => {
  describeServerScenarios({ framework: 'fetch', store: 'redis', runtime: 'bun' }, { durable });
});
