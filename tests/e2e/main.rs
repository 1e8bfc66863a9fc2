//! End-to-end tests: the real tool-jobs component through the real host, with
//! real processes. One binary (one link of wasmtime and Cranelift), one module
//! per area; `fixture` holds what they share.

mod fixture;

mod artifact;
mod bad_input;
mod bash;
mod containment;
mod delivery;
mod extensions;
mod fence;
mod hostile;
mod inproc;
mod layout;
mod profile_a;
mod profile_b;
mod profile_c;
mod randomized;
mod randomized_c;
mod registry;
mod sandbox;
mod scale;
mod start_tool;
mod teardown;
mod terminal;
mod wasi;
