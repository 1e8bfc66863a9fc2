// `jobs-host mcp` driven through the official TypeScript SDK's Client over stdio,
// asserting on exactly the content blocks a model would be given.
//
// Timing is deterministic without sleeps: a job that must still be running is held
// behind a FIFO gate, and "has finished" is learnt from the server's announcement of
// its completion notice (`notifications/message`; the notice is queued for the next
// tool result before it is announced). A job that finishes before anyone read it is
// announced and its notice placed before the next result, even when that result is
// the read itself, so a quick job is never read before its announcement (that would
// race the job's exit). Every wait is bounded.
//
// The server binary comes from JOBS_HOST_BIN (default: target/debug/jobs-host of this repo).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ErrorCode, LoggingMessageNotificationSchema, McpError } from '@modelcontextprotocol/sdk/types.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');
const JOBS_HOST_BIN = process.env.JOBS_HOST_BIN || path.join(root, 'target/debug/jobs-host');

// Upper bound for anything that waits (a call, a notice, a gate); never asserted on.
const BOUND_MS = 60_000;
const TEST_BOUND_MS = 180_000;

const TOOL_NAMES = ['bash', 'job_output', 'job_list', 'job_kill'];
const COMPLETED = '[status: completed, exit code: 0]';
const NO_NEW_OUTPUT = `(no new output)\n${COMPLETED}`;

const started = (id) => `started background job ${id}`;
const notice = (id, command, status = COMPLETED) =>
  `background job ${id} (bash: ${command}) finished ${status}. Read its output with job_output.`;

/** The completion notices the server announced as notifications/message, in arrival order. */
class Notices {
  constructor() {
    this.params = [];
    this.waiters = new Set();
  }

  push(params) {
    this.params.push(params);
    for (const wake of this.waiters) wake();
  }

  texts() {
    return this.params.map((p) => p.data.text);
  }

  find(id) {
    const prefix = `background job ${id} `;
    return this.params.find((p) => typeof p.data?.text === 'string' && p.data.text.startsWith(prefix));
  }

  /** The announcement of `id`'s completion notice, waiting for it (bounded). */
  waitFor(id, ms = BOUND_MS) {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = this.find(id);
        if (found) {
          clearTimeout(timer);
          this.waiters.delete(check);
          resolve(found);
        }
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`no completion notice for ${id} within ${ms} ms; announced: ${JSON.stringify(this.texts())}`));
      }, ms);
      this.waiters.add(check);
      check();
    });
  }
}

/** A fresh `jobs-host mcp` and a connected Client; `close()` ends the server and its jobs. */
async function connect(flags = []) {
  const transport = new StdioClientTransport({
    command: JOBS_HOST_BIN,
    args: ['mcp', ...flags],
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/' },
    stderr: 'inherit',
  });
  // Every JSON-RPC message the SDK sends.
  const sent = [];
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    sent.push(message);
    return send(message, options);
  };
  const client = new Client({ name: 'jobs-host-client-tests', version: '0.0.0' });
  const notices = new Notices();
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => notices.push(n.params));
  await client.connect(transport, { timeout: BOUND_MS });
  return { client, notices, sent };
}

async function withServer(body, flags = []) {
  const conn = await connect(flags);
  try {
    await body(conn);
  } finally {
    await conn.client.close();
  }
}

async function call(client, name, args) {
  return client.callTool({ name, arguments: args }, undefined, { timeout: BOUND_MS });
}

/** The result's blocks, each of which must be text, of a plain success without structuredContent. */
// A start's result: the start text last. A job this short may end before its
// start's own result, which then carries its notice first; whether it did.
function startedWith(items, id, command) {
  assert.equal(items.at(-1), started(id));
  assert.ok(items.length === 1 || (items.length === 2 && items[0] === notice(id, command)), JSON.stringify(items));
  return items.length === 2;
}

function texts(result) {
  assert.notEqual(result.isError, true, JSON.stringify(result));
  assert.equal(result.structuredContent, undefined, 'the model must be given the text, not a structured value');
  for (const block of result.content) assert.equal(block.type, 'text', JSON.stringify(result));
  return result.content.map((block) => block.text);
}

function assertAnnounced(params, text) {
  assert.equal(params.level, 'notice');
  assert.equal(params.logger, 'tool-jobs');
  assert.deepEqual(Object.keys(params.data).sort(), ['lane', 'source', 'summary', 'text']);
  assert.equal(params.data.lane, 'inject');
  assert.equal(params.data.text, text);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Lets a job blocked on `read line < gate` go on (bounded; waits for its reader to open). */
async function openGate(gate) {
  const deadline = Date.now() + BOUND_MS;
  for (;;) {
    let fd;
    try {
      fd = fs.openSync(gate, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK);
    } catch (e) {
      if (e.code !== 'ENXIO' || Date.now() > deadline) throw e; // ENXIO: no reader yet
      await sleep(10);
      continue;
    }
    try {
      fs.writeSync(fd, 'go\n');
    } finally {
      fs.closeSync(fd);
    }
    return;
  }
}

test('tools/list, the start text and a wait read', { timeout: TEST_BOUND_MS }, () =>
  withServer(async ({ client, notices }) => {
    const { tools } = await client.listTools(undefined, { timeout: BOUND_MS });
    assert.deepEqual(tools.map((t) => t.name), TOOL_NAMES);
    for (const tool of tools) assert.equal(tool.outputSchema, undefined, tool.name);
    const annotations = Object.fromEntries(tools.map((t) => [t.name, t.annotations]));
    assert.equal(annotations.job_output.readOnlyHint, true);
    assert.equal(annotations.job_list.readOnlyHint, true);
    assert.equal(annotations.job_kill.destructiveHint, true);
    assert.equal(annotations.bash.openWorldHint, true);

    const early = startedWith(texts(await call(client, 'bash', { command: 'echo hi' })), 'bash-1', 'echo hi');
    // Finished unread, so announced; the notice then comes with the read, first.
    assertAnnounced(await notices.waitFor('bash-1'), notice('bash-1', 'echo hi'));
    assert.deepEqual(texts(await call(client, 'job_output', { job_id: 'bash-1', wait: true })), [
      ...(early ? [] : [notice('bash-1', 'echo hi')]),
      `hi\n${COMPLETED}`,
    ]);
    assert.deepEqual(texts(await call(client, 'job_output', { job_id: 'bash-1' })), [NO_NEW_OUTPUT]);
    assert.deepEqual(notices.texts(), [notice('bash-1', 'echo hi')]);
  }));

test('a cancelled wait loses nothing', { timeout: TEST_BOUND_MS }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jobs-host-clients-'));
  try {
    const gate = path.join(dir, 'gate');
    execFileSync('mkfifo', [gate]);
    const command = `read line < ${gate}; echo done`;
    await withServer(async ({ client, notices, sent }) => {
      assert.deepEqual(texts(await call(client, 'bash', { command })), [started('bash-1')]);

      // Held at the gate, the job cannot end the 20 s wait before the SDK's 1 s timeout.
      await assert.rejects(
        client.callTool({ name: 'job_output', arguments: { job_id: 'bash-1', wait: true, timeout_ms: 20000 } }, undefined, {
          timeout: 1000,
        }),
        (e) => e instanceof McpError && e.code === ErrorCode.RequestTimeout,
      );
      // The SDK told the server: one notifications/cancelled naming that request.
      const [request] = sent.filter((m) => m.method === 'tools/call' && m.params.name === 'job_output');
      const cancels = sent.filter((m) => m.method === 'notifications/cancelled');
      assert.equal(cancels.length, 1);
      assert.equal(cancels[0].params.requestId, request.id);
      // The server reads its input in order: once a later ping is answered, the
      // cancellation has been applied, before the job can end.
      await client.ping({ timeout: BOUND_MS });
      assert.deepEqual(notices.texts(), []);

      await openGate(gate);
      assertAnnounced(await notices.waitFor('bash-1'), notice('bash-1', command));
      // Nothing was consumed by the abandoned wait: the whole output, after the notice.
      assert.deepEqual(texts(await call(client, 'job_output', { job_id: 'bash-1' })), [
        notice('bash-1', command),
        `done\n${COMPLETED}`,
      ]);
      assert.deepEqual(texts(await call(client, 'job_output', { job_id: 'bash-1' })), [NO_NEW_OUTPUT]);
      assert.deepEqual(notices.texts(), [notice('bash-1', command)]);
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('the notice of an unread job comes before a later result, once', { timeout: TEST_BOUND_MS }, () =>
  withServer(async ({ client, notices }) => {
    const early = startedWith(texts(await call(client, 'bash', { command: 'echo built' })), 'bash-1', 'echo built');
    assertAnnounced(await notices.waitFor('bash-1'), notice('bash-1', 'echo built'));
    const listing = 'bash-1 [bash] completed \u2014 echo built';
    assert.deepEqual(texts(await call(client, 'job_list', {})), [
      ...(early ? [] : [notice('bash-1', 'echo built')]),
      listing,
    ]);
    assert.deepEqual(texts(await call(client, 'job_list', {})), [listing]);
    assert.deepEqual(notices.texts(), [notice('bash-1', 'echo built')]);
  }));

test('progress keeps a wait alive past the request timeout', { timeout: TEST_BOUND_MS }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jobs-host-clients-'));
  try {
    const gate = path.join(dir, 'gate');
    execFileSync('mkfifo', [gate]);
    const command = `read line < ${gate}; echo done`;
    await withServer(async ({ client }) => {
      assert.deepEqual(texts(await call(client, 'bash', { command })), [started('bash-1')]);
      // Reports every 100 ms reset a 2 s request timeout (resetTimeoutOnProgress),
      // so the wait outlives it; the SDK sends the progress token itself.
      const reports = [];
      const waiting = client.callTool(
        { name: 'job_output', arguments: { job_id: 'bash-1', wait: true, timeout_ms: 60000 } },
        undefined,
        { timeout: 2000, resetTimeoutOnProgress: true, maxTotalTimeout: BOUND_MS, onprogress: (p) => reports.push(p) },
      );
      const deadline = Date.now() + BOUND_MS;
      while (reports.length < 30 && Date.now() < deadline) await sleep(20);
      assert.ok(reports.length >= 30, `only ${reports.length} progress reports`);
      await openGate(gate);
      const result = await waiting;
      assert.deepEqual(texts(result), [`done\n${COMPLETED}`]);
      assert.ok(reports.every((r, i) => i === 0 || r.progress > reports[i - 1].progress));
      assert.match(reports[0].message, /^waiting for bash-1: running after \d+ s$/);
    }, ['--progress-interval-ms', '100']);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// Revision 2025-11-25's tasks, as the SDK's experimental task client speaks them:
// `params.task` on the call, then tasks/get polling, the blocking tasks/result,
// tasks/list and tasks/cancel. A job and its task are one record, so the job
// list and the task agree.
test('revision 2025-11-25: a job as a task, polled, read, listed and cancelled', { timeout: TEST_BOUND_MS }, () =>
  withServer(async ({ client }) => {
    const tasks = client.experimental.tasks;
    assert.deepEqual(client.getServerCapabilities().tasks, { list: {}, cancel: {}, requests: { tools: { call: {} } } });
    const { tools } = await client.listTools(undefined, { timeout: BOUND_MS });
    assert.deepEqual(tools.find((t) => t.name === 'bash').execution, { taskSupport: 'optional' });
    assert.equal(tools.find((t) => t.name === 'job_list').execution, undefined);

    const command = 'echo hi; echo bye';
    const messages = [];
    for await (const m of tasks.callToolStream({ name: 'bash', arguments: { command } }, undefined, { timeout: BOUND_MS })) {
      messages.push(m);
    }
    assert.equal(messages[0].type, 'taskCreated', JSON.stringify(messages));
    const created = messages[0].task;
    assert.match(created.taskId, /^[0-9a-f]{32}$/);
    assert.equal(created.status, 'working');
    assert.equal(created.statusMessage, started('bash-1'));
    const last = messages.at(-1);
    assert.equal(last.type, 'result', JSON.stringify(messages));
    assert.deepEqual(texts(last.result), [`hi\nbye\n${COMPLETED}`]);
    assert.deepEqual(last.result._meta, { 'io.modelcontextprotocol/related-task': { taskId: created.taskId } });

    const got = await tasks.getTask(created.taskId, { timeout: BOUND_MS });
    assert.equal(got.status, 'completed');
    assert.equal(got.statusMessage, 'exit code: 0');
    // The task's read was the model's: the list says completed, and the
    // notice (owed since the job ended before the read) comes once.
    const listed = texts(await call(client, 'job_list', {}));
    assert.equal(listed.at(-1), `bash-1 [bash] completed \u2014 ${command}`);
    assert.ok(listed.length <= 2, JSON.stringify(listed));
    assert.deepEqual(texts(await call(client, 'job_output', { job_id: 'bash-1' })), [NO_NEW_OUTPUT]);

    // A cancel kills the job and the task is cancelled before the answer.
    const stream = tasks.callToolStream({ name: 'bash', arguments: { command: 'sleep 300' } }, undefined, { timeout: BOUND_MS });
    const first = (await stream.next()).value;
    assert.equal(first.type, 'taskCreated');
    const cancelled = await tasks.cancelTask(first.task.taskId, { timeout: BOUND_MS });
    assert.equal(cancelled.status, 'cancelled');
    const rest = [];
    for await (const m of stream) rest.push(m);
    assert.equal(rest.at(-1).type, 'error', JSON.stringify(rest));
    assert.match(texts(await call(client, 'job_list', {})).at(-1), /bash-2 \[bash\] killed \u2014 sleep 300$/);

    const { tasks: all } = await tasks.listTasks(undefined, { timeout: BOUND_MS });
    assert.deepEqual(all.map((t) => [t.taskId, t.status]), [[created.taskId, 'completed'], [first.task.taskId, 'cancelled']]);

    // Unknown ids, the job's own id, and a cancel of a finished task: -32602, nothing changes.
    for (const bogus of ['0'.repeat(32), 'bash-1']) {
      await assert.rejects(tasks.getTask(bogus, { timeout: BOUND_MS }), (e) =>
        e.code === ErrorCode.InvalidParams && e.message.includes('Failed to retrieve task: Task not found'));
    }
    await assert.rejects(tasks.cancelTask(created.taskId, { timeout: BOUND_MS }), (e) =>
      e.code === ErrorCode.InvalidParams && e.message.includes('Cannot cancel task: it is already completed'));
    assert.equal((await tasks.getTask(created.taskId, { timeout: BOUND_MS })).status, 'completed');
  }));
