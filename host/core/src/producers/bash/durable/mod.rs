//! Durable jobs: jobs that outlive their host (a daemon killed, crashed or
//! upgraded) with their output and their end kept, by the process each
//! piece of code runs in, as conmon-rs keeps its monitor's mechanisms apart.
//!
//! - **In the host:** `job_file` (a job's file: its layout and reading it
//!   back), `spare` (files of dropped jobs kept for the next ones),
//!   `launch` (making a job's file and wrapping its spawn in a monitor),
//!   `adopt` (taking on a dead host's jobs from their files).
//! - **In each job's monitor:** `monitor` (its main loop and signals; the
//!   relay of each stream into the file; the session's lease).
//! - **In the monitors' parent:** `zygote` (the host's side of it, its
//!   wire, and the parent process that forks each monitor).

pub(crate) mod adopt;
pub mod job_file;
pub(crate) mod launch;
pub mod monitor;
pub(crate) mod spare;
pub(crate) mod zygote;
