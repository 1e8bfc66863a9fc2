// The plugin as a harness uses it: tools, calls (with waits run here, on the
// event loop) and completion notices, over a Registry of real processes.

import { statSync } from 'node:fs';

import { Guest, RegistryError } from './guest.js';

/** @import { AgentStatus, GuestConfig, Job, Lane, Notice, PromptSection, ToolDefinition, ToolResult, WaitOutcome } from './types.js' */
/** @import { Registry } from './registry.js' */

const MAX_WAITS_PER_CALL = 8;
// The longest command started, as the Rust host's default: one argument of
// execve may not be longer than 128 KiB anyway.
const MAX_COMMAND_BYTES = 65536;

/**
 * @typedef {object} PluginOptions
 * @property {string | object} [config] the plugin config, as JSON or an object (default `{}`)
 * @property {(owner: string | null, lane: Lane, notice: Notice) => void} [onNotice]
 *   gets each notice a pushing profile (a, b) decides to deliver
 * @property {(owner: string) => AgentStatus} [ownerStatus] says 'idle' or 'running' (default: running)
 * @property {string} [generated] where `npm run transpile` wrote the component
 */

export class Plugin {
  /** @type {Guest} */
  #guest;
  /** @type {Registry} */
  #registry;
  /** @type {(owner: string | null, lane: Lane, notice: Notice) => void} */
  #onNotice;
  /** @type {(owner: string) => AgentStatus} */
  #ownerStatus;
  /** @type {Map<string | null, number>} */
  #wakes = new Map();
  /** @type {Map<string, Job[]>} */
  #pulled = new Map();
  /** @type {string | undefined} the start tool's name, as the guest defines it */
  #startName;

  /**
   * `await Plugin.load(registry, { config, onNotice, ownerStatus, generated })`.
   * `onNotice(owner, lane, notice)` gets each notice a pushing profile (a, b)
   * decides to deliver; `ownerStatus(owner)` says 'idle' or 'running'.
   * @param {Registry} registry
   * @param {PluginOptions} [options]
   * @returns {Promise<Plugin>}
   */
  static async load(registry, { config = '{}', onNotice, ownerStatus, generated } = {}) {
    const guest = await Guest.load(registry, generated);
    return new Plugin(guest, registry, config, onNotice, ownerStatus);
  }

  /**
   * @param {Guest} guest
   * @param {Registry} registry
   * @param {string | object} configJson
   * @param {PluginOptions['onNotice']} [onNotice]
   * @param {PluginOptions['ownerStatus']} [ownerStatus]
   */
  constructor(guest, registry, configJson, onNotice, ownerStatus) {
    this.#guest = guest;
    this.#registry = registry;
    /**
     * The validated config.
     * @type {Readonly<GuestConfig>}
     * @readonly
     */
    this.config = guest.configure(typeof configJson === 'string' ? configJson : JSON.stringify(configJson));
    // This reference host runs the seed surfaces only; the extensions need a
    // registry with input, retained lines and ports (the Rust host has them).
    if (this.config.extensions.length > 0) {
      throw new Error(`this host does not support extensions (asked for: ${this.config.extensions.join(', ')})`);
    }
    this.#onNotice = onNotice ?? (() => {});
    this.#ownerStatus = ownerStatus ?? (() => 'running');
    registry.onJobDone((job, owner) => this.#onDone(job, owner));
  }

  /**
   * The guest's start tool (`bash`) followed by its job tools, as the model
   * receives them.
   * @returns {ToolDefinition[]}
   */
  toolDefinitions() {
    return [this.#guest.startTool(this.config), ...this.#guest.toolDefinitions(this.config)];
  }

  /** @returns {PromptSection | null} */
  systemPrompt() { return this.#guest.systemPrompt(this.config); }

  /**
   * Runs one tool call for `caller` (an owner id, or null): `{ text, isError, value }`.
   * A call that waits does so here, on the registry; `signal` aborts such a wait.
   * @param {string | null} caller
   * @param {string} tool
   * @param {object | string} args
   * @param {AbortSignal} [signal]
   * @returns {Promise<ToolResult>}
   */
  async invoke(caller, tool, args, signal) {
    const argsJson = typeof args === 'string' ? args : JSON.stringify(args);
    this.#startName ??= this.#guest.startTool(this.config).name;
    if (tool === this.#startName) return this.#start(caller, argsJson);
    let out = this.#guest.invokeStep(caller, this.config, tool, argsJson);
    for (let n = 0; out.wait && n < MAX_WAITS_PER_CALL; n += 1) {
      /** @type {Job | WaitOutcome | RegistryError} */
      let waited;
      try {
        waited = await this.#registry.wait(caller, out.wait.jobId, out.wait.timeoutMs, signal);
      } catch (e) {
        if (!(e instanceof RegistryError)) throw e;
        waited = e;
      }
      out = this.#guest.invokeStep(caller, this.config, tool, argsJson, waited);
    }
    if (out.wait) return { text: 'Error: plugin failed: the guest asked to wait too many times', isError: true, value: null };
    return out.done;
  }

  /**
   * The start tool: the guest checks the arguments and words the answer; the
   * registry starts `bash -c` for the owner.
   * @param {string | null} caller
   * @param {string} argsJson
   * @returns {ToolResult}
   */
  #start(caller, argsJson) {
    const checked = this.#guest.checkStart(this.config, argsJson, MAX_COMMAND_BYTES);
    const request = checked.ok;
    if (request === undefined) return /** @type {ToolResult} */ (checked.err);
    /** @type {import('./guest.js').StartError | undefined} */
    let refused;
    if (request.workdir !== undefined) {
      try {
        if (!statSync(request.workdir).isDirectory()) refused = { tag: 'refused', val: `invalid workdir: ${request.workdir} is not a directory` };
      } catch (e) {
        refused = { tag: 'refused', val: `invalid workdir: ${request.workdir}: ${/** @type {Error} */ (e).message}` };
      }
    }
    /** @param {import('./types.js').Step} step */
    // This host offers no extensions, so no start yields: every answer is done.
    const done = (step) => step.done ?? { text: 'Error: plugin failed: an unexpected wait', isError: true, value: null };
    if (refused) return done(this.#guest.started(this.config, request, { tag: 'err', val: refused }));
    const id = this.#registry.startShell(request.command, { owner: caller, cwd: request.workdir });
    return done(this.#guest.started(this.config, request, { tag: 'ok', val: { tag: 'new', val: id } }));
  }

  /**
   * A person wrote to `owner`: its wake budget is full again.
   * @param {string} owner
   */
  personWrote(owner) { this.#wakes.delete(owner); }

  /**
   * Profile C: the one update for `owner`'s next step, or null.
   * @param {string} owner
   * @returns {Notice | null}
   */
  pullNotice(owner) {
    const jobs = this.#pulled.get(owner) ?? [];
    this.#pulled.delete(owner);
    return jobs.length ? this.#guest.batchNotice(owner, this.config, jobs) : null;
  }

  /**
   * @param {Job} job
   * @param {string | null} owner
   */
  #onDone(job, owner) {
    if (this.config.profile === 'c') {
      if (owner !== null) this.#pulled.set(owner, [...(this.#pulled.get(owner) ?? []), job]);
      return;
    }
    const current = this.#registry.inspect(job.id);
    if (!current) return;
    const state = owner === null ? null : { status: this.#ownerStatus(owner), wakesSpent: this.#wakes.get(owner) ?? 0 };
    const decision = this.#guest.deliver(this.config, current, state);
    if (!decision || !this.#registry.claimNotice(job.id)) return;
    if (decision.lane === 'followup') this.#wakes.set(owner, (this.#wakes.get(owner) ?? 0) + 1);
    this.#onNotice(owner, decision.lane, decision.notice);
  }
}
