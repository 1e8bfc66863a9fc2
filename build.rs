//! Builds the guests the end-to-end tests load: the rogue guest (`ROGUE_WASM`), and
//! the tool-jobs guest and the rogue built again for `wasm32-wasip2`
//! (`TOOL_JOBS_WASIP2_WASM`, `ROGUE_WASIP2_WASM`), as the usual toolchain makes them.

use std::path::Path;

use guest_build::{Target, build_component_for};

fn main() {
    let root = std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    let root = Path::new(&root);
    let rogue = root.join("tests").join("rogue-guest");
    let tool_jobs = root.join("guest-tool-jobs");
    let built = [
        ("ROGUE_WASM", "rogue-guest", rogue.as_path(), Target::Bare),
        (
            "ROGUE_WASIP2_WASM",
            "rogue-guest",
            rogue.as_path(),
            Target::Wasip2,
        ),
        (
            "TOOL_JOBS_WASIP2_WASM",
            "guest-tool-jobs",
            tool_jobs.as_path(),
            Target::Wasip2,
        ),
    ];
    for (var, package, dir, target) in built {
        let wasm = build_component_for(root, package, dir, target);
        println!("cargo:rustc-env={var}={}", wasm.display());
    }
}
