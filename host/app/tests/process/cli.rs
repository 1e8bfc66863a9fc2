//! The `jobs-host` binary: a whole MCP session through a real MCP client, a
//! scripted shell session, and `tools` against the component's own definitions.
//!
//! (Over 500 lines: a test module of its own, the client fixtures every other
//! process test imports, and the CLI's tests.)

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::model::{CallToolRequestParams, CallToolResult, LoggingMessageNotificationParam};
use rmcp::service::{NotificationContext, RoleClient, RunningService, ServiceExt};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::{Value, json};
use tokio::sync::mpsc;

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_jobs-host");

pub(crate) fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("component-cache")
}

/// An MCP client that hands every logging notification to the test.
pub(crate) struct Client {
    pub(crate) logs: mpsc::UnboundedSender<LoggingMessageNotificationParam>,
}

impl ClientHandler for Client {
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.logs.send(params);
    }
}

fn args(value: Value) -> CallToolRequestParams {
    let Value::Object(map) = value else {
        panic!("arguments must be an object")
    };
    CallToolRequestParams::new("").with_arguments(map)
}

pub(crate) fn call(tool: &'static str, value: Value) -> CallToolRequestParams {
    let mut params = args(value);
    params.name = tool.into();
    params
}

pub(crate) fn texts(result: &CallToolResult) -> Vec<String> {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

/// Whether `pid` stops running within 30 s (a kill already sent lands within
/// moments; the bound only keeps a broken build from hanging).
pub(crate) async fn gone_soon(pid: i32) -> bool {
    for _ in 0..3000 {
        let alive = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next());
            !matches!(state, Some("Z") | Some("X"))
        });
        if !alive {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

pub(crate) type Logs = mpsc::UnboundedReceiver<LoggingMessageNotificationParam>;

/// `jobs-host mcp` with `flags` as a child process, for an MCP client.
pub(crate) fn mcp_transport(flags: &[&str]) -> TokioChildProcess {
    TokioChildProcess::new(tokio::process::Command::new(BIN).configure(|cmd| {
        cmd.arg("mcp")
            .args(flags)
            .arg("--cache-dir")
            .arg(cache_dir());
    }))
    .unwrap()
}

/// `jobs-host mcp` with `flags`, under a real MCP client whose logging
/// notifications come out of the returned channel.
async fn mcp_client(flags: &[&str]) -> (RunningService<RoleClient, Client>, Logs) {
    let (logs_tx, logs) = mpsc::unbounded_channel();
    let client = Client { logs: logs_tx }
        .serve(mcp_transport(flags))
        .await
        .unwrap();
    (client, logs)
}

/// A FIFO that a background command blocks on until the test writes a line.
pub(crate) struct Gate {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Gate {
    pub(crate) fn new() -> Gate {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gate");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&path)
                .status()
                .unwrap()
                .success()
        );
        Gate { _dir: dir, path }
    }

    /// A command that waits for the gate, then prints the line written to it.
    pub(crate) fn command(&self) -> String {
        format!("read line < {}; echo \"$line\"", self.path.display())
    }

    /// Writes `line` to the gate, releasing the command.
    pub(crate) async fn open(&self, line: &str) {
        let (path, line) = (self.path.clone(), format!("{line}\n"));
        tokio::task::spawn_blocking(move || std::fs::write(path, line).unwrap())
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_mcp_session() {
    let (client, mut logs) = mcp_client(&[]).await;

    let info = client.peer_info().expect("server info");
    // The prompt section, then what each tool does (for clients that show
    // the model tool names only until it loads their schemas).
    let instructions = info.instructions.as_deref().unwrap();
    assert!(instructions.starts_with("Track every background job id you start."));
    assert!(
        instructions.ends_with(
            "and job_kill jobs that stopped mattering.\n\nWhat each tool does:\n\
             - bash: Run a shell command in the background and return a job id immediately \
             (collect with job_output, stop with job_kill).\n\
             - job_output: Read a background job.\n\
             - job_list: List your background jobs (running and finished) with their ids, \
             kinds, and statuses.\n\
             - job_kill: Request cancellation of a running background job by job id."
        ),
        "{instructions}"
    );
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["bash", "job_output", "job_list", "job_kill"]);
    // No output schema (clients would show the model JSON instead of the
    // text), and the hints a client decides approval from.
    assert!(tools.iter().all(|t| t.output_schema.is_none()));
    let hints: Vec<Value> = tools
        .iter()
        .map(|t| serde_json::to_value(t.annotations.as_ref().unwrap()).unwrap())
        .collect();
    assert_eq!(
        hints,
        [
            json!({"title": "Run a background shell command", "readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true}),
            json!({"title": "Read background job output", "readOnlyHint": true, "destructiveHint": false, "idempotentHint": false, "openWorldHint": false}),
            json!({"title": "List background jobs", "readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}),
            json!({"title": "Stop a background job", "readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false}),
        ]
    );
    assert_eq!(
        tools[1].title.as_deref(),
        Some("Read background job output")
    );

    // bash-1 finishes only when the test opens its gate; bash-2 runs until killed.
    let gate = Gate::new();
    let gated = gate.command();
    let one = client
        .call_tool(call("bash", json!({"command": gated})))
        .await
        .unwrap();
    assert_eq!(texts(&one), ["started background job bash-1"]);
    assert_eq!(one.structured_content, None);
    let two = client
        .call_tool(call("bash", json!({"command": "sleep 30"})))
        .await
        .unwrap();
    assert_eq!(texts(&two), ["started background job bash-2"]);

    let read = client
        .call_tool(call("job_output", json!({"job_id": "bash-1"})))
        .await
        .unwrap();
    assert_eq!(texts(&read), ["(no new output)\n[status: running]"]);
    assert_eq!(read.is_error, Some(false));
    assert_eq!(read.structured_content, None);
    let timed_out = client
        .call_tool(call(
            "job_output",
            json!({"job_id": "bash-1", "wait": true, "timeout_ms": 50}),
        ))
        .await
        .unwrap();
    assert_eq!(texts(&timed_out), ["(no new output)\n[status: running]"]);

    let kill = client
        .call_tool(call(
            "job_kill",
            json!({"job_id": "bash-2", "reason": "not needed"}),
        ))
        .await
        .unwrap();
    assert_eq!(texts(&kill), ["requested cancellation of job bash-2"]);
    let killed = client
        .call_tool(call(
            "job_output",
            json!({"job_id": "bash-2", "wait": true}),
        ))
        .await
        .unwrap();
    assert_eq!(
        texts(&killed),
        ["(no new output)\n[status: killed, signal: SIGTERM]"]
    );

    // Open the gate: bash-1 finishes with nobody looking, so its notice is pushed
    // as a logging notification...
    gate.open("one").await;
    let expected = format!(
        "background job bash-1 (bash: {gated}) finished [status: completed, exit code: 0]. Read its output with job_output."
    );
    let log = tokio::time::timeout(Duration::from_secs(60), logs.recv())
        .await
        .expect("a notice arrives")
        .unwrap();
    assert_eq!(log.logger.as_deref(), Some("tool-jobs"));
    assert_eq!(log.data["lane"], "inject");
    assert_eq!(log.data["text"], expected.as_str());
    assert_eq!(
        log.data["summary"],
        format!("bash {gated} [status: completed, exit code: 0]").as_str()
    );

    // ...and placed before the next tool result.
    let output = client
        .call_tool(call("job_output", json!({"job_id": "bash-1"})))
        .await
        .unwrap();
    assert_eq!(
        texts(&output),
        [
            expected.clone(),
            "one\n[status: completed, exit code: 0]".to_owned()
        ]
    );
    // Delivered once only.
    let list = client.call_tool(call("job_list", json!({}))).await.unwrap();
    assert_eq!(list.structured_content, None);
    assert_eq!(
        texts(&list),
        [format!(
            "bash-1 [bash] completed \u{2014} {gated}\nbash-2 [bash] killed \u{2014} sleep 30"
        )]
    );

    let bad = client
        .call_tool(call("job_output", json!({"job_id": ""})))
        .await
        .unwrap();
    assert_eq!(bad.is_error, Some(true));
    assert_eq!(
        texts(&bad),
        ["Error: invalid job_id: expected a non-empty string, got \"\""]
    );
    let missing = client.call_tool(call("bash", json!({}))).await.unwrap();
    assert_eq!(
        texts(&missing),
        ["Error: invalid arguments: missing required property \"command\""]
    );
    assert!(client.call_tool(call("nope", json!({}))).await.is_err());

    // Leaving the session takes its jobs with it.
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let command = format!("echo $$ > {}; exec sleep 300", pid_file.display());
    client
        .call_tool(call("bash", json!({"command": command})))
        .await
        .unwrap();
    let mut pid = None;
    for _ in 0..3000 {
        if let Some(p) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
        {
            pid = Some(p);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let pid = pid.expect("the job wrote its pid");
    client.cancel().await.unwrap();
    assert!(
        gone_soon(pid).await,
        "job process {pid} outlived its MCP session"
    );
}

/// Runs `jobs-host shell` with `script` on stdin.
fn run_shell(script: &str) -> std::process::Output {
    run_shell_with(&[], script)
}

/// Runs `jobs-host shell` with `flags` and `script` on stdin.
fn run_shell_with(flags: &[&str], script: &str) -> std::process::Output {
    let mut cmd = std::process::Command::new(BIN);
    cmd.arg("shell")
        .args(flags)
        .arg("--cache-dir")
        .arg(cache_dir());
    run_with_stdin(cmd, script)
}

/// Runs `cmd` with `script` on its stdin, to the end.
fn run_with_stdin(mut cmd: std::process::Command, script: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(script.as_bytes()).unwrap();
    drop(stdin);
    child.wait_with_output().unwrap()
}

#[test]
fn a_scripted_shell_session_shows_what_the_model_sees() {
    // `settle` waits (without looking) for every job, so the notice for the job
    // nobody read arrives by then: with the `bash` reply itself if the command
    // was already done, at `settle` otherwise.
    let script = "\
bash echo hello
settle
job_output bash-1
bash sleep 30
job_kill bash-2 --reason done with it
job_output bash-2 --wait
job_list
job_output {\"job_id\":\"\"}
";
    let out = run_shell(script);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let notice = "[notice via inject] background job bash-1 (bash: echo hello) finished [status: completed, exit code: 0]. Read its output with job_output.\n";
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.matches(notice).count(), 1, "{stdout}");
    assert!(
        stdout.find(notice) < stdout.find("> job_output bash-1"),
        "{stdout}"
    );
    // Without the notice, `settle` prints nothing.
    assert_eq!(
        stdout.replacen(notice, "", 1),
        "\
> bash echo hello
started background job bash-1
> settle
> job_output bash-1
hello
[status: completed, exit code: 0]
> bash sleep 30
started background job bash-2
> job_kill bash-2 --reason done with it
requested cancellation of job bash-2
> job_output bash-2 --wait
(no new output)
[status: killed, signal: SIGTERM]
> job_list
bash-1 [bash] completed \u{2014} echo hello
bash-2 [bash] killed \u{2014} sleep 30
> job_output {\"job_id\":\"\"}
Error: invalid job_id: expected a non-empty string, got \"\"
"
    );
}

/// Three descriptors per live job would exhaust a low open-file limit: the host
/// raises its own soft limit to the hard one, and its jobs still get the limit
/// the host was given.
#[test]
fn many_jobs_at_once_fit_under_a_low_open_file_limit() {
    let jobs = 150;
    let mut script = String::from("bash ulimit -Sn\n");
    for _ in 0..jobs {
        script.push_str("bash exec sleep 1\n");
    }
    script.push_str("settle\njob_output bash-1\njob_list\n");
    // 64 descriptors would last for about 20 jobs.
    let mut cmd = std::process::Command::new("bash");
    cmd.arg("-c")
        .arg(r#"ulimit -Sn 64 && exec "$0" shell --max-jobs-per-owner 1000 --cache-dir "$1""#)
        .arg(BIN)
        .arg(cache_dir());
    let out = run_with_stdin(cmd, &script);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("> job_output bash-1\n64\n[status: completed, exit code: 0]\n"),
        "{stdout}"
    );
    assert!(!stdout.contains("spawn failed"), "{stdout}");
    assert_eq!(
        stdout
            .matches("[bash] completed \u{2014} exec sleep 1")
            .count(),
        jobs,
        "{stdout}"
    );
}

#[test]
fn a_terminal_shows_a_jobs_control_characters_and_a_transcript_keeps_them() {
    // The job colours, retitles the window and overwrites its line with `\r`.
    let script =
        "bash printf 'a\\033[31mred\\033]0;title\\007\\rX\\n'\nsettle\njob_output bash-1\n";
    let raw = run_shell(script);
    assert!(raw.status.success());
    assert!(
        String::from_utf8_lossy(&raw.stdout).contains(
            "> job_output bash-1\na\u{1b}[31mred\u{1b}]0;title\u{7}\rX\n[status: completed"
        ),
        "{}",
        String::from_utf8_lossy(&raw.stdout)
    );
    // `script` gives the console a terminal for its output (the pty turns each
    // newline into CRLF); the tool calls still come from a file.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("calls");
    std::fs::write(&file, script).unwrap();
    let quote =
        |p: &std::path::Path| format!("'{}'", p.display().to_string().replace('\'', r"'\''"));
    let inner = format!(
        "exec {} shell --cache-dir {} < {}",
        quote(std::path::Path::new(BIN)),
        quote(&cache_dir()),
        quote(&file)
    );
    let out = std::process::Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .expect("script(1) from util-linux");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}");
    assert!(
        shown.contains(
            "> job_output bash-1\r\na\\u{1b}[31mred\\u{1b}]0;title\\u{7}\\rX\r\n[status: completed"
        ),
        "{shown}"
    );
    assert!(!shown.contains('\u{1b}'), "{shown}");
}

#[test]
fn a_bad_shell_line_fails_the_script() {
    let out = run_shell("job_output\n");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage: job_output <id>"));
}

/// Runs `jobs-host tools` with `flags` and parses what it prints.
fn tools_json(flags: &[&str]) -> Value {
    let out = std::process::Command::new(BIN)
        .arg("tools")
        .args(flags)
        .arg("--cache-dir")
        .arg(cache_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn tools_prints_the_component_definitions() {
    let printed = tools_json(&[]);
    let tools = printed["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["bash", "job_output", "job_list", "job_kill"]);
    assert_eq!(
        tools[1]["description"],
        "Read a background job. Stream jobs return only output since the previous read; final-output jobs return their result after settlement. Every response ends with `[status: ...]`. Reads are non-blocking unless `wait: true`, which waits up to the configured cap."
    );
    assert_eq!(tools[1]["inputSchema"]["required"], json!(["job_id"]));
    assert_eq!(
        tools[1]["card"]["title"],
        "Read output from background job <job_id>"
    );
    assert_eq!(tools[3]["card"]["kind"], "execute");
    assert_eq!(printed["promptSection"]["name"], "tool:jobs");
    assert_eq!(printed["promptSection"]["order"], 106);
}

#[test]
fn bad_flags_files_and_plugins_fail_clearly() {
    let run = |args: &[&str]| {
        std::process::Command::new(BIN)
            .args(args)
            .arg("--cache-dir")
            .arg(cache_dir())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let bad_flag = run(&["tools", "--wait-timeout-ms", "soon"]);
    assert_eq!(bad_flag.status.code(), Some(2));
    let too_long = run(&["tools", "--wait-timeout-ms", "900000"]);
    assert_eq!(too_long.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&too_long.stderr)
            .contains("tool-jobs: waitTimeoutMs (900000) exceeds maxWaitTimeoutMs (600000)")
    );

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("jobs.toml");
    std::fs::write(&config, "wait-timeout = 5\n").unwrap();
    let bad_file = run(&["--config", config.to_str().unwrap(), "tools"]);
    assert_eq!(bad_file.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad_file.stderr).contains("unknown field `wait-timeout`"));
    std::fs::write(&config, "max-wait-timeout-ms = 100\nwait-timeout-ms = 50\n").unwrap();
    assert!(
        run(&["--config", config.to_str().unwrap(), "tools"])
            .status
            .success()
    );

    let not_wasm = dir.path().join("plugin.wasm");
    std::fs::write(&not_wasm, b"not wasm").unwrap();
    let check = run(&["check", not_wasm.to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&check.stdout).contains("not a component this host can load"));
    let unreadable = run(&["check", dir.path().join("missing.wasm").to_str().unwrap()]);
    assert_eq!(unreadable.status.code(), Some(2));
}

#[test]
fn check_accepts_the_built_in_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("tool-jobs.wasm");
    std::fs::write(&plugin, host::plugin::TOOL_JOBS_WASM).unwrap();
    let out = std::process::Command::new(BIN)
        .args(["check", plugin.to_str().unwrap(), "--cache-dir"])
        .arg(cache_dir())
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let named = host::plugin::wit_interface;
    assert!(
        text.contains(&format!("  {}\n", named("registry"))),
        "{text}"
    );
    assert!(text.contains(&format!("  {}\n", named("tools"))), "{text}");
    assert!(
        text.ends_with(&format!("runnable: yes (world {})\n", named("tool-jobs"))),
        "{text}"
    );
}

/// `check --json` and `check-runner` (lines and `--json`): what they find,
/// and the exit codes a script reads. An engine that does not answer is
/// `usable: no` with the reason; an unknown runner says how to name one.
#[test]
fn checks_answer_a_person_and_a_script() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("tool-jobs.wasm");
    std::fs::write(&plugin, host::plugin::TOOL_JOBS_WASM).unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(BIN)
            .args(args)
            .arg("--cache-dir")
            .arg(cache_dir())
            .output()
            .unwrap()
    };
    let checked = run(&["check", "--json", plugin.to_str().unwrap()]);
    assert!(checked.status.success());
    let found: Value = serde_json::from_slice(&checked.stdout).unwrap();
    let named = host::plugin::wit_interface;
    assert_eq!(found["runnable"], true, "{found}");
    assert_eq!(found["world"], named("tool-jobs"));
    assert_eq!(found["wasi"], false);
    assert_eq!(found["exports"], json!([named("tools"), named("notices")]));

    // A port nothing listens on: the engine does not answer.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let runner = format!("far={address}");
    let lines = run(&["check-runner", "far", "--runner", &runner]);
    assert_eq!(lines.status.code(), Some(1));
    let text = String::from_utf8(lines.stdout).unwrap();
    assert!(
        text.starts_with(&format!(
            "runner: far, Ray at {address}\nusable: no: cannot reach the Ray engine at {address}"
        )),
        "{text}"
    );
    let scripted = run(&["check-runner", "far", "--json", "--runner", &runner]);
    assert_eq!(scripted.status.code(), Some(1));
    let found: Value = serde_json::from_slice(&scripted.stdout).unwrap();
    assert_eq!(
        (&found["runner"], &found["address"], &found["usable"]),
        (&json!("far"), &json!(address), &json!(false)),
        "{found}"
    );
    assert!(
        found["reason"]
            .as_str()
            .unwrap()
            .starts_with("cannot reach")
    );

    let unknown = run(&["check-runner", "near", "--runner", &runner]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&unknown.stderr).starts_with(
            "jobs-host: no runner named \"near\" (runners: far); name one with --runner near="
        ),
        "{unknown:?}"
    );
}

#[test]
fn profile_c_is_one_flag_away() {
    let printed = tools_json(&["--profile", "c", "--max-wait-seconds", "5"]);
    assert_eq!(printed["profile"], "c");
    let tools = printed["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["bash", "job_list", "job_status", "job_wait", "job_cancel"]
    );
    assert_eq!(tools[2]["card"]["title"], "Check background job <id>");
    assert_eq!(tools[2]["outputSchema"], Value::Null);
    assert_eq!(printed["promptSection"], Value::Null);

    // A setting the profile does not have is refused with the plugin's words.
    let refused = std::process::Command::new(BIN)
        .args([
            "tools",
            "--profile",
            "c",
            "--wait-timeout-ms",
            "5",
            "--cache-dir",
        ])
        .arg(cache_dir())
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("jobs: unknown config key \"waitTimeoutMs\""),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    let out = run_shell_with(
        &["--profile", "c"],
        "bash echo hello\njob_wait bash-1\njob_cancel bash-9\n",
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{stdout}");
    assert_eq!(
        stdout
            .matches("[notice via inject] Background job update:\n- bash-1 (bash, succeeded, ")
            .count(),
        1,
        "{stdout}"
    );
    // The update comes with whichever reply first follows the job's end.
    assert!(stdout.contains("):\nhello\n[exit code: 0]\n"), "{stdout}");
    assert!(
        stdout.contains("\njob bash-1 (bash) \u{2014} succeeded after "),
        "{stdout}"
    );
    assert!(
        stdout.ends_with(
            "\nhello\n[exit code: 0]\n> job_cancel bash-9\nerror: agentcore: job not found\n"
        ),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_session_in_profile_c() {
    let (client, mut logs) = mcp_client(&["--profile", "c"]).await;
    // Profile C has no prompt section: the instructions say what each tool
    // does, and nothing more. Its job tools return text only.
    let instructions = client.peer_info().unwrap().instructions.clone().unwrap();
    assert!(
        instructions.starts_with("What each tool does:\n- bash: Run a shell command"),
        "{instructions}"
    );
    assert!(
        instructions.ends_with("\n- job_cancel: Cancel a running background job."),
        "{instructions}"
    );
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        ["bash", "job_list", "job_status", "job_wait", "job_cancel"]
    );
    assert!(tools[1..].iter().all(|t| t.output_schema.is_none()));

    // bash-1 finishes only when the test opens its gate.
    let gate = Gate::new();
    client
        .call_tool(call("bash", json!({"command": gate.command()})))
        .await
        .unwrap();
    let running = client
        .call_tool(call("job_status", json!({"id": "bash-1"})))
        .await
        .unwrap();
    let running = texts(&running);
    assert_eq!(running.len(), 1);
    assert!(
        running[0].starts_with("job bash-1 (bash) \u{2014} running after "),
        "{running:?}"
    );

    gate.open("one").await;
    // The wait sees the end; the update is taken at this step and placed first.
    let waited = client
        .call_tool(call("job_wait", json!({"id": "bash-1"})))
        .await
        .unwrap();
    let waited = texts(&waited);
    assert_eq!(waited.len(), 2, "{waited:?}");
    assert!(
        waited[0].starts_with("Background job update:\n- bash-1 (bash, succeeded, ")
            && waited[0].ends_with("):\none\n[exit code: 0]"),
        "{waited:?}"
    );
    assert!(
        waited[1].starts_with("job bash-1 (bash) \u{2014} succeeded after ")
            && waited[1].ends_with("\none\n[exit code: 0]"),
        "{waited:?}"
    );
    let log = tokio::time::timeout(Duration::from_secs(60), logs.recv())
        .await
        .expect("the update is also logged")
        .unwrap();
    assert_eq!(log.logger.as_deref(), Some("jobs"));
    assert_eq!(log.data["text"], waited[0].as_str());

    let unknown = client
        .call_tool(call("job_cancel", json!({"id": "bash-9"})))
        .await
        .unwrap();
    assert_eq!(unknown.is_error, Some(true));
    assert_eq!(texts(&unknown), ["error: agentcore: job not found"]);
    client.cancel().await.unwrap();
}

/// A client that probes with `server/discover` and leaves (the Python SDK's
/// `auto` mode does when a first start outlasts its timeout), or leaves
/// before a word: it is answered, and the host says so in true words and
/// ends well.
#[test]
fn a_client_that_leaves_before_initializing_is_no_failure() {
    let discover = json!({
        "jsonrpc": "2.0", "id": 1, "method": "server/discover",
        "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "prober", "version": "0"}
        }}
    });
    for script in [format!("{discover}\n"), String::new()] {
        let mut cmd = std::process::Command::new(BIN);
        cmd.arg("mcp").arg("--cache-dir").arg(cache_dir());
        let out = run_with_stdin(cmd, &script);
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "jobs-host: the client closed the connection before it initialized a session\n"
        );
        let answers = String::from_utf8(out.stdout).unwrap();
        if script.is_empty() {
            assert_eq!(answers, "");
        } else {
            let answer: Value = serde_json::from_str(answers.trim_end()).unwrap();
            assert_eq!(answer["id"], 1, "{answer}");
            assert!(answer["result"]["supportedVersions"].is_array(), "{answer}");
        }
    }
}

#[test]
fn wasm_writes_the_built_in_component_for_other_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tool-jobs.wasm");
    let written = std::process::Command::new(BIN)
        .args(["wasm", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        written.status.success(),
        "{}",
        String::from_utf8_lossy(&written.stderr)
    );
    assert_eq!(std::fs::read(&out).unwrap(), host::plugin::TOOL_JOBS_WASM);
    // A directory gets the versioned artifact, whose path is printed.
    let named = std::process::Command::new(BIN)
        .args(["wasm", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(named.status.success());
    let version = host::plugin::WIT_PACKAGE.rsplit_once('@').unwrap().1;
    let versioned = dir.path().join(format!("tool-jobs-{version}.wasm"));
    assert_eq!(
        String::from_utf8(named.stdout).unwrap(),
        format!("{}\n", versioned.display())
    );
    assert_eq!(
        std::fs::read(&versioned).unwrap(),
        host::plugin::TOOL_JOBS_WASM
    );
    let nowhere = std::process::Command::new(BIN)
        .args(["wasm", "--out"])
        .arg(dir.path().join("missing").join("x.wasm"))
        .output()
        .unwrap();
    assert_eq!(nowhere.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&nowhere.stderr).starts_with("jobs-host: cannot write "),
        "{}",
        String::from_utf8_lossy(&nowhere.stderr)
    );
}

#[test]
fn completions_and_the_man_page_come_from_the_command_line() {
    use crate::durable::{stderr, stdout};
    let run = |args: &[&str]| {
        let out = std::process::Command::new(BIN).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        out.stdout
    };
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("jobs-host.bash");
    std::fs::write(&script, run(&["completions", "bash"])).unwrap();
    // What bash offers at a tab after `words`, as its completion calls the
    // function: the command, the word under the cursor, the word before.
    let complete = |words: &[&str]| -> Vec<String> {
        let line = words.join(" ");
        let body = format!(
            "source {}; COMP_WORDS=({line}); COMP_CWORD={}; COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; \
             _jobs__host jobs-host '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display(),
            words.len() - 1,
            words[words.len() - 1],
            words[words.len() - 2],
        );
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(body)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(complete(&["jobs-host", "lo"]), ["logs"]);
    // A subcommand's own options (a hyphenated binary's states agree).
    assert_eq!(complete(&["jobs-host", "ps", "--ses"]), ["--session"]);
    assert_eq!(complete(&["jobs-host", "completions", "fi"]), ["fish"]);
    for shell in ["zsh", "fish"] {
        assert!(
            String::from_utf8(run(&["completions", shell]))
                .unwrap()
                .contains("check-runner"),
            "{shell}"
        );
    }
    let page = String::from_utf8(run(&["man"])).unwrap();
    assert!(page.contains(".TH jobs-host 1"), "{page}");
    assert!(page.contains("check\\-runner"), "{page}");
}
