//! The rows of every table, written once for both engines: the column lists,
//! how a record becomes statement parameters ([`Value`]) and how a row read
//! back becomes a record again ([`Record`], over [`Columns`]).
//!
//! A column list's order is the order of the parameters its encoder returns
//! and of the indices its decoder reads, so the three cannot drift apart: the
//! encoders return arrays as long as their lists. Each engine adapts only its
//! own types (SQLite keeps times as `%Y-%m-%dT%H:%M:%SZ` text, PostgreSQL as
//! `timestamptz`; SQLite's booleans are integers).

use crate::{HostIdentity, HostObservation, StoreError, StoreErrorKind};
use fleetgate_core::Timestamp;
use fleetgate_core::audit::AuditEntry;
use fleetgate_core::runtime::{CohortSource, ProcessScan, RuntimeRecord, RuntimeStatus};
use fleetgate_core::worker::{
    ClaimOutcome, HeartbeatRequest, RegisterOutcome, Registration, WorkerIds, WorkerRecord, WorkerStatus,
};
use std::borrow::Cow;

/// The `workers` table.
pub(crate) const WORKER: [&str; 14] = [
    "worker_identity",
    "client_name",
    "client_instance_id",
    "session_id",
    "generation_id",
    "role",
    "profile",
    "pid",
    "started_at",
    "last_heartbeat_at",
    "heartbeat_ttl_seconds",
    "fencing_epoch",
    "status",
    "renewal_count",
];

/// The `runtimes` table; its key first. The host's two columns came with
/// schema v4, at the end.
pub(crate) const RUNTIME: [&str; 21] = [
    "runtime_id",
    "namespace",
    "profile",
    "role",
    "remote",
    "org",
    "repo",
    "repository_root",
    "pid",
    "cohort_id",
    "cohort_source",
    "client_provenance",
    "boot_id",
    "startup_head",
    "daemon_start_head",
    "transport",
    "registered_at",
    "last_heartbeat_at",
    "status",
    "host_id",
    "host_boot_id",
];

/// The `audit_log` table. `id` is the store's to assign: [`audit_values`]
/// encodes the rest, `AUDIT[1..]`.
pub(crate) const AUDIT: [&str; 10] = [
    "id",
    "at",
    "profile",
    "worker_identity",
    "tool",
    "allowed",
    "blocker_kind",
    "reasons",
    "principal",
    "judged_call",
];

/// The `host_observations` table; its key first.
pub(crate) const OBSERVATION: [&str; 4] = ["host_id", "boot_id", "observed_at", "scan"];

/// `a, b, c`: a column list as SQL writes it.
pub(crate) fn names(columns: &[&str]) -> String {
    columns.join(", ")
}

/// One statement parameter. Each engine binds it as its own type.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value<'a> {
    /// Text, or NULL.
    Text(Option<Cow<'a, str>>),
    /// A 64-bit integer, or NULL.
    Int(Option<i64>),
    /// A double.
    Real(f64),
    /// A boolean.
    Bool(bool),
    /// An instant, or NULL.
    Time(Option<Timestamp>),
}

/// Text.
pub(crate) fn text(v: &str) -> Value<'_> {
    Value::Text(Some(Cow::Borrowed(v)))
}

/// Text, or NULL.
pub(crate) fn opt_text(v: Option<&str>) -> Value<'_> {
    Value::Text(v.map(Cow::Borrowed))
}

pub(crate) fn json(what: &str, v: &impl serde::Serialize) -> Result<Value<'static>, StoreError> {
    let encoded = serde_json::to_string(v)
        .map_err(|e| StoreError::new(StoreErrorKind::Invalid, format!("cannot encode {what}: {e}")))?;
    Ok(Value::Text(Some(Cow::Owned(encoded))))
}

/// A worker row, in [`WORKER`]'s order.
pub(crate) fn worker_values(row: &WorkerRecord) -> [Value<'_>; WORKER.len()] {
    [
        text(&row.ids.worker_identity),
        text(&row.ids.client_name),
        text(&row.ids.client_instance_id),
        text(&row.ids.session_id),
        text(&row.ids.generation_id),
        text(&row.ids.role),
        text(&row.ids.profile),
        Value::Int(row.ids.pid),
        Value::Time(Some(row.started_at)),
        Value::Time(Some(row.last_heartbeat_at)),
        Value::Real(row.heartbeat_ttl_seconds),
        Value::Int(Some(row.fencing_epoch)),
        text(row.status.as_str()),
        Value::Int(Some(row.renewal_count)),
    ]
}

/// A runtime row, its host included, in [`RUNTIME`]'s order.
pub(crate) fn runtime_values(row: &RuntimeRecord) -> [Value<'_>; RUNTIME.len()] {
    let host = row.host.as_ref();
    [
        text(&row.runtime_id),
        text(&row.namespace),
        text(&row.profile),
        text(&row.role),
        opt_text(row.remote.as_deref()),
        opt_text(row.org.as_deref()),
        opt_text(row.repo.as_deref()),
        opt_text(row.repository_root.as_deref()),
        Value::Int(Some(row.pid)),
        opt_text(row.cohort_id.as_deref()),
        text(row.cohort_source.as_str()),
        text(&row.client_provenance),
        text(&row.boot_id),
        opt_text(row.startup_head.as_deref()),
        opt_text(row.daemon_start_head.as_deref()),
        text(&row.transport),
        Value::Time(Some(row.registered_at)),
        Value::Time(row.last_heartbeat_at),
        text(row.status.as_str()),
        opt_text(host.map(|h| h.host_id.as_str())),
        opt_text(host.map(|h| h.boot_id.as_str())),
    ]
}

/// An audit entry without its id, in `AUDIT[1..]`'s order.
pub(crate) fn audit_values(entry: &AuditEntry) -> Result<[Value<'_>; AUDIT.len() - 1], StoreError> {
    Ok([
        Value::Time(Some(entry.at)),
        text(&entry.profile),
        opt_text(entry.worker_identity.as_deref()),
        text(&entry.tool),
        Value::Bool(entry.allowed),
        opt_text(entry.blocker_kind.as_deref()),
        json("audit reasons", &entry.reasons)?,
        opt_text(entry.principal.as_deref()),
        match &entry.call {
            Some(call) => json("the judged call", call)?,
            None => Value::Text(None),
        },
    ])
}

/// A host's observation, in [`OBSERVATION`]'s order.
pub(crate) fn observation_values<'a>(
    host: &'a HostIdentity,
    scan: &ProcessScan,
    at: Timestamp,
) -> Result<[Value<'a>; OBSERVATION.len()], StoreError> {
    Ok([text(&host.host_id), text(&host.boot_id), Value::Time(Some(at)), json("process scan", scan)?])
}

/// The parameters of a renewal's fence, numbered as both engines' guarded
/// `UPDATE` reads them: `1` the worker, `2` now, `3` the epoch, then the
/// optional expectations `4` session, `5` generation, `6` client, `7` pid.
pub(crate) fn renewal_values(request: &HeartbeatRequest, now: Timestamp) -> [Value<'_>; 7] {
    [
        text(&request.worker_identity),
        Value::Time(Some(now)),
        Value::Int(Some(request.fencing_epoch)),
        opt_text(request.expected_session_id.as_deref()),
        opt_text(request.expected_generation_id.as_deref()),
        Value::Text(request.normalized_expected_client().map(Cow::Owned)),
        Value::Int(request.expected_pid),
    ]
}

/// A row as an engine returns it, read by column index. An engine implements
/// the nullable readers and says how it reports a value it cannot use; the
/// rest follows.
pub(crate) trait Columns {
    /// The engine's error for a column that does not read.
    type Error;

    /// Text, or `None` for NULL.
    fn opt_text(&self, i: usize) -> Result<Option<String>, Self::Error>;
    /// A 64-bit integer, or `None` for NULL.
    fn opt_int(&self, i: usize) -> Result<Option<i64>, Self::Error>;
    /// A double.
    fn real(&self, i: usize) -> Result<f64, Self::Error>;
    /// A boolean.
    fn boolean(&self, i: usize) -> Result<bool, Self::Error>;
    /// An instant, or `None` for NULL.
    fn opt_time(&self, i: usize) -> Result<Option<Timestamp>, Self::Error>;
    /// Column `i` holds a value the record cannot take.
    fn invalid(&self, i: usize, why: String) -> Self::Error;

    /// Text that must be there.
    fn text(&self, i: usize) -> Result<String, Self::Error> {
        self.opt_text(i)?.ok_or_else(|| self.invalid(i, "is NULL".into()))
    }

    /// An integer that must be there.
    fn int(&self, i: usize) -> Result<i64, Self::Error> {
        self.opt_int(i)?.ok_or_else(|| self.invalid(i, "is NULL".into()))
    }

    /// An instant that must be there.
    fn time(&self, i: usize) -> Result<Timestamp, Self::Error> {
        self.opt_time(i)?.ok_or_else(|| self.invalid(i, "is NULL".into()))
    }

    /// A stored literal (`what` names it in the error), read by `parse`.
    fn literal<T>(&self, i: usize, what: &str, parse: fn(&str) -> Option<T>) -> Result<T, Self::Error> {
        let text = self.text(i)?;
        parse(&text).ok_or_else(|| self.invalid(i, format!("unknown {what} {text:?}")))
    }

    /// A JSON document as serde wrote it.
    fn json<T: serde::de::DeserializeOwned>(&self, i: usize) -> Result<T, Self::Error> {
        serde_json::from_str(&self.text(i)?).map_err(|e| self.invalid(i, e.to_string()))
    }
}

/// What a row reads as: a record in its table's column order, or the
/// scalars a statement answers.
pub(crate) trait Record: Sized {
    /// Read one row.
    fn read<R: Columns>(r: &R) -> Result<Self, R::Error>;
}

/// A count or an id.
impl Record for i64 {
    fn read<R: Columns>(r: &R) -> Result<Self, R::Error> {
        r.int(0)
    }
}

/// A worker's epoch and renewal count.
impl Record for (i64, i64) {
    fn read<R: Columns>(r: &R) -> Result<Self, R::Error> {
        Ok((r.int(0)?, r.int(1)?))
    }
}

/// A worker row read in [`WORKER`]'s order.
impl Record for WorkerRecord {
    fn read<R: Columns>(r: &R) -> Result<Self, R::Error> {
        Ok(WorkerRecord {
            ids: WorkerIds {
                worker_identity: r.text(0)?,
                client_name: r.text(1)?,
                client_instance_id: r.text(2)?,
                session_id: r.text(3)?,
                generation_id: r.text(4)?,
                role: r.text(5)?,
                profile: r.text(6)?,
                pid: r.opt_int(7)?,
            },
            started_at: r.time(8)?,
            last_heartbeat_at: r.time(9)?,
            heartbeat_ttl_seconds: r.real(10)?,
            fencing_epoch: r.int(11)?,
            status: r.literal(12, "worker status", WorkerStatus::parse)?,
            renewal_count: r.int(13)?,
        })
    }
}

/// A runtime row read in [`RUNTIME`]'s order. Half a host (one of its
/// columns NULL) is no host: its whereabouts are unknown.
impl Record for RuntimeRecord {
    fn read<R: Columns>(r: &R) -> Result<Self, R::Error> {
        Ok(RuntimeRecord {
            runtime_id: r.text(0)?,
            namespace: r.text(1)?,
            profile: r.text(2)?,
            role: r.text(3)?,
            remote: r.opt_text(4)?,
            org: r.opt_text(5)?,
            repo: r.opt_text(6)?,
            repository_root: r.opt_text(7)?,
            pid: r.int(8)?,
            cohort_id: r.opt_text(9)?,
            cohort_source: r.literal(10, "cohort source", CohortSource::parse)?,
            client_provenance: r.text(11)?,
            boot_id: r.text(12)?,
            startup_head: r.opt_text(13)?,
            daemon_start_head: r.opt_text(14)?,
            transport: r.text(15)?,
            registered_at: r.time(16)?,
            last_heartbeat_at: r.opt_time(17)?,
            status: r.literal(18, "runtime status", RuntimeStatus::parse)?,
            host: match (r.opt_text(19)?, r.opt_text(20)?) {
                (Some(host_id), Some(boot_id)) => Some(HostIdentity { host_id, boot_id }),
                _ => None,
            },
        })
    }
}

/// An audit entry read in [`AUDIT`]'s order.
impl Record for AuditEntry {
    fn read<R: Columns>(r: &R) -> Result<Self, R::Error> {
        Ok(AuditEntry {
            id: Some(r.int(0)?),
            at: r.time(1)?,
            profile: r.text(2)?,
            worker_identity: r.opt_text(3)?,
            tool: r.text(4)?,
            allowed: r.boolean(5)?,
            blocker_kind: r.opt_text(6)?,
            reasons: r.json(7)?,
            principal: r.opt_text(8)?,
            // A judged call that no longer reads (written by a newer build) is left out,
            // never the entry: the log's decision stands without it.
            call: r.opt_text(9)?.and_then(|text| serde_json::from_str(&text).ok()),
        })
    }
}

/// A host's observation read in [`OBSERVATION`]'s order.
impl Record for HostObservation {
    fn read<R: Columns>(r: &R) -> Result<Self, R::Error> {
        Ok(HostObservation {
            host: HostIdentity { host_id: r.text(0)?, boot_id: r.text(1)? },
            observed_at: r.time(2)?,
            scan: r.json(3)?,
        })
    }
}

/// The row a registration writes, once it is valid.
pub(crate) fn validated(registration: &Registration, now: Timestamp) -> Result<WorkerRecord, StoreError> {
    registration
        .validate()
        .map_err(|why| StoreError::new(StoreErrorKind::Invalid, format!("invalid registration: {why}")))?;
    Ok(registration.clone().into_record(now))
}

/// A registration's answer: `row` when the insert made it, else the row that
/// was there already (read in the same transaction).
pub(crate) fn registered(
    row: &WorkerRecord,
    inserted: bool,
    existing: Option<WorkerRecord>,
) -> Result<RegisterOutcome, StoreError> {
    if inserted {
        return Ok(RegisterOutcome::of(row, true));
    }
    let existing =
        existing.ok_or_else(|| StoreError::new(StoreErrorKind::Other, "worker vanished inside its own transaction"))?;
    Ok(RegisterOutcome::of(&existing, false))
}

/// A claim names the generation it hands the row to.
pub(crate) fn check_generation(generation_id: &str) -> Result<(), StoreError> {
    if generation_id.trim().is_empty() {
        return Err(StoreError::new(StoreErrorKind::Invalid, "generation_id must not be empty"));
    }
    Ok(())
}

/// A claim's answer: the row held `previous_epoch`, and now holds the next.
pub(crate) fn claimed(
    worker_identity: &str,
    generation_id: &str,
    previous_epoch: i64,
    renewal_count: i64,
) -> ClaimOutcome {
    ClaimOutcome {
        worker_identity: worker_identity.to_owned(),
        previous_epoch,
        fencing_epoch: previous_epoch + 1,
        generation_id: generation_id.to_owned(),
        renewal_count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_names_are_unique_and_listed_in_order() {
        for table in [&WORKER[..], &RUNTIME, &AUDIT, &OBSERVATION] {
            let mut seen = table.to_vec();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len(), table.len(), "{table:?}");
        }
        assert_eq!(names(&OBSERVATION), "host_id, boot_id, observed_at, scan");
    }
}
