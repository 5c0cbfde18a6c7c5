//! The CLI on PostgreSQL: the engine is chosen at the edge by the URL and
//! nothing above the store notices. Needs the server `scripts/with-postgres`
//! starts; without one this test fails (unless FLEETGATE_SKIP_POSTGRES=1 says
//! to skip it, loudly).

use crate::support::{bin, json_of};
use std::process::Command;

use fleetgate_testkit::pg::PgDatabase;

fn cli(store: &str, args: &[&str]) -> std::process::Output {
    Command::new(bin()).env_clear().env("PATH", "/usr/bin:/bin").args(["--store", store]).args(args).output().unwrap()
}

#[test]
fn the_registry_and_inventory_run_unchanged_on_postgres() {
    let Some(db) = PgDatabase::fresh("fg_cli") else { return };
    let url = db.url.clone();
    let reg = cli(
        &url,
        &[
            "worker",
            "register",
            "--client",
            "gemini",
            "--session",
            "s",
            "--generation",
            "g",
            "--role",
            "author",
            "--profile",
            "prgs-author",
            "--pid",
            "4242",
            "--json",
        ],
    );
    assert_eq!(reg.status.code(), Some(0), "{}", String::from_utf8_lossy(&reg.stderr));
    let id = json_of(&reg)["worker_identity"].as_str().unwrap().to_owned();
    let ok = cli(&url, &["worker", "heartbeat", "--identity", &id, "--epoch", "1", "--expect-pid", "4242", "--json"]);
    assert_eq!((ok.status.code(), json_of(&ok)["renewed"].as_bool()), (Some(0), Some(true)));
    assert_eq!(
        cli(&url, &["worker", "claim-generation", "--identity", &id, "--generation", "g2"]).status.code(),
        Some(0)
    );
    let stale = cli(&url, &["worker", "heartbeat", "--identity", &id, "--epoch", "1", "--json"]);
    assert_eq!((stale.status.code(), json_of(&stale)["blocker_kind"].as_str()), (Some(3), Some("worker_fenced")));
    let inv = cli(&url, &["inventory", "--json"]);
    assert_eq!(inv.status.code(), Some(3), "an empty fleet closes the gate");
    assert_eq!(json_of(&inv)["missing_members"].as_array().unwrap().len(), 5);

    // A wrong password is a clear failure that never shows the password.
    let wrong = match url.split_once("://").and_then(|(_, rest)| rest.split_once('@')) {
        Some((userinfo, rest)) => {
            format!("postgres://{}:not-the-password-x9@{rest}", userinfo.split(':').next().unwrap())
        }
        None => panic!("the harness URL carries a user and password: {url}"),
    };
    let out = cli(&wrong, &["worker", "list"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("not-the-password-x9") && err.contains("***"), "{err}");
}
