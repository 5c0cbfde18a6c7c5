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
//! * Entries are committed in the order they were queued, many per transaction: a writer
//!   takes whatever is queued. The writer thread waits up to [`LINGER`] for more unless
//!   someone is waiting for an entry, and after a commit it lingers once more before it
//!   goes idle: under steady traffic it wakes once per batch, by its own timer, and no
//!   call has to wake it.
//! * A waiter whose store bounds its own waits ([`Store::bounds_waits`]: the store says so;
//!   the auditor never asks which engine runs) commits the queue itself when no one else is
//!   writing (the leader of a group commit), within what is left of its bound: no hand-off
//!   to the writer thread and back, two thread wake-ups fewer per mutating call. Otherwise,
//!   or while another writer is at it, the writer thread commits and the waiter waits for it.
//! * The queue is bounded. A full queue is named on the decision (a mutation is refused),
//!   never silent. A batch the store refuses is kept and tried again, before anything
//!   newer, by the writer thread with backoff.

use fleetgate_core::BlockerKind;
use fleetgate_core::audit::AuditEntry;
use fleetgate_store::{Store, StoreError, StoreErrorKind};
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Entries queued and not yet taken by the writer.
pub const QUEUE_CAPACITY: usize = 1024;
/// Entries the writer holds at most (a batch, and what failed before): past it, it stops
/// taking from the queue, so the queue fills and the next decisions say so.
pub const MAX_HELD: usize = 4096;
/// How long the writer waits for more entries before committing a batch nobody waits for.
/// Replicas of a member share one store and each has its writer: at 5 ms, three replicas'
/// writers committed 600 small batches a second between them and spent, per call, four times
/// the CPU one writer did, contending for the one write lock (issue 55). 20 ms gathers four
/// times the entries per commit; a `kill -9` may lose the read entries of its last 20 ms.
pub const LINGER: Duration = Duration::from_millis(20);
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

/// Where a waited-for entry stands; a writer and the waiter agree through it on whether
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
    Done(Result<i64, Failure>),
}

/// Why an entry was not committed.
#[derive(Debug, Clone)]
struct Failure {
    error: String,
    /// The store stayed locked past the waiter's bound: the waiter timed out.
    timed_out: bool,
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

    fn finish(&self, result: Result<i64, Failure>) {
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

/// Entries taken from the queue and not yet written (oldest first, each with its waiter
/// when someone waits for it), and the flushes waiting for them.
#[derive(Debug, Default)]
struct Batch {
    entries: Vec<AuditEntry>,
    waiters: Vec<Option<Arc<Waiter>>>,
    flushes: Vec<Arc<Waiter>>,
}

impl Batch {
    fn len(&self) -> usize {
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

    /// Commit everything held in one transaction. On failure every waiter is answered and
    /// each entry kept as its call ended (refused, when someone waited for it).
    fn write(&mut self, store: &dyn Store, wait: Duration) -> Result<(), StoreError> {
        let waiters = &self.waiters;
        let mut settle = |entries: &mut [AuditEntry]| {
            // The write lock is held: each waiter either gets this commit's outcome or has
            // given up, and then its entry says so.
            for (entry, waiter) in entries.iter_mut().zip(waiters) {
                let Some(waiter) = waiter else { continue };
                let mut stage = waiter.lock();
                match &*stage {
                    Stage::Pending => *stage = Stage::Claimed,
                    Stage::Abandoned(ms) => refuse(entry, not_confirmed(*ms)),
                    Stage::Claimed | Stage::Done(_) => {}
                }
            }
        };
        match store.append_audit_batch(&mut self.entries, &mut settle) {
            Ok(ids) => {
                let mut ids = ids.into_iter();
                for waiter in self.waiters.drain(..) {
                    let id = ids
                        .next()
                        .ok_or_else(|| Failure { error: "the store answered fewer ids".to_owned(), timed_out: false });
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
                Ok(())
            }
            Err(e) => {
                let error = e.to_string();
                // Locked past the bound of whoever waits: they time out, as they would
                // waiting for the writer thread.
                let timed_out = e.kind() == StoreErrorKind::Busy;
                let after_ms = millis(wait);
                for (entry, waiter) in self.entries.iter_mut().zip(self.waiters.iter_mut()) {
                    let Some(w) = waiter.take() else { continue };
                    let why = match &*w.lock() {
                        Stage::Abandoned(ms) => not_confirmed(*ms),
                        _ if timed_out => not_confirmed(after_ms),
                        _ => format!("audit append failed: {error}"),
                    };
                    refuse(entry, why);
                    w.finish(Err(Failure { error: error.clone(), timed_out }));
                }
                Err(e)
            }
        }
    }
}

/// The queue and who writes, shared by every handle and the writer thread.
#[derive(Debug, Default)]
struct State {
    /// Queued and not yet taken (at most [`QUEUE_CAPACITY`]).
    queue: VecDeque<Job>,
    /// An urgent job is queued (someone waits): no lingering.
    urgent: bool,
    /// What a failed write kept, to be written before anything queued (only while no
    /// writer has it out).
    held: Batch,
    /// A writer (the thread or a leader) has a batch out.
    writing: bool,
    /// After a failure: the backoff, and no write before this instant.
    backoff: Option<(Duration, Instant)>,
    /// The writer thread waits for a nudge (nothing to write, or a leader writing).
    idle: bool,
    /// The writer thread lingers for more entries (an urgent one cuts that short).
    lingering: bool,
    /// Every handle is gone: the writer thread writes what is left and stops.
    closed: bool,
}

#[derive(Debug)]
struct Shared {
    store: Arc<dyn Store>,
    state: Mutex<State>,
    /// The writer thread waits here.
    work: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wake the writer thread when it sleeps past what `state` now holds for it: idle with
    /// something to write, or lingering with someone waiting. Otherwise it wakes by itself
    /// (no wake-up per queued entry).
    fn nudge(&self, state: &mut State) {
        let pending = !state.queue.is_empty() || state.held.len() > 0;
        if (state.idle && pending) || (state.lingering && state.urgent) {
            state.idle = false;
            self.work.notify_one();
        }
    }

    /// Wait for a nudge.
    fn sleep<'a>(&self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        state.idle = true;
        let mut state = self.work.wait(state).unwrap_or_else(PoisonError::into_inner);
        state.idle = false;
        state
    }

    /// Wait at most `left` for more entries; a waiter, or the last handle going, cuts it
    /// short.
    fn linger<'a>(&self, mut state: MutexGuard<'a, State>, left: Duration) -> MutexGuard<'a, State> {
        state.lingering = true;
        let mut state = self.work.wait_timeout(state, left).unwrap_or_else(PoisonError::into_inner).0;
        state.lingering = false;
        state
    }

    /// Take what is held and queued (at most [`MAX_HELD`]), write it without the lock, and
    /// put back what failed. `state` must have no writer.
    fn write_turn<'a>(&'a self, mut state: MutexGuard<'a, State>, wait: Duration) -> (MutexGuard<'a, State>, bool) {
        let mut batch = std::mem::take(&mut state.held);
        while batch.len() < MAX_HELD {
            let Some(job) = state.queue.pop_front() else { break };
            batch.hold(job);
        }
        state.urgent = state.queue.iter().any(Job::urgent);
        state.writing = true;
        drop(state);
        let written = batch.write(&*self.store, wait);
        let mut state = self.lock();
        state.writing = false;
        let ok = match written {
            Ok(()) => {
                state.backoff = None;
                true
            }
            Err(error) => {
                tracing::warn!(%error, entries = batch.entries.len(), "audit batch not written; it is tried again");
                let next = state.backoff.map_or(BACKOFF_FIRST, |(b, _)| (b * 2).min(BACKOFF_MAX));
                state.backoff = Some((next, Instant::now() + next));
                state.held = batch;
                false
            }
        };
        // What was queued meanwhile, or kept, is the thread's.
        self.nudge(&mut state);
        (state, ok)
    }

    /// The writer thread: commit whatever is queued, lingering for more when nobody
    /// waits, backing off after a failure, until every handle is gone and nothing is left.
    fn run(&self, wait: Duration) {
        let mut state = self.lock();
        let mut linger_until: Option<Instant> = None;
        loop {
            let pending = !state.queue.is_empty() || state.held.len() > 0;
            if state.writing {
                state = self.sleep(state);
                continue;
            }
            if !pending {
                if state.closed {
                    return;
                }
                // After a commit the thread lingers with nothing queued rather than going
                // idle: under steady traffic the next batch gathers without anyone waking
                // it, one wake-up per batch instead of two (a nudge, then the linger).
                if let Some(until) = linger_until
                    && let Some(left) = until.checked_duration_since(Instant::now())
                    && !left.is_zero()
                {
                    state = self.linger(state, left);
                    continue;
                }
                linger_until = None;
                state = self.sleep(state);
                continue;
            }
            let now = Instant::now();
            if let Some((_, at)) = state.backoff
                && now < at
            {
                state = self.work.wait_timeout(state, at - now).unwrap_or_else(PoisonError::into_inner).0;
                continue;
            }
            // Entries nobody waits for gather a little; a waiter cuts it short.
            if !state.urgent && !state.closed && state.backoff.is_none() {
                let until = *linger_until.get_or_insert(now + LINGER);
                if now < until {
                    state = self.linger(state, until - now);
                    continue;
                }
            }
            let (next, ok) = self.write_turn(state, wait);
            state = next;
            linger_until = ok.then(|| Instant::now() + LINGER);
            if state.closed && !ok {
                tracing::error!(
                    entries = state.held.entries.len(),
                    "the audit writer stops with entries it could not write"
                );
                return;
            }
        }
    }
}

/// The handles' common part: when the last one goes, the writer thread finishes.
#[derive(Debug)]
struct Handle(Arc<Shared>);

impl Drop for Handle {
    fn drop(&mut self) {
        self.0.lock().closed = true;
        // Wherever it sleeps, the thread sees it is the last one.
        self.0.work.notify_one();
    }
}

/// Appends entries through a bounded queue, committed by one writer at a time.
#[derive(Debug, Clone)]
pub struct Auditor {
    handle: Arc<Handle>,
    wait: Duration,
    /// A waiter may commit itself ([`Store::bounds_waits`]).
    lead: bool,
    /// The writer thread runs.
    writer: bool,
}

impl Auditor {
    /// Start the writer thread over `store`; a waited-for entry is waited for at most
    /// `wait` before it is given up.
    pub fn new(store: Arc<dyn Store>, wait: Duration) -> Self {
        let lead = store.bounds_waits();
        let shared = Arc::new(Shared { store, state: Mutex::default(), work: Condvar::new() });
        let thread = Arc::clone(&shared);
        let writer = std::thread::Builder::new()
            .name("fleetgate-audit".into())
            .spawn(move || thread.run(wait))
            .inspect_err(|e| tracing::error!("cannot start the audit thread: {e}"))
            .is_ok();
        Self { handle: Arc::new(Handle(shared)), wait, lead, writer }
    }

    fn shared(&self) -> &Shared {
        &self.handle.0
    }

    /// Queue `job`; the state, still locked, for the caller to lead or nudge the thread.
    fn send(&self, job: Job) -> Result<MutexGuard<'_, State>, AuditReceipt> {
        if !self.writer {
            return Err(AuditReceipt::Failed { error: "the audit writer has stopped".into() });
        }
        let mut state = self.shared().lock();
        if state.queue.len() >= QUEUE_CAPACITY {
            return Err(AuditReceipt::Failed { error: "the audit queue is full".into() });
        }
        state.urgent |= job.urgent();
        state.queue.push_back(job);
        Ok(state)
    }

    /// Queue `entry` without waiting for it (a read call's, a report's).
    pub fn queue(&self, entry: AuditEntry) -> AuditReceipt {
        let receipt = match self.send(Job::Entry(entry, None)) {
            Ok(mut state) => {
                self.shared().nudge(&mut state);
                AuditReceipt::Queued
            }
            Err(failed) => failed,
        };
        if let Some(problem) = receipt.problem() {
            tracing::error!(%problem, "audit entry not queued");
        }
        receipt
    }

    /// Append `entry` and wait, at most the bound, until it is committed (a mutating
    /// call's: forwarded only when this answers [`AuditReceipt::Appended`]).
    pub fn record(&self, entry: AuditEntry) -> AuditReceipt {
        let started = Instant::now();
        let waiter = Waiter::new();
        let receipt = match self.send(Job::Entry(entry, Some(waiter.clone()))) {
            Err(failed) => failed,
            Ok(mut state) => {
                if self.lead && !state.writing && state.backoff.is_none() {
                    // Lead: commit the queue, this entry included, on this thread.
                    let budget = self.wait.saturating_sub(started.elapsed());
                    drop(fleetgate_store::within(budget, || self.shared().write_turn(state, self.wait)));
                } else {
                    self.shared().nudge(&mut state);
                    drop(state);
                }
                self.await_entry(&waiter, started)
            }
        };
        if let Some(problem) = receipt.problem() {
            tracing::error!(%problem, "audit entry not confirmed");
        }
        receipt
    }

    fn await_entry(&self, waiter: &Waiter, started: Instant) -> AuditReceipt {
        let after_ms = millis(self.wait);
        let deadline = started + self.wait;
        let mut stage = waiter.lock();
        loop {
            let now = Instant::now();
            match &*stage {
                Stage::Done(Ok(id)) => return AuditReceipt::Appended { id: *id },
                Stage::Done(Err(Failure { timed_out: true, .. })) => return AuditReceipt::TimedOut { after_ms },
                Stage::Done(Err(failure)) => return AuditReceipt::Failed { error: failure.error.clone() },
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

    /// Whether the writer thread sleeps until nudged (nothing queued, its linger over):
    /// what the tests of its wake-ups observe instead of sleeping past [`LINGER`].
    pub fn writer_is_idle(&self) -> bool {
        self.shared().lock().idle
    }

    /// Wait, at most `within`, until everything queued so far is committed (orderly
    /// shutdown). False when it is not.
    pub fn flush(&self, within: Duration) -> bool {
        let waiter = Waiter::new();
        match self.send(Job::Flush(waiter.clone())) {
            Ok(mut state) => self.shared().nudge(&mut state),
            Err(_) => return false,
        }
        let stage = waiter.lock();
        let (stage, _) = waiter
            .changed
            .wait_timeout_while(stage, within, |s| !matches!(s, Stage::Done(_)))
            .unwrap_or_else(PoisonError::into_inner);
        matches!(*stage, Stage::Done(Ok(_)))
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn not_confirmed(ms: u64) -> String {
    format!("audit append not confirmed within {ms} ms")
}

/// An entry given up on by its waiter, as it is written: the refusal the call got.
fn refuse(entry: &mut AuditEntry, why: String) {
    if entry.allowed {
        entry.allowed = false;
        entry.blocker_kind = Some(BlockerKind::AuditUnavailable.as_str().to_owned());
        entry.reasons.push(why);
    }
}

/// The whole audit log read page by page, by id, in bounded memory (`rules test`,
/// `rules shadow-report` on a log of any size). An iterator of entries; a read that fails
/// ends it, and [`AuditScan::finish`] returns the failure.
pub struct AuditScan<'s> {
    store: &'s dyn Store,
    after: i64,
    page: std::vec::IntoIter<AuditEntry>,
    size: usize,
    done: bool,
    error: Option<fleetgate_store::StoreError>,
    read: u64,
    progress: Option<Box<dyn FnMut(u64) + 's>>,
}

impl std::fmt::Debug for AuditScan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditScan").field("after", &self.after).field("read", &self.read).finish_non_exhaustive()
    }
}

/// Entries read per page.
pub const SCAN_PAGE: usize = 10_000;

impl<'s> AuditScan<'s> {
    /// A scan of `store`'s log from its first entry, `size` entries a page.
    pub fn new(store: &'s dyn Store, size: usize) -> Self {
        Self {
            store,
            after: 0,
            page: Vec::new().into_iter(),
            size: size.max(1),
            done: false,
            error: None,
            read: 0,
            progress: None,
        }
    }

    /// Call `progress` with the count read so far after each page.
    #[must_use]
    pub fn with_progress(mut self, progress: impl FnMut(u64) + 's) -> Self {
        self.progress = Some(Box::new(progress));
        self
    }

    /// How many entries were read, or the read that failed.
    pub fn finish(self) -> Result<u64, fleetgate_store::StoreError> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.read),
        }
    }
}

impl Iterator for AuditScan<'_> {
    type Item = AuditEntry;

    fn next(&mut self) -> Option<AuditEntry> {
        loop {
            if let Some(entry) = self.page.next() {
                return Some(entry);
            }
            if self.done {
                return None;
            }
            match self.store.audit_after(self.after, self.size) {
                Ok(page) => {
                    self.done = page.len() < self.size;
                    self.read += page.len() as u64;
                    if let Some(last) = page.last().and_then(|e| e.id) {
                        self.after = last;
                    } else {
                        self.done = true;
                    }
                    if let Some(progress) = &mut self.progress {
                        progress(self.read);
                    }
                    self.page = page.into_iter();
                }
                Err(e) => {
                    self.error = Some(e);
                    self.done = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod scan_tests {
    use super::*;

    #[test]
    fn a_scan_reads_every_entry_once_a_page_at_a_time_and_reports_progress() {
        let dir = tempfile::tempdir().unwrap();
        let store = fleetgate_store::open(dir.path().join("s.sqlite3").to_str().unwrap()).unwrap();
        for i in 0..5 {
            let at = fleetgate_core::Timestamp::from_unix(1_800_000_000 + i);
            let e = fleetgate_core::audit::AuditEntry::event(at, "prgs-author", &format!("t{i}"), String::new());
            store.append_audit(&e).unwrap();
        }
        let mut seen = Vec::new();
        let mut scan = AuditScan::new(&*store, 2).with_progress(|n| seen.push(n));
        let tools: Vec<String> = scan.by_ref().map(|e| e.tool).collect();
        assert_eq!(scan.finish().unwrap(), 5);
        assert_eq!(tools, ["t0", "t1", "t2", "t3", "t4"]);
        assert_eq!(seen, [2, 4, 5]);
    }
}
