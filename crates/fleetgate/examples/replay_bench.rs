//! Replay throughput and the audit's size per entry (issue 30's benchmark; not a test): an
//! audit of N `tools/call` decisions with their judged calls kept, written in batches of
//! 1,000, then read back and judged again by a changed rule set — decisions re-judged per
//! second, read and judged apart — and, in the same run, the size per entry of the same N
//! decisions without their calls (the audit as it was before schema v8), on SQLite (the
//! file's bytes) and on PostgreSQL (`pg_total_relation_size`).
//!
//! `cargo run --release -p fleetgate --example replay_bench -- --sqlite DIR | --url URL [--entries N]`
//!
//! At scale (`--url URL --stream-to N…`, PostgreSQL): the audit is filled with `--entries`
//! decisions through the store, then grown on the server by copying itself
//! (`INSERT … SELECT` a million ids at a time, each copy later in time) to each N exactly, and
//! at each the replay streams it the way `rules test` does — decisions per second and the peak
//! memory the replay adds, which must not grow with N.

use fleetgate_config::FleetConfig;
use fleetgate_core::Timestamp;
use fleetgate_core::audit::{ArgumentsMode, AuditEntry, JudgedCall, keep_arguments};
use fleetgate_core::capability::ToolClass;
use fleetgate_core::replay::{ReplayRules, replay};
use fleetgate_store::Store;
use serde_json::json;
use std::time::Instant;

const ROSTER: &str = "[fleet]\nname = \"bench\"\nforge = \"gitea-mcp\"\n";
const MEMBERS: [&str; 5] = ["author", "reviewer", "merger", "controller", "reconciler"];

fn roster(extra: &str) -> FleetConfig {
    let mut text = ROSTER.to_owned();
    for role in MEMBERS {
        text.push_str(&format!(
            "\n[[members]]\nnamespace = \"gitea-{role}\"\nprofile = \"prgs-{role}\"\nrole = \"{role}\"\n"
        ));
    }
    text.push_str(extra);
    FleetConfig::parse(&text, "bench.toml").expect("the bench roster parses")
}

/// Decision `i` of the history: a mix of merges, reviews, issue writes and file reads.
fn entry(i: usize, config: &FleetConfig, digest: &str, keep: bool) -> AuditEntry {
    let role = MEMBERS[i % MEMBERS.len()];
    let (tool, arguments) = match i % 4 {
        0 => ("pull_request_write", json!({ "method": "merge", "owner": "org", "repo": "repo", "index": i % 500 })),
        1 => (
            "pull_request_review_write",
            json!({ "method": "create", "owner": "org", "repo": "repo", "index": i % 500, "state": "APPROVED", "body": "LGTM" }),
        ),
        2 => (
            "issue_write",
            json!({ "method": "create", "owner": "org", "repo": "repo", "title": format!("issue {i}"), "body": "found while testing" }),
        ),
        _ => (
            "get_file_contents",
            json!({ "owner": "org", "repo": "repo", "ref": "main", "filePath": format!("src/file_{}.rs", i % 97) }),
        ),
    };
    let arguments = arguments.as_object().cloned();
    let decided = config.rules.decide(role, tool, arguments.as_ref());
    let allowed = decided.as_ref().is_none_or(|d| d.permitted);
    AuditEntry {
        id: None,
        at: Timestamp::from_unix(1_800_000_000 + i as i64),
        profile: format!("prgs-{role}"),
        worker_identity: Some(format!("wrk-{role}-0123456789abcdef")),
        tool: tool.into(),
        allowed,
        blocker_kind: (!allowed).then(|| "role_not_permitted".into()),
        reasons: if allowed { Vec::new() } else { vec![decided.and_then(|d| d.reason).unwrap_or_default()] },
        principal: None,
        call: keep.then(|| {
            Box::new(JudgedCall {
                role: role.into(),
                class: if tool == "get_file_contents" { ToolClass::ReadOnly } else { ToolClass::Mutating },
                tool_class: Some(ToolClass::Mutating),
                rule: None,
                rules: digest.into(),
                arguments: keep_arguments(arguments.as_ref(), ArgumentsMode::Full),
            })
        }),
    }
}

/// A store opened for one run, and how many bytes its audit takes.
type Opened = (std::sync::Arc<dyn Store>, Box<dyn Fn() -> u64>);
/// Opens the store of a named run.
type Opener = dyn Fn(&str) -> Opened;

fn fill(store: &dyn Store, entries: usize, config: &FleetConfig, keep: bool) {
    let digest = config.rules_digest();
    let mut batch = Vec::with_capacity(1000);
    for i in 0..entries {
        batch.push(entry(i, config, &digest, keep));
        if batch.len() == 1000 || i + 1 == entries {
            store.append_audit_batch(&mut batch, &mut |_| {}).expect("append a batch");
            batch.clear();
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let entries: usize = flag("--entries").and_then(|n| n.parse().ok()).unwrap_or(1_000_000);
    let old = roster("");
    // The change: merging is the author's too, and nobody reads files any more.
    let new = roster(
        "\n[[rules]]\ntool = \"pull_request_write\"\nargs = { \"/method\" = [\"merge\"] }\nroles = [\"merger\", \"author\"]\n\
         \n[[rules]]\ntool = \"get_file_contents\"\nroles = [\"controller\"]\n",
    );
    let (engine, open_at): (&str, Box<Opener>) = match (flag("--sqlite"), flag("--url")) {
        (Some(dir), _) => (
            "SQLite",
            Box::new(move |name: &str| {
                let path = std::path::Path::new(&dir).join(format!("{name}.sqlite3"));
                let store = fleetgate_store::open(&path.display().to_string()).expect("open the store");
                let size = move || {
                    ["", "-wal"]
                        .iter()
                        .map(|s| std::fs::metadata(format!("{}{s}", path.display())).map_or(0, |m| m.len()))
                        .sum()
                };
                (store, Box::new(size) as Box<dyn Fn() -> u64>)
            }),
        ),
        (None, Some(url)) => (
            "PostgreSQL",
            Box::new(move |name: &str| {
                // One database, the table emptied between the two runs.
                let store = fleetgate_store::open(&url).expect("open the store");
                let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
                client.batch_execute("TRUNCATE audit_log").expect("empty the audit");
                let _ = name;
                let url = url.clone();
                let size = move || {
                    let mut c = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
                    let row = c.query_one("SELECT pg_total_relation_size('audit_log')", &[]).expect("size");
                    u64::try_from(row.get::<_, i64>(0)).unwrap_or(0)
                };
                (store, Box::new(size) as Box<dyn Fn() -> u64>)
            }),
        ),
        _ => {
            eprintln!("usage: replay_bench --sqlite DIR | --url postgres://… [--entries N]");
            std::process::exit(2);
        }
    };
    let scales: Vec<u64> =
        args.iter().skip_while(|a| *a != "--stream-to").skip(1).map_while(|n| n.parse().ok()).collect();
    if let (Some(url), false) = (flag("--url"), scales.is_empty()) {
        at_scale(&url, entries, &scales, &old, &new);
        return;
    }
    println!("{engine}, {entries} decisions");
    let (bare, bare_size) = open_at("without-calls");
    fill(&*bare, entries, &old, false);
    let without = bare_size() as f64 / entries as f64;
    drop(bare);
    let (store, size) = open_at("with-calls");
    let written = Instant::now();
    fill(&*store, entries, &old, true);
    let write_s = written.elapsed().as_secs_f64();
    let with = size() as f64 / entries as f64;
    println!(
        "audit bytes per entry: {without:.0} without the judged call, {with:.0} with it ({:.2}x); written at {:.0}/s",
        with / without,
        entries as f64 / write_s
    );
    let digest = new.rules_digest();
    let rules =
        ReplayRules { members: &new.members, roles: &new.roles, rules: &new.rules, digest: &digest, invariants: None };
    // Streamed first (`rules test`'s way: a page of the log at a time), while the process's
    // peak memory is still what writing left: how much the replay adds to it.
    let before = peak_rss_kib();
    let streamed = Instant::now();
    let mut scan = fleetgate_control::audit::AuditScan::new(&*store, fleetgate_control::audit::SCAN_PAGE);
    let paged = replay(scan.by_ref(), &rules);
    assert_eq!(scan.finish().expect("read the audit"), entries as u64);
    let stream_s = streamed.elapsed().as_secs_f64();
    let streamed_peak = peak_rss_kib().saturating_sub(before);
    let read = Instant::now();
    let history = store.list_audit(None, usize::MAX).expect("read the audit");
    let read_s = read.elapsed().as_secs_f64();
    let whole_peak = peak_rss_kib().saturating_sub(before);
    println!(
        "streamed replay (pages of {}): {:.0} decisions/s end to end, peak memory +{} MiB; the whole log read at once: \
         peak memory +{} MiB",
        fleetgate_control::audit::SCAN_PAGE,
        entries as f64 / stream_s,
        streamed_peak / 1024,
        whole_peak / 1024
    );
    let judged = Instant::now();
    let report = replay(&history, &rules);
    let judge_s = judged.elapsed().as_secs_f64();
    assert_eq!(report.decisions, entries, "every decision was judged again");
    assert_eq!((paged.flipped, paged.same), (report.flipped, report.same), "streamed and whole agree");
    println!(
        "replay: read {:.0} entries/s, re-judged {:.0} decisions/s, end to end {:.0}/s; {} flip, {} the same, {} unjudged",
        entries as f64 / read_s,
        entries as f64 / judge_s,
        entries as f64 / (read_s + judge_s),
        report.flipped,
        report.same,
        report.unjudged.iter().map(|g| g.count).sum::<usize>()
    );
}

/// Ids copied per statement while the audit grows.
const GROW_CHUNK: i64 = 1_000_000;

/// `--stream-to`: the audit grown on the server to each of `scales`, streamed at each.
fn at_scale(url: &str, seed: usize, scales: &[u64], old: &FleetConfig, new: &FleetConfig) {
    let store = fleetgate_store::open(url).expect("open the store");
    let mut client = postgres::Client::connect(url, postgres::NoTls).expect("connect");
    client.batch_execute("TRUNCATE audit_log").expect("empty the audit");
    fill(&*store, seed, old, true);
    let digest = new.rules_digest();
    let rules =
        ReplayRules { members: &new.members, roles: &new.roles, rules: &new.rules, digest: &digest, invariants: None };
    let count = |c: &mut postgres::Client| -> u64 {
        u64::try_from(c.query_one("SELECT COUNT(*) FROM audit_log", &[]).expect("count").get::<_, i64>(0)).unwrap_or(0)
    };
    let mut first_peak = None;
    for &target in scales {
        let grown = Instant::now();
        let mut have = count(&mut client);
        while have < target {
            // One copy of the log as it stands, a span later so ids and times both keep
            // growing, in id ranges of a million: each statement an index range, never a sort
            // of the whole table (at 50M rows that spills as much to disk as the table), and
            // each its own transaction. The last copy stops at the scale exactly.
            let (lo, hi): (i64, i64) = client
                .query_one("SELECT MIN(id), MAX(id) FROM audit_log", &[])
                .map(|r| (r.get(0), r.get(1)))
                .expect("ids");
            let span: String = client
                .query_one("SELECT (MAX(at) - MIN(at) + INTERVAL '1 second')::text FROM audit_log", &[])
                .expect("span")
                .get(0);
            let mut from = lo;
            while from <= hi && have < target {
                let limit = i64::try_from(target - have).unwrap_or(i64::MAX);
                let copied = client
                    .execute(
                        "INSERT INTO audit_log (at, profile, worker_identity, tool, allowed, blocker_kind, reasons, \
                         principal, judged_call) SELECT at + $1::text::interval, profile, worker_identity, tool, allowed, \
                         blocker_kind, reasons, principal, judged_call FROM audit_log WHERE id >= $2 AND id < $3 AND \
                         id <= $4 ORDER BY id LIMIT $5",
                        &[&span, &from, &(from + GROW_CHUNK), &hi, &limit],
                    )
                    .expect("grow the audit");
                have += copied;
                from += GROW_CHUNK;
            }
        }
        let entries = count(&mut client);
        let size: i64 = client.query_one("SELECT pg_total_relation_size('audit_log')", &[]).expect("size").get(0);
        let grow_s = grown.elapsed().as_secs_f64();
        let before = peak_rss_kib();
        let streamed = Instant::now();
        let mut scan = fleetgate_control::audit::AuditScan::new(&*store, fleetgate_control::audit::SCAN_PAGE);
        let report = replay(scan.by_ref(), &rules);
        assert_eq!(scan.finish().expect("read the audit"), entries);
        assert_eq!(report.decisions as u64, entries, "every decision was judged again");
        let stream_s = streamed.elapsed().as_secs_f64();
        let added = peak_rss_kib().saturating_sub(before);
        let peak = peak_rss_kib();
        let first = *first_peak.get_or_insert(peak);
        println!(
            "{entries} entries ({:.1} GB, grown in {grow_s:.0} s): streamed replay {:.0} decisions/s in {stream_s:.0} s, \
             peak memory {} MiB (+{} MiB during this replay; {:.2}x the first scale's peak)",
            size as f64 / 1e9,
            entries as f64 / stream_s,
            peak / 1024,
            added / 1024,
            peak as f64 / first as f64
        );
    }
}

/// This process's peak resident memory (`VmHWM`), KiB.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("VmHWM:")).map(|v| v.trim().trim_end_matches("kB").trim().to_owned())
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
