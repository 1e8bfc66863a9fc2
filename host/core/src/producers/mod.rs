//! The producers that ship with the host, and what they share: the background
//! shell ([`bash`]) and its [`containment`], in-process work ([`inproc`]), and
//! bounded output capture ([`output`], [`excerpt`]), and the one thread jobs are
//! spawned from (`spawner`).
//!
//! Each is re-exported at the crate root under its own name (`host::bash`, ...).

pub mod bash;
pub mod containment;
pub mod excerpt;
pub mod inproc;
mod lines;
pub mod output;
pub mod ports;
mod spawner;
mod vfork;
