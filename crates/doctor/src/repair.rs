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
        fleetgate: String,
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
pub fn plan(report: &ClientReport, fleetgate: &str) -> BTreeMap<usize, Vec<Edit>> {
    let mut edits: BTreeMap<usize, Vec<Edit>> = BTreeMap::new();
    for f in report.findings.iter().filter(|f| f.fixable) {
        let profile = f.profile.clone().unwrap_or_default();
        let (file, edit) = match (f.kind, f.at) {
            (FindingKind::Bare, Some((file, entry))) => {
                (file, Edit::Wrap { entry, profile, fleetgate: fleetgate.to_owned() })
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

/// The argv of a wrapped launch: `serve --profile P -- command args…`.
pub fn wrapped_args(profile: &str, command: &str, args: &[String]) -> Vec<String> {
    let mut out: Vec<String> = ["serve", "--profile", profile, "--", command].iter().map(|s| (*s).to_owned()).collect();
    out.extend(args.iter().cloned());
    out
}
