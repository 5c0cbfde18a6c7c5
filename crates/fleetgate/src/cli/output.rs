//! What a command hands back to `main`, and the documented exit codes.

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

/// A fixed-width table for the readable forms.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  "));
            }
        }
        out.trim_end().to_owned()
    };
    let mut out = vec![line(headers.to_vec())];
    out.extend(rows.iter().map(|r| line(r.iter().map(String::as_str).collect())));
    out.join("\n")
}

/// Parse an operator-typed number, naming the flag when it is not one.
pub fn parse_flag<T: std::str::FromStr>(flag: &str, value: &str, expected: &str) -> anyhow::Result<T> {
    value.trim().parse().map_err(|_| anyhow::anyhow!("invalid {flag} {value:?}: expected {expected}"))
}
