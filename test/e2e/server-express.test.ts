import { describeMultiProcess, describeServerScenarios, describeWithRedis, sqliteControl } from './scenarios.js';
import { PG_DIRS, requireBinary, startPostgres, type PostgresServer } from '../helpers/servers.js';


describeServerScenarios({ framework: 'express', store: 'memory' });
describeServerScenarios({ framework: 'express', store: 'sqlite' }, { durable: sqliteControl(), transactional: true });

describe('express on PostgreSQL', function () {
  let pg: PostgresServer | undefined;
  before(async function () {
    this.timeout(120_000);
    requireBinary(this, 'initdb', PG_DIRS);
    requireBinary(this, 'pg_ctl', PG_DIRS);
    pg = await startPostgres();
  });
  after(async () => {
    await pg?.stop();
  });
  const env = () => ({ PG_URL: pg!.connectionString });
  describeMultiProcess({ framework: 'express', store: 'postgres' }, env);
  // Last: its outage scenario kills the server.
  describeServerScenarios({ framework: 'express', store: 'postgres' }, { durable: { env, stop: () => pg!.kill() }, transactional: true });
});

describeWithRedis('express on Redis', ({ env, durable }) => {
  describeMultiProcess({ framework: 'express', store: 'redis' }, env);
  describeServerScenarios({ framework: 'express', store: 'redis' }, { durable });
});
