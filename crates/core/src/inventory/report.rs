//! What the inventory reports: its rows and categories, and the verdict whose field names are
//! the wire contract.

use super::{Health, Liveness};
use crate::runtime::ObservedProcess;
use crate::time::Timestamp;
use serde::Serialize;

/// One row as the inventory reports it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemberRow {
    /// Row id.
    pub runtime_id: String,
    /// Namespace.
    pub namespace: String,
    /// Profile.
    pub profile: String,
    /// Declared role.
    pub role: String,
    /// Pid.
    pub pid: i64,
    /// Cohort id (null when unknown).
    pub cohort_id: Option<String>,
    /// Startup revision (null when unknown).
    pub startup_head: Option<String>,
    /// Registration time.
    pub registered_at: Timestamp,
    /// Seconds since the row was last refreshed; null when never.
    pub heartbeat_age_seconds: Option<i64>,
    /// Corroborated liveness.
    pub liveness: Liveness,
    /// Health.
    pub health: Health,
}

/// A roster member with its instance count.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConfiguredMember {
    /// Namespace.
    pub namespace: String,
    /// Profile.
    pub profile: String,
    /// Role.
    pub role: String,
    /// Running instances.
    pub instance_count: usize,
    /// Running, missing, or unknown.
    pub health: Health,
    /// Pids of the running instances, sorted.
    pub pids: Vec<i64>,
}

/// One instance of a duplicated profile.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Instance {
    /// Pid.
    pub pid: i64,
    /// Namespace it serves.
    pub namespace: String,
    /// Its cohort.
    pub cohort_id: Option<String>,
    /// When it registered.
    pub registered_at: Timestamp,
}

/// A profile with more than one running instance.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DuplicateMember {
    /// Profile.
    pub profile: String,
    /// Running instances.
    pub instance_count: usize,
    /// How many may run: the member's declared `replicas` (one unless declared).
    pub replicas: u32,
    /// Their pids, sorted.
    pub pids: Vec<i64>,
    /// Each instance, oldest registration first.
    pub instances: Vec<Instance>,
}

/// A row not bound to the expected repository.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BindingMismatch {
    /// Row id.
    pub runtime_id: String,
    /// Profile.
    pub profile: String,
    /// Pid.
    pub pid: i64,
    /// Remote recorded.
    pub remote: Option<String>,
    /// Org recorded.
    pub org: Option<String>,
    /// Repo recorded.
    pub repo: Option<String>,
    /// What is wrong.
    pub reason: String,
}

/// A row whose role or namespace disagrees with the roster entry of its profile.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RoleMismatch {
    /// Row id.
    pub runtime_id: String,
    /// Profile.
    pub profile: String,
    /// Pid.
    pub pid: i64,
    /// The roster's role.
    pub expected_role: String,
    /// The row's role.
    pub declared_role: String,
    /// The roster's namespace.
    pub expected_namespace: String,
    /// The row's namespace.
    pub declared_namespace: String,
    /// What is wrong.
    pub reason: String,
}

/// The verdict. Field names are the wire contract.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FleetInventory {
    /// Every roster member.
    pub configured_members: Vec<ConfiguredMember>,
    /// Corroborated rows of expected profiles, sorted by (namespace, profile, pid).
    pub running_members: Vec<MemberRow>,
    /// `running_members.len()`.
    pub running_member_count: usize,
    /// Roster members with no running instance.
    pub missing_members: Vec<ConfiguredMember>,
    /// Profiles with more than one running instance.
    pub duplicate_members: Vec<DuplicateMember>,
    /// Corroborated rows of profiles not in the roster.
    pub unexpected_members: Vec<MemberRow>,
    /// Rows that are not corroborated (dead, unobserved, recycled, unknown).
    pub stale_members: Vec<MemberRow>,
    /// Observed fleet processes no running row claims.
    pub unregistered_processes: Vec<ObservedProcess>,
    /// Gateways of other fleets on this host, each proven by the proof it publishes and
    /// bound to another repository: reported, never a reason to close this fleet's gate.
    pub other_fleet_gateways: Vec<super::OtherFleetGateway>,
    /// Gateways of another store started within the grace, not yet proven another fleet's
    /// (their proof may not be published yet): reported, no reason to close the gate until
    /// the grace ends.
    pub pending_gateways: Vec<super::PendingGateway>,
    /// Gateways no row of this fleet claims that are not proven another fleet's, each with
    /// why: every one is also among `unregistered_processes` and closes the gate.
    pub unproven_gateways: Vec<super::UnprovenGateway>,
    /// Every roster profile has one running instance — or, for a member that declares
    /// `replicas`, one to that many (the name predates replicas).
    pub exactly_one_per_profile: bool,
    /// No unexpected member runs.
    pub no_unexpected_members: bool,
    /// All running rows share one cohort; null when any cohort is unknown.
    pub single_cohort: Option<bool>,
    /// Running rows span cohorts; null when any cohort is unknown.
    pub mixed_cohort: Option<bool>,
    /// Known cohort ids of running rows, sorted.
    pub cohort_ids: Vec<String>,
    /// Running rows started at different revisions.
    pub mixed_revision: bool,
    /// Known startup revisions of running rows, sorted.
    pub startup_revisions: Vec<String>,
    /// Running rows not bound to the expected repository.
    pub repository_binding_mismatches: Vec<BindingMismatch>,
    /// Running rows whose role or namespace disagrees with the roster.
    pub role_mismatches: Vec<RoleMismatch>,
    /// No evidence was unknown or unavailable.
    pub inventory_complete: bool,
    /// What was unknown or unavailable, each naming the thing.
    pub incomplete_reasons: Vec<String>,
    /// Complete and nothing blocks.
    pub mutation_gate_satisfied: bool,
    /// The first blocked reason; null when satisfied.
    pub blocked_reason: Option<String>,
    /// Every reason the gate is closed.
    pub blocked_reasons: Vec<String>,
    /// Always empty: the inventory never acts.
    pub mutations_performed: Vec<String>,
    /// Always true.
    pub read_only: bool,
    /// Who answered.
    pub answering_namespace: Option<String>,
    /// The decision instant.
    pub assessed_at: Timestamp,
}
