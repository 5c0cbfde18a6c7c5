//! Who an HTTP request is: its bearer token, checked against the one configured token
//! (`FLEETGATE_HTTP_TOKEN`) or against a tokens file of principals.
//!
//! A tokens file holds one principal per line: `sha256-hex  client-name  [profile…]` —
//! the SHA-256 of the token (never the token itself), the client name the principal's
//! workers and audit entries record, and optionally the profiles it may use (none listed:
//! any). `#` starts a comment; blank lines are ignored. A malformed line refuses the whole
//! file with its line number, and so does a client name that begins with `oauth:` (in any
//! case): that prefix names OAuth subjects, so no tokens-file principal is ever one of them.
//! Every presented token is hashed and compared with every entry in constant time; neither
//! the presented nor a stored value is ever logged.

use fleetgate_core::origin::same_secret;
use sha2::{Digest, Sha256};
use std::fmt;

/// One principal of a tokens file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// The client name its workers record.
    pub name: String,
    /// The profiles it may use; empty: any.
    pub profiles: Vec<String>,
}

impl Principal {
    /// Whether it may use a gateway serving `profile`.
    pub fn may_serve(&self, profile: &str) -> bool {
        self.profiles.is_empty() || self.profiles.iter().any(|p| p == profile)
    }
}

/// The principals of a tokens file, by token digest.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Principals {
    entries: Vec<([u8; 32], Principal)>,
}

impl fmt::Debug for Principals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Digests are not secrets, but there is no reason to print them either.
        let names: Vec<&str> = self.entries.iter().map(|(_, p)| p.name.as_str()).collect();
        f.debug_struct("Principals").field("names", &names).finish()
    }
}

/// Why a tokens file was refused: the file, the line, the reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}:{line}: {reason}")]
pub struct PrincipalsError {
    /// The file, as the operator named it.
    pub source_name: String,
    /// The 1-based line.
    pub line: usize,
    /// What is wrong with it.
    pub reason: String,
}

/// Longest client name accepted (it becomes a worker's client name).
const MAX_NAME: usize = 128;

/// What begins the principal name of an OAuth subject (`oauth:<subject>`), and so no other
/// principal's: a tokens-file principal and an OAuth subject are never one principal.
pub(crate) const OAUTH_PREFIX: &str = "oauth:";

/// Whether `name` is spelled as an OAuth subject's principal — compared as a worker's client
/// name is (core's `normalize_client_name`), since that is what the workers record.
pub(crate) fn names_an_oauth_subject(name: &str) -> bool {
    fleetgate_core::client::normalize_client_name(name).starts_with(OAUTH_PREFIX)
}

fn digest_of(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0_u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

fn valid_word(word: &str) -> bool {
    !word.is_empty() && word.len() <= MAX_NAME && word.chars().all(|c| c.is_ascii_graphic())
}

/// Why the `[http] tokens_file` cannot be used ([`Principals::read`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokensFileError {
    /// It cannot be read (the file as shown, the OS's reason).
    #[error("cannot read [http] tokens_file {shown}: {why}")]
    Unreadable {
        /// The path, as shown.
        shown: String,
        /// The OS's reason.
        why: String,
    },
    /// A line does not parse.
    #[error("[http] tokens_file {0}")]
    Parse(#[from] PrincipalsError),
    /// It lists no principal.
    #[error("[http] tokens_file {0} lists no principal")]
    Empty(String),
}

impl Principals {
    /// The tokens file at `path`, read and parsed whole; a file that cannot be read, does
    /// not parse or lists no principal is refused with why (`[http] tokens_file …`).
    pub fn read(path: &std::path::Path) -> Result<Self, TokensFileError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| TokensFileError::Unreadable { shown: shown.clone(), why: e.to_string() })?;
        let principals = Self::parse(&text, &shown)?;
        if principals.is_empty() {
            return Err(TokensFileError::Empty(shown));
        }
        Ok(principals)
    }

    /// Parse a tokens file's text; `source_name` names it in errors.
    pub fn parse(text: &str, source_name: &str) -> Result<Self, PrincipalsError> {
        let mut entries: Vec<([u8; 32], Principal)> = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let fail =
                |reason: String| PrincipalsError { source_name: source_name.to_owned(), line: index + 1, reason };
            let mut words = line.split_whitespace();
            let hex = words.next().unwrap_or("");
            let digest = digest_of(hex).ok_or_else(|| {
                fail("the first field must be the token's SHA-256 as 64 hex digits (`sha256sum` of the token)".into())
            })?;
            let name = words.next().ok_or_else(|| fail("a client name must follow the digest".into()))?;
            if !valid_word(name) {
                return Err(fail(format!(
                    "the client name must be 1 to {MAX_NAME} printable characters without spaces"
                )));
            }
            if names_an_oauth_subject(name) {
                return Err(fail(format!(
                    "the client name {name:?} begins with {OAUTH_PREFIX:?}, which names OAuth subjects: choose another"
                )));
            }
            let profiles: Vec<String> = words.map(str::to_owned).collect();
            if let Some(bad) = profiles.iter().find(|p| !valid_word(p)) {
                return Err(fail(format!("profile {bad:?} is not a valid profile name")));
            }
            if entries.iter().any(|(d, _)| *d == digest) {
                return Err(fail("this token digest is listed twice".into()));
            }
            entries.push((digest, Principal { name: name.to_owned(), profiles }));
        }
        Ok(Self { entries })
    }

    /// The principals' names, each once.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        let mut names: Vec<&str> = self.entries.iter().map(|(_, p)| p.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names.into_iter()
    }

    /// Every principal (one per token: a name may hold several), in file order.
    pub fn principals(&self) -> impl Iterator<Item = &Principal> {
        self.entries.iter().map(|(_, p)| p)
    }

    /// How many principals the file holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the file holds none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The principal whose token `token` is. Every entry is compared, in constant time.
    pub fn authenticate(&self, token: &str) -> Option<&Principal> {
        if token.is_empty() {
            return None;
        }
        let presented: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for (digest, principal) in &self.entries {
            if same_secret(&presented, digest) {
                found = Some(principal);
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::Principals;

    const ALICE: &str = "2bd806c97f0e00af1a1fc3328fa763a9269723c8db8fac4f93af71db186d6e90"; // sha256("alice")

    #[test]
    fn a_tokens_file_maps_digests_to_principals_and_profiles() {
        let text = format!("# fleet tokens\n\n{ALICE}  claude-code  prgs-author prgs-reviewer  # Alice's laptop\n");
        let principals = Principals::parse(&text, "tokens").unwrap();
        assert_eq!(principals.len(), 1);
        let alice = principals.authenticate("alice").expect("alice's token");
        assert_eq!(alice.name, "claude-code");
        assert!(alice.may_serve("prgs-author"));
        assert!(!alice.may_serve("prgs-merger"));
        assert!(principals.authenticate("bob").is_none());
        assert!(principals.authenticate("").is_none(), "an empty token never authenticates");
    }

    #[test]
    fn a_bad_line_is_refused_with_its_number() {
        let e = Principals::parse(&format!("{ALICE} a\nnot-hex cursor\n"), "/etc/fg/tokens").unwrap_err();
        assert_eq!((e.source_name.as_str(), e.line), ("/etc/fg/tokens", 2));
        assert!(e.to_string().starts_with("/etc/fg/tokens:2: the first field must be"), "{e}");
        let e = Principals::parse(ALICE, "t").unwrap_err();
        assert!(e.reason.contains("client name must follow"), "{e}");
        let e = Principals::parse(&format!("{ALICE} a\n{ALICE} b\n"), "t").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.reason.contains("twice"), "{e}");
    }

    #[test]
    fn a_client_name_spelled_as_an_oauth_subject_is_refused() {
        for name in ["oauth:ci", "OAuth:ci", "OAUTH:"] {
            let e = Principals::parse(&format!("{ALICE} {name}\n"), "t").unwrap_err();
            assert_eq!(e.line, 1);
            assert!(e.reason.contains("names OAuth subjects"), "{name}: {e}");
        }
        assert!(Principals::parse(&format!("{ALICE} oauth-ci\n"), "t").is_ok(), "only the prefix is reserved");
    }
}
