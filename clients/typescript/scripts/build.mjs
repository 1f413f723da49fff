// Builds both module formats with tsc: dist/esm (ES modules) and dist/cjs
// (CommonJS, marked by its own package.json), each with its .d.ts files.
// With --tests, also the tests, into build/, against what dist holds.
import { execFileSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';

const tsc = (project) => execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', project], { stdio: 'inherit' });
rmSync('dist', { recursive: true, force: true });
tsc('tsconfig.json');
tsc('tsconfig.cjs.json');
writeFileSync('dist/cjs/package.json', '{\n  "type": "commonjs"\n}\n');
if (process.argv.includes('--tests')) {
  rmSync('build', { recursive: true, force: true });
  tsc('tsconfig.test.json');
}
