//! The fleet inventory classifier: a pure function of runtime rows,
//! a process observation, the roster, `now` and the pid probes' results, in stages.
//!
//! A member is **running** only when its row is corroborated: the pid is
//! alive, the pid is in the observation, and the observed process started no
//! later than the row was registered (else the pid was recycled). Missing,
//! duplicate, unexpected, stale and unregistered are separate categories;
//! anything unknown fails closed. **The classifier mutates nothing** and takes
//! no evidence from a caller beyond the snapshot.

use crate::runtime::{Binding, ObservedProcess, ProcessScan, RosterMember, RuntimeRecord, RuntimeStatus};
use crate::time::Timestamp;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// What signal 0 said about a pid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PidProbe {
    /// The process exists (including when it may not be signalled).
    Alive,
    /// No such process.
    Dead,
    /// Pid absent, not positive, or the probe failed otherwise.
    Unknown,
}

impl PidProbe {
    /// Alive, and nothing less, counts as alive.
    pub fn is_alive(self) -> bool {
        self == Self::Alive
    }
}

/// A row's liveness after corroboration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Liveness {
    /// Alive, observed, and started no later than its registration.
    Alive,
    /// The pid is gone.
    Dead,
    /// The pid is alive but the observation does not show it as a fleet process.
    Unobserved,
    /// The process holding the pid started after the row was registered.
    PidRecycled,
    /// Could not be determined.
    Unknown,
}

/// A member's or row's health.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    /// Corroborated and expected.
    Running,
    /// Expected, no running instance.
    Missing,
    /// A row whose process is not (or no longer) what it claims.
    Stale,
    /// Corroborated but not in the roster.
    Unexpected,
    /// Could not be determined: fails closed.
    Unknown,
}

/// Everything the classifier is given.
#[derive(Clone, Copy, Debug)]
pub struct InventoryInput<'a> {
    /// The expected fleet.
    pub roster: &'a [RosterMember],
    /// Every runtime row read from the store (stopped rows are history).
    pub runtime_rows: &'a [RuntimeRecord],
    /// The answering process's own observation.
    pub process_scan: &'a ProcessScan,
    /// The repository binding every row must carry, if configured.
    pub expected_binding: Option<&'a Binding>,
    /// The decision instant.
    pub now: Timestamp,
    /// The store could be read.
    pub registry_available: bool,
    /// Why not.
    pub registry_error: Option<&'a str>,
    /// Who is answering; changes no other field.
    pub answering_namespace: Option<&'a str>,
    /// Where the rows run, when the fleet spans hosts.
    pub hosts: HostView<'a>,
    /// What unclaimed gateways' stores say: another fleet's, proven, or not.
    pub peers: PeerView<'a>,
}

/// What the answering process knows about other hosts. A row whose recorded
/// host is another one is corroborated only by that host's own fresh
/// observation, never by the row's claim; without one its liveness is unknown.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostView<'a> {
    /// This host's id; rows with no recorded host are taken to be local.
    pub local_host: Option<&'a str>,
    /// `runtime_id` → host id, for rows that recorded one.
    pub row_hosts: Option<&'a BTreeMap<String, String>>,
    /// host id → its latest published observation.
    pub observations: Option<&'a BTreeMap<String, RemoteObservation>>,
    /// How old an observation may be and still corroborate.
    pub observation_ttl_seconds: f64,
}

/// One host's latest published scan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteObservation {
    /// When it was made.
    pub observed_at: Timestamp,
    /// What it saw.
    pub scan: ProcessScan,
}

impl HostView<'_> {
    /// The other host a row runs on, if it is not this one.
    fn remote_host_of(&self, row: &RuntimeRecord) -> Option<&str> {
        let host = self.row_hosts?.get(&row.runtime_id)?.as_str();
        (Some(host) != self.local_host).then_some(host)
    }

    /// Does `row` run on this host (its recorded host is this one, or it recorded none)?
    pub fn is_local(&self, row: &RuntimeRecord) -> bool {
        self.remote_host_of(row).is_none()
    }
}

/// The running rows whose process this host's `scan` shows: rows of this host whose pid
/// is observed here. A row of another host is never matched to a local process, whatever
/// its pid: a pid names a process on one host only (and in one PID namespace). What this
/// host may judge of a row's process — its checkout's revision — it judges of these alone.
pub fn served_here<'a>(rows: &'a [RuntimeRecord], scan: &ProcessScan, hosts: &HostView<'_>) -> Vec<&'a RuntimeRecord> {
    let observed: BTreeSet<i64> = scan.processes.iter().map(|p| p.pid).collect();
    rows.iter()
        .filter(|r| r.status == RuntimeStatus::Running && hosts.is_local(r) && observed.contains(&r.pid))
        .collect()
}

pub use other_fleet::{
    GatewayProof, HeldProof, NamedStore, OtherFleetGateway, OurRepository, PROOF_MAX_BYTES, PROOF_VERSION,
    PeerEvidence, PeerFacts, PeerVerdict, PeerView, PendingGateway, REGISTRATION_GRACE_SECONDS, StoreUntold,
    UnprovenGateway, WhyUnproven, evidence_store, judge_peer, our_repository,
};
pub use report::{
    BindingMismatch, ConfiguredMember, DuplicateMember, FleetInventory, Instance, MemberRow, RoleMismatch,
};

mod other_fleet;
mod report;

fn liveness_of(
    row: &RuntimeRecord,
    scan: &ProcessScan,
    observed: &BTreeMap<i64, &ObservedProcess>,
    probe: PidProbe,
) -> Liveness {
    if !scan.available {
        return Liveness::Unknown;
    }
    match probe {
        PidProbe::Dead => Liveness::Dead,
        PidProbe::Unknown => Liveness::Unknown,
        PidProbe::Alive => by_observation(row, observed.get(&row.pid).copied()),
    }
}

fn by_observation(row: &RuntimeRecord, seen: Option<&ObservedProcess>) -> Liveness {
    match seen {
        None => Liveness::Unobserved,
        Some(p) if p.started_at > row.registered_at => Liveness::PidRecycled,
        Some(_) => Liveness::Alive,
    }
}

/// A row on another host: its host's fresh observation, or unknown (and why).
fn remote_liveness(row: &RuntimeRecord, host: &str, view: &HostView<'_>, now: Timestamp) -> (Liveness, Option<String>) {
    let Some(obs) = view.observations.and_then(|o| o.get(host)) else {
        return (Liveness::Unknown, Some(format!("host {host} has published no observation")));
    };
    let age = now.seconds_since(obs.observed_at) as f64;
    if age > view.observation_ttl_seconds {
        return (Liveness::Unknown, Some(format!("host {host}'s last observation is {age:.0}s old")));
    }
    if !obs.scan.available {
        let why = obs.scan.reason.as_deref().unwrap_or("no reason was given");
        return (Liveness::Unknown, Some(format!("host {host} could not list its processes: {why}")));
    }
    (by_observation(row, obs.scan.processes.iter().find(|p| p.pid == row.pid)), None)
}

fn who(row: &MemberRow) -> String {
    format!("{} ({}) pid {}", row.profile, row.namespace, row.pid)
}

/// Classify one snapshot, probing each running row's pid with `probe` (signal 0 in
/// production) first: [`classify_with_probes`] with the results.
pub fn classify_fleet_inventory(input: &InventoryInput<'_>, probe: &dyn Fn(i64) -> PidProbe) -> FleetInventory {
    let probes: BTreeMap<i64, PidProbe> = input
        .runtime_rows
        .iter()
        .filter(|r| r.status == RuntimeStatus::Running)
        .map(|r| (r.pid, probe(r.pid)))
        .collect();
    classify_with_probes(input, &probes)
}

/// A corroborated row, and the row it came from.
type Live<'a> = (MemberRow, &'a RuntimeRecord);

/// Stage 1: each running row corroborated (liveness, health), sorted into running,
/// unexpected and stale; what could not be known goes to `incomplete`.
struct Corroborated<'a> {
    rows: Vec<&'a RuntimeRecord>,
    running: Vec<Live<'a>>,
    unexpected: Vec<Live<'a>>,
    stale: Vec<MemberRow>,
    incomplete: Vec<String>,
}

fn corroborate<'a>(input: &InventoryInput<'a>, probes: &BTreeMap<i64, PidProbe>) -> Corroborated<'a> {
    let observed: BTreeMap<i64, &ObservedProcess> = input.process_scan.processes.iter().map(|p| (p.pid, p)).collect();
    let expected: BTreeSet<&str> = input.roster.iter().map(|m| m.profile.as_str()).collect();
    let mut rows: Vec<&RuntimeRecord> =
        input.runtime_rows.iter().filter(|r| r.status == RuntimeStatus::Running).collect();
    rows.sort_by(|a, b| {
        (&a.namespace, &a.profile, a.pid, &a.runtime_id).cmp(&(&b.namespace, &b.profile, b.pid, &b.runtime_id))
    });
    let mut out = Corroborated {
        rows: Vec::new(),
        running: Vec::new(),
        unexpected: Vec::new(),
        stale: Vec::new(),
        incomplete: Vec::new(),
    };
    if !input.registry_available {
        out.incomplete.push(format!("registry unreadable: {}", input.registry_error.unwrap_or("no error was given")));
    }
    if !input.process_scan.available {
        out.incomplete.push(format!(
            "process listing unavailable: {}",
            input.process_scan.reason.as_deref().unwrap_or("no reason was given")
        ));
    }
    for row in &rows {
        let probe = probes.get(&row.pid).copied().unwrap_or(PidProbe::Unknown);
        let (liveness, remote_unknown) = match input.hosts.remote_host_of(row) {
            Some(host) => remote_liveness(row, host, &input.hosts, input.now),
            None => (liveness_of(row, input.process_scan, &observed, probe), None),
        };
        let health = match liveness {
            Liveness::Alive if expected.contains(row.profile.as_str()) => Health::Running,
            Liveness::Alive => Health::Unexpected,
            Liveness::Unknown => Health::Unknown,
            _ => Health::Stale,
        };
        let member = MemberRow {
            runtime_id: row.runtime_id.clone(),
            namespace: row.namespace.clone(),
            profile: row.profile.clone(),
            role: row.role.clone(),
            pid: row.pid,
            cohort_id: row.cohort_id.clone(),
            startup_head: row.startup_head.clone(),
            registered_at: row.registered_at,
            heartbeat_age_seconds: row.last_heartbeat_at.map(|t| input.now.seconds_since(t)),
            liveness,
            health,
        };
        if let Some(why) = remote_unknown {
            out.incomplete.push(format!("pid liveness unknown for {}: {why}", who(&member)));
        } else if liveness == Liveness::Unknown && input.process_scan.available {
            out.incomplete.push(format!("pid liveness unknown for {}", who(&member)));
        }
        match health {
            Health::Running => out.running.push((member, *row)),
            Health::Unexpected => out.unexpected.push((member, *row)),
            _ => out.stale.push(member),
        }
    }
    out.stale.sort_by(|a, b| (&a.namespace, &a.profile, a.pid).cmp(&(&b.namespace, &b.profile, b.pid)));
    out.rows = rows;
    out
}

/// Stage 2: the roster against the running rows — each member's instances, the missing
/// ones, the duplicated profiles.
fn count_members(
    input: &InventoryInput<'_>,
    c: &Corroborated<'_>,
) -> (Vec<ConfiguredMember>, Vec<ConfiguredMember>, Vec<DuplicateMember>) {
    let mut by_profile: BTreeMap<&str, Vec<&Live<'_>>> = BTreeMap::new();
    for entry in &c.running {
        by_profile.entry(entry.0.profile.as_str()).or_default().push(entry);
    }
    let unknown_profiles: BTreeSet<&str> =
        c.stale.iter().filter(|m| m.health == Health::Unknown).map(|m| m.profile.as_str()).collect();
    let mut roster: Vec<&RosterMember> = input.roster.iter().collect();
    roster.sort();
    let configured: Vec<ConfiguredMember> = roster
        .iter()
        .map(|m| {
            let instances = by_profile.get(m.profile.as_str()).map_or(&[][..], Vec::as_slice);
            let mut pids: Vec<i64> = instances.iter().map(|e| e.0.pid).collect();
            pids.sort_unstable();
            let health = if !instances.is_empty() {
                Health::Running
            } else if unknown_profiles.contains(m.profile.as_str())
                || !input.registry_available
                || !input.process_scan.available
            {
                Health::Unknown
            } else {
                Health::Missing
            };
            ConfiguredMember {
                namespace: m.namespace.clone(),
                profile: m.profile.clone(),
                role: m.role.clone(),
                instance_count: instances.len(),
                health,
                pids,
            }
        })
        .collect();
    let missing: Vec<ConfiguredMember> = configured.iter().filter(|c| c.health == Health::Missing).cloned().collect();
    // A member runs as many instances as it declares replicas (one unless it says); one more
    // is a duplicate. A profile outside the roster may run once.
    let replicas = |profile: &str| input.roster.iter().find(|m| m.profile == profile).map_or(1, |m| m.replicas.max(1));
    let allowed = |profile: &str| usize::try_from(replicas(profile)).unwrap_or(1);
    let duplicates: Vec<DuplicateMember> = by_profile
        .iter()
        .filter(|(profile, v)| v.len() > allowed(profile))
        .map(|(profile, v)| {
            let mut instances: Vec<Instance> = v
                .iter()
                .map(|e| Instance {
                    pid: e.0.pid,
                    namespace: e.0.namespace.clone(),
                    cohort_id: e.0.cohort_id.clone(),
                    registered_at: e.0.registered_at,
                })
                .collect();
            instances.sort_by_key(|a| (a.registered_at, a.pid));
            let mut pids: Vec<i64> = instances.iter().map(|i| i.pid).collect();
            pids.sort_unstable();
            DuplicateMember {
                profile: (*profile).to_owned(),
                instance_count: v.len(),
                replicas: replicas(profile),
                pids,
                instances,
            }
        })
        .collect();
    (configured, missing, duplicates)
}

/// Stage 3: one cohort, one revision? Unknown ones go to `incomplete`.
struct Coherence {
    cohort_ids: BTreeSet<String>,
    single_cohort: Option<bool>,
    mixed_cohort: Option<bool>,
    revisions: BTreeSet<String>,
}

fn coherence(live: &[&Live<'_>], incomplete: &mut Vec<String>) -> Coherence {
    let mut cohort_ids = BTreeSet::new();
    let mut cohort_unknown = false;
    let mut revisions = BTreeSet::new();
    for (m, _) in live {
        match &m.cohort_id {
            Some(c) => {
                cohort_ids.insert(c.clone());
            }
            None => {
                cohort_unknown = true;
                incomplete.push(format!("cohort unknown for {}", who(m)));
            }
        }
        match &m.startup_head {
            Some(h) => {
                revisions.insert(h.clone());
            }
            None => incomplete.push(format!("startup revision unknown for {}", who(m))),
        }
    }
    let (single_cohort, mixed_cohort) = if cohort_unknown || live.is_empty() {
        (None, None)
    } else {
        (Some(cohort_ids.len() == 1), Some(cohort_ids.len() > 1))
    };
    Coherence { cohort_ids, single_cohort, mixed_cohort, revisions }
}

/// Stage 4a: rows not bound to the expected repository.
fn binding_mismatches(expected: Option<&Binding>, live: &[&Live<'_>]) -> Vec<BindingMismatch> {
    let Some(b) = expected else { return Vec::new() };
    let mut out = Vec::new();
    for (m, row) in live {
        let fields = [("remote", &row.remote, &b.remote), ("org", &row.org, &b.org), ("repo", &row.repo, &b.repo)];
        let absent: Vec<&str> = fields.iter().filter(|(_, got, _)| got.is_none()).map(|(n, _, _)| *n).collect();
        let wrong: Vec<String> = fields
            .iter()
            .filter_map(|(n, got, want)| match got {
                Some(g) if g != *want => Some(format!("{n} {g:?}, expected {want:?}")),
                _ => None,
            })
            .collect();
        let reason = if !absent.is_empty() {
            format!("binding incomplete: {} not recorded", absent.join(", "))
        } else if !wrong.is_empty() {
            format!("bound to another repository: {}", wrong.join(", "))
        } else {
            continue;
        };
        out.push(BindingMismatch {
            runtime_id: m.runtime_id.clone(),
            profile: m.profile.clone(),
            pid: m.pid,
            remote: row.remote.clone(),
            org: row.org.clone(),
            repo: row.repo.clone(),
            reason,
        });
    }
    out
}

/// Stage 4b: running rows whose role or namespace disagrees with their roster entry.
fn role_mismatches(roster: &[RosterMember], running: &[Live<'_>]) -> Vec<RoleMismatch> {
    let expected: BTreeMap<&str, &RosterMember> = roster.iter().map(|m| (m.profile.as_str(), m)).collect();
    let mut out = Vec::new();
    for (m, _) in running {
        let Some(e) = expected.get(m.profile.as_str()) else { continue };
        let mut wrong = Vec::new();
        if e.role != m.role {
            wrong.push(format!("declares role {:?}, the roster says {:?}", m.role, e.role));
        }
        if e.namespace != m.namespace {
            wrong.push(format!("serves namespace {:?}, the roster says {:?}", m.namespace, e.namespace));
        }
        if !wrong.is_empty() {
            out.push(RoleMismatch {
                runtime_id: m.runtime_id.clone(),
                profile: m.profile.clone(),
                pid: m.pid,
                expected_role: e.role.clone(),
                declared_role: m.role.clone(),
                expected_namespace: e.namespace.clone(),
                declared_namespace: m.namespace.clone(),
                reason: wrong.join("; "),
            });
        }
    }
    out
}

/// Stage 5: this host's fleet processes no row of this host claims. This host's scan is
/// checked against this host's rows only: a pid on another host says nothing about a
/// local process with the same number. A gateway that proves it is another fleet's, bound
/// to another repository ([`judge_peer`]), is set aside, and so is one of another store
/// still within its grace (pending); every other one is unregistered and fails closed, with
/// why it is not proven another fleet's when it was looked at.
fn unregistered(input: &InventoryInput<'_>, rows: &[&RuntimeRecord], incomplete: &mut Vec<String>) -> Unclaimed {
    let claimed: BTreeSet<i64> = rows.iter().filter(|r| input.hosts.is_local(r)).map(|r| r.pid).collect();
    let mut out = Unclaimed::default();
    for p in input.process_scan.processes.iter().filter(|p| !claimed.contains(&p.pid)) {
        let looked_at = input.peers.evidence.and_then(|e| e.get(&p.pid));
        let why = match judge_peer(p, &input.peers, input.now) {
            PeerVerdict::OtherFleet(g) => {
                out.other_fleets.push(*g);
                continue;
            }
            PeerVerdict::Pending(g) => {
                out.pending.push(*g);
                continue;
            }
            PeerVerdict::NotProven(why) => looked_at.map(|evidence| {
                out.unproven.push(UnprovenGateway {
                    pid: p.pid,
                    started_at: p.started_at,
                    command: p.command.clone(),
                    uid: p.uid,
                    store: evidence_store(evidence),
                    why: why.clone(),
                });
                format!("; not another fleet's: {why}")
            }),
        };
        let owner = p.uid.map_or_else(|| "owner unknown".to_owned(), |uid| format!("uid {uid}"));
        incomplete.push(format!(
            "unregistered fleet process pid {} ({owner}, started {}): {}{}",
            p.pid,
            p.started_at,
            p.command,
            why.unwrap_or_default()
        ));
        out.unregistered.push(p.clone());
    }
    out
}

/// The processes no row of this host claims, as stage 5 sorts them.
#[derive(Default)]
struct Unclaimed {
    unregistered: Vec<ObservedProcess>,
    other_fleets: Vec<OtherFleetGateway>,
    pending: Vec<PendingGateway>,
    unproven: Vec<UnprovenGateway>,
}

/// Stage 6: why the gate is closed, every category named apart.
fn blocking_reasons(
    duplicates: &[DuplicateMember],
    missing: &[ConfiguredMember],
    unexpected: &[Live<'_>],
    coherent: &Coherence,
    bindings: &[BindingMismatch],
    roles: &[RoleMismatch],
) -> Vec<String> {
    let mut blocked = Vec::new();
    for d in duplicates {
        let detail: Vec<String> = d
            .instances
            .iter()
            .map(|i| format!("pid {} cohort {}", i.pid, i.cohort_id.as_deref().unwrap_or("unknown")))
            .collect();
        blocked.push(format!(
            "duplicate {}: {} running instances{} ({})",
            d.profile,
            d.instance_count,
            if d.replicas > 1 { format!(", {} replicas declared", d.replicas) } else { String::new() },
            detail.join(", ")
        ));
    }
    for m in missing {
        blocked.push(format!("missing member {} ({}): no running instance", m.profile, m.namespace));
    }
    for (m, _) in unexpected {
        blocked.push(format!("unexpected member {}: not in the roster", who(m)));
    }
    if coherent.mixed_cohort == Some(true) {
        blocked.push(format!("mixed cohort: {}", coherent.cohort_ids.iter().cloned().collect::<Vec<_>>().join(", ")));
    }
    if coherent.revisions.len() > 1 {
        blocked.push(format!("mixed revision: {}", coherent.revisions.iter().cloned().collect::<Vec<_>>().join(", ")));
    }
    for b in bindings {
        blocked.push(format!("repository binding mismatch for {} pid {}: {}", b.profile, b.pid, b.reason));
    }
    for r in roles {
        blocked.push(format!("role mismatch for {} pid {}: {}", r.profile, r.pid, r.reason));
    }
    blocked
}

/// Classify one snapshot given each running row's probe result (a pid missing from
/// `probes` is unknown), in stages: corroborate the rows, count the members, check
/// cohort, revision, binding and roles, find unregistered processes, name the blockers.
pub fn classify_with_probes(input: &InventoryInput<'_>, probes: &BTreeMap<i64, PidProbe>) -> FleetInventory {
    let mut c = corroborate(input, probes);
    let (configured, missing, duplicates) = count_members(input, &c);
    // Everything corroborated counts for cohort, revision and binding, expected or not.
    let live: Vec<&Live<'_>> = c.running.iter().chain(c.unexpected.iter()).collect();
    let coherent = coherence(&live, &mut c.incomplete);
    let bindings = binding_mismatches(input.expected_binding, &live);
    let roles = role_mismatches(input.roster, &c.running);
    let unclaimed = unregistered(input, &c.rows, &mut c.incomplete);
    let blocked = blocking_reasons(&duplicates, &missing, &c.unexpected, &coherent, &bindings, &roles);
    let mut blocked_reasons = c.incomplete.clone();
    blocked_reasons.extend(blocked);
    let running_members: Vec<MemberRow> = c.running.into_iter().map(|(m, _)| m).collect();
    let unexpected_members: Vec<MemberRow> = c.unexpected.into_iter().map(|(m, _)| m).collect();
    FleetInventory {
        running_member_count: running_members.len(),
        no_unexpected_members: unexpected_members.is_empty(),
        exactly_one_per_profile: configured.iter().all(|m| {
            let replicas = input.roster.iter().find(|r| r.profile == m.profile).map_or(1, |r| r.replicas.max(1));
            m.instance_count >= 1 && m.instance_count <= usize::try_from(replicas).unwrap_or(1)
        }),
        configured_members: configured,
        running_members,
        missing_members: missing,
        duplicate_members: duplicates,
        unexpected_members,
        stale_members: c.stale,
        unregistered_processes: unclaimed.unregistered,
        other_fleet_gateways: unclaimed.other_fleets,
        pending_gateways: unclaimed.pending,
        unproven_gateways: unclaimed.unproven,
        single_cohort: coherent.single_cohort,
        mixed_cohort: coherent.mixed_cohort,
        cohort_ids: coherent.cohort_ids.into_iter().collect(),
        mixed_revision: coherent.revisions.len() > 1,
        startup_revisions: coherent.revisions.into_iter().collect(),
        repository_binding_mismatches: bindings,
        role_mismatches: roles,
        inventory_complete: c.incomplete.is_empty(),
        incomplete_reasons: c.incomplete,
        mutation_gate_satisfied: blocked_reasons.is_empty(),
        blocked_reason: blocked_reasons.first().cloned(),
        blocked_reasons,
        mutations_performed: Vec::new(),
        read_only: true,
        answering_namespace: input.answering_namespace.map(str::to_owned),
        assessed_at: input.now,
    }
}

/// One line: `5 of 5 members running …` when healthy; the blocked reason when not.
pub fn summarize(inv: &FleetInventory) -> String {
    let expected = inv.configured_members.len();
    let up = inv.configured_members.iter().filter(|c| c.instance_count > 0).count();
    match &inv.blocked_reason {
        None => format!(
            "{up} of {expected} members running, one cohort ({}), one revision ({}): mutation gate open",
            inv.cohort_ids.join(", "),
            inv.startup_revisions.iter().map(|r| short(r)).collect::<Vec<_>>().join(", ")
        ),
        Some(reason) => {
            let more = inv.blocked_reasons.len().saturating_sub(1);
            let tail = if more > 0 { format!(" (+{more} more)") } else { String::new() };
            format!("{up} of {expected} members running: mutation gate closed: {reason}{tail}")
        }
    }
}

fn short(rev: &str) -> &str {
    rev.get(..12).unwrap_or(rev)
}

fn row_cells(m: &MemberRow) -> Vec<String> {
    vec![
        format!("{}/{}", m.namespace, m.profile),
        format!("{:?}", m.health).to_lowercase(),
        format!("{:?}", m.liveness).to_lowercase(),
        m.pid.to_string(),
        m.heartbeat_age_seconds.map_or("-".into(), |a| format!("{a}s")),
        m.cohort_id.clone().unwrap_or_else(|| "unknown".into()),
        m.startup_head.as_deref().map_or("unknown".into(), |h| h.chars().take(12).collect()),
    ]
}

/// The readable form (`fleetgate inventory`, the demo): summary, members, then each blocked
/// reason. The summary and the reasons
/// quote other users' command lines: each is [`shown`], so none can forge a line or send an
/// escape sequence to the terminal.
pub fn render(inv: &FleetInventory) -> String {
    use crate::text::{shown, table};
    let mut cells: Vec<Vec<String>> = Vec::new();
    cells.extend(inv.running_members.iter().map(row_cells));
    cells.extend(inv.unexpected_members.iter().map(row_cells));
    cells.extend(inv.stale_members.iter().map(row_cells));
    for m in &inv.missing_members {
        cells.push(vec![
            format!("{}/{}", m.namespace, m.profile),
            "missing".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
        ]);
    }
    for p in &inv.unregistered_processes {
        cells.push(vec![
            format!("(unregistered) {}", p.command.chars().take(40).collect::<String>()),
            "unknown".into(),
            "unregistered".into(),
            p.pid.to_string(),
            "-".into(),
            "-".into(),
            "-".into(),
        ]);
    }
    let mut out = vec![shown(&summarize(inv), usize::MAX), String::new()];
    out.push(table(&["MEMBER", "HEALTH", "LIVENESS", "PID", "HEARTBEAT AGE", "COHORT", "REVISION"], &cells));
    if !inv.blocked_reasons.is_empty() {
        out.push(String::new());
        out.push("blocked because:".into());
        out.extend(inv.blocked_reasons.iter().map(|r| format!("  - {}", shown(r, usize::MAX))));
    }
    if !inv.other_fleet_gateways.is_empty() {
        out.push(String::new());
        out.push("other fleets on this host (proven by the proofs they publish; not ours):".into());
        out.extend(inv.other_fleet_gateways.iter().map(|g| {
            let bound = match (&g.remote, &g.org, &g.repo) {
                (Some(remote), Some(org), Some(repo)) => format!(", bound to {remote}/{org}/{repo}"),
                _ => String::new(),
            };
            shown(
                &format!(
                    "  - other fleet: pid {} {} ({}) of fleet {:?}, checkout {}{bound}, {} store {}",
                    g.pid, g.profile, g.namespace, g.fleet, g.repository_root, g.engine, g.store
                ),
                usize::MAX,
            )
        }));
    }
    if !inv.pending_gateways.is_empty() {
        out.push(String::new());
        out.push(
            "gateways of other stores, just started (not ours; unproven past the grace, they close the gate):".into(),
        );
        out.extend(inv.pending_gateways.iter().map(|g| {
            shown(
                &format!(
                    "  - pending: pid {}, {} s old, store {}, until {}: {}",
                    g.pid, g.age_seconds, g.store, g.until, g.why
                ),
                usize::MAX,
            )
        }));
    }
    if !inv.unproven_gateways.is_empty() {
        out.push(String::new());
        out.push("gateways not proven another fleet's (each closes the gate):".into());
        out.extend(inv.unproven_gateways.iter().map(|g| {
            let store = g.store.as_deref().map_or_else(String::new, |s| format!(", store {s}"));
            shown(&format!("  - unproven: pid {}{store}: {}", g.pid, g.why), usize::MAX)
        }));
    }
    out.join("\n")
}
