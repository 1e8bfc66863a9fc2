//! `jobs-host-monitor monitor-2 ...`: a durable job's monitor (see
//! `host::bash::monitor`), the same as `jobs-host monitor-2 ...` but
//! without the rest of the host (2 MB, not 40): one runs per durable job.
//! The daemon runs it when it sits beside its own binary and speaks its
//! protocol (`--protocol`).

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // The daemon asks which monitor this is before it runs any.
    if args.get(1).is_some_and(|a| a == "--protocol") {
        println!("{}", host::bash::MONITOR_COMMAND);
        return;
    }
    if args.get(1).is_none_or(|a| a != host::bash::MONITOR_COMMAND) {
        eprintln!("jobs-host-monitor: started by jobs-host for its durable jobs, not by hand");
        std::process::exit(2);
    }
    std::process::exit(host::bash::run_monitor(&args[2..]));
}
