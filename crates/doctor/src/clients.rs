//! The six clients the doctor knows: their names, the identity each one's
//! servers should carry, and where each keeps its MCP configuration.
//!
//! Every location and key below is the client's documented one; the source is
//! cited beside it. Locations are derived from a [`Layout`] (home, config
//! directory, Codex home, project), never from the process environment, so
//! they are a pure function of their inputs.

use fleetgate_core::env::{EnvKey, EnvSnapshot};
use std::path::{Path, PathBuf};

/// A supported client application.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Client {
    /// Claude Code (the CLI).
    ClaudeCode,
    /// Claude Desktop.
    ClaudeDesktop,
    /// Gemini CLI.
    Gemini,
    /// OpenAI Codex CLI.
    Codex,
    /// Cursor.
    Cursor,
    /// Visual Studio Code.
    Vscode,
}

impl Client {
    /// Every client, in report order.
    pub const ALL: [Client; 6] =
        [Client::ClaudeCode, Client::ClaudeDesktop, Client::Gemini, Client::Codex, Client::Cursor, Client::Vscode];

    /// The name `--client` takes and reports show.
    pub fn name(self) -> &'static str {
        match self {
            Client::ClaudeCode => "claude-code",
            Client::ClaudeDesktop => "claude-desktop",
            Client::Gemini => "gemini",
            Client::Codex => "codex",
            Client::Cursor => "cursor",
            Client::Vscode => "vscode",
        }
    }

    /// The value the doctor writes into `<PREFIX>MCP_CLIENT` for this client's
    /// servers. It is compared normalised (`normalize_client_name`), so
    /// `claude_desktop` and `claude_code` are one application, as the registry
    /// has it.
    pub fn identity(self) -> &'static str {
        match self {
            Client::ClaudeCode => "claude_code",
            Client::ClaudeDesktop => "claude_desktop",
            Client::Gemini => "gemini",
            Client::Codex => "codex",
            Client::Cursor => "cursor",
            Client::Vscode => "vscode",
        }
    }

    /// Parse a `--client` value: case, `-` and `_` are folded.
    pub fn parse(raw: &str) -> Option<Client> {
        let folded: String =
            raw.trim().chars().filter(|c| !matches!(c, '-' | '_' | ' ')).map(|c| c.to_ascii_lowercase()).collect();
        match folded.as_str() {
            "claudecode" | "claude" => Some(Client::ClaudeCode),
            "claudedesktop" => Some(Client::ClaudeDesktop),
            "gemini" | "geminicli" => Some(Client::Gemini),
            "codex" | "codexcli" => Some(Client::Codex),
            "cursor" => Some(Client::Cursor),
            "vscode" | "code" => Some(Client::Vscode),
            _ => None,
        }
    }

    /// The key of the servers object in this client's files.
    pub fn servers_key(self) -> &'static str {
        match self {
            Client::Codex => "mcp_servers",
            Client::Vscode => "servers",
            _ => "mcpServers",
        }
    }

    /// Whether a server entry of this client spells out `"type": "stdio"`
    /// (VS Code requires it; the others infer it from `command`).
    pub fn wants_stdio_type(self) -> bool {
        self == Client::Vscode
    }
}

/// How a file is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// JSON, in the dialect the client itself accepts.
    Json {
        /// `//` and `/* */` comments.
        comments: bool,
        /// A comma before `}` or `]`.
        trailing_commas: bool,
    },
    /// TOML.
    Toml,
}

/// Strict JSON: what `JSON.parse` accepts.
const STRICT: Format = Format::Json { comments: false, trailing_commas: false };
/// JSON with comments stripped before `JSON.parse` (no trailing commas).
const COMMENTS: Format = Format::Json { comments: true, trailing_commas: false };
/// VS Code's JSONC: comments and trailing commas.
const JSONC: Format = Format::Json { comments: true, trailing_commas: true };

/// Where in a file a client keeps servers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SectionSpec {
    /// A fixed key path to the servers object.
    Key {
        /// The key path (`["mcpServers"]`).
        path: Vec<String>,
        /// `user`, `project`, …
        scope: &'static str,
    },
    /// Claude Code's local scope: `projects.<project path>.mcpServers` in
    /// `~/.claude.json`, the project key matched to this project.
    ClaudeProject {
        /// The project directory.
        project: PathBuf,
    },
}

/// One configuration file a client reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFile {
    /// Whose file it is.
    pub client: Client,
    /// Where it is.
    pub path: PathBuf,
    /// How it is written.
    pub format: Format,
    /// Where its servers are.
    pub sections: Vec<SectionSpec>,
}

/// The directories locations are derived from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The user's home (`--home`, else `HOME`).
    pub home: PathBuf,
    /// The user's config directory (`XDG_CONFIG_HOME`, else `~/.config`).
    pub config_dir: PathBuf,
    /// Codex's home (`CODEX_HOME`, else `~/.codex`).
    pub codex_home: PathBuf,
    /// The project (`--project`, else the current directory).
    pub project: PathBuf,
    /// Whether desktop applications keep their files under
    /// `~/Library/Application Support` (macOS) rather than the config directory.
    pub macos: bool,
}

impl Layout {
    /// From the flags and the environment. `--home DIR` stands for the whole
    /// user environment: with it, `XDG_CONFIG_HOME` and `CODEX_HOME` are not
    /// consulted, so a tree under DIR is read exactly as laid out.
    pub fn resolve(home: Option<&Path>, project: &Path, env: &EnvSnapshot) -> Result<Self, NoHome> {
        let absolute = |key: EnvKey| env.get(key, "").map(PathBuf::from).filter(|p| p.is_absolute());
        let (home, config_dir, codex_home) = match home {
            Some(dir) => (dir.to_owned(), dir.join(".config"), dir.join(".codex")),
            None => {
                let home = absolute(EnvKey::Home).ok_or(NoHome)?;
                let config = absolute(EnvKey::XdgConfigHome).unwrap_or_else(|| home.join(".config"));
                let codex = absolute(EnvKey::CodexHome).unwrap_or_else(|| home.join(".codex"));
                (home, config, codex)
            }
        };
        Ok(Self { home, config_dir, codex_home, project: project.to_owned(), macos: cfg!(target_os = "macos") })
    }

    /// Where desktop applications keep their per-user files.
    fn app_dir(&self) -> PathBuf {
        if self.macos { self.home.join("Library/Application Support") } else { self.config_dir.clone() }
    }
}

/// No home directory to read the user's files under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no home directory: set HOME or pass --home DIR")]
pub struct NoHome;

impl SourceFile {
    /// Whether the file is the project's (every section `project` or `workspace` scope): it is
    /// read and written only where it resolves inside the project.
    pub fn in_project(&self) -> bool {
        self.sections.iter().all(|s| matches!(s, SectionSpec::Key { scope: "project" | "workspace", .. }))
    }
}

fn key(path: &[&str], scope: &'static str) -> SectionSpec {
    SectionSpec::Key { path: path.iter().map(|s| (*s).to_owned()).collect(), scope }
}

fn file(client: Client, path: PathBuf, format: Format, sections: Vec<SectionSpec>) -> SourceFile {
    SourceFile { client, path, format, sections }
}

/// Every file `client` reads, user files first. A path that two scopes share
/// (the project is the home directory) is listed once.
pub fn locations(client: Client, l: &Layout) -> Vec<SourceFile> {
    let (home, project) = (&l.home, &l.project);
    let servers = client.servers_key();
    let mut files = match client {
        // Claude Code docs, "MCP installation scopes": user scope is the
        // top-level `mcpServers` of ~/.claude.json, local scope is
        // `projects.<path>.mcpServers` in the same file, project scope is
        // `.mcp.json` at the project root. Strict JSON: Claude Code rejects
        // comments in its JSON files (anthropics/claude-code#83190).
        Client::ClaudeCode => vec![
            file(
                client,
                home.join(".claude.json"),
                STRICT,
                vec![key(&[servers], "user"), SectionSpec::ClaudeProject { project: project.clone() }],
            ),
            file(client, project.join(".mcp.json"), STRICT, vec![key(&[servers], "project")]),
        ],
        // Claude Desktop: `claude_desktop_config.json`, `mcpServers`, under
        // ~/Library/Application Support/Claude on macOS and the XDG config
        // directory (~/.config/Claude) on Linux.
        Client::ClaudeDesktop => {
            vec![file(
                client,
                l.app_dir().join("Claude/claude_desktop_config.json"),
                STRICT,
                vec![key(&[servers], "user")],
            )]
        }
        // Gemini CLI docs, "Configuration" and "MCP servers with Gemini CLI":
        // ~/.gemini/settings.json and the project's .gemini/settings.json,
        // key `mcpServers`; comments are stripped before parsing
        // (google-gemini/gemini-cli#422), trailing commas are not.
        Client::Gemini => vec![
            file(client, home.join(".gemini/settings.json"), COMMENTS, vec![key(&[servers], "user")]),
            file(client, project.join(".gemini/settings.json"), COMMENTS, vec![key(&[servers], "project")]),
        ],
        // Codex CLI docs, "Model Context Protocol": `[mcp_servers.<name>]`
        // tables (`command`, `args`, `env`) in $CODEX_HOME/config.toml
        // (~/.codex), and in a trusted project's .codex/config.toml.
        Client::Codex => vec![
            file(client, l.codex_home.join("config.toml"), Format::Toml, vec![key(&[servers], "user")]),
            file(client, project.join(".codex/config.toml"), Format::Toml, vec![key(&[servers], "project")]),
        ],
        // Cursor docs, "Model Context Protocol": ~/.cursor/mcp.json (global)
        // and .cursor/mcp.json (project), key `mcpServers`, merged. Comments
        // are accepted; a trailing comma is not (upstash/context7#563).
        Client::Cursor => vec![
            file(client, home.join(".cursor/mcp.json"), COMMENTS, vec![key(&[servers], "user")]),
            file(client, project.join(".cursor/mcp.json"), COMMENTS, vec![key(&[servers], "project")]),
        ],
        // VS Code docs, "MCP configuration reference": `mcp.json` in the user
        // profile (Code/User) and the workspace's .vscode/mcp.json, top-level
        // `servers`, stdio entries with `"type": "stdio"`; JSON with comments
        // and trailing commas, like every VS Code settings file.
        Client::Vscode => vec![
            file(client, l.app_dir().join("Code/User/mcp.json"), JSONC, vec![key(&[servers], "user")]),
            file(client, project.join(".vscode/mcp.json"), JSONC, vec![key(&[servers], "workspace")]),
        ],
    };
    let mut seen = std::collections::BTreeSet::new();
    files.retain(|f| seen.insert(f.path.clone()));
    files
}

/// A Linux layout with home `/h` and project `/p`, for unit tests.
#[cfg(test)]
pub(crate) fn test_layout() -> Layout {
    Layout {
        home: "/h".into(),
        config_dir: "/h/.config".into(),
        codex_home: "/h/.codex".into(),
        project: "/p".into(),
        macos: false,
    }
}

/// The first file of `client` under [`test_layout`].
#[cfg(test)]
pub(crate) fn test_source(client: Client) -> SourceFile {
    locations(client, &test_layout()).remove(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        test_layout()
    }

    #[test]
    fn names_round_trip_and_aliases_fold() {
        for c in Client::ALL {
            assert_eq!(Client::parse(c.name()), Some(c));
        }
        assert_eq!(Client::parse("Claude_Code"), Some(Client::ClaudeCode));
        assert_eq!(Client::parse("VS-Code"), Some(Client::Vscode));
        assert_eq!(Client::parse("notepad"), None);
    }

    #[test]
    fn every_documented_location() {
        let paths: Vec<String> =
            Client::ALL.iter().flat_map(|c| locations(*c, &layout())).map(|f| f.path.display().to_string()).collect();
        assert_eq!(
            paths,
            [
                "/h/.claude.json",
                "/p/.mcp.json",
                "/h/.config/Claude/claude_desktop_config.json",
                "/h/.gemini/settings.json",
                "/p/.gemini/settings.json",
                "/h/.codex/config.toml",
                "/p/.codex/config.toml",
                "/h/.cursor/mcp.json",
                "/p/.cursor/mcp.json",
                "/h/.config/Code/User/mcp.json",
                "/p/.vscode/mcp.json",
            ]
        );
        let mac = Layout { macos: true, ..layout() };
        assert_eq!(
            locations(Client::ClaudeDesktop, &mac)[0].path,
            Path::new("/h/Library/Application Support/Claude/claude_desktop_config.json")
        );
    }

    #[test]
    fn a_project_at_home_lists_a_shared_file_once() {
        let l = Layout { project: "/h".into(), ..layout() };
        assert_eq!(locations(Client::Gemini, &l).len(), 1);
    }

    #[test]
    fn home_flag_ignores_xdg_and_codex_home() {
        let env = EnvSnapshot::from_pairs([("HOME", "/real"), ("XDG_CONFIG_HOME", "/xdg"), ("CODEX_HOME", "/cx")]);
        let l = Layout::resolve(Some(Path::new("/t")), Path::new("/p"), &env).unwrap();
        assert_eq!((l.config_dir.as_path(), l.codex_home.as_path()), (Path::new("/t/.config"), Path::new("/t/.codex")));
        let l = Layout::resolve(None, Path::new("/p"), &env).unwrap();
        assert_eq!((l.config_dir.as_path(), l.codex_home.as_path()), (Path::new("/xdg"), Path::new("/cx")));
        assert!(Layout::resolve(None, Path::new("/p"), &EnvSnapshot::default()).is_err());
    }
}
