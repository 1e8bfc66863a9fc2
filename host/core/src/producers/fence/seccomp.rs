//! The seccomp filter for a job without network.

/// The seccomp filter for a job without network: `socket` of any family
/// (Unix sockets too: a pathname socket of the user's services would reach
/// past the fence; `socketpair` stays) and `io_uring_setup` (whose rings can
/// open sockets) fail with `EACCES`, as does every x32 system call (which a
/// filter by number would not see). Empty on architectures it is not built
/// for. Made once: the fenced spawner threads load this very filter.
pub(crate) fn network_off_filter() -> &'static [libc::sock_filter] {
    static FILTER: std::sync::OnceLock<Vec<libc::sock_filter>> = std::sync::OnceLock::new();
    FILTER.get_or_init(build_network_off_filter)
}

fn build_network_off_filter() -> Vec<libc::sock_filter> {
    use seccompiler::{SeccompAction, SeccompFilter, TargetArch};
    let arch = if cfg!(target_arch = "aarch64") {
        TargetArch::aarch64
    } else if cfg!(target_arch = "x86_64") {
        TargetArch::x86_64
    } else {
        return Vec::new();
    };
    let build = || -> Result<Vec<libc::sock_filter>, seccompiler::Error> {
        let rules = [
            (libc::SYS_socket, vec![]),
            (libc::SYS_io_uring_setup, vec![]),
        ]
        .into_iter()
        .collect();
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EACCES as u32),
            arch,
        )?;
        let program: seccompiler::BpfProgram = filter.try_into()?;
        let mut out = Vec::new();
        if cfg!(target_arch = "x86_64") {
            // x32 system calls are x86_64's numbers with bit 30 set.
            const X32_BIT: u32 = 0x4000_0000;
            out.extend([
                // Load the system call number.
                libc::sock_filter {
                    code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
                    jt: 0,
                    jf: 0,
                    k: 0,
                },
                // At or above the x32 bit: refuse; else on to the filter.
                libc::sock_filter {
                    code: (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16,
                    jt: 0,
                    jf: 1,
                    k: X32_BIT,
                },
                libc::sock_filter {
                    code: (libc::BPF_RET | libc::BPF_K) as u16,
                    jt: 0,
                    jf: 0,
                    k: libc::SECCOMP_RET_ERRNO | libc::EACCES as u32,
                },
            ]);
        }
        out.extend(program.into_iter().map(|i| libc::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        }));
        Ok(out)
    };
    match build() {
        Ok(program) => program,
        Err(e) => {
            tracing::warn!("jobs: no seccomp filter for the network fence: {e}");
            Vec::new()
        }
    }
}
