//! Approval requests: one pending request per call, an answer only to a pending request,
//! what stands on record for a call (and its overrides), an approval used once and only
//! within its window — an answer from a clock a second ahead included — a withdrawal.

use crate::engines::Fixture;
use crate::support::now;
use fleetgate_core::approval::{ApprovalRequest, ApprovalState, Approver, call_digest, request_id};
use fleetgate_core::person::{People, Person};
use fleetgate_store::{Answered, NotifyHold};
use serde_json::json;

const TOOL: &str = "pull_request_write";

pub fn request(nonce: u128, worker: &str, index: u64) -> ApprovalRequest {
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
        does: Some(format!("merge o/r#{index} at 3386c20 onto main, squash")),
        why: "rule fleet.toml:3 asks".into(),
        ..ApprovalRequest::default()
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
    let on = store.approvals_on_record(std::slice::from_ref(&first.digest), (Some("w1"), TOOL), now()).unwrap();
    assert_eq!((on.requests.len(), on.requests[0].state, on.pending_of_worker), (1, ApprovalState::Pending, 2));
    let answered = store.answer_approval(
        &first.id,
        (&who("os:alice"), &people()),
        true,
        Some("ok to ship"),
        now().plus_seconds(10),
    );
    let Answered::Recorded(answered) = answered.unwrap() else { panic!("a pending request is answered") };
    assert_eq!((answered.state, answered.answered_by.as_deref()), (ApprovalState::Approved, Some("os:alice")));
    assert_eq!(answered.answer_reason.as_deref(), Some("ok to ship"));
    assert!(
        matches!(
            store.answer_approval(&first.id, (&who("os:bob"), &people()), false, None, now().plus_seconds(11)).unwrap(),
            Answered::NotPending(Some(_))
        ),
        "answered once"
    );
    // Outside its window (answered before `not_before`): not on record, not covered.
    let late =
        store.approvals_on_record(std::slice::from_ref(&first.digest), (None, TOOL), now().plus_seconds(11)).unwrap();
    assert!(late.requests.is_empty(), "{late:?}");
    assert!(store.use_approval(&first.id, now().plus_seconds(11), now().plus_seconds(12)).unwrap().is_none());
    // An answer given by a clock ahead of the deciding one's (answered at +10, decided at
    // +9): an answer given is an answer seen.
    let on = store.approvals_on_record(&[first.digest.clone(), "sha256:other".into()], (None, TOOL), now()).unwrap();
    assert_eq!((on.requests.len(), on.requests[0].state), (1, ApprovalState::Approved));
    let used = store.use_approval(&first.id, now(), now().plus_seconds(9)).unwrap().expect("covered once");
    assert_eq!(
        (used.id.as_str(), used.state, used.used_at),
        (first.id.as_str(), ApprovalState::Used, Some(now().plus_seconds(9)))
    );
    assert!(store.use_approval(&first.id, now(), now().plus_seconds(13)).unwrap().is_none(), "used once only");
    let on = store.approvals_on_record(std::slice::from_ref(&first.digest), (None, TOOL), now()).unwrap();
    assert!(on.requests.is_empty(), "a used approval stands no more");
    // The call asked again after its request was answered is a new request.
    let fresh = store.request_approval(&request(4, "w1", 3)).unwrap();
    assert_eq!((fresh.id, fresh.state), (request_id(4), ApprovalState::Pending));

    // Denied, then withdrawn: neither covers anything.
    let Answered::Recorded(denied) =
        store.answer_approval(&other.id, (&who("os:bob"), &people()), false, None, now().plus_seconds(20)).unwrap()
    else {
        panic!("denied")
    };
    assert_eq!(denied.state, ApprovalState::Denied);
    assert!(store.use_approval(&other.id, now(), now().plus_seconds(21)).unwrap().is_none());
    let on = store.approvals_on_record(std::slice::from_ref(&other.digest), (None, TOOL), now()).unwrap();
    assert_eq!(on.requests.iter().map(|r| r.state).collect::<Vec<_>>(), [ApprovalState::Denied], "a denial stands");
    // For every worker: another worker's digest finds no request, and the tool's denials
    // within the window (the caller compares the exact call) — none of another tool's, none
    // answered before the window.
    let elsewhere = request(5, "w2", 4);
    let on = store.approvals_on_record(std::slice::from_ref(&elsewhere.digest), (Some("w2"), TOOL), now()).unwrap();
    assert!(on.requests.is_empty(), "{on:?}");
    assert_eq!(on.denials.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), [other.id.as_str()], "{on:?}");
    assert!(store.approvals_on_record(&[], (None, "another_tool"), now()).unwrap().denials.is_empty());
    assert!(store.approvals_on_record(&[], (None, TOOL), now().plus_seconds(21)).unwrap().denials.is_empty());
    assert!(store.withdraw_approval(&request_id(4), "the client went away", now().plus_seconds(22)).unwrap());
    assert!(!store.withdraw_approval(&request_id(4), "again", now().plus_seconds(23)).unwrap());
    assert_eq!(store.approval(&request_id(4)).unwrap().unwrap().state, ApprovalState::Withdrawn);
    assert!(store.list_approvals(true).unwrap().is_empty());
    assert_eq!(store.list_approvals(false).unwrap().len(), 3);
    assert!(store.approval("apr-none").unwrap().is_none());
    assert_eq!(
        store.answer_approval("apr-none", (&who("os:alice"), &people()), true, None, now()).unwrap(),
        Answered::NotPending(None)
    );
}

fn who(id: &str) -> Approver {
    Approver { id: id.into(), ..Approver::default() }
}

/// Who is who in these stories: the requests' principals are Carol's, each operator is a person.
pub fn people() -> People {
    let person = |name: &str, ids: &[&str]| Person {
        name: name.into(),
        identities: ids.iter().map(|i| (*i).to_owned()).collect(),
    };
    People {
        people: vec![
            person("alice", &["os:alice", "oidc:alice"]),
            person("bob", &["os:bob", "oidc:bob"]),
            person("carol", &["principal:claude-code", "oauth:carol", "oidc:carol"]),
            person("op", &["os:op"]),
        ],
        ..People::default()
    }
}

/// Two named approvers, from two threads at once: both answers are counted (the request's
/// row is locked while each is judged), the request is approved once, and a third person, the
/// requester, or an approver answering twice is refused, each with why; every change is an
/// event, in order, and `expire_approvals` closes an approval never used.
pub fn a_two_person_rule_counts_concurrent_answers_and_events_follow_every_change(fx: &Fixture) {
    let store = fx.open();
    let mut asked = request(10, "w9", 9);
    asked.principal = Some("oauth:carol".into());
    asked.approvers = vec!["oidc:alice".into(), "oidc:bob".into(), "oidc:carol".into()];
    asked.required = 2;
    let asked = store.request_approval(&asked).unwrap();
    let start = store.approval_events(0, 1000).unwrap().last().map_or(0, |e| e.id);
    let refused = |id: &str| match store.answer_approval(&asked.id, (&who(id), &people()), true, None, now()).unwrap() {
        Answered::Refused(r, why) => (r.state, why),
        other => panic!("{id} was not refused: {other:?}"),
    };
    assert!(refused("oidc:mallory").1.contains("not among the approvers"));
    assert!(refused("oidc:carol").1.contains("their own calls made"), "the requester's own principal");
    let answers: Vec<Answered> = std::thread::scope(|s| {
        let threads: Vec<_> = ["oidc:alice", "oidc:bob"]
            .map(|id| {
                let store = fx.open();
                let asked = asked.id.clone();
                s.spawn(move || {
                    store.answer_approval(&asked, (&who(id), &people()), true, None, now().plus_seconds(1)).unwrap()
                })
            })
            .into_iter()
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    assert!(answers.iter().all(|a| matches!(a, Answered::Recorded(_))), "{answers:?}");
    let after = store.approval(&asked.id).unwrap().unwrap();
    assert_eq!((after.state, after.answers.len()), (ApprovalState::Approved, 2), "{after:?}");
    assert!(matches!(
        store.answer_approval(&asked.id, (&who("oidc:alice"), &people()), true, None, now()).unwrap(),
        Answered::NotPending(Some(_))
    ));
    // One approval of two does not approve; a denial after it denies.
    let mut solo = request(11, "w9", 10);
    solo.required = 2;
    solo.principal = None;
    let solo = store.request_approval(&solo).unwrap();
    let Answered::Recorded(half) =
        store.answer_approval(&solo.id, (&who("os:alice"), &people()), true, None, now()).unwrap()
    else {
        panic!()
    };
    assert_eq!(half.state, ApprovalState::Pending);
    assert!(refused_again(&*store, &solo.id, "os:alice").contains("already"));
    // The same person through another channel, and a shared credential, are no second person.
    assert!(refused_again(&*store, &solo.id, "oidc:alice").contains("already"), "alice signed in");
    assert!(refused_again(&*store, &solo.id, "token:dashboard").contains("several people use"));
    let Answered::Recorded(no) =
        store.answer_approval(&solo.id, (&who("os:bob"), &people()), false, Some("no"), now()).unwrap()
    else {
        panic!()
    };
    assert_eq!(no.state, ApprovalState::Denied);
    // Every change an event, in order.
    let events = store.approval_events(start, 100).unwrap();
    let kinds: Vec<(&str, &str)> = events.iter().map(|e| (e.kind.as_str(), e.request.id.as_str())).collect();
    assert_eq!(
        kinds,
        [
            ("answered", asked.id.as_str()),
            ("answered", asked.id.as_str()),
            ("requested", solo.id.as_str()),
            ("answered", solo.id.as_str()),
            ("answered", solo.id.as_str()),
        ],
        "{events:?}"
    );
    assert_eq!(events[1].request.state, ApprovalState::Approved);
    assert!(events.windows(2).all(|w| w[0].id < w[1].id));
    assert_eq!(store.approval_events(events[2].id, 1).unwrap()[0].id, events[3].id, "paged after an id");
    // Never used within its window: expired, with its event; once.
    let expired = store.expire_approvals(now().plus_seconds(100), now().plus_seconds(100)).unwrap();
    assert_eq!(expired.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), [asked.id.as_str()]);
    assert_eq!(store.approval(&asked.id).unwrap().unwrap().state, ApprovalState::Expired);
    assert!(store.expire_approvals(now().plus_seconds(100), now().plus_seconds(101)).unwrap().is_empty());
    assert_eq!(store.approval_events(0, 1000).unwrap().last().map(|e| e.kind.as_str()), Some("expired"));
}

fn refused_again(store: &dyn fleetgate_store::Store, id: &str, who_: &str) -> String {
    match store.answer_approval(id, (&who(who_), &people()), true, None, now()).unwrap() {
        Answered::Refused(_, why) => why,
        other => panic!("not refused: {other:?}"),
    }
}

/// One process delivers to a notification target at a time: the cursor is held until its
/// hold lapses, advanced only by its holder, and a new target starts where it is told.
pub fn a_notification_cursor_has_one_holder_and_advances_only_by_it(fx: &Fixture) {
    let store = fx.open();
    let t = |s: i64| now().plus_seconds(s);
    assert_eq!(
        store.claim_notify(&NotifyHold { target: "hook", holder: "a", until: t(30) }, 7, t(0)).unwrap(),
        Some(7),
        "a new target starts at 7"
    );
    assert_eq!(
        store.claim_notify(&NotifyHold { target: "hook", holder: "b", until: t(30) }, 0, t(1)).unwrap(),
        None,
        "held by a"
    );
    assert!(store.advance_notify("hook", "a", 9, t(30)).unwrap());
    assert!(!store.advance_notify("hook", "b", 12, t(40)).unwrap(), "b does not hold it");
    assert_eq!(
        store.claim_notify(&NotifyHold { target: "hook", holder: "a", until: t(60) }, 0, t(2)).unwrap(),
        Some(9),
        "the holder renews"
    );
    assert_eq!(
        store.claim_notify(&NotifyHold { target: "hook", holder: "b", until: t(90) }, 0, t(61)).unwrap(),
        Some(9),
        "a's hold lapsed"
    );
    assert!(!store.advance_notify("hook", "a", 10, t(90)).unwrap(), "a lost it");
    assert_eq!(
        store.claim_notify(&NotifyHold { target: "other", holder: "a", until: t(30) }, 0, t(62)).unwrap(),
        Some(0),
        "targets are apart"
    );
    // What a target still owes is read from its cursor, by any process.
    assert_eq!(store.notify_cursor("hook").unwrap(), Some(9));
    assert_eq!(store.notify_cursor("never").unwrap(), None);
}
