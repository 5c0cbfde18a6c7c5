//! The roster `fleetgate init` writes: a forge repository read from a git remote URL, and the
//! commented `fleet.toml` of a gitea-mcp fleet for it. Pure: text in, text out; the shell
//! (git, the file, the doctor) is the binary's `cli/init`.

use crate::DEFAULT_ROLES;

/// A forge repository named by a git remote URL. Only [`parse_remote`] makes one from a URL,
/// and every part it keeps is checked: a host name or IP address, a port number, an owner
/// and a repository of letters, digits, `-`, `_` and `.`.
#[derive(Debug, PartialEq, Eq)]
pub struct Remote {
    /// `https://host[:port]`, where the forge's web and API answer.
    pub host: String,
    /// The owner (user or organisation).
    pub org: String,
    /// The repository.
    pub repo: String,
}

/// Why a remote URL names no forge repository fleetgate writes a roster for: the part
/// refused and what it must be. The URL itself is never in it (it may hold a credential).
#[derive(Debug, PartialEq, Eq)]
pub struct RemoteError {
    /// What is wrong, in words.
    pub reason: String,
}

impl std::fmt::Display for RemoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for RemoteError {}

/// A value as the error shows it: Rust's escaping (no control character, no quote unescaped)
/// and bounded.
fn quoted(value: &str) -> String {
    let shown: String = value.chars().take(80).collect();
    let cut = if shown.len() < value.len() { "…" } else { "" };
    format!("{:?}{cut}", fleetgate_core::text::shown(&shown, usize::MAX))
}

/// A DNS name (labels of letters, digits and `-`, not at a label's ends) or an IPv4 address,
/// or an IPv6 address in brackets.
fn host_name(host: &str) -> bool {
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6.parse::<std::net::Ipv6Addr>().is_ok();
    }
    let label = |l: &str| {
        (1..=63).contains(&l.len())
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    host.len() <= 253 && host.split('.').all(label)
}

/// A TCP port: 1 to 65535, decimal digits only.
fn port_number(port: &str) -> bool {
    !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) && port.parse::<u16>().is_ok_and(|p| p > 0)
}

/// `host[:port]` checked, for an https URL (`keep_port`) or for ssh, whose port is not the
/// forge's web port (dropped).
fn authority(hostport: &str, keep_port: bool) -> Result<String, RemoteError> {
    let refuse = |reason: String| Err(RemoteError { reason });
    let (host, port) = match hostport.rsplit_once(':') {
        // An IPv6 address without a port: its colons are inside the brackets.
        Some((h, p)) if !hostport.starts_with('[') || h.ends_with(']') => (h, Some(p)),
        _ => (hostport, None),
    };
    if !host_name(host) {
        return refuse(format!(
            "the host {} is not a host name (letters, digits, '-' and '.', or an IP address)",
            quoted(host)
        ));
    }
    match port {
        Some(p) if !port_number(p) => refuse(format!("the port {} is not a port number (1 to 65535)", quoted(p))),
        Some(p) if keep_port => Ok(format!("{host}:{p}")),
        _ => Ok(host.to_owned()),
    }
}

/// The forge, owner and repository of a git remote URL: `https://host[:port]/org/repo(.git)`,
/// `ssh://[user@]host[:port]/org/repo(.git)` or `user@host:org/repo(.git)`; any credential
/// in it is left out. Every part kept is checked, and anything else is refused naming the part
/// (a local path, a URL without both owner and repository, a host that is no host name): a
/// `.git/config` is anyone's with a shell in the checkout, and what is kept is written into
/// `fleet.toml`.
pub fn parse_remote(url: &str) -> Result<Remote, RemoteError> {
    let url = url.trim();
    let shapes = "https://HOST[:PORT]/ORG/REPO, ssh://[USER@]HOST[:PORT]/ORG/REPO or USER@HOST:ORG/REPO";
    let unknown = || RemoteError { reason: format!("it is not a remote URL of a forge repository ({shapes})") };
    let (host, path) = if let Some(rest) = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://")) {
        let (authority_part, path) = rest.split_once('/').ok_or_else(unknown)?;
        let hostport = authority_part.rsplit('@').next().unwrap_or_default();
        let scheme = if url.starts_with("https://") { "https" } else { "http" };
        (format!("{scheme}://{}", authority(hostport, true)?), path)
    } else if let Some(rest) = url.strip_prefix("ssh://") {
        let (authority_part, path) = rest.split_once('/').ok_or_else(unknown)?;
        let hostport = authority_part.rsplit('@').next().unwrap_or_default();
        (format!("https://{}", authority(hostport, false)?), path)
    } else {
        let (user_host, path) = url.split_once(':').ok_or_else(unknown)?;
        if user_host.contains('/') || !user_host.contains('@') {
            return Err(unknown());
        }
        let host = user_host.rsplit('@').next().unwrap_or_default();
        (format!("https://{}", authority(host, false)?), path)
    };
    let trimmed = path.trim_matches('/');
    let trimmed = trimmed.strip_suffix(".git").unwrap_or(trimmed);
    let mut parts = trimmed.split('/');
    let word = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    match (parts.next(), parts.next(), parts.next()) {
        (Some(org), Some(repo), None) if word(org) && word(repo) => {
            Ok(Remote { host, org: org.to_owned(), repo: repo.to_owned() })
        }
        _ => Err(RemoteError {
            reason: format!("the path {} names no ORG/REPO (each of letters, digits, '-', '_' and '.')", quoted(path)),
        }),
    }
}

/// `value` as a one-line TOML basic string: `"` and `\\` escaped, and every control, invisible
/// or direction-changing character written as its `\uXXXX` escape.
fn toml_string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if fleetgate_core::text::needs_escape(c) && (c as u32) <= 0xFFFF => {
                out.push_str(&format!("\\u{:04X}", c as u32));
            }
            c if fleetgate_core::text::needs_escape(c) => out.push_str(&format!("\\U{:08X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `text` fit for a TOML comment: no character that ends the line or that TOML refuses in a
/// comment (a remote's parts are checked before they get here; this holds whatever they are).
fn comment(text: &str) -> String {
    fleetgate_core::text::shown(text, usize::MAX)
}

/// The commented `fleet.toml` of a gitea-mcp fleet for `remote` (named `remote_name`).
pub fn gitea_mcp_config(remote_name: &str, remote: &Remote) -> String {
    forge_config(&fleetgate_core::dialect::gitea::GITEA, remote_name, remote)
}

/// The commented `fleet.toml` of a fleet in front of `dialect`'s server for `remote` (named
/// `remote_name`). Every value is written as a TOML string and every text in a comment
/// escaped, so no part of a remote (checked by [`parse_remote`]) nor its name can add a key.
pub fn forge_config(dialect: &dyn fleetgate_core::dialect::Dialect, remote_name: &str, remote: &Remote) -> String {
    let server = dialect.server();
    let prefix = server.prefix;
    let upper = prefix.to_ascii_uppercase();
    let launch = server.launch.join(" ");
    // The host the server needs told: none on its default host (github.com).
    let host_note = if server.default_host == Some(remote.host.as_str()) {
        format!("{} is the server's default host: no {} needed", remote.host, server.host_env)
    } else {
        format!("{}={}", server.host_env, remote.host)
    };
    let mut text = format!(
        "# fleetgate roster for {about}, written by `fleetgate init --forge {forge}`.\n\
         # Every key is in the book, docs/reference/config.md (\"Configuration keys\"); `fleetgate doctor` checks\n\
         # your clients against it.\n\n\
         [fleet]\n\
         name = {name}\n\
         forge = {forge_value}   # {title}: what each call does, who may make it\n\
         env_prefix = {env_prefix}   # fleet keys: {upper}_MCP_COHORT_ID, {upper}_CLIENT_MANAGED, …\n\
         tool_prefix = {tool_prefix}   # the control tools: {prefix}_get_runtime_context, …\n\
         process_match = {process_match}   # a bare server (not behind fleetgate serve) closes the gate\n\
         # The server's own keys, passed to it (the token stays in your clients' configurations).\n\
         pass_through_env = [{host_env}, {token_env}]\n\n\
         [binding]                          # the repository every member works on\n\
         remote = {remote_name}\n\
         org = {org}\n\
         repo = {repo}\n\n\
         [workflow]                         # the pull-request workflow, pinned to exact heads\n\
         lease_ttl_seconds = 600\n\
         independent_review = \"principal\"   # another principal's approval (stdio: another session's) counts\n\
         # How the CLI (`fleetgate pr`, `capability`) reads the forge ({host_note};\n\
         # set {token_comment} in its environment).\n\
         forge_command = {command}\n",
        about = comment(&format!("{}/{} on {}", remote.org, remote.repo, remote.host)),
        forge = dialect.name(),
        forge_value = toml_string(dialect.name()),
        title = comment(server.title),
        name = toml_string(&remote.repo),
        env_prefix = toml_string(&format!("{upper}_")),
        tool_prefix = toml_string(&format!("{prefix}_")),
        process_match = toml_array(server.process_match),
        host_env = toml_string(server.host_env),
        token_env = toml_string(server.token_env),
        remote_name = toml_string(remote_name),
        org = toml_string(&remote.org),
        repo = toml_string(&remote.repo),
        host_note = comment(&host_note),
        token_comment = comment(server.token_env),
        command = toml_array(server.launch),
    );
    if dialect.name() == fleetgate_core::dialect::gitea::NAME {
        // The gate cannot read app.ini: an instance's own keywords are the roster's to say.
        text.push_str(
            "\n# When your Gitea's app.ini sets [repository.pull-request] CLOSE_KEYWORDS or REOPEN_KEYWORDS,\n\
             # copy the lists here, so texts with those words are judged like `fixes #N`:\n\
             # [forge]\n\
             # close_keywords = [\"close\", \"closes\", \"closed\", \"fix\", \"fixes\", \"fixed\", \"resolve\", \"resolves\", \"resolved\"]\n\
             # reopen_keywords = [\"reopen\", \"reopens\", \"reopened\"]\n",
        );
    }
    text.push_str(&format!(
        "\n# One member per role, each a `fleetgate serve --profile P -- {}` in a client.\n",
        comment(&launch)
    ));
    for role in DEFAULT_ROLES {
        text.push_str(&format!(
            "\n[[members]]\nnamespace = {}\nprofile = {}\nrole = {}\n",
            toml_string(&format!("{prefix}-{role}")),
            toml_string(&format!("{}-{role}", remote.repo)),
            toml_string(role)
        ));
    }
    text
}

fn toml_array(items: &[&str]) -> String {
    format!("[{}]", items.iter().map(|i| toml_string(i)).collect::<Vec<_>>().join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FleetConfig;

    #[test]
    fn a_remote_url_names_its_forge_owner_and_repository() {
        let r =
            |host: &str, org: &str, repo: &str| Ok(Remote { host: host.into(), org: org.into(), repo: repo.into() });
        assert_eq!(
            parse_remote("https://git.example.com/acme/tools.git"),
            r("https://git.example.com", "acme", "tools")
        );
        assert_eq!(
            parse_remote("https://me:tok@git.example.com:3000/acme/tools"),
            r("https://git.example.com:3000", "acme", "tools")
        );
        assert_eq!(parse_remote("git@git.example.com:acme/tools.git"), r("https://git.example.com", "acme", "tools"));
        assert_eq!(
            parse_remote("ssh://git@git.example.com:2222/acme/tools.git"),
            r("https://git.example.com", "acme", "tools")
        );
        assert_eq!(
            parse_remote("https://[2001:db8::1]:3000/acme/tools"),
            r("https://[2001:db8::1]:3000", "acme", "tools")
        );
        assert_eq!(parse_remote("ssh://git@[2001:db8::1]/acme/tools"), r("https://[2001:db8::1]", "acme", "tools"));
        assert_eq!(parse_remote("https://10.0.0.7/acme/tools"), r("https://10.0.0.7", "acme", "tools"));
        for (not, part) in [
            ("/srv/git/tools.git", "not a remote URL"),
            ("https://git.example.com/tools", "the path"),
            ("git@host:a/b/c", "the path"),
            ("file:///x/y", "not a remote URL"),
            ("", "not a remote URL"),
            ("https://git.example.com:0/a/b", "the port"),
            ("https://git.example.com:65536/a/b", "the port"),
            ("https://git.example.com:/a/b", "the port"),
            ("https://-bad.example.com/a/b", "the host"),
            ("https://git..example.com/a/b", "the host"),
            ("https:///a/b", "the host"),
            ("https://[::g]/a/b", "the host"),
        ] {
            let e = parse_remote(not).unwrap_err();
            assert!(e.to_string().contains(part), "{not}: {e}");
        }
    }

    #[test]
    fn a_github_roster_names_github_s_server_and_its_host_only_off_github_com() {
        let github = fleetgate_core::dialect::by_name("github-mcp").unwrap();
        for (url, host_line) in [
            (
                "https://github.com/acme/tools.git",
                "https://github.com is the server's default host: no GITHUB_HOST needed",
            ),
            ("git@ghe.example.com:acme/tools.git", "GITHUB_HOST=https://ghe.example.com"),
        ] {
            let remote = parse_remote(url).unwrap();
            let text = forge_config(github, "origin", &remote);
            let config = FleetConfig::parse(&text, "fleet.toml").unwrap_or_else(|e| panic!("{url}: {e}\n{text}"));
            assert_eq!(config.dialect().map(|d| d.name()), Some("github-mcp"));
            assert_eq!(config.env_prefix, "GITHUB_");
            assert_eq!(config.pass_through_env, ["GITHUB_HOST", "GITHUB_PERSONAL_ACCESS_TOKEN"]);
            assert_eq!(config.members[0].namespace, "github-author");
            assert!(text.contains(host_line), "{url}: {text}");
            assert!(text.contains("forge_command = [\"github-mcp-server\", \"stdio\"]"), "{text}");
        }
    }

    /// The keys of a TOML table, sorted.
    fn keys(table: &toml::Table) -> Vec<&str> {
        table.keys().map(String::as_str).collect()
    }

    /// The roster written for `remote` (named `name`) parses to exactly the template's keys,
    /// with the remote's parts as their values, and fleetgate loads it.
    fn assert_exactly_the_intended_roster(name: &str, remote: &Remote, url: &str) {
        let text = gitea_mcp_config(name, remote);
        let raw = |c: char| c != '\n' && fleetgate_core::text::needs_escape(c);
        assert!(!text.chars().any(raw), "{url:?}: a raw control or invisible character\n{text}");
        let table: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{url:?}: {e}\n{text}"));
        assert_eq!(keys(&table), ["binding", "fleet", "members", "workflow"], "{url:?}\n{text}");
        let fleet = table["fleet"].as_table().unwrap();
        let expected = ["env_prefix", "forge", "name", "pass_through_env", "process_match", "tool_prefix"];
        assert_eq!(keys(fleet), expected, "{url:?}\n{text}");
        let binding = table["binding"].as_table().unwrap();
        assert_eq!(keys(binding), ["org", "remote", "repo"], "{url:?}\n{text}");
        assert_eq!(binding["remote"].as_str(), Some(name), "{url:?}");
        assert_eq!(binding["org"].as_str(), Some(remote.org.as_str()), "{url:?}");
        assert_eq!(binding["repo"].as_str(), Some(remote.repo.as_str()), "{url:?}");
        let workflow = table["workflow"].as_table().unwrap();
        assert_eq!(keys(workflow), ["forge_command", "independent_review", "lease_ttl_seconds"], "{url:?}\n{text}");
        let members = table["members"].as_array().unwrap();
        assert_eq!(members.len(), DEFAULT_ROLES.len(), "{url:?}");
        for m in members {
            assert_eq!(keys(m.as_table().unwrap()), ["namespace", "profile", "role"], "{url:?}\n{text}");
        }
        assert!(!remote.host.chars().any(|c| c.is_control() || fleetgate_core::text::needs_escape(c)), "{url:?}");
        FleetConfig::parse(&text, "fleet.toml").unwrap_or_else(|e| panic!("{url:?}: {e}\n{text}"));
    }

    /// Issue 43 (2): a newline in the host of `remote.origin.url` was written raw into a
    /// comment and became TOML (`protected_paths = []`). Every control character, the Unicode
    /// line separators and TOML's own syntax, in every part of every URL form and in the
    /// remote's name: the roster written parses to exactly the intended keys, or the remote is
    /// refused with a reason.
    #[test]
    fn a_hostile_remote_url_never_becomes_toml() {
        let mut hostile: Vec<String> =
            (0u32..0x20).chain(0x7f..0xa0).filter_map(char::from_u32).map(String::from).collect();
        hostile.extend(
            ["\u{2028}", "\u{2029}", "\u{feff}", "\u{202e}", "\"", "'", "\\", "#", "=", "[", "]", " ", "\"\n[fleet]\n"]
                .map(String::from),
        );
        hostile.push("\nprotected_paths = []\n#".into());
        type Form = (&'static str, fn(&str) -> String);
        let forms: [Form; 10] = [
            ("https host", |x| format!("https://git.exa{x}mple.com/acme/tools.git")),
            ("https host end", |x| format!("https://git.example.com{x}/acme/tools.git")),
            ("https port", |x| format!("https://git.example.com:30{x}00/acme/tools.git")),
            ("https userinfo", |x| format!("https://de{x}ploy:s3{x}cret@git.example.com/acme/tools.git")),
            ("https org", |x| format!("https://git.example.com/ac{x}me/tools.git")),
            ("https repo", |x| format!("https://git.example.com/acme/to{x}ols.git")),
            ("ssh host", |x| format!("ssh://git@git.exa{x}mple.com:2222/acme/tools.git")),
            ("ssh port", |x| format!("ssh://git@git.example.com:22{x}22/acme/tools.git")),
            ("scp host", |x| format!("git@git.exa{x}mple.com:acme/tools.git")),
            ("scp path", |x| format!("git@git.example.com:acme/to{x}ols.git")),
        ];
        let (mut refused, mut written) = (0, 0);
        for x in &hostile {
            for (part, form) in forms {
                let url = form(x);
                match parse_remote(&url) {
                    Ok(remote) => {
                        written += 1;
                        assert_exactly_the_intended_roster("origin", &remote, &url);
                    }
                    Err(e) => {
                        refused += 1;
                        let why = e.to_string();
                        assert!(!why.is_empty() && !why.contains('\n'), "{part} {url:?}: {why:?}");
                    }
                }
            }
            // The remote's name (`--remote`) is written too: as a TOML string, whatever it holds.
            let remote = parse_remote("https://git.example.com/acme/tools.git").unwrap();
            assert_exactly_the_intended_roster(&format!("ori{x}gin"), &remote, x);
        }
        assert!(refused > 0 && written > 0, "{refused} refused, {written} written");
        // The payload the red team used: refused, naming the host.
        let e = parse_remote("https://git.example.com\nprotected_paths = []\n/acme/tools").unwrap_err();
        assert!(e.to_string().contains("host"), "{e}");
    }

    #[test]
    fn the_written_roster_is_one_fleetgate_reads_with_five_gated_members() {
        let remote = Remote { host: "https://git.example.com".into(), org: "acme".into(), repo: "tools".into() };
        let config = FleetConfig::parse(&gitea_mcp_config("origin", &remote), "fleet.toml").unwrap();
        assert_eq!(config.members.len(), 5);
        assert_eq!(config.forge.as_deref(), Some("gitea-mcp"));
        assert_eq!(config.members[0].profile, "tools-author");
    }

    #[test]
    fn a_gitea_roster_shows_where_the_instance_s_keywords_go_and_uncommented_it_loads() {
        let remote = Remote { host: "https://git.example.com".into(), org: "acme".into(), repo: "tools".into() };
        let written = gitea_mcp_config("origin", &remote);
        let uncommented = written
            .replace("# [forge]", "[forge]")
            .replace("# close_keywords", "close_keywords")
            .replace("# reopen_keywords", "reopen_keywords");
        let config = FleetConfig::parse(&uncommented, "fleet.toml").unwrap();
        assert_eq!(config.forge_keywords.close().len(), 9);
        assert_eq!(config.forge_keywords.reopen(), ["reopen", "reopens", "reopened"]);
        let github = fleetgate_core::dialect::by_name("github-mcp").unwrap();
        assert!(!forge_config(github, "origin", &remote).contains("[forge]"), "GitHub's keywords are fixed");
    }
}
