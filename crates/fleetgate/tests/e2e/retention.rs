//! `fleetgate prune` on a fleet's real history, aged a year (its timestamps moved back in the
//! SQLite file, as a year of running would have left them): the audit, the answered
//! approvals, a merged PR's records and the pushes its branch has moved past go; an open PR's
//! records, a PR with a claimed lease, a pending approval and the push that is still a
//! branch's tip stay — the forge (the fixture, through `[workflow] forge_command`) is asked
//! which PRs are closed and where each branch's tip is. Then `fleetgate dashboard` with
//! `[retention] every` prunes by itself.

use crate::support::{answer, serial, wait_until};
use crate::workflow::{Fleet, approve};
use serde_json::json;

/// Move every timestamp of the history tables `days` back, as if written then.
fn age(store: &std::path::Path, days: i64) {
    let db = rusqlite::Connection::open(store).unwrap();
    db.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
    let shift = format!("-{days} days");
    for (table, columns) in [
        ("audit_log", &["at"][..]),
        ("pr_decisions", &["at"]),
        ("pr_origins", &["at"]),
        ("pr_pushes", &["at"]),
        ("pr_leases", &["claimed_at", "last_activity", "expires_at"]),
        ("review_locks", &["decided_at", "released_at"]),
        ("approvals", &["requested_at", "answered_at", "used_at"]),
        ("approval_events", &["at"]),
    ] {
        for column in columns {
            let sql = format!(
                "UPDATE {table} SET {column} = strftime('%Y-%m-%dT%H:%M:%SZ', {column}, ?1) WHERE {column} IS NOT NULL"
            );
            db.execute(&sql, [&shift]).unwrap();
        }
    }
}

fn count(store: &std::path::Path, sql: &str) -> i64 {
    let db = rusqlite::Connection::open(store).unwrap();
    db.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
    db.query_row(sql, [], |r| r.get(0)).unwrap()
}

#[test]
fn a_year_of_history_is_pruned_and_nothing_still_referenced() {
    let _serial = serial();
    let mut fleet = Fleet::start(
        "[approvals]\nwait_seconds = 0\n\n[[rules]]\ntool = \"create_branch\"\nroles = [\"author\"]\nargs = { \"/branch\" = [\"asked-1\", \"asked-2\"] }\ndecision = \"ask\"\n",
    );
    let store = fleet.f.store();

    // A merged PR: created, reviewed, merged. Its branch got two pushes; the second is its tip.
    answer(fleet.call("author", "create_branch", json!({ "branch": "feature" })));
    fleet.push("one\n", "First");
    let merged_head = fleet.push("two\n", "Second");
    let create = json!({ "method": "create", "title": "Merged", "body": "b", "head": "feature", "base": "main" });
    let merged = answer(fleet.call("author", "pull_request_write", create))["number"].as_i64().unwrap();
    assert!(!fleet.claim("reviewer", merged, &merged_head, "review").0);
    answer(fleet.call("reviewer", "pull_request_review_write", approve(merged)));
    assert!(!fleet.claim("merger", merged, &merged_head, "merge").0);
    let merge = json!({ "method": "merge", "pull_number": merged });
    assert_eq!(answer(fleet.call("merger", "pull_request_write", merge))["merged"], true);

    // An open PR with nothing live, and one whose review lease is still claimed.
    answer(fleet.call("author", "create_branch", json!({ "branch": "open" })));
    let open_head = fleet.push_to("open", "open\n", "Open");
    let create = json!({ "method": "create", "title": "Open", "body": "b", "head": "open", "base": "main" });
    let open = answer(fleet.call("author", "pull_request_write", create))["number"].as_i64().unwrap();
    answer(fleet.call("author", "create_branch", json!({ "branch": "leased" })));
    let leased_head = fleet.push_to("leased", "leased\n", "Leased");
    let create = json!({ "method": "create", "title": "Leased", "body": "b", "head": "leased", "base": "main" });
    let leased = answer(fleet.call("author", "pull_request_write", create))["number"].as_i64().unwrap();
    assert!(!fleet.claim("reviewer", leased, &leased_head, "review").0);
    let _ = &open_head;

    // Approvals: one answered (denied), one left pending.
    assert!(fleet.call("author", "create_branch", json!({ "branch": "asked-1" })).0, "held");
    let id = crate::approvals::pending(&fleet.f)["id"].as_str().unwrap().to_owned();
    fleet.f.cli(&["approvals", "deny", &id, "--json"]);
    assert!(fleet.call("author", "create_branch", json!({ "branch": "asked-2" })).0, "held");

    // A year later.
    age(&store, 400);
    let before = |sql: &str| count(&store, sql);
    assert!(before("SELECT COUNT(*) FROM audit_log") > 0);
    let pushes_before = before("SELECT COUNT(*) FROM pr_pushes");
    assert!(pushes_before >= 4, "{pushes_before}");

    let out = fleet
        .f
        .cli_command(&["prune", "--audit", "365d", "--approvals", "30d", "--workflow", "90d", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    // The merged PR's records went; the open one is kept, said so; the leased one is live.
    let key = |n: i64| format!("forge/fleet/forge#{n}");
    assert_eq!(report["prs"], json!([key(merged)]), "{report}");
    let kept = report["kept"].as_array().unwrap();
    assert!(
        kept.iter().any(|k| k["what"] == key(open) && k["why"] == "open on the forge" && k["unanswered"] == false),
        "{report}"
    );
    assert!(!kept.iter().any(|k| k["what"] == key(leased)), "a live PR is not even a candidate: {report}");
    let rows = |table: &str, n: i64| count(&store, &format!("SELECT COUNT(*) FROM {table} WHERE pr = {n}"));
    assert_eq!((rows("pr_origins", merged), rows("pr_decisions", merged), rows("pr_leases", merged)), (0, 0, 0));
    assert_eq!(rows("pr_origins", open), 1);
    assert_eq!((rows("pr_origins", leased), rows("pr_leases", leased)), (1, 1));

    // Pushes: every one its branch has moved past went; each branch's tip stayed.
    let tips = count(
        &store,
        &format!("SELECT COUNT(*) FROM pr_pushes WHERE head IN ('{merged_head}', '{open_head}', '{leased_head}')"),
    );
    assert_eq!(tips, 3, "each branch's tip push is kept");
    assert_eq!(count(&store, "SELECT COUNT(*) FROM pr_pushes"), 3, "{report}");
    assert_eq!(report["pushes"].as_i64().unwrap(), pushes_before - 3, "{report}");

    // The audit before the year went; the denied request and its delivered events went; the
    // pending one stayed.
    assert!(report["audit"].as_i64().unwrap() > 0, "{report}");
    assert_eq!(count(&store, "SELECT COUNT(*) FROM audit_log WHERE at < '2026-01-01T00:00:00Z'"), 0);
    assert_eq!(report["approvals"], 1, "{report}");
    assert_eq!(count(&store, "SELECT COUNT(*) FROM approvals WHERE state = 'pending'"), 1);

    // Too short an age is refused, naming the floor; nothing to prune is an error too.
    let short = fleet.f.cli_command(&["prune", "--audit", "2h"]).output().unwrap();
    assert_eq!(short.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&short.stderr).contains("shorter than 86400 s"), "{short:?}");
    let nothing = fleet.f.cli_command(&["prune"]).output().unwrap();
    assert_eq!(nothing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&nothing.stderr).contains("nothing to prune"), "{nothing:?}");

    // The schedule: the dashboard of a roster with `[retention] every` prunes by itself.
    let entry = |tool: &str| fleetgate_core::audit::AuditEntry {
        id: None,
        at: fleetgate_core::Timestamp::from_unix(1_700_000_000),
        profile: "prgs-author".into(),
        worker_identity: None,
        tool: tool.into(),
        allowed: true,
        blocker_kind: None,
        reasons: vec![],
        principal: None,
        call: None,
    };
    let opened = fleetgate_store::open(store.to_str().unwrap()).unwrap();
    for _ in 0..3 {
        opened.append_audit(&entry("old_call")).unwrap();
    }
    let config = std::fs::read_to_string(fleet.f.config()).unwrap();
    std::fs::write(fleet.f.config(), format!("{config}\n[retention]\naudit = \"30d\"\nevery = \"1h\"\n")).unwrap();
    let mut dashboard = fleet
        .f
        .cli_command(&["dashboard", "--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pruned = wait_until(40.0, || count(&store, "SELECT COUNT(*) FROM audit_log WHERE tool = 'old_call'") == 0);
    let _ = dashboard.kill();
    let _ = dashboard.wait();
    assert!(pruned, "the dashboard's schedule pruned the old entries");
    fleet.stop();
}

/// `fleetgate serve` runs the `[retention] every` schedule too: a gateway alone prunes the old
/// audit entries, and keeps the recent ones.
#[test]
fn a_gateway_prunes_on_its_own_schedule() {
    let _serial = serial();
    let f = crate::support::FleetDir::new(
        "[fleet]\nname = \"pruning\"\ntool_prefix = \"gitea_\"\n\n[[members]]\nnamespace = \"gitea-author\"\n\
         profile = \"prgs-author\"\nrole = \"author\"\n\n[retention]\naudit = \"30d\"\nevery = \"1h\"\n",
    );
    crate::support::bare_repo(f.dir.path(), "forge.git", &f.repo());
    let store = fleetgate_store::open(f.store().to_str().unwrap()).unwrap();
    let entry = |tool: &str, at| fleetgate_core::audit::AuditEntry::event(at, "prgs-author", tool, String::new());
    let old = fleetgate_core::Timestamp::from_unix(1_700_000_000);
    for _ in 0..3 {
        store.append_audit(&entry("old_call", old)).unwrap();
    }
    store.append_audit(&entry("recent_call", fleetgate_core::Clock::now(&fleetgate_host::clock::SystemClock))).unwrap();
    let gateway = crate::httpkit::HttpGateway::start(&f, Some("prune-token-3a9e"), &[]);
    let tools = |name: &str| store.list_audit(None, 1000).unwrap().iter().filter(|e| e.tool == name).count();
    let pruned = wait_until(40.0, || tools("old_call") == 0);
    assert!(pruned, "the gateway's schedule did not prune: {}", gateway.log());
    assert_eq!(tools("recent_call"), 1, "a recent entry is kept");
    assert!(gateway.log().contains("retention: pruned 3 audit entries"), "{}", gateway.log());
    gateway.stop();
}
