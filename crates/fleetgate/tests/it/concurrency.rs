//! Several OS processes renewing one worker on one real file while another
//! process claims a new generation: no renewal at the old epoch is accepted
//! after the claim, and every call gets an answer well inside the TTL.

use crate::support::{fleetgate, json_of};
use std::process::{Command, Stdio};

const RENEWERS: usize = 4;

fn register(store: &std::path::Path) -> String {
    let args = fleetgate_testkit::records::worker_register("codex", "s", "g1", 1, &["--ttl", "30"]);
    let reg = json_of(&fleetgate(store, &args.iter().map(String::as_str).collect::<Vec<_>>()));
    reg["worker_identity"].as_str().unwrap().to_owned()
}

/// `RENEWERS` OS processes renewing `id` at epoch 1 as fast as they can for `seconds`.
fn renewers(store: &std::path::Path, id: &str, seconds: &str) -> Vec<std::process::Child> {
    (0..RENEWERS)
        .map(|_| {
            Command::new(crate::support::bin())
                .env_clear()
                .arg("--store")
                .arg(store)
                .args(["debug", "renew-loop", "--identity", id, "--epoch", "1", "--count", "1000000"])
                .args(["--max-seconds", seconds, "--json"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect()
}

#[test]
fn renewals_racing_a_claim_never_beat_the_fence() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("race.sqlite3");
    let id = register(&store);
    let renewers = renewers(&store, &id, "3");
    let renewed_so_far =
        || json_of(&fleetgate(&store, &["worker", "show", &id, "--json"]))["renewal_count"].as_i64().unwrap();
    assert!(crate::support::wait_until(10.0, || renewed_so_far() >= 50), "renewers never got going");
    let claim = fleetgate(&store, &["worker", "claim-generation", "--identity", &id, "--generation", "g2", "--json"]);
    assert_eq!(claim.status.code(), Some(0), "{}", String::from_utf8_lossy(&claim.stderr));
    let claim = json_of(&claim);
    let at_claim = claim["renewal_count"].as_i64().unwrap();

    let mut accepted = 0;
    for child in renewers {
        let out = child.wait_with_output().unwrap();
        let r = json_of(&out);
        assert_eq!(out.status.code(), Some(0), "{r}");
        assert_eq!(r["errors"], 0, "every call got an answer: {r}");
        assert_eq!(r["renewed_after_refusal"], 0, "fence broken: {r}");
        assert!(r["refused"].as_u64().unwrap() > 0, "each renewer ran past the claim and was fenced: {r}");
        // Answers arrive well inside the 30 s TTL even under contention.
        assert!(r["max_latency_ms"].as_f64().unwrap() < 10_000.0, "{r}");
        accepted += r["renewed"].as_i64().unwrap();
    }
    let row = json_of(&fleetgate(&store, &["worker", "show", &id, "--json"]));
    assert_eq!(row["fencing_epoch"], 2);
    assert_eq!(row["renewal_count"].as_i64().unwrap(), at_claim, "a renewal at epoch 1 was accepted after the claim");
    assert_eq!(accepted, at_claim, "every accepted renewal was reported to its caller, and only those");
}

#[test]
fn renewers_at_once_all_get_their_share_and_their_answers() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("fair.sqlite3");
    let id = register(&store);
    let renewers = renewers(&store, &id, "2");
    let mut total = 0;
    for child in renewers {
        let r = json_of(&child.wait_with_output().unwrap());
        assert_eq!(r["errors"], 0, "{r}");
        assert_eq!(r["refused"], 0, "{r}");
        assert!(r["renewed"].as_u64().unwrap() > 0, "a renewer was starved: {r}");
        assert!(r["max_latency_ms"].as_f64().unwrap() < 10_000.0, "{r}");
        total += r["renewed"].as_i64().unwrap();
    }
    let row = json_of(&fleetgate(&store, &["worker", "show", &id, "--json"]));
    assert_eq!(row["renewal_count"].as_i64().unwrap(), total);
}
