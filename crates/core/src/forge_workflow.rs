//! The workflow's reading of a forge server's calls and answers (SPEC §10): which pull
//! request a call names, which review verdict it carries, how the PR's current head is read
//! through the server's own read tool, and what that read answers. The dialect is the
//! official Gitea MCP server's (gitea-mcp's go-sdk generation: `owner`, `repo`,
//! `pull_number`; the read is `pull_request_read {method: "get"}` answering the Gitea API's
//! pull-request object as JSON text; see `crates/fleetgate/src/forge_fixture/GITEA_MCP.md`),
//! read leniently where versions differ (the v1.0 line's `index`, a number or a numeric
//! string; `state` / `event` for the verdict).

use crate::workflow::{PrRef, ReviewVerdict};
use serde_json::{Map, Value};

/// The pull request a call names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrTarget {
    /// Repository owner (user or organisation).
    pub owner: String,
    /// Repository name.
    pub repo: String,
    /// The PR number.
    pub pr: u64,
}

impl PrTarget {
    /// The store key of this PR under the fleet's forge remote.
    pub fn key(&self, remote: &str) -> PrRef {
        PrRef { binding: format!("{remote}/{}/{}", self.owner, self.repo), pr: self.pr }
    }
}

/// The argument names a PR number goes by, in the order they are tried.
pub const PR_NUMBER_ARGS: [&str; 4] = ["pull_number", "index", "number", "pr"];

fn number(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn text(args: &Map<String, Value>, key: &str) -> Option<String> {
    args.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned)
}

/// The PR a call's arguments name, when they name owner, repo and a number.
pub fn pr_target(args: &Map<String, Value>) -> Option<PrTarget> {
    let pr = PR_NUMBER_ARGS.iter().find_map(|k| args.get(*k).and_then(number))?;
    Some(PrTarget { owner: text(args, "owner")?, repo: text(args, "repo")?, pr })
}

/// The review verdict a review call carries (`state` or `event`: `APPROVED`/`APPROVE`,
/// `REQUEST_CHANGES`/`CHANGES_REQUESTED`, any case), or none for a comment, a dismissal and
/// every other method.
pub fn review_verdict(args: &Map<String, Value>) -> Option<ReviewVerdict> {
    ["state", "event"].iter().find_map(|k| {
        let v = args.get(*k)?.as_str()?.to_ascii_uppercase();
        match v.as_str() {
            "APPROVED" | "APPROVE" => Some(ReviewVerdict::Approve),
            "REQUEST_CHANGES" | "CHANGES_REQUESTED" => Some(ReviewVerdict::RequestChanges),
            _ => None,
        }
    })
}

/// The read tool and its arguments that answer a PR's current state.
pub fn head_read(target: &PrTarget) -> (&'static str, Map<String, Value>) {
    let mut args = Map::new();
    args.insert("method".into(), Value::from("get"));
    args.insert("owner".into(), Value::from(target.owner.clone()));
    args.insert("repo".into(), Value::from(target.repo.clone()));
    args.insert("pull_number".into(), Value::from(target.pr));
    ("pull_request_read", args)
}

/// What the forge says of a PR now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrFacts {
    /// The head commit.
    pub head: String,
    /// The target branch.
    pub base_ref: Option<String>,
    /// The target branch's head, when answered.
    pub base_sha: Option<String>,
    /// `open` or `closed`, when answered.
    pub state: Option<String>,
    /// Merged.
    pub merged: bool,
}

impl PrFacts {
    /// Merged or closed: its leases may be swept (`fleetgate pr release --stale`).
    pub fn is_done(&self) -> bool {
        self.merged || self.state.as_deref() == Some("closed")
    }
}

fn pointer_str(v: &Value, pointers: &[&str]) -> Option<String> {
    pointers.iter().find_map(|p| v.pointer(p)?.as_str().filter(|s| !s.is_empty()).map(str::to_owned))
}

/// Read the forge's answer about a PR. Without a head commit the answer is refused: the
/// workflow never guesses a head.
pub fn pr_facts(answer: &Value) -> Result<PrFacts, String> {
    let head = pointer_str(answer, &["/head/sha", "/head_sha"])
        .ok_or_else(|| "the forge's answer names no head commit (head.sha)".to_owned())?;
    if !(7..=64).contains(&head.len()) || !head.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("the forge's answer names head {head:?}, which is not a commit id"));
    }
    Ok(PrFacts {
        head,
        base_ref: pointer_str(answer, &["/base/ref"]),
        base_sha: pointer_str(answer, &["/base/sha"]),
        state: pointer_str(answer, &["/state"]),
        merged: answer.get("merged").and_then(Value::as_bool).unwrap_or(false),
    })
}

/// The head a merge call says it expects (`head_commit_id`), when it names one.
pub fn expected_head(args: &Map<String, Value>) -> Option<&str> {
    args.get("head_commit_id").and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// The number of a PR a create call's answer names.
pub fn created_pr(answer: &Value) -> Option<u64> {
    ["/number", "/index"].iter().find_map(|p| answer.pointer(p).and_then(number))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn targets_are_read_leniently_and_never_guessed() {
        let t = pr_target(&args(json!({"owner": "o", "repo": "r", "index": 976}))).unwrap();
        assert_eq!((t.pr, t.key("prgs").to_string()), (976, "prgs/o/r#976".to_owned()));
        assert_eq!(pr_target(&args(json!({"owner": "o", "repo": "r", "pull_number": "12"}))).unwrap().pr, 12);
        assert_eq!(pr_target(&args(json!({"owner": "o", "repo": "r"}))), None);
        assert_eq!(pr_target(&args(json!({"owner": "o", "index": 1}))), None);
        assert_eq!(pr_target(&args(json!({"owner": "o", "repo": "r", "index": -1}))), None);
    }

    #[test]
    fn verdicts_by_state_or_event() {
        assert_eq!(review_verdict(&args(json!({"state": "APPROVED"}))), Some(ReviewVerdict::Approve));
        assert_eq!(review_verdict(&args(json!({"event": "request_changes"}))), Some(ReviewVerdict::RequestChanges));
        assert_eq!(review_verdict(&args(json!({"state": "COMMENT"}))), None);
        assert_eq!(review_verdict(&args(json!({"method": "delete"}))), None);
    }

    #[test]
    fn a_head_must_be_a_commit_id() {
        let f = pr_facts(&json!({"head": {"sha": "1a38ef95"}, "base": {"ref": "main"}, "state": "open"})).unwrap();
        assert_eq!((f.head.as_str(), f.base_ref.as_deref(), f.is_done()), ("1a38ef95", Some("main"), false));
        assert!(pr_facts(&json!({"head": {"ref": "feature"}})).unwrap_err().contains("no head commit"));
        assert!(pr_facts(&json!({"head": {"sha": "main; rm"}})).unwrap_err().contains("not a commit id"));
        assert!(pr_facts(&json!({"head": {"sha": "abcdef0"}, "merged": true})).unwrap().is_done());
        assert_eq!(created_pr(&json!({"number": 7})), Some(7));
    }
}
