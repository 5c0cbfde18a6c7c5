//! Schema migrations: numbered alike in both engines, additive, idempotent,
//! safe when several processes migrate one fresh store at once, and a schema
//! newer than this build fails closed.

use crate::child;
use crate::engines::Fixture;
use crate::support::{attach, audit_entry, now, renewal, runtime_row};
use fleetgate_core::runtime::{ProcessScan, RuntimeRecord};
use fleetgate_store::{HostIdentity, SCHEMA_VERSION, SeenTool, Store, StoreErrorKind};
use serde_json::json;

const VERSIONS: &str = "SELECT COUNT(*) FROM fleetgate_schema";

pub fn a_fresh_store_is_at_the_current_version(fx: &Fixture) {
    let store = fx.open();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    drop(store);
    // Opening again applies nothing twice.
    assert_eq!(fx.open().schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(fx.query_i64(VERSIONS), i64::from(SCHEMA_VERSION));
}

/// What every decision under `[approvals]` reads of the approvals (schema v14) is found
/// through an index on each engine, not a scan of every request ever made.
pub fn the_approvals_a_decision_reads_are_indexed(fx: &Fixture) {
    drop(fx.open());
    let since = match fx.kind {
        crate::engines::Kind::Sqlite => "'2026-12-01T00:00:00Z'",
        crate::engines::Kind::Postgres => "TIMESTAMPTZ '2026-12-01T00:00:00Z'",
    };
    let denied =
        format!("SELECT id FROM approvals WHERE tool = 'merge' AND state = 'denied' AND answered_at >= {since}");
    let denied = denied.as_str();
    let pending = "SELECT id FROM approvals WHERE worker = 'wrk-1' AND state = 'pending'";
    for (sql, index) in [(denied, "approvals_denied_by_tool"), (pending, "approvals_pending_by_worker")] {
        let plan = fx.plan(sql);
        assert!(plan.contains(index), "{sql}: {plan}");
    }
}

/// Write what a store at `version` can hold; `raw` writes through SQL what this build's
/// store API would write with columns an older version lacks.
fn populate(store: &dyn Store, version: u32, raw: &dyn Fn(&str)) {
    if version >= 1 {
        attach(store, "w-old");
        assert!(store.heartbeat(&renewal("w-old", 1), now().plus_seconds(60)).unwrap().renewed);
    }
    if version >= 4 {
        store.upsert_runtime(&runtime_row("gitea-author", 41001)).unwrap();
    } else if version >= 2 {
        raw(&v2_runtime_insert(&runtime_row("gitea-author", 41001)));
    }
    if version >= 6 {
        let claim = crate::ledger::claim_of("r1", fleetgate_core::workflow::Purpose::Review, "h1", 600);
        store.claim_pr_lease(&claim, now()).unwrap();
        store
            .observe_tool(
                &SeenTool { profile: "prgs-author", tool: "pull_request_write", digest: "sha256:a", definition: "{}" },
                now(),
            )
            .unwrap();
    }
    if version == 6 {
        // Version 6's columns: a decision without its base.
        raw(&format!(
            "INSERT INTO pr_decisions (binding, pr, head, verdict, worker, profile, client, session, at) \
             VALUES ('prgs/Org/Repo', 976, 'h1', 'approve', 'r1', 'r1', 'codex', 's1', '{}')",
            now()
        ));
    }
    if version >= 13 {
        store.request_approval(&crate::approvals::request(9, "w-old", 1)).unwrap();
    } else if version >= 11 {
        // Version 11's and 12's columns: no `does` yet.
        let r = crate::approvals::request(9, "w-old", 1);
        raw(&format!(
            "INSERT INTO approvals (id, requested_at, profile, role, worker, principal, tool, arguments, digest, why, \
             state, approvers, required, answers) VALUES ('{}', '{}', 'prgs-merger', 'merger', 'w-old', NULL, \
             'pull_request_write', '{}', '{}', 'rule asks', 'pending', '[]', 1, '[]')",
            r.id,
            now(),
            serde_json::to_string(&r.arguments).unwrap().replace('\'', "''"),
            r.digest
        ));
    } else if version >= 9 {
        // Version 9's and 10's columns: no approvers, required count or answers yet.
        let r = crate::approvals::request(9, "w-old", 1);
        raw(&format!(
            "INSERT INTO approvals (id, requested_at, profile, role, worker, principal, tool, arguments, digest, why, \
             state) VALUES ('{}', '{}', 'prgs-merger', 'merger', 'w-old', NULL, 'pull_request_write', '{}', '{}', \
             'rule asks', 'pending')",
            r.id,
            now(),
            serde_json::to_string(&r.arguments).unwrap().replace('\'', "''"),
            r.digest
        ));
    }
    if version >= 12 {
        store.record_http_session(&crate::sessions::session("s-old", "127.0.0.1:7001", "rt-1")).unwrap();
    }
    if version >= 8 {
        store.append_audit(&audit_entry("gitea_merge", now())).unwrap();
    } else if version >= 5 {
        // Version 5's to 7's columns: a principal, no judged call yet.
        raw(&format!(
            "INSERT INTO audit_log (at, profile, worker_identity, tool, allowed, blocker_kind, reasons, principal) \
             VALUES ('{}', 'prgs-author', 'wrk-1', 'gitea_merge', FALSE, 'worker_fenced', '[]', 'claude-code')",
            now()
        ));
    } else if version >= 3 {
        // Version 3's columns: no principal yet.
        raw(&format!(
            "INSERT INTO audit_log (at, profile, worker_identity, tool, allowed, blocker_kind, reasons) \
             VALUES ('{}', 'prgs-author', 'wrk-1', 'gitea_merge', FALSE, 'worker_fenced', '[]')",
            now()
        ));
    }
}

/// The row as version 2's columns hold it: no host yet.
fn v2_runtime_insert(r: &RuntimeRecord) -> String {
    let opt = |v: &Option<String>| v.as_deref().map_or_else(|| "NULL".to_owned(), |v| format!("'{v}'"));
    format!(
        "INSERT INTO runtimes (runtime_id, namespace, profile, role, remote, org, repo, repository_root, pid, \
         cohort_id, cohort_source, client_provenance, boot_id, startup_head, daemon_start_head, transport, \
         registered_at, last_heartbeat_at, status) \
         VALUES ('{}', '{}', '{}', '{}', {}, {}, {}, {}, {}, {}, '{}', '{}', '{}', {}, {}, '{}', '{}', {}, '{}')",
        r.runtime_id,
        r.namespace,
        r.profile,
        r.role,
        opt(&r.remote),
        opt(&r.org),
        opt(&r.repo),
        opt(&r.repository_root),
        r.pid,
        opt(&r.cohort_id),
        r.cohort_source.as_str(),
        r.client_provenance,
        r.boot_id,
        opt(&r.startup_head),
        opt(&r.daemon_start_head),
        r.transport,
        r.registered_at,
        opt(&r.last_heartbeat_at.map(|t| t.to_string())),
        r.status.as_str(),
    )
}

/// What `populate` wrote is all there, and the newest tables work.
fn check_survivors(store: &dyn Store, version: u32) {
    let workers = store.list_workers().unwrap();
    if version >= 1 {
        let row = &workers[0];
        assert_eq!((row.ids.worker_identity.as_str(), row.renewal_count), ("w-old", 1), "at version {version}");
        assert_eq!(row.last_heartbeat_at, now().plus_seconds(60));
    } else {
        assert!(workers.is_empty());
    }
    let runtimes = store.list_runtime().unwrap();
    assert_eq!(runtimes, if version >= 2 { vec![runtime_row("gitea-author", 41001)] } else { vec![] });
    let audit = store.list_audit(None, 10).unwrap();
    assert_eq!(audit.len(), usize::from(version >= 3), "at version {version}");
    // The newest migration's tables and columns are there.
    let host = HostIdentity { host_id: "m1".into(), boot_id: "b1".into() };
    assert!(store.publish_observation(&host, &ProcessScan::of(vec![]), now()).unwrap());
    if version >= 2 {
        let mut hosted = runtimes[0].clone();
        hosted.host = Some(host);
        store.upsert_runtime(&hosted).unwrap();
        assert_eq!(store.list_runtime().unwrap(), [hosted], "at version {version}");
    }
    let leases = store.list_pr_leases(false, now()).unwrap();
    assert_eq!(leases.len(), usize::from(version >= 6), "at version {version}");
    assert_eq!(store.list_tool_pins(None).unwrap().len(), usize::from(version >= 6), "at version {version}");
    // A decision made before v7 has no base (it counts for no base); v7's keep theirs.
    let decisions = store.pr_records(&crate::ledger::pr()).unwrap().decisions;
    assert_eq!(decisions.iter().map(|d| d.base.clone()).collect::<Vec<_>>(), vec![None; usize::from(version == 6)]);
    let decision = fleetgate_core::workflow::PrDecision {
        pr: crate::ledger::pr(),
        head: "h9".into(),
        base: Some("dev".into()),
        verdict: fleetgate_core::workflow::ReviewVerdict::Approve,
        by: fleetgate_core::workflow::Actor {
            worker: "r9".into(),
            profile: "r9".into(),
            client: "codex".into(),
            session: "s9".into(),
            principal: None,
        },
        at: now(),
        cleared: None,
    };
    store.record_pr_decision(&decision).unwrap();
    let kept = store.pr_records(&crate::ledger::pr()).unwrap().decisions;
    assert_eq!(kept.last(), Some(&decision), "at version {version}");
    let take = fleetgate_store::LockWrite::Take { lock_id: format!("lock-at-{version}") };
    let locked = store.record_locked_decision(&decision, &take).unwrap();
    assert!(locked.is_some(), "v7's review-decision locks at version {version}");
    let claim = crate::ledger::claim_of("r9", fleetgate_core::workflow::Purpose::Merge, "h9", 600);
    assert!(matches!(store.claim_pr_lease(&claim, now()).unwrap(), fleetgate_store::PrClaimOutcome::Claimed(_)));
    // An entry from before v8 has no judged call; v8's keep theirs.
    assert!(audit.iter().all(|e| e.call.is_none()), "at version {version}");
    let mut judged = audit_entry("gitea_review", now());
    judged.call = Some(Box::new(fleetgate_core::audit::JudgedCall {
        role: "reviewer".into(),
        class: fleetgate_core::capability::ToolClass::Mutating,
        tool_class: None,
        rule: None,
        rules: "sha256:0".into(),
        arguments: fleetgate_core::audit::KeptArguments::Off,
    }));
    let id = store.append_audit(&judged).unwrap();
    let newest = store.list_audit(None, 1).unwrap();
    assert_eq!((newest[0].id, newest[0].principal.as_deref()), (Some(id), Some("claude-code")), "at version {version}");
    assert_eq!(newest[0].call, judged.call, "at version {version}");
    // A request made before v11 waits for one answer from any operator; answering it writes
    // v11's event.
    let requests = store.list_approvals(false).unwrap();
    assert_eq!(requests.len(), usize::from(version >= 9), "at version {version}");
    if let Some(r) = requests.first() {
        assert_eq!(r.arguments, crate::approvals::request(9, "w-old", 1).arguments, "at version {version}");
        assert_eq!((r.approvers.len(), r.required, r.answers.len()), (0, 1, 0), "at version {version}");
        // v13's words for what the call does: none for a request made before.
        assert_eq!(r.does.is_some(), version >= 13, "at version {version}");
        let op = fleetgate_core::approval::Approver { id: "os:op".into(), ..Default::default() };
        let answered = store.answer_approval(&r.id, (&op, &crate::approvals::people()), true, None, now()).unwrap();
        assert!(matches!(answered, fleetgate_store::Answered::Recorded(ref a) if a.state.as_str() == "approved"));
        let events = store.approval_events(0, 10).unwrap();
        assert_eq!(events.last().map(|e| e.kind.as_str()), Some("answered"), "at version {version}");
    }
    // v12's sessions: one recorded before is there; the table takes a new one.
    assert_eq!(store.http_session("s-old").unwrap().is_some(), version >= 12, "at version {version}");
    let fresh = crate::sessions::session(&format!("s-at-{version}"), "127.0.0.1:7002", "rt-2");
    store.record_http_session(&fresh).unwrap();
    assert_eq!(store.http_session(&fresh.session_id).unwrap(), Some(fresh), "at version {version}");
}

pub fn migrates_from_every_older_version(fx: &Fixture) {
    for version in 0..SCHEMA_VERSION {
        let at = fx.sibling();
        {
            let old = at.open_at_version(version);
            assert_eq!(old.schema_version().unwrap(), version);
            populate(&*old, version, &|sql| at.exec(sql));
        }
        let store = at.open();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION, "from version {version}");
        assert_eq!(at.query_i64(VERSIONS), i64::from(SCHEMA_VERSION), "each version recorded once");
        check_survivors(&*store, version);
    }
}

/// Where the frozen store of `version` for `fx`'s engine is kept.
fn frozen(fx: &Fixture, version: u32) -> std::path::PathBuf {
    let engine = match fx.kind {
        crate::engines::Kind::Sqlite => "sqlite",
        crate::engines::Kind::Postgres => "postgres",
    };
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testkit/fixtures/stores")
        .join(format!("{engine}-v{version:02}.sql"))
}

/// Stores made by every earlier schema version, frozen as SQL in the test kit when that
/// version was current (so an old migration edited since cannot make them differently), each
/// loaded into an empty database, opened by this build — migrated — and what was written then
/// found intact, the newest tables working. A version whose store is not frozen yet is
/// frozen by running with `FLEETGATE_FREEZE_STORES=1` (a file once written is never rewritten).
pub fn frozen_stores_of_every_earlier_version_migrate(fx: &Fixture) {
    let freeze = crate::engines::env("FLEETGATE_FREEZE_STORES").is_some();
    for version in 1..SCHEMA_VERSION {
        let path = frozen(fx, version);
        if !path.exists() {
            assert!(freeze, "{} is missing: freeze it with FLEETGATE_FREEZE_STORES=1", path.display());
            let at = fx.sibling();
            {
                let old = at.open_at_version(version);
                populate(&*old, version, &|sql| at.exec(sql));
            }
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, at.dump()).unwrap();
        }
        let at = fx.sibling();
        at.exec(&std::fs::read_to_string(&path).unwrap());
        let store = at.open();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION, "from the frozen version {version}");
        assert_eq!(at.query_i64(VERSIONS), i64::from(SCHEMA_VERSION), "each version recorded once");
        check_survivors(&*store, version);
    }
}

pub fn migrations_are_idempotent(fx: &Fixture) {
    {
        let store = fx.open();
        populate(&*store, SCHEMA_VERSION, &|sql| fx.exec(sql));
    }
    // Forget that migrations 2.. ran: opening runs each of them again over
    // the tables and columns they made, and must change nothing.
    fx.exec("DELETE FROM fleetgate_schema WHERE version >= 2");
    let store = fx.open();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(fx.query_i64(VERSIONS), i64::from(SCHEMA_VERSION));
    check_survivors(&*store, SCHEMA_VERSION);
}

pub fn processes_opening_a_fresh_store_at_once_migrate_once(fx: &Fixture) {
    let start_at_ms = child::wall_ms() + 500;
    let openers: Vec<_> = (0..4)
        .map(|_| child::spawn(&json!({ "role": "open", "spec": fx.spec(), "start_at_ms": start_at_ms })))
        .collect();
    for opener in openers {
        let r = child::report(opener);
        assert_eq!(r["opened"], true, "{r}");
        assert_eq!(r["version"], SCHEMA_VERSION, "{r}");
    }
    assert_eq!(fx.query_i64(VERSIONS), i64::from(SCHEMA_VERSION), "each migration applied exactly once");
}

pub fn a_newer_schema_fails_closed(fx: &Fixture) {
    {
        let store = fx.open();
        attach(&*store, "w1");
    }
    fx.exec(
        "INSERT INTO fleetgate_schema (version, name, applied_at) VALUES (99, 'from the future', '2099-01-01T00:00:00Z')",
    );
    let err = fleetgate_store::open(&fx.spec()).unwrap_err();
    assert_eq!(err.kind(), StoreErrorKind::Unsupported, "{err}");
    let text = err.to_string();
    assert!(text.contains("99") && text.contains("newer"), "{text}");
    assert!(text.contains(&fleetgate_store::redact_url(&fx.spec())), "names the store: {text}");
    if let Some(pw) = fx.password() {
        assert!(!text.contains(&pw), "{text}");
    }
    assert_eq!(fx.query_i64("SELECT COUNT(*) FROM workers"), 1, "left untouched");
}

/// A migration killed with SIGKILL wherever the kill lands — before the child opened the store,
/// while it migrates, or after — leaves the store at its old version or the new one, never in
/// between (the migration is one transaction), and the next open migrates it the rest of the
/// way, every version recorded once and what was written before intact. The delays only vary
/// where the kill lands; nothing is asserted of the timing.
pub fn a_migration_killed_at_any_point_resumes(fx: &Fixture) {
    let mut landed = Vec::new();
    for delay_ms in [0u64, 20, 40, 60, 80, 120, 200, 400] {
        let at = fx.sibling();
        {
            let old = at.open_at_version(5);
            populate(&*old, 5, &|sql| at.exec(sql));
        }
        let mut opening = child::spawn(&json!({ "role": "open", "spec": at.spec() }));
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = opening.kill();
        let _ = opening.wait();
        let recorded = at.query_i64(VERSIONS);
        // One transaction for every version: a kill leaves none of them or all.
        assert!(recorded == 5 || recorded == i64::from(SCHEMA_VERSION), "{recorded} versions after the kill");
        landed.push(recorded);
        let store = at.open();
        assert_eq!(
            store.schema_version().unwrap(),
            SCHEMA_VERSION,
            "resumed from {recorded} (killed after {delay_ms} ms)"
        );
        assert_eq!(at.query_i64(VERSIONS), i64::from(SCHEMA_VERSION), "each version recorded once");
        check_survivors(&*store, 5);
    }
    eprintln!("versions recorded when each kill landed: {landed:?}");
}
