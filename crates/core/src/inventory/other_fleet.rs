//! Another fleet's gateway on this host (issue #19): a `fleetgate serve` no row of this
//! fleet claims is set aside as another fleet's only when it *proves* it — the facts about
//! its store, gathered by the shell and handed in as values, say so — and it is bound to
//! another repository. Everything else stays an unregistered fleet process and fails closed.
//!
//! Proven means all of: its store was read; it is not this fleet's own store; the gateway
//! holds that very file open (not merely names it on its command line); the store holds a
//! running row for exactly that pid, written on this host in this kernel boot, no earlier
//! than the process started; and that row records a repository root. Another repository
//! means: that root neither is, contains nor lies inside any checkout of this fleet, and its
//! binding (when it records a complete one) is none of this fleet's.
//!
//! A gateway that names another store (not ours) is that store's to account for, but only
//! for a while: a gateway starts before it opens its store and writes its row, so one
//! younger than [`REGISTRATION_GRACE_SECONDS`] — its start against the decision clock, no
//! waiting — that has not proven itself yet is *pending*, reported and no blocker. Past the
//! grace the same facts are judged as above and fail closed. A gateway naming our store,
//! naming none, or whose row is already there is judged at once, whatever its age.

use crate::runtime::{Binding, HostIdentity, ObservedProcess, RuntimeRecord, RuntimeStatus};
use crate::time::Timestamp;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// What the answering process could learn about one unclaimed gateway's store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerEvidence {
    /// Its store was found and read.
    Store(PeerStore),
    /// Nothing could be learned, and why (no store named, not a SQLite file, unreadable, …).
    Unreadable(String),
}

/// How long a gateway of another store may run before it must have proven itself (held its
/// store open, its row written there): the time a gateway takes from its start to its row,
/// with room for a loaded host. Seconds, against the decision clock.
pub const REGISTRATION_GRACE_SECONDS: i64 = 5;

/// One gateway's store, as the answering process read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerStore {
    /// Where it is, as messages may show it.
    pub location: String,
    /// The gateway holds that very file open (one of its descriptors names it).
    pub held_open: bool,
    /// It is the very file this fleet's rows were read from: this fleet's own store.
    pub ours: bool,
    /// The store's runtime rows for the gateway's pid, any status.
    pub rows: Vec<RuntimeRecord>,
    /// Why its rows could not be read, when they could not (the file is not there yet, or
    /// not yet a store): nothing is proven, and a young gateway may be making it.
    pub unread: Option<String>,
}

/// The repository this fleet works on, as far as it is known.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OurRepository {
    /// Checkouts (canonical paths): this fleet's running rows' repository roots.
    pub roots: BTreeSet<String>,
    /// Complete bindings: the roster's, and those this fleet's running rows record.
    pub bindings: Vec<Binding>,
}

/// What the classifier is told about unclaimed gateways. Without evidence every one of
/// them is unregistered, as before.
#[derive(Clone, Copy, Debug, Default)]
pub struct PeerView<'a> {
    /// pid → what its store says, for the unclaimed gateways the shell looked at.
    pub evidence: Option<&'a BTreeMap<i64, PeerEvidence>>,
    /// This fleet's repository.
    pub ours: Option<&'a OurRepository>,
    /// This host and kernel boot.
    pub local: Option<&'a HostIdentity>,
}

/// A gateway of another fleet, proven so: reported, never a reason to close this gate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OtherFleetGateway {
    /// Its pid.
    pub pid: i64,
    /// When it started.
    pub started_at: Timestamp,
    /// Its command line (secrets masked).
    pub command: String,
    /// The user it runs as, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    /// Its store, which it holds open.
    pub store: String,
    /// Its running row there.
    pub runtime_id: String,
    /// The namespace it serves.
    pub namespace: String,
    /// Its profile.
    pub profile: String,
    /// The checkout it is bound to.
    pub repository_root: String,
    /// Its forge binding, when recorded.
    pub remote: Option<String>,
    /// Organisation, when recorded.
    pub org: Option<String>,
    /// Repository, when recorded.
    pub repo: Option<String>,
}

/// A gateway of another store, started so recently that it may not have opened its store
/// or written its row yet: reported, no blocker until `until`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PendingGateway {
    /// Its pid.
    pub pid: i64,
    /// When it started.
    pub started_at: Timestamp,
    /// Its command line (secrets masked).
    pub command: String,
    /// The user it runs as, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    /// The store it names.
    pub store: String,
    /// What it has not proven yet.
    pub why: String,
    /// When the grace ends: from then on, unproven, it closes the gate.
    pub until: Timestamp,
}

/// The judgement on one unclaimed gateway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerVerdict {
    /// Another fleet's, bound to another repository.
    OtherFleet(Box<OtherFleetGateway>),
    /// Another store's, too young to have proven it yet.
    Pending(Box<PendingGateway>),
    /// Not proven another fleet's: why (fails closed).
    NotProven(String),
}

/// Is a process started at `started_at` within the grace at `now`? A clock a little behind
/// the process's (the store's clock, a start rounded down) counts as young, within the same
/// bound.
fn within_grace(started_at: Timestamp, now: Timestamp) -> bool {
    (-REGISTRATION_GRACE_SECONDS..=REGISTRATION_GRACE_SECONDS).contains(&now.seconds_since(started_at))
}

/// Judge one unclaimed gateway from the facts about its store, as of `now`. Pure.
pub fn judge_peer(process: &ObservedProcess, view: &PeerView<'_>, now: Timestamp) -> PeerVerdict {
    let no = |why: String| PeerVerdict::NotProven(why);
    let Some(evidence) = view.evidence.and_then(|e| e.get(&process.pid)) else {
        return no("its store was not looked at".into());
    };
    let store = match evidence {
        PeerEvidence::Unreadable(why) => return no(why.clone()),
        PeerEvidence::Store(s) => s,
    };
    let at = &store.location;
    if store.ours {
        return no(format!("it names this fleet's own store {at}, where no running row claims it"));
    }
    // Not proven yet: another store's to account for while the gateway is young.
    let unproven = |why: String| {
        if within_grace(process.started_at, now) {
            PeerVerdict::Pending(Box::new(PendingGateway {
                pid: process.pid,
                started_at: process.started_at,
                command: process.command.clone(),
                uid: process.uid,
                store: at.clone(),
                why,
                until: process.started_at.plus_seconds(REGISTRATION_GRACE_SECONDS),
            }))
        } else {
            PeerVerdict::NotProven(why)
        }
    };
    if let Some(why) = &store.unread {
        return unproven(why.clone());
    }
    if !store.held_open {
        return unproven(format!("it does not hold the store it names ({at}) open"));
    }
    let Some(local) = view.local else {
        return no("this host's identity is unknown, so no row can be placed on it".into());
    };
    let row = store.rows.iter().find(|r| {
        r.status == RuntimeStatus::Running
            && r.pid == process.pid
            && r.host.as_ref() == Some(local)
            && r.registered_at >= process.started_at
    });
    let Some(row) = row else {
        return unproven(format!(
            "store {at} holds no running row for pid {} on this host's boot registered since it started",
            process.pid
        ));
    };
    let Some(root) = row.repository_root.as_deref() else {
        return no(format!("its row {} in {at} records no repository root", row.runtime_id));
    };
    let Some(ours) = view.ours.filter(|o| !o.roots.is_empty() || !o.bindings.is_empty()) else {
        return no("this fleet's repository is unknown (no running row records one)".into());
    };
    if let Some(mine) = ours.roots.iter().find(|mine| overlaps(mine, root)) {
        return no(format!("it is bound to this fleet's checkout ({root}, ours {mine}): two fleets on one repository"));
    }
    if let (Some(remote), Some(org), Some(repo)) = (&row.remote, &row.org, &row.repo) {
        let theirs = Binding { remote: remote.clone(), org: org.clone(), repo: repo.clone() };
        if ours.bindings.contains(&theirs) {
            return no(format!(
                "it is bound to this fleet's repository {remote}/{org}/{repo}: two fleets on one repository"
            ));
        }
    } else if !ours.bindings.is_empty() && (row.remote.is_some() || row.org.is_some() || row.repo.is_some()) {
        return no(format!("its row {} records an incomplete binding, which cannot be told from ours", row.runtime_id));
    }
    PeerVerdict::OtherFleet(Box::new(OtherFleetGateway {
        pid: process.pid,
        started_at: process.started_at,
        command: process.command.clone(),
        uid: process.uid,
        store: at.clone(),
        runtime_id: row.runtime_id.clone(),
        namespace: row.namespace.clone(),
        profile: row.profile.clone(),
        repository_root: root.to_owned(),
        remote: row.remote.clone(),
        org: row.org.clone(),
        repo: row.repo.clone(),
    }))
}

/// One checkout is, contains or lies inside the other.
fn overlaps(a: &str, b: &str) -> bool {
    let (a, b) = (Path::new(a), Path::new(b));
    a.starts_with(b) || b.starts_with(a)
}

/// This fleet's repository as its roster and running rows tell it (`canonical` maps a root
/// to its canonical spelling; the shell resolves symlinks, a test gives the identity).
pub fn our_repository(
    binding: Option<&Binding>,
    rows: &[RuntimeRecord],
    canonical: &dyn Fn(&str) -> String,
) -> OurRepository {
    let running = rows.iter().filter(|r| r.status == RuntimeStatus::Running);
    let mut bindings: Vec<Binding> = binding.into_iter().cloned().collect();
    let mut roots = BTreeSet::new();
    for r in running {
        if let Some(root) = &r.repository_root {
            roots.insert(canonical(root));
        }
        if let (Some(remote), Some(org), Some(repo)) = (&r.remote, &r.org, &r.repo) {
            let b = Binding { remote: remote.clone(), org: org.clone(), repo: repo.clone() };
            if !bindings.contains(&b) {
                bindings.push(b);
            }
        }
    }
    OurRepository { roots, bindings }
}
