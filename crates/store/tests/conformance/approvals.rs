//! Approval requests: one pending request per call, an answer only to a pending request,
//! what stands on record for a call (and its overrides), an approval used once and only
//! within its window — an answer from a clock a second ahead included — a withdrawal.

use crate::engines::Fixture;
use crate::support::now;
use fleetgate_core::approval::{ApprovalRequest, ApprovalState, call_digest, request_id};
use serde_json::json;

fn request(nonce: u128, worker: &str, index: u64) -> ApprovalRequest {
    let arguments = json!({ "method": "merge", "index": index, "body": "quote \" ünïcödé" }).as_object().cloned();
    ApprovalRequest {
        id: request_id(nonce),
        requested_at: now(),
        profile: "prgs-merger".into(),
        role: "merger".into(),
        worker: Some(worker.into()),
        principal: Some("claude-code".into()),
        tool: "pull_request_write".into(),
        digest: call_digest(Some(worker), "pull_request_write", arguments.as_ref()),
        arguments,
        why: "rule fleet.toml:3 asks".into(),
        state: ApprovalState::Pending,
        answered_by: None,
        answered_at: None,
        answer_reason: None,
        used_at: None,
    }
}

pub fn an_approval_covers_one_pending_call_and_is_used_once(fx: &Fixture) {
    let store = fx.open();
    let first = request(1, "w1", 3);
    assert_eq!(store.request_approval(&first).unwrap(), first, "recorded as given");
    // The same call asked again (a retry, another connection): the same request.
    let again = store.request_approval(&request(2, "w1", 3)).unwrap();
    assert_eq!(again.id, first.id);
    let other = store.request_approval(&request(3, "w1", 4)).unwrap();
    assert_ne!(other.id, first.id, "other arguments are another call");
    assert_eq!(store.list_approvals(true).unwrap().len(), 2);

    // Nothing covers a pending call; it stands on record as pending, with the worker's count.
    assert!(store.use_approval(&first.id, now(), now().plus_seconds(5)).unwrap().is_none());
    let on = store.approvals_on_record(std::slice::from_ref(&first.digest), Some("w1"), now()).unwrap();
    assert_eq!((on.requests.len(), on.requests[0].state, on.pending_of_worker), (1, ApprovalState::Pending, 2));
    let answered = store.answer_approval(&first.id, true, "alice", Some("ok to ship"), now().plus_seconds(10)).unwrap();
    let answered = answered.expect("a pending request is answered");
    assert_eq!((answered.state, answered.answered_by.as_deref()), (ApprovalState::Approved, Some("alice")));
    assert_eq!(answered.answer_reason.as_deref(), Some("ok to ship"));
    assert!(
        store.answer_approval(&first.id, false, "bob", None, now().plus_seconds(11)).unwrap().is_none(),
        "answered once"
    );
    // Outside its window (answered before `not_before`): not on record, not covered.
    let late = store.approvals_on_record(std::slice::from_ref(&first.digest), None, now().plus_seconds(11)).unwrap();
    assert!(late.requests.is_empty(), "{late:?}");
    assert!(store.use_approval(&first.id, now().plus_seconds(11), now().plus_seconds(12)).unwrap().is_none());
    // An answer given by a clock ahead of the deciding one's (answered at +10, decided at
    // +9): an answer given is an answer seen.
    let on = store.approvals_on_record(&[first.digest.clone(), "sha256:other".into()], None, now()).unwrap();
    assert_eq!((on.requests.len(), on.requests[0].state), (1, ApprovalState::Approved));
    let used = store.use_approval(&first.id, now(), now().plus_seconds(9)).unwrap().expect("covered once");
    assert_eq!(
        (used.id.as_str(), used.state, used.used_at),
        (first.id.as_str(), ApprovalState::Used, Some(now().plus_seconds(9)))
    );
    assert!(store.use_approval(&first.id, now(), now().plus_seconds(13)).unwrap().is_none(), "used once only");
    let on = store.approvals_on_record(std::slice::from_ref(&first.digest), None, now()).unwrap();
    assert!(on.requests.is_empty(), "a used approval stands no more");
    // The call asked again after its request was answered is a new request.
    let fresh = store.request_approval(&request(4, "w1", 3)).unwrap();
    assert_eq!((fresh.id, fresh.state), (request_id(4), ApprovalState::Pending));

    // Denied, then withdrawn: neither covers anything.
    let denied = store.answer_approval(&other.id, false, "bob", None, now().plus_seconds(20)).unwrap().unwrap();
    assert_eq!(denied.state, ApprovalState::Denied);
    assert!(store.use_approval(&other.id, now(), now().plus_seconds(21)).unwrap().is_none());
    let on = store.approvals_on_record(std::slice::from_ref(&other.digest), None, now()).unwrap();
    assert_eq!(on.requests.iter().map(|r| r.state).collect::<Vec<_>>(), [ApprovalState::Denied], "a denial stands");
    assert!(store.withdraw_approval(&request_id(4), "the client went away", now().plus_seconds(22)).unwrap());
    assert!(!store.withdraw_approval(&request_id(4), "again", now().plus_seconds(23)).unwrap());
    assert_eq!(store.approval(&request_id(4)).unwrap().unwrap().state, ApprovalState::Withdrawn);
    assert!(store.list_approvals(true).unwrap().is_empty());
    assert_eq!(store.list_approvals(false).unwrap().len(), 3);
    assert!(store.approval("apr-none").unwrap().is_none());
    assert!(store.answer_approval("apr-none", true, "alice", None, now()).unwrap().is_none());
}
