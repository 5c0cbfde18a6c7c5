//! What a command hands back to `main`, and the documented exit codes.

use fleetgate_core::env::{EnvKey, key_name};
pub use fleetgate_core::text::{MAX_CELL_CHARS, shown, table, terminal_text};
use serde::Serialize;
use std::process::ExitCode;

/// Exit codes: the contract scripts rely on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Success, or the answer is yes.
    Ok = 0,
    /// The command could not be carried out (store, config, value).
    Failure = 1,
    /// The command line was malformed.
    Usage = 2,
    /// The command worked and the answer is no (refused, blocked, unsupported).
    No = 3,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e as u8)
    }
}

/// A command's answer: one JSON object, its readable form, and the exit code.
#[derive(Debug)]
pub struct Reply {
    /// Printed with `--json`.
    pub value: serde_json::Value,
    /// Printed otherwise.
    pub text: String,
    /// The exit code.
    pub exit: Exit,
}

impl Reply {
    /// A reply from any serialisable answer.
    pub fn new(value: &impl Serialize, text: String, exit: Exit) -> Self {
        let value = serde_json::to_value(value).unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }));
        Self { value, text, exit }
    }
}

/// What a prune deleted: `{"pruned": [ids], "count": N, "older_than": "7d", "older_than_seconds": S}`,
/// or the ids and a count line.
pub fn pruned(rows: &str, older_than: &str, older_than_seconds: i64, ids: Vec<String>) -> Reply {
    let mut text: Vec<String> = ids.iter().map(|id| shown(id, MAX_CELL_CHARS)).collect();
    text.push(format!("{} {rows} pruned (older than {})", ids.len(), shown(older_than, MAX_CELL_CHARS)));
    Reply {
        value: serde_json::json!({
            "pruned": ids,
            "count": ids.len(),
            "older_than": older_than,
            "older_than_seconds": older_than_seconds,
        }),
        text: text.join("\n"),
        exit: Exit::Ok,
    }
}

/// `--older-than`'s age in seconds, or the error naming the flag.
pub fn older_than(value: &str) -> anyhow::Result<i64> {
    fleetgate_core::prune::parse_age(value).map_err(|why| anyhow::anyhow!("invalid --older-than: {why}"))
}

/// A token from the environment key `key` (unprefixed): none when unset; an error when it is
/// empty, or not printable ASCII, or holds one of `forbidden` (`rule` says which, and why).
pub fn token(ctx: &super::context::Ctx, key: EnvKey, forbidden: &[u8], rule: &str) -> anyhow::Result<Option<String>> {
    let name = key_name(key, "");
    match ctx.env.raw(key, "") {
        None => Ok(None),
        Some(t) if t.trim().is_empty() => anyhow::bail!("{name} is set but empty: set a token, or unset it"),
        Some(t) if !t.bytes().all(|b| b.is_ascii_graphic() && !forbidden.contains(&b)) => {
            anyhow::bail!("{name} must be printable ASCII {rule}")
        }
        Some(t) => Ok(Some(t.to_owned())),
    }
}

/// Parse an operator-typed number, naming the flag when it is not one.
pub fn parse_flag<T: std::str::FromStr>(flag: &str, value: &str, expected: &str) -> anyhow::Result<T> {
    value.trim().parse().map_err(|_| anyhow::anyhow!("invalid {flag} {value:?}: expected {expected}"))
}
