//! Operator approval of one exact call (`[[rules]] decision = "ask"`): the request the gate
//! makes for a call a rule says to ask about, the operator's answer, and the single use an
//! approval allows — the identical canonical call (same worker, tool and arguments) within
//! `[approvals] ttl_seconds` of the answer, once. Pure: ids, digests and `now` come in.

use crate::person::People;
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
    /// What the call does, in words, from the effect the gate judged
    /// (`effect::describe`: "merge org/repo#1 at 3386c20 onto main, squash"); none without a
    /// forge profile, or for a request recorded before schema version 13.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub does: Option<String>,
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

/// A pending request about nothing yet, at the epoch, that one approval from any operator
/// answers: a base for building one field by field.
impl Default for ApprovalRequest {
    fn default() -> Self {
        Self {
            id: String::new(),
            requested_at: Timestamp::from_unix(0),
            profile: String::new(),
            role: String::new(),
            worker: None,
            principal: None,
            tool: String::new(),
            arguments: None,
            does: None,
            digest: String::new(),
            why: String::new(),
            state: ApprovalState::Pending,
            answered_by: None,
            answered_at: None,
            answer_reason: None,
            used_at: None,
            approvers: Vec::new(),
            required: 1,
            answers: Vec::new(),
        }
    }
}

/// Who answers a request: an identity in its realm — `oidc:<subject>` (signed in to the
/// dashboard at the fleet's issuer), `os:<user>` (the CLI's operating-system user),
/// `token:<name>` (automation holding an operator token) — the person's name when known, the
/// groups their sign-in claims, and the other identities the same sign-in is known by.
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
    /// The identities the same person's calls carry elsewhere, as the issuer's claims say
    /// (`crate::person`): a sign-in at the fleet's issuer is also `oauth:<its principal
    /// claim>`, and `principal:<name>` when `[[http.oauth.principals]]` names that subject.
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

    /// Every identity the approver brings: the id and the aliases.
    pub fn known(&self) -> Vec<String> {
        std::iter::once(self.id.clone()).chain(self.aliases.iter().cloned()).collect()
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
    /// The other identities the approver was known by when answering (a sign-in's claims),
    /// so a later answer is judged against the same person.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
}

impl Answer {
    fn known(&self) -> Vec<String> {
        std::iter::once(self.by.clone()).chain(self.aliases.iter().cloned()).collect()
    }
}

/// Whether `approver` is among `request`'s approvers: an identity of theirs (or of the
/// person `[[people]]` says they are), a person named `person:<name>`, or a group their
/// sign-in claims.
fn among_approvers(request: &ApprovalRequest, approver: &Approver, people: &People) -> bool {
    let theirs = people.known_as(&approver.known());
    let persons = people.people_of(&approver.known());
    request.approvers.iter().any(|a| {
        if let Some(group) = a.strip_prefix("group:") {
            approver.groups.iter().any(|g| g == group)
        } else if let Some(name) = a.strip_prefix("person:") {
            persons.contains(&name)
        } else {
            theirs.iter().any(|t| crate::person::same_identity(a, t))
        }
    })
}

/// Why `approver` may not give this answer (`approve`, else deny) to `request`, with
/// `people` saying who is who: not pending; the requester's own person (whatever channel
/// either came by); an approval when fleetgate cannot tell the approver from the requester
/// (fail closed: a denial is never refused for it); not among its approvers; an answer by the
/// same person already; and, where more than one approval is needed, an approval from a
/// shared credential or from someone who cannot be told apart from an earlier approver.
/// `None`: they may.
pub fn refusal(request: &ApprovalRequest, approver: &Approver, people: &People, approve: bool) -> Option<String> {
    use crate::person::Relation;
    if request.state != ApprovalState::Pending {
        return Some(format!("approval request {} is {}, not pending", request.id, request.state));
    }
    let who = approver.shown();
    let known = approver.known();
    if let Some(principal) = &request.principal {
        let requester = vec![crate::person::principal_identity(principal)];
        match people.relation(&known, &requester) {
            Relation::Same(why) => {
                return Some(format!(
                    "{who} made the call this request is about ({principal}: {why}): a person never answers a \
                     request their own calls made"
                ));
            }
            Relation::Unknown(why) if approve => {
                return Some(format!(
                    "{who} cannot approve a call of {principal}: fleetgate cannot tell whether they are the person \
                     who made it, and fails closed ({why}); name both in [[people]], or answer from a sign-in at the \
                     fleet's issuer whose principal claim it carries"
                ));
            }
            _ => {}
        }
    }
    if !request.approvers.is_empty() && !among_approvers(request, approver, people) {
        return Some(format!(
            "{who} is not among the approvers of request {} ({})",
            request.id,
            request.approvers.join(", ")
        ));
    }
    if approve && request.required > 1 && people.only_shared(&known) {
        return Some(format!(
            "{who} is a credential several people use, not a person: a {}-person rule counts only approvals fleetgate \
             can tell apart (sign in, or answer from the CLI as yourself)",
            request.required
        ));
    }
    for earlier in &request.answers {
        match people.relation(&known, &earlier.known()) {
            Relation::Same(_) => {
                return Some(format!("{who} answered request {} already (as {})", request.id, earlier.by));
            }
            Relation::Unknown(why) if approve && earlier.approve && request.required > 1 => {
                return Some(format!(
                    "{who} cannot be counted as a second person beside {}, who approved already: {why}; a \
                     {}-person rule counts people, so name both in [[people]]",
                    earlier.by, request.required
                ));
            }
            _ => {}
        }
    }
    None
}

/// Why an approver may not answer a request: [`refusal`]'s words, shown to them and recorded
/// in the audit as they are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MayNotAnswer(pub String);

impl fmt::Display for MayNotAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MayNotAnswer {}

/// `request` with `approver`'s answer: denied at the first denial, approved once
/// `required` distinct people have approved, else still pending with the answer recorded.
/// `Err` names why the approver may not answer ([`refusal`]).
pub fn answered(
    request: &ApprovalRequest,
    approver: &Approver,
    people: &People,
    approve: bool,
    reason: Option<&str>,
    now: Timestamp,
) -> Result<ApprovalRequest, MayNotAnswer> {
    if let Some(why) = refusal(request, approver, people, approve) {
        return Err(MayNotAnswer(why));
    }
    let mut r = request.clone();
    r.answers.push(Answer {
        by: approver.id.clone(),
        name: approver.name.clone(),
        approve,
        reason: reason.map(str::to_owned),
        at: now,
        aliases: approver.aliases.clone(),
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
        latest(ApprovalState::Pending).map(|r| Standing::Pending { id: r.id.clone(), approvers: r.approvers.clone() })
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

/// What an operator does about a call that waits: the commands, naming the request (any
/// operator may answer it).
pub fn approval_action(id: &str) -> String {
    approval_action_for(id, &[])
}

/// What an operator does about a call that waits, when `approvers` (the request's) may answer
/// it: who, and where ([`where_answered`]) — never a command that is refused for them.
pub fn approval_action_for(id: &str, approvers: &[String]) -> String {
    if approvers.is_empty() {
        return format!(
            "an operator approves this exact call with `fleetgate approvals approve {id}` (or refuses it with \
             `fleetgate approvals deny {id}`); once approved, the identical call passes once"
        );
    }
    format!("{}; once approved, the identical call passes once", where_answered(id, approvers))
}

/// Who may answer request `id` and where, in words: any operator (the CLI, or the dashboard)
/// when `approvers` is empty; else each realm where its people answer — `os:` users with
/// `fleetgate approvals approve` run as that user, `oidc:` people and `group:` members signed in
/// to the dashboard, a `token:` holder through the dashboard's operator token, a `person:`
/// through any identity `[[people]]` gives them — and, when no `os:` user or person is among
/// them, that the CLI's answer is refused.
pub fn where_answered(id: &str, approvers: &[String]) -> String {
    if approvers.is_empty() {
        return format!("any operator answers: `fleetgate approvals approve {id}` (or `deny`), or on the dashboard");
    }
    let of = |prefix: &str| -> Vec<&str> {
        approvers.iter().filter(|a| a.starts_with(prefix)).map(String::as_str).collect()
    };
    let (os, people, tokens) = (of("os:"), [of("oidc:"), of("group:")].concat(), of("token:"));
    let persons = of("person:");
    let mut places: Vec<String> = Vec::new();
    if !persons.is_empty() {
        places.push(format!(
            "{} through any identity `[[people]]` gives them (the dashboard signed in, or `fleetgate approvals \
             approve {id}` run as their OS user)",
            persons.join(", ")
        ));
    }
    if !people.is_empty() {
        places.push(format!(
            "{} signed in to the dashboard (`fleetgate dashboard`, \"Waiting for an operator\")",
            people.join(", ")
        ));
    }
    if !os.is_empty() {
        places.push(format!("{} with `fleetgate approvals approve {id}` (or `deny`) run as that user", os.join(", ")));
    }
    if !tokens.is_empty() {
        places.push(format!(
            "{} through the dashboard's operator token (`POST /api/approvals/{id}/approve` or `/deny`)",
            tokens.join(", ")
        ));
    }
    let other: Vec<&str> = approvers
        .iter()
        .filter(|a| !["os:", "oidc:", "group:", "token:", "person:"].iter().any(|p| a.starts_with(p)))
        .map(String::as_str)
        .collect();
    if !other.is_empty() {
        places.push(other.join(", "));
    }
    let cli = if os.is_empty() && persons.is_empty() {
        "; `fleetgate approvals approve` answers as the OS user (`os:<user>`), who is not among them, and is refused"
    } else {
        ""
    };
    format!("request {id} is answered by {}{cli}", places.join("; or "))
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
            does: None,
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

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    /// Bob and Alice, each through every channel; `os:root` shared.
    fn people() -> People {
        People {
            people: vec![
                crate::person::Person {
                    name: "bob".into(),
                    identities: ids(&["oidc:u-1234", "oauth:bob@example.com", "os:bob"]),
                },
                crate::person::Person { name: "alice".into(), identities: ids(&["oidc:u-5678", "os:alice"]) },
            ],
            shared: ids(&["os:root"]),
            links: Vec::new(),
        }
    }

    fn answer(r: &ApprovalRequest, by: &Approver, approve: bool, p: &People) -> Result<ApprovalRequest, MayNotAnswer> {
        answered(r, by, p, approve, None, Timestamp::from_unix(1))
    }

    #[test]
    fn n_distinct_people_approve_and_any_denial_denies() {
        let none = People::default();
        let r = request(None, &[], 2);
        let once = answer(&r, &who("oidc:alice", &[]), true, &none).unwrap();
        assert_eq!((once.state, approvals_needed(&once)), (ApprovalState::Pending, 1));
        let again = answer(&once, &who("oidc:alice", &[]), true, &none).unwrap_err().0;
        assert!(again.contains("answered request apr-1 already"), "{again}");
        let twice = answer(&once, &who("oidc:bob", &[]), true, &none).unwrap();
        assert_eq!(twice.state, ApprovalState::Approved);
        assert_eq!(twice.answered_by.as_deref(), Some("oidc:alice, oidc:bob"));
        let denied = answer(&once, &who("os:carol", &[]), false, &none).unwrap();
        assert_eq!(denied.state, ApprovalState::Denied, "a denial by anyone denies");
        assert!(answer(&twice, &who("os:dave", &[]), false, &none).is_err(), "closed");
        // Another channel nothing ties to the first: not counted as a second person.
        let unknown = answer(&once, &who("os:bob", &[]), true, &none).unwrap_err().0;
        assert!(unknown.contains("cannot be counted as a second person"), "{unknown}");
    }

    #[test]
    fn one_person_through_two_channels_is_one_approver_and_a_shared_credential_is_none() {
        let p = people();
        let r = request(None, &[], 2);
        // Bob from the CLI, then Bob signed in: the same person.
        let cli = answer(&r, &who("os:bob", &[]), true, &p).unwrap();
        let second = answer(&cli, &who("oidc:u-1234", &[]), true, &p).unwrap_err().0;
        assert!(second.contains("already"), "{second}");
        // The dashboard's token, and an OS account several people use, are nobody.
        for shared in ["token:dashboard", "os:root"] {
            let why = answer(&cli, &who(shared, &[]), true, &p).unwrap_err().0;
            assert!(why.contains("credential several people use"), "{shared}: {why}");
            assert_eq!(answer(&cli, &who(shared, &[]), false, &p).unwrap().state, ApprovalState::Denied, "{shared}");
        }
        // Alice is someone else: two people pass it.
        assert_eq!(answer(&cli, &who("oidc:u-5678", &[]), true, &p).unwrap().state, ApprovalState::Approved);
        // One approval needed: the token may give it.
        assert!(answer(&request(None, &[], 1), &who("token:dashboard", &[]), true, &p).is_ok());
    }

    #[test]
    fn the_requester_never_answers_their_own_request_whatever_the_channel() {
        let none = People::default();
        let p = people();
        // Principal claim `email`: Bob's agent is `oauth:bob@example.com`.
        let r = request(Some("oauth:bob@example.com"), &[], 1);
        // Signed in as `oidc:u-1234`, the sign-in carrying the claim: the same person, by the
        // issuer's claims alone.
        let signed = Approver { aliases: ids(&["oauth:bob@example.com"]), ..who("oidc:u-1234", &[]) };
        for people in [&none, &p] {
            let own = refusal(&r, &signed, people, true).unwrap();
            assert!(own.contains("made the call"), "{own}");
            assert!(refusal(&r, &signed, people, false).is_some(), "nor denies it");
        }
        // Without the claim on the sign-in, or from the CLI: by the mapping, else fail closed.
        let bare = who("oidc:u-1234", &[]);
        assert!(refusal(&r, &bare, &p, true).unwrap().contains("made the call"));
        let closed = refusal(&r, &bare, &none, true).unwrap();
        assert!(closed.contains("fails closed"), "{closed}");
        assert_eq!(refusal(&r, &bare, &none, false), None, "a denial is never refused for not knowing");
        assert!(refusal(&r, &who("os:bob", &[]), &p, true).unwrap().contains("made the call"));
        assert!(refusal(&r, &who("os:bob", &[]), &none, true).unwrap().contains("fails closed"));
        assert!(refusal(&r, &who("token:dashboard", &[]), &p, true).unwrap().contains("fails closed"));
        // Alice is someone else, by the mapping; a sign-in with another claim value too.
        assert_eq!(refusal(&r, &who("os:alice", &[]), &p, true), None);
        let carol = Approver { aliases: ids(&["oauth:carol@example.com"]), ..who("oidc:u-9", &[]) };
        assert_eq!(refusal(&r, &carol, &none, true), None);
        // A call without a principal (a stdio gateway's) has no requester to refuse.
        assert_eq!(refusal(&request(None, &[], 1), &who("os:bob", &[]), &none, true), None);
    }

    #[test]
    fn only_named_approvers_answer() {
        let none = People::default();
        let r = request(Some("oauth:alice"), &["oidc:bob", "group:release"], 1);
        let signed = |sub: &str, groups: &[&str]| Approver {
            aliases: vec![format!("oauth:{sub}")],
            ..who(&format!("oidc:{sub}"), groups)
        };
        let own = refusal(&r, &signed("alice", &["release"]), &none, true).unwrap();
        assert!(own.contains("never answers a request their own calls made"), "{own}");
        let stranger = refusal(&r, &signed("mallory", &["dev"]), &none, true).unwrap();
        assert!(stranger.contains("not among the approvers"), "{stranger}");
        assert_eq!(refusal(&r, &signed("bob", &[]), &none, true), None);
        assert_eq!(refusal(&r, &signed("carol", &["release"]), &none, true), None, "by group");
        // The requester under a mapped name (`[[http.oauth.principals]]`) is the same person.
        let mapped = request(Some("ci-bot"), &["oidc:svc-7f3a"], 1);
        let svc = Approver { aliases: ids(&["oauth:svc-7f3a", "principal:ci-bot"]), ..who("oidc:svc-7f3a", &[]) };
        assert!(refusal(&mapped, &svc, &none, true).is_some_and(|w| w.contains("made the call")), "by alias");
        // A person named, or any identity of theirs.
        let p = people();
        let by_person = request(None, &["person:alice"], 1);
        assert_eq!(refusal(&by_person, &who("os:alice", &[]), &p, true), None);
        assert!(refusal(&by_person, &who("os:bob", &[]), &p, true).is_some());
        let by_identity = request(None, &["oidc:u-5678"], 1);
        assert_eq!(refusal(&by_identity, &who("os:alice", &[]), &p, true), None, "the same person's CLI");
        assert_eq!(refusal(&request(None, &[], 1), &who("token:dashboard", &[]), &none, true), None, "anyone");
    }

    #[test]
    fn a_claim_spelled_as_an_approvers_subject_makes_no_one_that_approver() {
        // `principal_claim = "preferred_username"`: Mallory (subject u-9) names herself
        // `u-5678`, Alice's subject; her sign-in brings `oauth:u-5678`.
        let mallory = Approver { aliases: ids(&["oauth:u-5678"]), ..who("oidc:u-9", &[]) };
        let p = people();
        for approvers in [&["oidc:u-5678"][..], &["person:alice"]] {
            let r = request(None, approvers, 1);
            let why = refusal(&r, &mallory, &p, true).unwrap_or_default();
            assert!(why.contains("not among the approvers"), "{approvers:?}: {why}");
        }
        // Another issuer's subject `u-5678` is not Alice's sign-in either.
        let elsewhere = who("oauth:u-5678", &[]);
        assert!(refusal(&request(None, &["oidc:u-5678"], 1), &elsewhere, &p, true).is_some());
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
