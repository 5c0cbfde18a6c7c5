//! What a PostgreSQL failure means for the caller: its [`StoreErrorKind`]
//! (by SQLSTATE, or by what the client library's error carries), its text on
//! one line, and the password scrubbed from both.

use super::PostgresStore;
use crate::engine::Fail;
use crate::{StoreError, StoreErrorKind};

impl From<::postgres::Error> for Fail<::postgres::Error> {
    fn from(e: ::postgres::Error) -> Self {
        Self::Db(e)
    }
}

fn kind_of(e: &::postgres::Error) -> StoreErrorKind {
    if let Some(code) = e.code() {
        let code = code.code();
        return match code {
            // Connection exceptions; admin or crash shutdown; the server is
            // starting or stopping; too many connections; out of memory.
            _ if code.starts_with("08") => StoreErrorKind::Unavailable,
            "57P01" | "57P02" | "57P03" | "53300" | "53200" => StoreErrorKind::Unavailable,
            // Serialization failure, deadlock, lock timeout, cancelled wait.
            "40001" | "40P01" | "55P03" | "57014" => StoreErrorKind::Busy,
            "53100" => StoreErrorKind::Io,
            _ if code.starts_with("28") || code == "42501" => StoreErrorKind::Permission,
            // No such database; a value the columns refuse.
            "3D000" => StoreErrorKind::Invalid,
            _ if code.starts_with("22") || code.starts_with("23") => StoreErrorKind::Invalid,
            // Damaged data or index; a table or column the schema should have.
            "XX001" | "XX002" | "42P01" | "42703" => StoreErrorKind::Corrupt,
            _ => StoreErrorKind::Other,
        };
    }
    // No SQLSTATE: the client library's own kinds are private, so tell them
    // by what they carry. A certificate the TLS settings refuse stays refused,
    // and a server without TLS stays without: neither is transient. An I/O
    // cause, a closed connection or a timeout all mean the server is not
    // reachable right now.
    if matches!(tls_refusal(e), Some(rustls::Error::InvalidCertificate(_))) {
        return StoreErrorKind::Permission;
    }
    if detail(e).ends_with("server does not support TLS") {
        return StoreErrorKind::Unsupported;
    }
    let text = e.to_string();
    let io = std::error::Error::source(e).is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some());
    if io || e.is_closed() || text.starts_with("timeout") || text.starts_with("error connecting") {
        StoreErrorKind::Unavailable
    } else if text.starts_with("authentication") {
        StoreErrorKind::Permission
    } else {
        StoreErrorKind::Other
    }
}

/// The TLS library's error (a refused certificate, most often), if that is
/// what ended the connection attempt.
fn tls_refusal(e: &::postgres::Error) -> Option<&rustls::Error> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(refusal) = s.downcast_ref::<rustls::Error>() {
            return Some(refusal);
        }
        if let Some(refusal) = s.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()?.downcast_ref()) {
            return Some(refusal);
        }
        source = s.source();
    }
    None
}

/// The server's message on one line, with its SQLSTATE, or the client's error
/// with its causes.
pub(super) fn detail(e: &::postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{} [SQLSTATE {}]", db.to_string().replace('\n', "; "), db.code().code());
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

impl PostgresStore {
    fn scrub(&self, text: String) -> String {
        match &self.target.secret {
            Some(secret) if text.contains(secret.as_str()) => text.replace(secret.as_str(), "***"),
            _ => text,
        }
    }

    /// `fail` as the caller sees it: `context (store): what happened`, the
    /// password scrubbed from every text, the server's own included.
    pub(super) fn name(&self, context: &str, fail: Fail<::postgres::Error>) -> StoreError {
        let (kind, text) = match fail {
            Fail::Db(e) => (kind_of(&e), detail(&e)),
            Fail::Row(text) => (StoreErrorKind::Corrupt, format!("unreadable row: {text}")),
            Fail::Store(e) => return StoreError::new(e.kind(), self.scrub(e.to_string())),
        };
        StoreError::new(kind, self.scrub(format!("{context} ({}): {text}", self.target.shown)))
    }
}
