//! Embeds the built-in tool-jobs guest as `TOOL_JOBS_WASM`: built from
//! guest-tool-jobs/ inside this repository, or, in a packaged crate (which
//! has no repository around it), the component packaged at
//! guest/tool-jobs.wasm.

use std::path::Path;

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    let crate_dir = Path::new(&manifest_dir);
    // host/core/ sits two levels below the repository's root.
    let repository = crate_dir
        .ancestors()
        .nth(2)
        .filter(|root| root.join("guest-tool-jobs").join("Cargo.toml").is_file());
    let wasm = match repository {
        Some(root) => {
            guest_build::build_component(root, "guest-tool-jobs", &root.join("guest-tool-jobs"))
        }
        None => {
            let packaged = crate_dir.join("guest").join("tool-jobs.wasm");
            println!("cargo:rerun-if-changed={}", packaged.display());
            assert!(
                packaged.is_file(),
                "no guest-tool-jobs/ beside this crate and no packaged {}: \
                 package the crate with tests/packages/run, which writes it",
                packaged.display()
            );
            packaged
        }
    };
    println!("cargo:rustc-env=TOOL_JOBS_WASM={}", wasm.display());
}
