// The tool-jobs component (WIT `harness:jobs@0.9.0`), transpiled by jco
// (`--instantiation sync`) and linked to a JavaScript backend.
//
// `Guest` is the low-level binding. Calls share one instance: instantiating
// through jco costs about 17 ms, some 350 times the call itself. The guest keeps
// nothing between calls by contract (the Rust host enforces it with a fresh
// instance per call); here an instance is replaced after any failure, so a trap
// never leaves a poisoned instance behind. A backend answers for one caller at
// a time:
//
//   listJobs(caller) -> Job[]
//   get(caller, jobId) -> Job                      (or throw RegistryError)
//   read(caller, jobId) -> { text, job }            (or throw RegistryError)
//   kill(caller, jobId, reason) -> 'requested' | 'already-finished'
//   output(caller, jobId, window) -> { head, tail, omittedBytes, job }
//   nowMs() -> number
//
// and, for the opt-in extensions (a backend without them answers `unsupported`):
//
//   writeInput(caller, jobId, data, close) -> number of bytes
//   signal(caller, jobId, name)                       ('int', 'term', 'hup', ...)
//   lines(caller, jobId, query) -> { lines, hits, totalMatches, extents, stopped?, job }
//   ports(caller, jobId) -> [{ address, port }]
//
// A Job is a plain object with the WIT `job-snapshot` fields in camel case; times
// and sizes are numbers here and BigInt only at the boundary.

import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** @import { Backend, ContentBlock, GuestConfig, Job, LineQuery, Lane, Notice, OutputLine, OwnerState, PromptSection, RegistryErrorTag, Step, ToolDefinition, ToolResult, UiCard, WaitOutcome, WitJob, WitLine, WitRegistryError } from './types.js' */
/** @typedef {typeof import('../generated/tool-jobs.js')} Generated */
/** @typedef {import('../generated/tool-jobs.js').Root} Root */
/** @typedef {import('../generated/tool-jobs.js').ImportObject} ImportObject */
/** @typedef {import('../generated/interfaces/harness-jobs-registry.js').OwnerScope} WitOwnerScope */
/** @typedef {import('../generated/interfaces/harness-jobs-types.js').LinePage} WitLinePage */
/** @typedef {import('../generated/interfaces/harness-jobs-types.js').LineQuery} WitLineQuery */
/** @typedef {import('../generated/interfaces/harness-jobs-types.js').Waited} WitWaited */
/** @typedef {import('../generated/interfaces/harness-jobs-tools.js').ToolDefinition} WitToolDefinition */
/** @typedef {import('../generated/interfaces/harness-jobs-tools.js').ToolResult} WitToolResult */
/** @typedef {import('../generated/interfaces/harness-jobs-tools.js').StartRequest} StartRequest */
/** @typedef {import('../generated/interfaces/harness-jobs-tools.js').StartMade} StartMade */
/** @typedef {import('../generated/interfaces/harness-jobs-tools.js').StartError} StartError */
/**
 * The capability the guest gets for one call: it names the caller, nothing more.
 * @typedef {WitOwnerScope & { readonly caller: string | null }} OwnerScope
 */

const HERE = dirname(fileURLToPath(import.meta.url));
export const VERSION = '0.9.0';

/** @type {Set<string>} */
const BARE_ERRORS = new Set(['wait-aborted', 'no-input', 'input-closed']);

/** An expected registry failure: `tag` is a WIT `registry-error` case (unknown-job, foreign-job, wait-aborted, producer-failed, invalid-pattern, no-input, input-closed, unsupported, no-terminal). */
export class RegistryError extends Error {
  /**
   * @param {RegistryErrorTag} tag
   * @param {string} [val] what the case carries (ignored for the bare ones)
   */
  constructor(tag, val) {
    super(val === undefined ? tag : `${tag}: ${val}`);
    // jco turns a thrown object's `payload` into the WIT error value.
    Object.defineProperty(this, 'payload', {
      value: BARE_ERRORS.has(tag) ? { tag } : { tag, val: String(val ?? '') },
    });
    /** @readonly @type {RegistryErrorTag} */
    this.tag = tag;
    /** @readonly @type {string | undefined} */
    this.val = val;
  }
}

/** The component trapped or answered outside the WIT. */
export class GuestError extends Error {}

/** @param {number | bigint | null | undefined} n */
const big = (n) => (n === undefined || n === null ? undefined : BigInt(n));
/** @param {number | bigint | null | undefined} n */
const num = (n) => (n === undefined || n === null ? undefined : Number(n));

/**
 * A Job as the WIT `job-snapshot` (times and sizes as BigInt).
 * @param {Job} job
 * @returns {WitJob}
 */
export function toWitJob(job) {
  return {
    id: job.id,
    kind: job.kind,
    label: job.label,
    status: job.status,
    detail: job.detail ?? undefined,
    startedAt: BigInt(job.startedAt),
    finishedAt: big(job.finishedAt),
    outputLimitBytes: big(job.outputLimitBytes),
    reported: Boolean(job.reported),
    sandbox: toWitSandbox(job.sandbox),
    placement: job.placement ?? undefined,
  };
}

/**
 * A sandbox as a config writes it (`{files, network: 'on' | 'off' | [port, ...]}`)
 * in jco's form; `undefined` for none.
 * @param {import('./types.js').Sandbox | null | undefined} s
 * @returns {any}
 */
export function toWitSandbox(s) {
  if (!s) return undefined;
  const network = Array.isArray(s.network) ? { tag: 'ports', val: Uint16Array.from(s.network) } : { tag: s.network };
  return { files: s.files, network };
}

/**
 * [`toWitSandbox`]'s form back; `null` for none.
 * @param {any} w
 * @returns {import('./types.js').Sandbox | null}
 */
export function fromWitSandbox(w) {
  if (!w) return null;
  const network = w.network.tag === 'ports' ? Array.from(w.network.val, Number) : w.network.tag;
  return { files: w.files, network };
}

/**
 * @param {OutputLine} l
 * @returns {WitLine}
 */
const witLine = (l) => ({ stream: l.stream, number: BigInt(l.number), text: l.text });

/**
 * @param {string} what
 * @returns {never}
 */
function unsupported(what) {
  throw new RegistryError('unsupported', what);
}

/**
 * A query as plain numbers: `{ tag: 'range' | 'last' | 'search', val }`.
 * @param {WitLineQuery} q
 * @returns {LineQuery}
 */
function fromWitQuery(q) {
  /** @type {Record<string, unknown>} */
  const v = { ...q.val };
  if ('start' in v) v.start = Number(v.start);
  return /** @type {LineQuery} */ ({ tag: q.tag, val: v });
}

/**
 * A wait's outcome for `resume`: a Job (ended by settling or the timeout) or `{ job, end, matched, prompt }`.
 * @param {Job | WaitOutcome} waited
 * @returns {WitWaited}
 */
function toWitWaited(waited) {
  const w = /** @type {Partial<WaitOutcome>} */ (waited);
  const job = w.job ?? /** @type {Job} */ (waited);
  const terminal = ['completed', 'killed', 'failed'].includes(job.status);
  const end = w.end ?? (terminal ? 'settled' : 'timed-out');
  const matched = w.matched ? { line: witLine(w.matched.line), before: w.matched.before.map(witLine) } : undefined;
  return { job: toWitJob(job), end, matched, prompt: w.prompt ?? undefined };
}

/**
 * A WIT `job-snapshot` as a Job (times and sizes as numbers).
 * @param {WitJob} job
 * @returns {Job}
 */
export function fromWitJob(job) {
  return {
    ...job,
    startedAt: Number(job.startedAt),
    finishedAt: num(job.finishedAt),
    outputLimitBytes: num(job.outputLimitBytes),
    sandbox: fromWitSandbox(job.sandbox),
  };
}

/**
 * @param {string} dir
 * @returns {Promise<Generated>}
 */
function loadGenerated(dir) {
  // The transpiled module is generated by `npm run transpile` (see package.json).
  return import(join(dir, 'tool-jobs.js'));
}

/**
 * A tool definition with its schemas parsed and its hints spelled as MCP spells them.
 * @param {WitToolDefinition} d
 * @returns {ToolDefinition}
 */
const definitionOf = (d) => ({
  name: d.name,
  description: d.description,
  inputSchema: JSON.parse(d.inputSchema),
  outputSchema: d.outputSchema === undefined ? null : JSON.parse(d.outputSchema),
  annotations: {
    title: d.annotations.title,
    readOnlyHint: d.annotations.readOnlyHint,
    destructiveHint: d.annotations.destructiveHint,
    idempotentHint: d.annotations.idempotentHint,
    openWorldHint: d.annotations.openWorldHint,
  },
});

/**
 * @param {WitToolResult} r
 * @returns {ToolResult}
 */
const resultOf = (r) => ({ text: r.text, isError: r.isError, value: r.value === undefined ? null : JSON.parse(r.value) });

/**
 * @param {unknown} e
 * @returns {e is { payload: unknown }}
 */
const hasPayload = (e) => Boolean(e) && Object.prototype.hasOwnProperty.call(e, 'payload');

/** @param {unknown} e */
const messageOf = (e) => /** @type {{ message?: unknown } | null | undefined} */ (e)?.message ?? e;

export class Guest {
  /** @type {Generated} */
  #generated;
  /** @type {(path: string) => WebAssembly.Module} */
  #getCoreModule;
  /** @type {Record<string, unknown>} */
  #imports;
  /** @type {Root | null | undefined} */
  #current;

  /**
   * Use `await Guest.load(backend)`; `dir` is where `npm run transpile` wrote
   * the component (default: ../generated).
   * @param {Backend | null} backend
   * @param {string} [dir]
   * @returns {Promise<Guest>}
   */
  static async load(backend, dir = join(HERE, '..', 'generated')) {
    const generated = await loadGenerated(dir);
    /** @type {Map<string, WebAssembly.Module>} */
    const modules = new Map();
    /** @param {string} path */
    const getCoreModule = (path) => {
      let module = modules.get(path);
      if (!module) {
        module = new WebAssembly.Module(readFileSync(join(dir, path)));
        modules.set(path, module);
      }
      return module;
    };
    return new Guest(generated, getCoreModule, backend);
  }

  /**
   * @param {Generated} generated the module jco wrote
   * @param {(path: string) => WebAssembly.Module} getCoreModule
   * @param {Backend | null} backend
   */
  constructor(generated, getCoreModule, backend) {
    this.#generated = generated;
    this.#getCoreModule = getCoreModule;
    /** The registry the guest sees; it may be swapped between calls. */
    this.backend = backend;
    /**
     * Where the guest's log lines go (default: nowhere).
     * @type {((level: string, message: string) => void) | undefined}
     */
    this.log = undefined;
    const guest = this;
    // Every import reaches the backend as it is at the time of the call.
    const b = () => /** @type {Backend} */ (guest.backend);
    /** @implements {WitOwnerScope} */
    class OwnerScope {
      /** @param {string | null} caller */
      constructor(caller) {
        /** @readonly */
        this.caller = caller;
      }

      listJobs() { return b().listJobs(this.caller).map(toWitJob); }

      /** @param {string} id */
      get(id) { return toWitJob(b().get(this.caller, id)); }

      /** @param {string} id */
      read(id) {
        const { text, job } = b().read(this.caller, id);
        return { text, job: toWitJob(job) };
      }

      /**
       * @param {string} id
       * @param {string | undefined} reason
       */
      kill(id, reason) { return b().kill(this.caller, id, reason); }

      /**
       * @param {string} id
       * @param {import('../generated/interfaces/harness-jobs-types.js').ExcerptWindow} w
       */
      output(id, w) {
        const out = b().output(this.caller, id, { wholeUpTo: Number(w.wholeUpTo), headBytes: Number(w.headBytes), tailBytes: Number(w.tailBytes) });
        return { head: out.head, tail: out.tail, omittedBytes: BigInt(out.omittedBytes), job: toWitJob(out.job) };
      }

      /**
       * @param {string} id
       * @param {string} data
       * @param {boolean} close
       */
      writeInput(id, data, close) {
        const backend = b();
        return BigInt(backend.writeInput ? backend.writeInput(this.caller, id, data, close) : unsupported('input'));
      }

      /**
       * @param {string} id
       * @param {import('./types.js').JobSignal} name
       */
      signal(id, name) {
        const backend = b();
        return backend.signal ? backend.signal(this.caller, id, name) : unsupported('input');
      }

      /**
       * @param {string} id
       * @param {WitLineQuery} query
       * @returns {WitLinePage}
       */
      lines(id, query) {
        const backend = b();
        if (!backend.lines) unsupported('log');
        const page = backend.lines(this.caller, id, fromWitQuery(query));
        return {
          lines: page.lines.map(witLine),
          // jco lowers any array of numbers here.
          hits: /** @type {Uint32Array} */ (page.hits),
          totalMatches: BigInt(page.totalMatches),
          extents: page.extents.map((e) => ({
            stream: e.stream,
            totalBytes: BigInt(e.totalBytes),
            droppedBytes: BigInt(e.droppedBytes),
            firstLine: BigInt(e.firstLine),
            lastLine: BigInt(e.lastLine),
          })),
          stopped: page.stopped == null ? undefined : { stream: page.stopped.stream, line: BigInt(page.stopped.line) },
          job: toWitJob(page.job),
        };
      }

      /** @param {string} id */
      ports(id) {
        const backend = b();
        return backend.ports ? backend.ports(this.caller, id) : unsupported('ports');
      }

      /**
       * @param {string} id
       * @param {{ rows: number, cols: number }} size
       */
      resize(id, size) {
        const backend = b();
        return backend.resize ? backend.resize(this.caller, id, size) : unsupported('terminal');
      }

      /** @param {string} id */
      screen(id) {
        const backend = b();
        if (!backend.screen) unsupported('terminal');
        const view = backend.screen(this.caller, id);
        return { ...view, job: toWitJob(view.job) };
      }
    }
    /**
     * The class of the scopes handed to the guest (`new guest.OwnerScope(caller)`),
     * for driving `instance()` directly.
     * @type {new (caller: string | null) => OwnerScope}
     */
    this.OwnerScope = OwnerScope;
    const imports = {
      registry: { OwnerScope },
      clock: { nowMs: () => BigInt(b().nowMs()) },
      diag: {
        /**
         * @param {string} level
         * @param {string} message
         */
        log: (level, message) => (guest.log ?? (() => {}))(level, message),
      },
      types: {},
    };
    // jco looks imports up by interface name, with or without the version.
    this.#imports = {};
    for (const [name, value] of Object.entries(imports)) {
      this.#imports[`harness:jobs/${name}`] = value;
      this.#imports[`harness:jobs/${name}@${VERSION}`] = value;
    }
  }

  /**
   * A fresh instance of the component, linked to this guest's backend.
   * @returns {Root}
   */
  instance() {
    return this.#generated.instantiate(this.#getCoreModule, /** @type {ImportObject} */ (/** @type {unknown} */ (this.#imports)));
  }

  /**
   * @template T
   * @param {(tools: Root['tools'], notices: Root['notices']) => T} fn
   * @returns {T}
   */
  #call(fn) {
    this.#current ??= this.instance();
    const root = this.#current;
    try {
      return fn(root.tools, root.notices);
    } catch (e) {
      // Whatever went wrong, the next call starts from a fresh instance.
      this.#current = null;
      if (e instanceof RegistryError) throw e;
      if (hasPayload(e)) throw e;
      throw new GuestError(`plugin failed: ${messageOf(e)}`);
    }
  }

  /**
   * The validated config (pass it back to every call), or throws Error with the plugin's message.
   * @param {string} configJson
   * @returns {GuestConfig}
   */
  configure(configJson) {
    const root = this.instance();
    try {
      return root.tools.configure(configJson);
    } catch (e) {
      if (hasPayload(e)) throw new Error(/** @type {string} */ (e.payload));
      throw new GuestError(`plugin failed: ${messageOf(e)}`);
    }
  }

  /**
   * @param {GuestConfig} config
   * @returns {ToolDefinition[]}
   */
  toolDefinitions(config) {
    return this.#call((t) => t.toolDefinitions(config)).map(definitionOf);
  }

  /**
   * The start tool (`bash`) in the config's words.
   * @param {GuestConfig} config
   * @returns {ToolDefinition}
   */
  startTool(config) {
    return definitionOf(this.#call((t) => t.startTool(config)));
  }

  /**
   * Checks the start tool's arguments: `{ ok: request }` to start, or
   * `{ err: result }`, the exact result for the model. A command longer than
   * `maxCommandBytes` is refused before the guest copies it.
   * @param {GuestConfig} config
   * @param {string} argsJson
   * @param {number} maxCommandBytes the host's bound on a command, in bytes
   * @returns {{ ok: StartRequest, err?: undefined } | { err: ToolResult, ok?: undefined }}
   */
  checkStart(config, argsJson, maxCommandBytes) {
    try {
      return { ok: this.#call((t) => t.checkStart(config, argsJson, BigInt(maxCommandBytes))) };
    } catch (e) {
      if (hasPayload(e)) return { err: resultOf(/** @type {{ payload: WitToolResult }} */ (e).payload) };
      throw e;
    }
  }

  /**
   * The start tool's result for `request`, given what the start did: `made` is
   * `{ tag: 'ok', val: { tag: 'new' | 'existing', val: id } }` or
   * `{ tag: 'err', val: { tag: 'no-controller' | 'stale-owner' | 'limit-reached' | 'refused', val } }`.
   * A start that yields (extension `yield`) answers `{ wait }` first: wait,
   * then `invokeStep(caller, config, 'bash', argsJson, waited)` words the read.
   * @param {GuestConfig} config
   * @param {StartRequest} request
   * @param {import('../generated/interfaces/harness-jobs-tools.js').Result<StartMade, StartError>} made
   * @returns {Step}
   */
  started(config, request, made) {
    const out = this.#call((t) => t.started(config, request, made));
    if (out.tag === 'done') return { done: resultOf(out.val) };
    return { wait: { jobId: out.val.jobId, timeoutMs: out.val.timeoutMs, until: out.val.until } };
  }

  /**
   * @param {GuestConfig} config
   * @param {string} tool
   * @param {string} argsJson
   * @returns {UiCard | null}
   */
  describeCall(config, tool, argsJson) {
    return this.#call((t) => t.describeCall(config, tool, argsJson)) ?? null;
  }

  /**
   * @param {GuestConfig} config
   * @returns {PromptSection | null}
   */
  systemPrompt(config) {
    return this.#call((t) => t.systemPrompt(config)) ?? null;
  }

  /**
   * One step of a call: `{ done: result }` or `{ wait: { jobId, timeoutMs, until } }`
   * (`until`: `{ pattern, quietMs }` for a ready wait, else undefined).
   * `waited` is absent on the first step, then a Job, `{ job, end, matched }`
   * or a RegistryError.
   * @param {string | null} caller
   * @param {GuestConfig} config
   * @param {string} tool
   * @param {string} argsJson
   * @param {Job | WaitOutcome | RegistryError} [waited]
   * @returns {Step}
   */
  invokeStep(caller, config, tool, argsJson, waited) {
    const scope = new this.OwnerScope(caller);
    const out = this.#call((t) => {
      if (waited === undefined) return t.invoke(scope, config, tool, argsJson);
      /** @type {import('../generated/interfaces/harness-jobs-tools.js').Result<WitWaited, WitRegistryError>} */
      const outcome = waited instanceof RegistryError
        ? { tag: 'err', val: /** @type {WitRegistryError} */ (/** @type {{ payload: unknown }} */ (/** @type {unknown} */ (waited)).payload) }
        : { tag: 'ok', val: toWitWaited(waited) };
      return t.resume(scope, config, tool, argsJson, outcome);
    });
    if (out.tag === 'done') return { done: resultOf(out.val) };
    if (out.tag === 'wait') return { wait: { jobId: out.val.jobId, timeoutMs: out.val.timeoutMs, until: out.val.until } };
    throw new GuestError(`unexpected call outcome ${/** @type {{ tag: unknown }} */ (out).tag}`);
  }

  /**
   * @param {string | null} caller
   * @param {GuestConfig} config
   * @param {string} tool
   * @param {string} argsJson
   * @param {ContentBlock[]} blocks
   * @returns {ContentBlock[]}
   */
  finalize(caller, config, tool, argsJson, blocks) {
    const scope = new this.OwnerScope(caller);
    /** @type {import('../generated/interfaces/harness-jobs-tools.js').ContentBlock[]} */
    const lowered = blocks.map((b) => ('text' in b ? { tag: 'text', val: b.text } : { tag: 'other', val: b.other }));
    return this.#call((t) => t.finalize(scope, config, tool, argsJson, lowered)).map(
      (b) => /** @type {ContentBlock} */ ({ [b.tag]: b.val }),
    );
  }

  /**
   * @param {GuestConfig} config
   * @param {Job} job
   * @returns {Notice}
   */
  completionNotice(config, job) {
    return this.#call((_, n) => n.completionNotice(config, toWitJob(job)));
  }

  /**
   * @param {GuestConfig} config
   * @param {Job} job
   * @param {OwnerState | null} ownerState
   * @returns {{ lane: Lane, notice: Notice } | null}
   */
  deliver(config, job, ownerState) {
    const owner = ownerState ? { status: ownerState.status, wakesSpent: BigInt(ownerState.wakesSpent) } : undefined;
    return this.#call((_, n) => n.deliver(config, toWitJob(job), owner)) ?? null;
  }

  /**
   * @param {string | null} caller
   * @param {GuestConfig} config
   * @param {Job[]} jobs
   * @returns {Notice | null}
   */
  batchNotice(caller, config, jobs) {
    const scope = new this.OwnerScope(caller);
    return this.#call((_, n) => n.batchNotice(scope, config, jobs.map(toWitJob))) ?? null;
  }
}
