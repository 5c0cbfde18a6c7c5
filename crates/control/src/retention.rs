//! Pruning a long-running fleet's history (`fleetgate prune`, `[retention] every`): the
//! store deletes what is old and unreferenced (`fleetgate_store`'s `prune_*`), and this
//! shell asks the forge the two things the store cannot know — whether an idle PR is closed,
//! and whether a push is still its branch's tip — before its rows go. A PR or a branch the
//! forge cannot answer for keeps its rows, and is named.

use crate::gate::CommandForge;
use crate::gate::workflow::{Forge, ForgeReader, read_pr};
use fleetgate_core::Timestamp;
use fleetgate_core::dialect::{PrTarget, Unlisted};
use fleetgate_core::env::EnvSnapshot;
use fleetgate_core::prune::{Retention, push_superseded};
use fleetgate_core::workflow::PrPush;
use fleetgate_store::{Store, StoreError};
use serde::Serialize;
use std::collections::BTreeMap;

/// How many audit entries one transaction deletes.
pub const AUDIT_BATCH: usize = 10_000;

/// Something old the prune kept, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Kept {
    /// The PR (`remote/owner/repo#N`) or the branch (`remote/owner/repo:branch`).
    pub what: String,
    /// Why it stays.
    pub why: String,
    /// The forge could not answer for it (unreachable, unreadable, not configured): kept
    /// for want of an answer, not because it is live.
    pub unanswered: bool,
}

/// What one prune did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PruneReport {
    /// Audit entries deleted.
    pub audit: u64,
    /// Approval requests deleted.
    pub approvals: u64,
    /// Approval events deleted.
    pub approval_events: u64,
    /// PRs whose records were deleted.
    pub prs: Vec<String>,
    /// Pushes deleted.
    pub pushes: u64,
    /// Host observations deleted.
    pub observations: u64,
    /// Worker rows deleted.
    pub workers: Vec<String>,
    /// Runtime rows deleted.
    pub runtimes: Vec<String>,
    /// HTTP session and task records deleted (of replicas gone, or tasks that old).
    pub http_sessions: u64,
    /// Old PRs and branches kept, and why.
    pub kept: Vec<Kept>,
}

impl PruneReport {
    /// One line for a terminal or a log.
    pub fn summary(&self) -> String {
        format!(
            "pruned {} audit entries, {} approval requests and {} of their events, the records of {} PR(s), {} \
             push(es), {} host observation(s), {} worker row(s), {} runtime row(s), {} replica session record(s); kept \
             {} old PR(s) or branch(es)",
            self.audit,
            self.approvals,
            self.approval_events,
            self.prs.len(),
            self.pushes,
            self.observations,
            self.workers.len(),
            self.runtimes.len(),
            self.http_sessions,
            self.kept.len()
        )
    }
}

/// Prune by `retention` as of `now`, asking `forge` about PRs and branches (`None`: the
/// workflow's history is kept, and said so, when `retention.workflow` asks for it).
/// `remote` is the fleet's forge remote (PR keys are `remote/owner/repo`).
pub fn prune(
    store: &dyn Store,
    forge: Option<Forge<'_>>,
    remote: &str,
    retention: &Retention,
    now: Timestamp,
) -> Result<PruneReport, StoreError> {
    let mut report = PruneReport::default();
    let cutoff = |age: i64| now.plus_seconds(-age);
    if let Some(age) = retention.audit {
        loop {
            let n = store.prune_audit(cutoff(age), AUDIT_BATCH)?;
            report.audit += n;
            if n < AUDIT_BATCH as u64 {
                break;
            }
        }
    }
    if let Some(age) = retention.approvals {
        let pruned = store.prune_approvals(cutoff(age))?;
        (report.approvals, report.approval_events) = (pruned.requests, pruned.events);
    }
    if let Some(age) = retention.observations {
        report.observations = store.prune_observations(cutoff(age))?;
    }
    if let Some(age) = retention.workers {
        report.workers = store.prune_workers(age, now)?;
    }
    if let Some(age) = retention.runtimes {
        report.runtimes = store.prune_runtime(age, now)?;
        report.http_sessions = store.prune_http_sessions(cutoff(age))?;
    }
    if let Some(age) = retention.workflow {
        workflow(store, forge, remote, cutoff(age), &mut report)?;
    }
    Ok(report)
}

/// The PR workflow's history: closed PRs' records, and pushes whose branch moved on.
fn workflow(
    store: &dyn Store,
    forge: Option<Forge<'_>>,
    remote: &str,
    before: Timestamp,
    report: &mut PruneReport,
) -> Result<(), StoreError> {
    let keep = |report: &mut PruneReport, what: String, why: String, unanswered: bool| {
        report.kept.push(Kept { what, why, unanswered });
    };
    for key in store.idle_prs(before)? {
        let Some(forge) = forge else {
            keep(
                report,
                key.to_string(),
                "no forge to ask whether it is closed: set [workflow] forge_command".into(),
                true,
            );
            continue;
        };
        let Some(target) = PrTarget::from_key(&key, remote) else {
            keep(report, key.to_string(), format!("not a PR of this fleet's forge remote {remote:?}"), true);
            continue;
        };
        match read_pr(forge, &target) {
            Ok(facts) if facts.is_done() => {
                if store.prune_pr(&key, before)? {
                    report.prs.push(key.to_string());
                } else {
                    keep(report, key.to_string(), "active again since it was listed".into(), false);
                }
            }
            Ok(_) => keep(report, key.to_string(), "open on the forge".into(), false),
            Err(why) => keep(report, key.to_string(), why.message, true),
        }
    }
    let mut branches: BTreeMap<(String, String), Vec<(i64, PrPush)>> = BTreeMap::new();
    for (id, push) in store.old_pushes(before)? {
        branches.entry((push.binding.clone(), push.branch.clone())).or_default().push((id, push));
    }
    for ((binding, branch), pushes) in branches {
        let what = format!("{binding}:{branch}");
        let tip = match forge {
            None => Err(TipUnknown::NoForge),
            Some(forge) => tip(forge, remote, &binding, &branch),
        };
        match tip {
            Ok(tip) => {
                let ids: Vec<i64> = pushes
                    .iter()
                    .filter(|(_, p)| push_superseded(&p.head, tip.as_deref()))
                    .map(|(id, _)| *id)
                    .collect();
                report.pushes += store.prune_pushes(&ids, before)?;
            }
            Err(why) => keep(report, what, why.to_string(), true),
        }
    }
    Ok(())
}

/// Why a branch's tip is not known: its pushes are kept.
#[derive(Debug, thiserror::Error)]
enum TipUnknown {
    #[error("no forge to read the branch's tip from: set [workflow] forge_command")]
    NoForge,
    #[error("no forge to read the branch's tip from")]
    NoReader,
    #[error("not a repository of this fleet's forge remote {0:?}")]
    NotOurs(String),
    #[error(transparent)]
    Dialect(#[from] fleetgate_core::dialect::DialectError),
    #[error("the forge named no tip commit")]
    NoTip,
    #[error("reading the branch's tip: {}", .0.message)]
    Read(crate::gate::workflow::ForgeError),
}

/// `branch`'s tip in `binding` (`remote/owner/repo`), `None` when the forge says it is gone.
fn tip(forge: Forge<'_>, remote: &str, binding: &str, branch: &str) -> Result<Option<String>, TipUnknown> {
    let (owner, repo) = binding
        .strip_prefix(remote)
        .and_then(|r| r.strip_prefix('/'))
        .and_then(|r| r.split_once('/'))
        .ok_or_else(|| TipUnknown::NotOurs(remote.to_owned()))?;
    let read = forge.dialect.tip_read(owner, repo, branch, forge.schemas)?;
    let reader = forge.reader.ok_or(TipUnknown::NoReader)?;
    match reader.read(&read.tool, read.arguments.clone()) {
        Ok(answer) => forge.dialect.tip_of(&answer).map(Some).ok_or(TipUnknown::NoTip),
        Err(e) if forge.dialect.is_not_found(&e.message) => Ok(None),
        Err(e) => Err(TipUnknown::Read(e)),
    }
}

/// [`prune`] with the roster's forge (`[fleet] forge` and `[workflow] forge_command`, when
/// both are set): what `fleetgate prune` and the schedule run.
pub fn prune_fleet(
    store: &dyn Store,
    config: &fleetgate_config::FleetConfig,
    env: &EnvSnapshot,
    retention: &Retention,
    now: Timestamp,
) -> Result<PruneReport, StoreError> {
    let command = CommandForge::new(config, env);
    let forge = match (config.dialect(), command.as_ref()) {
        (Some(dialect), Some(reader)) => {
            Some(Forge { dialect, schemas: &Unlisted, reader: Some(reader as &dyn ForgeReader) })
        }
        _ => None,
    };
    prune(store, forge, &config.workflow.remote, retention, now)
}

/// What a scheduled prune needs besides the store and the clock.
#[derive(Clone, Debug)]
pub struct Job {
    /// The roster (its `[retention]`, forge and forge command).
    pub config: std::sync::Arc<fleetgate_config::FleetConfig>,
    /// The environment the forge command is started with.
    pub env: EnvSnapshot,
}

/// `[retention] every`: a thread that prunes by the roster's `[retention]` ten seconds after it
/// starts and then every `every` seconds, logging what it did, until [`Schedule::stop`]. Each
/// process that runs one prunes (the deletes are idempotent; a second process finds less).
#[derive(Debug)]
pub struct Schedule {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Schedule {
    /// Start it when the roster sets `[retention] every` (else an idle handle).
    pub fn start(store: std::sync::Arc<dyn Store>, clock: std::sync::Arc<dyn fleetgate_core::Clock>, job: Job) -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let idle = |stop| Self { stop, thread: None };
        let Some(every) = job.config.retention.every else { return idle(stop) };
        if !job.config.retention.prunes_anything() {
            tracing::warn!("[retention] every is set but no kind of history has an age: nothing will be pruned");
            return idle(stop);
        }
        let flag = std::sync::Arc::clone(&stop);
        let thread = std::thread::Builder::new().name("fleetgate-retention".into()).spawn(move || {
            let mut wait = FIRST_PRUNE;
            loop {
                if crate::notify::pause(&flag, wait) {
                    return;
                }
                let retention = job.config.retention;
                match prune_fleet(&*store, &job.config, &job.env, &retention, clock.now()) {
                    Ok(report) => tracing::info!("retention: {}", report.summary()),
                    Err(e) => {
                        tracing::warn!(error = %e, "retention: the prune failed; tried again at the next interval")
                    }
                }
                wait = std::time::Duration::from_secs(u64::try_from(every).unwrap_or(u64::MAX));
            }
        });
        match thread {
            Ok(handle) => Self { stop, thread: Some(handle) },
            Err(e) => {
                tracing::warn!(error = %e, "retention: the schedule could not start");
                idle(stop)
            }
        }
    }

    /// Stop the thread (a prune under way finishes first).
    pub fn stop(mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// How long after a process starts its first scheduled prune runs.
pub const FIRST_PRUNE: std::time::Duration = std::time::Duration::from_secs(10);
