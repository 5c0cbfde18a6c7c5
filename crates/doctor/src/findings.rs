//! The classification: one client's parsed files + the roster + the env-key
//! declaration + a command lookup → which member each entry is, and every
//! finding. A pure function of its inputs: the PATH lookup is injected.
//!
//! The matching rule, in order: an entry that launches `fleetgate serve` is
//! the member whose profile its `--profile` names; else an entry whose name is
//! a member's namespace (`gitea-author`) is that member; else a bare launch
//! whose arguments carry `--profile P` for a roster profile P is that member.
//! Anything else is an unrelated server and is never judged.
//!
//! A wrapper is trusted only when it is fleetgate's binary (`Lookup::fleetgate`,
//! injected): any other command whose file name is `fleetgate` still says which
//! member the entry is, but it is a `foreign_wrapper` finding, never a
//! template, and never the wrapper the repair writes.
//!
//! Forge credentials are compared by SHA-256 digest and never kept, printed or
//! serialized: a report may be pasted anywhere.

use super::clients::{Client, SourceFile};
use super::read::{Entry, FileError, Launch, ParsedFile};
use fleetgate_config::Member;
use fleetgate_core::client::normalize_client_name;
use fleetgate_core::env::{EnvKey, EnvSnapshot, key_name, unconsumed_env_overrides};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::path::Path;

/// The env key the Gitea MCP server reads its access token from (gitea-mcp
/// `cmd/cmd.go`; its `--token` flag, when given, wins). Gitea's own name, not
/// under the fleet's env prefix. Each dialect names its own ([`Roster::server`]).
pub const FORGE_TOKEN_ENV: &str = "GITEA_ACCESS_TOKEN";

/// The roster and the env declaration the findings are judged against.
#[derive(Clone, Copy, Debug)]
pub struct Roster<'a> {
    /// The expected members.
    pub members: &'a [Member],
    /// The fleet's env prefix (`GITEA_`).
    pub env_prefix: &'a str,
    /// The downstream's declared pass-through keys.
    pub pass_through: &'a [String],
    /// The roster file a wrapper must name (`fleetgate --config FILE serve …`); `None`: the
    /// default path, which a wrapper without `--config` reads.
    pub config: Option<&'a str>,
    /// The forge's server (its dialect's facts): where it reads its credential, what the
    /// forge does with a self-approval.
    pub server: &'a fleetgate_core::dialect::Server,
}

/// What the classifier asks of the machine, injected so it stays pure.
#[derive(Clone, Copy)]
pub struct Lookup<'a> {
    /// Whether a command names an executable (absolute, or found on PATH).
    pub exists: &'a dyn Fn(&str) -> bool,
    /// Whether a wrapper's command is fleetgate's binary (see
    /// `cli::doctor::is_fleetgate` for the shell's rule).
    pub fleetgate: &'a dyn Fn(&str) -> bool,
}

impl std::fmt::Debug for Lookup<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Lookup")
    }
}

/// What reading one file gave.
#[derive(Clone, Debug)]
pub enum FileState {
    /// No such file.
    Absent,
    /// Read and parsed.
    Parsed(ParsedFile),
    /// Present but unreadable or unparsable.
    Failed(FileError),
}

/// One file of a client, as the classifier sees it.
#[derive(Clone, Debug)]
pub struct FileInput {
    /// Where and how.
    pub source: SourceFile,
    /// What reading it gave.
    pub state: FileState,
}

/// Finding kinds: the literals scripts switch on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// A roster member the client does not define.
    Missing,
    /// A member launched without `fleetgate serve`.
    Bare,
    /// One profile defined more than once across the files the client merges.
    Duplicate,
    /// A `<PREFIX>*` key in `env` that the env gate does not recognise.
    UnsupportedEnv,
    /// No `<PREFIX>MCP_CLIENT` in `env`.
    ClientIdentityMissing,
    /// `<PREFIX>MCP_CLIENT` names another client.
    ClientIdentityWrong,
    /// The launched command is not on PATH.
    CommandNotFound,
    /// `fleetgate serve` with no `--profile`, or one the roster lacks.
    UnknownProfile,
    /// A member launched through a `…/fleetgate` that is not fleetgate's
    /// binary (a project's `.devtools/fleetgate`): never copied, never written.
    ForeignWrapper,
    /// A member wrapped in `fleetgate serve` that reads another roster than the doctor's
    /// (its `--config`, or the default path without one).
    OtherRoster,
    /// An author and a reviewer launched with the same forge credential:
    /// Gitea refuses an approval by the pull request's own poster (422), so
    /// no approval succeeds and nothing merges.
    SharedForgeIdentity,
}

/// Where a definition is: a file (index into the client's files) and an
/// entry (index into that file's entries).
pub type At = (usize, usize);

/// One finding.
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    /// What kind.
    pub kind: FindingKind,
    /// The client.
    pub client: &'static str,
    /// The member's profile (none for an unknown profile).
    pub profile: Option<String>,
    /// The file (none for a missing member).
    pub file: Option<String>,
    /// The line of the entry.
    pub line: Option<usize>,
    /// The entry's name.
    pub entry: Option<String>,
    /// The env key at fault (`unsupported_env`, identity kinds), or where the
    /// shared credential is read (`shared_forge_identity`: `GITEA_ACCESS_TOKEN`
    /// or `--token`; never its value).
    pub key: Option<String>,
    /// One readable sentence.
    pub message: String,
    /// Whether `--fix` repairs it.
    pub fixable: bool,
    /// The definition it is about.
    #[serde(skip)]
    pub at: Option<At>,
}

/// One definition of a member.
#[derive(Clone, Debug, Serialize)]
pub struct Definition {
    /// The file.
    pub file: String,
    /// The line of the entry.
    pub line: usize,
    /// The section's scope (`user`, `local`, `project`, `workspace`).
    pub scope: &'static str,
    /// The entry's name.
    pub entry: String,
    /// `wrapped` (by fleetgate's binary), `foreign` (by another `…/fleetgate`),
    /// `bare` or `remote`.
    pub launch: &'static str,
    /// The launched command (none for a remote server).
    pub command: Option<String>,
    /// Where it is.
    #[serde(skip)]
    pub at: At,
}

/// One roster member in one client.
#[derive(Clone, Debug, Serialize)]
pub struct MemberReport {
    /// Namespace.
    pub namespace: String,
    /// Profile.
    pub profile: String,
    /// Role.
    pub role: String,
    /// `defined`, `missing`, or `unknown` (a file of the client could not be read).
    pub status: &'static str,
    /// Every definition.
    pub definitions: Vec<Definition>,
}

/// One file in a client's report.
#[derive(Clone, Debug, Serialize)]
pub struct FileReport {
    /// The path.
    pub path: String,
    /// Whether it exists.
    pub exists: bool,
    /// Why it could not be read, with line and column.
    pub error: Option<FileError>,
}

/// One client's verdict.
#[derive(Clone, Debug, Serialize)]
pub struct ClientReport {
    /// The client's name.
    pub client: &'static str,
    /// The client.
    #[serde(skip)]
    pub id: Client,
    /// Its files.
    pub files: Vec<FileReport>,
    /// Whether it defines at least one roster member.
    pub adopted: bool,
    /// Every roster member.
    pub members: Vec<MemberReport>,
    /// Names of the servers that are none of the roster's.
    pub unrelated_servers: Vec<String>,
    /// Every finding, by member then kind.
    pub findings: Vec<Finding>,
}

/// `fleetgate serve …` as read from an entry's launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Serve {
    /// The `--profile` it names.
    pub profile: Option<String>,
    /// The `--config` it names (before or after `serve`), if any.
    pub config: Option<String>,
    /// The downstream argv after `--`.
    pub downstream: Vec<String>,
}

/// The value of `--profile P` / `--profile=P` in `args`.
pub fn profile_arg(args: &[String]) -> Option<&str> {
    flag_value(args, "--profile")
}

/// The value of `FLAG V` / `FLAG=V` in `args`.
fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter().enumerate().find_map(|(i, a)| match a.strip_prefix(flag) {
        Some("") => args.get(i + 1).map(String::as_str),
        Some(rest) => rest.strip_prefix('='),
        None => None,
    })
}

/// Whether `command args` launches `fleetgate serve`, and with what.
pub fn fleetgate_serve(command: &str, args: &[String]) -> Option<Serve> {
    let is_fleetgate = Path::new(command).file_name().is_some_and(|n| n == "fleetgate");
    let split = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let own = &args[..split];
    (is_fleetgate && own.iter().any(|a| a == "serve")).then(|| Serve {
        profile: profile_arg(own).map(str::to_owned),
        config: flag_value(own, "--config").map(str::to_owned),
        downstream: args.get(split + 1..).unwrap_or_default().to_vec(),
    })
}

/// Which member an entry is (index into the roster), by the documented rule.
pub fn member_of(entry: &Entry, members: &[Member]) -> Option<usize> {
    let by_profile = |p: &str| members.iter().position(|m| m.profile == p);
    if let Launch::Stdio { command, args } = &entry.launch
        && let Some(serve) = fleetgate_serve(command, args)
    {
        return serve.profile.as_deref().and_then(by_profile);
    }
    members.iter().position(|m| m.namespace == entry.name).or_else(|| match &entry.launch {
        Launch::Stdio { args, .. } => profile_arg(args).and_then(by_profile),
        _ => None,
    })
}

/// The definition a missing member is copied from: the first local-process
/// definition, in roster order, preferring one wrapped by fleetgate's binary;
/// never a foreign wrapper. `file`: only definitions in that file (the
/// snippet's downstream comes from the file it is pasted into, never from a
/// file of another scope).
pub fn template(report: &ClientReport, file: Option<usize>) -> Option<(&MemberReport, &Definition)> {
    let defs = || {
        report
            .members
            .iter()
            .flat_map(|m| m.definitions.iter().map(move |d| (m, d)))
            .filter(|(_, d)| file.is_none_or(|f| d.at.0 == f))
    };
    defs().find(|(_, d)| d.launch == "wrapped").or_else(|| defs().find(|(_, d)| d.launch == "bare"))
}

/// Judge one client.
pub fn classify(
    client: Client,
    files: &[FileInput],
    roster: Roster<'_>,
    named: bool,
    lookup: Lookup<'_>,
) -> ClientReport {
    let mut members: Vec<MemberReport> = roster
        .members
        .iter()
        .map(|m| MemberReport {
            namespace: m.namespace.clone(),
            profile: m.profile.clone(),
            role: m.role.clone(),
            status: "missing",
            definitions: Vec::new(),
        })
        .collect();
    let mut findings = Vec::new();
    let mut unrelated = Vec::new();
    for (f, input) in files.iter().enumerate() {
        let FileState::Parsed(parsed) = &input.state else { continue };
        let shown = input.source.path.display().to_string();
        for (e, entry) in parsed.entries.iter().enumerate() {
            let scope = parsed.sections[entry.section].scope;
            match member_of(entry, roster.members) {
                Some(m) => members[m].definitions.push(definition(&shown, scope, entry, (f, e), lookup)),
                None => match unknown_profile(client, &shown, entry, (f, e)) {
                    Some(finding) => findings.push(finding),
                    None => unrelated.push(entry.name.clone()),
                },
            }
        }
    }
    let complete = !files.iter().any(|f| matches!(f.state, FileState::Failed(_)));
    let adopted = members.iter().any(|m| !m.definitions.is_empty());
    let mut report = ClientReport {
        client: client.name(),
        id: client,
        files: files.iter().map(file_report).collect(),
        adopted,
        members: Vec::new(),
        unrelated_servers: unrelated,
        findings: Vec::new(),
    };
    for m in &mut members {
        if !m.definitions.is_empty() {
            m.status = "defined";
        } else if !complete {
            m.status = "unknown";
        }
    }
    report.members = members;
    let can_copy = template(&report, None).is_some();
    for m in &report.members {
        if m.status == "missing" && (adopted || named) {
            findings.push(missing(client, m, can_copy));
        }
        if m.definitions.len() > 1 {
            findings.push(duplicate(client, m));
        }
        for d in &m.definitions {
            let FileState::Parsed(parsed) = &files[d.at.0].state else { continue };
            findings.extend(entry_findings(client, m, d, &parsed.entries[d.at.1], roster, lookup));
        }
    }
    findings.extend(shared_forge_identity(client, &report.members, files, roster.server));
    report.findings = findings;
    report
}

fn file_report(input: &FileInput) -> FileReport {
    let (exists, error) = match &input.state {
        FileState::Absent => (false, None),
        FileState::Parsed(_) => (true, None),
        FileState::Failed(e) => (true, Some(e.clone())),
    };
    FileReport { path: input.source.path.display().to_string(), exists, error }
}

fn definition(file: &str, scope: &'static str, entry: &Entry, at: At, lookup: Lookup<'_>) -> Definition {
    let (launch, command) = match &entry.launch {
        Launch::Stdio { command, args } => {
            let launch = match fleetgate_serve(command, args) {
                Some(_) if (lookup.fleetgate)(command) => "wrapped",
                Some(_) => "foreign",
                None => "bare",
            };
            (launch, Some(command.clone()))
        }
        _ => ("remote", None),
    };
    Definition { file: file.to_owned(), line: entry.line, scope, entry: entry.name.clone(), launch, command, at }
}

fn finding(client: Client, kind: FindingKind, profile: Option<&str>, message: String, fixable: bool) -> Finding {
    Finding {
        kind,
        client: client.name(),
        profile: profile.map(str::to_owned),
        file: None,
        line: None,
        entry: None,
        key: None,
        message,
        fixable,
        at: None,
    }
}

fn located(mut f: Finding, file: &str, entry: &Entry, at: At) -> Finding {
    f.file = Some(file.to_owned());
    f.line = Some(entry.line);
    f.entry = Some(entry.name.clone());
    f.at = Some(at);
    f
}

fn unknown_profile(client: Client, file: &str, entry: &Entry, at: At) -> Option<Finding> {
    let Launch::Stdio { command, args } = &entry.launch else { return None };
    let serve = fleetgate_serve(command, args)?;
    let message = match &serve.profile {
        Some(p) => format!("{:?} runs fleetgate serve --profile {p}, a profile the roster does not have", entry.name),
        None => format!("{:?} runs fleetgate serve without --profile", entry.name),
    };
    let f = finding(client, FindingKind::UnknownProfile, serve.profile.as_deref(), message, false);
    Some(located(f, file, entry, at))
}

fn missing(client: Client, m: &MemberReport, can_copy: bool) -> Finding {
    let how = if can_copy {
        "--fix adds it, copied from a defined member"
    } else {
        "paste the block `fleetgate doctor --snippet` prints"
    };
    let message = format!("{} ({}) is not defined: {how}", m.profile, m.namespace);
    finding(client, FindingKind::Missing, Some(&m.profile), message, can_copy)
}

fn duplicate(client: Client, m: &MemberReport) -> Finding {
    let places: Vec<String> = m.definitions.iter().map(|d| format!("{}:{} {:?}", d.file, d.line, d.entry)).collect();
    let message = format!(
        "{} is defined {} times ({}): the client may start it more than once; keep one",
        m.profile,
        places.len(),
        places.join(", ")
    );
    finding(client, FindingKind::Duplicate, Some(&m.profile), message, false)
}

/// Whether a command can be judged here: not a relative path and not a
/// client-side variable (`${workspaceFolder}`, `$HOME`).
fn checkable(command: &str) -> bool {
    !command.is_empty() && !command.contains('$') && (Path::new(command).is_absolute() || !command.contains('/'))
}

fn entry_findings(
    client: Client,
    m: &MemberReport,
    d: &Definition,
    entry: &Entry,
    roster: Roster<'_>,
    lookup: Lookup<'_>,
) -> Vec<Finding> {
    let Launch::Stdio { command, args } = &entry.launch else { return Vec::new() };
    let here = |kind, message: String, fixable| {
        located(finding(client, kind, Some(&m.profile), message, fixable), &d.file, entry, d.at)
    };
    let mut out = Vec::new();
    let serve = fleetgate_serve(command, args);
    let mut commands = vec![command.as_str()];
    match &serve {
        Some(s) => {
            if !(lookup.fleetgate)(command) {
                out.push(here(
                    FindingKind::ForeignWrapper,
                    format!(
                        "{:?} launches {command:?} as fleetgate serve, but that is not fleetgate's binary \
                         (neither `fleetgate` nor the same file as the one on PATH or as this doctor): \
                         the doctor neither copies nor rewrites it; point it at fleetgate yourself",
                        entry.name
                    ),
                    false,
                ));
            }
            commands.extend(s.downstream.first().map(String::as_str));
            if s.config.as_deref() != roster.config && (lookup.fleetgate)(command) {
                let reads = s.config.as_deref().unwrap_or("the default roster path");
                let wanted = roster.config.unwrap_or("the default roster path");
                out.push(here(
                    FindingKind::OtherRoster,
                    format!("{:?} runs fleetgate serve with {reads}, not this roster ({wanted})", entry.name),
                    true,
                ));
            }
        }
        None => out.push(here(
            FindingKind::Bare,
            format!("{:?} launches {command:?} without fleetgate serve --profile {}", entry.name, m.profile),
            true,
        )),
    }
    for c in commands.into_iter().filter(|c| checkable(c) && !(lookup.exists)(c)) {
        out.push(here(
            FindingKind::CommandNotFound,
            format!("{:?} launches {c:?}, which is not on PATH", entry.name),
            false,
        ));
    }
    let env = EnvSnapshot::from_pairs(entry.env.iter().cloned());
    for bad in unconsumed_env_overrides(&env, roster.env_prefix, roster.pass_through) {
        let mut f = here(
            FindingKind::UnsupportedEnv,
            format!(
                "{:?} sets {}={}: unsupported, the env gate refuses it fleet-wide \
                 (declare it in the roster's pass_through_env if the downstream reads it)",
                entry.name, bad.key, bad.value
            ),
            true,
        );
        f.key = Some(bad.key);
        out.push(f);
    }
    let key = key_name(EnvKey::McpClient, roster.env_prefix);
    let mut identity = match env.get(EnvKey::McpClient, roster.env_prefix) {
        None => here(
            FindingKind::ClientIdentityMissing,
            format!("{:?} does not set {key}={}", entry.name, client.identity()),
            true,
        ),
        Some(v) if normalize_client_name(v) != normalize_client_name(client.identity()) => here(
            FindingKind::ClientIdentityWrong,
            format!("{:?} sets {key}={v}, but {} launches it ({})", entry.name, client.name(), client.identity()),
            true,
        ),
        Some(_) => return out,
    };
    identity.key = Some(key);
    out.push(identity);
    out
}

/// The forge credential an entry's server runs with, as the server picks it (its token flag,
/// else its token key set in a container launch's arguments, else the key in `env`): where
/// it was read, and its digest. A client-side variable (`${input:forge-token}`) counts as
/// its text, since one reference resolves to one value. `None` when unset or empty.
fn forge_credential(entry: &Entry, server: &fleetgate_core::dialect::Server) -> Option<(&'static str, [u8; 32])> {
    let Launch::Stdio { command, args } = &entry.launch else { return None };
    let downstream = match fleetgate_serve(command, args) {
        Some(serve) => serve.downstream.get(1..).unwrap_or_default().to_vec(),
        None => args.clone(),
    };
    let env = |key: &str| entry.env.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let (source, value) = server.credential(&downstream, &env)?;
    Some((source, Sha256::digest(value.as_bytes()).into()))
}

/// One finding per author/reviewer pair whose definitions share a credential.
/// Only that pair: the merger may act as the reviewer's account, and Gitea
/// refuses only the poster's own approval.
fn shared_forge_identity(
    client: Client,
    members: &[MemberReport],
    files: &[FileInput],
    server: &fleetgate_core::dialect::Server,
) -> Vec<Finding> {
    fn credentials<'m>(
        m: &'m MemberReport,
        files: &[FileInput],
        server: &fleetgate_core::dialect::Server,
    ) -> Vec<(&'m Definition, &'static str, [u8; 32])> {
        m.definitions
            .iter()
            .filter_map(|d| {
                let FileState::Parsed(parsed) = &files[d.at.0].state else { return None };
                let (source, digest) = forge_credential(parsed.entries.get(d.at.1)?, server)?;
                Some((d, source, digest))
            })
            .collect()
    }
    let place = |m: &MemberReport, d: &Definition| format!("{} ({}:{} {:?})", m.profile, d.file, d.line, d.entry);
    let mut out = Vec::new();
    for author in members.iter().filter(|m| m.role == "author") {
        let theirs = credentials(author, files, server);
        for reviewer in members.iter().filter(|m| m.role == "reviewer") {
            let shared = credentials(reviewer, files, server).into_iter().find_map(|(r, source, digest)| {
                theirs.iter().find(|(_, _, d)| *d == digest).map(|(a, _, _)| (*a, r, source))
            });
            let Some((a, r, source)) = shared else { continue };
            let message = format!(
                "the author {} and the reviewer {} use the same forge credential, so one forge account: \
                 {} and nothing can merge; give the author and the reviewer forge accounts of their own",
                place(author, a),
                place(reviewer, r),
                server.self_review,
            );
            let mut f = finding(client, FindingKind::SharedForgeIdentity, Some(&reviewer.profile), message, false);
            f.file = Some(r.file.clone());
            f.line = Some(r.line);
            f.entry = Some(r.entry.clone());
            f.key = Some(source.to_owned());
            f.at = Some(r.at);
            out.push(f);
        }
    }
    out
}
