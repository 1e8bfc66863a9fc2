//! What the repository ships: the component exports exactly the world that
//! `wit/jobs.wit` declares, and one version names every package.

use std::collections::{BTreeMap, BTreeSet};

use host::plugin::{TOOL_JOBS_WASM, WIT_PACKAGE, wit_interface};
use wit_component::{ComponentEncoder, StringEncoding, WitPrinter};
use wit_parser::{ManglingAndAbi, Resolve};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// The workspace's `[workspace.package] version`, which every crate inherits.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// A component's WIT as `wasm-tools component wit` prints it (without docs,
/// which a build may strip): its world, and every interface it imports or
/// exports in full.
fn component_wit(wasm: &[u8]) -> String {
    let decoded = wit_component::decode(wasm).expect("a component");
    let resolve = decoded.resolve();
    let root = decoded.package();
    let nested: Vec<_> = resolve
        .packages
        .iter()
        .map(|(id, _)| id)
        .filter(|&id| id != root)
        .collect();
    let mut printer = WitPrinter::default();
    printer.emit_docs(false);
    printer.print(resolve, root, &nested).expect("printable");
    printer.output.to_string()
}

/// Printed WIT as its items, each a declaration at an interface's or a
/// world's top level with what nests in it, `use` lists sorted: the order in
/// which a component lists its types carries no meaning, their shapes do.
fn items(wit: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut scopes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let (mut package, mut scope, mut scope_depth) = (String::new(), String::new(), 0);
    // An item so far, and attributes (`@since(...)`) waiting for what they
    // belong to: the next scope or item, never an item of their own.
    let (mut item, mut attributes) = (String::new(), String::new());
    let mut flush = |scope: &str, item: &mut String| {
        if !item.is_empty() {
            let item = std::mem::take(item);
            scopes.entry(scope.to_owned()).or_default().insert(item);
        }
    };
    for line in wit.lines().filter(|l| !l.trim().is_empty()) {
        let depth = line.len() - line.trim_start().len();
        let text = line.trim();
        if text.starts_with('@') {
            attributes.push_str(text);
            attributes.push('\n');
            continue;
        }
        if let Some(name) = text.strip_prefix("package ") {
            flush(&scope, &mut item);
            package = name.trim_end_matches([';', '{', ' ']).to_owned();
            (scope, scope_depth) = (format!("{attributes}{package}"), depth);
            attributes.clear();
            continue;
        }
        if text.starts_with("interface ") || text.starts_with("world ") {
            flush(&scope, &mut item);
            // Scopes are named with their package: two packages' `types`
            // are two scopes.
            (scope, scope_depth) = (format!("{attributes}{package} {text}"), depth);
            attributes.clear();
            continue;
        }
        if depth <= scope_depth {
            flush(&scope, &mut item); // the scope's closing brace
            continue;
        }
        if depth == scope_depth + 2 && !text.starts_with('}') {
            flush(&scope, &mut item);
            item.push_str(&std::mem::take(&mut attributes));
        }
        let text = match text.strip_prefix("use ").and_then(|u| u.split_once(".{")) {
            Some((from, names)) => {
                let mut names: Vec<_> = names.trim_end_matches("};").split(", ").collect();
                names.sort_unstable();
                format!("use {from}.{{{}}};", names.join(", "))
            }
            None => text.to_owned(),
        };
        item.push_str(&text);
        item.push('\n');
    }
    flush(&scope, &mut item);
    scopes
}

#[test]
fn items_keep_packages_apart_and_attributes_with_their_item() {
    let wit = "package a:x;\n\nworld root {\n  import a:y/t;\n}\npackage a:y {\n  \
               interface t {\n    @since(version = 1.0.0)\n    f: func();\n    g: func();\n  }\n}\n\
               package a:z {\n  interface t {\n    f: func();\n    @since(version = 1.0.0)\n    \
               g: func();\n  }\n}\n";
    let found = items(wit);
    let y = &found["a:y interface t {"];
    let z = &found["a:z interface t {"];
    assert!(
        y.contains("@since(version = 1.0.0)\nf: func();\n"),
        "{found:#?}"
    );
    assert!(
        z.contains("@since(version = 1.0.0)\ng: func();\n"),
        "{found:#?}"
    );
    assert_ne!(y, z);
    assert!(found["a:x world root {"].contains("import a:y/t;\n"));
}

/// A component that targets `wit/`'s `tool-jobs` world and does nothing else:
/// the world as a component's type, to compare the real one with.
fn world_component() -> Vec<u8> {
    let mut resolve = Resolve::default();
    let (package, _) = resolve
        .push_dir(format!("{ROOT}/wit"))
        .expect("wit/ parses");
    let world = resolve
        .select_world(&[package], Some("tool-jobs"))
        .expect("the tool-jobs world");
    let mut module = wit_component::dummy_module(&resolve, world, ManglingAndAbi::Standard32);
    wit_component::embed_component_metadata(&mut module, &resolve, world, StringEncoding::UTF8)
        .expect("metadata");
    ComponentEncoder::default()
        .module(&module)
        .expect("a module")
        .validate(true)
        .encode()
        .expect("a component")
}

#[test]
fn the_component_exports_exactly_the_wit_world() {
    let ours = component_wit(TOOL_JOBS_WASM);
    let declared = component_wit(&world_component());
    // Same imports and exports, same interfaces to the last field: nothing
    // more (no WASI, no stray export) and nothing less.
    assert_eq!(
        items(&ours),
        items(&declared),
        "ours:\n{ours}\ndeclared:\n{declared}"
    );
    // The comparison sees the world's lines and each interface's members.
    let ours = items(&ours);
    let world = &ours["root:component world root {"];
    assert!(world.contains(&format!("export {};\n", wit_interface("tools"))));
    assert!(world.contains(&format!("import {};\n", wit_interface("registry"))));
    assert!(
        ours[&format!("{WIT_PACKAGE} interface clock {{")].contains("now-ms: func() -> u64;\n")
    );
}

/// The text between `prefix` and the next `end` in `text`.
fn const_after(text: &str, prefix: &str, end: char) -> String {
    let start = text.find(prefix).unwrap_or_else(|| panic!("no {prefix}")) + prefix.len();
    let rest = &text[start..];
    rest[..rest.find(end).expect("a closing quote")].to_owned()
}

#[test]
fn one_version_names_every_package() {
    let read = |path: &str| std::fs::read_to_string(format!("{ROOT}/{path}")).unwrap();
    let wit = read("wit/jobs.wit");
    let node: serde_json::Value = serde_json::from_str(&read("hosts/node/package.json")).unwrap();
    let lock: serde_json::Value =
        serde_json::from_str(&read("hosts/node/package-lock.json")).unwrap();
    let pyproject: toml::Table = read("hosts/python/pyproject.toml").parse().unwrap();
    let changelog = read("CHANGELOG.md");
    let found = [
        (
            "the WIT package (host::plugin::WIT_PACKAGE)",
            WIT_PACKAGE.rsplit_once('@').unwrap().1.to_owned(),
        ),
        (
            "wit/jobs.wit",
            wit.lines()
                .find_map(|l| l.strip_prefix("package harness:jobs@")?.strip_suffix(';'))
                .expect("a package line")
                .to_owned(),
        ),
        (
            "hosts/node/package.json",
            node["version"].as_str().unwrap().to_owned(),
        ),
        (
            "hosts/node/package-lock.json",
            lock["version"].as_str().unwrap().to_owned(),
        ),
        (
            "hosts/node/package-lock.json (its package)",
            lock["packages"][""]["version"].as_str().unwrap().to_owned(),
        ),
        (
            "hosts/python/pyproject.toml",
            pyproject["project"]["version"].as_str().unwrap().to_owned(),
        ),
        (
            "hosts/node/src/guest.js (VERSION, the WIT it binds)",
            const_after(
                &read("hosts/node/src/guest.js"),
                "export const VERSION = '",
                '\'',
            ),
        ),
        (
            "hosts/python/harness_jobs/guest.py (VERSION, the WIT it binds)",
            const_after(
                &read("hosts/python/harness_jobs/guest.py"),
                "\nVERSION = \"",
                '"',
            ),
        ),
        (
            "CHANGELOG.md (its first section)",
            changelog
                .lines()
                .find_map(|l| l.strip_prefix("## "))
                .unwrap()
                .to_owned(),
        ),
    ];
    for (place, version) in found {
        assert_eq!(
            version, VERSION,
            "{place} says {version}, Cargo.toml's [workspace.package] says {VERSION}: see scripts/version"
        );
    }
}
