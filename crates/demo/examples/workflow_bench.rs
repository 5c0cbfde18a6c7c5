//! The PR workflow's cost at the gate, through real gateways: the added latency of
//! a gated review decision (lease + head read + decision recorded) and of a gated merge (head
//! read + leases + decisions + release) over a plain forwarded mutating call
//! (`issue_write add_comment`), all in the same run against the same forge stand-in. Not a
//! test: `scripts/bench-workflow` runs it; BENCHMARKS.md records the figures.
//!
//! ```text
//! workflow_bench --fleetgate target/release/fleetgate [--rounds 40] [--baseline OTHER/fleetgate]
//! ```
//!
//! `--baseline`: another build (an earlier commit's) as a second fleet in the same run, after
//! this one's (an earlier build cannot read a newer store's rows, so the two fleets never run
//! at once), and the ratios printed.
//!
//! Each round: the author opens a PR; the reviewer claims and approves; the merger claims and
//! merges; the reviewer comments on an issue (the plain call). Each kind's calls are timed
//! at the MCP client, so the numbers include the client, the gateway and the forge.

use fleetgate_demo::Flow;
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn pct(v: &mut [Duration], p: f64) -> f64 {
    v.sort();
    v.get(((v.len() as f64 - 1.0) * p).round() as usize).map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

async fn timed(flow: &mut Flow, who: &'static str, tool: &str, args: serde_json::Value) -> Duration {
    let t = Instant::now();
    let (ok, answer) = flow.call(who, tool, args).await.expect("the call");
    assert!(ok, "{who} {tool}: {answer}");
    t.elapsed()
}

/// One fleet under test: its `Flow`, the issue it comments on, and each kind's timings.
struct Run {
    flow: Flow,
    issue: i64,
    plain: Vec<Duration>,
    review: Vec<Duration>,
    merge: Vec<Duration>,
    _dir: tempfile::TempDir,
}

impl Run {
    async fn start(exe: &std::path::Path) -> Self {
        let exe = exe.canonicalize().expect("the fleetgate binary");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let checkout = dir.path().join("checkout");
        std::fs::create_dir_all(&checkout).unwrap();
        let git = |args: &[&str]| {
            let ok = std::process::Command::new("git").arg("-C").arg(&checkout).args(args).status().unwrap().success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q"]);
        git(&["-c", "user.name=bench", "-c", "user.email=b@x.invalid", "commit", "-q", "--allow-empty", "-m", "b"]);
        let forge = fleetgate_testkit::forge_fixture_exe();
        let mut flow = Flow::start(&exe, &forge, dir.path(), &checkout, "", &fleetgate_core::dialect::gitea::GITEA)
            .await
            .expect("the fleet");
        let issue = flow.call("author", "issue_write", json!({ "method": "create", "title": "t", "body": "b" })).await;
        let (ok, issue) = issue.expect("an issue");
        let issue = issue["number"].as_i64().unwrap_or_else(|| panic!("{}: no issue ({ok}): {issue}", exe.display()));
        Self { flow, issue, plain: Vec::new(), review: Vec::new(), merge: Vec::new(), _dir: dir }
    }

    /// One round: a PR opened, reviewed and merged; the plain call beside it.
    async fn round(&mut self, round: usize) {
        let flow = &mut self.flow;
        let branch = format!("b{round}");
        flow.call("author", "create_branch", json!({ "branch": branch })).await.unwrap();
        let file = json!({ "path": format!("f{round}.txt"), "content": "x\n", "message": "m", "branch_name": branch });
        flow.call("author", "create_or_update_file", file).await.unwrap();
        let create = json!({ "method": "create", "title": "t", "body": "b", "head": branch, "base": "main" });
        let pr = flow.call("author", "pull_request_write", create).await.unwrap().1["number"].as_i64().unwrap();
        let head = flow.git(&["rev-parse", &branch]).unwrap();
        let claim = |purpose: &str| json!({ "pr": pr, "head": head, "purpose": purpose });
        flow.call("reviewer", "gitea_claim_pr_lease", claim("review")).await.unwrap();
        let comment = json!({ "method": "add_comment", "issue_number": self.issue, "body": "plain" });
        self.plain.push(timed(flow, "reviewer", "issue_write", comment).await);
        let approve = json!({ "method": "create", "pull_number": pr, "state": "APPROVED", "body": "ok" });
        self.review.push(timed(flow, "reviewer", "pull_request_review_write", approve).await);
        flow.call("merger", "gitea_claim_pr_lease", claim("merge")).await.unwrap();
        let merging = json!({ "method": "merge", "pull_number": pr, "merge_style": "merge" });
        self.merge.push(timed(flow, "merger", "pull_request_write", merging).await);
    }

    /// p50 and p99 of each kind, and the added p50 over the plain call.
    fn figures(&mut self) -> [(f64, f64, f64); 3] {
        let (p50, p99) = (pct(&mut self.plain, 0.5), pct(&mut self.plain, 0.99));
        let (r50, r99) = (pct(&mut self.review, 0.5), pct(&mut self.review, 0.99));
        let (m50, m99) = (pct(&mut self.merge, 0.5), pct(&mut self.merge, 0.99));
        [(p50, p99, 0.0), (r50, r99, r50 - p50), (m50, m99, m50 - p50)]
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (mut exe, mut rounds, mut baseline) = (PathBuf::from("target/release/fleetgate"), 40usize, None);
    while let Some(a) = args.next() {
        let mut val = || args.next().expect("flag needs a value");
        match a.as_str() {
            "--fleetgate" => exe = val().into(),
            "--rounds" => rounds = val().parse().expect("--rounds"),
            // Another build (an earlier commit's) run side by side in the same run, its rounds
            // interleaved with this one's so both see the same machine.
            "--baseline" => baseline = Some(PathBuf::from(val())),
            other => panic!("unknown flag {other}"),
        }
    }
    // One fleet at a time: an earlier build cannot read a newer store's rows, so beside a
    // running fleet of the other build its inventory gate closes (fail closed, as it should).
    let mut builds = vec![("fleetgate", exe.clone())];
    builds.extend(baseline.iter().map(|b| ("baseline", b.clone())));
    let mut runs = Vec::new();
    for (name, binary) in builds {
        let mut run = Run::start(&binary).await;
        for round in 0..rounds {
            run.round(round).await;
        }
        let figures = run.figures();
        run.flow.stop().await;
        runs.push((name, figures));
    }
    println!("rounds={rounds}");
    for (name, figures) in &runs {
        let [(p50, p99, _), review, merge] = *figures;
        println!("[{name}] plain forwarded mutating call (issue_write add_comment): p50={p50:.2}ms p99={p99:.2}ms");
        for (kind, (q50, q99, added)) in [("gated review decision", review), ("gated merge", merge)] {
            println!("[{name}] {kind}: p50={q50:.2}ms p99={q99:.2}ms  added p50={added:.2}ms");
        }
    }
    if let [(_, ours), (_, base)] = runs.as_slice() {
        for (i, kind) in ["plain call p50", "gated review decision p50", "gated merge p50"].iter().enumerate() {
            let ratio = if base[i].0 > 0.0 { ours[i].0 / base[i].0 } else { f64::NAN };
            println!("fleetgate / baseline, {kind}: {ratio:.2}");
        }
    }
}
