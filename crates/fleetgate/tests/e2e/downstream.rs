//! What the gateway's downstream child gets and keeps: only the declared environment, no
//! process left behind when the gateway is killed, and a first sessionless call that waits
//! for a downstream still starting.

use crate::support::{FleetDir, Member, serial, wait_until};
use std::path::Path;

/// `KEY=value` lines of a file `env` wrote, as pairs.
fn dumped_env(path: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect()
}

#[test]
fn the_downstream_sees_only_declared_keys_never_the_token_or_the_store_url() {
    let _serial = serial();
    let config = "[fleet]\nname = \"envs\"\npass_through_env = [\"GITEA_HOST\", \"GITEA_ACCESS_TOKEN\"]\n\n\
                  [downstream]\npass_env = [\"NODE_*\"]\n\n\
                  [[members]]\nnamespace = \"gitea-author\"\nprofile = \"prgs-author\"\nrole = \"author\"\n";
    let f = FleetDir::new(config);
    let dump = f.dir.path().join("downstream.env");
    let script = format!("env > {}.part && mv {0}.part {0} && exec sleep 600", dump.display());
    let mut argv = vec![
        "FLEETGATE_HTTP_TOKEN=http-token-must-not-leak".to_owned(),
        "GITEA_WORKER_REGISTRY_DB=postgres://fleet:store-password@db.invalid/fleet".to_owned(),
        "UNDECLARED_SECRET=undeclared-must-not-leak".to_owned(),
        "GITEA_HOST=https://forge.invalid".to_owned(),
        "GITEA_ACCESS_TOKEN=forge-pat".to_owned(),
        "NODE_OPTIONS=--trace-warnings".to_owned(),
        "LANG=C.UTF-8".to_owned(),
    ];
    // `--store` names the store, so the URL above is only in the environment.
    argv.extend(f.serve_argv("prgs-author", "c", &["/bin/sh", "-c", &script]));
    let member = Member::start(&argv);
    assert!(wait_until(20.0, || dump.exists()), "the downstream did not start");
    let env = dumped_env(&dump);
    let keys: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
    let text = std::fs::read_to_string(&dump).unwrap();
    for secret in ["http-token-must-not-leak", "store-password", "undeclared-must-not-leak"] {
        assert!(!text.contains(secret), "{secret} reached the downstream: {keys:?}");
    }
    for absent in ["FLEETGATE_HTTP_TOKEN", "GITEA_WORKER_REGISTRY_DB", "UNDECLARED_SECRET", "GITEA_MCP_COHORT_ID"] {
        assert!(!keys.contains(&absent), "{absent} reached the downstream: {keys:?}");
    }
    for (key, value) in [
        ("GITEA_HOST", "https://forge.invalid"),
        ("GITEA_ACCESS_TOKEN", "forge-pat"),
        ("NODE_OPTIONS", "--trace-warnings"),
        ("LANG", "C.UTF-8"),
    ] {
        assert!(env.iter().any(|(k, v)| k == key && v == value), "{key} missing: {keys:?}");
    }
    assert!(keys.contains(&"PATH"), "the basics pass: {keys:?}");
    member.stop();
}

/// Whether `pid` is gone: no such process, or a zombie nobody has reaped yet (dead all the
/// same; a container's init may be slow to reap what is reparented to it).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// Start a gateway whose downstream is `/bin/sh -c script(PIDFILE)`, read the pid the
/// script writes to PIDFILE, check it with `running`, SIGKILL the gateway, and tell whether
/// that process died within 10 s (killing it otherwise, so a failure leaks nothing).
fn dies_with_the_gateway(
    fleet: &str,
    script: impl Fn(&std::path::Path) -> String,
    running: impl Fn(u32),
) -> (u32, bool) {
    let f = FleetDir::new(&format!(
        "[fleet]\nname = \"{fleet}\"\n\n[[members]]\nnamespace = \"gitea-author\"\nprofile = \"prgs-author\"\nrole = \"author\"\n"
    ));
    let pidfile = f.dir.path().join("descendant.pid");
    let mut member = Member::start(&f.serve_argv("prgs-author", "c", &["/bin/sh", "-c", &script(&pidfile)]));
    assert!(wait_until(20.0, || pidfile.exists()), "the downstream did not start");
    let pid: u32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    assert!(!gone(pid), "the descendant runs while the gateway does");
    running(pid);
    member.0.kill().unwrap();
    member.0.wait().unwrap();
    let died = wait_until(10.0, || gone(pid));
    if !died {
        let _ = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status();
    }
    (pid, died)
}

#[test]
fn kill_9_of_the_gateway_leaves_no_descendant_of_the_downstream_behind() {
    let _serial = serial();
    // A downstream whose own child is in the background: the gateway's direct child is
    // `sleep 601`, its child `sleep 600`.
    let (grandchild, died) = dies_with_the_gateway(
        "orphans",
        |pidfile| format!("sleep 600 & echo $! > {0}.part && mv {0}.part {0}; exec sleep 601", pidfile.display()),
        |_| {},
    );
    assert!(died, "the downstream's child {grandchild} outlived the gateway's SIGKILL");
}

/// A descendant that left the downstream's process group and session, and whose parent is
/// gone (a daemon's double fork with `setsid`): the group kill cannot reach it, but the
/// guard, its subreaper, finds it in its tree and kills it with the rest.
#[test]
fn kill_9_of_the_gateway_leaves_no_daemonised_descendant_behind() {
    let _serial = serial();
    // The subshell starts `sleep 600` in a session of its own and exits: the sleep is
    // orphaned, outside the downstream's group and session.
    let (daemon, died) = dies_with_the_gateway(
        "daemons",
        |pidfile| {
            format!("(setsid sleep 600 & echo $! > {0}.part && mv {0}.part {0}); exec sleep 601", pidfile.display())
        },
        |pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
            let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
            assert_eq!(fields[3], pid.to_string(), "it leads a session of its own: {stat}");
        },
    );
    assert!(died, "the downstream's daemon {daemon} outlived the gateway's SIGKILL");
}

#[test]
fn the_first_sessionless_call_waits_for_a_downstream_still_starting() {
    use crate::httpkit::{HttpGateway, Raw};
    use crate::support::{bare_repo, forge_fixture};
    let _serial = serial();
    let f = FleetDir::new(
        "[fleet]\nname = \"slow\"\ntool_prefix = \"gitea_\"\n\n[supervision]\nbackoff_seconds = [1.5]\n\
         jitter_ratio = 0\n\n[[members]]\nnamespace = \"gitea-author\"\nprofile = \"prgs-author\"\nrole = \"author\"\n",
    );
    let bare = bare_repo(f.dir.path(), "forge.git", &f.repo());
    let marker = f.dir.path().join("first-run");
    // Slow to start: its first run fails at once; the second, 1.5 s later, comes up.
    let script = format!(
        "if [ ! -e {m} ]; then touch {m}; exit 1; fi; exec {fixture} --repo {bare}",
        m = marker.display(),
        fixture = forge_fixture().join(" "),
        bare = bare.display()
    );
    let g = HttpGateway::start(&f, None, &["/bin/sh", "-c", &script]);
    let raw = Raw::new(&g);
    // The client's first request (a control tool) makes its attachment and starts its
    // downstream; its first call of a downstream tool comes while the downstream waits to
    // be restarted.
    let context = serde_json::json!({ "name": "gitea_get_runtime_context", "arguments": {} });
    let state = || {
        raw.stateless(1, "tools/call", context.clone(), "slow", None).body["result"]["structuredContent"]["downstream"]
            ["state"]
            .clone()
    };
    assert!(wait_until(10.0, || state() == "restarting"), "the first run did not fail: {}", state());
    let call = serde_json::json!({ "name": "get_me", "arguments": {} });
    let first = raw.stateless(2, "tools/call", call, "slow", None);
    assert_eq!(first.status, 200, "{first:?}");
    let text = first.body["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    assert!(!text.starts_with("downstream_unavailable"), "the first call did not wait: {}", first.body);
    assert!(text.contains("fleet-bot"), "{}", first.body);
    g.stop();
}

/// `/proc/PID/environ` of `pid`, as `KEY=value` text, one a line.
fn environ_of(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', "\n"))
        .unwrap_or_default()
}

/// Issue 34 (B): the downstream reads its parent's (the guard's) and the gateway's
/// `/proc/PID/environ`; neither holds the bearer token or the store URL's password, and the
/// gateway still authenticates with the token and uses the store the URL names.
#[test]
fn the_downstream_cannot_read_the_gateways_secrets_from_proc_environ() {
    use crate::httpkit::HttpGateway;
    use crate::support::{Client, peer};
    let _serial = serial();
    let token = "tok-sealed-9d2e-never-in-environ";
    let f = FleetDir::new(crate::http::CONFIG);
    let dumps = f.dir.path().join("dumps");
    std::fs::create_dir(&dumps).unwrap();
    // The downstream: its parent's environment, and its grandparent's (the gateway), then the server.
    let script = format!(
        "cat /proc/$PPID/environ > {d}/guard.part; gw=$(cut -d' ' -f4 /proc/$PPID/stat); \
         cat /proc/$gw/environ > {d}/gateway.part; echo $gw > {d}/gateway.pid.part; \
         for n in guard gateway gateway.pid; do mv {d}/$n.part {d}/$n; done; exec {py} {server}",
        d = dumps.display(),
        py = peer(".venv/bin/python").display(),
        server = peer("tests/peers/minimal_server.py").display(),
    );
    // The store named by the environment alone would be a URL with a password; here a path
    // is named by --store, and the URL only sits in the environment, as in downstream.rs above.
    let url = "postgres://fleet:store-password-sealed@db.invalid/fleet";
    let otel = "authorization=Bearer%20otel-secret-sealed";
    let g = HttpGateway::start_with_env(
        &f,
        Some(token),
        &["/bin/sh", "-c", &script],
        "info",
        // PATH reaches the downstream (and its guard), so their environ is not empty.
        &[("GITEA_WORKER_REGISTRY_DB", url), ("OTEL_EXPORTER_OTLP_HEADERS", otel), ("PATH", "/usr/bin:/bin")],
    );
    let mut c =
        Client::start_url(&g.url(), &["MCP_DRIVE_CLIENT_NAME=sealed".to_owned(), format!("MCP_DRIVE_BEARER={token}")]);
    assert!(c.tools().iter().any(|t| t["name"] == "stamp"), "the downstream serves behind the token");
    assert!(wait_until(20.0, || dumps.join("gateway.pid").exists()), "the downstream did not dump");
    let gateway_pid: u32 = std::fs::read_to_string(dumps.join("gateway.pid")).unwrap().trim().parse().unwrap();
    assert_eq!(gateway_pid, g.child.id(), "the guard's parent is the gateway (same pid after it re-executed)");
    let seen = [
        ("the guard's environ, read by the downstream", std::fs::read(dumps.join("guard")).unwrap()),
        ("the gateway's environ, read by the downstream", std::fs::read(dumps.join("gateway")).unwrap()),
        ("the gateway's environ, read now", environ_of(gateway_pid).into_bytes()),
    ];
    for (what, bytes) in &seen {
        let text = String::from_utf8_lossy(bytes);
        assert!(!text.is_empty(), "{what} was read");
        for secret in [token, "store-password-sealed", "otel-secret-sealed"] {
            assert!(!text.contains(secret), "{secret} is in {what}: {text}");
        }
    }
    // No descriptor of the gateway still holds them.
    let fds: Vec<String> = std::fs::read_dir(format!("/proc/{gateway_pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|l| l.display().to_string())
        .collect();
    assert!(!fds.iter().any(|l| l.contains("memfd:fleetgate-sealed-env")), "{fds:?}");
    // The token still guards the endpoint.
    let raw = crate::httpkit::Raw::new(&g);
    assert_eq!(raw.initialize("no-token", None).status, 401);
    assert_eq!(raw.initialize("with-token", Some(token)).status, 200);
    drop(c);
    g.stop();
}
