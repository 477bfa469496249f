#!/usr/bin/env node
import { run } from './run.js';

await run();
