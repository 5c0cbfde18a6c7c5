//! Several OS processes renewing one worker while this process claims a new
//! generation: no renewal at the old epoch is accepted after the claim, every
//! accepted renewal was reported to its caller, and every call got an answer.

use crate::child;
use crate::engines::Fixture;
use crate::support::{attach, now};
use serde_json::json;
use std::time::{Duration, Instant};

const RENEWERS: usize = 4;

pub fn renewals_racing_a_claim_from_processes_never_beat_the_fence(fx: &Fixture) {
    let store = fx.open();
    attach(&*store, "w-race");
    let start_at_ms = child::wall_ms() + 300;
    let renewers: Vec<_> = (0..RENEWERS)
        .map(|_| {
            child::spawn(&json!({
                "role": "renew",
                "spec": fx.spec(),
                "identity": "w-race",
                "epoch": 1,
                "session": "sess-0001",
                "now": now().unix(),
                "max_seconds": 30,
                "attempts_past_fence": 25,
                "start_at_ms": start_at_ms,
            }))
        })
        .collect();

    // Claim while they are all renewing.
    let deadline = Instant::now() + Duration::from_secs(30);
    while store.get_worker("w-race").unwrap().unwrap().renewal_count < 200 {
        assert!(Instant::now() < deadline, "the renewers never got going");
        std::thread::sleep(Duration::from_millis(5));
    }
    let claim = store.claim_generation("w-race", "gen-0002", now()).unwrap().expect("claimed");
    assert_eq!(claim.fencing_epoch, 2);

    let mut accepted = 0;
    for renewer in renewers {
        let r = child::report(renewer);
        assert_eq!(r["errors"], 0, "every call got an answer: {r}");
        assert_eq!(r["renewed_after_refusal"], 0, "fence broken: {r}");
        assert!(r["refused"].as_u64().unwrap() > 0, "each renewer ran past the claim and was fenced: {r}");
        assert!(r["max_latency_ms"].as_f64().unwrap() < 10_000.0, "answers well inside the TTL: {r}");
        accepted += r["renewed"].as_i64().unwrap();
    }
    let row = store.get_worker("w-race").unwrap().unwrap();
    assert_eq!(row.fencing_epoch, 2);
    assert_eq!(row.renewal_count, claim.renewal_count, "a renewal at epoch 1 was accepted after the claim");
    assert_eq!(accepted, claim.renewal_count, "every accepted renewal was reported to its caller, and only those");
}
