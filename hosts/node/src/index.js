// Background jobs for LLM agent harnesses, from Node: the tool-jobs component
// (WIT harness:jobs@0.5.0) transpiled by jco, over a registry of real processes.

export { Guest, GuestError, RegistryError, VERSION } from './guest.js';
export { Plugin } from './plugin.js';
export { Registry } from './registry.js';
