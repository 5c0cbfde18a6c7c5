//! The crates' layering, checked: each crate may depend on (and name in its sources) only the
//! crates ARCHITECTURE.md puts below it. A lower crate that imports a higher one — or the
//! product that links the test kit — fails here, in the manifest or in the code.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Each crate's directory and the workspace crates it may use (its whole allowed set).
const ALLOWED: &[(&str, &[&str])] = &[
    ("core", &[]),
    ("host", &["core"]),
    ("store", &["core", "host"]),
    ("supervise", &["core", "host"]),
    ("gateway", &["core", "host", "supervise"]),
    ("config", &["core", "host", "supervise", "gateway"]),
    ("control", &["core", "host", "store", "supervise", "gateway", "config"]),
    ("doctor", &["core", "host", "config"]),
    ("dashboard", &["core", "host", "store", "supervise", "gateway", "config", "control"]),
    ("testkit", &["core", "host", "gateway"]),
    ("demo", &["core", "host", "supervise", "gateway"]),
    (
        "fleetgate",
        &["core", "host", "store", "supervise", "gateway", "config", "control", "doctor", "dashboard", "demo"],
    ),
];

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// `fleetgate-x` / `fleetgate_x` → `x`'s directory name (`fleetgate` is the binary).
fn short(name: &str) -> &str {
    name.strip_prefix("fleetgate-").or_else(|| name.strip_prefix("fleetgate_")).unwrap_or(name)
}

/// The workspace crates in one manifest section (`[dependencies]`).
fn section_deps(manifest: &str, section: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == section;
            continue;
        }
        if inside && let Some(name) = line.split(['=', '.', ' ']).next().filter(|n| n.starts_with("fleetgate-")) {
            out.push(short(name).to_owned());
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A source file without its comment lines (docs may name any crate).
fn code(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

#[test]
fn every_workspace_crate_is_in_the_layering() {
    let listed: Vec<&str> = ALLOWED.iter().map(|(c, _)| *c).collect();
    for entry in std::fs::read_dir(crates_dir()).unwrap() {
        let dir = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            listed.contains(&dir.as_str()),
            "crates/{dir} is not in the layering: add it to ALLOWED and ARCHITECTURE.md"
        );
    }
}

#[test]
fn no_crate_depends_on_a_crate_above_it() {
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let mut wrong = Vec::new();
    for (krate, may) in &allowed {
        let manifest = std::fs::read_to_string(crates_dir().join(krate).join("Cargo.toml")).unwrap();
        for dep in section_deps(&manifest, "[dependencies]") {
            if !may.contains(&dep.as_str()) {
                wrong.push(format!("{krate} depends on {dep}"));
            }
        }
    }
    assert!(wrong.is_empty(), "layering broken in the manifests: {wrong:?}");
}

#[test]
fn no_crate_names_a_crate_above_it_in_its_sources() {
    let names = [
        "core",
        "host",
        "store",
        "supervise",
        "gateway",
        "config",
        "control",
        "doctor",
        "dashboard",
        "testkit",
        "demo",
    ];
    let mut wrong = Vec::new();
    for (krate, may) in ALLOWED {
        let mut files = Vec::new();
        rust_files(&crates_dir().join(krate).join("src"), &mut files);
        assert!(!files.is_empty(), "crates/{krate}/src has sources");
        for file in files {
            let text = code(&file);
            for name in names.iter().filter(|n| **n != *krate && !may.contains(n)) {
                if text.contains(&format!("fleetgate_{name}::")) || text.contains(&format!("use fleetgate_{name}")) {
                    wrong.push(format!("{} names fleetgate_{name}", file.display()));
                }
            }
        }
    }
    // The binary's own name: nothing below it may use it.
    for (krate, _) in ALLOWED.iter().filter(|(k, _)| *k != "fleetgate") {
        let mut files = Vec::new();
        rust_files(&crates_dir().join(krate).join("src"), &mut files);
        for file in files {
            let text = code(&file);
            if text.contains("use fleetgate::") || text.contains(" fleetgate::cli") {
                wrong.push(format!("{} imports the binary", file.display()));
            }
        }
    }
    assert!(wrong.is_empty(), "layering broken in the sources: {wrong:?}");
}

#[test]
fn only_the_binary_uses_clap_and_anyhow() {
    let mut wrong = Vec::new();
    for (krate, _) in ALLOWED.iter().filter(|(k, _)| !matches!(*k, "fleetgate" | "testkit")) {
        let manifest = std::fs::read_to_string(crates_dir().join(krate).join("Cargo.toml")).unwrap();
        for line in manifest.lines() {
            if line.starts_with("clap ") || line.starts_with("anyhow ") || line.starts_with("clap=") {
                wrong.push(format!("{krate}: {line}"));
            }
        }
    }
    assert!(wrong.is_empty(), "clap and anyhow belong to the binary: {wrong:?}");
}

#[test]
fn the_product_binary_carries_no_forge_stand_in() {
    let binary = std::fs::read(env!("CARGO_BIN_EXE_fleetgate")).unwrap();
    // Strings only the stand-in has: its ledger's file name and its command's description.
    for marker in ["fleetgate-forge.json", "A Gitea forge behind the gitea-mcp tool surface"] {
        assert!(
            !binary.windows(marker.len()).any(|w| w == marker.as_bytes()),
            "the fleetgate binary contains the forge stand-in's {marker:?}"
        );
    }
}
