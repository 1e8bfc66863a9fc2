//! `jobs-host wasm`: the built-in component, for hosts in other languages.

use std::path::Path;
use std::process::ExitCode;

pub(crate) fn write_wasm(out: &Path) -> ExitCode {
    // A directory gets the versioned artifact's name, which it prints: a
    // release script learns the name from the binary, not from a guess.
    let versioned;
    let out = if out.is_dir() {
        versioned = out.join(versioned_name());
        println!("{}", versioned.display());
        versioned.as_path()
    } else {
        out
    };
    match std::fs::write(out, host::plugin::TOOL_JOBS_WASM) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("jobs-host: cannot write {}: {e}", out.display());
            ExitCode::FAILURE
        }
    }
}

/// `tool-jobs-<version>.wasm`, the version being the WIT package's
/// (`harness:jobs@0.9.0` gives `tool-jobs-0.9.0.wasm`).
fn versioned_name() -> String {
    let version = host::plugin::WIT_PACKAGE
        .rsplit_once('@')
        .map_or("", |(_, version)| version);
    format!("tool-jobs-{version}.wasm")
}
