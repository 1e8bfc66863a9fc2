//! What the kernel lets the host enforce, probed once: the Landlock ABI, the
//! seccomp filter, and (once a job needs one) a mount namespace.

use super::{FsAccess, NetAccess, Sandbox, network_off_filter};

/// What the kernel lets the host enforce, probed once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FenceSupport {
    /// The kernel's Landlock ABI (0: none).
    pub landlock_abi: i32,
    /// Whether a job can get a mount namespace of its own.
    pub mount_namespace: bool,
    /// Whether the seccomp filter for a job without network could be built.
    pub seccomp: bool,
}

impl FenceSupport {
    /// The kernel's Landlock ABI and seccomp filter (the mount namespace is
    /// probed once a job needs one: see `Fence::support_for`).
    pub(super) fn probe(max_landlock_abi: Option<i32>) -> FenceSupport {
        // SAFETY: landlock_create_ruleset(NULL, 0, VERSION) only answers the ABI.
        let abi = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<libc::c_void>(),
                0usize,
                1u32,
            )
        };
        FenceSupport {
            landlock_abi: i32::try_from(abi)
                .unwrap_or(0)
                .max(0)
                .min(max_landlock_abi.unwrap_or(i32::MAX)),
            mount_namespace: false,
            seccomp: !network_off_filter().is_empty(),
        }
    }

    /// The part of `job` this kernel enforces, as a sandbox: what a job's
    /// status shows. Files are fenced with Landlock; the network is off only
    /// with the seccomp filter (Landlock alone leaves UDP open), and fenced
    /// by port from Landlock ABI 4. What a sandbox cannot say (protected
    /// paths, scoping) is in [`FenceSupport::missing`].
    pub fn enforced(&self, job: &Sandbox) -> Sandbox {
        Sandbox {
            fs: if self.landlock_abi < 1 {
                FsAccess::Full
            } else {
                job.fs
            },
            network: match &job.network {
                NetAccess::Off if !self.seccomp => NetAccess::On,
                NetAccess::Ports(_) if self.landlock_abi < 4 => NetAccess::On,
                network => network.clone(),
            },
        }
    }

    /// What of `policy` this kernel cannot enforce, each in a few words.
    pub fn missing(&self, policy: &Sandbox) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if policy.is_open() {
            return missing;
        }
        if policy.fs != FsAccess::Full && self.landlock_abi < 1 {
            missing.push("the file fence (Landlock)");
        }
        if policy.fs != FsAccess::Full && (1..3).contains(&self.landlock_abi) {
            missing.push("truncation (Landlock ABI 3)");
        }
        if policy.fs != FsAccess::Full && (1..5).contains(&self.landlock_abi) {
            missing.push("device ioctls (Landlock ABI 5)");
        }
        if policy.fs != FsAccess::Full && !self.mount_namespace {
            missing.push("protected paths inside writable ones (mount namespace)");
        }
        if policy.network == NetAccess::Off && !self.seccomp {
            missing.push("the network fence (seccomp)");
        }
        if matches!(policy.network, NetAccess::Ports(_)) && self.landlock_abi < 4 {
            missing.push("TCP ports (Landlock ABI 4)");
        }
        if self.landlock_abi < 6 {
            missing.push("signal and abstract-socket scoping (Landlock ABI 6)");
        }
        missing
    }
}
