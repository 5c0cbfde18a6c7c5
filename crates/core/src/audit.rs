//! Audit entries: every decision the capability resolver makes for a real call, and — for a
//! `tools/call` — the call as the gate judged it ([`JudgedCall`]), so a rule change can be
//! replayed against the fleet's own history (`crate::replay`).

use crate::capability::ToolClass;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

/// One recorded decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Store-assigned sequence number; `None` before it is appended.
    pub id: Option<i64>,
    /// When the decision was made.
    pub at: Timestamp,
    /// Profile of the deciding server.
    pub profile: String,
    /// The worker the call was made for, when attached.
    pub worker_identity: Option<String>,
    /// The tool called.
    pub tool: String,
    /// Allowed or refused.
    pub allowed: bool,
    /// The blocker literal, when refused.
    pub blocker_kind: Option<String>,
    /// Every reason given.
    pub reasons: Vec<String>,
    /// The HTTP principal the call came from (a tokens-file client name), when one.
    #[serde(default)]
    pub principal: Option<String>,
    /// For a `tools/call` decision: the call as the gate judged it. `None` for the log's
    /// other events (locks, pins, an operator's clearing) and for decisions recorded before
    /// the audit kept calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<Box<JudgedCall>>,
}

impl AuditEntry {
    /// An event of the log that is no call's decision (a lock released, decisions cleared,
    /// a pin changed): allowed, for no worker, with its one reason.
    pub fn event(at: Timestamp, profile: &str, tool: &str, reason: String) -> Self {
        Self {
            id: None,
            at,
            profile: profile.to_owned(),
            worker_identity: None,
            tool: tool.to_owned(),
            allowed: true,
            blocker_kind: None,
            reasons: vec![reason],
            principal: None,
            call: None,
        }
    }
}

/// A `tools/call` as the gate judged it: what a replay needs to judge it again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JudgedCall {
    /// The caller's role.
    pub role: String,
    /// The call's class as judged (a rule's, else the tool's own).
    pub class: ToolClass,
    /// The tool's own class (its annotations and `[tools]`), whatever a rule made of it.
    #[serde(default)]
    pub tool_class: Option<ToolClass>,
    /// The rule that decided (its origin: `fleet.toml:12`, `gitea-mcp:merge`), when one did.
    #[serde(default)]
    pub rule: Option<String>,
    /// The rule set that decided ([`rules_digest`]).
    pub rules: String,
    /// The arguments judged, as `[audit] arguments` keeps them.
    pub arguments: KeptArguments,
}

/// `[audit] arguments`: how much of a call's arguments the log keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArgumentsMode {
    /// The canonical arguments, bounded ([`MAX_KEPT_STRING`], [`MAX_KEPT_ARGUMENTS`]).
    #[default]
    Full,
    /// Only their SHA-256 and length.
    Digest,
    /// Nothing.
    Off,
}

/// The arguments a log entry keeps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kept", rename_all = "snake_case")]
pub enum KeptArguments {
    /// The arguments judged (absent: the call had none); a string longer than
    /// [`MAX_KEPT_STRING`] bytes is kept as `{"fleetgate/digested": {"sha256", "bytes"}}`.
    Full {
        /// The arguments.
        arguments: Option<Map<String, Value>>,
    },
    /// The canonical JSON's SHA-256 and length only: by `[audit] arguments = "digest"`, or
    /// because the arguments exceeded [`MAX_KEPT_ARGUMENTS`] even with long strings digested.
    Digest {
        /// Lowercase hex SHA-256 of the arguments' JSON.
        sha256: String,
        /// The JSON's length in bytes.
        bytes: usize,
    },
    /// Not kept (`[audit] arguments = "off"`).
    Off,
}

/// A string argument longer than this many bytes is kept as its digest.
pub const MAX_KEPT_STRING: usize = 4096;
/// Kept arguments longer than this many bytes (as JSON) are kept as their digest.
pub const MAX_KEPT_ARGUMENTS: usize = 64 * 1024;
/// The key of the object a digested string is kept as.
pub const DIGESTED_KEY: &str = "fleetgate/digested";

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// `value` with every string over [`MAX_KEPT_STRING`] bytes replaced by its digest.
fn bounded(value: &Value) -> Value {
    match value {
        Value::String(s) if s.len() > MAX_KEPT_STRING => {
            let mut digest = Map::new();
            digest.insert("sha256".into(), Value::from(sha256_hex(s.as_bytes())));
            digest.insert("bytes".into(), Value::from(s.len()));
            let mut kept = Map::new();
            kept.insert(DIGESTED_KEY.into(), Value::Object(digest));
            Value::Object(kept)
        }
        Value::Array(items) => Value::Array(items.iter().map(bounded).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), bounded(v))).collect()),
        other => other.clone(),
    }
}

/// Whether `value` is a digested string as [`keep_arguments`] keeps one.
pub fn is_digested(value: &Value) -> bool {
    value.as_object().is_some_and(|o| o.len() == 1 && o.contains_key(DIGESTED_KEY))
}

/// The arguments `arguments` as `mode` keeps them: in full (long strings digested; the
/// whole digested when still over [`MAX_KEPT_ARGUMENTS`]), as a digest, or not at all.
pub fn keep_arguments(arguments: Option<&Map<String, Value>>, mode: ArgumentsMode) -> KeptArguments {
    let digest_of = |json: &str| KeptArguments::Digest { sha256: sha256_hex(json.as_bytes()), bytes: json.len() };
    let json = || arguments.map_or_else(|| "null".to_owned(), |a| Value::Object(a.clone()).to_string());
    match mode {
        ArgumentsMode::Off => KeptArguments::Off,
        ArgumentsMode::Digest => digest_of(&json()),
        ArgumentsMode::Full => {
            let Some(arguments) = arguments else { return KeptArguments::Full { arguments: None } };
            let kept = bounded(&Value::Object(arguments.clone()));
            if kept.to_string().len() > MAX_KEPT_ARGUMENTS {
                return digest_of(&json());
            }
            let Value::Object(kept) = kept else { unreachable!("an object stays an object") };
            KeptArguments::Full { arguments: Some(kept) }
        }
    }
}

/// The digest of a rule set: what decided a call, so a replay can tell which decisions one
/// rule set made (`sha256:` and the hex of `parts` as JSON: the forge profile, its version,
/// the role globs and the rules, in order).
pub fn rules_digest(parts: &Value) -> String {
    format!("sha256:{}", sha256_hex(parts.to_string().as_bytes()))
}

#[cfg(test)]
mod kept_tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn long_strings_are_kept_as_their_digest_and_huge_arguments_whole() {
        let short = args(json!({ "owner": "o", "n": 3 }));
        assert_eq!(
            keep_arguments(Some(&short), ArgumentsMode::Full),
            KeptArguments::Full { arguments: Some(short.clone()) }
        );
        let long = "x".repeat(MAX_KEPT_STRING + 1);
        let kept = keep_arguments(Some(&args(json!({ "content": long, "path": "a" }))), ArgumentsMode::Full);
        let KeptArguments::Full { arguments: Some(kept) } = kept else { panic!("{kept:?}") };
        assert!(is_digested(&kept["content"]) && kept["path"] == "a", "{kept:?}");
        assert_eq!(kept["content"][DIGESTED_KEY]["bytes"], MAX_KEPT_STRING + 1);
        // Many strings just under the bound: the whole is over it.
        let many: Map<String, Value> =
            (0..20).map(|i| (format!("k{i}"), Value::from("y".repeat(MAX_KEPT_STRING)))).collect();
        assert!(matches!(keep_arguments(Some(&many), ArgumentsMode::Full), KeptArguments::Digest { .. }));
        assert!(
            matches!(keep_arguments(Some(&short), ArgumentsMode::Digest), KeptArguments::Digest { bytes, .. } if bytes == Value::Object(short.clone()).to_string().len())
        );
        assert_eq!(keep_arguments(Some(&short), ArgumentsMode::Off), KeptArguments::Off);
        assert_eq!(keep_arguments(None, ArgumentsMode::Full), KeptArguments::Full { arguments: None });
    }
}
