//! `fleetgate doctor --fix [--apply]` and `--snippet`: the diff against golden
//! files, a dry run that writes nothing, apply → clean with byte-identical
//! backups and untouched unrelated entries and comments, idempotence, a
//! read-only directory, and a concurrent writer.

use super::{CLIENTS, Tree, code, fixtures, json, kinds, stderr, tree};
use std::path::{Path, PathBuf};

/// Compare with `fixtures/doctor/golden/<name>.diff`; a missing golden file
/// is written (review it, then run again) and fails the test.
fn golden(name: &str, actual: &str) {
    let path = fixtures().join("golden").join(format!("{name}.diff"));
    match std::fs::read_to_string(&path) {
        Ok(expected) => assert_eq!(actual, expected, "{name}: the diff differs from {}", path.display()),
        Err(_) => {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, actual).unwrap();
            panic!("{name}: wrote a new golden file {}; review it and run again", path.display());
        }
    }
}

/// What must survive any repair of each tree: comments and unrelated servers.
fn kept(client: &str) -> &'static [&'static str] {
    match client {
        "claude-code" => &[
            "\"numStartups\": 42",
            "\"mcp-server-git\"",
            "\"/srv/another-project\"",
            "GITEA_SOMETHING_ELSE",
            "https://mcp.sentry.dev/mcp",
        ],
        "claude-desktop" => &["\"@modelcontextprotocol/server-filesystem\"", "\"globalShortcut\": \"Ctrl+Space\""],
        "gemini" => &[
            "// Gemini CLI user settings",
            "/* an unrelated remote server */",
            "// aliases of one client are one client",
            "// the merger still runs",
            "\"cwd\": \"/srv/prgs\"",
        ],
        "codex" => &[
            "# Codex CLI configuration",
            "[mcp_servers.git]   # unrelated",
            "# The author runs behind",
            "[profiles.fast]",
            "startup_timeout_sec = 20",
            "# copied from the Claude config",
        ],
        "cursor" => {
            &["// unrelated", "\"url\": \"https://mcp.context7.com/mcp\"", "/* the reconciler is launched by profile"]
        }
        _ => &[
            "// Workspace MCP servers",
            "\"@playwright/mcp@latest\"",
            "// the seed server",
            "\"id\": \"forge-token\"",
            "https://api.githubcopilot.com/mcp/",
        ],
    }
}

fn all_text(t: &Tree) -> String {
    t.files().values().map(|b| String::from_utf8_lossy(b).into_owned()).collect::<Vec<_>>().join("\n")
}

#[test]
fn the_repair_diff_is_golden_and_a_dry_run_writes_nothing() {
    for client in CLIENTS {
        let t = tree(client);
        let before = t.files();
        let v = json(&t, &["--client", client, "--fix", "--json"], 3);
        assert_eq!(v["applied"], false);
        let diffs: Vec<String> =
            v["changes"].as_array().unwrap().iter().map(|c| t.normalize(c["diff"].as_str().unwrap())).collect();
        assert!(!diffs.is_empty(), "{client}");
        golden(client, &diffs.concat());
        assert_eq!(t.files(), before, "{client}: a dry run writes nothing");
        let text = String::from_utf8(t.doctor(&["--client", client, "--fix"]).stdout).unwrap();
        assert!(text.contains("dry run:") && text.contains("+++ "), "{client}: {text}");
    }
}

#[test]
fn apply_backs_up_byte_for_byte_then_reports_clean_and_a_second_apply_changes_nothing() {
    for client in CLIENTS {
        // These two give the reviewer the author's forge token (vscode's one `${input:…}`;
        // claude-desktop's reviewer, added as a copy of the author): --fix never splits an
        // account, so that finding remains.
        let shared = matches!(client, "claude-desktop" | "vscode");
        let (exit, left) = if shared { (3, vec![("shared_forge_identity", "prgs-reviewer")]) } else { (0, vec![]) };
        let left: Vec<(String, String)> = left.iter().map(|(k, p)| ((*k).to_owned(), (*p).to_owned())).collect();
        let t = tree(client);
        let before = t.files();
        let v = json(&t, &["--client", client, "--fix", "--apply", "--json"], exit);
        assert_eq!((v["applied"].as_bool(), v["clean"].as_bool()), (Some(true), Some(!shared)), "{client}: {v:#}");
        for change in v["changes"].as_array().unwrap() {
            assert_eq!(change["written"], true, "{client}: {change:#}");
            let file = PathBuf::from(change["file"].as_str().unwrap());
            let backup = PathBuf::from(change["backup"].as_str().unwrap());
            assert_eq!(backup.parent(), file.parent(), "{client}: the backup sits beside its file");
            assert!(backup.file_name().unwrap().to_str().unwrap().contains(".fleetgate-backup-"));
            assert_eq!(std::fs::read(&backup).unwrap(), before[&file], "{client}: the backup is the original");
        }
        let text = all_text(&t);
        for needle in kept(client) {
            assert!(text.contains(needle), "{client}: {needle:?} was lost");
        }
        assert!(!text.contains("fleetgate-tmp"), "{client}: no temporary file is left");
        let clean = json(&t, &["--client", client, "--json"], exit);
        assert_eq!(kinds(&clean), left, "{client}: {clean:#}");
        let after = t.files();
        let again = json(&t, &["--client", client, "--fix", "--apply", "--json"], exit);
        assert_eq!(again["changes"], serde_json::json!([]), "{client}");
        assert_eq!(t.files(), after, "{client}: a second apply changes nothing");
    }
}

#[test]
fn an_unparsable_file_is_never_written_while_the_others_are_repaired() {
    let t = tree("broken");
    let claude = t.home.join(".claude.json");
    let codex = t.home.join(".codex/config.toml");
    let before = t.files();
    let out = t.doctor(&["--fix", "--apply", "--json"]);
    assert_eq!(code(&out), Some(1), "{}", stderr(&out));
    let after = t.files();
    assert_eq!((after.get(&claude), after.get(&codex)), (before.get(&claude), before.get(&codex)));
    let cursor = t.home.join(".cursor/mcp.json");
    assert_ne!(after[&cursor], before[&cursor], "the readable file is repaired");
    assert_eq!(after.len(), before.len() + 1, "one backup, nothing beside the broken files");
}

/// `chmod` does not stop root, so as root the doctor runs as `nobody`.
fn as_unprivileged(cmd: &mut std::process::Command, t: &Tree) {
    use std::os::unix::process::CommandExt;
    // The real uid, read from /proc (the test crate links no libc).
    let root = std::fs::read_to_string("/proc/self/status")
        .is_ok_and(|s| s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0")));
    if root {
        let nobody = 65534;
        for path in [t.dir.path(), &t.home, &t.project, &t.bin] {
            std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        }
        for (file, _) in t.files() {
            std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
        }
        cmd.uid(nobody).gid(nobody);
    }
}

#[test]
fn a_read_only_directory_fails_clearly_and_leaves_no_partial_file() {
    let t = tree("cursor");
    let dir = t.project.join(".cursor");
    let listing = |d: &Path| {
        let mut v: Vec<String> =
            std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    };
    let before = (listing(&dir), std::fs::read(dir.join("mcp.json")).unwrap());
    let mut cmd = t.command(&["--client", "cursor", "--fix", "--apply", "--json"]);
    as_unprivileged(&mut cmd, &t);
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o555)).unwrap();
    let out = cmd.output().unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    assert_eq!(code(&out), Some(1), "{}", stderr(&out));
    let err = t.normalize(&stderr(&out));
    assert!(
        err.contains("$PROJECT/.cursor/mcp.json: cannot write its backup in $PROJECT/.cursor: Permission denied"),
        "{err}"
    );
    assert_eq!((listing(&dir), std::fs::read(dir.join("mcp.json")).unwrap()), before, "no partial file");
}

#[test]
fn a_concurrent_writer_between_read_and_replace_is_detected_and_nothing_is_overwritten() {
    use fleetgate_doctor::clients::{Client, Layout, locations};
    use fleetgate_doctor::findings::{FileInput, FileState, Lookup, Roster, classify};
    use fleetgate_doctor::{apply, edit, read, repair};
    let t = tree("codex");
    let config =
        fleetgate_config::FleetConfig::load(Some(&fixtures().join("fleet.toml")), &Default::default()).unwrap();
    let layout = Layout::resolve(Some(&t.home), &t.project, &Default::default()).unwrap();
    let files: Vec<FileInput> = locations(Client::Codex, &layout)
        .into_iter()
        .map(|source| {
            let state = match std::fs::read_to_string(&source.path) {
                Ok(text) => FileState::Parsed(read::parse(&text, &source).unwrap()),
                Err(_) => FileState::Absent,
            };
            FileInput { source, state }
        })
        .collect();
    let roster = Roster {
        members: &config.members,
        env_prefix: "GITEA_",
        pass_through: &config.pass_through_env,
        config: None,
        server: fleetgate_core::dialect::Dialect::server(&fleetgate_core::dialect::gitea::GITEA),
    };
    let report =
        classify(Client::Codex, &files, roster, true, Lookup { exists: &|_| true, fleetgate: &|c| c == "fleetgate" });
    let (f, edits) = repair::plan(&report, &repair::Launcher::new("fleetgate")).into_iter().next().unwrap();
    let FileState::Parsed(parsed) = &files[f].state else { panic!() };
    let path = files[f].source.path.clone();
    let original = std::fs::read(&path).unwrap();
    let updated = edit::apply(&String::from_utf8_lossy(&original), &files[f].source, parsed, &edits).unwrap();
    let change = apply::Change { path: path.clone(), original, updated, within: None };
    let theirs = "# rewritten by the client itself\nmodel = \"o4\"\n";
    let e = apply::apply(&change, "20260730T004009Z", &mut |p| std::fs::write(p, theirs).unwrap()).unwrap_err();
    assert_eq!(e.kind, apply::ApplyErrorKind::ChangedOnDisk);
    assert!(e.to_string().contains("changed on disk since the doctor read it"), "{e}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), theirs, "the other writer's text stands");
    let left: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, [std::ffi::OsString::from("config.toml")], "no backup or temporary file is left");
}

#[test]
fn each_clients_snippet_pasted_into_an_empty_home_is_clean() {
    for client in CLIENTS {
        let t = tree("empty");
        let v = json(&t, &["--client", client, "--snippet", "--json", "--", "python3", "mcp_server.py"], 0);
        let file = PathBuf::from(v["file"].as_str().unwrap());
        assert!(file.starts_with(&t.home), "{client}: {file:?}");
        let snippet = v["snippet"].as_str().unwrap();
        assert!(!snippet.contains("TOKEN"), "{client}: no secret in a snippet");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, snippet).unwrap();
        let report = json(&t, &["--client", client, "--json"], 0);
        let defined = report["clients"][0]["members"].as_array().unwrap().iter().filter(|m| m["status"] == "defined");
        assert_eq!(defined.count(), 5, "{client}: {report:#}");
    }
    // Without a downstream, the snippet reuses the one the client already runs.
    let t = tree("codex");
    let out = t.doctor(&["--client", "codex", "--snippet"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("[mcp_servers.gitea-merger]"), "{text}");
    assert!(text.contains("\"--\", \"python3\", \"mcp_server.py\", \"--profile\", \"prgs-merger\"]"), "{text}");
}

/// Issue 34: a checkout's `.mcp.json` wrapping a member in `.devtools/fleetgate`
/// must not lend that command to the user's own `~/.claude.json`, nor to the
/// snippet; it is the finding `foreign_wrapper`.
#[test]
fn a_projects_foreign_wrapper_never_reaches_the_user_file_or_the_snippet() {
    let t = tree("empty");
    std::fs::write(
        t.project.join(".mcp.json"),
        r#"{"mcpServers": {"gitea-merger": {"command": ".devtools/fleetgate",
            "args": ["serve", "--profile", "prgs-merger", "--", ".devtools/evil-server"],
            "env": {"GITEA_MCP_CLIENT": "claude_code"}}}}"#,
    )
    .unwrap();
    std::fs::write(
        t.home.join(".claude.json"),
        r#"{"mcpServers": {"gitea-author": {"command": "python3", "args": ["mcp_server.py"],
            "env": {"GITEA_MCP_CLIENT": "claude_code"}}}}"#,
    )
    .unwrap();
    let out = t.doctor(&["--client", "claude-code", "--fix", "--apply"]);
    let user = std::fs::read_to_string(t.home.join(".claude.json")).unwrap();
    assert!(!user.contains(".devtools"), "a project value reached the user file:\n{user}");
    assert!(user.contains(r#""command": "fleetgate""#), "the doctor's own wrapper:\n{user}");
    let snippet = String::from_utf8(t.doctor(&["--client", "claude-code", "--snippet"]).stdout).unwrap();
    assert!(!snippet.contains(".devtools"), "{snippet}");
    assert_eq!(code(&out), Some(3), "the foreign wrapper stays a finding: {}", stderr(&out));
    let report = json(&t, &["--client", "claude-code", "--json"], 3);
    let foreign: Vec<&serde_json::Value> =
        report["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "foreign_wrapper").collect();
    assert_eq!(foreign.len(), 1, "{report:#}");
    assert_eq!(foreign[0]["fixable"], false);
}

/// Issue 34: a project's `.mcp.json` that is a symbolic link out of `--project` is neither
/// written through nor backed up beside its target; the error names the link and the target.
#[test]
fn a_project_file_linked_out_of_the_project_is_refused_and_nothing_is_written_there() {
    let t = tree("empty");
    let outside = t.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let target = outside.join("victim.json");
    let text = r#"{"mcpServers": {"gitea-author": {"command": "python3", "args": ["mcp_server.py"]}}}"#;
    std::fs::write(&target, text).unwrap();
    let link = t.project.join(".mcp.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let out = t.doctor(&["--client", "claude-code", "--fix", "--apply"]);
    let err = stderr(&out);
    assert_eq!(code(&out), Some(1), "{err}");
    assert!(err.contains(&link.display().to_string()) && err.contains(&target.display().to_string()), "{err}");
    assert!(err.contains("outside the project"), "{err}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), text, "the target is untouched");
    let left: Vec<_> = std::fs::read_dir(&outside).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, [std::ffi::OsString::from("victim.json")], "no backup beside the target");
}

/// `init --config FILE` and `doctor --config FILE` with a roster off the default path: the
/// members must read that roster, not the default one (which another fleet, or nothing, may
/// hold): a member wrapped without it is an `other_roster` finding, and the repair wraps every
/// member with `--config FILE` before `serve`.
#[test]
fn a_roster_off_the_default_path_is_the_one_the_wrapped_members_read() {
    use clap::Parser as _;
    for client in ["claude-code", "codex"] {
        let t = tree(client);
        let roster = t.dir.path().join("elsewhere/roster.toml");
        std::fs::create_dir_all(roster.parent().unwrap()).unwrap();
        std::fs::copy(fixtures().join("fleet.toml"), &roster).unwrap();
        let out = t.command_with(&roster, &["--client", client, "--fix", "--apply", "--json"]).output().unwrap();
        assert_eq!(code(&out), Some(0), "{client}: {}", stderr(&out));
        let written = all_text(&t);
        let shown = roster.to_str().unwrap();
        // Every member reads it: the bare ones wrapped with it, the ones wrapped before
        // (reading the default path) re-wrapped — the downstream behind `--` kept.
        let wrapped = format!("\"--config\", \"{shown}\", \"serve\"");
        assert_eq!(written.matches(&wrapped).count(), 5, "{client}: {written}");
        let report = t.command_with(&roster, &["--client", client, "--json"]).output().unwrap();
        let report: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
        assert!(
            !kinds(&report).iter().any(|(k, _)| k == "other_roster"),
            "{client}: after the repair no member reads another roster: {report:#}"
        );

        // The block for a fresh client says the same, and each of its launches is a command
        // line the real CLI takes, reading that roster.
        let out = t
            .command_with(&roster, &["--client", "codex", "--snippet", "--", "gitea-mcp", "-t", "stdio"])
            .output()
            .unwrap();
        let block: toml::Table = String::from_utf8(out.stdout).unwrap().parse().unwrap();
        let servers = block["mcp_servers"].as_table().unwrap();
        assert_eq!(servers.len(), 5);
        for (name, server) in servers {
            let mut argv = vec![server["command"].as_str().unwrap().to_owned()];
            argv.extend(server["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_owned()));
            let cli =
                fleetgate::cli::args::Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{name}: {argv:?}: {e}"));
            assert_eq!(cli.config.as_deref(), Some(roster.as_path()), "{name}");
        }

        // At the default path, no wrapper names it (the golden diffs hold none).
        let t = tree(client);
        let _ = t.doctor(&["--client", client, "--fix", "--apply"]);
        assert!(!all_text(&t).contains("--config"), "{client}");
    }
}
