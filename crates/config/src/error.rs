//! Why a roster cannot be used: [`RosterError`] (the file, line and reason in one message,
//! what the CLI prints) and the typed reasons under it ([`Invalid`]: a value the roster
//! refuses, [`SecretUnset`]). Each text is the one operators and tests read: a change of
//! wording here is a change of contract.

use fleetgate_core::BlockerKind;

/// Why a roster could not be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RosterErrorKind {
    /// The file could not be read.
    Unreadable,
    /// It is not valid TOML, or has a key the roster does not know.
    Syntax,
    /// It parses, but a value is not acceptable (an empty roster, a duplicate profile, …).
    Invalid,
}

/// A roster (configuration file) that could not be used: the file, the line where known,
/// and the reason, in one message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RosterError {
    kind: RosterErrorKind,
    message: String,
}

impl RosterError {
    pub(crate) fn new(kind: RosterErrorKind, message: String) -> Self {
        Self { kind, message }
    }

    pub(crate) fn invalid(message: String) -> Self {
        Self::new(RosterErrorKind::Invalid, message)
    }

    /// What went wrong.
    pub fn kind(&self) -> RosterErrorKind {
        self.kind
    }
}

impl std::fmt::Display for RosterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RosterError {}

/// Why a [`crate::Secret`] has no value now (the key or the file named, never a value).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SecretUnset {
    /// Written in the roster, empty.
    #[error("empty")]
    Empty,
    /// The environment key is unset or empty.
    #[error("environment key {0} is unset or empty")]
    Env(String),
    /// The file cannot be read or is empty.
    #[error("{} cannot be read or is empty", .0.display())]
    File(std::path::PathBuf),
}

/// A value of the roster that is refused, without the file's name (the caller adds it).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
#[allow(missing_docs)] // each variant is its message
pub enum Invalid {
    // [fleet] and [downstream]
    #[error("fleet.env_prefix {0:?} must be non-empty upper-case letters, digits and _")]
    EnvPrefix(String),
    #[error("fleet.heartbeat_ttl_seconds must be 1 to 604800, got {0}")]
    HeartbeatTtl(f64),
    #[error("fleet.pass_through_env key {key:?} does not start with env_prefix {prefix:?}")]
    PassThroughEnv { key: String, prefix: String },
    #[error("fleet.process_match entries must not be empty")]
    ProcessMatchEmpty,
    #[error("the roster is empty: declare at least one [[members]] table")]
    RosterEmpty,
    #[error("[downstream] sharing {0:?} is neither \"session\" nor \"gateway\"")]
    Sharing(String),
    #[error("[downstream] pass_env: {0}")]
    PassEnv(#[from] fleetgate_core::env::PassEnvError),
    #[error("[supervision]: {0}")]
    Supervision(#[from] fleetgate_supervise::ConfigError),
    #[error("[roles.{0}] names a role no member of the roster has")]
    RoleUnknown(String),

    // [http] and [http.oauth]
    #[error("[http] max_attachments must be 1 to {limit}, got {0}", limit = crate::MAX_ATTACHMENTS_LIMIT)]
    MaxAttachments(usize),
    #[error("[http] max_attachments_per_principal must be 1 to max_attachments ({max}), got {got}")]
    MaxPerPrincipal { max: usize, got: usize },
    #[error("[http] max_connections must be 1 to {limit}, got {0}", limit = crate::MAX_CONNECTIONS_LIMIT)]
    MaxConnections(usize),
    #[error("[http] {key} must be more than 0 and at most {}, got {seconds}", crate::MAX_READ_TIMEOUT_SECONDS)]
    ReadTimeout { key: &'static str, seconds: f64 },
    #[error("[http.oauth] {key} {url:?} {why}")]
    OAuthUrl { key: &'static str, url: String, why: fleetgate_gateway::UrlRefused },
    #[error("[http.oauth] {key} {value:?} must be 1 to 128 printable characters without spaces")]
    OAuthWord { key: &'static str, value: String },
    #[error("[http.oauth] leeway_seconds must be 0 to 300, got {0}")]
    OAuthLeeway(u64),
    #[error("[http.oauth] jwks_cooldown_seconds must be 0 to 3600, got {0}")]
    OAuthCooldown(u64),
    #[error(
        "[http.oauth] principals: subject {subject:?} names profile {profile:?}, which no member of the roster has"
    )]
    OAuthProfile { subject: String, profile: String },
    #[error("[http.oauth] principals: subject {0:?} is mapped twice")]
    OAuthMappedTwice(String),
    #[error(transparent)]
    OAuthPrincipals(#[from] fleetgate_gateway::PrincipalClash),

    // [tracing], [metrics]
    #[error(transparent)]
    Otlp(#[from] crate::otlp::BadEndpoint),
    #[error("[metrics] listen {0:?} is not an address:port (e.g. 127.0.0.1:9464)")]
    MetricsListen(String),

    // [approvals] and [[approvals.notify]]
    #[error("[approvals] wait_seconds = {0}: expected 0 to 3600")]
    WaitSeconds(u64),
    #[error("[approvals] ttl_seconds = {0}: expected 1 to 86400")]
    TtlSeconds(i64),
    #[error("[approvals] may_override: {0:?} is not a blocker")]
    NotABlocker(String),
    #[error("[approvals] may_override: {0} is never overridden")]
    NeverOverridden(String),
    #[error(
        "[approvals] may_override: {kind} would let an operator's approval land on a protected branch a head no \
         independent reviewer approved (or one pushed after the review): on a merge it is part of the `{reviewed}` \
         invariant, which no override lifts. Leave {kind} out, or name the break-glass as a lift too: [invariants] \
         lift = [\"{reviewed}\"] (it gives up: {})",
        .reviewed.exposes()
    )]
    OverrideNeedsLift { kind: BlockerKind, reviewed: fleetgate_core::effect::Invariant },
    #[error("[[approvals.notify]] #{0}: kind {1:?} is not webhook, slack or ntfy")]
    NotifyKind(usize, String),
    #[error("[[approvals.notify]] #{0}: url must be http:// or https://")]
    NotifyUrlScheme(usize),
    #[error("[[approvals.notify]] #{0}: give exactly one of url, url_env, url_file")]
    NotifyUrlSource(usize),
    #[error("[[approvals.notify]] #{0}: give one of secret_env, secret_file")]
    NotifySecretSource(usize),
    #[error("[[approvals.notify]] #{0}: a signing secret is for kind = \"webhook\"")]
    NotifySecretKind(usize),
    #[error("[[approvals.notify]] #{0}: event {1:?} is not one of {events}", events = crate::NOTIFY_EVENTS.join(", "))]
    NotifyEvent(usize, String),

    // [[people]], approvers and counts; `at` names the table or key
    #[error(
        "{at}: {identity:?} is not an identity: write one of {} followed by a name (\"oidc:<subject>\" signed in \
         at the fleet's issuer, \"oauth:<principal claim>\" an OAuth token's calls, \"os:<user>\" the CLI's user, \
         \"principal:<name>\" a tokens-file or mapped principal, \"token:<name>\" an operator token)",
        fleetgate_core::person::REALMS.map(|r| format!("{r}:")).join(", ")
    )]
    NotAnIdentity { at: String, identity: String },
    #[error("{0}: a name is 1 to 64 printable characters without spaces")]
    PersonName(String),
    #[error("{0} is declared twice")]
    PersonTwice(String),
    #[error("{0} lists no identity")]
    PersonNoIdentity(String),
    #[error(
        "{at}: {id:?} can never be met: a subject, a claim's value and a principal's name are 1 to 128 printable \
         ASCII characters without spaces (what the gateways and the dashboard accept)"
    )]
    IdentityUnmet { at: String, id: String },
    #[error("{at}: {id} is a credential several people use, never one person (every token:, and [approvals] shared)")]
    IdentityShared { at: String, id: String },
    #[error("{at}: {id} is {owner:?}'s already: one identity is one person")]
    IdentityTaken { at: String, id: String, owner: String },
    #[error("{at} approvers: {approver:?} names no person of [[people]]")]
    ApproverNoPerson { at: String, approver: String },
    #[error(
        "{at} approvers: {approver:?} names no approver: write \"oidc:<subject>\" (signed in at the fleet's \
         issuer), \"os:<user>\" (the CLI's user), \"token:<name>\", \"group:<name>\" or \"person:<name>\" (of \
         [[people]])"
    )]
    ApproverUnknown { at: String, approver: String },
    #[error("{at} approvals_required = {required}: expected 1 to 10")]
    RequiredRange { at: String, required: u32 },
    #[error(
        "{at} approvals_required = {required} but the approvers named are {persons} person(s) ({approvers}): one \
         person through two channels is one approver and a shared credential is none, so the call could never pass"
    )]
    RequiredUnmet { at: String, required: u32, persons: usize, approvers: String },

    // [[rules]] and their `effect`
    #[error("a rule names a `tool` (a glob), or an `effect`, or both")]
    RuleNoTool,
    #[error("`tool` must not be empty")]
    RuleEmptyTool,
    #[error("role {role:?} is not a role of the roster (roles: {roles})")]
    RuleRole { role: String, roles: String },
    #[error("argument {0:?} is not a JSON pointer: write \"/name\" (and \"/a/0/b\" into objects and arrays)")]
    ArgPointer(String),
    #[error("argument {0:?} lists no value: a call could never match it")]
    ArgNoValue(String),
    #[error("argument {0:?} must be a list of values, \"present\" or \"absent\", not {1}")]
    ArgMatcher(String, toml::Value),
    #[error("argument {0:?}: {1} is not a finite number")]
    ArgNotFinite(String, f64),
    #[error("argument {0:?}: {1} is not a string, number or boolean")]
    ArgNotScalar(String, toml::Value),
    #[error("decision {0:?} is neither \"allow\" nor \"ask\"")]
    Decision(String),
    #[error("`approvers` and `approvals_required` are for a rule with decision = \"ask\"")]
    ApproversWithoutAsk,
    #[error("effect {0} lists nothing: a call could never match it")]
    EffectListsNothing(&'static str),
    #[error(
        "effect op {0:?} is not one of {known}",
        known = fleetgate_core::rules::Op::ALL.map(fleetgate_core::rules::Op::as_str).join(", ")
    )]
    EffectOp(String),
    #[error("effect branch {0:?} is not a branch name or glob")]
    EffectBranch(String),
    #[error("effect pr 0 is no PR")]
    EffectPrZero,
    #[error("effect names nothing: give op, branch, pr or protected")]
    EffectEmpty,

    // [workflow], [forge], [retention], [invariants]
    #[error("[workflow] lease_ttl_seconds must be 1 to {max}, got {0}", max = crate::workflow::MAX_LEASE_TTL_SECONDS)]
    LeaseTtl(i64),
    #[error("[workflow] forge_command must start with a program")]
    ForgeCommand,
    #[error("[workflow] default_branch must name a branch")]
    DefaultBranch,
    #[error("[workflow] {0} must not hold an empty pattern")]
    EmptyPattern(&'static str),
    #[error(
        "[forge] {0}: GitHub's closing keywords are fixed (close, closes, closed, fix, fixes, fixed, resolve, \
         resolves, resolved) and it has no reopening ones; the key is for a Gitea instance's app.ini lists: remove it"
    )]
    GithubKeywords(&'static str),
    #[error(
        "[forge] {0}: the instance's keywords are read by a forge dialect, and [fleet] forge names {named}",
        named = .1.as_ref().map_or_else(|| "none".to_owned(), |f| format!("{f:?}, which has none"))
    )]
    KeywordsWithoutDialect(&'static str, Option<String>),
    #[error("[forge] {0}")]
    Keywords(#[from] fleetgate_core::textref::KeywordError),
    #[error(transparent)]
    Retention(#[from] fleetgate_core::prune::AgeError),
    #[error(
        "[invariants] lift: {0:?} is not an invariant (known: {known})",
        known = fleetgate_core::effect::Invariant::ALL.iter().map(|i| i.as_str()).collect::<Vec<_>>().join(", ")
    )]
    NotAnInvariant(String),
    #[error("[invariants] lift: {0} lifts a forge profile's invariant, and [fleet] forge names none")]
    LiftWithoutForge(String),
}
