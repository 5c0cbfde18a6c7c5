//! Connection loss and a server restart (PostgreSQL only): every call during
//! the outage is answered with a transient `Unavailable` that names the store
//! without its password, never a crash and never a silent empty answer, and
//! the store recovers by itself once the server is back.

use crate::engines::{Fixture, Kind, Server, env};
use crate::support::{attach, now, renewal};
use fleetgate_store::{StoreError, StoreErrorKind};
use std::process::Command;
use std::time::{Duration, Instant};

fn assert_transient(err: &StoreError, fx: &Fixture) {
    assert_eq!(err.kind(), StoreErrorKind::Unavailable, "{err}");
    assert!(err.is_transient());
    let text = err.to_string();
    assert!(text.contains("***@127.0.0.1"), "names the store, password redacted: {text}");
    if let Some(pw) = fx.password() {
        assert!(!text.contains(&pw), "{text}");
    }
}

/// Terminate the store's own backend (found by its application name), as a
/// dropped connection would; other tests' connections are untouched.
fn cut_connection(fx: &Fixture) {
    let db = fx.database().expect("postgres");
    let cut = db
        .admin()
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'fleetgate'",
            &[&db.name],
        )
        .expect("terminate");
    assert_eq!(cut.len(), 1, "the store holds one connection");
    // Let the server's goodbye reach the socket before the next call.
    std::thread::sleep(Duration::from_millis(100));
}

pub fn connection_loss() {
    let Some(fx) = Fixture::fresh(Kind::Postgres) else { return };
    let store = fx.open();
    attach(&*store, "w1");

    // A read retries once on a fresh connection: the caller sees nothing.
    cut_connection(&fx);
    assert_eq!(store.get_worker("w1").unwrap().unwrap().renewal_count, 0);

    // A renewal is never retried inside (its first attempt may have been
    // counted): it answers, or fails transiently, and the next one renews.
    cut_connection(&fx);
    let mut accepted = 0;
    match store.heartbeat(&renewal("w1", 1), now()) {
        Ok(out) => {
            assert!(out.renewed, "{out:?}");
            accepted += 1;
        }
        Err(err) => assert_transient(&err, &fx),
    }
    assert!(store.heartbeat(&renewal("w1", 1), now()).unwrap().renewed);
    accepted += 1;
    assert_eq!(store.get_worker("w1").unwrap().unwrap().renewal_count, accepted);
}

/// The spare server, stopped; started again on drop if the test did not.
struct Stopped {
    ctl: String,
    running: bool,
}

impl Stopped {
    fn new(ctl: String) -> Self {
        let status = Command::new(&ctl).arg("stop").output().expect("run the server control script");
        assert!(status.status.success(), "cannot stop the spare server: {status:?}");
        Self { ctl, running: false }
    }

    fn start(&mut self) {
        let status = Command::new(&self.ctl).arg("start").output().expect("run the server control script");
        assert!(status.status.success(), "cannot start the spare server: {status:?}");
        self.running = true;
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        if !self.running {
            let _ = Command::new(&self.ctl).arg("start").output();
        }
    }
}

pub fn server_restart() {
    let Some(fx) = Fixture::fresh_on(Server::Spare) else { return };
    let ctl = env("FLEETGATE_TEST_POSTGRES_CTL")
        .expect("FLEETGATE_TEST_POSTGRES_CTL is unset: run the suite under scripts/with-postgres");
    let store = fx.open();
    attach(&*store, "w1");

    let mut server = Stopped::new(ctl);
    let outage: Vec<Result<(), StoreError>> = vec![
        store.heartbeat(&renewal("w1", 1), now()).map(drop),
        store.get_worker("w1").map(drop),
        store.list_workers().map(drop),
        store.list_runtime().map(drop),
        store.list_observations().map(drop),
        store.server_now().map(drop),
        store.claim_generation("w1", "gen-0002", now()).map(drop),
    ];
    for result in outage {
        assert_transient(&result.expect_err("no answer while the server is down"), &fx);
    }
    assert_transient(&fleetgate_store::open(&fx.spec()).expect_err("the server is down"), &fx);

    server.start();
    let deadline = Instant::now() + Duration::from_secs(30);
    let out = loop {
        match store.heartbeat(&renewal("w1", 1), now()) {
            Ok(out) => break out,
            Err(err) => {
                assert_transient(&err, &fx);
                assert!(Instant::now() < deadline, "the store did not recover: {err}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    assert!(out.renewed, "{out:?}");
    let row = store.get_worker("w1").unwrap().unwrap();
    assert_eq!((row.renewal_count, row.fencing_epoch), (1, 1), "nothing was half-written during the outage");
}
