//! fleetgate-config: the fleet configuration (`fleet.toml`): which fleet is expected,
//! under which env prefix, bound to which repository, with its policy, workflow,
//! gateway, supervision and tracing settings. TOML from `--config FILE`, else the user's
//! config directory, else the built-in five-member `prgs` roster.
//!
//! A bad file is refused whole with the file, line and reason: nothing runs on
//! a half-read roster.
//!
//! It owns reading and checking the file, nothing that acts on it. May import core,
//! host (paths), supervise and gateway (their settings types); may not import the
//! control plane, the doctor, the dashboard, the binary or the test kit.

#![deny(missing_docs)]

use fleetgate_core::audit::ArgumentsMode;
use fleetgate_core::capability::{RolePolicy, ToolClass, ToolRules};
use fleetgate_core::env::EnvSnapshot;
use fleetgate_core::person::People;
use fleetgate_core::rules::{ArgMatch, EffectMatch, Rule, RuleSet};
use fleetgate_gateway::ConnectionLimits;
use fleetgate_supervise::{SupervisionConfig, SupervisionSettings};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;
use toml::Spanned;

pub use error::{Invalid, RosterError, RosterErrorKind, SecretUnset};
pub use fleetgate_core::runtime::{Binding, RosterMember as Member};
pub use workflow::WorkflowSettings;

mod error;
mod oauth;
pub mod otlp;
mod people;
pub mod reference;
pub mod template;
mod workflow;

/// The resolved fleet configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetConfig {
    /// Where it came from: a path, or `built-in`.
    pub source: String,
    /// The file it was loaded from, as given (`None`: built in, or parsed from text).
    pub path: Option<PathBuf>,
    /// Fleet name.
    pub name: String,
    /// Operator env keys this fleet owns.
    pub env_prefix: String,
    /// Prefix of the control tools.
    pub tool_prefix: String,
    /// Lease length for workers this fleet registers.
    pub heartbeat_ttl_seconds: f64,
    /// Extra command-line substrings that mark a fleet server.
    pub process_match: Vec<String>,
    /// Downstream keys recognised as pass-through (full names).
    pub pass_through_env: Vec<String>,
    /// Optional repository binding.
    pub binding: Option<Binding>,
    /// The expected roster, sorted by (namespace, profile).
    pub members: Vec<Member>,
    /// Restart, budget and quarantine policy for background loops and the downstream child.
    pub supervision: SupervisionSettings,
    /// `[roles.<role>]`: which tools each role may call (no table: every tool).
    pub roles: BTreeMap<String, RolePolicy>,
    /// `[tools]`: classification overrides.
    pub tools: ToolRules,
    /// `[http]`: the Streamable HTTP transport's principals and bounds.
    pub http: HttpSettings,
    /// `[fleet] forge`: a built-in rule profile for the downstream (`gitea-mcp`).
    pub forge: Option<String>,
    /// `[forge] close_keywords` / `reopen_keywords`: a Gitea instance's own keyword lists
    /// (its `app.ini`'s), which the dialect reads besides Gitea's defaults.
    pub forge_keywords: fleetgate_core::textref::Keywords,
    /// `[[rules]]`, then the forge profile's: argument-aware policy.
    pub rules: RuleSet,
    /// `[workflow]`: the pull-request workflow.
    pub workflow: WorkflowSettings,
    /// `[downstream] pass_env`: keys (or `NAME*` prefixes) outside `env_prefix` the
    /// downstream server is also given, beyond the basics and `pass_through_env`.
    pub downstream_pass_env: Vec<String>,
    /// `[downstream] sharing`: a downstream run per HTTP attachment (`session`, the
    /// default) or one every attachment shares (`gateway`).
    pub downstream_sharing: fleetgate_gateway::Sharing,
    /// `[tracing] otlp_endpoint`: the OTLP/HTTP base URL `serve` exports its spans to
    /// (checked; the `OTEL_EXPORTER_OTLP_*` variables win over it).
    pub otlp_endpoint: Option<String>,
    /// `[metrics]`: a stdio gateway's own `/metrics` listener.
    pub metrics: MetricsSettings,
    /// `[audit] arguments`: how much of a judged call's arguments the audit log keeps.
    pub audit_arguments: ArgumentsMode,
    /// `[approvals]`: how long a call a rule asks about waits, how long an approval holds.
    pub approvals: ApprovalSettings,
    /// `[[people]]`, `[approvals] shared` and the principal mapping's links: who each
    /// identity is, for every check that says "a person" (`fleetgate_core::person`).
    pub people: People,
    /// `[invariants] lift`: the forge profile's invariants the operator lifted, by name.
    pub invariant_lifts: Vec<fleetgate_core::effect::Invariant>,
    /// `[shadow] config`: a candidate roster every gateway judges live calls by too, never
    /// enforcing it (`fleetgate serve --shadow` wins).
    pub shadow_config: Option<PathBuf>,
    /// `[retention]`: how long each kind of history is kept, and how often `serve` and
    /// `dashboard` prune by themselves.
    pub retention: fleetgate_core::prune::Retention,
}

/// `[approvals]`: operator approval of one exact call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalSettings {
    /// How long a gateway holds a call that waits for an operator (seconds, 0 to 3600):
    /// then it is refused `approval_pending`, and the request stays open for a retry.
    pub wait_seconds: u64,
    /// How long after its answer an approval covers the identical call (seconds, 1 to
    /// 86400): once.
    pub ttl_seconds: i64,
    /// Refusals an operator may override, one exact call at a time: a refusal with one of
    /// these blockers records an approval request; once approved the identical call passes
    /// once. Never one of `fleetgate_core::approval::NEVER_OVERRIDDEN`.
    pub may_override: Vec<fleetgate_core::BlockerKind>,
    /// Who may answer a request no rule names approvers for (identities and `group:` names;
    /// empty: any operator).
    pub approvers: Vec<String>,
    /// How many distinct approvers must approve a request whose rule says nothing (1).
    pub required: u32,
    /// `[[approvals.notify]]`: where each request, answer, use, withdrawal and expiry is sent.
    pub notify: Vec<NotifyTarget>,
}

impl Default for ApprovalSettings {
    fn default() -> Self {
        Self {
            wait_seconds: 120,
            ttl_seconds: 600,
            may_override: Vec::new(),
            approvers: Vec::new(),
            required: 1,
            notify: Vec::new(),
        }
    }
}

/// One `[[approvals.notify]]` target. Its secrets (a signing key, a URL that is itself a
/// credential) come from the environment or a file, never the roster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotifyTarget {
    /// `webhook` (JSON, signed), `slack` (an incoming webhook), `ntfy` (a topic URL).
    pub kind: NotifyKind,
    /// Where it is sent.
    pub url: Secret,
    /// The webhook's signing key (`X-Fleetgate-Signature: sha256=…`), when set.
    pub secret: Option<Secret>,
    /// The events sent (`requested`, `answered`, `used`, `withdrawn`, `expired`).
    pub events: Vec<String>,
    /// The target's name in metrics and logs (`kind` and its place, unless given).
    pub name: String,
}

/// A notification target's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotifyKind {
    /// A JSON body with the event and the request as `approvals list --json` shows it.
    Webhook,
    /// A Slack-compatible incoming webhook (`{"text": …}`).
    Slack,
    /// An ntfy topic (a plain-text body, `Title` and `Tags` headers).
    Ntfy,
}

impl NotifyKind {
    /// The literal.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Webhook => "webhook",
            Self::Slack => "slack",
            Self::Ntfy => "ntfy",
        }
    }
}

/// A value read when it is used: given in the roster only when it is no secret (`url`), else
/// from an environment key or a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Secret {
    /// Written in the roster.
    Plain(String),
    /// The value of this environment key.
    Env(String),
    /// The contents of this file (trimmed).
    File(std::path::PathBuf),
}

impl Secret {
    /// The value now, or why there is none (the key or the file named, never a value).
    pub fn read(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<String, SecretUnset> {
        let value = match self {
            Self::Plain(v) => Some(v.clone()),
            Self::Env(key) => env(key),
            Self::File(path) => std::fs::read_to_string(path).ok().map(|s| s.trim().to_owned()),
        };
        value.filter(|v| !v.is_empty()).ok_or_else(|| match self {
            Self::Plain(_) => SecretUnset::Empty,
            Self::Env(key) => SecretUnset::Env(key.clone()),
            Self::File(path) => SecretUnset::File(path.clone()),
        })
    }
}

/// The events a target hears by default: every one.
pub const NOTIFY_EVENTS: [&str; 5] = ["requested", "answered", "used", "withdrawn", "expired"];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawApprovals {
    wait_seconds: Option<u64>,
    ttl_seconds: Option<i64>,
    #[serde(default)]
    may_override: Vec<String>,
    #[serde(default)]
    approvers: Vec<String>,
    approvals_required: Option<u32>,
    #[serde(default)]
    notify: Vec<RawNotify>,
    #[serde(default)]
    shared: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNotify {
    kind: String,
    url: Option<String>,
    url_env: Option<String>,
    url_file: Option<std::path::PathBuf>,
    secret_env: Option<String>,
    secret_file: Option<std::path::PathBuf>,
    events: Option<Vec<String>>,
    name: Option<String>,
}

impl RawNotify {
    fn resolve(self, i: usize) -> Result<NotifyTarget, Invalid> {
        let at = i + 1;
        let kind = match self.kind.as_str() {
            "webhook" => NotifyKind::Webhook,
            "slack" => NotifyKind::Slack,
            "ntfy" => NotifyKind::Ntfy,
            other => return Err(Invalid::NotifyKind(at, other.to_owned())),
        };
        let url = match (self.url, self.url_env, self.url_file) {
            (Some(u), None, None) => {
                if !(u.starts_with("https://") || u.starts_with("http://")) {
                    return Err(Invalid::NotifyUrlScheme(at));
                }
                Secret::Plain(u)
            }
            (None, Some(k), None) => Secret::Env(k),
            (None, None, Some(f)) => Secret::File(f),
            _ => return Err(Invalid::NotifyUrlSource(at)),
        };
        let secret = match (self.secret_env, self.secret_file) {
            (Some(k), None) => Some(Secret::Env(k)),
            (None, Some(f)) => Some(Secret::File(f)),
            (None, None) => None,
            _ => return Err(Invalid::NotifySecretSource(at)),
        };
        if secret.is_some() && kind != NotifyKind::Webhook {
            return Err(Invalid::NotifySecretKind(at));
        }
        let events = self.events.unwrap_or_else(|| NOTIFY_EVENTS.iter().map(|e| (*e).to_owned()).collect());
        if let Some(bad) = events.iter().find(|e| !NOTIFY_EVENTS.contains(&e.as_str())) {
            return Err(Invalid::NotifyEvent(at, bad.clone()));
        }
        let name = self.name.unwrap_or_else(|| format!("{}-{}", kind.as_str(), i + 1));
        Ok(NotifyTarget { kind, url, secret, events, name })
    }
}

/// `[metrics]`: where a stdio `fleetgate serve` serves `GET /metrics` (what
/// `--metrics-listen` / `--allow-remote` set on the command line).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetricsSettings {
    /// The address (`127.0.0.1:9464`; port 0 picks one).
    pub listen: Option<std::net::SocketAddr>,
    /// A non-loopback `listen` is allowed (then `FLEETGATE_METRICS_TOKEN` is required).
    pub allow_remote: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMetrics {
    listen: Option<String>,
    #[serde(default)]
    allow_remote: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAudit {
    #[serde(default)]
    arguments: ArgumentsMode,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTracing {
    otlp_endpoint: Option<String>,
}

/// `[http]`: principals and bounds of `fleetgate serve --transport http`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpSettings {
    /// The tokens file (`sha256-hex  client-name  [profile…]` per line), resolved against
    /// the config file's directory.
    pub tokens_file: Option<PathBuf>,
    /// Live attachments (sessions and stateless clients) at most; each runs a downstream.
    pub max_attachments: usize,
    /// Live attachments one principal may hold at most.
    pub max_attachments_per_principal: usize,
    /// Open connections at most, and how long a request head and a body may take.
    pub connections: ConnectionLimits,
    /// `[http.oauth]`: the authorization server whose access tokens are accepted.
    pub oauth: Option<fleetgate_gateway::OAuthSettings>,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            tokens_file: None,
            max_attachments: 64,
            max_attachments_per_principal: 16,
            connections: ConnectionLimits::default(),
            oauth: None,
        }
    }
}

/// The largest `[http] max_attachments` accepted: each attachment is a downstream process.
pub const MAX_ATTACHMENTS_LIMIT: usize = 4096;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    tokens_file: Option<PathBuf>,
    max_attachments: Option<usize>,
    max_attachments_per_principal: Option<usize>,
    max_connections: Option<usize>,
    header_timeout_seconds: Option<f64>,
    body_timeout_seconds: Option<f64>,
    oauth: Option<oauth::RawOAuth>,
}

/// The largest `[http] max_connections` accepted.
pub const MAX_CONNECTIONS_LIMIT: usize = 65536;
/// The longest `[http] header_timeout_seconds` / `body_timeout_seconds` accepted.
pub const MAX_READ_TIMEOUT_SECONDS: f64 = 600.0;

/// A `[http]` read timeout: more than 0, at most [`MAX_READ_TIMEOUT_SECONDS`].
fn read_timeout(key: &'static str, value: Option<f64>, default: Duration) -> Result<Duration, Invalid> {
    let Some(seconds) = value else { return Ok(default) };
    if !(seconds > 0.0 && seconds <= MAX_READ_TIMEOUT_SECONDS) {
        return Err(Invalid::ReadTimeout { key, seconds });
    }
    Ok(Duration::from_secs_f64(seconds))
}

impl RawHttp {
    /// The settings, a relative `tokens_file` taken from `dir` (the config file's own
    /// directory, as a path: never its display, which is lossy for a non-UTF-8 name).
    fn resolve(self, dir: Option<&Path>, profiles: &[&str]) -> Result<HttpSettings, Invalid> {
        let defaults = HttpSettings::default();
        let max = self.max_attachments.unwrap_or(defaults.max_attachments);
        if !(1..=MAX_ATTACHMENTS_LIMIT).contains(&max) {
            return Err(Invalid::MaxAttachments(max));
        }
        let per = self.max_attachments_per_principal.unwrap_or(defaults.max_attachments_per_principal.min(max));
        if !(1..=max).contains(&per) {
            return Err(Invalid::MaxPerPrincipal { max, got: per });
        }
        let base = dir.filter(|p| !p.as_os_str().is_empty());
        let tokens_file = self.tokens_file.map(|p| match base {
            Some(dir) if p.is_relative() => dir.join(p),
            _ => p,
        });
        let connections = ConnectionLimits {
            max_connections: self.max_connections.unwrap_or(defaults.connections.max_connections),
            header_timeout: read_timeout(
                "header_timeout_seconds",
                self.header_timeout_seconds,
                defaults.connections.header_timeout,
            )?,
            body_timeout: read_timeout(
                "body_timeout_seconds",
                self.body_timeout_seconds,
                defaults.connections.body_timeout,
            )?,
        };
        if !(1..=MAX_CONNECTIONS_LIMIT).contains(&connections.max_connections) {
            return Err(Invalid::MaxConnections(connections.max_connections));
        }
        let oauth = self.oauth.map(|o| o.resolve(profiles)).transpose()?;
        Ok(HttpSettings { tokens_file, max_attachments: max, max_attachments_per_principal: per, connections, oauth })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    fleet: Option<RawFleet>,
    binding: Option<Binding>,
    #[serde(default)]
    members: Vec<RawMember>,
    supervision: Option<SupervisionConfig>,
    #[serde(default)]
    roles: BTreeMap<String, RolePolicy>,
    #[serde(default)]
    tools: ToolRules,
    http: Option<RawHttp>,
    #[serde(default)]
    rules: Vec<Spanned<RawRule>>,
    workflow: Option<workflow::RawWorkflow>,
    downstream: Option<RawDownstream>,
    tracing: Option<RawTracing>,
    metrics: Option<RawMetrics>,
    audit: Option<RawAudit>,
    approvals: Option<RawApprovals>,
    #[serde(default)]
    people: Vec<people::RawPerson>,
    invariants: Option<RawInvariants>,
    shadow: Option<RawShadow>,
    retention: Option<RawRetention>,
    forge: Option<RawForge>,
}

/// `[forge]` as written: the instance's own grammar.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawForge {
    close_keywords: Option<Vec<String>>,
    reopen_keywords: Option<Vec<String>>,
}

impl RawForge {
    /// The keyword lists, checked against the dialect `[fleet] forge` names: only Gitea's
    /// are the instance's to configure (GitHub's closing keywords are fixed).
    fn resolve(self, forge: Option<&str>) -> Result<fleetgate_core::textref::Keywords, Invalid> {
        use fleetgate_core::dialect::{gitea, github};
        let set = [("close_keywords", &self.close_keywords), ("reopen_keywords", &self.reopen_keywords)];
        let Some((key, _)) = set.iter().find(|(_, v)| v.is_some()) else {
            return Ok(fleetgate_core::textref::Keywords::NONE);
        };
        match forge {
            Some(gitea::NAME) => {}
            Some(github::NAME) => return Err(Invalid::GithubKeywords(key)),
            _ => return Err(Invalid::KeywordsWithoutDialect(key, forge.map(str::to_owned))),
        }
        fleetgate_core::textref::Keywords::new(
            self.close_keywords.as_deref().unwrap_or_default(),
            self.reopen_keywords.as_deref().unwrap_or_default(),
        )
        .map_err(Invalid::Keywords)
    }
}

/// `[retention]` as written: ages (`90d`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRetention {
    audit: Option<String>,
    approvals: Option<String>,
    workflow: Option<String>,
    observations: Option<String>,
    workers: Option<String>,
    runtimes: Option<String>,
    every: Option<String>,
}

impl RawRetention {
    fn resolve(self) -> Result<fleetgate_core::prune::Retention, Invalid> {
        use fleetgate_core::prune::{MIN_EVERY_SECONDS, MIN_HISTORY_SECONDS, parse_age_at_least};
        let age = |key: &str, v: Option<String>, floor: i64| {
            v.map(|t| parse_age_at_least(&format!("[retention] {key}"), &t, floor))
                .transpose()
                .map_err(Invalid::Retention)
        };
        Ok(fleetgate_core::prune::Retention {
            audit: age("audit", self.audit, MIN_HISTORY_SECONDS)?,
            approvals: age("approvals", self.approvals, MIN_HISTORY_SECONDS)?,
            workflow: age("workflow", self.workflow, MIN_HISTORY_SECONDS)?,
            observations: age("observations", self.observations, MIN_HISTORY_SECONDS)?,
            workers: age("workers", self.workers, 0)?,
            runtimes: age("runtimes", self.runtimes, 0)?,
            every: age("every", self.every, MIN_EVERY_SECONDS)?,
        })
    }
}

/// `[shadow]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShadow {
    config: PathBuf,
}

/// `[invariants]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInvariants {
    #[serde(default)]
    lift: Vec<String>,
}

/// `[downstream]`: what the downstream server is given, and how many runs of it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDownstream {
    #[serde(default)]
    pass_env: Vec<String>,
    sharing: Option<String>,
}

/// One `[[rules]]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    /// A glob; unset with `effect`: every tool.
    tool: Option<String>,
    #[serde(default)]
    args: BTreeMap<String, toml::Value>,
    /// What the call does (one operation of its judged effect).
    effect: Option<RawEffect>,
    roles: Vec<String>,
    class: Option<ToolClass>,
    action: Option<String>,
    /// `"allow"` (the default: the roles may make the call) or `"ask"` (a permitted role's
    /// call waits for an operator's approval of that exact call).
    decision: Option<String>,
    /// With `decision = "ask"`: who may answer (identities and `group:` names).
    #[serde(default)]
    approvers: Vec<String>,
    /// With `decision = "ask"`: how many distinct approvers must approve.
    approvals_required: Option<u32>,
}

impl RawRule {
    /// The rule, checked against the roster's roles; `origin` is `FILE:LINE`.
    fn resolve(self, origin: String, roles: &BTreeSet<&str>, people: &People) -> Result<Rule, Invalid> {
        let effect = self.effect.map(RawEffect::resolve).transpose()?;
        let tool = match (self.tool, &effect) {
            (Some(tool), _) => tool,
            (None, Some(_)) => "*".to_owned(),
            (None, None) => return Err(Invalid::RuleNoTool),
        };
        if tool.trim().is_empty() {
            return Err(Invalid::RuleEmptyTool);
        }
        if let Some(unknown) = self.roles.iter().find(|r| *r != "*" && !roles.contains(r.as_str())) {
            return Err(Invalid::RuleRole { role: unknown.clone(), roles: join(roles) });
        }
        let mut args = Vec::new();
        for (pointer, value) in self.args {
            if !pointer.starts_with('/') || pointer.contains("~") && !valid_escapes(&pointer) {
                return Err(Invalid::ArgPointer(pointer));
            }
            let matcher = match value {
                toml::Value::String(s) if s == "present" => ArgMatch::Present,
                toml::Value::String(s) if s == "absent" => ArgMatch::Absent,
                toml::Value::Array(values) if values.is_empty() => {
                    return Err(Invalid::ArgNoValue(pointer));
                }
                toml::Value::Array(values) => {
                    ArgMatch::OneOf(values.into_iter().map(|v| scalar(&pointer, v)).collect::<Result<Vec<_>, _>>()?)
                }
                other => return Err(Invalid::ArgMatcher(pointer, other)),
            };
            args.push((pointer, matcher));
        }
        let ask = match self.decision.as_deref() {
            None | Some("allow") => false,
            Some("ask") => true,
            Some(other) => return Err(Invalid::Decision(other.to_owned())),
        };
        if !ask && (!self.approvers.is_empty() || self.approvals_required.is_some()) {
            return Err(Invalid::ApproversWithoutAsk);
        }
        people::check_approvers("the rule's", &self.approvers, people)?;
        let required = self.approvals_required.unwrap_or(0);
        if let Some(n) = self.approvals_required {
            people::check_required("the rule's", n, &self.approvers, people)?;
        }
        Ok(Rule {
            origin,
            tool,
            args,
            effect,
            roles: self.roles,
            class: self.class,
            action: self.action,
            ask,
            approvers: self.approvers,
            required,
        })
    }
}

/// One of, or a list of.
#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T> OneOrMany<T> {
    fn into_vec(self) -> Vec<T> {
        match self {
            Self::One(one) => vec![one],
            Self::Many(many) => many,
        }
    }
}

/// A `[[rules]]` entry's `effect` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEffect {
    op: Option<OneOrMany<String>>,
    branch: Option<OneOrMany<String>>,
    pr: Option<OneOrMany<u64>>,
    protected: Option<bool>,
}

impl RawEffect {
    fn resolve(self) -> Result<EffectMatch, Invalid> {
        use fleetgate_core::rules::Op;
        let listed = |key: &'static str, n: usize| if n == 0 { Err(Invalid::EffectListsNothing(key)) } else { Ok(()) };
        let mut m = EffectMatch { protected: self.protected, ..EffectMatch::default() };
        if let Some(ops) = self.op.map(OneOrMany::into_vec) {
            listed("op", ops.len())?;
            for op in ops {
                m.op.push(Op::parse(&op).ok_or(Invalid::EffectOp(op))?);
            }
        }
        if let Some(branches) = self.branch.map(OneOrMany::into_vec) {
            listed("branch", branches.len())?;
            if let Some(bad) = branches.iter().find(|b| b.trim().is_empty() || b.contains(char::is_control)) {
                return Err(Invalid::EffectBranch(bad.clone()));
            }
            m.branch = branches;
        }
        if let Some(prs) = self.pr.map(OneOrMany::into_vec) {
            listed("pr", prs.len())?;
            if prs.contains(&0) {
                return Err(Invalid::EffectPrZero);
            }
            m.pr = prs;
        }
        if m == EffectMatch::default() {
            return Err(Invalid::EffectEmpty);
        }
        Ok(m)
    }
}

/// The `[[members]]` tables, each checked (fields present and bounded, namespace and profile
/// unique), with the file and line of a bad one.
fn roster_members(text: &str, source: &str, raw: Vec<RawMember>) -> Result<Vec<Member>, RosterError> {
    let mut seen = BTreeSet::new();
    let mut members = Vec::with_capacity(raw.len());
    for m in raw {
        let line = line_of(text, m.profile.span().start);
        let profile = m.profile.into_inner();
        for (field, value) in [("namespace", &m.namespace), ("profile", &profile), ("role", &m.role)] {
            if value.trim().is_empty() {
                return Err(RosterError::invalid(format!("{source}:{line}: member {field} must not be empty")));
            }
        }
        for (field, value) in [("namespace", &m.namespace), ("profile", &profile), ("role", &m.role)] {
            fleetgate_core::worker::check_field(field, value)
                .map_err(|why| RosterError::invalid(format!("{source}:{line}: member {why}")))?;
        }
        if members.iter().any(|x: &Member| x.namespace == m.namespace) {
            return Err(RosterError::invalid(format!(
                "{source}:{line}: duplicate namespace {:?} in the roster",
                m.namespace
            )));
        }
        if !seen.insert(profile.clone()) {
            return Err(RosterError::invalid(format!("{source}:{line}: duplicate profile {profile:?} in the roster")));
        }
        let declared = m.replicas.unwrap_or(1);
        let Some(replicas) = u32::try_from(declared).ok().filter(|n| (1..=MAX_REPLICAS).contains(n)) else {
            return Err(RosterError::invalid(format!(
                "{source}:{line}: member {profile:?} replicas = {declared}: expected 1 to {MAX_REPLICAS}"
            )));
        };
        members.push(Member { namespace: m.namespace, profile, role: m.role, replicas });
    }
    Ok(members)
}

fn valid_escapes(pointer: &str) -> bool {
    pointer.match_indices('~').all(|(i, _)| matches!(pointer.as_bytes().get(i + 1), Some(b'0' | b'1')))
}

fn scalar(pointer: &str, value: toml::Value) -> Result<serde_json::Value, Invalid> {
    Ok(match value {
        toml::Value::String(s) => serde_json::Value::String(s),
        toml::Value::Integer(i) => serde_json::Value::from(i),
        toml::Value::Boolean(b) => serde_json::Value::Bool(b),
        toml::Value::Float(f) => serde_json::Number::from_f64(f)
            .map(serde_json::Value::Number)
            .ok_or_else(|| Invalid::ArgNotFinite(pointer.to_owned(), f))?,
        other => return Err(Invalid::ArgNotScalar(pointer.to_owned(), other)),
    })
}

fn join(roles: &BTreeSet<&str>) -> String {
    roles.iter().copied().collect::<Vec<_>>().join(", ")
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFleet {
    name: Option<String>,
    env_prefix: Option<String>,
    tool_prefix: Option<String>,
    heartbeat_ttl_seconds: Option<f64>,
    process_match: Option<Vec<String>>,
    pass_through_env: Option<Vec<String>>,
    forge: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMember {
    namespace: String,
    profile: Spanned<String>,
    role: String,
    // Signed, so a negative count is refused with the key's own message.
    replicas: Option<i64>,
}

/// The most replicas a member may declare.
pub const MAX_REPLICAS: u32 = 64;

/// The default `process_match`: the seed fleet's server script.
pub const DEFAULT_PROCESS_MATCH: &[&str] = &["mcp_server.py"];

/// The five roles of the default roster, in order.
pub const DEFAULT_ROLES: &[&str] = &["author", "reviewer", "merger", "controller", "reconciler"];

impl FleetConfig {
    /// The built-in five-member `prgs` fleet.
    pub fn builtin() -> Self {
        let mut members: Vec<Member> = DEFAULT_ROLES
            .iter()
            .map(|role| Member {
                namespace: format!("gitea-{role}"),
                profile: format!("prgs-{role}"),
                role: (*role).to_owned(),
                replicas: 1,
            })
            .collect();
        members.sort();
        Self {
            source: "built-in".into(),
            path: None,
            name: "prgs".into(),
            env_prefix: "GITEA_".into(),
            tool_prefix: "gitea_".into(),
            heartbeat_ttl_seconds: 900.0,
            process_match: DEFAULT_PROCESS_MATCH.iter().map(|s| (*s).to_owned()).collect(),
            pass_through_env: Vec::new(),
            binding: None,
            members,
            supervision: SupervisionSettings::default(),
            roles: BTreeMap::new(),
            tools: ToolRules::default(),
            http: HttpSettings::default(),
            forge: None,
            forge_keywords: fleetgate_core::textref::Keywords::NONE,
            rules: RuleSet::default(),
            workflow: WorkflowSettings::default(),
            downstream_pass_env: Vec::new(),
            downstream_sharing: fleetgate_gateway::Sharing::Session,
            otlp_endpoint: None,
            metrics: MetricsSettings::default(),
            audit_arguments: ArgumentsMode::Full,
            approvals: ApprovalSettings::default(),
            people: People::default(),
            invariant_lifts: Vec::new(),
            shadow_config: None,
            retention: fleetgate_core::prune::Retention::default(),
        }
    }

    /// Parse a configuration file's text; `source` names it in errors, and a relative
    /// path in it is taken from `source`'s directory.
    pub fn parse(text: &str, source: &str) -> Result<Self, RosterError> {
        Self::parse_in(text, source, Path::new(source).parent())
    }

    /// Parse a configuration file's text; `source` names it in errors, `dir` is where
    /// a relative path in it is taken from.
    fn parse_in(text: &str, source: &str, dir: Option<&Path>) -> Result<Self, RosterError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| line_of(text, s.start));
            let msg = e.message().trim().to_owned();
            RosterError::new(
                RosterErrorKind::Syntax,
                match line {
                    Some(l) => format!("{source}:{l}: {msg}"),
                    None => format!("{source}: {msg}"),
                },
            )
        })?;
        let builtin = Self::builtin();
        let fleet = raw.fleet;
        let get = |f: fn(&RawFleet) -> Option<String>| fleet.as_ref().and_then(f);
        let err = |why: Invalid| RosterError::invalid(format!("{source}: {why}"));
        let (env_prefix, ttl, pass_through_env) = fleet_keys(fleet.as_ref(), &builtin).map_err(err)?;
        let (downstream_pass_env, downstream_sharing) = downstream(raw.downstream, &env_prefix).map_err(err)?;
        let process_match = fleet.as_ref().and_then(|f| f.process_match.clone()).unwrap_or(builtin.process_match);
        if process_match.iter().any(|m| m.trim().is_empty()) {
            return Err(err(Invalid::ProcessMatchEmpty));
        }
        if raw.members.is_empty() {
            return Err(err(Invalid::RosterEmpty));
        }
        let mut members = roster_members(text, source, raw.members)?;
        members.sort();
        let supervision = raw.supervision.unwrap_or_default().validate().map_err(|e| err(e.into()))?;
        if let Some(unknown) = raw.roles.keys().find(|r| !members.iter().any(|m| &m.role == *r)) {
            return Err(err(Invalid::RoleUnknown(unknown.clone())));
        }
        let http = match raw.http {
            Some(http) => {
                let profiles: Vec<&str> = members.iter().map(|m| m.profile.as_str()).collect();
                http.resolve(dir, &profiles).map_err(err)?
            }
            None => HttpSettings::default(),
        };
        let forge = get(|f| f.forge.clone());
        let links = http.oauth.iter().flat_map(|o| &o.principals);
        let links = links.filter_map(|p| Some((p.subject.clone(), p.name.clone()?))).collect();
        let shared = raw.approvals.as_ref().map(|a| a.shared.clone()).unwrap_or_default();
        let people = people::resolve(raw.people, shared, links).map_err(err)?;
        let rules = rules(text, source, raw.rules, &members, forge.as_deref(), &people)?;
        let forge_keywords = match raw.forge {
            Some(f) => f.resolve(forge.as_deref()).map_err(err)?,
            None => fleetgate_core::textref::Keywords::NONE,
        };
        let remote = raw.binding.as_ref().map(|b| b.remote.as_str());
        let workflow = workflow::RawWorkflow::resolve(raw.workflow, remote).map_err(err)?;
        let otlp_endpoint = raw.tracing.and_then(|t| t.otlp_endpoint);
        if let Some(url) = &otlp_endpoint {
            crate::otlp::check_endpoint("[tracing] otlp_endpoint", url, true).map_err(|e| err(e.into()))?;
        }
        let approvals = RawApprovals::resolve(raw.approvals, &people).map_err(err)?;
        let invariant_lifts = lifts(raw.invariants, forge.as_deref(), &approvals.may_override).map_err(err)?;
        let metrics = raw.metrics.map(RawMetrics::resolve).transpose().map_err(err)?.unwrap_or_default();
        Ok(Self {
            otlp_endpoint,
            metrics,
            audit_arguments: raw.audit.map(|a| a.arguments).unwrap_or_default(),
            approvals,
            people,
            invariant_lifts,
            shadow_config: raw.shadow.map(|s| s.config),
            retention: raw.retention.map(RawRetention::resolve).transpose().map_err(err)?.unwrap_or_default(),
            downstream_pass_env,
            downstream_sharing,
            workflow,
            http,
            forge,
            forge_keywords,
            rules,
            roles: raw.roles,
            tools: raw.tools,
            supervision,
            source: source.to_owned(),
            path: None,
            name: get(|f| f.name.clone()).unwrap_or(builtin.name),
            tool_prefix: get(|f| f.tool_prefix.clone()).unwrap_or_else(|| "fleet_".into()),
            env_prefix,
            heartbeat_ttl_seconds: ttl,
            process_match,
            pass_through_env,
            binding: raw.binding,
            members,
        })
    }

    /// Load `explicit`, else the user's config file if it exists, else the
    /// built-in roster.
    pub fn load(explicit: Option<&Path>, env: &EnvSnapshot) -> Result<Self, RosterError> {
        let path: PathBuf = match explicit {
            Some(p) => p.to_owned(),
            None => match fleetgate_host::paths::default_config_path(env) {
                Some(p) if p.is_file() => p,
                _ => return Ok(Self::builtin()),
            },
        };
        // The path is used as given (an OsString end to end); only messages show it lossily.
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(&path)
            .map_err(|e| RosterError::new(RosterErrorKind::Unreadable, format!("cannot read config {shown}: {e}")))?;
        let config = Self::parse_in(&text, &shown, path.parent())?;
        Ok(Self { path: Some(path), ..config })
    }

    /// The digest of what decides a call's role policy here — the forge profile, the role
    /// globs and the rules, in order — as the audit records it with each judged call.
    pub fn rules_digest(&self) -> String {
        let mut decides = serde_json::json!({
            "forge": self.forge,
            "roles": self.roles,
            "rules": self.rules.rules(),
        });
        // Named only when set, so a roster without them keeps its digest.
        if !self.forge_keywords.is_empty() {
            decides["keywords"] =
                serde_json::json!({ "close": self.forge_keywords.close(), "reopen": self.forge_keywords.reopen() });
        }
        let lifted = self.lifted();
        if !lifted.is_empty() {
            decides["lifted"] = serde_json::json!(lifted);
        }
        fleetgate_core::audit::rules_digest(&decides)
    }

    /// The invariants this roster lifts: `[invariants] lift`, and `independent-review` when
    /// `[workflow] independent_review = "off"` (an invariant lift like any other, shown as
    /// one everywhere the policy is shown).
    pub fn lifted(&self) -> Vec<fleetgate_core::effect::Invariant> {
        let mut lifted = self.invariant_lifts.clone();
        let off = self.workflow.independent_review == fleetgate_core::workflow::Independence::Off;
        if off && !lifted.contains(&fleetgate_core::effect::Invariant::IndependentReview) {
            lifted.push(fleetgate_core::effect::Invariant::IndependentReview);
        }
        lifted.sort();
        lifted
    }

    /// The forge dialect `[fleet] forge` names (checked at load: a known one).
    /// A Gitea dialect reads the instance's own keywords (`[forge]`) besides the defaults.
    pub fn dialect(&self) -> Option<&'static dyn fleetgate_core::dialect::Dialect> {
        match self.forge.as_deref() {
            Some(fleetgate_core::dialect::gitea::NAME) if !self.forge_keywords.is_empty() => {
                Some(fleetgate_core::dialect::gitea::with_keywords(&self.forge_keywords))
            }
            name => name.and_then(fleetgate_core::dialect::by_name),
        }
    }

    /// The role policy of `role` (open when the config has no table for it).
    pub fn role_policy(&self, role: &str) -> RolePolicy {
        self.roles.get(role).cloned().unwrap_or_default()
    }

    /// What a process this fleet starts (a gateway's downstream, the CLI's forge command)
    /// may see of `env`: [`fleetgate_core::env::downstream_env`] under this roster's lists.
    pub fn downstream_env<'a>(&self, env: &'a EnvSnapshot) -> Vec<(&'a str, &'a str)> {
        fleetgate_core::env::downstream_env(env, &self.env_prefix, &self.pass_through_env, &self.downstream_pass_env)
    }

    /// The member with this profile.
    pub fn member(&self, profile: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.profile == profile)
    }
}

/// The operator's `[[rules]]`, each checked (roles, pointers, values) and the set checked for
/// rules that can never decide, then the forge profile's rules after them.
fn rules(
    text: &str,
    source: &str,
    raw: Vec<Spanned<RawRule>>,
    members: &[Member],
    forge: Option<&str>,
    people: &People,
) -> Result<RuleSet, RosterError> {
    let roles: BTreeSet<&str> = members.iter().map(|m| m.role.as_str()).collect();
    let mut list = Vec::with_capacity(raw.len());
    for spanned in raw {
        let origin = format!("{source}:{}", line_of(text, spanned.span().start));
        let rule = spanned
            .into_inner()
            .resolve(origin.clone(), &roles, people)
            .map_err(|why| RosterError::invalid(format!("{origin}: [[rules]]: {why}")))?;
        if rule.effect.is_some() && forge.is_none() {
            return Err(RosterError::invalid(format!(
                "{origin}: [[rules]]: `effect` is judged on what a forge dialect states a call does, and [fleet] \
                 forge names none"
            )));
        }
        list.push(rule);
    }
    let own = list.len();
    if let Some(name) = forge {
        let dialect = fleetgate_core::dialect::by_name(name).ok_or_else(|| {
            RosterError::invalid(format!(
                "{source}: fleet.forge {name:?} is not a known forge dialect (known: {})",
                fleetgate_core::dialect::NAMES.join(", ")
            ))
        })?;
        list.extend(dialect.rules());
    }
    let set = RuleSet::new(list);
    set.check(own).map_err(|e| RosterError::invalid(format!("{e} ([[rules]])")))?;
    Ok(set)
}

/// `[fleet]`'s env prefix, heartbeat TTL and pass-through keys, checked.
fn fleet_keys(fleet: Option<&RawFleet>, builtin: &FleetConfig) -> Result<(String, f64, Vec<String>), Invalid> {
    let env_prefix = fleet.and_then(|f| f.env_prefix.clone()).unwrap_or_else(|| builtin.env_prefix.clone());
    let ttl = fleet.and_then(|f| f.heartbeat_ttl_seconds).unwrap_or(builtin.heartbeat_ttl_seconds);
    if env_prefix.is_empty() || !env_prefix.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_') {
        return Err(Invalid::EnvPrefix(env_prefix));
    }
    if !fleetgate_core::worker::TTL_RANGE_SECONDS.contains(&ttl) {
        return Err(Invalid::HeartbeatTtl(ttl));
    }
    let pass_through_env = fleet.and_then(|f| f.pass_through_env.clone()).unwrap_or_default();
    if let Some(bad) = pass_through_env.iter().find(|k| !k.starts_with(&env_prefix)) {
        return Err(Invalid::PassThroughEnv { key: bad.clone(), prefix: env_prefix });
    }
    Ok((env_prefix, ttl, pass_through_env))
}

/// `[downstream]`: the keys passed (each under the env prefix) and the sharing.
fn downstream(
    raw: Option<RawDownstream>,
    env_prefix: &str,
) -> Result<(Vec<String>, fleetgate_gateway::Sharing), Invalid> {
    let (pass_env, sharing) = raw.map_or((Vec::new(), None), |d| (d.pass_env, d.sharing));
    let sharing = match sharing {
        None => fleetgate_gateway::Sharing::Session,
        Some(literal) => fleetgate_gateway::Sharing::parse(&literal).ok_or(Invalid::Sharing(literal))?,
    };
    for pattern in &pass_env {
        fleetgate_core::env::check_pass_env(pattern, env_prefix).map_err(Invalid::PassEnv)?;
    }
    Ok((pass_env, sharing))
}

impl RawApprovals {
    /// `[approvals]`, its approvers and counts checked against `people`.
    fn resolve(raw: Option<Self>, people: &People) -> Result<ApprovalSettings, Invalid> {
        let d = ApprovalSettings::default();
        let raw = raw.unwrap_or(RawApprovals {
            wait_seconds: None,
            ttl_seconds: None,
            may_override: Vec::new(),
            approvers: Vec::new(),
            approvals_required: None,
            notify: Vec::new(),
            shared: Vec::new(),
        });
        let wait_seconds = raw.wait_seconds.unwrap_or(d.wait_seconds);
        let ttl_seconds = raw.ttl_seconds.unwrap_or(d.ttl_seconds);
        if wait_seconds > 3600 {
            return Err(Invalid::WaitSeconds(wait_seconds));
        }
        if !(1..=86_400).contains(&ttl_seconds) {
            return Err(Invalid::TtlSeconds(ttl_seconds));
        }
        let mut may_override = Vec::new();
        for literal in &raw.may_override {
            let kind =
                fleetgate_core::BlockerKind::parse(literal).ok_or_else(|| Invalid::NotABlocker(literal.clone()))?;
            if fleetgate_core::approval::NEVER_OVERRIDDEN.contains(&kind) {
                return Err(Invalid::NeverOverridden(literal.clone()));
            }
            may_override.push(kind);
        }
        people::check_approvers("[approvals]", &raw.approvers, people)?;
        let required = raw.approvals_required.unwrap_or(1);
        people::check_required("[approvals]", required, &raw.approvers, people)?;
        let mut notify = Vec::new();
        for (i, target) in raw.notify.into_iter().enumerate() {
            notify.push(target.resolve(i)?);
        }
        Ok(ApprovalSettings { wait_seconds, ttl_seconds, may_override, approvers: raw.approvers, required, notify })
    }
}

/// `[invariants] lift`, checked against the forge and against `may_override`.
fn lifts(
    raw: Option<RawInvariants>,
    forge: Option<&str>,
    may_override: &[fleetgate_core::BlockerKind],
) -> Result<Vec<fleetgate_core::effect::Invariant>, Invalid> {
    let mut invariant_lifts = Vec::new();
    for name in raw.map(|i| i.lift).unwrap_or_default() {
        let Some(invariant) = fleetgate_core::effect::Invariant::parse(&name) else {
            return Err(Invalid::NotAnInvariant(name));
        };
        if forge.is_none() {
            return Err(Invalid::LiftWithoutForge(name));
        }
        if !invariant_lifts.contains(&invariant) {
            invariant_lifts.push(invariant);
        }
    }
    // On a merge onto a protected branch these are the `reviewed-merge` invariant's: an
    // override of them is a break-glass the roster names as a lift, never a quiet second path.
    let reviewed = fleetgate_core::effect::Invariant::ReviewedMerge;
    for kind in [fleetgate_core::BlockerKind::ApprovalRequired, fleetgate_core::BlockerKind::StaleHead] {
        if may_override.contains(&kind) && !invariant_lifts.contains(&reviewed) {
            return Err(Invalid::OverrideNeedsLift { kind, reviewed });
        }
    }
    Ok(invariant_lifts)
}

impl RawMetrics {
    fn resolve(self) -> Result<MetricsSettings, Invalid> {
        let listen = match self.listen {
            None => None,
            Some(a) => Some(a.parse().map_err(|_| Invalid::MetricsListen(a))?),
        };
        Ok(MetricsSettings { listen, allow_remote: self.allow_remote })
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].bytes().filter(|b| *b == b'\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[fleet]
name = "prgs"
env_prefix = "GITEA_"
tool_prefix = "gitea_"
heartbeat_ttl_seconds = 900
process_match = ["mcp_server.py"]

[binding]
remote = "prgs"
org = "Scaled-Tech-Consulting"
repo = "Gitea-Tools"

[[members]]
namespace = "gitea-author"
profile = "prgs-author"
role = "author"

[[members]]
namespace = "gitea-reviewer"
profile = "prgs-reviewer"
role = "reviewer"
"#;

    #[test]
    fn builtin_is_the_five_member_prgs_fleet() {
        let c = FleetConfig::builtin();
        assert_eq!(c.members.len(), 5);
        assert!(
            c.member("prgs-reconciler").is_some_and(|m| m.namespace == "gitea-reconciler" && m.role == "reconciler")
        );
        assert_eq!((c.env_prefix.as_str(), c.tool_prefix.as_str()), ("GITEA_", "gitea_"));
    }

    #[test]
    fn approvals_and_asking_rules_are_read_and_checked() {
        let c = FleetConfig::parse(GOOD, "t").unwrap();
        assert_eq!(
            c.approvals,
            ApprovalSettings {
                wait_seconds: 120,
                ttl_seconds: 600,
                may_override: vec![],
                ..ApprovalSettings::default()
            }
        );
        let text = format!(
            "{GOOD}\n[approvals]\nwait_seconds = 5\nttl_seconds = 60\n\n[[rules]]\ntool = \"pull_request_write\"\n\
             args = {{ \"/method\" = [\"merge\"] }}\nroles = [\"reviewer\"]\ndecision = \"ask\"\n"
        );
        let c = FleetConfig::parse(&text, "t").unwrap();
        assert_eq!(
            c.approvals,
            ApprovalSettings { wait_seconds: 5, ttl_seconds: 60, may_override: vec![], ..ApprovalSettings::default() }
        );
        let over =
            format!("{GOOD}\n[approvals]\nmay_override = [\"fleet_inventory_blocked\", \"role_not_permitted\"]\n");
        let kinds = FleetConfig::parse(&over, "t").unwrap().approvals.may_override;
        assert_eq!(
            kinds,
            [fleetgate_core::BlockerKind::FleetInventoryBlocked, fleetgate_core::BlockerKind::RoleNotPermitted]
        );
        // The break-glass: named as a lift, an override of the merge's approval loads.
        let glass = format!(
            "{}\n[approvals]\nmay_override = [\"approval_required\", \"stale_head\"]\n\n[invariants]\nlift = \
             [\"reviewed-merge\"]\n",
            GOOD.replace("[fleet]", "[fleet]\nforge = \"gitea-mcp\"")
        );
        let glass = FleetConfig::parse(&glass, "t").unwrap();
        assert_eq!(glass.approvals.may_override.len(), 2);
        assert!(glass.lifted().contains(&fleetgate_core::effect::Invariant::ReviewedMerge));
        assert!(c.rules.rules()[0].ask);
        let plain = FleetConfig::parse(GOOD, "t").unwrap();
        assert_ne!(c.rules_digest(), plain.rules_digest());
        for (bad, why) in [
            ("[approvals]\nwait_seconds = 4000", "expected 0 to 3600"),
            ("[approvals]\nttl_seconds = 0", "expected 1 to 86400"),
            ("[approvals]\nmaybe = 1", "unknown field `maybe`"),
            ("[approvals]\nmay_override = [\"worker_fenced\"]", "worker_fenced is never overridden"),
            ("[approvals]\nmay_override = [\"protected_branch\"]", "protected_branch is never overridden"),
            ("[approvals]\nmay_override = [\"sunny\"]", "\"sunny\" is not a blocker"),
            (
                "[approvals]\nmay_override = [\"approval_required\"]",
                "approval_required would let an operator's approval land on a protected branch",
            ),
            ("[approvals]\nmay_override = [\"stale_head\"]", "lift = [\"reviewed-merge\"] (it gives up: "),
            ("[[rules]]\ntool = \"t\"\nroles = [\"author\"]\ndecision = \"perhaps\"", "neither \"allow\" nor \"ask\""),
            (
                "[[rules]]\ntool = \"t\"\nroles = [\"author\"]\napprovers = [\"os:a\"]",
                "for a rule with decision = \"ask\"",
            ),
            (
                "[[rules]]\ntool = \"t\"\nroles = [\"author\"]\ndecision = \"ask\"\napprovers = [\"alice\"]",
                "names no approver",
            ),
            (
                "[[rules]]\ntool = \"t\"\nroles = [\"author\"]\ndecision = \"ask\"\napprovers = [\"os:a\"]\napprovals_required = 2",
                "could never pass",
            ),
            ("[approvals]\napprovals_required = 0", "expected 1 to 10"),
            ("[[approvals.notify]]\nkind = \"mail\"\nurl = \"https://x\"", "not webhook, slack or ntfy"),
            ("[[approvals.notify]]\nkind = \"webhook\"", "exactly one of url, url_env, url_file"),
            ("[[approvals.notify]]\nkind = \"slack\"\nurl_env = \"U\"\nsecret_env = \"S\"", "for kind = \"webhook\""),
            ("[[approvals.notify]]\nkind = \"ntfy\"\nurl = \"https://n/t\"\nevents = [\"all\"]", "is not one of"),
            (
                "[[approvals.notify]]\nkind = \"webhook\"\nurl = \"https://x\"\nsecret = \"s3cr3t\"",
                "unknown field `secret`",
            ),
        ] {
            let e = FleetConfig::parse(&format!("{GOOD}\n{bad}\n"), "t").unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn people_are_read_and_a_two_person_rule_one_person_could_never_meet_is_refused() {
        let people = "[[people]]\nname = \"bob\"\nidentities = [\"oidc:u-1234\", \"oauth:bob@example.com\", \"os:bob\"]\n\n\
                      [[people]]\nname = \"alice\"\nidentities = [\"oidc:u-5678\"]\n\n[approvals]\nshared = [\"os:root\"]\n";
        let asking = |approvers: &str| {
            format!(
                "{GOOD}\n{people}\n[[rules]]\ntool = \"merge\"\nroles = [\"reviewer\"]\ndecision = \"ask\"\n\
                 approvers = [{approvers}]\napprovals_required = 2\n"
            )
        };
        let c = FleetConfig::parse(&asking("\"person:alice\", \"os:bob\""), "t").unwrap();
        assert_eq!(c.people.people.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["bob", "alice"]);
        assert_eq!(c.people.shared, ["os:root"]);
        assert_eq!(c.people.person_of("os:bob").map(|p| p.name.as_str()), Some("bob"));
        for (approvers, why) in [
            ("\"os:bob\", \"oidc:u-1234\"", "are 1 person(s)"),
            ("\"person:bob\", \"oidc:u-1234\"", "are 1 person(s)"),
            ("\"oidc:u-5678\", \"os:root\"", "are 1 person(s)"),
            ("\"token:dashboard\", \"os:bob\"", "are 1 person(s)"),
            ("\"person:carol\", \"os:bob\"", "names no person of [[people]]"),
        ] {
            let e = FleetConfig::parse(&asking(approvers), "t").unwrap_err().to_string();
            assert!(e.contains(why), "{approvers}: {e}");
        }
        for (bad, why) in [
            ("[[people]]\nname = \"x\"\nidentities = [\"bob\"]", "is not an identity"),
            ("[[people]]\nname = \"x\"\nidentities = []", "lists no identity"),
            ("[[people]]\nname = \"x\"\nidentities = [\"token:dashboard\"]", "several people use"),
            (
                "[[people]]\nname = \"x\"\nidentities = [\"os:a\"]\n\n[[people]]\nname = \"y\"\nidentities = [\"os:a\"]",
                "is \"x\"'s already",
            ),
            (
                "[[people]]\nname = \"x\"\nidentities = [\"os:a\"]\n\n[[people]]\nname = \"x\"\nidentities = [\"os:b\"]",
                "declared twice",
            ),
            (
                "[[people]]\nname = \"x\"\nidentities = [\"os:root\"]\n\n[approvals]\nshared = [\"os:root\"]",
                "several people use",
            ),
            ("[approvals]\nshared = [\"root\"]", "is not an identity"),
        ] {
            let e = FleetConfig::parse(&format!("{GOOD}\n{bad}\n"), "t").unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn one_account_spelled_two_ways_and_identities_no_token_could_carry_are_refused_at_load() {
        for (bad, why) in [
            // The CLI's own spelling of an OS user next to the bare name: one account.
            (
                "[[people]]\nname = \"x\"\nidentities = [\"os:bob\"]\n\n[[people]]\nname = \"y\"\n\
                 identities = [\"os:bob (uid 1000)\"]",
                "is \"x\"'s already",
            ),
            (
                "[[people]]\nname = \"x\"\nidentities = [\"os:uid 0\"]\n\n[approvals]\nshared = [\"os:root\"]",
                "several people use",
            ),
            // A Cyrillic `о`, a space: no token's claim nor sign-in's subject is spelled so.
            ("[[people]]\nname = \"x\"\nidentities = [\"oauth:b\u{43e}b@example.com\"]", "can never be met"),
            ("[[people]]\nname = \"x\"\nidentities = [\"oidc:bob smith\"]", "can never be met"),
        ] {
            let e = FleetConfig::parse(&format!("{GOOD}\n{bad}\n"), "t").unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
        // Two spellings of one approver are one person.
        let two = format!(
            "{GOOD}\n[[rules]]\ntool = \"merge\"\nroles = [\"reviewer\"]\ndecision = \"ask\"\n\
             approvers = [\"os:bob\", \"os:bob (uid 1000)\"]\napprovals_required = 2\n"
        );
        assert!(FleetConfig::parse(&two, "t").unwrap_err().to_string().contains("are 1 person(s)"));
    }

    #[test]
    fn approvers_a_two_person_rule_and_notification_targets_are_read() {
        let text = format!(
            "{GOOD}\n[approvals]\napprovers = [\"group:ops\"]\n\n[[approvals.notify]]\nkind = \"webhook\"\n\
             url = \"https://hooks.example/f\"\nsecret_env = \"HOOK_KEY\"\n\n[[approvals.notify]]\nkind = \"ntfy\"\n\
             url_file = \"/run/ntfy-url\"\nevents = [\"requested\"]\nname = \"phone\"\n\n[[rules]]\ntool = \"merge\"\n\
             roles = [\"reviewer\"]\ndecision = \"ask\"\napprovers = [\"oidc:alice\", \"oidc:bob\"]\napprovals_required = 2\n"
        );
        let c = FleetConfig::parse(&text, "t").unwrap();
        assert_eq!((c.approvals.approvers.as_slice(), c.approvals.required), (&["group:ops".to_owned()][..], 1));
        let rule = &c.rules.rules()[0];
        assert_eq!((rule.approvers.len(), rule.required), (2, 2));
        let hook = &c.approvals.notify[0];
        assert_eq!((hook.kind, hook.name.as_str(), hook.events.len()), (NotifyKind::Webhook, "webhook-1", 5));
        assert_eq!(hook.secret, Some(Secret::Env("HOOK_KEY".into())));
        let phone = &c.approvals.notify[1];
        assert_eq!((phone.name.as_str(), phone.events.as_slice()), ("phone", &["requested".to_owned()][..]));
        assert_eq!(phone.url, Secret::File("/run/ntfy-url".into()));
        let env = |k: &str| (k == "HOOK_KEY").then(|| "k3y".to_owned());
        assert_eq!(hook.secret.as_ref().unwrap().read(&env), Ok("k3y".into()));
        let unset = Secret::Env("NOPE".into()).read(&env).unwrap_err();
        assert_eq!(
            (unset.to_string().as_str(), unset),
            ("environment key NOPE is unset or empty", SecretUnset::Env("NOPE".into()))
        );
        assert_ne!(
            c.rules_digest(),
            FleetConfig::parse(&text.replace("approvals_required = 2", ""), "t").unwrap().rules_digest()
        );
    }

    #[test]
    fn the_audit_table_says_how_much_of_a_call_is_kept() {
        assert_eq!(FleetConfig::parse(GOOD, "t").unwrap().audit_arguments, ArgumentsMode::Full);
        for (text, mode) in
            [("full", ArgumentsMode::Full), ("digest", ArgumentsMode::Digest), ("off", ArgumentsMode::Off)]
        {
            let c = FleetConfig::parse(&format!("{GOOD}\n[audit]\narguments = \"{text}\"\n"), "t").unwrap();
            assert_eq!(c.audit_arguments, mode);
        }
        let e = FleetConfig::parse(&format!("{GOOD}\n[audit]\narguments = \"some\"\n"), "t").unwrap_err().to_string();
        assert!(e.contains("unknown variant `some`"), "{e}");
        let a = FleetConfig::parse(GOOD, "t").unwrap();
        let b = FleetConfig::parse(&format!("{GOOD}\n[roles.author]\ndeny = [\"git_push\"]\n"), "t").unwrap();
        assert_eq!(a.rules_digest(), FleetConfig::parse(GOOD, "t").unwrap().rules_digest(), "deterministic");
        assert_ne!(a.rules_digest(), b.rules_digest(), "a role glob is part of what decides");
    }

    #[test]
    fn tracing_and_metrics_tables_are_checked_when_read() {
        let ok = format!(
            "{GOOD}\n[tracing]\notlp_endpoint = \"http://127.0.0.1:4318\"\n[metrics]\nlisten = \"127.0.0.1:0\"\n"
        );
        let c = FleetConfig::parse(&ok, "f.toml").unwrap();
        assert_eq!(c.otlp_endpoint.as_deref(), Some("http://127.0.0.1:4318"));
        assert_eq!(c.metrics, MetricsSettings { listen: Some("127.0.0.1:0".parse().unwrap()), allow_remote: false });
        for (bad, says) in [
            ("[tracing]\notlp_endpoint = \"https://c:4318\"", "[tracing] otlp_endpoint \"https://c:4318\""),
            ("[tracing]\notlp_endpoint = \"c:4318\"", "expected http://"),
            ("[metrics]\nlisten = \"localhost\"", "[metrics] listen \"localhost\" is not an address:port"),
            ("[metrics]\nport = 9", "unknown field `port`"),
        ] {
            let e = FleetConfig::parse(&format!("{GOOD}\n{bad}\n"), "f.toml").unwrap_err().to_string();
            assert!(e.starts_with("f.toml") && e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn parses_the_documented_keys() {
        let c = FleetConfig::parse(GOOD, "fleet.toml").unwrap();
        assert_eq!(c.members.len(), 2);
        assert_eq!(c.binding.as_ref().unwrap().repo, "Gitea-Tools");
        assert_eq!(c.heartbeat_ttl_seconds, 900.0);
        assert_eq!(c.supervision, SupervisionSettings::default());
        let tuned = format!("{GOOD}\n[supervision]\nbackoff_seconds = [0.5, 2]\nfailure_budget = 3\n");
        let c = FleetConfig::parse(&tuned, "fleet.toml").unwrap();
        assert_ne!(c.supervision, SupervisionSettings::default());

        let policy = format!(
            "{GOOD}\n[roles.reviewer]\ndeny = [\"git_commit\", \"git_add\"]\n\n[tools]\nread_only = [\"git_status\"]\n"
        );
        let c = FleetConfig::parse(&policy, "fleet.toml").unwrap();
        assert!(!c.role_policy("reviewer").permits("git_commit"));
        assert!(c.role_policy("author").permits("git_commit"));
        assert_eq!(c.tools.read_only, ["git_status"]);
        let e = FleetConfig::parse(&format!("{GOOD}\n[roles.janitor]\ndeny = []\n"), "f.toml").unwrap_err().to_string();
        assert!(e.contains("janitor"), "{e}");
        let http = format!("{GOOD}\n[http]\ntokens_file = \"tokens\"\nmax_attachments = 8\n");
        let c = FleetConfig::parse(&http, "/etc/fleetgate/fleet.toml").unwrap();
        assert_eq!(c.http.tokens_file.as_deref(), Some(Path::new("/etc/fleetgate/tokens")));
        assert_eq!((c.http.max_attachments, c.http.max_attachments_per_principal), (8, 8));
        assert_eq!(c.http.connections, ConnectionLimits::default());
        let tuned =
            format!("{GOOD}\n[http]\nmax_connections = 9\nheader_timeout_seconds = 0.5\nbody_timeout_seconds = 2\n");
        let c = FleetConfig::parse(&tuned, "fleet.toml").unwrap();
        let expected = ConnectionLimits {
            max_connections: 9,
            header_timeout: Duration::from_millis(500),
            body_timeout: Duration::from_secs(2),
        };
        assert_eq!(c.http.connections, expected);
        for bad in ["max_connections = 0", "header_timeout_seconds = 0", "body_timeout_seconds = 601"] {
            let e = FleetConfig::parse(&format!("{GOOD}\n[http]\n{bad}\n"), "f.toml").unwrap_err().to_string();
            assert!(e.contains(bad.split(' ').next().unwrap()), "{e}");
        }
    }

    #[test]
    fn a_member_may_declare_replicas_within_bounds() {
        let roster = "[[members]]\nnamespace = \"gitea-author\"\nprofile = \"prgs-author\"\nrole = \"author\"\n";
        let members = FleetConfig::parse(&format!("{roster}replicas = 3\n"), "t").unwrap().members;
        assert_eq!(members[0].replicas, 3);
        assert_eq!(FleetConfig::parse(roster, "t").unwrap().members[0].replicas, 1, "one unless declared");
        for bad in ["0", "65", "-1"] {
            let e = FleetConfig::parse(&format!("{roster}replicas = {bad}\n"), "t").unwrap_err().to_string();
            assert!(e.contains(&format!("replicas = {bad}: expected 1 to 64")), "{e}");
        }
    }

    #[test]
    fn retention_ages_are_read_with_their_floors() {
        let r = FleetConfig::parse(
            &format!("{GOOD}\n[retention]\naudit = \"180d\"\nworkflow = \"2w\"\nworkers = \"1h\"\nevery = \"1d\"\n"),
            "t",
        )
        .unwrap()
        .retention;
        assert_eq!(
            (r.audit, r.workflow, r.workers, r.every),
            (Some(180 * 86_400), Some(14 * 86_400), Some(3_600), Some(86_400))
        );
        assert_eq!((r.approvals, r.observations, r.runtimes), (None, None, None));
        assert!(!FleetConfig::parse(GOOD, "t").unwrap().retention.prunes_anything());
        for (bad, why) in [
            ("[retention]\naudit = \"12h\"", "[retention] audit = \"12h\" is shorter than 86400 s"),
            ("[retention]\napprovals = \"soon\"", "[retention] approvals: \"soon\" is not an age"),
            ("[retention]\nevery = \"10s\"", "shorter than 60 s"),
            ("[retention]\nforever = \"1d\"", "unknown field `forever`"),
        ] {
            let e = FleetConfig::parse(&format!("{GOOD}\n{bad}\n"), "t").unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn bad_files_name_the_file_line_and_reason() {
        let unknown = GOOD.replace("tool_prefix", "tool_prefx");
        let e = FleetConfig::parse(&unknown, "f.toml").unwrap_err().to_string();
        assert!(e.starts_with("f.toml:5:") && e.contains("tool_prefx"), "{e}");

        let dup = GOOD.replace("prgs-reviewer", "prgs-author");
        let e = FleetConfig::parse(&dup, "f.toml").unwrap_err().to_string();
        assert!(e.contains("f.toml:21:") && e.contains("duplicate profile"), "{e}");

        let e = FleetConfig::parse("[fleet]\nname = \"x\"\n", "f.toml").unwrap_err().to_string();
        assert!(e.contains("roster is empty"), "{e}");

        let e = FleetConfig::parse("[fleet\n", "f.toml").unwrap_err().to_string();
        assert!(e.starts_with("f.toml:1:"), "{e}");

        let e = FleetConfig::parse(&GOOD.replace("= 900", "= -1"), "f.toml").unwrap_err().to_string();
        assert!(e.contains("heartbeat_ttl_seconds"), "{e}");

        let bad = format!("{GOOD}\n[supervision]\nfailure_budget = 0\n");
        let e = FleetConfig::parse(&bad, "f.toml").unwrap_err().to_string();
        assert!(e.contains("[supervision]") && e.contains("failure_budget"), "{e}");
        let e =
            FleetConfig::parse(&format!("{GOOD}\n[http]\nmax_attachments = 0\n"), "f.toml").unwrap_err().to_string();
        assert!(e.contains("max_attachments must be 1 to"), "{e}");
        let e = FleetConfig::parse(&format!("{GOOD}\n[downstream]\npass_env = [\"*\"]\n"), "f.toml").unwrap_err();
        assert!(e.to_string().contains("[downstream] pass_env") && e.to_string().contains("whole environment"), "{e}");
        let c = FleetConfig::parse(&format!("{GOOD}\n[downstream]\npass_env = [\"NODE_*\"]\n"), "f.toml").unwrap();
        assert_eq!(c.downstream_pass_env, ["NODE_*"]);
        assert_eq!(c.downstream_sharing, fleetgate_gateway::Sharing::Session, "per session unless asked");
        let c = FleetConfig::parse(&format!("{GOOD}\n[downstream]\nsharing = \"gateway\"\n"), "f.toml").unwrap();
        assert_eq!(c.downstream_sharing, fleetgate_gateway::Sharing::Gateway);
        let e = FleetConfig::parse(&format!("{GOOD}\n[downstream]\nsharing = \"process\"\n"), "f.toml").unwrap_err();
        assert!(e.to_string().contains("sharing \"process\" is neither"), "{e}");
        let bad = format!("{GOOD}\n[supervision]\nbackoff = [1]\n");
        let e = FleetConfig::parse(&bad, "f.toml").unwrap_err().to_string();
        assert!(e.contains("backoff"), "{e}");
    }

    #[test]
    fn http_oauth_is_read_checked_and_refused_when_it_would_send_tokens_in_the_clear() {
        let oauth = format!(
            "{GOOD}\n[http.oauth]\nissuer = \"https://auth.example/realms/fleet\"\naudience = \"https://gw.example/mcp\"\n\
             profiles_claim = \"fleetgate_profiles\"\n\n[[http.oauth.principals]]\nsubject = \"svc-1\"\nname = \"ci\"\n\
             profiles = [\"prgs-reviewer\"]\n"
        );
        let c = FleetConfig::parse(&oauth, "fleet.toml").unwrap();
        let o = c.http.oauth.expect("[http.oauth]");
        assert_eq!(
            (o.issuer.as_str(), o.audience.as_str()),
            ("https://auth.example/realms/fleet", "https://gw.example/mcp")
        );
        assert_eq!((o.principal_claim.as_str(), o.profiles_claim.as_deref()), ("sub", Some("fleetgate_profiles")));
        assert_eq!((o.leeway, o.jwks_cooldown), (Duration::from_secs(60), Duration::from_secs(30)));
        assert_eq!(o.principals[0].profiles, ["prgs-reviewer"]);
        let local = format!(
            "{GOOD}\n[http.oauth]\nissuer = \"http://127.0.0.1:8080\"\naudience = \"http://localhost:8750/mcp\"\n"
        );
        assert!(FleetConfig::parse(&local, "fleet.toml").is_ok(), "http:// on loopback is a development server");
        let base = "issuer = \"https://a.example\"\naudience = \"https://gw.example/mcp\"";
        for (bad, why) in [
            ("issuer = \"http://auth.example\"\naudience = \"https://gw.example/mcp\"", "must be https://"),
            ("issuer = \"https://a.example\"\naudience = \"gw.example\"", "audience"),
            (&format!("{base}\njwks_uri = \"http://keys.example/jwks\""), "jwks_uri"),
            (&format!("{base}\nleeway_seconds = 301"), "leeway_seconds"),
            (&format!("{base}\nprincipal_claim = \"has space\""), "principal_claim"),
            (
                &format!("{base}\n\n[[http.oauth.principals]]\nsubject = \"s\"\nprofiles = [\"prgs-nobody\"]"),
                "prgs-nobody",
            ),
            (&format!("{base}\nscope = \"x\""), "scope"),
            (
                &format!("{base}\n\n[[http.oauth.principals]]\nsubject = \"s\"\nname = \"oauth:alice\""),
                "names unmapped subjects",
            ),
            (
                &format!(
                    "{base}\n\n[[http.oauth.principals]]\nsubject = \"s\"\nname = \"ci\"\n\n\
                     [[http.oauth.principals]]\nsubject = \"t\"\nname = \"ci\""
                ),
                "both named \"ci\"",
            ),
        ] {
            let e = FleetConfig::parse(&format!("{GOOD}\n[http.oauth]\n{bad}\n"), "f.toml").unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn rules_are_read_with_their_lines_and_bad_ones_refused_naming_file_line_and_reason() {
        let rules = format!(
            "{GOOD}\n[[rules]]\ntool = \"pull_request_write\"\nargs = {{ \"/method\" = [\"merge\"] }}\nroles = [\"reviewer\"]\n\
             class = \"mutating\"\naction = \"merge\"\n\n[[rules]]\ntool = \"pull_request_read\"\nroles = [\"*\"]\nargs = {{ \"/index\" = \"present\" }}\n"
        );
        let c = FleetConfig::parse(&rules, "f.toml").unwrap();
        assert_eq!(c.rules.rules().len(), 2);
        assert_eq!(c.rules.rules()[0].origin, "f.toml:24", "a rule's line is its [[rules]] header's");
        assert_eq!(c.rules.rules()[0].action.as_deref(), Some("merge"));

        let bad =
            |rule: &str| FleetConfig::parse(&format!("{GOOD}\n[[rules]]\n{rule}\n"), "f.toml").unwrap_err().to_string();
        let e = bad("tool = \"t\"\nroles = [\"janitor\"]");
        assert!(e.starts_with("f.toml:24: [[rules]]:") && e.contains("\"janitor\" is not a role"), "{e}");
        let e = bad("tool = \"t\"\nroles = [\"author\"]\nargs = { \"method\" = [\"x\"] }");
        assert!(e.contains("not a JSON pointer"), "{e}");
        let e = bad("tool = \"t\"\nroles = [\"author\"]\nargs = { \"/m~2\" = [\"x\"] }");
        assert!(e.contains("not a JSON pointer"), "{e}");
        let e = bad("tool = \"t\"\nroles = [\"author\"]\nargs = { \"/method\" = [] }");
        assert!(e.contains("lists no value"), "{e}");
        let e = bad("tool = \"t\"\nroles = [\"author\"]\nargs = { \"/method\" = \"sometimes\" }");
        assert!(e.contains("must be a list of values"), "{e}");
        let shadowed = format!(
            "{GOOD}\n[[rules]]\ntool = \"pull_*\"\nroles = [\"author\"]\n\n[[rules]]\ntool = \"pull_request_write\"\nroles = [\"reviewer\"]\n"
        );
        let e = FleetConfig::parse(&shadowed, "f.toml").unwrap_err().to_string();
        assert!(e.starts_with("f.toml:28:") && e.contains("f.toml:24") && e.contains("never decide"), "{e}");
        let e = FleetConfig::parse(&GOOD.replace("[fleet]", "[fleet]\nforge = \"gitlab\""), "f.toml").unwrap_err();
        assert!(e.to_string().contains("not a known forge dialect (known: gitea-mcp"), "{e}");
    }

    #[test]
    fn a_gitea_instance_s_own_keywords_reach_its_dialect_and_bad_ones_are_refused_by_key() {
        let gitea = GOOD.replace("[fleet]", "[fleet]\nforge = \"gitea-mcp\"");
        let with = |forge: &str| {
            format!("{forge}\n[forge]\nclose_keywords = [\"Schließt\", \"fixes\"]\nreopen_keywords = [\"öffnet\"]\n")
        };
        let c = FleetConfig::parse(&with(&gitea), "f.toml").unwrap();
        assert_eq!(c.forge_keywords.close(), ["schliesst", "fixes"]);
        assert_eq!(c.forge_keywords.reopen(), ["öffnet"]);
        let plain = FleetConfig::parse(&gitea, "f.toml").unwrap();
        assert!(plain.forge_keywords.is_empty());
        assert_ne!(c.rules_digest(), plain.rules_digest(), "the keywords decide calls: the digest names them");
        // The dialect reads them: a commit message with one closes the issue it names.
        let args = serde_json::json!({ "owner": "o", "repo": "r", "branch_name": "f", "message": "schließt #3" });
        let closes = |c: &FleetConfig| {
            let effect = c.dialect().unwrap().evident("create_or_update_file", args.as_object().unwrap(), None);
            effect.issues.iter().any(|i| i.issue == 3 && i.changes_state())
        };
        assert!(closes(&c));
        assert!(!closes(&plain));
        assert!(
            std::ptr::eq(c.dialect().unwrap(), FleetConfig::parse(&with(&gitea), "f.toml").unwrap().dialect().unwrap()),
            "one dialect per list"
        );
        for (bad, says) in [
            ("close_keywords = [\"fix-it\"]", "f.toml: [forge] close_keywords: \"fix-it\" holds '-'"),
            ("reopen_keywords = [\"\"]", "f.toml: [forge] reopen_keywords: an empty keyword"),
            ("close_keywords = [\"zu\"]\nreopen_keywords = [\"Zu\"]", "in both close_keywords and reopen_keywords"),
            ("close_keyword = [\"zu\"]", "unknown field `close_keyword`"),
            ("close_keywords = \"zu\"", "f.toml:"),
        ] {
            let e = FleetConfig::parse(&format!("{gitea}\n[forge]\n{bad}\n"), "f.toml").unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let github = GOOD.replace("[fleet]", "[fleet]\nforge = \"github-mcp\"");
        let e = FleetConfig::parse(&with(&github), "f.toml").unwrap_err().to_string();
        assert!(e.contains("[forge] close_keywords: GitHub's closing keywords are fixed"), "{e}");
        let e = FleetConfig::parse(&with(GOOD), "f.toml").unwrap_err().to_string();
        assert!(e.contains("[fleet] forge names none"), "{e}");
    }

    #[test]
    fn the_gitea_profile_comes_after_the_operator_s_rules_which_may_override_it() {
        let text = GOOD.replace("[fleet]", "[fleet]\nforge = \"gitea-mcp\"");
        let c = FleetConfig::parse(&format!("{text}\n[[rules]]\ntool = \"pull_request_write\"\nargs = {{ \"/method\" = [\"merge\"] }}\nroles = [\"reviewer\"]\n"), "f.toml").unwrap();
        assert_eq!(c.forge.as_deref(), Some("gitea-mcp"));
        assert!(c.rules.rules().len() > 10);
        let merge = serde_json::json!({ "method": "merge" });
        let d = c.rules.decide("reviewer", "pull_request_write", merge.as_object()).unwrap();
        assert!(d.permitted, "the operator's rule overrides the profile");
        assert_eq!(d.rule.as_deref(), Some("f.toml:25"));
    }

    #[test]
    fn a_rule_may_name_what_a_call_does_under_a_forge_dialect() {
        use fleetgate_core::rules::Op;
        let text = GOOD.replace("[fleet]", "[fleet]\nforge = \"gitea-mcp\"");
        let rule = |effect: &str| format!("{text}\n[[rules]]\neffect = {effect}\nroles = [\"reviewer\"]\n");
        let c = FleetConfig::parse(&rule("{ op = \"merge\", branch = [\"release/*\"], protected = true }"), "f.toml")
            .unwrap();
        let r = &c.rules.rules()[0];
        assert_eq!(r.tool, "*", "an effect rule names every tool unless it says");
        let e = r.effect.as_ref().unwrap();
        assert_eq!(
            (e.op.as_slice(), e.branch.as_slice(), e.protected),
            (&[Op::Merge][..], &["release/*".to_owned()][..], Some(true))
        );
        assert_ne!(c.rules_digest(), FleetConfig::parse(&text, "f.toml").unwrap().rules_digest());
        for (effect, why) in [
            ("{ op = \"frobnicate\" }", "is not one of merge, push"),
            ("{ op = [] }", "lists nothing"),
            ("{ pr = 0 }", "pr 0 is no PR"),
            ("{}", "names nothing"),
            ("{ base = \"main\" }", "unknown field `base`"),
        ] {
            let e = FleetConfig::parse(&rule(effect), "f.toml").unwrap_err().to_string();
            assert!(e.contains(why), "{effect}: {e}");
        }
        let plain = format!("{GOOD}\n[[rules]]\neffect = {{ op = \"merge\" }}\nroles = [\"reviewer\"]\n");
        let e = FleetConfig::parse(&plain, "f.toml").unwrap_err().to_string();
        assert!(e.contains("[fleet] forge names none"), "{e}");
        let neither = format!("{text}\n[[rules]]\nroles = [\"reviewer\"]\n");
        assert!(FleetConfig::parse(&neither, "f.toml").unwrap_err().to_string().contains("or an `effect`"));
        // Shadowed: a rule on every merge before one on merges onto release branches.
        let shadowed = format!(
            "{text}\n[[rules]]\neffect = {{ op = \"merge\" }}\nroles = [\"reviewer\"]\n\n[[rules]]\n\
             effect = {{ op = \"merge\", branch = \"release/*\" }}\nroles = [\"reviewer\"]\n"
        );
        let e = FleetConfig::parse(&shadowed, "f.toml").map(|c| c.rules.rules().len());
        assert!(e.as_ref().is_err_and(|e| e.to_string().contains("can never decide")), "{e:?}");
    }

    #[test]
    fn protected_branches_and_paths_are_read_with_the_forges_workflow_directories_by_default() {
        let c = FleetConfig::parse(GOOD, "f.toml").unwrap();
        let p = &c.workflow.protection;
        assert_eq!(p.default_branch, "main");
        assert!(p.paths.iter().any(|g| g == ".gitea/workflows/**") && p.paths.len() == 3, "{p:?}");
        let text = format!(
            "{GOOD}\n[workflow]\ndefault_branch = \"trunk\"\nprotected_branches = [\"release/*\"]\nprotected_paths = [\"ci/**\"]\n"
        );
        let c = FleetConfig::parse(&text, "f.toml").unwrap();
        let p = &c.workflow.protection;
        assert_eq!(
            (p.default_branch.as_str(), p.branches.as_slice(), p.paths.as_slice()),
            ("trunk", &["release/*".to_owned()][..], &["ci/**".to_owned()][..])
        );
        let e =
            FleetConfig::parse(&format!("{GOOD}\n[workflow]\nprotected_branches = [\"\"]\n"), "f.toml").unwrap_err();
        assert!(e.to_string().contains("protected_branches must not hold an empty pattern"), "{e}");
    }
}
