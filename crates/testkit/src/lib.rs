//! fleetgate-testkit (`publish = false`): what fleetgate's tests share and the product
//! does not carry.
//!
//! * [`forge`] — the forge stand-in: a Gitea forge behind gitea-mcp's tool surface, real git
//!   on a bare repository, served over MCP stdio by the binary `fleetgate-forge-fixture`
//!   (`src/bin/forge_fixture.rs`); [`forge_fixture_exe`] finds it for a test.
//! * [`browser`] — a headless Chromium driven step by step, for the page tests.
//! * [`oidc`] — an OpenID provider on loopback (metadata, JWKS, key rotation, tokens) for
//!   the gateway's OAuth 2.1 resource server.
//! * [`oracle`] — the state oracle: generated call sequences of every role through real
//!   gateways, the forge's record checked after every call, failures minimised.
//! * [`pg`] — a fresh PostgreSQL database per test, never skipped silently.
//! * [`records`] — a runtime row with every field set, and the `worker register` /
//!   `runtime register` argument lists the suites repeat.
//!
//! May import core, host and gateway; no product crate imports it except as a
//! dev-dependency (`tests/layering.rs` in the binary crate checks).

#![deny(missing_docs)]

pub mod browser;
#[allow(missing_docs)] // A test and demo stand-in, documented at its module.
pub mod forge;
pub mod oidc;
#[allow(missing_docs)] // A test harness, documented at its module.
pub mod oracle;
pub mod pg;
pub mod records;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The name of the forge stand-in's executable.
pub const FORGE_FIXTURE_BIN: &str = "fleetgate-forge-fixture";

/// The forge stand-in's executable, beside the binaries of the running test's (or
/// example's) profile: `target/<profile>/fleetgate-forge-fixture`. Under cargo it is
/// built first (once per process, a no-op when fresh), so `cargo test -p fleetgate`
/// alone never runs a stale or missing stand-in.
pub fn forge_fixture_exe() -> PathBuf {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let me = std::env::current_exe().expect("the test's own path");
        // target/<profile>/deps/<test> or target/<profile>/examples/<example>.
        let profile_dir = me
            .ancestors()
            .find(|d| d.file_name().is_some_and(|n| n == "deps" || n == "examples"))
            .and_then(Path::parent)
            .unwrap_or_else(|| me.parent().expect("a directory"))
            .to_owned();
        let exe = profile_dir.join(FORGE_FIXTURE_BIN);
        build(&profile_dir);
        assert!(
            exe.is_file(),
            "{} is missing: build it with `cargo build -p fleetgate-testkit` (scripts/test builds the workspace)",
            exe.display()
        );
        exe
    })
    .clone()
}

/// The forge stand-in serving GitHub's REST API over HTTP (`--rest-listen`), on the same
/// forge as the MCP stand-ins given the same repository: what `GITHUB_HOST` names for a fleet
/// in front of GitHub's server. Killed when dropped.
#[derive(Debug)]
pub struct RestForge {
    child: std::process::Child,
    /// `http://127.0.0.1:PORT`: the host, as `GITHUB_HOST` names it.
    pub url: String,
}

impl RestForge {
    /// Serve `repo` (a bare repository) with the stand-in's `flags` (`--variant race-merge`,
    /// `--slug`), accepting each `(token, login)`.
    pub fn start(exe: &Path, repo: &Path, flags: &[&str], tokens: &[(&str, &str)]) -> Self {
        use std::io::BufRead;
        let mut command = std::process::Command::new(exe);
        command.args(["--surface", "github-mcp", "--rest-listen", "127.0.0.1:0", "--repo"]).arg(repo).args(flags);
        for (token, login) in tokens {
            command.arg("--token").arg(format!("{token}={login}"));
        }
        let mut child = command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("start the REST stand-in");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("its stdout");
        std::io::BufReader::new(stdout).read_line(&mut line).expect("the REST stand-in's address");
        let url = line.trim().strip_prefix("listening on ").unwrap_or_default().to_owned();
        assert!(url.starts_with("http://"), "the REST stand-in did not start: {line:?}");
        Self { child, url }
    }
}

impl Drop for RestForge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `cargo build` the stand-in into `profile_dir`'s target directory, when this process runs
/// under cargo (which says where it is in `CARGO`).
fn build(profile_dir: &Path) {
    let Some(cargo) = pg::harness_env("CARGO") else { return };
    let (Some(target), Some(profile)) = (profile_dir.parent(), profile_dir.file_name().and_then(|p| p.to_str())) else {
        return;
    };
    let profile = if profile == "debug" { "dev" } else { profile };
    let out = std::process::Command::new(cargo)
        .args(["build", "--quiet", "-p", "fleetgate-testkit", "--bin", FORGE_FIXTURE_BIN, "--profile", profile])
        .arg("--target-dir")
        .arg(target)
        .output()
        .expect("run cargo build for the forge stand-in");
    assert!(out.status.success(), "building the forge stand-in failed:\n{}", String::from_utf8_lossy(&out.stderr));
}
