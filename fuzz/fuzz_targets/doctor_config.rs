//! The doctor's client config readers (crates/doctor/src/read.rs): one text read
//! as every file every client keeps (Claude Code, Claude Desktop, Gemini, Codex, Cursor,
//! VS Code: strict JSON, JSON with comments, JSONC, TOML), and the doctor's repair edit on
//! what was read.
//!
//! Invariants: no panic; a file that cannot be read is an error with a line and column
//! inside the text and a message; what is read is consistent (every entry in a section
//! that exists, on a line of the file, numbered in order); reading is deterministic; and
//! setting an env key on an entry (the doctor's repair) gives a file that reads again with
//! that entry carrying the key, everything else where it was.
#![no_main]

use fleetgate_doctor::clients::{Client, Layout, SourceFile, locations};
use fleetgate_doctor::edit;
use fleetgate_doctor::read::{Launch, parse};
use fleetgate_doctor::repair::Edit;
use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;

fn sources() -> &'static [SourceFile] {
    static SOURCES: OnceLock<Vec<SourceFile>> = OnceLock::new();
    SOURCES.get_or_init(|| {
        let layout = Layout {
            home: PathBuf::from("/home/u"),
            config_dir: PathBuf::from("/home/u/.config"),
            codex_home: PathBuf::from("/home/u/.codex"),
            project: PathBuf::from("/p"),
            macos: false,
        };
        let mut all: Vec<SourceFile> = Client::ALL.iter().flat_map(|c| locations(*c, &layout)).collect();
        // One per distinct way of reading (format and sections): the path plays no part.
        all.dedup_by(|a, b| a.format == b.format && a.sections == b.sections);
        all
    })
}

fuzz_target!(|data: &[u8]| {
    // The doctor reads a file as UTF-8 text; other bytes are refused before parsing.
    let Ok(text) = std::str::from_utf8(data) else { return };
    // Lines end at `\n`, `\r\n` or a lone `\r`, as editors count them.
    let lines = 1 + text.replace("\r\n", "\n").bytes().filter(|b| matches!(b, b'\n' | b'\r')).count();
    for source in sources() {
        let parsed = match parse(text, source) {
            Ok(parsed) => parsed,
            Err(e) => {
                assert!(!e.message.trim().is_empty(), "an error without a message");
                assert!((1..=lines).contains(&e.line) && e.column >= 1, "{e:?} outside {lines} lines");
                continue;
            }
        };
        assert_eq!(parse(text, source).as_ref(), Ok(&parsed), "reading is deterministic");
        for (i, entry) in parsed.entries.iter().enumerate() {
            assert!(entry.section < parsed.sections.len(), "{entry:?}");
            assert!((1..=lines).contains(&entry.line), "{entry:?} outside {lines} lines");
            let before = parsed.entries[..i].iter().filter(|e| e.section == entry.section).count();
            assert_eq!(entry.index, before, "entries are numbered in order within a section");
        }
        repair(text, source, &parsed);
    }
});

/// Set an env key on the first entry that launches a command, as the doctor's repair
/// does, and read the result back.
fn repair(text: &str, source: &SourceFile, parsed: &fleetgate_doctor::read::ParsedFile) {
    let Some(at) = parsed.entries.iter().position(|e| matches!(e.launch, Launch::Stdio { .. })) else { return };
    let (key, value) = ("GITEA_MCP_CLIENT", "fu\"zz\\ \u{e9}");
    let edits = [Edit::SetEnv { entry: at, key: key.into(), value: value.into() }];
    let Ok(repaired) = edit::apply(text, source, parsed, &edits) else { return };
    let again = parse(&repaired, source)
        .unwrap_or_else(|e| panic!("the repaired file does not read again ({e:?}):\n{repaired}"));
    assert_eq!(again.sections, parsed.sections, "a repair changed the sections:\n{repaired}");
    assert_eq!(again.entries.len(), parsed.entries.len(), "a repair changed the entries:\n{repaired}");
    let entry = &again.entries[at];
    assert_eq!(entry.name, parsed.entries[at].name);
    assert_eq!(entry.launch, parsed.entries[at].launch, "a repair changed the launch:\n{repaired}");
    assert!(
        entry.env.iter().any(|(k, v)| k == key && v == value),
        "the repaired entry lacks {key}: {:?}\n{repaired}",
        entry.env
    );
}
