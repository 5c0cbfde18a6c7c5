//! GitHub's REST API over HTTP, as much of it as the gateway calls itself, on the same forge
//! (the bare repository and the ledger every fixture process of a fleet shares):
//! `fleetgate-forge-fixture --surface github-mcp --rest-listen 127.0.0.1:0 --token TOKEN=LOGIN…`.
//! The address is printed on stdout (`listening on http://ADDR`) and served until the process
//! is killed. Paths are taken with or without GitHub Enterprise Server's `/api/v3` prefix (a
//! loopback `GITHUB_HOST` is read as an Enterprise host).
//!
//! * `PUT /repos/O/R/pulls/N/merge` — GitHub's merge: `sha` must be the PR's head (409 "Head
//!   branch was modified…" otherwise), 405 when it is not open or conflicts, 404 for no such
//!   PR, 422 for a `merge_method` it does not make; 200 `{sha, merged, message}`;
//! * `GET /repos/O/R/pulls/N` — the PR.
//!
//! Every request needs a token the fixture was given (`Authorization: Bearer T` or `token T`):
//! 401 "Requires authentication" without one, "Bad credentials" for another. The merge is
//! recorded as the token's login (the commit's identity is the fixture's `--user`).
//! `--variant race-merge` pushes to the head branch while a merge is under way, as the MCP
//! surface's merge does.

use super::Forge;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

/// The largest request body read.
const MAX_BODY: usize = 1024 * 1024;

/// Serve GitHub's REST API for `forge` on `listener`, one thread per connection, forever.
pub fn serve(forge: Arc<Forge>, tokens: Arc<Vec<(String, String)>>, listener: &TcpListener) {
    for stream in listener.incoming().flatten() {
        let (forge, tokens) = (Arc::clone(&forge), Arc::clone(&tokens));
        std::thread::spawn(move || {
            let _ = connection(&forge, &tokens, stream);
        });
    }
}

/// One request and its answer (the connection is closed after it).
fn connection(forge: &Forge, tokens: &[(String, String)], stream: TcpStream) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or_default().to_owned(), parts.next().unwrap_or_default().to_owned());
    let mut length = 0usize;
    let mut auth = None;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "authorization" => auth = Some(value.trim().to_owned()),
                _ => {}
            }
        }
    }
    let mut body = vec![0; length.min(MAX_BODY)];
    reader.read_exact(&mut body)?;
    let (status, answer) = answer(forge, tokens, &method, &path, auth.as_deref(), &body);
    let text = answer.to_string();
    let reason = match status {
        200 => "OK",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        422 => "Unprocessable Entity",
        _ => "Error",
    };
    let mut out = stream;
    write!(
        out,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{text}",
        text.len()
    )?;
    out.flush()
}

fn error(status: u16, message: &str) -> (u16, Value) {
    (status, json!({ "message": message, "documentation_url": "https://docs.github.com/rest" }))
}

/// The answer to one request.
fn answer(
    forge: &Forge,
    tokens: &[(String, String)],
    method: &str,
    path: &str,
    auth: Option<&str>,
    body: &[u8],
) -> (u16, Value) {
    let Some(given) = auth.and_then(|a| a.strip_prefix("Bearer ").or_else(|| a.strip_prefix("token "))) else {
        return error(401, "Requires authentication");
    };
    let Some(login) = tokens.iter().find(|(t, _)| t == given.trim()).map(|(_, l)| l.clone()) else {
        return error(401, "Bad credentials");
    };
    let path = path.split('?').next().unwrap_or_default();
    let path = path.strip_prefix("/api/v3").unwrap_or(path);
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (owner, repo, number, rest) = match segments.as_slice() {
        ["repos", owner, repo, "pulls", number, rest @ ..] => (*owner, *repo, *number, rest),
        _ => return error(404, "Not Found"),
    };
    let mut named = super::args::Args::new();
    named.insert("owner".into(), json!(owner));
    named.insert("repo".into(), json!(repo));
    let Ok(number) = number.parse::<i64>() else { return error(404, "Not Found") };
    if forge.check_repo(&named).is_err() {
        return error(404, "Not Found");
    }
    let done = match (method, rest) {
        ("GET", []) => super::github::rest_pull(forge, number),
        ("PUT", ["merge"]) => {
            let Ok(asked) = serde_json::from_slice::<Value>(if body.is_empty() { b"{}" } else { body }) else {
                return error(400, "Problems parsing JSON");
            };
            let text = |k: &str| asked.get(k).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
            let terms = super::github::MergeTerms {
                method: text("merge_method"),
                title: text("commit_title"),
                message: text("commit_message"),
                sha: text("sha"),
            };
            super::github::merge(forge, number, &login, &terms)
        }
        _ => return error(404, "Not Found"),
    };
    match done {
        Ok(value) => (200, value),
        Err((status, message)) => error(status, &message),
    }
}
