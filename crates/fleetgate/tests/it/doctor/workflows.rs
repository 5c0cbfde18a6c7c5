//! Code the forge runs from a branch: `fleetgate doctor` reads the checkout's workflow files
//! (real GitHub Actions and Gitea Actions workflows, `fixtures/doctor/workflows`) and names
//! each one that runs on events from branches the roster does not protect with a token that
//! can write — the file, the trigger's line, and the `permissions` line or the default.

use super::{code, json, tree};

#[test]
fn a_workflow_running_unprotected_branches_code_with_a_write_token_is_named_by_file_and_line() {
    let t = tree("workflows");
    let report = json(&t, &["--json"], 3);
    let found: Vec<(String, u64, String, Option<u64>)> = report["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["file"].as_str().unwrap().to_owned(),
                w["line"].as_u64().unwrap(),
                w["trigger"].as_str().unwrap().to_owned(),
                w["permissions_line"].as_u64(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            // `on: push` to any branch, no `permissions`: the repository's default token.
            (".github/workflows/ci.yml".to_owned(), 4, "push".to_owned(), None),
            // `pull_request_target`: the base's token; the job grants `pull-requests: write`.
            (".github/workflows/label.yml".to_owned(), 3, "pull_request_target".to_owned(), Some(8)),
            // `feature/**` is no protected branch; `contents: write` at line 11.
            (".github/workflows/preview.yml".to_owned(), 4, "push".to_owned(), Some(11)),
            // Gitea: every branch but main, a job without `permissions`.
            (".gitea/workflows/build.yaml".to_owned(), 3, "push".to_owned(), None),
        ],
        "{report}"
    );
    // Not named: a release on the protected branch and tags (even with `write-all`), a
    // read-only lint on every push, a tag-only publish.
    let text = report.to_string();
    for quiet in ["release.yml", "lint.yml", "tags.yml"] {
        assert!(!text.contains(quiet), "{quiet}: {report}");
    }
    let default = &report["workflows"][0]["message"];
    assert!(default.as_str().unwrap().contains("no `permissions` key"), "{default}");
    assert!(default.as_str().unwrap().contains("may be write"), "{default}");
    // The readable reply names each with its file and line; findings exit 3.
    let out = t.doctor(&[]);
    assert_eq!(code(&out), Some(3));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("workflow: .github/workflows/ci.yml:4: runs on `push` to any branch"), "{shown}");
    assert!(shown.contains("workflow: .gitea/workflows/build.yaml:3:"), "{shown}");
}

#[test]
fn a_workflow_the_roster_protects_or_that_cannot_write_is_not_named_and_one_that_is_no_yaml_is_an_error() {
    let t = tree("workflows");
    let dir = t.project.join(".github/workflows");
    // Read-only now: nothing to name.
    for name in ["ci.yml", "preview.yml", "label.yml"] {
        std::fs::remove_file(dir.join(name)).unwrap();
    }
    std::fs::remove_dir_all(t.project.join(".gitea")).unwrap();
    let report = json(&t, &["--json"], 0);
    assert_eq!(report["workflows"], serde_json::json!([]), "{report}");
    // A protected `[workflow] protected_branches` glob is not an unprotected branch.
    std::fs::write(
        dir.join("release-branches.yml"),
        "on:\n  push:\n    branches: ['release/*']\npermissions:\n  contents: write\njobs: {}\n",
    )
    .unwrap();
    let roster = t.dir.path().join("xdg/fleetgate/fleet.toml");
    let mut text = std::fs::read_to_string(&roster).unwrap();
    assert!(!text.contains("[workflow]"), "the fixture roster has no [workflow] table yet");
    text.push_str("\n[workflow]\nprotected_branches = [\"release/*\"]\n");
    std::fs::write(&roster, text).unwrap();
    let report = json(&t, &["--json"], 0);
    assert_eq!(report["workflows"], serde_json::json!([]), "{report}");
    // A file that is no YAML is named as an error (exit 1), never skipped.
    std::fs::write(dir.join("broken.yml"), "on: [push\njobs: {").unwrap();
    let out = t.doctor(&["--json"]);
    assert_eq!(code(&out), Some(1));
    assert!(super::stderr(&out).contains("broken.yml"), "{}", super::stderr(&out));
}
