//! The pull-request workflow at the gate: a call whose rule carries a workflow
//! action (`review`, `merge`) is judged, after the fleet conditions, by the pure
//! `fleetgate_core::workflow` from what the store holds for the PR and the head the forge
//! reports *now* — read through the downstream's own read tool ([`ForgeReader`]), never
//! taken from the caller. A forge that cannot answer fails closed (`forge_unavailable`).
//! For a real call the holder's lease is touched; [`Gate::settle`](super::Gate::settle)
//! records what the forwarded answer settles.

use fleetgate_core::decision_lock::{self, LockPlan};
use fleetgate_core::dialect::{Dialect, PendingAt, PrFacts, PrTarget, RestCall, Schemas};
use fleetgate_core::effect::{Answered, IssueChange, IssueEffect, Read, ReadFailed, When};
use fleetgate_core::workflow::{self, Actor, PrRef, PrState, Refusal};
use fleetgate_core::{BlockerKind, Timestamp};
use fleetgate_store::{LockWrite, PrRecords, Store, new_lock_id};
use serde_json::{Map, Value};

/// The workflow action of a merge (`[[rules]] action`).
pub const ACTION_MERGE: &str = fleetgate_core::dialect::ACTION_MERGE;
/// The workflow action of a review decision.
pub const ACTION_REVIEW: &str = fleetgate_core::dialect::ACTION_REVIEW;
/// The workflow action of opening a PR (its creator is recorded for independence).
pub const ACTION_OPEN: &str = fleetgate_core::dialect::ACTION_OPEN;
/// The workflow action of a file write (its pusher is recorded for independence).
pub const ACTION_PUSH: &str = fleetgate_core::dialect::ACTION_PUSH;
/// The workflow action of closing a PR (its review-decision locks become moot).
pub const ACTION_CLOSE: &str = fleetgate_core::dialect::ACTION_CLOSE;
/// The workflow action of editing a PR (its issue references are judged as at its opening).
pub const ACTION_EDIT: &str = fleetgate_core::dialect::ACTION_EDIT;

/// The audit log's name for a review-decision lock's events.
pub const LOCK_EVENT: &str = "review-decision lock";

/// Where the gate reads a PR's current state: the downstream's own read tool.
pub trait ForgeReader {
    /// Call the forge's read tool `tool` with `arguments`; its answer as JSON.
    fn read(&self, tool: &str, arguments: Map<String, Value>) -> Result<Value, ForgeError>;
}

/// Why a forge read has no answer the gate can use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForgeError {
    /// What kind of failure.
    pub kind: ForgeErrorKind,
    /// What failed, in words.
    pub message: String,
}

/// The kinds of [`ForgeError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForgeErrorKind {
    /// Nothing to read through: no downstream, no `[workflow] forge_command`, or a read the
    /// gateway did not make before deciding.
    NotConfigured,
    /// The forge command could not be started or spoke no MCP.
    Unreachable,
    /// The forge did not answer in time.
    Timeout,
    /// The call did not complete (the connection closed, a protocol error).
    Failed,
    /// The forge answered an error result.
    Refused,
    /// The answer carries no JSON, or not the PR the workflow needs.
    Malformed,
}

impl ForgeError {
    /// A failure of `kind`.
    pub fn new(kind: ForgeErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }

    /// The same failure, its message behind `what: `.
    #[must_use]
    pub fn within(self, what: &str) -> Self {
        Self { kind: self.kind, message: format!("{what}: {}", self.message) }
    }

    /// Whether asking again later may succeed (the forge slow, restarting or not yet up).
    pub fn is_transient(&self) -> bool {
        matches!(self.kind, ForgeErrorKind::Unreachable | ForgeErrorKind::Timeout)
    }
}

impl std::fmt::Display for ForgeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ForgeError {}

impl From<fleetgate_gateway::DownstreamError> for ForgeError {
    fn from(e: fleetgate_gateway::DownstreamError) -> Self {
        let kind = match e.kind {
            fleetgate_gateway::DownstreamErrorKind::Timeout => ForgeErrorKind::Timeout,
            fleetgate_gateway::DownstreamErrorKind::Failed => ForgeErrorKind::Failed,
        };
        Self::new(kind, e.message)
    }
}

/// Where and how the forge is read: its dialect, the tool schemas its server lists, and the
/// reader (a gateway: the reads made before deciding, or its downstream; the CLI: its forge
/// command).
#[derive(Clone, Copy)]
pub struct Forge<'a> {
    /// The server's dialect.
    pub dialect: &'a dyn Dialect,
    /// The tool schemas the running server lists.
    pub schemas: &'a dyn Schemas,
    /// The reader, when there is one.
    pub reader: Option<&'a dyn ForgeReader>,
}

impl std::fmt::Debug for Forge<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forge").field("dialect", &self.dialect.name()).finish_non_exhaustive()
    }
}

impl Forge<'_> {
    fn reader(&self, what: &str) -> Result<&dyn ForgeReader, ForgeError> {
        self.reader.ok_or_else(|| {
            ForgeError::new(
                ForgeErrorKind::NotConfigured,
                format!(
                    "no forge to read {what} from (a gateway reads through its downstream; the CLI needs [workflow] \
                     forge_command)"
                ),
            )
        })
    }

    /// Read `read`, its failure named by `within`.
    fn read(&self, read: &fleetgate_core::effect::Read, within: &str) -> Result<Value, ForgeError> {
        self.reader(within)?.read(&read.tool, read.arguments.clone()).map_err(|e| e.within(within))
    }

    /// Run a dialect's statement that asks for reads (`step`) to its end, answering each read
    /// this reader can; `Err`: the reads it has not made (a gateway makes them before deciding).
    fn step<T>(&self, within: &str, step: impl Fn(&[Answered]) -> Result<T, Vec<Read>>) -> Result<T, Vec<Read>> {
        let mut answers: Vec<Answered> = Vec::new();
        loop {
            let reads = match step(&answers) {
                Ok(done) => return Ok(done),
                Err(reads) => reads,
            };
            let mut missing = Vec::new();
            let before = answers.len();
            for read in reads {
                if answers.iter().any(|(r, _)| *r == read) {
                    continue;
                }
                match self.read(&read, within) {
                    Err(e) if e.kind == ForgeErrorKind::NotConfigured => missing.push(read),
                    answered => answers.push((read, answered.map_err(|e| ReadFailed(e.message)))),
                }
            }
            // Nothing new answered: what is still missing is the caller's to read.
            if !missing.is_empty() || answers.len() == before {
                return Err(missing);
            }
        }
    }
}

/// The PR's state as the forge reports it now.
pub fn read_pr(forge: Forge<'_>, target: &PrTarget) -> Result<PrFacts, ForgeError> {
    let within = format!("reading PR #{} from the forge", target.pr);
    let read = forge
        .dialect
        .pr_read(target, forge.schemas)
        .map_err(|e| ForgeError::new(ForgeErrorKind::Refused, e.to_string()))?;
    let answer = forge.read(&read, &within)?;
    // The PR the forge answered must be the one asked for: what is judged of it is what a
    // merge or a review of `target` is made on.
    if let Some(number) = answer.get("number").and_then(Value::as_u64)
        && number != target.pr
    {
        return Err(ForgeError::new(
            ForgeErrorKind::Malformed,
            format!("{within}: the forge answered PR #{number}, not the PR asked for"),
        ));
    }
    forge.dialect.pr_facts(&answer).map_err(|e| ForgeError::new(ForgeErrorKind::Malformed, format!("{within}: {e}")))
}

/// The JSON a tool result carries: its structured content, else its first text block that
/// parses as JSON.
pub fn answer_json(result: &fleetgate_gateway::rmcp::model::CallToolResult) -> Option<Value> {
    if let Some(structured) = &result.structured_content {
        return Some(structured.clone());
    }
    result.content.iter().filter_map(|c| c.as_text()).find_map(|t| serde_json::from_str(&t.text).ok())
}

/// A forge read's answer as JSON: an error result, or one that carries no JSON, is the
/// read failing, with the forge's own words.
pub fn forge_answer(tool: &str, result: &fleetgate_gateway::rmcp::model::CallToolResult) -> Result<Value, ForgeError> {
    let text =
        || result.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect::<Vec<_>>().join(" ");
    if result.is_error == Some(true) {
        return Err(ForgeError::new(ForgeErrorKind::Refused, format!("`{tool}` answered an error: {}", text())));
    }
    answer_json(result)
        .ok_or_else(|| ForgeError::new(ForgeErrorKind::Malformed, format!("`{tool}` answered no JSON: {}", text())))
}

/// What the workflow needs of one call.
#[derive(Debug)]
pub struct WorkflowCall<'a> {
    /// The tool called.
    pub tool: &'a str,
    /// The call's workflow action, as the forge dialect states it.
    pub action: &'a str,
    /// The call's arguments.
    pub arguments: Option<&'a Map<String, Value>>,
    /// Who makes it.
    pub actor: &'a Actor,
    /// The fleet's forge remote (the first part of PR keys).
    pub remote: &'a str,
    /// Which approvals count.
    pub independence: workflow::Independence,
    /// `[workflow] decision_lock`.
    pub decision_lock: bool,
    /// `[workflow] issue_lock`.
    pub issue_lock: bool,
}

/// What the store holds for `pr`, as the pure functions take it.
pub fn records(store: &dyn Store, pr: &PrRef) -> Result<PrRecords, Refusal> {
    store.pr_records(pr).map_err(|e| {
        Refusal::of(BlockerKind::ForgeUnavailable, format!("the workflow records of {pr} cannot be read: {e}"))
    })
}

/// What the gate judged of a workflow call: the arguments it pins in the forwarded call
/// (the merge's `head_commit_id`, a review's `commit_id`: the head the forge reports now, so
/// the forge itself refuses if the head moved), what it judged, in words, for the audit log,
/// and its refusal, if any. The pins are made whether or not the workflow refuses: a call an
/// operator's approval lets past the refusal is forwarded with them all the same.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Judged {
    /// Arguments set in the forwarded call.
    pub pins: Map<String, Value>,
    /// The PR's head and base the call was judged at: what it settles is recorded there,
    /// never at a head read after the call (a push may land in between).
    pub at: Option<(String, Option<String>)>,
    /// "judged merge of forge/org/repo#12 at head 1a38ef95aaaa onto main", when it judged a PR.
    pub note: Option<String>,
    /// A merge whose server declares no head pin: the pinned merge the gateway makes itself
    /// through the forge's REST API instead of forwarding it (the dialect's `pinned_merge`).
    pub rest: Option<RestCall>,
    /// Why the workflow refuses the call.
    pub refusal: Option<Refusal>,
}

impl Judged {
    fn refused(refusal: Refusal) -> Self {
        Self { refusal: Some(refusal), ..Self::default() }
    }
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

fn note(what: &str, key: &PrRef, facts: &PrFacts) -> String {
    let base = facts.base_ref.as_deref().map(|b| format!(" onto {b}")).unwrap_or_default();
    format!("judged {what} of {key} at head {}{base}", short(&facts.head))
}

/// The PR a workflow call's judgement reads from the forge, when it reads one: a merge's, a
/// review decision's, a review `create`'s (pinned to the head). The gateway makes that read
/// before deciding ([`reads`]).
fn pr_to_read(dialect: &dyn Dialect, tool: &str, action: &str, args: &Map<String, Value>) -> Option<PrTarget> {
    let reads = match action {
        ACTION_MERGE => true,
        ACTION_REVIEW => dialect.review_verdict(tool, args).is_some() || dialect.review_is_pinned(tool, args),
        _ => false,
    };
    reads.then(|| dialect.pr_target(tool, args)).flatten()
}

/// The forge reads [`judge`] will make for `tool`, a call of `action` with these (canonical)
/// arguments, that `forge`'s reader has not made yet: the PR, and for a verdict on a pending
/// review, where the forge records it ([`Dialect::pending_review`]).
pub fn reads(forge: Forge<'_>, tool: &str, action: &str, args: &Map<String, Value>) -> Vec<Read> {
    let (dialect, schemas) = (forge.dialect, forge.schemas);
    let made = |read: &Read| {
        forge.reader.is_some_and(|f| {
            f.read(&read.tool, read.arguments.clone())
                .map_or_else(|e| e.kind != ForgeErrorKind::NotConfigured, |_| true)
        })
    };
    let mut reads: Vec<Read> = pr_to_read(dialect, tool, action, args)
        .and_then(|target| dialect.pr_read(&target, schemas).ok())
        .into_iter()
        .filter(|r| !made(r))
        .collect();
    if action == ACTION_REVIEW && dialect.review_verdict(tool, args).is_some() {
        let pending =
            forge.step("reading the pending review", |answers| dialect.pending_review(tool, args, schemas, answers));
        reads.extend(pending.err().unwrap_or_default());
    }
    reads
}

/// Where the forge records the verdict `call` submits: read through `forge` (a read that
/// cannot be made leaves it missing, and the verdict is refused).
fn pending_at(forge: Forge<'_>, tool: &str, args: &Map<String, Value>) -> PendingAt {
    let (dialect, schemas) = (forge.dialect, forge.schemas);
    forge
        .step("reading the pending review", |answers| dialect.pending_review(tool, args, schemas, answers))
        .unwrap_or_else(|missing| {
            let names: Vec<&str> = missing.iter().map(|r| r.tool.as_str()).collect();
            PendingAt::Missing(format!("the forge reads {} were not made", names.join(", ")))
        })
}

/// Whether the listed schema of `tool` declares `key`: the gateway never sends an argument
/// the server does not declare (a release that ignores it would merge unpinned all the same).
fn declares(schemas: &dyn Schemas, tool: &str, key: &str) -> bool {
    schemas.schema(tool).and_then(|s| s.get("properties").and_then(Value::as_object).map(|p| p.contains_key(key)))
        == Some(true)
}

/// Judge a workflow call (its canonical arguments). No refusal when the action needs nothing
/// of the workflow (a comment, an action this gate does not know) or its conditions hold.
pub fn judge(store: &dyn Store, forge: Forge<'_>, call: &WorkflowCall<'_>, now: Timestamp) -> Judged {
    let empty = Map::new();
    let args = call.arguments.unwrap_or(&empty);
    let method = args.get("method").and_then(Value::as_str).unwrap_or("");
    let dialect = forge.dialect;
    let verdict = match call.action {
        ACTION_REVIEW => dialect.review_verdict(call.tool, args),
        ACTION_MERGE => None,
        _ => return Judged::default(),
    };
    // A review that submits no verdict needs no lease; a `create` is still pinned to the
    // head it is made at, so a pending review submitted later is at that head.
    let pin_only = call.action == ACTION_REVIEW && verdict.is_none();
    if pin_only && !dialect.review_is_pinned(call.tool, args) {
        return Judged::default();
    }
    let Some(target) = dialect.pr_target(call.tool, args) else {
        if pin_only {
            return Judged::default();
        }
        let kind = if verdict.is_some() { BlockerKind::ReviewLeaseRequired } else { BlockerKind::ApprovalRequired };
        return Judged::refused(Refusal::of(
            kind,
            "the call names no pull request (its owner, repo and number, as the server reads them)".into(),
        ));
    };
    let facts = match read_pr(forge, &target) {
        Ok(facts) => facts,
        Err(e) => return Judged::refused(Refusal::of(BlockerKind::ForgeUnavailable, e.message)),
    };
    // The PR as the forge names it: its records key on that name, and the forwarded call
    // carries it, so what settles after is recorded under the same key.
    let canonical = facts.canonical(&target);
    let key = canonical.key(call.remote);
    let mut pins = Map::new();
    if canonical != target {
        pins.insert("owner".into(), Value::from(canonical.owner.clone()));
        pins.insert("repo".into(), Value::from(canonical.repo.clone()));
    }
    let what = format!("{} ({method})", call.action);
    let mut said = note(&what, &key, &facts);
    // The head judged is pinned in the forwarded call by the argument the server declares;
    // a merge whose server declares none is made by the gateway itself, pinned through the
    // forge's REST API (`rest`), never forwarded unpinned.
    let mut rest = None;
    if call.action == ACTION_MERGE {
        match dialect.merge_pin().filter(|pin| declares(forge.schemas, call.tool, pin)) {
            Some(pin) => {
                pins.insert(pin.into(), Value::from(facts.head.clone()));
            }
            None => {
                rest = dialect.pinned_merge(&canonical, &facts.head, args);
                if rest.is_some() {
                    said.push_str(&format!(
                        "; made by the gateway through the forge's REST merge pinned at head {} (the server's \
                         `{}` declares no head pin)",
                        short(&facts.head),
                        call.tool
                    ));
                }
            }
        }
    } else if let Some(pin) = dialect
        .review_pin()
        .filter(|pin| dialect.review_is_pinned(call.tool, args) && declares(forge.schemas, call.tool, pin))
    {
        pins.insert(pin.into(), Value::from(facts.head.clone()));
    }
    let pending = match verdict {
        Some(_) => pending_at(forge, call.tool, args),
        None => PendingAt::Head,
    };
    let judged = workflow::judge_pending(&pending, &facts.head)
        .and_then(|()| judge_at(store, call, dialect, args, &key, &facts, verdict, pin_only, now));
    let refusal = match judged {
        Ok(more) => {
            for m in more {
                said.push_str("; ");
                said.push_str(&m);
            }
            None
        }
        Err(mut refusal) => {
            refusal.reasons.push(said.clone());
            Some(refusal)
        }
    };
    Judged { pins, note: Some(said), refusal, at: Some((facts.head.clone(), facts.base_ref.clone())), rest }
}

/// What an allowed call settles, as core's verdict carries it to the forwarded call's answer.
pub use fleetgate_core::capability::settles_text as settles;

/// [`settles`] read back: the action, and the head and base it was judged at.
pub fn settled(text: &str) -> (String, Option<(String, Option<String>)>) {
    let Ok(Value::Object(o)) = serde_json::from_str::<Value>(text) else { return (text.to_owned(), None) };
    let action = o.get("action").and_then(Value::as_str).unwrap_or_default().to_owned();
    let head = o.get("head").and_then(Value::as_str).map(str::to_owned);
    let base = o.get("base").and_then(Value::as_str).map(str::to_owned);
    (action, head.map(|h| (h, base)))
}

/// The workflow's conditions for a call on `key` whose head and base the forge reports in
/// `facts`: what it notes, or its refusal.
#[allow(clippy::too_many_arguments)] // One judgement's parts, each its own.
fn judge_at(
    store: &dyn Store,
    call: &WorkflowCall<'_>,
    dialect: &dyn Dialect,
    args: &Map<String, Value>,
    key: &PrRef,
    facts: &PrFacts,
    verdict: Option<workflow::ReviewVerdict>,
    pin_only: bool,
    now: Timestamp,
) -> Result<Vec<String>, Refusal> {
    let sent = |key: Option<&str>| key.and_then(|k| args.get(k)).and_then(Value::as_str).filter(|c| *c != facts.head);
    if call.action == ACTION_REVIEW {
        if let Some(sent) = sent(dialect.review_pin()) {
            return Err(Refusal::of(
                BlockerKind::StaleHead,
                format!("the review names commit {sent} but the PR's head is {}", facts.head),
            ));
        }
    } else if let Some(sent) = sent(dialect.merge_pin()) {
        return Err(Refusal::of(
            BlockerKind::StaleHead,
            format!("the call expects head {sent} but the PR's head is {}", facts.head),
        ));
    }
    if pin_only {
        return Ok(Vec::new());
    }
    let held = records(store, key)?;
    let state = held.state();
    match verdict {
        Some(verdict) => {
            workflow::judge_review(&state, call.actor, (&facts.head, facts.base_ref.as_deref()), verdict, now)?;
            Ok(judge_lock(store, call, key, &facts.head)?.into_iter().collect())
        }
        None => {
            let base = facts.base_ref.as_deref();
            workflow::judge_merge(&state, call.actor, &facts.head, base, call.independence, now)?;
            Ok(Vec::new())
        }
    }
}

/// Under `[workflow] decision_lock`: may the caller's session decide on `key` at `head`?
/// `Some` names a correction of its lock.
fn judge_lock(store: &dyn Store, call: &WorkflowCall<'_>, key: &PrRef, head: &str) -> Result<Option<String>, Refusal> {
    if !call.decision_lock {
        return Ok(None);
    }
    let held = store.live_review_locks(&call.actor.client, &call.actor.session).map_err(|e| {
        Refusal::of(BlockerKind::ForgeUnavailable, format!("the session's review-decision locks cannot be read: {e}"))
    })?;
    Ok(match decision_lock::judge_decision(&held, call.actor, key, head)? {
        LockPlan::Take => None,
        LockPlan::Correct { lock_id, from_head } => Some(format!(
            "a correction of review-decision lock {lock_id} (from head {} to {})",
            short(&from_head),
            short(head)
        )),
    })
}

/// Under `[workflow] issue_lock`: no call closes or reopens — through a text the forge acts
/// on, as the dialect states it — an issue another author holds the lock of, nor names one in
/// a PR's own title or body (`issue_lock_held`, naming the holder). "Another" than the PR's
/// author for a text the forge acts on when a PR merges (a merge's, a comment's, an edit's:
/// the PR's creator, as recorded when it was opened), else than the caller. No refusal, and a
/// note of what was judged, when none is held.
pub fn judge_issue_locks(
    store: &dyn Store,
    forge: Forge<'_>,
    call: &WorkflowCall<'_>,
    issues: &[IssueEffect],
    now: Timestamp,
) -> Judged {
    let judged: Vec<&IssueEffect> = issues.iter().filter(|i| locked_by_text(i)).collect();
    if judged.is_empty() || !call.issue_lock {
        return Judged::default();
    }
    // One read of the live issue locks, whatever the number of references the texts hold.
    let live = match store.list_pr_leases(true, now) {
        Ok(live) => live,
        Err(e) => {
            return Judged::refused(Refusal::of(
                BlockerKind::ForgeUnavailable,
                format!("the issue locks cannot be read: {e}"),
            ));
        }
    };
    let empty = Map::new();
    let args = call.arguments.unwrap_or(&empty);
    let creator_of = |pr: u64| -> Option<String> {
        let (owner, repo) = forge.dialect.repository(args)?;
        let key = PrTarget { owner, repo, pr }.key(call.remote);
        store.pr_records(&key).ok()?.origin.map(|o| o.by.worker)
    };
    for i in &judged {
        let text_pr = match &i.change {
            IssueChange::ByText { when: When::Now, .. } if call.action == ACTION_MERGE => {
                forge.dialect.pr_target(call.tool, args).map(|t| t.pr)
            }
            IssueChange::ByText { when: When::AtMerge { pr }, .. }
            | IssueChange::Referenced { when: When::AtMerge { pr }, .. } => *pr,
            _ => None,
        };
        let owner = text_pr.and_then(creator_of).unwrap_or_else(|| call.actor.worker.clone());
        let binding = format!("{}/{}", call.remote, i.repo);
        let held = live.iter().find(|l| {
            l.terms.purpose == workflow::Purpose::Author
                && l.terms.pr.binding == binding
                && l.terms.pr.pr == i.issue
                && l.terms.holder.worker != owner
        });
        if let Some(lock) = held {
            let what = match &i.change {
                IssueChange::ByText { field, words, when, .. } => {
                    format!("`{field}` says `{words}`: the forge acts on issue #{} {when}", i.issue)
                }
                _ => format!("the PR references issue #{}", i.issue),
            };
            return Judged::refused(Refusal::of(
                BlockerKind::IssueLockHeld,
                format!(
                    "{what}, whose issue lock {} is held by worker {} ({}, session {}) until {}",
                    lock.lease_id,
                    lock.terms.holder.worker,
                    lock.terms.holder.client,
                    lock.terms.holder.session,
                    lock.expires_at
                ),
            ));
        }
    }
    let mut numbers: Vec<u64> = judged.iter().map(|i| i.issue).collect();
    numbers.dedup();
    Judged { note: Some(format!("judged the issue locks of {}", issue_list(&numbers))), ..Judged::default() }
}

/// Whether the issue lock judges `i`: a close or reopen by a text, or a PR's own title or
/// body naming the issue.
fn locked_by_text(i: &IssueEffect) -> bool {
    match &i.change {
        IssueChange::ByText { .. } => i.issue != 0,
        IssueChange::Referenced { field, when: When::AtMerge { .. } } => field == "title" || field == "body",
        _ => false,
    }
}

/// At most this many issues are named in an audit note or kept on a PR's origin (every one
/// is judged).
const ISSUES_KEPT: usize = 20;

/// `#1, #2, …` (and how many more).
fn issue_list(issues: &[u64]) -> String {
    let named: Vec<String> = issues.iter().take(ISSUES_KEPT).map(|i| format!("#{i}")).collect();
    match issues.len().saturating_sub(ISSUES_KEPT) {
        0 => format!("issue(s) {}", named.join(", ")),
        more => format!("issue(s) {} and {more} more", named.join(", ")),
    }
}

/// What settling a call did that the audit log names: (tool, reason) per event.
pub type Settled = Vec<(&'static str, String)>;

/// Why what a forwarded call settles was not recorded.
#[derive(Debug)]
pub enum SettleError {
    /// The store did not take it.
    Store(fleetgate_store::StoreError),
    /// The forge could not be read for it (the PR, the pushed branch's tip).
    Forge(String),
}

impl std::fmt::Display for SettleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Store(e) => e.fmt(f),
            Self::Forge(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for SettleError {}

impl From<fleetgate_store::StoreError> for SettleError {
    fn from(e: fleetgate_store::StoreError) -> Self {
        Self::Store(e)
    }
}

impl From<String> for SettleError {
    fn from(why: String) -> Self {
        Self::Forge(why)
    }
}

impl From<ForgeError> for SettleError {
    fn from(e: ForgeError) -> Self {
        Self::Forge(e.message)
    }
}

impl From<fleetgate_core::dialect::DialectError> for SettleError {
    fn from(e: fleetgate_core::dialect::DialectError) -> Self {
        Self::Forge(e.to_string())
    }
}

impl From<&str> for SettleError {
    fn from(why: &str) -> Self {
        Self::Forge(why.to_owned())
    }
}

/// After a forwarded call the downstream accepted: record the decision at the head it was
/// made at (and the review-decision lock it takes or corrects), the creator of an opened PR
/// and the issues it references, a push's commit, or a merge's (a close's) released leases
/// and moot locks. Best effort: a failure is logged (the call itself already happened). The
/// events the audit log names are returned.
pub fn settle(
    store: &dyn Store,
    forge: Forge<'_>,
    call: &WorkflowCall<'_>,
    judged_at: Option<(String, Option<String>)>,
    answer: Option<&Value>,
    now: Timestamp,
) -> Result<Settled, SettleError> {
    let empty = Map::new();
    let args = call.arguments.unwrap_or(&empty);
    let dialect = forge.dialect;
    let binding_of = |owner: &str, repo: &str| {
        PrTarget { owner: owner.to_owned(), repo: repo.to_owned(), pr: 0 }.key(call.remote).binding
    };
    let mut events = Settled::new();
    match call.action {
        ACTION_OPEN => {
            let Some((owner, repo)) = dialect.repository(args) else { return Ok(events) };
            let Some(pr) = answer.and_then(|a| dialect.created_pr(a)) else { return Ok(events) };
            let asked = PrTarget { owner, repo, pr };
            // The created PR as the forge names its repository.
            let target =
                answer.and_then(|a| dialect.pr_facts(a).ok()).map_or_else(|| asked.clone(), |f| f.canonical(&asked));
            let origin = workflow::PrOrigin {
                pr: target.key(call.remote),
                by: call.actor.clone(),
                at: now,
                issues: opened_issues(dialect, call.tool, args),
            };
            store.record_pr_origin(&origin)?;
        }
        ACTION_REVIEW => {
            let verdict = dialect.review_verdict(call.tool, args);
            let (Some(verdict), Some(target)) = (verdict, dialect.pr_target(call.tool, args)) else {
                return Ok(events);
            };
            // The decision is recorded at the head and base the gate judged it at; a call
            // judged before those were carried (none is) falls back to the lease's, else the
            // forge's now.
            let key = target.key(call.remote);
            let held = store.pr_records(&key)?;
            let (head, base) = match judged_at {
                Some(at) => at,
                None => match workflow::held_by(&held.state(), workflow::Purpose::Review, &call.actor.worker, now) {
                    Some(lease) if lease.terms.target_branch.is_some() => {
                        (lease.terms.candidate_head.clone(), lease.terms.target_branch.clone())
                    }
                    Some(lease) => (lease.terms.candidate_head.clone(), read_pr(forge, &target)?.base_ref),
                    None => {
                        let facts = read_pr(forge, &target)?;
                        (facts.head, facts.base_ref)
                    }
                },
            };
            let decision =
                workflow::PrDecision { pr: key, head, base, verdict, by: call.actor.clone(), at: now, cleared: None };
            events.extend(record_decision(store, call, &decision)?);
        }
        ACTION_PUSH => {
            // A PR's head updated from its base: the head the forge reports now is the push.
            if let Some(target) = dialect.pr_target(call.tool, args) {
                let facts = read_pr(forge, &target)?;
                let Some(branch) = facts.head_ref.clone() else { return Ok(events) };
                let binding = binding_of(&target.owner, &target.repo);
                let push = workflow::PrPush { binding, branch, head: facts.head, by: call.actor.clone(), at: now };
                store.record_pr_push(&push)?;
                return Ok(events);
            }
            // The write's answer names no commit: the branch's tip, read right after, is it.
            let Some(pushed) = dialect.pushed(call.tool, args) else { return Ok(events) };
            let read = dialect.tip_read(&pushed.owner, &pushed.repo, &pushed.branch, forge.schemas)?;
            let tip = forge.read(&read, "reading the pushed branch's tip")?;
            let head = dialect.tip_of(&tip).ok_or("the forge named no commit for the branch")?;
            let push = workflow::PrPush {
                binding: binding_of(&pushed.owner, &pushed.repo),
                branch: pushed.branch,
                head,
                by: call.actor.clone(),
                at: now,
            };
            store.record_pr_push(&push)?;
        }
        ACTION_MERGE => {
            let Some(target) = dialect.pr_target(call.tool, args) else { return Ok(events) };
            let key = target.key(call.remote);
            store.release_pr_leases(&key, workflow::released::MERGED, now)?;
            events.extend(moot(store, &key, "merged", now)?);
        }
        ACTION_CLOSE | ACTION_EDIT => {
            // A close, or an issue update closing the number (a PR's number, when it is one:
            // the release finds no lock otherwise).
            let Some(target) = dialect.closes(call.tool, args) else { return Ok(events) };
            events.extend(moot(store, &target.key(call.remote), "closed", now)?);
        }
        _ => {}
    }
    Ok(events)
}

/// The issues an opened PR's title and body name, as its dialect reads them (its own
/// repository's; at most [`ISSUES_KEPT`]).
fn opened_issues(dialect: &dyn Dialect, tool: &str, args: &Map<String, Value>) -> Vec<u64> {
    let here = dialect.repository(args).map(|(o, r)| fleetgate_core::effect::Repo::new(&o, &r));
    let mut issues: Vec<u64> = Vec::new();
    for i in dialect.evident(tool, args, None).issues {
        if Some(&i.repo) == here.as_ref() && i.issue != 0 && !issues.contains(&i.issue) {
            issues.push(i.issue);
        }
    }
    issues.truncate(ISSUES_KEPT);
    issues
}

/// Record a decision, with the lock it takes or corrects under `[workflow] decision_lock`.
fn record_decision(
    store: &dyn Store,
    call: &WorkflowCall<'_>,
    decision: &workflow::PrDecision,
) -> Result<Settled, SettleError> {
    if !call.decision_lock {
        store.record_pr_decision(decision)?;
        return Ok(Settled::new());
    }
    let by = &decision.by;
    let held = store.live_review_locks(&by.client, &by.session)?;
    let what = format!("{} at head {} on {}", decision.verdict.as_str(), short(&decision.head), decision.pr);
    let write = match decision_lock::judge_decision(&held, by, &decision.pr, &decision.head) {
        Ok(LockPlan::Take) => LockWrite::Take { lock_id: new_lock_id(&decision.pr, decision.at) },
        Ok(LockPlan::Correct { lock_id, .. }) => LockWrite::Correct { lock_id },
        Err(refusal) => {
            // Judged free before the call, locked since (another decision of this session
            // raced it): the forge took this decision, so it is recorded, without a lock.
            store.record_pr_decision(decision)?;
            let why = refusal.reasons.join("; ");
            return Ok(vec![(LOCK_EVENT, format!("{what} recorded without a lock: {why}"))]);
        }
    };
    let lock = store.record_locked_decision(decision, &write)?;
    let event = match (&write, lock) {
        (LockWrite::Take { .. }, Some(l)) => format!("lock {} taken by session {}: {what}", l.lock_id, by.session),
        (LockWrite::Correct { .. }, Some(l)) => {
            format!("lock {} corrected by session {}: now {what} (decision {})", l.lock_id, by.session, l.decisions)
        }
        (_, None) => format!("{what} recorded; another decision of session {} holds its lock", by.session),
    };
    Ok(vec![(LOCK_EVENT, event)])
}

/// The PR is merged or closed: its review-decision locks are moot.
fn moot(store: &dyn Store, key: &PrRef, how: &str, now: Timestamp) -> Result<Settled, SettleError> {
    let released = store.release_review_locks(key, decision_lock::ended::MOOT, now)?;
    Ok(released
        .into_iter()
        .map(|l| {
            let h = &l.holder;
            (
                LOCK_EVENT,
                format!(
                    "lock {} on {} released: moot ({key} {how}); holder worker {} ({}, session {}), {} at head {}",
                    l.lock_id,
                    l.pr,
                    h.worker,
                    h.profile,
                    h.session,
                    l.verdict.as_str(),
                    short(&l.head)
                ),
            )
        })
        .collect())
}

/// [`PrRecords`] as the pure functions take it.
pub trait AsState {
    /// Borrowed.
    fn state(&self) -> PrState<'_>;
}

impl AsState for PrRecords {
    fn state(&self) -> PrState<'_> {
        PrState { leases: &self.leases, decisions: &self.decisions, origin: self.origin.as_ref(), pushes: &self.pushes }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    /// A forge answering each read from a table (an error: a timeout saying so).
    struct Table(Vec<(&'static str, Result<Value, &'static str>)>);

    impl ForgeReader for Table {
        fn read(&self, tool: &str, _arguments: Map<String, Value>) -> Result<Value, ForgeError> {
            match self.0.iter().find(|(t, _)| *t == tool).map(|(_, a)| a.clone()) {
                Some(answer) => answer.map_err(|why| ForgeError::new(ForgeErrorKind::Timeout, why)),
                None => Err(ForgeError::new(ForgeErrorKind::Timeout, format!("no {tool}"))),
            }
        }
    }

    #[test]
    fn a_forge_read_keeps_whether_asking_again_may_help() {
        let timeout = fleetgate_gateway::DownstreamError::new(fleetgate_gateway::DownstreamErrorKind::Timeout, "slow");
        let failed = fleetgate_gateway::DownstreamError::new(fleetgate_gateway::DownstreamErrorKind::Failed, "closed");
        assert!(ForgeError::from(timeout).is_transient());
        assert!(!ForgeError::from(failed).is_transient());
        let target = PrTarget { owner: "o".into(), repo: "r".into(), pr: 3 };
        fn forge<'a>(reader: Option<&'a dyn ForgeReader>) -> Forge<'a> {
            Forge {
                dialect: &fleetgate_core::dialect::gitea::GITEA,
                schemas: &fleetgate_core::dialect::Unlisted,
                reader,
            }
        }
        let none = read_pr(forge(None), &target).unwrap_err();
        assert_eq!((none.kind, none.is_transient()), (ForgeErrorKind::NotConfigured, false));
        let slow = Table(vec![("pull_request_read", Err("timeout"))]);
        let e = read_pr(forge(Some(&slow)), &target).unwrap_err();
        assert!(e.is_transient() && e.message.starts_with("reading PR #3 from the forge: "), "{e:?}");
        let odd = Table(vec![("pull_request_read", Ok(json!({ "not": "a pr" })))]);
        assert_eq!(read_pr(forge(Some(&odd)), &target).unwrap_err().kind, ForgeErrorKind::Malformed);
    }

    /// A review is judged at H1; by the time its answer comes back the lease has lapsed and
    /// the forge reports H2 (another role pushed). The decision is recorded at H1, the head
    /// it was judged at — never at a head read after the call.
    #[test]
    fn a_decision_is_recorded_at_the_head_it_was_judged_at_not_one_read_after() {
        let dir = tempfile::tempdir().unwrap();
        let store = fleetgate_store::open(&dir.path().join("s.sqlite3").display().to_string()).unwrap();
        let (h1, h2) = ("1".repeat(40), "2".repeat(40));
        let moved = Table(vec![(
            "pull_request_read",
            Ok(json!({ "number": 3, "state": "open", "head": { "sha": h2, "ref": "f" }, "base": { "ref": "main" } })),
        )]);
        let forge = Forge {
            dialect: &fleetgate_core::dialect::gitea::GITEA,
            schemas: &fleetgate_core::dialect::Unlisted,
            reader: Some(&moved),
        };
        let actor =
            Actor { worker: "w".into(), profile: "p".into(), client: "c".into(), session: "s".into(), principal: None };
        let approve =
            args(json!({ "method": "create", "owner": "o", "repo": "r", "pull_number": 3, "state": "APPROVED" }));
        let call = WorkflowCall {
            tool: "pull_request_review_write",
            action: ACTION_REVIEW,
            arguments: Some(&approve),
            actor: &actor,
            remote: "forge",
            independence: workflow::Independence::Session,
            decision_lock: false,
            issue_lock: false,
        };
        let (action, at) = settled(&settles(ACTION_REVIEW, Some(&(h1.clone(), Some("main".into())))));
        assert_eq!(action, ACTION_REVIEW);
        settle(&*store, forge, &call, at, None, Timestamp::from_unix(1_000)).unwrap();
        let key = PrTarget { owner: "o".into(), repo: "r".into(), pr: 3 }.key("forge");
        let held = store.pr_records(&key).unwrap();
        let heads: Vec<&str> = held.decisions.iter().map(|d| d.head.as_str()).collect();
        assert_eq!(heads, [h1.as_str()], "recorded at the judged head, not the forge's later one");
        assert_eq!(settled(ACTION_MERGE), (ACTION_MERGE.to_owned(), None), "a bare action reads back");
    }

    /// GitHub's `merge_pull_request` with `merge`, by `actor`.
    fn github_merge<'a>(merge: &'a Map<String, Value>, actor: &'a Actor) -> WorkflowCall<'a> {
        WorkflowCall {
            tool: "merge_pull_request",
            action: ACTION_MERGE,
            arguments: Some(merge),
            actor,
            remote: "github",
            independence: workflow::Independence::Session,
            decision_lock: false,
            issue_lock: false,
        }
    }

    /// The schemas of one tool, as a server lists them.
    struct Listing(&'static str, Value);

    impl Schemas for Listing {
        fn schema(&self, tool: &str) -> Option<Map<String, Value>> {
            (tool == self.0).then(|| self.1.as_object().cloned()).flatten()
        }
    }

    /// GitHub's released merge declares no head pin: the gateway adds none to the forwarded
    /// call and makes the merge itself, pinned through the REST API; a release that declares
    /// `expectedHeadSha` is pinned with it and no REST call is made. Refused or not (no
    /// approval is on record here), the pin is the same: an override forwards it pinned.
    #[test]
    fn a_merge_is_pinned_only_by_an_argument_the_server_declares_else_made_by_the_gateway() {
        let dir = tempfile::tempdir().unwrap();
        let store = fleetgate_store::open(&dir.path().join("s.sqlite3").display().to_string()).unwrap();
        let head = "3".repeat(40);
        let pr = Table(vec![(
            "pull_request_read",
            Ok(json!({ "number": 4, "state": "open", "head": { "sha": head, "ref": "f" },
                        "base": { "ref": "main", "repo": { "full_name": "Org/Repo" } } })),
        )]);
        let actor =
            Actor { worker: "w".into(), profile: "p".into(), client: "c".into(), session: "s".into(), principal: None };
        let merge = args(json!({ "owner": "org", "repo": "repo", "pullNumber": 4, "merge_method": "squash" }));
        let call = github_merge(&merge, &actor);
        let released = Listing("merge_pull_request", json!({ "properties": { "pullNumber": {}, "merge_method": {} } }));
        let forge = Forge { dialect: &fleetgate_core::dialect::github::GITHUB, schemas: &released, reader: Some(&pr) };
        let judged = judge(&*store, forge, &call, Timestamp::from_unix(1_000));
        // The repository as the forge names it (declared keys); no head pin.
        assert_eq!(judged.pins, args(json!({ "owner": "Org", "repo": "Repo" })), "no undeclared pin");
        let rest = judged.rest.expect("the gateway's own merge");
        assert_eq!(rest.path, "repos/Org/Repo/pulls/4/merge", "the repository as the forge names it");
        assert_eq!(rest.body, json!({ "merge_method": "squash", "sha": head }));
        assert!(judged.note.unwrap().contains("made by the gateway through the forge's REST merge"));
        assert_eq!(judged.refusal.unwrap().blocker_kind, BlockerKind::ApprovalRequired);
        let pinned =
            Listing("merge_pull_request", json!({ "properties": { "pullNumber": {}, "expectedHeadSha": {} } }));
        let forge = Forge { dialect: &fleetgate_core::dialect::github::GITHUB, schemas: &pinned, reader: Some(&pr) };
        let judged = judge(&*store, forge, &call, Timestamp::from_unix(1_000));
        assert_eq!(judged.pins.get("expectedHeadSha"), Some(&Value::from(head.clone())));
        assert!(judged.rest.is_none());
    }

    /// A forge whose answer to the read of PR 4 is another PR (a server that built the read's
    /// path from a spelling the gate let through): nothing is judged of it, and no merge is
    /// made of PR 4 at that other PR's head.
    #[test]
    fn an_answer_that_is_another_pr_is_no_answer() {
        let dir = tempfile::tempdir().unwrap();
        let store = fleetgate_store::open(&dir.path().join("s.sqlite3").display().to_string()).unwrap();
        let other = Table(vec![(
            "pull_request_read",
            Ok(json!({ "number": 7, "state": "open", "head": { "sha": "7".repeat(40), "ref": "f" },
                        "base": { "ref": "dev", "repo": { "full_name": "org/repo" } } })),
        )]);
        let actor =
            Actor { worker: "w".into(), profile: "p".into(), client: "c".into(), session: "s".into(), principal: None };
        let merge = args(json!({ "owner": "org", "repo": "repo", "pullNumber": 4 }));
        let call = github_merge(&merge, &actor);
        let forge = Forge {
            dialect: &fleetgate_core::dialect::github::GITHUB,
            schemas: &fleetgate_core::dialect::Unlisted,
            reader: Some(&other),
        };
        let judged = judge(&*store, forge, &call, Timestamp::from_unix(1_000));
        assert!(judged.rest.is_none(), "no merge made of another PR's head: {judged:?}");
        let refusal = judged.refusal.expect("refused");
        assert_eq!(refusal.blocker_kind, BlockerKind::ForgeUnavailable);
        assert!(refusal.reasons.join(" ").contains("PR #7"), "{refusal:?}");
        let e = read_pr(forge, &PrTarget { owner: "org".into(), repo: "repo".into(), pr: 4 }).unwrap_err();
        assert_eq!(e.kind, ForgeErrorKind::Malformed, "{e:?}");
    }
}
