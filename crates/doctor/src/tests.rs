//! Unit tests of the pure doctor: the matching rule, the classification with
//! an injected PATH lookup, and the repair plan applied to text.

use super::clients::{Client, test_source as source};
use super::findings::{
    FileInput, FileState, FindingKind, Lookup, Roster, classify, fleetgate_serve, member_of, profile_arg,
};
use super::read::{Entry, Launch, parse};
use super::repair::{Edit, plan, replace_token};
use super::{edit, findings};
use fleetgate_config::FleetConfig;

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| (*x).to_owned()).collect()
}

fn entry(name: &str, command: &str, args: &[&str]) -> Entry {
    Entry {
        section: 0,
        index: 0,
        name: name.into(),
        line: 1,
        launch: Launch::Stdio { command: command.into(), args: s(args) },
        env: Vec::new(),
    }
}

#[test]
fn the_matching_rule_wrapped_profile_then_name_then_bare_profile() {
    let roster = FleetConfig::builtin().members;
    let profile_of = |e: &Entry| member_of(e, &roster).map(|i| roster[i].profile.clone());
    // A wrapper's --profile wins over its name.
    let e = entry("gitea-author", "/usr/local/bin/fleetgate", &["serve", "--profile", "prgs-merger", "--", "x"]);
    assert_eq!(profile_of(&e).as_deref(), Some("prgs-merger"));
    // A wrapper naming no roster profile is no member, whatever its name.
    let e = entry("gitea-author", "fleetgate", &["serve", "--profile", "prgs-janitor"]);
    assert_eq!(profile_of(&e), None);
    // The name, then a bare launch's --profile.
    assert_eq!(profile_of(&entry("gitea-reviewer", "python3", &["s.py"])).as_deref(), Some("prgs-reviewer"));
    assert_eq!(profile_of(&entry("x", "python3", &["--profile=prgs-controller"])).as_deref(), Some("prgs-controller"));
    assert_eq!(profile_of(&entry("x", "python3", &["--profile", "nope"])), None);
}

#[test]
fn fleetgate_serve_is_read_before_the_separator_only() {
    let args = s(&["--config", "f.toml", "serve", "--profile=prgs-author", "--", "srv", "--profile", "other"]);
    let serve = fleetgate_serve("fleetgate", &args).unwrap();
    assert_eq!(serve.profile.as_deref(), Some("prgs-author"));
    assert_eq!(serve.downstream, s(&["srv", "--profile", "other"]));
    assert_eq!(serve.config.as_deref(), Some("f.toml"), "the roster it reads");
    assert_eq!(fleetgate_serve("fleetgate", &s(&["serve", "--", "srv", "--config", "x"])).unwrap().config, None);
    assert_eq!(fleetgate_serve("fleetgate", &s(&["--", "serve"])), None, "serve after -- is the downstream's");
    assert_eq!(fleetgate_serve("not-fleetgate", &s(&["serve"])), None);
    assert_eq!(profile_arg(&s(&["--profile"])), None);
}

/// A wrap of an entry wrapped already keeps its downstream (what follows its `--`), never
/// wrapping the wrapper.
#[test]
fn a_rewrap_keeps_the_downstream_behind_the_separator() {
    use super::repair::unwrapped;
    let wrapped = s(&["serve", "--profile", "prgs-author", "--", "gitea-mcp", "-t", "stdio"]);
    assert_eq!(unwrapped("fleetgate", &wrapped), ("gitea-mcp".to_owned(), s(&["-t", "stdio"])));
    assert_eq!(unwrapped("gitea-mcp", &s(&["-t", "stdio"])), ("gitea-mcp".to_owned(), s(&["-t", "stdio"])));
}

/// With the roster off the default path, a member wrapped without `--config` (or with
/// another) reads another roster: a fixable `other_roster` finding; with the same, none.
#[test]
fn a_wrapper_reading_another_roster_is_a_finding() {
    let config = FleetConfig::builtin();
    let kinds = |roster_path: Option<&str>, args: &[&str]| {
        let source = source(Client::ClaudeCode);
        let args = args.iter().map(|a| format!("\"{a}\"")).collect::<Vec<_>>().join(", ");
        let text = format!(
            r#"{{"mcpServers": {{"gitea-author": {{"command": "fleetgate", "args": [{args}], "env": {{"GITEA_MCP_CLIENT": "claude_code"}}}}}}}}"#
        );
        let files = vec![FileInput { state: FileState::Parsed(parse(&text, &source).unwrap()), source }];
        let roster = Roster {
            members: &config.members,
            env_prefix: "GITEA_",
            pass_through: &[],
            config: roster_path,
            server: fleetgate_core::dialect::Dialect::server(&fleetgate_core::dialect::gitea::GITEA),
        };
        let lookup = Lookup { exists: &|_| true, fleetgate: &|c| c == "fleetgate" };
        let report = classify(Client::ClaudeCode, &files, roster, false, lookup);
        report.findings.iter().filter(|f| f.kind == FindingKind::OtherRoster).map(|f| f.fixable).collect::<Vec<_>>()
    };
    let plain = ["serve", "--profile", "prgs-author", "--", "gitea-mcp"];
    let named = ["--config", "/etc/fleet.toml", "serve", "--profile", "prgs-author", "--", "gitea-mcp"];
    assert_eq!(kinds(Some("/etc/fleet.toml"), &plain), [true], "the default path is another roster");
    assert_eq!(kinds(Some("/etc/fleet.toml"), &named), Vec::<bool>::new());
    assert_eq!(kinds(None, &named), [true], "a wrapper naming a roster the doctor does not check");
    assert_eq!(kinds(None, &plain), Vec::<bool>::new());
}

#[test]
fn replace_token_swaps_whole_values_and_flag_values_only() {
    let r = vec![("prgs-author".to_owned(), "prgs-merger".to_owned())];
    assert_eq!(replace_token("prgs-author", &r), "prgs-merger");
    assert_eq!(replace_token("--profile=prgs-author", &r), "--profile=prgs-merger");
    assert_eq!(replace_token("/srv/prgs-author/x", &r), "/srv/prgs-author/x");
}

fn judge(client: Client, text: &str, exists: &dyn Fn(&str) -> bool) -> (findings::ClientReport, Vec<FileInput>) {
    let source = source(client);
    let files = vec![FileInput { state: FileState::Parsed(parse(text, &source).unwrap()), source }];
    let config = FleetConfig::builtin();
    let roster = Roster {
        members: &config.members,
        env_prefix: "GITEA_",
        pass_through: &[],
        config: None,
        server: fleetgate_core::dialect::Dialect::server(&fleetgate_core::dialect::gitea::GITEA),
    };
    (classify(client, &files, roster, false, Lookup { exists, fleetgate: &|c| c == "fleetgate" }), files)
}

#[test]
fn the_path_lookup_is_injected_and_both_commands_of_a_wrapper_are_checked() {
    let text = r#"{"mcpServers": {"gitea-author": {"command": "fleetgate",
        "args": ["serve", "--profile", "prgs-author", "--", "gitea-mcp"], "env": {"GITEA_MCP_CLIENT": "cursor"}},
        "other": {"command": "nowhere"}}}"#;
    let (report, _) = judge(Client::Cursor, text, &|c| c == "fleetgate");
    let kinds: Vec<FindingKind> = report.findings.iter().map(|f| f.kind).collect();
    assert!(kinds.contains(&FindingKind::CommandNotFound), "{kinds:?}");
    assert_eq!(
        kinds.iter().filter(|k| **k == FindingKind::CommandNotFound).count(),
        1,
        "unrelated servers are not judged"
    );
    let (report, _) = judge(Client::Cursor, text, &|_| true);
    assert!(report.findings.iter().all(|f| f.kind == FindingKind::Missing), "{:?}", report.findings);
}

#[test]
fn aliases_of_the_client_are_its_identity_and_another_client_is_not() {
    let text = |v: &str| {
        format!(
            r#"{{"mcpServers": {{"gitea-author": {{"command": "fleetgate", "args": ["serve", "--profile", "prgs-author", "--", "x"], "env": {{"GITEA_MCP_CLIENT": "{v}"}}}}}}}}"#
        )
    };
    let identity = |v: &str| {
        let (r, _) = judge(Client::ClaudeDesktop, &text(v), &|_| true);
        r.findings.iter().filter(|f| f.kind != FindingKind::Missing).map(|f| f.kind).collect::<Vec<_>>()
    };
    assert_eq!(identity("claude"), [], "claude_desktop and claude are one application");
    assert_eq!(identity("gemini"), [FindingKind::ClientIdentityWrong]);
}

#[test]
fn the_plan_applied_to_toml_and_json_is_clean_when_judged_again() {
    let toml = "# keep\n[mcp_servers.gitea-author]\ncommand = \"python3\"  # the seed\nargs = [\"s.py\"]\nenv = { GITEA_BOGUS = \"1\", GITEA_MCP_CLIENT = \"codex\" }\n";
    let json = "{\n  // keep\n  \"servers\": {\n    \"gitea-author\": {\"type\": \"stdio\", \"command\": \"python3\", \"args\": [\"s.py\"]},\n  },\n}\n";
    for (client, text) in [(Client::Codex, toml), (Client::Vscode, json)] {
        let (report, files) = judge(client, text, &|_| true);
        let edits = plan(&report, &crate::repair::Launcher::new("fleetgate"));
        let list = &edits[&0];
        assert!(
            list.iter().any(|e| matches!(e, Edit::Wrap { .. })) && list.last().is_some_and(Edit::is_add),
            "{list:?}"
        );
        let FileState::Parsed(parsed) = &files[0].state else { panic!() };
        let fixed = edit::apply(text, &files[0].source, parsed, list).unwrap();
        assert!(fixed.contains("keep"), "{fixed}");
        let (again, _) = judge(client, &fixed, &|_| true);
        assert!(again.findings.is_empty(), "{client:?}: {:?}\n{fixed}", again.findings);
        assert_eq!(again.members.iter().filter(|m| m.status == "defined").count(), 5);
    }
}

#[test]
fn a_wrapper_that_is_not_fleetgates_binary_is_a_finding_never_a_template_nor_the_repairs_wrapper() {
    let text = r#"{"mcpServers": {
        "gitea-author": {"command": ".devtools/fleetgate", "args": ["serve", "--profile", "prgs-author", "--", "evil"],
            "env": {"GITEA_MCP_CLIENT": "cursor"}},
        "gitea-reviewer": {"command": "python3", "args": ["s.py"], "env": {"GITEA_MCP_CLIENT": "cursor"}}}}"#;
    let (report, _) = judge(Client::Cursor, text, &|_| true);
    let foreign: Vec<_> = report.findings.iter().filter(|f| f.kind == FindingKind::ForeignWrapper).collect();
    assert_eq!(foreign.len(), 1, "{:?}", report.findings);
    assert!(!foreign[0].fixable && foreign[0].message.contains(".devtools/fleetgate"), "{:?}", foreign[0]);
    assert_eq!(report.members[0].definitions[0].launch, "foreign");
    let (_, def) = findings::template(&report, None).unwrap();
    assert_eq!(def.launch, "bare", "a foreign wrapper is never copied");
    let edits = plan(&report, &crate::repair::Launcher::new("/usr/bin/fleetgate"));
    let all: Vec<&Edit> = edits.values().flatten().collect();
    assert!(
        all.iter().any(|e| matches!(e, Edit::Wrap { fleetgate, .. } if fleetgate.command == "/usr/bin/fleetgate")),
        "the wrapper is the doctor's own: {all:?}"
    );
    assert!(!format!("{all:?}").contains(".devtools"), "{all:?}");
}

/// Gitea refuses an approval by the PR's poster (422): an author and a reviewer launched
/// with one credential — `GITEA_ACCESS_TOKEN`, or gitea-mcp's `--token`, which wins — is
/// a finding, compared by digest; the merger may share the reviewer's.
#[test]
fn an_author_and_a_reviewer_sharing_a_forge_credential_is_a_finding_named_by_digest_never_by_value() {
    let member = |role: &str, token: Option<&str>, extra: &[&str]| {
        let env = token.map(|t| format!(r#", "GITEA_ACCESS_TOKEN": "{t}""#)).unwrap_or_default();
        let extra: String = extra.iter().map(|a| format!(", {a:?}")).collect();
        format!(
            r#""gitea-{role}": {{"command": "fleetgate", "args": ["serve", "--profile", "prgs-{role}", "--", "gitea-mcp"{extra}],
                "env": {{"GITEA_MCP_CLIENT": "cursor"{env}}}}}"#
        )
    };
    let shared = |members: &[String]| {
        let (report, _) = judge(Client::Cursor, &format!(r#"{{"mcpServers": {{{}}}}}"#, members.join(",")), &|_| true);
        report.findings.into_iter().filter(|f| f.kind == FindingKind::SharedForgeIdentity).collect::<Vec<_>>()
    };
    let found = shared(&[member("author", Some("pat-1"), &[]), member("reviewer", Some("pat-1"), &[])]);
    assert_eq!(found.len(), 1, "{found:?}");
    let f = &found[0];
    assert_eq!(
        (f.profile.as_deref(), f.entry.as_deref(), f.key.as_deref(), f.fixable),
        (Some("prgs-reviewer"), Some("gitea-reviewer"), Some("GITEA_ACCESS_TOKEN"), false)
    );
    assert!(f.message.contains("prgs-author") && f.message.contains("422"), "{}", f.message);
    assert!(!format!("{f:?}").contains("pat-1"), "the value is never kept: {f:?}");
    for (members, why) in [
        (vec![member("author", Some("pat-1"), &[]), member("reviewer", Some("pat-2"), &[])], "accounts of their own"),
        (vec![member("author", Some("pat-1"), &[]), member("reviewer", None, &[])], "absent: another finding's"),
        (vec![member("author", Some(""), &[]), member("reviewer", Some(""), &[])], "empty is absent"),
        (vec![member("reviewer", Some("pat-2"), &[]), member("merger", Some("pat-2"), &[])], "the merger may share"),
        (
            vec![member("author", Some("pat-1"), &["--token", "pat-a"]), member("reviewer", Some("pat-1"), &[])],
            "the author's --token wins over its env",
        ),
    ] {
        let found = shared(&members);
        assert!(found.is_empty(), "{why}: {found:?}");
    }
    let found = shared(&[member("author", None, &["-token=pat-a"]), member("reviewer", Some("pat-a"), &[])]);
    assert_eq!(found.len(), 1, "one dash, as Go reads it");
    assert_eq!(found[0].key.as_deref(), Some("GITEA_ACCESS_TOKEN"));
    let found = shared(&[member("author", Some("pat-a"), &[]), member("reviewer", None, &["--token=pat-a"])]);
    assert_eq!(found[0].key.as_deref(), Some("--token"));
}

/// GitHub's server, launched as its binary or its container image: its credential is
/// `GITHUB_PERSONAL_ACCESS_TOKEN` in the entry's env, or set inline by `docker run -e KEY=V`;
/// an author and a reviewer sharing one are reported with GitHub's own refusal, by where the
/// token was read, never its value.
#[test]
fn a_github_author_and_reviewer_sharing_one_token_are_reported_in_either_launch_form() {
    let github = fleetgate_core::dialect::by_name("github-mcp").unwrap().server();
    let config = FleetConfig::builtin();
    let judge = |author: &str, reviewer: &str| {
        let text = format!(r#"{{"mcpServers": {{"gitea-author": {author}, "gitea-reviewer": {reviewer}}}}}"#);
        let source = source(Client::ClaudeCode);
        let files = vec![FileInput { state: FileState::Parsed(parse(&text, &source).unwrap()), source }];
        let roster =
            Roster { members: &config.members, env_prefix: "GITEA_", pass_through: &[], config: None, server: github };
        let report = classify(
            Client::ClaudeCode,
            &files,
            roster,
            false,
            Lookup { exists: &|_| true, fleetgate: &|c| c == "fleetgate" },
        );
        report.findings.into_iter().filter(|f| f.kind == FindingKind::SharedForgeIdentity).collect::<Vec<_>>()
    };
    let binary = |profile: &str, token: &str| {
        format!(
            r#"{{"command": "fleetgate", "args": ["serve", "--profile", "{profile}", "--", "github-mcp-server", "stdio"],
               "env": {{"GITEA_MCP_CLIENT": "claude_code", "GITHUB_PERSONAL_ACCESS_TOKEN": "{token}"}}}}"#
        )
    };
    let docker = |profile: &str, token: &str| {
        format!(
            r#"{{"command": "fleetgate", "args": ["serve", "--profile", "{profile}", "--", "docker", "run", "-i", "--rm",
               "-e", "GITHUB_PERSONAL_ACCESS_TOKEN={token}", "ghcr.io/github/github-mcp-server"],
               "env": {{"GITEA_MCP_CLIENT": "claude_code"}}}}"#
        )
    };
    let found = judge(&binary("prgs-author", "ghp_same"), &docker("prgs-reviewer", "ghp_same"));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].key.as_deref(), Some("-e"));
    assert!(found[0].message.contains("Can not approve your own pull request"), "{}", found[0].message);
    assert!(!found[0].message.contains("ghp_same"));
    assert!(judge(&binary("prgs-author", "ghp_a"), &docker("prgs-reviewer", "ghp_b")).is_empty());
    assert!(judge(&docker("prgs-author", "ghp_a"), &binary("prgs-reviewer", "ghp_a")).len() == 1);
    // Gitea's token key means nothing to GitHub's server.
    let gitea_key = |profile: &str| {
        format!(
            r#"{{"command": "fleetgate", "args": ["serve", "--profile", "{profile}", "--", "github-mcp-server", "stdio"],
               "env": {{"GITEA_MCP_CLIENT": "claude_code", "GITEA_ACCESS_TOKEN": "same"}}}}"#
        )
    };
    assert!(judge(&gitea_key("prgs-author"), &gitea_key("prgs-reviewer")).is_empty());
}
