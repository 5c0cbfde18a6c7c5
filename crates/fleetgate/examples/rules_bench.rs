//! Rule evaluation cost per call (issue 12's benchmark; not a test): the built-in `gitea-mcp`
//! profile plus 200 operator rules, against today's glob check (`[roles.X]` allow/deny), in
//! the same run. Prints p50 and p99 in microseconds of each, over a mix of calls (a merge, a
//! create, a review, an unknown method, a reader, a tool no rule names).
//!
//! `cargo run --release -p fleetgate --example rules_bench [ITERATIONS]`

use fleetgate_config::FleetConfig;
use serde_json::{Map, Value, json};
use std::hint::black_box;
use std::time::Instant;

fn roster(rules: usize) -> String {
    let mut text = String::from(
        "[fleet]\nname = \"bench\"\nforge = \"gitea-mcp\"\n\n[roles.reviewer]\ndeny = [\"git_add\", \"git_commit\", \"*_delete\"]\n",
    );
    for role in ["author", "reviewer", "merger", "controller", "reconciler"] {
        text.push_str(&format!(
            "\n[[members]]\nnamespace = \"gitea-{role}\"\nprofile = \"prgs-{role}\"\nrole = \"{role}\"\n"
        ));
    }
    // Operator rules on tools of their own, so none shadows another and every call still
    // walks past them to the profile's.
    for i in 0..rules {
        text.push_str(&format!(
            "\n[[rules]]\ntool = \"custom_tool_{i}\"\nargs = {{ \"/method\" = [\"a\", \"b\"], \"/options/mode\" = \"present\" }}\nroles = [\"author\", \"controller\"]\n"
        ));
    }
    text
}

fn percentiles(mut samples: Vec<u128>) -> (f64, f64) {
    samples.sort_unstable();
    let at = |p: f64| samples[((samples.len() as f64 * p) as usize).min(samples.len() - 1)] as f64 / 1000.0;
    (at(0.50), at(0.99))
}

fn main() {
    let iterations: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let config = FleetConfig::parse(&roster(200), "bench.toml").expect("the bench roster parses");
    let calls: Vec<(&str, &str, Map<String, Value>)> = [
        ("merger", "pull_request_write", json!({ "method": "merge", "owner": "o", "repo": "r", "pull_number": 976 })),
        ("author", "pull_request_write", json!({ "method": "create", "title": "t", "head": "f", "base": "main" })),
        ("reviewer", "pull_request_review_write", json!({ "method": "create", "index": 976, "state": "APPROVED" })),
        ("reviewer", "pull_request_write", json!({ "method": "frobnicate" })),
        ("author", "pull_request_read", json!({ "method": "get", "index": 976 })),
        ("controller", "git_status", json!({})),
    ]
    .into_iter()
    .map(|(role, tool, args)| (role, tool, args.as_object().cloned().unwrap_or_default()))
    .collect();

    let mut rules = Vec::with_capacity(iterations);
    let mut globs = Vec::with_capacity(iterations);
    for i in 0..iterations {
        let (role, tool, args) = &calls[i % calls.len()];
        let t = Instant::now();
        black_box(config.rules.decide(role, tool, Some(args)));
        rules.push(t.elapsed().as_nanos());
        let t = Instant::now();
        black_box(config.role_policy(role).permits(tool));
        globs.push(t.elapsed().as_nanos());
    }
    let (r50, r99) = percentiles(rules);
    let (g50, g99) = percentiles(globs);
    println!("rules evaluated: {} (gitea-mcp profile + 200 operator rules)", config.rules.rules().len());
    println!("{:<28} {:>10} {:>10}", "per call", "p50 µs", "p99 µs");
    println!("{:<28} {:>10.2} {:>10.2}", "rules (first match)", r50, r99);
    println!("{:<28} {:>10.2} {:>10.2}", "role globs (today's check)", g50, g99);
}
