//! Reading one client file: its text → the server entries of each section it
//! holds, each with its line; or the reason it cannot be read, with line and
//! column. Pure: the shell hands in the text.
//!
//! JSON is read in the client's own dialect (see [`Format`]), so a comment in
//! a file whose client rejects comments is reported, not silently accepted.

use super::clients::{Format, SectionSpec, SourceFile};
use jsonc_parser::ast::{Object, ObjectProp, Value};
use jsonc_parser::common::Ranged;
use jsonc_parser::{CollectOptions, ParseOptions};

/// A file that cannot be read or parsed: where and why.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FileError {
    /// 1-based line (1 when the whole file is at fault).
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What is wrong, lowercase.
    pub message: String,
}

/// How an entry starts its server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Launch {
    /// A local process: `command` and `args`.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// A remote server (`url`, `httpUrl`, `serverUrl`): nothing is launched.
    Remote,
    /// Neither: not an object, or no `command`.
    Unknown,
}

/// One server definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Index into [`ParsedFile::sections`].
    pub section: usize,
    /// Its position among the section's entries (edits address JSON entries
    /// by position, since a JSON object may repeat a name).
    pub index: usize,
    /// Its name (the key).
    pub name: String,
    /// The line its name is on.
    pub line: usize,
    /// How it launches.
    pub launch: Launch,
    /// Its `env`, in file order (`null` values, which unset a key, left out).
    pub env: Vec<(String, String)>,
}

/// A servers object that exists in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    /// Its key path (`["projects", "/p", "mcpServers"]`).
    pub path: Vec<String>,
    /// `user`, `local`, `project`, `workspace`.
    pub scope: &'static str,
}

/// What a file holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParsedFile {
    /// The sections present.
    pub sections: Vec<Section>,
    /// Every entry of every section, in file order per section.
    pub entries: Vec<Entry>,
}

/// Parse options for a JSON dialect: only what the client itself accepts.
pub fn json_options(format: Format) -> ParseOptions {
    let (comments, trailing) = match format {
        Format::Json { comments, trailing_commas } => (comments, trailing_commas),
        Format::Toml => (false, false),
    };
    ParseOptions {
        allow_comments: comments,
        allow_trailing_commas: trailing,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        ..ParseOptions::default()
    }
}

/// 1-based line and column (in characters) of a byte offset. Lines end at `\n`, `\r\n` or
/// a lone `\r`, as editors and the JSON parser count them, so an entry's line and a parse
/// error's line agree in every file.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let bytes = before.as_bytes();
    let breaks = bytes
        .iter()
        .enumerate()
        .filter(|&(i, b)| *b == b'\n' || *b == b'\r' && text.as_bytes().get(i + 1) != Some(&b'\n'));
    let (line, start) = breaks.fold((1, 0), |(line, _), (i, _)| (line + 1, i + 1));
    (line, before[start..].chars().count() + 1)
}

fn error_at(text: &str, offset: usize, message: String) -> FileError {
    let (line, column) = line_col(text, offset);
    FileError { line, column, message }
}

/// Read `text` as `source`'s client reads it.
pub fn parse(text: &str, source: &SourceFile) -> Result<ParsedFile, FileError> {
    if text.trim().is_empty() {
        return Ok(ParsedFile::default());
    }
    match source.format {
        Format::Json { .. } => parse_json(text, source),
        Format::Toml => parse_toml(text, source),
    }
}

fn parse_json(text: &str, source: &SourceFile) -> Result<ParsedFile, FileError> {
    // The error's position from its offset, counted as every other position here is.
    let ast = jsonc_parser::parse_to_ast(text, &CollectOptions::default(), &json_options(source.format))
        .map_err(|e| error_at(text, e.range().start, e.kind().to_string().to_lowercase()))?;
    let Some(Value::Object(root)) = &ast.value else {
        return Err(error_at(text, 0, "the file is not a JSON object".into()));
    };
    let mut out = ParsedFile::default();
    for spec in &source.sections {
        let Some((path, scope)) = json_section_path(root, spec) else { continue };
        let mut object = root;
        let mut found = true;
        for key in &path {
            match object.get(key) {
                None => found = false,
                Some(ObjectProp { value: Value::Object(o), .. }) => object = o,
                Some(p) => return Err(error_at(text, p.value.range().start, format!("{key:?} is not an object"))),
            }
            if !found {
                break;
            }
        }
        if !found {
            continue;
        }
        let section = out.sections.len();
        out.sections.push(Section { path, scope });
        for (index, prop) in object.properties.iter().enumerate() {
            out.entries.push(json_entry(text, section, index, prop));
        }
    }
    Ok(out)
}

/// The key path of a section, or `None` when the file has no place for it
/// (Claude Code's local scope for a project it has never seen).
fn json_section_path(root: &Object<'_>, spec: &SectionSpec) -> Option<(Vec<String>, &'static str)> {
    match spec {
        SectionSpec::Key { path, scope } => Some((path.clone(), scope)),
        SectionSpec::ClaudeProject { project } => {
            let projects = root.get_object("projects")?;
            let want = project.display().to_string();
            let want = want.trim_end_matches('/');
            let key = projects.properties.iter().find(|p| p.name.as_str().trim_end_matches('/') == want)?;
            Some((vec!["projects".into(), key.name.as_str().to_owned(), "mcpServers".into()], "local"))
        }
    }
}

fn json_text(value: &Value<'_>) -> Option<String> {
    match value {
        Value::StringLit(s) => Some(s.value.to_string()),
        Value::NumberLit(n) => Some(n.value.to_owned()),
        Value::BooleanLit(b) => Some(b.value.to_string()),
        _ => None,
    }
}

fn json_entry(text: &str, section: usize, index: usize, prop: &ObjectProp<'_>) -> Entry {
    let name = prop.name.as_str().to_owned();
    let line = line_col(text, prop.range.start).0;
    let Value::Object(o) = &prop.value else {
        return Entry { section, index, name, line, launch: Launch::Unknown, env: Vec::new() };
    };
    let string = |key: &str| o.get(key).and_then(|p| json_text(&p.value));
    let remote = ["url", "httpUrl", "serverUrl"].iter().any(|k| o.get(k).is_some())
        || string("type").is_some_and(|t| t != "stdio");
    let launch = match string("command") {
        Some(command) if !remote => Launch::Stdio {
            command,
            args: o.get_array("args").map(|a| a.elements.iter().filter_map(json_text).collect()).unwrap_or_default(),
        },
        _ if remote => Launch::Remote,
        _ => Launch::Unknown,
    };
    let env = o
        .get_object("env")
        .map(|e| e.properties.iter().filter_map(|p| Some((p.name.as_str().to_owned(), json_text(&p.value)?))).collect())
        .unwrap_or_default();
    Entry { section, index, name, line, launch, env }
}

fn parse_toml(text: &str, source: &SourceFile) -> Result<ParsedFile, FileError> {
    let doc = toml_edit::Document::parse(text).map_err(|e| {
        let first = e.message().lines().next().unwrap_or("invalid toml").trim().to_lowercase();
        error_at(text, e.span().map_or(0, |s| s.start), first)
    })?;
    let mut out = ParsedFile::default();
    for spec in &source.sections {
        let SectionSpec::Key { path, scope } = spec else { continue };
        let mut item = doc.as_item();
        let mut found = true;
        for key in path {
            match item.get(key) {
                Some(next) if next.is_table_like() => item = next,
                Some(next) => {
                    let at = next.span().map_or(0, |s| s.start);
                    return Err(error_at(text, at, format!("{key:?} is not a table")));
                }
                None => found = false,
            }
            if !found {
                break;
            }
        }
        let Some(table) = item.as_table_like().filter(|_| found) else { continue };
        let section = out.sections.len();
        out.sections.push(Section { path: path.clone(), scope });
        for (index, (name, value)) in table.iter().enumerate() {
            let at = table.key(name).and_then(|k| k.span()).or_else(|| value.span()).map_or(0, |s| s.start);
            out.entries.push(toml_entry(section, index, name, line_col(text, at).0, value));
        }
    }
    Ok(out)
}

fn toml_text(value: &toml_edit::Value) -> Option<String> {
    match value {
        toml_edit::Value::String(s) => Some(s.value().clone()),
        toml_edit::Value::Integer(i) => Some(i.value().to_string()),
        toml_edit::Value::Float(f) => Some(f.value().to_string()),
        toml_edit::Value::Boolean(b) => Some(b.value().to_string()),
        _ => None,
    }
}

fn toml_entry(section: usize, index: usize, name: &str, line: usize, item: &toml_edit::Item) -> Entry {
    let name = name.to_owned();
    let Some(t) = item.as_table_like() else {
        return Entry { section, index, name, line, launch: Launch::Unknown, env: Vec::new() };
    };
    let string = |key: &str| t.get(key).and_then(|i| i.as_value()).and_then(toml_text);
    let launch = match string("command") {
        Some(command) => Launch::Stdio {
            command,
            args: t
                .get("args")
                .and_then(|a| a.as_array())
                .map(|a| a.iter().filter_map(toml_text).collect())
                .unwrap_or_default(),
        },
        None if t.get("url").is_some() => Launch::Remote,
        None => Launch::Unknown,
    };
    let env = t
        .get("env")
        .and_then(|e| e.as_table_like())
        .map(|e| e.iter().filter_map(|(k, v)| Some((k.to_owned(), toml_text(v.as_value()?)?))).collect())
        .unwrap_or_default();
    Entry { section, index, name, line, launch, env }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::{Client, test_source as source};

    #[test]
    fn claude_user_and_local_scopes_with_lines() {
        let text = "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\", \"args\": [\"1\", 2]}\n  },\n  \"projects\": {\n    \"/p/\": {\"mcpServers\": {\"b\": {\"url\": \"http://h\"}}},\n    \"/q\": {\"mcpServers\": {\"c\": {\"command\": \"y\"}}}\n  }\n}\n";
        let f = parse(text, &source(Client::ClaudeCode)).unwrap();
        assert_eq!(f.sections[1].path, ["projects", "/p/", "mcpServers"]);
        assert_eq!(f.sections[1].scope, "local");
        let names: Vec<_> = f.entries.iter().map(|e| (e.name.as_str(), e.line, e.section)).collect();
        assert_eq!(names, [("a", 3, 0), ("b", 6, 1)]);
        assert_eq!(f.entries[0].launch, Launch::Stdio { command: "x".into(), args: vec!["1".into(), "2".into()] });
        assert_eq!(f.entries[1].launch, Launch::Remote);
    }

    #[test]
    fn each_dialect_refuses_what_its_client_refuses_with_line_and_column() {
        let commented = "{\n  // note\n  \"mcpServers\": {}\n}\n";
        let e = parse(commented, &source(Client::ClaudeCode)).unwrap_err();
        assert_eq!((e.line, e.column), (2, 3), "{e:?}");
        assert!(e.message.contains("comments"), "{e:?}");
        assert!(parse(commented, &source(Client::Gemini)).is_ok());
        let trailing = "{\"servers\": {\"a\": {\"command\": \"x\",},},}";
        assert!(parse(trailing, &source(Client::Vscode)).is_ok());
        assert!(parse(trailing, &source(Client::Cursor)).is_err());
        let e = parse("{\"mcpServers\": []}", &source(Client::Cursor)).unwrap_err();
        assert!(e.message.contains("not an object") && e.column == 16, "{e:?}");
    }

    #[test]
    fn codex_tables_inline_and_sub_tables() {
        let text = "model = \"o3\"\n\n[mcp_servers.a]\ncommand = \"x\"\nargs = [\"--profile\", \"p\"]\nenv = { K = \"v\" }\n\n[mcp_servers.b]\ncommand = \"y\"\n\n[mcp_servers.b.env]\nGITEA_X = \"1\"\n";
        let f = parse(text, &source(Client::Codex)).unwrap();
        let got: Vec<_> = f.entries.iter().map(|e| (e.name.as_str(), e.line, e.env.clone())).collect();
        assert_eq!(got, [("a", 3, vec![("K".into(), "v".into())]), ("b", 8, vec![("GITEA_X".into(), "1".into())])]);
        let e = parse("[mcp_servers.a]\ncommand = \n", &source(Client::Codex)).unwrap_err();
        assert_eq!(e.line, 2, "{e:?}");
    }

    /// Found by `fuzz/fuzz_targets/doctor_config.rs` (minimized): the JSON parser counts a
    /// lone `\r` as a line break and the doctor did not, so an error in such a file was
    /// reported on a line the file does not have (line 2 of a one-line file), and an
    /// entry's line and an error's disagreed.
    #[test]
    fn a_lone_carriage_return_is_a_line_break_for_errors_and_entries_alike() {
        let e = parse("\r\"", &source(Client::Cursor)).unwrap_err();
        assert_eq!((e.line, e.column), (2, 1), "{e:?}");
        let text = "{\r  \"mcpServers\": {\r\n    \"a\": {\"command\": \"x\"}\r  },\r  oops\n}";
        let e = parse(text, &source(Client::Gemini)).unwrap_err();
        assert_eq!((e.line, e.column), (5, 3), "{e:?}");
        let f = parse(&text.replace("oops", "\"k\": 1"), &source(Client::Gemini)).unwrap();
        assert_eq!(f.entries[0].line, 3);
        assert_eq!(line_col("a\r\nb\rc\nd", 7), (4, 1));
        assert_eq!(line_col("a\r\nb\rc\nd", 99), (4, 2));
        assert_eq!(line_col("\u{e9}\u{e9}x", 4), (1, 3), "columns count characters");
        assert_eq!(line_col("\u{e9}", 1), (1, 1), "an offset inside a character is its start");
    }

    #[test]
    fn empty_files_hold_nothing() {
        assert_eq!(parse(" \n", &source(Client::Gemini)).unwrap(), ParsedFile::default());
    }
}
