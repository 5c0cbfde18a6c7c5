//! The operator's side of approvals (`fleetgate approvals`): the waiting requests as a
//! table, and an answer — recorded once, on a pending request only, and audited with who
//! gave it.

use fleetgate_core::Timestamp;
use fleetgate_core::approval::ApprovalRequest;
use fleetgate_core::audit::AuditEntry;
use fleetgate_core::text::{shown, table};
use fleetgate_store::{Store, StoreError};

/// The audit log's name for an approval's events.
pub const APPROVAL_EVENT: &str = "approval";

/// The requests as a table (id, when, who, tool, the exact arguments).
pub fn table_of(requests: &[ApprovalRequest]) -> String {
    if requests.is_empty() {
        return "no approval requests".into();
    }
    let rows: Vec<Vec<String>> = requests
        .iter()
        .map(|r| {
            let arguments = r
                .arguments
                .as_ref()
                .map_or_else(|| "{}".to_owned(), |a| serde_json::Value::from(a.clone()).to_string());
            vec![
                r.id.clone(),
                r.state.to_string(),
                r.requested_at.to_string(),
                format!("{} ({})", r.profile, r.worker.as_deref().unwrap_or("-")),
                r.tool.clone(),
                shown(&arguments, 200),
            ]
        })
        .collect();
    table(&["ID", "STATE", "ASKED", "WHO", "TOOL", "ARGUMENTS"], &rows)
}

/// Why an answer was not recorded.
#[derive(Debug)]
pub enum AnswerError {
    /// No such request, or it is not pending (answered, withdrawn): it as it stands.
    NotPending(Option<Box<ApprovalRequest>>),
    /// The store failed.
    Store(StoreError),
}

impl std::fmt::Display for AnswerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotPending(None) => f.write_str("no such approval request"),
            Self::NotPending(Some(r)) => write!(f, "approval request {} is {}, not pending", r.id, r.state),
            Self::Store(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for AnswerError {}

/// Approve (or deny) the pending request `id` as `by`, and audit the answer.
pub fn answer(
    store: &dyn Store,
    id: &str,
    approve: bool,
    by: &str,
    reason: Option<&str>,
    now: Timestamp,
) -> Result<ApprovalRequest, AnswerError> {
    let Some(answered) = store.answer_approval(id, approve, by, reason, now).map_err(AnswerError::Store)? else {
        return Err(AnswerError::NotPending(store.approval(id).map_err(AnswerError::Store)?.map(Box::new)));
    };
    let word = if approve { "approved" } else { "denied" };
    let event = format!(
        "approval request {id} ({} `{}` for worker {}) {word} by {by}{}",
        answered.profile,
        answered.tool,
        answered.worker.as_deref().unwrap_or("-"),
        reason.map(|r| format!(": {r}")).unwrap_or_default()
    );
    store.append_audit(&AuditEntry::event(now, "operator", APPROVAL_EVENT, event)).map_err(AnswerError::Store)?;
    Ok(answered)
}

/// The store's word that approvals changed, for the calls this process holds: one thread,
/// while any call waits, blocks on the store's [`fleetgate_store::ApprovalWatch`]
/// (PostgreSQL `LISTEN`, SQLite inotify) and bumps a version every waiter watches; each
/// waiter then reads its own request again. Without a change it bumps every
/// [`BACKSTOP`] anyway, so a filesystem that reports nothing delays an answer, never loses it.
#[derive(Debug, Clone)]
pub struct AnswerWatch {
    inner: std::sync::Arc<WatchInner>,
}

#[derive(Debug)]
struct WatchInner {
    tx: tokio::sync::watch::Sender<u64>,
    /// The watching thread runs (it ends when no call waits).
    running: std::sync::Mutex<bool>,
}

/// How long the watch waits for the store's word before the waiters look again anyway.
pub const BACKSTOP: std::time::Duration = std::time::Duration::from_secs(10);

impl Default for AnswerWatch {
    fn default() -> Self {
        Self {
            inner: std::sync::Arc::new(WatchInner {
                tx: tokio::sync::watch::Sender::new(0),
                running: std::sync::Mutex::new(false),
            }),
        }
    }
}

impl AnswerWatch {
    /// Follow the changes of `store`'s approvals (the watching thread starts if it is not running).
    pub fn subscribe(&self, store: &std::sync::Arc<dyn Store>) -> tokio::sync::watch::Receiver<u64> {
        let rx = self.inner.tx.subscribe();
        let mut running = self.inner.running.lock().unwrap_or_else(|e| e.into_inner());
        if !*running {
            let (inner, store) = (std::sync::Arc::clone(&self.inner), std::sync::Arc::clone(store));
            let spawned =
                std::thread::Builder::new().name("approval-watch".into()).spawn(move || watch(&inner, &*store));
            match spawned {
                Ok(_) => *running = true,
                Err(e) => {
                    tracing::warn!(error = %e, "the approvals watch could not start; held calls look again every 10 s")
                }
            }
        }
        rx
    }

    /// Wake every waiter now (a request of this process was withdrawn).
    pub fn nudge(&self) {
        self.inner.tx.send_modify(|v| *v += 1);
    }
}

fn watch(inner: &WatchInner, store: &dyn Store) {
    let mut watching: Option<Box<dyn fleetgate_store::ApprovalWatch>> = None;
    loop {
        let changed = match &mut watching {
            Some(w) => w.wait(BACKSTOP),
            None => store.approval_watch().map(|w| {
                watching = Some(w);
                // Not listening until now: an answer may have come meanwhile.
                true
            }),
        };
        match changed {
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "the approvals watch failed; it starts again");
                watching = None;
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        }
        // Every outcome wakes the waiters: a change, the backstop, or a failed watch.
        inner.tx.send_modify(|v| *v += 1);
        let mut running = inner.running.lock().unwrap_or_else(|e| e.into_inner());
        if inner.tx.receiver_count() == 0 {
            *running = false;
            return;
        }
    }
}
