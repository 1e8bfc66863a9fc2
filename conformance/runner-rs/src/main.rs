//! `conformance-rs`: replays the conformance vectors through a tool-jobs
//! component in wasmtime and prints `N passed, M failed`.
//!
//! ```text
//! conformance-rs [--wasm FILE] [--vectors DIR] [--report FILE]
//! ```
//!
//! Without `--wasm` it uses the component the host was built with. `--report`
//! writes one JSON line per vector (`id`, `ok`, `failure`, `actual`), which the
//! `conformance/run` script compares across runners.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut wasm: Option<PathBuf> = None;
    let mut vectors = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../vectors");
    let mut report: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .map(PathBuf::from)
                .ok_or_else(|| format!("{name} needs a value"))
        };
        let parsed = match arg.as_str() {
            "--wasm" => value("--wasm").map(|v| wasm = Some(v)),
            "--vectors" => value("--vectors").map(|v| vectors = v),
            "--report" => value("--report").map(|v| report = Some(v)),
            other => Err(format!("unknown argument {other}")),
        };
        if let Err(e) = parsed {
            eprintln!(
                "conformance-rs: {e}\nusage: conformance-rs [--wasm FILE] [--vectors DIR] [--report FILE]"
            );
            return ExitCode::from(2);
        }
    }
    match run(wasm, &vectors, report) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("conformance-rs: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(
    wasm: Option<PathBuf>,
    vectors: &std::path::Path,
    report: Option<PathBuf>,
) -> Result<bool, String> {
    let bytes = match wasm {
        Some(path) => std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?,
        None => host::plugin::TOOL_JOBS_WASM.to_vec(),
    };
    let runner = conformance::Runner::new(&bytes)?;
    let vectors = conformance::load_vectors(vectors)?;
    let mut out = match &report {
        Some(path) => {
            Some(std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?)
        }
        None => None,
    };
    let (mut passed, mut failed) = (0, 0);
    for vector in &vectors {
        let outcome = runner.run(vector);
        match &outcome.failure {
            None => passed += 1,
            Some(why) => {
                failed += 1;
                println!("FAIL {}: {why}", outcome.id);
            }
        }
        if let Some(file) = out.as_mut() {
            let line = serde_json::json!({
                "id": outcome.id,
                "ok": outcome.failure.is_none(),
                "failure": outcome.failure,
                "actual": outcome.actual,
            });
            writeln!(file, "{line}").map_err(|e| e.to_string())?;
        }
    }
    println!("rust: {passed} passed, {failed} failed");
    Ok(failed == 0)
}
