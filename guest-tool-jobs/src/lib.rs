//! The tool-jobs guest: the model-facing half of background jobs.
//!
//! What the model sees of a call is decided here: the tool schemas and
//! descriptions, argument checks, rendering, byte caps, and completion-notice
//! text. (What a job's outcome says, its exit code or signal, comes from the
//! host that ran it, in the contract's words.) The logic is
//! plain Rust over the [`model::JobsView`] trait, so it compiles natively for unit
//! tests and benchmarks; on `wasm32` a thin shim (the `component` module) exports it through
//! the `harness:jobs` world, with the host's `owner-scope` capability as the view.
//!
//! The guest keeps no state between calls: the host passes the validated
//! configuration back into every call.

pub mod caps;
pub mod config;
pub mod extensions;
pub mod model;
pub mod notice;
pub mod render;
pub mod start;
pub mod surface;
pub mod wording;

#[cfg(target_arch = "wasm32")]
mod alloc;
#[cfg(target_arch = "wasm32")]
mod component;

#[cfg(target_arch = "wasm32")]
#[global_allocator]
static GUEST_ALLOCATOR: alloc::GuestAllocator = alloc::GuestAllocator;
