//! Secrets out of what is shown: a peer's command line is quoted in inventory reasons, gate
//! refusals (into a model's context), audit rows and the dashboard, so it is redacted once,
//! where it is observed. Redaction works on the command line's structure — a URL's userinfo,
//! a secret-looking flag's value, a secret-looking `KEY=value`, a credential header — and on
//! the shapes credentials are issued in, never by searching the text for a known secret
//! (which would mangle the message around a one-letter password, and reveal it).
//!
//! What is masked, argument by argument:
//! - the value after a flag whose name looks secret (`looks_secret`), with two dashes or one
//!   (`--token X`, `-token X` as Go's `flag` package reads it), and after `-p` (a password
//!   for mysql, sshpass and friends; a port elsewhere: masking a harmless value is accepted,
//!   leaking a secret is not);
//! - the value of `KEY=value` when the key looks secret, and a URL's userinfo;
//! - after a header name that looks secret (`Authorization:`, `X-Api-Key:`, `Private-Token:`,
//!   `Cookie:`), the rest of that argument; the word after `Bearer` or `Basic`;
//! - anywhere, a run of token characters shaped like an issued credential (`token_shaped`):
//!   GitHub (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`), GitLab (`glpat-` and the
//!   other `gl…-` kinds), Slack (`xox?-`), `sk-` API keys, a JWT (`eyJ….….…`), and 40 hex digits
//!   (a Gitea access token; a git object name has the same shape and is masked too).
//!
//! Not recognised: a password glued to a short flag (`-pSECRET`), which is indistinguishable
//! from `-p8080` or `-profile` without knowing the program.

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
            // `--auth Bearer X`, `--token --password X`: a scheme or a secret flag taken
            // as a value is masked, and so is what follows it.
            next_is_secret = is_scheme(arg) || takes_secret(arg);
            continue;
        }
        if takes_secret(arg) || is_scheme(arg) {
            next_is_secret = true;
            out.push(mask_token_shapes(arg));
            continue;
        }
        out.push(redact_arg(arg));
    }
    out.join(" ")
}

/// A flag whose value, the next argument, is a secret: `--token`, `-token`, `-p`.
fn takes_secret(arg: &str) -> bool {
    let Some(flag) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else { return false };
    !flag.contains('=') && (flag == "p" || looks_secret(flag))
}

/// An authorization scheme whose credential follows it.
fn is_scheme(word: &str) -> bool {
    word.eq_ignore_ascii_case("bearer") || word.eq_ignore_ascii_case("basic")
}

/// The header name of `word` if it is `Name:` or `Name:value` with a secret-looking name
/// (after any `--flag=` in front of it), else `None`.
fn secret_header(word: &str) -> Option<&str> {
    let (name, value) = word.split_once(':')?;
    let bare = name.rsplit('=').next().unwrap_or(name).trim_start_matches('-');
    let secret = looks_secret(bare) || bare.eq_ignore_ascii_case("cookie");
    (secret && !bare.is_empty() && !value.starts_with("//")).then_some(name)
}

/// One argument: it may carry several words (a libpq connection string, a header).
fn redact_arg(arg: &str) -> String {
    let words: Vec<&str> = arg.split(' ').collect();
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    let mut next_is_secret = false;
    for (i, word) in words.iter().enumerate() {
        if next_is_secret && !word.is_empty() {
            out.push(MASK.to_owned());
            next_is_secret = is_scheme(word);
            continue;
        }
        if let Some(name) = secret_header(word) {
            let rest_empty = word.len() == name.len() + 1 && words[i + 1..].iter().all(|w| w.is_empty());
            out.push(if rest_empty { format!("{name}:") } else { format!("{name}: {MASK}") });
            return out.join(" ");
        }
        next_is_secret = is_scheme(word);
        out.push(mask_token_shapes(&redact_word(word)));
    }
    out.join(" ")
}

/// Whether a character may be part of a credential token.
fn token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

/// `word` with every run of token characters that is shaped like an issued credential masked.
pub fn mask_token_shapes(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    let mut rest = word;
    while let Some(start) = rest.find(token_char) {
        out.push_str(&rest[..start]);
        let run = &rest[start..];
        let end = run.find(|c| !token_char(c)).unwrap_or(run.len());
        let token = &run[..end];
        out.push_str(if token_shaped(token) { MASK } else { token });
        rest = &run[end..];
    }
    out.push_str(rest);
    out
}

/// Whether `run` (token characters only) has the shape of an issued credential.
pub fn token_shaped(run: &str) -> bool {
    const PREFIXES: [&str; 19] = [
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "github_pat_",
        "glpat-",
        "gldt-",
        "glrt-",
        "glcbt-",
        "glptt-",
        "glft-",
        "glimt-",
        "glagent-",
        "gloas-",
        "xoxb-",
        "xoxp-",
        "xoxa-",
        "xoxs-",
    ];
    let body = |p: &str| run.len() >= p.len() + 8;
    if PREFIXES.iter().any(|p| run.starts_with(p) && body(p)) {
        return true;
    }
    if run.starts_with("sk-") && run.len() >= 20 {
        return true;
    }
    if run.len() == 40 && run.bytes().all(|b| b.is_ascii_hexdigit()) {
        return true;
    }
    let parts: Vec<&str> = run.split('.').collect();
    parts.len() == 3
        && parts[0].starts_with("eyJ")
        && parts.iter().all(|p| p.len() >= 2 && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b)))
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
    use super::{mask_token_shapes, redact_argv, redact_url_userinfo, token_shaped};

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

    #[test]
    fn single_dash_secret_flags_and_dash_p_mask_their_value() {
        assert_eq!(
            redact_argv(&argv(&["gitea-mcp", "-t", "stdio", "-host", "https://g", "-token", "s3cr3t"])),
            "gitea-mcp -t stdio -host https://g -token ***"
        );
        assert_eq!(redact_argv(&argv(&["mysql", "-u", "root", "-p", "hunter2", "db"])), "mysql -u root -p *** db");
        assert_eq!(redact_argv(&argv(&["srv", "-p", "8080"])), "srv -p ***", "a port is masked too: accepted");
        assert_eq!(redact_argv(&argv(&["tool", "-api-key=abc", "-v"])), "tool -api-key=*** -v");
    }

    #[test]
    fn credential_headers_mask_the_rest_of_their_argument() {
        for (args, shown) in [
            (&["curl", "--header", "Authorization: Bearer abc.def"][..], "curl --header Authorization: ***"),
            (&["curl", "-H", "authorization:Basic dXNlcjpwdw=="], "curl -H authorization: ***"),
            (&["x", "--header=Authorization: token 0a1b"], "x --header=Authorization: ***"),
            (&["x", "-H", "Private-Token: glx"], "x -H Private-Token: ***"),
            (&["x", "-H", "Cookie: session=1"], "x -H Cookie: ***"),
            (&["x", "-H", "Accept: text/plain"], "x -H Accept: text/plain"),
            (&["x", "--auth-scheme", "Bearer", "abc"], "x --auth-scheme *** ***"),
            (&["x", "Bearer", "abc"], "x Bearer ***"),
            (&["x", "Bearer", "--password", "abc"], "x Bearer *** ***"),
            (&["x", "-token", "-p", "abc"], "x -token *** ***"),
            (&["x", "--listen=127.0.0.1:8750"], "x --listen=127.0.0.1:8750"),
        ] {
            assert_eq!(redact_argv(&argv(args)), shown, "{args:?}");
        }
    }

    #[test]
    fn issued_token_shapes_are_masked_wherever_they_stand() {
        let ghp = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";
        let glpat = "glpat-xxxxxxxxxxxxxxxxxxxx";
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let gitea = "0123456789abcdef0123456789abcdef01234567";
        for t in
            [ghp, glpat, jwt, gitea, "github_pat_11ABCDEFG0123456789", "xoxb-123456789012", "sk-abcdefghijklmnopqrstu"]
        {
            assert!(token_shaped(t), "{t}");
            assert_eq!(redact_argv(&argv(&["srv", t])), "srv ***", "{t}");
        }
        assert_eq!(mask_token_shapes(&format!("url=https://h/x?t={ghp}&y=1")), "url=https://h/x?t=***&y=1");
        assert_eq!(redact_argv(&argv(&["srv", "--repo", &format!("\"{glpat}\"")])), "srv --repo \"***\"");
        for plain in ["ghp_", "eyJ.a.b", "mcp_server.py", "gitea-author", "prgs-reviewer", "sk-1", "0123abc", "v1.2.3"]
        {
            assert!(!token_shaped(plain), "{plain}");
        }
    }
}
