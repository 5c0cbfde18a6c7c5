//! The dashboard's one reader: a thread that looks at the store and the host on an
//! interval, builds the view, and publishes it. Subscribers (the `/events` streams)
//! are woken only when what the page shows changed; `/api/fleet` always reads the
//! newest look. The store is synchronous, so the reads run here and never on an
//! async worker.
//!
//! **Invariant:** nothing here writes to the store: a look only lists.

use super::view::{AUDIT_WINDOW, FleetView, Look, build};
use fleetgate_config::FleetConfig;
use fleetgate_control::gate::{Observer, read_fleet, snapshot_of};
use fleetgate_control::metrics::FleetMetrics;
use fleetgate_core::Clock;
use fleetgate_host::probe::probe_pid;
use fleetgate_store::Store;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// One published look.
#[derive(Debug)]
pub struct Published {
    /// The view's `version`.
    pub version: u64,
    /// The view as JSON (the `/api/fleet` body and the SSE `data`).
    pub json: String,
}

/// What a look reads from.
#[derive(Clone)]
pub struct Source {
    /// The roster.
    pub config: FleetConfig,
    /// The store.
    pub store: Arc<dyn Store>,
    /// The decision clock.
    pub clock: Arc<dyn Clock>,
    /// The host, as the gate observes it.
    pub observer: Arc<dyn Observer>,
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source").field("store", &self.store.describe()).finish_non_exhaustive()
    }
}

impl Source {
    /// Look once: the live snapshot and the worker rows (from one store read), the
    /// newest audit entries and the live PR leases.
    pub fn look(&self) -> FleetView {
        let now = self.clock.now();
        let mut read = read_fleet(Ok(&*self.store));
        let workers = read.as_mut().map(|fleet| std::mem::take(&mut fleet.workers)).map_err(|e| e.clone());
        let snap = snapshot_of(&self.config, read, &*self.observer, now, None);
        let audit = self.store.list_audit(None, AUDIT_WINDOW);
        let leases = self.store.list_pr_leases(true, now);
        let locks = self.store.list_review_locks(true);
        let approvals = self.store.list_approvals(true);
        let prs = self.pr_states(leases.as_deref().unwrap_or_default(), locks.as_deref().unwrap_or_default(), now);
        let store = self.store.describe();
        let policy = fleetgate_control::policy::notes(&self.config, None).labelled();
        let owed: Result<Vec<_>, _> =
            self.config.approvals.notify.iter().map(|t| fleetgate_control::notify::owed(&*self.store, t)).collect();
        let look = Look {
            fleet_name: &self.config.name,
            store: &store,
            snapshot: &snap,
            workers: workers.as_deref(),
            audit: audit.as_deref(),
            pr_leases: leases.as_deref(),
            prs: prs.as_deref(),
            review_locks: locks.as_deref(),
            approvals: approvals.as_deref(),
            policy: &policy,
            notify: owed.as_deref(),
            now,
        };
        build(&look, &|pid| probe_pid(pid).is_alive())
    }
}

impl Source {
    /// Each PR with a live lease or lock, assessed as of the head they name (the newest
    /// lease's, else the lock's): the page reads no forge, so a head pushed since shows once
    /// a lease is claimed at it.
    fn pr_states(
        &self,
        leases: &[fleetgate_core::workflow::PrLease],
        locks: &[fleetgate_core::decision_lock::ReviewLock],
        now: fleetgate_core::Timestamp,
    ) -> Result<Vec<fleetgate_core::workflow::Assessment>, fleetgate_store::StoreError> {
        use fleetgate_control::gate::workflow::AsState;
        use fleetgate_core::workflow::{ForgeState, PrRef, Purpose, assess};
        let mut prs: Vec<PrRef> =
            leases.iter().filter(|l| l.terms.purpose != Purpose::Author).map(|l| l.terms.pr.clone()).collect();
        prs.extend(locks.iter().map(|l| l.pr.clone()));
        prs.sort();
        prs.dedup();
        let independence = self.config.workflow.independent_review;
        prs.into_iter()
            .map(|pr| {
                let newest = leases
                    .iter()
                    .filter(|l| l.terms.pr == pr && l.terms.purpose != Purpose::Author)
                    .max_by_key(|l| l.claimed_at);
                let (head, base) = match (newest, locks.iter().find(|l| l.pr == pr)) {
                    (Some(l), _) => (l.terms.candidate_head.clone(), l.terms.target_branch.clone()),
                    (None, Some(lock)) => (lock.head.clone(), None),
                    (None, None) => (String::new(), None),
                };
                let held = self.store.pr_records(&pr)?;
                // A lock names no base: its decision's.
                let base =
                    base.or_else(|| held.decisions.iter().rev().find(|d| d.head == head).and_then(|d| d.base.clone()));
                Ok(assess(pr, &held.state(), (&head, base.as_deref(), ForgeState::Open), independence, now))
            })
            .collect()
    }
}

/// Publishes looks; remembers what the last one showed.
#[derive(Debug)]
pub struct Publisher {
    tx: watch::Sender<Arc<Published>>,
    metrics: FleetMetrics,
    version: u64,
    fingerprint: String,
}

impl Publisher {
    /// A publisher whose first value is `first` (version 1).
    pub fn new(mut first: FleetView, metrics: FleetMetrics) -> (Self, watch::Receiver<Arc<Published>>) {
        first.version = 1;
        metrics.set(&first.gauges());
        let fingerprint = first.fingerprint();
        let (tx, rx) = watch::channel(Arc::new(publish(&first)));
        (Self { tx, metrics, version: 1, fingerprint }, rx)
    }

    /// Publish a look: always the newest for readers, a wake-up for subscribers only
    /// when it differs from the last beyond the clock. True when it did.
    pub fn offer(&mut self, mut view: FleetView) -> bool {
        self.metrics.set(&view.gauges());
        let fingerprint = view.fingerprint();
        let changed = fingerprint != self.fingerprint;
        if changed {
            self.version += 1;
            self.fingerprint = fingerprint;
            self.metrics.updates.inc();
        }
        view.version = self.version;
        let published = Arc::new(publish(&view));
        self.tx.send_if_modified(|current| {
            *current = published;
            changed
        });
        changed
    }
}

fn publish(view: &FleetView) -> Published {
    Published { version: view.version, json: view.page_json() }
}

/// Look every `interval` until `stop` says so (or its sender is gone). The wait is on
/// the channel, so stopping is prompt.
pub fn run(source: &Source, mut publisher: Publisher, interval: Duration, stop: &Receiver<()>) {
    loop {
        match stop.recv_timeout(interval) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
        let started = Instant::now();
        let view = source.look();
        publisher.metrics.refreshes.inc();
        publisher.metrics.refresh_seconds.observe(started.elapsed().as_secs_f64());
        if publisher.offer(view) {
            tracing::debug!(version = publisher.version, "fleet changed");
        }
    }
}
