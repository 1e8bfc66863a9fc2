//! The compiled component on disk, so a start skips compilation.
//!
//! What a load from the cache guarantees:
//!
//! - The file name is the SHA-256 of the engine's compatibility hash (wasmtime
//!   version, compiler and every setting that affects code) and the component's
//!   bytes, so another engine, another configuration or another component never
//!   finds this artifact under its own name. The digest is fixed by its algorithm,
//!   unlike `std`'s `DefaultHasher`, which may change between Rust releases.
//! - wasmtime checks the artifact's header again when deserializing, and refuses
//!   one made by an incompatible engine; the component is then compiled afresh.
//! - Deserializing runs native code from the file, so it is done only when the
//!   directory and the file belong to the current user and nobody else can write
//!   either. Otherwise the component is compiled in memory and nothing is written.
//!   Directories this host creates are 0700.

use std::hash::{Hash, Hasher};
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::{PluginError, setup};

/// Feeds whatever a `Hash` impl writes into SHA-256.
struct StableHasher(Sha256);

impl Hasher for StableHasher {
    fn finish(&self) -> u64 {
        unreachable!("only the digest is used")
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// The artifact's file name for `wasm` compiled by `engine`.
fn artifact_name(engine: &Engine, wasm: &[u8]) -> String {
    let mut hasher = StableHasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hasher.0.update(b"\0component\0");
    hasher.0.update(wasm);
    let digest = hasher.0.finalize();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("tool-jobs-{hex}.cwasm")
}

/// Compiles `wasm`, or loads its compiled form from `cache_dir` when present,
/// made by a compatible engine and safe to trust (see the module docs); a fresh
/// compile is written back atomically.
pub(super) fn load_component(
    engine: &Engine,
    wasm: &[u8],
    cache_dir: Option<&Path>,
) -> Result<Component, PluginError> {
    let Some(dir) = cache_dir else {
        return Component::new(engine, wasm).map_err(setup);
    };
    if !dir.exists() {
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir);
    }
    if !crate::fs_trust::private_to_us(dir) {
        tracing::warn!(
            "not using the component cache {}: it must belong to this user and be writable by nobody else",
            dir.display()
        );
        return Component::new(engine, wasm).map_err(setup);
    }
    let path = dir.join(artifact_name(engine, wasm));
    if path.is_file() && crate::fs_trust::private_to_us(&path) {
        // SAFETY: the file sits under its digest in a directory only this user
        // can write, and is itself writable by this user alone; wasmtime still
        // checks its header and refuses an incompatible one (then we recompile).
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(component) => return Ok(component),
            Err(e) => tracing::warn!("ignoring cached {}: {e}", path.display()),
        }
    }
    let compiled = engine.precompile_component(wasm).map_err(setup)?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, &compiled).is_ok() {
        let _ = std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o600));
        let _ = std::fs::rename(&tmp, &path);
    }
    // SAFETY: these bytes were produced by `precompile_component` on this engine.
    unsafe { Component::deserialize(engine, &compiled) }.map_err(setup)
}
