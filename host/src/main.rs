//! `jobs-host`: runs background shell jobs and shows, through the tool-jobs
//! component, exactly what a model would see.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use host::bash::{BashConfig, BashProducer, BashRequest, started_text};
use host::{JobRegistry, Lane, Mount, Owner, PluginRuntime, SandboxLimits};
use serde_json::json;

#[derive(Parser)]
#[command(
    version,
    about = "Background jobs for LLM agents: a wasmtime host for the tool-jobs component"
)]
struct Cli {
    /// Where the compiled component is cached (default: $XDG_CACHE_HOME/jobs-host).
    #[arg(long, global = true)]
    cache_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Start background shell jobs for one owner and drive job_list, job_output and
    /// job_kill through the component, printing what the model sees.
    Demo {
        /// A command to run in the background and collect (repeatable).
        #[arg(long = "run", value_name = "COMMAND")]
        runs: Vec<String>,
        /// Working directory for the commands.
        #[arg(long)]
        workdir: Option<PathBuf>,
    },
}

fn default_cache_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|d| d.join("jobs-host"))
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let cache_dir = cli.cache_dir.or_else(default_cache_dir);
    match cli.command.unwrap_or(Command::Demo {
        runs: Vec::new(),
        workdir: None,
    }) {
        Command::Demo { runs, workdir } => demo(cache_dir, runs, workdir).await,
    }
}

/// Prints one tool call and its result the way a transcript would show them.
async fn call(mount: &Mount, owner: &Owner, tool: &str, args: serde_json::Value) {
    let out = mount.invoke(Some(owner), tool, &args.to_string()).await;
    println!("> {tool} {args}");
    for line in out.text.lines() {
        println!("  {line}");
    }
    println!();
}

async fn demo(
    cache_dir: Option<PathBuf>,
    runs: Vec<String>,
    workdir: Option<PathBuf>,
) -> Result<()> {
    let runtime = Arc::new(
        PluginRuntime::new(SandboxLimits::default(), cache_dir.as_deref())
            .context("loading the tool-jobs component")?,
    );
    let registry = JobRegistry::default();
    let mount = Mount::new(runtime, registry.clone(), "{}")
        .await
        .context("mounting the tool-jobs component")?;
    let bash = BashProducer::new(
        registry.clone(),
        BashConfig {
            default_workdir: workdir,
            ..BashConfig::default()
        },
    )
    .context("creating the spill directory")?;
    let owner = Owner::new("demo-session");
    registry.agents().register(&owner);

    // Every settlement, so the demo can wait for the last one without sleeping.
    let (settled_tx, mut settled) = tokio::sync::mpsc::unbounded_channel();
    let _watch = registry.on_job_done(move |job, _| {
        let _ = settled_tx.send(job.id.clone());
    });
    let start = |command: &str| -> Result<String> {
        let id = bash
            .start(
                Some(owner.clone()),
                BashRequest {
                    command: command.to_owned(),
                    ..BashRequest::default()
                },
            )
            .map_err(|e| anyhow::anyhow!("Error: {e}"))?;
        println!("> bash {{\"command\":{command:?},\"run_in_background\":true}}");
        println!("  {}\n", started_text(&id));
        Ok(id)
    };

    let mut ids = Vec::new();
    if runs.is_empty() {
        // The built-in script: collect one job, kill another, and let a third
        // finish unobserved so its completion notice arrives.
        let build = start(
            "for i in 1 2 3; do echo \"step $i\"; sleep 0.2; done; echo 'warning: flaky' >&2",
        )?;
        let server = start("sleep 30")?;
        let quiet = start("sleep 0.5; echo built")?;
        call(&mount, &owner, "job_list", json!({})).await;
        call(
            &mount,
            &owner,
            "job_output",
            json!({"job_id": build, "wait": true}),
        )
        .await;
        call(
            &mount,
            &owner,
            "job_kill",
            json!({"job_id": server, "reason": "demo is over"}),
        )
        .await;
        call(
            &mount,
            &owner,
            "job_output",
            json!({"job_id": server, "wait": true}),
        )
        .await;
        ids.extend([build, server, quiet]);
    } else {
        for command in &runs {
            ids.push(start(command)?);
        }
        call(&mount, &owner, "job_list", json!({})).await;
        for id in &ids {
            call(
                &mount,
                &owner,
                "job_output",
                json!({"job_id": id, "wait": true}),
            )
            .await;
        }
    }

    // Wait for every job to settle, then for the mount to deliver its notices.
    let mut done = std::collections::HashSet::new();
    while done.len() < ids.len() {
        match settled.recv().await {
            Some(id) => {
                done.insert(id);
            }
            None => break,
        }
    }
    mount.flush_notices().await;
    for (lane, notice) in owner.inbox().map(|i| i.messages()).unwrap_or_default() {
        let lane = match lane {
            Lane::Inject => "inject",
            Lane::Followup => "followup",
        };
        println!(
            "notice ({lane}) for {}:\n  {}\n",
            owner.session_id(),
            notice.text
        );
    }
    call(&mount, &owner, "job_list", json!({})).await;
    Ok(())
}
