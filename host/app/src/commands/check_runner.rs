//! `jobs-host check-runner NAME`: whether a runner's engine answers, which
//! version it runs, and whether it takes our token.

use std::process::ExitCode;

use host::runners::Engine;
use host::runners::ray::client::{EngineError, RayClient};
use host::runners::slurm::cli as slurm;

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
            "jobs-host: no runner named {name:?} (runners: {}); name one with --runner {name}=http://HOST:PORT, --runner {name}=slurm or `runner` in the config file",
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        );
        return ExitCode::from(2);
    };
    let address = match &spec.engine {
        Engine::Ray { address } => address,
        Engine::Slurm { partition } => {
            return check_slurm(name, partition.as_deref(), settings).await;
        }
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
    let client = match RayClient::new(address, token) {
        Ok(client) => client,
        Err(e) => {
            println!("runner {name}: {e}");
            return ExitCode::from(1);
        }
    };
    println!("runner {name}: {address}");
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

/// A Slurm runner is usable when this machine's Slurm commands answer and
/// the cluster would take a job (`sbatch --test-only`), and its output
/// directory can be made.
async fn check_slurm(name: &str, partition: Option<&str>, settings: &Settings) -> ExitCode {
    println!(
        "runner {name}: slurm, partition {}",
        partition.unwrap_or("(the cluster's default)")
    );
    match slurm::version().await {
        Ok(version) => println!("engine: {version}"),
        Err(e) => {
            println!("usable: no: {e}");
            return ExitCode::from(1);
        }
    }
    let dir = match settings.slurm_dir() {
        Ok(dir) => dir,
        Err(e) => {
            println!("usable: no: {e}");
            return ExitCode::from(1);
        }
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        println!("usable: no: cannot make {}: {e}", dir.display());
        return ExitCode::from(1);
    }
    println!("output directory: {}", dir.display());
    let mut args: Vec<String> = partition
        .map(|p| format!("--partition={p}"))
        .into_iter()
        .collect();
    args.extend(settings.slurm_arg.clone().unwrap_or_default());
    args.push(format!("--output={}", dir.join("check-%j.out").display()));
    match slurm::sbatch_test(&args, "#!/bin/bash\ntrue\n").await {
        Ok(()) => {
            println!("usable: yes");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("usable: no: {e}");
            ExitCode::from(1)
        }
    }
}
