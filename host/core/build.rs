//! Builds the tool-jobs guest and embeds its path as `TOOL_JOBS_WASM`.

use std::path::Path;

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    let root = Path::new(&manifest_dir)
        .ancestors()
        .nth(2)
        .expect("host/core/ sits two levels below the workspace root");
    let wasm = guest_build::build_component(root, "guest-tool-jobs", &root.join("guest-tool-jobs"));
    println!("cargo:rustc-env=TOOL_JOBS_WASM={}", wasm.display());
}
