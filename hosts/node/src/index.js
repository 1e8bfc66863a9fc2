// Background jobs for LLM agent harnesses, from Node: the tool-jobs component
// (WIT harness:jobs@0.9.0) transpiled by jco, over a registry of real processes.

export { Guest, GuestError, RegistryError, VERSION } from './guest.js';
export { Plugin } from './plugin.js';
export { Registry } from './registry.js';
export * from './types.js';

/** @typedef {import('./guest.js').OwnerScope} OwnerScope */
/** @typedef {import('./plugin.js').PluginOptions} PluginOptions */
/** @typedef {import('./registry.js').RegistryOptions} RegistryOptions */
/** @typedef {import('./registry.js').StartOptions} StartOptions */
