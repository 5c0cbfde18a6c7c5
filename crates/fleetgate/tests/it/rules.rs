//! `fleetgate rules test|diff`: a history recorded by the real gate (its audit, its judged
//! calls), replayed through the CLI against a changed rule set; the flips it lists are the
//! ones computed here by hand, a call whose arguments were not kept is reported unjudged,
//! and the rule set that made the history flips none of it.

use crate::support::{fleetgate, fresh_store, json_of, now};
use fleetgate_config::FleetConfig;
use fleetgate_control::audit::Auditor;
use fleetgate_control::gate::{Call, Caller, Gate, Observer, PeerUnread};
use fleetgate_core::inventory::{PeerFacts, PidProbe};
use fleetgate_host::procfs::ProcessSource;
use fleetgate_host::{HostError, HostErrorKind};
use serde_json::{Map, Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const MEMBERS: &str = r#"
[fleet]
name = "replayed"

[[members]]
namespace = "gitea-author"
profile = "prgs-author"
role = "author"

[[members]]
namespace = "gitea-merger"
profile = "prgs-merger"
role = "merger"
"#;

/// The rules the history is made under: merging is the merger's, opening and closing the
/// author's, reading everyone's.
const OLD: &str = r#"
[[rules]]
tool = "pull_request_write"
args = { "/method" = ["merge"] }
roles = ["merger"]

[[rules]]
tool = "pull_request_write"
args = { "/method" = ["create", "close"] }
roles = ["author"]

[[rules]]
tool = "get_file_contents"
roles = ["*"]
class = "read_only"
"#;

/// The change: closing becomes the merger's; reading the author's only.
const NEW: &str = r#"
[[rules]]
tool = "pull_request_write"
args = { "/method" = ["merge", "close"] }
roles = ["merger"]

[[rules]]
tool = "pull_request_write"
args = { "/method" = ["create"] }
roles = ["author"]

[[rules]]
tool = "get_file_contents"
roles = ["author"]
class = "read_only"
"#;

/// A host with nothing on it: every call made here is decided by its role policy alone
/// (read-only, or refused by role), so nothing is observed.
#[derive(Debug)]
pub(crate) struct Nothing;

impl ProcessSource for Nothing {
    fn entries(&self) -> Result<Vec<fleetgate_host::procfs::ProcEntry>, HostError> {
        Ok(Vec::new())
    }
    fn entry(&self, _: i64) -> Option<fleetgate_host::procfs::ProcEntry> {
        None
    }
    fn environ(&self, _: i64) -> Result<fleetgate_core::env::EnvSnapshot, HostError> {
        Err(HostError::new(fleetgate_host::HostErrorKind::Unreadable, "no process"))
    }
}

impl Observer for Nothing {
    fn processes(&self) -> &dyn ProcessSource {
        self
    }
    fn probe(&self, _: i64) -> PidProbe {
        PidProbe::Unknown
    }
    fn local_host(&self) -> Option<fleetgate_store::HostIdentity> {
        None
    }
    fn head(&self, _: &Path) -> Result<String, HostError> {
        Err(HostError::new(fleetgate_host::HostErrorKind::Unreadable, "no checkout"))
    }
    fn peer_facts(&self, _: i64, _: &[String], _: &str) -> Result<PeerFacts, PeerUnread> {
        Err(PeerUnread::OpenFiles(HostError::new(HostErrorKind::Unreadable, "no peers")))
    }
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

#[test]
fn a_changed_rule_set_lists_the_flips_of_the_recorded_history() {
    let (dir, store) = fresh_store();
    let db = dir.path().join("registry.sqlite3");
    let write = |name: &str, text: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let old = write("old.toml", format!("{MEMBERS}{OLD}"));
    let new = write("new.toml", format!("{MEMBERS}{NEW}"));
    let off = write("off.toml", format!("{MEMBERS}{OLD}\n[audit]\narguments = \"off\"\n"));

    // The history, decided and audited by the real gate under the old rules (and one call
    // under a roster that keeps no arguments).
    let decide = |config_path: &Path, profile: &str, tool: &str, arguments: Value| {
        let config = Arc::new(FleetConfig::load(Some(config_path), &Default::default()).unwrap());
        let auditor = Auditor::new(store.clone(), Duration::from_secs(5));
        let gate = Gate::new(config.clone(), store.clone(), Arc::new(Nothing)).with_auditor(auditor);
        let member = config.member(profile).unwrap();
        let arguments = args(arguments);
        let call = Call {
            member,
            tool,
            read_only_hint: None,
            arguments: Some(&arguments),
            schema: None,
            caller: Caller::Nobody("a replay test".into()),
            forge: None,
            schemas: None,
        };
        let verdict = gate.decide(&call, now(), None);
        assert!(gate.flush_audit(Duration::from_secs(5)));
        (verdict.allowed, verdict.blocker_kind.map(|k| k.as_str()))
    };
    let pr = |method: &str| json!({ "method": method, "owner": "o", "repo": "r", "index": 3 });
    assert_eq!(decide(&old, "prgs-author", "pull_request_write", pr("merge")), (false, Some("role_not_permitted")));
    assert_eq!(decide(&old, "prgs-merger", "pull_request_write", pr("close")), (false, Some("role_not_permitted")));
    assert_eq!(decide(&old, "prgs-merger", "get_file_contents", json!({ "path": "a" })), (true, None));
    assert_eq!(decide(&old, "prgs-author", "get_file_contents", json!({ "path": "b" })), (true, None));
    assert_eq!(decide(&off, "prgs-merger", "get_file_contents", json!({ "path": "c" })), (true, None));
    let stored = store.list_audit(None, 100).unwrap();
    assert_eq!(stored.len(), 5);
    assert!(stored.iter().all(|e| e.call.as_ref().is_some_and(|c| !c.rules.is_empty())), "{stored:?}");

    let rules_test = |config: &Path| {
        let out = fleetgate(&db, &["--config", config.to_str().unwrap(), "rules", "test", "--json"]);
        (out.status.code(), json_of(&out))
    };
    // By hand: the merger's reads (#3, and #5 whose arguments were not kept — the read rule
    // reads none, so it is judged) flip to refused by new.toml's read rule; the author's
    // refused merge and allowed read stay; the merger's refused close becomes permitted, and
    // as a mutating call its fate rests on the fleet: unjudged.
    let (code, report) = rules_test(&new);
    assert_eq!(code, Some(3), "{report:#}");
    assert_eq!((report["decisions"].as_u64(), report["flipped"].as_u64()), (Some(5), Some(2)), "{report:#}");
    let flips = report["flips"].as_array().unwrap();
    assert_eq!(flips.len(), 1, "{report:#}");
    assert_eq!((flips[0]["from"].as_str(), flips[0]["to"].as_str()), (Some("allowed"), Some("refused")));
    assert_eq!((flips[0]["tool"].as_str(), flips[0]["count"].as_u64()), (Some("get_file_contents"), Some(2)));
    assert!(flips[0]["rule"].as_str().unwrap().starts_with(new.to_str().unwrap()), "{report:#}");
    let unjudged = report["unjudged"].as_array().unwrap();
    assert_eq!(unjudged.len(), 1, "{report:#}");
    assert_eq!((unjudged[0]["why"].as_str(), unjudged[0]["count"].as_u64()), (Some("live_conditions"), Some(1)));

    // The rule set that made the history flips nothing (exit 0).
    let (code, report) = rules_test(&old);
    assert_eq!((code, report["flipped"].as_u64(), report["same"].as_u64()), (Some(0), Some(0), Some(5)), "{report:#}");

    // A change that reads the argument the `off` roster did not keep: that decision is
    // reported unjudged, never guessed.
    let picky = write(
        "picky.toml",
        format!(
            "{MEMBERS}[[rules]]\ntool = \"get_file_contents\"\nargs = {{ \"/path\" = [\"a\", \"b\"] }}\nroles = [\"*\"]\n"
        ),
    );
    let (_, report) = rules_test(&picky);
    let unjudged = report["unjudged"].as_array().unwrap();
    assert!(unjudged.iter().any(|g| g["why"] == "arguments_not_kept" && g["count"] == 1), "{report:#}");

    // rules diff: the text and the exit code.
    let out = fleetgate(&db, &["rules", "diff", old.to_str().unwrap(), new.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(3));
    let diff = json_of(&out);
    assert_eq!(diff["added"].as_array().unwrap().len(), 2, "{diff:#}");
    assert_eq!(diff["removed"].as_array().unwrap().len(), 2, "{diff:#}");
    assert_eq!(diff["changed"][0]["what"], json!(["roles"]), "{diff:#}");
    let same = fleetgate(&db, &["rules", "diff", old.to_str().unwrap(), old.to_str().unwrap()]);
    assert_eq!(same.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&same.stdout).contains("the rules are the same"));
}
