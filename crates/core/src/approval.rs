//! Operator approval of one exact call (`[[rules]] decision = "ask"`): the request the gate
//! makes for a call a rule says to ask about, the operator's answer, and the single use an
//! approval allows — the identical canonical call (same worker, tool and arguments) within
//! `[approvals] ttl_seconds` of the answer, once. Pure: ids, digests and `now` come in.

use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};
use std::fmt;

/// Where an approval request stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    /// Waiting for an operator.
    Pending,
    /// Approved: the identical call may pass once, within the TTL of the answer.
    Approved,
    /// Denied.
    Denied,
    /// Approved, and the call it covers has passed: it covers nothing more.
    Used,
    /// The caller went away while it waited.
    Withdrawn,
    /// Approved, and not used within `[approvals] ttl_seconds` of the answer: it covers
    /// nothing more.
    Expired,
}

impl ApprovalState {
    /// The literal (`pending`, `approved`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Used => "used",
            Self::Withdrawn => "withdrawn",
            Self::Expired => "expired",
        }
    }

    /// The state a literal names.
    pub fn parse(text: &str) -> Option<Self> {
        [Self::Pending, Self::Approved, Self::Denied, Self::Used, Self::Withdrawn, Self::Expired]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

impl fmt::Display for ApprovalState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One call waiting for (or answered by) an operator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// `apr-<hex>`.
    pub id: String,
    /// When the gate asked.
    pub requested_at: Timestamp,
    /// The deciding server's profile.
    pub profile: String,
    /// The caller's role.
    pub role: String,
    /// The worker the call was made for.
    pub worker: Option<String>,
    /// The HTTP principal, when one.
    pub principal: Option<String>,
    /// The tool.
    pub tool: String,
    /// The canonical arguments, exactly as they would be forwarded.
    pub arguments: Option<Map<String, Value>>,
    /// [`call_digest`] of the worker, the tool and the arguments: what an approval covers.
    pub digest: String,
    /// Why the gate asks (the rule that says so).
    pub why: String,
    /// Where it stands.
    pub state: ApprovalState,
    /// Who answered (an OS user, or a dashboard principal).
    pub answered_by: Option<String>,
    /// When.
    pub answered_at: Option<Timestamp>,
    /// The answer's reason, when given.
    pub answer_reason: Option<String>,
    /// When the call it covers passed.
    pub used_at: Option<Timestamp>,
    /// Who may answer it (`[[rules]] approvers`, else `[approvals] approvers`): identities
    /// (`oidc:<subject>`, `os:<user>`, `token:<name>`) and `group:<name>` (a group the
    /// approver's sign-in claims); empty: any operator.
    #[serde(default)]
    pub approvers: Vec<String>,
    /// How many distinct approvers must approve it (`approvals_required`; at least 1).
    #[serde(default = "one")]
    pub required: u32,
    /// Every answer given, in order.
    #[serde(default)]
    pub answers: Vec<Answer>,
}

fn one() -> u32 {
    1
}

/// Who answers a request: an identity in its realm — `oidc:<subject>` (signed in to the
/// dashboard at the fleet's issuer), `os:<user>` (the CLI's operating-system user),
/// `token:<name>` (automation holding an operator token) — the person's name when known, and
/// the groups their sign-in claims.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approver {
    /// `oidc:<subject>`, `os:<user>`, `token:<name>`.
    pub id: String,
    /// The person's name, when the sign-in says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The groups the sign-in claims.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// The names the same person's calls carry elsewhere: the HTTP principal
    /// `[[http.oauth.principals]]` maps their subject to. A request made under one of them is
    /// theirs too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
}

impl Approver {
    /// `who` as a person reads it: `Name (id)`, or the id.
    pub fn shown(&self) -> String {
        match &self.name {
            Some(name) if !name.is_empty() => format!("{name} ({})", self.id),
            _ => self.id.clone(),
        }
    }
}

/// One answer on record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// The approver's identity.
    pub by: String,
    /// Their name, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Approved (else denied).
    pub approve: bool,
    /// Why, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When.
    pub at: Timestamp,
}

/// The subject an identity names, in the realm a person signs in with: an HTTP principal
/// authenticated by the fleet's issuer (`oauth:<sub>`) and a dashboard sign-in at the same
/// issuer (`oidc:<sub>`) are one person.
fn person(identity: &str) -> String {
    match identity.strip_prefix("oauth:") {
        Some(subject) => format!("oidc:{subject}"),
        None => identity.to_owned(),
    }
}

/// Whether two identities are one person (see [`person`]).
pub fn same_person(a: &str, b: &str) -> bool {
    person(a) == person(b)
}

/// Why `approver` may not answer `request`: not pending, the requester's own principal, not
/// among its approvers, or answered already. `None`: they may.
pub fn refusal(request: &ApprovalRequest, approver: &Approver) -> Option<String> {
    if request.state != ApprovalState::Pending {
        return Some(format!("approval request {} is {}, not pending", request.id, request.state));
    }
    let theirs = |p: &str| same_person(p, &approver.id) || approver.aliases.iter().any(|a| same_person(p, a));
    if request.principal.as_deref().is_some_and(theirs) {
        return Some(format!(
            "{} made the call this request is about: a principal never answers a request its own calls made",
            approver.shown()
        ));
    }
    if !request.approvers.is_empty() {
        let named = request.approvers.iter().any(|a| match a.strip_prefix("group:") {
            Some(group) => approver.groups.iter().any(|g| g == group),
            None => same_person(a, &approver.id),
        });
        if !named {
            return Some(format!(
                "{} is not among the approvers of request {} ({})",
                approver.shown(),
                request.id,
                request.approvers.join(", ")
            ));
        }
    }
    if request.answers.iter().any(|a| same_person(&a.by, &approver.id)) {
        return Some(format!("{} answered request {} already", approver.shown(), request.id));
    }
    None
}

/// `request` with `approver`'s answer: denied at the first denial, approved once
/// `required` distinct approvers have approved, else still pending with the answer recorded.
/// `Err` names why the approver may not answer ([`refusal`]).
pub fn answered(
    request: &ApprovalRequest,
    approver: &Approver,
    approve: bool,
    reason: Option<&str>,
    now: Timestamp,
) -> Result<ApprovalRequest, String> {
    if let Some(why) = refusal(request, approver) {
        return Err(why);
    }
    let mut r = request.clone();
    r.answers.push(Answer {
        by: approver.id.clone(),
        name: approver.name.clone(),
        approve,
        reason: reason.map(str::to_owned),
        at: now,
    });
    let approvals: Vec<&Answer> = r.answers.iter().filter(|a| a.approve).collect();
    let shown = |a: &Answer| match &a.name {
        Some(name) if !name.is_empty() => format!("{name} ({})", a.by),
        _ => a.by.clone(),
    };
    if !approve {
        r.state = ApprovalState::Denied;
        r.answered_by = Some(approver.shown());
        r.answered_at = Some(now);
        r.answer_reason = reason.map(str::to_owned);
    } else if approvals.len() >= r.required.max(1) as usize {
        r.state = ApprovalState::Approved;
        r.answered_by = Some(approvals.iter().map(|a| shown(a)).collect::<Vec<_>>().join(", "));
        r.answered_at = Some(now);
        r.answer_reason = reason.map(str::to_owned);
    }
    Ok(r)
}

/// How many more approvals `request` needs (0 once approved or closed).
pub fn approvals_needed(request: &ApprovalRequest) -> u32 {
    if request.state != ApprovalState::Pending {
        return 0;
    }
    let given = request.answers.iter().filter(|a| a.approve).count() as u32;
    request.required.max(1).saturating_sub(given)
}

/// The digest an approval covers: the worker, the tool and the canonical arguments (as
/// JSON). A call with any other arguments — a key added, a value changed — is another call.
pub fn call_digest(worker: Option<&str>, tool: &str, arguments: Option<&Map<String, Value>>) -> String {
    let call = serde_json::json!({ "worker": worker, "tool": tool, "arguments": arguments });
    let hex: String = Sha256::digest(call.to_string().as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The digest an approval to override the refusal `kind` of the call `call` (its
/// [`call_digest`]) covers: an override is asked and answered for one blocker of one exact
/// call, and replaces that blocker only.
pub fn override_digest(call: &str, kind: crate::blocker::BlockerKind) -> String {
    format!("{call}+override:{kind}")
}

/// The refusal an override request is about (the `+override:<kind>` of its digest), `None`
/// for a request about the call itself.
fn overrides_of(digest: &str) -> Option<&str> {
    digest.split_once("+override:").map(|(_, kind)| kind)
}

/// One exact call, whoever makes it: its tool and the arguments that would be forwarded,
/// pins included (what a request records).
#[derive(Clone, Copy, Debug)]
pub struct ExactCall<'a> {
    /// The tool.
    pub tool: &'a str,
    /// The arguments as they would be forwarded.
    pub arguments: Option<&'a Map<String, Value>>,
}

impl ExactCall<'_> {
    /// Whether `request` is about this exact call (or, with `kind`, about overriding that
    /// refusal of it), whichever worker asked.
    fn names(&self, request: &ApprovalRequest, kind: Option<&str>) -> bool {
        request.tool == self.tool
            && request.arguments.as_ref() == self.arguments
            && overrides_of(&request.digest) == kind
    }
}

/// The operator's answers on record for the call `digest` (`call`, as its worker makes it) and its
/// overrides, from the requests the store holds that still stand (pending, or answered
/// within the TTL and not used) and the denials of the same tool within the TTL: a denial
/// stands over an approval (any denial denies), an approval over a request still waiting.
///
/// A denial stands for the exact call whoever asks it — another worker, a new session — so
/// asking again records nothing and notifies no one; an approval is used only by the worker
/// it was asked for (another's identical call asks for its own).
pub fn on_record(
    requests: &[ApprovalRequest],
    denials: &[ApprovalRequest],
    (digest, call): (&str, ExactCall<'_>),
    overridable: &[crate::blocker::BlockerKind],
    pending_of_worker: usize,
) -> crate::capability::Approvals {
    use crate::capability::Standing;
    let standing = |d: &str, kind: Option<&str>| {
        let of: Vec<&ApprovalRequest> = requests.iter().filter(|r| r.digest == d).collect();
        let by = |r: &ApprovalRequest| {
            let who = r.answered_by.clone().unwrap_or_else(|| "an operator".into());
            match &r.answer_reason {
                Some(reason) => format!("{who} ({reason})"),
                None => who,
            }
        };
        let latest = |state: ApprovalState| of.iter().rev().find(|r| r.state == state).copied();
        let denied = denials
            .iter()
            .filter(|r| r.state == ApprovalState::Denied && call.names(r, kind))
            .chain(latest(ApprovalState::Denied))
            .max_by_key(|r| (r.answered_at, r.requested_at));
        if let Some(r) = denied {
            return Some(Standing::Denied { id: r.id.clone(), by: by(r) });
        }
        // `digest` names the worker: an approval is used only by the worker it was asked for.
        if let Some(r) = of.iter().find(|r| r.state == ApprovalState::Approved) {
            return Some(Standing::Approved { id: r.id.clone(), by: by(r) });
        }
        latest(ApprovalState::Pending).map(|r| Standing::Pending { id: r.id.clone() })
    };
    crate::capability::Approvals {
        call: standing(digest, None),
        overrides: overridable
            .iter()
            .filter_map(|k| Some((*k, standing(&override_digest(digest, *k), Some(k.as_str()))?)))
            .collect(),
        pending_of_worker,
        unavailable: None,
    }
}

/// A request id from `nonce` (the shell's entropy).
pub fn request_id(nonce: u128) -> String {
    format!("apr-{:016x}", nonce as u64)
}

/// Refusals no operator approval overrides, whatever `[approvals] may_override` says: a
/// fenced worker, arguments the server would read otherwise, an invariant (a protected
/// branch or path, and every other), a forge that cannot be read (what the call would do,
/// or the head a merge is pinned to, is unknown), an unaudited mutation, a replaced store —
/// and the approval blockers themselves.
pub const NEVER_OVERRIDDEN: [crate::blocker::BlockerKind; 9] = [
    crate::blocker::BlockerKind::WorkerFenced,
    crate::blocker::BlockerKind::AmbiguousArguments,
    crate::blocker::BlockerKind::ProtectedBranch,
    crate::blocker::BlockerKind::InvariantViolated,
    crate::blocker::BlockerKind::ForgeUnavailable,
    crate::blocker::BlockerKind::AuditUnavailable,
    crate::blocker::BlockerKind::StoreReplaced,
    crate::blocker::BlockerKind::ApprovalPending,
    crate::blocker::BlockerKind::ApprovalDenied,
];

/// What an operator does about a call that waits: the commands, naming the request.
pub fn approval_action(id: &str) -> String {
    format!(
        "an operator approves this exact call with `fleetgate approvals approve {id}` (or refuses it with \
         `fleetgate approvals deny {id}`); once approved, the identical call passes once"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_approval_covers_its_worker_tool_and_exact_arguments_only() {
        let args = json!({ "method": "merge", "index": 3 }).as_object().cloned();
        let digest = call_digest(Some("w1"), "pull_request_write", args.as_ref());
        assert_eq!(digest, call_digest(Some("w1"), "pull_request_write", args.as_ref()), "deterministic");
        let other = json!({ "method": "merge", "index": 4 }).as_object().cloned();
        assert_ne!(digest, call_digest(Some("w1"), "pull_request_write", other.as_ref()), "another value");
        assert_ne!(digest, call_digest(Some("w2"), "pull_request_write", args.as_ref()), "another worker");
        assert_ne!(digest, call_digest(Some("w1"), "pull_request_read", args.as_ref()), "another tool");
        let added = json!({ "method": "merge", "index": 3, "delete_branch_after_merge": true }).as_object().cloned();
        assert_ne!(
            digest,
            call_digest(Some("w1"), "pull_request_write", added.as_ref()),
            "a key added is another call"
        );
    }

    fn request(principal: Option<&str>, approvers: &[&str], required: u32) -> ApprovalRequest {
        ApprovalRequest {
            id: "apr-1".into(),
            requested_at: Timestamp::from_unix(0),
            profile: "prgs-merger".into(),
            role: "merger".into(),
            worker: Some("w".into()),
            principal: principal.map(str::to_owned),
            tool: "merge".into(),
            arguments: None,
            digest: "d".into(),
            why: "r".into(),
            state: ApprovalState::Pending,
            answered_by: None,
            answered_at: None,
            answer_reason: None,
            used_at: None,
            approvers: approvers.iter().map(|a| (*a).to_owned()).collect(),
            required,
            answers: Vec::new(),
        }
    }

    fn who(id: &str, groups: &[&str]) -> Approver {
        Approver { id: id.into(), groups: groups.iter().map(|g| (*g).to_owned()).collect(), ..Approver::default() }
    }

    #[test]
    fn two_distinct_approvers_approve_and_any_denial_denies() {
        let r = request(None, &[], 2);
        let once = answered(&r, &who("oidc:alice", &[]), true, None, Timestamp::from_unix(1)).unwrap();
        assert_eq!((once.state, approvals_needed(&once)), (ApprovalState::Pending, 1));
        let again = answered(&once, &who("oidc:alice", &[]), true, None, Timestamp::from_unix(2)).unwrap_err();
        assert!(again.contains("answered request apr-1 already"), "{again}");
        let twice = answered(&once, &who("os:bob", &[]), true, None, Timestamp::from_unix(3)).unwrap();
        assert_eq!(twice.state, ApprovalState::Approved);
        assert_eq!(twice.answered_by.as_deref(), Some("oidc:alice, os:bob"));
        let denied = answered(&once, &who("os:carol", &[]), false, Some("no"), Timestamp::from_unix(3)).unwrap();
        assert_eq!(denied.state, ApprovalState::Denied);
        assert!(answered(&twice, &who("os:dave", &[]), false, None, Timestamp::from_unix(4)).is_err(), "closed");
    }

    #[test]
    fn only_named_approvers_answer_and_never_the_requester() {
        let r = request(Some("oauth:alice"), &["oidc:bob", "group:release"], 1);
        let own = refusal(&r, &who("oidc:alice", &["release"])).unwrap();
        assert!(own.contains("never answers a request its own calls made"), "{own}");
        let stranger = refusal(&r, &who("oidc:mallory", &["dev"])).unwrap();
        assert!(stranger.contains("not among the approvers"), "{stranger}");
        assert_eq!(refusal(&r, &who("oidc:bob", &[])), None);
        assert_eq!(refusal(&r, &who("os:carol", &["release"])), None, "by group");
        // The requester under a mapped name (`[[http.oauth.principals]]`) is the same person.
        let mapped = request(Some("ci-bot"), &["oidc:svc-7f3a"], 1);
        let svc = Approver { aliases: vec!["ci-bot".into()], ..who("oidc:svc-7f3a", &[]) };
        assert!(refusal(&mapped, &svc).is_some_and(|w| w.contains("made the call")), "by alias");
        assert_eq!(refusal(&mapped, &who("oidc:svc-7f3a", &[])), None, "without the alias, another principal");
        assert_eq!(refusal(&request(None, &[], 1), &who("token:dashboard", &[])), None, "anyone when none named");
    }

    #[test]
    fn a_denial_stands_for_the_exact_call_whoever_asks_and_an_approval_for_its_worker_only() {
        use crate::capability::Standing;
        let args = json!({ "method": "merge", "index": 3, "head_commit_id": "abc" }).as_object().cloned();
        let asked = |worker: &str, state: ApprovalState| ApprovalRequest {
            digest: call_digest(Some(worker), "merge", args.as_ref()),
            worker: Some(worker.into()),
            arguments: args.clone(),
            state,
            answered_at: Some(Timestamp::from_unix(5)),
            ..request(None, &[], 1)
        };
        let call = ExactCall { tool: "merge", arguments: args.as_ref() };
        let mine = call_digest(Some("w2"), "merge", args.as_ref());
        // w1's request denied: w2 (a new session) asking the same exact call is denied too.
        let denied = asked("w1", ApprovalState::Denied);
        let on = on_record(&[], std::slice::from_ref(&denied), (&mine, call), &[], 0);
        assert!(matches!(on.call, Some(Standing::Denied { ref id, .. }) if *id == denied.id), "{on:?}");
        // Another value, another tool, or an override's denial: another call.
        let other = json!({ "method": "merge", "index": 3, "head_commit_id": "abd" }).as_object().cloned();
        let moved = ExactCall { arguments: other.as_ref(), ..call };
        assert_eq!(on_record(&[], std::slice::from_ref(&denied), (&mine, moved), &[], 0).call, None, "a moved head");
        let tool = ExactCall { tool: "merge2", ..call };
        assert_eq!(on_record(&[], std::slice::from_ref(&denied), (&mine, tool), &[], 0).call, None, "a tool");
        let kind = crate::blocker::BlockerKind::FleetInventoryBlocked;
        let over = ApprovalRequest { digest: override_digest(&denied.digest, kind), ..denied.clone() };
        let on = on_record(&[], std::slice::from_ref(&over), (&mine, call), &[kind], 0);
        assert_eq!(on.call, None, "an override's denial is not the call's");
        assert!(matches!(on.overrides.as_slice(), [(k, Standing::Denied { .. })] if *k == kind), "{on:?}");
        // w1's approval is w1's: its digest names it.
        let approved = asked("w1", ApprovalState::Approved);
        assert_eq!(on_record(std::slice::from_ref(&approved), &[], (&mine, call), &[], 0).call, None);
        let theirs = on_record(std::slice::from_ref(&approved), &[], (&approved.digest, call), &[], 0);
        assert!(matches!(theirs.call, Some(Standing::Approved { .. })), "{theirs:?}");
    }

    #[test]
    fn states_read_back_from_their_literals() {
        for s in [
            ApprovalState::Pending,
            ApprovalState::Approved,
            ApprovalState::Denied,
            ApprovalState::Used,
            ApprovalState::Withdrawn,
            ApprovalState::Expired,
        ] {
            assert_eq!(ApprovalState::parse(s.as_str()), Some(s));
        }
        assert_eq!(ApprovalState::parse("maybe"), None);
    }
}
