//! Secrets out of what is shown: a peer's command line is quoted in inventory reasons, gate
//! refusals (into a model's context), audit rows and the dashboard, so it is redacted once,
//! where it is observed. Redaction works on the command line's structure and on the shapes
//! credentials are issued in, never by searching the text for a known secret (which would
//! mangle the message around a one-letter password, and reveal it).
//!
//! Each argument is split into words at every kind of whitespace (a tab, a no-break space, a
//! line separator; the separators are kept). What is masked:
//! - the value after a flag whose name is secret ([`secret_name`]: a name component such as
//!   `token`, `secret`, `password`, `pass`, `pwd`, `pw`, `pat`, `cred`, `auth`, `bearer`,
//!   `key`, `cookie`; `author` is not one), with two dashes or one (`--token X`, `-token X` as
//!   Go's `flag` package reads it), and after `-p` and `-a` (a password for mysql, sshpass,
//!   redis-cli; a port or a switch elsewhere: masking a harmless value is accepted, leaking a
//!   secret is not); an end of options (`--token -- X`) and a secret flag taken as the value
//!   (`--token --password X`) do not end it;
//! - the password of `user:password` after a user flag (`-u`, `--user`, `--proxy-user`);
//! - the value of `KEY=value` when the key is secret, looked for in nested assignments too
//!   (`--env=GITEA_TOKEN=X`, a URL's query), and a URL's userinfo;
//! - after a secret header name (`Authorization:`, `X-Api-Key:`, `Private-Token:`, `Cookie:`),
//!   the rest of that argument;
//! - the word after an authorization scheme (`Bearer`, `Basic`, `token`) wherever it stands,
//!   and after a bare key name (`aws_secret_access_key X`, `github.token X`, `password X`);
//! - anywhere, a run of token characters shaped like an issued credential (`token_shaped`):
//!   GitHub (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`), GitLab (`glpat-` and the
//!   other `gl…-` kinds), Slack (`xox?-`), `sk-` API keys, AWS access key ids (`AKIA…`,
//!   `ASIA…`), a JWT (`eyJ….….…`), and 40 hex digits (a Gitea access token; a git object name
//!   has the same shape and is masked too).
//!
//! Not recognised: a password glued to a short flag (`-pSECRET`), which is indistinguishable
//! from `-p8080` or `-profile` without knowing the program.

/// What replaces a secret.
pub const MASK: &str = "***";

/// What the next word is, as the words before it say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Next {
    /// Nothing known about it.
    Plain,
    /// A secret, masked whole.
    Secret,
    /// `user:password` after a user flag: the part after the first `:` masked.
    UserPassword,
}

/// What a word says about what follows it.
#[derive(Debug, PartialEq, Eq)]
enum Then {
    Next(Next),
    /// A secret header name: the rest of the argument is its value. `value` is what of it
    /// this word held (after the `:`).
    Header {
        value: String,
    },
}

/// `argv` joined by spaces, every secret masked.
pub fn redact_argv(argv: &[String]) -> String {
    let mut out = String::new();
    let mut next = Next::Plain;
    for (i, arg) in argv.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        next = redact_arg(arg, next, &mut out);
    }
    out
}

/// Whitespace of every kind splits words, and so do the invisible spaces.
fn is_separator(c: char) -> bool {
    c.is_whitespace() || matches!(c, '\u{180e}' | '\u{200b}' | '\u{2060}' | '\u{feff}')
}

/// One argument, word by word, onto `out`; what the next argument is.
fn redact_arg(arg: &str, mut next: Next, out: &mut String) -> Next {
    let mut rest = arg;
    loop {
        let gap = rest.find(|c| !is_separator(c)).unwrap_or(rest.len());
        out.push_str(&rest[..gap]);
        rest = &rest[gap..];
        if rest.is_empty() {
            return next;
        }
        let (word, after) = rest.split_at(rest.find(is_separator).unwrap_or(rest.len()));
        rest = after;
        match next {
            // The end of options: the value follows it.
            Next::Secret if word == "--" => out.push_str(word),
            Next::Secret => {
                out.push_str(MASK);
                // `--auth Bearer X`, `--token --password X`: a scheme or a secret flag taken
                // as a value is masked, and so is what follows it.
                next = if is_scheme(word) || secret_flag(word) { Next::Secret } else { Next::Plain };
            }
            Next::UserPassword if !word.starts_with('-') => {
                out.push_str(&user_password(word));
                next = Next::Plain;
            }
            _ => {
                let (shown, then) = judge(word);
                out.push_str(&shown);
                match then {
                    Then::Next(n) => next = n,
                    Then::Header { value } => {
                        let value = format!("{value} {rest}");
                        let words: Vec<&str> = value.split(is_separator).filter(|w| !w.is_empty()).collect();
                        if words.is_empty() {
                            // `Authorization:` alone: its value is the next argument.
                            return Next::Secret;
                        }
                        out.push(' ');
                        out.push_str(MASK);
                        return if words.last().is_some_and(|w| is_scheme(w)) { Next::Secret } else { Next::Plain };
                    }
                }
            }
        }
    }
}

/// One word on its own: how it is shown and what it says about what follows. `key=value` is
/// taken apart in a loop, not by recursion: a command line is any bytes, and a word of a
/// hundred thousand `=` must cost neither the stack nor quadratic time.
fn judge(word: &str) -> (String, Then) {
    let mut shown = String::new();
    let mut word = word;
    loop {
        let done = |mut shown: String, tail: &str, then: Next| {
            shown.push_str(tail);
            (shown, Then::Next(then))
        };
        // A URL's scheme holds no `=`: only a word whose `://` comes before any `=` can be one.
        let key_end = word.find('=').unwrap_or(word.len());
        if word[..key_end].contains("://")
            && let Some(url) = redact_url_userinfo(word)
        {
            return done(shown, &mask_token_shapes(&url), Next::Plain);
        }
        let body = word.trim_start_matches('-');
        let flag = body.len() < word.len();
        if flag && body.is_empty() {
            return done(shown, word, Next::Plain);
        }
        if let Some((key, value)) = body.split_once('=') {
            let prefix = mask_token_shapes(&word[..word.len() - value.len()]);
            if secret_name(key) {
                if value.is_empty() {
                    return done(shown, &prefix, Next::Plain);
                }
                // `Authorization=Bearer X`: the scheme's credential follows.
                let then = if is_scheme(value) { Next::Secret } else { Next::Plain };
                return done(shown, &format!("{prefix}{MASK}"), then);
            }
            if user_flag_name(key) && value.contains(':') {
                return done(shown, &format!("{prefix}{}", user_password(value)), Next::Plain);
            }
            // Not secret: the value is judged as a word of its own (a nested assignment, a
            // URL, a header).
            shown.push_str(&prefix);
            word = value;
            continue;
        }
        if flag {
            let then = if secret_flag_name(body) {
                Next::Secret
            } else if user_flag_name(body) {
                Next::UserPassword
            } else {
                Next::Plain
            };
            return done(shown, &mask_token_shapes(word), then);
        }
        if let Some((name, value)) = word.split_once(':')
            && !value.starts_with("//")
            && secret_name(name)
        {
            shown.push_str(&mask_token_shapes(name));
            shown.push(':');
            return (shown, Then::Header { value: value.to_owned() });
        }
        if is_scheme(word) || key_name(word) {
            return done(shown, word, Next::Secret);
        }
        return done(shown, &mask_token_shapes(word), Next::Plain);
    }
}

/// `user:password` with the password masked; a word without one as it is.
fn user_password(word: &str) -> String {
    match word.split_once(':') {
        Some((user, password)) if !password.is_empty() => format!("{user}:{MASK}"),
        _ => mask_token_shapes(word),
    }
}

/// A flag whose value, the next argument, is a secret: `--token`, `-token`, `-p`.
fn secret_flag(word: &str) -> bool {
    let body = word.trim_start_matches('-');
    body.len() < word.len() && !body.is_empty() && !body.contains('=') && secret_flag_name(body)
}

fn secret_flag_name(name: &str) -> bool {
    name == "p" || name == "a" || secret_name(name)
}

/// A flag whose value may be `user:password` (curl's `-u` and `-U`, `--user`, `--proxy-user`).
fn user_flag_name(name: &str) -> bool {
    name == "u" || name == "U" || components(name).last().is_some_and(|c| c == "user")
}

/// An authorization scheme whose credential follows it (quotes and brackets around it allowed).
fn is_scheme(word: &str) -> bool {
    let word = word.trim_matches(|c: char| !c.is_alphanumeric());
    ["bearer", "basic", "token"].iter().any(|s| word.eq_ignore_ascii_case(s))
}

/// A bare key name whose value follows it: an identifier with a `_` or `.` whose last part
/// is secret (`aws_secret_access_key`, `github.token`), or `password` itself.
fn key_name(word: &str) -> bool {
    let parts = components(word);
    let identifier = word.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '-'));
    let compound = word.contains(['_', '.']) && parts.last().is_some_and(|c| secret_component(c, true));
    identifier
        && (compound
            || matches!(parts.as_slice(), [one] if ["password", "passwd", "passphrase"].contains(&one.as_str())))
}

/// Does a flag, key or header name hold a secret? By its components (`--db-pass`,
/// `GITEA_ACCESS_TOKEN`, `clientSecret`, `X-Api-Key`), not by a substring: `--author` does not.
pub fn secret_name(name: &str) -> bool {
    let parts = components(name);
    let last = parts.len().saturating_sub(1);
    parts.iter().enumerate().any(|(i, c)| secret_component(c, i == last))
}

/// One lowercase name component; some words are secret only at the end (`--db-pass`,
/// `--api-key`, but `--pass-env`, `--key-file`).
fn secret_component(c: &str, last: bool) -> bool {
    const WORDS: [&str; 24] = [
        "token",
        "tokens",
        "secret",
        "secrets",
        "password",
        "passwords",
        "passwd",
        "passphrase",
        "pwd",
        "pw",
        "pat",
        "cred",
        "creds",
        "credential",
        "credentials",
        "auth",
        "oauth",
        "authorization",
        "authentication",
        "bearer",
        "apikey",
        "cookie",
        "cookies",
        "signature",
    ];
    // Compounds written as one word: `accesstoken`, `clientsecret`, `dbpassword`.
    const PARTS: [&str; 5] = ["token", "secret", "passw", "credential", "apikey"];
    WORDS.contains(&c) || PARTS.iter().any(|p| c.contains(p)) || (last && (c == "pass" || c.ends_with("key")))
}

/// A name's lowercase components: split at every character that is not a letter or digit and
/// where a lowercase letter meets an uppercase one.
fn components(name: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                parts.push(std::mem::take(&mut current));
            }
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower && !current.is_empty() {
            parts.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
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
        if token_shaped(token) {
            out.push_str(MASK);
        } else {
            // `AKIA….example`: a shape may end at a dot inside the run.
            let pieces: Vec<&str> = token.split('.').map(|p| if token_shaped(p) { MASK } else { p }).collect();
            out.push_str(&pieces.join("."));
        }
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
    // An AWS access key id: long-term (`AKIA`) or temporary (`ASIA`), 16 more of A-Z and 2-7.
    if run.len() == 20
        && (run.starts_with("AKIA") || run.starts_with("ASIA"))
        && run.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
    {
        return true;
    }
    let parts: Vec<&str> = run.split('.').collect();
    parts.len() == 3
        && parts[0].starts_with("eyJ")
        && parts.iter().all(|p| p.len() >= 2 && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b)))
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

/// A URL's origin alone, `scheme://host[:port]`: no userinfo, path, query or fragment — for
/// a log line about a URL that may be a credential (a Slack hook's path, a `?token=`). Text
/// that is no `scheme://…` URL is never shown: `(a URL that does not parse)`.
pub fn url_origin(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return "(a URL that does not parse)".into() };
    if scheme.is_empty() || !scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)) {
        return "(a URL that does not parse)".into();
    }
    let authority = &rest[..rest.find(['/', '?', '#', '\\']).unwrap_or(rest.len())];
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    format!("{scheme}://{host}")
}

#[cfg(test)]
mod tests {
    use super::{mask_token_shapes, redact_argv, redact_url_userinfo, token_shaped, url_origin};

    #[test]
    fn a_url_s_origin_carries_nothing_after_its_host() {
        for (url, origin) in [
            ("http://host:1?token=s3cret", "http://host:1"),
            ("https://hooks.slack.com/services/T0/B0/s3cret", "https://hooks.slack.com"),
            ("http://user:s3cret@host:8080/hook?x=1#f", "http://host:8080"),
            ("http://host#s3cret", "http://host"),
            ("http://host\\s3cret", "http://host"),
            ("s3cret", "(a URL that does not parse)"),
            ("://s3cret", "(a URL that does not parse)"),
        ] {
            assert_eq!(url_origin(url), origin, "{url}");
        }
    }

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

    /// Issue 43 (3): every argument shape the red team tried, the 18 that leaked and the 21
    /// that held, and more of each kind; then what must stay as it is.
    #[test]
    fn argument_shapes_are_masked_by_structure() {
        let ghp = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let gitea = "0123456789abcdef0123456789abcdef01234567";
        let ghs_url = "https://h/x?access=ghs_16C7e42F292c6912E7710c838347Ae178B4a&y=1";
        let aws_secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
        let cases: &[(&[&str], &str)] = &[
            // Leaked before: secret-named flags beyond the old word list.
            (&["srv", "--pass", "hunter2"], "srv --pass ***"),
            (&["srv", "--passphrase", "hunter2"], "srv --passphrase ***"),
            (&["srv", "--pwd", "hunter2"], "srv --pwd ***"),
            (&["srv", "--pat", "hunter2"], "srv --pat ***"),
            (&["srv", "--cred", "hunter2"], "srv --cred ***"),
            (&["srv", "--bearer", "hunter2"], "srv --bearer ***"),
            (&["srv", "--pass=hunter2"], "srv --pass=***"),
            (&["srv", "--pw", "hunter2"], "srv --pw ***"),
            (&["srv", "-e", "GITHUB_PAT=hunter2"], "srv -e GITHUB_PAT=***"),
            // user:password after a user flag.
            (&["curl", "-u", "alice:hunter2", "https://h"], "curl -u alice:*** https://h"),
            (&["curl", "--user", "alice:hunter2"], "curl --user alice:***"),
            (&["curl", "--user=alice:hunter2"], "curl --user=alice:***"),
            (&["redis-cli", "-a", "hunter2", "ping"], "redis-cli -a *** ping"),
            // Schemes, split by any whitespace.
            (&["srv", "token", "hunter2"], "srv token ***"),
            (&["curl", "-H", "Bearer\thunter2"], "curl -H Bearer\t***"),
            (&["curl", "-H", "Bearer\u{a0}hunter2"], "curl -H Bearer\u{a0}***"),
            (&["curl", "-H", "Basic\u{2028}hunter2"], "curl -H Basic\u{2028}***"),
            (&["curl", "-H", "Bearer\nhunter2"], "curl -H Bearer\n***"),
            // Nested assignments, the end of options, a scheme as an assignment's value.
            (&["docker", "run", "--env=GITEA_TOKEN=hunter2", "img"], "docker run --env=GITEA_TOKEN=*** img"),
            (&["srv", "--token", "--", "hunter2"], "srv --token -- ***"),
            (&["srv", "Authorization=Bearer hunter2"], "srv Authorization=*** ***"),
            (&["srv", "--header={\"Authorization\":\"Bearer hunter2\"}"], "srv --header={\"Authorization\": ***"),
            // AWS: key ids anywhere, a secret key after an AWS key name.
            (&["srv", "AKIAIOSFODNN7EXAMPLE"], "srv ***"),
            (&["srv", "--id=ASIAY34FZKBOKMUTVV7A"], "srv --id=***"),
            (
                &["aws", "configure", "set", "aws_secret_access_key", aws_secret],
                "aws configure set aws_secret_access_key ***",
            ),
            (&["srv", "--aws-secret-access-key", aws_secret], "srv --aws-secret-access-key ***"),
            (&["env", &format!("AWS_SECRET_ACCESS_KEY={aws_secret}")], "env AWS_SECRET_ACCESS_KEY=***"),
            // Held before (the existing tests above): URLs, secret flags, assignments, headers, shapes.
            (&["x", "--store", "postgres://fleet:p@db:5432/fg"], "x --store postgres://fleet:***@db:5432/fg"),
            (&["x", "--token", "t0ps3cret"], "x --token ***"),
            (&["x", "--api-key=abc"], "x --api-key=***"),
            (&["x", "GITEA_ACCESS_TOKEN=ghp_xyz"], "x GITEA_ACCESS_TOKEN=***"),
            (&["psql", "host=db password=pw user=u"], "psql host=db password=*** user=u"),
            (&["git", "clone", "https://ghp_abc@gitea.example/x"], "git clone https://***@gitea.example/x"),
            (&["x", "--store", "postgres://u:pa/ss@db/fg"], "x --store postgres://u:***@db/fg"),
            (&["gitea-mcp", "-t", "stdio", "-token", "s3cr3t"], "gitea-mcp -t stdio -token ***"),
            (&["mysql", "-u", "root", "-p", "hunter2", "db"], "mysql -u root -p *** db"),
            (&["tool", "-api-key=abc", "-v"], "tool -api-key=*** -v"),
            (&["curl", "--header", "Authorization: Bearer abc.def"], "curl --header Authorization: ***"),
            (&["curl", "-H", "authorization:Basic dXNlcjpwdw=="], "curl -H authorization: ***"),
            (&["x", "--header=Authorization: token 0a1b"], "x --header=Authorization: ***"),
            (&["x", "-H", "Private-Token: glx"], "x -H Private-Token: ***"),
            (&["x", "-H", "Cookie: session=1"], "x -H Cookie: ***"),
            (&["x", "--auth-scheme", "Bearer", "abc"], "x --auth-scheme *** ***"),
            (&["x", "Bearer", "abc"], "x Bearer ***"),
            (&["x", "Bearer", "--password", "abc"], "x Bearer *** ***"),
            (&["x", "-token", "-p", "abc"], "x -token *** ***"),
            (&["srv", ghp], "srv ***"),
            (&["srv", jwt], "srv ***"),
            (&["srv", gitea], "srv ***"),
            (&["srv", "--callback", ghs_url], "srv --callback https://h/x?access=***&y=1"),
            (&["srv", "gho_16C7e42F292c6912E7710c838347Ae178B4a"], "srv ***"),
            (&["srv", "github_pat_11ABCDEFG0123456789"], "srv ***"),
            (&["srv", "glpat-xxxxxxxxxxxxxxxxxxxx"], "srv ***"),
            // Must not be masked: ordinary flags, values and paths.
            (&["fleetgate", "serve", "--profile", "author"], "fleetgate serve --profile author"),
            (&["git", "log", "--author", "alice", "--author=bob"], "git log --author alice --author=bob"),
            (
                &["python", "mcp_server.py", "--repository", "/src/passport"],
                "python mcp_server.py --repository /src/passport",
            ),
            (&["gitea-mcp", "-t", "stdio", "-host", "https://g"], "gitea-mcp -t stdio -host https://g"),
            (&["x", "-H", "Accept: text/plain"], "x -H Accept: text/plain"),
            (&["x", "--listen=127.0.0.1:8750", "--port", "8080"], "x --listen=127.0.0.1:8750 --port 8080"),
            (
                &["x", "--path", "/tmp/keys", "--keyboard", "us", "--pass-env", "PATH"],
                "x --path /tmp/keys --keyboard us --pass-env PATH",
            ),
            (
                &["x", "--store=/var/lib/fleetgate/registry.sqlite3", "v1.2.3", "deadbeef"],
                "x --store=/var/lib/fleetgate/registry.sqlite3 v1.2.3 deadbeef",
            ),
            (
                &["node", "server.js", "--", "--verbose", "https://gitea.example/o/r"],
                "node server.js -- --verbose https://gitea.example/o/r",
            ),
        ];
        for (args, shown) in cases {
            assert_eq!(redact_argv(&argv(args)), *shown, "{args:?}");
        }
    }

    /// A command line is any bytes: a word of many `=` (or `:`, dashes, schemes) costs
    /// neither the stack nor quadratic time.
    #[test]
    fn a_hostile_argument_is_judged_in_linear_time() {
        for unit in ["a=", "=", "--x=", "u:", "Bearer ", "-p ", "https://a=", "x.", "AKIA"] {
            let arg = unit.repeat(50_000);
            let started = std::time::Instant::now();
            let shown = redact_argv(&argv(&["srv", &arg, "--token", "hunter2"]));
            assert!(shown.ends_with(" ***") && !shown.contains("hunter2"), "{unit}");
            assert!(started.elapsed() < std::time::Duration::from_secs(5), "{unit}: {:?}", started.elapsed());
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
