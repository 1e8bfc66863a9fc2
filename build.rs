//! Builds the rogue guest the sandbox tests load, and embeds its path as `ROGUE_WASM`.

use std::path::Path;

fn main() {
    let root = std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    let root = Path::new(&root);
    let wasm =
        guest_build::build_component(root, "rogue-guest", &root.join("tests").join("rogue-guest"));
    println!("cargo:rustc-env=ROGUE_WASM={}", wasm.display());
}
