#!/usr/bin/env node
// Replays the conformance vectors through the component transpiled by jco.
//
//   node conformance/runner-node/run.mjs [--generated DIR] [--vectors DIR] [--report FILE]
//
// The host side is the scripted registry described in conformance/README.md;
// the component is driven through the Node reference host's Guest (hosts/node),
// from the module `npm run transpile` wrote (default hosts/node/generated).

import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Guest, GuestError, RegistryError, fromWitSandbox, toWitSandbox } from '../../hosts/node/src/guest.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const TERMINAL = new Set(['completed', 'killed', 'failed']);
const enc = new TextEncoder();
const dec = new TextDecoder();

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : fallback;
}

function head(s, n) {
  const b = enc.encode(s);
  if (b.length <= n) return s;
  let end = n;
  while (end > 0 && (b[end] & 0xc0) === 0x80) end -= 1;
  return dec.decode(b.subarray(0, end));
}

function tail(s, n) {
  const b = enc.encode(s);
  if (b.length <= n) return s;
  let start = b.length - n;
  while (start < b.length && (b[start] & 0xc0) === 0x80) start += 1;
  return dec.decode(b.subarray(start));
}

// The vector's job table, in the vector's own (snake case) form.
class Scripted {
  constructor(vector) {
    this.jobs = structuredClone(vector.jobs ?? []);
    this.now = vector.now_ms ?? 0;
  }
  nowMs() { return this.now; }
  find(id) { return this.jobs.find((j) => j.id === id); }
  visible(id) {
    const job = this.find(id);
    if (!job) throw new RegistryError('unknown-job', id);
    if (job.owner === 'other') throw new RegistryError('foreign-job', id);
    return job;
  }
  static view(j) {
    return {
      id: j.id, kind: j.kind, label: j.label, status: j.status, detail: j.detail ?? undefined,
      startedAt: j.started_at, finishedAt: j.finished_at ?? undefined,
      outputLimitBytes: j.output_limit_bytes ?? undefined, reported: Boolean(j.reported),
      sandbox: j.sandbox ?? undefined, placement: j.placement ?? undefined,
    };
  }
  listJobs() { return this.jobs.filter((j) => j.owner !== 'other').map(Scripted.view); }
  get(_c, id) { return Scripted.view(this.visible(id)); }
  read(_c, id) {
    const job = this.visible(id);
    const text = job.pending ?? '';
    job.pending = '';
    if (TERMINAL.has(job.status)) job.reported = true;
    return { text, job: Scripted.view(job) };
  }
  kill(_c, id) {
    const job = this.visible(id);
    if (job.cancel_error != null) throw new RegistryError('producer-failed', job.cancel_error);
    job.reported = true;
    if (TERMINAL.has(job.status)) return 'already-finished';
    job.status = 'stopping';
    return 'requested';
  }
  output(_c, id, w) {
    const job = this.visible(id);
    const out = job.output ?? '';
    const size = enc.encode(out).length;
    let h = out;
    let t = '';
    if (size > w.wholeUpTo) {
      h = head(out, w.headBytes);
      t = tail(out, w.tailBytes);
    }
    return { head: h, tail: t, omittedBytes: size - enc.encode(h).length - enc.encode(t).length, job: Scripted.view(job) };
  }
  writeInput(_c, id, data, close) {
    const job = this.visible(id);
    if (TERMINAL.has(job.status)) throw new RegistryError('input-closed');
    if (job.input === 'closed') throw new RegistryError('input-closed');
    if (job.input !== 'open') throw new RegistryError('no-input');
    job.written = (job.written ?? '') + data;
    if (close) job.input = 'closed';
    return enc.encode(data).length;
  }
  signal(_c, id, name) {
    const job = this.visible(id);
    if (TERMINAL.has(job.status)) throw new RegistryError('producer-failed', `job ${id} has already finished`);
    job.signals = [...(job.signals ?? []), name.toUpperCase()];
  }
  lines(_c, id, query) {
    const job = this.visible(id);
    const v = query.val;
    job.last_query = query.tag === 'search'
      ? { search: { stream: v.stream ?? null, pattern: v.pattern, context: v.context, max_matches: v.maxMatches } }
      : query.tag === 'range'
        ? { range: { stream: v.stream, start: v.start, count: v.count } }
        : { last: { stream: v.stream, count: v.count } };
    const page = job.lines ?? {};
    if (page.invalid_pattern != null) throw new RegistryError('invalid-pattern', page.invalid_pattern);
    const line = (l) => ({ stream: l.stream, number: l.number, text: l.text });
    return {
      lines: (page.lines ?? []).map(line),
      hits: page.hits ?? [],
      totalMatches: page.total_matches ?? 0,
      extents: (page.extents ?? []).map((e) => ({
        stream: e.stream, totalBytes: e.total_bytes ?? 0, droppedBytes: e.dropped_bytes ?? 0,
        firstLine: e.first_line ?? 1, lastLine: e.last_line ?? 0,
      })),
      stopped: page.stopped ?? null,
      job: Scripted.view(job),
    };
  }
  ports(_c, id) {
    const job = this.visible(id);
    if (TERMINAL.has(job.status)) return [];
    return (job.ports ?? []).map((p) => ({ address: p.address, port: p.port }));
  }
  wait(id, then) {
    if (then.error) {
      const [tag, payload] = Object.entries(then.error)[0];
      return new RegistryError(tag, payload ?? undefined);
    }
    let job;
    try {
      job = this.visible(id);
    } catch (e) {
      return e;
    }
    Object.assign(job, then.settle ?? {});
    if (TERMINAL.has(job.status)) job.reported = true;
    return { job: Scripted.view(job), end: then.end, matched: then.matched, prompt: then.prompt };
  }
}

const limitsJson = (l) => Object.fromEntries(['timeoutMs', 'cpuSeconds', 'memoryBytes', 'outputBytes'].map((k) => [
  k.replace(/[A-Z]/g, (m) => `_${m.toLowerCase()}`), l[k] === undefined ? null : Number(l[k]),
]));
const requestJson = (r) => ({
  command: r.command, workdir: r.workdir ?? null, description: r.description ?? null, stdin: r.stdin,
  name: r.name ?? null, limits: limitsJson(r.limits), yield_ms: r.yieldMs ?? null,
  sandbox: fromWitSandbox(r.sandbox), tty: r.tty ?? null, render: r.render,
  // Only a start on a runner says so: every other vector stays as it was.
  ...(r.runner === undefined ? {} : {
    runner: r.runner,
    resources: r.resources === undefined ? null : {
      cpus: r.resources.cpus ?? null, gpus: r.resources.gpus ?? null,
      memory_bytes: r.resources.memoryBytes === undefined ? null : Number(r.resources.memoryBytes),
      custom: Object.fromEntries(r.resources.custom),
    },
  }),
});
const requestFrom = (v) => ({
  command: v.command, workdir: v.workdir ?? undefined, description: v.description ?? undefined, stdin: v.stdin,
  name: v.name ?? undefined,
  limits: Object.fromEntries(['timeout_ms', 'cpu_seconds', 'memory_bytes', 'output_bytes'].map((k) => [
    k.replace(/_([a-z])/g, (_, m) => m.toUpperCase()), v.limits[k] === null ? undefined : BigInt(v.limits[k]),
  ])),
  yieldMs: v.yield_ms ?? undefined,
  sandbox: toWitSandbox(v.sandbox),
  tty: v.tty ?? undefined,
  render: v.render ?? false,
  runner: v.runner ?? undefined,
  resources: v.resources ? {
    cpus: v.resources.cpus ?? undefined, gpus: v.resources.gpus ?? undefined,
    memoryBytes: v.resources.memory_bytes === undefined || v.resources.memory_bytes === null ? undefined : BigInt(v.resources.memory_bytes),
    custom: Object.entries(v.resources.custom ?? {}),
  } : undefined,
});
// `{new: id}`, `{existing: id}` or `{error: {<start-error case>: payload}}`, as jco lowers a result.
const madeFrom = (m) => {
  if ('new' in m) return { tag: 'ok', val: { tag: 'new', val: m.new } };
  if ('existing' in m) return { tag: 'ok', val: { tag: 'existing', val: m.existing } };
  const [tag, val] = Object.entries(m.error)[0];
  if (tag === 'no-controller') return { tag: 'err', val: { tag } };
  return { tag: 'err', val: { tag, val: tag === 'limit-reached' ? BigInt(val) : val } };
};
const resultJson = (r) => ({ text: r.text, is_error: r.isError, value: r.value });
const configJson = (c) => ({
  profile: c.profile,
  wait_timeout_ms: Number(c.waitTimeoutMs),
  max_wait_timeout_ms: Number(c.maxWaitTimeoutMs),
  completion_delivery: c.completionDelivery,
  max_consecutive_wakes: Number(c.maxConsecutiveWakes),
  max_result_bytes: Number(c.maxResultBytes),
  suppress_completion_notice: c.suppressCompletionNotice,
  extensions: [...c.extensions],
  limits: limitsJson(c.limits),
  notice_transport: c.noticeTransport,
  disposed_owner: c.disposedOwner,
  sandbox: fromWitSandbox(c.sandbox),
  render_output: c.renderOutput,
  ...(c.runners.length > 0 ? { runners: [...c.runners] } : {}),
});
const noticeJson = (n) => ({ text: n.text, summary: n.summary ?? null, plugin: n.plugin, form: n.form ?? null });

function step(guest, scripted, config, s) {
  if ('configure' in s) {
    try {
      return { ok: configJson(guest.configure(s.configure)) };
    } catch (e) {
      if (e instanceof GuestError) throw e;
      return { err: e.message };
    }
  }
  // A copy: later steps change the table, and this answer is kept.
  if ('state' in s) return Object.fromEntries(scripted.jobs.map((j) => [j.id, structuredClone(j)]));
  if (!config) throw new GuestError('the vector has no config');
  if ('invoke' in s) {
    const waits = [...(s.waits ?? [])];
    const requests = [];
    let out = guest.invokeStep(null, config, s.invoke, s.args);
    while (out.wait) {
      const asked = { job_id: out.wait.jobId, timeout_ms: out.wait.timeoutMs };
      if (out.wait.until) {
        asked.until = {
          pattern: out.wait.until.pattern ?? null,
          quiet_ms: out.wait.until.quietMs ?? null,
          prompt_quiet_ms: out.wait.until.promptQuietMs ?? null,
        };
      }
      requests.push(asked);
      if (!waits.length) throw new GuestError(`the guest asked to wait (${out.wait.jobId}, ${out.wait.timeoutMs} ms), and the vector has no wait left`);
      const waited = scripted.wait(out.wait.jobId, waits.shift().then);
      out = guest.invokeStep(null, config, s.invoke, s.args, waited);
    }
    return { text: out.done.text, is_error: out.done.isError, value: out.done.value, waits: requests };
  }
  if ('tool_definitions' in s) {
    return guest.toolDefinitions(config).map((d) => ({ name: d.name, description: d.description, input_schema: d.inputSchema, output_schema: d.outputSchema, annotations: d.annotations }));
  }
  if ('tool_annotations' in s) {
    return guest.toolDefinitions(config).map((d) => ({ name: d.name, annotations: d.annotations }));
  }
  if ('start_tool' in s) {
    const d = guest.startTool(config);
    return { name: d.name, description: d.description, input_schema: d.inputSchema, output_schema: d.outputSchema, annotations: d.annotations };
  }
  if ('check_start' in s) {
    const checked = guest.checkStart(config, s.check_start, s.max_command_bytes ?? 65536);
    return checked.err ? { err: resultJson(checked.err) } : { ok: requestJson(checked.ok) };
  }
  if ('started' in s) {
    const out = guest.started(config, requestFrom(s.started.request), madeFrom(s.started.made));
    if (out.done) return resultJson(out.done);
    const asked = { job_id: out.wait.jobId, timeout_ms: out.wait.timeoutMs };
    // With the wait's end given, the host resumes the start under its tool's name.
    if (!s.started.waits?.length) return { wait: asked };
    const waited = scripted.wait(out.wait.jobId, s.started.waits[0].then);
    const resumed = guest.invokeStep(null, config, 'bash', s.started.args ?? '{}', waited);
    if (!resumed.done) throw new GuestError('a resumed start asked to wait again');
    return { ...resultJson(resumed.done), waits: [asked] };
  }
  if ('describe_call' in s) {
    const c = guest.describeCall(config, s.describe_call, s.args);
    return c && { title: c.title, kind: c.kind, raw_input: c.rawInput ?? null };
  }
  if ('system_prompt' in s) {
    const p = guest.systemPrompt(config);
    return p && { name: p.name, order: p.order, text: p.text };
  }
  if ('completion_notice' in s) return noticeJson(guest.completionNotice(config, Scripted.view(scripted.find(s.completion_notice))));
  if ('deliver' in s) {
    const owner = s.owner && { status: s.owner.status, wakesSpent: s.owner.wakes_spent };
    const d = guest.deliver(config, Scripted.view(scripted.find(s.deliver)), owner);
    return d && { lane: d.lane, notice: noticeJson(d.notice) };
  }
  if ('batch_notice' in s) {
    const n = guest.batchNotice(null, config, s.batch_notice.map((id) => Scripted.view(scripted.find(id))));
    return n && noticeJson(n);
  }
  if ('finalize' in s) return guest.finalize(null, config, s.finalize, s.args, s.blocks);
  throw new GuestError(`unknown step ${JSON.stringify(s)}`);
}

// Deep equality of JSON values, key order aside.
function same(a, b) {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && same(a[k], b[k]));
}

function check(s, got) {
  const j = JSON.stringify;
  if ('state' in s) {
    for (const [id, fields] of Object.entries(s.state)) {
      for (const [field, value] of Object.entries(fields)) {
        const actual = got[id]?.[field];
        if (!same(actual ?? null, value)) return `job ${id}: ${field} is ${j(actual)}, expected ${j(value)}`;
      }
    }
    return null;
  }
  const want = s.expect;
  if ('check_start' in s && want.err_prefix !== undefined) {
    return got.err?.is_error === true && String(got.err.text).startsWith(want.err_prefix) ? null : `expected an error starting ${j(want.err_prefix)}, got ${j(got)}`;
  }
  if ('invoke' in s) {
    const asked = (s.waits ?? []).map((w) => w.expect);
    if (!same(got.waits, asked)) return `waits ${j(got.waits)} expected ${j(asked)}`;
    if ('text_prefix' in want) {
      if (!got.text.startsWith(want.text_prefix)) return `text ${j(got.text)} does not start with ${j(want.text_prefix)}`;
    } else if (got.text !== want.text) return `text ${j(got.text)} expected ${j(want.text)}`;
    for (const key of ['is_error', 'value']) if (!same(got[key], want[key])) return `${key} ${j(got[key])} expected ${j(want[key])}`;
    return null;
  }
  if ('configure' in s) {
    if (want.ok) {
      for (const [k, v] of Object.entries(want.ok)) if (!same(got.ok?.[k], v)) return `config ${k}: got ${j(got)}, expected ${j(v)}`;
      return null;
    }
    if (want.err_prefix !== undefined) {
      return String(got.err ?? '').startsWith(want.err_prefix) ? null : `expected an error starting ${j(want.err_prefix)}, got ${j(got)}`;
    }
  }
  return same(got, want) ? null : `got ${j(got)}, expected ${j(want)}`;
}

const vectorsDir = arg('--vectors', join(HERE, '..', 'vectors'));
const report = arg('--report');
const guest = await Guest.load(null, arg('--generated', join(HERE, '..', '..', 'hosts', 'node', 'generated')));
const vectors = readdirSync(vectorsDir).filter((f) => f.endsWith('.json')).sort()
  .flatMap((f) => JSON.parse(readFileSync(join(vectorsDir, f), 'utf8')));
let passed = 0;
let failed = 0;
const lines = [];
for (const vector of vectors) {
  const scripted = new Scripted(vector);
  guest.backend = scripted;
  const actual = [];
  let why = null;
  try {
    const config = 'config' in vector ? guest.configure(vector.config) : null;
    for (const [n, s] of vector.steps.entries()) {
      const got = step(guest, scripted, config, s);
      actual.push(got);
      const diff = check(s, got);
      if (diff) {
        why = `step ${n}: ${diff}`;
        break;
      }
    }
  } catch (e) {
    why = String(e?.message ?? e).split('\n')[0];
  }
  if (why === null) passed += 1;
  else {
    failed += 1;
    console.log(`FAIL ${vector.id}: ${why}`);
  }
  lines.push(JSON.stringify({ id: vector.id, ok: why === null, failure: why, actual }));
}
if (report) writeFileSync(report, lines.join('\n') + '\n');
console.log(`node: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
