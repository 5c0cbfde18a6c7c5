//! The CLI contract: commands, JSON fields, exit codes, and bad input that
//! gets a clear error and loses nothing.

use crate::support::{bin, fleetgate, json_of};
use std::path::Path;
use std::process::Command;

fn register(store: &Path, client: &str) -> serde_json::Value {
    let args = fleetgate_testkit::records::worker_register(client, "s1", "g1", 4242, &[]);
    let out = fleetgate(store, &args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    json_of(&out)
}

fn code(out: &std::process::Output) -> Option<i32> {
    out.status.code()
}

#[test]
fn register_renew_claim_show_list() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("r.sqlite3");
    let reg = register(&store, "claude-code");
    assert_eq!(reg["client_name"], "claude_code");
    assert_eq!(reg["fencing_epoch"], 1);
    let id = reg["worker_identity"].as_str().unwrap().to_owned();

    let ok = fleetgate(
        &store,
        &[
            "worker",
            "heartbeat",
            "--identity",
            &id,
            "--epoch",
            "1",
            "--expect-client",
            "claude",
            "--expect-pid",
            "4242",
            "--json",
        ],
    );
    assert_eq!(code(&ok), Some(0));
    let v = json_of(&ok);
    assert_eq!(v["renewed"], true);
    assert!(v["blocker_kind"].is_null());

    let drift = fleetgate(
        &store,
        &["worker", "heartbeat", "--identity", &id, "--epoch", "1", "--expect-session", "other", "--json"],
    );
    assert_eq!(code(&drift), Some(3));
    let v = json_of(&drift);
    assert_eq!(v["blocker_kind"], "worker_fenced");
    assert_eq!(v["expectation_drift"][0]["field"], "session_id");
    assert_eq!(v["expectation_drift"][0]["recorded"], "s1");
    assert_eq!(v["expectation_drift"][0]["presented"], "other");

    let claim = fleetgate(&store, &["worker", "claim-generation", "--identity", &id, "--generation", "g2", "--json"]);
    assert_eq!(code(&claim), Some(0));
    assert_eq!(json_of(&claim)["fencing_epoch"], 2);
    let stale = fleetgate(&store, &["worker", "heartbeat", "--identity", &id, "--epoch", "1", "--json"]);
    assert_eq!(code(&stale), Some(3));
    assert_eq!(json_of(&stale)["blocker_kind"], "worker_fenced");

    let show = fleetgate(&store, &["worker", "show", &id, "--json"]);
    let v = json_of(&show);
    assert_eq!(v["generation_id"], "g2");
    assert_eq!(v["heartbeat_fresh"], true);
    assert!(v["heartbeat_age_seconds"].is_number());
    assert!(v["live"].is_boolean());

    // Global flags sit before or after the subcommand.
    let out =
        Command::new(bin()).env_clear().args(["worker", "list", "--json", "--store"]).arg(&store).output().unwrap();
    let v = json_of(&out);
    assert_eq!(v["workers"].as_array().unwrap().len(), 1);
    let table = fleetgate(&store, &["worker", "list"]);
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(text.starts_with("WORKER") && text.contains(&id), "{text}");
}

#[test]
fn a_missing_worker_is_a_no_not_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("r.sqlite3");
    for args in [
        vec!["worker", "heartbeat", "--identity", "wrk-nobody", "--epoch", "1", "--json"],
        vec!["worker", "show", "wrk-nobody", "--json"],
        vec!["worker", "claim-generation", "--identity", "wrk-nobody", "--generation", "g", "--json"],
    ] {
        let out = fleetgate(&store, &args);
        assert_eq!(code(&out), Some(3), "{args:?}");
        assert_eq!(json_of(&out)["blocker_kind"], "session_attachment_missing", "{args:?}");
    }
}

#[test]
fn the_store_comes_from_the_env_key_when_no_flag_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("from-env.sqlite3");
    let out = Command::new(bin())
        .env_clear()
        .env("GITEA_WORKER_REGISTRY_DB", &store)
        .args(["worker", "list", "--json"])
        .output()
        .unwrap();
    assert_eq!(code(&out), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(store.is_file(), "the env key's path was used");
}

#[test]
fn a_non_number_epoch_is_a_clear_error_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("r.sqlite3");
    let id = register(&store, "claude")["worker_identity"].as_str().unwrap().to_owned();
    let before = json_of(&fleetgate(&store, &["worker", "show", &id, "--json"]));
    let out = fleetgate(&store, &["worker", "heartbeat", "--identity", &id, "--epoch", "one"]);
    assert_eq!(code(&out), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--epoch") && err.contains("\"one\""), "{err}");
    assert!(out.stdout.is_empty());
    let after = json_of(&fleetgate(&store, &["worker", "show", &id, "--json"]));
    assert_eq!(before["renewal_count"], after["renewal_count"]);

    for (flag, bad) in [("--pid", "x"), ("--ttl", "-3"), ("--ttl", "soon")] {
        let out = fleetgate(
            &store,
            &[
                "worker",
                "register",
                "--client",
                "c",
                "--session",
                "s",
                "--generation",
                "g",
                "--role",
                "r",
                "--profile",
                "p",
                flag,
                bad,
            ],
        );
        assert_eq!(code(&out), Some(1), "{flag} {bad}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(flag));
    }
    let list = json_of(&fleetgate(&store, &["worker", "list", "--json"]));
    assert_eq!(list["workers"].as_array().unwrap().len(), 1, "nothing was registered by the bad calls");
}

/// The `field` of every row `fleetgate NOUN list --json` lists under `key`.
fn listed(store: &Path, noun: &str, key: &str, field: &str) -> Vec<String> {
    let list = json_of(&fleetgate(store, &[noun, "list", "--json"]));
    list[key].as_array().unwrap().iter().map(|r| r[field].as_str().unwrap().to_owned()).collect()
}

#[test]
fn prune_deletes_old_history_and_never_a_live_row() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("r.sqlite3");
    let live = register(&store, "claude-code")["worker_identity"].as_str().unwrap().to_owned();
    let gone = register(&store, "gemini")["worker_identity"].as_str().unwrap().to_owned();
    assert_eq!(code(&fleetgate(&store, &["worker", "deregister", &gone])), Some(0));

    // Bad ages are refused by name, and delete nothing.
    for bad in ["7", "7 days", "-1d", "1y", "3651d"] {
        let out = fleetgate(&store, &["worker", "prune", "--older-than", bad, "--json"]);
        assert_eq!(code(&out), Some(1), "{bad}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--older-than"), "{bad}");
    }
    let out = fleetgate(&store, &["worker", "prune", "--older-than", "7d", "--json"]);
    assert_eq!(code(&out), Some(0));
    assert_eq!(
        json_of(&out),
        serde_json::json!({"pruned": [], "count": 0, "older_than": "7d", "older_than_seconds": 604800})
    );
    assert_eq!(listed(&store, "worker", "workers", "worker_identity").len(), 2);

    let out = fleetgate(&store, &["worker", "prune", "--older-than", "0s", "--json"]);
    assert_eq!(code(&out), Some(0));
    assert_eq!(json_of(&out)["pruned"], serde_json::json!([gone]));
    assert_eq!(listed(&store, "worker", "workers", "worker_identity"), [live], "the live row stays");
    let text =
        String::from_utf8_lossy(&fleetgate(&store, &["worker", "prune", "--older-than", "0s"]).stdout).into_owned();
    assert_eq!(text.trim(), "0 worker rows pruned (older than 0s)");

    // Runtime rows: a stopped one goes, a running one stays.
    let row = |ns: &str, pid: &str| {
        let out = fleetgate(
            &store,
            &[
                "runtime",
                "register",
                "--namespace",
                ns,
                "--profile",
                "prgs-author",
                "--role",
                "author",
                "--pid",
                pid,
                "--json",
            ],
        );
        assert_eq!(code(&out), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        json_of(&out)["runtime_id"].as_str().unwrap().to_owned()
    };
    let (running, stopped) = (row("gitea-author", "4001"), row("gitea-author-2", "4002"));
    assert_eq!(code(&fleetgate(&store, &["runtime", "deregister", &stopped])), Some(0));
    let out = fleetgate(&store, &["runtime", "prune", "--older-than", "0s", "--json"]);
    assert_eq!(code(&out), Some(0));
    assert_eq!(json_of(&out)["pruned"], serde_json::json!([stopped]));
    assert_eq!(listed(&store, "runtime", "runtimes", "runtime_id"), [running]);
    assert_eq!(code(&fleetgate(&store, &["runtime", "prune", "--older-than", "soon"])), Some(1));
}

#[test]
fn a_corrupt_store_fails_closed_and_is_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("corrupt.sqlite3");
    let garbage = b"this is not a database, it is an operator's precious file\n".repeat(100);
    std::fs::write(&store, &garbage).unwrap();
    let out = fleetgate(&store, &["worker", "list", "--json"]);
    assert_eq!(code(&out), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a database"));
    assert!(json_of(&out)["error"].as_str().unwrap().contains("corrupt.sqlite3"));
    assert_eq!(std::fs::read(&store).unwrap(), garbage);
    assert!(!dir.path().join("corrupt.sqlite3-wal").exists());
}

#[test]
fn a_read_only_store_is_reported_read_only_with_the_fix() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("ro.sqlite3");
    register(&store, "claude-code");
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o400)).unwrap();
    let before = std::fs::read(&store).unwrap();
    let out = if std::fs::metadata("/proc/self").unwrap().uid() == 0 {
        // Root may write any file: the store is nobody's, and nobody runs the command.
        std::os::unix::fs::chown(&store, Some(65534), Some(65534)).unwrap();
        std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534)).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(bin())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .arg("--store")
            .arg(&store)
            .args(["worker", "list"])
            .output()
            .expect("run fleetgate as nobody")
    } else {
        fleetgate(&store, &["worker", "list"])
    };
    assert_eq!(code(&out), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ro.sqlite3 is read-only for this user"), "{err}");
    assert!(err.contains(&format!("chmod u+w {}", store.display())), "{err}");
    assert!(!err.contains("unreadable"), "{err}");
    assert_eq!(std::fs::read(&store).unwrap(), before);
}

/// Issue 34 (C): a store directory others may write, no sticky bit: refused, exit 1, the
/// directory and its mode named; the store in it untouched.
#[test]
fn a_store_in_a_directory_others_may_write_is_refused_with_exit_1() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let store = shared.join("r.sqlite3");
    assert_eq!(code(&fleetgate(&store, &["worker", "list"])), Some(0));
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let before = std::fs::read(&store).unwrap();
    let out = fleetgate(&store, &["worker", "list"]);
    assert_eq!(code(&out), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("store directory {}", shared.display())) && err.contains("mode 0777"), "{err}");
    assert_eq!(std::fs::read(&store).unwrap(), before);
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    assert_eq!(code(&fleetgate(&store, &["worker", "list"])), Some(0), "sticky: accepted");
}

/// Issue 34 (B): the sealed-secrets descriptor is fleetgate's own; one set by hand (nothing
/// to read there) refuses to start rather than run on without the secrets it would hold.
#[test]
fn a_sealed_env_fd_that_holds_no_sealed_secrets_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .env_clear()
        .env("FLEETGATE_SEALED_ENV_FD", "0")
        .env("FLEETGATE_HTTP_TOKEN", "t0k3n-visible")
        .arg("--store")
        .arg(dir.path().join("r.sqlite3"))
        .args(["serve", "--profile", "prgs-author", "--transport", "http", "--listen", "127.0.0.1:0"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(code(&out), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("descriptor 0 is") && err.contains("unset it"), "{err}");
    assert!(!err.contains("listening"), "{err}");
}

#[test]
fn a_non_utf8_config_path_is_used_as_given() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    // `caf\xe9` is not UTF-8; read lossily it would be `caf\u{FFFD}`, another directory.
    let named = dir.path().join(std::ffi::OsStr::from_bytes(b"caf\xe9"));
    std::fs::create_dir(&named).unwrap();
    let roster =
        "[[members]]\nnamespace = \"ns-a\"\nprofile = \"p-a\"\nrole = \"author\"\n\n[http]\ntokens_file = \"tokens\"\n";
    std::fs::write(named.join("fleet.toml"), roster).unwrap();
    // The tokens file beside the config has a bad second line: reading it stops the start
    // naming that line; a lossy path would not find it at all.
    std::fs::write(named.join("tokens"), format!("{}  alice\nnot-a-digest bob\n", "ab".repeat(32))).unwrap();
    let out = Command::new(bin())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .arg("--store")
        .arg(dir.path().join("r.sqlite3"))
        .arg("--config")
        .arg(named.join("fleet.toml"))
        .args(["serve", "--profile", "p-a", "--transport", "http", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(code(&out), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("tokens:2:"), "the tokens file beside the config was read: {err}");
    assert!(!err.contains("cannot read"), "{err}");
}

#[test]
fn a_store_directory_that_cannot_be_created_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, "x").unwrap();
    let store = blocker.join("sub/r.sqlite3");
    let out = fleetgate(&store, &["worker", "list"]);
    assert_eq!(code(&out), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot create store directory") && err.contains("a-file"), "{err}");
}

#[test]
fn usage_errors_exit_two_and_bad_config_exits_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("r.sqlite3");
    assert_eq!(code(&fleetgate(&store, &["worker", "frobnicate"])), Some(2));
    assert_eq!(code(&fleetgate(&store, &["worker", "heartbeat", "--epoch", "1"])), Some(2));
    let cfg = dir.path().join("fleet.toml");
    std::fs::write(&cfg, "[fleet]\nnmae = \"typo\"\n").unwrap();
    let out = fleetgate(&store, &["--config", cfg.to_str().unwrap(), "worker", "list"]);
    assert_eq!(code(&out), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("fleet.toml:2") && err.contains("nmae"), "{err}");
    assert!(!store.exists(), "nothing runs on a bad config");
}

/// Issue 18's operator traps at the CLI: each refused with a clear error, nothing written.
#[test]
fn out_of_range_and_mismatched_values_are_refused_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("r.sqlite3");
    register(&store, "claude");
    let base = ["worker", "register", "--client", "c", "--generation", "g", "--pid", "4242"];
    let long = "x".repeat(70_000);
    let cases: [(&[&str], &str); 8] = [
        (&["--session", "s", "--role", "author", "--profile", "prgs-author", "--ttl", "1e308"], "--ttl"),
        (&["--session", "s", "--role", "author", "--profile", "prgs-author", "--ttl", "0.001"], "--ttl"),
        (&["--session", "s", "--role", "merger", "--profile", "prgs-author"], "does not match profile"),
        (&["--session", "s", "--role", "overlord", "--profile", "prgs-overlord"], "not a role of the roster"),
        (&["--session", "a\u{1b}[2Kb", "--role", "author", "--profile", "prgs-author"], "control character"),
        // Issue 34: a bidi override or a zero-width space is refused like a control character.
        (&["--session", "s\u{202E}rohtua", "--role", "author", "--profile", "prgs-author"], "U+202E"),
        (&["--session", "s", "--role", "author", "--profile", "prgs-author", "--instance", "i\u{200B}"], "U+200B"),
        (&["--session", "s", "--role", "author", "--profile", "prgs-author", "--instance", &long], "longer than 256"),
    ];
    for (extra, needle) in cases {
        let args: Vec<&str> = base.iter().copied().chain(extra.iter().copied()).collect();
        let out = fleetgate(&store, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), Some(1), "{extra:?}: {err}");
        assert!(err.contains(needle), "{extra:?}: {err}");
    }
    let list = json_of(&fleetgate(&store, &["worker", "list", "--json"]));
    assert_eq!(list["workers"].as_array().unwrap().len(), 1, "nothing was registered by the refused calls");
    // A table is never broken by what is stored.
    let text = fleetgate(&store, &["worker", "list"]);
    assert_eq!(code(&text), Some(0));
}

#[test]
fn store_locations_that_are_not_files_are_refused_without_making_one() {
    let dir = tempfile::tempdir().unwrap();
    for (spec, needle) in
        [(":memory:", "in-memory"), ("host=db.example dbname=fleet password=hunter2", "libpq keyword string")]
    {
        let out = Command::new(bin())
            .current_dir(dir.path())
            .env_clear()
            .args(["--store", spec, "worker", "list"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), Some(1), "{spec}: {err}");
        assert!(err.contains(needle) && !err.contains("hunter2"), "{spec}: {err}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "no file was made");
}

#[test]
fn a_roster_with_a_duplicate_namespace_or_a_bad_serve_flag_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("fleet.toml");
    std::fs::write(
        &config,
        "[[members]]\nnamespace = \"gitea-a\"\nprofile = \"prgs-a\"\nrole = \"author\"\n\n\
         [[members]]\nnamespace = \"gitea-a\"\nprofile = \"prgs-b\"\nrole = \"reviewer\"\n",
    )
    .unwrap();
    let store = dir.path().join("r.sqlite3");
    let out = Command::new(bin())
        .env_clear()
        .arg("--store")
        .arg(&store)
        .arg("--config")
        .arg(&config)
        .args(["inventory"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), Some(1), "{err}");
    assert!(err.contains("duplicate namespace \"gitea-a\"") && err.contains("fleet.toml:8"), "{err}");
    for (flag, value) in [("--max-message-bytes", "0"), ("--max-message-bytes", "18446744073709551615")] {
        let out = Command::new(bin())
            .env_clear()
            .arg("--store")
            .arg(&store)
            .args(["serve", "--profile", "prgs-author", flag, value])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), Some(1), "{flag} {value}: {err}");
        assert!(err.contains("--max-message-bytes"), "{err}");
    }
}

#[test]
fn the_forge_command_sees_only_declared_keys_never_the_token_or_the_store_url() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("forge-env");
    // The forge command writes what it was given and exits (the read then fails closed).
    let roster = format!(
        "[fleet]\nforge = \"gitea-mcp\"\npass_through_env = [\"GITEA_ACCESS_TOKEN\"]\n\n[[members]]\n\
         namespace = \"gitea-merger\"\nprofile = \"prgs-merger\"\nrole = \"merger\"\n\n[workflow]\n\
         forge_command = [\"/bin/sh\", \"-c\", \"env > {}\"]\n",
        seen.display()
    );
    std::fs::write(dir.path().join("fleet.toml"), roster).unwrap();
    let out = Command::new(bin())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("FLEETGATE_HTTP_TOKEN", "http-token-secret")
        .env("UNDECLARED_SECRET", "undeclared-secret")
        .env("GITEA_ACCESS_TOKEN", "forge-token")
        .arg("--store")
        .arg(dir.path().join("r.sqlite3"))
        .arg("--config")
        .arg(dir.path().join("fleet.toml"))
        .args(["pr", "show", "7", "--owner", "o", "--repo", "r", "--json"])
        .output()
        .unwrap();
    let env = std::fs::read_to_string(&seen)
        .unwrap_or_else(|e| panic!("the forge command did not run ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    assert!(env.contains("PATH=/usr/bin:/bin"), "{env}");
    assert!(env.contains("GITEA_ACCESS_TOKEN=forge-token"), "a declared pass-through key reaches it: {env}");
    assert!(!env.contains("http-token-secret") && !env.contains("undeclared-secret"), "{env}");
}

/// Issue 43 (10): the forge command is the CLI's own child, and a same-user process reads its
/// parent's `/proc/PID/environ`. The CLI's secrets are in neither environment: the forge
/// command dumps its own and its parent's.
#[test]
fn the_forge_command_reads_no_secret_of_the_cli_in_its_own_or_its_parents_environment() {
    let dir = tempfile::tempdir().unwrap();
    let (own, parent) = (dir.path().join("own-env"), dir.path().join("parent-env"));
    let script = format!("env > '{}'; tr '\\0' '\\n' < /proc/$PPID/environ > '{}'", own.display(), parent.display());
    let roster = format!(
        "[fleet]\nforge = \"gitea-mcp\"\n\n[[members]]\nnamespace = \"gitea-merger\"\nprofile = \"prgs-merger\"\n\
         role = \"merger\"\n\n[workflow]\nforge_command = [\"/bin/sh\", \"-c\", {script:?}]\n"
    );
    std::fs::write(dir.path().join("fleet.toml"), roster).unwrap();
    let secrets = [
        ("FLEETGATE_HTTP_TOKEN", "http-token-secret"),
        ("FLEETGATE_DASHBOARD_TOKEN", "dashboard-token-secret"),
        ("FLEETGATE_METRICS_TOKEN", "metrics-token-secret"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=otlp-header-secret"),
    ];
    // (`capability` is sealed the same way; its forge read needs a live fleet.)
    let args = ["pr", "show", "7", "--owner", "o", "--repo", "r", "--json"];
    let out = Command::new(bin())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .envs(secrets)
        .arg("--store")
        .arg(dir.path().join("r.sqlite3"))
        .arg("--config")
        .arg(dir.path().join("fleet.toml"))
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    for file in [&own, &parent] {
        let env =
            std::fs::read_to_string(file).unwrap_or_else(|e| panic!("the forge command did not run ({e}): {stderr}"));
        assert!(env.contains("PATH=/usr/bin:/bin"), "{}: {env}", file.display());
        for (key, value) in secrets {
            assert!(!env.contains(key) && !env.contains(value), "{}: {key} seen: {env}", file.display());
        }
    }
}

/// Issue 34: a PostgreSQL password holding `/` (which the client library accepts unencoded)
/// was printed by `runtime list`, in its error too. Nothing listens on port 1, so the store
/// is unreachable and the error names it: without the password, in text and in JSON.
#[test]
fn a_postgres_password_with_a_slash_is_never_printed() {
    for store in
        ["postgres://u:pa/ss@127.0.0.1:1/db", "postgres://u:pa@ss@127.0.0.1:1/db", "postgres://u:pa%ss@127.0.0.1:1/db"]
    {
        for json in [false, true] {
            let mut cmd = std::process::Command::new(crate::support::bin());
            cmd.env_clear().env("PATH", "/usr/bin:/bin").args(["--store", store, "runtime", "list"]);
            if json {
                cmd.arg("--json");
            }
            let out = cmd.output().unwrap();
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert_ne!(out.status.code(), Some(0), "an unreachable store fails: {text}");
            assert!(!text.contains("pa/ss") && !text.contains("pa@ss") && !text.contains("pa%ss"), "{store}: {text}");
            assert!(text.contains("127.0.0.1"), "names the store: {text}");
        }
    }
}

/// Completions and the manual page come from the flag definitions, need no store, and name
/// today's commands; the bash script parses; an unknown shell is a usage error.
#[test]
fn completions_and_the_manual_page_are_generated_from_the_flags() {
    let run = |args: &[&str]| Command::new(bin()).env_clear().args(args).output().unwrap();
    let bash = run(&["completions", "bash"]);
    assert_eq!(code(&bash), Some(0), "{}", String::from_utf8_lossy(&bash.stderr));
    let script = String::from_utf8(bash.stdout).unwrap();
    for command in ["approvals", "rules", "doctor", "serve", "completions"] {
        assert!(script.contains(command), "bash completion lacks {command}");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fleetgate.bash");
    std::fs::write(&file, &script).unwrap();
    let parsed = Command::new("bash").arg("-n").arg(&file).output().unwrap();
    assert!(parsed.status.success(), "bash -n: {}", String::from_utf8_lossy(&parsed.stderr));
    for shell in ["zsh", "fish", "powershell"] {
        let out = run(&["completions", shell]);
        assert_eq!(code(&out), Some(0), "{shell}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("approvals"), "{shell}");
    }
    assert_eq!(code(&run(&["completions", "tcsh"])), Some(2), "an unknown shell is a usage error");

    let man = run(&["man"]);
    assert_eq!(code(&man), Some(0), "{}", String::from_utf8_lossy(&man.stderr));
    let page = String::from_utf8(man.stdout).unwrap();
    assert!(page.starts_with(".ie") || page.contains(".TH fleetgate"), "roff: {}", &page[..page.len().min(200)]);
    assert!(page.contains(".SH NAME") && page.contains("approvals"), "{page}");
    assert!(!page.contains("SPEC"), "the manual names no document the user lacks");
}

/// A checkout with `remote.origin.url` as given (written into `.git/config`, git's own
/// escapes allowed), and `fleetgate --config CONFIG init ARGS --repo-root CHECKOUT` to run in it.
fn init_in_checkout(dir: &Path, url: &str) -> (std::path::PathBuf, impl Fn(&[&str]) -> std::process::Output) {
    let checkout = dir.join("checkout");
    std::fs::create_dir_all(&checkout).unwrap();
    assert!(Command::new("git").arg("-C").arg(&checkout).args(["init", "-q"]).status().unwrap().success());
    let mut git_config = std::fs::OpenOptions::new().append(true).open(checkout.join(".git/config")).unwrap();
    std::io::Write::write_all(&mut git_config, format!("[remote \"origin\"]\n\turl = \"{url}\"\n").as_bytes()).unwrap();
    let config = dir.join("etc").join("fleet.toml");
    let home = dir.join("home");
    let run = move |args: &[&str]| {
        Command::new(bin())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &home)
            .arg("--config")
            .arg(dir.join("etc").join("fleet.toml"))
            .args(args)
            .arg("--repo-root")
            .arg(&checkout)
            .output()
            .unwrap()
    };
    (config, run)
}

/// Issue 43 (2): anyone who can write the checkout's `.git/config` planted a remote whose
/// host held a newline; `init` wrote it raw into a comment, and the next line became TOML
/// (`protected_paths = []`). Refused, naming the host; nothing written.
#[test]
fn init_refuses_a_remote_whose_host_would_become_toml() {
    let dir = tempfile::tempdir().unwrap();
    let (config, run) =
        init_in_checkout(dir.path(), "https://git.example.com\\nprotected_paths = []\\n#/acme/tools.git");
    let out = run(&["init"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), Some(1), "{stderr}");
    assert!(stderr.contains("the host") && stderr.contains("is not a host name"), "{stderr}");
    assert!(!stderr.contains("\nprotected_paths"), "the newline is shown escaped: {stderr}");
    assert!(!config.exists(), "nothing written: {}", std::fs::read_to_string(&config).unwrap_or_default());
}

/// Issue 43 (2): `init` wrote through a planted `fleet.toml.partial` symbolic link (into any
/// file the operator may write) and backed up to `fleet.toml.bak.<pid>`, a name anyone could
/// plant for the next pids. Both are now created exclusively under names nobody can guess:
/// the planted links and their targets are untouched.
#[test]
fn init_writes_through_no_planted_link() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let (config, run) = init_in_checkout(dir.path(), "https://git.example.com/acme/tools.git");
    let etc = config.parent().unwrap().to_owned();
    std::fs::create_dir_all(&etc).unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "the operator's other file\n").unwrap();
    symlink(&victim, etc.join("fleet.toml.partial")).unwrap();
    let first = run(&["init"]);
    assert_eq!(code(&first), Some(0), "{}", String::from_utf8_lossy(&first.stderr));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "the operator's other file\n", "written through the link");
    assert!(std::fs::symlink_metadata(&config).unwrap().is_file());
    assert!(std::fs::read_to_string(&config).unwrap().contains("[binding]"));

    // The backup: links planted for the next few hundred pids, as an attacker would.
    std::fs::write(&config, "# the operator's own\n").unwrap();
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid").unwrap().trim().parse().unwrap();
    for pid in last + 1..=last + 400 {
        symlink(&victim, etc.join(format!("fleet.toml.bak.{pid}"))).unwrap();
    }
    let forced = run(&["init", "--force", "--json"]);
    assert_eq!(code(&forced), Some(0), "{}", String::from_utf8_lossy(&forced.stderr));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "the operator's other file\n", "backed up through a link");
    let backup = std::path::PathBuf::from(json_of(&forced)["backup"].as_str().unwrap());
    assert!(std::fs::symlink_metadata(&backup).unwrap().is_file(), "{}", backup.display());
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), "# the operator's own\n");
    let links = std::fs::read_dir(&etc).unwrap().filter(|e| e.as_ref().unwrap().file_type().unwrap().is_symlink());
    assert_eq!(links.count(), 401, "every planted link is left as it was");
}

/// `fleetgate init`: a roster from the checkout's remote that fleetgate reads back, never
/// over an existing file (`--force` keeps the old one), a clear error without a remote, and
/// with `--client` the doctor's repair of that client — a diff, written only with `--apply`,
/// after which the doctor finds the client clean.
#[test]
fn init_writes_a_roster_from_the_remote_and_hands_the_clients_to_the_doctor() {
    let dir = tempfile::tempdir().unwrap();
    let (checkout, home) = (dir.path().join("checkout"), dir.path().join("home"));
    std::fs::create_dir_all(&home).unwrap();
    let git =
        |args: &[&str]| assert!(Command::new("git").arg("-C").arg(&checkout).args(args).status().unwrap().success());
    std::fs::create_dir_all(&checkout).unwrap();
    git(&["init", "-q"]);
    let config = dir.path().join("etc").join("fleet.toml");
    // The server the members launch, on the PATH (the doctor checks it is there).
    let bin_dir = dir.path().join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    std::fs::write(bin_dir.join("gitea-mcp"), "#!/bin/sh\nexit 0\n").unwrap();
    Command::new("chmod").arg("755").arg(bin_dir.join("gitea-mcp")).status().unwrap();
    let path = format!("{}:/usr/bin:/bin", bin_dir.display());
    let run = |args: &[&str]| {
        Command::new(bin())
            .env_clear()
            .env("PATH", &path)
            .env("HOME", &home)
            .arg("--config")
            .arg(&config)
            .args(args)
            .arg("--repo-root")
            .arg(&checkout)
            .output()
            .unwrap()
    };
    let stderr = |out: &std::process::Output| String::from_utf8_lossy(&out.stderr).into_owned();

    let no_remote = run(&["init"]);
    assert_eq!(code(&no_remote), Some(1));
    assert!(stderr(&no_remote).contains("has no git remote \"origin\""), "{}", stderr(&no_remote));
    assert!(!config.exists(), "nothing written");

    git(&["remote", "add", "origin", "https://deploy:s3cret@git.example.com/acme/tools.git"]);
    let first = run(&["init", "--json"]);
    assert_eq!(code(&first), Some(0), "{}", stderr(&first));
    let reply = json_of(&first);
    assert_eq!(reply["binding"]["org"], "acme");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(!text.contains("s3cret"), "a credential in the remote URL is never written");
    let inventory =
        Command::new(bin()).env_clear().arg("--config").arg(&config).args(["env", "keys", "--json"]).output();
    assert!(inventory.unwrap().status.success(), "the written roster loads");
    assert!(text.contains("[binding]") && text.contains("repo = \"tools\"") && text.contains("forge = \"gitea-mcp\""));

    std::fs::write(&config, "# the operator's own\n").unwrap();
    let again = run(&["init"]);
    assert_eq!(code(&again), Some(1));
    assert!(stderr(&again).contains("never writes over a configuration"), "{}", stderr(&again));
    assert_eq!(std::fs::read_to_string(&config).unwrap(), "# the operator's own\n", "left as it was");
    let forced = run(&["init", "--force", "--json"]);
    assert_eq!(code(&forced), Some(0), "{}", stderr(&forced));
    let backup = json_of(&forced)["backup"].as_str().unwrap().to_owned();
    assert_eq!(std::fs::read_to_string(backup).unwrap(), "# the operator's own\n");

    // One bare member in Claude Code's user file: the repair wraps it and adds the other four.
    let claude = home.join(".claude.json");
    let bare =
        r#"{"mcpServers": {"gitea-author": {"type": "stdio", "command": "gitea-mcp", "args": ["-t", "stdio"]}}}"#;
    std::fs::write(&claude, bare).unwrap();
    let home_arg = home.display().to_string();
    let shown = run(&["init", "--force", "--client", "claude-code", "--home", &home_arg]);
    let out = String::from_utf8_lossy(&shown.stdout);
    assert!(out.contains("+++") && out.contains("tools-reviewer"), "a diff: {out}");
    assert_eq!(std::fs::read_to_string(&claude).unwrap(), bare, "a dry run writes nothing");
    let applied = run(&["init", "--force", "--client", "claude-code", "--home", &home_arg, "--apply"]);
    assert_eq!(code(&applied), Some(0), "{}\n{}", String::from_utf8_lossy(&applied.stdout), stderr(&applied));
    let doctor = Command::new(bin())
        .env_clear()
        .env("PATH", &path)
        .arg("--config")
        .arg(&config)
        .args(["doctor", "--client", "claude-code", "--home", &home_arg, "--project"])
        .arg(&checkout)
        .output()
        .unwrap();
    assert_eq!(code(&doctor), Some(0), "clean after the repair: {}", String::from_utf8_lossy(&doctor.stdout));
}

/// `fleetgate init --forge github-mcp`: a roster for GitHub's server from a github.com remote
/// (no host to set) and from a GitHub Enterprise one (its host named), loaded back as the
/// github-mcp dialect; an unknown forge is refused with the known ones, nothing written.
#[test]
fn init_writes_a_github_roster_for_github_com_and_enterprise_remotes() {
    for (url, host) in [
        ("git@github.com:acme/tools.git", "no GITHUB_HOST needed"),
        ("https://ghe.example.com/acme/tools", "GITHUB_HOST=https://ghe.example.com"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (config, run) = init_in_checkout(dir.path(), url);
        let out = run(&["init", "--forge", "github-mcp"]);
        assert_eq!(code(&out), Some(0), "{url}: {}", String::from_utf8_lossy(&out.stderr));
        let text = std::fs::read_to_string(&config).unwrap();
        assert!(text.contains("forge = \"github-mcp\""), "{text}");
        assert!(text.contains(host), "{url}: {text}");
        assert!(text.contains("fleetgate serve --profile P -- github-mcp-server stdio"), "{text}");
        let loaded = fleetgate_config::FleetConfig::parse(&text, "fleet.toml").unwrap();
        assert_eq!(loaded.binding.as_ref().map(|b| (b.org.as_str(), b.repo.as_str())), Some(("acme", "tools")));
    }
    let dir = tempfile::tempdir().unwrap();
    let (config, run) = init_in_checkout(dir.path(), "https://github.com/acme/tools");
    let out = run(&["init", "--forge", "gitlab-mcp"]);
    assert_eq!(code(&out), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("known: gitea-mcp, github-mcp"));
    assert!(!config.exists());
}

/// Every help text that names a forge names both (`gitea-mcp`, `github-mcp`): a GitHub user
/// reading `--help` is told the forge is theirs too. `init --help` lists both, and so does the
/// rendered help of every command, read from the real binary.
#[test]
fn every_help_text_lists_both_forges() {
    use clap::CommandFactory as _;
    fn walk(command: &clap::Command, path: Vec<String>, out: &mut Vec<Vec<String>>) {
        for sub in command.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
            let mut here = path.clone();
            here.push(sub.get_name().to_owned());
            out.push(here.clone());
            walk(sub, here, out);
        }
    }
    let mut commands = vec![Vec::new()];
    walk(&fleetgate::cli::args::Cli::command(), Vec::new(), &mut commands);
    for path in commands {
        let out = Command::new(bin()).env_clear().args(&path).arg("--help").output().unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        if help.contains("gitea-mcp") || help.contains("github-mcp") {
            assert!(help.contains("gitea-mcp") && help.contains("github-mcp"), "fleetgate {path:?} --help:\n{help}");
        }
    }
    let init = Command::new(bin()).env_clear().args(["init", "--help"]).output().unwrap();
    let init = String::from_utf8_lossy(&init.stdout);
    assert!(init.contains("--forge github-mcp") && init.contains("gitea-mcp"), "{init}");
}

/// Every subcommand is either a server (`serve`; `debug`'s fixtures; the downstream guard,
/// judged on its own) or one of the tools the inventory never counts as a fleet server
/// (`procmatch::TOOLS`): a new subcommand must be put on one side, or a neighbour's run of it
/// naming a server would close every fleet's gate.
#[test]
fn every_subcommand_is_a_server_or_a_tool_the_inventory_knows() {
    let command = <fleetgate::cli::args::Cli as clap::CommandFactory>::command();
    let mut names: Vec<String> = command.get_subcommands().map(|c| c.get_name().to_owned()).collect();
    names.push("help".into());
    names.sort();
    let mut known: Vec<String> = fleetgate_core::procmatch::TOOLS.iter().map(|t| (*t).to_owned()).collect();
    known.extend(["serve", "debug", "downstream-guard"].map(str::to_owned));
    known.sort();
    assert_eq!(names, known);
}
