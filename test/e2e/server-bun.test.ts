// The generated fetch guard under Bun: the app of fetch-routes.ts served by Bun.serve, run by the `bun` devDependency.
import { describeServerScenarios } from './scenarios.js';
import { requireBinary, startRedis, type RedisServer } from '../helpers/servers.js';

describeServerScenarios({ framework: 'fetch', store: 'memory', runtime: 'bun' });

describe('fetch under Bun on Redis', function () {
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
  describeServerScenarios({ framework: 'fetch', store: 'redis', runtime: 'bun' }, { durable: { env, stop: () => redis!.kill() } });
});
