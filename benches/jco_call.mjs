// One `job_output` call through the component in Node (jco, --instantiation
// sync), as `benches/tool_call.rs` measures it in Rust: a running stream job
// with a few bytes pending, over the scripted backend of the Node runner.
//
//   scripts/setup-hosts && node benches/jco_call.mjs
//
// Prints the mean time per call with a fresh instance per call (what the Rust
// host does: the guest keeps nothing between calls) and with one instance kept
// (what the Node host does).

import { Guest } from '../hosts/node/src/guest.js';

const job = { id: 'bash-1', kind: 'bash', label: 'make', status: 'running', startedAt: 1767225600000, reported: false };
const backend = {
  listJobs: () => [job],
  get: () => job,
  read: () => ({ text: 'line of output\n', job }),
  kill: () => 'requested',
  output: () => ({ head: '', tail: '', omittedBytes: 0, job }),
  nowMs: () => 1767225605000,
};
const guest = await Guest.load(backend);
const config = guest.configure('{}');
const args = JSON.stringify({ job_id: 'bash-1' });

function time(label, call, n) {
  for (let i = 0; i < Math.min(n, 200); i += 1) call();
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i += 1) call();
  const ns = Number(process.hrtime.bigint() - start) / n;
  console.log(`${label}: ${(ns / 1000).toFixed(1)} µs per call (n=${n})`);
}

const check = guest.invokeStep(null, config, 'job_output', args);
if (check.done?.text !== 'line of output\n[status: running]') throw new Error(JSON.stringify(check));
const scope = new guest.OwnerScope(null);
time('jco, fresh instance per call', () => guest.instance().tools.invoke(scope, config, 'job_output', args), 500);
time('jco, one instance kept', () => guest.invokeStep(null, config, 'job_output', args), 20000);
