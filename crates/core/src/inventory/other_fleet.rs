//! Another fleet's gateway on this host (issues #19 and 54): a `fleetgate serve` no row of
//! this fleet claims is set aside as another fleet's only when it *proves* it and it is bound
//! to another repository. Everything else stays an unregistered fleet process and fails
//! closed.
//!
//! The proof is what every gateway publishes about itself once its runtime row is written
//! ([`GatewayProof`]), whatever its store's engine: its process (its pid in its own PID
//! namespace, that namespace, its start), its host and kernel boot, its store's identity, its
//! fleet, its row and its repository (checkout and binding). The shell finds it among the
//! gateway's own open files and hands it in with what `/proc` says of the same process
//! ([`PeerFacts`]); nothing of another fleet's store or credentials is needed. Proven means
//! all of: exactly one proof, in a file of the process's own user; naming exactly this
//! process (pid, namespace, start ticks); made on this host in this boot; naming a store that
//! is not this fleet's (and, for a SQLite file, one the process holds open); recording a
//! repository root. Another repository means: that root neither is, contains nor lies inside
//! a checkout of this fleet, the process does not work inside one of them (its working
//! directory), and its binding (when complete) is none of this fleet's.
//!
//! A gateway publishes its proof a moment after it starts, so one that has no proof yet and
//! names another store (its command line and environment say which) is *pending* while it
//! is younger than [`REGISTRATION_GRACE_SECONDS`] — its start against the decision clock, no
//! waiting — reported and no blocker. Past the grace, still without a proof, it fails closed.
//! One naming this fleet's store, or none, is judged at once, whatever its age.

use crate::runtime::{Binding, HostIdentity, ObservedProcess, ProcessStamp, RuntimeRecord, RuntimeStatus};
use crate::runtime::{StoreIdentity, StoreKey};
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The format of [`GatewayProof`] this release writes and reads.
pub const PROOF_VERSION: u32 = 1;

/// The most a proof may weigh: one is a few hundred bytes; the shell reads no more.
pub const PROOF_MAX_BYTES: usize = 64 * 1024;

/// What a gateway publishes about itself on its host (issue 54), once its runtime row is
/// written, for the other fleets' inventories: the same facts a row holds, and what ties
/// them to the very process that publishes them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayProof {
    /// [`PROOF_VERSION`].
    pub version: u32,
    /// The process that publishes it.
    pub process: ProcessStamp,
    /// Its machine and kernel boot.
    pub host: HostIdentity,
    /// Its store.
    pub store: StoreIdentity,
    /// Its fleet's name (`[fleet] name`).
    pub fleet: String,
    /// Its runtime row.
    pub runtime_id: String,
    /// The namespace it serves.
    pub namespace: String,
    /// Its profile.
    pub profile: String,
    /// Its role.
    pub role: String,
    /// The checkout it works on, canonical.
    pub repository_root: Option<String>,
    /// Its forge binding, when its roster declares one.
    pub binding: Option<Binding>,
    /// `stdio` or `http`.
    pub transport: String,
    /// When its row was written.
    pub registered_at: Timestamp,
}

impl GatewayProof {
    /// The bytes published.
    pub fn to_bytes(&self) -> Vec<u8> {
        // A struct of strings and numbers always serializes.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// A proof as published, or why it is not one.
    pub fn parse(bytes: &[u8]) -> Result<Self, WhyUnproven> {
        if bytes.len() > PROOF_MAX_BYTES {
            return Err(WhyUnproven::ProofTooLong(bytes.len()));
        }
        let proof: Self = serde_json::from_slice(bytes).map_err(|e| WhyUnproven::ProofUnparsed(e.to_string()))?;
        if proof.version != PROOF_VERSION {
            return Err(WhyUnproven::ProofFormat(proof.version));
        }
        Ok(proof)
    }
}

/// What the answering process could learn about one unclaimed gateway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerEvidence {
    /// Its process was read.
    Found(Box<PeerFacts>),
    /// Nothing could be learned, and why (another user's process, as a rule).
    Unreadable(String),
}

/// The facts about one unclaimed gateway, as the shell gathered them: values only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerFacts {
    /// The process as its `/proc` entry names it (its pid in its own namespace, that
    /// namespace, its start ticks); `None` when that could not be read.
    pub stamp: Option<ProcessStamp>,
    /// The user it runs as (its effective uid, from `/proc/PID/status`; not the owner of
    /// its `/proc` entry, which is root's for a process that changed its credentials).
    pub uid: Option<u32>,
    /// The proofs it holds open (a gateway holds one).
    pub proofs: Vec<HeldProof>,
    /// Its working directory, canonical; `None` when it could not be read.
    pub cwd: Option<String>,
    /// The files it holds open, as (device, inode).
    pub open_files: BTreeSet<(u64, u64)>,
    /// The store its command line and environment name, or why none can be told: what a
    /// gateway with no proof yet is judged by.
    pub named_store: Result<NamedStore, StoreUntold>,
}

/// Why the store an unclaimed gateway names cannot be told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreUntold {
    /// Its command line does not parse: the parser's kind of error only (its message quotes
    /// the offending argument, which may be a secret).
    CommandLine(String),
    /// Its environment cannot be read, in the host's words.
    Environment(String),
    /// It names none.
    Nothing,
    /// Its location, redacted, is neither a path nor a URL.
    Location(String),
}

impl std::fmt::Display for StoreUntold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::CommandLine(kind) => write!(f, "its command line does not parse ({kind})"),
            Self::Environment(why) => write!(f, "its environment cannot be read: {why}"),
            Self::Nothing => f.write_str("it names no store (no --store, store key, HOME or XDG_STATE_HOME)"),
            Self::Location(at) => write!(f, "its store location {at:?} is neither a path nor a URL"),
        }
    }
}

impl std::error::Error for StoreUntold {}

/// One proof a process holds open: its bytes as read, and the user the file belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldProof {
    /// The owner of the file.
    pub owner: Option<u32>,
    /// Its bytes (at most [`PROOF_MAX_BYTES`] and one more).
    pub bytes: Vec<u8>,
}

/// The store a gateway's command line and environment name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedStore {
    /// Where, as messages may show it.
    pub location: String,
    /// What the file system says of it (a SQLite file that exists); `None` for a server's
    /// database (only the gateway itself can ask that server) or a file not made yet.
    pub key: Option<StoreKey>,
}

/// How long a gateway of another store may run before it must have proven itself (its
/// store opened, its row written, its proof published): the time a gateway takes from its
/// start to its proof, with room for a loaded host and a database server across a network.
/// Seconds, against the decision clock.
pub const REGISTRATION_GRACE_SECONDS: i64 = 10;

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
    /// pid → what was learnt of it, for the unclaimed gateways the shell looked at.
    pub evidence: Option<&'a BTreeMap<i64, PeerEvidence>>,
    /// This fleet's repository.
    pub ours: Option<&'a OurRepository>,
    /// This host and kernel boot.
    pub local: Option<&'a HostIdentity>,
    /// This fleet's store, as the rows were read from it.
    pub store: Option<&'a StoreIdentity>,
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
    /// Its store (a path, or a URL without its password).
    pub store: String,
    /// Its store's engine: `sqlite` or `postgres`.
    pub engine: String,
    /// Its fleet's name.
    pub fleet: String,
    /// Its running row there.
    pub runtime_id: String,
    /// The namespace it serves.
    pub namespace: String,
    /// Its profile.
    pub profile: String,
    /// Its transport.
    pub transport: String,
    /// The checkout it is bound to.
    pub repository_root: String,
    /// Its forge binding, when recorded.
    pub remote: Option<String>,
    /// Organisation, when recorded.
    pub org: Option<String>,
    /// Repository, when recorded.
    pub repo: Option<String>,
}

/// A gateway of another store, started so recently that it may not have written its row
/// and published its proof yet: reported, no blocker until `until`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PendingGateway {
    /// Its pid.
    pub pid: i64,
    /// When it started.
    pub started_at: Timestamp,
    /// How long it has run, in seconds, at the decision instant.
    pub age_seconds: i64,
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

/// A gateway no row of this fleet claims that is not proven another fleet's: it is also an
/// unregistered process (and closes the gate); this says why, and what to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UnprovenGateway {
    /// Its pid.
    pub pid: i64,
    /// When it started.
    pub started_at: Timestamp,
    /// Its command line (secrets masked).
    pub command: String,
    /// The user it runs as, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    /// The store it names or its proof names, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// Why it is not proven another fleet's.
    pub why: String,
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

/// Is `named` this fleet's store (`ours`)? By what the file system says where it can tell,
/// else by the location as shown (a URL without its password names one database).
fn is_ours(named: &NamedStore, ours: Option<&StoreIdentity>) -> bool {
    ours.is_some_and(|o| named.key.as_ref() == Some(&o.key) || named.location == o.location)
}

/// Judge one unclaimed gateway from the facts about it, as of `now`. Pure.
pub fn judge_peer(process: &ObservedProcess, view: &PeerView<'_>, now: Timestamp) -> PeerVerdict {
    let no = |why: String| PeerVerdict::NotProven(why);
    let Some(evidence) = view.evidence.and_then(|e| e.get(&process.pid)) else {
        return no("its proof was not looked for".into());
    };
    let facts = match evidence {
        PeerEvidence::Unreadable(why) => return no(why.clone()),
        PeerEvidence::Found(facts) => facts,
    };
    let held = match facts.proofs.as_slice() {
        [] => return without_proof(process, facts, view, now),
        [one] => one,
        many => return no(format!("it holds {} proofs open, where a gateway publishes one", many.len())),
    };
    let proof = match GatewayProof::parse(&held.bytes) {
        Ok(proof) => proof,
        Err(why) => return no(format!("its proof is not one: {why}")),
    };
    if let Err(why) = ties_to(&proof, held, facts, view) {
        return no(why.to_string());
    }
    let at = &proof.store.location;
    if view.store.is_some_and(|ours| ours.key == proof.store.key) {
        return no(format!("its proof names this fleet's own store {at}, where no running row claims it"));
    }
    if let StoreKey::File { device, inode } = proof.store.key
        && !facts.open_files.contains(&(device, inode))
    {
        return no(format!("it does not hold open the store its proof names ({at})"));
    }
    let Some(root) = proof.repository_root.as_deref() else {
        return no(format!("its proof ({}) records no repository root", proof.runtime_id));
    };
    if let Err(why) = another_repository(&proof, root, facts.cwd.as_deref(), view) {
        return no(why.to_string());
    }
    let binding = proof.binding.clone();
    PeerVerdict::OtherFleet(Box::new(OtherFleetGateway {
        pid: process.pid,
        started_at: process.started_at,
        command: process.command.clone(),
        uid: process.uid,
        store: at.clone(),
        engine: proof.store.engine.clone(),
        fleet: proof.fleet.clone(),
        runtime_id: proof.runtime_id.clone(),
        namespace: proof.namespace.clone(),
        profile: proof.profile.clone(),
        transport: proof.transport.clone(),
        repository_root: root.to_owned(),
        remote: binding.as_ref().map(|b| b.remote.clone()),
        org: binding.as_ref().map(|b| b.org.clone()),
        repo: binding.map(|b| b.repo),
    }))
}

/// The proof is this process's own: a file of its own user, naming exactly it (pid in its
/// namespace, that namespace, its start), made on this host in this boot. Else why not.
fn ties_to(proof: &GatewayProof, held: &HeldProof, facts: &PeerFacts, view: &PeerView<'_>) -> Result<(), WhyUnproven> {
    match (held.owner, facts.uid) {
        (Some(owner), Some(uid)) if owner == uid => {}
        (owner, uid) => return Err(WhyUnproven::OtherUser { owner, uid }),
    }
    let Some(stamp) = facts.stamp else {
        return Err(WhyUnproven::NoStamp);
    };
    if proof.process != stamp {
        return Err(WhyUnproven::OtherProcess { named: proof.process, actual: stamp });
    }
    let Some(local) = view.local else {
        return Err(WhyUnproven::HostUnknown);
    };
    if &proof.host != local {
        return Err(WhyUnproven::OtherHost(proof.host.clone()));
    }
    Ok(())
}

fn shown_namespace(ns: Option<u64>) -> String {
    ns.map_or_else(|| "unknown".into(), |n| format!("pid:[{n}]"))
}

/// The proof's repository is not this fleet's: not its checkout (nor inside, nor around it),
/// not where the process works, not its forge repository. Else why not.
fn another_repository(
    proof: &GatewayProof,
    root: &str,
    cwd: Option<&str>,
    view: &PeerView<'_>,
) -> Result<(), WhyUnproven> {
    let Some(ours) = view.ours.filter(|o| !o.roots.is_empty() || !o.bindings.is_empty()) else {
        return Err(WhyUnproven::OursUnknown);
    };
    if let Some(mine) = ours.roots.iter().find(|mine| overlaps(mine, root)) {
        return Err(WhyUnproven::OurCheckout { theirs: root.to_owned(), mine: mine.clone() });
    }
    let Some(cwd) = cwd else {
        return Err(WhyUnproven::NoCwd);
    };
    if let Some(mine) = ours.roots.iter().find(|mine| Path::new(cwd).starts_with(mine)) {
        return Err(WhyUnproven::WorksInOurCheckout { cwd: cwd.to_owned(), mine: mine.clone() });
    }
    if let Some(theirs) = &proof.binding
        && ours.bindings.contains(theirs)
    {
        return Err(WhyUnproven::OurRepository(theirs.clone()));
    }
    Ok(())
}

/// Why a proof is not one, or does not show its gateway another fleet's (the text the
/// report's `not proven` line carries).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WhyUnproven {
    /// Longer than [`PROOF_MAX_BYTES`].
    ProofTooLong(usize),
    /// Not JSON of a proof (the parser's reason).
    ProofUnparsed(String),
    /// Another format than [`PROOF_VERSION`].
    ProofFormat(u32),
    /// The file's owner is not the process's user.
    OtherUser {
        /// The proof file's owner.
        owner: Option<u32>,
        /// The process's user.
        uid: Option<u32>,
    },
    /// The process's namespace and start cannot be read.
    NoStamp,
    /// The proof names another process.
    OtherProcess {
        /// The process the proof names.
        named: ProcessStamp,
        /// The process that holds it.
        actual: ProcessStamp,
    },
    /// This host's identity is unknown.
    HostUnknown,
    /// Made on another host or boot.
    OtherHost(HostIdentity),
    /// This fleet's repository is unknown.
    OursUnknown,
    /// Bound to (inside, or around) this fleet's checkout.
    OurCheckout {
        /// The proof's repository root.
        theirs: String,
        /// This fleet's.
        mine: String,
    },
    /// Its working directory cannot be read.
    NoCwd,
    /// It works in this fleet's checkout.
    WorksInOurCheckout {
        /// Its working directory.
        cwd: String,
        /// This fleet's checkout.
        mine: String,
    },
    /// Bound to this fleet's forge repository.
    OurRepository(Binding),
}

impl std::fmt::Display for WhyUnproven {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let user = |u: Option<u32>| u.map_or_else(|| "an unknown user".to_owned(), |u| format!("uid {u}"));
        match self {
            Self::ProofTooLong(n) => write!(f, "it is {n} bytes, more than a proof's {PROOF_MAX_BYTES}"),
            Self::ProofUnparsed(e) => write!(f, "it does not parse: {e}"),
            Self::ProofFormat(v) => write!(f, "it is of format {v}, this release reads {PROOF_VERSION}"),
            Self::OtherUser { owner, uid } => {
                write!(f, "its proof belongs to {}, the process runs as {}", user(*owner), user(*uid))
            }
            Self::NoStamp => f.write_str("its pid namespace and start cannot be read, so no proof can be tied to it"),
            Self::OtherProcess { named, actual } => write!(
                f,
                "its proof names another process (pid {} in namespace {}, started at tick {}; it is pid {} in \
                 namespace {}, started at tick {})",
                named.pid,
                shown_namespace(named.pid_namespace),
                named.start_ticks,
                actual.pid,
                shown_namespace(actual.pid_namespace),
                actual.start_ticks
            ),
            Self::HostUnknown => f.write_str("this host's identity is unknown, so no proof can be placed on it"),
            Self::OtherHost(host) => write!(
                f,
                "its proof was made on another host or boot (machine {}, boot {})",
                host.host_id, host.boot_id
            ),
            Self::OursUnknown => f.write_str("this fleet's repository is unknown (no running row records one)"),
            Self::OurCheckout { theirs, mine } => {
                write!(f, "it is bound to this fleet's checkout ({theirs}, ours {mine}): two fleets on one repository")
            }
            Self::NoCwd => f.write_str("its working directory cannot be read"),
            Self::WorksInOurCheckout { cwd, mine } => {
                write!(f, "it works in this fleet's checkout ({cwd}, ours {mine}): two fleets on one repository")
            }
            Self::OurRepository(Binding { remote, org, repo }) => {
                write!(f, "it is bound to this fleet's repository {remote}/{org}/{repo}: two fleets on one repository")
            }
        }
    }
}

impl std::error::Error for WhyUnproven {}

/// A gateway that has published no proof: pending while young when it names another store;
/// else why it is not proven.
fn without_proof(process: &ObservedProcess, facts: &PeerFacts, view: &PeerView<'_>, now: Timestamp) -> PeerVerdict {
    let named = match &facts.named_store {
        Ok(named) => named,
        Err(why) => return PeerVerdict::NotProven(format!("it publishes no proof, and {why}")),
    };
    let at = &named.location;
    if is_ours(named, view.store) {
        return PeerVerdict::NotProven(format!("it names this fleet's own store {at}, where no running row claims it"));
    }
    if within_grace(process.started_at, now) {
        return PeerVerdict::Pending(Box::new(PendingGateway {
            pid: process.pid,
            started_at: process.started_at,
            age_seconds: now.seconds_since(process.started_at).max(0),
            command: process.command.clone(),
            uid: process.uid,
            store: at.clone(),
            why: "it has not published its proof yet (a gateway does once its runtime row is written)".into(),
            until: process.started_at.plus_seconds(REGISTRATION_GRACE_SECONDS),
        }));
    }
    PeerVerdict::NotProven(format!(
        "it names store {at} but has published no proof {REGISTRATION_GRACE_SECONDS} s after its start (a gateway of \
         this release publishes one once its runtime row is written)"
    ))
}

/// The store an unclaimed gateway's evidence names, for the report: its proof's, else the
/// one its command line names.
pub fn evidence_store(evidence: &PeerEvidence) -> Option<String> {
    let PeerEvidence::Found(facts) = evidence else { return None };
    let proven = match facts.proofs.as_slice() {
        [one] => GatewayProof::parse(&one.bytes).ok().map(|p| p.store.location),
        _ => None,
    };
    proven.or_else(|| facts.named_store.as_ref().ok().map(|n| n.location.clone()))
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
