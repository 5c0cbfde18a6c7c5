//! The statements both engines run alike, written once over the column lists
//! of [`crate::rows`].
//!
//! Each is written with numbered `$N` parameters and built once per engine
//! in that engine's style by [`Sql::numbered`] (SQLite's is `?N`), so no
//! statement here may hold a `$` of its own. Statements whose SQL differs
//! between the engines (the renewal's fence, the claim, the audit listing,
//! row locks) stay with their engine.

use crate::rows::{AUDIT, OBSERVATION, RUNTIME, WORKER, names};

/// The shared statements, numbered in one engine's parameter style.
#[derive(Debug)]
pub(crate) struct Sql {
    /// The schema version the store is at.
    pub schema_version: String,
    /// Insert a worker row ([`WORKER`]) unless its identity exists.
    pub insert_worker: String,
    /// One worker row by identity (`$1`).
    pub select_worker: String,
    /// Every worker row, oldest registration first.
    pub list_workers: String,
    /// Mark a worker (`$1`) stopped.
    pub deregister_worker: String,
    /// Write a runtime row ([`RUNTIME`]), replacing every column of the row
    /// with the same id, its host included.
    pub upsert_runtime: String,
    /// Every runtime row, by id.
    pub list_runtime: String,
    /// Refresh a running row (`$1`) at `$2`.
    pub touch_runtime: String,
    /// Mark a runtime row (`$1`) stopped.
    pub stop_runtime: String,
    /// Append an audit entry (`AUDIT[1..]`), answering its id.
    pub append_audit: String,
    /// Publish a host's observation ([`OBSERVATION`]). The newest one wins,
    /// and a new boot always wins: no process of the old boot is left to
    /// write late, and the clock may have stepped back across the boot.
    pub publish_observation: String,
    /// Every host's observation, by host id.
    pub list_observations: String,
}

/// `$1, $2, …, $n`.
fn parameters(n: usize) -> String {
    (1..=n).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

/// `b = excluded.b, …`: an upsert's update of `columns` to the proposed row.
fn set_excluded(columns: &[&str]) -> String {
    columns.iter().map(|c| format!("{c} = excluded.{c}")).collect::<Vec<_>>().join(", ")
}

impl Sql {
    /// The statements with their parameters written `{mark}N`.
    pub(crate) fn numbered(mark: char) -> Self {
        let (worker, runtime, observation) = (names(&WORKER), names(&RUNTIME), names(&OBSERVATION));
        let sql = |template: String| template.replace('$', mark.encode_utf8(&mut [0; 4]));
        Self {
            schema_version: sql("SELECT COALESCE(MAX(version), 0) FROM fleetgate_schema".into()),
            insert_worker: sql(format!(
                "INSERT INTO workers ({worker}) VALUES ({}) ON CONFLICT (worker_identity) DO NOTHING",
                parameters(WORKER.len())
            )),
            select_worker: sql(format!("SELECT {worker} FROM workers WHERE worker_identity = $1")),
            list_workers: sql(format!("SELECT {worker} FROM workers ORDER BY started_at, worker_identity")),
            deregister_worker: sql("UPDATE workers SET status = 'stopped' WHERE worker_identity = $1".into()),
            upsert_runtime: sql(format!(
                "INSERT INTO runtimes ({runtime}) VALUES ({}) ON CONFLICT (runtime_id) DO UPDATE SET {}",
                parameters(RUNTIME.len()),
                set_excluded(&RUNTIME[1..])
            )),
            list_runtime: sql(format!("SELECT {runtime} FROM runtimes ORDER BY runtime_id")),
            touch_runtime: sql(
                "UPDATE runtimes SET last_heartbeat_at = $2 WHERE runtime_id = $1 AND status = 'running'".into(),
            ),
            stop_runtime: sql("UPDATE runtimes SET status = 'stopped' WHERE runtime_id = $1".into()),
            append_audit: sql(format!(
                "INSERT INTO audit_log ({}) VALUES ({}) RETURNING id",
                names(&AUDIT[1..]),
                parameters(AUDIT.len() - 1)
            )),
            publish_observation: sql(format!(
                "INSERT INTO host_observations ({observation}) VALUES ({}) ON CONFLICT (host_id) DO UPDATE SET {}
                 WHERE excluded.observed_at >= host_observations.observed_at
                    OR excluded.boot_id <> host_observations.boot_id",
                parameters(OBSERVATION.len()),
                set_excluded(&OBSERVATION[1..])
            )),
            list_observations: sql(format!("SELECT {observation} FROM host_observations ORDER BY host_id")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_numbered_in_the_engines_style() {
        let sqlite = Sql::numbered('?');
        assert_eq!(
            sqlite.touch_runtime,
            "UPDATE runtimes SET last_heartbeat_at = ?2 WHERE runtime_id = ?1 AND status = 'running'"
        );
        assert!(sqlite.insert_worker.contains("VALUES (?1, ?2, ?3,") && sqlite.insert_worker.contains("?14)"));
        let postgres = Sql::numbered('$');
        assert!(
            postgres
                .upsert_runtime
                .contains("$21) ON CONFLICT (runtime_id) DO UPDATE SET namespace = excluded.namespace,")
        );
        assert!(postgres.upsert_runtime.ends_with("host_boot_id = excluded.host_boot_id"));
    }
}
