//! What the fleet page shows, as one value: [`FleetView`], the `/api/fleet` JSON.
//! Built by [`build`], a pure function of one look (the live snapshot, the worker
//! rows, the newest audit entries, the live PR leases, `now` and the workers' pid probes), so what the
//! page says can be tested without a store, a host or a browser.
//!
//! The view is a wire type of its own, apart from the core types it is built
//! from: renaming a core field never silently renames a page field.

use fleetgate_control::gate::Snapshot;
use fleetgate_control::metrics::FleetGauges;
use fleetgate_core::Timestamp;
use fleetgate_core::approval::ApprovalRequest;
use fleetgate_core::audit::AuditEntry;
use fleetgate_core::capability::{fleet_gate, refusal_action};
use fleetgate_core::decision_lock::ReviewLock;
use fleetgate_core::inventory::{FleetInventory, Health, Liveness, MemberRow, summarize};
use fleetgate_core::worker::{WorkerRecord, WorkerStatus, is_live};
use fleetgate_core::workflow::{Assessment, PrLease, PrStatus};
use fleetgate_store::StoreError;
use serde::Serialize;

/// Refusals shown, newest first.
pub const REFUSALS_SHOWN: usize = 20;
/// Audit entries read per look; refusals are found among these.
pub const AUDIT_WINDOW: usize = 500;

/// Everything the page renders (documented field by field in docs/dashboard.md).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FleetView {
    /// Bumped each time what the page shows changes (the SSE event id).
    pub version: u64,
    /// The instant of this look (the decision clock: the store's where it has one).
    pub generated_at: Timestamp,
    /// Fleet name and store.
    pub fleet: FleetInfo,
    /// The inventory's one-line summary.
    pub summary: String,
    /// The fleet-wide mutation gate.
    pub gate: GateView,
    /// Roster members and runtime rows, grouped by roster member.
    pub members: Vec<MemberView>,
    /// Observed fleet processes no running row claims.
    pub unregistered_processes: Vec<ProcessView>,
    /// Gateways of other stores on this host: another fleet's (proven by its own store, never
    /// a reason to close this gate), or one just started and not proven yet (it closes the
    /// gate once its grace ends unproven).
    pub other_gateways: Vec<OtherGatewayView>,
    /// Inventory facts beside the rows.
    pub facts: Facts,
    /// Runtime diagnostics; hard ones refuse every mutation.
    pub diagnostics: Vec<DiagnosticView>,
    /// Active worker rows, oldest registration first.
    pub workers: Vec<WorkerView>,
    /// Worker rows stopped by an orderly shutdown (history, not shown one by one).
    pub stopped_workers: usize,
    /// Why the worker rows could not be read, when they could not.
    pub workers_error: Option<String>,
    /// The newest gate refusals, newest first.
    pub refusals: Vec<RefusalView>,
    /// Why the audit log could not be read, when it could not.
    pub refusals_error: Option<String>,
    /// How many of the newest audit entries were searched for refusals.
    pub audit_window: usize,
    /// Live PR leases, by PR.
    pub pr_leases: Vec<PrLeaseView>,
    /// Why the PR leases could not be read, when they could not.
    pub pr_leases_error: Option<String>,
    /// The canonical state of each PR with a live lease or lock.
    pub prs: Vec<PrStateView>,
    /// Why the PRs' states could not be computed, when they could not.
    pub prs_error: Option<String>,
    /// The live review-decision locks.
    pub review_locks: Vec<LockView>,
    /// Why the locks could not be read, when they could not.
    pub review_locks_error: Option<String>,
    /// The calls waiting for an operator's approval (`fleetgate approvals`), oldest first.
    pub approvals: Vec<ApprovalView>,
    /// Why the approval requests could not be read, when they could not.
    pub approvals_error: Option<String>,
    /// What each `[[approvals.notify]]` target still owes (a receiver down: the notifier
    /// retries while the request is open), one line each; or why it cannot be read.
    pub notify: Vec<String>,
    /// The same, in numbers: each target and the events it owes.
    pub notify_owed: Vec<(String, usize)>,
    /// What the roster lets through that the operator must know: every lifted invariant
    /// (`[invariants] lift`), with what it gives up; the principals of two independent roles;
    /// the approvals fleetgate cannot tell people apart for.
    pub policy: Vec<String>,
    /// The same notes, each with what it is about (`lifted`, `principal`, `people`), and the
    /// words the roster's forge dialect reads as closing or reopening an issue (`keywords`).
    pub policy_notes: Vec<fleetgate_control::policy::NoteLine>,
    /// The shadow candidate's flips among the newest audit entries (`fleetgate serve
    /// --shadow`), grouped: what it would have decided otherwise.
    pub shadow: Vec<fleetgate_control::gate::ShadowGroup>,
}

/// A call waiting for an operator: who, which tool, the exact arguments, why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ApprovalView {
    /// The request (`apr-…`): `fleetgate approvals approve ID` answers it.
    pub id: String,
    /// When the gate asked.
    pub requested_at: Timestamp,
    /// The deciding server's profile and the caller's role.
    pub profile: String,
    /// The role.
    pub role: String,
    /// The worker the call was made for.
    pub worker: Option<String>,
    /// The tool.
    pub tool: String,
    /// What the call does, in words, from its judged effect (shown first), when known.
    pub does: Option<String>,
    /// The exact arguments, as JSON.
    pub arguments: String,
    /// Why the gate asks (the rule, or the refusal it would override).
    pub why: String,
    /// The HTTP principal whose call it is (who may not answer it), when one.
    pub principal: Option<String>,
    /// Who may answer it (empty: any operator).
    pub approvers: Vec<String>,
    /// How many distinct approvers must approve it.
    pub required: u32,
    /// The answers given so far: who, and when.
    pub answers: Vec<String>,
    /// How many more approvals it needs.
    pub needed: u32,
    /// Who may answer it and where (`fleetgate_core::approval::where_answered`): never a
    /// command that is refused for its approvers.
    pub answered_where: String,
}

/// A PR's canonical state (`fleetgate_core::workflow::PrStatus`), as of the head its live
/// leases and locks name (the page reads no forge).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PrStateView {
    /// `remote/org/repo#N`.
    pub pr: String,
    /// Its state, who is next, the next action, the head, the review status, merge
    /// readiness and blockers.
    #[serde(flatten)]
    pub status: PrStatus,
}

/// A live review-decision lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LockView {
    /// Its id.
    pub lock_id: String,
    /// `remote/org/repo#N`.
    pub pr: String,
    /// The reviewer session.
    pub session: String,
    /// Its client and profile.
    pub holder: String,
    /// `approve` or `request_changes`.
    pub verdict: String,
    /// The head decided at.
    pub head: String,
    /// When.
    pub decided_at: Timestamp,
}

/// A live PR lease.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PrLeaseView {
    /// Its id.
    pub lease_id: String,
    /// `remote/org/repo#N`.
    pub pr: String,
    /// `review` or `merge`.
    pub purpose: String,
    /// The holder's worker identity.
    pub holder: String,
    /// The holder's client.
    pub holder_client: String,
    /// The holder's profile.
    pub holder_profile: String,
    /// The head it was claimed at.
    pub head: String,
    /// When it was claimed.
    pub claimed_at: Timestamp,
    /// The holder's last gated call on the PR.
    pub last_activity: Timestamp,
    /// When it expires unless the holder acts on the PR again.
    pub expires_at: Timestamp,
    /// Seconds until then, as of `generated_at`.
    pub expires_in_seconds: i64,
}

/// Which fleet, which store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FleetInfo {
    /// The roster's name.
    pub name: String,
    /// Engine and location, passwords redacted.
    pub store: String,
}

/// The fleet-wide mutation gate: what refuses every permitted mutating call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GateView {
    /// True when open.
    pub open: bool,
    /// `runtime_reconnect_required` or `fleet_inventory_blocked`; null when open.
    pub blocker_kind: Option<String>,
    /// Every reason it is closed.
    pub blocked_reasons: Vec<String>,
    /// What the operator does to open it; null when open.
    pub operator_action: Option<String>,
}

/// One line of the roster: a runtime row, or a roster member without one.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemberView {
    /// Namespace.
    pub namespace: String,
    /// Profile.
    pub profile: String,
    /// Role (the roster's; the row's own for an unexpected member).
    pub role: String,
    /// In the roster.
    pub expected: bool,
    /// `running`, `missing`, `stale`, `unexpected` or `unknown`.
    pub health: Health,
    /// The row's corroborated liveness; null for a member without a row.
    pub liveness: Option<Liveness>,
    /// One of several running instances of its profile.
    pub duplicate: bool,
    /// The row's pid.
    pub pid: Option<i64>,
    /// The row's id.
    pub runtime_id: Option<String>,
    /// Cohort id; null when unknown or no row.
    pub cohort_id: Option<String>,
    /// Startup revision; null when unknown or no row.
    pub startup_head: Option<String>,
    /// When the row was written.
    pub registered_at: Option<Timestamp>,
    /// Last refresh of the row.
    pub last_heartbeat_at: Option<Timestamp>,
    /// Seconds since that refresh, as of `generated_at`.
    pub heartbeat_age_seconds: Option<i64>,
}

/// An observed process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProcessView {
    /// Pid.
    pub pid: i64,
    /// Start time.
    pub started_at: Timestamp,
    /// Command line.
    pub command: String,
}

/// A gateway no row of this fleet claims, as the inventory judged it: another fleet's,
/// pending, or unproven (issue 54).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OtherGatewayView {
    /// Pid.
    pub pid: i64,
    /// `other_fleet` (proven another fleet's), `pending` (just started, not proven yet) or
    /// `unproven` (not proven another fleet's: it closes the gate).
    pub state: &'static str,
    /// The store it or its proof names (`unknown` when neither could be read).
    pub store: String,
    /// Command line (secrets masked).
    pub command: String,
    /// Another fleet's: its fleet's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet: Option<String>,
    /// Another fleet's: its store's engine (`sqlite`, `postgres`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// Another fleet's: the profile it serves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Another fleet's: the checkout it is bound to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repository_root: Option<String>,
    /// Another fleet's: its forge repository (`remote/org/repo`), when it is bound to one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// Pending: how long it has run, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub age_seconds: Option<i64>,
    /// Pending: what it has not proven yet; unproven: why it is not another fleet's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Pending: when its grace ends (unproven from then on, it closes the gate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<Timestamp>,
}

/// The inventory's gateways no row of ours claims: other fleets' first, then the pending,
/// then the unproven.
fn other_gateways(inv: &FleetInventory) -> Vec<OtherGatewayView> {
    let none = |pid: i64, state: &'static str, store: String, command: String| OtherGatewayView {
        pid,
        state,
        store,
        command,
        fleet: None,
        engine: None,
        profile: None,
        repository_root: None,
        repository: None,
        age_seconds: None,
        why: None,
        until: None,
    };
    let fleets = inv.other_fleet_gateways.iter().map(|g| OtherGatewayView {
        fleet: Some(g.fleet.clone()),
        engine: Some(g.engine.clone()),
        profile: Some(g.profile.clone()),
        repository_root: Some(g.repository_root.clone()),
        repository: match (&g.remote, &g.org, &g.repo) {
            (Some(remote), Some(org), Some(repo)) => Some(format!("{remote}/{org}/{repo}")),
            _ => None,
        },
        ..none(g.pid, "other_fleet", g.store.clone(), g.command.clone())
    });
    let pending = inv.pending_gateways.iter().map(|g| OtherGatewayView {
        age_seconds: Some(g.age_seconds),
        why: Some(g.why.clone()),
        until: Some(g.until),
        ..none(g.pid, "pending", g.store.clone(), g.command.clone())
    });
    let unproven = inv.unproven_gateways.iter().map(|g| OtherGatewayView {
        why: Some(g.why.clone()),
        ..none(g.pid, "unproven", g.store.clone().unwrap_or_else(|| "unknown".into()), g.command.clone())
    });
    fleets.chain(pending).chain(unproven).collect()
}

/// Inventory facts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Facts {
    /// Roster members.
    pub configured_member_count: usize,
    /// Corroborated running rows of roster profiles.
    pub running_member_count: usize,
    /// No evidence was unknown.
    pub inventory_complete: bool,
    /// What was unknown.
    pub incomplete_reasons: Vec<String>,
    /// One cohort; null when a cohort is unknown.
    pub single_cohort: Option<bool>,
    /// Known cohorts of running rows.
    pub cohort_ids: Vec<String>,
    /// Running rows started at different revisions.
    pub mixed_revision: bool,
    /// Known startup revisions of running rows.
    pub startup_revisions: Vec<String>,
}

/// A diagnostic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DiagnosticView {
    /// Its text.
    pub text: String,
    /// A hard family (`unsupported-env:`, `stale-runtime:`): refuses mutations.
    pub hard: bool,
}

/// A worker and its lease.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkerView {
    /// Identity.
    pub worker_identity: String,
    /// Normalised client name.
    pub client_name: String,
    /// Session.
    pub session_id: String,
    /// Role.
    pub role: String,
    /// Profile.
    pub profile: String,
    /// Server pid.
    pub pid: Option<i64>,
    /// Fencing epoch.
    pub fencing_epoch: i64,
    /// Registration.
    pub started_at: Timestamp,
    /// Last accepted renewal.
    pub last_heartbeat_at: Timestamp,
    /// Lease length.
    pub heartbeat_ttl_seconds: f64,
    /// Seconds since the last renewal, as of `generated_at`.
    pub lease_age_seconds: i64,
    /// Renewed within the TTL.
    pub heartbeat_fresh: bool,
    /// Fresh, active, and its pid answers signal 0.
    pub live: bool,
}

/// A gate refusal from the audit log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RefusalView {
    /// Audit sequence number.
    pub id: Option<i64>,
    /// When.
    pub at: Timestamp,
    /// Deciding profile.
    pub profile: String,
    /// Tool refused.
    pub tool: String,
    /// Worker the call was made for.
    pub worker_identity: Option<String>,
    /// The blocker literal.
    pub blocker_kind: Option<String>,
    /// Every recorded reason.
    pub reasons: Vec<String>,
    /// The operator action, derived from the blocker and the reasons
    /// (`core::capability::refusal_action`); null for an unknown blocker.
    pub operator_action: Option<String>,
}

/// One look, as read by the shell.
#[derive(Clone, Debug)]
pub struct Look<'a> {
    /// Fleet name.
    pub fleet_name: &'a str,
    /// Store, described.
    pub store: &'a str,
    /// The live snapshot (`observe::snapshot`).
    pub snapshot: &'a Snapshot,
    /// Worker rows, or why they could not be read.
    pub workers: Result<&'a [WorkerRecord], &'a StoreError>,
    /// The newest audit entries (oldest first, as the store lists them), or why not.
    pub audit: Result<&'a [AuditEntry], &'a StoreError>,
    /// The live PR leases, or why not.
    pub pr_leases: Result<&'a [PrLease], &'a StoreError>,
    /// The assessments of the PRs with live leases or locks, or why not.
    pub prs: Result<&'a [Assessment], &'a StoreError>,
    /// The live review-decision locks, or why not.
    pub review_locks: Result<&'a [ReviewLock], &'a StoreError>,
    /// The pending approval requests, or why not.
    pub approvals: Result<&'a [ApprovalRequest], &'a StoreError>,
    /// What the roster lets through (`fleetgate_control::policy`), as labelled lines.
    pub policy: &'a [fleetgate_control::policy::NoteLine],
    /// What each `[[approvals.notify]]` target still owes, or why it cannot be read.
    pub notify: Result<&'a [fleetgate_control::notify::Owed], &'a StoreError>,
    /// The decision instant.
    pub now: Timestamp,
}

/// Build the view. `pid_alive` answers signal 0 for a worker's pid.
pub fn build(look: &Look<'_>, pid_alive: &dyn Fn(Option<i64>) -> bool) -> FleetView {
    let inv = &look.snapshot.inventory;
    let (workers, stopped_workers, workers_error) = match &look.workers {
        Ok(rows) => {
            let stopped = rows.iter().filter(|w| w.status == WorkerStatus::Stopped).count();
            let active = rows.iter().filter(|w| w.status != WorkerStatus::Stopped);
            (active.map(|w| worker_view(w, look.now, pid_alive(w.ids.pid))).collect(), stopped, None)
        }
        Err(e) => (Vec::new(), 0, Some(e.to_string())),
    };
    let (refusals, refusals_error) = match &look.audit {
        Ok(entries) => (refusals(inv, entries), None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    let (pr_leases, pr_leases_error) = match &look.pr_leases {
        Ok(leases) => (leases.iter().map(|l| lease_view(l, look.now)).collect(), None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    let (prs, prs_error) = match &look.prs {
        Ok(prs) => (prs.iter().map(pr_state_view).collect(), None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    let (review_locks, review_locks_error) = match &look.review_locks {
        Ok(locks) => (locks.iter().map(lock_view).collect(), None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    let (approvals, approvals_error) = match &look.approvals {
        Ok(requests) => (requests.iter().map(approval_view).collect(), None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    FleetView {
        version: 0,
        generated_at: look.now,
        fleet: FleetInfo { name: look.fleet_name.to_owned(), store: look.store.to_owned() },
        summary: summarize(inv),
        gate: gate(look.snapshot),
        members: members(inv),
        unregistered_processes: inv
            .unregistered_processes
            .iter()
            .map(|p| ProcessView { pid: p.pid, started_at: p.started_at, command: p.command.clone() })
            .collect(),
        other_gateways: other_gateways(inv),
        facts: facts(inv),
        diagnostics: look
            .snapshot
            .diagnostics
            .iter()
            .map(|d| DiagnosticView { text: d.to_string(), hard: d.is_hard() })
            .collect(),
        workers,
        stopped_workers,
        workers_error,
        refusals,
        refusals_error,
        audit_window: AUDIT_WINDOW,
        pr_leases,
        pr_leases_error,
        prs,
        prs_error,
        review_locks,
        review_locks_error,
        approvals,
        approvals_error,
        notify: match &look.notify {
            Ok(owed) => owed.iter().map(fleetgate_control::notify::Owed::line).collect(),
            Err(e) => vec![format!("what the notification targets owe cannot be read: {e}")],
        },
        notify_owed: look
            .notify
            .as_ref()
            .map_or_else(|_| Vec::new(), |owed| owed.iter().map(|o| (o.target.clone(), o.events)).collect()),
        policy: look.policy.iter().filter(|l| l.kind.asks_action()).map(|l| l.text.clone()).collect(),
        policy_notes: look.policy.to_vec(),
        shadow: match &look.audit {
            Ok(entries) => fleetgate_control::gate::shadow_report(entries.iter()).groups,
            Err(_) => Vec::new(),
        },
    }
}

fn approval_view(r: &ApprovalRequest) -> ApprovalView {
    ApprovalView {
        id: r.id.clone(),
        requested_at: r.requested_at,
        profile: r.profile.clone(),
        role: r.role.clone(),
        worker: r.worker.clone(),
        tool: r.tool.clone(),
        does: r.does.clone(),
        arguments: r
            .arguments
            .as_ref()
            .map_or_else(|| "{}".to_owned(), |a| serde_json::Value::from(a.clone()).to_string()),
        why: r.why.clone(),
        principal: r.principal.clone(),
        approvers: r.approvers.clone(),
        required: r.required,
        answers: r
            .answers
            .iter()
            .map(|a| {
                let who = a.name.as_ref().map_or_else(|| a.by.clone(), |n| format!("{n} ({})", a.by));
                format!("{} by {who} at {}", if a.approve { "approved" } else { "denied" }, a.at)
            })
            .collect(),
        needed: fleetgate_core::approval::approvals_needed(r),
        answered_where: fleetgate_core::approval::where_answered(&r.id, &r.approvers),
    }
}

fn pr_state_view(a: &Assessment) -> PrStateView {
    PrStateView { pr: a.pr.to_string(), status: a.status.clone() }
}

fn lock_view(l: &ReviewLock) -> LockView {
    LockView {
        lock_id: l.lock_id.clone(),
        pr: l.pr.to_string(),
        session: l.holder.session.clone(),
        holder: format!("{} · {}", l.holder.client, l.holder.profile),
        verdict: l.verdict.as_str().to_owned(),
        head: l.head.clone(),
        decided_at: l.decided_at,
    }
}

fn lease_view(l: &PrLease, now: Timestamp) -> PrLeaseView {
    PrLeaseView {
        lease_id: l.lease_id.clone(),
        pr: l.terms.pr.to_string(),
        purpose: l.terms.purpose.as_str().to_owned(),
        holder: l.terms.holder.worker.clone(),
        holder_client: l.terms.holder.client.clone(),
        holder_profile: l.terms.holder.profile.clone(),
        head: l.terms.candidate_head.clone(),
        claimed_at: l.claimed_at,
        last_activity: l.last_activity,
        expires_at: l.expires_at,
        expires_in_seconds: l.expires_at.seconds_since(now),
    }
}

fn gate(snapshot: &Snapshot) -> GateView {
    match fleet_gate(&snapshot.diagnostics, &snapshot.inventory) {
        None => GateView { open: true, blocker_kind: None, blocked_reasons: Vec::new(), operator_action: None },
        Some(b) => GateView {
            open: false,
            blocker_kind: Some(b.blocker_kind.as_str().to_owned()),
            blocked_reasons: b.blocked_reasons,
            operator_action: Some(b.operator_action),
        },
    }
}

fn facts(inv: &FleetInventory) -> Facts {
    Facts {
        configured_member_count: inv.configured_members.len(),
        running_member_count: inv.running_member_count,
        inventory_complete: inv.inventory_complete,
        incomplete_reasons: inv.incomplete_reasons.clone(),
        single_cohort: inv.single_cohort,
        cohort_ids: inv.cohort_ids.clone(),
        mixed_revision: inv.mixed_revision,
        startup_revisions: inv.startup_revisions.clone(),
    }
}

/// Each roster member with its running rows (or one line saying it has none), its
/// stale rows right under it; then unexpected rows, then stale rows of profiles
/// outside the roster.
fn members(inv: &FleetInventory) -> Vec<MemberView> {
    let duplicated = |profile: &str| inv.duplicate_members.iter().any(|d| d.profile == profile);
    let mut out = Vec::new();
    for m in &inv.configured_members {
        let running: Vec<&MemberRow> = inv.running_members.iter().filter(|r| r.profile == m.profile).collect();
        if running.is_empty() {
            out.push(MemberView {
                namespace: m.namespace.clone(),
                profile: m.profile.clone(),
                role: m.role.clone(),
                expected: true,
                health: m.health,
                liveness: None,
                duplicate: false,
                pid: None,
                runtime_id: None,
                cohort_id: None,
                startup_head: None,
                registered_at: None,
                last_heartbeat_at: None,
                heartbeat_age_seconds: None,
            });
        }
        for r in running {
            out.push(row_view(r, &m.role, true, duplicated(&m.profile), inv.assessed_at));
        }
        for r in inv.stale_members.iter().filter(|r| r.profile == m.profile) {
            out.push(row_view(r, &m.role, true, false, inv.assessed_at));
        }
    }
    let in_roster = |profile: &str| inv.configured_members.iter().any(|m| m.profile == profile);
    for r in &inv.unexpected_members {
        out.push(row_view(r, &r.role, false, false, inv.assessed_at));
    }
    for r in inv.stale_members.iter().filter(|r| !in_roster(&r.profile)) {
        out.push(row_view(r, &r.role, false, false, inv.assessed_at));
    }
    out
}

fn row_view(r: &MemberRow, role: &str, expected: bool, duplicate: bool, assessed_at: Timestamp) -> MemberView {
    MemberView {
        namespace: r.namespace.clone(),
        profile: r.profile.clone(),
        role: role.to_owned(),
        expected,
        health: r.health,
        liveness: Some(r.liveness),
        duplicate,
        pid: Some(r.pid),
        runtime_id: Some(r.runtime_id.clone()),
        cohort_id: r.cohort_id.clone(),
        startup_head: r.startup_head.clone(),
        registered_at: Some(r.registered_at),
        // The classifier reports the age as of its own instant; the refresh time is
        // what stays put between looks.
        last_heartbeat_at: r.heartbeat_age_seconds.map(|age| assessed_at.plus_seconds(-age)),
        heartbeat_age_seconds: r.heartbeat_age_seconds,
    }
}

fn worker_view(w: &WorkerRecord, now: Timestamp, pid_alive: bool) -> WorkerView {
    let liveness = is_live(w, now, pid_alive);
    WorkerView {
        worker_identity: w.ids.worker_identity.clone(),
        client_name: w.ids.client_name.clone(),
        session_id: w.ids.session_id.clone(),
        role: w.ids.role.clone(),
        profile: w.ids.profile.clone(),
        pid: w.ids.pid,
        fencing_epoch: w.fencing_epoch,
        started_at: w.started_at,
        last_heartbeat_at: w.last_heartbeat_at,
        heartbeat_ttl_seconds: w.heartbeat_ttl_seconds,
        lease_age_seconds: now.seconds_since(w.last_heartbeat_at),
        heartbeat_fresh: liveness.heartbeat_fresh,
        live: liveness.live,
    }
}

fn refusals(inv: &FleetInventory, entries: &[AuditEntry]) -> Vec<RefusalView> {
    let role_of = |profile: &str| inv.configured_members.iter().find(|m| m.profile == profile).map(|m| m.role.as_str());
    entries
        .iter()
        .rev()
        .filter(|e| !e.allowed)
        .take(REFUSALS_SHOWN)
        .map(|e| RefusalView {
            id: e.id,
            at: e.at,
            profile: e.profile.clone(),
            tool: e.tool.clone(),
            worker_identity: e.worker_identity.clone(),
            blocker_kind: e.blocker_kind.clone(),
            reasons: e.reasons.clone(),
            operator_action: e
                .blocker_kind
                .as_deref()
                .and_then(|k| refusal_action(k, &e.tool, role_of(&e.profile), &e.reasons)),
        })
        .collect()
}

impl FleetView {
    /// What decides whether the page changed: the view without the fields that move
    /// with the clock alone (`version`, `generated_at`, the ages — the page ticks
    /// those itself from `last_heartbeat_at`). A lease crossing its TTL still
    /// changes `live`, so it is pushed.
    pub fn fingerprint(&self) -> String {
        let mut still = self.clone();
        still.version = 0;
        still.generated_at = Timestamp::from_unix(0);
        for m in &mut still.members {
            m.heartbeat_age_seconds = None;
        }
        for w in &mut still.workers {
            w.lease_age_seconds = 0;
        }
        for l in &mut still.pr_leases {
            l.expires_in_seconds = 0;
        }
        serde_json::to_string(&still).unwrap_or_default()
    }

    /// The view as the page receives it (`/api/fleet`, the `/events` data): every string with
    /// its control, invisible and direction-changing characters written as `\u{…}` (as the
    /// terminal shows them: [`fleetgate_core::text::needs_escape`]), so a bidi override
    /// cannot reorder a call's arguments on the page nor a zero-width or tag character hide
    /// in them. Done as the JSON is written, so no field — today's or one added later — is
    /// left out.
    pub fn page_json(&self) -> String {
        let mut out = Vec::new();
        let mut json = serde_json::Serializer::with_formatter(&mut out, PageFormatter);
        match self.serialize(&mut json) {
            Ok(()) => String::from_utf8(out).unwrap_or_default(),
            Err(e) => serde_json::json!({ "error": e.to_string() }).to_string(),
        }
    }

    /// The fleet as numbers, for `/metrics`.
    pub fn gauges(&self) -> FleetGauges {
        const HEALTHS: [(Health, &str); 5] = [
            (Health::Running, "running"),
            (Health::Missing, "missing"),
            (Health::Stale, "stale"),
            (Health::Unexpected, "unexpected"),
            (Health::Unknown, "unknown"),
        ];
        let live = self.workers.iter().filter(|w| w.live).count();
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        FleetGauges {
            configured_members: count(self.facts.configured_member_count),
            members_by_health: HEALTHS
                .iter()
                .map(|(h, name)| (*name, count(self.members.iter().filter(|m| m.health == *h).count())))
                .collect(),
            workers_by_state: vec![
                ("live", count(live)),
                ("expired", count(self.workers.len() - live)),
                ("stopped", count(self.stopped_workers)),
            ],
            gate_open: self.gate.open,
            unregistered_processes: count(self.unregistered_processes.len()),
            duplicate_profiles: count({
                let mut profiles: Vec<&str> =
                    self.members.iter().filter(|m| m.duplicate).map(|m| m.profile.as_str()).collect();
                profiles.dedup();
                profiles.len()
            }),
            hard_diagnostics: count(self.diagnostics.iter().filter(|d| d.hard).count()),
            recent_refusals: count(self.refusals.len()),
        }
    }
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;

/// serde_json's compact form, with every string character that
/// [`fleetgate_core::text::needs_escape`] names written as the text of its escape: `U+202E`
/// becomes the six characters `\u{202e}` (in JSON, `\\u{202e}`), a newline `\n`.
struct PageFormatter;

impl PageFormatter {
    /// The text `\…` of `c`'s escape, as JSON string content.
    fn escaped<W: ?Sized + std::io::Write>(writer: &mut W, c: char) -> std::io::Result<()> {
        let escape: String = c.escape_default().collect();
        writer.write_all(b"\\\\")?;
        writer.write_all(&escape.as_bytes()[1..])
    }
}

impl serde_json::ser::Formatter for PageFormatter {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut rest = fragment;
        while let Some((i, c)) = rest.char_indices().find(|(_, c)| fleetgate_core::text::needs_escape(*c)) {
            writer.write_all(&rest.as_bytes()[..i])?;
            Self::escaped(writer, c)?;
            rest = &rest[i + c.len_utf8()..];
        }
        writer.write_all(rest.as_bytes())
    }

    fn write_char_escape<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        escape: serde_json::ser::CharEscape,
    ) -> std::io::Result<()> {
        use serde_json::ser::CharEscape as E;
        let c = match escape {
            E::Quote => return writer.write_all(b"\\\""),
            E::ReverseSolidus => return writer.write_all(b"\\\\"),
            E::Solidus => return writer.write_all(b"\\/"),
            E::Backspace => '\u{8}',
            E::FormFeed => '\u{c}',
            E::LineFeed => '\n',
            E::CarriageReturn => '\r',
            E::Tab => '\t',
            E::AsciiControl(byte) => char::from(byte),
        };
        Self::escaped(writer, c)
    }
}
