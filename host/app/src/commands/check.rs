//! `jobs-host check`: whether this host can run a plugin component.

use std::path::Path;
use std::process::ExitCode;

use host::{PluginRuntime, SandboxLimits};

/// Exit codes: 0 runnable, 1 not runnable here, 2 unreadable.
pub(crate) fn check(path: &Path, cache_dir: Option<&Path>) -> ExitCode {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!("jobs-host: cannot read {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    let report = host::plugin::inspect_component(&bytes);
    let (imports, exports) = match report {
        Ok(found) => found,
        Err(e) => {
            println!(
                "{}: not a component this host can load: {e}",
                path.display()
            );
            return ExitCode::from(1);
        }
    };
    println!("{}", path.display());
    println!("imports:");
    for name in &imports {
        println!("  {name}");
    }
    println!("exports:");
    for name in &exports {
        println!("  {name}");
    }
    match PluginRuntime::from_component_bytes(&bytes, SandboxLimits::default(), cache_dir) {
        Ok(runtime) if runtime.imports_wasi() => {
            println!(
                "runnable: yes (world {}; its WASI imports get a deny-by-default context)",
                host::plugin::wit_interface("tool-jobs")
            );
            ExitCode::SUCCESS
        }
        Ok(_) => {
            println!(
                "runnable: yes (world {})",
                host::plugin::wit_interface("tool-jobs")
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("runnable: no: {e}");
            ExitCode::from(1)
        }
    }
}
