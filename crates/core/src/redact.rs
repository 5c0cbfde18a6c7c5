//! Secrets out of what is shown: a peer's command line is quoted in inventory reasons, gate
//! refusals (into a model's context), audit rows and the dashboard, so it is redacted once,
//! where it is observed. Redaction works on the command line's structure — a URL's userinfo,
//! a secret-looking flag's value, a secret-looking `KEY=value` — never by searching the text
//! for a known secret (which would mangle the message around a one-letter password, and
//! reveal it).

use crate::env::looks_secret;

/// What replaces a secret.
pub const MASK: &str = "***";

/// `argv` joined by spaces, every secret masked.
pub fn redact_argv(argv: &[String]) -> String {
    let mut out = Vec::with_capacity(argv.len());
    let mut next_is_secret = false;
    for arg in argv {
        if next_is_secret {
            out.push(MASK.to_owned());
            next_is_secret = false;
            continue;
        }
        if let Some(flag) = arg.strip_prefix("--").filter(|f| !f.contains('='))
            && looks_secret(flag)
        {
            next_is_secret = true;
            out.push(arg.clone());
            continue;
        }
        // One argument may carry several `key=value` words (a libpq connection string).
        let words: Vec<String> = arg.split(' ').map(redact_word).collect();
        out.push(words.join(" "));
    }
    out.join(" ")
}

/// One word: a URL with userinfo, or a secret-looking assignment (`--token=…`, `PGPASSWORD=…`,
/// `password=…`), masked; anything else as it is.
fn redact_word(word: &str) -> String {
    if let Some(url) = redact_url_userinfo(word) {
        return url;
    }
    if let Some((key, value)) = word.split_once('=') {
        let name = key.trim_start_matches('-');
        if !value.is_empty() && looks_secret(name) {
            return format!("{key}={MASK}");
        }
        if let Some(url) = redact_url_userinfo(value) {
            return format!("{key}={url}");
        }
    }
    word.to_owned()
}

/// `scheme://user:***@host/…` (and `scheme://***@host` for a token as the user), or `None`
/// when `word` is not a URL with userinfo.
pub fn redact_url_userinfo(word: &str) -> Option<String> {
    let (scheme, rest) = word.split_once("://")?;
    if scheme.is_empty() || !scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)) {
        return None;
    }
    // PostgreSQL's client library ends the userinfo at an `@`, not at a `/` or `?`: a
    // password may hold them unencoded, so everything before the last `@` is masked.
    let end = match scheme {
        "postgres" | "postgresql" if rest.contains('@') => {
            let at = rest.rfind('@').unwrap_or(0);
            at + rest[at..].find(['/', '?', '#']).unwrap_or(rest.len() - at)
        }
        _ => rest.find(['/', '?', '#']).unwrap_or(rest.len()),
    };
    let (authority, tail) = rest.split_at(end);
    let (userinfo, host) = authority.rsplit_once('@')?;
    let shown = match userinfo.split_once(':') {
        Some((user, _)) => format!("{user}:{MASK}"),
        None => MASK.to_owned(),
    };
    Some(format!("{scheme}://{shown}@{host}{tail}"))
}

#[cfg(test)]
mod tests {
    use super::{redact_argv, redact_url_userinfo};

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn urls_flags_and_assignments_are_masked_by_structure() {
        let line = redact_argv(&argv(&[
            "fleetgate",
            "--store",
            "postgres://fleet:p@db:5432/fg",
            "serve",
            "--token",
            "t0ps3cret",
            "--api-key=abc",
            "GITEA_ACCESS_TOKEN=ghp_xyz",
            "--listen=127.0.0.1:8750",
        ]));
        assert_eq!(
            line,
            "fleetgate --store postgres://fleet:***@db:5432/fg serve --token *** --api-key=*** GITEA_ACCESS_TOKEN=*** \
             --listen=127.0.0.1:8750"
        );
        assert!(!line.contains("ghp_") && !line.contains("t0ps3cret"));
    }

    #[test]
    fn a_one_letter_password_neither_mangles_the_line_nor_survives() {
        let line = redact_argv(&argv(&["x", "--store", "postgres://u:p@pghost/p"]));
        assert_eq!(line, "x --store postgres://u:***@pghost/p", "the host and db named p stay");
    }

    #[test]
    fn libpq_words_and_token_userinfo_are_masked_too() {
        assert_eq!(redact_argv(&argv(&["psql", "host=db password=pw user=u"])), "psql host=db password=*** user=u");
        assert_eq!(redact_url_userinfo("https://ghp_abc@gitea.example/x").unwrap(), "https://***@gitea.example/x");
        assert_eq!(redact_url_userinfo("https://gitea.example/x@y"), None, "an @ after the host is not userinfo");
        // Issue 34: PostgreSQL takes a `/`, `?` or `@` in the password unencoded.
        assert_eq!(redact_url_userinfo("postgres://u:pa/ss@db/fg").unwrap(), "postgres://u:***@db/fg");
        assert_eq!(redact_url_userinfo("postgres://u:pa?s@s@db:1/fg?x=1").unwrap(), "postgres://u:***@db:1/fg?x=1");
        assert_eq!(
            redact_argv(&argv(&["python", "mcp_server.py", "--repository", "/src/a"])),
            "python mcp_server.py --repository /src/a"
        );
    }
}
