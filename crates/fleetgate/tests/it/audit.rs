//! The audit trail's group commit (issues 17 and 18.7): entries land in order, many per
//! transaction; a mutation's entry is waited for and, when the store cannot take it in
//! time — a real `BEGIN EXCLUSIVE` held on the real file, a failing store — the call is
//! refused and the trail records that refusal once the store recovers, never an allowed
//! mutation that was not forwarded.

use crate::support::{Instrumented, fresh_store, now};
use fleetgate_control::audit::{AuditReceipt, Auditor};
use fleetgate_core::audit::AuditEntry;
use fleetgate_store::Store;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

fn entry(tool: &str, allowed: bool) -> AuditEntry {
    AuditEntry {
        id: None,
        at: now(),
        profile: "prgs-author".into(),
        worker_identity: Some("w-1".into()),
        tool: tool.into(),
        allowed,
        blocker_kind: None,
        reasons: vec![],
        principal: None,
        call: None,
    }
}

fn tools(store: &dyn Store) -> Vec<String> {
    store.list_audit(None, 10_000).unwrap().into_iter().map(|e| e.tool).collect()
}

/// A fresh store, an auditor over it waiting `wait`, and a connection holding the store's
/// write lock (`BEGIN EXCLUSIVE`, as an operator's `sqlite3` session would).
fn locked_store(wait: Duration) -> (tempfile::TempDir, Arc<dyn Store>, Auditor, rusqlite::Connection) {
    let (dir, store) = fresh_store();
    let auditor = Auditor::new(store.clone(), wait);
    let lock = rusqlite::Connection::open(dir.path().join("registry.sqlite3")).unwrap();
    lock.execute_batch("BEGIN EXCLUSIVE").unwrap();
    (dir, store, auditor, lock)
}

#[test]
fn queued_entries_and_a_waited_entry_are_committed_in_order() {
    let (_d, store) = fresh_store();
    let auditor = Auditor::new(store.clone(), Duration::from_secs(5));
    for i in 0..300 {
        assert_eq!(auditor.queue(entry(&format!("read_{i}"), true)), AuditReceipt::Queued);
    }
    let receipt = auditor.record(entry("git_add", true));
    let AuditReceipt::Appended { id } = receipt else { panic!("{receipt:?}") };
    // Waiting for the mutation's entry waited for everything queued before it.
    let stored = store.list_audit(None, 10_000).unwrap();
    assert_eq!(stored.len(), 301);
    assert_eq!(stored.last().unwrap().id, Some(id));
    let expected: Vec<String> = (0..300).map(|i| format!("read_{i}")).chain(["git_add".to_owned()]).collect();
    assert_eq!(tools(&*store), expected, "in the order queued");
    let ids: Vec<i64> = stored.iter().map(|e| e.id.unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "gap-free ids: {ids:?}");
    assert!(auditor.flush(Duration::from_secs(5)));
}

/// Poll (bounded) until `done`.
fn until(done: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

/// Poll (bounded) until `store` holds `n` entries.
fn committed(store: &dyn Store, n: usize) -> bool {
    until(|| tools(store).len() >= n)
}

#[test]
fn the_writer_commits_what_nobody_waits_for_while_it_lingers_and_once_idle() {
    let (_d, store) = fresh_store();
    let auditor = Auditor::new(store.clone(), Duration::from_secs(5));
    assert_eq!(auditor.queue(entry("read_0", true)), AuditReceipt::Queued);
    assert!(committed(&*store, 1), "a lone queued entry is committed without a flush");
    // Right after that commit the thread lingers instead of going idle: nothing wakes it,
    // its own timer does.
    assert_eq!(auditor.queue(entry("read_1", true)), AuditReceipt::Queued);
    assert!(committed(&*store, 2), "an entry queued while the writer lingers after a commit");
    // Past that linger it goes idle — waiting for a nudge, no timer — and a queued entry
    // wakes it: were the nudge lost, read_2 would never be committed.
    assert!(until(|| auditor.writer_is_idle()), "the writer goes idle once its linger is over");
    assert_eq!(auditor.queue(entry("read_2", true)), AuditReceipt::Queued);
    assert!(committed(&*store, 3), "an entry queued once the writer went idle");
    // A waited-for entry lands behind them.
    assert!(matches!(auditor.record(entry("git_add", true)), AuditReceipt::Appended { .. }));
    assert_eq!(tools(&*store), ["read_0", "read_1", "read_2", "git_add"]);
}

#[test]
fn a_held_store_lock_refuses_the_mutation_within_its_bound_and_the_trail_says_so() {
    let (_dir, store, auditor, lock) = locked_store(Duration::from_millis(300));

    let started = Instant::now();
    let receipt = auditor.record(entry("git_push", true));
    assert_eq!(receipt, AuditReceipt::TimedOut { after_ms: 300 });
    assert!(
        started.elapsed() < fleetgate_store::sqlite::BUSY_TIMEOUT,
        "refused after {:?}, not within its bound",
        started.elapsed()
    );
    assert_eq!(auditor.queue(entry("git_status", true)), AuditReceipt::Queued, "reads are not held up");

    lock.execute_batch("COMMIT").unwrap();
    assert!(auditor.flush(Duration::from_secs(20)), "the trail catches up once the lock is gone");
    let stored = store.list_audit(None, 10).unwrap();
    assert_eq!(stored.iter().map(|e| e.tool.as_str()).collect::<Vec<_>>(), ["git_push", "git_status"]);
    let push = &stored[0];
    assert!(!push.allowed, "the trail shows the refusal the call got: {push:?}");
    assert_eq!(push.blocker_kind.as_deref(), Some("audit_unavailable"));
    assert!(push.reasons.iter().any(|r| r.contains("not confirmed within 300 ms")), "{:?}", push.reasons);
    assert!(stored[1].allowed);
}

#[test]
fn a_failing_store_fails_the_waiter_and_keeps_the_entries_for_later() {
    let (_d, store) = fresh_store();
    let failing = Instrumented::new(store.clone());
    failing.fail_audit.store(true, Ordering::SeqCst);
    let auditor = Auditor::new(failing.store(), Duration::from_secs(5));
    assert_eq!(auditor.queue(entry("git_status", true)), AuditReceipt::Queued);
    let receipt = auditor.record(entry("git_commit", true));
    assert!(
        matches!(&receipt, AuditReceipt::Failed { error } if error.contains("audit store is failing")),
        "{receipt:?}"
    );
    assert!(receipt.problem().unwrap().starts_with("audit append failed"));
    assert!(tools(&*store).is_empty());

    failing.fail_audit.store(false, Ordering::SeqCst);
    assert!(auditor.flush(Duration::from_secs(20)));
    let stored = store.list_audit(None, 10).unwrap();
    assert_eq!(stored.iter().map(|e| e.tool.as_str()).collect::<Vec<_>>(), ["git_status", "git_commit"]);
    assert!(stored[0].allowed, "a read's entry is kept as it was");
    assert!(!stored[1].allowed);
    assert_eq!(stored[1].blocker_kind.as_deref(), Some("audit_unavailable"));
}

#[test]
fn a_full_queue_is_named_never_silent() {
    let (_dir, store, auditor, lock) = locked_store(Duration::from_millis(100));
    let cap = fleetgate_control::audit::QUEUE_CAPACITY + fleetgate_control::audit::MAX_HELD;
    let full = (0..cap + 10).map(|i| auditor.queue(entry(&format!("r{i}"), true))).find(|r| *r != AuditReceipt::Queued);
    let Some(receipt) = full else { panic!("{} entries were queued past every bound", cap + 10) };
    assert_eq!(receipt.problem().as_deref(), Some("audit append failed: the audit queue is full"));
    assert!(matches!(auditor.record(entry("git_add", true)), AuditReceipt::Failed { .. }), "a mutation is refused");
    lock.execute_batch("COMMIT").unwrap();
    // The queue itself may still be full for a moment: a flush is queued like an entry.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !auditor.flush(Duration::from_secs(1)) {
        assert!(Instant::now() < deadline, "the queue never drained");
    }
    assert!(store.list_audit(None, 100_000).unwrap().len() >= fleetgate_control::audit::QUEUE_CAPACITY);
}

/// The auditor over `store` instrumented, its waiters leading (as over SQLite).
fn leading(store: Arc<dyn Store>) -> (Arc<Instrumented>, Auditor) {
    let instrumented = Instrumented::new(store);
    instrumented.leads.store(true, Ordering::SeqCst);
    let auditor = Auditor::new(instrumented.store(), Duration::from_secs(5));
    (instrumented, auditor)
}

#[test]
fn a_waiter_commits_the_queue_itself_when_no_one_else_writes() {
    let (_d, store) = fresh_store();
    let (instrumented, auditor) = leading(store.clone());
    let me = std::thread::current().name().unwrap().to_owned();
    assert!(matches!(auditor.record(entry("git_add", true)), AuditReceipt::Appended { .. }));
    assert_eq!(*instrumented.committers.lock().unwrap(), [me], "no hand-off to the writer thread");

    assert_eq!(auditor.queue(entry("git_status", true)), AuditReceipt::Queued);
    assert!(auditor.flush(Duration::from_secs(5)));
    assert_eq!(instrumented.committers.lock().unwrap()[1], "fleetgate-audit", "a read's entry is the thread's");

    for i in 0..3 {
        auditor.queue(entry(&format!("read_{i}"), true));
    }
    // Committed by whoever writes next (this thread, unless the writer thread's linger ran
    // out first), in the order queued either way.
    assert!(matches!(auditor.record(entry("git_commit", true)), AuditReceipt::Appended { .. }));
    assert_eq!(tools(&*store), ["git_add", "git_status", "read_0", "read_1", "read_2", "git_commit"]);
}

#[test]
fn concurrent_leaders_and_queued_entries_land_in_order_without_gaps() {
    let (_d, store) = fresh_store();
    let (_instrumented, auditor) = leading(store.clone());
    std::thread::scope(|scope| {
        for t in 0..6 {
            let auditor = auditor.clone();
            scope.spawn(move || {
                for i in 0..40 {
                    auditor.queue(entry(&format!("t{t} read {i}"), true));
                    let receipt = auditor.record(entry(&format!("t{t} write {i}"), true));
                    assert!(matches!(receipt, AuditReceipt::Appended { .. }), "{receipt:?}");
                }
            });
        }
    });
    assert!(auditor.flush(Duration::from_secs(5)));
    let stored = store.list_audit(None, 10_000).unwrap();
    assert_eq!(stored.len(), 6 * 80);
    let ids: Vec<i64> = stored.iter().map(|e| e.id.unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "gap-free ids");
    for t in 0..6 {
        let own: Vec<&str> =
            stored.iter().map(|e| e.tool.as_str()).filter(|tool| tool.starts_with(&format!("t{t} "))).collect();
        let sent: Vec<String> = (0..40).flat_map(|i| [format!("t{t} read {i}"), format!("t{t} write {i}")]).collect();
        assert_eq!(own, sent, "each thread's entries in the order it queued them");
    }
    assert!(stored.iter().all(|e| e.allowed), "no entry was given up on");
}

#[test]
fn a_leader_whose_write_fails_leaves_the_batch_to_the_thread() {
    let (_d, store) = fresh_store();
    let (instrumented, auditor) = leading(store.clone());
    instrumented.fail_audit.store(true, Ordering::SeqCst);
    auditor.queue(entry("git_status", true));
    let receipt = auditor.record(entry("git_push", true));
    assert!(matches!(&receipt, AuditReceipt::Failed { error } if error.contains("failing")), "{receipt:?}");
    instrumented.fail_audit.store(false, Ordering::SeqCst);
    assert!(auditor.flush(Duration::from_secs(20)), "the thread writes what the leader could not");
    let stored = store.list_audit(None, 10).unwrap();
    assert_eq!(stored.iter().map(|e| e.tool.as_str()).collect::<Vec<_>>(), ["git_status", "git_push"]);
    assert!(stored[0].allowed);
    assert_eq!(stored[1].blocker_kind.as_deref(), Some("audit_unavailable"), "the refusal the call got");
    assert!(instrumented.committers.lock().unwrap().iter().any(|t| t == "fleetgate-audit"));
}
