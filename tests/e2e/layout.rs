//! The README's layout section names every source file of the host and the
//! guest, so the map a reader starts from cannot drift from the tree.

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The README's `## Layout` section.
fn layout(root: &Path) -> String {
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let start = readme.find("\n## Layout\n").expect("a layout section");
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end].to_owned()
}

/// Words of the section: runs of letters, digits, `_` and `-`.
fn words(text: &str) -> std::collections::HashSet<&str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
        .filter(|w| !w.is_empty())
        .collect()
}

#[test]
fn every_source_file_is_on_the_readme_s_map() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let section = layout(root);
    let named = words(&section);
    let mut files = Vec::new();
    for dir in ["host/core/src", "host/app/src", "guest-tool-jobs/src"] {
        sources(&root.join(dir), &mut files);
    }
    assert!(files.len() > 30, "{} files", files.len());
    let missing: Vec<String> = files
        .iter()
        .filter(|path| {
            let stem = path.file_stem().unwrap().to_str().unwrap();
            // A folder's root module is named by its folder; a crate's root
            // by its crate.
            let name = match stem {
                "mod" => path
                    .parent()
                    .unwrap()
                    .file_name()
                    .unwrap()
                    .to_str()
                    .unwrap(),
                "lib" | "main" => return false,
                other => other,
            };
            !named.contains(name)
        })
        .map(|p| p.strip_prefix(root).unwrap().display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "source files the README's layout section does not name: {missing:?}"
    );
}
