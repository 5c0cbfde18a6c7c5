//! The operator's side of approvals (`fleetgate approvals`): the waiting requests as an
//! operator reads them, and an answer — recorded once, on a pending request only, and audited
//! with who gave it.

use fleetgate_core::Timestamp;
use fleetgate_core::approval::{ApprovalRequest, Approver};
use fleetgate_core::audit::AuditEntry;
use fleetgate_core::text::shown;
use fleetgate_store::{Answered, Store, StoreError};

/// The audit log's name for an approval's events.
pub const APPROVAL_EVENT: &str = "approval";

/// The requests as an operator reads them before answering: one block each, first what the
/// call does in words (from its judged effect), then who asks
/// (profile, role, worker, principal), the tool, why, and every key and value of the exact
/// arguments on a line of its own, uncut (a table's cell would cut a long call and hide its
/// later keys). Every value is [`shown`]: an invisible or direction-changing character is
/// escaped, so `ma\u{fe0f}in` never reads as `main`.
pub fn listing(requests: &[ApprovalRequest]) -> String {
    if requests.is_empty() {
        return "no approval requests".into();
    }
    let line = |text: String| shown(&text, usize::MAX);
    let mut out: Vec<String> = Vec::new();
    for r in requests {
        if !out.is_empty() {
            out.push(String::new());
        }
        out.push(line(format!("{}  {}  asked {}", r.id, r.state, r.requested_at)));
        if let Some(does) = &r.does {
            out.push(line(format!("  does:      {does}")));
        }
        out.push(line(format!(
            "  who:       {} (role {}), worker {}, principal {}",
            r.profile,
            r.role,
            r.worker.as_deref().unwrap_or("-"),
            r.principal.as_deref().unwrap_or("-")
        )));
        out.push(line(format!("  tool:      {}", r.tool)));
        out.push(line(format!("  why:       {}", r.why)));
        match r.arguments.as_ref().filter(|a| !a.is_empty()) {
            None => out.push("  arguments: {}".into()),
            Some(arguments) => {
                out.push("  arguments:".into());
                for (key, value) in arguments {
                    out.push(line(format!("    {}: {value}", serde_json::Value::from(key.as_str()))));
                }
            }
        }
        if !r.approvers.is_empty() || r.required > 1 {
            let who = if r.approvers.is_empty() { "any operator".to_owned() } else { r.approvers.join(", ") };
            out.push(line(format!("  approvers: {who}; {} approval(s) required", r.required)));
        }
        for a in &r.answers {
            let word = if a.approve { "approved" } else { "denied" };
            let name = a.name.as_deref().map(|n| format!("{n} ")).unwrap_or_default();
            let reason = a.reason.as_deref().map(|x| format!(": {x}")).unwrap_or_default();
            out.push(line(format!("  answer:    {word} by {name}{} at {}{reason}", a.by, a.at)));
        }
        let needed = fleetgate_core::approval::approvals_needed(r);
        if needed > 0 && !r.answers.is_empty() {
            out.push(line(format!("  needs:     {needed} more approval(s)")));
        }
        if let (Some(by), Some(at)) = (&r.answered_by, r.answered_at) {
            let reason = r.answer_reason.as_deref().map(|x| format!(": {x}")).unwrap_or_default();
            out.push(line(format!("  answered:  by {by} at {at}{reason}")));
        }
        if let Some(at) = r.used_at {
            out.push(line(format!("  used:      {at}")));
        }
    }
    out.join("\n")
}

/// One approval event as a line for a terminal: when, what, the request and where it stands.
pub fn event_line(event: &fleetgate_store::ApprovalEvent) -> String {
    let r = &event.request;
    let what = match event.kind.as_str() {
        "answered" => {
            let last = r.answers.last();
            let word = last.map_or("answered", |a| if a.approve { "approved" } else { "denied" });
            let by = last.map(|a| a.name.clone().map_or_else(|| a.by.clone(), |n| format!("{n} ({})", a.by)));
            let needed = fleetgate_core::approval::approvals_needed(r);
            let more = if needed > 0 { format!(", {needed} more needed") } else { format!(", now {}", r.state) };
            format!("{word} by {}{more}", by.unwrap_or_else(|| "an operator".into()))
        }
        kind => kind.to_owned(),
    };
    let args = r.arguments.as_ref().map(|a| serde_json::Value::Object(a.clone()).to_string()).unwrap_or_default();
    shown(
        &format!(
            "{} {} {what}: {} (role {}, worker {}) `{}` {args}",
            event.at,
            r.id,
            r.profile,
            r.role,
            r.worker.as_deref().unwrap_or("-"),
            r.tool
        ),
        usize::MAX,
    )
}

/// Why an answer was not recorded.
#[derive(Debug)]
pub enum AnswerError {
    /// No such request, or it is not pending (answered, withdrawn): it as it stands.
    NotPending(Option<Box<ApprovalRequest>>),
    /// The approver may not answer it: why (the requester's own principal, not among its
    /// approvers, answered already).
    Refused(Box<ApprovalRequest>, String),
    /// The store failed.
    Store(StoreError),
}

impl std::fmt::Display for AnswerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotPending(None) => f.write_str("no such approval request"),
            Self::NotPending(Some(r)) => write!(f, "approval request {} is {}, not pending", r.id, r.state),
            Self::Refused(_, why) => f.write_str(why),
            Self::Store(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for AnswerError {}

/// `approver`'s answer (approve, or deny) to the pending request `id`, with the roster's
/// `people` saying who is who, audited under the approver's identity (the entry's principal):
/// the request as it stands after (approved once enough people have, denied at the first
/// denial). An answer refused — not among the approvers, the requester's own, a second one, or
/// to a request that is not pending — is audited as a refusal (`allowed: false`), naming who
/// tried and why.
pub fn answer(
    store: &dyn Store,
    id: &str,
    (approver, people): (&Approver, &fleetgate_core::person::People),
    approve: bool,
    reason: Option<&str>,
    now: Timestamp,
) -> Result<ApprovalRequest, AnswerError> {
    let word = if approve { "approve" } else { "deny" };
    let refusal = |why: &str| AuditEntry {
        allowed: false,
        principal: Some(approver.id.clone()),
        ..AuditEntry::event(
            now,
            "operator",
            APPROVAL_EVENT,
            format!("approval request {id}: {} may not {word} it: {why}", approver.shown()),
        )
    };
    let by = (approver, people);
    let answered = match store.answer_approval(id, by, approve, reason, now).map_err(AnswerError::Store)? {
        Answered::Recorded(r) => r,
        Answered::NotPending(r) => {
            let err = AnswerError::NotPending(r.map(Box::new));
            store.append_audit(&refusal(&err.to_string())).map_err(AnswerError::Store)?;
            return Err(err);
        }
        Answered::Refused(r, why) => {
            store.append_audit(&refusal(&why)).map_err(AnswerError::Store)?;
            return Err(AnswerError::Refused(Box::new(r), why));
        }
    };
    let word = if approve { "approved" } else { "denied" };
    let needed = fleetgate_core::approval::approvals_needed(&answered);
    let state = match answered.state {
        fleetgate_core::approval::ApprovalState::Pending => format!("; {needed} more approval(s) needed"),
        s => format!("; the request is {s}"),
    };
    let event = format!(
        "approval request {id} ({} `{}` for worker {}) {word} by {}{}{state}",
        answered.profile,
        answered.tool,
        answered.worker.as_deref().unwrap_or("-"),
        approver.shown(),
        reason.map(|r| format!(": {r}")).unwrap_or_default()
    );
    let entry = AuditEntry {
        principal: Some(approver.id.clone()),
        ..AuditEntry::event(now, "operator", APPROVAL_EVENT, event)
    };
    store.append_audit(&entry).map_err(AnswerError::Store)?;
    Ok(answered)
}

/// The store's word that approvals changed, for the calls this process holds: one thread,
/// while any call waits, blocks on the store's [`fleetgate_store::ApprovalWatch`]
/// (PostgreSQL `LISTEN`, SQLite inotify) and bumps a version every waiter watches; each
/// waiter then reads its own request again. Without a change it bumps every
/// [`BACKSTOP`] anyway, so a filesystem that reports nothing delays an answer, never loses it.
#[derive(Debug, Clone)]
pub struct AnswerWatch {
    inner: std::sync::Arc<WatchInner>,
}

#[derive(Debug)]
struct WatchInner {
    tx: tokio::sync::watch::Sender<u64>,
    /// The watching thread runs (it ends when no call waits).
    running: std::sync::Mutex<bool>,
}

/// How long the watch waits for the store's word before the waiters look again anyway.
pub const BACKSTOP: std::time::Duration = std::time::Duration::from_secs(10);

impl Default for AnswerWatch {
    fn default() -> Self {
        Self {
            inner: std::sync::Arc::new(WatchInner {
                tx: tokio::sync::watch::Sender::new(0),
                running: std::sync::Mutex::new(false),
            }),
        }
    }
}

impl AnswerWatch {
    /// Follow the changes of `store`'s approvals (the watching thread starts if it is not running).
    pub fn subscribe(&self, store: &std::sync::Arc<dyn Store>) -> tokio::sync::watch::Receiver<u64> {
        let rx = self.inner.tx.subscribe();
        let mut running = self.inner.running.lock().unwrap_or_else(|e| e.into_inner());
        if !*running {
            let (inner, store) = (std::sync::Arc::clone(&self.inner), std::sync::Arc::clone(store));
            let spawned =
                std::thread::Builder::new().name("approval-watch".into()).spawn(move || watch(&inner, &*store));
            match spawned {
                Ok(_) => *running = true,
                Err(e) => {
                    tracing::warn!(error = %e, "the approvals watch could not start; held calls look again every 10 s")
                }
            }
        }
        rx
    }

    /// Wake every waiter now (a request of this process was withdrawn).
    pub fn nudge(&self) {
        self.inner.tx.send_modify(|v| *v += 1);
    }
}

fn watch(inner: &WatchInner, store: &dyn Store) {
    let mut watching: Option<Box<dyn fleetgate_store::ApprovalWatch>> = None;
    loop {
        let changed = match &mut watching {
            Some(w) => w.wait(BACKSTOP),
            None => store.approval_watch().map(|w| {
                watching = Some(w);
                // Not listening until now: an answer may have come meanwhile.
                true
            }),
        };
        match changed {
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "the approvals watch failed; it starts again");
                watching = None;
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        }
        // Every outcome wakes the waiters: a change, the backstop, or a failed watch.
        inner.tx.send_modify(|v| *v += 1);
        let mut running = inner.running.lock().unwrap_or_else(|e| e.into_inner());
        if inner.tx.receiver_count() == 0 {
            *running = false;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetgate_core::approval::call_digest;

    fn request(arguments: serde_json::Value, why: &str) -> ApprovalRequest {
        let arguments = arguments.as_object().cloned();
        ApprovalRequest {
            id: "apr-00000000000000a1".into(),
            requested_at: Timestamp::parse("2026-01-02T03:04:05Z").unwrap(),
            profile: "prgs-merger".into(),
            role: "merger".into(),
            worker: Some("wrk-m".into()),
            principal: Some("alice".into()),
            tool: "pull_request_write".into(),
            digest: call_digest(Some("wrk-m"), "pull_request_write", arguments.as_ref()),
            arguments,
            does: None,
            why: why.into(),
            ..ApprovalRequest::default()
        }
    }

    /// Issue 55: Mallory's and Carol's refused answers were audited like Alice's approval
    /// (`allowed: true`, no principal). A refusal is audited as one, naming who tried; an
    /// accepted answer names who gave it.
    #[test]
    fn a_refused_answer_is_audited_as_a_refusal_with_who_tried() {
        let dir = tempfile::tempdir().unwrap();
        let store = fleetgate_store::open(&dir.path().join("s.sqlite3").display().to_string()).unwrap();
        let now = Timestamp::parse("2026-01-02T03:04:05Z").unwrap();
        let r = ApprovalRequest {
            approvers: vec!["oidc:alice".into(), "oidc:carol".into()],
            principal: Some("oauth:carol".into()),
            ..request(serde_json::json!({ "method": "merge", "pull_number": 1 }), "rule 3 asks")
        };
        let id = store.request_approval(&r).unwrap().id;
        // `[[people]]` tells Alice and Carol apart (else an approval of Carol's call fails closed).
        let person = |name: &str, ids: &[&str]| fleetgate_core::person::Person {
            name: name.into(),
            identities: ids.iter().map(|i| (*i).to_owned()).collect(),
        };
        let people = fleetgate_core::person::People {
            people: vec![person("alice", &["oidc:alice"]), person("carol", &["oidc:carol", "oauth:carol"])],
            ..fleetgate_core::person::People::default()
        };
        let who = |id: &str| Approver { id: id.into(), ..Approver::default() };
        let by = |a: &str| (who(a), &people);
        let say = |a: &str, yes: bool| answer(&*store, &id, (&by(a).0, by(a).1), yes, None, now);
        assert!(matches!(say("oidc:mallory", true), Err(AnswerError::Refused(..))));
        assert!(matches!(say("oidc:carol", true), Err(AnswerError::Refused(..))));
        let alice = say("oidc:alice", true);
        assert!(alice.is_ok(), "{:?}", alice.err().map(|e| e.to_string()));
        assert!(matches!(say("oidc:bob", false), Err(AnswerError::NotPending(_))));
        let audit: Vec<(bool, Option<String>, String)> = store
            .audit_after(0, 100)
            .unwrap()
            .into_iter()
            .filter(|e| e.tool == APPROVAL_EVENT)
            .map(|e| (e.allowed, e.principal, e.reasons.join(" ")))
            .collect();
        let shape: Vec<(bool, Option<&str>)> = audit.iter().map(|(a, p, _)| (*a, p.as_deref())).collect();
        assert_eq!(
            shape,
            [
                (false, Some("oidc:mallory")),
                (false, Some("oidc:carol")),
                (true, Some("oidc:alice")),
                (false, Some("oidc:bob"))
            ],
            "{audit:?}"
        );
        assert!(audit[0].2.contains("not among the approvers"), "{audit:?}");
        assert!(audit[1].2.contains("made the call this request is about"), "{audit:?}");
        assert!(audit[3].2.contains("not pending"), "{audit:?}");
    }

    /// Issue 43 (7): the listing cut the arguments at 120 characters (a long title hid
    /// `pull_number` and `repo`), left out why and the principal, and let four invisible
    /// characters through. Every key and value of the exact call is shown, each invisible one
    /// escaped.
    #[test]
    fn the_listing_shows_every_key_and_value_of_the_exact_call_and_why() {
        let title = "t".repeat(300);
        let r = request(
            serde_json::json!({
                "method": "merge", "owner": "o", "title": title, "pull_number": 7, "repo": "r",
                "base": "ma\u{fe0f}in", "head": "fe\u{034f}at", "body": "\u{3164}\u{115f}",
                "note": "\u{202e}txt.exe", "delete_\u{200b}branch": true,
            }),
            "rule 3 (merges ask) \u{2066}asks",
        );
        let r = ApprovalRequest { does: Some("merge o/r#7 at 3386c20 onto ma\u{fe0f}in, squash".into()), ..r };
        let text = listing(&[r]);
        assert!(!text.chars().any(|c| c != '\n' && fleetgate_core::text::needs_escape(c)), "{text}");
        // Issue 55: what the call does comes first, in words, escaped like every value.
        assert_eq!(
            text.lines().nth(1),
            Some("  does:      merge o/r#7 at 3386c20 onto ma\\u{fe0f}in, squash"),
            "{text}"
        );
        for expected in [
            "\"pull_number\": 7",
            "\"repo\": \"r\"",
            &format!("\"title\": \"{title}\""),
            "\"base\": \"ma\\u{fe0f}in\"",
            "\"head\": \"fe\\u{34f}at\"",
            "\"body\": \"\\u{3164}\\u{115f}\"",
            "\"note\": \"\\u{202e}txt.exe\"",
            "\"delete_\\u{200b}branch\": true",
            "rule 3 (merges ask) \\u{2066}asks",
            "alice",
            "wrk-m",
            "merger",
            "pull_request_write",
        ] {
            assert!(text.contains(expected), "{expected} not in:\n{text}");
        }
    }
}
