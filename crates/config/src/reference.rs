//! Every key of `fleet.toml`, as data: the reference page `docs/reference/config.md` is
//! rendered from it, and a test asks the parser itself which keys each table accepts (the
//! "expected one of" of an unknown key), so a key added to the parser and not here, or
//! documented here and not parsed, fails the build's tests.

use std::fmt::Write as _;

/// One table of the file.
#[derive(Debug)]
pub struct Table {
    /// The table as written (`[fleet]`, `[[members]]`, `[roles.ROLE]`; `` for the top level).
    pub header: &'static str,
    /// What the table is for.
    pub about: &'static str,
    /// Its keys, in the order the page lists them.
    pub keys: &'static [Key],
}

/// One key of a table.
#[derive(Debug)]
pub struct Key {
    /// The key.
    pub name: &'static str,
    /// Its type and its default when absent (`required` when it has none).
    pub default: &'static str,
    /// What it does, and the values it accepts.
    pub meaning: &'static str,
}

const fn key(name: &'static str, default: &'static str, meaning: &'static str) -> Key {
    Key { name, default, meaning }
}

/// Every table, in the order of the page.
pub const TABLES: &[Table] = &[
    Table {
        header: "",
        about: "The file's top level holds only the tables below; every key of every table is optional unless \
                marked required, and an unknown key anywhere is refused with the file and line.",
        keys: &[
            key("fleet", "table", "The fleet's name, prefixes, heartbeat TTL, process observation and forge profile."),
            key("binding", "table (unset)", "The repository every member must be bound to."),
            key("members", "array of tables, required", "The roster: at least one member."),
            key("supervision", "table", "Restarts of background loops and of the downstream child."),
            key("roles", "tables (unset)", "Per-role tool policy, one `[roles.ROLE]` table per role."),
            key("tools", "table", "Tool classification overrides and tool-definition pinning."),
            key("http", "table", "Principals and bounds of `fleetgate serve --transport http`."),
            key("rules", "array of tables (none)", "Argument-aware policy rules, checked before the forge profile's."),
            key("workflow", "table", "The pull-request workflow (with `forge = \"gitea-mcp\"`)."),
            key("downstream", "table", "What the downstream server is given."),
            key("tracing", "table (unset)", "OpenTelemetry export of the spans."),
            key("metrics", "table (unset)", "A stdio gateway's own `GET /metrics` listener."),
            key("audit", "table", "What each judged call's audit entry keeps."),
            key("approvals", "table", "Calls a `[[rules]]` entry with `decision = \"ask\"` matches."),
            key("people", "array of tables (none)", "Who each identity is: `[[people]]`, one table per person."),
            key("invariants", "table", "The forge profile's invariants an operator lifts, by name."),
            key("shadow", "table (unset)", "A candidate roster judged beside the running one, never enforced."),
            key("retention", "table (unset)", "How long history is kept, and how often it is pruned."),
            key("forge", "table (unset)", "The forge instance's own grammar: a Gitea `app.ini`'s keyword lists."),
        ],
    },
    Table {
        header: "[fleet]",
        about: "Who the fleet is.",
        keys: &[
            key("name", "string, `\"prgs\"`", "The fleet's name: its runtime rows and workers are scoped by it."),
            key(
                "env_prefix",
                "string, `\"GITEA_\"`",
                "The prefix of the operator environment keys this fleet owns: upper-case letters, digits and `_`. \
                 A set key of this prefix that fleetgate does not declare is refused (`fleetgate env check`).",
            ),
            key(
                "tool_prefix",
                "string, `\"fleet_\"` (the built-in roster: `\"gitea_\"`)",
                "The prefix of the control tools a gateway serves (`fleet_heartbeat`, `fleet_inventory`, …).",
            ),
            key(
                "heartbeat_ttl_seconds",
                "number, `900`",
                "A worker lease lives this long past its last renewal: 1 to 604800.",
            ),
            key(
                "process_match",
                "list of strings, `[\"mcp_server.py\"]`",
                "Substrings of a process's command line that make it a fleet server for the inventory's \
                 observation of the host (`gitea-mcp` for the gitea-mcp profile). A gateway's own downstream \
                 child is never counted as a second member.",
            ),
            key(
                "pass_through_env",
                "list of strings, `[]`",
                "Keys of `env_prefix` that belong to the downstream server (its host, its token): passed to it \
                 and not judged by the environment gate.",
            ),
            key(
                "forge",
                "string (unset)",
                "The forge dialect: `\"gitea-mcp\"` (the official Gitea MCP server) or `\"github-mcp\"` \
                 (GitHub's official MCP server) turns on the invariants, the server's role matrix and the \
                 pull-request workflow for that server; any other name is refused with the known ones.",
            ),
        ],
    },
    Table {
        header: "[binding]",
        about: "The repository every member must be bound to; a member bound elsewhere is a mismatch.",
        keys: &[
            key("remote", "string, required", "The forge remote's name; the first part of every PR key."),
            key("org", "string, required", "The owner (organisation or user)."),
            key("repo", "string, required", "The repository."),
        ],
    },
    Table {
        header: "[[members]]",
        about: "One table per member of the roster; namespaces and profiles are unique.",
        keys: &[
            key(
                "namespace",
                "string, required",
                "The MCP server's name in the clients' configurations (`gitea-author`).",
            ),
            key("profile", "string, required", "The member's profile, as `fleetgate serve --profile` names it."),
            key("role", "string, required", "Its role: what it may do (`author`, `reviewer`, `merger`, …)."),
            key(
                "replicas",
                "integer, `1`",
                "How many instances of it may run at once (1 to 64): HTTP gateway replicas of one profile, behind \
                 any load balancer on one store. The inventory counts them as one member; one more is a duplicate \
                 and closes the gate. A session is relayed to the replica holding it (`serve --advertise`); a \
                 stateless client's worker is the member's.",
            ),
        ],
    },
    Table {
        header: "[supervision]",
        about: "Restarts of background loops and of the downstream child.",
        keys: &[
            key(
                "backoff_seconds",
                "list of numbers, `[0.1, 0.5, 1, 2, 5]`",
                "Delays before the 1st, 2nd, … restart of a failed task; the last repeats. Each `>= 0`.",
            ),
            key("failure_budget", "integer, `5`", "Failures a task may have before its flow is quarantined. `>= 1`."),
            key(
                "quarantine_backoff_seconds",
                "list of numbers, `[30, 60, 120, 300]`",
                "Lengths of a flow's consecutive quarantines; the last repeats (the cap).",
            ),
            key(
                "healthy_reset_seconds",
                "number, `600`",
                "A run this long counts as healthy: it refills the budget and resets the escalation. `> 0`.",
            ),
            key("jitter_ratio", "number, `0.2`", "Fraction by which a delay may be shortened at random. `0 <= r < 1`."),
            key(
                "stop_grace_seconds",
                "number, `5`",
                "How long a cancelled task may take to stop before it is aborted.",
            ),
        ],
    },
    Table {
        header: "[roles.ROLE]",
        about: "A role's tool policy; `ROLE` must be a role of the roster. No table: every tool. `deny` wins.",
        keys: &[
            key("allow", "list of globs (unset: all)", "Tools the role may call."),
            key("deny", "list of globs, `[]`", "Tools the role may never call."),
        ],
    },
    Table {
        header: "[tools]",
        about: "Classification overrides (globs over tool names) and pinning of the downstream's tool definitions.",
        keys: &[
            key("read_only", "list of globs, `[]`", "Tools classified read-only whatever the downstream says."),
            key("mutating", "list of globs, `[]`", "Tools classified mutating whatever the downstream says (wins)."),
            key(
                "pin",
                "`\"record\"`, `\"enforce\"` or `\"off\"`; `\"record\"`",
                "`record` pins each tool's first definition and reports a change; `enforce` also refuses calls \
                 of a changed tool (`tool_definition_changed`) until `fleetgate tools accept`; `off` neither.",
            ),
        ],
    },
    Table {
        header: "[http]",
        about: "Principals and bounds of `fleetgate serve --transport http`.",
        keys: &[
            key(
                "tokens_file",
                "path (unset)",
                "Lines of `sha256-hex  client-name  [profile…]`; relative to the config file's directory.",
            ),
            key(
                "max_attachments",
                "integer, `64`",
                "Live attachments (each runs a downstream) at most, per process: 1 to 4096.",
            ),
            key(
                "max_attachments_per_principal",
                "integer, `16`",
                "Live attachments one principal may hold: 1 to `max_attachments`; with `replicas`, across \
                 every replica of the member (counted in the store).",
            ),
            key("max_connections", "integer, `512`", "Open connections at most: 1 to 65536."),
            key(
                "header_timeout_seconds",
                "number, `10`",
                "How long a request head may take: more than 0, at most 600.",
            ),
            key("body_timeout_seconds", "number, `30`", "How long a request body may take: more than 0, at most 600."),
            key("oauth", "table (unset)", "The authorization server whose access tokens are accepted."),
        ],
    },
    Table {
        header: "[http.oauth]",
        about: "OAuth 2.1 resource server: RS256/ES256 access tokens of one issuer, checked against its JWKS.",
        keys: &[
            key("issuer", "URL, required", "The issuer (`iss`): `https://`, or `http://` on a loopback host."),
            key(
                "audience",
                "URL, required",
                "This gateway's resource identifier (`aud`), as the RFC 9728 metadata names it.",
            ),
            key(
                "jwks_uri",
                "URL (unset: the issuer's discovery document)",
                "Where the signing keys are; discovered, they must be on the issuer's origin.",
            ),
            key("principal_claim", "string, `\"sub\"`", "The claim that names the caller."),
            key("profiles_claim", "string (unset)", "A claim listing the profiles the caller may attach as."),
            key("leeway_seconds", "integer, `60`", "Clock skew allowed on `exp` and `nbf`: 0 to 300."),
            key(
                "jwks_cooldown_seconds",
                "integer, `30`",
                "An unknown key id refetches the JWKS at most once per this: 0 to 3600.",
            ),
            key("principals", "array of tables (none)", "Subjects mapped to principal names and profiles."),
        ],
    },
    Table {
        header: "[[http.oauth.principals]]",
        about: "One subject of the issuer, mapped.",
        keys: &[
            key("subject", "string, required", "The value of `principal_claim`."),
            key(
                "name",
                "string (unset: `oauth:` and the subject)",
                "The principal's name in the audit and the bounds: not a tokens-file name, not `oauth:…`.",
            ),
            key("profiles", "list of strings, `[]`", "Profiles it may attach as (none: any)."),
        ],
    },
    Table {
        header: "[[rules]]",
        about: "Argument-aware policy, checked before the forge profile's; the first matching rule decides.",
        keys: &[
            key("tool", "string, required (`\"*\"` with `effect`)", "The tool's name, or a glob (`*`, `?`)."),
            key(
                "args",
                "table of JSON pointers (none)",
                "`\"/name\" = [values…]`, `\"present\"` or `\"absent\"`: all must hold for the rule to match.",
            ),
            key(
                "effect",
                "inline table (unset)",
                "What the call does, as the forge dialect states it (the effect the invariants judge; needs \
                 `[fleet] forge`): one operation of the call must be all of `op` (one or a list of `merge`, `push`, \
                 `branch-create`, `branch-delete`, `branch-rename`, `review`, `pr-open`, `pr-edit`, `pr-state`, \
                 `retarget`, `write`, `read`), `branch` (globs of the branch it moves or merges onto, a \
                 retarget's new base), `pr` (numbers), `protected` (`true`: a protected branch). A rule with an \
                 effect names no tool: a call it does not match goes on to the next rules. While what the call \
                 does is not established, a decision that depends on it is `forge_unavailable`.",
            ),
            key("roles", "list of strings, required", "Roles that may make the call (`\"*\"`: any)."),
            key(
                "class",
                "`\"read_only\"` or `\"mutating\"` (unset)",
                "The call's class; unset keeps the next matching rule's.",
            ),
            key(
                "action",
                "string (unset)",
                "A workflow action (`merge`, `review`, `open`, `edit`, `close`, `push`); unset keeps the next matching rule's.",
            ),
            key(
                "decision",
                "`\"allow\"` or `\"ask\"`; `\"allow\"`",
                "`ask`: a permitted role's call waits for an operator's approval of that exact call.",
            ),
            key(
                "approvers",
                "list of strings, `[]` (the `[approvals]` default)",
                "With `decision = \"ask\"`: who may answer its requests — `oidc:<subject>` (signed in to the \
                 dashboard at the fleet's issuer), `os:<user>` (the CLI's user), `token:<name>`, `group:<name>` (a \
                 group the sign-in claims), `person:<name>` (every identity `[[people]]` gives that person); an \
                 identity of a person of `[[people]]` names that person. The requester's own person never answers, \
                 through any channel.",
            ),
            key(
                "approvals_required",
                "integer, `1` (the `[approvals]` default)",
                "With `decision = \"ask\"`: how many distinct people must approve the same exact call (1 to \
                 10: a two-person rule is 2); any denial denies it. One person through two channels is one; a \
                 shared credential (`token:…`, `[approvals] shared`) is none; approvals fleetgate cannot tell \
                 apart are refused. A count the named approvers could never reach is refused at load.",
            ),
        ],
    },
    Table {
        header: "[workflow]",
        about: "The pull-request workflow (with `forge = \"gitea-mcp\"`).",
        keys: &[
            key(
                "lease_ttl_seconds",
                "integer, `600`",
                "A PR lease lives this long past its holder's last gated call on the PR: 1 to 86400.",
            ),
            key(
                "independent_review",
                "`\"principal\"`, `\"session\"`, `\"client\"` or `\"off\"`; `\"principal\"`",
                "Which approvals count: from another principal than the PR's author's and last pusher's (an HTTP \
                 token's or OAuth subject's; without one, another client session), another client session, \
                 another client, or any (`\"off\"` is the invariant lift `independent-review`).",
            ),
            key(
                "forge_command",
                "list of strings, `[]`",
                "How the CLI starts the forge server to read a PR's head (`[\"gitea-mcp\", \"-t\", \"stdio\"]`).",
            ),
            key(
                "default_branch",
                "string, `\"main\"`",
                "Protected even when the forge does not say it is the default.",
            ),
            key("protected_branches", "list of globs, `[]`", "More protected branches."),
            key(
                "protected_paths",
                "list of globs, the workflow directories",
                "Paths no gated call may write (`.gitea/workflows/**`, `.github/workflows/**`, `.forgejo/workflows/**`).",
            ),
            key(
                "decision_lock",
                "boolean, `true`",
                "A reviewer session that decided on a PR decides on no other until that one is merged or closed.",
            ),
            key(
                "issue_lock",
                "boolean, `true`",
                "An author's PR that references an issue another author holds is refused.",
            ),
        ],
    },
    Table {
        header: "[downstream]",
        about: "What the downstream server is given besides the basics (`PATH`, `HOME`, the locale, …), and how \
                many runs of it an HTTP gateway keeps.",
        keys: &[
            key(
                "pass_env",
                "list of strings, `[]`",
                "Names, or `NAME_*` prefixes, outside `env_prefix` to pass on (`HTTPS_PROXY`, `NODE_*`).",
            ),
            key(
                "sharing",
                "`\"session\"` or `\"gateway\"`; `\"session\"`",
                "`session`: each HTTP session (or stateless client) gets a run of its own. `gateway`: one run every \
                 client of the gateway shares, for servers that keep no per-client state (gitea-mcp yes; \
                 server-everything no); a session's per-session requests (`logging/setLevel`, \
                 `resources/subscribe`) are then refused. Over stdio there is one client either way.",
            ),
        ],
    },
    Table {
        header: "[tracing]",
        about: "OpenTelemetry export of the spans (the `OTEL_EXPORTER_OTLP_*` environment wins).",
        keys: &[key(
            "otlp_endpoint",
            "URL (unset)",
            "A base URL, `http://HOST[:PORT][/PATH]`; `/v1/traces` is appended.",
        )],
    },
    Table {
        header: "[metrics]",
        about: "A stdio gateway's own `GET /metrics` listener (`--metrics-listen` wins).",
        keys: &[
            key("listen", "address (unset)", "`ip:port`; port 0 picks one."),
            key(
                "allow_remote",
                "boolean, `false`",
                "Allow a non-loopback `listen` (then `FLEETGATE_METRICS_TOKEN` is required).",
            ),
        ],
    },
    Table {
        header: "[audit]",
        about: "What each judged call's audit entry keeps.",
        keys: &[key(
            "arguments",
            "`\"full\"`, `\"digest\"` or `\"off\"`; `\"full\"`",
            "The call's arguments, only their digest, or neither.",
        )],
    },
    Table {
        header: "[approvals]",
        about: "Operator approval of one exact call.",
        keys: &[
            key("wait_seconds", "integer, `120`", "How long the gateway holds an asked call for an answer: 0 to 3600."),
            key("ttl_seconds", "integer, `600`", "How long an approval covers the identical call, once: 1 to 86400."),
            key(
                "may_override",
                "list of blocker literals, `[]`",
                "Refusals an operator may override, one exact call at a time; an approved override replaces that \
                 blocker only, every other condition is still judged. Never `ambiguous_arguments`, \
                 `protected_branch`, `invariant_violated`, `forge_unavailable`, `worker_fenced`, `store_replaced`, \
                 `audit_unavailable` or the approval blockers.",
            ),
            key(
                "approvers",
                "list of strings, `[]` (any operator)",
                "Who may answer a request whose rule names none (and every override's): as `[[rules]] approvers`.",
            ),
            key(
                "approvals_required",
                "integer, `1`",
                "How many distinct people a request whose rule says nothing needs (1 to 10).",
            ),
            key(
                "shared",
                "list of identities, `[]`",
                "Identities several people use (an OS account such as `os:root`): never a person — never counted \
                 toward `approvals_required` above 1, and never told apart from a requester. Every `token:` is one \
                 already.",
            ),
            key("notify", "array of tables, `[]`", "The notification targets: `[[approvals.notify]]`, below."),
        ],
    },
    Table {
        header: "[[people]]",
        about: "One person and every identity they reach fleetgate by, so every check that says \"a person\" — the \
                requester never answers their own request, `approvals_required` counts people — sees one person \
                through every channel. An identity is under at most one person; a token or a `shared` identity \
                under none. Without an entry, fleetgate tells two parties apart only by one realm they both have \
                an identity in (a sign-in at the fleet's issuer, its OAuth principal claim, an OS user), and \
                otherwise refuses the approval (fail closed).",
        keys: &[
            key("name", "string, required", "The person's name (`person:<name>` in an `approvers` list)."),
            key(
                "identities",
                "list of identities, required",
                "`oidc:<subject>` (a dashboard sign-in), `oauth:<principal claim value>` (an OAuth token's calls), \
                 `os:<user>` (the CLI), `principal:<name>` (a tokens-file principal, or a name \
                 `[[http.oauth.principals]]` gives).",
            ),
        ],
    },
    Table {
        header: "[[approvals.notify]]",
        about: "Where each approval event is sent — a request, an answer, a use, a withdrawal, an expiry — \
                by `fleetgate serve` and `fleetgate dashboard` from the store's record of them, never by the gate: \
                a target that hangs or fails changes no decision. Retried with backoff; failures are counted \
                (`fleetgate_notify_deliveries_total`) and logged. Secrets come from the environment or a file.",
        keys: &[
            key(
                "kind",
                "`\"webhook\"`, `\"slack\"` or `\"ntfy\"` (required)",
                "`webhook`: a JSON body (`event`, `at`, `request` as `approvals list --json` shows it), signed \
                 `X-Fleetgate-Signature: sha256=<hex HMAC-SHA256 of the body>` when a secret is set; `slack`: a \
                 Slack-compatible incoming webhook (`{\"text\": …}`); `ntfy`: an ntfy topic URL (plain text, \
                 `Title` and `Tags` headers).",
            ),
            key("url", "string", "The target's URL, when it is no secret (http:// or https://)."),
            key("url_env", "string", "The environment key holding the URL (a Slack webhook URL is a credential)."),
            key("url_file", "path", "The file holding the URL."),
            key("secret_env", "string", "`webhook`: the environment key holding the signing key."),
            key("secret_file", "path", "`webhook`: the file holding the signing key."),
            key(
                "events",
                "list of strings, every one",
                "The events sent: `requested`, `answered`, `used`, `withdrawn`, `expired`.",
            ),
            key("name", "string, `<kind>-<n>`", "The target's name in metrics and logs."),
        ],
    },
    Table {
        header: "[shadow]",
        about: "A candidate roster in shadow: every live decision is also judged by its rules and invariants, never \
                enforced; each call it would decide otherwise is audited beside the real decision and counted \
                (`fleetgate_shadow_flips_total`); `fleetgate rules shadow-report` groups them.",
        keys: &[key(
            "config",
            "path (unset)",
            "The candidate's `fleet.toml` (a relative path is from the working directory); `fleetgate serve \
             --shadow FILE` wins.",
        )],
    },
    Table {
        header: "[retention]",
        about: "How long history is kept: what `fleetgate prune` deletes (its flags win over these), and, with \
                `every`, `serve` and `dashboard` by themselves. Ages are a whole number and s, m, h, d or w; unset \
                keeps that history for ever. Nothing still referenced is pruned: a pending approval, an event a \
                notification target has not delivered, a PR with a claimed lease, a live lock, a record since the \
                cutoff or not closed on the forge, a push that is still its branch's tip.",
        keys: &[
            key("audit", "age (unset)", "Audit entries older than this, at least `1d`."),
            key(
                "approvals",
                "age (unset)",
                "Approval requests answered, used, withdrawn or expired longer ago than this, and their delivered \
                 events; at least `1d` (past any approval's TTL).",
            ),
            key(
                "workflow",
                "age (unset)",
                "A PR's records (decisions, origin, leases, locks) when none is newer than this and the forge says \
                 the PR is merged or closed; pushes older than this whose branch's tip has moved on. Needs the \
                 forge (`[workflow] forge_command`); at least `1d`.",
            ),
            key(
                "observations",
                "age (unset)",
                "Host observations of hosts not heard from for this long, at least `1d`.",
            ),
            key("workers", "age (unset)", "Stopped or expired worker rows silent for this long (as `worker prune`)."),
            key("runtimes", "age (unset)", "Stopped runtime rows silent for this long (as `runtime prune`)."),
            key(
                "every",
                "age (unset)",
                "Prune this often from `fleetgate serve` and `fleetgate dashboard` (the first ten seconds after start), \
                 at least `1m`; unset: only `fleetgate prune` prunes.",
            ),
        ],
    },
    Table {
        header: "[invariants]",
        about: "What breaks the guarantee whoever does it is judged for every call by what it does to the forge, \
                below every rule and override (the book's policy chapter). Only with `[fleet] forge`.",
        keys: &[key(
            "lift",
            "list of invariant names, `[]`",
            "The invariants lifted, each named: `protected-branch`, `protected-path`, `forced-merge`, \
             `scheduled-merge`, `unpinned-merge`, `retarget`, `pr-state`, `issue-state`, `reader-writes`, \
             `unknown-effect`, `independent-review` (also lifted by `[workflow] independent_review = \"off\"`). Every call a lift \
             lets through says so in its audit entry; `doctor`, `rules diff`, the dashboard and the start-up log \
             name every lift.",
        )],
    },
    Table {
        header: "[forge]",
        about: "What the forge instance itself reads in the texts a call lands (commit messages, a PR's title, body \
                and comments, a merge's message): the gate reads them with the forge's grammar, and closes the gaps \
                an instance's own settings open. Copy your Gitea `app.ini`'s `[repository.pull-request]` lists \
                here. Only with `[fleet] forge = \"gitea-mcp\"`: GitHub's closing keywords are fixed, and a \
                roster that sets these keys under `github-mcp` (or no forge) is refused at load.",
        keys: &[
            key(
                "close_keywords",
                "list of words, `[]`",
                "Your instance's `CLOSE_KEYWORDS` (e.g. a translation: `[\"schließt\", \"behebt\"]`): a text \
                 with one of them before an issue's reference is stated as closing it, and judged (`issue-state`, \
                 the issue lock) like Gitea's own `fixes`. Read besides Gitea's defaults (which the instance's \
                 list replaces: the gate can only find more than the forge acts on), in any case. Each entry a \
                 word of letters only: one with anything else (`fix-it`, `close it`, an empty one) is refused \
                 at load, naming it — Gitea ignores such a word, and the gate does not guess how one is read.",
            ),
            key(
                "reopen_keywords",
                "list of words, `[]`",
                "Your instance's `REOPEN_KEYWORDS`, read the same way as reopening; a word in both lists is refused.",
            ),
        ],
    },
];

/// The reference page, as Markdown.
pub fn render() -> String {
    let mut out = String::from(
        "# Configuration keys\n\nEvery key of `fleet.toml` (`--config FILE`; default \
         `$XDG_CONFIG_HOME/fleetgate/fleet.toml`, else the built-in five-member roster). `fleetgate init` \
         writes a commented first file.\n",
    );
    for table in TABLES {
        let title = if table.header.is_empty() { "The top level".to_owned() } else { format!("`{}`", table.header) };
        let _ = write!(
            out,
            "\n## {title}\n\n{}\n\n| Key | Type and default | Meaning |\n| --- | --- | --- |\n",
            table.about
        );
        for k in table.keys {
            let _ = writeln!(out, "| `{}` | {} | {} |", k.name, k.default, k.meaning);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys the parser accepts in a table, read from its own "unknown field" error.
    fn accepted(header: &str) -> Vec<String> {
        let header = header.replace("ROLE", "author");
        let text = format!("{header}\nzz_not_a_key = 1\n");
        let err = crate::FleetConfig::parse(&text, "probe.toml").expect_err("an unknown key is refused");
        let msg = err.to_string();
        let Some((_, list)) = msg.split_once("expected ") else { panic!("{header}: {msg}") };
        // "expected `a`", "expected `a` or `b`", "expected one of `a`, `b`, `c`": the quoted words.
        list.split('`').skip(1).step_by(2).map(str::to_owned).collect()
    }

    #[test]
    fn every_table_documents_exactly_the_keys_the_parser_accepts() {
        for table in TABLES {
            let mut want = accepted(table.header);
            want.sort();
            let mut have: Vec<String> = table.keys.iter().map(|k| k.name.to_owned()).collect();
            have.sort();
            assert_eq!(have, want, "{:?}: documented keys vs the parser's", table.header);
        }
    }

    #[test]
    fn the_page_lists_every_key() {
        let page = render();
        for table in TABLES {
            for k in table.keys {
                assert!(page.contains(&format!("| `{}` |", k.name)), "{}", k.name);
            }
        }
    }
}
