//! The store URL as a connection configuration: parsed without echoing the
//! password, its TLS parameters (`sslmode`, `sslrootcert`) read here, since the
//! client library knows only `disable|prefer|require`, and the timeouts a
//! fleet needs filled in where the URL leaves them out.

use super::tls::{Roots, SslMode, TlsSettings};
use crate::{StoreError, StoreErrorKind, redact_url};
use ::postgres::Config;
use std::time::Duration;
use tokio_postgres_rustls::MakeRustlsConnect;

/// How long a connection attempt may take, unless the URL says otherwise.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long sent data may stay unacknowledged before the connection counts
/// as lost (Linux `TCP_USER_TIMEOUT`), unless the URL says otherwise: a
/// vanished server must surface as `Unavailable`, not as a call that hangs.
pub const TCP_USER_TIMEOUT: Duration = Duration::from_secs(30);

/// A parsed store URL.
pub(super) struct Target {
    /// The URL with its password replaced by `***`.
    pub shown: String,
    /// How to connect.
    pub config: Config,
    /// The password, kept only to scrub it from the server's messages.
    pub secret: Option<String>,
    /// The TLS connector, unless `sslmode=disable`.
    pub connector: Option<MakeRustlsConnect>,
}

impl Target {
    /// Parse `url` and set up its TLS. A URL that does not parse, a bad
    /// `sslmode` or an unreadable `sslrootcert` file is `Invalid`, naming the
    /// store and the parameter; no message holds the password.
    pub fn parse(url: &str) -> Result<Self, StoreError> {
        let shown = redact_url(url.trim());
        let named = |e: StoreError| StoreError::new(e.kind(), format!("store {shown}: {e}"));
        // The client library ends the password at the first `@` and takes the rest for the
        // host: a second `@` is a password (or user name) that needed `%40`.
        if url.matches('@').count() > 1 {
            return Err(named(StoreError::new(
                StoreErrorKind::Invalid,
                "the store URL holds more than one @: write an @ in the user name or password as %40",
            )));
        }
        let (rest, tls) = split_tls(url.trim()).map_err(named)?;
        let mut config: Config = rest.parse().map_err(|e: ::postgres::Error| {
            // The parser may quote the part it refused; keep the URL out.
            StoreError::new(StoreErrorKind::Invalid, format!("invalid store URL {shown}: {}", super::fail::detail(&e)))
        })?;
        config.ssl_mode(match tls.mode {
            SslMode::Disable => ::postgres::config::SslMode::Disable,
            SslMode::Prefer => ::postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => ::postgres::config::SslMode::Require,
        });
        let connector = tls.connector().map_err(named)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(TCP_USER_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("fleetgate");
        }
        let secret = config.get_password().map(|p| String::from_utf8_lossy(p).into_owned()).filter(|p| !p.is_empty());
        Ok(Self { shown, config, secret, connector })
    }
}

/// The URL without its TLS parameters, and what they ask: `sslmode` (default
/// `prefer`, as libpq's) and `sslrootcert` (a path, or `system`). Client
/// certificates (`sslcert`, `sslkey`, `sslpassword`) are refused by name.
/// Pure: reads no file.
pub(crate) fn split_tls(url: &str) -> Result<(String, TlsSettings), StoreError> {
    // The query starts at the first `?` after the credentials, as the client library reads
    // it: a password may hold a `?` (it ends at the first `@`).
    let credentials_end = url.find("://").map_or(0, |s| s + 3 + url[s + 3..].find('@').map_or(0, |a| a + 1));
    let (base, query) = match url[credentials_end..].find('?') {
        Some(q) => (&url[..credentials_end + q], Some(&url[credentials_end + q + 1..])),
        None => (url, None),
    };
    let mut mode = None;
    let mut root_cert = None;
    let mut kept = Vec::new();
    for pair in query.into_iter().flat_map(|q| q.split('&')).filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "sslmode" => mode = Some(SslMode::parse(&decode("sslmode", value)?)?),
            "sslrootcert" => {
                let path = decode("sslrootcert", value)?;
                root_cert = Some(match path.as_str() {
                    "" => return Err(StoreError::new(StoreErrorKind::Invalid, "sslrootcert is empty: give a path")),
                    "system" => Roots::System,
                    _ => Roots::File(path.into()),
                });
            }
            "sslcert" | "sslkey" | "sslpassword" | "sslcrl" | "sslcrldir" | "sslsni" => {
                return Err(StoreError::new(
                    StoreErrorKind::Unsupported,
                    format!("the store URL parameter {key} is not supported (no client certificates or CRLs)"),
                ));
            }
            _ => kept.push(pair),
        }
    }
    let rest = if kept.is_empty() { base.to_owned() } else { format!("{base}?{}", kept.join("&")) };
    Ok((rest, TlsSettings { mode: mode.unwrap_or(SslMode::Prefer), root_cert }))
}

/// A query value with its `%XX` escapes decoded (`+` is a plus, as libpq reads it).
fn decode(key: &str, value: &str) -> Result<String, StoreError> {
    let bad = || StoreError::new(StoreErrorKind::Invalid, format!("the store URL parameter {key} has a bad %-escape"));
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            // `from_str_radix` would take a sign (`%+1`): two hex digits exactly.
            let hex = value.get(i + 1..i + 3).filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit())).ok_or_else(bad)?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

/// A value from the URL as an error may quote it: at most 40 characters, no control characters.
pub(super) fn shown_value(value: &str) -> String {
    value.chars().filter(|c| !c.is_control()).take(40).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_parameters_are_taken_out_and_the_rest_kept() {
        let (rest, tls) =
            split_tls("postgres://u:pw@db:5432/fg?connect_timeout=3&sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem")
                .unwrap();
        assert_eq!(rest, "postgres://u:pw@db:5432/fg?connect_timeout=3");
        assert_eq!(tls, TlsSettings { mode: SslMode::VerifyFull, root_cert: Some(Roots::File("/etc/ca.pem".into())) });

        let (rest, tls) = split_tls("postgres://u@db/fg").unwrap();
        assert_eq!(rest, "postgres://u@db/fg");
        assert_eq!(tls, TlsSettings { mode: SslMode::Prefer, root_cert: None }, "libpq's default");

        let (rest, tls) = split_tls("postgres://u@db/fg?sslmode=require&sslrootcert=system").unwrap();
        assert_eq!(rest, "postgres://u@db/fg");
        assert_eq!(tls.root_cert, Some(Roots::System));
    }

    #[test]
    fn bad_tls_parameters_are_named_without_the_password() {
        for (url, kind, says) in [
            ("postgres://u:s3cret@db/fg?sslmode=verify", StoreErrorKind::Invalid, "invalid sslmode \"verify\""),
            ("postgres://u:s3cret@db/fg?sslmode=allow", StoreErrorKind::Unsupported, "sslmode=allow"),
            ("postgres://u:s3cret@db/fg?sslrootcert=", StoreErrorKind::Invalid, "sslrootcert is empty"),
            ("postgres://u:s3cret@db/fg?sslrootcert=%zz", StoreErrorKind::Invalid, "sslrootcert has a bad %-escape"),
            (
                "postgres://u:s3cret@db/fg?sslkey=/k.pem",
                StoreErrorKind::Unsupported,
                "parameter sslkey is not supported",
            ),
            (
                "postgres://u:s3cret@db/fg?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
                StoreErrorKind::Invalid,
                "cannot read the sslrootcert file /nonexistent/ca.pem",
            ),
        ] {
            let err = Target::parse(url).err().unwrap_or_else(|| panic!("{url} was accepted"));
            let text = err.to_string();
            assert_eq!(err.kind(), kind, "{text}");
            assert!(text.contains(says), "{url}: {text}");
            assert!(text.contains("postgres://u:***@db"), "names the store: {text}");
            assert!(!text.contains("s3cret"), "{text}");
        }
    }

    /// Issue 43, finding 11: `sslpassword=` (refused: no client certificates) had its value
    /// echoed in the refusal, through the store's location as shown. No error of a store
    /// URL quotes a parameter's value or the password, whichever check refuses it.
    #[test]
    fn no_refusal_of_a_store_url_echoes_a_parameter_value() {
        const SECRET: &str = "Zq7vK2mWx9";
        for url in [
            format!("postgres://u:pw-{SECRET}@db/fg?sslpassword={SECRET}"),
            format!("postgres://u@db/fg?sslpassword={SECRET}&sslmode=verify-full"),
            format!("postgres://u@db/fg?sslkey=/k.pem&sslpassword={SECRET}"),
            format!("postgres://u@db/fg?sslpassword={SECRET}&sslkey=/k.pem"),
            format!("postgres://u@db/fg?sslcert=/c.pem&sslpassword=%{SECRET}"),
            format!("postgres://u@db/fg?sslmode=bogus&sslpassword={SECRET}"),
            format!("postgres://u@db/fg?sslrootcert=%zz&sslpassword={SECRET}"),
            format!("postgres://u@db/fg?sslpassword={SECRET}&sslrootcert="),
            format!("postgres://u@db/fg?sslpassword={SECRET}&sslrootcert=/nonexistent/ca.pem&sslmode=verify-ca"),
            format!("postgres://u@db/fg?sslpassword={SECRET}&connect_timeout=soon"),
            format!("postgres://u@db/fg?x-token={SECRET}"),
            format!("postgres://u@db/fg?options=-c%20password%3D{SECRET}&bogus=1"),
            format!("postgres://u@db/fg?password={SECRET}&sslmode=bogus"),
            format!("postgres://u:p@w-{SECRET}@db/fg?sslpassword={SECRET}"),
            format!("postgres://u@db:port/fg?sslpassword={SECRET}"),
        ] {
            let err = Target::parse(&url).err().unwrap_or_else(|| panic!("{url} was accepted"));
            let text = err.to_string();
            assert!(!text.contains(SECRET), "{url}: {text}");
            assert!(text.contains("postgres://"), "{url}: names the store: {text}");
        }
    }

    #[test]
    fn require_is_no_longer_refused() {
        let target = Target::parse("postgres://u:s3cret@db/fg?sslmode=require").unwrap();
        assert!(target.connector.is_some());
        assert_eq!(target.config.get_ssl_mode(), ::postgres::config::SslMode::Require);
        let plain = Target::parse("postgres://u:s3cret@db/fg?sslmode=disable").unwrap();
        assert!(plain.connector.is_none());
        assert_eq!(plain.config.get_ssl_mode(), ::postgres::config::SslMode::Disable);
    }

    #[test]
    fn a_second_at_sign_is_refused_without_the_password() {
        let err = Target::parse("postgres://u:pa@ss@db/fg").err().expect("refused");
        assert_eq!(err.kind(), StoreErrorKind::Invalid);
        let text = err.to_string();
        assert!(text.contains("more than one @") && text.contains("%40"), "{text}");
        assert!(!text.contains("pa@ss") && !text.contains("u:pa"), "{text}");
    }

    #[test]
    fn a_question_mark_in_the_password_does_not_start_the_query() {
        let (rest, tls) = split_tls("postgres://u:pa?ss@db/fg?sslmode=verify-full").unwrap();
        assert_eq!(rest, "postgres://u:pa?ss@db/fg");
        assert_eq!(tls.mode, SslMode::VerifyFull);
        let target = Target::parse("postgres://u:pa/s?s@db/fg?sslmode=disable").unwrap();
        assert_eq!(target.config.get_password(), Some(&b"pa/s?s"[..]));
        assert_eq!(target.shown, "postgres://u:***@db:5432/fg?sslmode=disable");
    }
}
