// A job registry of real child processes, in Node.
//
// Each shell job runs `bash -c <command>` detached, so it leads a process group
// of its own, with stdin from /dev/null. Its output is kept in bounded buffers:
// the unread delta for consuming reads (what does not fit is dropped and said so)
// and the whole output's two ends for excerpts. Cancelling sends SIGTERM to the
// whole group, then SIGKILL after a grace period. Waits are promises: nothing
// here blocks the event loop.

import { spawn } from 'node:child_process';
import { RegistryError } from './guest.js';

/** @import { ChildProcess } from 'node:child_process' */
/** @import { ExcerptWindow, Job, JobStatus, KillOutcome } from './types.js' */

/** @type {Set<JobStatus>} */
const TERMINAL = new Set(['completed', 'killed', 'failed']);

/**
 * The first `n` bytes of `b`, without a character split at the end.
 * @param {Buffer} b
 * @param {number} n
 */
function cutHead(b, n) {
  if (b.length <= n) return b;
  let end = n;
  let back = 0;
  while (end > 0 && back < 3 && (b[end] & 0xc0) === 0x80) {
    end -= 1;
    back += 1;
  }
  return b.subarray(0, end);
}

/**
 * The last `n` bytes of `b`, without continuation bytes at the start.
 * @param {Buffer} b
 * @param {number} n
 */
function cutTail(b, n) {
  if (b.length <= n) return b;
  let start = b.length - n;
  while (start < b.length && (b[start] & 0xc0) === 0x80) start += 1;
  return b.subarray(start);
}

/** @typedef {'stdout' | 'stderr'} StreamName */

class Stream {
  /** @param {number} keep */
  constructor(keep) {
    this.keep = keep;
    this.head = Buffer.alloc(0);
    this.tail = Buffer.alloc(0);
    this.middle = 0;
  }
  /** @param {Buffer} data */
  add(data) {
    const take = Math.min(data.length, this.keep - this.head.length);
    this.head = Buffer.concat([this.head, data.subarray(0, take)]);
    this.tail = Buffer.concat([this.tail, data.subarray(take)]);
    if (this.tail.length > this.keep) {
      const cut = this.tail.length - this.keep;
      this.middle += cut;
      this.tail = this.tail.subarray(cut);
    }
  }
  size() { return this.head.length + this.middle + this.tail.length; }
  lastByte() { const b = this.tail.length ? this.tail : this.head; return b[b.length - 1]; }
}

class Output {
  /**
   * @param {number} maxPending
   * @param {number} keep
   */
  constructor(maxPending, keep) {
    this.maxPending = maxPending;
    /** @type {Record<StreamName, Buffer[]>} */
    this.pending = { stdout: [], stderr: [] };
    this.pendingBytes = 0;
    this.dropped = 0;
    /** @type {Record<StreamName, Stream>} */
    this.streams = { stdout: new Stream(keep), stderr: new Stream(keep) };
  }
  /**
   * @param {StreamName} stream
   * @param {Buffer} data
   */
  add(stream, data) {
    const room = Math.max(this.maxPending - this.pendingBytes, 0);
    const kept = data.subarray(0, room);
    this.pending[stream].push(kept);
    this.pendingBytes += kept.length;
    this.dropped += data.length - kept.length;
    this.streams[stream].add(data);
  }
  takeDelta() {
    let out = Buffer.concat(this.pending.stdout).toString('utf8');
    const err = Buffer.concat(this.pending.stderr).toString('utf8');
    this.pending = { stdout: [], stderr: [] };
    this.pendingBytes = 0;
    if (err) {
      if (out && !out.endsWith('\n')) out += '\n';
      out += `[stderr]\n${err}`;
    }
    if (this.dropped) {
      if (out && !out.endsWith('\n')) out += '\n';
      out += '[some output was dropped from memory; full output: (unavailable)]';
      this.dropped = 0;
    }
    return out;
  }
  /**
   * The whole output (stdout, then stderr after a `[stderr]` line) as byte runs
   * and gaps (numbers: bytes not kept).
   * @returns {(Buffer | number)[]}
   */
  segments() {
    const { stdout: out, stderr: err } = this.streams;
    const segs = [out.head, out.middle, out.tail];
    if (err.size()) {
      const sep = out.size() && out.lastByte() !== 0x0a ? '\n' : '';
      segs.push(Buffer.from(`${sep}[stderr]\n`), err.head, err.middle, err.tail);
    }
    return segs;
  }
  /**
   * @param {ExcerptWindow} window
   * @returns {{ head: string, tail: string, omittedBytes: number }}
   */
  excerpt({ wholeUpTo, headBytes, tailBytes }) {
    const segs = this.segments();
    const total = segs.reduce((/** @type {number} */ n, x) => n + (typeof x === 'number' ? x : x.length), 0);
    const gaps = segs.some((x) => typeof x === 'number' && x > 0);
    if (!gaps && total <= wholeUpTo) {
      return { head: Buffer.concat(segs.filter((x) => typeof x !== 'number')).toString('utf8'), tail: '', omittedBytes: 0 };
    }
    /** @param {(Buffer | number)[]} seq */
    const run = (seq) => {
      /** @type {Buffer[]} */
      const got = [];
      for (const x of seq) {
        if (typeof x === 'number') {
          if (x) break;
          continue;
        }
        got.push(x);
      }
      return Buffer.concat(got);
    };
    const front = run(segs);
    const back = run([...segs].reverse().map((x) => (typeof x === 'number' ? x : Buffer.from(x).reverse()))).reverse();
    const head = cutHead(front, headBytes);
    let tail = tailBytes ? cutTail(back, tailBytes) : Buffer.alloc(0);
    if (head.length + tail.length > total) tail = tail.subarray(head.length + tail.length - total);
    return { head: head.toString('utf8'), tail: tail.toString('utf8'), omittedBytes: total - head.length - tail.length };
  }
}

/**
 * A job as the registry keeps it (internal).
 * @typedef {object} JobRecord
 * @property {string} id
 * @property {string} kind
 * @property {string} label
 * @property {string | null} owner
 * @property {number | undefined} outputLimitBytes
 * @property {JobStatus} status
 * @property {string | undefined} detail
 * @property {number} startedAt
 * @property {number | undefined} finishedAt
 * @property {boolean} reported
 * @property {number} waiters
 * @property {Output} out
 * @property {ChildProcess} child
 * @property {(() => void)[]} settledWaiters
 */

/**
 * @typedef {object} RegistryOptions
 * @property {number} [graceMs] how long a kill waits after SIGTERM before SIGKILL (default 2000)
 * @property {number} [maxPendingBytes] the bound on unread output (default 1 MiB)
 * @property {number} [keepBytes] how much of the whole output is kept, half from each end (default 1 MiB)
 */

/**
 * @typedef {object} StartOptions
 * @property {string | null} [owner] the owner id (default null: visible to every caller)
 * @property {string} [cwd]
 * @property {number} [outputLimitBytes]
 * @property {string} [kind] the id prefix (default 'bash')
 */

/** Jobs, their processes and their owners: a Backend for the guest. */
export class Registry {
  #graceMs;
  #limits;
  /** @type {Map<string, JobRecord>} */
  #jobs = new Map();
  /** @type {Map<string, number>} */
  #counters = new Map();
  /** @type {((job: Job, owner: string | null) => void)[]} */
  #listeners = [];

  /** @param {RegistryOptions} [options] */
  constructor({ graceMs = 2000, maxPendingBytes = 1 << 20, keepBytes = 1 << 20 } = {}) {
    this.#graceMs = graceMs;
    this.#limits = { maxPendingBytes, keep: keepBytes / 2 };
  }

  /**
   * Starts `bash -c command` and returns its id (`bash-<n>`).
   * @param {string} command
   * @param {StartOptions} [options]
   * @returns {string}
   */
  startShell(command, { owner = null, cwd, outputLimitBytes, kind = 'bash' } = {}) {
    if (!command || !command.trim()) throw new Error('command must not be empty');
    const child = spawn('bash', ['-c', command], { cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    const n = (this.#counters.get(kind) ?? 0) + 1;
    this.#counters.set(kind, n);
    /** @type {JobRecord} */
    const job = {
      id: `${kind}-${n}`, kind, label: command, owner, outputLimitBytes, status: 'running', detail: undefined,
      startedAt: Date.now(), finishedAt: undefined, reported: false, waiters: 0,
      out: new Output(this.#limits.maxPendingBytes, this.#limits.keep), child, settledWaiters: [],
    };
    this.#jobs.set(job.id, job);
    child.stdout.on('data', (d) => job.out.add('stdout', d));
    child.stderr.on('data', (d) => job.out.add('stderr', d));
    // The contract's spawn failure: killed before exit, and the next read says why.
    child.on('error', (e) => {
      if (TERMINAL.has(job.status)) return;
      job.out.add('stderr', Buffer.from(`spawn failed: ${e.message}`));
      this.#settle(job, 'killed', 'killed before exit');
    });
    // 'close' comes after both pipes have drained.
    child.on('close', (code, sig) => {
      if (sig) this.#settle(job, 'killed', `signal: ${sig}`);
      else this.#settle(job, 'completed', `exit code: ${code}`);
    });
    return job.id;
  }

  /**
   * @param {JobRecord} job
   * @param {JobStatus} status
   * @param {string} detail
   */
  #settle(job, status, detail) {
    if (TERMINAL.has(job.status)) return;
    job.status = status;
    job.detail = detail;
    job.finishedAt = Date.now();
    if (job.waiters) job.reported = true;
    const snapshot = this.#snapshot(job);
    for (const wake of job.settledWaiters.splice(0)) wake();
    for (const listener of this.#listeners) {
      try {
        listener(snapshot, job.owner);
      } catch (e) {
        console.error(`jobs: onJobDone listener threw for ${job.id}: ${/** @type {{ message?: unknown } | null | undefined} */ (e)?.message ?? e}`);
      }
    }
  }

  /**
   * Calls `listener(snapshot, owner)` for every settlement.
   * @param {(job: Job, owner: string | null) => void} listener
   */
  onJobDone(listener) { this.#listeners.push(listener); }

  /**
   * @param {JobRecord} job
   * @returns {Job}
   */
  #snapshot(job) {
    return {
      id: job.id, kind: job.kind, label: job.label, status: job.status, detail: job.detail,
      startedAt: job.startedAt, finishedAt: job.finishedAt, outputLimitBytes: job.outputLimitBytes, reported: job.reported,
    };
  }

  /**
   * @param {string | null} caller
   * @param {string} id
   */
  #visible(caller, id) {
    const job = this.#jobs.get(id);
    if (!job) throw new RegistryError('unknown-job', id);
    if (job.owner !== null && job.owner !== caller) throw new RegistryError('foreign-job', id);
    return job;
  }

  /**
   * The jobs `caller` may see: its own and the unowned ones.
   * @param {string | null} caller
   * @returns {Job[]}
   */
  listJobs(caller) {
    return [...this.#jobs.values()].filter((j) => j.owner === null || j.owner === caller).map((j) => this.#snapshot(j));
  }

  /**
   * @param {string | null} caller
   * @param {string} id
   * @returns {Job}
   */
  get(caller, id) { return this.#snapshot(this.#visible(caller, id)); }

  /**
   * The output not read yet (consumed by this read), and the job.
   * @param {string | null} caller
   * @param {string} id
   * @returns {{ text: string, job: Job }}
   */
  read(caller, id) {
    const job = this.#visible(caller, id);
    const text = job.out.takeDelta();
    if (TERMINAL.has(job.status)) job.reported = true;
    return { text, job: this.#snapshot(job) };
  }

  /**
   * Asks the job to stop: SIGTERM to its group, SIGKILL after the grace.
   * @param {string | null} caller
   * @param {string} id
   * @param {string} [_reason]
   * @returns {KillOutcome}
   */
  kill(caller, id, _reason) {
    const job = this.#visible(caller, id);
    job.reported = true;
    if (TERMINAL.has(job.status)) return 'already-finished';
    job.status = 'stopping';
    this.#signalGroup(job, 'SIGTERM');
    const timer = setTimeout(() => {
      if (!TERMINAL.has(job.status)) this.#signalGroup(job, 'SIGKILL');
    }, this.#graceMs);
    timer.unref();
    return 'requested';
  }

  /**
   * @param {JobRecord} job
   * @param {NodeJS.Signals} signal
   */
  #signalGroup(job, signal) {
    try {
      process.kill(-(/** @type {number} */ (job.child.pid)), signal);
    } catch {
      // The group is gone already.
    }
  }

  /**
   * The whole output's two ends (not consumed), and the job.
   * @param {string | null} caller
   * @param {string} id
   * @param {ExcerptWindow} window
   * @returns {{ head: string, tail: string, omittedBytes: number, job: Job }}
   */
  output(caller, id, window) {
    const job = this.#visible(caller, id);
    return { ...job.out.excerpt(window), job: this.#snapshot(job) };
  }

  /**
   * Resolves when the job is terminal or `timeoutMs` passes; never cancels it.
   * Aborting `signal` (an AbortSignal) rejects with `wait-aborted`.
   * @param {string | null} caller
   * @param {string} id
   * @param {number} timeoutMs
   * @param {AbortSignal} [signal]
   * @returns {Promise<Job>}
   */
  async wait(caller, id, timeoutMs, signal) {
    const job = this.#visible(caller, id);
    if (!TERMINAL.has(job.status)) {
      if (signal?.aborted) throw new RegistryError('wait-aborted');
      job.waiters += 1;
      try {
        await new Promise((resolve, reject) => {
          const done = () => {
            clearTimeout(timer);
            signal?.removeEventListener('abort', abort);
            resolve(undefined);
          };
          const abort = () => {
            clearTimeout(timer);
            job.settledWaiters = job.settledWaiters.filter((w) => w !== done);
            reject(new RegistryError('wait-aborted'));
          };
          const timer = setTimeout(() => {
            job.settledWaiters = job.settledWaiters.filter((w) => w !== done);
            done();
          }, timeoutMs);
          job.settledWaiters.push(done);
          signal?.addEventListener('abort', abort, { once: true });
        });
      } finally {
        job.waiters -= 1;
      }
    }
    if (TERMINAL.has(job.status)) job.reported = true;
    return this.#snapshot(job);
  }

  /** @returns {number} */
  nowMs() { return Date.now(); }

  /**
   * The job as it is now, whoever owns it (undefined once gone).
   * @param {string} id
   * @returns {Job | undefined}
   */
  inspect(id) {
    const job = this.#jobs.get(id);
    return job && this.#snapshot(job);
  }

  /**
   * Marks the job reported; true only for the first claim of an unreported job.
   * @param {string} id
   * @returns {boolean}
   */
  claimNotice(id) {
    const job = this.#jobs.get(id);
    if (!job || job.reported) return false;
    job.reported = true;
    return true;
  }

  /**
   * Ends every live job's process group (TERM, then KILL after the grace).
   * @returns {Promise<void>}
   */
  async close() {
    const live = [...this.#jobs.values()].filter((j) => !TERMINAL.has(j.status));
    for (const j of live) {
      j.reported = true;
      this.#signalGroup(j, 'SIGTERM');
    }
    await Promise.all(live.map((j) => new Promise((resolve) => {
      if (TERMINAL.has(j.status)) return resolve(undefined);
      const timer = setTimeout(() => this.#signalGroup(j, 'SIGKILL'), this.#graceMs);
      j.settledWaiters.push(() => { clearTimeout(timer); resolve(undefined); });
    })));
  }
}
