//! Build-script helper that turns a guest crate of this workspace into a component.
//!
//! A build script calls [`build_component`]; it runs a nested `cargo build` for
//! `wasm32-unknown-unknown` into a target directory of its own (so the outer build's
//! lock is never taken twice), then wraps the core module into a component with
//! `wit-component`. Because `RUSTUP_AUTO_INSTALL=0` is common on build machines, a
//! missing wasm target is added with `rustup target add` first; if that is impossible
//! the build fails loudly with the command that fixes it.
//!
//! Set `JOBS_GUEST_WASM_<PACKAGE>` (package name upper-cased, `-` as `_`) to a prebuilt
//! component to skip the nested build entirely.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The wasm target guests are built for: it needs no WASI at all.
pub const GUEST_TARGET: &str = "wasm32-unknown-unknown";

/// Which wasm target a guest is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `wasm32-unknown-unknown`: no WASI; the core module is made a component here.
    Bare,
    /// `wasm32-wasip2`: the usual toolchain output, a component that imports WASI
    /// preview 2 (its standard library does, used or not).
    Wasip2,
}

impl Target {
    /// The target triple.
    pub fn triple(self) -> &'static str {
        match self {
            Target::Bare => GUEST_TARGET,
            Target::Wasip2 => "wasm32-wasip2",
        }
    }
}

/// Builds `package` (a member of the workspace rooted at `workspace_root`) as a
/// component and returns the path of the `.component.wasm` written to `OUT_DIR`.
///
/// Emits the `rerun-if-changed` lines for the package, the WIT package and the
/// workspace manifests, so edits to any of them rebuild the guest.
///
/// # Panics
///
/// Panics (failing the build script) with a clear message when the wasm target cannot
/// be installed, the nested build fails, or componentizing fails.
pub fn build_component(workspace_root: &Path, package: &str, package_dir: &Path) -> PathBuf {
    build_component_for(workspace_root, package, package_dir, Target::Bare)
}

/// [`build_component`] for a given target. A `wasm32-wasip2` build is already a
/// component; its file is written to `OUT_DIR` as `<package>.wasip2.component.wasm`.
///
/// # Panics
///
/// As for [`build_component`].
pub fn build_component_for(
    workspace_root: &Path,
    package: &str,
    package_dir: &Path,
    target: Target,
) -> PathBuf {
    let triple = target.triple();
    let suffix = match target {
        Target::Bare => "",
        Target::Wasip2 => "_WASIP2",
    };
    let override_var = format!(
        "JOBS_GUEST_WASM_{}{suffix}",
        package.to_ascii_uppercase().replace('-', "_")
    );
    println!("cargo:rerun-if-env-changed={override_var}");
    if let Ok(prebuilt) = env::var(&override_var) {
        let path = PathBuf::from(prebuilt);
        assert!(
            path.is_file(),
            "{override_var}={} is not a file",
            path.display()
        );
        return path;
    }

    for watched in [
        package_dir.join("src"),
        package_dir.join("Cargo.toml"),
        workspace_root.join("wit"),
        workspace_root.join("Cargo.toml"),
        workspace_root.join("Cargo.lock"),
        workspace_root.join(".cargo").join("config.toml"),
    ] {
        println!("cargo:rerun-if-changed={}", watched.display());
    }

    let target_dir = workspace_root.join("target").join("guest");
    ensure_wasm_target(&target_dir, triple);

    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root)
        .args([
            "build",
            "-p",
            package,
            "--target",
            triple,
            "--profile",
            "guest",
        ])
        .arg("--target-dir")
        .arg(&target_dir);
    if workspace_root.join("Cargo.lock").is_file() {
        cmd.arg("--locked");
    }
    // Flags meant for the host (coverage, sanitizers, a wrapper) must not reach the
    // wasm build. CARGO_MAKEFLAGS stays so the nested build shares the jobserver.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
        "CARGO_INCREMENTAL",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("could not run the nested cargo build of {package}: {e}"));
    assert!(
        status.success(),
        "building {package} for {triple} failed ({status}); is the target installed? \
         run `rustup target add {triple}`"
    );

    let module_path = target_dir
        .join(triple)
        .join("guest")
        .join(format!("{}.wasm", package.replace('-', "_")));
    let built = std::fs::read(&module_path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", module_path.display()));
    let component = match target {
        Target::Bare => wit_component::ComponentEncoder::default()
            .module(&built)
            .and_then(|encoder| encoder.validate(true).encode())
            .unwrap_or_else(|e| panic!("componentizing {package}: {e:#}")),
        Target::Wasip2 => built,
    };

    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR is set for build scripts"));
    let name = match target {
        Target::Bare => format!("{}.component.wasm", package.replace('-', "_")),
        Target::Wasip2 => format!("{}.wasip2.component.wasm", package.replace('-', "_")),
    };
    let out = out_dir.join(name);
    std::fs::write(&out, component).unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
    out
}

/// Adds the wasm target through rustup when it is missing. Does nothing when the
/// toolchain is not managed by rustup; the nested build then reports what is wrong.
///
/// Several build scripts may get here at once; a lock file in `lock_dir` makes
/// them take turns, so rustup never installs the same target twice concurrently.
fn ensure_wasm_target(lock_dir: &Path, triple: &str) {
    let installed = || {
        Command::new("rustup")
            .args(["target", "list", "--installed"])
            .output()
            .ok()
            .map(|out| {
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .any(|line| line.trim() == triple)
            })
    };
    match installed() {
        None | Some(true) => return,
        Some(false) => {}
    }
    let _ = std::fs::create_dir_all(lock_dir);
    let lock = std::fs::File::create(lock_dir.join(".rustup-target.lock"));
    if let Ok(file) = &lock {
        let _ = file.lock();
    }
    if installed() == Some(true) {
        return;
    }
    let status = Command::new("rustup")
        .args(["target", "add", triple])
        .status();
    match status {
        Ok(s) if s.success() => {}
        other => panic!(
            "the {triple} target is missing and `rustup target add {triple}` \
             failed ({other:?}); install it by hand and build again"
        ),
    }
}
