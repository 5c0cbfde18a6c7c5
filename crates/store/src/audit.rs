//! The audit trail's operations ([`Audit`]), written once for both engines.

use crate::StoreError;
use crate::engine::{Engine, Exec, Retry};
use crate::rows::{self, Value};
use fleetgate_core::Timestamp;
use fleetgate_core::audit::AuditEntry;

/// The audit trail of gate decisions: appended in order, read back in pages.
/// Part of [`crate::Store`]; every operation is written once, over any engine, below.
pub trait Audit {
    /// Append one audit entry; returns its sequence number.
    fn append_audit(&self, entry: &AuditEntry) -> Result<i64, StoreError>;

    /// Append `entries` in one write transaction; their sequence numbers, in order.
    /// `settle` runs once that transaction has begun (holding the store's write lock where it has one),
    /// before anything is written, and may rewrite the entries: the auditor's group commit
    /// decides there, for each entry someone waits for, whether it is written as the
    /// waiter's or as given up. Nothing is appended when it fails.
    fn append_audit_batch(
        &self,
        entries: &mut [AuditEntry],
        settle: &mut (dyn FnMut(&mut [AuditEntry]) + Send),
    ) -> Result<Vec<i64>, StoreError>;

    /// Audit entries at or after `since`, oldest first, at most `limit` (the newest ones).
    fn list_audit(&self, since: Option<Timestamp>, limit: usize) -> Result<Vec<AuditEntry>, StoreError>;

    /// At most `limit` audit entries after the entry `after` (an id; 0: from the first), by id:
    /// one page of a read of the whole log in bounded memory (`rules test`).
    fn audit_after(&self, after: i64, limit: usize) -> Result<Vec<AuditEntry>, StoreError>;
}

impl<E: Engine> Audit for E {
    fn append_audit(&self, entry: &AuditEntry) -> Result<i64, StoreError> {
        self.around("append_audit", || {
            let values = rows::audit_values(entry)?;
            // Not retried: an append that committed would be recorded twice.
            self.run("cannot append audit entry", Retry::Never, |c| c.query_one(&self.sql().append_audit, &values))
        })
    }

    fn append_audit_batch(
        &self,
        entries: &mut [AuditEntry],
        settle: &mut (dyn FnMut(&mut [AuditEntry]) + Send),
    ) -> Result<Vec<i64>, StoreError> {
        self.around("append_audit_batch", || {
            let sql = &self.sql().append_audit;
            // Not retried, like one append.
            self.write("cannot append audit entries", Retry::Never, |c| {
                settle(entries);
                let mut ids = Vec::with_capacity(entries.len());
                for entry in entries.iter() {
                    ids.push(c.query_one(sql, &rows::audit_values(entry)?)?);
                }
                Ok(ids)
            })
        })
    }

    fn list_audit(&self, since: Option<Timestamp>, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        self.around("list_audit", || {
            let args = [Value::Time(since), Value::Int(Some(i64::try_from(limit).unwrap_or(i64::MAX)))];
            self.run("cannot list audit entries", Retry::Read, |c| c.query(&self.sql().list_audit, &args))
        })
    }

    fn audit_after(&self, after: i64, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        self.around("audit_after", || {
            let args = [Value::Int(Some(after)), Value::Int(Some(i64::try_from(limit).unwrap_or(i64::MAX)))];
            self.run("cannot read audit entries", Retry::Read, |c| c.query(&self.sql().audit_after, &args))
        })
    }
}
