//! The state oracle: the guarantee checked on the forge's *state* under call sequences no
//! one wrote by hand (issue "what the forge does later and elsewhere").
//!
//! A case is a seeded sequence of [`Step`]s — calls of every role of a fleet, their tools and
//! `method`s taken from the forge dialect's own statement tables (`fleetgate_core::dialect`),
//! their arguments shaped by the server's listed schemas, their texts from a grammar of
//! closing and reopening keywords in every case, sigil and cross-repository form the forges
//! read, names that read like protected branches and heads in a fork — interleaved with the
//! workflow's own moves (a review lease and an approval at the head, a merge lease and a
//! merge, an issue lock, another author's worker). A [`Driver`] plays them through real
//! gateways in front of the forge look-alike; an operator approves every request a rule holds.
//! After every call the forge's record is read ([`Snapshot`], from the look-alike's own
//! ledger and git) and [`check`]ed:
//!
//! * a protected branch (the default branch, `release/*`, in any repository of the forge)
//!   moves only by the merger's merge of a PR whose merged head an independent reviewer
//!   approved (a reviewer who neither opened the PR nor made the head commit);
//! * a PR is merged only by the merger's merge of it; opened or closed only by the controller
//!   or the reconciler; its base never changes;
//! * an issue is closed or reopened only by the controller or the reconciler, or by the merge
//!   of a PR whose own title, body or author's comment names it with a keyword, and no author
//!   other than the PR's holds the issue's lock;
//! * a read writes no file; a refused call changes nothing.
//!
//! A failing case is minimised ([`minimise`]): steps are dropped, chunk by chunk, while a
//! replay on a fresh fleet still breaks the same check. Everything is seeded; the seed is
//! printed with every failure.

mod check;
mod generate;

pub use check::{Made, Snapshot, Violation, check};
pub use generate::{Dialect, generate};

use serde_json::Value;

/// A fleet member the oracle drives, and its role.
pub const MEMBERS: [(&str, &str); 5] = [
    ("author", "author"),
    ("reviewer", "reviewer"),
    ("merger", "merger"),
    ("controller", "controller"),
    ("reconciler", "reconciler"),
];

/// The roles that own a PR's and an issue's state.
pub const STATE_ROLES: [&str; 2] = ["controller", "reconciler"];

/// The fork every oracle forge has, of the served repository `fleet/forge`.
pub const FORK: &str = "alice/forge";
/// The served repository.
pub const HOME: &str = "fleet/forge";

/// One generated step: who, and what (resolved against the forge as it is when it runs).
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// A tool call; its arguments' numbers and heads are picked from what exists then.
    Call { member: String, tool: String, args: Vec<(String, generate::Arg)> },
    /// The reviewer claims a review lease at a PR's head and approves it there.
    Approve { pr: u32 },
    /// The merger claims a merge lease at a PR's head and merges it (extra arguments given).
    Merge { pr: u32, args: Vec<(String, generate::Arg)> },
    /// The author claims the lock of an issue.
    ClaimIssue { issue: u32 },
    /// The author's gateway restarts: another author (a new worker) from now on.
    NewAuthor,
}

/// What a call came back as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Forwarded to the forge (`error`: the forge answered an error).
    Forwarded { error: bool, text: String },
    /// Refused by the gateway with this blocker.
    Refused { blocker: String, text: String },
}

impl Outcome {
    /// The blocker, when refused.
    pub fn blocker(&self) -> Option<&str> {
        match self {
            Self::Refused { blocker, .. } => Some(blocker),
            Self::Forwarded { .. } => None,
        }
    }
}

/// What plays a case: a fresh fleet of real gateways in front of the look-alike.
pub trait Driver {
    /// A fresh fleet under `roster` (extra roster TOML) on a fresh forge.
    fn reset(&mut self, roster: &str);
    /// `member` calls `tool` with `args` (its `owner` and `repo` as given).
    fn call(&mut self, member: &str, tool: &str, args: Value) -> Outcome;
    /// The operator approves every pending request; how many.
    fn approve_all(&mut self) -> usize;
    /// `member`'s gateway restarts (a new worker).
    fn restart(&mut self, member: &str);
    /// The forge's record now.
    fn snapshot(&self) -> Snapshot;
    /// Where reads may be told to write (`output_path`): must stay empty.
    fn outputs(&self) -> std::path::PathBuf;
    /// The control tools' prefix (`gitea_`, `github_`).
    fn prefix(&self) -> &'static str;
}

/// One case: its seed, dialect, roster and steps.
#[derive(Clone, Debug)]
pub struct Case {
    pub seed: u64,
    pub dialect: Dialect,
    pub roster: (&'static str, String),
    pub steps: Vec<Step>,
}

/// A check that failed: where, on which call, and the sequence up to it.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The first check that failed (what minimisation keeps).
    pub violation: Violation,
    /// Every check that failed on that call.
    pub all: Vec<Violation>,
    /// The step it broke at (index into the case's steps).
    pub at: usize,
    /// The calls made, as `member tool args → outcome` lines.
    pub trace: Vec<String>,
}

/// Play `case` on `driver` from a fresh fleet: the calls made, or the first check that fails.
pub fn play(driver: &mut dyn Driver, case: &Case) -> Result<Vec<String>, Failure> {
    let mut failures = played(driver, case, false);
    match failures.pop() {
        Some(Err(f)) => Err(f),
        Some(Ok(trace)) => Ok(trace),
        None => Ok(Vec::new()),
    }
}

/// Play the whole of `case`, going on past failures: every check that failed, with the call
/// it failed on (a survey of what a build lets through; the state after a failure is what
/// the forge made of it).
pub fn survey(driver: &mut dyn Driver, case: &Case) -> Vec<Failure> {
    played(driver, case, true).into_iter().filter_map(Result::err).collect()
}

/// The failures of `case` (all of them when `on`, else the first), then its calls.
fn played(driver: &mut dyn Driver, case: &Case, on: bool) -> Vec<Result<Vec<String>, Failure>> {
    let mut out = Vec::new();
    driver.reset(&case.roster.1);
    let mut run = check::Run::new(case.dialect);
    let mut trace = Vec::new();
    for (at, step) in case.steps.iter().enumerate() {
        for (member, tool, args) in run.resolve(step, &driver.snapshot(), &driver.outputs(), driver.prefix()) {
            if tool.is_empty() {
                driver.restart(&member);
                run.restarted(&member);
                trace.push(format!("{member}: (a new worker)"));
                continue;
            }
            let before = driver.snapshot();
            let mut outcome = driver.call(&member, &tool, args.clone());
            if outcome.blocker() == Some("approval_pending") && driver.approve_all() > 0 {
                outcome = driver.call(&member, &tool, args.clone());
            }
            let after = driver.snapshot();
            trace.push(format!("{member} {tool} {args} → {}", shown(&outcome)));
            let made =
                Made { member: &member, tool: &tool, args: &args, outcome: &outcome, before: &before, after: &after };
            run.observe(made);
            let all = check(&run, made, &driver.outputs());
            if let Some(violation) = all.first().cloned() {
                out.push(Err(Failure { violation, all, at, trace: trace.clone() }));
                if !on {
                    return out;
                }
            }
        }
    }
    out.push(Ok(trace));
    out
}

fn shown(outcome: &Outcome) -> String {
    let cut = |t: &str| t.chars().take(160).collect::<String>();
    match outcome {
        Outcome::Forwarded { error: false, text } => format!("ok {}", cut(text)),
        Outcome::Forwarded { error: true, text } => format!("forge error {}", cut(text)),
        Outcome::Refused { blocker, text } => format!("refused {blocker}: {}", cut(text)),
    }
}

/// The shortest sub-sequence of `case` (found by dropping chunks of steps, then single
/// steps, while a replay still breaks the same check) within `budget` replays.
pub fn minimise(driver: &mut dyn Driver, case: &Case, failure: &Failure, budget: usize) -> (Case, Failure) {
    let mut best = Case { steps: case.steps[..=failure.at].to_vec(), ..case.clone() };
    let mut best_failure = failure.clone();
    let mut replays = 0;
    let mut chunk = best.steps.len().div_ceil(2);
    while chunk >= 1 && replays < budget {
        let mut i = 0;
        let mut shrank = false;
        while i < best.steps.len() && replays < budget {
            let mut trial = best.clone();
            let end = (i + chunk).min(trial.steps.len());
            trial.steps.drain(i..end);
            if trial.steps.is_empty() {
                i += chunk;
                continue;
            }
            replays += 1;
            match play(driver, &trial) {
                Err(f) if f.violation.kind == failure.violation.kind => {
                    trial.steps.truncate(f.at + 1);
                    best = trial;
                    best_failure = f;
                    shrank = true;
                }
                _ => i += chunk,
            }
        }
        if !shrank {
            chunk /= 2;
        }
    }
    (best, best_failure)
}

/// The rosters a case runs under: the default; one that restates and broadens every
/// permission around the invariants; one whose rules ask an operator before every merge
/// and every issue write (who approves each).
pub fn rosters(dialect: Dialect) -> Vec<(&'static str, String)> {
    let (merge, merge_args, issue) = match dialect {
        Dialect::Gitea => ("pull_request_write", r#"args = { "/method" = ["merge"] }"#, "issue_write"),
        Dialect::Github => ("merge_pull_request", "", "issue_write"),
    };
    let restated = format!(
        "\n[[rules]]\ntool = \"{merge}\"\n{merge_args}\nroles = [\"merger\"]\n\n[[rules]]\ntool = \"{issue}\"\nroles = \
         [\"author\", \"controller\", \"reconciler\"]\n\n[[rules]]\ntool = \"*_read\"\nroles = [\"author\", \"reviewer\", \
         \"merger\"]\n"
    );
    let asked = format!(
        "\n[approvals]\nwait_seconds = 0\n\n[[rules]]\ntool = \"{merge}\"\n{merge_args}\nroles = [\"merger\"]\ndecision = \
         \"ask\"\n\n[[rules]]\ntool = \"{issue}\"\nroles = [\"author\", \"controller\", \"reconciler\"]\ndecision = \"ask\"\n"
    );
    vec![("default", String::new()), ("restated", restated), ("asked", asked)]
}

/// The roster lines every oracle fleet has (before the case's own): `release/*` protected,
/// beside the default branch.
pub const BASE_ROSTER: &str = "protected_branches = [\"release/*\"]\n";

/// A case from `seed`: its roster and `len` steps.
pub fn case(seed: u64, dialect: Dialect, len: usize) -> Case {
    let mut rng = fastrand::Rng::with_seed(seed);
    let rosters = rosters(dialect);
    let roster = rosters[rng.usize(..rosters.len())].clone();
    Case { seed, dialect, roster, steps: generate(&mut rng, dialect, len) }
}

/// A failure in words: the seed, the roster, the minimal sequence and what broke.
pub fn report(case: &Case, failure: &Failure) -> String {
    let broken: Vec<String> = failure.all.iter().map(|v| format!("{}: {}", v.kind, v.detail)).collect();
    format!(
        "seed {} ({:?}, roster {}), {} call(s):\n  {}\nthe calls:\n  {}",
        case.seed,
        case.dialect,
        case.roster.0,
        failure.trace.len(),
        broken.join("\n  "),
        failure.trace.join("\n  ")
    )
}
