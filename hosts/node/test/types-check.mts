// Compiled (never run) by `npm run typecheck`: the published types fit real use.
import { Plugin, Registry, Guest, RegistryError, type Job, type ToolResult } from '../src/index.js';
const registry = new Registry({ graceMs: 100 });
const plugin = await Plugin.load(registry, { config: { profile: 'a' }, onNotice: (owner, lane, n) => console.log(owner, lane, n.text) });
const id: string = registry.startShell('true', { owner: 's' });
const r: ToolResult = await plugin.invoke('s', 'job_output', { job_id: id, wait: true });
const j: Job = await registry.wait('s', id, 1000);
const e = new RegistryError('unknown-job', 'x');
const g: Guest = await Guest.load(registry);
console.log(r.text, j.status, e.tag, g.toolDefinitions(plugin.config).length);
