// The generated fetch guard under Deno: the app of fetch-routes.ts served by Deno.serve, run by the `deno` devDependency.
import { describeServerScenarios, describeWithRedis } from './scenarios.js';

describeServerScenarios({ framework: 'fetch', store: 'memory', runtime: 'deno' });

describeWithRedis('fetch under Deno on Redis', ({ durable }) => {
  describeServerScenarios({ framework: 'fetch', store: 'redis', runtime: 'deno' }, { durable });
});
