// Builds what the package needs to run and to be typed: generated/, the jco
// bindings of the tool-jobs component (pinned jco, `--instantiation sync`), and
// types/, the declarations tsc writes from the JSDoc in src/. npm runs this as
// the `prepare` script, so on `npm ci` or `npm install` in this folder and before
// `npm pack` or `npm publish`: a packed copy carries both and runs as installed.
//
// The component is $TOOL_JOBS_WASM, else ../../target/tool-jobs.wasm (where the
// repository writes it: `cargo run -p jobs-host -- wasm --out target/tool-jobs.wasm`).
//
//   node tools/prepare.mjs                    # bindings, then declarations
//   node tools/prepare.mjs --transpile-only   # bindings only (`npm run transpile`)

import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const wasm = resolve(process.env.TOOL_JOBS_WASM || join(root, '..', '..', 'target', 'tool-jobs.wasm'));
/** @param {string} name */
const bin = (name) => join(root, 'node_modules', '.bin', name);

/**
 * @param {string} what
 * @param {string[]} args
 */
function run(what, args) {
  const r = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) {
    console.error(`harness-jobs: ${what} failed`);
    process.exit(r.status ?? 1);
  }
}

if (!existsSync(wasm)) {
  console.error(`harness-jobs: no component at ${wasm}.
Build it from the repository root with
  cargo run -p jobs-host -- wasm --out target/tool-jobs.wasm
or point TOOL_JOBS_WASM at a built tool-jobs.wasm, then run \`npm run prepare\`.`);
  process.exit(1);
}
run('jco transpile', [bin('jco'), 'transpile', wasm, '--instantiation', 'sync', '--name', 'tool-jobs', '-o', 'generated']);
if (!process.argv.includes('--transpile-only')) run('tsc (declarations)', [bin('tsc'), '-p', join(root, 'tsconfig.json')]);
