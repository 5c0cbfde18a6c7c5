//! A candidate rule set in shadow (issue 45): every live call is decided by the running
//! rules and also judged by the candidate's, never enforced; the calls the candidate would
//! decide otherwise — and only those — are audited beside the real decision and reported by
//! `fleetgate rules shadow-report`.

use crate::support::answer;
use crate::workflow::Fleet;
use serde_json::json;

/// The fleet's roster with one more rule: only the merger may create branches — the
/// candidate refuses one class of the author's calls.
fn candidate(dir: &std::path::Path) -> std::path::PathBuf {
    let mut text = "[fleet]\nname = \"flow\"\ntool_prefix = \"gitea_\"\nforge = \"gitea-mcp\"\n".to_owned();
    for (name, role) in
        [("author", "author"), ("reviewer", "reviewer"), ("reviewer2", "reviewer"), ("merger", "merger")]
    {
        text.push_str(&format!(
            "\n[[members]]\nnamespace = \"gitea-{name}\"\nprofile = \"prgs-{name}\"\nrole = \"{role}\"\n"
        ));
    }
    text.push_str("\n[[rules]]\ntool = \"create_branch\"\nroles = [\"merger\"]\n");
    let path = dir.join("candidate.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_shadow_candidate_reports_exactly_the_calls_it_would_refuse_and_enforces_nothing() {
    let _serial = crate::support::serial();
    let dir = tempfile::tempdir().unwrap();
    let path = candidate(dir.path());
    let mut fleet = Fleet::start(&format!("[shadow]\nconfig = {:?}\n", path.display().to_string()));
    // Decided by the running rules: allowed, and forwarded (the branches exist).
    for b in ["one", "two"] {
        answer(fleet.call("author", "create_branch", json!({ "branch": b })));
        assert!(fleet.git(&["branch", "--list", b]).contains(b), "{b} was made: the shadow enforces nothing");
    }
    // Calls the candidate decides as the running rules do: no flip.
    answer(fleet.call("author", "list_branches", json!({})));
    fleet.push_to("one", "x\n", "Work");
    // The flips are queued beside the decisions: read once they are all in.
    let mut report = serde_json::Value::Null;
    crate::support::wait_until(10.0, || {
        report = fleet.f.cli(&["rules", "shadow-report", "--json"]);
        report["flips"] == 2
    });
    assert_eq!(report["flips"], 2, "{report}");
    let groups = report["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{report}");
    let g = &groups[0];
    assert_eq!(
        (g["from"].as_str(), g["to"].as_str(), g["tool"].as_str(), g["count"].as_u64()),
        (Some("allowed"), Some("refused"), Some("create_branch"), Some(2)),
        "{report}"
    );
    assert!(g["rule"].as_str().unwrap().contains("candidate.toml"), "the candidate's rule is named: {report}");
    // Beside the real decisions in the audit log, which stay allowed.
    let audit = fleet.f.audit_until(|e| e.iter().filter(|e| e["tool"] == "create_branch").count() == 2);
    let entries = audit["entries"].as_array().unwrap();
    let real = entries.iter().filter(|e| e["tool"] == "create_branch").count();
    assert_eq!(real, 2, "{audit}");
    assert!(entries.iter().filter(|e| e["tool"] == "create_branch").all(|e| e["allowed"] == true));
    fleet.stop();
}
