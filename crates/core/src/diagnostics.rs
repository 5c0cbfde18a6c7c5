//! Runtime diagnostics: the two hard families that stop mutations fleet-wide.
//! Declared beside the code that produces them, so no preflight can know one
//! family and not the other.

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
    let listed: Vec<String> = overrides.iter().map(|o| format!("{}={}", o.key, o.value)).collect();
    format!(
        "{UNSUPPORTED_ENV} Unsupported {prefix}* environment variable override(s) detected: {}. Unknown env overrides are unsupported.",
        listed.join(", ")
    )
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
pub fn peer_env_diagnostic(pid: i64, env: &PeerEnv, prefix: &str, pass_through: &[String]) -> Option<String> {
    match env {
        PeerEnv::Read(snapshot) => {
            let found = unconsumed_env_overrides(snapshot, prefix, pass_through);
            (!found.is_empty()).then(|| format!("{} (pid {pid})", unsupported_env_message(prefix, &found)))
        }
        PeerEnv::Unreadable(why) => Some(format!(
            "{UNSUPPORTED_ENV} the environment of pid {pid} cannot be read ({why}), so unknown {prefix}* overrides cannot be ruled out."
        )),
    }
}

/// The `stale-runtime:` diagnostic of one server, if its revisions differ.
pub fn stale_runtime_diagnostic(namespace: &str, pid: i64, startup_head: &str, current_head: &str) -> Option<String> {
    (startup_head != current_head).then(|| {
        format!(
            "{STALE_RUNTIME} {namespace} (pid {pid}) started at revision {startup_head}, the repository is now at {current_head}."
        )
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
        assert_eq!(ours, seed);
        assert!(!is_hard("note: something"));
    }

    #[test]
    fn peers_report_unknown_keys_masked_and_unreadable_envs_fail_closed() {
        let env = EnvSnapshot::from_pairs([("GITEA_SECRET_TOKEN", "hunter2"), ("GITEA_MCP_CLIENT", "codex")]);
        let d = peer_env_diagnostic(7, &PeerEnv::Read(env), "GITEA_", &[]).unwrap();
        assert!(d.contains("GITEA_SECRET_TOKEN=***") && !d.contains("hunter2") && d.contains("pid 7"), "{d}");
        let clean = EnvSnapshot::from_pairs([("GITEA_MCP_CLIENT", "codex"), ("PATH", "/bin")]);
        assert_eq!(peer_env_diagnostic(7, &PeerEnv::Read(clean), "GITEA_", &[]), None);
        let d = peer_env_diagnostic(8, &PeerEnv::Unreadable("permission denied".into()), "GITEA_", &[]).unwrap();
        assert!(is_hard(&d) && d.contains("pid 8"));
    }

    #[test]
    fn stale_runtime_names_both_revisions() {
        let d = stale_runtime_diagnostic("gitea-author", 4711, "aaa", "bbb").unwrap();
        assert!(is_hard(&d) && d.contains("aaa") && d.contains("bbb"));
        assert_eq!(stale_runtime_diagnostic("n", 1, "aaa", "aaa"), None);
    }
}
