//! The audit trail of mutation-gate decisions. Appends run on their own
//! thread: a decision waits for its entry at most a bounded time, and a
//! failure or timeout is reported back to the caller, never swallowed.

use fleetgate_core::audit::AuditEntry;
use fleetgate_store::Store;
use serde::Serialize;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender, TrySendError};
use std::time::Duration;

/// How an append went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "audit", rename_all = "snake_case")]
pub enum AuditReceipt {
    /// Stored with this sequence number.
    Appended {
        /// The entry's id.
        id: i64,
    },
    /// The store refused or failed.
    Failed {
        /// Why.
        error: String,
    },
    /// Not confirmed within the bound; the append may still land.
    TimedOut {
        /// The bound that passed.
        after_ms: u64,
    },
}

impl AuditReceipt {
    /// The reason to attach to a decision when the entry is not known to be stored.
    pub fn problem(&self) -> Option<String> {
        match self {
            Self::Appended { .. } => None,
            Self::Failed { error } => Some(format!("audit append failed: {error}")),
            Self::TimedOut { after_ms } => Some(format!("audit append not confirmed within {after_ms} ms")),
        }
    }
}

type Job = (AuditEntry, Sender<Result<i64, String>>);

/// Appends entries through a bounded queue to one writer thread.
#[derive(Debug, Clone)]
pub struct Auditor {
    queue: SyncSender<Job>,
    wait: Duration,
}

impl Auditor {
    /// Start the writer thread over `store`; each `record` waits at most `wait`.
    pub fn new(store: Arc<dyn Store>, wait: Duration) -> Self {
        let (queue, jobs): (SyncSender<Job>, Receiver<Job>) = mpsc::sync_channel(1024);
        std::thread::Builder::new()
            .name("fleetgate-audit".into())
            .spawn(move || {
                for (entry, reply) in jobs {
                    let _ = reply.send(store.append_audit(&entry).map_err(|e| e.to_string()));
                }
            })
            .map(drop)
            .unwrap_or_else(|e| tracing::error!("cannot start the audit thread: {e}"));
        Self { queue, wait }
    }

    /// Append `entry`, waiting at most the bound for confirmation.
    pub fn record(&self, entry: AuditEntry) -> AuditReceipt {
        let (reply, answer) = mpsc::channel();
        let receipt = match self.queue.try_send((entry, reply)) {
            Err(TrySendError::Full(_)) => AuditReceipt::Failed { error: "the audit queue is full".into() },
            Err(TrySendError::Disconnected(_)) => AuditReceipt::Failed { error: "the audit writer has stopped".into() },
            Ok(()) => match answer.recv_timeout(self.wait) {
                Ok(Ok(id)) => AuditReceipt::Appended { id },
                Ok(Err(error)) => AuditReceipt::Failed { error },
                Err(RecvTimeoutError::Timeout) => {
                    AuditReceipt::TimedOut { after_ms: u64::try_from(self.wait.as_millis()).unwrap_or(u64::MAX) }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    AuditReceipt::Failed { error: "the audit writer stopped before answering".into() }
                }
            },
        };
        if let Some(problem) = receipt.problem() {
            tracing::error!(%problem, "audit entry not confirmed");
        }
        receipt
    }
}
