// The Node reference host with real processes, through the real component.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Plugin, Registry } from '../src/index.js';

/** @param {number} pid */
const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/**
 * @param {() => boolean} check
 * @param {string} what
 */
async function until(check, what) {
  // Bounded only against hanging (a minute, for loaded machines); the condition decides.
  const deadline = Date.now() + 60000;
  while (Date.now() < deadline) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}

test('a kill ends the whole process group, even a child that ignores SIGTERM', async () => {
  const registry = new Registry({ graceMs: 200 });
  const plugin = await Plugin.load(registry);
  const id = registry.startShell("trap '' TERM; sleep 60 & echo $!; wait", { owner: 's' });
  // An excerpt leaves the output unread for the read below.
  const whole = { wholeUpTo: 1 << 20, headBytes: 1 << 20, tailBytes: 0 };
  await until(() => registry.output('s', id, whole).head.length > 0, 'the child pid');
  const childPid = Number(registry.read('s', id).text.trim());
  assert.ok(alive(childPid));
  assert.equal((await plugin.invoke('s', 'job_kill', { job_id: id })).text, `requested cancellation of job ${id}`);
  const out = await plugin.invoke('s', 'job_output', { job_id: id, wait: true, timeout_ms: 10000 });
  assert.match(out.text, /\[status: killed, signal: SIGKILL\]$/);
  await until(() => !alive(childPid), 'the child to die');
});

test('a spawn that fails is a job killed before exit whose next read says why, once', async () => {
  const registry = new Registry();
  const plugin = await Plugin.load(registry);
  const id = registry.startShell('true', { owner: 's', cwd: '/nonexistent-dir' });
  const out = await plugin.invoke('s', 'job_output', { job_id: id, wait: true, timeout_ms: 10000 });
  assert.match(out.text, /^\[stderr\]\nspawn failed: .*ENOENT.*\n\[status: killed, killed before exit\]$/);
  assert.equal((await plugin.invoke('s', 'job_output', { job_id: id })).text, '(no new output)\n[status: killed, killed before exit]');
});

test('a wait that times out leaves the job running; another owner cannot see it', async () => {
  const registry = new Registry();
  const plugin = await Plugin.load(registry, { config: { waitTimeoutMs: 10, maxWaitTimeoutMs: 20 } });
  const id = registry.startShell('sleep 60', { owner: 'alice' });
  const out = await plugin.invoke('alice', 'job_output', { job_id: id, wait: true, timeout_ms: 600000 });
  assert.equal(out.text, '(no new output)\n[status: running]');
  assert.equal((await plugin.invoke('bob', 'job_output', { job_id: id })).text, `Error: job ${id} belongs to another session`);
  assert.equal((await plugin.invoke('bob', 'job_list', {})).text, '(no background jobs)');
  assert.equal((await plugin.invoke('alice', 'job_output', { job_id: 'bash-99' })).text, 'Error: unknown job bash-99');
  await registry.close();
  assert.equal(registry.get('alice', id).status, 'killed');
});

test('an aborted wait says so and leaves the job alone', async () => {
  const registry = new Registry();
  const plugin = await Plugin.load(registry);
  const id = registry.startShell('sleep 60', { owner: 's' });
  const abort = new AbortController();
  // invoke runs up to its first await now, so the wait is pending once it returns.
  const pending = plugin.invoke('s', 'job_output', { job_id: id, wait: true }, abort.signal);
  await new Promise((r) => setImmediate(r));
  abort.abort();
  assert.equal((await pending).text, 'Error: wait aborted');
  assert.equal(registry.get('s', id).status, 'running');
  await registry.close();
});

test('output past the pending bound is dropped and said so; stderr is marked', async () => {
  const registry = new Registry({ maxPendingBytes: 1000 });
  const plugin = await Plugin.load(registry);
  const id = registry.startShell('head -c 5000 /dev/zero | tr "\\0" x; echo oops >&2', { owner: 's' });
  const out = await plugin.invoke('s', 'job_output', { job_id: id, wait: true, timeout_ms: 10000 });
  // The two pipes are read side by side, so all or part of "oops\n" may take its
  // share of the bound before stdout fills it; either way exactly 1000 bytes are kept.
  const xs = out.text.length - out.text.replace(/^x+/, '').length;
  const rest = out.text.slice(xs);
  let err = rest.includes('\n[stderr]\n')
    ? rest.split('\n[stderr]\n')[1].split('[some output was dropped')[0]
    : '';
  if (!'oops\n'.startsWith(err)) err = err.slice(0, -1); // the newline added before the drop line
  assert.equal(xs + err.length, 1000, out.text.slice(0, 50));
  assert.ok(out.text.includes('[some output was dropped from memory; full output: (unavailable)]'), out.text);
  assert.ok(out.text.endsWith('[status: completed, exit code: 0]'), out.text);
  const c = await Plugin.load(registry, { config: { profile: 'c', maxResultBytes: 200 } });
  const status = await c.invoke('s', 'job_status', { id });
  assert.ok(status.text.includes('bytes truncated]'), status.text);
  assert.ok(status.text.endsWith('[stderr]\noops\n[exit code: 0]'), status.text);
});

test('a finished job nobody read gets exactly one notice; a read one gets none', async () => {
  const registry = new Registry();
  /** @type {[string | null, string, string][]} */
  const notices = [];
  await Plugin.load(registry, { onNotice: (owner, lane, n) => notices.push([owner, lane, n.text]) });
  // Listeners run in order: once this one heard a job, the plugin has decided on it.
  /** @type {Set<string>} */
  const heard = new Set();
  registry.onJobDone((job) => heard.add(job.id));
  const quiet = registry.startShell('true', { owner: 's' });
  // This one ends only once a wait is pending on it, so the wait sees the end.
  const dir = mkdtempSync(join(tmpdir(), 'jobs-'));
  const flag = join(dir, 'go');
  const read = registry.startShell(`while [ ! -e ${flag} ]; do sleep 0.01; done`, { owner: 's' });
  const unowned = registry.startShell('true');
  // A wait is pending as soon as `wait` returns its promise.
  const waited = registry.wait('s', read, 10000);
  writeFileSync(flag, '');
  await waited;
  await until(() => heard.size === 3 && heard.has(quiet) && heard.has(read) && heard.has(unowned), 'every settlement');
  rmSync(dir, { recursive: true });
  assert.deepEqual(notices, [['s', 'inject', `background job ${quiet} (bash: true) finished [status: completed, exit code: 0]. Read its output with job_output.`]]);
});
