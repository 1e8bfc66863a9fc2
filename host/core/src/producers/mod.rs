//! The producers that ship with the host: the background shell ([`bash`]) and
//! its [`containment`], and in-process work ([`inproc`]). Both write their
//! jobs' output to a [`crate::capture`], which the registry reads.
//!
//! Each is re-exported at the crate root under its own name (`host::bash`, ...).

pub mod bash;
pub mod containment;
pub mod fence;
pub mod inproc;
pub mod names;
mod ports;
#[cfg(feature = "runners")]
pub mod runners;
pub mod seam;
pub(crate) mod spawn;
