// Form-body fingerprint benchmark (not a test), on the built `dist/`: the time to turn a hostile-shaped body
// into what the guard fingerprints — N multipart parts named `a[]`, the same as urlencoded, and N distinct
// names — for growing N. Linear nesting keeps a 2 MB body to a fraction of a second of event loop; the old
// per-field member count took tens of seconds at that size.
// Usage: npm run build && npm run bench:forms [-- --parts 5000,20000,40000]
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = (file) => pathToFileURL(path.join(root, 'dist', file)).href;
const index = process.argv.indexOf('--parts');
const counts = (index === -1 ? '5000,20000,40000' : process.argv[index + 1]).split(',').map(Number);
const { bodyForFingerprint } = await import(dist('src/runtime/adapters/common.js'));
const { computeFingerprint } = await import(dist('src/runtime/fingerprint.js'));

const boundary = 'bench-boundary';
const shapes = {
  'multipart, every part `a[]`': (n) => [Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="a[]"\r\n\r\nv\r\n`.repeat(n) + `--${boundary}--\r\n`), `multipart/form-data; boundary=${boundary}`],
  'multipart, distinct names': (n) => [Buffer.from(Array.from({ length: n }, (_, i) => `--${boundary}\r\nContent-Disposition: form-data; name="f${i}"\r\n\r\nv\r\n`).join('') + `--${boundary}--\r\n`), `multipart/form-data; boundary=${boundary}`],
  'urlencoded, every field `a[]`': (n) => ['a[]=v&'.repeat(n), 'application/x-www-form-urlencoded'],
};

console.log('| body | parts | size | body → fingerprint |');
console.log('|---|---:|---:|---:|');
for (const [label, make] of Object.entries(shapes)) {
  for (const n of counts) {
    const [body, type] = make(n);
    const start = performance.now();
    computeFingerprint({ operationId: 'bench', pathParams: {}, query: {}, body: bodyForFingerprint(body, type), selection: { include: 'all', exclude: [] } });
    const ms = performance.now() - start;
    console.log(`| ${label} | ${n} | ${(body.length / 1024 / 1024).toFixed(2)} MB | ${ms.toFixed(0)} ms |`);
  }
}
