//! A store location as a message may show it: never its password.
//!
//! A PostgreSQL URL is shown as the client library reads it — parsed into its
//! connection configuration, then written back from that configuration with the
//! password left out — not by cutting the text where a password "should" end: the
//! library takes everything between `user:` and the first `@` as the password, `/`, `:`,
//! `?` and `%` included, so a text rule that stops at the first `/` printed a password
//! holding one. A URL the library would not parse, or one with more than one `@` (where
//! the first one splits the password and the rest becomes the host), is shown masked up
//! to its last `@`. A libpq keyword string has its `password=` value masked. Pure.

use crate::postgres::config::split_tls;
use crate::postgres::{Roots, SslMode};
use ::postgres::Config;
use ::postgres::config::{Host, TargetSessionAttrs};

/// What replaces a secret.
const MASK: &str = "***";

/// The store location `spec` with every password masked.
pub fn redact_url(spec: &str) -> String {
    match spec.split_once("://") {
        Some((scheme @ ("postgres" | "postgresql"), _)) => parsed(scheme, spec).unwrap_or_else(|| masked(spec)),
        Some(_) => masked(spec),
        None => keywords_masked(spec),
    }
}

/// `spec` written back from the connection configuration the client library reads from it,
/// or `None` when it would not read one (or when the text is ambiguous about where the
/// password ends).
fn parsed(scheme: &str, spec: &str) -> Option<String> {
    let spec = spec.trim();
    if spec.matches('@').count() > 1 {
        return None;
    }
    let (rest, tls) = split_tls(spec).ok()?;
    let config: Config = rest.parse().ok()?;
    let mut out = format!("{scheme}://");
    if let Some(user) = config.get_user() {
        out.push_str(&encoded(user));
    }
    if config.get_password().is_some() {
        out.push(':');
        out.push_str(MASK);
    }
    if config.get_user().is_some() || config.get_password().is_some() {
        out.push('@');
    }
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let name = match host {
                Host::Tcp(name) if name.contains(':') => format!("[{name}]"),
                Host::Tcp(name) => encoded(name),
                Host::Unix(path) => encoded(&path.to_string_lossy()),
            };
            match ports.get(i).or_else(|| ports.first()) {
                Some(port) => format!("{name}:{port}"),
                None => name,
            }
        })
        .collect();
    out.push_str(&hosts.join(","));
    if let Some(db) = config.get_dbname() {
        out.push('/');
        out.push_str(&encoded(db));
    }
    let mut params = Vec::new();
    if !config.get_hostaddrs().is_empty() {
        let addrs: Vec<String> = config.get_hostaddrs().iter().map(ToString::to_string).collect();
        params.push(format!("hostaddr={}", addrs.join(",")));
    }
    if let Some(name) = config.get_application_name() {
        params.push(format!("application_name={}", encoded(name)));
    }
    if let Some(options) = config.get_options() {
        params.push(format!("options={}", encoded(options)));
    }
    if let Some(timeout) = config.get_connect_timeout() {
        params.push(format!("connect_timeout={}", timeout.as_secs()));
    }
    if let Some(timeout) = config.get_tcp_user_timeout() {
        params.push(format!("tcp_user_timeout={}", timeout.as_millis()));
    }
    if !config.get_keepalives() {
        params.push("keepalives=0".to_owned());
    }
    if config.get_target_session_attrs() == TargetSessionAttrs::ReadWrite {
        params.push("target_session_attrs=read-write".to_owned());
    }
    if tls.mode != SslMode::Prefer {
        params.push(format!("sslmode={}", tls.mode.as_str()));
    }
    match &tls.root_cert {
        Some(Roots::System) => params.push("sslrootcert=system".to_owned()),
        Some(Roots::File(path)) => params.push(format!("sslrootcert={}", encoded(&path.to_string_lossy()))),
        None => {}
    }
    if !params.is_empty() {
        out.push('?');
        out.push_str(&params.join("&"));
    }
    Some(out)
}

/// A URL the library would not read: everything before its last `@` is masked but the
/// user name when one `@` leaves no doubt where it ends, and a `password` parameter too.
fn masked(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return keywords_masked(url) };
    let shown = match rest.matches('@').count() {
        0 => params_masked(rest),
        1 => {
            let (userinfo, after) = rest.split_once('@').unwrap_or(("", rest));
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{user}:{MASK}@{}", params_masked(after)),
                None => format!("{userinfo}@{}", params_masked(after)),
            }
        }
        _ => {
            let (_, after) = rest.rsplit_once('@').unwrap_or(("", rest));
            format!("{MASK}@{}", params_masked(after))
        }
    };
    format!("{scheme}://{shown}")
}

/// Query parameters whose values hold no secret, as the library or libpq read them: shown.
const PLAIN_PARAMS: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "application_name",
    "connect_timeout",
    "tcp_user_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_retries",
    "target_session_attrs",
    "load_balance_hosts",
    "channel_binding",
    "sslmode",
    "sslrootcert",
    "sslnegotiation",
];

/// `text` with every query parameter's value masked but those [`PLAIN_PARAMS`] names (its key
/// read as the library reads it: %-decoded): a URL the library would not read is shown by
/// its text, and any other parameter — `password`, `sslpassword`, one nobody knows — may hold
/// a secret. Its key is enough to say which one is wrong.
fn params_masked(text: &str) -> String {
    let Some((base, query)) = text.split_once('?') else { return text.to_owned() };
    let params: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if !PLAIN_PARAMS.contains(&decoded(key).as_str()) => format!("{key}={MASK}"),
            _ => pair.to_owned(),
        })
        .collect();
    format!("{base}?{}", params.join("&"))
}

/// A path, or a libpq keyword string (`host=… password=…`, which the store refuses): every
/// `password=` and `sslpassword=` value masked, quoted ones whole.
fn keywords_masked(spec: &str) -> String {
    let mut out = String::with_capacity(spec.len());
    let mut rest = spec;
    while let Some(at) = find_password_key(rest) {
        let value_start = at + rest[at..].find('=').map_or(0, |e| e + 1);
        out.push_str(&rest[..value_start]);
        out.push_str(MASK);
        rest = skip_value(&rest[value_start..]);
    }
    out.push_str(rest);
    out
}

/// Where a `password` or `sslpassword` keyword (any case, spaces before its `=` allowed)
/// starts a word in `text`.
fn find_password_key(text: &str) -> Option<usize> {
    let lower = text.to_ascii_lowercase();
    let mut from = 0;
    while let Some(found) = lower[from..].find("password") {
        let at = from + found;
        let starts_word = |i: usize| i == 0 || lower.as_bytes()[i - 1].is_ascii_whitespace();
        let key = if starts_word(at) {
            Some(at)
        } else {
            at.checked_sub(3).filter(|&ssl| lower[ssl..at] == *"ssl" && starts_word(ssl))
        };
        let after = lower[at + "password".len()..].trim_start();
        if let Some(key) = key
            && after.starts_with('=')
        {
            return Some(key);
        }
        from = at + "password".len();
    }
    None
}

/// The text after one keyword value: a quoted value (`'…'`, `\'` escapes) or up to the next space.
fn skip_value(text: &str) -> &str {
    let trimmed = text.trim_start();
    if let Some(quoted) = trimmed.strip_prefix('\'') {
        let mut escaped = false;
        for (i, c) in quoted.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '\'' => return &quoted[i + 1..],
                _ => {}
            }
        }
        return "";
    }
    trimmed.find(char::is_whitespace).map_or("", |end| &trimmed[end..])
}

/// `%XX` escapes decoded where they are valid; anything else kept.
fn decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = text.get(i + 1..i + 3).filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A value written into a URL: the characters that delimit its parts %-escaped.
fn encoded(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '%' | '@' | ':' | '/' | '?' | '&' | '=' | '#' | ',' | '[' | ']' | ' ' => {
                let mut buf = [0_u8; 4];
                for byte in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("%{byte:02X}"));
                }
            }
            c if c.is_control() => out.push_str(&format!("%{:02X}", u32::from(c) & 0xff)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    /// A password must appear nowhere in what is shown, in any of its forms.
    fn hides(url: &str, password: &str) -> String {
        let shown = redact_url(url);
        assert!(!shown.contains(password), "{url} shown as {shown}");
        for part in password.split(['/', '@', ':', '%', '?']).filter(|p| p.len() > 3) {
            assert!(!shown.contains(part), "{url} shown as {shown}: {part:?} of the password");
        }
        shown
    }

    #[test]
    fn a_password_is_masked_whatever_it_holds() {
        assert_eq!(hides("postgres://u:pa/ss@127.0.0.1:1/db", "pa/ss"), "postgres://u:***@127.0.0.1:1/db");
        assert_eq!(hides("postgres://u:pa:ss@db:5432/fg", "pa:ss"), "postgres://u:***@db:5432/fg");
        assert_eq!(hides("postgres://u:pa%ss@db/fg", "pa%ss"), "postgres://u:***@db:5432/fg");
        assert_eq!(hides("postgres://u:pa%2Fss@db/fg", "pa%2Fss"), "postgres://u:***@db:5432/fg");
        assert_eq!(
            hides("postgres://u:pa?ss@db/fg?sslmode=disable", "pa?ss"),
            "postgres://u:***@db:5432/fg?sslmode=disable"
        );
        assert_eq!(hides("postgresql://u:p/a:s%s?x@db/fg", "p/a:s%s?x"), "postgresql://u:***@db:5432/fg");
        // An unencoded `@` in the password: the library would split it there; shown masked
        // up to the last `@` (and refused by the store, see `config`).
        assert_eq!(hides("postgres://u:pa@ss@db:5432/fg", "pa@ss"), "postgres://***@db:5432/fg");
        assert_eq!(hides("postgres://u:pa@s/s@db/fg", "pa@s/s"), "postgres://***@db/fg");
        assert_eq!(hides("postgres://u:pa%40ss@db/fg", "pa%40ss"), "postgres://u:***@db:5432/fg");
    }

    #[test]
    fn the_rest_of_the_location_is_shown() {
        assert_eq!(redact_url("postgres://fleet:s3cret@db:5432/fg"), "postgres://fleet:***@db:5432/fg");
        assert_eq!(redact_url("postgres://fleet@db/fg"), "postgres://fleet@db:5432/fg");
        assert_eq!(redact_url("/var/x.sqlite3"), "/var/x.sqlite3");
        assert_eq!(redact_url("sqlite:///var/x.sqlite3"), "sqlite:///var/x.sqlite3");
        assert_eq!(
            redact_url("postgres://u:pw@[::1]:6432,db2:7/fg?sslmode=verify-full&sslrootcert=system&connect_timeout=3"),
            "postgres://u:***@[::1]:6432,db2:7/fg?connect_timeout=3&sslmode=verify-full&sslrootcert=system"
        );
        assert_eq!(redact_url("postgres://u@%2Frun%2Fpg/fg"), "postgres://u@%2Frun%2Fpg:5432/fg");
    }

    #[test]
    fn a_password_parameter_is_masked() {
        assert_eq!(hides("postgres://fleet@db/fg?password=s3/cret", "s3/cret"), "postgres://fleet:***@db:5432/fg");
        // Not parsed (a bad sslmode): masked by the text, the parameter too.
        assert_eq!(
            hides("postgres://fleet@db/fg?sslmode=bogus&password=s3cret", "s3cret"),
            "postgres://fleet@db/fg?sslmode=bogus&password=***"
        );
        // Refused (no client certificates), so shown by the text: every value a secret may
        // be in is masked, whatever its key.
        assert_eq!(
            hides("postgres://fleet@db/fg?sslpassword=k3y-pass&sslkey=/k.pem", "k3y-pass"),
            "postgres://fleet@db/fg?sslpassword=***&sslkey=***"
        );
        assert_eq!(
            hides("postgres://fleet@db/fg?sslmode=bogus&x-api-token=t0ken-v4l", "t0ken-v4l"),
            "postgres://fleet@db/fg?sslmode=bogus&x-api-token=***"
        );
        assert_eq!(
            hides("postgres://u:pa/ss@db/fg?sslmode=bogus&p%61ssword=x2y", "pa/ss"),
            "postgres://u:***@db/fg?sslmode=bogus&p%61ssword=***"
        );
        assert_eq!(hides("postgres://u:pa@s/s@db/fg?sslmode=bogus", "pa@s/s"), "postgres://***@db/fg?sslmode=bogus");
    }

    #[test]
    fn a_keyword_string_has_its_password_masked() {
        assert_eq!(hides("host=db password=zq7x/wv9y@x dbname=fg", "zq7x/wv9y@x"), "host=db password=*** dbname=fg");
        assert_eq!(hides("host=db PASSWORD = 'p a\\'ss' user=u", "p a\\'ss"), "host=db PASSWORD =*** user=u");
        assert_eq!(redact_url("host=db mypassword=x"), "host=db mypassword=x", "another keyword");
        assert_eq!(hides("password=s3cret", "s3cret"), "password=***");
        assert_eq!(hides("host=db sslpassword=k3y-pass", "k3y-pass"), "host=db sslpassword=***");
        assert_eq!(redact_url("host=db nosslpassword=x"), "host=db nosslpassword=x", "another keyword");
    }
}
