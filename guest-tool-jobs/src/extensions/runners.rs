//! Jobs on a cluster engine (extension `runners`): the start tool's `runner`
//! and `resources`, offered only when the mount names runners; what a job on
//! an engine cannot have (input, a terminal, this host's sandbox or working
//! directory, per-process limits), refused in words before anything runs;
//! and where a job runs, as its list row and status show it.

use serde_json::{Map, Value, json};

use crate::config::Config;
use crate::model::{JobSnapshot, Resources, schema};

/// The most engine resources a start may name besides CPUs, GPUs and memory.
pub const MAX_CUSTOM_RESOURCES: usize = 32;

/// The longest name of an engine resource, in bytes.
pub const MAX_RESOURCE_NAME_BYTES: usize = 64;

/// The largest integer a JSON number carries exactly (2^53 - 1).
const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

/// Whether the start tool offers runners: the extension is on and the mount
/// names at least one.
pub fn offered(config: &Config) -> bool {
    config.extensions.runners && !config.runners.is_empty()
}

/// What the start tool's description adds when runners are offered.
pub fn description(config: &Config) -> String {
    format!(
        " With runner it runs on a cluster engine instead of this host (runners: {}): it is read, waited on, listed and killed as any job (stdout and stderr as one stream where its engine merges them, as Ray does), and takes resources (cpus, gpus, memory_bytes, and the engine's own by name); it has no stdin, terminal, workdir or sandbox of this host's.",
        config.runners.join(", ")
    )
}

/// The start tool's `runner` and `resources` properties.
pub fn properties(config: &Config) -> [(&'static str, Value); 2] {
    let amount = |what: &str| json!({"type": "number", "minimum": 0, "description": what});
    [
        (
            "runner",
            schema::one_of(
                &config
                    .runners
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
                "Run the job on this runner's cluster engine instead of this host.",
            ),
        ),
        (
            "resources",
            json!({
                "type": "object",
                "description": "What the job needs of its runner's engine (only with runner); any other key is one of the engine's resources by name, with its amount.",
                "properties": {
                    "cpus": amount("CPUs, whole or fractional."),
                    "gpus": amount("GPUs, whole or fractional."),
                    "memory_bytes": {"type": "integer", "minimum": 0, "description": "Memory, in bytes."}
                },
                "additionalProperties": {"type": "number", "minimum": 0}
            }),
        ),
    ]
}

/// A start's `runner` (one of the mount's) and `resources` (only with a
/// runner).
///
/// # Errors
///
/// The model's words for what is wrong.
pub fn runner_args(
    config: &Config,
    runner: Option<Value>,
    resources: Option<Value>,
) -> Result<(Option<String>, Option<Resources>), String> {
    let runner = match runner {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) if config.runners.contains(&name) => Some(name),
        Some(Value::String(name)) => {
            return Err(format!(
                "invalid runner: \"{name}\" is not one of this session's runners ({})",
                config.runners.join(", ")
            ));
        }
        Some(_) => return Err("invalid arguments: \"runner\" must be a string".to_owned()),
    };
    let resources = match resources {
        None | Some(Value::Null) => None,
        Some(_) if runner.is_none() => {
            return Err("invalid resources: only a job on a runner takes resources".to_owned());
        }
        Some(Value::Object(map)) => Some(parse_resources(map)?),
        Some(_) => return Err("invalid arguments: \"resources\" must be an object".to_owned()),
    };
    Ok((runner, resources))
}

fn parse_resources(map: Map<String, Value>) -> Result<Resources, String> {
    let amount = |key: &str, v: &Value| {
        v.as_f64()
            .filter(|n| n.is_finite() && *n >= 0.0)
            .ok_or_else(|| {
                format!("invalid resources: {key} must be a number of at least 0, got {v}")
            })
    };
    let mut resources = Resources::default();
    for (key, v) in &map {
        match key.as_str() {
            "cpus" => resources.cpus = Some(amount(key, v)?),
            "gpus" => resources.gpus = Some(amount(key, v)?),
            "memory_bytes" => {
                resources.memory_bytes = Some(
                    v.as_u64()
                        .filter(|n| *n <= MAX_SAFE_INTEGER)
                        .ok_or_else(|| {
                            format!("invalid resources: memory_bytes must be a whole number of bytes, got {v}")
                        })?,
                );
            }
            name => {
                let fits = !name.is_empty()
                    && name.len() <= MAX_RESOURCE_NAME_BYTES
                    && !name.chars().any(char::is_control);
                if !fits {
                    return Err(format!(
                        "invalid resources: a resource name must be 1 to {MAX_RESOURCE_NAME_BYTES} bytes without control characters, got {name:?}"
                    ));
                }
                if resources.custom.len() == MAX_CUSTOM_RESOURCES {
                    return Err(format!(
                        "invalid resources: at most {MAX_CUSTOM_RESOURCES} resources besides cpus, gpus and memory_bytes"
                    ));
                }
                resources.custom.push((name.to_owned(), amount(name, v)?));
            }
        }
    }
    Ok(resources)
}

/// What a job on `runner` cannot have, refused before anything runs: the
/// first of these a start asks for.
///
/// # Errors
///
/// The model's words for it.
pub fn refuse_what_engines_lack(runner: &str, asked: &RunnerAsks) -> Result<(), String> {
    let refusal = if asked.stdin {
        Some(("stdin", "has no stdin"))
    } else if asked.tty {
        Some(("tty", "has no terminal"))
    } else if asked.workdir {
        Some(("workdir", "runs in its engine's working directory"))
    } else if asked.sandbox {
        Some(("sandbox", "runs in its engine's sandbox, not this host's"))
    } else if asked.cpu_seconds {
        Some((
            "cpu_seconds",
            "takes resources, not this host's process limits",
        ))
    } else if asked.memory_bytes {
        Some((
            "memory_bytes",
            "takes resources, not this host's process limits",
        ))
    } else {
        None
    };
    match refusal {
        Some((what, why)) => Err(format!(
            "invalid {what}: a job on runner \"{runner}\" {why}"
        )),
        None => Ok(()),
    }
}

/// What a start asked for that a job on an engine cannot have.
#[derive(Debug, Default)]
pub struct RunnerAsks {
    /// `stdin: true`.
    pub stdin: bool,
    /// A terminal.
    pub tty: bool,
    /// A working directory.
    pub workdir: bool,
    /// A sandbox of its own.
    pub sandbox: bool,
    /// `cpu_seconds`.
    pub cpu_seconds: bool,
    /// `memory_bytes` (the limit, not the resource).
    pub memory_bytes: bool,
}

/// Where a job runs, as its list row and status show it (extension
/// `runners`): `[ray: raysubmit_Xy12 pending: waiting for resources]`; `None`
/// without the extension or for a job of this host.
pub fn placement_of(config: &Config, job: &JobSnapshot) -> Option<String> {
    if !config.extensions.runners {
        return None;
    }
    job.placement.as_ref().map(|p| format!("[{p}]"))
}
