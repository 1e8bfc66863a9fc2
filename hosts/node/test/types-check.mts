// Compiled (never run) by `npm run typecheck`, against the published types
// (`harness-jobs` resolves to this package's types/index.d.ts): they fit real use.
import {
  Plugin, Registry, Guest, GuestError, RegistryError, VERSION,
  type Backend, type GuestConfig, type Job, type Notice, type RegistryErrorTag, type Step, type ToolResult, type WaitRequest,
} from 'harness-jobs';

const registry = new Registry({ graceMs: 100, maxPendingBytes: 1 << 16, keepBytes: 1 << 16 });
const plugin = await Plugin.load(registry, {
  config: { profile: 'a' },
  onNotice: (owner: string | null, lane: 'inject' | 'followup', n: Notice) => console.log(owner, lane, n.text, n.summary, n.form),
  ownerStatus: () => 'idle',
});
const id: string = registry.startShell('true', { owner: 's', cwd: '/tmp', outputLimitBytes: 1024, kind: 'bash' });
const r: ToolResult = await plugin.invoke('s', 'job_output', { job_id: id, wait: true }, new AbortController().signal);
const j: Job = await registry.wait('s', id, 1000);
const finished: number | undefined = j.finishedAt;
const tags: RegistryErrorTag[] = [
  'unknown-job', 'foreign-job', 'wait-aborted', 'producer-failed', 'invalid-pattern', 'no-input', 'input-closed', 'unsupported',
];
const e = new RegistryError(tags[0], 'x');
const tag: RegistryErrorTag = e.tag;
const backend: Backend = registry;
const g: Guest = await Guest.load(backend);
g.backend = null;
const config: GuestConfig = plugin.config;
const step: Step = g.invokeStep('s', config, 'job_output', JSON.stringify({ job_id: id }));
if (step.wait) {
  const w: WaitRequest = step.wait;
  console.log(w.jobId, w.timeoutMs, w.until?.pattern, w.until?.quietMs);
} else {
  console.log(step.done.text, step.done.isError, step.done.value);
}
const notice: Notice | null = plugin.pullNotice('s');
console.log(r.text, j.status, finished, tag, VERSION, config.profile, notice?.text, g.toolDefinitions(config).map((d) => d.annotations.title));
console.log(new GuestError('x') instanceof Error, registry.kill('s', id, 'why'), await registry.close());
