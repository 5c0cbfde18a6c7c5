//! The view as a pure function: hand-made looks in, what the page shows out.

use super::*;
use fleetgate_core::inventory::{InventoryInput, PidProbe, classify_fleet_inventory};
use fleetgate_core::runtime::{CohortSource, ObservedProcess, ProcessScan, RosterMember, RuntimeRecord, RuntimeStatus};
use fleetgate_core::worker::{Registration, WorkerIds};
use fleetgate_core::workflow::{Actor, LeaseTerms, Phase, PrLease, PrRef, Purpose};

fn t0() -> Timestamp {
    Timestamp::from_unix(1_800_000_000)
}

fn roster() -> Vec<RosterMember> {
    vec![RosterMember {
        namespace: "gitea-author".into(),
        profile: "prgs-author".into(),
        role: "author".into(),
        replicas: 1,
    }]
}

fn row(pid: i64) -> RuntimeRecord {
    RuntimeRecord {
        runtime_id: format!("gitea-author:{pid}:b"),
        namespace: "gitea-author".into(),
        profile: "prgs-author".into(),
        role: "author".into(),
        remote: None,
        org: None,
        repo: None,
        repository_root: None,
        pid,
        cohort_id: Some("ppid:812".into()),
        cohort_source: CohortSource::ParentProcess,
        client_provenance: "sidecar".into(),
        boot_id: "b".into(),
        startup_head: Some("82d71b77028a7abd4f8ab4a4e4d89658a187f73d".into()),
        daemon_start_head: None,
        transport: "stdio".into(),
        registered_at: t0(),
        last_heartbeat_at: Some(t0().plus_seconds(30)),
        status: RuntimeStatus::Running,
        host: None,
    }
}

/// The fleet at `now` with these rows; `dead` pids answer signal 0 as gone.
fn snapshot(rows: &[RuntimeRecord], dead: &[i64], diagnostics: &[&str], now: Timestamp) -> Snapshot {
    let scan = ProcessScan::of(
        rows.iter()
            .filter(|r| !dead.contains(&r.pid))
            .map(|r| ObservedProcess { pid: r.pid, started_at: t0(), command: "sleep marker".into(), uid: None })
            .collect(),
    );
    let inventory = classify_fleet_inventory(
        &InventoryInput {
            roster: &roster(),
            runtime_rows: rows,
            process_scan: &scan,
            expected_binding: None,
            now,
            registry_available: true,
            registry_error: None,
            answering_namespace: None,
            hosts: Default::default(),
            peers: Default::default(),
        },
        &|pid| if dead.contains(&pid) { PidProbe::Dead } else { PidProbe::Alive },
    );
    Snapshot { inventory, diagnostics: diagnostics.iter().map(|d| (*d).into()).collect() }
}

/// A look at `snap` with nothing else in it: each test fills in what it shows.
fn quiet(snap: &Snapshot, now: Timestamp) -> Look<'_> {
    Look {
        fleet_name: "t",
        store: "sqlite:/x",
        snapshot: snap,
        workers: Ok(&[]),
        audit: Ok(&[]),
        pr_leases: Ok(&[]),
        prs: Ok(&[]),
        review_locks: Ok(&[]),
        approvals: Ok(&[]),
        policy: &[],
        notify: Ok(&[]),
        now,
    }
}

fn view(snap: &Snapshot, workers: &[WorkerRecord], audit: &[AuditEntry], now: Timestamp) -> FleetView {
    view_with_leases(snap, workers, audit, &[], now)
}

fn view_with_leases(
    snap: &Snapshot,
    workers: &[WorkerRecord],
    audit: &[AuditEntry],
    leases: &[PrLease],
    now: Timestamp,
) -> FleetView {
    let look = Look { workers: Ok(workers), audit: Ok(audit), pr_leases: Ok(leases), ..quiet(snap, now) };
    build(&look, &|pid| pid != Some(666))
}

fn worker(id: &str, pid: i64, renewed: Timestamp) -> WorkerRecord {
    let mut w = Registration {
        ids: WorkerIds {
            worker_identity: id.into(),
            client_name: "claude".into(),
            client_instance_id: "i".into(),
            session_id: "s".into(),
            generation_id: "g".into(),
            role: "author".into(),
            profile: "prgs-author".into(),
            pid: Some(pid),
        },
        heartbeat_ttl_seconds: 900.0,
    }
    .into_record(t0());
    w.last_heartbeat_at = renewed;
    w
}

fn refusal(id: i64, allowed: bool, blocker: Option<&str>) -> AuditEntry {
    AuditEntry {
        id: Some(id),
        at: t0().plus_seconds(id),
        profile: "prgs-author".into(),
        worker_identity: None,
        tool: "git_add".into(),
        allowed,
        blocker_kind: blocker.map(str::to_owned),
        reasons: vec![format!("reason {id}")],
        principal: None,
        call: None,
    }
}

#[test]
fn a_healthy_member_shows_its_pid_cohort_revision_and_an_open_gate() {
    let now = t0().plus_seconds(40);
    let v = view(&snapshot(&[row(4100)], &[], &[], now), &[], &[], now);
    assert!(v.gate.open, "{:?}", v.gate);
    assert_eq!((v.gate.blocker_kind.as_deref(), v.gate.operator_action.as_deref()), (None, None));
    assert_eq!(v.members.len(), 1);
    let m = &v.members[0];
    assert_eq!((m.health, m.liveness, m.pid), (Health::Running, Some(Liveness::Alive), Some(4100)));
    assert_eq!(m.cohort_id.as_deref(), Some("ppid:812"));
    assert!(m.startup_head.as_deref().unwrap().starts_with("82d71b77"));
    assert_eq!(m.last_heartbeat_at, Some(t0().plus_seconds(30)), "the refresh time, recovered from the age");
    assert_eq!(m.heartbeat_age_seconds, Some(10));
    assert!(v.summary.starts_with("1 of 1 members running"), "{}", v.summary);
    assert!(v.pr_leases.is_empty() && v.pr_leases_error.is_none());
}

#[test]
fn a_killed_member_is_missing_with_its_stale_row_under_it_and_the_gate_names_the_action() {
    let now = t0().plus_seconds(40);
    let v = view(&snapshot(&[row(4100)], &[4100], &[], now), &[], &[], now);
    assert!(!v.gate.open);
    assert_eq!(v.gate.blocker_kind.as_deref(), Some("fleet_inventory_blocked"));
    assert!(v.gate.blocked_reasons.iter().any(|r| r.contains("prgs-author")), "{:?}", v.gate.blocked_reasons);
    assert_eq!(
        v.gate.operator_action.as_deref(),
        Some("start the prgs-author server (gitea-author) from the fleet's client")
    );
    let shape: Vec<_> = v.members.iter().map(|m| (m.health, m.liveness, m.pid)).collect();
    assert_eq!(shape, [(Health::Missing, None, None), (Health::Stale, Some(Liveness::Dead), Some(4100))]);
    let g = v.gauges();
    assert!(!g.gate_open);
    assert!(g.members_by_health.contains(&("stale", 1)) && g.members_by_health.contains(&("running", 0)));
}

#[test]
fn a_hard_diagnostic_closes_the_gate_before_the_inventory() {
    let now = t0().plus_seconds(40);
    let stale = "stale-runtime: gitea-author (pid 4100) started at revision a, the repository is now at b.";
    let v = view(&snapshot(&[row(4100)], &[], &[stale, "note: soft"], now), &[], &[], now);
    assert_eq!(v.gate.blocker_kind.as_deref(), Some("runtime_reconnect_required"));
    assert_eq!(v.gate.blocked_reasons, [stale]);
    assert!(v.gate.operator_action.as_deref().unwrap().contains("current revision"));
    assert_eq!(v.diagnostics.iter().map(|d| d.hard).collect::<Vec<_>>(), [true, false]);
    assert_eq!(v.gauges().hard_diagnostics, 1);
}

#[test]
fn workers_show_lease_age_against_ttl_and_stopped_rows_are_counted_not_listed() {
    let now = t0().plus_seconds(1000);
    let mut stopped = worker("w-stopped", 10, t0());
    stopped.status = WorkerStatus::Stopped;
    let workers = [
        worker("w-live", 10, now.plus_seconds(-100)),
        worker("w-expired", 10, now.plus_seconds(-901)),
        worker("w-dead-pid", 666, now.plus_seconds(-5)),
        stopped,
    ];
    let v = view(&snapshot(&[row(4100)], &[], &[], now), &workers, &[], now);
    let shape: Vec<_> = v
        .workers
        .iter()
        .map(|w| (w.worker_identity.as_str(), w.lease_age_seconds, w.heartbeat_fresh, w.live))
        .collect();
    assert_eq!(shape, [("w-live", 100, true, true), ("w-expired", 901, false, false), ("w-dead-pid", 5, true, false)]);
    assert_eq!(v.stopped_workers, 1);
    assert!(v.gauges().workers_by_state.contains(&("expired", 2)));
}

#[test]
fn refusals_are_the_newest_first_with_an_operator_action() {
    let now = t0().plus_seconds(100);
    let mut audit: Vec<AuditEntry> = (1..=30).map(|i| refusal(i, false, Some("worker_fenced"))).collect();
    audit.push(refusal(31, true, None));
    audit.push(refusal(32, false, Some("fleet_inventory_blocked")));
    let v = view(&snapshot(&[row(4100)], &[], &[], now), &[], &audit, now);
    assert_eq!(v.refusals.len(), REFUSALS_SHOWN);
    assert_eq!(v.refusals[0].id, Some(32), "newest first, allowed entries skipped");
    assert_eq!(v.refusals[1].id, Some(30));
    assert_eq!(v.refusals[0].operator_action.as_deref(), Some("resolve this before mutating: reason 32"));
    assert!(v.refusals[1].operator_action.as_deref().unwrap().starts_with("stop this server"));
}

#[test]
fn unreadable_rows_are_said_not_hidden() {
    let now = t0();
    let snap = snapshot(&[], &[], &[], now);
    let err = |why: &str| fleetgate_store::StoreError::new(fleetgate_store::StoreErrorKind::Other, why);
    let (locked, no_table, no_leases) =
        (err("database is locked"), err("no such table"), err("no such table: pr_leases"));
    let (no_locks, no_approvals) = (err("no such table: review_locks"), err("no such table: approvals"));
    let look = Look {
        fleet_name: "t",
        store: "sqlite:/x",
        snapshot: &snap,
        workers: Err(&locked),
        audit: Err(&no_table),
        pr_leases: Err(&no_leases),
        prs: Err(&no_leases),
        review_locks: Err(&no_locks),
        approvals: Err(&no_approvals),
        policy: &[],
        notify: Ok(&[]),
        now,
    };
    let v = build(&look, &|_| true);
    assert_eq!(v.workers_error.as_deref(), Some("database is locked"));
    assert_eq!(v.refusals_error.as_deref(), Some("no such table"));
    assert_eq!(v.pr_leases_error.as_deref(), Some("no such table: pr_leases"));
    assert_eq!(v.approvals_error.as_deref(), Some("no such table: approvals"));
}

#[test]
fn policy_notes_say_what_each_is_about_and_the_plain_lines_keep_out_the_keywords() {
    use fleetgate_control::policy::{NoteKind, NoteLine};
    let now = t0();
    let snap = snapshot(&[], &[], &[], now);
    let note = |kind, text: &str| NoteLine { kind, text: text.into() };
    let notes = [
        note(NoteKind::Lifted, "invariant scheduled-merge is lifted"),
        note(NoteKind::Principal, "ci may hold both"),
        note(NoteKind::Keywords, "gitea-mcp reads as closing an issue: close"),
    ];
    let look = Look { policy: &notes, ..quiet(&snap, now) };
    let v = build(&look, &|_| true);
    assert_eq!(v.policy, ["invariant scheduled-merge is lifted", "ci may hold both"]);
    let json = serde_json::to_value(&v).unwrap();
    let kinds: Vec<&str> =
        json["policy_notes"].as_array().unwrap().iter().map(|n| n["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["lifted", "principal", "keywords"]);
}

#[test]
fn a_call_waiting_for_an_operator_shows_who_what_and_the_exact_arguments() {
    let now = t0();
    let snap = snapshot(&[], &[], &[], now);
    let arguments = serde_json::json!({ "branch": "asked", "owner": "o" }).as_object().cloned();
    let request = fleetgate_core::approval::ApprovalRequest {
        id: "apr-00000000000000aa".into(),
        requested_at: now,
        profile: "prgs-author".into(),
        role: "author".into(),
        worker: Some("wrk-a".into()),
        principal: None,
        tool: "create_branch".into(),
        digest: fleetgate_core::approval::call_digest(Some("wrk-a"), "create_branch", arguments.as_ref()),
        arguments,
        does: None,
        why: "rule fleet.toml:9 asks an operator about this exact call".into(),
        ..fleetgate_core::approval::ApprovalRequest::default()
    };
    let requests = [request];
    let look = Look { approvals: Ok(&requests), ..quiet(&snap, now) };
    let v = build(&look, &|_| true);
    let shown = &v.approvals[0];
    assert_eq!(
        (shown.id.as_str(), shown.tool.as_str(), shown.worker.as_deref()),
        ("apr-00000000000000aa", "create_branch", Some("wrk-a"))
    );
    assert_eq!(shown.arguments, r#"{"branch":"asked","owner":"o"}"#);
    assert!(shown.why.contains("fleet.toml:9"));
    assert!(shown.answered_where.contains("`fleetgate approvals approve apr-00000000000000aa`"), "any operator");
    let named = [fleetgate_core::approval::ApprovalRequest {
        approvers: vec!["oidc:alice".into(), "oidc:bob".into()],
        ..requests[0].clone()
    }];
    let named_view = build(&Look { approvals: Ok(&named), ..look.clone() }, &|_| true);
    let without = build(&Look { approvals: Ok(&[]), ..look.clone() }, &|_| true);
    assert_ne!(v.fingerprint(), without.fingerprint(), "a new request is a change the page shows");
    // Issue 55: a request for named people told their operator to run a command that is
    // always refused for them; the page says who answers and where.
    // What a notification target still owes is on the page (issue 55: a receiver down lost
    // events unseen).
    let owed = [fleetgate_control::notify::Owed {
        target: "ops".into(),
        events: 2,
        oldest: Some(fleetgate_control::notify::OwedEvent {
            id: 7,
            at: now,
            kind: "requested".into(),
            request: "apr-00000000000000aa".into(),
        }),
    }];
    let owing = build(&Look { notify: Ok(&owed), ..look.clone() }, &|_| true);
    assert_eq!(owing.notify_owed, [("ops".to_owned(), 2)]);
    assert!(
        owing.notify[0].contains("notify target ops owes 2 event(s), the oldest #7 (requested apr-"),
        "{:?}",
        owing.notify
    );
    let place = &named_view.approvals[0].answered_where;
    assert!(place.contains("oidc:alice, oidc:bob signed in to the dashboard") && place.contains("refused"), "{place}");
    assert!(!place.contains("`fleetgate approvals approve apr-"), "{place}");
}

#[test]
fn the_fingerprint_ignores_the_clock_but_not_the_fleet() {
    let at = |s| t0().plus_seconds(s);
    let workers = [worker("w", 10, at(0))];
    let a = view(&snapshot(&[row(4100)], &[], &[], at(40)), &workers, &[], at(40));
    let b = view(&snapshot(&[row(4100)], &[], &[], at(50)), &workers, &[], at(50));
    assert_ne!(a, b, "ages moved");
    assert_eq!(a.fingerprint(), b.fingerprint(), "nothing but the clock moved");
    let expired = view(&snapshot(&[row(4100)], &[], &[], at(901)), &workers, &[], at(901));
    assert_ne!(a.fingerprint(), expired.fingerprint(), "a lease crossing its TTL is a change");
    let killed = view(&snapshot(&[row(4100)], &[4100], &[], at(50)), &workers, &[], at(50));
    assert_ne!(a.fingerprint(), killed.fingerprint());
}

fn lease(pr: u64, purpose: Purpose, claimed: Timestamp, ttl: i64) -> PrLease {
    PrLease {
        lease_id: format!("lease-{pr}-{}", purpose.as_str()),
        terms: LeaseTerms {
            pr: PrRef { binding: "gitea/acme/widgets".into(), pr },
            purpose,
            holder: Actor {
                worker: "wrk-claude_code-1".into(),
                profile: "prgs-reviewer".into(),
                client: "claude_code".into(),
                session: "s".into(),
                principal: None,
            },
            candidate_head: "5f0c2e1d9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d".into(),
            target_branch: Some("main".into()),
            target_branch_sha: None,
        },
        phase: Phase::Claimed,
        claimed_at: claimed,
        last_activity: claimed,
        expires_at: claimed.plus_seconds(ttl),
        released_reason: None,
    }
}

#[test]
fn live_pr_leases_show_pr_purpose_holder_head_and_expiry() {
    let now = t0().plus_seconds(100);
    let leases = [lease(12, Purpose::Review, t0(), 900), lease(13, Purpose::Merge, t0().plus_seconds(50), 600)];
    let v = view_with_leases(&snapshot(&[row(4100)], &[], &[], now), &[], &[], &leases, now);
    let shape: Vec<_> = v.pr_leases.iter().map(|l| (l.pr.as_str(), l.purpose.as_str(), l.expires_in_seconds)).collect();
    assert_eq!(shape, [("gitea/acme/widgets#12", "review", 800), ("gitea/acme/widgets#13", "merge", 550)]);
    let first = &v.pr_leases[0];
    assert_eq!((first.holder.as_str(), first.holder_client.as_str()), ("wrk-claude_code-1", "claude_code"));
    assert!(first.head.starts_with("5f0c2e1d"));
    assert_eq!(first.expires_at, t0().plus_seconds(900));
    // The countdown alone is not a change; a lease released (gone from the live list) is.
    let later = view_with_leases(&snapshot(&[row(4100)], &[], &[], now), &[], &[], &leases, now.plus_seconds(5));
    assert_eq!(v.fingerprint(), later.fingerprint());
    let released = view_with_leases(&snapshot(&[row(4100)], &[], &[], now), &[], &[], &leases[1..], now);
    assert_ne!(v.fingerprint(), released.fingerprint());
}

#[test]
fn each_pr_with_a_live_lease_or_lock_shows_its_computed_state_and_the_locks_their_session() {
    use fleetgate_core::decision_lock::{LockPhase, ReviewLock};
    use fleetgate_core::workflow::{Actor, ForgeState, Independence, PrRef, PrState, ReviewVerdict, assess};
    let now = t0().plus_seconds(100);
    let pr = PrRef { binding: "gitea/acme/widgets".into(), pr: 12 };
    let state = PrState { leases: &[], decisions: &[], origin: None, pushes: &[] };
    let assessed =
        [assess(pr.clone(), &state, ("5f0c2e1d00", Some("main"), ForgeState::Open), Independence::Session, now)];
    let holder = Actor {
        worker: "w".into(),
        profile: "prgs-reviewer".into(),
        client: "codex".into(),
        session: "s9".into(),
        principal: None,
    };
    let locks = [ReviewLock {
        lock_id: "L1".into(),
        pr,
        holder,
        head: "5f0c2e1d00".into(),
        verdict: ReviewVerdict::RequestChanges,
        decided_at: now,
        decisions: 1,
        phase: LockPhase::Live,
        released_reason: None,
        released_at: None,
    }];
    let snap = snapshot(&[row(4100)], &[], &[], now);
    let look = Look { prs: Ok(&assessed), review_locks: Ok(&locks), ..quiet(&snap, now) };
    let v = build(&look, &|_| true);
    assert_eq!(v.prs.len(), 1);
    let p = &v.prs[0];
    assert_eq!(
        (p.pr.as_str(), p.status.state.as_str(), p.status.who_is_next.as_str()),
        ("gitea/acme/widgets#12", "ready_for_review", "reviewer")
    );
    assert_eq!(v.review_locks.len(), 1);
    assert_eq!((v.review_locks[0].session.as_str(), v.review_locks[0].verdict.as_str()), ("s9", "request_changes"));
    assert_eq!(v.review_locks[0].holder, "codex · prgs-reviewer");
}

/// Every string of a JSON value.
fn strings(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        serde_json::Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

/// Issue 43 (7): the page put bidi controls, zero-width and tag characters raw into the
/// document, where they reorder or hide what the operator approves. What the page receives
/// (`/api/fleet`, `/events`) has each made visible, in every string: the approval's tool,
/// worker, arguments and why, a refusal's reasons.
#[test]
fn the_page_receives_every_invisible_or_direction_changing_character_escaped() {
    const PAYLOADS: [char; 19] = [
        '\u{202a}',
        '\u{202b}',
        '\u{202c}',
        '\u{202d}',
        '\u{202e}',
        '\u{2066}',
        '\u{2067}',
        '\u{2068}',
        '\u{2069}',
        '\u{200e}',
        '\u{200f}',
        '\u{061c}',
        '\u{200b}',
        '\u{200c}',
        '\u{200d}',
        '\u{2060}',
        '\u{feff}',
        '\u{e0001}',
        '\u{e0041}',
    ];
    let now = t0();
    let snap = snapshot(&[], &[], &[], now);
    for c in PAYLOADS {
        let hostile = format!("ma{c}in");
        let arguments = serde_json::json!({ "branch": hostile, format!("k{c}ey"): 1 }).as_object().cloned();
        let request = fleetgate_core::approval::ApprovalRequest {
            id: "apr-00000000000000aa".into(),
            requested_at: now,
            profile: "prgs-author".into(),
            role: "author".into(),
            worker: Some(format!("wrk{c}-a")),
            principal: None,
            tool: format!("create{c}_branch"),
            digest: fleetgate_core::approval::call_digest(Some("wrk-a"), "create_branch", arguments.as_ref()),
            arguments,
            does: Some(format!("create branch ma{c}in in o/r")),
            approvers: vec![format!("oidc:al{c}ice")],
            why: format!("rule {c}asks"),
            ..fleetgate_core::approval::ApprovalRequest::default()
        };
        let refusal = AuditEntry {
            id: None,
            at: now,
            profile: "prgs-author".into(),
            worker_identity: None,
            tool: format!("git{c}_push"),
            allowed: false,
            blocker_kind: Some("protected_branch".into()),
            reasons: vec![format!("branch {hostile} is protected")],
            principal: None,
            call: None,
        };
        let (requests, audit) = ([request], [refusal]);
        let look = Look { audit: Ok(&audit), approvals: Ok(&requests), ..quiet(&snap, now) };
        let page: serde_json::Value = serde_json::from_str(&build(&look, &|_| true).page_json()).unwrap();
        let mut all = Vec::new();
        strings(&page, &mut all);
        let raw: Vec<&String> = all.iter().filter(|s| s.chars().any(fleetgate_core::text::needs_escape)).collect();
        assert!(raw.is_empty(), "U+{:04X} reaches the page raw in {raw:?}", c as u32);
        let escaped = c.escape_unicode().to_string();
        let approval = &page["approvals"][0];
        assert_eq!(approval["tool"], format!("create{escaped}_branch"));
        assert_eq!(approval["worker"], format!("wrk{escaped}-a"));
        assert_eq!(approval["why"], format!("rule {escaped}asks"));
        let arguments = approval["arguments"].as_str().unwrap();
        assert!(
            arguments.contains(&format!("ma{escaped}in")) && arguments.contains(&format!("k{escaped}ey")),
            "{arguments}"
        );
        assert_eq!(page["refusals"][0]["reasons"][0], format!("branch ma{escaped}in is protected"));
    }
    // Control characters too (JSON would carry them, the page would drop them), and JSON's
    // own escapes stay what they were.
    let v = FleetView { summary: "a\nb\u{1b}[2J\u{7f}\t\"q\" \\ /".into(), ..view(&snap, &[], &[], now) };
    let page: serde_json::Value = serde_json::from_str(&v.page_json()).unwrap();
    assert_eq!(page["summary"], r#"a\nb\u{1b}[2J\u{7f}\t"q" \ /"#);
    assert!(v.page_json().starts_with("{\"version\":"), "the fields keep their order");
}

#[test]
fn gateways_of_other_stores_are_shown_apart_from_the_fleet() {
    use fleetgate_core::inventory::{OtherFleetGateway, PendingGateway, UnprovenGateway};
    let now = t0().plus_seconds(40);
    let mut snap = snapshot(&[row(4100)], &[], &[], now);
    let before = view(&snap, &[], &[], now);
    assert!(before.other_gateways.is_empty());
    snap.inventory.other_fleet_gateways.push(OtherFleetGateway {
        pid: 5100,
        started_at: t0(),
        command: "fleetgate serve --profile prgs-author".into(),
        uid: None,
        store: "postgres://fleet@db:5432/other".into(),
        engine: "postgres".into(),
        fleet: "other".into(),
        runtime_id: "gitea-author:5100:b".into(),
        namespace: "gitea-author".into(),
        profile: "prgs-author".into(),
        transport: "http".into(),
        repository_root: "/srv/other/checkout".into(),
        remote: Some("origin".into()),
        org: Some("acme".into()),
        repo: Some("other".into()),
    });
    snap.inventory.pending_gateways.push(PendingGateway {
        pid: 5200,
        started_at: now,
        command: "fleetgate serve --profile prgs-reviewer".into(),
        uid: None,
        store: "/srv/third/registry.sqlite3".into(),
        age_seconds: 2,
        why: "it has not published its proof yet".into(),
        until: now.plus_seconds(10),
    });
    let v = view(&snap, &[], &[], now);
    let shown: Vec<(i64, &str)> = v.other_gateways.iter().map(|g| (g.pid, g.state)).collect();
    assert_eq!(shown, [(5100, "other_fleet"), (5200, "pending")]);
    let wire = serde_json::to_value(&v.other_gateways).unwrap();
    assert_eq!(wire[0]["repository_root"], "/srv/other/checkout");
    assert_eq!((wire[0]["engine"].as_str(), wire[0]["fleet"].as_str()), (Some("postgres"), Some("other")));
    assert_eq!(wire[0]["repository"], "origin/acme/other");
    assert!(wire[0].get("until").is_none(), "{wire}");
    assert_eq!(wire[1]["why"], "it has not published its proof yet");
    assert_eq!(wire[1]["age_seconds"], 2);
    assert_eq!(wire[1]["until"], now.plus_seconds(10).to_string());
    assert!(v.gate.open, "neither closes this fleet's gate");
    assert_ne!(v.fingerprint(), before.fingerprint(), "a new one is news to the page");
    // An unproven one is shown with why (it closes the gate, through the inventory's reasons).
    snap.inventory.unproven_gateways.push(UnprovenGateway {
        pid: 5300,
        started_at: t0(),
        command: "fleetgate serve --profile prgs-author".into(),
        uid: Some(1000),
        store: None,
        why: "it is bound to this fleet's checkout (/srv/ours, ours /srv/ours): two fleets on one repository".into(),
    });
    let v = view(&snap, &[], &[], now);
    let wire = serde_json::to_value(&v.other_gateways).unwrap();
    assert_eq!((wire[2]["pid"].as_i64(), wire[2]["state"].as_str()), (Some(5300), Some("unproven")));
    assert_eq!(wire[2]["store"], "unknown");
    assert!(wire[2]["why"].as_str().unwrap().contains("two fleets on one repository"), "{wire}");
}
