//! One file per subcommand, as wasmtime's `src/commands/` has it. `main.rs`
//! dispatches to them; those that run a host here return how they ended.

mod check;
mod check_runner;
mod durable;
mod mcp;
mod report;
mod shell;
mod tools;
mod wasm;

pub(crate) use check::check;
pub(crate) use check_runner::check_runner;
pub(crate) use durable::{daemon_command, is_daemon_command};
pub(crate) use mcp::mcp;
pub(crate) use shell::shell;
pub(crate) use tools::tools;
pub(crate) use wasm::write_wasm;

/// What a subcommand does once its host is set up.
use anyhow::Result;

pub(crate) type RunFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Ended>>>>;

/// How a subcommand's run ended.
pub(crate) enum Ended {
    /// Its work is done (or a person said `exit`).
    Done,
    /// As the signal of this number would have ended it: ctrl-c twice at the
    /// console's prompt (`SIGINT`), its terminal hung up (`SIGHUP`).
    BySignal(i32),
}
