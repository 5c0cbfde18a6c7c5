//! Records and command lines the tests build again and again, in one place: a runtime row
//! with every field set, and the `worker register` / `runtime register` argument lists.
//! Tests vary what they are about with struct-update syntax or extra arguments.

use fleetgate_core::Timestamp;
use fleetgate_core::runtime::{CohortSource, RuntimeRecord, RuntimeStatus, runtime_id};

/// A running stdio row of `namespace` (`gitea-<role>`, profile `prgs-<role>`) at `pid`,
/// registered and last heard from at `at`, bound to `prgs` / `Scaled-Tech-Consulting` /
/// `Gitea-Tools`, checkout `/srv/checkout`, cohort `ppid:40990`, head `0123abcd`.
pub fn runtime_row(namespace: &str, pid: i64, at: Timestamp) -> RuntimeRecord {
    let role = namespace.trim_start_matches("gitea-");
    RuntimeRecord {
        runtime_id: runtime_id(namespace, pid, "boot-0001"),
        namespace: namespace.into(),
        profile: format!("prgs-{role}"),
        role: role.into(),
        remote: Some("prgs".into()),
        org: Some("Scaled-Tech-Consulting".into()),
        repo: Some("Gitea-Tools".into()),
        repository_root: Some("/srv/checkout".into()),
        pid,
        cohort_id: Some("ppid:40990".into()),
        cohort_source: CohortSource::ParentProcess,
        client_provenance: "client_managed".into(),
        boot_id: "boot-0001".into(),
        startup_head: Some("0123abcd".into()),
        daemon_start_head: Some("0123abcd".into()),
        transport: "stdio".into(),
        registered_at: at,
        last_heartbeat_at: Some(at),
        status: RuntimeStatus::Running,
        host: None,
    }
}

/// `worker register` for an author (`prgs-author`) of `client`, session `session`,
/// generation `generation`, process `pid`, answering in JSON; `extra` follows.
pub fn worker_register(client: &str, session: &str, generation: &str, pid: i64, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "worker",
        "register",
        "--client",
        client,
        "--session",
        session,
        "--generation",
        generation,
        "--role",
        "author",
        "--profile",
        "prgs-author",
        "--pid",
        &pid.to_string(),
        "--json",
    ]
    .map(str::to_owned)
    .into();
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    args
}

/// `runtime register` of `namespace` / `profile` / `role` at `pid`, answering in JSON;
/// `extra` follows.
pub fn runtime_register(namespace: &str, profile: &str, role: &str, pid: i64, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "runtime",
        "register",
        "--namespace",
        namespace,
        "--profile",
        profile,
        "--role",
        role,
        "--pid",
        &pid.to_string(),
        "--json",
    ]
    .map(str::to_owned)
    .into();
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    args
}
