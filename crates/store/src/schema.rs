//! The schema, version by version, written once for both engines: each
//! migration's tables and indexes with their column types as placeholders
//! (`{key}`, `{id}`, `{int}`, `{real}`, `{bool}`, `{time}`) that each
//! engine's [`Types`] spells, and the columns it adds to older tables. `{actor}` stands for
//! the four columns that name who acted (a worker, its member, client and session), the same
//! in every table that records an act.
//!
//! Every migration is additive and idempotent (`IF NOT EXISTS`; an added
//! column only when it is absent); each engine applies the pending ones in
//! one transaction that no other process migrating the same store can
//! interleave with, so each is applied exactly once.

use crate::{SCHEMA_VERSION, StoreError, StoreErrorKind};

/// How one engine spells the schema's column types.
#[derive(Debug)]
pub(crate) struct Types {
    /// A text primary key; rows ordered by it sort in byte order.
    pub key: &'static str,
    /// An id the store assigns, the table's primary key.
    pub id: &'static str,
    /// A 64-bit integer.
    pub int: &'static str,
    /// A double.
    pub real: &'static str,
    /// A boolean.
    pub boolean: &'static str,
    /// An instant, to the second.
    pub time: &'static str,
}

/// Who acted, as the tables that record an act name them (read by `ledger::read_actor`, in
/// this order).
const ACTOR: &str = "worker TEXT NOT NULL, profile TEXT NOT NULL, client TEXT NOT NULL, session TEXT NOT NULL";

impl Types {
    /// `template` with its placeholders spelled.
    pub fn spell(&self, template: &str) -> String {
        [
            ("{actor}", ACTOR),
            ("{key}", self.key),
            ("{id}", self.id),
            ("{int}", self.int),
            ("{real}", self.real),
            ("{bool}", self.boolean),
            ("{time}", self.time),
        ]
        .iter()
        .fold(template.to_owned(), |sql, (placeholder, spelled)| sql.replace(placeholder, spelled))
    }
}

/// One schema version.
#[derive(Debug)]
pub(crate) struct Migration {
    /// Its number, the same in both engines.
    pub version: u32,
    /// What it brings.
    pub name: &'static str,
    /// The tables and indexes it creates, `IF NOT EXISTS`, types as
    /// placeholders; empty when it only adds columns.
    pub create: &'static str,
    /// The columns it adds to existing tables: `(table, column, declaration)`.
    pub add: &'static [(&'static str, &'static str, &'static str)],
}

/// Every version, oldest first.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "worker registry",
        create: "CREATE TABLE IF NOT EXISTS workers (
        worker_identity       {key},
        client_name           TEXT NOT NULL,
        client_instance_id    TEXT NOT NULL,
        session_id            TEXT NOT NULL,
        generation_id         TEXT NOT NULL,
        role                  TEXT NOT NULL,
        profile               TEXT NOT NULL,
        pid                   {int},
        started_at            {time} NOT NULL,
        last_heartbeat_at     {time} NOT NULL,
        heartbeat_ttl_seconds {real} NOT NULL,
        fencing_epoch         {int} NOT NULL,
        status                TEXT NOT NULL,
        renewal_count         {int} NOT NULL DEFAULT 0
    );
    CREATE INDEX IF NOT EXISTS workers_by_profile ON workers (profile, status);",
        add: &[],
    },
    Migration {
        version: 2,
        name: "runtime rows",
        create: "CREATE TABLE IF NOT EXISTS runtimes (
        runtime_id        {key},
        namespace         TEXT NOT NULL,
        profile           TEXT NOT NULL,
        role              TEXT NOT NULL,
        remote            TEXT,
        org               TEXT,
        repo              TEXT,
        repository_root   TEXT,
        pid               {int} NOT NULL,
        cohort_id         TEXT,
        cohort_source     TEXT NOT NULL,
        client_provenance TEXT NOT NULL,
        boot_id           TEXT NOT NULL,
        startup_head      TEXT,
        daemon_start_head TEXT,
        transport         TEXT NOT NULL,
        registered_at     {time} NOT NULL,
        last_heartbeat_at {time},
        status            TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS runtimes_by_status ON runtimes (status, profile);",
        add: &[],
    },
    Migration {
        version: 3,
        name: "audit log",
        create: "CREATE TABLE IF NOT EXISTS audit_log (
        id              {id},
        at              {time} NOT NULL,
        profile         TEXT NOT NULL,
        worker_identity TEXT,
        tool            TEXT NOT NULL,
        allowed         {bool} NOT NULL,
        blocker_kind    TEXT,
        reasons         TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS audit_by_time ON audit_log (at);",
        add: &[],
    },
    Migration {
        version: 4,
        name: "host identity and host observations",
        create: "CREATE TABLE IF NOT EXISTS host_observations (
        host_id     {key},
        boot_id     TEXT NOT NULL,
        observed_at {time} NOT NULL,
        scan        TEXT NOT NULL
    );",
        add: &[("runtimes", "host_id", "TEXT"), ("runtimes", "host_boot_id", "TEXT")],
    },
    Migration { version: 5, name: "audit principal", create: "", add: &[("audit_log", "principal", "TEXT")] },
    Migration { version: 6, name: "PR workflow and tool pins", create: crate::ledger::CREATE, add: &[] },
    Migration {
        version: 7,
        name: "decision bases, cleared decisions, pushes, review-decision locks, PR issues",
        create: crate::ledger::CREATE_V7_AND_LOCKS,
        add: &[("pr_decisions", "base", "TEXT"), ("pr_decisions", "cleared", "TEXT"), ("pr_origins", "issues", "TEXT")],
    },
    Migration {
        version: 8,
        name: "the audit keeps the judged call",
        create: "",
        add: &[("audit_log", "judged_call", "TEXT")],
    },
    Migration { version: 9, name: "approval requests", create: crate::approvals::CREATE, add: &[] },
    Migration {
        version: 10,
        name: "the principal of a decision, a push and a PR's creator",
        create: "",
        add: &[
            ("pr_decisions", "principal", "TEXT"),
            ("pr_pushes", "principal", "TEXT"),
            ("pr_origins", "principal", "TEXT"),
        ],
    },
    Migration {
        version: 11,
        name: "approvers, answers, and the approvals' events",
        create: crate::approvals::CREATE_EVENTS,
        add: crate::approvals::ADD,
    },
    Migration { version: 12, name: "the HTTP sessions of gateway replicas", create: crate::sessions::CREATE, add: &[] },
    Migration {
        version: 13,
        name: "what an approval request's call does",
        create: "",
        add: crate::approvals::ADD_DOES,
    },
    Migration {
        version: 14,
        name: "indexes for the approvals a decision reads",
        create: crate::approvals::CREATE_DECISION_INDEXES,
        add: &[],
    },
];

/// The migrations a store at `current` still needs to reach `target`, or
/// the refusal of a store newer than this build (`shown` names it).
pub(crate) fn pending(
    shown: &str,
    current: i64,
    target: u32,
) -> Result<impl Iterator<Item = &'static Migration>, StoreError> {
    if current > i64::from(SCHEMA_VERSION) {
        return Err(StoreError::new(
            StoreErrorKind::Unsupported,
            format!("store {shown} is at schema version {current}, newer than this fleetgate (knows {SCHEMA_VERSION})"),
        ));
    }
    Ok(MIGRATIONS.iter().filter(move |m| i64::from(m.version) > current && m.version <= target))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_numbered_one_by_one_up_to_this_builds() {
        let numbers: Vec<u32> = MIGRATIONS.iter().map(|m| m.version).collect();
        assert_eq!(numbers, (1..=SCHEMA_VERSION).collect::<Vec<_>>());
    }

    #[test]
    fn every_placeholder_is_spelled() {
        let types = Types { key: "K", id: "I", int: "N", real: "R", boolean: "B", time: "T" };
        for m in MIGRATIONS {
            let sql = types.spell(m.create);
            assert!(!sql.contains('{') && !sql.contains('}'), "version {}: {sql}", m.version);
        }
        assert!(types.spell(MIGRATIONS[2].create).contains("allowed         B NOT NULL"));
    }

    #[test]
    fn a_newer_store_is_refused_and_an_older_one_gets_what_it_lacks() {
        let err = pending("sqlite:/x", i64::from(SCHEMA_VERSION) + 1, SCHEMA_VERSION).err().unwrap();
        assert_eq!(err.kind(), StoreErrorKind::Unsupported);
        assert!(err.to_string().contains("sqlite:/x"), "{err}");
        let versions: Vec<u32> = pending("s", 2, 4).unwrap().map(|m| m.version).collect();
        assert_eq!(versions, [3, 4]);
    }
}
