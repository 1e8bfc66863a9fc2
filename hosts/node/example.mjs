// Starts real jobs, reads one with a wait, kills one, and prints a notice.
//
//   npm run transpile && node example.mjs   (in this folder, or where the package is installed)

import { Plugin, Registry } from 'harness-jobs';

const registry = new Registry();
/** @type {(value?: unknown) => void} */
let noticed;
const notice = new Promise((resolve) => { noticed = resolve; });
const plugin = await Plugin.load(registry, {
  config: { profile: 'a' },
  onNotice: (owner, lane, n) => {
    console.log(`notice for ${owner} (${lane}): ${n.text}`);
    noticed();
  },
});
const owner = 'session-1';
console.log('tools:', plugin.toolDefinitions().map((t) => t.name).join(', '));

// The model starts its jobs with the guest's own start tool.
/** @param {string} command */
const start = async (command) => {
  const started = await plugin.invoke(owner, 'bash', { command });
  console.log(started.text);
  return /** @type {{ jobId: string }} */ (started.value).jobId;
};
const build = await start('echo compiling; sleep 0.2; echo built');
const server = await start('echo serving; sleep 60');
await start('sleep 0.3; echo 12 passed');

console.log((await plugin.invoke(owner, 'job_list', {})).text);
console.log((await plugin.invoke(owner, 'job_output', { job_id: build, wait: true, timeout_ms: 10000 })).text);
console.log((await plugin.invoke(owner, 'job_kill', { job_id: server, reason: 'not needed' })).text);
// Nobody reads the test job: when it finishes, its owner gets a notice.
const timeout = setTimeout(() => { console.error('no notice arrived'); process.exit(1); }, 10000);
await notice;
clearTimeout(timeout);
console.log((await plugin.invoke(owner, 'job_output', { job_id: server, wait: true, timeout_ms: 10000 })).text);
await registry.close();
