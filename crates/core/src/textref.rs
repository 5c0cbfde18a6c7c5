//! The forges' grammar for issue references in text, read **generously**: every reference
//! the forge could act on, and every closing or reopening keyword it could read before one.
//!
//! A forge acts later on text a call lands: Gitea and GitHub close (Gitea also reopens)
//! issues named after a keyword in a commit message that reaches the default branch, in a
//! PR's title, body and (Gitea) comments when it merges, in a merge's own message. The
//! dialects state those texts ([`crate::effect::IssueChange`]); this reads them. Read
//! generously, a text can only be found to close more than the forge would (the call may be
//! refused for it), never less:
//!
//! * references: `#N`; with Gitea's grammar also `!N` (a PR sigil Gitea closes with all the
//!   same); `owner/name#N` (`!N`) in any case; any URL whose path ends in
//!   `owner/name/issues/N` (`pulls/N`, `pull/N`), on any host (the gate does not know the
//!   forge's own URL); with GitHub's grammar also `GH-N`;
//! * the keyword: the word before the reference, whatever stands between them but letters
//!   and digits — markup, colons, any spaces, a Markdown link's text and brackets, an HTML
//!   tag — compared by Unicode simple case folding (`cloſes` is `closes`); the text is also
//!   read with its HTML character references decoded (`&#35;3` is `#3`);
//! * the keywords: the forge's defaults (Gitea: `close[sd]?`, `fix(e[sd])?`, `resolve[sd]?`;
//!   reopening `reopen(s|ed)?`; GitHub: the same closing words, no reopening), and on Gitea
//!   the instance's own lists besides ([`Keywords`]: `[forge] close_keywords` and
//!   `reopen_keywords`, copied from `app.ini`'s `[repository.pull-request] CLOSE_KEYWORDS`
//!   and `REOPEN_KEYWORDS`). The instance's lists replace Gitea's defaults; read together,
//!   the gate can only find more than the forge acts on.
//!
//! Pure, linear in the text's length.

use serde::Serialize;

/// One forge's grammar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grammar {
    /// The closing keywords (lowercase).
    pub close: &'static [&'static str],
    /// The reopening keywords (lowercase).
    pub reopen: &'static [&'static str],
    /// `!N` is a reference too.
    pub bang: bool,
    /// `GH-N` is a reference too.
    pub gh: bool,
    /// The instance's own keywords, read besides the defaults.
    pub instance: Keywords,
}

impl Grammar {
    /// This grammar with the instance's own `keywords` read besides its defaults.
    pub fn with(&self, keywords: Keywords) -> Self {
        Self { instance: keywords, ..self.clone() }
    }

    /// Every word read as closing an issue, then every one read as reopening: the forge's
    /// defaults, then the instance's own (what `doctor` shows the operator).
    pub fn words(&self) -> (Vec<String>, Vec<String>) {
        let all = |defaults: &[&str], instance: &[String]| {
            let mut out: Vec<String> = defaults.iter().map(|w| (*w).to_owned()).collect();
            out.extend(instance.iter().filter(|w| !defaults.contains(&w.as_str())).cloned());
            out
        };
        (all(self.close, self.instance.close()), all(self.reopen, self.instance.reopen()))
    }
}

/// An instance's own closing and reopening keywords (Gitea's `[repository.pull-request]
/// CLOSE_KEYWORDS` and `REOPEN_KEYWORDS`), folded, each a word of letters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Keywords {
    close: Vec<String>,
    reopen: Vec<String>,
}

impl Keywords {
    /// No keywords of the instance's own.
    pub const NONE: Self = Self { close: Vec::new(), reopen: Vec::new() };

    /// The lists as an operator copies them from `app.ini` (each entry trimmed, as Gitea
    /// trims them). Refused, naming the list (`close` or `reopen`) and the entry: an empty
    /// entry, and a word with anything but letters — Gitea drops such a word, and a keyword
    /// whose reading the gate would have to guess is refused rather than read one way; a
    /// word in both lists (Gitea reads it as closing, the operator meant one of them).
    pub fn new(close: &[String], reopen: &[String]) -> Result<Self, KeywordError> {
        let list = |name: &'static str, words: &[String]| -> Result<Vec<String>, KeywordError> {
            let mut out: Vec<String> = Vec::new();
            for word in words {
                let w = word.trim();
                if w.is_empty() {
                    return Err(KeywordError::Empty(name));
                }
                if let Some(c) = w.chars().find(|c| !c.is_alphabetic()) {
                    return Err(KeywordError::NotLetters { list: name, word: word.clone(), c });
                }
                let folded = fold(w);
                if !out.contains(&folded) {
                    out.push(folded);
                }
            }
            Ok(out)
        };
        let close = list("close", close)?;
        let reopen = list("reopen", reopen)?;
        if let Some(both) = close.iter().find(|w| reopen.contains(w)) {
            return Err(KeywordError::InBoth(both.clone()));
        }
        Ok(Self { close, reopen })
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.close.is_empty() && self.reopen.is_empty()
    }

    /// The closing keywords (folded).
    pub fn close(&self) -> &[String] {
        &self.close
    }

    /// The reopening keywords (folded).
    pub fn reopen(&self) -> &[String] {
        &self.reopen
    }
}

/// Why `[forge]` keyword lists are refused ([`Keywords::new`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeywordError {
    /// An empty entry in the list (`close` or `reopen`).
    Empty(&'static str),
    /// A word with anything but letters.
    NotLetters {
        /// `close` or `reopen`.
        list: &'static str,
        /// The entry as written.
        word: String,
        /// The first character that is not a letter.
        c: char,
    },
    /// A (folded) word in both lists.
    InBoth(String),
}

impl std::fmt::Display for KeywordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Empty(list) => write!(f, "{list}_keywords: an empty keyword"),
            Self::NotLetters { list, word, c } => write!(
                f,
                "{list}_keywords: {word:?} holds {c:?}: a keyword is a word of letters only (Gitea ignores any \
                 other, and the gate does not guess how one would be read)"
            ),
            Self::InBoth(both) => {
                write!(f, "{both:?} is in both close_keywords and reopen_keywords: a keyword either closes or reopens")
            }
        }
    }
}

impl std::error::Error for KeywordError {}

/// The default closing keywords of both forges (Gitea's `CLOSE_KEYWORDS`, GitHub's list).
pub const CLOSE: &[&str] = &["close", "closes", "closed", "fix", "fixes", "fixed", "resolve", "resolves", "resolved"];

/// Gitea's grammar (`modules/references`, the default keywords).
pub const GITEA: Grammar = Grammar {
    close: CLOSE,
    reopen: &["reopen", "reopens", "reopened"],
    bang: true,
    gh: false,
    instance: Keywords::NONE,
};

/// GitHub's grammar (its documented closing keywords).
pub const GITHUB: Grammar = Grammar { close: CLOSE, reopen: &[], bang: false, gh: true, instance: Keywords::NONE };

/// What a reference asks of the issue it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Act {
    /// A mention: the forge records a cross-reference, nothing more.
    Mention,
    /// Close it.
    Close,
    /// Reopen it.
    Reopen,
}

/// One reference a text makes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TextRef {
    /// The repository it names (`owner`, `name`, as written), when it names one.
    pub repo: Option<(String, String)>,
    /// The issue's (or PR's) number.
    pub number: u64,
    /// What it asks.
    pub act: Act,
    /// The words that say so (the keyword and the reference), as the text has them.
    pub words: String,
}

/// Every reference `text` makes, as `grammar`'s forge could read it.
pub fn read(text: &str, grammar: &Grammar) -> Vec<TextRef> {
    let mut found: Vec<TextRef> = Vec::new();
    let decoded = decode_references(text);
    for variant in std::iter::once(text).chain(decoded.as_deref()) {
        for r in scan(variant, grammar) {
            if !found.iter().any(|f| f.repo == r.repo && f.number == r.number && f.act == r.act) {
                found.push(r);
            }
        }
    }
    found
}

/// A repository name's characters (the forges': letters, digits, `-`, `_`, `.`).
fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// The name ending right before byte `end` of `text` (at most 100 characters), and where it
/// starts.
fn name_before(text: &str, end: usize) -> Option<(&str, usize)> {
    let head = &text[..end];
    let start = head.char_indices().rev().take_while(|(_, c)| name_char(*c)).take(100).last().map(|(i, _)| i)?;
    Some((&text[start..end], start))
}

/// A reference in a text: where it starts and ends, the repository it names, the number.
type Token = (usize, usize, Option<(String, String)>, u64);

/// The reference tokens of `text`.
fn tokens(text: &str, grammar: &Grammar) -> Vec<Token> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let digits_at = |i: usize| -> Option<(u64, usize)> {
        let len = bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
        if len == 0 {
            return None;
        }
        // More digits than a number holds names no issue.
        text[i..i + len].parse().ok().map(|n| (n, i + len))
    };
    for (i, c) in text.char_indices() {
        // `&#35;` is a character reference, read decoded (`decode_references`).
        let sigil = (c == '#' && !text[..i].ends_with('&')) || (grammar.bang && c == '!');
        if sigil && let Some((number, end)) = digits_at(i + 1) {
            // `owner/name#N`, else `#N`.
            let qualified = name_before(text, i).and_then(|(name, name_start)| {
                let slash = name_start.checked_sub(1).filter(|s| bytes[*s] == b'/')?;
                let (owner, owner_start) = name_before(text, slash)?;
                Some(((owner.to_owned(), name.to_owned()), owner_start))
            });
            match qualified {
                Some((repo, start)) => out.push((start, end, Some(repo), number)),
                None => out.push((i, end, None, number)),
            }
        }
        if grammar.gh
            && (c == 'G' || c == 'g')
            && text[i..].get(..3).is_some_and(|p| p.eq_ignore_ascii_case("gh-"))
            && let Some((number, end)) = digits_at(i + 3)
        {
            out.push((i, end, None, number));
        }
        if c == '/' {
            // `…/owner/name/issues/N`: this slash is the one before `issues`.
            for kind in ["issues/", "pulls/", "pull/"] {
                let rest = &text[i + 1..];
                if !rest.starts_with(kind) {
                    continue;
                }
                let Some((number, end)) = digits_at(i + 1 + kind.len()) else { continue };
                let Some((name, name_start)) = name_before(text, i) else { continue };
                let Some(slash) = name_start.checked_sub(1).filter(|s| bytes[*s] == b'/') else { continue };
                let Some((owner, owner_start)) = name_before(text, slash) else { continue };
                // The URL's start: back to the whitespace, a bracket or the text's start.
                let start = text[..owner_start]
                    .char_indices()
                    .rev()
                    .take_while(|(_, c)| !c.is_whitespace() && !matches!(c, '(' | '[' | '<' | '"' | '\''))
                    .last()
                    .map_or(owner_start, |(s, _)| s);
                out.push((start, end, Some((owner.to_owned(), name.to_owned())), number));
            }
        }
    }
    out
}

fn scan(text: &str, grammar: &Grammar) -> Vec<TextRef> {
    tokens(text, grammar)
        .into_iter()
        .map(|(start, end, repo, number)| {
            let (word, word_start) = word_before(text, start);
            let act = if keyword(&word, grammar.close, &grammar.instance.close) {
                Act::Close
            } else if keyword(&word, grammar.reopen, &grammar.instance.reopen) {
                Act::Reopen
            } else {
                Act::Mention
            };
            let from = if act == Act::Mention { start } else { word_start };
            TextRef { repo, number, act, words: text[from..end].chars().take(200).collect() }
        })
        .collect()
}

/// The word before byte `at`: whatever is not a letter or a digit skipped — markup, spaces,
/// colons, an HTML tag, a Markdown link's text up to its `[` — then the letters before; and
/// where it starts.
fn word_before(text: &str, at: usize) -> (String, usize) {
    let mut end = at;
    // Skip back over separators, HTML tags and `](` link syntax.
    loop {
        let head = &text[..end];
        let Some((i, c)) = head.char_indices().next_back() else { break };
        if c.is_alphanumeric() {
            break;
        }
        if c == '>'
            && let Some(open) = head.rfind('<')
        {
            end = open;
            continue;
        }
        if c == '(' && head[..i].ends_with(']') {
            // A link's target: its keyword stands before the link's `[`.
            match head[..i].rfind('[') {
                Some(open) => end = open,
                None => end = i,
            }
            continue;
        }
        end = i;
    }
    let head = &text[..end];
    let start = head.char_indices().rev().take_while(|(_, c)| c.is_alphabetic()).last().map_or(end, |(i, _)| i);
    (text[start..end].to_owned(), start)
}

/// Unicode simple case folding, as the forges compare keywords (`ſ` is `s`, `K` is `k`).
fn fold(word: &str) -> String {
    word.chars().flat_map(char::to_uppercase).flat_map(char::to_lowercase).collect()
}

fn keyword(word: &str, defaults: &[&str], instance: &[String]) -> bool {
    if word.is_empty() {
        return false;
    }
    let folded = fold(word);
    defaults.iter().any(|k| folded == *k) || instance.contains(&folded)
}

/// `text` with the HTML character references a Markdown renderer decodes that could spell a
/// reference (`&#35;`, `&#x23;`, `&num;`, `&excl;`, `&sol;`, `&colon;`, `&nbsp;`), when it
/// has any.
fn decode_references(text: &str) -> Option<String> {
    if !text.contains('&') {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let decoded = rest.find(';').filter(|e| *e <= 12).and_then(|e| {
            let name = &rest[1..e];
            let c = match name {
                "num" => '#',
                "excl" => '!',
                "sol" => '/',
                "colon" => ':',
                "nbsp" => ' ',
                "amp" => '&',
                _ => {
                    let n = name.strip_prefix('#')?;
                    let code = match n.strip_prefix(['x', 'X']) {
                        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                        None => n.parse().ok()?,
                    };
                    char::from_u32(code)?
                }
            };
            Some((c, e))
        });
        match decoded {
            Some((c, e)) => {
                out.push(c);
                rest = &rest[e + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acts(text: &str, g: &Grammar) -> Vec<(Option<String>, u64, Act)> {
        read(text, g).into_iter().map(|r| (r.repo.map(|(o, n)| format!("{o}/{n}")), r.number, r.act)).collect()
    }

    #[test]
    fn every_form_gitea_acts_on_is_read() {
        use Act::{Close, Mention, Reopen};
        let g = &GITEA;
        assert_eq!(acts("Fixes #3", g), [(None, 3, Close)]);
        assert_eq!(acts("fixes: !7", g), [(None, 7, Close)]);
        assert_eq!(acts("cloſes #5", g), [(None, 5, Close)]);
        assert_eq!(acts("REOPENS #4", g), [(None, 4, Reopen)]);
        assert_eq!(acts("Closes Org/Repo#9", g), [(Some("Org/Repo".into()), 9, Close)]);
        assert_eq!(acts("resolves http://x.invalid/o/r/issues/2", g), [(Some("o/r".into()), 2, Close)]);
        assert_eq!(acts("Closes [the bug](https://h/o/r/pulls/8)", g), [(Some("o/r".into()), 8, Close)]);
        assert_eq!(acts("**Fixes** <b>#3</b>", g), [(None, 3, Close)]);
        assert_eq!(acts("Fixes &#35;3", g), [(None, 3, Close)]);
        assert_eq!(acts("Fixes \\#3", g), [(None, 3, Close)]);
        // Generous: any space, a newline, a colon without one.
        assert_eq!(acts("Fixes\n\n#3", g), [(None, 3, Close)]);
        // A keyword per reference; a word that only holds one is none.
        assert_eq!(acts("Fixes #1, #2", g), [(None, 1, Close), (None, 2, Mention)]);
        assert_eq!(acts("prefixes #3 and see #4", g), [(None, 3, Mention), (None, 4, Mention)]);
        assert!(acts("nothing here #x", g).is_empty());
    }

    #[test]
    fn github_reads_its_own_forms() {
        let g = &GITHUB;
        assert_eq!(acts("Closes GH-4", g), [(None, 4, Act::Close)]);
        assert_eq!(acts("Fixes !4", g), Vec::new(), "no `!` on GitHub");
        assert_eq!(acts("reopens #4", g), [(None, 4, Act::Mention)], "no reopening keywords");
    }

    #[test]
    fn the_instance_s_own_keywords_are_read_besides_the_defaults() {
        let words = |w: &[&str]| w.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let k = Keywords::new(&words(&[" Schließt", "修复"]), &words(&["Öffnet"])).unwrap();
        let g = GITEA.with(k);
        assert_eq!(acts("schliesst #3", &GITEA), [(None, 3, Act::Mention)], "not a default");
        assert_eq!(acts("SCHLIESST #3", &g), [(None, 3, Act::Close)]);
        assert_eq!(acts("修复 #4", &g), [(None, 4, Act::Close)]);
        assert_eq!(acts("öffnet: !5", &g), [(None, 5, Act::Reopen)]);
        assert_eq!(acts("Fixes #6", &g), [(None, 6, Act::Close)], "the defaults stay read");
        assert_eq!(acts("dasschließt #7", &g), [(None, 7, Act::Mention)], "a word that only holds one is none");
    }

    #[test]
    fn a_keyword_the_gate_would_have_to_guess_is_refused() {
        let words = |w: &[&str]| w.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        for bad in [&["fix-it"][..], &["close it"], &[""], &["fix2"], &["fix:"]] {
            let e = Keywords::new(&words(bad), &[]).unwrap_err().to_string();
            assert!(e.starts_with("close_keywords: "), "{bad:?}: {e}");
        }
        let e = Keywords::new(&words(&["zu"]), &words(&["ZU"])).unwrap_err().to_string();
        assert!(e.contains("both close_keywords and reopen_keywords"), "{e}");
        assert!(Keywords::new(&[], &[]).unwrap().is_empty());
    }

    #[test]
    fn a_reference_s_words_are_kept() {
        let r = read("see it. Fixes: !7 now", &GITEA);
        assert_eq!(r[0].words, "Fixes: !7");
    }
}
