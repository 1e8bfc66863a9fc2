//! `jobs-host wasm`: the built-in component, for hosts in other languages.

use std::path::Path;
use std::process::ExitCode;

pub(crate) fn write_wasm(out: &Path) -> ExitCode {
    match std::fs::write(out, host::plugin::TOOL_JOBS_WASM) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("jobs-host: cannot write {}: {e}", out.display());
            ExitCode::FAILURE
        }
    }
}
