//! `jobs-host-monitor monitor-2 ...`: a durable job's monitor (see
//! `host::bash::durable::monitor`), the same as `jobs-host monitor-2 ...` but
//! without the rest of the host (2 MB, not 40): one runs per durable job.
//! The daemon runs it when it sits beside its own binary and speaks its
//! protocol (`--protocol`).
//!
//! One starts per durable job, so its start is part of every start: it is
//! entered as C's `main`, without std's runtime setup, whose guard page for
//! the main thread's stack reads and parses `/proc/self/maps` (std's
//! arguments, read at load time, and everything else work as before).

#![no_main]

/// The program's entry: the arguments come from std, which reads them
/// when the program is loaded.
#[unsafe(no_mangle)]
extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    // As std's runtime would have: a write to a closed pipe fails with
    // EPIPE instead of killing the monitor before it set its own handlers.
    // SAFETY: ignoring a signal, before any thread or handler exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // The daemon asks which monitor this is before it runs any.
    if args.get(1).is_some_and(|a| a == "--protocol") {
        println!("{}", host::bash::MONITOR_COMMAND);
        return 0;
    }
    // The monitors' parent, which forks one per durable job.
    if args.get(1).is_some_and(|a| a == host::bash::ZYGOTE_COMMAND) {
        std::process::exit(host::bash::run_zygote());
    }
    if args.get(1).is_none_or(|a| a != host::bash::MONITOR_COMMAND) {
        eprintln!("jobs-host-monitor: started by jobs-host for its durable jobs, not by hand");
        return 2;
    }
    std::process::exit(host::bash::run_monitor(&args[2..]));
}
