//! The oracle's call sequences: tools and `method`s from the dialect's own statement tables,
//! arguments shaped by the server's listed schema (the look-alike's catalogue, which is the
//! listing the gateways judge by), texts from a grammar of what the forges act on.

use super::{FORK, Step};
use serde_json::{Value, json};

/// The forge server a case runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// gitea-mcp in front of the Gitea look-alike (with a fork).
    Gitea,
    /// github-mcp-server (a release whose merge pins the head) in front of the GitHub look-alike.
    Github,
}

impl Dialect {
    /// The statement tables of the dialect (`fleetgate_core::dialect`).
    fn surface(self) -> &'static fleetgate_core::dialect::table::Surface {
        match self {
            Self::Gitea => &fleetgate_core::dialect::gitea::effect::SURFACE,
            Self::Github => &fleetgate_core::dialect::github::effect::SURFACE,
        }
    }

    /// The server's listing the look-alike serves.
    fn listing(self) -> Vec<Value> {
        match self {
            Self::Gitea => crate::forge::catalog::tools(crate::forge::catalog::Variant::default()),
            Self::Github => crate::forge::github_catalog::tools(crate::forge::github_catalog::Variant {
                head_pin: true,
                dynamic: false,
                granular: false,
            }),
        }
    }
}

/// One piece of a generated text.
#[derive(Clone, Debug, PartialEq)]
pub enum Piece {
    /// Words as they are.
    Words(&'static str),
    /// A reference to an issue (picked when it runs, `issue` modulo the issues there are):
    /// `lead` before it (a keyword, its colon and space, or nothing), in `form`.
    Ref { lead: &'static str, form: Form, issue: u32 },
}

/// How a reference is spelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    Hash,
    Bang,
    Qualified,
    QualifiedShouting,
    Fork,
    Url,
    MarkdownLink,
    Entity,
    Emphasised,
}

/// One argument of a generated call, resolved when it runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    /// This value.
    Lit(Value),
    /// A PR of the call's repository (modulo those there are).
    Pr(u32),
    /// An issue or a PR of the served repository.
    Issue(u32),
    /// An existing branch of the call's repository.
    Branch(u32),
    /// A PR head: a branch of the served repository or `alice:<branch>` of the fork.
    Head(u32),
    /// A text.
    Text(Vec<Piece>),
    /// Where a read is told to write: under the outputs directory.
    Output,
}

const KEYWORD_LEADS: &[&str] = &[
    "Fixes ",
    "fixes: ",
    "FIXES ",
    "Closes ",
    "close ",
    "resolved ",
    "Resolves: ",
    "cloſes ",
    "Fix ",
    "reopens ",
    "Reopen: ",
    "see ",
    "",
    "for ",
];

const WORDS: &[&str] = &["Update the docs", "WIP", "tidy", "release/1", "main", "refs/heads/main", "the bug in", "and"];

const BRANCH_POOL: &[&str] =
    &["main", "release/1", "release/2", "feature-1", "feature-2", "refs/heads/main", "fix/#1", "wip"];

const PATHS: &[&str] = &["docs/a.md", "src/lib.rs", ".gitea/workflows/ci.yml", ".github/workflows/ci.yml", "x.txt"];

/// A text: up to three pieces, keywords and references in every form the forges read.
fn text(rng: &mut fastrand::Rng, dialect: Dialect) -> Vec<Piece> {
    let forms: &[Form] = match dialect {
        Dialect::Gitea => &[
            Form::Hash,
            Form::Bang,
            Form::Qualified,
            Form::QualifiedShouting,
            Form::Fork,
            Form::Url,
            Form::MarkdownLink,
            Form::Entity,
            Form::Emphasised,
        ],
        Dialect::Github => &[Form::Hash, Form::Qualified, Form::QualifiedShouting, Form::Url],
    };
    let mut pieces = Vec::new();
    for _ in 0..rng.usize(1..=3) {
        if rng.u8(..10) < 3 {
            pieces.push(Piece::Words(WORDS[rng.usize(..WORDS.len())]));
        } else {
            pieces.push(Piece::Ref {
                lead: KEYWORD_LEADS[rng.usize(..KEYWORD_LEADS.len())],
                form: forms[rng.usize(..forms.len())],
                issue: rng.u32(..),
            });
        }
    }
    pieces
}

/// An argument for property `key` of `tool` (`schema`: its JSON schema), when one is made.
fn arg(
    rng: &mut fastrand::Rng,
    dialect: Dialect,
    tool: &str,
    key: &str,
    schema: &Value,
    required: bool,
) -> Option<Arg> {
    let enumerated = schema.get("enum").and_then(Value::as_array).filter(|v| !v.is_empty());
    let pick = |rng: &mut fastrand::Rng, from: &[&str]| Value::from(from[rng.usize(..from.len())]);
    let a = match key {
        "owner" | "repo" | "method" => return None,
        "pull_number" | "index" | "pullNumber" => Arg::Pr(rng.u32(..)),
        "issue_number" => Arg::Issue(rng.u32(..)),
        "head" => Arg::Head(rng.u32(..)),
        "branch" | "branch_name" | "old_branch" | "from_branch" | "base" | "ref" | "sha"
            if key != "sha" || tool == "list_commits" =>
        {
            if rng.bool() {
                Arg::Branch(rng.u32(..))
            } else {
                Arg::Lit(pick(rng, BRANCH_POOL))
            }
        }
        "new_branch_name" | "new_name" => Arg::Lit(pick(rng, BRANCH_POOL)),
        "title" | "body" | "message" | "commit_title" | "commit_message" => Arg::Text(text(rng, dialect)),
        "content" => Arg::Lit(json!("x\n")),
        "path" => {
            let p = PATHS[rng.usize(..PATHS.len())];
            Arg::Lit(json!(if p == "x.txt" { format!("f-{}.txt", rng.u32(..1000)) } else { p.to_owned() }))
        }
        "output_path" => {
            if !(required || rng.u8(..10) < 3) {
                return None;
            }
            Arg::Output
        }
        "state" if tool == "pull_request_review_write" => {
            Arg::Lit(pick(rng, &["APPROVED", "COMMENT", "REQUEST_CHANGES"]))
        }
        "state" => {
            if !(required || rng.bool()) {
                return None;
            }
            Arg::Lit(pick(rng, &["open", "closed"]))
        }
        "event" => Arg::Lit(pick(rng, &["APPROVE", "COMMENT"])),
        "delete_branch" => Arg::Lit(json!(rng.u8(..10) < 4)),
        "force_merge" | "merge_when_checks_succeed" => Arg::Lit(json!(rng.u8(..10) < 1)),
        "merge_style" | "merge_method" => Arg::Lit(pick(rng, &["merge", "squash"])),
        // A review's inline comments: one, whose body is this text (see `check::Run::resolve`).
        "comments" => Arg::Text(text(rng, dialect)),
        "query" => Arg::Lit(json!("forge")),
        "job_id" | "review_id" | "comment_id" | "commentID" | "run_id" => Arg::Lit(json!(rng.u32(1..4))),
        _ if required => match enumerated {
            Some(values) => Arg::Lit(values[rng.usize(..values.len())].clone()),
            None => match schema.get("type").and_then(Value::as_str) {
                Some("number" | "integer") => Arg::Lit(json!(1)),
                Some("boolean") => Arg::Lit(json!(false)),
                Some("array") => Arg::Lit(json!([])),
                _ => Arg::Lit(json!("x")),
            },
        },
        _ => return None,
    };
    Some(a)
}

/// A tool, a method and the tool's schema.
type Pair = (&'static str, &'static str, Value);

/// The (tool, method) pairs a case may call: every reader (`readers`), else every write, the
/// dialect states, that the look-alike lists.
fn collect(dialect: Dialect, readers: bool) -> Vec<Pair> {
    let listing = dialect.listing();
    let surface = dialect.surface();
    let mut out = Vec::new();
    let mut add = |tool: &'static str, method: &'static str| {
        if let Some(def) = listing.iter().find(|t| t["name"] == tool)
            && !out.iter().any(|(t, m, _)| *t == tool && *m == method)
        {
            out.push((tool, method, def["inputSchema"].clone()));
        }
    };
    let each = |methods: &'static [&'static str]| if methods.is_empty() { vec![""] } else { methods.to_vec() };
    if readers {
        for (tool, methods) in surface.readers {
            for m in each(methods) {
                add(tool, m);
            }
        }
        return out;
    }
    for (tool, methods) in surface.reviews.iter().chain(surface.plain) {
        for m in each(methods) {
            add(tool, m);
        }
    }
    for s in surface.stated {
        add(s.tool, s.method);
    }
    out
}

/// Which member makes a call of `tool`: mostly the role the matrix gives it, sometimes
/// another (the gateways must refuse what that role may not do).
fn member(rng: &mut fastrand::Rng) -> &'static str {
    let members = ["author", "author", "author", "reviewer", "merger", "merger", "controller", "reconciler"];
    members[rng.usize(..members.len())]
}

fn call(member: &str, tool: &str, args: &[(&str, Arg)]) -> Step {
    Step::Call {
        member: member.to_owned(),
        tool: tool.to_owned(),
        args: args.iter().map(|(k, a)| ((*k).to_owned(), a.clone())).collect(),
    }
}

fn lit(v: Value) -> Arg {
    Arg::Lit(v)
}

/// What every case starts from: two issues, a feature branch with a commit and a PR of it;
/// with Gitea, a fork's `release/2` with a PR of the fork based on it and the served
/// repository's PR from it.
fn prefix(rng: &mut fastrand::Rng, dialect: Dialect) -> Vec<Step> {
    let t = |rng: &mut fastrand::Rng| Arg::Text(text(rng, dialect));
    let mut steps = Vec::new();
    for title in ["Bug A", "Bug B"] {
        steps.push(call(
            "controller",
            "issue_write",
            &[("method", lit(json!("create"))), ("title", lit(json!(title))), ("body", lit(json!("b")))],
        ));
    }
    let (branch_key, open_tool, open_method) = match dialect {
        Dialect::Gitea => ("branch_name", "pull_request_write", Some("create")),
        Dialect::Github => ("branch", "create_pull_request", None),
    };
    let open = |title: Arg, body: Arg, head: &str, base: &str| {
        let mut args = vec![("title", title), ("body", body), ("head", lit(json!(head))), ("base", lit(json!(base)))];
        if let Some(m) = open_method {
            args.push(("method", lit(json!(m))));
        }
        args
    };
    steps.push(call("author", "create_branch", &[("branch", lit(json!("feature-1")))]));
    let write = [
        ("path", lit(json!("f1.txt"))),
        ("content", lit(json!("1\n"))),
        ("message", t(rng)),
        (branch_key, lit(json!("feature-1"))),
    ];
    steps.push(call("author", "create_or_update_file", &write));
    let (title, body) = (t(rng), t(rng));
    steps.push(call("author", open_tool, &open(title, body, "feature-1", "main")));
    if dialect == Dialect::Gitea {
        let mut child = open(lit(json!("child")), lit(json!("b")), "child", "release/2");
        child.extend([("owner", lit(json!(FORK.split('/').next()))), ("repo", lit(json!("forge")))]);
        steps.push(call("author", open_tool, &child));
        let body = t(rng);
        steps.push(call("author", open_tool, &open(lit(json!("From the fork")), body, "alice:release/2", "main")));
    }
    steps
}

/// The extra arguments of a generated merge.
fn merge_args(rng: &mut fastrand::Rng, dialect: Dialect) -> Vec<(String, Arg)> {
    let mut args = Vec::new();
    let (title, message) = match dialect {
        Dialect::Gitea => ("title", "message"),
        Dialect::Github => ("commit_title", "commit_message"),
    };
    if rng.u8(..10) < 5 {
        args.push((message.to_owned(), Arg::Text(text(rng, dialect))));
    }
    if rng.u8(..10) < 2 {
        args.push((title.to_owned(), Arg::Text(text(rng, dialect))));
    }
    if dialect == Dialect::Gitea && rng.u8(..10) < 5 {
        args.push(("delete_branch".to_owned(), Arg::Lit(json!(true))));
    }
    args
}

/// `len` steps after the prefix, from `rng`.
pub fn generate(rng: &mut fastrand::Rng, dialect: Dialect, len: usize) -> Vec<Step> {
    let (readers, writes) = (collect(dialect, true), collect(dialect, false));
    let mut steps = prefix(rng, dialect);
    while steps.len() < len {
        let roll = rng.u8(..100);
        let step = match roll {
            0..12 => Step::Approve { pr: rng.u32(..) },
            12..26 => Step::Merge { pr: rng.u32(..), args: merge_args(rng, dialect) },
            26..33 => Step::ClaimIssue { issue: rng.u32(..) },
            33..36 => Step::NewAuthor,
            _ => {
                // Mostly writes: a read changes nothing, and is judged by its method alone.
                let pairs = if roll < 46 { &readers } else { &writes };
                let (tool, method, schema) = &pairs[rng.usize(..pairs.len())];
                let props = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
                let required: Vec<&str> = schema
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let mut args: Vec<(String, Arg)> = Vec::new();
                if !method.is_empty() {
                    args.push(("method".into(), Arg::Lit(json!(method))));
                }
                if dialect == Dialect::Gitea && rng.u8(..10) < 2 && props.contains_key("owner") {
                    args.push(("owner".into(), Arg::Lit(json!("alice"))));
                }
                for (key, prop) in &props {
                    if let Some(a) = arg(rng, dialect, tool, key, prop, required.contains(&key.as_str())) {
                        args.push((key.clone(), a));
                    }
                }
                Step::Call { member: member(rng).to_owned(), tool: (*tool).to_owned(), args }
            }
        };
        steps.push(step);
    }
    steps
}

/// The text of `pieces`, its references picked from `issues` (the served repository's) and
/// `fork_issues`.
pub fn render(pieces: &[Piece], issues: &[i64], fork_issues: &[i64], dialect: Dialect) -> String {
    let pick =
        |list: &[i64], k: u32| if list.is_empty() { i64::from(k % 5) + 1 } else { list[k as usize % list.len()] };
    let (host, home) = match dialect {
        Dialect::Gitea => ("http://forge.invalid", "fleet/forge"),
        Dialect::Github => ("https://github.invalid", "fleet/forge"),
    };
    let mut out: Vec<String> = Vec::new();
    for p in pieces {
        out.push(match p {
            Piece::Words(w) => (*w).to_owned(),
            Piece::Ref { lead, form, issue } => {
                let n = pick(issues, *issue);
                match form {
                    Form::Hash => format!("{lead}#{n}"),
                    Form::Bang => format!("{lead}!{n}"),
                    Form::Qualified => format!("{lead}{home}#{n}"),
                    Form::QualifiedShouting => format!("{lead}{}!{n}", home.to_uppercase()),
                    Form::Fork => format!("{lead}{FORK}#{}", pick(fork_issues, *issue)),
                    Form::Url => format!("{lead}{host}/{home}/issues/{n}"),
                    Form::MarkdownLink => format!("{lead}[the bug]({host}/{home}/issues/{n})"),
                    Form::Entity => format!("{lead}&#35;{n}"),
                    Form::Emphasised => format!("**{}** #{n}", lead.trim_end()),
                }
            }
        });
    }
    out.join(" ")
}
