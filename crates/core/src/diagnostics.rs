//! Runtime diagnostics: the two hard families that stop mutations fleet-wide, as a typed
//! [`Diagnostic`] whose text is the seed's literal. Declared beside the code that produces
//! them, so no preflight can know one family and not the other.

use crate::env::{EnvSnapshot, UnsupportedOverride, unconsumed_env_overrides};

/// A peer runs with environment overrides the program does not understand.
pub const UNSUPPORTED_ENV: &str = "unsupported-env:";
/// A server runs a revision other than its repository's current head.
pub const STALE_RUNTIME: &str = "stale-runtime:";
/// Every hard family. A diagnostic starting with one of these refuses every
/// mutating call identically, whatever path asks.
pub const RUNTIME_DIAGNOSTIC_HARD_PREFIXES: &[&str] = &[UNSUPPORTED_ENV, STALE_RUNTIME];

/// Is this diagnostic hard?
pub fn is_hard(diagnostic: &str) -> bool {
    RUNTIME_DIAGNOSTIC_HARD_PREFIXES.iter().any(|p| diagnostic.starts_with(p))
}

/// The `unsupported-env:` message for `overrides` (values already masked).
pub fn unsupported_env_message(prefix: &str, overrides: &[UnsupportedOverride]) -> String {
    // Key names only: a value may be a secret whatever its key is called (`GITEA_PAT=ghp_…`).
    let listed: Vec<&str> = overrides.iter().map(|o| o.key.as_str()).collect();
    format!(
        "{UNSUPPORTED_ENV} Unsupported {prefix}* environment variable override(s) detected: {}. Unknown env overrides are unsupported.",
        listed.join(", ")
    )
}

/// One runtime diagnostic, typed; its `Display` (and its JSON form) is the literal the
/// seed's consumers read, starting with its family.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Diagnostic {
    /// A peer runs with overrides the program does not understand.
    UnsupportedEnv {
        /// The peer.
        pid: i64,
        /// The fleet's env prefix.
        prefix: String,
        /// The keys, values masked where they look secret.
        overrides: Vec<UnsupportedOverride>,
    },
    /// A peer's environment cannot be read: unknown overrides cannot be ruled out.
    UnreadableEnv {
        /// The peer.
        pid: i64,
        /// The fleet's env prefix.
        prefix: String,
        /// Why.
        why: String,
    },
    /// A server runs another revision than its checkout's current head.
    StaleRuntime {
        /// Its namespace.
        namespace: String,
        /// Its pid.
        pid: i64,
        /// The revision it started at.
        startup_head: String,
        /// Its checkout's head now.
        current_head: String,
    },
    /// A server's checkout cannot be read, so it cannot be shown to be current.
    UnknownHead {
        /// The checkout.
        root: String,
        /// Its namespace.
        namespace: String,
        /// Its pid.
        pid: i64,
        /// Why.
        why: String,
    },
    /// A diagnostic reported as text (by a peer, a test): hard when it starts with a hard
    /// family's prefix.
    Reported(String),
}

impl Diagnostic {
    /// Whether it refuses every mutating call.
    pub fn is_hard(&self) -> bool {
        match self {
            Self::Reported(text) => is_hard(text),
            _ => true,
        }
    }
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnsupportedEnv { pid, prefix, overrides } => {
                write!(f, "{} (pid {pid})", unsupported_env_message(prefix, overrides))
            }
            Self::UnreadableEnv { pid, prefix, why } => write!(
                f,
                "{UNSUPPORTED_ENV} the environment of pid {pid} cannot be read ({why}), so unknown {prefix}* overrides cannot be ruled out."
            ),
            Self::StaleRuntime { namespace, pid, startup_head, current_head } => write!(
                f,
                "{STALE_RUNTIME} {namespace} (pid {pid}) started at revision {startup_head}, the repository is now at {current_head}."
            ),
            Self::UnknownHead { root, namespace, pid, why } => write!(
                f,
                "{STALE_RUNTIME} the current revision of {root} cannot be read ({why}), so {namespace} (pid {pid}) cannot be shown to be current."
            ),
            Self::Reported(text) => f.write_str(text),
        }
    }
}

impl serde::Serialize for Diagnostic {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl From<&str> for Diagnostic {
    fn from(text: &str) -> Self {
        Self::Reported(text.to_owned())
    }
}

impl From<String> for Diagnostic {
    fn from(text: String) -> Self {
        Self::Reported(text)
    }
}

/// What one peer's environment says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerEnv {
    /// Read; these keys are unsupported (possibly none).
    Read(EnvSnapshot),
    /// Could not be read: unknown, which fails closed.
    Unreadable(String),
}

/// The diagnostic of one peer, if any: unsupported keys, or an environment
/// that cannot be read (unknown is never healthy).
pub fn peer_env_diagnostic(pid: i64, env: &PeerEnv, prefix: &str, pass_through: &[String]) -> Option<Diagnostic> {
    match env {
        PeerEnv::Read(snapshot) => {
            let overrides = unconsumed_env_overrides(snapshot, prefix, pass_through);
            (!overrides.is_empty()).then(|| Diagnostic::UnsupportedEnv { pid, prefix: prefix.to_owned(), overrides })
        }
        PeerEnv::Unreadable(why) => {
            Some(Diagnostic::UnreadableEnv { pid, prefix: prefix.to_owned(), why: why.clone() })
        }
    }
}

/// The `stale-runtime:` diagnostic of one server, if its revisions differ.
pub fn stale_runtime_diagnostic(
    namespace: &str,
    pid: i64,
    startup_head: &str,
    current_head: &str,
) -> Option<Diagnostic> {
    (startup_head != current_head).then(|| Diagnostic::StaleRuntime {
        namespace: namespace.to_owned(),
        pid,
        startup_head: startup_head.to_owned(),
        current_head: current_head.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_families_are_hard_and_the_seed_message_is_recognised() {
        assert!(RUNTIME_DIAGNOSTIC_HARD_PREFIXES.contains(&"stale-runtime:"));
        assert!(RUNTIME_DIAGNOSTIC_HARD_PREFIXES.contains(&"unsupported-env:"));
        let seed = "unsupported-env: Unsupported GITEA_* environment variable override(s) detected: GITEA_INVENTED=1. Unknown env overrides are unsupported.";
        assert!(is_hard(seed));
        let ours = unsupported_env_message(
            "GITEA_",
            &[UnsupportedOverride { key: "GITEA_INVENTED".into(), value: "1".into() }],
        );
        // The seed printed `KEY=value`; values are never shown now (a value may be a secret
        // under any key name), and the message keeps the seed's family and wording.
        assert_eq!(ours, seed.replace("GITEA_INVENTED=1", "GITEA_INVENTED"));
        assert!(is_hard(&ours));
        assert!(!is_hard("note: something"));
    }

    #[test]
    fn peers_report_unknown_keys_masked_and_unreadable_envs_fail_closed() {
        // A secret under a key that does not look secret is not shown either.
        let env = EnvSnapshot::from_pairs([
            ("GITEA_SECRET_TOKEN", "hunter2"),
            ("GITEA_PAT", "ghp_abcdef"),
            ("GITEA_MCP_CLIENT", "codex"),
        ]);
        let d = peer_env_diagnostic(7, &PeerEnv::Read(env), "GITEA_", &[]).unwrap().to_string();
        assert!(d.contains("GITEA_SECRET_TOKEN") && d.contains("GITEA_PAT") && d.contains("pid 7"), "{d}");
        assert!(!d.contains("hunter2") && !d.contains("ghp_") && !d.contains('='), "key names only: {d}");
        let clean = EnvSnapshot::from_pairs([("GITEA_MCP_CLIENT", "codex"), ("PATH", "/bin")]);
        assert_eq!(peer_env_diagnostic(7, &PeerEnv::Read(clean), "GITEA_", &[]), None);
        let d = peer_env_diagnostic(8, &PeerEnv::Unreadable("permission denied".into()), "GITEA_", &[]).unwrap();
        assert!(d.is_hard() && is_hard(&d.to_string()) && d.to_string().contains("pid 8"));
    }

    #[test]
    fn stale_runtime_names_both_revisions() {
        let d = stale_runtime_diagnostic("gitea-author", 4711, "aaa", "bbb").unwrap().to_string();
        assert!(is_hard(&d) && d.contains("aaa") && d.contains("bbb"));
        assert_eq!(stale_runtime_diagnostic("n", 1, "aaa", "aaa"), None);
    }
}
