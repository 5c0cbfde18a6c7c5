//! The book under `docs/` and the README, checked against the code: every `fleetgate` command
//! in a shell block parses with the real CLI (a synopsis both without its `[optional]` parts
//! and with all of them), every page is in `SUMMARY.md`, and every link between pages lands on
//! a page and a heading that exist. (`scripts/docs` builds the book with mdBook.)

use clap::Parser as _;
use fleetgate::cli::args::Cli;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every Markdown file of the book, and the README, as (path relative to the root, text).
fn pages() -> Vec<(String, String)> {
    let mut files = vec!["README.md".to_owned()];
    let mut dirs = vec![root().join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path.strip_prefix(root()).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    files.sort();
    files.into_iter().map(|f| (f.clone(), std::fs::read_to_string(root().join(&f)).unwrap())).collect()
}

/// The command lines of a page's shell blocks (```sh, ```bash, ```console), continuation
/// lines joined, a `$ ` prompt dropped, with their line numbers.
fn shell_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let (mut fence, mut pending, mut start) = (None::<String>, String::new(), 0);
    for (i, line) in text.lines().enumerate() {
        if let Some(info) = line.strip_prefix("```") {
            fence = if fence.is_some() { None } else { Some(info.trim().to_owned()) };
            continue;
        }
        if !matches!(fence.as_deref(), Some("sh" | "bash" | "console")) {
            continue;
        }
        if pending.is_empty() {
            start = i + 1;
        }
        match line.trim_end().strip_suffix('\\') {
            Some(head) => {
                pending.push_str(head);
                pending.push(' ');
            }
            None => {
                pending.push_str(line);
                let full = std::mem::take(&mut pending);
                out.push((start, full.trim().trim_start_matches("$ ").to_owned()));
            }
        }
    }
    out
}

/// The words of a command line as a shell would split them, up to a comment, a pipe, a
/// redirection or a command separator; leading `NAME=value` assignments dropped.
fn words(line: &str) -> Vec<String> {
    let mut cut = line.len();
    let (mut single, mut double) = (false, false);
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            b'#' if !single && !double && (i == 0 || bytes[i - 1] == b' ') => {
                cut = i;
                break;
            }
            b'|' | b'>' | b';' | b'&' if !single && !double => {
                cut = i;
                break;
            }
            _ => {}
        }
    }
    let words = shlex::split(&line[..cut]).unwrap_or_else(|| panic!("unbalanced quotes in {line:?}"));
    words
        .into_iter()
        .skip_while(|w| w.contains('=') && w.chars().next().is_some_and(|c| c.is_ascii_uppercase()))
        .collect()
}

/// A synopsis without its `[optional]` parts, and with all of them; `…` dropped. Brackets
/// inside quotes are an argument's own (JSON), not the synopsis's.
fn forms(line: &str) -> [String; 2] {
    let line = line.replace('…', "");
    let (mut bare, mut full) = (String::new(), String::new());
    let (mut depth, mut single, mut double) = (0usize, false, false);
    for c in line.chars() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '[' if !single && !double => {
                depth += 1;
                continue;
            }
            ']' if !single && !double && depth > 0 => {
                depth -= 1;
                continue;
            }
            _ => {}
        }
        full.push(c);
        if depth == 0 {
            bare.push(c);
        }
    }
    [bare, full]
}

#[test]
fn every_fleetgate_command_in_the_book_parses_with_the_real_cli() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for (file, text) in pages() {
        for (line_no, line) in shell_lines(&text) {
            let first = words(&line);
            if first.first().map(String::as_str) != Some("fleetgate") {
                continue;
            }
            for form in forms(&line) {
                let argv = words(&form);
                checked += 1;
                if let Err(e) = Cli::try_parse_from(&argv) {
                    let why = e.to_string();
                    failures
                        .push(format!("{file}:{line_no}: {argv:?}\n    {}", why.lines().next().unwrap_or_default()));
                }
            }
        }
    }
    assert!(checked > 50, "only {checked} commands found: the extraction broke");
    assert!(failures.is_empty(), "commands in the docs the CLI refuses:\n{}", failures.join("\n"));
}

/// GitHub's and mdBook's heading anchor: lower case, spaces to `-`, punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut fence = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fence = !fence;
        } else if !fence && line.starts_with('#') {
            out.insert(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

/// The `](target)` links of a page outside code blocks.
fn links(text: &str) -> Vec<String> {
    let mut fence = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let tail = &rest[at + 2..];
            let Some(end) = tail.find(')') else { break };
            out.push(tail[..end].to_owned());
            rest = &tail[end..];
        }
    }
    out
}

#[test]
fn every_page_is_in_the_summary_and_every_link_lands() {
    let pages = pages();
    let summary = std::fs::read_to_string(root().join("docs/SUMMARY.md")).unwrap();
    let listed: BTreeSet<String> = links(&summary).into_iter().map(|l| format!("docs/{l}")).collect();
    for (file, _) in &pages {
        if file.starts_with("docs/") && file != "docs/SUMMARY.md" {
            assert!(listed.contains(file), "{file} is not in docs/SUMMARY.md: the book would not show it");
        }
    }
    let mut broken = Vec::new();
    for (file, text) in &pages {
        let dir = Path::new(file).parent().unwrap();
        for link in links(text) {
            if link.starts_with("http://") || link.starts_with("https://") || link.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = link.split_once('#').map_or((link.as_str(), None), |(p, f)| (p, Some(f)));
            let target = if path.is_empty() { PathBuf::from(file) } else { dir.join(path) };
            let normal = std::path::absolute(root().join(&target)).unwrap();
            let Ok(body) = std::fs::read_to_string(&normal) else {
                broken.push(format!("{file}: ({link}) names no file"));
                continue;
            };
            if !normal.canonicalize().unwrap().starts_with(root().canonicalize().unwrap()) {
                broken.push(format!("{file}: ({link}) points outside the repository"));
            }
            if let Some(fragment) = fragment.filter(|_| path.ends_with(".md") || path.is_empty())
                && !anchors(&body).contains(fragment)
            {
                broken.push(format!("{file}: ({link}) names no heading of {}", target.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_example_in_the_help_parses_with_the_real_cli() {
    use clap::CommandFactory as _;
    let cli = Cli::command();
    let mut examples = Vec::new();
    for sub in cli.get_subcommands() {
        if let Some(text) = sub.get_after_help() {
            examples.extend(text.to_string().lines().filter_map(|l| l.strip_prefix("  ")).map(str::to_owned));
        }
    }
    assert!(examples.len() >= 20, "{examples:?}");
    for line in examples {
        let argv = words(&line);
        assert_eq!(argv.first().map(String::as_str), Some("fleetgate"), "{line}");
        if let Err(e) = Cli::try_parse_from(&argv) {
            panic!("the help's example {line:?} does not parse: {e}");
        }
    }
}

#[test]
fn a_synopsis_is_checked_in_both_its_forms() {
    let [bare, full] = forms("fleetgate pr list [--all] [--json]");
    assert_eq!((words(&bare), words(&full)), (words("fleetgate pr list"), words("fleetgate pr list --all --json")));
    // A bracket inside a quoted argument is not a synopsis.
    let [a, b] = forms(r#"fleetgate capability --tool x --args '["a"]'"#);
    assert_eq!(a, b);
    assert!(Cli::try_parse_from(words("fleetgate pr list --no-such-flag")).is_err());
}

/// The TOML blocks of a page, with their line numbers.
fn toml_blocks(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut block: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        match (&mut block, line.strip_prefix("```")) {
            (None, Some(info)) if info.trim() == "toml" => block = Some((i + 1, String::new())),
            (Some(_), Some(_)) => out.extend(block.take()),
            (Some((_, body)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, _) => {}
        }
    }
    out
}

/// Every TOML example of the book loads as a roster (issue 53): one that is a whole roster as
/// it stands, a fragment beside the five members of the `prgs` fleet (and, when it names no
/// `[fleet]`, the gitea-mcp profile the policy chapter's examples are written for). An example
/// the loader refuses is a book that teaches what does not run.
#[test]
fn every_toml_example_of_the_book_loads() {
    const MEMBERS: &str = "\n[[members]]\nnamespace = \"gitea-author\"\nprofile = \"prgs-author\"\nrole = \"author\"\n\n\
        [[members]]\nnamespace = \"gitea-reviewer\"\nprofile = \"prgs-reviewer\"\nrole = \"reviewer\"\n\n\
        [[members]]\nnamespace = \"gitea-merger\"\nprofile = \"prgs-merger\"\nrole = \"merger\"\n\n\
        [[members]]\nnamespace = \"gitea-controller\"\nprofile = \"prgs-controller\"\nrole = \"controller\"\n\n\
        [[members]]\nnamespace = \"gitea-reconciler\"\nprofile = \"prgs-reconciler\"\nrole = \"reconciler\"\n";
    let mut loaded = Vec::new();
    let mut failed = Vec::new();
    for (page, text) in pages() {
        for (line, block) in toml_blocks(&text) {
            let has = |table: &str| block.lines().any(|l| l.trim_start().starts_with(table));
            let mut roster = block.clone();
            if !has("[fleet]") {
                roster = format!("[fleet]\nforge = \"gitea-mcp\"\n\n{roster}");
            }
            if !has("[[members]]") {
                roster.push_str(MEMBERS);
            }
            match fleetgate_config::FleetConfig::parse(&roster, &format!("{page}:{line}")) {
                Ok(_) => loaded.push(format!("{page}:{line}")),
                Err(e) => failed.push(format!("{page}:{line}: {e}")),
            }
        }
    }
    assert!(failed.is_empty(), "book examples the loader refuses:\n{}", failed.join("\n"));
    for page in ["docs/policy.md", "docs/configuration.md"] {
        assert!(loaded.iter().any(|l| l.starts_with(page)), "{page} has TOML examples: {loaded:?}");
    }
}
