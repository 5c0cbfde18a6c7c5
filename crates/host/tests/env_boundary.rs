//! Nothing but `fleetgate_host::env` reads the process environment. clippy's
//! `disallowed-methods` (clippy.toml) makes such a read fail CI; this test
//! checks the same boundary in the sources, so a lint silenced with an
//! `#[expect]` in library code cannot slip through either.

mod common;

use common::sources;
use std::path::Path;

const READERS: &[&str] = &["env::var(", "env::var_os(", "env::vars(", "env::vars_os(", "std::env::var", "getenv("];

#[test]
fn only_the_env_module_reads_the_process_environment() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    for krate in std::fs::read_dir(crates).unwrap() {
        sources(&krate.unwrap().path().join("src"), &mut files);
    }
    assert!(files.len() > 20, "the scan found the library sources: {}", files.len());
    let sanctioned = crates.join("host/src/env.rs");
    // The test kit's one reader of the harness's own variables (where scripts/with-postgres
    // put its server, CI, cargo's CARGO): no product key, and nowhere else in the kit.
    let harness = crates.join("testkit/src/pg.rs");
    let mut offenders = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        if file == &sanctioned {
            assert!(text.contains("vars_os"), "the sanctioned reader is where it should be");
            continue;
        }
        if file == &harness {
            assert_eq!(text.matches("std::env::var(").count(), 1, "one harness reader, `harness_env`");
            continue;
        }
        if READERS.iter().any(|r| text.contains(r)) {
            offenders.push(file.display().to_string());
        }
    }
    assert!(offenders.is_empty(), "read the environment through fleetgate_host::env only: {offenders:?}");
}

#[test]
fn the_recognised_set_is_derived_from_the_declaration() {
    use fleetgate_core::env::{DECLARED, KeyName, recognized_keys};
    let known = recognized_keys("GITEA_", &[]);
    for spec in DECLARED {
        if let KeyName::Prefixed(suffix) = spec.name {
            assert!(known.contains(&format!("GITEA_{suffix}")), "{suffix} is declared but not recognised");
        }
    }
    assert_eq!(known.len(), DECLARED.iter().filter(|s| matches!(s.name, KeyName::Prefixed(_))).count());
}
