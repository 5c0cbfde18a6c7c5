//! The `Examples:` of the main commands' `--help`. `it::book` parses every one of them with
//! the real CLI, as it does the book's, so an example never names a flag that is gone.

/// `fleetgate serve --help`.
pub const SERVE: &str = "Examples:
  fleetgate serve --profile prgs-author -- gitea-mcp -t stdio
  fleetgate serve --profile prgs-author --metrics-listen 127.0.0.1:9464 -- gitea-mcp -t stdio
  fleetgate serve --profile prgs-author --transport http --listen 127.0.0.1:8750 -- gitea-mcp -t stdio
  fleetgate serve --profile prgs-author -- github-mcp-server stdio       # [fleet] forge = \"github-mcp\"";

/// `fleetgate dashboard --help`.
pub const DASHBOARD: &str = "Examples:
  fleetgate dashboard                          # http://127.0.0.1:8760/
  fleetgate dashboard --listen 127.0.0.1:0     # any free port (printed on stderr)";

/// `fleetgate init --help`.
pub const INIT: &str = "Examples:
  fleetgate init --forge gitea-mcp
  fleetgate init --forge github-mcp
  fleetgate init --client claude-code --client codex           # and show the doctor's repair
  fleetgate init --client claude-code --client codex --apply   # and write it
  fleetgate init --config ./fleet.toml --remote upstream --force";

/// `fleetgate inventory --help`.
pub const INVENTORY: &str = "Examples:
  fleetgate inventory
  fleetgate inventory --json";

/// `fleetgate capability --help`.
pub const CAPABILITY: &str = r#"Examples:
  fleetgate capability --profile prgs-author --tool create_branch
  fleetgate capability --profile prgs-merger --tool pull_request_write --args '{"method":"merge","owner":"acme","repo":"tools","index":7}'"#;

/// `fleetgate approvals --help`.
pub const APPROVALS: &str = "Examples:
  fleetgate approvals list
  fleetgate approvals approve apr-0123456789abcdef --reason 'release 1.4, checked by hand'
  fleetgate approvals deny apr-0123456789abcdef --reason 'not this week'";

/// `fleetgate prune --help`.
pub const PRUNE: &str = "Examples:
  fleetgate prune                                   # by the roster's [retention]
  fleetgate prune --audit 180d --approvals 30d --workflow 90d --json";

/// `fleetgate rules --help`.
pub const RULES: &str = "Examples:
  fleetgate --config new.toml rules test --since 2026-12-01T00:00:00Z
  fleetgate rules diff fleet.toml new.toml";

/// `fleetgate audit --help`.
pub const AUDIT: &str = "Examples:
  fleetgate audit --limit 20
  fleetgate audit --since 2026-12-01T00:00:00Z --json";

/// `fleetgate doctor --help`.
pub const DOCTOR: &str = "Examples:
  fleetgate doctor
  fleetgate doctor --fix
  fleetgate doctor --fix --apply --client claude-code
  fleetgate doctor --snippet --client codex -- gitea-mcp -t stdio
  fleetgate doctor --snippet --client codex -- github-mcp-server stdio";

/// `fleetgate pr --help`.
pub const PR: &str = "Examples:
  fleetgate pr list
  fleetgate pr show 7
  fleetgate pr release --stale";

/// `fleetgate tools --help`.
pub const TOOLS: &str = "Examples:
  fleetgate tools list
  fleetgate tools accept pull_request_write";
