//! Every conformance vector passes through the component the host ships.

#[test]
fn every_vector_passes_through_the_built_in_component() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../vectors");
    let vectors = conformance::load_vectors(&dir).unwrap();
    assert!(vectors.len() >= 250, "only {} vectors", vectors.len());
    let runner = conformance::Runner::new(host::plugin::TOOL_JOBS_WASM).unwrap();
    let failures: Vec<String> = vectors
        .iter()
        .map(|v| runner.run(v))
        .filter_map(|o| o.failure.map(|f| format!("{}: {f}", o.id)))
        .collect();
    assert!(
        failures.is_empty(),
        "{} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_vectors_are_what_the_generator_writes() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let status = std::process::Command::new("python3")
        .arg("conformance/generate.py")
        .arg("--check")
        .current_dir(&root)
        .status()
        .expect("python3 runs");
    assert!(
        status.success(),
        "conformance/vectors differ from conformance/generate.py"
    );
}
