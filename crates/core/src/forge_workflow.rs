//! The workflow's reading of a forge server's calls and answers: which pull
//! request a call names, which review verdict it carries, how the PR's current head is read
//! through the server's own read tool, and what that read answers. The dialect is the
//! official Gitea MCP server's (gitea-mcp's go-sdk generation: `owner`, `repo`,
//! `pull_number`; the read is `pull_request_read {method: "get"}` answering the Gitea API's
//! pull-request object as JSON text; see `crates/testkit/src/forge/GITEA_MCP.md`).
//! The arguments read here are the gate's canonical ones (`forge_call`): one key per thing
//! (the v1.0 line's `index` where that generation declares it), integers as integers. The
//! verdict is read exactly as the server and Gitea read it: `state`, only for the methods
//! that submit one (`create`, `submit`), only the literals Gitea knows.

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
    /// The store key of this PR under the fleet's forge remote. Gitea resolves owner and
    /// repository names case-insensitively, so the key is lowercase: `ORG/Repo` and
    /// `org/repo` are one PR's history.
    pub fn key(&self, remote: &str) -> PrRef {
        let binding = format!("{remote}/{}/{}", self.owner.to_lowercase(), self.repo.to_lowercase());
        PrRef { binding, pr: self.pr }
    }

    /// A store key (`remote/owner/repo` and the number) back into the PR to read; `None`
    /// when the key is not under `remote`.
    pub fn from_key(key: &PrRef, remote: &str) -> Option<Self> {
        let rest = key.binding.strip_prefix(remote)?.strip_prefix('/')?;
        let (owner, repo) = rest.split_once('/')?;
        Some(Self { owner: owner.to_owned(), repo: repo.to_owned(), pr: key.pr })
    }
}

/// The argument names a PR number goes by: the go-sdk generation's, then the v1.0 line's.
/// A call sends one of them (the gate refuses both, `ambiguous_arguments`).
pub const PR_NUMBER_ARGS: [&str; 2] = ["pull_number", "index"];

/// The argument naming an issue (or a PR: one sequence) in `issue_write`, and the v1.0 line's.
pub const ISSUE_NUMBER_ARGS: [&str; 2] = ["issue_number", "index"];

/// The argument of a merge the forge checks atomically against the PR's head (409 when it
/// moved): the gateway sets it to the head it judged.
pub const MERGE_HEAD_KEY: &str = "head_commit_id";

/// The argument of a review naming the commit it is given at: the gateway sets it to the
/// head it judged.
pub const REVIEW_COMMIT_KEY: &str = "commit_id";

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

/// The review verdict a review call carries, read as the server and Gitea read it: the
/// `state` of a `create` or `submit` (other methods submit no verdict, whatever they
/// carry), exactly `APPROVED` or `REQUEST_CHANGES` (Gitea compares the literal; any other
/// value is a comment or a pending review). `event` is not a key the server reads.
pub fn review_verdict(args: &Map<String, Value>) -> Option<ReviewVerdict> {
    let method = args.get("method").and_then(Value::as_str)?;
    if !matches!(method, "create" | "submit") {
        return None;
    }
    match args.get("state").and_then(Value::as_str)? {
        "APPROVED" => Some(ReviewVerdict::Approve),
        "REQUEST_CHANGES" => Some(ReviewVerdict::RequestChanges),
        _ => None,
    }
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
    /// The repository's canonical `owner/name` (`base.repo.full_name`), when answered.
    pub repo: Option<String>,
    /// The head branch (`head.ref`), when answered.
    pub head_ref: Option<String>,
    /// The head branch's repository (`head.repo.full_name`), when answered: another than
    /// the base's for a PR from a fork.
    pub head_repo: Option<String>,
}

impl PrFacts {
    /// `target` named as the forge names its repository (`base.repo.full_name`): Gitea
    /// resolves another spelling, or a renamed repository's old name, to the same one, so
    /// the PR's records key on the forge's name.
    pub fn canonical(&self, target: &PrTarget) -> PrTarget {
        match self.repo.as_deref().and_then(|r| r.split_once('/')) {
            Some((owner, repo)) if !owner.is_empty() && !repo.is_empty() => {
                PrTarget { owner: owner.to_owned(), repo: repo.to_owned(), pr: target.pr }
            }
            _ => target.clone(),
        }
    }

    /// Open, merged or closed.
    pub fn forge_state(&self) -> crate::workflow::ForgeState {
        use crate::workflow::ForgeState;
        if self.merged {
            ForgeState::Merged
        } else if self.state.as_deref() == Some("closed") {
            ForgeState::Closed
        } else {
            ForgeState::Open
        }
    }

    /// What [`crate::workflow::assess`] takes of it.
    pub fn at(&self) -> (&str, Option<&str>, crate::workflow::ForgeState) {
        (&self.head, self.base_ref.as_deref(), self.forge_state())
    }

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
        repo: pointer_str(answer, &["/base/repo/full_name"]),
        head_ref: pointer_str(answer, &["/head/ref"]),
        head_repo: pointer_str(answer, &["/head/repo/full_name"]),
    })
}

/// A forge read's error text says the PR (or issue) does not exist.
pub fn is_not_found(error: &str) -> bool {
    error.contains("couldn't be found") || error.contains("404") || error.to_ascii_lowercase().contains("not found")
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
    fn a_store_key_reads_back_into_its_pr_only_under_its_remote() {
        let target = PrTarget { owner: "Org".into(), repo: "Repo".into(), pr: 7 };
        let key = target.key("gitea");
        assert_eq!(
            PrTarget::from_key(&key, "gitea"),
            Some(PrTarget { owner: "org".into(), repo: "repo".into(), pr: 7 })
        );
        assert_eq!(PrTarget::from_key(&key, "other"), None);
        assert_eq!(PrTarget::from_key(&PrRef { binding: "gitea/orgonly".into(), pr: 1 }, "gitea"), None);
    }

    #[test]
    fn targets_are_read_leniently_and_never_guessed() {
        let t = pr_target(&args(json!({"owner": "o", "repo": "r", "index": 976}))).unwrap();
        assert_eq!((t.pr, t.key("prgs").to_string()), (976, "prgs/o/r#976".to_owned()));
        let upper = pr_target(&args(json!({"owner": "ORG", "repo": "Repo", "pull_number": 5}))).unwrap();
        assert_eq!(upper.key("prgs").to_string(), "prgs/org/repo#5", "one history however the name is spelled");
        assert_eq!(pr_target(&args(json!({"owner": "o", "repo": "r", "pull_number": "12"}))).unwrap().pr, 12);
        assert_eq!(pr_target(&args(json!({"owner": "o", "repo": "r"}))), None);
        assert_eq!(pr_target(&args(json!({"owner": "o", "index": 1}))), None);
        assert_eq!(pr_target(&args(json!({"owner": "o", "repo": "r", "index": -1}))), None);
    }

    #[test]
    fn verdicts_only_from_the_key_and_methods_the_server_reads() {
        let v = |a: Value| review_verdict(&args(a));
        assert_eq!(v(json!({"method": "create", "state": "APPROVED"})), Some(ReviewVerdict::Approve));
        assert_eq!(v(json!({"method": "submit", "state": "REQUEST_CHANGES"})), Some(ReviewVerdict::RequestChanges));
        assert_eq!(v(json!({"method": "create", "state": "COMMENT", "event": "APPROVED"})), None);
        assert_eq!(v(json!({"method": "dismiss", "state": "APPROVED"})), None);
        assert_eq!(v(json!({"method": "create", "state": "approved"})), None, "Gitea compares the literal");
        assert_eq!(v(json!({"state": "APPROVED"})), None);
        assert!(is_not_found("get o/r/pr/3 err: The target couldn't be found."));
    }

    #[test]
    fn a_head_must_be_a_commit_id() {
        let f = pr_facts(&json!({"head": {"sha": "1a38ef95"}, "base": {"ref": "main"}, "state": "open"})).unwrap();
        assert_eq!((f.head.as_str(), f.base_ref.as_deref(), f.is_done()), ("1a38ef95", Some("main"), false));
        assert!(pr_facts(&json!({"head": {"ref": "feature"}})).unwrap_err().contains("no head commit"));
        assert!(pr_facts(&json!({"head": {"sha": "main; rm"}})).unwrap_err().contains("not a commit id"));
        assert!(pr_facts(&json!({"head": {"sha": "abcdef0"}, "merged": true})).unwrap().is_done());
        let renamed = pr_facts(&json!({"head": {"sha": "abcdef0"}, "base": {"repo": {"full_name": "org/new-name"}}}));
        let asked = PrTarget { owner: "org".into(), repo: "old-name".into(), pr: 3 };
        let canonical = renamed.unwrap().canonical(&asked);
        assert_eq!((canonical.repo.as_str(), canonical.pr), ("new-name", 3), "the forge's name keys the PR");
        assert_eq!(created_pr(&json!({"number": 7})), Some(7));
    }
}
