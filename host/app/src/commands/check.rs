//! `jobs-host check`: whether this host can run a plugin component.

use std::path::Path;
use std::process::ExitCode;

use serde_json::json;

use host::{PluginRuntime, SandboxLimits};

/// Exit codes: 0 runnable, 1 not runnable here, 2 unreadable. With `json`,
/// one object: `component`, `imports`, `exports`, `runnable`, and `world`
/// and `wasi` or `reason`.
pub(crate) fn check(path: &Path, cache_dir: Option<&Path>, json: bool) -> ExitCode {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!("jobs-host: cannot read {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    let shown = path.display().to_string();
    let (imports, exports) = match host::plugin::inspect_component(&bytes) {
        Ok(found) => found,
        Err(e) => {
            let reason = format!("not a component this host can load: {e}");
            if json {
                let out = json!({"component": shown, "runnable": false, "reason": reason});
                println!("{out}");
            } else {
                println!("{shown}: {reason}");
            }
            return ExitCode::from(1);
        }
    };
    let world = host::plugin::wit_interface("tool-jobs");
    let runtime = PluginRuntime::from_component_bytes(&bytes, SandboxLimits::default(), cache_dir);
    if json {
        let mut out = json!({"component": shown, "imports": imports, "exports": exports});
        match &runtime {
            Ok(runtime) => {
                out["runnable"] = true.into();
                out["world"] = world.into();
                out["wasi"] = runtime.imports_wasi().into();
            }
            Err(e) => {
                out["runnable"] = false.into();
                out["reason"] = e.to_string().into();
            }
        }
        println!("{out}");
        return if runtime.is_ok() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        };
    }
    println!("{shown}");
    println!("imports:");
    for name in &imports {
        println!("  {name}");
    }
    println!("exports:");
    for name in &exports {
        println!("  {name}");
    }
    match runtime {
        Ok(runtime) if runtime.imports_wasi() => {
            println!(
                "runnable: yes (world {world}; its WASI imports get a deny-by-default context)"
            );
            ExitCode::SUCCESS
        }
        Ok(_) => {
            println!("runnable: yes (world {world})");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("runnable: no: {e}");
            ExitCode::from(1)
        }
    }
}
