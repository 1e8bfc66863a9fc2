//! The `jobs-host` binary as a process: real MCP clients, scripted shells,
//! signals and hostile jobs. One test binary, one module per area.

// MCP logging notifications: the channel notices use.
#![allow(deprecated)]

mod cli;
mod console;
mod containment;
mod durable;
mod harnesses;
mod tasks;
mod top;
