//! The forges' own grammar for issue references in text, as the look-alikes act on it
//! (`GITEA_MCP.md` and `GITHUB_MCP.md` say where it was read and where it differs):
//!
//! * **Gitea** (`modules/references/references.go`): a reference is `#N` or `!N` (the two
//!   are interchangeable for closing) after whitespace, the text's start, `(`, `[`, `'` or
//!   `"`, and before whitespace, the end, `)`, `]`, `'`, `"` or one of `:;,.?!` followed by
//!   whitespace or the end; or `owner/name#N` (`!N`) to another repository, after
//!   whitespace, the start, `(` or `[`. A closing (reopening) keyword acts on it when the
//!   text right before the reference ends in the keyword (any case, Unicode simple case
//!   folding), an optional `:` and exactly one space, the keyword itself after whitespace,
//!   the start, `(` or `[`. The defaults are `close, closes, closed, fix, fixes, fixed,
//!   resolve, resolves, resolved` and `reopen, reopens, reopened`. Whitespace here is
//!   ASCII's (Go's `\s`). A full URL of an issue or PR on this forge is read as
//!   `owner/name#N`; a Markdown text (a PR's body, a comment) is read after its markup is
//!   stripped, its links' targets read as references too.
//! * **GitHub** (docs, "Linking a pull request to an issue"): `close[sd]?`, `fix(e[sd])?`,
//!   `resolve[sd]?` in any case, an optional colon, then `#N`, `owner/name#N` or the issue's
//!   URL; no reopening keywords.

use regex::Regex;
use std::sync::OnceLock;

/// Gitea's default closing keywords (`[repository.pull-request] CLOSE_KEYWORDS`).
pub const GITEA_CLOSE: &[&str] =
    &["close", "closes", "closed", "fix", "fixes", "fixed", "resolve", "resolves", "resolved"];
/// Gitea's default reopening keywords (`REOPEN_KEYWORDS`).
pub const GITEA_REOPEN: &[&str] = &["reopen", "reopens", "reopened"];

/// What a reference asks of the issue it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing: a mention.
    None,
    /// Close it.
    Closes,
    /// Reopen it.
    Reopens,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Closes => "closes",
            Self::Reopens => "reopens",
        }
    }

    pub fn parse(text: &str) -> Self {
        match text {
            "closes" => Self::Closes,
            "reopens" => Self::Reopens,
            _ => Self::None,
        }
    }
}

/// One reference a text makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ref {
    /// The repository (`owner/name`, lowercase) when the reference names one.
    pub repo: Option<String>,
    /// The issue's (or PR's) number.
    pub index: i64,
    /// What it asks.
    pub action: Action,
}

/// ASCII whitespace, as Go's `\s`.
const WS: &str = r"[\t\n\x0C\r ]";

fn numeric() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(&format!(r#"(?:{WS}|^|\(|\[|'|")([#!][0-9]+)(?:{WS}|$|\)|\]|'|"|[:;,.?!]{WS}|[:;,.?!]$)"#))
            .expect("the numeric reference pattern")
    })
}

fn cross() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(&format!(
            r"(?:{WS}|^|\(|\[)([0-9a-zA-Z_.\-]+/[0-9a-zA-Z_.\-]+[#!][0-9]+)(?:{WS}|$|\)|\]|[:;,.?!]{WS}|[:;,.?!]$)"
        ))
        .expect("the cross-repository reference pattern")
    })
}

fn keywords(words: &[&str]) -> Regex {
    Regex::new(&format!(r"(?i)(?:{WS}|^|\(|\[)(?:{}):? $", words.join("|"))).expect("a keyword pattern")
}

/// The instance's own lists (`CLOSE_KEYWORDS`, `REOPEN_KEYWORDS` in `app.ini`): one
/// instance per fixture process, set before its first call ([`set_instance_keywords`]).
static INSTANCE: OnceLock<[Vec<String>; 2]> = OnceLock::new();

/// Set the instance's keyword lists; a given list replaces Gitea's default one, as the
/// setting does. Gitea keeps only words of letters (`^\pL+$`) and quotes each; so do these.
pub fn set_instance_keywords(close: &[String], reopen: &[String]) -> Result<(), String> {
    let words = |list: &[String]| -> Vec<String> {
        list.iter()
            .map(|w| w.trim())
            .filter(|w| !w.is_empty() && w.chars().all(char::is_alphabetic))
            .map(regex::escape)
            .collect()
    };
    INSTANCE.set([words(close), words(reopen)]).map_err(|_| "the instance's keywords are set once".to_owned())
}

/// The instance's list `i` (0: closing, 1: reopening) when set, else `default`.
fn instance_or(default: &[&str], i: usize) -> Regex {
    match INSTANCE.get().map(|lists| &lists[i]).filter(|l| !l.is_empty()) {
        Some(list) => keywords(&list.iter().map(String::as_str).collect::<Vec<_>>()),
        None => keywords(default),
    }
}

fn close_keywords() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| instance_or(GITEA_CLOSE, 0))
}

fn reopen_keywords() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| instance_or(GITEA_REOPEN, 1))
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.-".contains(&b))
}

/// The keyword right before byte `start` of `content`.
fn action_before(content: &str, start: usize) -> Action {
    let prefix = &content[..start];
    if close_keywords().is_match(prefix) {
        Action::Closes
    } else if reopen_keywords().is_match(prefix) {
        Action::Reopens
    } else {
        Action::None
    }
}

/// The reference `content[start..end]` (`#N`, `!N`, `owner/name#N`), its keyword read
/// before `start`.
fn reference(content: &str, start: usize, end: usize) -> Option<Ref> {
    let text = &content[start..end];
    let sep = text.find(['#', '!'])?;
    let index: i64 = text[sep + 1..].parse().ok()?;
    let repo = &text[..sep];
    let action = action_before(content, start);
    if repo.is_empty() {
        return Some(Ref { repo: None, index, action });
    }
    let lower = repo.to_lowercase();
    let (owner, name) = lower.split_once('/')?;
    if name.contains('/') || !valid_name(owner) || !valid_name(name) {
        return None;
    }
    Some(Ref { repo: Some(lower), index, action })
}

/// Every match of `re` in `content`, each next search starting right after the previous
/// reference (so its trailing delimiter may lead the next one), as Gitea scans.
fn scan(re: &Regex, content: &str, out: &mut Vec<Ref>) {
    let mut pos = 0;
    while pos <= content.len() {
        let Some(caps) = re.captures(&content[pos..]) else { break };
        let Some(group) = caps.get(1) else { break };
        if let Some(r) = reference(content, pos + group.start(), pos + group.end()) {
            out.push(r);
        }
        pos += group.end();
    }
}

/// `app_url` + `owner/name/(issues|pulls)/N` rewritten as `owner/name#N` (`!N`), as Gitea
/// does before reading a plain text.
fn shorten_urls(content: &str, app_url: &str) -> String {
    let re = Regex::new(&format!(
        r"({WS}|^|\(|\[){}([0-9a-zA-Z_.\-]+/[0-9a-zA-Z_.\-]+)/(issues|pulls)/([0-9]+)((?:{WS}|$|\)|\]|[:;,.?!]{WS}|[:;,.?!]$))",
        regex::escape(app_url)
    ))
    .expect("the forge URL pattern");
    let mut out = content.to_owned();
    // One rewrite at a time: a rewrite shortens the text, so matches are taken afresh.
    while let Some(caps) = re.captures(&out) {
        let (Some(whole), Some(lead), Some(repo), Some(kind), Some(n), Some(tail)) =
            (caps.get(0), caps.get(1), caps.get(2), caps.get(3), caps.get(4), caps.get(5))
        else {
            break;
        };
        let sigil = if kind.as_str() == "pulls" { '!' } else { '#' };
        let short = format!("{}{}{sigil}{}{}", lead.as_str(), repo.as_str(), n.as_str(), tail.as_str());
        out.replace_range(whole.range(), &short);
    }
    out
}

/// The references of a plain text (a commit message, a PR's title): Gitea's
/// `FindAllIssueReferences`.
pub fn gitea_plain(content: &str, app_url: &str) -> Vec<Ref> {
    let content = shorten_urls(content, app_url);
    let mut out = Vec::new();
    scan(numeric(), &content, &mut out);
    scan(cross(), &content, &mut out);
    out
}

/// The references of a Markdown text (a PR's body, a comment): Gitea's
/// `FindAllIssueReferencesMarkdown`, the markup stripped (approximated: emphasis and code
/// markers, backslash escapes, HTML entities; a link's text kept, its target read as a
/// reference when it is an issue or PR path of this forge).
pub fn gitea_markdown(content: &str, app_url: &str) -> Vec<Ref> {
    let (stripped, mut links) = strip_markdown(content);
    // Bare URLs are links too (Gitea's Markdown has autolinks): the keyword before the URL.
    for m in bare_url().find_iter(&stripped) {
        let at = content.find(m.as_str()).unwrap_or(0);
        links.push((m.as_str().trim_end_matches(['.', ',', ';', ':', '!', '?']).to_owned(), at));
    }
    let mut out = Vec::new();
    scan(numeric(), &stripped, &mut out);
    scan(cross(), &stripped, &mut out);
    let host = app_url.split("://").nth(1).unwrap_or(app_url).trim_end_matches('/').to_lowercase();
    for (link, text_at) in links {
        let rest = match link.split_once("://") {
            Some((_, rest)) => {
                let (h, path) = rest.split_once('/').unwrap_or((rest, ""));
                if !h.eq_ignore_ascii_case(&host) {
                    continue;
                }
                format!("/{path}")
            }
            None => link.clone(),
        };
        let parts: Vec<&str> = rest.split('/').collect();
        if parts.len() != 5 || !parts[0].is_empty() || !matches!(parts[3], "issues" | "pulls") {
            continue;
        }
        let Ok(index) = parts[4].parse() else { continue };
        let lower = format!("{}/{}", parts[1], parts[2]).to_lowercase();
        let Some((o, n)) = lower.split_once('/') else { continue };
        if !valid_name(o) || !valid_name(n) {
            continue;
        }
        // The keyword is read before the link's opening bracket, in the original text.
        let action = action_before(content, text_at);
        out.push(Ref { repo: Some(lower), index, action });
    }
    out
}

fn bare_url() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"https?://[^\s<>()\[\]]+").expect("the bare URL pattern"))
}

/// A Markdown text as text, and its links with where each link's `[` stands in the text.
fn strip_markdown(content: &str) -> (String, Vec<(String, usize)>) {
    let decoded = decode_entities(content);
    let mut out = String::with_capacity(decoded.len());
    let mut links = Vec::new();
    let mut i = 0;
    while i < decoded.len() {
        let c = decoded[i..].chars().next().unwrap_or(' ');
        match c {
            '\\' if decoded[i + 1..].starts_with(|n: char| n.is_ascii_punctuation()) => {
                i += 1;
                continue;
            }
            '*' | '`' | '~' => {
                i += 1;
                continue;
            }
            '[' => {
                // `[text](target)`: the text stays, the target is a link.
                if let Some(close) = decoded[i..].find("](").map(|c| c + i)
                    && let Some(end) = decoded[close + 2..].find(')').map(|e| e + close + 2)
                {
                    let text = &decoded[i + 1..close];
                    let target = decoded[close + 2..end].split_whitespace().next().unwrap_or("").to_owned();
                    let at = content.find(&decoded[i..=close]).unwrap_or(0);
                    links.push((target, at));
                    let (inner, more) = strip_markdown(text);
                    out.push_str(&inner);
                    links.extend(more);
                    i = end + 1;
                    continue;
                }
            }
            _ => {}
        }
        out.push(c);
        i += c.len_utf8();
    }
    (out, links)
}

/// HTML entities a Markdown renderer decodes: numeric ones and the few named ones that
/// spell a reference's characters.
fn decode_entities(content: &str) -> String {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|num|excl|sol|colon|nbsp|amp);").expect("entities")
    });
    re.replace_all(content, |caps: &regex::Captures<'_>| {
        let name = &caps[1];
        let decoded = match name {
            "num" => Some('#'),
            "excl" => Some('!'),
            "sol" => Some('/'),
            "colon" => Some(':'),
            "nbsp" => Some('\u{a0}'),
            "amp" => Some('&'),
            _ if name[1..].starts_with(['x', 'X']) => u32::from_str_radix(&name[2..], 16).ok().and_then(char::from_u32),
            _ => name[1..].parse().ok().and_then(char::from_u32),
        };
        decoded.map_or_else(|| caps[0].to_owned(), String::from)
    })
    .into_owned()
}

fn github_pattern() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r"(?i)(?:^|[^\w])(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?):?\s+(?:(#)([0-9]+)|([0-9a-z_.\-]+/[0-9a-z_.\-]+)#([0-9]+)|https?://[^/\s]+/([0-9a-z_.\-]+/[0-9a-z_.\-]+)/issues/([0-9]+))",
        )
        .expect("GitHub's closing keyword pattern")
    })
}

/// The issues a text closes on GitHub (its mentions are not kept: nothing acts on them).
pub fn github_closing(content: &str) -> Vec<Ref> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < content.len() {
        let Some(caps) = github_pattern().captures(&content[pos..]) else { break };
        let Some(whole) = caps.get(0) else { break };
        let (repo, n) = if caps.get(1).is_some() {
            (None, caps.get(2))
        } else if let Some(r) = caps.get(3) {
            (Some(r.as_str().to_lowercase()), caps.get(4))
        } else {
            (caps.get(5).map(|r| r.as_str().to_lowercase()), caps.get(6))
        };
        if let Some(index) = n.and_then(|n| n.as_str().parse().ok()) {
            out.push(Ref { repo, index, action: Action::Closes });
        }
        pos += whole.end().max(1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const APP: &str = "http://forge.invalid/";

    fn acts(refs: &[Ref]) -> Vec<(Option<&str>, i64, Action)> {
        refs.iter().map(|r| (r.repo.as_deref(), r.index, r.action)).collect()
    }

    #[test]
    fn gitea_reads_keywords_sigils_and_cases_as_its_source_does() {
        use Action::{Closes, None as Mention, Reopens};
        assert_eq!(acts(&gitea_plain("Fixes #3", APP)), [(None, 3, Closes)]);
        assert_eq!(acts(&gitea_plain("fixes: !7", APP)), [(None, 7, Closes)]);
        assert_eq!(acts(&gitea_plain("RESOLVED #2.", APP)), [(None, 2, Closes)]);
        assert_eq!(acts(&gitea_plain("(closes #2)", APP)), [(None, 2, Closes)]);
        assert_eq!(acts(&gitea_plain("reopens #4", APP)), [(None, 4, Reopens)]);
        // Unicode simple case folding: the long s is an s.
        assert_eq!(acts(&gitea_plain("cloſes #5", APP)), [(None, 5, Closes)]);
        // Exactly one space; a keyword inside a word is none; a keyword per reference.
        assert_eq!(acts(&gitea_plain("Fixes  #3", APP)), [(None, 3, Mention)]);
        assert_eq!(acts(&gitea_plain("prefixes #3", APP)), [(None, 3, Mention)]);
        assert_eq!(acts(&gitea_plain("Fixes #3, #4", APP)), [(None, 3, Closes), (None, 4, Mention)]);
        assert_eq!(acts(&gitea_plain("Fixes\t#3", APP)), [(None, 3, Mention)]);
        // Not a reference.
        assert!(gitea_plain("Fixes x#3", APP).is_empty());
        assert!(gitea_plain("Fixes #3x", APP).is_empty());
        // Another repository, and this forge's URL.
        assert_eq!(acts(&gitea_plain("Closes Org/Repo#9", APP)), [(Some("org/repo"), 9, Closes)]);
        assert_eq!(
            acts(&gitea_plain("Closes http://forge.invalid/org/repo/issues/9 now", APP)),
            [(Some("org/repo"), 9, Closes)]
        );
    }

    #[test]
    fn gitea_reads_markdown_after_its_markup() {
        use Action::Closes;
        assert_eq!(acts(&gitea_markdown("**Fixes** #3", APP)), [(None, 3, Closes)]);
        assert_eq!(acts(&gitea_markdown("Fixes &#35;3", APP)), [(None, 3, Closes)]);
        assert_eq!(acts(&gitea_markdown("Fixes \\#3", APP)), [(None, 3, Closes)]);
        assert_eq!(
            acts(&gitea_markdown("Closes [the bug](http://forge.invalid/org/repo/issues/4)", APP)),
            [(Some("org/repo"), 4, Closes)]
        );
        assert_eq!(
            acts(&gitea_markdown("cloſes http://forge.invalid/org/repo/issues/4", APP)),
            [(Some("org/repo"), 4, Closes)]
        );
    }

    #[test]
    fn github_reads_its_documented_keywords() {
        assert_eq!(
            acts(&github_closing("Fixes #3 and closes: org/r#4")),
            [(None, 3, Action::Closes), (Some("org/r"), 4, Action::Closes)]
        );
        assert!(github_closing("see #3").is_empty());
        assert_eq!(
            acts(&github_closing("RESOLVES https://github.com/o/r/issues/8")),
            [(Some("o/r"), 8, Action::Closes)]
        );
    }
}
