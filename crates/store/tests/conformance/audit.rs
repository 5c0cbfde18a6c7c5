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
        if i == 2 {
            // A tools/call decision keeps the call as judged: a digested string included.
            let long = "x".repeat(fleetgate_core::audit::MAX_KEPT_STRING + 1);
            let arguments = serde_json::json!({ "method": "merge", "index": 7, "body": long });
            entry.call = Some(Box::new(fleetgate_core::audit::JudgedCall {
                role: "merger".into(),
                class: fleetgate_core::capability::ToolClass::Mutating,
                tool_class: Some(fleetgate_core::capability::ToolClass::Mutating),
                rule: Some("gitea-mcp:merge".into()),
                rules: "sha256:00ff".into(),
                arguments: fleetgate_core::audit::keep_arguments(
                    arguments.as_object(),
                    fleetgate_core::audit::ArgumentsMode::Full,
                ),
            }));
        }
        if i == 3 {
            entry.call = Some(Box::new(fleetgate_core::audit::JudgedCall {
                role: "author".into(),
                class: fleetgate_core::capability::ToolClass::ReadOnly,
                tool_class: None,
                rule: None,
                rules: "sha256:00ff".into(),
                arguments: fleetgate_core::audit::KeptArguments::Digest { sha256: "ab".into(), bytes: 2 },
            }));
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

/// The log read a page at a time by id (`rules test` on a log of any size): every entry once,
/// in order, whatever the page size, and an empty page past the end.
pub fn audit_pages_by_id_read_every_entry_once(fx: &Fixture) {
    let store = fx.open();
    assert!(store.audit_after(0, 3).unwrap().is_empty());
    let ids: Vec<i64> =
        (0..7).map(|i| store.append_audit(&audit_entry(&format!("t{i}"), now().plus_seconds(i))).unwrap()).collect();
    let mut read = Vec::new();
    let mut after = 0;
    loop {
        let page = store.audit_after(after, 3).unwrap();
        assert!(page.len() <= 3);
        let Some(last) = page.last() else { break };
        after = last.id.unwrap();
        read.extend(page.into_iter().map(|e| (e.id.unwrap(), e.tool)));
    }
    let expected: Vec<(i64, String)> = ids.iter().enumerate().map(|(i, id)| (*id, format!("t{i}"))).collect();
    assert_eq!(read, expected);
    assert!(store.audit_after(*ids.last().unwrap(), 3).unwrap().is_empty());
}
