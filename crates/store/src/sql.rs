//! Every statement the store's operations run, written once over the column
//! lists of [`crate::rows`] and spelled per engine by its [`Dialect`].
//!
//! Each is written with numbered `$N` parameters, renumbered in the engine's
//! own style, so no statement here may hold a `$` of its own. Where the
//! engines differ — the larger of two values, row locks, a parameter that is
//! tested for NULL and must name its type — the dialect says how.

use crate::rows::{AUDIT, OBSERVATION, RUNTIME, WORKER, names};

/// How one engine spells what the two differ in.
#[derive(Debug)]
pub(crate) struct Dialect {
    /// Parameters are written `{mark}N`.
    pub mark: char,
    /// The larger of two values.
    pub greatest: &'static str,
    /// What follows a read that decides a write, to lock its rows until the
    /// transaction ends (empty where the transaction holds the whole store).
    pub lock_rows: &'static str,
    /// A parameter tested for NULL names its type (`$4::text`), where the
    /// server must infer every parameter's type before it runs.
    pub typed_nulls: bool,
    /// The statement that tells listeners an approval was answered (`$1`: its id), where
    /// the engine has notifications (PostgreSQL's `pg_notify`); SQLite's watchers see the
    /// file change.
    pub notify_approval: Option<&'static str>,
}

/// The notification channel of answered approvals (PostgreSQL).
pub(crate) const APPROVALS_CHANNEL: &str = "fleetgate_approvals";

impl Dialect {
    /// Parameter `n`, of SQL type `ty` where the dialect types them.
    fn typed(&self, n: usize, ty: &str) -> String {
        if self.typed_nulls { format!("${n}::{ty}") } else { format!("${n}") }
    }
}

/// The statements, in one engine's spelling.
#[derive(Debug)]
pub(crate) struct Sql {
    /// The schema version the store is at, as a 64-bit integer.
    pub schema_version: String,
    /// Insert a worker row ([`WORKER`]) unless its identity exists.
    pub insert_worker: String,
    /// One worker row by identity (`$1`).
    pub select_worker: String,
    /// One worker row by identity (`$1`), locked until the transaction ends.
    pub lock_worker: String,
    /// Every worker row, oldest registration first.
    pub list_workers: String,
    /// The fenced renewal: zero rows changed means refused. Parameters as
    /// [`crate::rows::renewal_values`] numbers them.
    pub renew: String,
    /// A worker's (`$1`) epoch and renewal count, locked.
    pub lock_epoch: String,
    /// Hand a worker (`$1`) to generation `$3` at epoch `$2`, at `$4`.
    pub claim: String,
    /// Mark a worker (`$1`) stopped.
    pub deregister_worker: String,
    /// Every worker row last heard from at or before `$1`, locked: the candidates of a prune.
    pub lock_workers_silent_since: String,
    /// Delete a worker row (`$1`).
    pub delete_worker: String,
    /// Write a runtime row ([`RUNTIME`]), replacing every column of the row
    /// with the same id, its host included.
    pub upsert_runtime: String,
    /// Every runtime row, by id.
    pub list_runtime: String,
    /// Refresh a running row (`$1`) at `$2`.
    pub touch_runtime: String,
    /// Mark a runtime row (`$1`) stopped.
    pub stop_runtime: String,
    /// Every stopped runtime row last heard from (else registered) at or before `$1`,
    /// locked: the candidates of a prune.
    pub lock_stopped_runtime_since: String,
    /// Delete a runtime row (`$1`).
    pub delete_runtime: String,
    /// Append an audit entry (`AUDIT[1..]`), answering its id.
    pub append_audit: String,
    /// The newest `$2` entries at or after `$1` (NULL: since the first),
    /// oldest first.
    pub list_audit: String,
    /// At most `$2` entries after id `$1`, by id: a page of a replay that reads the whole log
    /// in bounded memory.
    pub audit_after: String,
    /// Publish a host's observation ([`OBSERVATION`]). The newest one wins,
    /// and a new boot always wins: no process of the old boot is left to
    /// write late, and the clock may have stepped back across the boot.
    pub publish_observation: String,
    /// Every host's observation, by host id.
    pub list_observations: String,
    /// Schema v6's: the PR workflow and the tool pins.
    pub ledger: crate::ledger::LedgerSql,
    /// Schema v7's review-decision locks.
    pub locks: crate::locks::LockSql,
    /// Schema v9's approval requests.
    pub approvals: crate::approvals::ApprovalSql,
    /// What `fleetgate prune` deletes.
    pub retention: crate::retention::RetentionSql,
    /// Schema v12's HTTP sessions.
    pub sessions: crate::sessions::SessionSql,
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
    /// The statements in `dialect`'s spelling.
    pub(crate) fn new(dialect: &Dialect) -> Self {
        let d = dialect;
        let (worker, runtime, audit, observation) =
            (names(&WORKER), names(&RUNTIME), names(&AUDIT), names(&OBSERVATION));
        let sql = |template: String| template.replace('$', d.mark.encode_utf8(&mut [0; 4]));
        let select_worker = format!("SELECT {worker} FROM workers WHERE worker_identity = $1");
        Self {
            schema_version: sql("SELECT CAST(COALESCE(MAX(version), 0) AS BIGINT) FROM fleetgate_schema".into()),
            insert_worker: sql(format!(
                "INSERT INTO workers ({worker}) VALUES ({}) ON CONFLICT (worker_identity) DO NOTHING",
                parameters(WORKER.len())
            )),
            lock_worker: sql(format!("{select_worker}{}", d.lock_rows)),
            select_worker: sql(select_worker),
            list_workers: sql(format!("SELECT {worker} FROM workers ORDER BY started_at, worker_identity")),
            renew: sql(format!(
                "UPDATE workers SET last_heartbeat_at = {}(last_heartbeat_at, $2), renewal_count = renewal_count + 1
                 WHERE worker_identity = $1 AND fencing_epoch = $3 AND status = 'active'
                   AND ({} IS NULL OR session_id = $4) AND ({} IS NULL OR generation_id = $5)
                   AND ({} IS NULL OR client_name = $6) AND ({} IS NULL OR pid = $7)",
                d.greatest,
                d.typed(4, "text"),
                d.typed(5, "text"),
                d.typed(6, "text"),
                d.typed(7, "bigint"),
            )),
            lock_epoch: sql(format!(
                "SELECT fencing_epoch, renewal_count FROM workers WHERE worker_identity = $1{}",
                d.lock_rows
            )),
            claim: sql(format!(
                "UPDATE workers SET fencing_epoch = $2, generation_id = $3, status = 'active',
                    last_heartbeat_at = {}(last_heartbeat_at, $4)
                 WHERE worker_identity = $1",
                d.greatest
            )),
            deregister_worker: sql("UPDATE workers SET status = 'stopped' WHERE worker_identity = $1".into()),
            lock_workers_silent_since: sql(format!(
                "SELECT {worker} FROM workers WHERE last_heartbeat_at <= $1 ORDER BY started_at, worker_identity{}",
                d.lock_rows
            )),
            delete_worker: sql("DELETE FROM workers WHERE worker_identity = $1".into()),
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
            lock_stopped_runtime_since: sql(format!(
                "SELECT {runtime} FROM runtimes WHERE status = 'stopped' AND COALESCE(last_heartbeat_at, registered_at) <= $1
                 ORDER BY runtime_id{}",
                d.lock_rows
            )),
            delete_runtime: sql("DELETE FROM runtimes WHERE runtime_id = $1".into()),
            append_audit: sql(format!(
                "INSERT INTO audit_log ({}) VALUES ({}) RETURNING id",
                names(&AUDIT[1..]),
                parameters(AUDIT.len() - 1)
            )),
            list_audit: sql(format!(
                "SELECT {audit} FROM (SELECT {audit} FROM audit_log WHERE ({} IS NULL OR at >= $1)
                 ORDER BY id DESC LIMIT $2) recent ORDER BY id",
                d.typed(1, "timestamptz")
            )),
            audit_after: sql(format!("SELECT {audit} FROM audit_log WHERE id > $1 ORDER BY id LIMIT $2")),
            publish_observation: sql(format!(
                "INSERT INTO host_observations ({observation}) VALUES ({}) ON CONFLICT (host_id) DO UPDATE SET {}
                 WHERE excluded.observed_at >= host_observations.observed_at
                    OR excluded.boot_id <> host_observations.boot_id",
                parameters(OBSERVATION.len()),
                set_excluded(&OBSERVATION[1..])
            )),
            list_observations: sql(format!("SELECT {observation} FROM host_observations ORDER BY host_id")),
            ledger: crate::ledger::LedgerSql::new(d),
            locks: crate::locks::LockSql::new(d),
            approvals: crate::approvals::ApprovalSql::new(d),
            retention: crate::retention::RetentionSql::new(d),
            sessions: crate::sessions::SessionSql::new(d),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: Dialect =
        Dialect { mark: '?', greatest: "MAX", lock_rows: "", typed_nulls: false, notify_approval: None };
    const TYPED: Dialect =
        Dialect { mark: '$', greatest: "GREATEST", lock_rows: " FOR UPDATE", typed_nulls: true, notify_approval: None };

    #[test]
    fn parameters_are_numbered_in_the_engines_style() {
        let plain = Sql::new(&PLAIN);
        assert_eq!(
            plain.touch_runtime,
            "UPDATE runtimes SET last_heartbeat_at = ?2 WHERE runtime_id = ?1 AND status = 'running'"
        );
        assert!(plain.insert_worker.contains("VALUES (?1, ?2, ?3,") && plain.insert_worker.contains("?14)"));
        let typed = Sql::new(&TYPED);
        assert!(
            typed
                .upsert_runtime
                .contains("$21) ON CONFLICT (runtime_id) DO UPDATE SET namespace = excluded.namespace,")
        );
        assert!(typed.upsert_runtime.ends_with("host_boot_id = excluded.host_boot_id"));
    }

    #[test]
    fn the_dialect_spells_what_the_engines_differ_in() {
        let (plain, typed) = (Sql::new(&PLAIN), Sql::new(&TYPED));
        assert!(plain.renew.contains("MAX(last_heartbeat_at, ?2)") && plain.renew.contains("(?7 IS NULL OR pid = ?7)"));
        assert!(typed.renew.contains("GREATEST(last_heartbeat_at, $2)"));
        assert!(typed.renew.contains("($7::bigint IS NULL OR pid = $7)"));
        assert_eq!(plain.lock_worker, plain.select_worker);
        assert_eq!(typed.lock_worker, format!("{} FOR UPDATE", typed.select_worker));
        assert!(typed.lock_epoch.ends_with("WHERE worker_identity = $1 FOR UPDATE"));
        assert!(typed.list_audit.contains("($1::timestamptz IS NULL OR at >= $1)"));
        assert!(plain.list_audit.contains("(?1 IS NULL OR at >= ?1)"));
    }
}
