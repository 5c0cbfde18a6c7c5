//! The inventory against real processes: children whose command lines match
//! the roster's `process_match`, registered through the CLI, judged by
//! `fleetgate inventory --json` — which observes them itself.

use crate::support::{fleetgate, json_of, wait_until};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

const HEAD: &str = "82d71b77028a7abd4f8ab4a4e4d89658a187f73d";

/// A throwaway fleet: its own store, config, and a marker no other test uses.
struct Fleet {
    dir: tempfile::TempDir,
    marker: String,
    children: Vec<Child>,
}

impl Fleet {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let marker = format!("fleetgate-it-{:016x}", fleetgate_host::nonce() as u64);
        let config = format!(
            "[fleet]\nname = \"t\"\nprocess_match = [\"{marker}\"]\n\n\
             [[members]]\nnamespace = \"gitea-author\"\nprofile = \"prgs-author\"\nrole = \"author\"\n\n\
             [[members]]\nnamespace = \"gitea-reviewer\"\nprofile = \"prgs-reviewer\"\nrole = \"reviewer\"\n"
        );
        std::fs::write(dir.path().join("fleet.toml"), config).unwrap();
        Self { dir, marker, children: Vec::new() }
    }

    fn store(&self) -> PathBuf {
        self.dir.path().join("registry.sqlite3")
    }

    fn cli(&self, args: &[&str]) -> Output {
        let cfg = self.dir.path().join("fleet.toml");
        let mut all = vec!["--config", cfg.to_str().unwrap()];
        all.extend_from_slice(args);
        fleetgate(&self.store(), &all)
    }

    /// A real server-like process: python sleeping, the marker on its command line.
    fn spawn(&mut self) -> i64 {
        let child = Command::new("python3")
            .args(["-c", "import time; time.sleep(600)", &self.marker])
            .stdin(Stdio::null())
            .spawn()
            .expect("python3");
        let pid = i64::from(child.id());
        self.children.push(child);
        // Visible in /proc with its final command line before anyone looks.
        let marker = self.marker.clone();
        assert!(wait_until(5.0, || std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&marker))));
        pid
    }

    fn register(&self, ns: &str, profile: &str, role: &str, pid: i64, extra: &[&str]) -> serde_json::Value {
        let pid = pid.to_string();
        let mut args = vec![
            "runtime",
            "register",
            "--namespace",
            ns,
            "--profile",
            profile,
            "--role",
            role,
            "--pid",
            &pid,
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = self.cli(&args);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        json_of(&out)
    }

    fn inventory(&self) -> (Option<i32>, serde_json::Value) {
        let out = self.cli(&["inventory", "--json"]);
        (out.status.code(), json_of(&out))
    }

    fn kill(&mut self, pid: i64) {
        let i = self.children.iter().position(|c| i64::from(c.id()) == pid).unwrap();
        let mut c = self.children.remove(i);
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn git_repo(dir: &Path) -> String {
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    std::fs::create_dir_all(dir).unwrap();
    git(&["init", "-q"]);
    git(&["commit", "-q", "--allow-empty", "-m", "start"]);
    git(&["rev-parse", "HEAD"]).trim().to_owned()
}

#[test]
fn healthy_then_duplicate_then_killed_then_unregistered() {
    let mut f = Fleet::new();
    let repo = f.dir.path().join("checkout");
    let head = git_repo(&repo);
    let author = f.spawn();
    let reviewer = f.spawn();
    let root = repo.to_str().unwrap();
    let row = f.register("gitea-author", "prgs-author", "author", author, &["--repo-root", root]);
    assert_eq!(row["startup_head"], head.as_str(), "the startup head comes from --repo-root");
    assert_eq!(row["cohort_id"], format!("ppid:{}", std::process::id()), "the cohort is the server's parent");
    assert_eq!(row["cohort_source"], "parent_process");
    f.register("gitea-reviewer", "prgs-reviewer", "reviewer", reviewer, &["--repo-root", root]);

    let (code, v) = f.inventory();
    assert_eq!(code, Some(0), "{}", v["blocked_reasons"]);
    assert_eq!(v["running_member_count"], 2);
    assert_eq!(v["mutation_gate_satisfied"], true);
    assert_eq!(v["single_cohort"], true);
    let text = String::from_utf8(f.cli(&["inventory"]).stdout).unwrap();
    assert!(text.starts_with("2 of 2 members running"), "{text}");

    // A second author from another cohort: duplicate and mixed cohort, gate closed.
    let second = f.spawn();
    f.register("gitea-author", "prgs-author", "author", second, &["--repo-root", root, "--cohort", "ppid:999999"]);
    let (code, v) = f.inventory();
    assert_eq!(code, Some(3));
    let dup = &v["duplicate_members"][0];
    assert_eq!(dup["profile"], "prgs-author");
    let mut pids = vec![author, second];
    pids.sort_unstable();
    assert_eq!(dup["pids"], serde_json::json!(pids));
    assert_eq!(v["mixed_cohort"], true);
    assert!(v["blocked_reason"].as_str().unwrap().contains("duplicate prgs-author"));

    // Kill the reviewer: its row is stale (dead) and its profile missing.
    f.kill(reviewer);
    let (_, v) = f.inventory();
    let stale = v["stale_members"].as_array().unwrap();
    assert!(stale.iter().any(|m| m["pid"] == reviewer && m["liveness"] == "dead"), "{stale:?}");
    assert_eq!(v["missing_members"][0]["profile"], "prgs-reviewer");

    // A matching process nobody registered fails closed, named by pid.
    let stray = f.spawn();
    let (code, v) = f.inventory();
    assert_eq!(code, Some(3));
    let unregistered: Vec<i64> =
        v["unregistered_processes"].as_array().unwrap().iter().map(|p| p["pid"].as_i64().unwrap()).collect();
    assert_eq!(unregistered, [stray]);
    assert!(
        v["incomplete_reasons"].as_array().unwrap().iter().any(|r| r.as_str().unwrap().contains(&stray.to_string()))
    );
    assert_eq!(v["inventory_complete"], false);
}

#[test]
fn a_row_registered_before_its_process_started_reads_pid_recycled() {
    let mut f = Fleet::new();
    let author = f.spawn();
    let reviewer = f.spawn();
    f.register("gitea-reviewer", "prgs-reviewer", "reviewer", reviewer, &["--startup-head", HEAD]);
    // The author's row claims a registration a minute before its process existed,
    // as a row left behind by an exited server whose pid was reused would.
    let store = fleetgate_store::open(f.store().to_str().unwrap()).unwrap();
    let started = fleetgate_host::procfs::ProcessSource::entry(&fleetgate_host::procfs::ProcFs::default(), author)
        .unwrap()
        .started_at;
    let mut row: fleetgate_core::runtime::RuntimeRecord =
        serde_json::from_value(f.register("gitea-author", "prgs-author", "author", author, &["--startup-head", HEAD]))
            .unwrap();
    row.registered_at = started.plus_seconds(-60);
    store.upsert_runtime(&row).unwrap();

    let (code, v) = f.inventory();
    assert_eq!(code, Some(3));
    let stale = &v["stale_members"][0];
    assert_eq!((stale["pid"].as_i64(), stale["liveness"].as_str()), (Some(author), Some("pid_recycled")));
    assert_eq!(v["missing_members"][0]["profile"], "prgs-author");
    assert_eq!(v["running_member_count"], 1);
}

#[test]
fn runtime_rows_list_and_deregister() {
    let mut f = Fleet::new();
    let pid = f.spawn();
    let row = f.register("gitea-author", "prgs-author", "author", pid, &["--cohort", "c1", "--startup-head", HEAD]);
    let id = row["runtime_id"].as_str().unwrap().to_owned();
    assert!(id.starts_with(&format!("gitea-author:{pid}:")), "{id}");
    assert_eq!(row["cohort_source"], "explicit_env");
    let list = json_of(&f.cli(&["runtime", "list", "--json"]));
    assert_eq!(list["runtimes"][0]["runtime_id"], id.as_str());
    assert_eq!(f.cli(&["runtime", "touch", &id]).status.code(), Some(0));
    assert_eq!(f.cli(&["runtime", "deregister", &id]).status.code(), Some(0));
    assert_eq!(f.cli(&["runtime", "touch", &id]).status.code(), Some(3), "a stopped row is not refreshed");
    // A deregistered row is history; the still-running process is now unregistered.
    let (_, v) = f.inventory();
    assert_eq!(v["unregistered_processes"][0]["pid"], pid);
    let bad = f.cli(&["runtime", "register", "--namespace", "n", "--profile", "p", "--role", "r", "--pid", "zero"]);
    assert_eq!(bad.status.code(), Some(1));
}
