//! The roster `fleetgate init` writes: a forge repository read from a git remote URL, and the
//! commented `fleet.toml` of a gitea-mcp fleet for it. Pure: text in, text out; the shell
//! (git, the file, the doctor) is the binary's `cli/init`.

use crate::DEFAULT_ROLES;

/// A forge repository named by a git remote URL.
#[derive(Debug, PartialEq, Eq)]
pub struct Remote {
    /// `https://host[:port]`, where the forge's web and API answer.
    pub host: String,
    /// The owner (user or organisation).
    pub org: String,
    /// The repository.
    pub repo: String,
}

/// The forge, owner and repository of a git remote URL: `https://host/org/repo(.git)`,
/// `ssh://git@host[:port]/org/repo(.git)` or `git@host:org/repo(.git)`. `None` for anything
/// else (a local path, a URL without both parts).
pub fn parse_remote(url: &str) -> Option<Remote> {
    let url = url.trim();
    let (host, path) = if let Some(rest) = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://")) {
        let (authority, path) = rest.split_once('/')?;
        let authority = authority.rsplit('@').next()?;
        let scheme = if url.starts_with("https://") { "https" } else { "http" };
        (format!("{scheme}://{authority}"), path)
    } else if let Some(rest) = url.strip_prefix("ssh://") {
        let (authority, path) = rest.split_once('/')?;
        let host = authority.rsplit('@').next()?.split(':').next()?;
        (format!("https://{host}"), path)
    } else {
        let (user_host, path) = url.split_once(':')?;
        if user_host.contains('/') || !user_host.contains('@') {
            return None;
        }
        (format!("https://{}", user_host.rsplit('@').next()?), path)
    };
    let mut parts = path.trim_matches('/').trim_end_matches(".git").split('/');
    let (org, repo) = (parts.next()?, parts.next()?);
    let word = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    (parts.next().is_none() && word(org) && word(repo) && host.len() > "https://".len()).then(|| Remote {
        host,
        org: org.to_owned(),
        repo: repo.to_owned(),
    })
}

/// The commented `fleet.toml` of a gitea-mcp fleet for `remote` (named `remote_name`).
pub fn gitea_mcp_config(remote_name: &str, remote: &Remote) -> String {
    let mut text = format!(
        "# fleetgate roster for {org}/{repo} on {host}, written by `fleetgate init --forge gitea-mcp`.\n\
         # Every key is in the book, docs/reference/config.md (\"Configuration keys\"); `fleetgate doctor` checks\n\
         # your clients against it.\n\n\
         [fleet]\n\
         name = \"{repo}\"\n\
         forge = \"gitea-mcp\"                # the official Gitea MCP server's rules: who may call what\n\
         env_prefix = \"GITEA_\"              # fleet keys: GITEA_MCP_COHORT_ID, GITEA_CLIENT_MANAGED, …\n\
         tool_prefix = \"gitea_\"             # the control tools: gitea_get_runtime_context, …\n\
         process_match = [\"gitea-mcp\"]      # a bare gitea-mcp (not behind fleetgate serve) closes the gate\n\
         # The server's own keys, passed to it (the token stays in your clients' configurations).\n\
         pass_through_env = [\"GITEA_HOST\", \"GITEA_ACCESS_TOKEN\"]\n\n\
         [binding]                          # the repository every member works on\n\
         remote = \"{remote_name}\"\n\
         org = \"{org}\"\n\
         repo = \"{repo}\"\n\n\
         [workflow]                         # the pull-request workflow, pinned to exact heads\n\
         lease_ttl_seconds = 600\n\
         independent_review = \"session\"     # an approval from the author's own session is not independent\n\
         # How the CLI (`fleetgate pr`, `capability`) reads the forge; set GITEA_HOST={host}\n\
         # and GITEA_ACCESS_TOKEN in its environment.\n\
         forge_command = [\"gitea-mcp\", \"-t\", \"stdio\"]\n",
        org = remote.org,
        repo = remote.repo,
        host = remote.host,
    );
    text.push_str("\n# One member per role, each a `fleetgate serve --profile P -- gitea-mcp -t stdio` in a client.\n");
    for role in DEFAULT_ROLES {
        text.push_str(&format!(
            "\n[[members]]\nnamespace = \"gitea-{role}\"\nprofile = \"{repo}-{role}\"\nrole = \"{role}\"\n",
            repo = remote.repo
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FleetConfig;

    #[test]
    fn a_remote_url_names_its_forge_owner_and_repository() {
        let r =
            |host: &str, org: &str, repo: &str| Some(Remote { host: host.into(), org: org.into(), repo: repo.into() });
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
        for not in ["/srv/git/tools.git", "https://git.example.com/tools", "git@host:a/b/c", "file:///x/y", ""] {
            assert_eq!(parse_remote(not), None, "{not}");
        }
    }

    #[test]
    fn the_written_roster_is_one_fleetgate_reads_with_five_gated_members() {
        let remote = Remote { host: "https://git.example.com".into(), org: "acme".into(), repo: "tools".into() };
        let config = FleetConfig::parse(&gitea_mcp_config("origin", &remote), "fleet.toml").unwrap();
        assert_eq!(config.members.len(), 5);
        assert_eq!(config.forge.as_deref(), Some("gitea-mcp"));
        assert_eq!(config.members[0].profile, "tools-author");
    }
}
