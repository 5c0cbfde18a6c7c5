//! A third forge, written with the kit alone: its module is its server's vocabulary (a small
//! tool list, the keys it reads) and its forge's semantics (what a merge and an issue close
//! do); the pending-read scaffolding, the drive to `establish` / `evident`, the PR reads and
//! the reference page all come from the kit. Nothing here is copied from the Gitea or GitHub
//! dialects.

use super::{Call, Cx, Pending, Plot, Step, Vocabulary, head_branch, repo_or, strip, unknown_tool};
use crate::dialect::table::{Entry, NOBODY, Stated, Surface, read, write};
use crate::dialect::{
    ACTION_CLOSE, ACTION_MERGE, Dialect, DialectError, Op, PrTarget, Pushed, Schemas, Server, Unlisted, establish_with,
    number, text,
};
use crate::effect::{BranchMove, Effect, IssueChange, IssueEffect, MergeTerms, Move, PrChange, PrEffect, Read};
use crate::workflow::ReviewVerdict;
use serde_json::{Map, Value, json};

/// A made-up forge server: `get_pr`, `merge_pr`, `close_issue`, `list_things`.
#[derive(Debug)]
struct Toy;

static TOY: Toy = Toy;

static VOCABULARY: Vocabulary = Vocabulary {
    name: "toy-mcp",
    server: Server {
        title: "a toy forge server",
        process_match: &["toy-mcp"],
        launch: &["toy-mcp"],
        token_env: "TOY_TOKEN",
        token_flags: &[],
        host_env: "TOY_HOST",
        host_flags: &[],
        default_host: None,
        prefix: "toy",
        self_review: "the toy forge refuses an approval by the PR's author",
    },
    surface: SURFACE,
    matrix: MATRIX,
    alias_groups: &[],
    number_keys: &["number"],
    merge_pin: None,
    review_pin: None,
    pending_review_note: "the toy forge has no pending reviews",
    plot: Plot {
        create_branch: "make_branch",
        read_file: "get_file",
        write_file: ("put_file", "branch"),
        open: ("open_pr", None),
        approve: ("review_pr", "create", ("verdict", "approve")),
        merge: ("merge_pr", None, "style"),
        number: "number",
    },
};

const MATRIX: &[Entry] = &[
    read("read", "get_*"),
    read("list", "list_*"),
    write("merge", "merge_pr", &[], &["merger"]),
    write("close", "close_issue", &[], &["controller"]),
    write("other", "*", &[], NOBODY),
];

const SURFACE: Surface = Surface {
    intro: "# The toy dialect",
    readers: &[("get_pr", &[]), ("list_things", &[])],
    stated: &[
        Stated { tool: "merge_pr", method: "", effect: "lands the PR's head on its base", invariants: &[] },
        Stated { tool: "close_issue", method: "", effect: "closes an issue, or a PR", invariants: &[] },
    ],
    reviews: &[],
    review_effect: "",
    review_invariants: &[],
    plain: &[],
    texts: &[],
    outro: "That is all.",
};

fn pr_read(target: &PrTarget) -> Read {
    let mut read = super::read_on("get_pr", None, &target.owner, &target.repo);
    read.arguments.insert("number".into(), Value::from(target.pr));
    read
}

impl Dialect for Toy {
    fn vocabulary(&self) -> &'static Vocabulary {
        &VOCABULARY
    }
    fn grammar(&self) -> &crate::textref::Grammar {
        static GRAMMAR: crate::textref::Grammar = crate::textref::GITHUB;
        &GRAMMAR
    }
    /// The forge's semantics: a merge lands the head on the base the forge names; closing an
    /// issue number that is a PR closes the PR.
    fn state(&self, call: &Call<'_>, cx: Cx<'_>) -> Step<Effect> {
        let (owner, repo) = call.owner_repo();
        let here = call.here();
        let Some(n) = call.args.get("number").and_then(number) else {
            return match call.tool {
                "get_pr" | "list_things" => Ok(Effect::read()),
                tool => Ok(Effect::unknown(unknown_tool(self.name(), tool, call.method()))),
            };
        };
        match call.tool {
            "get_pr" | "list_things" => Ok(Effect::read()),
            "merge_pr" => {
                let facts = cx.pr(self, owner, repo, n)?;
                let base = facts.base_ref.clone().ok_or_else(|| Pending::Failed("no base".into()))?;
                let head = head_branch(&facts, n)?;
                let repo = repo_or(facts.repo.as_deref(), &here);
                Ok(Effect {
                    merge: Some(self.terms(n)),
                    branches: vec![BranchMove { repo, branch: strip(&base).to_owned(), how: Move::Merge { pr: n } }],
                    defaults: vec![head],
                    ..Effect::action(ACTION_MERGE)
                })
            }
            "close_issue" if cx.is_pr(self, owner, repo, n)? => {
                let change = PrChange::State { to: "closed".into(), by: "close_issue".into() };
                Ok(Effect { prs: vec![PrEffect { repo: here, pr: n, change }], ..Effect::action(ACTION_CLOSE) })
            }
            "close_issue" => {
                let change = IssueChange::State { to: "closed".into(), by: "close_issue".into() };
                Ok(Effect { issues: vec![IssueEffect { repo: here, issue: n, change }], ..Effect::write() })
            }
            tool => Ok(Effect::unknown(unknown_tool(self.name(), tool, call.method()))),
        }
    }
    fn shown(&self, call: &Call<'_>) -> Effect {
        match call.args.get("number").and_then(number) {
            Some(n) if call.tool == "merge_pr" => Effect { merge: Some(self.terms(n)), ..Effect::action(ACTION_MERGE) },
            _ => Effect::write(),
        }
    }
    fn pr_target(&self, _tool: &str, args: &Map<String, Value>) -> Option<PrTarget> {
        let pr = args.get("number").and_then(number)?;
        Some(PrTarget { owner: text(args, "owner")?.to_owned(), repo: text(args, "repo")?.to_owned(), pr })
    }
    fn review_verdict(&self, _tool: &str, _args: &Map<String, Value>) -> Option<ReviewVerdict> {
        None
    }
    fn review_is_pinned(&self, _tool: &str, _args: &Map<String, Value>) -> bool {
        false
    }
    fn pr_read(&self, target: &PrTarget, _schemas: &dyn Schemas) -> Result<Read, DialectError> {
        Ok(pr_read(target))
    }
    fn pushed(&self, _tool: &str, _args: &Map<String, Value>) -> Option<Pushed> {
        None
    }
    fn tip_read(&self, owner: &str, repo: &str, branch: &str, _schemas: &dyn Schemas) -> Result<Read, DialectError> {
        let mut read = super::read_on("get_branch", None, owner, repo);
        read.arguments.insert("branch".into(), Value::from(branch));
        Ok(read)
    }
    fn closes(&self, _tool: &str, _args: &Map<String, Value>) -> Option<PrTarget> {
        None
    }
    fn action_call(&self, _action: &str) -> Option<(&'static str, Map<String, Value>)> {
        None
    }
}

impl Toy {
    fn terms(&self, pr: u64) -> MergeTerms {
        MergeTerms { pr, forced: false, scheduled: false, pinnable: false, style: None }
    }
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

const PR: &str = r#"{"head": {"sha": "1a38ef95", "ref": "feature"}, "base": {"ref": "refs/heads/main",
    "repo": {"full_name": "Org/Repo"}}, "state": "open"}"#;

#[test]
fn a_third_forge_states_a_merge_from_the_forge_s_answer_through_the_kit() {
    let merge = args(json!({ "owner": "org", "repo": "repo", "number": 7 }));
    // Before any answer: the kit asks for the dialect's PR read, and nothing else.
    let asked = TOY.establish("merge_pr", &merge, None, &Unlisted, &[]).unwrap_err();
    let target = PrTarget { owner: "org".into(), repo: "repo".into(), pr: 7 };
    assert_eq!(asked, vec![pr_read(&target)]);
    // Answered: the head lands on the base the forge names, in the repository it names.
    let mut reads = 0;
    let effect = establish_with(
        &TOY,
        "merge_pr",
        &merge,
        None,
        &Unlisted,
        &mut |_| {
            reads += 1;
            Ok(serde_json::from_str(PR).unwrap())
        },
        4,
    );
    assert_eq!(reads, 1);
    assert_eq!(effect.action, Some(ACTION_MERGE));
    assert_eq!(effect.branches[0].branch, "main");
    assert_eq!(effect.branches[0].repo.0, "org/repo");
    assert_eq!(effect.defaults, vec!["feature".to_owned()]);
    // A failed read leaves the effect unestablished, in the kit's words.
    let failed = establish_with(&TOY, "merge_pr", &merge, None, &Unlisted, &mut |_| Err("boom".into()), 4);
    assert_eq!(failed.unestablished, vec!["`get_pr` failed: boom".to_owned()]);
    // An answer without a head commit is refused by the forge's PR facts.
    let headless = establish_with(&TOY, "merge_pr", &merge, None, &Unlisted, &mut |_| Ok(json!({})), 4);
    assert!(headless.unestablished[0].contains("no head commit"), "{headless:?}");
    // Without reads (replay), what the arguments show: the merge's terms.
    let evident = TOY.evident("merge_pr", &merge, None);
    assert_eq!((evident.action, evident.merge.map(|m| m.pr)), (Some(ACTION_MERGE), Some(7)));
}

#[test]
fn a_third_forge_tells_a_pr_from_an_issue_with_the_kit_s_read() {
    let close = args(json!({ "owner": "org", "repo": "repo", "number": 3 }));
    let as_pr = establish_with(&TOY, "close_issue", &close, None, &Unlisted, &mut |_| Ok(json!({})), 4);
    assert_eq!(as_pr.action, Some(ACTION_CLOSE));
    assert_eq!(as_pr.prs.len(), 1);
    let as_issue =
        establish_with(&TOY, "close_issue", &close, None, &Unlisted, &mut |_| Err("404 Not Found".into()), 4);
    assert_eq!((as_issue.prs.len(), as_issue.issues.len(), as_issue.action), (0, 1, None));
    let broken = establish_with(&TOY, "close_issue", &close, None, &Unlisted, &mut |_| Err("500".into()), 4);
    assert_eq!(broken.unestablished, vec!["whether #3 is a PR could not be read: 500".to_owned()]);
    let unknown = TOY.establish("delete_repo", &close, None, &Unlisted, &[]).unwrap();
    assert_eq!(unknown.unknown.as_deref(), Some("toy-mcp has no tool `delete_repo` the dialect knows"));
}

#[test]
fn a_third_forge_s_reference_page_and_tools_come_from_its_surface() {
    let page = TOY.reference();
    assert!(page.starts_with("# The toy dialect"), "{page}");
    assert!(page.contains("| `merge_pr` | — | lands the PR's head on its base | — | merger |"), "{page}");
    assert!(page.contains("**Pending reviews.** the toy forge has no pending reviews."), "{page}");
    assert_eq!(TOY.tools(), vec!["close_issue", "get_pr", "list_things", "merge_pr"]);
}

#[test]
fn a_read_the_server_cannot_take_is_a_typed_error_that_fails_the_step() {
    let e = DialectError::Undeclared { tool: "get_pr".into(), candidates: vec!["number", "index"] };
    assert_eq!(
        e.to_string(),
        "the server's `get_pr` declares none of `number`, `index`: it cannot be read by this dialect"
    );
    let why = e.to_string();
    assert!(matches!(Pending::from(e), Pending::Failed(w) if w == why));
}

/// The plot each server's `Plot` spells is the calls its dialect wrote out by hand before
/// the kit: the same tools, keys and values.
#[test]
fn each_server_spells_the_plot_with_its_own_tools_and_keys() {
    use crate::dialect::{gitea::GITEA, github::GITHUB};
    let write = Op::WriteFile { branch: "b", path: "p", content: "c", message: "m", sha: Some("s") };
    let open = Op::OpenPr { head: "h", base: "main", title: "t", body: "x" };
    let cases: [(&dyn Dialect, &Op<'_>, &str, Value); 14] = [
        (&GITEA, &Op::CreateBranch { branch: "b" }, "create_branch", json!({ "branch": "b" })),
        (&GITEA, &Op::ReadFile { branch: "b", path: "p" }, "get_file_contents", json!({ "ref": "b", "path": "p" })),
        (
            &GITEA,
            &write,
            "create_or_update_file",
            json!({ "path": "p", "content": "c", "message": "m", "branch_name": "b", "sha": "s" }),
        ),
        (
            &GITEA,
            &open,
            "pull_request_write",
            json!({ "method": "create", "title": "t", "body": "x", "head": "h", "base": "main" }),
        ),
        (
            &GITEA,
            &Op::Approve { pr: 4 },
            "pull_request_review_write",
            json!({ "method": "create", "pull_number": 4, "state": "APPROVED", "body": "LGTM" }),
        ),
        (
            &GITEA,
            &Op::Merge { pr: 4, squash: false },
            "pull_request_write",
            json!({ "method": "merge", "pull_number": 4 }),
        ),
        (
            &GITEA,
            &Op::Merge { pr: 4, squash: true },
            "pull_request_write",
            json!({ "method": "merge", "pull_number": 4, "merge_style": "squash" }),
        ),
        (&GITHUB, &Op::CreateBranch { branch: "b" }, "create_branch", json!({ "branch": "b" })),
        (&GITHUB, &Op::ReadFile { branch: "b", path: "p" }, "get_file_contents", json!({ "ref": "b", "path": "p" })),
        (
            &GITHUB,
            &Op::WriteFile { branch: "b", path: "p", content: "c", message: "m", sha: None },
            "create_or_update_file",
            json!({ "path": "p", "content": "c", "message": "m", "branch": "b" }),
        ),
        (&GITHUB, &open, "create_pull_request", json!({ "title": "t", "body": "x", "head": "h", "base": "main" })),
        (
            &GITHUB,
            &Op::Approve { pr: 4 },
            "pull_request_review_write",
            json!({ "method": "create", "pullNumber": 4, "event": "APPROVE", "body": "LGTM" }),
        ),
        (&GITHUB, &Op::Merge { pr: 4, squash: false }, "merge_pull_request", json!({ "pullNumber": 4 })),
        (
            &GITHUB,
            &Op::Merge { pr: 4, squash: true },
            "merge_pull_request",
            json!({ "pullNumber": 4, "merge_method": "squash" }),
        ),
    ];
    for (dialect, op, tool, want) in cases {
        assert_eq!(dialect.call(op), (tool, args(want)), "{} {op:?}", dialect.name());
    }
    assert_eq!(
        TOY.call(&Op::Merge { pr: 2, squash: true }),
        ("merge_pr", args(json!({ "number": 2, "style": "squash" })))
    );
}
