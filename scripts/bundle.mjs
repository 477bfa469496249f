// Bundles the CLI after `tsc` (part of `npm run build`): `idemkit lint` on a small file is mostly Node loading
// modules — ~170 files of idemkit, yargs, ajv and YAML, each resolved, stat'ed, read and compiled on its own. One
// entry file plus a chunk per lazily imported command (esbuild's code splitting, so `lint` still never loads
// the generators) cuts that to a few files.
//
// The bundle goes to dist/src/bundle/, the same depth as dist/src/parser/ and the rest, so every path a module
// finds from its own location (`../../schemas/…`, the package root) is the same from there. dist/src/cli/bin.js,
// the package's `bin`, then imports the bundle's entry instead of ./run.js. Without esbuild (a git
// install that prepared without devDependencies: see prepare.mjs) this step says so and leaves tsc's
// unbundled bin.js, which works the same, only starts slower.
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = path.join(root, 'dist', 'src');
const outdir = path.join(dist, 'bundle');
const bin = path.join(dist, 'cli', 'bin.js');

let esbuild;
try {
  esbuild = await import('esbuild');
} catch {
  console.error('idemkit bundle: esbuild is not installed; the CLI runs unbundled from dist/src/cli (slower to start)');
  process.exit(0);
}

/**
 * string-width (yargs' help layout, through cliui and wrap-ansi; yargs brings two versions) does its costly
 * set-up when it is imported: an `Intl.Segmenter` (ICU's break-iterator data) and Unicode-property regular
 * expressions such as `\p{RGI_Emoji}` — ~30 ms of a ~200 ms `idemkit lint`, while only help text and usage
 * errors ever measure a string. So every `import … from 'string-width'` gets a stand-in that `require`s the
 * real module on the first call: esbuild then evaluates it (and its own imports) lazily. Its `v`-flag regular
 * expressions stay `new RegExp(…)` calls (target node20): as literals V8 would validate them when it parses the
 * bundle, evaluated or not.
 */
const lazyStringWidth = {
  name: 'lazy-string-width',
  setup(build) {
    build.onResolve({ filter: /^string-width$/ }, async (args) => {
      if (args.pluginData?.real) return undefined;
      const real = await build.resolve(args.path, { resolveDir: args.resolveDir, kind: args.kind, importer: args.importer, pluginData: { real: true } });
      if (real.errors.length > 0) return { errors: real.errors };
      // Named relative to the package: esbuild writes the name into the bundle, which must not depend on where it was built.
      return { path: path.relative(root, real.path).split(path.sep).join('/'), namespace: 'lazy-string-width' };
    });
    build.onLoad({ filter: /.*/, namespace: 'lazy-string-width' }, (args) => ({
      // `./` + the package-relative name, resolved from the package root (resolveDir).
      contents: [
        'let real;',
        'export default function stringWidth(text, options) {',
        `  real ??= require(${JSON.stringify(`./${args.path}`)}).default;`,
        '  return real(text, options);',
        '}',
      ].join('\n'),
      resolveDir: root,
      loader: 'js',
    }));
  },
};

rmSync(outdir, { recursive: true, force: true });
await esbuild.build({
  // The tsc output, not src/: it is what the type checker passed, and the bundle must not differ from it.
  entryPoints: { bin: path.join(dist, 'cli', 'run.js') },
  outdir,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  // Every package imported statically or with a literal `import()` is bundled (yargs, handlebars, ajv's parts). What
  // idemkit loads with `createRequire` (js-yaml and yaml, only for YAML documents; ajv's runtime helpers of the generated
  // validator) stays a `require()` at run time, resolved from node_modules as before.
  packages: 'bundle',
  chunkNames: '[name]-[hash]',
  // An ESM bundle has no `require`; CommonJS packages pulled in (yargs' helpers) call it for Node built-ins.
  banner: { js: "import { createRequire as __idemkitRequire } from 'node:module'; const require = __idemkitRequire(import.meta.url);" },
  legalComments: 'none',
  // `--verbose` stack traces name the built files (dist/src/generate/render.js:198), not the chunks: the bin turns
  // Node's source-map support on for `--verbose` only. The maps point at dist/, which the package ships, so they
  // carry no sources of their own.
  sourcemap: 'linked',
  sourcesContent: false,
  plugins: [lazyStringWidth],
  logLevel: 'warning',
});
if (!existsSync(path.join(outdir, 'bin.js'))) {
  console.error('idemkit bundle: esbuild wrote no dist/src/bundle/bin.js');
  process.exit(1);
}
// tsc's bin.js, with its import of ./run.js pointed at the bundle's entry (all else, the compile cache included, as written in src/cli/bin.ts).
const unbundledEntry = "import('./run.js')";
const bundledEntry = "import('../bundle/bin.js')";
const binText = readFileSync(bin, 'utf8');
if (!binText.includes(bundledEntry)) {
  if (!binText.includes(unbundledEntry)) {
    console.error(`idemkit bundle: dist/src/cli/bin.js has no ${unbundledEntry} to point at the bundle: update scripts/bundle.mjs with src/cli/bin.ts`);
    process.exit(1);
  }
  writeFileSync(bin, binText.replace(unbundledEntry, bundledEntry));
}
console.error(`idemkit bundle: dist/src/bundle (${readdirSync(outdir).length} files)`);
