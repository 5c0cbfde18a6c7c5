//! The audit log: appended in order, listed oldest first, the newest `limit`.

use crate::engines::Fixture;
use crate::support::{audit_entry, now};

pub fn audit_appends_in_order_and_lists_the_newest(fx: &Fixture) {
    let store = fx.open();
    assert!(store.list_audit(None, 10).unwrap().is_empty());
    let mut written = Vec::new();
    for (i, tool) in ["gitea_merge", "gitea_review", "gitea_push", "gitea_read", "gitea_close"].iter().enumerate() {
        let mut entry = audit_entry(tool, now().plus_seconds(10 * i as i64));
        if i == 1 {
            // Exact round trip of what JSON must escape, and of no worker.
            entry.reasons = vec!["quote \" backslash \\ nul \u{0} tab \t ünïcödé".into(), String::new()];
            entry.worker_identity = None;
            entry.blocker_kind = None;
            entry.principal = None;
            entry.allowed = true;
        }
        let id = store.append_audit(&entry).unwrap();
        entry.id = Some(id);
        written.push(entry);
    }
    let ids: Vec<i64> = written.iter().map(|e| e.id.unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "sequence numbers increase: {ids:?}");

    assert_eq!(store.list_audit(None, 10).unwrap(), written);
    assert_eq!(store.list_audit(None, 2).unwrap(), written[3..], "the newest two, oldest first");
    assert_eq!(store.list_audit(Some(now().plus_seconds(20)), 10).unwrap(), written[2..], "at or after `since`");
    assert_eq!(store.list_audit(Some(now().plus_seconds(21)), 1).unwrap(), written[4..]);
    assert!(store.list_audit(None, 0).unwrap().is_empty());
    assert!(store.list_audit(Some(now().plus_seconds(41)), 10).unwrap().is_empty());
}
