//! `fleetgate doctor [--client NAME…] [--json]`: every finding detected on
//! each client's real-format tree, the JSON shape, the exit codes, and a file
//! that cannot be parsed named with its line and column.

use super::{CLIENTS, code, json, kinds, stderr, tree};

fn expect(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = pairs.iter().map(|(k, p)| ((*k).to_owned(), (*p).to_owned())).collect();
    v.sort();
    v
}

#[test]
fn every_finding_is_detected_in_each_clients_tree() {
    let cases: [(&str, Vec<(String, String)>); 6] = [
        (
            "claude-code",
            expect(&[
                ("bare", "prgs-reviewer"),
                ("client_identity_wrong", "prgs-reviewer"),
                ("unsupported_env", "prgs-merger"),
                ("client_identity_missing", "prgs-merger"),
                ("missing", "prgs-reconciler"),
            ]),
        ),
        (
            "claude-desktop",
            expect(&[
                ("bare", "prgs-author"),
                ("client_identity_missing", "prgs-author"),
                ("missing", "prgs-reviewer"),
                ("missing", "prgs-merger"),
                ("missing", "prgs-controller"),
                ("missing", "prgs-reconciler"),
            ]),
        ),
        (
            "gemini",
            expect(&[
                ("client_identity_wrong", "prgs-reviewer"),
                ("unsupported_env", "prgs-reviewer"),
                ("bare", "prgs-merger"),
                ("client_identity_missing", "prgs-merger"),
            ]),
        ),
        (
            "codex",
            expect(&[
                ("bare", "prgs-reviewer"),
                ("client_identity_wrong", "prgs-reviewer"),
                ("unsupported_env", "prgs-reviewer"),
                ("missing", "prgs-merger"),
                ("missing", "prgs-controller"),
                ("missing", "prgs-reconciler"),
            ]),
        ),
        (
            "cursor",
            expect(&[
                ("bare", "prgs-author"),
                ("bare", "prgs-reviewer"),
                ("client_identity_missing", "prgs-reviewer"),
                ("bare", "prgs-merger"),
                ("bare", "prgs-controller"),
                ("bare", "prgs-reconciler"),
            ]),
        ),
        (
            "vscode",
            expect(&[
                ("bare", "prgs-author"),
                ("unsupported_env", "prgs-author"),
                ("client_identity_missing", "prgs-author"),
                ("missing", "prgs-merger"),
                ("missing", "prgs-controller"),
                ("missing", "prgs-reconciler"),
                // Both read `${input:forge-token}`: one prompt, one account.
                ("shared_forge_identity", "prgs-reviewer"),
            ]),
        ),
    ];
    for (client, expected) in cases {
        let t = tree(client);
        let v = json(&t, &["--client", client, "--json"], 3);
        assert_eq!(kinds(&v), expected, "{client}: {v:#}");
        assert_eq!(v["clean"], false);
        // A shared forge account is the operator's to split: never fixable.
        let fixable = |f: &serde_json::Value| f["fixable"] == (f["kind"] != "shared_forge_identity");
        assert!(v["findings"].as_array().unwrap().iter().all(fixable), "{client}: {v:#}");
        // The same tree read for every client at once still reports this one.
        let all = json(&t, &["--json"], 3);
        let names: Vec<&str> =
            all["clients"].as_array().unwrap().iter().map(|c| c["client"].as_str().unwrap()).collect();
        assert_eq!(names, CLIENTS, "{client}");
    }
}

#[test]
fn the_json_report_names_each_file_line_and_entry() {
    let t = tree("claude-code");
    let v = json(&t, &["--client", "claude-code", "--json"], 3);
    let client = &v["clients"][0];
    assert_eq!(client["client"], "claude-code");
    assert_eq!(client["adopted"], true);
    assert_eq!(client["unrelated_servers"], serde_json::json!(["git", "sentry"]));
    let reviewer = client["members"].as_array().unwrap().iter().find(|m| m["profile"] == "prgs-reviewer").unwrap();
    assert_eq!(reviewer["status"], "defined");
    let def = &reviewer["definitions"][0];
    assert_eq!(
        (def["scope"].as_str(), def["launch"].as_str(), def["line"].as_u64()),
        (Some("local"), Some("bare"), Some(40))
    );
    assert_eq!(t.normalize(def["file"].as_str().unwrap()), "$HOME/.claude.json");
    let bad = v["findings"].as_array().unwrap().iter().find(|f| f["kind"] == "unsupported_env").unwrap();
    assert_eq!(bad["key"], "GITEA_TOTALLY_INVENTED_OVERRIDE");
    assert_eq!(bad["entry"], "gitea-merger");
    assert_eq!(
        (t.normalize(bad["file"].as_str().unwrap()), bad["line"].as_u64()),
        ("$PROJECT/.mcp.json".into(), Some(7))
    );
    let text = String::from_utf8(t.doctor(&["--client", "claude-code"]).stdout).unwrap();
    assert!(text.contains("client_identity_wrong: \"gitea-reviewer\" sets GITEA_MCP_CLIENT=gemini"), "{text}");
}

#[test]
fn a_clean_tree_exits_zero_and_a_named_client_without_the_fleet_is_told_to_paste_the_snippet() {
    let t = tree("empty");
    let v = json(&t, &["--json"], 0);
    assert_eq!((v["clean"].as_bool(), v["finding_count"].as_u64()), (Some(true), Some(0)));
    let out = t.doctor(&[]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("codex: no configuration file"));
    // Asked about by name, a client that defines none of the roster misses
    // every member; nothing can be copied, so the snippet is the remedy.
    let v = json(&t, &["--client", "cursor", "--json"], 3);
    assert_eq!(v["finding_count"], 5);
    let f = &v["findings"][0];
    assert_eq!((f["kind"].as_str(), f["fixable"].as_bool()), (Some("missing"), Some(false)));
    assert!(f["message"].as_str().unwrap().contains("--snippet"), "{f:#}");
}

#[test]
fn unfixable_findings_are_reported_and_left_to_the_operator() {
    let t = tree("unfixable");
    let v = json(&t, &["--client", "gemini", "--client", "cursor", "--json"], 3);
    assert_eq!(
        kinds(&v),
        expect(&[
            ("duplicate", "prgs-author"),
            ("unknown_profile", "prgs-janitor"),
            ("command_not_found", "prgs-author"),
            ("command_not_found", "prgs-reviewer"),
        ])
    );
    assert!(v["findings"].as_array().unwrap().iter().all(|f| f["fixable"] == false), "{v:#}");
    let dup = v["findings"].as_array().unwrap().iter().find(|f| f["kind"] == "duplicate").unwrap();
    let msg = t.normalize(dup["message"].as_str().unwrap());
    assert!(msg.contains("$HOME/.gemini/settings.json:3") && msg.contains("$PROJECT/.gemini/settings.json:4"), "{msg}");
    let before = t.files();
    let fix = json(&t, &["--client", "gemini,cursor", "--fix", "--apply", "--json"], 3);
    assert_eq!(fix["changes"], serde_json::json!([]));
    assert_eq!(t.files(), before, "nothing is written for findings --fix does not repair");
}

#[test]
fn an_unparsable_file_is_located_and_the_others_are_still_checked() {
    let t = tree("broken");
    let out = t.doctor(&["--json"]);
    assert_eq!(code(&out), Some(1));
    let v = crate::support::json_of(&out);
    let errors: Vec<String> = v["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| format!("{}:{}:{}", t.normalize(e["file"].as_str().unwrap()), e["line"], e["column"]))
        .collect();
    assert_eq!(errors, ["$HOME/.claude.json:3:3", "$HOME/.codex/config.toml:3:52"], "{v:#}");
    let err = t.normalize(&stderr(&out));
    assert!(err.contains("$HOME/.claude.json:3:3: comments are not allowed"), "{err}");
    let cursor = &v["clients"].as_array().unwrap().iter().find(|c| c["client"] == "cursor").unwrap()["findings"];
    assert_eq!(cursor.as_array().unwrap().len(), 5, "the readable files are still judged: {v:#}");
    let codex = v["clients"].as_array().unwrap().iter().find(|c| c["client"] == "codex").unwrap();
    assert!(codex["members"].as_array().unwrap().iter().all(|m| m["status"] == "unknown"), "{codex:#}");
    assert_eq!(codex["findings"], serde_json::json!([]), "nothing is called missing from a file never read");
    let text = String::from_utf8(t.doctor(&["--client", "codex"]).stdout).unwrap();
    assert!(text.contains("members unknown until the file above can be read"), "{text}");
}

#[test]
fn bad_invocations_are_usage_errors_or_named_failures() {
    let t = tree("gemini");
    for (args, exit) in [
        (&["--apply"][..], 2),
        (&["--snippet"][..], 2),
        (&["--fix", "--snippet", "--client", "gemini"][..], 2),
        (&["--client", "notepad"][..], 1),
        (&["--snippet", "--client", "gemini,codex"][..], 1),
    ] {
        let out = t.doctor(args);
        assert_eq!(code(&out), Some(exit), "{args:?}: {}", stderr(&out));
    }
    let err = stderr(&t.doctor(&["--client", "notepad"]));
    assert!(err.contains("unknown client \"notepad\"") && err.contains("claude-desktop"), "{err}");
}

/// Issue 34: a hostile project's key names and values (OSC and CSI sequences, a newline) are
/// printed escaped: no raw ESC, BEL or CR reaches the terminal, and no line is forged.
#[test]
fn a_hostile_projects_escape_sequences_never_reach_the_terminal() {
    let t = tree("empty");
    std::fs::write(
        t.project.join(".mcp.json"),
        r#"{"mcpServers": {"gitea-author": {"command": "fleetgate",
            "args": ["serve", "--profile", "prgs-author", "--", "python3", "mcp_server.py"],
            "env": {"GITEA_\u001b]0;pwned\u0007X": "1", "GITEA_MCP_CLIENT": "\u001b[2J\r\nclean: every client's configuration matches the roster"}}}}"#,
    )
    .unwrap();
    for args in [&["--client", "claude-code"][..], &["--client", "claude-code", "--fix"]] {
        let out = t.doctor(args);
        assert_eq!(code(&out), Some(3), "{args:?}: {}", stderr(&out));
        for (name, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            assert!(!bytes.iter().any(|b| matches!(b, 0x1b | 0x07 | b'\r')), "{args:?} {name}: {bytes:?}");
        }
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(!text.lines().any(|l| l.starts_with("clean:")), "{args:?}: a forged line\n{text}");
        if args.len() == 2 {
            assert!(text.contains("\\u{1b}"), "{args:?}: the sequence is shown escaped\n{text}");
        }
    }
}

/// A `~/.claude.json` defining the whole roster, wrapped, each member with the
/// forge token `tokens` gives its role (none when absent).
fn roster_with_tokens(tokens: &[(&str, &str)]) -> String {
    let servers: Vec<String> = ["author", "reviewer", "merger", "controller", "reconciler"]
        .iter()
        .map(|role| {
            let token = tokens
                .iter()
                .find(|(r, _)| r == role)
                .map(|(_, t)| format!(r#", "GITEA_ACCESS_TOKEN": "{t}""#))
                .unwrap_or_default();
            format!(
                r#""gitea-{role}": {{"command": "fleetgate",
                    "args": ["serve", "--profile", "prgs-{role}", "--", "python3", "mcp_server.py"],
                    "env": {{"GITEA_MCP_CLIENT": "claude_code"{token}}}}}"#
            )
        })
        .collect();
    format!("{{\"mcpServers\": {{\n{}\n}}}}\n", servers.join(",\n"))
}

/// The forge refuses an approval by the PR's own poster (422): an author and a reviewer
/// with one token can never merge. Reported by digest, the token never printed; the
/// merger sharing the reviewer's account is fine.
#[test]
fn an_author_and_a_reviewer_with_one_forge_token_are_reported_and_the_token_is_never_printed() {
    use sha2::{Digest, Sha256};
    let token = "fgpat-7d1c0e9a-shared-by-author-and-reviewer";
    let digest: String = Sha256::digest(token.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    let t = tree("empty");
    let file = t.home.join(".claude.json");
    let shared = [("author", token), ("reviewer", token), ("merger", token)];
    std::fs::write(&file, roster_with_tokens(&shared)).unwrap();
    let v = json(&t, &["--client", "claude-code", "--json"], 3);
    assert_eq!(kinds(&v), expect(&[("shared_forge_identity", "prgs-reviewer")]), "{v:#}");
    let f = &v["findings"][0];
    assert_eq!(
        (f["fixable"].as_bool(), f["key"].as_str(), f["entry"].as_str()),
        (Some(false), Some("GITEA_ACCESS_TOKEN"), Some("gitea-reviewer"))
    );
    let message = f["message"].as_str().unwrap();
    for needle in ["prgs-author", "prgs-reviewer", "422", "forge accounts of their own"] {
        assert!(message.contains(needle), "{needle:?} in {message}");
    }
    let text = String::from_utf8(t.doctor(&["--client", "claude-code"]).stdout).unwrap();
    assert!(text.contains("  - shared_forge_identity: the author prgs-author"), "{text}");
    for args in [
        &["--client", "claude-code"][..],
        &["--client", "claude-code", "--json"],
        &["--json"],
        &["--client", "claude-code", "--fix"],
        &["--client", "claude-code", "--fix", "--json"],
    ] {
        let out = t.doctor(args);
        assert_eq!(code(&out), Some(3), "{args:?}: {}", stderr(&out));
        let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert!(!all.contains(token) && !all.contains(&digest), "{args:?}: the token or its digest was printed\n{all}");
    }
    // Accounts of their own: nothing to report.
    std::fs::write(&file, roster_with_tokens(&[("author", "fgpat-author"), ("reviewer", token), ("merger", token)]))
        .unwrap();
    let v = json(&t, &["--client", "claude-code", "--json"], 0);
    assert_eq!((v["clean"].as_bool(), v["finding_count"].as_u64()), (Some(true), Some(0)), "{v:#}");
}

/// The words the gate reads as closing and reopening an issue are shown to the operator, who
/// checks them against the instance's `app.ini`: Gitea's defaults and the roster's own, and
/// GitHub's (which reopen nothing). A roster with no forge dialect shows none; none is a
/// finding.
#[test]
fn the_closing_and_reopening_keywords_the_gate_reads_are_shown() {
    let t = tree("claude-code");
    let base = std::fs::read_to_string(t.dir.path().join("xdg/fleetgate/fleet.toml")).unwrap();
    let roster = t.dir.path().join("keywords.toml");
    let with = |extra: &str| {
        std::fs::write(&roster, base.replacen("[fleet]\n", &format!("[fleet]\n{extra}"), 1)).unwrap();
        let out = t.command_with(&roster, &["--client", "claude-code", "--json"]).output().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let text = String::from_utf8(t.command_with(&roster, &["--client", "claude-code"]).output().unwrap().stdout);
        (v, text.unwrap())
    };
    let (plain, _) = with("");
    let (gitea, _) = with("forge = \"gitea-mcp\"\n");
    assert_eq!(plain["finding_count"], gitea["finding_count"], "not a finding");
    assert!(plain["policy"].get("keywords").is_none(), "{:#}", plain["policy"]);
    let own = base.replacen("[fleet]\n", "[fleet]\nforge = \"gitea-mcp\"\n", 1)
        + "\n[forge]\nclose_keywords = [\"Schließt\", \"fixes\"]\nreopen_keywords = [\"öffnet\"]\n";
    std::fs::write(&roster, own).unwrap();
    let out = t.command_with(&roster, &["--client", "claude-code", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let k = &v["policy"]["keywords"];
    assert_eq!(k["forge"], "gitea-mcp", "{k}");
    let words = |list: &str| -> Vec<String> {
        k[list].as_array().unwrap().iter().map(|w| w.as_str().unwrap().to_owned()).collect()
    };
    for w in ["close", "fixes", "resolves", "schliesst"] {
        assert!(words("close").iter().any(|c| c == w), "{w} in {k}");
    }
    assert_eq!(words("close").iter().filter(|c| *c == "fixes").count(), 1, "once: {k}");
    for w in ["reopen", "reopens", "öffnet"] {
        assert!(words("reopen").iter().any(|c| c == w), "{w} in {k}");
    }
    let (github, text) = with("forge = \"github-mcp\"\n");
    assert_eq!(github["policy"]["keywords"]["reopen"], serde_json::json!([]), "{github:#}");
    assert!(text.contains("forge: github-mcp reads as closing an issue: close, "), "{text}");
    assert!(text.contains("; as reopening one: none"), "{text}");
}
