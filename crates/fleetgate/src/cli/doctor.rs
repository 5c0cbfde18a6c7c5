//! `fleetgate doctor`: the shell around the pure doctor. It reads the clients'
//! files and the PATH, prints the report, the repair's diff or the snippet,
//! and hands changed files to `doctor::apply`, the one writer.

use crate::cli::args::DoctorArgs;
use crate::cli::context::Ctx;
use crate::cli::output::{Exit, Reply, shown};
use anyhow::{anyhow, bail};
use fleetgate_core::env::{EnvKey, key_name};
use fleetgate_doctor::clients::{Client, Format, Layout, locations};
use fleetgate_doctor::findings::{ClientReport, FileInput, FileState, Finding, Lookup, Roster, classify};
use fleetgate_doctor::probe::{fleetgate_binaries, is_fleetgate, on_path, read_file};
use fleetgate_doctor::read::{self, FileError};
use fleetgate_doctor::repair::Launcher;
use fleetgate_doctor::{apply, diff, repair, report, snippet};
use serde_json::{Value, json};
use std::path::PathBuf;

/// One client, surveyed: its verdict, its files, and the bytes each was read as.
struct Surveyed {
    report: ClientReport,
    files: Vec<FileInput>,
    raw: Vec<Option<Vec<u8>>>,
}

/// The inputs every survey shares.
struct Scope<'a> {
    layout: Layout,
    roster: Roster<'a>,
    named: bool,
    path: String,
    /// Device and inode of fleetgate's binaries: this doctor's own
    /// executable, and the `fleetgate` PATH resolves to.
    binaries: Vec<(u64, u64)>,
}

impl Scope<'_> {
    fn exists(&self, command: &str) -> bool {
        on_path(command, &self.path)
    }

    fn is_fleetgate(&self, command: &str) -> bool {
        is_fleetgate(command, &self.binaries)
    }

    fn survey(&self, client: Client) -> Surveyed {
        let (files, raw): (Vec<FileInput>, Vec<Option<Vec<u8>>>) = locations(client, &self.layout)
            .into_iter()
            .map(|source| {
                let outside = if source.in_project() {
                    apply::check_within(&source.path, &self.layout.project).err().map(|e| e.to_string())
                } else {
                    None
                };
                let (state, raw) = match outside {
                    Some(message) => (FileState::Failed(FileError { line: 1, column: 1, message }), None),
                    None => read_file(&source.path, |text| read::parse(text, &source)),
                };
                (FileInput { source, state }, raw)
            })
            .unzip();
        let lookup = Lookup { exists: &|c| self.exists(c), fleetgate: &|c| self.is_fleetgate(c) };
        let report = classify(client, &files, self.roster, self.named, lookup);
        Surveyed { report, files, raw }
    }
}

/// `fleetgate doctor`.
pub fn run(ctx: &Ctx, args: &DoctorArgs) -> anyhow::Result<Reply> {
    let clients = selected(&args.clients)?;
    if args.snippet && clients.len() != 1 {
        bail!("--snippet takes exactly one --client");
    }
    let cwd = std::env::current_dir().map_err(|e| anyhow!("cannot read the current directory: {e}"))?;
    // Physical, as a client's getcwd sees it: Claude Code keys its local
    // scope by that path.
    let project = std::path::absolute(args.project.as_deref().unwrap_or(&cwd))?;
    let project = std::fs::canonicalize(&project).unwrap_or(project);
    let home = args.home.as_deref().map(std::path::absolute).transpose()?;
    let config = roster_config(ctx);
    let scope = Scope {
        layout: Layout::resolve(home.as_deref(), &project, &ctx.env).map_err(|e| anyhow!(e))?,
        roster: Roster {
            members: &ctx.config.members,
            env_prefix: &ctx.config.env_prefix,
            pass_through: &ctx.config.pass_through_env,
            config: config.as_deref(),
            server: ctx.config.dialect().unwrap_or(&fleetgate_core::dialect::gitea::GITEA).server(),
        },
        named: !args.clients.is_empty(),
        path: ctx.env.get(EnvKey::Path, "").unwrap_or_default().to_owned(),
        binaries: Vec::new(),
    };
    let scope = Scope { binaries: fleetgate_binaries(&scope.path), ..scope };
    let surveyed: Vec<Surveyed> = clients.iter().map(|c| scope.survey(*c)).collect();
    if args.snippet {
        return Ok(snippet_reply(ctx, &scope, &surveyed[0], &args.downstream));
    }
    if args.fix {
        return Ok(fix(ctx, &scope, surveyed, args.apply));
    }
    let workflows = workflows(&scope.layout.project, &ctx.config.workflow.protection);
    Ok(report(ctx, &surveyed, &workflows))
}

/// The checkout's workflow files (`fleetgate_doctor::workflows::WORKFLOW_DIRS`), each judged:
/// the workflows that run code from unprotected branches with a token that can write, and
/// the files that could not be read (as file errors).
fn workflows(
    project: &std::path::Path,
    protection: &fleetgate_core::protect::Protection,
) -> (Vec<fleetgate_doctor::workflows::WorkflowFinding>, Vec<Value>) {
    let (mut found, mut errors) = (Vec::new(), Vec::new());
    for dir in fleetgate_doctor::workflows::WORKFLOW_DIRS {
        let Ok(entries) = std::fs::read_dir(project.join(dir)) else { continue };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".yml") || n.ends_with(".yaml"))
            .collect();
        names.sort();
        for name in names {
            let shown = format!("{dir}/{name}");
            let path = project.join(&shown);
            if let Err(outside) = apply::check_within(&path, project) {
                errors.push(json!({ "file": shown, "message": outside.to_string() }));
                continue;
            }
            let judged = std::fs::read_to_string(&path).map_err(|e| format!("{shown}: {e}")).and_then(|text| {
                fleetgate_doctor::workflows::judge(&shown, &text, protection).map_err(|e| e.to_string())
            });
            match judged {
                Ok(more) => found.extend(more),
                Err(message) => errors.push(json!({ "file": shown, "message": message })),
            }
        }
    }
    (found, errors)
}

fn selected(names: &[String]) -> anyhow::Result<Vec<Client>> {
    if names.is_empty() {
        return Ok(Client::ALL.to_vec());
    }
    let mut out = Vec::new();
    for name in names {
        let client = Client::parse(name).ok_or_else(|| {
            let known: Vec<&str> = Client::ALL.iter().map(|c| c.name()).collect();
            anyhow!("unknown client {name:?}: expected one of {}", known.join(", "))
        })?;
        if !out.contains(&client) {
            out.push(client);
        }
    }
    Ok(out)
}

/// How to invoke fleetgate in a new wrapper: by name when it is on PATH,
/// else by this binary's absolute path.
/// How a new wrapper invokes fleetgate: by name when it is on PATH, else by this binary's
/// absolute path; with `--config FILE` when the roster is not the default path's, since a
/// member reads the default roster otherwise.
fn launcher(scope: &Scope<'_>) -> Launcher {
    let command = if scope.exists("fleetgate") {
        "fleetgate".to_owned()
    } else {
        std::env::current_exe().map_or_else(|_| "fleetgate".into(), |p| p.display().to_string())
    };
    Launcher { command, config: scope.roster.config.map(str::to_owned) }
}

/// The roster file a member's wrapper must name: this roster's, absolute, unless it is the
/// default path's (or the built-in roster), which a wrapper without `--config` reads.
fn roster_config(ctx: &Ctx) -> Option<String> {
    let default = fleetgate_host::paths::default_config_path(&ctx.env).and_then(|p| std::path::absolute(p).ok());
    ctx.config
        .path
        .as_deref()
        .and_then(|p| std::path::absolute(p).ok())
        .filter(|p| Some(p) != default.as_ref())
        .map(|p| p.display().to_string())
}

fn file_errors(surveyed: &[Surveyed]) -> Vec<Value> {
    report::file_errors(surveyed.iter().map(|s| &s.report))
}

/// Errors go to stderr too, one line each: exit 1 always says why there.
fn exit_for(errors: &[Value], findings: usize) -> Exit {
    for e in errors {
        eprintln!("fleetgate: doctor: {}", shown(&report::error_line(e), usize::MAX));
    }
    if !errors.is_empty() {
        Exit::Failure
    } else if findings > 0 {
        Exit::No
    } else {
        Exit::Ok
    }
}

fn all_findings(surveyed: &[Surveyed]) -> Vec<&Finding> {
    surveyed.iter().flat_map(|s| &s.report.findings).collect()
}

/// What the roster lets through (lifted invariants; principals that may hold an author's and
/// a reviewer's profile), read from the roster and its tokens file.
fn policy_notes(ctx: &Ctx) -> (fleetgate_control::policy::PolicyNotes, Option<String>) {
    let (tokens, unread) = match &ctx.config.http.tokens_file {
        Some(path) => match fleetgate_gateway::Principals::read(path) {
            Ok(p) => (Some(p), None),
            Err(e) => (None, Some(e.to_string())),
        },
        None => (None, None),
    };
    (fleetgate_control::policy::notes(&ctx.config, tokens.as_ref()), unread)
}

fn report(
    ctx: &Ctx,
    surveyed: &[Surveyed],
    (workflows, workflow_errors): &(Vec<fleetgate_doctor::workflows::WorkflowFinding>, Vec<Value>),
) -> Reply {
    let findings = all_findings(surveyed);
    let mut errors = file_errors(surveyed);
    errors.extend(workflow_errors.iter().cloned());
    let (notes, unread) = policy_notes(ctx);
    if let Some(e) = unread {
        errors.push(
            json!({ "file": ctx.config.http.tokens_file.as_ref().map(|p| p.display().to_string()), "message": e }),
        );
    }
    // A principal whose second session counts as independent is a finding; a lift is the
    // operator's choice, named, not counted.
    let policy_findings = if notes.principals_count_as_independent { notes.principals.len() } else { 0 };
    // A workflow that runs unprotected branches' code with a write token is a finding too.
    let policy_findings = policy_findings + workflows.len();
    let fixable = findings.iter().filter(|f| f.fixable).count();
    let mut text: Vec<String> = surveyed.iter().map(|s| report::client_text(&s.report)).collect();
    text.extend(notes.lines().into_iter().map(|l| format!("roster: {}", shown(&l, usize::MAX))));
    text.extend(notes.keywords.as_ref().map(|k| format!("forge: {}", shown(&k.line(), usize::MAX))));
    text.extend(workflows.iter().map(|w| format!("workflow: {}", shown(&w.message, usize::MAX))));
    text.push(if findings.is_empty() && errors.is_empty() && policy_findings == 0 {
        "clean: every client's configuration matches the roster".to_owned()
    } else {
        let unreadable = match errors.len() {
            0 => String::new(),
            n => format!("; {n} file(s) cannot be read"),
        };
        format!(
            "{} finding(s), {fixable} fixable (fleetgate doctor --fix){unreadable}",
            findings.len() + policy_findings
        )
    });
    let value = json!({
        "clean": findings.is_empty() && errors.is_empty() && policy_findings == 0,
        "policy": notes,
        "workflows": workflows,
        "env_prefix": ctx.config.env_prefix,
        "clients": surveyed.iter().map(|s| &s.report).collect::<Vec<_>>(),
        "findings": findings,
        "finding_count": findings.len(),
        "errors": errors,
    });
    let exit = exit_for(&errors, findings.len() + policy_findings);
    Reply { value, text: text.join("\n"), exit }
}

fn fix(ctx: &Ctx, scope: &Scope<'_>, surveyed: Vec<Surveyed>, write: bool) -> Reply {
    let fleetgate = launcher(scope);
    let mut errors = file_errors(&surveyed);
    let mut changes = Vec::new();
    for s in &surveyed {
        let (changed, failed) = repair::changes(&s.report, &s.files, &s.raw, &scope.layout.project, &fleetgate);
        changes.extend(changed);
        errors.extend(failed.into_iter().map(|(file, message)| json!({ "file": file, "message": message })));
    }
    let stamp: String = ctx.clock.now().to_string().chars().filter(|c| !matches!(c, '-' | ':')).collect();
    let mut shown = Vec::new();
    let mut text = Vec::new();
    for c in &changes {
        let path = c.path.display().to_string();
        let d = diff::unified(&path, &String::from_utf8_lossy(&c.original), &c.updated);
        text.push(d.clone());
        let (written, backup) = if write {
            match apply::apply(c, &stamp, &mut |_| {}) {
                Ok(b) => (true, Some(b.display().to_string())),
                Err(e) => {
                    errors.push(json!({ "file": path, "message": e.message }));
                    (false, None)
                }
            }
        } else {
            (false, None)
        };
        shown.push(json!({ "file": path, "diff": d, "written": written, "backup": backup }));
    }
    let after: Vec<Surveyed> =
        if write { surveyed.iter().map(|s| scope.survey(s.report.id)).collect() } else { surveyed };
    let remaining = all_findings(&after);
    let open: Vec<&&Finding> = remaining.iter().filter(|f| write || !f.fixable).collect();
    let written = shown.iter().filter(|c| c["written"] == true).count();
    text.push(match (write, changes.len()) {
        (_, 0) => "nothing to change".to_owned(),
        (false, n) => format!("dry run: {n} file(s) would change; run with --apply to write them"),
        (true, n) => format!("wrote {written} of {n} file(s), each backed up beside itself"),
    });
    if !open.is_empty() {
        text.push(format!("{} finding(s) --fix does not repair:", open.len()));
        text.extend(open.iter().map(|f| report::finding_line(f)));
    }
    let value = json!({
        "applied": write,
        "changes": shown,
        "findings": remaining,
        "errors": errors,
        "clean": remaining.is_empty() && errors.is_empty(),
    });
    let pending = if write { remaining.len() } else { remaining.len() + changes.len() };
    let exit = exit_for(&errors, pending);
    Reply { value, text: text.join("\n"), exit }
}

fn snippet_reply(ctx: &Ctx, scope: &Scope<'_>, s: &Surveyed, downstream: &[String]) -> Reply {
    let client = s.report.id;
    // The downstream as the client already runs it in the file the block is
    // for (the first, user-scope one), unless one is given; the wrapper is
    // always the doctor's own, never a command read from a file.
    let mut from = None;
    let mut argv = downstream.to_vec();
    let fleetgate = launcher(scope);
    if argv.is_empty()
        && let Some((running, profile)) = repair::running_downstream(&s.report, &s.files)
    {
        argv = running;
        from = ctx.config.member(&profile);
    }
    let key = key_name(EnvKey::McpClient, &ctx.config.env_prefix);
    let block = snippet::snippet(client, &ctx.config.members, &key, &fleetgate, &argv, from);
    let file: PathBuf = locations(client, &scope.layout).remove(0).path;
    let format = if matches!(s.files[0].source.format, Format::Toml) { "toml" } else { "json" };
    let value =
        json!({ "client": client.name(), "file": file.display().to_string(), "format": format, "snippet": block });
    Reply { value, text: block.trim_end().to_owned(), exit: Exit::Ok }
}
