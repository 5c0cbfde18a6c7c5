//! `fleetgate doctor --snippet --client NAME`: the block to paste into that
//! client's configuration — every roster member wrapped in `fleetgate serve`,
//! with the client's identity key and nothing else in `env` (no secret is
//! ever written; the downstream's own keys are the operator's to add).

use super::clients::Client;
use super::repair::{Launcher, replace_token, wrapped_args};
use fleetgate_config::Member;
use jsonc_parser::cst::{CstInputValue, CstRootNode};

/// The downstream placeholder when nothing shows what it is.
pub const PLACEHOLDER: &str = "DOWNSTREAM-MCP-SERVER";

/// The argv of `m`'s downstream: `downstream` with the `from` member's
/// profile and namespace swapped for `m`'s.
fn downstream_for(m: &Member, from: Option<&Member>, downstream: &[String]) -> Vec<String> {
    let replace: Vec<(String, String)> = from
        .map(|f| vec![(f.profile.clone(), m.profile.clone()), (f.namespace.clone(), m.namespace.clone())])
        .unwrap_or_default();
    downstream.iter().map(|a| replace_token(a, &replace)).collect()
}

/// The block for `client`. `downstream` is the server fleetgate fronts, as
/// `from` runs it (`None`: as given, for every member alike).
pub fn snippet(
    client: Client,
    members: &[Member],
    identity_key: &str,
    fleetgate: &Launcher,
    downstream: &[String],
    from: Option<&Member>,
) -> String {
    let placeholder = [PLACEHOLDER.to_owned()];
    let downstream = if downstream.is_empty() { &placeholder[..] } else { downstream };
    let argv = |m: &Member| {
        let d = downstream_for(m, from, downstream);
        wrapped_args(fleetgate, &m.profile, &d[0], &d[1..])
    };
    if client == Client::Codex {
        let mut doc = toml_edit::DocumentMut::new();
        let mut servers = toml_edit::Table::new();
        servers.set_implicit(true);
        for m in members {
            let mut t = toml_edit::Table::new();
            t.insert("command", toml_edit::value(&fleetgate.command));
            t.insert("args", toml_edit::value(argv(m).into_iter().collect::<toml_edit::Array>()));
            let mut env = toml_edit::InlineTable::new();
            env.insert(identity_key, client.identity().into());
            t.insert("env", toml_edit::value(env));
            servers.insert(&m.namespace, toml_edit::Item::Table(t));
        }
        doc.insert(client.servers_key(), toml_edit::Item::Table(servers));
        return doc.to_string();
    }
    let root = CstRootNode::parse("{}", &Default::default()).expect("an empty object parses");
    let servers = root.object_value_or_set().object_value_or_set(client.servers_key());
    for m in members {
        let mut entry: Vec<(String, CstInputValue)> = Vec::new();
        if client.wants_stdio_type() {
            entry.push(("type".into(), "stdio".into()));
        }
        entry.push(("command".into(), fleetgate.command.as_str().into()));
        entry.push(("args".into(), CstInputValue::Array(argv(m).into_iter().map(Into::into).collect())));
        entry.push(("env".into(), CstInputValue::Object(vec![(identity_key.into(), client.identity().into())])));
        servers.append(&m.namespace, CstInputValue::Object(entry));
    }
    format!("{root}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members() -> Vec<Member> {
        ["author", "reviewer"]
            .iter()
            .map(|r| Member {
                namespace: format!("gitea-{r}"),
                profile: format!("prgs-{r}"),
                role: (*r).into(),
                replicas: 1,
            })
            .collect()
    }

    #[test]
    fn json_and_toml_blocks_parse_and_carry_only_the_identity() {
        let m = members();
        let down = ["python3".to_owned(), "mcp_server.py".into(), "--profile".into(), "prgs-author".into()];
        let vs = snippet(Client::Vscode, &m, "GITEA_MCP_CLIENT", &Launcher::new("fleetgate"), &down, Some(&m[0]));
        let v: serde_json::Value = serde_json::from_str(&vs).unwrap();
        let reviewer = &v["servers"]["gitea-reviewer"];
        assert_eq!(reviewer["type"], "stdio");
        let args: Vec<&str> = reviewer["args"].as_array().unwrap().iter().filter_map(|a| a.as_str()).collect();
        assert_eq!(
            args,
            ["serve", "--profile", "prgs-reviewer", "--", "python3", "mcp_server.py", "--profile", "prgs-reviewer"]
        );
        let codex = snippet(Client::Codex, &m, "GITEA_MCP_CLIENT", &Launcher::new("fleetgate"), &[], None);
        let doc: toml_edit::DocumentMut = codex.parse().unwrap();
        assert_eq!(doc["mcp_servers"]["gitea-author"]["env"]["GITEA_MCP_CLIENT"].as_str(), Some("codex"));
        assert!(codex.contains(PLACEHOLDER), "{codex}");
    }
}
