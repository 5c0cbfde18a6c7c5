//! The architecture boundary between the gateway and the fleet control plane: the
//! [`ControlPlane`] trait and the plain values that cross it.
//!
//! The gateway knows MCP, stdio and the downstream child; the control plane knows the
//! registry, the roster, the environment gate, the capability resolver and the audit log.
//! Neither knows the other's internals: the gateway asks the questions below and acts on
//! the answers, and the control plane never sees a transport, a request id or a future.
//!
//! A process serves one or more client **attachments**: over stdio the one client, over
//! Streamable HTTP each session. The gateway numbers them ([`AttachmentId`]) and names the
//! attachment in every call that belongs to one, so the control plane keeps a worker, a
//! heartbeat and an audit trail per attachment while the runtime row stays one per process.
//!
//! Every method may block (a store transaction, a `/proc` scan): the gateway calls them
//! from `tokio::task::spawn_blocking`, never on an MCP I/O loop, so a slow store delays the
//! one call that needs it and nothing else. The one exception is
//! [`ControlPlane::decide_now`], which never blocks and is asked on the call's own task.

pub use fleetgate_core::BlockerKind;
pub use fleetgate_core::capability::ToolClass;
use rmcp::model::{CallToolResult, JsonObject, Tool};
use serde_json::{Map, Value};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// What a call's [`Judgement`] needs next, or its verdict. The gateway does what it says and
/// feeds the answer back.
#[derive(Debug)]
pub enum Step {
    /// Run alone among the calls that share this key, from here to what the call settles: a
    /// check that depends on a read (the open PRs a branch heads) is then not fooled by a
    /// concurrent call.
    Serialize(String),
    /// Make these reads of the downstream, then hand the answers to
    /// [`Judgement::answered`].
    Read(Vec<DownstreamRead>),
    /// Decide on the blocking pool ([`ControlPlane::decide_judged`]: the store, `/proc`), then
    /// hand the verdict to [`Judgement::decided`].
    Decide,
    /// The call waits for an operator's answer to this approval request: hold it
    /// ([`ControlPlane::hold`]), then tell [`Judgement::held`] whether it was answered. No
    /// serial key is held meanwhile.
    Hold(String),
    /// The verdict: forward (its arguments, with what it pins), perform, or refuse.
    Done(Verdict),
}

/// One call's judgement: pure, every answer fed in (see the module's documentation).
pub trait Judgement: Send + 'static {
    /// What it needs next.
    fn next(&mut self) -> Step;
    /// The reads of the last [`Step::Read`], made.
    fn answered(&mut self, answers: Vec<ReadAnswer>);
    /// The verdict [`Step::Decide`] asked for.
    fn decided(&mut self, verdict: Verdict);
    /// Whether the request of the last [`Step::Hold`] was answered (the call is then judged
    /// again from the start, its reads included) or the wait ended without an answer.
    fn held(&mut self, answered: bool);
    /// Itself, for the control plane that made it ([`ControlPlane::decide_judged`]).
    fn as_any(&self) -> &dyn std::any::Any;
    /// The call and the reads made, when the judgement is the gateway's own over the control
    /// plane's one-question methods ([`crate::Stepwise`]): decided by [`ControlPlane::decide`].
    fn stepwise(&self) -> Option<(&CallToJudge, &[ReadAnswer])> {
        None
    }
}

/// A call to judge, as the gateway hands it over: the downstream's definition of the tool,
/// the arguments as sent, and the tool schemas the downstream lists (what reads are built from).
#[derive(Clone)]
pub struct CallToJudge {
    /// The tool as the downstream defines it.
    pub tool: Tool,
    /// The arguments as sent.
    pub arguments: Option<JsonObject>,
    /// The downstream's tool schemas as it last listed them.
    pub catalogue: Arc<dyn fleetgate_core::dialect::Schemas + Send + Sync>,
}

impl std::fmt::Debug for CallToJudge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallToJudge").field("tool", &self.tool.name).finish_non_exhaustive()
    }
}

impl CallToJudge {
    /// The call as the control plane's one-question methods take it.
    pub fn tool_call<'a>(&'a self, answers: &'a [ReadAnswer], link: Option<&'a dyn DownstreamLink>) -> ToolCall<'a> {
        ToolCall {
            tool: &self.tool,
            arguments: self.arguments.as_ref(),
            answers,
            link,
            settles: None,
            catalogue: Some(&*self.catalogue),
        }
    }
}

/// What [`ControlPlane::hold`] answers: whether the request was answered.
pub type HoldFuture = std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>>;

/// The most rounds of [`ControlPlane::reads`] the gateway makes for one call.
pub const MAX_READ_ROUNDS: usize = 48;

/// Everything the gateway asks of the fleet control plane.
///
/// Methods may block on a store: the gateway calls them from
/// `tokio::task::spawn_blocking`, never on the MCP I/O loop. A method that fails
/// returns its cause as text; the gateway logs it and keeps serving (a control plane
/// that cannot write its rows must make [`decide`](Self::decide) refuse mutations: the
/// gateway does not second-guess it).
pub trait ControlPlane: Send + Sync + 'static {
    /// Right after the client transport is bound (before any message is read): write this
    /// process's runtime row.
    fn on_transport_bound(&self) -> Result<(), ControlError>;

    /// On an attachment's `initialize` (or, for the sessionless 2026-07-28 protocol, its
    /// first request): register its worker (client name from the environment or
    /// `clientInfo`) and start its heartbeat supervisor. Called at most once per
    /// attachment; a second `initialize` on the same attachment is refused before it gets
    /// here. The id is the gateway's, so an attachment whose registration failed still has
    /// one, and [`decide`](Self::decide) for it must refuse mutations.
    fn on_client_attach(&self, attachment: AttachmentId, client: &ClientAttach) -> Result<(), ControlError>;

    /// An attachment ended before the process does (an HTTP session closed or expired, a
    /// stateless client idle past its TTL): stop its heartbeat and retire its worker. Not called for attachments still open at
    /// shutdown: [`on_shutdown`](Self::on_shutdown) ends those.
    fn on_detach(&self, attachment: AttachmentId, reason: &str);

    /// The control tools this gateway serves: already carrying the fleet's tool prefix, all
    /// `readOnlyHint: true`. Asked once, at start-up; the answer is served for the process's
    /// life. A downstream tool with the same name is hidden behind the control tool.
    fn control_tools(&self) -> Vec<Tool>;

    /// Answer a call of one of [`control_tools`](Self::control_tools) (see [`ControlCall`]).
    fn call_control_tool(&self, call: ControlCall<'_>) -> CallToolResult;

    /// Whether the control tool `name` reads the forge through the downstream: the gateway
    /// then waits for a downstream still starting before it calls it, as it would for a
    /// forwarded call (a stateless client's first request may be one). The rest answer at
    /// once, reporting the downstream as it is.
    fn control_tool_reads_downstream(&self, _name: &str) -> bool {
        false
    }

    /// How a downstream tool is listed to this role: whether at all (a tool the role may
    /// never call is left out of `tools/list`; a direct call of one is still put to
    /// [`decide`](Self::decide)), its class, and what the listing's `_meta` adds.
    fn list_tool(&self, tool: &Tool) -> Listing;

    /// The mutation gate for one real call of a downstream tool on `attachment`, read-only
    /// ones included (the role policy lives here too), judged from the whole call — the
    /// tool's definition and the call's arguments: the attachment's own worker is the
    /// session evidence. Records the decision in the audit log itself, under that worker.
    fn decide(&self, attachment: AttachmentId, call: &ToolCall<'_>) -> Verdict;

    /// Start judging one real call of a downstream tool on `attachment`: the control plane's
    /// own [`Judgement`] — the call parsed once and what it does stated once, carried to the
    /// decision ([`decide_judged`](Self::decide_judged)). The gateway drives it with its one
    /// loop: the serial key, the reads, the decision, the hold. `None`: the gateway judges
    /// the call through [`decide_now`](Self::decide_now), [`serial_key`](Self::serial_key),
    /// [`reads`](Self::reads), [`decide`](Self::decide) and [`hold`](Self::hold) ([`Journey`](crate::Journey)
    /// over [`Stepwise`](crate::Stepwise)). Called on the runtime: it must not block.
    fn judge(&self, attachment: AttachmentId, call: &CallToJudge) -> Option<Box<dyn Judgement>> {
        let _ = (attachment, call);
        None
    }

    /// The decision a [`Judgement`] asked for ([`Step::Decide`](crate::Step::Decide)), on the
    /// blocking pool: like [`decide`](Self::decide), recorded in the audit log. `link`: the
    /// attachment's downstream. A judgement this control plane did not make (the gateway's
    /// [`Stepwise`](crate::Stepwise) one) is decided through [`decide`](Self::decide).
    fn decide_judged(&self, attachment: AttachmentId, judgement: &dyn Judgement, link: &dyn DownstreamLink) -> Verdict {
        decide_stepwise(self, attachment, judgement, link)
    }

    /// [`decide`](Self::decide) when the verdict can be given at once, from memory: the
    /// gateway asks this first, on the task that handles the call, and goes to the
    /// blocking pool only for `None`. It must never block (no store round trip, no `/proc`
    /// scan, no lock held across I/O); what it decides it records like `decide` does. It
    /// never answers a call whose verdict [`settles`](Verdict::settles): that one goes to
    /// `decide`.
    fn decide_now(&self, attachment: AttachmentId, call: &ToolCall<'_>) -> Option<Verdict> {
        let _ = (attachment, call);
        None
    }

    /// The reads of the downstream [`decide`](Self::decide) still needs for `call`, given
    /// the answers already in [`ToolCall::answers`] (what the call would do — its
    /// repository, its PR, the open PRs a branch heads — and the PR's head before a merge or
    /// a review): the gateway makes them on its runtime and asks again, until none is left
    /// (at most [`MAX_READ_ROUNDS`] rounds), then decides. Called on the runtime: pure and
    /// cheap.
    fn reads(&self, attachment: AttachmentId, call: &ToolCall<'_>) -> Vec<DownstreamRead> {
        let _ = (attachment, call);
        Vec::new()
    }

    /// Calls that share a key run one at a time in this process, from their first read to
    /// what their answer settles: a check that depends on a read (the open PRs a branch
    /// heads) is then not fooled by a concurrent call (a PR opened on that branch meanwhile).
    /// `None`: the call runs alongside any other. Called on the runtime: pure and cheap.
    fn serial_key(&self, attachment: AttachmentId, call: &ToolCall<'_>) -> Option<String> {
        let _ = (attachment, call);
        None
    }

    /// A call [`decide`](Self::decide) refused because it waits for an operator
    /// ([`Verdict::held`], the request): a future that is `true` once the request was
    /// answered (the gateway decides the call again) and `false` when the wait is over —
    /// unanswered by the deadline (`started` plus the roster's wait), or withdrawn because the
    /// caller went away. It waits on the store's word, holding no thread and no lock.
    /// `None`: the call is not held.
    fn hold(&self, attachment: AttachmentId, request: &str, started: Instant) -> Option<HoldFuture> {
        let _ = (attachment, request, started);
        None
    }

    /// A call [`decide`](Self::decide) allowed with [`Verdict::perform`]: the control plane
    /// makes it itself (`what`, in its own words) instead of the downstream, and answers as the
    /// downstream's tool would. Called from the blocking pool, like `decide`; what it
    /// answers is then settled like a forwarded call's answer ([`on_forwarded`](Self::on_forwarded)).
    fn perform(&self, attachment: AttachmentId, call: &ToolCall<'_>, what: &str) -> CallToolResult {
        let _ = (attachment, what);
        CallToolResult::error(vec![rmcp::model::ContentBlock::text(format!(
            "`{}` was to be made by the gateway itself, which this control plane cannot do: nothing was done",
            call.tool.name
        ))])
    }

    /// A call [`decide`](Self::decide) allowed, with [`Verdict::settles`], was forwarded and the downstream answered
    /// `result` (an error result included): the control plane records what the answer
    /// settles (the PR workflow's decisions, a created PR's origin, a merge's released
    /// leases). Called from the blocking pool, like `decide`, with the downstream's link for
    /// any read the record needs.
    fn on_forwarded(&self, attachment: AttachmentId, call: &ToolCall<'_>, result: &CallToolResult);

    /// Replicas (HTTP): this process holds the 2025-11-25 session `session`, reached at
    /// `owner` (the address it advertises) — recorded where every replica of the member
    /// finds it, before the session's id is handed to the client. Blocking (the store).
    fn session_opened(&self, session: &str, owner: &str) {
        let _ = (session, owner);
    }

    /// Replicas (HTTP): where the replica holding `session` is reached, when one of this
    /// member recorded it. Blocking (the store).
    fn session_owner(&self, session: &str) -> Option<String> {
        let _ = session;
        None
    }

    /// Replicas (HTTP): [`session_owner`](Self::session_owner) when it is known without
    /// waiting — the session's record and the replicas' rows read recently, the holder judged
    /// alive now — else `None` (and `session_owner` is asked on the blocking pool). Never
    /// blocks: called on the I/O thread for every relayed request.
    fn session_owner_now(&self, session: &str) -> Option<String> {
        let _ = session;
        None
    }

    /// Replicas (HTTP): `session` ended, or the replica holding it cannot be reached: forget
    /// it, so no request is relayed to it again. Blocking (the store).
    fn session_ended(&self, session: &str) {
        let _ = session;
    }

    /// Replicas (HTTP): the downstream made task `task` for the stateless client `client`
    /// here, reached at `owner` — recorded where every replica of the member finds it, before
    /// the task's id is answered. Blocking (the store).
    fn task_made(&self, client: &ClientAttach, task: &str, owner: &str) {
        let _ = (client, task, owner);
    }

    /// Replicas (HTTP): where the replica holding the stateless client's task `task` is
    /// reached, when one recorded it and it is alive. Blocking (the store).
    fn task_owner(&self, client: &ClientAttach, task: &str) -> Option<String> {
        let _ = (client, task);
        None
    }

    /// Replicas (HTTP): whether one more attachment of `principal` may be made, counted across
    /// every replica of the member (the store), at most `limit`; `Err(why)` refuses it (429).
    /// `stateless`: the `clientInfo` name and version of a stateless client, whose member-wide
    /// attachment, when one replica holds it already, is no new one. The gateway asks after
    /// its own bound admitted the attachment. Blocking (the store).
    fn admit_principal(&self, principal: &str, limit: usize, stateless: Option<(&str, &str)>) -> Result<(), OverBound> {
        let _ = (principal, limit, stateless);
        Ok(())
    }

    /// Replicas (HTTP): the attachment just registered, counted again with every replica's
    /// registrations in: `Err(why)` when the principal's live attachments of the member now
    /// exceed `limit` and this one's worker is new, and the gateway ends it. The count before
    /// registering ([`admit_principal`](Self::admit_principal)) cannot see a first request
    /// racing on another replica; counted after, the last of any set over the bound sees the
    /// whole set, so no set over it survives. Blocking (the store).
    fn confirm_principal(&self, attachment: AttachmentId, principal: &str, limit: usize) -> Result<(), OverBound> {
        let _ = (attachment, principal, limit);
        Ok(())
    }

    /// Orderly shutdown (stdin EOF, SIGTERM, SIGINT, the client transport failing): stop
    /// every attachment's heartbeat, retire their workers, mark the runtime row stopped.
    /// Called once, after the last call.
    fn on_shutdown(&self, reason: &str);
}

/// A principal over its bound of attachments across the member's replicas
/// ([`ControlPlane::admit_principal`], [`ControlPlane::confirm_principal`]): HTTP 429, or the
/// attachment just made is ended.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OverBound {
    /// Counted before the attachment is made: it would be one too many.
    #[error(
        "this principal holds its maximum of {limit} attachments across the member's {replicas} replicas; end one \
         of its sessions first"
    )]
    Before {
        /// The bound.
        limit: usize,
        /// The member's replicas.
        replicas: u32,
    },
    /// Counted again once registered: `live` stand at once, over the bound.
    #[error(
        "this principal holds its maximum of {limit} attachments across the member's {replicas} replicas ({live} \
         were registered at once); end one of its sessions first"
    )]
    After {
        /// The bound.
        limit: usize,
        /// The member's replicas.
        replicas: u32,
        /// The principal's live attachments counted.
        live: usize,
    },
}

/// What kind of failure a control-plane call reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ControlErrorKind {
    /// The store could not record what the call asked (the row, the worker).
    Store,
    /// A loop the call starts could not be started.
    Supervision,
}

/// Why a control-plane call failed: its kind and the message naming the thing. The gateway
/// logs it and keeps serving; the gate refuses what the failure leaves unproven.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlError {
    /// What kind of failure.
    pub kind: ControlErrorKind,
    /// What failed, in words.
    pub message: String,
}

impl ControlError {
    /// A failure of `kind`.
    pub fn new(kind: ControlErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }
}

impl fmt::Display for ControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ControlError {}

/// Why a call the control plane made of the downstream ([`DownstreamLink::call_tool`], a
/// [`ReadAnswer`]) has no result. A result that is an error result is a result, not this.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DownstreamError {
    /// What kind of failure.
    pub kind: DownstreamErrorKind,
    /// What failed, in words.
    pub message: String,
}

/// The kinds of [`DownstreamError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DownstreamErrorKind {
    /// The downstream did not answer within the gateway's call timeout.
    Timeout,
    /// The call did not complete: the connection closed, or the downstream answered a
    /// protocol error (JSON-RPC, not a tool error result).
    Failed,
}

impl DownstreamError {
    /// A failure of `kind`.
    pub fn new(kind: DownstreamErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }

    /// Whether asking again later may succeed: a timeout may (the downstream was slow or
    /// restarting); a protocol error will not by itself.
    pub fn is_transient(&self) -> bool {
        self.kind == DownstreamErrorKind::Timeout
    }
}

impl fmt::Display for DownstreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DownstreamError {}

/// One client attachment of this process, numbered by the gateway from 1: the stdio client,
/// one Streamable HTTP session, or one stateless HTTP client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AttachmentId(pub u64);

impl fmt::Display for AttachmentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "attachment-{}", self.0)
    }
}

/// Who attached, from the client's `initialize` (or the sessionless request's `_meta`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientAttach {
    /// `clientInfo.name` as sent (not normalised: the control plane normalises).
    pub client_name: String,
    /// `clientInfo.version` as sent.
    pub client_version: String,
    /// The protocol version negotiated with the client (for a stateless 2026-07-28
    /// client: the version its requests carry).
    pub protocol_version: String,
    /// The principal an HTTP tokens file authenticated it as (the entry's client name);
    /// `None` over stdio, and over HTTP without a tokens file. The control plane records
    /// it as the worker's client.
    pub principal: Option<String>,
    /// A stateless (2026-07-28) HTTP client, one attachment per principal and `clientInfo`:
    /// whichever replica of the member a request reaches serves it, so its worker is the
    /// member's, found or made in the store, not this process's.
    pub stateless: bool,
}

/// A call of one of the control tools, on `attachment` (whose worker the runtime context
/// shows).
pub struct ControlCall<'a> {
    /// The attachment that called.
    pub attachment: AttachmentId,
    /// The control tool's name, with the prefix.
    pub name: &'a str,
    /// Its arguments.
    pub arguments: Map<String, Value>,
    /// The gateway's view of the attachment's downstream at the moment of the call.
    pub downstream: &'a DownstreamStatus,
    /// The attachment's downstream tool of a name, as the gateway last saw it listed (a
    /// control tool that judges a tool by name reads its definition here).
    pub known_tool: &'a (dyn Fn(&str) -> Option<Tool> + Sync),
    /// The attachment's downstream, while it is connected (the workflow's control tools
    /// read a PR's head through it).
    pub link: Option<&'a dyn DownstreamLink>,
}

impl fmt::Debug for ControlCall<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControlCall")
            .field("attachment", &self.attachment)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// A read of the downstream the control plane needs before it decides a call (the PR
/// workflow's head and base): the gateway makes it on its own runtime, so no decision blocks
/// on the downstream.
#[derive(Clone, Debug, PartialEq)]
pub struct DownstreamRead {
    /// The read tool.
    pub tool: String,
    /// Its arguments.
    pub arguments: JsonObject,
}

/// A [`DownstreamRead`] made, and what the downstream answered (or why it did not).
#[derive(Clone, Debug)]
pub struct ReadAnswer {
    /// The read.
    pub read: DownstreamRead,
    /// Its answer.
    pub answer: Result<CallToolResult, DownstreamError>,
}

/// One real call of a downstream tool: its definition and its arguments.
#[derive(Clone, Copy, Debug)]
pub struct ToolCall<'a> {
    /// The tool as the downstream defines it (annotations included).
    pub tool: &'a Tool,
    /// The call's arguments: as sent when deciding; as forwarded (the verdict's
    /// [`Verdict::forward`], when it set one) when settling.
    pub arguments: Option<&'a JsonObject>,
    /// The answers of the reads [`ControlPlane::reads`] asked for, made before deciding.
    pub answers: &'a [ReadAnswer],
    /// The attachment's downstream, for the reads the gate makes itself before deciding
    /// (a PR's current head): never the caller's word.
    pub link: Option<&'a dyn DownstreamLink>,
    /// When settling: what the verdict said the call settles ([`Verdict::settles`]).
    pub settles: Option<&'a str>,
    /// The downstream's tool schemas as it last listed them: the control plane builds its
    /// reads of the downstream from the argument names they declare (`None`: not known).
    pub catalogue: Option<&'a (dyn fleetgate_core::dialect::Schemas + Sync)>,
}

/// The attachment's downstream, for the control plane's own calls. The control plane runs
/// on the blocking pool, so the call blocks there (bounded by the gateway's call timeout)
/// while the runtime carries the exchange.
pub trait DownstreamLink: Send + Sync + fmt::Debug {
    /// Call `name` with `arguments` and wait for the answer: a result (possibly an error
    /// result), or why there is none.
    fn call_tool(&self, name: &str, arguments: JsonObject) -> Result<CallToolResult, DownstreamError>;
}

/// How a downstream tool is listed to the role.
#[derive(Clone, Debug, PartialEq)]
pub struct Listing {
    /// Listed at all (the role may call it for some arguments).
    pub visible: bool,
    /// Its classification, set as `readOnlyHint` and `_meta["fleetgate/classification"]`.
    pub class: ToolClass,
    /// More `_meta` for the listing (what the role may call it with, …).
    pub meta: JsonObject,
}

/// The gate's answer for one call, with the class it judged the call as.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// The call's classification.
    pub class: ToolClass,
    /// Allowed, or refused with the blocker.
    pub decision: GateDecision,
    /// The control plane wants this call's answer ([`ControlPlane::on_forwarded`]): only a
    /// call whose outcome it records asks, so every other call skips that round trip. What
    /// it settles, in the control plane's words (handed back in [`ToolCall::settles`]).
    pub settles: Option<String>,
    /// When allowed: the arguments to forward in place of the caller's (the control plane's
    /// own serialization of what it judged, with what it pins). `None`: as sent.
    pub forward: Option<JsonObject>,
    /// When refused because it waits for an operator: the request the gateway may hold the
    /// call for ([`ControlPlane::hold`]).
    pub held: Option<String>,
    /// When allowed: the call is not forwarded; the control plane makes it itself
    /// ([`ControlPlane::perform`], handed this, its own words) — a merge pinned through the
    /// forge's own API where the downstream's merge cannot pin the head.
    pub perform: Option<String>,
}

/// The mutation gate's answer for one call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GateDecision {
    /// Whether the call may go to the downstream.
    pub allowed: bool,
    /// When refused: the blocker consumers switch on (`role_not_permitted`,
    /// `fleet_inventory_blocked`, …). The refusal text starts with its literal.
    pub blocker_kind: Option<BlockerKind>,
    /// Why, one line each.
    pub reasons: Vec<String>,
    /// What the operator does to clear the blocker.
    pub operator_action: Option<String>,
}

impl GateDecision {
    /// A yes.
    pub fn allow() -> Self {
        Self { allowed: true, ..Self::default() }
    }

    /// A no, naming the blocker, the reasons and the operator action.
    pub fn refuse(blocker_kind: BlockerKind, reasons: Vec<String>, operator_action: Option<String>) -> Self {
        Self { allowed: false, blocker_kind: Some(blocker_kind), reasons, operator_action }
    }
}

/// The gateway's view of its downstream child, handed to
/// [`ControlPlane::call_control_tool`] and used in the errors a downstream tool answers
/// while the child is not serving.
#[derive(Clone, Debug, PartialEq)]
pub struct DownstreamStatus {
    /// What the child is doing.
    pub state: DownstreamState,
    /// Runs begun since the gateway started, minus one (0 while the first run lives).
    pub restarts: u32,
    /// How the last failed run ended (`` `python` exited with status 1 ``, a handshake
    /// failure, …).
    pub last_exit: Option<String>,
    /// The downstream's `serverInfo` name and version, once it answered `initialize`.
    pub server: Option<(String, String)>,
    /// The protocol version negotiated with the downstream.
    pub protocol_version: Option<String>,
    /// The current run's pid, while one runs.
    pub pid: Option<u32>,
}

/// What the downstream child is doing.
#[derive(Clone, Debug, PartialEq)]
pub enum DownstreamState {
    /// No downstream command was given: the gateway serves its control tools only.
    Absent,
    /// A run is up but has not finished the MCP handshake yet (or waits for the client's
    /// `initialize`, whose capabilities it is started with).
    Starting,
    /// Connected: calls are forwarded.
    Running,
    /// The last run failed; the next starts after a backoff delay.
    Restarting {
        /// Time left until the next run starts.
        retry_in: Duration,
    },
    /// The child spent its failure budget: no run until the quarantine expires.
    Quarantined {
        /// When it expires (wall clock, for display).
        until: SystemTime,
        /// Time left until then.
        retry_in: Duration,
    },
    /// The gateway stopped it (shutdown) or it can no longer be run.
    Stopped,
}

impl DownstreamState {
    /// The wire literal: `absent`, `starting`, `running`, `restarting`, `quarantined`,
    /// `stopped`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Absent => "absent",
            Self::Starting => "starting",
            Self::Running => "running",
            Self::Restarting { .. } => "restarting",
            Self::Quarantined { .. } => "quarantined",
            Self::Stopped => "stopped",
        }
    }

    /// Time left until the child is tried again, while restarting or quarantined.
    pub fn retry_in(&self) -> Option<Duration> {
        match self {
            Self::Restarting { retry_in } | Self::Quarantined { retry_in, .. } => Some(*retry_in),
            _ => None,
        }
    }
}

impl DownstreamStatus {
    /// The status of a gateway without a downstream.
    pub fn absent() -> Self {
        Self {
            state: DownstreamState::Absent,
            restarts: 0,
            last_exit: None,
            server: None,
            protocol_version: None,
            pid: None,
        }
    }

    /// The JSON form for the runtime context: `{"state", "restarts", "last_exit",
    /// "retry_in_s", "quarantined_until", "server_name", "server_version",
    /// "protocol_version", "pid"}` (absent values are `null`).
    pub fn to_json(&self) -> Value {
        let until = match &self.state {
            DownstreamState::Quarantined { until, .. } => Value::String(crate::timefmt::utc(*until)),
            _ => Value::Null,
        };
        serde_json::json!({
            "state": self.state.as_str(),
            "restarts": self.restarts,
            "last_exit": self.last_exit,
            "retry_in_s": self.state.retry_in().map(|d| (d.as_secs_f64() * 10.0).round() / 10.0),
            "quarantined_until": until,
            "server_name": self.server.as_ref().map(|(name, _)| name),
            "server_version": self.server.as_ref().map(|(_, version)| version),
            "protocol_version": self.protocol_version,
            "pid": self.pid,
        })
    }
}

/// [`ControlPlane::decide_judged`] of the gateway's own judgement over the one-question
/// methods ([`Judgement::stepwise`]): [`ControlPlane::decide`] with the reads it made. Any
/// other judgement `control` did not make is refused, never decided.
pub fn decide_stepwise<C: ControlPlane + ?Sized>(
    control: &C,
    attachment: AttachmentId,
    judgement: &dyn Judgement,
    link: &dyn DownstreamLink,
) -> Verdict {
    match judgement.stepwise() {
        Some((call, answers)) => control.decide(attachment, &call.tool_call(answers, Some(link))),
        None => Verdict {
            class: ToolClass::Mutating,
            decision: GateDecision::refuse(
                BlockerKind::FleetInventoryBlocked,
                vec!["the gate was handed a judgement it did not start: nothing is decided".into()],
                Some("re-run the call; if it persists, report a fleetgate defect".into()),
            ),
            settles: None,
            forward: None,
            held: None,
            perform: None,
        },
    }
}
