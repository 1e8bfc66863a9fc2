//! The interactive console on a real pseudo-terminal, as a person meets it:
//! ended from outside (SIGTERM, SIGINT, SIGHUP), by ctrl-c twice, and by its
//! terminal going away, each time at once, with its jobs, and without
//! spinning on a terminal that is gone. The same for `shell --session` (the
//! session stays in the daemon) and for `logs -f`.
//!
//! (Over 500 lines: a test module of its own, the pseudo-terminal fixture and
//! one test per way a console ends.)

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::cli::{BIN, cache_dir, gone_soon};
use crate::durable::Runtime;

/// A program on the slave side of a pseudo-terminal of 24×80, leading its
/// own session with that terminal as its controlling one, as a terminal
/// emulator runs a shell. Everything it writes is kept; its cursor-position
/// queries are answered, as a terminal would.
pub(crate) struct OnTerminal {
    pid: i32,
    master: Option<Arc<OwnedFd>>,
    /// The terminal's side the program has, kept to read its modes.
    slave: OwnedFd,
    screen: Arc<Mutex<Vec<u8>>>,
    stop: Arc<AtomicBool>,
    reader: Option<std::thread::JoinHandle<()>>,
    status: Option<(i32, Duration)>,
}

impl OnTerminal {
    pub(crate) fn spawn(mut cmd: Command) -> OnTerminal {
        // Both sides close on exec: a program another test starts meanwhile
        // must not hold the terminal open.
        use nix::fcntl::OFlag;
        let flags = OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
        let master = nix::pty::posix_openpt(flags).unwrap();
        nix::pty::grantpt(&master).unwrap();
        nix::pty::unlockpt(&master).unwrap();
        let name = nix::pty::ptsname_r(&master).unwrap();
        let slave: OwnedFd = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags((OFlag::O_NOCTTY | OFlag::O_CLOEXEC).bits())
            .open(name)
            .unwrap()
            .into();
        let size = libc::winsize {
            ws_row: 24,
            ws_col: 80,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads one winsize, which `size` is.
        let sized = unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &size) };
        assert_eq!(sized, 0);
        let master = OwnedFd::from(master);
        cmd.stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave.try_clone().unwrap()))
            .env("TERM", "xterm-256color")
            .env("XDG_CACHE_HOME", cache_dir().join("xdg"));
        // SAFETY: setsid and ioctl are async-signal-safe and touch only the
        // child: it leads a new session whose controlling terminal is its
        // standard input, the pty's slave.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        // Reaped by `wait_for_exit` (which needs its resource usage), never
        // through `Child`.
        #[allow(clippy::zombie_processes)]
        let child = cmd.spawn().unwrap();
        let master = Arc::new(master);
        let screen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let (master, screen, stop) = (master.clone(), screen.clone(), stop.clone());
            std::thread::spawn(move || read_screen(&master, &screen, &stop))
        };
        OnTerminal {
            pid: child.id() as i32,
            master: Some(master),
            slave,
            screen,
            stop,
            reader: Some(reader),
            status: None,
        }
    }

    /// The jobs-host console (`shell`) with `args`.
    fn console(args: &[&str]) -> OnTerminal {
        let mut cmd = Command::new(BIN);
        cmd.arg("--cache-dir")
            .arg(cache_dir())
            .arg("shell")
            .args(args);
        OnTerminal::spawn(cmd)
    }

    /// `cmd` run by a shell that leads the terminal's session and ignores
    /// SIGHUP, as a login shell may: when the terminal goes away, nobody
    /// sends `cmd` a signal, and it has only the terminal to tell.
    fn under_a_shell(cmd: Command) -> OnTerminal {
        let mut shell = Command::new("sh");
        shell
            .args(["-c", "trap '' HUP; \"$@\"", "sh"])
            .arg(cmd.get_program())
            .args(cmd.get_args());
        for (name, value) in cmd.get_envs() {
            match value {
                Some(value) => shell.env(name, value),
                None => shell.env_remove(name),
            };
        }
        OnTerminal::spawn(shell)
    }

    pub(crate) fn shown(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap()).into_owned()
    }

    /// Every byte the program wrote so far.
    pub(crate) fn written(&self) -> Vec<u8> {
        self.screen.lock().unwrap().clone()
    }

    /// Gives the terminal a new size, as a terminal window resized does
    /// (the program is sent SIGWINCH).
    pub(crate) fn resize(&self, rows: u16, cols: u16) {
        let size = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let master = self.master.as_ref().expect("the terminal is open");
        // SAFETY: TIOCSWINSZ reads one winsize, which `size` is.
        let sized = unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &size) };
        assert_eq!(sized, 0);
    }

    /// Waits until the screen has shown `text` `times` times.
    async fn wait_for(&self, text: &str, times: usize) {
        for _ in 0..3000 {
            if self.shown().matches(text).count() >= times {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("never shown {times}× {text:?}:\n{}", self.shown());
    }

    /// Waits for the next prompt after those shown so far.
    async fn next_prompt(&self, shown_before: usize) {
        self.wait_for(PROMPT, shown_before + 1).await;
    }

    /// How many prompts have been shown.
    fn prompts(&self) -> usize {
        self.shown().matches(PROMPT).count()
    }

    /// Whether the terminal is in its ordinary (cooked) modes: lines edited
    /// by the terminal, keys echoed, ctrl-c a signal.
    pub(crate) fn cooked(&self) -> bool {
        use nix::sys::termios::LocalFlags;
        let modes = nix::sys::termios::tcgetattr(&self.slave).unwrap();
        modes
            .local_flags
            .contains(LocalFlags::ICANON | LocalFlags::ECHO | LocalFlags::ISIG)
    }

    /// Types `keys`.
    pub(crate) fn type_keys(&self, keys: &str) {
        let master = self.master.as_ref().expect("the terminal is open");
        nix::unistd::write(master.as_fd(), keys.as_bytes()).unwrap();
    }

    /// Closes the terminal's other side, as a terminal window closes or an
    /// ssh connection drops.
    fn close_terminal(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        let master = self.master.take().unwrap();
        drop(Arc::into_inner(master).expect("the reader let go of the terminal"));
    }

    /// The CPU time the process, its children and their reaped children
    /// have used so far.
    fn cpu(&self) -> Duration {
        let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", self.pid))
            .unwrap_or_default();
        std::iter::once(self.pid)
            .chain(children.split_whitespace().map(|c| c.parse().unwrap()))
            .map(cpu_of)
            .sum()
    }

    /// Waits (10 s at most) for the process's end: its exit code (or 128 +
    /// the signal that killed it), how long that took, and its CPU time with
    /// its reaped children's.
    pub(crate) fn wait_for_exit(&mut self) -> (i32, Duration, Duration) {
        let start = Instant::now();
        loop {
            let mut status = 0;
            // SAFETY: an all-zero rusage is a valid value to be filled.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: wait4 on our own child, with valid out-pointers.
            let reaped = unsafe { libc::wait4(self.pid, &mut status, libc::WNOHANG, &mut usage) };
            if reaped == self.pid {
                let code = if libc::WIFEXITED(status) {
                    libc::WEXITSTATUS(status)
                } else {
                    128 + libc::WTERMSIG(status)
                };
                let time = |t: libc::timeval| {
                    Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
                };
                let cpu = time(usage.ru_utime) + time(usage.ru_stime);
                self.status = Some((code, start.elapsed()));
                return (code, start.elapsed(), cpu);
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "still running 10 s later:\n{}",
                self.shown()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn signal(&self, signal: i32) {
        // SAFETY: kill of our own child, not yet reaped.
        assert_eq!(unsafe { libc::kill(self.pid, signal) }, 0);
    }
}

impl Drop for OnTerminal {
    fn drop(&mut self) {
        if self.status.is_none() {
            self.signal(libc::SIGKILL);
            let _ = self.wait_for_exit();
        }
        self.stop.store(true, Ordering::Relaxed);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// The CPU time `pid` and its reaped children have used (nothing for a
/// process already gone).
fn cpu_of(pid: i32) -> Duration {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Duration::ZERO;
    };
    // utime, stime, cutime and cstime: the 14th to 17th fields.
    let fields: Vec<u64> = stat
        .rsplit_once(") ")
        .unwrap()
        .1
        .split(' ')
        .skip(11)
        .take(4)
        .map(|f| f.parse().unwrap())
        .collect();
    // SAFETY: sysconf has no preconditions.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_millis(fields.iter().sum::<u64>() * 1000 / tick)
}

/// Keeps what the program writes, answering its cursor-position queries
/// (`ESC [ 6 n`) as a terminal at the top left would, until told to stop or
/// the terminal is gone.
fn read_screen(master: &OwnedFd, screen: &Mutex<Vec<u8>>, stop: &AtomicBool) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut buf = [0u8; 4096];
    let mut answered = 0;
    while !stop.load(Ordering::Relaxed) {
        let mut fds = [PollFd::new(master.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(20u16)) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return,
        }
        let n = match nix::unistd::read(master.as_fd(), &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let mut screen = screen.lock().unwrap();
        screen.extend_from_slice(&buf[..n]);
        let queries = screen.windows(4).filter(|w| w == b"\x1b[6n").count();
        while answered < queries {
            let _ = nix::unistd::write(master.as_fd(), b"\x1b[1;1R");
            answered += 1;
        }
    }
}

/// The pids of the live processes whose command line is `argv`.
fn processes_running(argv: &[&str]) -> Vec<i32> {
    let wanted: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted))
        .collect()
}

/// The prompt as painted: reedline's default prompt, `jobs` then a coloured
/// `> `.
const PROMPT: &str = "jobs\u{1b}[96m> ";

/// A console at its prompt with one job, `sleep SECONDS`, running: the
/// console and the job's pid.
async fn console_with_a_job(seconds: &str) -> (OnTerminal, i32) {
    started_a_job(OnTerminal::console(&[]), seconds).await
}

/// `console` at its prompt once it has started `sleep SECONDS`, and the
/// job's pid. The job ignores SIGTERM, so that it takes the whole
/// shutdown grace (a second) to go: a console that spun on its terminal
/// meanwhile would show in its CPU time.
async fn started_a_job(console: OnTerminal, seconds: &str) -> (OnTerminal, i32) {
    console.wait_for(PROMPT, 1).await;
    let prompts = console.prompts();
    console.type_keys(&format!("bash trap '' TERM; exec sleep {seconds}\r"));
    console.wait_for("started background job bash-1", 1).await;
    console.next_prompt(prompts).await;
    let job = the_job(&["sleep", seconds]).await;
    (console, job)
}

/// The pid of the one process whose command line is `argv`, once its shell
/// has exec'd it (moments after its start was answered).
async fn the_job(argv: &[&str]) -> i32 {
    for _ in 0..3000 {
        if let [pid] = processes_running(argv)[..] {
            return pid;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no single {argv:?}: {:?}", processes_running(argv));
}

/// A console at its prompt, with a job, sent `signal`: it exits with
/// `code` at once, its job gone and its terminal as it was.
async fn signal_at_the_prompt(signal: i32, code: i32, seconds: &str) {
    let (mut console, job) = console_with_a_job(seconds).await;
    assert!(!console.cooked(), "the editor reads keys raw at its prompt");
    console.signal(signal);
    let (exited, took, _) = console.wait_for_exit();
    assert_eq!(exited, code, "{}", console.shown());
    assert!(console.cooked(), "the terminal is left as it was");
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert!(gone_soon(job).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_at_the_prompt_ends_the_console_and_its_jobs() {
    signal_at_the_prompt(libc::SIGTERM, 143, "3001").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_from_outside_ends_the_console_and_its_jobs() {
    signal_at_the_prompt(libc::SIGINT, 130, "3002").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_ends_the_console_and_its_jobs() {
    signal_at_the_prompt(libc::SIGHUP, 129, "3003").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_clears_the_line_and_a_second_one_ends_the_console() {
    let (mut console, job) = console_with_a_job("3004").await;
    console.type_keys("job_output bash-1");
    let prompts = console.prompts();
    console.type_keys("\x03");
    console.wait_for("ctrl-c again", 1).await;
    console.next_prompt(prompts).await;
    // The cleared line was not run, and the console still answers.
    let prompts = console.prompts();
    console.type_keys("job_list\r");
    console.wait_for("running", 1).await;
    console.next_prompt(prompts).await;
    assert!(!console.shown().contains("[status:"), "{}", console.shown());
    // A line in between starts the count again.
    console.type_keys("\x03");
    console.wait_for("ctrl-c again", 2).await;
    console.type_keys("\x03");
    let (code, took, _) = console.wait_for_exit();
    assert_eq!(code, 130, "{}", console.shown());
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert!(gone_soon(job).await);
}

/// Closes `console`'s terminal and checks that it ends at once, with 129,
/// spending next to no CPU on the way, and takes `job` with it.
async fn hang_up(mut console: OnTerminal, job: Option<i32>) {
    let before = console.cpu();
    console.close_terminal();
    let (code, took, cpu) = console.wait_for_exit();
    assert_eq!(code, 129);
    assert!(took < Duration::from_secs(2), "{took:?}");
    let spent = cpu.saturating_sub(before);
    assert!(
        spent < Duration::from_millis(200),
        "{spent:?} of CPU after the hang-up"
    );
    if let Some(job) = job {
        assert!(gone_soon(job).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_that_goes_away_ends_the_console_without_spinning() {
    // Told by the kernel's SIGHUP, as its session's leader.
    let (console, job) = console_with_a_job("3005").await;
    hang_up(console, Some(job)).await;
    // Told by nobody: its terminal is all it has.
    let mut cmd = Command::new(BIN);
    cmd.arg("--cache-dir").arg(cache_dir()).arg("shell");
    let (console, job) = started_a_job(OnTerminal::under_a_shell(cmd), "3008").await;
    hang_up(console, Some(job)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_that_goes_away_during_a_wait_ends_the_console() {
    let mut cmd = Command::new(BIN);
    cmd.arg("--cache-dir").arg(cache_dir()).arg("shell");
    let (console, job) = started_a_job(OnTerminal::under_a_shell(cmd), "3006").await;
    // A read that waits for the job's end, far longer than the test.
    console.type_keys("job_output bash-1 --wait --timeout-ms 60000\r");
    console.wait_for("--timeout-ms 60000", 1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    hang_up(console, Some(job)).await;
}

/// `shell --session tty-key` on a terminal, at its prompt. The daemon may
/// not yet have seen the last client leave: a refusal for that is retried.
async fn attach(runtime: &Runtime, under_a_shell: bool) -> OnTerminal {
    for _ in 0..100 {
        let cmd = runtime.command(&["shell", "--session", "tty-key"]);
        let mut console = if under_a_shell {
            OnTerminal::under_a_shell(cmd)
        } else {
            OnTerminal::spawn(cmd)
        };
        for _ in 0..3000 {
            if console.shown().contains(PROMPT) {
                return console;
            }
            if console.shown().contains("is in use by another client") {
                console.wait_for_exit();
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the session stayed in use, or its console never came");
}

/// `shell --session` on a terminal: signals and a hang-up end the client
/// only; the session and its job stay in the daemon.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_console_leaves_its_session_to_the_daemon_however_it_ends() {
    let runtime = Runtime::new();
    let mut console = attach(&runtime, false).await;
    let prompts = console.prompts();
    console.type_keys("bash sleep 3007\r");
    console.wait_for("started background job bash-1", 1).await;
    console.next_prompt(prompts).await;
    let job = the_job(&["sleep", "3007"]).await;
    let running = |runtime: &Runtime| {
        let ps = runtime.json(&["ps", "--session", "tty-key", "--json"]);
        ps.to_string().contains("\"running\"")
    };
    console.type_keys("exit\r");
    assert_eq!(console.wait_for_exit().0, 0);
    assert!(running(&runtime));
    for (signal, code) in [
        (libc::SIGTERM, 143),
        (libc::SIGINT, 130),
        (libc::SIGHUP, 129),
    ] {
        let mut console = attach(&runtime, false).await;
        console.signal(signal);
        let (exited, took, _) = console.wait_for_exit();
        assert_eq!(exited, code, "{}", console.shown());
        assert!(console.cooked(), "the terminal is left as it was");
        assert!(took < Duration::from_secs(2), "{took:?}");
        assert!(running(&runtime), "signal {signal}");
    }
    let console = attach(&runtime, true).await;
    hang_up(console, None).await;
    assert!(running(&runtime));
    assert_eq!(processes_running(&["sleep", "3007"]), [job]);

    // `logs -f` of the quiet job, on a terminal that goes away.
    let follow = OnTerminal::under_a_shell(runtime.command(&[
        "logs",
        "-f",
        "--session",
        "tty-key",
        "bash-1",
    ]));
    tokio::time::sleep(Duration::from_millis(300)).await;
    hang_up(follow, None).await;
    assert!(running(&runtime));
    assert_eq!(processes_running(&["sleep", "3007"]), [job]);
}
