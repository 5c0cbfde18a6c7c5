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
