//! What `--fix` does, as data: the findings of a client → the edits of each
//! of its files. Pure.
//!
//! The repair touches only roster members' entries: a bare launch is wrapped
//! in `fleetgate serve --profile P -- <original command…>`; unsupported
//! `<PREFIX>*` env keys are removed; `<PREFIX>MCP_CLIENT` is set to the
//! client's name; a member the client lacks, when it defines others, is added
//! as a copy of a defined member with that member's profile and namespace
//! replaced. It never removes a definition (duplicates are the operator's
//! call), never changes an unrelated server, never writes a value it did not
//! find (no secret is invented: an added member carries its sibling's env).

use super::findings::{ClientReport, FindingKind, template};
use std::collections::BTreeMap;

/// How a wrapper invokes fleetgate: the doctor's own choice of command, and the roster the
/// wrapped member must read when it is not the one at the default path (`fleetgate --config
/// FILE serve …`), so a roster written elsewhere is the one its members are judged by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launcher {
    /// `fleetgate`, or this binary's absolute path when none is on PATH.
    pub command: String,
    /// The roster file, absolute; `None` for the default path (or the built-in roster).
    pub config: Option<String>,
}

impl Launcher {
    /// `command` reading the default roster.
    pub fn new(command: &str) -> Self {
        Self { command: command.to_owned(), config: None }
    }
}

/// One change to one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Edit {
    /// Launch entry `entry` through `fleetgate serve --profile profile --`.
    Wrap {
        /// Index into the file's entries.
        entry: usize,
        /// The member's profile.
        profile: String,
        /// How to invoke fleetgate.
        fleetgate: Launcher,
    },
    /// Remove `key` from the entry's `env`.
    RemoveEnv {
        /// Index into the file's entries.
        entry: usize,
        /// The key.
        key: String,
    },
    /// Set `key` to `value` in the entry's `env` (creating `env`).
    SetEnv {
        /// Index into the file's entries.
        entry: usize,
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// Add an entry named `name`: a copy of `template` (after its own edits)
    /// with every argument and env value in `replace` swapped.
    Add {
        /// Index into the file's entries: the entry copied.
        template: usize,
        /// The new entry's name.
        name: String,
        /// `(from, to)` pairs: the template's profile and namespace → the new member's.
        replace: Vec<(String, String)>,
    },
}

impl Edit {
    /// Edits to existing entries run before additions, so a copy carries its
    /// template's repairs.
    pub fn is_add(&self) -> bool {
        matches!(self, Edit::Add { .. })
    }
}

/// The edits of each of the client's files (keyed by the file's index in the
/// client's file list), in application order. `fleetgate` is how to invoke
/// fleetgate: the doctor's own choice, never a command read from a file (a
/// project's wrapper must not reach a user-scope file).
pub fn plan(report: &ClientReport, fleetgate: &Launcher) -> BTreeMap<usize, Vec<Edit>> {
    let mut edits: BTreeMap<usize, Vec<Edit>> = BTreeMap::new();
    for f in report.findings.iter().filter(|f| f.fixable) {
        let profile = f.profile.clone().unwrap_or_default();
        let (file, edit) = match (f.kind, f.at) {
            (FindingKind::Bare | FindingKind::OtherRoster, Some((file, entry))) => {
                (file, Edit::Wrap { entry, profile, fleetgate: fleetgate.clone() })
            }
            (FindingKind::UnsupportedEnv, Some((file, entry))) => {
                (file, Edit::RemoveEnv { entry, key: f.key.clone().unwrap_or_default() })
            }
            (FindingKind::ClientIdentityMissing | FindingKind::ClientIdentityWrong, Some((file, entry))) => (
                file,
                Edit::SetEnv { entry, key: f.key.clone().unwrap_or_default(), value: report.id.identity().to_owned() },
            ),
            (FindingKind::Missing, _) => {
                let Some((sibling, def)) = template(report, None) else { continue };
                let Some(member) = report.members.iter().find(|m| m.profile == profile) else { continue };
                let replace = vec![
                    (sibling.profile.clone(), member.profile.clone()),
                    (sibling.namespace.clone(), member.namespace.clone()),
                ];
                (def.at.0, Edit::Add { template: def.at.1, name: member.namespace.clone(), replace })
            }
            _ => continue,
        };
        edits.entry(file).or_default().push(edit);
    }
    for list in edits.values_mut() {
        list.sort_by_key(Edit::is_add);
    }
    edits
}

/// `from` → `to` in one argument: the whole value, or the value of a
/// `--flag=VALUE` form.
pub fn replace_token(value: &str, replace: &[(String, String)]) -> String {
    for (from, to) in replace {
        if value == from {
            return to.clone();
        }
        if let Some((flag, v)) = value.split_once('=')
            && v == from
        {
            return format!("{flag}={to}");
        }
    }
    value.to_owned()
}

/// The command and arguments a wrap puts behind `fleetgate serve`: an entry's own, or, for
/// one wrapped already, the downstream after its `--`.
pub fn unwrapped(command: &str, args: &[String]) -> (String, Vec<String>) {
    match crate::findings::fleetgate_serve(command, args) {
        Some(serve) if !serve.downstream.is_empty() => (serve.downstream[0].clone(), serve.downstream[1..].to_vec()),
        _ => (command.to_owned(), args.to_vec()),
    }
}

/// The argv of a wrapped launch: `[--config FILE] serve --profile P -- command args…`.
pub fn wrapped_args(launcher: &Launcher, profile: &str, command: &str, args: &[String]) -> Vec<String> {
    let mut out: Vec<String> = match &launcher.config {
        Some(file) => vec!["--config".into(), file.clone()],
        None => Vec::new(),
    };
    out.extend(["serve", "--profile", profile, "--", command].iter().map(|s| (*s).to_owned()));
    out.extend(args.iter().cloned());
    out
}

/// Every changed file of one client (its `files`, each read as `raw` bytes): the repaired
/// text, re-read as the client would read it — a repair its own reader refuses is an error
/// (`(file, why)`), never a change. A project's file must stay within `project`.
pub fn changes(
    report: &ClientReport,
    files: &[crate::findings::FileInput],
    raw: &[Option<Vec<u8>>],
    project: &std::path::Path,
    fleetgate: &Launcher,
) -> (Vec<crate::apply::Change>, Vec<(String, String)>) {
    let (mut out, mut errors) = (Vec::new(), Vec::new());
    for (f, edits) in plan(report, fleetgate) {
        let (crate::findings::FileState::Parsed(parsed), Some(raw)) = (&files[f].state, &raw[f]) else { continue };
        let source = &files[f].source;
        let text = String::from_utf8_lossy(raw);
        let repaired = crate::edit::apply(&text, source, parsed, &edits).and_then(|t| {
            crate::read::parse(&t, source)
                .map(|_| t)
                .map_err(|e| crate::edit::EditError::WouldNotParse(format!("{e:?}")))
        });
        match repaired {
            Ok(updated) if updated != text => {
                let within = source.in_project().then(|| project.to_owned());
                out.push(crate::apply::Change { path: source.path.clone(), original: raw.clone(), updated, within });
            }
            Ok(_) => {}
            Err(e) => errors.push((source.path.display().to_string(), format!("cannot repair it: {e}"))),
        }
    }
    (out, errors)
}

/// The downstream a client already runs a member's gateway (or the bare server) with, in
/// its first (user-scope) file: the argv after `fleetgate serve … --`, else the entry's own
/// command line; and the member's profile. `None` when no member is defined there.
pub fn running_downstream(
    report: &ClientReport,
    files: &[crate::findings::FileInput],
) -> Option<(Vec<String>, String)> {
    let (member, d) = template(report, Some(0))?;
    let crate::findings::FileState::Parsed(parsed) = &files[d.at.0].state else { return None };
    let crate::read::Launch::Stdio { command, args } = &parsed.entries[d.at.1].launch else { return None };
    let argv = match crate::findings::fleetgate_serve(command, args) {
        Some(serve) => serve.downstream,
        None => std::iter::once(command.clone()).chain(args.iter().cloned()).collect(),
    };
    Some((argv, member.profile.clone()))
}
