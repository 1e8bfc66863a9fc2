//! Replays the conformance vectors through a `tool-jobs` component in wasmtime.
//!
//! The host side is a scripted registry: each vector lists the jobs the host
//! presents, and the runner answers the guest's `owner-scope` calls from that
//! table by the rules in `conformance/README.md` (the same rules the Node and
//! Python runners follow). Every step's actual answer is kept in a canonical
//! JSON form, so runners in different languages can be compared answer by answer.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value, json};
use wasmtime::component::{Component, HasSelf, Linker, Resource, ResourceTable};
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

mod bindings {
    wasmtime::component::bindgen!({
        world: "tool-jobs",
        path: "../../wit",
        imports: { default: trappable },
        with: { "harness:jobs/registry.owner-scope": super::ScopeRep },
    });
}

use bindings::exports::harness::jobs::notices::{AgentStatus, OwnerState};
use bindings::exports::harness::jobs::tools::{
    CallOutcome, CompletionDelivery, Config as GuestConfig, ContentBlock, DisposedOwner, Extension,
    JobLimits, NoticeTransport, Profile, StartError, StartMade, StartRequest, ToolDefinition,
    ToolResult,
};
use bindings::harness::jobs::types as wit;
use bindings::{ToolJobs, ToolJobsPre};

/// The host side of the one scope a call gets.
pub struct ScopeRep;

/// One vector's outcome.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The vector's id.
    pub id: String,
    /// `None` when every step matched; else what differed first.
    pub failure: Option<String>,
    /// Each step's actual answer, canonical JSON.
    pub actual: Vec<Value>,
}

/// Loads every `*.json` file of `dir` (each an array of vectors), in name order.
///
/// # Errors
///
/// An unreadable directory or file, or a file that is not a JSON array.
pub fn load_vectors(dir: &Path) -> Result<Vec<Value>, String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut all = Vec::new();
    for file in files {
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        match serde_json::from_str(&text) {
            Ok(Value::Array(vs)) => all.extend(vs),
            _ => return Err(format!("{}: not a JSON array of vectors", file.display())),
        }
    }
    Ok(all)
}

/// A compiled component, ready to replay vectors.
pub struct Runner {
    engine: Engine,
    pre: ToolJobsPre<State>,
}

impl Runner {
    /// Compiles `wasm` (a `tool-jobs` component) and links the scripted host.
    ///
    /// # Errors
    ///
    /// When the bytes are not a component of the `tool-jobs` world.
    pub fn new(wasm: &[u8]) -> Result<Runner, String> {
        let engine = Engine::new(&Config::new()).map_err(|e| e.to_string())?;
        let component = Component::new(&engine, wasm).map_err(|e| format!("{e:#}"))?;
        let mut linker = Linker::<State>::new(&engine);
        ToolJobs::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).map_err(|e| e.to_string())?;
        // A guest built for wasm32-wasip2 imports WASI; it gets the host's
        // deny-by-default context.
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|e| e.to_string())?;
        let pre = linker
            .instantiate_pre(&component)
            .and_then(ToolJobsPre::new)
            .map_err(|e| format!("{e:#}"))?;
        Ok(Runner { engine, pre })
    }

    /// Replays one vector.
    pub fn run(&self, vector: &Value) -> Outcome {
        let id = vector["id"].as_str().unwrap_or("?").to_owned();
        let mut actual = Vec::new();
        let failure = self.replay(vector, &mut actual).err();
        Outcome {
            id,
            failure,
            actual,
        }
    }

    fn replay(&self, vector: &Value, actual: &mut Vec<Value>) -> Result<(), String> {
        let jobs = vector["jobs"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|j| match j {
                Value::Object(m) => Ok(m),
                _ => Err("a job is not an object".to_owned()),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut store = Store::new(
            &self.engine,
            State {
                table: ResourceTable::new(),
                wasi: host::plugin::wasi::deny_by_default(),
                jobs,
                now_ms: vector["now_ms"].as_u64().unwrap_or(0),
            },
        );
        let config = match vector.get("config").and_then(Value::as_str) {
            Some(text) => {
                let guest = self.instance(&mut store)?;
                let configured = guest
                    .harness_jobs_tools()
                    .call_configure(&mut store, text)
                    .map_err(|e| format!("configure trapped: {e:#}"))?;
                Some(configured.map_err(|e| format!("config {text} was refused: {e}"))?)
            }
            None => None,
        };
        for (n, step) in vector["steps"].as_array().into_iter().flatten().enumerate() {
            let got = self
                .step(&mut store, config.as_ref(), step)
                .map_err(|e| format!("step {n}: {e}"))?;
            actual.push(got.clone());
            check(step, &got).map_err(|e| format!("step {n}: {e}"))?;
        }
        Ok(())
    }

    fn instance(&self, store: &mut Store<State>) -> Result<ToolJobs, String> {
        // A fresh instance per call: the guest may keep nothing between calls.
        self.pre.instantiate(store).map_err(|e| format!("{e:#}"))
    }

    fn step(
        &self,
        store: &mut Store<State>,
        config: Option<&GuestConfig>,
        step: &Value,
    ) -> Result<Value, String> {
        let need = || config.ok_or_else(|| "the vector has no config".to_owned());
        let trap = |e: wasmtime::Error| format!("trap: {e:#}");
        if let Some(text) = step.get("configure").and_then(Value::as_str) {
            let guest = self.instance(store)?;
            let out = guest
                .harness_jobs_tools()
                .call_configure(&mut *store, text)
                .map_err(trap)?;
            return Ok(match out {
                Ok(c) => json!({"ok": config_json(&c)}),
                Err(e) => json!({"err": e}),
            });
        }
        if step.get("state").is_some() {
            return Ok(store.data().state_json());
        }
        let config = need()?;
        if let Some(tool) = step.get("invoke").and_then(Value::as_str) {
            let args = step["args"].as_str().unwrap_or("{}");
            let mut waits = step["waits"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter();
            let mut requests = Vec::new();
            let mut outcome = {
                let guest = self.instance(store)?;
                let scope = store.data_mut().scope()?;
                guest
                    .harness_jobs_tools()
                    .call_invoke(&mut *store, scope, config, tool, args)
                    .map_err(trap)?
            };
            loop {
                match outcome {
                    CallOutcome::Done(r) => {
                        let value = match &r.value {
                            Some(v) => serde_json::from_str(v)
                                .map_err(|e| format!("value is not JSON ({e}): {v}"))?,
                            None => Value::Null,
                        };
                        return Ok(json!({
                            "text": r.text, "is_error": r.is_error, "value": value, "waits": requests
                        }));
                    }
                    CallOutcome::Wait(request) => {
                        let mut asked =
                            json!({"job_id": request.job_id, "timeout_ms": request.timeout_ms});
                        if let Some(until) = &request.until {
                            asked["until"] = json!({"pattern": until.pattern, "quiet_ms": until.quiet_ms, "prompt_quiet_ms": until.prompt_quiet_ms});
                        }
                        requests.push(asked);
                        let Some(wait) = waits.next() else {
                            return Err(format!(
                                "the guest asked to wait ({}, {} ms), and the vector has no wait left",
                                request.job_id, request.timeout_ms
                            ));
                        };
                        let waited = store.data_mut().wait(&request.job_id, &wait["then"])?;
                        let guest = self.instance(store)?;
                        let scope = store.data_mut().scope()?;
                        outcome = guest
                            .harness_jobs_tools()
                            .call_resume(&mut *store, scope, config, tool, args, waited.as_ref())
                            .map_err(trap)?;
                    }
                }
            }
        }
        let guest = self.instance(store)?;
        if step.get("tool_definitions").is_some() || step.get("tool_annotations").is_some() {
            let defs = guest
                .harness_jobs_tools()
                .call_tool_definitions(&mut *store, config)
                .map_err(trap)?;
            let only_annotations = step.get("tool_annotations").is_some();
            let out = defs
                .iter()
                .map(|d| definition_json(d, only_annotations))
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(Value::Array(out));
        }
        if step.get("start_tool").is_some() {
            let tool = guest
                .harness_jobs_tools()
                .call_start_tool(&mut *store, config)
                .map_err(trap)?;
            return definition_json(&tool, false);
        }
        if let Some(args) = step.get("check_start").and_then(Value::as_str) {
            let checked = guest
                .harness_jobs_tools()
                .call_check_start(
                    &mut *store,
                    config,
                    args,
                    step["max_command_bytes"].as_u64().unwrap_or(65_536),
                )
                .map_err(trap)?;
            return Ok(match checked {
                Ok(r) => json!({"ok": request_json(&r)}),
                Err(r) => json!({"err": result_json(&r)?}),
            });
        }
        if let Some(started) = step.get("started") {
            let request = request_from(&started["request"]);
            let made = made_from(&started["made"])?;
            let result = guest
                .harness_jobs_tools()
                .call_started(&mut *store, config, &request, made.as_ref())
                .map_err(trap)?;
            return match result {
                CallOutcome::Done(r) => result_json(&r),
                // A yielding start waits on its job first; with the wait's
                // end given, the host resumes it under the start tool.
                CallOutcome::Wait(w) => {
                    let asked = json!({"job_id": w.job_id, "timeout_ms": w.timeout_ms});
                    let Some(wait) = started["waits"].get(0) else {
                        return Ok(json!({ "wait": asked }));
                    };
                    let waited = store.data_mut().wait(&w.job_id, &wait["then"])?;
                    let guest = self.instance(store)?;
                    let scope = store.data_mut().scope()?;
                    let args = started["args"].as_str().unwrap_or("{}");
                    match guest
                        .harness_jobs_tools()
                        .call_resume(&mut *store, scope, config, "bash", args, waited.as_ref())
                        .map_err(trap)?
                    {
                        CallOutcome::Done(r) => {
                            let mut out = result_json(&r)?;
                            out["waits"] = json!([asked]);
                            Ok(out)
                        }
                        CallOutcome::Wait(_) => Err("a resumed start asked to wait again".into()),
                    }
                }
            };
        }
        if let Some(tool) = step.get("describe_call").and_then(Value::as_str) {
            let card = guest
                .harness_jobs_tools()
                .call_describe_call(
                    &mut *store,
                    config,
                    tool,
                    step["args"].as_str().unwrap_or("{}"),
                )
                .map_err(trap)?;
            return Ok(card.map_or(
                Value::Null,
                |c| json!({"title": c.title, "kind": c.kind, "raw_input": c.raw_input}),
            ));
        }
        if step.get("system_prompt").is_some() {
            let section = guest
                .harness_jobs_tools()
                .call_system_prompt(&mut *store, config)
                .map_err(trap)?;
            return Ok(section.map_or(
                Value::Null,
                |s| json!({"name": s.name, "order": s.order, "text": s.text}),
            ));
        }
        if let Some(id) = step.get("completion_notice").and_then(Value::as_str) {
            let job = store.data().snapshot_of(id)?;
            let notice = guest
                .harness_jobs_notices()
                .call_completion_notice(&mut *store, config, &job)
                .map_err(trap)?;
            return Ok(notice_json(&notice));
        }
        if let Some(id) = step.get("deliver").and_then(Value::as_str) {
            let job = store.data().snapshot_of(id)?;
            let owner = match &step["owner"] {
                Value::Null => None,
                o => Some(OwnerState {
                    status: match o["status"].as_str() {
                        Some("idle") => AgentStatus::Idle,
                        _ => AgentStatus::Running,
                    },
                    wakes_spent: o["wakes_spent"].as_u64().unwrap_or(0),
                }),
            };
            let decision = guest
                .harness_jobs_notices()
                .call_deliver(&mut *store, config, &job, owner)
                .map_err(trap)?;
            return Ok(decision.map_or(Value::Null, |d| {
                json!({
                    "lane": match d.lane {
                        bindings::exports::harness::jobs::notices::Lane::Inject => "inject",
                        bindings::exports::harness::jobs::notices::Lane::Followup => "followup",
                    },
                    "notice": notice_json(&d.notice),
                })
            }));
        }
        if let Some(ids) = step.get("batch_notice").and_then(Value::as_array) {
            let jobs = ids
                .iter()
                .map(|id| store.data().snapshot_of(id.as_str().unwrap_or_default()))
                .collect::<Result<Vec<_>, _>>()?;
            let scope = store.data_mut().scope()?;
            let notice = guest
                .harness_jobs_notices()
                .call_batch_notice(&mut *store, scope, config, &jobs)
                .map_err(trap)?;
            return Ok(notice.as_ref().map_or(Value::Null, notice_json));
        }
        if let Some(tool) = step.get("finalize").and_then(Value::as_str) {
            let blocks = step["blocks"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|b| match (b.get("text"), b.get("other")) {
                    (Some(Value::String(t)), _) => ContentBlock::Text(t.clone()),
                    (_, Some(Value::String(o))) => ContentBlock::Other(o.clone()),
                    _ => ContentBlock::Other(b.to_string()),
                })
                .collect::<Vec<_>>();
            let scope = store.data_mut().scope()?;
            let out = guest
                .harness_jobs_tools()
                .call_finalize(
                    &mut *store,
                    scope,
                    config,
                    tool,
                    step["args"].as_str().unwrap_or("{}"),
                    &blocks,
                )
                .map_err(trap)?;
            return Ok(Value::Array(
                out.into_iter()
                    .map(|b| match b {
                        ContentBlock::Text(t) => json!({"text": t}),
                        ContentBlock::Other(o) => json!({"other": o}),
                    })
                    .collect(),
            ));
        }
        Err(format!("unknown step {step}"))
    }
}

/// A tool definition in the vectors' form (schemas parsed, annotations as MCP
/// spells them), or only its name and annotations.
fn definition_json(d: &ToolDefinition, only_annotations: bool) -> Result<Value, String> {
    let parse =
        |s: &str| serde_json::from_str::<Value>(s).map_err(|e| format!("schema is not JSON: {e}"));
    let a = &d.annotations;
    let annotations = json!({
        "title": a.title,
        "readOnlyHint": a.read_only_hint,
        "destructiveHint": a.destructive_hint,
        "idempotentHint": a.idempotent_hint,
        "openWorldHint": a.open_world_hint,
    });
    Ok(if only_annotations {
        json!({"name": d.name, "annotations": annotations})
    } else {
        json!({
            "name": d.name,
            "description": d.description,
            "input_schema": parse(&d.input_schema)?,
            "output_schema": match &d.output_schema { Some(s) => parse(s)?, None => Value::Null },
            "annotations": annotations,
        })
    })
}

fn result_json(r: &ToolResult) -> Result<Value, String> {
    let value = match &r.value {
        Some(v) => serde_json::from_str(v).map_err(|e| format!("value is not JSON ({e}): {v}"))?,
        None => Value::Null,
    };
    Ok(json!({"text": r.text, "is_error": r.is_error, "value": value}))
}

fn limits_json(l: &JobLimits) -> Value {
    json!({
        "timeout_ms": l.timeout_ms,
        "cpu_seconds": l.cpu_seconds,
        "memory_bytes": l.memory_bytes,
        "output_bytes": l.output_bytes,
    })
}

fn request_json(r: &StartRequest) -> Value {
    let mut request = json!({
        "command": r.command,
        "workdir": r.workdir,
        "description": r.description,
        "stdin": r.stdin,
        "name": r.name,
        "limits": limits_json(&r.limits),
        "yield_ms": r.yield_ms,
        "sandbox": r.sandbox.as_ref().map(sandbox_json),
        "tty": r.tty.map(|t| json!({"rows": t.rows, "cols": t.cols})),
        "render": r.render,
    });
    // Only a start on a runner says so: every other vector stays as it was.
    if let Some(runner) = &r.runner {
        request["runner"] = json!(runner);
        request["resources"] = r.resources.as_ref().map_or(Value::Null, |res| {
            json!({
                "cpus": res.cpus,
                "gpus": res.gpus,
                "memory_bytes": res.memory_bytes,
                "custom": res.custom.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<Map<String, Value>>(),
            })
        });
    }
    request
}

/// `{"files": ..., "network": "on" | "off" | [port, ...]}`, as in a config.
fn sandbox_json(s: &wit::Sandbox) -> Value {
    json!({
        "files": match s.files {
            wit::SandboxFiles::Full => "full",
            wit::SandboxFiles::WorkspaceWrite => "workspace-write",
            wit::SandboxFiles::ReadOnly => "read-only",
        },
        "network": match &s.network {
            wit::SandboxNetwork::On => json!("on"),
            wit::SandboxNetwork::Off => json!("off"),
            wit::SandboxNetwork::Ports(ports) => json!(ports),
        },
    })
}

/// [`sandbox_json`]'s form back; `None` for null or a malformed one.
fn sandbox_from(v: &Value) -> Option<wit::Sandbox> {
    let files = match v.get("files")?.as_str()? {
        "full" => wit::SandboxFiles::Full,
        "workspace-write" => wit::SandboxFiles::WorkspaceWrite,
        "read-only" => wit::SandboxFiles::ReadOnly,
        _ => return None,
    };
    let network = match v.get("network")? {
        Value::String(s) if s == "on" => wit::SandboxNetwork::On,
        Value::String(s) if s == "off" => wit::SandboxNetwork::Off,
        Value::Array(ports) => wit::SandboxNetwork::Ports(
            ports
                .iter()
                .filter_map(|p| p.as_u64().and_then(|p| u16::try_from(p).ok()))
                .collect(),
        ),
        _ => return None,
    };
    Some(wit::Sandbox { files, network })
}

fn request_from(v: &Value) -> StartRequest {
    let text = |key: &str| v[key].as_str().map(str::to_owned);
    let limit = |key: &str| v["limits"][key].as_u64();
    StartRequest {
        command: text("command").unwrap_or_default(),
        workdir: text("workdir"),
        description: text("description"),
        stdin: v["stdin"].as_bool().unwrap_or(false),
        name: text("name"),
        limits: JobLimits {
            timeout_ms: limit("timeout_ms"),
            cpu_seconds: limit("cpu_seconds"),
            memory_bytes: limit("memory_bytes"),
            output_bytes: limit("output_bytes"),
        },
        yield_ms: v["yield_ms"].as_u64().and_then(|n| u32::try_from(n).ok()),
        sandbox: sandbox_from(&v["sandbox"]),
        render: v["render"].as_bool().unwrap_or(false),
        runner: text("runner"),
        resources: v.get("resources").filter(|r| r.is_object()).map(|r| {
            let amount = |key: &str| r[key].as_f64();
            bindings::exports::harness::jobs::tools::Resources {
                cpus: amount("cpus"),
                gpus: amount("gpus"),
                memory_bytes: r["memory_bytes"].as_u64(),
                custom: r["custom"]
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .filter_map(|(k, v)| Some((k.clone(), v.as_f64()?)))
                            .collect()
                    })
                    .unwrap_or_default(),
            }
        }),
        tty: v
            .get("tty")
            .filter(|t| t.is_object())
            .map(|t| wit::TerminalSize {
                rows: t["rows"].as_u64().unwrap_or(30) as u16,
                cols: t["cols"].as_u64().unwrap_or(120) as u16,
            }),
    }
}

/// `{"new": id}`, `{"existing": id}` or `{"error": {"<start-error case>": payload}}`.
fn made_from(v: &Value) -> Result<Result<StartMade, StartError>, String> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    if let Some(id) = v.get("new") {
        return Ok(Ok(StartMade::New(text(id))));
    }
    if let Some(id) = v.get("existing") {
        return Ok(Ok(StartMade::Existing(text(id))));
    }
    let error = v["error"]
        .as_object()
        .and_then(|e| e.iter().next())
        .ok_or_else(|| format!("unknown start answer {v}"))?;
    Ok(Err(match error {
        (case, _) if case == "no-controller" => StartError::NoController,
        (case, p) if case == "stale-owner" => StartError::StaleOwner(text(p)),
        (case, p) if case == "limit-reached" => StartError::LimitReached(p.as_u64().unwrap_or(0)),
        (case, p) if case == "refused" => StartError::Refused(text(p)),
        (case, _) => return Err(format!("unknown start-error case {case}")),
    }))
}

/// Compares a step's actual answer with what the vector expects.
fn check(step: &Value, got: &Value) -> Result<(), String> {
    let want = &step["expect"];
    if step.get("check_start").is_some()
        && let Some(prefix) = want.get("err_prefix").and_then(Value::as_str)
    {
        let text = got["err"]["text"].as_str().unwrap_or_default();
        return if text.starts_with(prefix) && got["err"]["is_error"] == true {
            Ok(())
        } else {
            Err(format!("expected an error starting {prefix:?}, got {got}"))
        };
    }
    if let Some(want) = step.get("state").and_then(Value::as_object) {
        for (id, fields) in want {
            for (field, value) in fields.as_object().into_iter().flatten() {
                let actual = &got[id][field];
                if actual != value {
                    return Err(format!("job {id}: {field} is {actual}, expected {value}"));
                }
            }
        }
        return Ok(());
    }
    if step.get("invoke").is_some() {
        if let Some(waits) = step.get("waits").and_then(Value::as_array) {
            let asked: Vec<_> = waits.iter().map(|w| w["expect"].clone()).collect();
            if got["waits"] != Value::Array(asked.clone()) {
                return Err(format!(
                    "waits {} expected {}",
                    got["waits"],
                    Value::Array(asked)
                ));
            }
        } else if got["waits"] != json!([]) {
            return Err(format!("unexpected waits {}", got["waits"]));
        }
        if let Some(prefix) = want.get("text_prefix").and_then(Value::as_str) {
            let text = got["text"].as_str().unwrap_or_default();
            if !text.starts_with(prefix) {
                return Err(format!("text {text:?} does not start with {prefix:?}"));
            }
        } else if got["text"] != want["text"] {
            return Err(format!("text {} expected {}", got["text"], want["text"]));
        }
        for key in ["is_error", "value"] {
            if got[key] != want[key] {
                return Err(format!("{key} {} expected {}", got[key], want[key]));
            }
        }
        return Ok(());
    }
    if step.get("configure").is_some() {
        if let Some(fields) = want.get("ok").and_then(Value::as_object) {
            for (k, v) in fields {
                if &got["ok"][k] != v {
                    return Err(format!(
                        "config {k} is {}, expected {v} (got {got})",
                        got["ok"][k]
                    ));
                }
            }
            return Ok(());
        }
        if let Some(prefix) = want.get("err_prefix").and_then(Value::as_str) {
            return match got["err"].as_str() {
                Some(e) if e.starts_with(prefix) => Ok(()),
                _ => Err(format!("expected an error starting {prefix:?}, got {got}")),
            };
        }
        return if got == want {
            Ok(())
        } else {
            Err(format!("got {got}, expected {want}"))
        };
    }
    if got == want {
        Ok(())
    } else {
        Err(format!("got {got}, expected {want}"))
    }
}

fn config_json(c: &GuestConfig) -> Value {
    let mut config = json!({
        "profile": match c.profile { Profile::A => "a", Profile::B => "b", Profile::C => "c" },
        "wait_timeout_ms": c.wait_timeout_ms,
        "max_wait_timeout_ms": c.max_wait_timeout_ms,
        "completion_delivery": match c.completion_delivery {
            CompletionDelivery::Wakeup => "wakeup",
            CompletionDelivery::Quiet => "quiet",
        },
        "max_consecutive_wakes": c.max_consecutive_wakes,
        "max_result_bytes": c.max_result_bytes,
        "suppress_completion_notice": c.suppress_completion_notice,
        "extensions": c.extensions.iter().map(|e| match e {
            Extension::Ready => "ready",
            Extension::Input => "input",
            Extension::Log => "log",
            Extension::Limits => "limits",
            Extension::Ports => "ports",
            Extension::Yield => "yield",
            Extension::Sandbox => "sandbox",
            Extension::Terminal => "terminal",
            Extension::Runners => "runners",
        }).collect::<Vec<_>>(),
        "limits": limits_json(&c.limits),
        "notice_transport": match c.notice_transport {
            NoticeTransport::Push => "push",
            NoticeTransport::Pull => "pull",
        },
        "disposed_owner": match c.disposed_owner {
            DisposedOwner::Report => "report",
            DisposedOwner::Ignore => "ignore",
        },
        "sandbox": c.sandbox.as_ref().map(sandbox_json),
        "render_output": c.render_output,
    });
    // Only a mount with runners says so: the vectors of every other config
    // stay as they were.
    if !c.runners.is_empty() {
        config["runners"] = json!(c.runners);
    }
    config
}

fn notice_json(n: &bindings::exports::harness::jobs::notices::Notice) -> Value {
    json!({"text": n.text, "summary": n.summary, "plugin": n.plugin, "form": n.form})
}

/// The scripted registry one vector presents.
struct State {
    table: ResourceTable,
    wasi: WasiCtx,
    jobs: Vec<Map<String, Value>>,
    now_ms: u64,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

const TERMINAL: [&str; 3] = ["completed", "killed", "failed"];

fn is_terminal(job: &Map<String, Value>) -> bool {
    TERMINAL.contains(&job["status"].as_str().unwrap_or_default())
}

fn text_of<'a>(job: &'a Map<String, Value>, key: &str) -> &'a str {
    job.get(key).and_then(Value::as_str).unwrap_or_default()
}

impl State {
    fn scope(&mut self) -> Result<Resource<ScopeRep>, String> {
        let own = self.table.push(ScopeRep).map_err(|e| e.to_string())?;
        Ok(Resource::new_borrow(own.rep()))
    }

    fn state_json(&self) -> Value {
        let jobs: BTreeMap<_, _> = self
            .jobs
            .iter()
            .map(|j| (text_of(j, "id").to_owned(), Value::Object(j.clone())))
            .collect();
        json!(jobs)
    }

    /// The job the caller may see, or the registry's error for it.
    fn visible(&mut self, id: &str) -> Result<&mut Map<String, Value>, wit::RegistryError> {
        let job = self
            .jobs
            .iter_mut()
            .find(|j| text_of(j, "id") == id)
            .ok_or_else(|| wit::RegistryError::UnknownJob(id.to_owned()))?;
        if text_of(job, "owner") == "other" {
            return Err(wit::RegistryError::ForeignJob(id.to_owned()));
        }
        Ok(job)
    }

    fn snapshot_of(&self, id: &str) -> Result<wit::JobSnapshot, String> {
        self.jobs
            .iter()
            .find(|j| text_of(j, "id") == id)
            .map(snapshot)
            .ok_or_else(|| format!("the vector has no job {id}"))
    }

    /// Runs the wait the guest asked for, as the vector scripts it.
    fn wait(
        &mut self,
        id: &str,
        then: &Value,
    ) -> Result<Result<wit::Waited, wit::RegistryError>, String> {
        if let Some(error) = then.get("error").and_then(Value::as_object) {
            let (tag, payload) = error.iter().next().ok_or("an empty wait error")?;
            let payload = payload.as_str().unwrap_or_default().to_owned();
            return Ok(Err(match tag.as_str() {
                "unknown-job" => wit::RegistryError::UnknownJob(payload),
                "foreign-job" => wit::RegistryError::ForeignJob(payload),
                "wait-aborted" => wit::RegistryError::WaitAborted,
                "producer-failed" => wit::RegistryError::ProducerFailed(payload),
                "invalid-pattern" => wit::RegistryError::InvalidPattern(payload),
                "unsupported" => wit::RegistryError::Unsupported(payload),
                other => return Err(format!("unknown wait error {other}")),
            }));
        }
        let job = match self.visible(id) {
            Ok(job) => job,
            Err(e) => return Ok(Err(e)),
        };
        if let Some(changes) = then.get("settle").and_then(Value::as_object) {
            for (k, v) in changes {
                job.insert(k.clone(), v.clone());
            }
        }
        if is_terminal(job) {
            job.insert("reported".into(), Value::Bool(true));
        }
        let end = match then.get("end").and_then(Value::as_str) {
            Some("matched") => wit::WaitEnd::Matched,
            Some("quiet") => wit::WaitEnd::Quiet,
            Some("settled") => wit::WaitEnd::Settled,
            Some("timed-out") => wit::WaitEnd::TimedOut,
            Some("prompt") => wit::WaitEnd::Prompt,
            Some(other) => return Err(format!("unknown wait end {other}")),
            None if is_terminal(job) => wit::WaitEnd::Settled,
            None => wit::WaitEnd::TimedOut,
        };
        let matched = then.get("matched").map(|m| wit::LineMatch {
            line: line_of(&m["line"]),
            before: m["before"]
                .as_array()
                .into_iter()
                .flatten()
                .map(line_of)
                .collect(),
        });
        Ok(Ok(wit::Waited {
            job: snapshot(job),
            end,
            matched,
            prompt: then
                .get("prompt")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }))
    }
}

fn stream_of(value: &Value) -> wit::OutputStream {
    match value.as_str() {
        Some("stderr") => wit::OutputStream::Stderr,
        Some("raw") => wit::OutputStream::Raw,
        Some("raw-stderr") => wit::OutputStream::RawStderr,
        _ => wit::OutputStream::Stdout,
    }
}

fn stream_name(stream: wit::OutputStream) -> &'static str {
    match stream {
        wit::OutputStream::Stdout => "stdout",
        wit::OutputStream::Stderr => "stderr",
        wit::OutputStream::Raw => "raw",
        wit::OutputStream::RawStderr => "raw-stderr",
    }
}

/// An `output-line` from its JSON form `{"stream", "number", "text"}`.
fn line_of(value: &Value) -> wit::OutputLine {
    wit::OutputLine {
        stream: stream_of(&value["stream"]),
        number: value["number"].as_u64().unwrap_or(0),
        text: value["text"].as_str().unwrap_or_default().to_owned(),
    }
}

/// The JSON form of a line query, as the vectors' `last_query` states it.
fn query_json(query: &wit::LineQuery) -> Value {
    match query {
        wit::LineQuery::Range(r) => {
            json!({"range": {"stream": stream_name(r.stream), "start": r.start, "count": r.count}})
        }
        wit::LineQuery::Last(l) => {
            json!({"last": {"stream": stream_name(l.stream), "count": l.count}})
        }
        wit::LineQuery::Search(s) => json!({"search": {
            "stream": s.stream.map(stream_name), "pattern": s.pattern,
            "context": s.context, "max_matches": s.max_matches
        }}),
    }
}

fn snapshot(job: &Map<String, Value>) -> wit::JobSnapshot {
    wit::JobSnapshot {
        id: text_of(job, "id").to_owned(),
        kind: text_of(job, "kind").to_owned(),
        label: text_of(job, "label").to_owned(),
        status: match text_of(job, "status") {
            "stopping" => wit::JobStatus::Stopping,
            "completed" => wit::JobStatus::Completed,
            "killed" => wit::JobStatus::Killed,
            "failed" => wit::JobStatus::Failed,
            _ => wit::JobStatus::Running,
        },
        detail: job.get("detail").and_then(Value::as_str).map(str::to_owned),
        started_at: job.get("started_at").and_then(Value::as_u64).unwrap_or(0),
        finished_at: job.get("finished_at").and_then(Value::as_u64),
        output_limit_bytes: job.get("output_limit_bytes").and_then(Value::as_u64),
        reported: job
            .get("reported")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        sandbox: job.get("sandbox").and_then(sandbox_from),
        placement: job
            .get("placement")
            .and_then(Value::as_str)
            .map(str::to_owned),
    }
}

/// The first `n` bytes of `s`, without a split character.
fn head(s: &str, n: usize) -> &str {
    let mut end = n.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The last `n` bytes of `s`, without a split character.
fn tail(s: &str, n: usize) -> &str {
    let mut start = s.len().saturating_sub(n);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

impl bindings::harness::jobs::types::Host for State {}
impl bindings::harness::jobs::registry::Host for State {}

impl bindings::harness::jobs::registry::HostOwnerScope for State {
    fn list_jobs(&mut self, _: Resource<ScopeRep>) -> wasmtime::Result<Vec<wit::JobSnapshot>> {
        Ok(self
            .jobs
            .iter()
            .filter(|j| text_of(j, "owner") != "other")
            .map(snapshot)
            .collect())
    }

    fn get(
        &mut self,
        _: Resource<ScopeRep>,
        id: String,
    ) -> wasmtime::Result<Result<wit::JobSnapshot, wit::RegistryError>> {
        Ok(self.visible(&id).map(|j| snapshot(j)))
    }

    fn read(
        &mut self,
        _: Resource<ScopeRep>,
        id: String,
    ) -> wasmtime::Result<Result<wit::ReadResult, wit::RegistryError>> {
        Ok(self.visible(&id).map(|job| {
            let text = text_of(job, "pending").to_owned();
            job.insert("pending".into(), Value::String(String::new()));
            if is_terminal(job) {
                job.insert("reported".into(), Value::Bool(true));
            }
            wit::ReadResult {
                text,
                job: snapshot(job),
            }
        }))
    }

    fn kill(
        &mut self,
        _: Resource<ScopeRep>,
        id: String,
        _reason: Option<String>,
    ) -> wasmtime::Result<Result<wit::KillOutcome, wit::RegistryError>> {
        Ok(self.visible(&id).and_then(|job| {
            if let Some(message) = job.get("cancel_error").and_then(Value::as_str) {
                return Err(wit::RegistryError::ProducerFailed(message.to_owned()));
            }
            job.insert("reported".into(), Value::Bool(true));
            if is_terminal(job) {
                return Ok(wit::KillOutcome::AlreadyFinished);
            }
            job.insert("status".into(), Value::String("stopping".into()));
            Ok(wit::KillOutcome::Requested)
        }))
    }

    fn output(
        &mut self,
        _: Resource<ScopeRep>,
        id: String,
        window: wit::ExcerptWindow,
    ) -> wasmtime::Result<Result<wit::OutputExcerpt, wit::RegistryError>> {
        Ok(self.visible(&id).map(|job| {
            let out = text_of(job, "output");
            let whole = out.len() as u64 <= window.whole_up_to;
            let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
            let (h, t) = if whole {
                (out, "")
            } else {
                (
                    head(out, size(window.head_bytes)),
                    tail(out, size(window.tail_bytes)),
                )
            };
            wit::OutputExcerpt {
                head: h.to_owned(),
                tail: t.to_owned(),
                omitted_bytes: (out.len() - h.len() - t.len()) as u64,
                job: snapshot(job),
            }
        }))
    }

    fn write_input(
        &mut self,
        _: Resource<ScopeRep>,
        id: String,
        data: String,
        close: bool,
    ) -> wasmtime::Result<Result<u64, wit::RegistryError>> {
        Ok(self.visible(&id).and_then(|job| {
            if is_terminal(job) {
                return Err(wit::RegistryError::InputClosed);
            }
            match text_of(job, "input") {
                "open" => {}
                "closed" => return Err(wit::RegistryError::InputClosed),
                _ => return Err(wit::RegistryError::NoInput),
            }
            let written = format!("{}{data}", text_of(job, "written"));
            job.insert("written".into(), Value::String(written));
            if close {
                job.insert("input".into(), Value::String("closed".into()));
            }
            Ok(data.len() as u64)
        }))
    }

    fn signal(
        &mut self,
        _: Resource<ScopeRep>,
        id: String,
        signal: wit::JobSignal,
    ) -> wasmtime::Result<Result<(), wit::RegistryError>> {
        Ok(self.visible(&id).and_then(|job| {
            if is_terminal(job) {
                return Err(wit::RegistryError::ProducerFailed(format!(
                    "job {id} has already finished"
                )));
            }
            let name = match signal {
                wit::JobSignal::Int => "INT",
                wit::JobSignal::Term => "TERM",
                wit::JobSignal::Hup => "HUP",
                wit::JobSignal::Kill => "KILL",
                wit::JobSignal::Stop => "STOP",
                wit::JobSignal::Cont => "CONT",
            };
            let mut sent = job
                .get("signals")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            sent.push(Value::String(name.into()));
            job.insert("signals".into(), Value::Array(sent));
            Ok(())
        }))
    }

    fn lines(
        &mut self,
        _: Resource<ScopeRep>,
        id: String,
        query: wit::LineQuery,
    ) -> wasmtime::Result<Result<wit::LinePage, wit::RegistryError>> {
        Ok(self.visible(&id).and_then(|job| {
            job.insert("last_query".into(), query_json(&query));
            let page = job.get("lines").cloned().unwrap_or(Value::Null);
            if let Some(message) = page.get("invalid_pattern").and_then(Value::as_str) {
                return Err(wit::RegistryError::InvalidPattern(message.to_owned()));
            }
            let list = |key: &str| page[key].as_array().cloned().unwrap_or_default();
            Ok(wit::LinePage {
                lines: list("lines").iter().map(line_of).collect(),
                hits: list("hits")
                    .iter()
                    .filter_map(|h| h.as_u64().map(|h| h as u32))
                    .collect(),
                total_matches: page["total_matches"].as_u64().unwrap_or(0),
                extents: list("extents")
                    .iter()
                    .map(|e| wit::StreamExtent {
                        stream: stream_of(&e["stream"]),
                        total_bytes: e["total_bytes"].as_u64().unwrap_or(0),
                        dropped_bytes: e["dropped_bytes"].as_u64().unwrap_or(0),
                        first_line: e["first_line"].as_u64().unwrap_or(1),
                        last_line: e["last_line"].as_u64().unwrap_or(0),
                    })
                    .collect(),
                stopped: page
                    .get("stopped")
                    .filter(|s| !s.is_null())
                    .map(|s| wit::SearchStop {
                        stream: stream_of(&s["stream"]),
                        line: s["line"].as_u64().unwrap_or(0),
                    }),
                job: snapshot(job),
            })
        }))
    }

    fn ports(
        &mut self,
        _: Resource<ScopeRep>,
        id: String,
    ) -> wasmtime::Result<Result<Vec<wit::ListeningPort>, wit::RegistryError>> {
        Ok(self.visible(&id).map(|job| {
            if is_terminal(job) {
                return Vec::new();
            }
            job.get("ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|p| wit::ListeningPort {
                    address: p["address"].as_str().unwrap_or_default().to_owned(),
                    port: p["port"].as_u64().unwrap_or(0) as u16,
                })
                .collect()
        }))
    }

    fn resize(
        &mut self,
        _: Resource<ScopeRep>,
        id: String,
        _size: wit::TerminalSize,
    ) -> wasmtime::Result<Result<(), wit::RegistryError>> {
        // The vectors' jobs have no terminal.
        Ok(self.visible(&id).and(Err(wit::RegistryError::NoTerminal)))
    }

    fn screen(
        &mut self,
        _: Resource<ScopeRep>,
        id: String,
    ) -> wasmtime::Result<Result<wit::TerminalScreen, wit::RegistryError>> {
        Ok(self.visible(&id).and(Err(wit::RegistryError::NoTerminal)))
    }

    fn drop(&mut self, scope: Resource<ScopeRep>) -> wasmtime::Result<()> {
        self.table.delete(scope)?;
        Ok(())
    }
}

impl bindings::harness::jobs::clock::Host for State {
    fn now_ms(&mut self) -> wasmtime::Result<u64> {
        Ok(self.now_ms)
    }
}

impl bindings::harness::jobs::diag::Host for State {
    fn log(
        &mut self,
        _level: bindings::harness::jobs::diag::Level,
        _message: String,
    ) -> wasmtime::Result<()> {
        Ok(())
    }
}
