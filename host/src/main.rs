//! `jobs-host`: runs background shell jobs and shows, through the tool-jobs
//! component, exactly what a model would see.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use host::bash::{BashConfig, BashProducer, BashRequest, started_text};
use host::{JobRegistry, Mount, Owner, PluginRuntime, SandboxLimits};
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

    // The built-in script kills its second job; commands given with --run are
    // collected to the end.
    let kill_rest = runs.is_empty();
    let commands = if runs.is_empty() {
        vec![
            "for i in 1 2 3; do echo \"step $i\"; sleep 0.2; done; echo 'warning: flaky' >&2"
                .to_owned(),
            "sleep 30".to_owned(),
        ]
    } else {
        runs
    };
    let mut ids = Vec::new();
    for command in &commands {
        let id = bash
            .start(
                Some(owner.clone()),
                BashRequest {
                    command: command.clone(),
                    ..BashRequest::default()
                },
            )
            .map_err(|e| anyhow::anyhow!("Error: {e}"))?;
        println!("> bash {{\"command\":{command:?},\"run_in_background\":true}}");
        println!("  {}\n", started_text(&id));
        ids.push(id);
    }

    call(&mount, &owner, "job_list", json!({})).await;
    let (first, rest) = ids.split_first().expect("at least one job");
    call(
        &mount,
        &owner,
        "job_output",
        json!({"job_id": first, "wait": true}),
    )
    .await;
    for id in rest {
        if kill_rest {
            call(
                &mount,
                &owner,
                "job_kill",
                json!({"job_id": id, "reason": "demo is over"}),
            )
            .await;
        }
        call(
            &mount,
            &owner,
            "job_output",
            json!({"job_id": id, "wait": true}),
        )
        .await;
    }
    call(&mount, &owner, "job_list", json!({})).await;
    Ok(())
}
