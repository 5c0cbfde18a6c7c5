//! `fleetgate demo`: the fleet story on a throwaway store, with real processes.
//! Five `fleetgate serve` gateways of one cohort make the gate open; a second
//! cohort's author closes it (duplicate, mixed cohort, the operator action);
//! kill -9 of a member shows it stale and missing. Then the pull-request workflow and an
//! operator's approval of one exact merge (`fleetgate_demo`). Everything it starts is
//! stopped before it returns.

use super::observer::LiveObserver;
use crate::cli::context::Ctx;
use crate::cli::inventory::render;
use crate::cli::output::{Exit, Reply};
use anyhow::{Context as _, anyhow};
use fleetgate_control::gate::snapshot;
use fleetgate_core::capability::inventory_action;
use fleetgate_core::env::EnvKey;
use fleetgate_core::inventory::{FleetInventory, summarize};
use fleetgate_store::Store;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One gateway the demo started: its profile, its process, the file its stderr goes to.
struct Gateway {
    profile: String,
    child: Child,
    stderr: PathBuf,
}

impl Gateway {
    /// What it said on its stderr, its last lines (its own reason when it gave up).
    fn said(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        match lines.len() {
            0 => "nothing on its stderr".into(),
            n => lines[n.saturating_sub(3)..].join(" / "),
        }
    }
}

struct Gateways(Vec<Gateway>);

impl Gateways {
    fn stop_all(&mut self) {
        // Closing stdin is the orderly shutdown; a gateway that ignores it is killed.
        for g in &mut self.0 {
            drop(g.child.stdin.take());
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        for Gateway { child: c, .. } in &mut self.0 {
            while c.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        self.0.clear();
    }
}

impl Drop for Gateways {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// The demo's own fleet: its store, its roster and its directory, all in `dir`, so nothing of
/// the operator's configuration or state is read (issue 54).
struct Fleet<'a> {
    exe: &'a Path,
    dir: &'a Path,
    store: &'a Path,
    config: &'a Path,
    repo: &'a Path,
}

impl Fleet<'_> {
    /// A gateway serving `profile` (of the second cohort when given), its stderr kept.
    fn spawn(&self, profile: &str, cohort: Option<&str>, n: usize) -> anyhow::Result<Gateway> {
        let stderr = self.dir.join(format!("{profile}-{n}.stderr"));
        let mut cmd = Command::new(self.exe);
        cmd.arg("--store").arg(self.store).arg("--config").arg(self.config);
        cmd.args(["serve", "--profile", profile, "--repo-root"]).arg(self.repo);
        cmd.env_clear().envs(fleetgate_demo::base_env(self.dir)).current_dir(self.dir);
        if let Some(c) = cohort {
            cmd.env("GITEA_MCP_COHORT_ID", c);
        }
        let file = std::fs::File::create(&stderr).with_context(|| format!("cannot create {}", stderr.display()))?;
        cmd.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(file);
        let child = cmd.spawn().with_context(|| format!("cannot start a gateway for {profile}"))?;
        Ok(Gateway { profile: profile.to_owned(), child, stderr })
    }
}

/// How long the demo waits for its gateways' rows.
const ROWS_WITHIN: Duration = Duration::from_secs(15);

/// Wait (bounded by `within`) until every gateway in `gateways` has its running row; a gateway
/// that exits first, or has none in time, fails the demo with its own reason (its stderr).
fn wait_rows(store: &dyn Store, gateways: &mut Gateways, within: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    loop {
        let running: Vec<i64> = store
            .list_runtime()?
            .iter()
            .filter(|r| r.status == fleetgate_core::runtime::RuntimeStatus::Running)
            .map(|r| r.pid)
            .collect();
        let pid = |g: &Gateway| i64::from(g.child.id());
        let waiting: Vec<&mut Gateway> = gateways.0.iter_mut().filter(|g| !running.contains(&pid(g))).collect();
        if waiting.is_empty() {
            return Ok(());
        }
        for g in waiting {
            if let Some(status) = g.child.try_wait()? {
                return Err(anyhow!("the {} gateway exited ({status}) before it registered: {}", g.profile, g.said()));
            }
        }
        if Instant::now() > deadline {
            let late: Vec<String> = gateways
                .0
                .iter()
                .filter(|g| !running.contains(&pid(g)))
                .map(|g| format!("{} (pid {}): {}", g.profile, pid(g), g.said()))
                .collect();
            return Err(anyhow!(
                "{} of {} gateways wrote no runtime row within {} s: {}",
                late.len(),
                gateways.0.len(),
                within.as_secs_f64(),
                late.join("; ")
            ));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// The built-in roster as a file of the demo's own: its gateways are given it, never the
/// operator's (`fleetgate init` writes one where a gateway without `--config` would read it).
fn roster_file(dir: &Path) -> anyhow::Result<(PathBuf, fleetgate_config::FleetConfig)> {
    let builtin = fleetgate_config::FleetConfig::builtin();
    let mut text = format!("[fleet]\nname = {:?}\n", builtin.name);
    for m in &builtin.members {
        text.push_str(&format!(
            "\n[[members]]\nnamespace = {:?}\nprofile = {:?}\nrole = {:?}\n",
            m.namespace, m.profile, m.role
        ));
    }
    let path = dir.join("fleet.toml");
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    let config = fleetgate_config::FleetConfig::load(Some(&path), &fleetgate_core::env::EnvSnapshot::default())?;
    Ok((path, config))
}

/// The forge stand-in, `fleetgate-forge-fixture`: beside this binary (a workspace build puts
/// it there), else on `path` (the PATH). The product binary carries no fake forge; the demo
/// needs one.
fn forge_stand_in(exe: &Path, path: &str) -> anyhow::Result<std::path::PathBuf> {
    const NAME: &str = "fleetgate-forge-fixture";
    let beside = exe.with_file_name(NAME);
    if beside.is_file() {
        return Ok(beside);
    }
    if let Some(found) = fleetgate_doctor::probe::resolve(NAME, path) {
        return Ok(found);
    }
    anyhow::bail!(
        "the demo's forge stand-in `{NAME}` is neither beside {} nor on the PATH: build it with \
         `cargo build --release --workspace` (README), or install it with \
         `cargo install --locked --path crates/testkit`",
        exe.display()
    )
}

fn git_repo(dir: &Path) -> anyhow::Result<()> {
    let git = |args: &[&str]| -> anyhow::Result<()> {
        let ok = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=fleetgate demo", "-c", "user.email=demo@fleetgate.invalid"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .context("cannot run git")?
            .success();
        if ok { Ok(()) } else { Err(anyhow!("git {args:?} failed")) }
    };
    std::fs::create_dir_all(dir)?;
    git(&["init", "-q"])?;
    git(&["commit", "-q", "--allow-empty", "-m", "demo"])
}

/// Run the demo.
pub fn run(ctx: &Ctx, forge_name: &str) -> anyhow::Result<Reply> {
    let dialect = fleetgate_core::dialect::by_name(forge_name).ok_or_else(|| {
        anyhow!(
            "--forge {forge_name:?} is not a known forge dialect (known: {})",
            fleetgate_core::dialect::NAMES.join(", ")
        )
    })?;
    let dir = tempfile::Builder::new().prefix("fleetgate-demo-").tempdir()?;
    let store_path = dir.path().join("registry.sqlite3");
    let repo = dir.path().join("checkout");
    git_repo(&repo)?;
    let (config_path, config) = roster_file(dir.path())?;
    let store = fleetgate_store::open(&store_path.to_string_lossy())?;
    let exe = std::env::current_exe().context("cannot find the fleetgate binary")?;
    // Before anything is shown: without the stand-in the demo cannot tell its second act.
    let forge = forge_stand_in(&exe, ctx.env.get(EnvKey::Path, "").unwrap_or(""))?;
    let fleet = Fleet { exe: &exe, dir: dir.path(), store: &store_path, config: &config_path, repo: &repo };
    let mut gateways = Gateways(Vec::new());
    let mut steps = Vec::new();
    let mut text = Vec::new();
    let mut show = |title: &str, inv: &FleetInventory, extra: Option<String>| {
        text.push(format!("== {title}\n{}", render(inv)));
        if let Some(e) = &extra {
            text.push(format!("operator action: {e}"));
        }
        text.push(String::new());
        steps.push(json!({
            "step": title,
            "summary": summarize(inv),
            "mutation_gate_satisfied": inv.mutation_gate_satisfied,
            "operator_action": extra,
            "inventory": inv,
        }));
    };

    // The fleet as the gate sees it now.
    let look = || snapshot(&config, Ok(&*store), &LiveObserver::default(), ctx.clock.now(), None).inventory;
    for m in &config.members {
        gateways.0.push(fleet.spawn(&m.profile, None, 1)?);
    }
    wait_rows(&*store, &mut gateways, ROWS_WITHIN)?;
    let inv = look();
    show("five gateways of one cohort", &inv, None);

    gateways.0.push(fleet.spawn("prgs-author", Some("cohort-b"), 2)?);
    wait_rows(&*store, &mut gateways, ROWS_WITHIN)?;
    let inv = look();
    let action = (!inv.mutation_gate_satisfied).then(|| inventory_action(&inv));
    show("a second cohort starts another author", &inv, action);

    // The operator does what the action says: the second author stops in order.
    if let Some(mut second) = gateways.0.pop() {
        drop(second.child.stdin.take());
        second.child.wait()?;
    }
    let inv = look();
    show("the operator stops the second author", &inv, None);

    if let Some(i) = gateways.0.iter().position(|g| g.profile == "prgs-reviewer") {
        let mut reviewer = gateways.0.remove(i);
        reviewer.child.kill().context("cannot kill the reviewer")?;
        reviewer.child.wait()?;
    }
    let inv = look();
    let action = (!inv.mutation_gate_satisfied).then(|| inventory_action(&inv));
    show("the reviewer is killed with SIGKILL", &inv, action);

    gateways.stop_all();
    let left =
        store.list_runtime()?.iter().filter(|r| r.status == fleetgate_core::runtime::RuntimeStatus::Running).count();
    text.push(format!(
        "== stopped every gateway; {left} runtime row(s) left running (the killed reviewer's, now history)"
    ));
    text.push(String::new());
    let (lines, workflow) = fleetgate_demo::run(&exe, &forge, dir.path(), &repo, dialect)?;
    text.extend(lines);
    Ok(Reply {
        value: json!({ "store": store_path.display().to_string(), "steps": steps, "workflow": workflow }),
        text: text.join("\n"),
        exit: Exit::Ok,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gateway(dir: &Path, profile: &str, script: &str) -> Gateway {
        let stderr = dir.join(format!("{profile}.stderr"));
        let child = Command::new("sh")
            .args(["-c", script])
            .stdin(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        Gateway { profile: profile.into(), child, stderr }
    }

    /// Issue 54: `only 0 of 5 gateways wrote their runtime rows within 15 s`, and no reason.
    /// A gateway that exits before it registers fails the demo at once with its own words; one
    /// still silent when the wait ends is named with what it said so far.
    #[test]
    fn a_gateway_that_never_registers_is_named_with_its_own_reason() {
        let dir = tempfile::tempdir().unwrap();
        let store = fleetgate_store::open(&dir.path().join("r.sqlite3").display().to_string()).unwrap();
        let why = "fleetgate: profile \"prgs-author\" is not in the roster (/home/op/.config/fleetgate/fleet.toml)";
        let mut gateways = Gateways(vec![gateway(dir.path(), "prgs-author", &format!("echo '{why}' >&2; exit 1"))]);
        let err = wait_rows(&*store, &mut gateways, Duration::from_secs(15)).unwrap_err().to_string();
        assert!(err.starts_with("the prgs-author gateway exited (exit status: 1) before it registered: "), "{err}");
        assert!(err.ends_with(why), "{err}");

        let script = "echo 'starting' >&2; exec sleep 30";
        let mut gateways = Gateways(vec![gateway(dir.path(), "prgs-reviewer", script)]);
        let pid = gateways.0[0].child.id();
        let err = wait_rows(&*store, &mut gateways, Duration::from_millis(200)).unwrap_err().to_string();
        assert_eq!(
            err,
            format!("1 of 1 gateways wrote no runtime row within 0.2 s: prgs-reviewer (pid {pid}): starting")
        );
        gateways.0[0].child.kill().unwrap();
    }
}
