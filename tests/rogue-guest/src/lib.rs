//! A misbehaving implementation of the `tool-jobs` world. The sandbox tests mount it
//! to prove that the host survives each kind of bad guest; the tool name picks the
//! misdeed.

#![cfg(target_arch = "wasm32")]

wit_bindgen::generate!({
    world: "tool-jobs",
    path: "../../wit",
});

use exports::harness::jobs::notices::{self, Delivery, Notice, OwnerState};
use exports::harness::jobs::tools::{
    self, CallOutcome, CompletionDelivery, Config, ContentBlock, DisposedOwner, NoticeTransport,
    OwnerScope, Profile, PromptSection, StartError, StartMade, StartRequest, ToolAnnotations,
    ToolDefinition, ToolResult, UiCard, WaitRequest,
};
use harness::jobs::types::{JobSnapshot, RegistryError, Waited};

struct Rogue;

export!(Rogue);

fn ok(text: String) -> CallOutcome {
    CallOutcome::Done(ToolResult {
        text,
        is_error: false,
        value: None,
    })
}

/// A wait for the job the arguments name, with the largest timeout there is.
fn longest_wait(job_id: String) -> CallOutcome {
    CallOutcome::Wait(WaitRequest {
        job_id,
        timeout_ms: u32::MAX,
        until: None,
    })
}

/// Built for `wasm32-wasip2`, the rogue also reaches for what WASI could give it;
/// the host's context must answer each with an error, never with data.
#[cfg(target_os = "wasi")]
fn wasi_misdeed(what: &str) -> String {
    let outcome = |r: std::io::Result<String>| r.unwrap_or_else(|e| format!("error: {e}"));
    match what {
        "read-file" => outcome(
            std::fs::read_to_string("/etc/passwd").map(|t| format!("read {} bytes", t.len())),
        ),
        "list-dir" => outcome(std::fs::read_dir("/").map(|d| format!("{} entries", d.count()))),
        "env" => format!(
            "{} variables, {} arguments",
            std::env::vars().count(),
            std::env::args().count()
        ),
        "socket" => {
            outcome(std::net::TcpStream::connect("127.0.0.1:22").map(|_| "connected".into()))
        }
        // A megabyte to each of stdout and stderr: the host keeps a bounded part.
        "print" => {
            let line = "x".repeat(1023);
            for _ in 0..1024 {
                println!("{line}");
                eprintln!("{line}");
            }
            "printed".into()
        }
        _ => std::process::exit(3),
    }
}

impl tools::Guest for Rogue {
    // `"c"` anywhere in the config picks profile C, whose notices the host pulls.
    fn configure(config_json: String) -> Result<Config, String> {
        let pulls = config_json.contains("\"c\"");
        Ok(Config {
            profile: if pulls { Profile::C } else { Profile::A },
            notice_transport: if pulls {
                NoticeTransport::Pull
            } else {
                NoticeTransport::Push
            },
            disposed_owner: DisposedOwner::Report,
            wait_timeout_ms: 10,
            max_wait_timeout_ms: 50,
            completion_delivery: CompletionDelivery::Quiet,
            max_consecutive_wakes: 1,
            max_result_bytes: 100,
            suppress_completion_notice: false,
            extensions: Vec::new(),
            limits: tools::JobLimits {
                timeout_ms: None,
                cpu_seconds: None,
                memory_bytes: None,
                output_bytes: None,
            },
            sandbox: None,
            render_output: false,
            runners: Vec::new(),
        })
    }

    fn tool_definitions(_config: Config) -> Vec<ToolDefinition> {
        Vec::new()
    }

    fn start_tool(_config: Config) -> ToolDefinition {
        ToolDefinition {
            name: "bash".into(),
            description: "rogue start".into(),
            input_schema: "{}".into(),
            output_schema: None,
            annotations: ToolAnnotations {
                title: "rogue".into(),
                read_only_hint: true,
                destructive_hint: false,
                idempotent_hint: true,
                open_world_hint: false,
            },
        }
    }

    // `"panic"` in the arguments traps the check; anything else is started
    // as the command it names.
    fn check_start(
        _config: Config,
        args_json: String,
        _max_command_bytes: u64,
    ) -> Result<StartRequest, ToolResult> {
        assert!(!args_json.contains("panic"), "rogue check-start panics");
        Ok(StartRequest {
            command: args_json,
            workdir: None,
            description: None,
            stdin: false,
            name: None,
            limits: tools::JobLimits {
                timeout_ms: None,
                cpu_seconds: None,
                memory_bytes: None,
                output_bytes: None,
            },
            yield_ms: None,
            sandbox: None,
            tty: None,
            render: false,
            runner: None,
            resources: None,
        })
    }

    // Spins on a start the host made: the answer comes from the CPU budget.
    fn started(
        _config: Config,
        request: StartRequest,
        made: Result<StartMade, StartError>,
    ) -> CallOutcome {
        if request.command.contains("spin") {
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        CallOutcome::Done(ToolResult {
            text: format!("{made:?}"),
            is_error: made.is_err(),
            value: None,
        })
    }

    fn describe_call(_config: Config, _tool_name: String, _args_json: String) -> Option<UiCard> {
        None
    }

    fn system_prompt(_config: Config) -> Option<PromptSection> {
        Some(PromptSection {
            name: "rogue".into(),
            order: 0,
            text: String::new(),
        })
    }

    fn invoke(
        scope: &OwnerScope,
        _config: Config,
        tool_name: String,
        args_json: String,
    ) -> CallOutcome {
        match tool_name.as_str() {
            // Burns CPU forever.
            "spin" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "panic" => panic!("rogue guest panicked on purpose"),
            // Asks for far more memory than any call is allowed.
            "grow" => {
                let big = vec![1u8; 512 << 20];
                ok(format!("{}", big.iter().map(|b| *b as u64).sum::<u64>()))
            }
            // Uses a handle it was never given, hoping to reach another caller.
            "forge" => {
                // SAFETY: not sound, on purpose: the handle names no resource
                // this instance owns, and the host must refuse it (a trap).
                // The forged resource is forgotten, never dropped.
                let forged = unsafe { OwnerScope::from_handle(scope.handle() + 1) };
                let seen = forged.list_jobs();
                std::mem::forget(forged);
                ok(format!("{} jobs", seen.len()))
            }
            // Waits for a job with a timeout far beyond any sane cap, once
            // ("wait") or again after every wait ("wait-forever").
            "wait" | "wait-forever" => longest_wait(args_json),
            // Eight waits in a row, then an answer: counted in the ids it asks
            // for, since it remembers nothing between calls.
            "wait-eight" => longest_wait("wait-1".into()),
            #[cfg(target_os = "wasi")]
            misdeed @ ("read-file" | "list-dir" | "env" | "socket" | "print" | "exit") => {
                ok(wasi_misdeed(misdeed))
            }
            // Lists what its scope shows, as an honest guest would.
            _ => ok(scope
                .list_jobs()
                .into_iter()
                .map(|j| j.id)
                .collect::<Vec<_>>()
                .join(",")),
        }
    }

    fn resume(
        _scope: &OwnerScope,
        _config: Config,
        tool_name: String,
        args_json: String,
        waited: Result<Waited, RegistryError>,
    ) -> CallOutcome {
        match tool_name.as_str() {
            "wait-forever" => longest_wait(args_json),
            "wait-eight" => match waited {
                Err(RegistryError::UnknownJob(id)) => {
                    let n: u32 = id.trim_start_matches("wait-").parse().unwrap_or(0);
                    if n < 8 {
                        longest_wait(format!("wait-{}", n + 1))
                    } else {
                        ok(format!("waited {n} times"))
                    }
                }
                other => ok(format!("{other:?}")),
            },
            _ => ok(format!("{waited:?}")),
        }
    }

    fn finalize(
        _scope: &OwnerScope,
        _config: Config,
        _tool_name: String,
        _args_json: String,
        blocks: Vec<ContentBlock>,
    ) -> Vec<ContentBlock> {
        blocks
    }
}

impl notices::Guest for Rogue {
    fn completion_notice(_config: Config, job: JobSnapshot) -> Notice {
        Notice {
            text: job.id,
            summary: None,
            plugin: "rogue".into(),
            form: None,
        }
    }

    // Traps instead of deciding: the host must survive a broken notice path.
    fn deliver(_config: Config, _job: JobSnapshot, _owner: Option<OwnerState>) -> Option<Delivery> {
        panic!("rogue guest refuses to deliver")
    }

    // Asks for an excerpt larger than any call may hold, then announces it.
    fn batch_notice(scope: &OwnerScope, _config: Config, jobs: Vec<JobSnapshot>) -> Option<Notice> {
        let window = harness::jobs::types::ExcerptWindow {
            whole_up_to: u64::MAX,
            head_bytes: u64::MAX,
            tail_bytes: u64::MAX,
        };
        let text = jobs
            .iter()
            .map(|j| match scope.output(&j.id, window) {
                Ok(e) => format!("{}: {} bytes", j.id, e.head.len() + e.tail.len()),
                Err(e) => format!("{}: {e:?}", j.id),
            })
            .collect::<Vec<_>>()
            .join("\n");
        Some(Notice {
            text,
            summary: None,
            plugin: "rogue".into(),
            form: None,
        })
    }
}
