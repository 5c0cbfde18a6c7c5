//! Shared fixtures: fresh stores on real files, a store wrapper that counts
//! and injects transient failures, and the CLI under test.

use fleetgate_core::Timestamp;
use fleetgate_core::worker::{RegisterOutcome, Registration, WorkerIds, worker_identity};
use fleetgate_store::{Layer, Store, StoreError, StoreErrorKind};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The seed's NOW.
pub fn now() -> Timestamp {
    Timestamp::ymd_hms(2026, 7, 30, 0, 40, 9)
}

pub const TTL: f64 = 900.0;

/// A fresh SQLite store in its own temporary directory (kept alive by the guard).
pub fn fresh_store() -> (tempfile::TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = fleetgate_store::open(dir.path().join("registry.sqlite3").to_str().unwrap()).expect("open store");
    (dir, store)
}

/// A registration with the seed's defaults.
pub struct Attach<'a> {
    pub client: &'a str,
    pub session: &'a str,
    pub generation: &'a str,
    pub pid: i64,
    pub ttl: f64,
}

impl Default for Attach<'_> {
    fn default() -> Self {
        Self { client: "claude_code", session: "sess-0001", generation: "gen-0001", pid: 4242, ttl: TTL }
    }
}

pub fn attach(store: &dyn Store, a: Attach<'_>) -> RegisterOutcome {
    let n = now();
    let identity = worker_identity(a.client, a.session, n, fleetgate_host::nonce());
    store
        .register(
            &Registration {
                ids: WorkerIds {
                    worker_identity: identity,
                    client_name: a.client.into(),
                    client_instance_id: format!("inst-{}", a.session),
                    session_id: a.session.into(),
                    generation_id: a.generation.into(),
                    role: "author".into(),
                    profile: "prgs-author".into(),
                    pid: Some(a.pid),
                },
                heartbeat_ttl_seconds: a.ttl,
            },
            n,
        )
        .expect("register")
}

/// Fault injection over a real store, as a [`Layer`] at the store's one point around every
/// operation (so it sees exactly what the gateway's metering sees): counts renewals and
/// fails the next N with `Busy`; fails and names the thread of every audit append,
/// batched or not; and says whether the store bounds its waits (`leads`). Every other
/// operation runs untouched.
#[derive(Debug)]
pub struct Instrumented {
    inner: Arc<dyn Store>,
    pub heartbeats: AtomicU64,
    pub fail_next: AtomicU32,
    pub fail_audit: std::sync::atomic::AtomicBool,
    /// What [`Store::bounds_waits`] answers, whatever the store under it does (false: the
    /// auditor's thread does every write).
    pub leads: std::sync::atomic::AtomicBool,
    /// The name of the thread that made each audit append.
    pub committers: std::sync::Mutex<Vec<String>>,
}

impl Instrumented {
    pub fn new(inner: Arc<dyn Store>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            heartbeats: AtomicU64::new(0),
            fail_next: AtomicU32::new(0),
            fail_audit: std::sync::atomic::AtomicBool::new(false),
            leads: std::sync::atomic::AtomicBool::new(false),
            committers: std::sync::Mutex::default(),
        })
    }

    /// The store with these faults over it.
    pub fn store(self: &Arc<Self>) -> Arc<dyn Store> {
        Arc::clone(&self.inner).layered(self.clone())
    }
}

impl Layer for Instrumented {
    fn around(&self, op: &'static str, call: &mut dyn FnMut() -> Result<(), StoreError>) -> Result<(), StoreError> {
        match op {
            "heartbeat" => {
                if self.fail_next.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
                    return Err(StoreError::new(StoreErrorKind::Busy, "database is locked"));
                }
                let out = call();
                self.heartbeats.fetch_add(1, Ordering::SeqCst);
                out
            }
            "append_audit" | "append_audit_batch" => {
                let thread = std::thread::current().name().unwrap_or_default().to_owned();
                self.committers.lock().unwrap().push(thread);
                if self.fail_audit.load(Ordering::SeqCst) {
                    return Err(StoreError::new(StoreErrorKind::Io, "the audit store is failing"));
                }
                call()
            }
            _ => call(),
        }
    }

    fn bounds_waits(&self, _below: bool) -> bool {
        self.leads.load(Ordering::SeqCst)
    }
}

/// Poll `cond` every few milliseconds for at most `secs` seconds.
pub fn wait_until(secs: f64, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs);
    while std::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    cond()
}

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fleetgate"))
}

/// `fleetgate --store STORE ARGS…` with a clean environment.
pub fn fleetgate(store: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .expect("run fleetgate")
}

pub fn json_of(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}): {:?} / stderr {:?}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// `DIR/checkout`, a git repository with one commit (made on first use), and its HEAD.
pub fn checkout_in(parent: &Path) -> (PathBuf, String) {
    let dir = parent.join("checkout");
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(&dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    if !dir.join(".git").exists() {
        std::fs::create_dir_all(&dir).unwrap();
        git(&["init", "-q"]);
        git(&["commit", "-q", "--allow-empty", "-m", "start"]);
    }
    let head = git(&["rev-parse", "HEAD"]).trim().to_owned();
    (dir, head)
}

/// Another fleet on this host for the whole run (issue #19): one real `fleetgate serve` on
/// its own store and checkout, started before the first marker fleet, so every test that
/// makes one runs beside it. Its stdin is this process's pipe: it stops in order when the
/// test binary exits, however it exits. Its pid.
pub fn foreign_fleet() -> i64 {
    static FOREIGN: std::sync::OnceLock<(tempfile::TempDir, std::sync::Mutex<std::process::Child>, i64)> =
        std::sync::OnceLock::new();
    FOREIGN
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let config = dir.path().join("fleet.toml");
            let roster = "[fleet]\nname = \"foreign\"\n\n[[members]]\nnamespace = \"gitea-author\"\n\
                          profile = \"prgs-author\"\nrole = \"author\"\n";
            std::fs::write(&config, roster).unwrap();
            let (checkout, _) = checkout_in(dir.path());
            let store = dir.path().join("registry.sqlite3");
            let child = Command::new(bin())
                .env_clear()
                .env("PATH", "/usr/bin:/bin")
                .arg("--store")
                .arg(&store)
                .arg("--config")
                .arg(&config)
                .args(["serve", "--profile", "prgs-author", "--repo-root"])
                .arg(&checkout)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("the foreign fleet's gateway");
            let pid = i64::from(child.id());
            let running = || {
                let rows = json_of(&fleetgate(&store, &["runtime", "list", "--json"]));
                rows["runtimes"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|r| r["pid"] == pid && r["status"] == "running"))
            };
            assert!(wait_until(15.0, running), "the foreign fleet's gateway wrote no row");
            (dir, std::sync::Mutex::new(child), pid)
        })
        .2
}

/// A throwaway two-member fleet (author, reviewer) whose servers are real
/// python processes carrying a marker no other test uses on their command lines.
pub struct MarkerFleet {
    pub dir: tempfile::TempDir,
    pub marker: String,
    children: Vec<std::process::Child>,
}

impl MarkerFleet {
    /// `extra` is appended to the roster config (roles, tools, …).
    pub fn new(extra: &str) -> Self {
        foreign_fleet();
        let dir = tempfile::tempdir().unwrap();
        let marker = format!("fleetgate-it-{:016x}", fleetgate_host::nonce() as u64);
        let config = format!(
            "[fleet]\nname = \"t\"\nprocess_match = [\"{marker}\"]\n\n\
             [[members]]\nnamespace = \"gitea-author\"\nprofile = \"prgs-author\"\nrole = \"author\"\n\n\
             [[members]]\nnamespace = \"gitea-reviewer\"\nprofile = \"prgs-reviewer\"\nrole = \"reviewer\"\n\n{extra}"
        );
        std::fs::write(dir.path().join("fleet.toml"), config).unwrap();
        Self { dir, marker, children: Vec::new() }
    }

    pub fn store(&self) -> PathBuf {
        self.dir.path().join("registry.sqlite3")
    }

    /// The fleet's checkout (a git repository with one commit, made on first use) and its
    /// HEAD: a fleet whose rows name their checkout can tell another fleet's gateway from
    /// its own, so its gate does not close for one running beside it.
    pub fn checkout(&self) -> (PathBuf, String) {
        checkout_in(self.dir.path())
    }

    /// `fleetgate --config … --store …` + args.
    pub fn cli(&self, args: &[&str]) -> Output {
        let cfg = self.dir.path().join("fleet.toml");
        let mut all = vec!["--config", cfg.to_str().unwrap()];
        all.extend_from_slice(args);
        fleetgate(&self.store(), &all)
    }

    /// A server-like process with exactly this environment (plus PATH),
    /// visible in /proc with its final command line before this returns.
    pub fn spawn(&mut self, env: &[(&str, &str)]) -> i64 {
        self.spawn_with_args(env, &[])
    }

    /// `spawn`, with `args` after the marker on the command line.
    pub fn spawn_with_args(&mut self, env: &[(&str, &str)], args: &[&str]) -> i64 {
        let mut cmd = Command::new("python3");
        cmd.args(["-c", "import time; time.sleep(600)", &self.marker])
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.stdin(std::process::Stdio::null()).spawn().expect("python3");
        let pid = i64::from(child.id());
        self.children.push(child);
        let marker = self.marker.clone();
        assert!(wait_until(5.0, || std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&marker))));
        pid
    }

    /// `runtime register` for `pid`; returns the row.
    pub fn register(&self, ns: &str, profile: &str, role: &str, pid: i64, extra: &[&str]) -> serde_json::Value {
        let args = fleetgate_testkit::records::runtime_register(ns, profile, role, pid, extra);
        let out = self.cli(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        json_of(&out)
    }

    /// Kill one of the spawned processes and reap it.
    pub fn kill(&mut self, pid: i64) {
        let i = self.children.iter().position(|c| i64::from(c.id()) == pid).unwrap();
        let mut c = self.children.remove(i);
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

impl Drop for MarkerFleet {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
