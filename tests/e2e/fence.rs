//! The job sandbox against hostile jobs, with real processes, in both
//! containment modes: under `workspace-write, network off` (signals scoped)
//! every escape below fails with the program's own error and the job goes on,
//! and a real build in the workdir and `$TMPDIR` still works. A case the
//! kernel cannot fence is skipped with the reason printed.

use std::io::Write;
use std::path::Path;

use crate::fixture::Fixture;
use host::bash::{BashConfig, BashProducer, BashRequest};
use host::containment::ContainmentMode;
use host::fence::{FencePolicy, FsAccess, NetAccess};
use serde_json::json;

struct Fenced {
    mode: ContainmentMode,
    f: Fixture,
    bash: BashProducer,
    /// The jobs' workdir: a git repository.
    work: tempfile::TempDir,
    /// Somewhere outside it that no job may write.
    outside: tempfile::TempDir,
    /// Stands for the compiled-component cache.
    cache: tempfile::TempDir,
}

impl Fenced {
    async fn new(mode: ContainmentMode) -> Option<Fenced> {
        Fenced::configured(mode, |_, _| {}).await
    }

    /// As [`Fenced::new`], with `tweak` given the config and the cache.
    async fn configured(
        mode: ContainmentMode,
        tweak: impl FnOnce(&mut BashConfig, &Path),
    ) -> Option<Fenced> {
        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        std::fs::write(cache.path().join("component.cwasm"), "native code").unwrap();
        std::fs::write(outside.path().join("victim"), "original").unwrap();
        git_init(work.path());
        let f = Fixture::new().await;
        let mut config = BashConfig {
            containment: mode,
            default_workdir: Some(work.path().to_owned()),
            sandbox: FencePolicy {
                fs: FsAccess::WorkspaceWrite,
                network: NetAccess::Off,
                ..FencePolicy::default()
            },
            private_dirs: vec![cache.path().to_owned()],
            ..BashConfig::default()
        };
        tweak(&mut config, cache.path());
        match BashProducer::new(f.registry.clone(), config) {
            Ok(bash) => Some(Fenced {
                mode,
                f,
                bash,
                work,
                outside,
                cache,
            }),
            Err(e) if mode == ContainmentMode::Cgroup => {
                println!("skipped in cgroup mode: {e}");
                None
            }
            Err(e) => panic!("{e}"),
        }
    }

    fn abi(&self) -> i32 {
        self.bash.sandbox().map_or(0, |(_, s)| s.landlock_abi)
    }

    fn start(&self, command: &str) -> String {
        self.bash
            .start(
                None,
                BashRequest {
                    command: command.into(),
                    ..Default::default()
                },
            )
            .unwrap()
    }

    /// Runs `command` to its end; its whole output.
    async fn run(&self, command: &str) -> String {
        let id = self.start(command);
        self.settle(&id).await
    }

    async fn settle(&self, id: &str) -> String {
        self.f.waited_output(None, id).await
    }

    /// Reads job `id` until its output holds a line; that line.
    async fn first_line(&self, id: &str) -> String {
        let seen = crate::fixture::read_a_line(&self.f.registry, id).await;
        seen.lines().next().unwrap().to_owned()
    }

    fn victim(&self) -> String {
        std::fs::read_to_string(self.outside.path().join("victim")).unwrap()
    }
}

/// Makes `dir` a git repository.
fn git_init(dir: &Path) {
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(git.success());
}

/// `attempt`, then proof the job went on: its answer must end with `alive`
/// and a clean exit.
fn went_on(text: &str) {
    assert!(
        text.contains("alive\n") && text.ends_with("[status: completed, exit code: 0]"),
        "{text}"
    );
}

/// A fenced shell in each containment mode this machine gives, or none
/// (with the reason printed) when its kernel has no Landlock.
async fn fenced() -> Vec<Fenced> {
    let mut shells = Vec::new();
    for mode in [ContainmentMode::Cgroup, ContainmentMode::Fallback] {
        if let Some(s) = Fenced::new(mode).await {
            if s.abi() < 1 {
                println!("skipped: no Landlock on this kernel");
                return Vec::new();
            }
            shells.push(s);
        }
    }
    shells
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_outside_the_workdir_fail_every_way() {
    for s in fenced().await {
        let mode = s.mode;
        let out = s.outside.path().display().to_string();
        let cases = [
            format!("echo x > {out}/direct"),
            format!("ln -s {out}/victim link; echo x > link"),
            format!("ln {out}/victim hard; echo x >> hard"),
            format!("echo x > /proc/self/root{out}/via-proc"),
            format!("echo f > f; mv f {out}/moved"),
            format!("cp /dev/null {out}/victim"),
        ];
        for attempt in cases {
            went_on(&s.run(&format!("{attempt}; echo alive")).await);
        }
        // A git directory is bound read-only whole: it cannot be renamed
        // away and planted anew; nor can the directory that holds a nested
        // one (each directory on the way is pinned).
        went_on(&s.run("mv .git .g; ls -d .g; echo alive").await);
        assert!(s.work.path().join(".git/HEAD").exists(), "{mode:?}");
        assert!(!s.work.path().join(".g").exists(), "{mode:?}");
        let inner = s.work.path().join("sub/proj");
        std::fs::create_dir_all(&inner).unwrap();
        git_init(&inner);
        went_on(
            &s.run("mv sub/proj sub/old; mv sub sub2; mkdir -p sub/proj/.git/hooks; echo evil > sub/proj/.git/hooks/pre-commit; echo alive")
                .await,
        );
        assert!(inner.join(".git/HEAD").exists(), "{mode:?}");
        assert!(!s.work.path().join("sub2").exists(), "{mode:?}");
        assert!(!inner.join(".git/hooks/pre-commit").exists(), "{mode:?}");
        // No disk can be read raw: only named devices are. (A disk this
        // test itself cannot read proves nothing.)
        let disks: Vec<&str> = ["/dev/vda", "/dev/sda", "/dev/nvme0n1"]
            .into_iter()
            .filter(|disk| {
                std::fs::File::open(disk)
                    .and_then(|mut f| std::io::Read::read(&mut f, &mut [0u8; 1]))
                    .is_ok_and(|n| n == 1)
            })
            .collect();
        if disks.is_empty() {
            println!("raw-disk case skipped: no disk here that this user can read");
        } else {
            let text = s
                .run(&format!(
                    "for d in {}; do head -c 1 $d | wc -c; done; echo alive",
                    disks.join(" ")
                ))
                .await;
            went_on(&text);
            assert!(!text.lines().any(|l| l.trim() == "1"), "{text}");
        }
        assert_eq!(s.victim(), "original", "{mode:?}");
        for name in ["direct", "via-proc", "moved"] {
            assert!(!s.outside.path().join(name).exists(), "{name} in {mode:?}");
        }
        // The workdir and the job's own TMPDIR are written as ever.
        let text = s
            .run(
                "echo here > mine && cat mine && echo t > $TMPDIR/t && cat $TMPDIR/t && echo alive",
            )
            .await;
        went_on(&text);
        assert!(text.starts_with("here\nt\n"), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_config_and_the_host_s_files_stay_as_they_were() {
    for s in fenced().await {
        let mode = s.mode;
        let cache = s.cache.path().display().to_string();
        let spill = s.bash.spill_dir().display().to_string();
        std::fs::write(s.bash.spill_dir().join("secret"), "spilled").unwrap();
        let text = s
            .run(&format!(
                "echo evil > .git/hooks/pre-commit; echo '[core]' >> .git/config; \
                 echo x > {cache}/component.cwasm; cat {cache}/component.cwasm; \
                 cat {spill}/secret; echo alive"
            ))
            .await;
        went_on(&text);
        for leak in ["native code", "spilled"] {
            assert!(!text.contains(leak), "{leak} leaked in {mode:?}: {text}");
        }
        assert!(
            !s.work.path().join(".git/hooks/pre-commit").exists(),
            "{mode:?}"
        );
        assert_eq!(
            std::fs::read_to_string(s.cache.path().join("component.cwasm")).unwrap(),
            "native code"
        );
        let config = std::fs::read_to_string(s.work.path().join(".git/config")).unwrap();
        assert!(!config.ends_with("[core]\n"), "{config}");

        // A repository the job makes itself cannot be fenced: its end names
        // every hook it planted.
        let text = s
            .run("git init -q nested && echo evil > nested/.git/hooks/pre-commit && echo alive")
            .await;
        let planted = s
            .work
            .path()
            .canonicalize()
            .unwrap()
            .join("nested/.git/hooks/pre-commit");
        assert!(
            text.ends_with(&format!(
                "[status: completed, exit code: 0; hooks changed: {}]",
                planted.display()
            )),
            "{text}"
        );
        // Every later job finds that repository at its start (its making
        // raised change notices), so none can write its hooks.
        for _ in 0..2 {
            went_on(
                &s.run("echo worse > nested/.git/hooks/pre-commit; echo alive")
                    .await,
            );
        }
        assert_eq!(std::fs::read_to_string(&planted).unwrap(), "evil\n");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_job_s_files_and_processes_are_out_of_reach() {
    for s in fenced().await {
        let mode = s.mode;
        let other = s.start("echo secret > $TMPDIR/secret; echo $$ $TMPDIR; exec sleep 300");
        let line = s.first_line(&other).await;
        let (pid, tmp) = line.split_once(' ').unwrap();
        let text = s
            .run(&format!(
                "cat {tmp}/secret; echo x > {tmp}/planted; echo alive"
            ))
            .await;
        went_on(&text);
        assert!(!text.contains("secret\n"), "{text}");
        // Neither attach nor read its executable: Landlock's ptrace rule
        // (another domain).
        let text = s
            .run(&format!(
                "python3 -c \"import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); \
                 r = libc.ptrace(16, {pid}, 0, 0); print('ptrace', r, os.strerror(ctypes.get_errno()))\"; \
                 readlink /proc/{pid}/exe; echo alive"
            ))
            .await;
        went_on(&text);
        assert!(
            text.starts_with("ptrace -1 Operation not permitted\nalive\n"),
            "{text}"
        );
        assert!(!Path::new(tmp).join("planted").exists());
        if s.abi() >= 6 {
            let text = s
                .run(&format!(
                    "kill -TERM {pid}; kill -0 {host}; echo alive",
                    host = std::process::id()
                ))
                .await;
            went_on(&text);
            assert!(text.contains("Operation not permitted"), "{text}");
            assert!(
                !s.f.registry.inspect(&other).unwrap().status.is_terminal(),
                "the other job was signalled in {mode:?}"
            );
        } else {
            println!("skipped signal scoping: Landlock ABI {} < 6", s.abi());
        }
        s.f.registry.kill(&other, None, None).unwrap();
        s.settle(&other).await;
        // Its temporary directory was emptied with it (and may serve a
        // later job).
        assert!(
            std::fs::read_dir(tmp).map_or(true, |mut d| d.next().is_none()),
            "{tmp} kept the job's files"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_network_and_the_host_s_sockets_are_off() {
    for s in fenced().await {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        // A name of its own per mode: an abstract name is free again only
        // when every copy of its socket is closed, and a process that another
        // test clones holds a copy until its `execve`.
        let abstract_name = format!("jobs-host-fence-test-{}-{:?}", std::process::id(), s.mode);
        let addr = {
            use std::os::linux::net::SocketAddrExt;
            std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap()
        };
        let _unix = std::os::unix::net::UnixListener::bind_addr(&addr)
            .unwrap_or_else(|e| panic!("binding {abstract_name}: {e}"));
        let py = |code: &str| format!("python3 -c \"{code}\" 2>&1 | tail -n 1");
        let cases = [
            format!("(exec 3<>/dev/tcp/127.0.0.1/{port})"),
            py("import socket; socket.socket().bind(('127.0.0.1', 0))"),
            py(
                "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', 9))",
            ),
            py("import socket; socket.socket(socket.AF_INET6, socket.SOCK_RAW, 58)"),
        ];
        for attempt in cases {
            let text = s.run(&format!("{attempt}; echo alive")).await;
            went_on(&text);
            assert!(
                text.contains("Permission denied") || text.contains("PermissionError"),
                "{:?}, {attempt}: {text}",
                s.mode
            );
        }
        // Nor a pathname socket of the user's services (D-Bus, a Docker
        // daemon): no socket can be made at all.
        let socket = s.outside.path().join("service.sock");
        let _service = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let text = s
            .run(&py(&format!(
                "import socket; socket.socket(socket.AF_UNIX).connect('{}')",
                socket.display()
            )))
            .await;
        assert!(text.contains("PermissionError"), "{text}");
        listener.set_nonblocking(true).unwrap();
        assert!(listener.accept().is_err(), "a job reached the listener");
        if s.abi() >= 6 {
            let text = s
                .run(&py(&format!(
                    "import socket; socket.socket(socket.AF_UNIX).connect(b'\\\\0{abstract_name}')"
                )))
                .await;
            assert!(text.contains("PermissionError"), "{text}");
        } else {
            println!("skipped abstract sockets: Landlock ABI {} < 6", s.abi());
        }
        // No privilege can be gained through a setuid program.
        let text = s.run("grep NoNewPrivs /proc/self/status").await;
        assert!(text.starts_with("NoNewPrivs:\t1\n"), "{text}");
    }
}

/// Removes a directory made for a test, however the test ends.
struct Made(std::path::PathBuf);

impl Drop for Made {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_s_socket_directory_made_during_a_session_is_covered_at_once() {
    // X11's socket directory stands for every service's: the host resolves
    // them once and again only when a name on their way changes, so one
    // that appears between two starts must be covered at the second.
    let x11 = Path::new("/tmp/.X11-unix");
    if x11.exists() {
        println!("skipped: {} exists on this machine", x11.display());
        return;
    }
    for s in fenced().await {
        let namespace = s.bash.sandbox().is_some_and(|(_, k)| k.mount_namespace);
        went_on(&s.run("ls /tmp/.X11-unix; echo alive").await);
        let made = Made(x11.to_owned());
        std::fs::create_dir(&made.0).unwrap();
        std::fs::write(made.0.join("X0"), "a display").unwrap();
        let text = s.run("cat /tmp/.X11-unix/X0; echo alive").await;
        went_on(&text);
        if namespace {
            assert!(!text.contains("a display"), "{:?}: {text}", s.mode);
            assert!(text.contains("Permission denied"), "{:?}: {text}", s.mode);
        } else {
            println!("not checked in {:?} mode: no mount namespace here", s.mode);
        }
        // And once it is gone, jobs start as before.
        drop(made);
        let text = s.run("ls /tmp/.X11-unix; echo alive").await;
        went_on(&text);
        assert!(text.contains("No such file or directory"), "{text}");
    }
}

/// The component cache given as a covered directory: the job namespace's
/// empty tmpfs hides it where there is a namespace (a job finds it empty),
/// and the read rules leave it out where there is none, or where it holds
/// the spill directory and with it the jobs' own temporary directories.
/// Either way no job reads or replaces what it holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_covered_cache_is_neither_read_nor_written() {
    for mode in [ContainmentMode::Cgroup, ContainmentMode::Fallback] {
        for spill_in_cache in [false, true] {
            // Away from `/tmp`, as the default cache directory is, so that
            // the read rules grant `/tmp` whole.
            let elsewhere = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
            let Some(s) = Fenced::configured(mode, |config, cache| {
                config.private_dirs.clear();
                config.covered_dirs = vec![cache.to_owned()];
                config.fenced_spill_parent = Some(if spill_in_cache {
                    cache.to_owned()
                } else {
                    elsewhere.path().to_owned()
                });
            })
            .await
            else {
                continue;
            };
            if s.abi() < 1 {
                println!("skipped: no Landlock on this kernel");
                return;
            }
            let case = format!("{mode:?}, spill in the cache: {spill_in_cache}");
            assert_eq!(
                s.bash.spill_dir().starts_with(s.cache.path()),
                spill_in_cache,
                "{case}"
            );
            let cache = s.cache.path().display().to_string();
            let text = s
                .run(&format!(
                    "echo t > $TMPDIR/t && cat $TMPDIR/t; ls -A {cache}; \
                     awk '$5 == \"{cache}\" {{ print \"covered by\", $9 }}' /proc/self/mountinfo; \
                     cat {cache}/component.cwasm; echo x > {cache}/component.cwasm; echo alive"
                ))
                .await;
            went_on(&text);
            assert!(text.starts_with("t\n"), "{case}: {text}");
            assert!(!text.contains("native code"), "{case}: {text}");
            assert_eq!(
                std::fs::read_to_string(s.cache.path().join("component.cwasm")).unwrap(),
                "native code",
                "{case}"
            );
            let namespace = s.bash.sandbox().unwrap().1.mount_namespace;
            assert!(text.contains("Permission denied"), "{case}: {text}");
            if namespace && !spill_in_cache {
                // Covered: even its names are gone.
                assert!(text.contains("\ncovered by tmpfs\n"), "{case}: {text}");
                assert!(!text.contains("\ncomponent.cwasm\n"), "{case}: {text}");
            } else {
                // Left out of the read rules: its names are listed, as
                // every directory's are, but nothing in it is opened.
                assert!(!text.contains("covered by"), "{case}: {text}");
                assert!(text.contains("\ncomponent.cwasm\n"), "{case}: {text}");
            }
            // Still one of the host's private directories: no workdir, not
            // even for a job that only reads (it would start in the cache
            // before a cover could hide it).
            for fs in [FsAccess::WorkspaceWrite, FsAccess::ReadOnly] {
                let refused = s.bash.start(
                    None,
                    BashRequest {
                        command: "cat *.cwasm".into(),
                        workdir: Some(s.cache.path().to_owned()),
                        sandbox: Some(host::fence::Sandbox {
                            fs,
                            network: NetAccess::Off,
                        }),
                        ..Default::default()
                    },
                );
                let Err(host::StartError::Producer(why)) = refused else {
                    panic!("{case}, {fs:?}: not refused: {refused:?}")
                };
                assert!(
                    why.starts_with("invalid workdir: under the sandbox"),
                    "{why}"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workdir_in_or_around_the_host_s_private_directories_is_refused() {
    for s in fenced().await {
        let mut dirs = vec![s.bash.spill_dir().to_owned(), s.cache.path().to_owned()];
        // The kernel's own file systems: from a cgroup tree a job could move
        // itself out of its cgroup.
        dirs.extend(
            ["/sys/fs/cgroup", "/proc/self"]
                .iter()
                .map(std::path::PathBuf::from),
        );
        for dir in dirs {
            let refused = s.bash.start(
                None,
                BashRequest {
                    command: "echo x > planted".into(),
                    workdir: Some(dir.clone()),
                    ..Default::default()
                },
            );
            let Err(host::StartError::Producer(why)) = refused else {
                panic!("a start in {} was not refused: {refused:?}", dir.display())
            };
            assert!(
                why.starts_with("invalid workdir: under the sandbox"),
                "{why}"
            );
            assert!(!dir.join("planted").exists());
        }
    }
}

/// A later job gets a finished job's temporary directory and, when nothing
/// it names changed, that job's ruleset: it writes where the first could,
/// and nowhere else. A workdir made anew under its name gets rules of its
/// own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_given_a_finished_job_s_tmpdir_is_fenced_the_same() {
    for s in fenced().await {
        let mode = s.mode;
        // Below the workdir: making it again changes no directory the read
        // rules list (`/tmp` is one), which would make every ruleset anew.
        let workdir = s.work.path().join("sub");
        std::fs::create_dir(&workdir).unwrap();
        let victim = s.outside.path().join("victim");
        let job = format!(
            "echo $TMPDIR; echo t > $TMPDIR/t && echo tmp ok; echo w > w && echo work ok; \
             echo planted > {} || true; echo alive",
            victim.display()
        );
        let s = &s;
        let run = |command: String| {
            let id = s
                .bash
                .start(
                    None,
                    BashRequest {
                        command,
                        workdir: Some(workdir.clone()),
                        ..Default::default()
                    },
                )
                .unwrap();
            async move { s.settle(&id).await }
        };
        let first = run(job.clone()).await;
        went_on(&first);
        let tmp = first.lines().next().unwrap().to_owned();
        // Only a removed cgroup proves that no process of the first is left
        // (a process that outlived it would reach its directory still).
        let reused = mode == ContainmentMode::Cgroup;
        let fenced_the_same = |text: &str| {
            went_on(text);
            assert_eq!(
                text.lines().next() == Some(tmp.as_str()),
                reused,
                "{mode:?}"
            );
            assert!(text.contains("tmp ok\nwork ok\n"), "{mode:?}: {text}");
            assert_eq!(s.victim(), "original", "{mode:?}");
        };
        fenced_the_same(&run(job.clone()).await);
        // The workdir removed and made again: the kept rules name the old one.
        std::fs::remove_dir_all(&workdir).unwrap();
        std::fs::create_dir(&workdir).unwrap();
        fenced_the_same(&run(job.clone()).await);
    }
}

/// A job that leaves a tree deeper than any path in its temporary
/// directory (made here from outside, as Landlock makes each level slower
/// to make from inside) does not take the host down when the host takes
/// the directory back: the tree goes, and the next job runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_deeper_than_any_path_in_a_job_s_tmpdir_is_removed() {
    for s in fenced().await {
        let mode = s.mode;
        let gate = s.outside.path().join("gate");
        let made = std::process::Command::new("mkfifo")
            .arg(&gate)
            .status()
            .unwrap();
        assert!(made.success());
        let id = s.start(&format!(
            "echo $TMPDIR; read -r _ < {}; echo alive",
            gate.display()
        ));
        let tmp = std::path::PathBuf::from(s.first_line(&id).await);
        let depth = 20_000;
        let mut dir: std::os::fd::OwnedFd = std::fs::File::open(&tmp).unwrap().into();
        for _ in 0..depth {
            use std::os::fd::{AsRawFd, FromRawFd};
            // SAFETY: mkdirat and openat of a NUL-terminated name in a
            // directory this holds open; the descriptor returned is owned
            // by nobody else.
            dir = unsafe {
                assert_eq!(libc::mkdirat(dir.as_raw_fd(), c"d".as_ptr(), 0o700), 0);
                let fd = libc::openat(
                    dir.as_raw_fd(),
                    c"d".as_ptr(),
                    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
                );
                assert!(fd >= 0);
                std::os::fd::OwnedFd::from_raw_fd(fd)
            };
        }
        drop(dir);
        std::fs::write(&gate, "go\n").unwrap();
        went_on(&s.settle(&id).await);
        // Taken back for a later job (emptied), or removed.
        let next = s.run("echo $TMPDIR; ls -A $TMPDIR; echo alive").await;
        went_on(&next);
        if next.lines().next() == Some(tmp.to_str().unwrap()) {
            assert_eq!(next.lines().nth(1), Some("alive"), "{mode:?}: {next}");
        } else {
            assert!(!tmp.exists(), "{mode:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_build_in_the_workdir_and_tmpdir_works_unchanged() {
    for s in fenced().await {
        let mode = s.mode;
        let mut makefile = std::fs::File::create(s.work.path().join("Makefile")).unwrap();
        writeln!(makefile, "m: m.c\n\tcc -o m m.c").unwrap();
        std::fs::write(
            s.work.path().join("m.c"),
            "#include <stdio.h>\nint main(void) { puts(\"built\"); return 0; }\n",
        )
        .unwrap();
        let text = s.run("make -s && ./m && git status --short | sort").await;
        assert_eq!(
            text, "built\n?? Makefile\n?? m\n?? m.c\n[status: completed, exit code: 0]",
            "{mode:?}"
        );
    }
}

/// Starts a session's first job with `args` and reads it to its end.
async fn first_job_read(session: &host::session::Session, args: serde_json::Value) -> String {
    nth_job_read(session, 1, &args).await
}

/// Starts the session's `n`th job with `args` and reads it to its end.
async fn nth_job_read(
    session: &host::session::Session,
    n: usize,
    args: &serde_json::Value,
) -> String {
    let started = session.call("bash", args).await;
    assert_eq!(
        started.outcome.text,
        format!("started background job bash-{n}")
    );
    let read = session
        .call(
            "job_output",
            &json!({"job_id": format!("bash-{n}"), "wait": true}),
        )
        .await;
    read.outcome.text
}

/// Whether this kernel's Landlock ABI is below `abi` (then the test is
/// skipped, and says so).
async fn landlock_below(abi: i32) -> bool {
    let below = Fenced::new(ContainmentMode::Fallback)
        .await
        .is_some_and(|s| s.abi() < abi);
    if below {
        println!("skipped: this kernel's Landlock is older than ABI {abi}");
    }
    below
}

/// A session over the real component with the `sandbox` extension, whose
/// jobs run under `fs, network off` in `work`, with no Landlock ABI above
/// `max_abi` when it is set.
async fn sandboxed_session(
    work: &Path,
    fs: FsAccess,
    max_abi: Option<i32>,
) -> (host::session::Session, BashProducer) {
    let sandbox = FencePolicy {
        fs,
        network: NetAccess::Off,
        max_landlock_abi: max_abi,
        ..FencePolicy::default()
    };
    let config = format!(
        r#"{{"extensions": ["sandbox"], "sandbox": {{"files": "{}", "network": "off"}}}}"#,
        fs.as_str()
    );
    session_in(work, sandbox, &config).await
}

/// A session over the real component mounted with `config`, whose jobs run
/// in `work` under the session's `sandbox`.
async fn session_in(
    work: &Path,
    sandbox: FencePolicy,
    config: &str,
) -> (host::session::Session, BashProducer) {
    let registry = host::JobRegistry::new(
        host::RegistryConfig::default(),
        host::AgentDirectory::default(),
    );
    let producer = BashProducer::new(
        registry.clone(),
        BashConfig {
            default_workdir: Some(work.to_owned()),
            sandbox,
            ..BashConfig::default()
        },
    )
    .unwrap();
    let mount = host::Mount::new(crate::fixture::runtime(), registry, config)
        .await
        .unwrap();
    let session =
        host::session::Session::open("fenced", std::sync::Arc::new(mount), producer.clone()).0;
    (session, producer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_narrows_a_job_s_sandbox_and_sees_it_but_cannot_widen_it() {
    if landlock_below(1).await {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let (session, _) = sandboxed_session(work.path(), FsAccess::WorkspaceWrite, None).await;
    let text = &first_job_read(
        &session,
        json!({"command": "echo x > mine; echo done", "sandbox": {"files": "read-only"}}),
    )
    .await;
    assert!(text.starts_with("done\n[stderr]\n"), "{text}");
    assert!(text.contains(": mine: Permission denied\n"), "{text}");
    assert!(
        text.ends_with("\n[sandbox: read-only, network off]\n[status: completed, exit code: 0]"),
        "{text}"
    );
    assert!(!work.path().join("mine").exists());
    let wider = session
        .call(
            "bash",
            &json!({"command": "true", "sandbox": {"network": "on"}}),
        )
        .await;
    assert!(wider.outcome.is_error);
    assert_eq!(
        wider.outcome.text,
        "Error: invalid sandbox: workspace-write, network on is wider than this session's sandbox (workspace-write, network off); a start may only narrow it"
    );
    // The session's own jobs say theirs.
    session.call("bash", &json!({"command": "true"})).await;
    // Ended first, so the row's status is known.
    session
        .call("job_output", &json!({"job_id": "bash-2", "wait": true}))
        .await;
    let list = session.call("job_list", &json!({})).await;
    assert_eq!(
        list.outcome.text,
        "bash-1 [bash] completed \u{2014} echo x > mine; echo done [sandbox: read-only, network off]\nbash-2 [bash] completed \u{2014} true [sandbox: workspace-write, network off]"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_short_of_a_part_runs_the_job_with_the_rest_and_says_so() {
    if landlock_below(6).await {
        return;
    }
    // As on a kernel of Landlock ABI 3 (6.2): files fenced, no scoping.
    let work = tempfile::tempdir().unwrap();
    let (session, producer) =
        sandboxed_session(work.path(), FsAccess::WorkspaceWrite, Some(3)).await;
    let started = session
        .call("bash", &json!({"command": "echo x > mine; echo done"}))
        .await;
    assert_eq!(started.outcome.text, "started background job bash-1");
    let list = session.call("job_list", &json!({})).await;
    assert!(
        list.outcome
            .text
            .ends_with("echo x > mine; echo done [sandbox: workspace-write, network off]"),
        "{}",
        list.outcome.text
    );
    let read = session
        .call("job_output", &json!({"job_id": "bash-1", "wait": true}))
        .await;
    let missing = producer
        .sandbox()
        .map(|(policy, support)| support.missing(&policy.sandbox()))
        .unwrap();
    assert!(
        missing.contains(&"signal and abstract-socket scoping (Landlock ABI 6)"),
        "{missing:?}"
    );
    assert!(
        read.outcome.text.ends_with(&format!(
            "done\n[sandbox: workspace-write, network off]\n[status: completed, exit code: 0; sandbox without: {}]",
            missing.join(", ")
        )),
        "{}",
        read.outcome.text
    );
    assert!(work.path().join("mine").exists());

    // As on a kernel without Landlock: files are not fenced, and the job's
    // status says so; the network is still off (seccomp).
    let outside = tempfile::tempdir().unwrap();
    let (session, _) = sandboxed_session(work.path(), FsAccess::WorkspaceWrite, Some(0)).await;
    let command = format!("echo x > {}/reached; echo done", outside.path().display());
    let text = first_job_read(&session, json!({ "command": command })).await;
    assert!(
        text.starts_with("done\n[sandbox: full, network off]\n[status: completed, exit code: 0; sandbox without: the file fence (Landlock), "),
        "{text}"
    );
    assert!(outside.path().join("reached").exists());

    // The network alone fenced, where Landlock has no network rights (before
    // ABI 4): seccomp does it all, and the job runs.
    let (session, _) = sandboxed_session(work.path(), FsAccess::Full, Some(3)).await;
    let command = "python3 -c 'import socket; socket.socket()' 2>/dev/null || echo no-socket";
    let text = first_job_read(&session, json!({ "command": command })).await;
    assert!(
        text.starts_with("no-socket\n[sandbox: full, network off]\n[status: completed, exit code: 0; sandbox without: "),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_refuses_a_wider_sandbox_whoever_asks() {
    let Some(s) = Fenced::new(ContainmentMode::Fallback).await else {
        return;
    };
    let refused = s.bash.start(
        None,
        BashRequest {
            command: "true".into(),
            sandbox: Some(host::fence::Sandbox {
                fs: FsAccess::Full,
                network: NetAccess::On,
            }),
            ..Default::default()
        },
    );
    let Err(host::StartError::Producer(why)) = refused else {
        panic!("{refused:?}")
    };
    assert_eq!(
        why,
        "invalid sandbox: full, network on is wider than this session's sandbox (workspace-write, network off)"
    );
    assert!(s.f.registry.list(None).is_empty());
}

/// Network-off jobs come from spawner threads that took the filter,
/// `no_new_privs` and (on a privileged host) the empty bounding set on
/// themselves once; the host's other jobs, started in between, must get none
/// of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_between_network_off_jobs_keep_their_network_and_privileges() {
    if landlock_below(1).await {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let (session, _producer) = session_in(
        work.path(),
        FencePolicy::default(),
        r#"{"extensions": ["sandbox"]}"#,
    )
    .await;
    let probe = "python3 -c \"import socket; socket.socket(); print('socket made')\" 2>&1 | tail -n 1; \
                 grep -E '^(NoNewPrivs|CapBnd)' /proc/self/status";
    // SAFETY: geteuid takes no arguments and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    for n in 1..=8 {
        let fenced = n % 2 == 1;
        let args = if fenced {
            json!({"command": probe, "sandbox": {"files": "workspace-write", "network": "off"}})
        } else {
            json!({"command": probe})
        };
        let text = nth_job_read(&session, n, &args).await;
        if fenced {
            assert!(text.contains("PermissionError"), "{n}: {text}");
            assert!(text.contains("NoNewPrivs:\t1\n"), "{n}: {text}");
            if root {
                assert!(text.contains("CapBnd:\t0000000000000000\n"), "{n}: {text}");
            }
        } else {
            assert!(text.starts_with("socket made\n"), "{n}: {text}");
            assert!(text.contains("NoNewPrivs:\t0\n"), "{n}: {text}");
            if root {
                assert!(!text.contains("CapBnd:\t0000000000000000\n"), "{n}: {text}");
            }
        }
    }
}

/// Network-off jobs come from threads that may join the shared mount
/// namespace once for many jobs: a job that fences files in between one
/// that does not is in that namespace, with its protected paths read-only,
/// and the other in the host's, where they are not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_that_fence_files_and_jobs_that_do_not_alternate_in_their_own_namespaces() {
    if landlock_below(1).await {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    git_init(work.path());
    let (session, _producer) = session_in(
        work.path(),
        FencePolicy {
            network: NetAccess::Off,
            ..FencePolicy::default()
        },
        r#"{"extensions": ["sandbox"], "sandbox": {"network": "off"}}"#,
    )
    .await;
    let host_ns = std::fs::read_link("/proc/self/ns/mnt").unwrap();
    let probe = "readlink /proc/self/ns/mnt; \
                 if echo >> .git/config; then echo hooks writable; else echo hooks read-only; fi 2>/dev/null";
    let mut fenced_ns = None;
    // Every third job fences files: the spawner threads (4) mostly take
    // jobs in turn, so most of them move both ways (`spawn::prelude`'s own
    // test moves one thread through every case).
    for n in 1..=24 {
        let fences_files = n % 3 == 0;
        let args = if fences_files {
            json!({"command": probe, "sandbox": {"files": "workspace-write"}})
        } else {
            json!({"command": probe})
        };
        let text = nth_job_read(&session, n, &args).await;
        let ns = text.lines().next().unwrap_or_default().to_owned();
        if fences_files {
            assert_ne!(ns, host_ns.to_string_lossy(), "{n}: {text}");
            assert_eq!(*fenced_ns.get_or_insert_with(|| ns.clone()), ns, "{n}");
            assert!(text.contains("hooks read-only\n"), "{n}: {text}");
        } else {
            assert_eq!(ns, host_ns.to_string_lossy(), "{n}: {text}");
            assert!(text.contains("hooks writable\n"), "{n}: {text}");
        }
    }
}
