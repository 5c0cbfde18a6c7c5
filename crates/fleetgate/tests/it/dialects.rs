//! One forge dialect in one place: no product source outside `crates/core/src/dialect/` names
//! a forge tool (a string literal equal to a tool name any dialect states). Adding a dialect
//! touches that module, its look-alike in the test kit and its docs; a tool name elsewhere is
//! a second place that would have to know the forge.
//!
//! Scanned: every `crates/*/src/**/*.rs` but the dialect modules and the test kit (the
//! look-alikes are the forges), test files (`tests.rs`, `tests/`), and a file's `#[cfg(test)]`
//! tail.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "tests" {
                sources(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
            out.push(path);
        }
    }
}

/// The product's code in `text`: up to its first `#[cfg(test)]` item.
fn product(text: &str) -> &str {
    text.find("#[cfg(test)]").map_or(text, |at| &text[..at])
}

#[test]
fn no_source_outside_the_dialects_names_a_forge_tool() {
    let mut tools: Vec<&str> = Vec::new();
    for name in fleetgate_core::dialect::NAMES {
        let dialect = fleetgate_core::dialect::by_name(name).unwrap();
        tools.extend(dialect.tools());
    }
    tools.sort_unstable();
    tools.dedup();
    assert!(tools.len() > 100, "every dialect states its tools: {}", tools.len());
    let crates = root().join("crates");
    let mut files = Vec::new();
    for krate in std::fs::read_dir(&crates).unwrap().flatten() {
        if krate.file_name() == "testkit" {
            continue;
        }
        sources(&krate.path().join("src"), &mut files);
    }
    let dialects = crates.join("core/src/dialect");
    let mut found = Vec::new();
    for file in files.iter().filter(|f| !f.starts_with(&dialects)) {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in product(&text).lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            for tool in &tools {
                if code.contains(&format!("\"{tool}\"")) {
                    found.push(format!(
                        "{}:{}: \"{tool}\"",
                        file.strip_prefix(root()).unwrap_or(file).display(),
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(found.is_empty(), "forge tool names outside the dialect modules:\n{}", found.join("\n"));
}
