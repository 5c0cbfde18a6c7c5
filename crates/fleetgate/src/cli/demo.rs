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
use fleetgate_control::gate::assess_inventory;
use fleetgate_core::capability::inventory_action;
use fleetgate_core::env::EnvKey;
use fleetgate_core::inventory::{FleetInventory, summarize};
use fleetgate_store::Store;
use serde_json::json;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Gateways(Vec<(String, Child)>);

impl Gateways {
    fn stop_all(&mut self) {
        // Closing stdin is the orderly shutdown; a gateway that ignores it is killed.
        for (_, c) in &mut self.0 {
            drop(c.stdin.take());
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        for (_, c) in &mut self.0 {
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

fn spawn(exe: &Path, store: &Path, repo: &Path, profile: &str, cohort: Option<&str>) -> anyhow::Result<Child> {
    let mut cmd = Command::new(exe);
    cmd.arg("--store").arg(store).args(["serve", "--profile", profile, "--repo-root"]).arg(repo);
    cmd.env_clear().envs(fleetgate_demo::base_env());
    if let Some(c) = cohort {
        cmd.env("GITEA_MCP_COHORT_ID", c);
    }
    cmd.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null());
    cmd.spawn().with_context(|| format!("cannot start a gateway for {profile}"))
}

fn wait_rows(store: &dyn Store, running: usize) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let n = store
            .list_runtime()?
            .iter()
            .filter(|r| r.status == fleetgate_core::runtime::RuntimeStatus::Running)
            .count();
        if n >= running {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(anyhow!("only {n} of {running} gateways wrote their runtime rows within 15 s"));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
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
    let store = fleetgate_store::open(&store_path.to_string_lossy())?;
    let exe = std::env::current_exe().context("cannot find the fleetgate binary")?;
    // Before anything is shown: without the stand-in the demo cannot tell its second act.
    let forge = forge_stand_in(&exe, ctx.env.get(EnvKey::Path, "").unwrap_or(""))?;
    let config = fleetgate_config::FleetConfig::builtin();
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

    for m in &config.members {
        gateways.0.push((m.profile.clone(), spawn(&exe, &store_path, &repo, &m.profile, None)?));
    }
    wait_rows(&*store, config.members.len())?;
    let inv = assess_inventory(&config, Ok(&*store), &LiveObserver::default(), ctx.clock.now(), None);
    show("five gateways of one cohort", &inv, None);

    gateways.0.push(("prgs-author".into(), spawn(&exe, &store_path, &repo, "prgs-author", Some("cohort-b"))?));
    wait_rows(&*store, config.members.len() + 1)?;
    let inv = assess_inventory(&config, Ok(&*store), &LiveObserver::default(), ctx.clock.now(), None);
    let action = (!inv.mutation_gate_satisfied).then(|| inventory_action(&inv));
    show("a second cohort starts another author", &inv, action);

    // The operator does what the action says: the second author stops in order.
    if let Some((_, mut second)) = gateways.0.pop() {
        drop(second.stdin.take());
        second.wait()?;
    }
    let inv = assess_inventory(&config, Ok(&*store), &LiveObserver::default(), ctx.clock.now(), None);
    show("the operator stops the second author", &inv, None);

    if let Some(i) = gateways.0.iter().position(|(p, _)| p == "prgs-reviewer") {
        let (_, mut child) = gateways.0.remove(i);
        child.kill().context("cannot kill the reviewer")?;
        child.wait()?;
    }
    let inv = assess_inventory(&config, Ok(&*store), &LiveObserver::default(), ctx.clock.now(), None);
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
