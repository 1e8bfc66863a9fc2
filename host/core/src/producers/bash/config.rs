//! What the shell producer is configured with and what a start asks for.

use std::path::PathBuf;
use std::time::Duration;

use crate::capture::OutputLimits;
use crate::containment::ContainmentMode;
use crate::fence::FencePolicy;

/// The kind every shell job is registered under.
pub const BASH_KIND: &str = "bash";
/// Default time between SIGTERM and SIGKILL.
pub const DEFAULT_GRACE: Duration = Duration::from_millis(3000);
/// Default largest command accepted, in bytes.
pub const DEFAULT_MAX_COMMAND_BYTES: usize = 64 << 10;
/// Default disk budget for all spill files of one producer.
pub const DEFAULT_SPILL_TOTAL_BYTES: u64 = 512 << 20;
/// Host variables every job gets (when set), besides `LC_*`. Everything else is
/// left out unless the operator passes it on by name.
pub const PASSED_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TERM", "TZ", "TMPDIR",
];

/// Settings of the shell producer.
#[derive(Debug, Clone)]
pub struct BashConfig {
    /// Time between SIGTERM and SIGKILL, and how long pipes may stay open after the
    /// leader exits.
    pub grace: Duration,
    /// Capture limits per job.
    pub limits: OutputLimits,
    /// Working directory when a request names none (else the host's own).
    pub default_workdir: Option<PathBuf>,
    /// The shell to run (`bash`, looked up in `PATH` once).
    pub shell: PathBuf,
    /// Host variables passed to jobs besides [`PASSED_ENV`] and `LC_*`.
    pub pass_env: Vec<String>,
    /// The environment jobs' passed variables are taken from; `None`: this
    /// process's own. A host that serves clients of its own (a daemon) gives
    /// each session its client's.
    pub host_env: Option<Vec<(std::ffi::OsString, std::ffi::OsString)>>,
    /// Variables set for every job (after the passed ones).
    pub set_env: Vec<(String, String)>,
    /// Largest command accepted, in bytes; a longer one is refused at start.
    pub max_command_bytes: usize,
    /// Disk budget for the spill files of all jobs together.
    pub spill_total_bytes: u64,
    /// How jobs are contained (see [`crate::containment`]).
    pub containment: ContainmentMode,
    /// The fence every job runs in (see [`crate::fence`]); none by default.
    pub sandbox: FencePolicy,
    /// The host's private directories besides the spill directory (the
    /// component cache, for one): no fenced job may read or write them.
    pub private_dirs: Vec<PathBuf>,
    /// Private directories that hold nothing a job needs (the component
    /// cache): where the kernel gives fenced jobs a mount namespace, it
    /// covers each with an empty, read-only tmpfs, so the read rules need
    /// not name every entry beside it (see `fenced_spill_parent`). Where it
    /// gives none, and for one that holds the spill directory (whose jobs'
    /// temporary directories a cover would hide), they are left out of the
    /// read rules as `private_dirs` are.
    pub covered_dirs: Vec<PathBuf>,
    /// Where the spill directory is made when jobs are fenced: a directory
    /// of this user's that nobody else can write (the default cache
    /// directory, for one). `None`, or one that does not qualify, means the
    /// system's temporary directory. A fenced job may read everything but
    /// the host's private directories, and Landlock only allows, so each
    /// entry beside a directory on the way to a private one costs a rule
    /// in every job's ruleset: `/tmp` may hold thousands, a cache
    /// directory few.
    pub fenced_spill_parent: Option<PathBuf>,
    /// Jobs that outlive the host (see [`DurableJobs`]); `None`: every job
    /// dies with its host, on every exit path.
    pub durable: Option<DurableJobs>,
}

/// Where and how jobs that outlive their host are kept: each job without a
/// terminal runs under a monitor (see [`super::durable::monitor`]) that holds its
/// output in files of its own directory and writes its end there, and that
/// keeps to the session's lease once the host is gone. The producer then
/// starts no watchdog: a host that dies leaves its jobs to their monitors.
#[derive(Debug, Clone)]
pub struct DurableJobs {
    /// The program that runs [`super::MONITOR_COMMAND`] (the host's own
    /// binary).
    pub monitor: PathBuf,
    /// A private directory (0700) where each job gets a directory of its
    /// own, named by its spawn number.
    pub dir: PathBuf,
    /// The session's lease file: a deadline in epoch ms (decimal) that the
    /// monitors keep to once their host is gone.
    pub lease: PathBuf,
    /// The most bytes each stream's file keeps.
    pub max_file_bytes: u64,
    /// The host's whole state directory (its journal, every session's
    /// files), which no fenced job may read or write; `None`: `dir` only.
    pub state_dir: Option<PathBuf>,
    /// Emptied files of dropped jobs, taken before a new file is made.
    pub spare: Option<std::sync::Arc<super::durable::spare::SpareFiles>>,
}

impl Default for BashConfig {
    fn default() -> Self {
        BashConfig {
            grace: DEFAULT_GRACE,
            limits: OutputLimits::default(),
            default_workdir: None,
            shell: PathBuf::from("bash"),
            pass_env: Vec::new(),
            host_env: None,
            set_env: Vec::new(),
            max_command_bytes: DEFAULT_MAX_COMMAND_BYTES,
            spill_total_bytes: DEFAULT_SPILL_TOTAL_BYTES,
            containment: ContainmentMode::Auto,
            sandbox: FencePolicy::default(),
            private_dirs: Vec::new(),
            covered_dirs: Vec::new(),
            fenced_spill_parent: None,
            durable: None,
        }
    }
}

/// One background command.
#[derive(Debug, Clone, Default)]
pub struct BashRequest {
    /// The command line, run with `bash -c`.
    pub command: String,
    /// Working directory; relative paths resolve against the default.
    pub workdir: Option<PathBuf>,
    /// Extra environment from a trusted caller; applied last.
    pub env: Vec<(String, String)>,
    /// A pipe for stdin the caller can write to (`write_input`), instead of
    /// `/dev/null`.
    pub stdin: bool,
    /// A name: a start whose name is held by a live job of the same owner
    /// answers with that job instead.
    pub name: Option<String>,
    /// Limits on this job (none by default).
    pub limits: JobLimits,
    /// A sandbox for this job narrower than the session's; `None`: the
    /// session's (a wider one is refused).
    pub sandbox: Option<crate::fence::Sandbox>,
    /// Run the job on a pseudo-terminal of this size (its stdin is then
    /// open, whatever `stdin` says); `None`: pipes.
    pub tty: Option<crate::capture::TerminalSize>,
    /// Render what a job without a terminal writes, each stream through a
    /// screen model ([`crate::capture::RENDER_SIZE`]); the bytes as written
    /// stay in the raw streams.
    pub render: bool,
    /// The runner to run it on (extension `runners`); `None`: this host.
    /// The shell producer runs jobs on this host only (see
    /// [`crate::producer::Routed`]).
    pub runner: Option<String>,
    /// What it needs of its runner's engine (extension `runners`).
    pub resources: Option<crate::limits::Resources>,
}

pub use crate::limits::JobLimits;

/// What a start did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Started {
    /// A new job with this id.
    New(String),
    /// The live job that already holds the requested name.
    Existing(String),
}

/// The longest job name accepted, in bytes.
pub const MAX_NAME_BYTES: usize = 128;
