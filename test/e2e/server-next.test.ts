// The generated fetch guard as Next.js route handlers in TypeScript: `export { createDemoRequest as POST }` in an app
// router, the guards generated with --import-extension none and compiled and type-checked by `next build` itself,
// served by Next's own server (the `next` devDependency), on memory and on SQLite.
import { describeServerScenarios, sqliteControl } from './scenarios.js';

describeServerScenarios({ framework: 'fetch', store: 'memory', runtime: 'next' });
describeServerScenarios({ framework: 'fetch', store: 'sqlite', runtime: 'next' }, { durable: sqliteControl() });
