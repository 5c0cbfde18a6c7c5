//! Shared fixtures: fresh stores on real files, a store wrapper that counts
//! and injects transient failures, and the CLI under test.

use fleetgate_core::Timestamp;
use fleetgate_core::approval::ApprovalRequest;
use fleetgate_core::audit::AuditEntry;
use fleetgate_core::decision_lock::ReviewLock;
use fleetgate_core::runtime::ProcessScan;
use fleetgate_core::runtime::RuntimeRecord;
use fleetgate_core::worker::{
    ClaimOutcome, HeartbeatOutcome, HeartbeatRequest, RegisterOutcome, Registration, WorkerRecord, worker_identity,
};
use fleetgate_core::workflow::{PrDecision, PrLease, PrOrigin, PrPush, PrRef};
use fleetgate_store::{
    FleetSnapshot, HostIdentity, HostObservation, LockWrite, PrClaimOutcome, PrLeaseClaim, PrRecords, Store,
    StoreError, StoreErrorKind, ToolPin,
};
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
                worker_identity: identity,
                client_name: a.client.into(),
                client_instance_id: format!("inst-{}", a.session),
                session_id: a.session.into(),
                generation_id: a.generation.into(),
                role: "author".into(),
                profile: "prgs-author".into(),
                pid: Some(a.pid),
                heartbeat_ttl_seconds: a.ttl,
            },
            n,
        )
        .expect("register")
}

/// Wraps a real store: counts renewals and fails the first N with `Busy`.
#[derive(Debug)]
pub struct Instrumented {
    pub inner: Arc<dyn Store>,
    pub heartbeats: AtomicU64,
    pub fail_next: AtomicU32,
    pub audit_delay_ms: AtomicU64,
    pub fail_audit: std::sync::atomic::AtomicBool,
    /// What [`Store::bounds_waits`] answers (false: the auditor's thread does every write).
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
            audit_delay_ms: AtomicU64::new(0),
            fail_audit: std::sync::atomic::AtomicBool::new(false),
            leads: std::sync::atomic::AtomicBool::new(false),
            committers: std::sync::Mutex::default(),
        })
    }
}

impl Store for Instrumented {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn check_location(&self) -> Result<(), StoreError> {
        self.inner.check_location()
    }
    fn bounds_waits(&self) -> bool {
        self.leads.load(Ordering::SeqCst)
    }
    fn schema_version(&self) -> Result<u32, StoreError> {
        self.inner.schema_version()
    }
    fn register(&self, r: &Registration, now: Timestamp) -> Result<RegisterOutcome, StoreError> {
        self.inner.register(r, now)
    }
    fn get_worker(&self, id: &str) -> Result<Option<WorkerRecord>, StoreError> {
        self.inner.get_worker(id)
    }
    fn list_workers(&self) -> Result<Vec<WorkerRecord>, StoreError> {
        self.inner.list_workers()
    }
    fn heartbeat(&self, req: &HeartbeatRequest, now: Timestamp) -> Result<HeartbeatOutcome, StoreError> {
        if self.fail_next.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
            return Err(StoreError::new(StoreErrorKind::Busy, "database is locked"));
        }
        let out = self.inner.heartbeat(req, now);
        self.heartbeats.fetch_add(1, Ordering::SeqCst);
        out
    }
    fn claim_generation(&self, id: &str, g: &str, now: Timestamp) -> Result<Option<ClaimOutcome>, StoreError> {
        self.inner.claim_generation(id, g, now)
    }
    fn deregister_worker(&self, id: &str, now: Timestamp) -> Result<bool, StoreError> {
        self.inner.deregister_worker(id, now)
    }
    fn upsert_runtime(&self, row: &RuntimeRecord) -> Result<(), StoreError> {
        self.inner.upsert_runtime(row)
    }
    fn list_runtime(&self) -> Result<Vec<RuntimeRecord>, StoreError> {
        self.inner.list_runtime()
    }
    fn touch_runtime(&self, id: &str, now: Timestamp) -> Result<bool, StoreError> {
        self.inner.touch_runtime(id, now)
    }
    fn mark_runtime_stopped(&self, id: &str, now: Timestamp) -> Result<bool, StoreError> {
        self.inner.mark_runtime_stopped(id, now)
    }
    fn prune_workers(&self, older_than_seconds: i64, now: Timestamp) -> Result<Vec<String>, StoreError> {
        self.inner.prune_workers(older_than_seconds, now)
    }
    fn prune_runtime(&self, older_than_seconds: i64, now: Timestamp) -> Result<Vec<String>, StoreError> {
        self.inner.prune_runtime(older_than_seconds, now)
    }
    fn prune_audit(&self, before: Timestamp, limit: usize) -> Result<u64, StoreError> {
        self.inner.prune_audit(before, limit)
    }
    fn prune_approvals(&self, before: Timestamp) -> Result<fleetgate_store::PrunedApprovals, StoreError> {
        self.inner.prune_approvals(before)
    }
    fn prune_observations(&self, before: Timestamp) -> Result<u64, StoreError> {
        self.inner.prune_observations(before)
    }
    fn idle_prs(&self, before: Timestamp) -> Result<Vec<PrRef>, StoreError> {
        self.inner.idle_prs(before)
    }
    fn prune_pr(&self, pr: &PrRef, before: Timestamp) -> Result<bool, StoreError> {
        self.inner.prune_pr(pr, before)
    }
    fn old_pushes(&self, before: Timestamp) -> Result<Vec<(i64, PrPush)>, StoreError> {
        self.inner.old_pushes(before)
    }
    fn prune_pushes(&self, ids: &[i64], before: Timestamp) -> Result<u64, StoreError> {
        self.inner.prune_pushes(ids, before)
    }
    fn append_audit(&self, entry: &AuditEntry) -> Result<i64, StoreError> {
        let thread = std::thread::current().name().unwrap_or_default().to_owned();
        self.committers.lock().unwrap().push(thread);
        std::thread::sleep(std::time::Duration::from_millis(self.audit_delay_ms.load(Ordering::SeqCst)));
        if self.fail_audit.load(Ordering::SeqCst) {
            return Err(StoreError::new(StoreErrorKind::Io, "the audit store is failing"));
        }
        self.inner.append_audit(entry)
    }
    fn list_audit(&self, since: Option<Timestamp>, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        self.inner.list_audit(since, limit)
    }
    fn audit_after(&self, after: i64, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        self.inner.audit_after(after, limit)
    }
    fn server_now(&self) -> Result<Option<Timestamp>, StoreError> {
        self.inner.server_now()
    }
    fn publish_observation(&self, host: &HostIdentity, scan: &ProcessScan, now: Timestamp) -> Result<bool, StoreError> {
        self.inner.publish_observation(host, scan, now)
    }
    fn list_observations(&self) -> Result<Vec<HostObservation>, StoreError> {
        self.inner.list_observations()
    }
    fn fleet_snapshot(&self) -> Result<FleetSnapshot, StoreError> {
        self.inner.fleet_snapshot()
    }
    fn claim_pr_lease(&self, claim: &PrLeaseClaim, now: Timestamp) -> Result<PrClaimOutcome, StoreError> {
        self.inner.claim_pr_lease(claim, now)
    }
    fn pr_records(&self, pr: &PrRef) -> Result<PrRecords, StoreError> {
        self.inner.pr_records(pr)
    }
    fn touch_pr_leases(&self, pr: &PrRef, worker: &str, ttl: i64, now: Timestamp) -> Result<usize, StoreError> {
        self.inner.touch_pr_leases(pr, worker, ttl, now)
    }
    fn release_pr_lease(
        &self,
        id: &str,
        holder: Option<&str>,
        reason: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.inner.release_pr_lease(id, holder, reason, now)
    }
    fn release_pr_leases(&self, pr: &PrRef, reason: &str, now: Timestamp) -> Result<usize, StoreError> {
        self.inner.release_pr_leases(pr, reason, now)
    }
    fn list_pr_leases(&self, live_only: bool, now: Timestamp) -> Result<Vec<PrLease>, StoreError> {
        self.inner.list_pr_leases(live_only, now)
    }
    fn record_pr_decision(&self, d: &PrDecision) -> Result<(), StoreError> {
        self.inner.record_pr_decision(d)
    }
    fn record_pr_origin(&self, o: &PrOrigin) -> Result<(), StoreError> {
        self.inner.record_pr_origin(o)
    }
    fn clear_pr_decisions(&self, pr: &PrRef, worker: &str, why: &str) -> Result<usize, StoreError> {
        self.inner.clear_pr_decisions(pr, worker, why)
    }
    fn record_pr_push(&self, push: &PrPush) -> Result<(), StoreError> {
        self.inner.record_pr_push(push)
    }
    fn record_locked_decision(&self, d: &PrDecision, l: &LockWrite) -> Result<Option<ReviewLock>, StoreError> {
        self.inner.record_locked_decision(d, l)
    }
    fn live_review_locks(&self, client: &str, session: &str) -> Result<Vec<ReviewLock>, StoreError> {
        self.inner.live_review_locks(client, session)
    }
    fn list_review_locks(&self, live_only: bool) -> Result<Vec<ReviewLock>, StoreError> {
        self.inner.list_review_locks(live_only)
    }
    fn release_review_locks(&self, pr: &PrRef, reason: &str, now: Timestamp) -> Result<Vec<ReviewLock>, StoreError> {
        self.inner.release_review_locks(pr, reason, now)
    }
    fn release_review_lock(&self, id: &str, reason: &str, now: Timestamp) -> Result<Option<ReviewLock>, StoreError> {
        self.inner.release_review_lock(id, reason, now)
    }
    fn request_approval(&self, r: &ApprovalRequest) -> Result<ApprovalRequest, StoreError> {
        self.inner.request_approval(r)
    }
    fn approval(&self, id: &str) -> Result<Option<ApprovalRequest>, StoreError> {
        self.inner.approval(id)
    }
    fn list_approvals(&self, pending_only: bool) -> Result<Vec<ApprovalRequest>, StoreError> {
        self.inner.list_approvals(pending_only)
    }
    fn answer_approval(
        &self,
        id: &str,
        by: (&fleetgate_core::approval::Approver, &fleetgate_core::person::People),
        approve: bool,
        reason: Option<&str>,
        now: Timestamp,
    ) -> Result<fleetgate_store::Answered, StoreError> {
        self.inner.answer_approval(id, by, approve, reason, now)
    }
    fn expire_approvals(&self, before: Timestamp, now: Timestamp) -> Result<Vec<ApprovalRequest>, StoreError> {
        self.inner.expire_approvals(before, now)
    }
    fn approval_events(&self, after: i64, limit: usize) -> Result<Vec<fleetgate_store::ApprovalEvent>, StoreError> {
        self.inner.approval_events(after, limit)
    }
    fn claim_notify(
        &self,
        target: &str,
        holder: &str,
        start: i64,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<i64>, StoreError> {
        self.inner.claim_notify(target, holder, start, until, now)
    }
    fn advance_notify(&self, target: &str, holder: &str, last: i64, until: Timestamp) -> Result<bool, StoreError> {
        self.inner.advance_notify(target, holder, last, until)
    }
    fn notify_cursor(&self, target: &str) -> Result<Option<i64>, StoreError> {
        self.inner.notify_cursor(target)
    }
    fn record_http_session(&self, session: &fleetgate_store::HttpSession) -> Result<(), StoreError> {
        self.inner.record_http_session(session)
    }
    fn http_session(&self, session_id: &str) -> Result<Option<fleetgate_store::HttpSession>, StoreError> {
        self.inner.http_session(session_id)
    }
    fn forget_http_session(&self, session_id: &str) -> Result<bool, StoreError> {
        self.inner.forget_http_session(session_id)
    }
    fn forget_http_sessions_of(&self, runtime_id: &str) -> Result<usize, StoreError> {
        self.inner.forget_http_sessions_of(runtime_id)
    }
    fn prune_http_sessions(&self, opened_before: Timestamp) -> Result<u64, StoreError> {
        self.inner.prune_http_sessions(opened_before)
    }
    fn approvals_on_record(
        &self,
        digests: &[String],
        asker: (Option<&str>, &str),
        not_before: Timestamp,
    ) -> Result<fleetgate_store::OnRecord, StoreError> {
        self.inner.approvals_on_record(digests, asker, not_before)
    }
    fn approval_watch(&self) -> Result<Box<dyn fleetgate_store::ApprovalWatch>, StoreError> {
        self.inner.approval_watch()
    }
    fn use_approval(
        &self,
        id: &str,
        not_before: Timestamp,
        now: Timestamp,
    ) -> Result<Option<ApprovalRequest>, StoreError> {
        self.inner.use_approval(id, not_before, now)
    }
    fn withdraw_approval(&self, id: &str, why: &str, now: Timestamp) -> Result<bool, StoreError> {
        self.inner.withdraw_approval(id, why, now)
    }
    fn observe_tool(&self, p: &str, t: &str, d: &str, def: &str, now: Timestamp) -> Result<ToolPin, StoreError> {
        self.inner.observe_tool(p, t, d, def, now)
    }
    fn tool_pin(&self, p: &str, t: &str) -> Result<Option<ToolPin>, StoreError> {
        self.inner.tool_pin(p, t)
    }
    fn list_tool_pins(&self, p: Option<&str>) -> Result<Vec<ToolPin>, StoreError> {
        self.inner.list_tool_pins(p)
    }
    fn accept_tool(&self, p: &str, t: &str, d: &str, now: Timestamp) -> Result<bool, StoreError> {
        self.inner.accept_tool(p, t, d, now)
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
