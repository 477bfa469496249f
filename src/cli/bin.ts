#!/usr/bin/env node
import module from 'node:module';

// Node 22.1+: keep V8's compiled code of the CLI on disk (Node's own cache in the temp directory; set
// NODE_DISABLE_COMPILE_CACHE=1 to turn it off), so later runs skip most of the compiling. Before the CLI's modules
// load, hence the dynamic import. Node 20 has no such API.
(module as { enableCompileCache?: () => unknown }).enableCompileCache?.();
// `--verbose` shows the stack of an internal error: with source maps (the bundle's) it names the built files, not
// the bundle's chunks. Only then: reading the maps is work a normal run does not need.
if (process.argv.includes('--verbose')) process.setSourceMapsEnabled(true);
const { run } = await import('./run.js');
await run();
