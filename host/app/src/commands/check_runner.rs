//! `jobs-host check-runner NAME`: whether a runner's engine answers, which
//! version it runs, and whether it takes our token.

use std::process::ExitCode;

use host::runners::Engine;
use host::runners::ray::client::RayClient;
use host::runners::slurm::cli as slurm;

use super::report::Report;
use crate::settings::Settings;

/// Exit codes, as `check`'s: 0 the engine answers and takes the token, 1 it
/// does not (down, refusing, too old), 2 no such runner or unreadable
/// settings. What it finds is printed as lines, or with `json` as one
/// object (`runner`, `address` or `partition`, `engine`, ..., `usable` and
/// `reason`).
pub(crate) async fn check_runner(name: &str, settings: &Settings, json: bool) -> ExitCode {
    let mut report = Report::new(json);
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
            return check_slurm(report, name, partition.as_deref(), settings).await;
        }
    };
    report.field("runner", name, &format!("{name}, Ray at {address}"));
    report.json_only("address", address.as_str());
    let token = match host::runners::ray_token() {
        Ok(token) => token,
        Err(e) => return fail(report, &e.to_string()),
    };
    let source = token
        .as_ref()
        .map_or_else(|| "none".to_owned(), |t| t.source.clone());
    let client = match RayClient::new(address, token) {
        Ok(client) => client,
        Err(e) => return fail(report, &e.to_string()),
    };
    let version = match client.version().await {
        Ok(version) => version,
        Err(e) => return fail(report, &e.to_string()),
    };
    report.say("engine", &format!("Ray {}", version.ray_version));
    if !version.has_exit_codes() {
        report.field(
            "exit codes",
            false,
            "no (Ray before 2.8 reports none: jobs that fail by themselves read failed, and memory_bytes is refused)",
        );
    }
    report.say("token", &source);
    match client.check_auth().await {
        Ok(()) => {
            report.say("auth", "ok");
            report.verdict("usable", None);
            ExitCode::SUCCESS
        }
        Err(e) => fail(report, &e.to_string()),
    }
}

/// `usable: no: why`, exit code 1.
fn fail(report: Report, why: &str) -> ExitCode {
    report.verdict("usable", Some(why));
    ExitCode::from(1)
}

/// A Slurm runner is usable when this machine's Slurm commands answer and
/// the cluster would take a job (`sbatch --test-only`), and its output
/// directory can be made.
async fn check_slurm(
    mut report: Report,
    name: &str,
    partition: Option<&str>,
    settings: &Settings,
) -> ExitCode {
    report.field(
        "runner",
        name,
        &format!(
            "{name}, Slurm partition {}",
            partition.unwrap_or("(the cluster's default)")
        ),
    );
    report.json_only("partition", partition);
    match slurm::version().await {
        Ok(version) => report.say("engine", &version),
        Err(e) => return fail(report, &e.to_string()),
    }
    let dir = match settings.slurm_dir() {
        Ok(dir) => dir,
        Err(e) => return fail(report, &e.to_string()),
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return fail(report, &format!("cannot make {}: {e}", dir.display()));
    }
    report.say("output directory", &dir.display().to_string());
    let mut args: Vec<String> = partition
        .map(|p| format!("--partition={p}"))
        .into_iter()
        .collect();
    args.extend(settings.slurm_arg.clone().unwrap_or_default());
    args.push(format!("--output={}", dir.join("check-%j.out").display()));
    match slurm::sbatch_test(&args, "#!/bin/bash\ntrue\n").await {
        Ok(()) => {
            report.verdict("usable", None);
            ExitCode::SUCCESS
        }
        Err(e) => fail(report, &e.to_string()),
    }
}
