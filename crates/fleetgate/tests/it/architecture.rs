//! ARCHITECTURE.md's code map, checked against the source tree: every module the map names
//! exists, and every module of every crate (test-only modules excepted: a `mod x;` under
//! `#[cfg(test)]`) has its line. A failure says which line to add or remove, and where.
//!
//! The map's format: a crate's section is a heading `### \`crates/NAME\` …`; inside it, a
//! line `- \`path::to::module\`: what it holds` names one module, its path from the crate's
//! root. Any other heading ends the section. Modules are found by following the `mod x;`
//! declarations from `lib.rs` and `main.rs` (and `#[path]`), not by listing files, so a file
//! no crate compiles is no module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The map may not grow back into a spec.
const MAX_MAP_LINES: usize = 400;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One module line of the map.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    krate: String,
    module: String,
    line: usize,
}

/// A crate's section as the map has it: its heading's line and its module lines.
#[derive(Debug, Default)]
struct Section {
    heading: usize,
    entries: Vec<Entry>,
}

/// The map's crate sections, by crate directory name.
fn parse_map(map: &str) -> BTreeMap<String, Section> {
    let mut sections: BTreeMap<String, Section> = BTreeMap::new();
    let mut current: Option<String> = None;
    for (i, line) in map.lines().enumerate() {
        let number = i + 1;
        if line.starts_with('#') {
            current = line
                .strip_prefix("### `crates/")
                .and_then(|rest| rest.split_once('`'))
                .map(|(name, _)| name.to_owned());
            if let Some(name) = &current {
                sections.entry(name.clone()).or_default().heading = number;
            }
            continue;
        }
        let Some(krate) = &current else { continue };
        let Some(rest) = line.strip_prefix("- `") else { continue };
        let Some((module, _)) = rest.split_once('`') else { continue };
        sections.get_mut(krate).unwrap().entries.push(Entry {
            krate: krate.clone(),
            module: module.to_owned(),
            line: number,
        });
    }
    sections
}

/// The file modules a source file declares: (name, its `#[path]` if any). A declaration under
/// `#[cfg(test)]` is a test-only module and is left out.
fn declared_modules(source: &str) -> Vec<(String, Option<String>)> {
    let lines: Vec<&str> = source.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let line = line.trim();
        let rest = ["pub(crate) mod ", "pub(super) mod ", "pub mod ", "mod "].iter().find_map(|p| line.strip_prefix(p));
        let Some(name) = rest.and_then(|r| r.strip_suffix(';')) else { continue };
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let attributes: Vec<&str> =
            lines[..i].iter().rev().map(|l| l.trim()).take_while(|l| l.starts_with("#[")).collect();
        if attributes.contains(&"#[cfg(test)]") {
            continue;
        }
        let path = attributes
            .iter()
            .find_map(|a| a.strip_prefix("#[path = \"").and_then(|p| p.strip_suffix("\"]")))
            .map(str::to_owned);
        out.push((name.to_owned(), path));
    }
    out
}

/// Every non-test module of a crate, by path (`gate::decide`), with its file.
fn crate_modules(src: &Path) -> BTreeMap<String, PathBuf> {
    fn visit(file: &Path, owns_dir: bool, prefix: &str, out: &mut BTreeMap<String, PathBuf>) {
        let Ok(source) = std::fs::read_to_string(file) else { return };
        let dir = if owns_dir { file.parent().unwrap().to_owned() } else { file.with_extension("") };
        for (name, path) in declared_modules(&source) {
            let (child, child_owns) = match path {
                Some(p) => (file.parent().unwrap().join(p), false),
                None if dir.join(format!("{name}.rs")).exists() => (dir.join(format!("{name}.rs")), false),
                None => (dir.join(&name).join("mod.rs"), true),
            };
            let module = if prefix.is_empty() { name } else { format!("{prefix}::{name}") };
            visit(&child, child_owns, &module, out);
            out.insert(module, child);
        }
    }
    let mut out = BTreeMap::new();
    for root_file in ["lib.rs", "main.rs"] {
        let file = src.join(root_file);
        if file.exists() {
            visit(&file, true, "", &mut out);
        }
    }
    out
}

/// What is wrong with the map, given every crate's modules: one message per line to add,
/// remove or fix.
fn check(map: &str, crates: &BTreeMap<String, BTreeMap<String, PathBuf>>) -> Vec<String> {
    let sections = parse_map(map);
    let mut problems = Vec::new();
    for (krate, section) in &sections {
        if !crates.contains_key(krate) {
            problems.push(format!(
                "ARCHITECTURE.md:{}: a section for crates/{krate}, which does not exist: remove the section",
                section.heading
            ));
        }
    }
    for (krate, modules) in crates {
        let Some(section) = sections.get(krate) else {
            problems.push(format!(
                "ARCHITECTURE.md has no section for crates/{krate}: add a heading \"### `crates/{krate}`\" under \
                 \"## Code map\" and one line per module under it"
            ));
            continue;
        };
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for entry in &section.entries {
            if let Some(first) = seen.insert(&entry.module, entry.line) {
                problems.push(format!(
                    "ARCHITECTURE.md:{}: `{}` of crates/{krate} is named twice (first at line {first}): remove line {}",
                    entry.line, entry.module, entry.line
                ));
            }
            if !modules.contains_key(&entry.module) {
                let file = entry.module.replace("::", "/");
                problems.push(format!(
                    "ARCHITECTURE.md:{}: names `{}` of crates/{krate}, which is no module of it (no \
                     crates/{krate}/src/{file}.rs declared by its parent): remove line {} or correct the path",
                    entry.line, entry.module, entry.line
                ));
            }
        }
        let named: BTreeSet<&str> = section.entries.iter().map(|e| e.module.as_str()).collect();
        for (module, file) in modules {
            if !named.contains(module.as_str()) {
                let at = section.entries.iter().map(|e| e.line).max().unwrap_or(section.heading);
                let shown = file.strip_prefix(root()).unwrap_or(file).display().to_string();
                problems.push(format!(
                    "ARCHITECTURE.md: {shown} is module `{module}` of crates/{krate}, which the map does not \
                     name: add under \"### `crates/{krate}`\" (line {}, e.g. after line {at}) the line\n    \
                     - `{module}`: <what it holds, in one line>",
                    section.heading
                ));
            }
        }
    }
    problems
}

fn workspace_crates() -> BTreeMap<String, BTreeMap<String, PathBuf>> {
    let mut crates = BTreeMap::new();
    for entry in std::fs::read_dir(root().join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        if dir.join("Cargo.toml").exists() {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            crates.insert(name, crate_modules(&dir.join("src")));
        }
    }
    crates
}

#[test]
fn the_code_map_names_every_module_and_only_modules() {
    let map = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let crates = workspace_crates();
    assert!(crates.get("core").is_some_and(|m| m.contains_key("capability")), "the scan found the modules");
    let problems = check(&map, &crates);
    assert!(problems.is_empty(), "ARCHITECTURE.md's code map is out of date:\n{}", problems.join("\n"));
}

#[test]
fn the_map_stays_a_map() {
    let lines = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap().lines().count();
    assert!(
        lines <= MAX_MAP_LINES,
        "ARCHITECTURE.md has {lines} lines, more than {MAX_MAP_LINES}: it is a map, not a spec — keep a \
         module's line to one line and move detail to the module's doc comment or the book under docs/"
    );
}

// The checker, on made-up trees: it must fail both ways, or it proves nothing.

fn tree(modules: &[&str]) -> BTreeMap<String, BTreeMap<String, PathBuf>> {
    let mut one = BTreeMap::new();
    for m in modules {
        one.insert((*m).to_owned(), PathBuf::from(format!("crates/a/src/{}.rs", m.replace("::", "/"))));
    }
    BTreeMap::from([("a".to_owned(), one)])
}

const MAP: &str = "# Architecture\n\n### `crates/a` (`fleetgate-a`)\n- `one`: the first.\n- `one::two`: its child,\n  \
                   on two lines.\n\n## Invariants\n- `three`: not a module line, outside the section.\n";

#[test]
fn checker_passes_a_map_that_matches() {
    assert_eq!(check(MAP, &tree(&["one", "one::two"])), Vec::<String>::new());
}

#[test]
fn checker_fails_a_module_added_without_a_line() {
    let problems = check(MAP, &tree(&["one", "one::two", "one::three"]));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("crates/a/src/one/three.rs is module `one::three`"), "{}", problems[0]);
    assert!(problems[0].contains("- `one::three`: "), "the message gives the line to add: {}", problems[0]);
}

#[test]
fn checker_fails_a_line_without_a_module() {
    let problems = check(MAP, &tree(&["one"]));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].starts_with("ARCHITECTURE.md:5: names `one::two`"), "{}", problems[0]);
    assert!(problems[0].contains("remove line 5"), "{}", problems[0]);
}

#[test]
fn checker_fails_a_module_named_twice_and_a_crate_without_a_section() {
    let twice = format!("{MAP}\n### `crates/a`\n- `one`: again.\n");
    let problems = check(&twice, &tree(&["one", "one::two"]));
    assert!(problems.iter().any(|p| p.contains("`one` of crates/a is named twice")), "{problems:?}");
    let mut crates = tree(&["one", "one::two"]);
    crates.insert("b".into(), BTreeMap::new());
    let problems = check(MAP, &crates);
    assert!(problems.iter().any(|p| p.contains("no section for crates/b")), "{problems:?}");
}

#[test]
fn test_only_modules_are_not_modules_and_paths_are_followed() {
    let source = "pub mod a;\nmod b;\n#[cfg(test)]\nmod tests;\n#[cfg(test)]\n#[path = \"x_tests.rs\"]\nmod more;\n\
                  #[cfg(feature = \"otel\")]\npub mod otlp;\n#[path = \"elsewhere.rs\"]\nmod c;\nmod inline {\n}\n";
    assert_eq!(
        declared_modules(source),
        vec![
            ("a".to_owned(), None),
            ("b".to_owned(), None),
            ("otlp".to_owned(), None),
            ("c".to_owned(), Some("elsewhere.rs".to_owned()))
        ]
    );
}
