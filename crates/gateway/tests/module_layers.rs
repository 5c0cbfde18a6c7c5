//! The gateway's files form layers: no import circle between them. Each top-level module
//! (a `foo.rs`, with its `foo/` files) is a node; an edge is a `crate::bar` (or, from the
//! top-level file, `super::bar`) it names. A circle fails with its members.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn names_after(text: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices(prefix) {
        let rest = &text[i + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            for item in group.split(',') {
                let name: String = item.trim().chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        } else {
            let name: String = rest.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_import_circle_between_the_gateways_modules() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules: BTreeSet<String> = std::fs::read_dir(&src)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_suffix(".rs").filter(|n| *n != "lib").map(str::to_owned)
        })
        .collect();
    assert!(modules.len() > 10, "the scan found the modules: {modules:?}");
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for module in &modules {
        let top = src.join(format!("{module}.rs"));
        let mut names = names_after(&code(&top), "crate::");
        names.extend(names_after(&code(&top), "super::"));
        let mut below = Vec::new();
        files_under(&src.join(module), &mut below);
        for file in below {
            names.extend(names_after(&code(&file), "crate::"));
        }
        names.retain(|n| n != module && modules.contains(n));
        edges.insert(module.clone(), names);
    }
    // Peel off modules that import nothing left; whatever remains sits on a circle.
    let mut left = edges.clone();
    loop {
        let leaves: Vec<String> = left.iter().filter(|(_, deps)| deps.is_empty()).map(|(m, _)| m.clone()).collect();
        if leaves.is_empty() {
            break;
        }
        for leaf in &leaves {
            left.remove(leaf);
        }
        for deps in left.values_mut() {
            deps.retain(|d| !leaves.contains(d));
        }
    }
    assert!(left.is_empty(), "an import circle runs through these modules: {left:?}");
}
