// The generated fetch guard under Deno: the app of fetch-routes.ts served by Deno.serve, run by the `deno` devDependency.
import { describeServerScenarios } from './scenarios.js';
import { requireBinary, startRedis, type RedisServer } from '../helpers/servers.js';

describeServerScenarios({ framework: 'fetch', store: 'memory', runtime: 'deno' });

describe('fetch under Deno on Redis', function () {
  let redis: RedisServer | undefined;
  before(async function () {
    this.timeout(60_000);
    requireBinary(this, 'redis-server');
    redis = await startRedis();
  });
  after(async () => {
    await redis?.stop();
  });
  const env = () => ({ REDIS_URL: `redis://127.0.0.1:${redis!.port}` });
  describeServerScenarios({ framework: 'fetch', store: 'redis', runtime: 'deno' }, { durable: { env, stop: () => redis!.kill() } });
});
