//! `jobs-host check-runner NAME`: whether a runner's engine answers, which
//! version it runs, and whether it takes our token.

use std::process::ExitCode;

use host::runners::ray::client::{EngineError, RayClient};

use crate::settings::Settings;

/// Exit codes, as `check`'s: 0 the engine answers and takes the token, 1 it
/// does not (down, refusing, too old), 2 no such runner or unreadable
/// settings.
pub(crate) async fn check_runner(name: &str, settings: &Settings) -> ExitCode {
    let specs = match settings.runner_specs() {
        Ok(specs) => specs,
        Err(e) => {
            eprintln!("jobs-host: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(spec) = specs.iter().find(|s| s.name == name) else {
        let known: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        eprintln!(
            "jobs-host: no runner named {name:?} (runners: {}); name one with --runner {name}=http://HOST:PORT or `runner` in the config file",
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        );
        return ExitCode::from(2);
    };
    let token = match host::runners::ray_token() {
        Ok(token) => token,
        Err(e) => {
            println!("runner {name}: {e}");
            return ExitCode::from(1);
        }
    };
    let source = token
        .as_ref()
        .map_or_else(|| "none".to_owned(), |t| t.source.clone());
    let client = match RayClient::new(&spec.address, token) {
        Ok(client) => client,
        Err(e) => {
            println!("runner {name}: {e}");
            return ExitCode::from(1);
        }
    };
    println!("runner {name}: {}", spec.address);
    let version = match client.version().await {
        Ok(version) => version,
        Err(e) => return fail(&e),
    };
    println!("engine: Ray {}", version.ray_version);
    if !version.has_exit_codes() {
        println!(
            "exit codes: no (Ray before 2.8 reports none: jobs that fail by themselves read failed, and memory_bytes is refused)"
        );
    }
    println!("token: {source}");
    match client.check_auth().await {
        Ok(()) => {
            println!("auth: ok");
            println!("usable: yes");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

fn fail(error: &EngineError) -> ExitCode {
    println!("usable: no: {error}");
    ExitCode::from(1)
}
