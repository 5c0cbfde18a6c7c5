//! Test-only fixtures: the binary under test and a plain dashboard process; the island,
//! the HTTP client and the browser (shared with the benchmark) come from `fixture`.

pub use crate::fixture::{Browser, HEAD, Island, first_event, get, http, wait_until};
use crate::fixture::{STDERR_CLOSED, roster, watch_stderr};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

/// Hold for tests that start a browser: two at once would starve a 2-core machine.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fleetgate"))
}

/// `n` members and the dashboard under test on an island (see `fixture`).
pub fn island(n: usize, args: &[&str]) -> Island {
    Island::start(&bin(), n, args)
}

/// Where tests leave files for people to look at (screenshots).
pub fn output_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap().join("test-output/dashboard");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `fleetgate dashboard` as a plain process (no island), for the contract tests.
pub struct Dashboard {
    pub addr: SocketAddr,
    pub log: Arc<Mutex<String>>,
    pub child: Child,
    _dir: tempfile::TempDir,
}

/// Run `fleetgate --store (fresh) dashboard ARGS…` with `env`; `Err((code, stderr))` when it exits.
pub fn dashboard(env: &[(&str, &str)], args: &[&str]) -> Result<Dashboard, (Option<i32>, String)> {
    dashboard_with("", env, args)
}

/// [`dashboard`] with `more` appended to its one-member roster.
pub fn dashboard_with(more: &str, env: &[(&str, &str)], args: &[&str]) -> Result<Dashboard, (Option<i32>, String)> {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("{}\n{more}", roster("fgdash-contract-never-matches", 1));
    std::fs::write(dir.path().join("fleet.toml"), text).unwrap();
    let mut cmd = Command::new(bin());
    cmd.env_clear().env("PATH", "/usr/bin:/bin");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .arg("--store")
        .arg(dir.path().join("registry.sqlite3"))
        .arg("--config")
        .arg(dir.path().join("fleet.toml"))
        .arg("dashboard")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (addr, log) = watch_stderr(child.stderr.take().unwrap());
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(addr) = addr.recv_timeout(Duration::from_millis(50)) {
            return Ok(Dashboard { addr, log, child, _dir: dir });
        }
        if let Some(status) = child.try_wait().unwrap() {
            return Err((status.code(), whole_log(&log)));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the dashboard neither listened nor exited: {}", log.lock().unwrap());
}

/// Everything the process wrote to stderr, once it closed it (bounded wait).
pub fn whole_log(log: &Mutex<String>) -> String {
    assert!(wait_until(10.0, || log.lock().unwrap().ends_with(STDERR_CLOSED)), "stderr was not closed");
    log.lock().unwrap().clone()
}

impl Dashboard {
    /// The store the dashboard reads.
    pub fn store(&self) -> PathBuf {
        self._dir.path().join("registry.sqlite3")
    }

    /// The CLI on the dashboard's store and roster: `fleetgate --json ARGS…`, its JSON answer.
    pub fn cli(&self, args: &[&str]) -> serde_json::Value {
        let out = Command::new(bin())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .arg("--store")
            .arg(self.store())
            .arg("--config")
            .arg(self._dir.path().join("fleet.toml"))
            .arg("--json")
            .args(args)
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stderr)))
    }

    /// SIGTERM, the exit waited for (bounded), and everything it logged.
    pub fn stop(&mut self) -> (Option<i32>, String) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        assert!(wait_until(10.0, || self.child.try_wait().unwrap().is_some()), "SIGTERM did not stop it");
        (self.child.wait().unwrap().code(), whole_log(&self.log))
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
