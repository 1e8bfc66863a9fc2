//! The map cannot drift from the tree: ARCHITECTURE.md names every source
//! file of the host and the guest, no guest file imports from a layer above
//! its own, and the book's chapters and every relative link of the README,
//! the book and ARCHITECTURE.md resolve.

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

/// ARCHITECTURE.md's `## The rooms` section.
fn layout(root: &Path) -> String {
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let start = map
        .find("\n## The rooms\n")
        .expect("a section of the rooms");
    let rest = &map[start + 1..];
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
fn every_source_file_is_on_the_architecture_map() {
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
        "source files ARCHITECTURE.md's rooms do not name: {missing:?}"
    );
}

/// The guest's layers, lowest first (as `surface/mod.rs` declares them): a
/// file may name (`crate::<module>`) only modules of its own layer or lower.
const GUEST_LAYERS: &[&str] = &[
    "model",
    "wording",
    "config",
    "caps",
    "render",
    "notice",
    "extensions",
    "surface",
    "start",
    "component",
];

/// `text` without its `#[cfg(test)]` modules and its comments: what the
/// module's own code names.
fn code_outside_tests(text: &str) -> String {
    let mut code = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") {
            continue;
        }
        if trimmed == "#[cfg(test)]" {
            // The item it gates: a module's braces are skipped whole.
            let mut depth = 0i32;
            let mut opened = false;
            for gated in lines.by_ref() {
                depth += gated.matches('{').count() as i32 - gated.matches('}').count() as i32;
                opened |= gated.contains('{');
                if (opened && depth <= 0) || (!opened && gated.trim_end().ends_with(';')) {
                    break;
                }
            }
            continue;
        }
        code.push_str(line);
        code.push('\n');
    }
    code
}

/// The top-level modules `code` names through `crate::`, groups
/// (`crate::{a, b::c}`) included.
fn crate_paths(code: &str) -> std::collections::BTreeSet<String> {
    let mut found = std::collections::BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => return true,
                        '}' => depth -= 1,
                        _ => {}
                    }
                    false
                })
                .map_or(group.len(), |(i, _)| i);
            let mut depth = 0;
            let mut item = String::new();
            for c in group[..end].chars().chain([',']) {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        let name: String = item
                            .trim()
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        if !name.is_empty() && name != "self" {
                            found.insert(name);
                        }
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found
}

/// The names in `code` that point up from `layer`, lowest first.
fn upward(layer: usize, code: &str) -> Vec<String> {
    crate_paths(code)
        .into_iter()
        .filter(|name| {
            GUEST_LAYERS
                .iter()
                .position(|l| l == name)
                .is_some_and(|at| at > layer)
        })
        .collect()
}

#[test]
fn the_layout_check_finds_an_upward_import() {
    let model = GUEST_LAYERS.iter().position(|l| *l == "model").unwrap();
    let code = code_outside_tests(
        "use crate::{caps, start::dimension};\n// crate::component in a comment\n\
         #[cfg(test)]\nmod tests {\n    use crate::surface;\n}\nfn f() { crate::notice::x(); }\n",
    );
    assert_eq!(upward(model, &code), ["caps", "notice", "start"]);
}

#[test]
fn no_guest_file_imports_from_a_layer_above_its_own() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("guest-tool-jobs/src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let mut wrong = Vec::new();
    for path in files {
        let relative = path.strip_prefix(&root).unwrap();
        let first = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_str()
            .unwrap();
        let module = first.strip_suffix(".rs").unwrap_or(first);
        let Some(layer) = GUEST_LAYERS.iter().position(|l| *l == module) else {
            // The crate root and the allocator name no module.
            assert!(matches!(module, "lib" | "alloc"), "{module} has no layer");
            continue;
        };
        let code = code_outside_tests(&std::fs::read_to_string(&path).unwrap());
        for name in upward(layer, &code) {
            wrong.push(format!("{} imports crate::{name}", relative.display()));
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that point up the guest's layers: {wrong:?}"
    );
}

/// The relative links of a Markdown text: `[text](target)` whose target is
/// not a URL, without its `#anchor`.
fn relative_links(text: &str) -> Vec<String> {
    let mut links = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let target = &after[..end];
            let path = target.split('#').next().unwrap_or_default();
            if !path.is_empty() && !path.contains("://") && !path.starts_with("mailto:") {
                links.push(path.to_owned());
            }
            rest = &after[end..];
        }
    }
    links
}

#[test]
fn the_link_check_reads_markdown_links() {
    assert_eq!(
        relative_links(
            "see [a](b.md#x), [web](https://x.org) and [c](../d/e.rs)\n```\n[f](no.md)\n```"
        ),
        ["b.md", "../d/e.rs"]
    );
}

#[test]
fn every_chapter_is_in_the_summary_and_every_relative_link_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let book = root.join("docs/src");
    let summary = std::fs::read_to_string(book.join("SUMMARY.md")).unwrap();
    let mut pages = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    let mut unlisted = Vec::new();
    for entry in std::fs::read_dir(&book).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if name.ends_with(".md") {
            if name != "SUMMARY.md" && !relative_links(&summary).contains(&name) {
                unlisted.push(name);
            }
            pages.push(path);
        }
    }
    assert!(pages.len() > 12, "{} pages", pages.len());
    assert!(
        unlisted.is_empty(),
        "chapters not in SUMMARY.md: {unlisted:?}"
    );
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for link in relative_links(&text) {
            if !page.parent().unwrap().join(&link).exists() {
                broken.push(format!(
                    "{}: {link}",
                    page.strip_prefix(root).unwrap().display()
                ));
            }
        }
    }
    assert!(broken.is_empty(), "links that lead nowhere: {broken:?}");
}
