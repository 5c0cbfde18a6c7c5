//! The audit trail of gate decisions, written by one thread in batches (group commit).
//!
//! * A mutating call's entry is **waited for** ([`Auditor::record`]): the call is forwarded
//!   only once its entry is committed, and refused (`audit_unavailable`) when it is not
//!   within the bound. An entry given up on before it was written is written, when the
//!   store takes it, as that refusal — the trail never shows an allowed mutation that was
//!   not forwarded.
//! * A read call's entry (and any other report) is **queued** ([`Auditor::queue`]) and not
//!   waited for. A kill -9 loses at most the queued entries not yet committed; an orderly
//!   shutdown [`flush`](Auditor::flush)es them.
//! * Entries are committed in the order they were queued, many per transaction: the
//!   writer takes whatever is queued when it wakes, and waits up to [`LINGER`] for more
//!   unless someone is waiting for an entry.
//! * The queue is bounded. A full queue is named on the decision (a mutation is refused),
//!   never silent. A batch the store refuses is kept and tried again, before anything
//!   newer, with backoff.

use fleetgate_core::BlockerKind;
use fleetgate_core::audit::AuditEntry;
use fleetgate_store::Store;
use serde::Serialize;
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// Entries queued and not yet taken by the writer.
pub const QUEUE_CAPACITY: usize = 1024;
/// Entries the writer holds at most (a batch, and what failed before): past it, it stops
/// taking from the queue, so the queue fills and the next decisions say so.
pub const MAX_HELD: usize = 4096;
/// How long the writer waits for more entries before committing a batch nobody waits for.
pub const LINGER: Duration = Duration::from_millis(5);
/// A waiter whose entry is being committed waits at most this much longer.
const COMMIT_GRACE: Duration = Duration::from_secs(30);
const BACKOFF_FIRST: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// How an append went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "audit", rename_all = "snake_case")]
pub enum AuditReceipt {
    /// Committed with this sequence number.
    Appended {
        /// The entry's id.
        id: i64,
    },
    /// Queued for the next batch; not waited for.
    Queued,
    /// The store refused or failed, or the queue is full.
    Failed {
        /// Why.
        error: String,
    },
    /// Not committed within the bound: written later, if at all, as a refusal.
    TimedOut {
        /// The bound that passed.
        after_ms: u64,
    },
}

impl AuditReceipt {
    /// The reason to attach to a decision when the entry is not known to be stored (or
    /// queued).
    pub fn problem(&self) -> Option<String> {
        match self {
            Self::Appended { .. } | Self::Queued => None,
            Self::Failed { error } => Some(format!("audit append failed: {error}")),
            Self::TimedOut { after_ms } => Some(format!("audit append not confirmed within {after_ms} ms")),
        }
    }
}

/// Where a waited-for entry stands; the writer and the waiter agree through it on whether
/// the entry is written as allowed or as refused.
#[derive(Debug)]
enum Stage {
    /// Queued; the waiter may still give up.
    Pending,
    /// In a transaction that holds the write lock: the waiter waits for its end.
    Claimed,
    /// The waiter gave up after this many ms: the entry is written as refused.
    Abandoned(u64),
    /// Committed (its id) or failed.
    Done(Result<i64, String>),
}

#[derive(Debug)]
struct Waiter {
    stage: Mutex<Stage>,
    changed: Condvar,
}

impl Waiter {
    fn new() -> Arc<Self> {
        Arc::new(Self { stage: Mutex::new(Stage::Pending), changed: Condvar::new() })
    }

    fn lock(&self) -> MutexGuard<'_, Stage> {
        self.stage.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn finish(&self, result: Result<i64, String>) {
        *self.lock() = Stage::Done(result);
        self.changed.notify_all();
    }
}

#[derive(Debug)]
enum Job {
    /// An entry; with a waiter when someone waits for it.
    Entry(AuditEntry, Option<Arc<Waiter>>),
    /// Done once everything queued before it is committed.
    Flush(Arc<Waiter>),
}

impl Job {
    fn urgent(&self) -> bool {
        !matches!(self, Self::Entry(_, None))
    }
}

/// Appends entries through a bounded queue to one writer thread.
#[derive(Debug, Clone)]
pub struct Auditor {
    queue: SyncSender<Job>,
    writer: Option<Thread>,
    wait: Duration,
}

impl Auditor {
    /// Start the writer thread over `store`; a waited-for entry is waited for at most
    /// `wait` before it is given up.
    pub fn new(store: Arc<dyn Store>, wait: Duration) -> Self {
        let (queue, jobs) = mpsc::sync_channel(QUEUE_CAPACITY);
        let writer = std::thread::Builder::new()
            .name("fleetgate-audit".into())
            .spawn(move || Writer::new(store).run(&jobs))
            .map(|handle| handle.thread().clone())
            .inspect_err(|e| tracing::error!("cannot start the audit thread: {e}"))
            .ok();
        Self { queue, writer, wait }
    }

    fn send(&self, job: Job) -> Result<(), AuditReceipt> {
        let urgent = job.urgent();
        match self.queue.try_send(job) {
            Ok(()) => {
                if urgent && let Some(writer) = &self.writer {
                    // The writer may be lingering for more entries: someone waits for this one.
                    writer.unpark();
                }
                Ok(())
            }
            Err(TrySendError::Full(_)) => Err(AuditReceipt::Failed { error: "the audit queue is full".into() }),
            Err(TrySendError::Disconnected(_)) => {
                Err(AuditReceipt::Failed { error: "the audit writer has stopped".into() })
            }
        }
    }

    /// Queue `entry` without waiting for it (a read call's, a report's).
    pub fn queue(&self, entry: AuditEntry) -> AuditReceipt {
        let receipt = self.send(Job::Entry(entry, None)).map_or_else(|failed| failed, |()| AuditReceipt::Queued);
        if let Some(problem) = receipt.problem() {
            tracing::error!(%problem, "audit entry not queued");
        }
        receipt
    }

    /// Append `entry` and wait, at most the bound, until it is committed (a mutating
    /// call's: forwarded only when this answers [`AuditReceipt::Appended`]).
    pub fn record(&self, entry: AuditEntry) -> AuditReceipt {
        let waiter = Waiter::new();
        let receipt = match self.send(Job::Entry(entry, Some(waiter.clone()))) {
            Err(failed) => failed,
            Ok(()) => self.await_entry(&waiter),
        };
        if let Some(problem) = receipt.problem() {
            tracing::error!(%problem, "audit entry not confirmed");
        }
        receipt
    }

    fn await_entry(&self, waiter: &Waiter) -> AuditReceipt {
        let after_ms = u64::try_from(self.wait.as_millis()).unwrap_or(u64::MAX);
        let deadline = Instant::now() + self.wait;
        let mut stage = waiter.lock();
        loop {
            let now = Instant::now();
            match &*stage {
                Stage::Done(Ok(id)) => return AuditReceipt::Appended { id: *id },
                Stage::Done(Err(error)) => return AuditReceipt::Failed { error: error.clone() },
                Stage::Pending if now >= deadline => {
                    *stage = Stage::Abandoned(after_ms);
                    return AuditReceipt::TimedOut { after_ms };
                }
                // Being committed: its outcome decides, bounded by the store's own deadline.
                Stage::Claimed if now >= deadline + COMMIT_GRACE => return AuditReceipt::TimedOut { after_ms },
                Stage::Pending | Stage::Claimed | Stage::Abandoned(_) => {}
            }
            let until = if matches!(*stage, Stage::Claimed) { deadline + COMMIT_GRACE } else { deadline };
            let timeout = until.saturating_duration_since(now);
            stage = waiter.changed.wait_timeout(stage, timeout).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    /// Wait, at most `within`, until everything queued so far is committed (orderly
    /// shutdown). False when it is not.
    pub fn flush(&self, within: Duration) -> bool {
        let waiter = Waiter::new();
        if self.send(Job::Flush(waiter.clone())).is_err() {
            return false;
        }
        let stage = waiter.lock();
        let (stage, _) = waiter
            .changed
            .wait_timeout_while(stage, within, |s| !matches!(s, Stage::Done(_)))
            .unwrap_or_else(PoisonError::into_inner);
        matches!(*stage, Stage::Done(Ok(_)))
    }
}

/// An entry given up on by its waiter, as it is written: the refusal the call got.
fn refuse(entry: &mut AuditEntry, why: String) {
    if entry.allowed {
        entry.allowed = false;
        entry.blocker_kind = Some(BlockerKind::AuditUnavailable.as_str().to_owned());
        entry.reasons.push(why);
    }
}

/// The writer thread's state: the entries it holds (oldest first, each with its waiter when
/// someone waits for it), the flushes waiting for them, and how long it backs off.
struct Writer {
    store: Arc<dyn Store>,
    entries: Vec<AuditEntry>,
    waiters: Vec<Option<Arc<Waiter>>>,
    flushes: Vec<Arc<Waiter>>,
    backoff: Option<Duration>,
}

impl Writer {
    fn new(store: Arc<dyn Store>) -> Self {
        Self { store, entries: Vec::new(), waiters: Vec::new(), flushes: Vec::new(), backoff: None }
    }

    fn held(&self) -> usize {
        self.entries.len() + self.flushes.len()
    }

    fn hold(&mut self, job: Job) {
        match job {
            Job::Entry(entry, waiter) => {
                self.entries.push(entry);
                self.waiters.push(waiter);
            }
            Job::Flush(waiter) => self.flushes.push(waiter),
        }
    }

    fn run(mut self, jobs: &Receiver<Job>) {
        let mut open = true;
        while open || self.held() > 0 {
            if let Some(pause) = self.backoff {
                std::thread::sleep(pause);
            } else if self.held() == 0 {
                let Ok(job) = jobs.recv() else { return };
                let urgent = job.urgent();
                self.hold(job);
                if !urgent {
                    // A waiter unparks this thread; entries nobody waits for gather meanwhile.
                    std::thread::park_timeout(LINGER);
                }
            }
            while open && self.held() < MAX_HELD {
                match jobs.try_recv() {
                    Ok(job) => self.hold(job),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => open = false,
                }
            }
            let written = self.write();
            if !open && !written {
                tracing::error!(entries = self.entries.len(), "the audit writer stops with entries it could not write");
                return;
            }
        }
    }

    /// Commit everything held in one transaction. True when it was.
    fn write(&mut self) -> bool {
        let waiters = &self.waiters;
        let mut settle = |entries: &mut [AuditEntry]| {
            // The write lock is held: each waiter either gets this commit's outcome or has
            // given up, and then its entry says so.
            for (entry, waiter) in entries.iter_mut().zip(waiters) {
                let Some(waiter) = waiter else { continue };
                let mut stage = waiter.lock();
                match &*stage {
                    Stage::Pending => *stage = Stage::Claimed,
                    Stage::Abandoned(ms) => refuse(entry, format!("audit append not confirmed within {ms} ms")),
                    Stage::Claimed | Stage::Done(_) => {}
                }
            }
        };
        match self.store.append_audit_batch(&mut self.entries, &mut settle) {
            Ok(ids) => {
                let mut ids = ids.into_iter();
                for waiter in self.waiters.drain(..) {
                    let id = ids.next().ok_or_else(|| "the store answered fewer ids".to_owned());
                    if let Some(waiter) = waiter
                        && !matches!(*waiter.lock(), Stage::Abandoned(_))
                    {
                        waiter.finish(id);
                    }
                }
                self.entries.clear();
                for flush in self.flushes.drain(..) {
                    flush.finish(Ok(0));
                }
                self.backoff = None;
                true
            }
            Err(e) => {
                let error = e.to_string();
                tracing::warn!(%error, entries = self.entries.len(), "audit batch not written; it is tried again");
                // Every waiter is answered now; what is kept is each entry as its call ended.
                for (entry, waiter) in self.entries.iter_mut().zip(self.waiters.iter_mut()) {
                    let Some(w) = waiter.take() else { continue };
                    let why = match &*w.lock() {
                        Stage::Abandoned(ms) => format!("audit append not confirmed within {ms} ms"),
                        _ => format!("audit append failed: {error}"),
                    };
                    refuse(entry, why);
                    w.finish(Err(error.clone()));
                }
                let next = self.backoff.map_or(BACKOFF_FIRST, |b| (b * 2).min(BACKOFF_MAX));
                self.backoff = Some(next);
                false
            }
        }
    }
}
