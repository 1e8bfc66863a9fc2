//! What the host does to launch a durable job: make its file and open what
//! its monitor gets, and wrap the job's spawn so that the monitor runs in
//! its place, told on its command line what to run.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use super::job_file::{FRAMES_AT, lock};

/// The subcommand a host binary runs the monitor under: with the version
/// of its command line and file, so a monitor of another build refuses it.
pub const MONITOR_COMMAND: &str = "monitor-2";

/// What the monitor of a job is told on its command line, after
/// [`MONITOR_COMMAND`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MonitorArgs {
    /// The host's pid: once the monitor's parent is another, the host is
    /// gone (it may be gone before the monitor starts).
    pub parent: i32,
    pub grace_ms: u64,
    /// The most bytes each stream's file keeps.
    pub max_file_bytes: u64,
    /// Limits for the leader only (`RLIMIT_*`, soft, hard): the monitor's
    /// own work (copying output) must not spend the job's CPU or memory.
    pub rlimits: Vec<(libc::__rlimit_resource_t, libc::rlim_t, libc::rlim_t)>,
    pub program: OsString,
    /// The leader's argv, its name first.
    pub argv: Vec<OsString>,
}

impl MonitorArgs {
    /// The words after the host binary's name.
    pub(crate) fn to_args(&self) -> Vec<OsString> {
        let limits = if self.rlimits.is_empty() {
            "-".to_owned()
        } else {
            self.rlimits
                .iter()
                .map(|(r, s, h)| format!("{r}:{s}:{h}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut args: Vec<OsString> = vec![
            MONITOR_COMMAND.into(),
            self.parent.to_string().into(),
            self.grace_ms.to_string().into(),
            self.max_file_bytes.to_string().into(),
            limits.into(),
            self.program.clone(),
        ];
        args.extend(self.argv.iter().cloned());
        args
    }

    /// Parses what [`MonitorArgs::to_args`] made (without the subcommand).
    pub(crate) fn parse(args: &[OsString]) -> Result<MonitorArgs, String> {
        let text = |n: usize| {
            args.get(n)
                .and_then(|a| a.to_str())
                .ok_or_else(|| format!("argument {n} is missing or not UTF-8"))
        };
        let number = |n: usize| {
            text(n)?
                .parse::<u64>()
                .map_err(|e| format!("argument {n}: {e}"))
        };
        let parent = i32::try_from(number(0)?).map_err(|e| format!("argument 0: {e}"))?;
        let grace_ms = number(1)?;
        let max_file_bytes = number(2)?;
        let rlimits = match text(3)? {
            "-" => Vec::new(),
            list => list
                .split(',')
                .map(|entry| {
                    let parts: Vec<&str> = entry.split(':').collect();
                    match parts[..] {
                        [r, s, h] => Ok((
                            r.parse().map_err(|e| format!("{entry}: {e}"))?,
                            s.parse().map_err(|e| format!("{entry}: {e}"))?,
                            h.parse().map_err(|e| format!("{entry}: {e}"))?,
                        )),
                        _ => Err(format!("{entry}: not RESOURCE:SOFT:HARD")),
                    }
                })
                .collect::<Result<_, _>>()?,
        };
        let program = args.get(4).cloned().ok_or("no program")?;
        let argv = args.get(5..).map(<[OsString]>::to_vec).unwrap_or_default();
        if argv.is_empty() {
            return Err("no argv".to_owned());
        }
        Ok(MonitorArgs {
            parent,
            grace_ms,
            max_file_bytes,
            rlimits,
            program,
            argv,
        })
    }
}

/// Makes job `n`'s file in `durable.dir` and opens what its monitor gets
/// as descriptors 3 to 5 (see the module's notes).
pub(crate) fn prepare(
    durable: &crate::producers::bash::DurableJobs,
    n: u64,
) -> std::io::Result<(std::path::PathBuf, Vec<OwnedFd>)> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = durable.dir.join(format!("job-{n}"));
    let reused = durable.spare.as_ref().and_then(|spare| spare.take(&path));
    let header = match reused {
        Some(file) => file,
        None => {
            // A spare that could not be taken whole is not used.
            let _ = std::fs::remove_file(&path);
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)?;
            match lock(&file) {
                // A file system without locks: the job runs, its file is
                // never reused, and a host that takes it on does not wait
                // for a monitor that is starting.
                Ok(()) | Err(rustix::io::Errno::NOLCK | rustix::io::Errno::OPNOTSUPP) => {}
                Err(e) => {
                    return Err(std::io::Error::other(format!(
                        "cannot lock the job's file: {e}"
                    )));
                }
            }
            file
        }
    };
    // The header's room (zeros): the frames are appended after it, from
    // the same offset in a new file and a spare. Never cut to zero length:
    // ext4 then flushes the file to disk at its every close (its guard for
    // files rewritten in place), a disk write per job.
    header.set_len(FRAMES_AT)?;
    let frames = std::fs::OpenOptions::new().append(true).open(&path)?;
    let lease = std::fs::File::open(&durable.lease)?;
    let fds = vec![
        OwnedFd::from(frames),
        OwnedFd::from(header),
        OwnedFd::from(lease),
    ];
    Ok((path, fds))
}

/// `spec` run under its monitor, which gets `files` (from [`prepare`]):
/// the limits of the job's own processes move to the monitor's arguments,
/// which sets them for the leader.
pub(crate) fn wrap(
    spec: &mut crate::producers::spawn::Spec,
    durable: &crate::producers::bash::DurableJobs,
    grace: Duration,
    files: Vec<OwnedFd>,
) -> Result<(), crate::producers::bash::error::SpawnError> {
    let job_only = [libc::RLIMIT_CPU, libc::RLIMIT_CORE, libc::RLIMIT_AS];
    let (leader_limits, own): (Vec<_>, Vec<_>) = spec
        .rlimits
        .iter()
        .partition(|(resource, _, _)| job_only.contains(resource));
    let args = MonitorArgs {
        parent: std::process::id() as i32,
        grace_ms: grace.as_millis() as u64,
        max_file_bytes: durable.max_file_bytes,
        rlimits: leader_limits,
        program: std::ffi::OsStr::from_bytes(spec.program.as_bytes()).to_owned(),
        argv: spec
            .argv
            .iter()
            .map(|a| std::ffi::OsStr::from_bytes(a.as_bytes()).to_owned())
            .collect(),
    };
    let c = |bytes: &[u8]| {
        std::ffi::CString::new(bytes)
            .map_err(|_| crate::producers::bash::error::SpawnError::Nul("monitor's path"))
    };
    let monitor = c(durable.monitor.as_os_str().as_bytes())?;
    // Named for a person's `ps`, whatever path runs it.
    let mut argv = vec![c"jobs-host-monitor".to_owned()];
    for arg in args.to_args() {
        argv.push(c(arg.as_bytes())?);
    }
    spec.program = monitor;
    spec.argv = argv;
    // A host killed in the middle of the spawn leaves the job to its
    // monitor, as one killed later does (the leader dies with the monitor).
    spec.setup.die_with_parent = None;
    spec.rlimits = own;
    spec.extra_fds = files;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_survive_their_round_trip() {
        let args = MonitorArgs {
            parent: 42,
            grace_ms: 3000,
            max_file_bytes: 1 << 20,
            rlimits: vec![(0, 5, 6), (4, 0, 0)],
            program: "/usr/bin/bash".into(),
            argv: vec!["bash".into(), "-c".into(), "echo 'a b'".into()],
        };
        let words = args.to_args();
        assert_eq!(words[0], MONITOR_COMMAND);
        assert_eq!(MonitorArgs::parse(&words[1..]).unwrap(), args);
        let none = MonitorArgs {
            rlimits: Vec::new(),
            ..args
        };
        assert_eq!(MonitorArgs::parse(&none.to_args()[1..]).unwrap(), none);
        assert!(MonitorArgs::parse(&["x".into()]).is_err());
        assert!(MonitorArgs::parse(&["7".into(), "1".into(), "2".into(), "1:2".into()]).is_err());
    }
}
