//! Applying a file's [`Edit`]s to its text, format-preserving: key order,
//! indentation, comments and every entry the edits do not name stay as they
//! were. JSON and JSONC go through `jsonc-parser`'s concrete syntax tree,
//! TOML through `toml_edit`. Pure: text in, text out.

use super::clients::{Format, SourceFile};
use super::read::{Launch, ParsedFile, json_options};
use super::repair::{Edit, replace_token, unwrapped, wrapped_args};
use jsonc_parser::cst::{CstContainerNode, CstInputValue, CstLeafNode, CstNode, CstObject, CstRootNode};

/// Apply `edits` to `text`, which parsed as `parsed`.
pub fn apply(text: &str, source: &SourceFile, parsed: &ParsedFile, edits: &[Edit]) -> Result<String, EditError> {
    match source.format {
        Format::Json { .. } => json(text, source.format, parsed, edits),
        Format::Toml => toml(text, parsed, edits),
    }
}

fn stdio(parsed: &ParsedFile, entry: usize) -> Result<(&str, &[String]), EditError> {
    match &parsed.entries[entry].launch {
        Launch::Stdio { command, args } => Ok((command, args)),
        _ => Err(EditError::LaunchesNoCommand(parsed.entries[entry].name.clone())),
    }
}

fn json(text: &str, format: Format, parsed: &ParsedFile, edits: &[Edit]) -> Result<String, EditError> {
    let root = CstRootNode::parse(text, &json_options(format))
        .map_err(|e| EditError::Unparsed(e.to_string().to_lowercase()))?;
    let section = |entry: usize| -> Result<CstObject, EditError> {
        let path = &parsed.sections[parsed.entries[entry].section].path;
        let mut object = root.object_value().ok_or(EditError::NotAJsonObject)?;
        for key in path {
            object = object.object_value(key).ok_or_else(|| EditError::KeyNotAnObject(key.clone()))?;
        }
        Ok(object)
    };
    let entry_object = |entry: usize| -> Result<CstObject, EditError> {
        let e = &parsed.entries[entry];
        section(entry)?
            .properties()
            .get(e.index)
            .and_then(|p| p.object_value())
            .ok_or_else(|| EditError::EntryNotAnObject(e.name.clone()))
    };
    for edit in edits {
        match edit {
            Edit::Wrap { entry, profile, fleetgate } => {
                let (command, args) = stdio(parsed, *entry)?;
                let (command, args) = unwrapped(command, args);
                let object = entry_object(*entry)?;
                let argv = CstInputValue::Array(
                    wrapped_args(fleetgate, profile, &command, &args).into_iter().map(Into::into).collect(),
                );
                let command_prop = object.get("command").ok_or(EditError::NoCommand)?;
                command_prop.set_value(fleetgate.command.as_str().into());
                match object.get("args") {
                    Some(prop) => prop.set_value(argv),
                    None => {
                        object.insert(command_prop.property_index() + 1, "args", argv);
                    }
                }
            }
            Edit::RemoveEnv { entry, key } => {
                if let Some(env) = entry_object(*entry)?.object_value("env") {
                    env.properties()
                        .into_iter()
                        .filter(|p| p.decoded_name().as_deref() == Some(key))
                        .for_each(|p| p.remove());
                }
            }
            Edit::SetEnv { entry, key, value } => {
                let env = entry_object(*entry)?.object_value_or_create("env").ok_or(EditError::EnvNotAnObject)?;
                match env.get(key) {
                    Some(prop) => prop.set_value(value.as_str().into()),
                    None => {
                        env.append(key, value.as_str().into());
                    }
                }
            }
            Edit::Add { template, name, replace } => {
                let e = &parsed.entries[*template];
                let section = section(*template)?;
                let value = section
                    .properties()
                    .get(e.index)
                    .and_then(|p| p.value())
                    .map(|v| copy(&v, replace))
                    .ok_or_else(|| EditError::NoValue(e.name.clone()))?;
                section.append(name, value);
            }
        }
    }
    Ok(root.to_string())
}

/// A copy of a CST value as input for an insert, with string values swapped.
fn copy(node: &CstNode, replace: &[(String, String)]) -> CstInputValue {
    match node {
        CstNode::Container(CstContainerNode::Object(o)) => CstInputValue::Object(
            o.properties().iter().filter_map(|p| Some((p.decoded_name()?, copy(&p.value()?, replace)))).collect(),
        ),
        CstNode::Container(CstContainerNode::Array(a)) => {
            CstInputValue::Array(a.elements().iter().map(|e| copy(e, replace)).collect())
        }
        CstNode::Leaf(CstLeafNode::StringLit(s)) => {
            CstInputValue::String(replace_token(&s.decoded_value().unwrap_or_else(|_| s.raw_value()), replace))
        }
        CstNode::Leaf(CstLeafNode::NumberLit(n)) => CstInputValue::Number(n.to_string()),
        CstNode::Leaf(CstLeafNode::BooleanLit(b)) => CstInputValue::Bool(b.value()),
        CstNode::Leaf(CstLeafNode::WordLit(w)) => CstInputValue::String(w.to_string()),
        _ => CstInputValue::Null,
    }
}

fn toml(text: &str, parsed: &ParsedFile, edits: &[Edit]) -> Result<String, EditError> {
    let mut doc: toml_edit::DocumentMut =
        text.parse().map_err(|e: toml_edit::TomlError| EditError::Unparsed(e.message().to_lowercase()))?;
    for edit in edits {
        let entry = match edit {
            Edit::Wrap { entry, .. } | Edit::RemoveEnv { entry, .. } | Edit::SetEnv { entry, .. } => *entry,
            Edit::Add { template, .. } => *template,
        };
        let e = &parsed.entries[entry];
        let mut servers: &mut toml_edit::Item = doc.as_item_mut();
        for key in &parsed.sections[e.section].path {
            servers = servers.get_mut(key).ok_or_else(|| EditError::NoTable(key.clone()))?;
        }
        let servers = servers.as_table_like_mut().ok_or(EditError::ServersNotATable)?;
        if let Edit::Add { name, replace, .. } = edit {
            let mut copied = servers.get(&e.name).cloned().ok_or_else(|| EditError::NoEntry(e.name.clone()))?;
            toml_copy(&mut copied, replace);
            servers.insert(name, copied);
            continue;
        }
        let table = servers
            .get_mut(&e.name)
            .and_then(|i| i.as_table_like_mut())
            .ok_or_else(|| EditError::EntryNotATable(e.name.clone()))?;
        match edit {
            Edit::Wrap { profile, fleetgate, .. } => {
                let (command, args) = stdio(parsed, entry)?;
                let (command, args) = unwrapped(command, args);
                set_keeping_decor(table, "command", fleetgate.command.as_str().into());
                let argv: toml_edit::Array = wrapped_args(fleetgate, profile, &command, &args).into_iter().collect();
                set_keeping_decor(table, "args", argv.into());
            }
            Edit::RemoveEnv { key, .. } => {
                if let Some(env) = table.get_mut("env") {
                    if let Some(inline) = env.as_inline_table_mut() {
                        inline.remove(key);
                        inline.fmt();
                    } else if let Some(env) = env.as_table_like_mut() {
                        env.remove(key);
                    }
                }
            }
            Edit::SetEnv { key, value, .. } => match table.get_mut("env").and_then(|e| e.as_table_like_mut()) {
                Some(env) => set_keeping_decor(env, key, value.as_str().into()),
                None => {
                    let mut env = toml_edit::InlineTable::new();
                    env.insert(key, value.as_str().into());
                    table.insert("env", toml_edit::value(env));
                }
            },
            Edit::Add { .. } => {}
        }
    }
    Ok(doc.to_string())
}

/// Replace a value, keeping the whitespace and comment around the old one.
fn set_keeping_decor(table: &mut dyn toml_edit::TableLike, key: &str, mut value: toml_edit::Value) {
    if let Some(old) = table.get(key).and_then(|i| i.as_value()) {
        *value.decor_mut() = old.decor().clone();
    }
    table.insert(key, toml_edit::Item::Value(value));
}

/// Turn a copied entry into a new one: no position of its own (so it is
/// written after the section's last table), no comment above it, values swapped.
fn toml_copy(item: &mut toml_edit::Item, replace: &[(String, String)]) {
    match item {
        toml_edit::Item::Table(t) => {
            t.set_position(None);
            t.decor_mut().clear();
            for (_, child) in t.iter_mut() {
                toml_copy(child, replace);
            }
        }
        toml_edit::Item::Value(v) => toml_value(v, replace),
        _ => {}
    }
}

fn toml_value(value: &mut toml_edit::Value, replace: &[(String, String)]) {
    match value {
        toml_edit::Value::String(s) => {
            let swapped = replace_token(s.value(), replace);
            if &swapped != s.value() {
                let decor = s.decor().clone();
                *s = toml_edit::Formatted::new(swapped);
                *s.decor_mut() = decor;
            }
        }
        toml_edit::Value::Array(a) => a.iter_mut().for_each(|v| toml_value(v, replace)),
        toml_edit::Value::InlineTable(t) => t.iter_mut().for_each(|(_, v)| toml_value(v, replace)),
        _ => {}
    }
}

/// Why an edit cannot be made to a client's file (the file as read no longer matches what
/// was parsed, or the repair would not parse back).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[allow(missing_docs)] // each variant is its message
pub enum EditError {
    /// The file does not parse (the parser's message, lower-cased).
    #[error("{0}")]
    Unparsed(String),
    #[error("entry {0:?} launches no command")]
    LaunchesNoCommand(String),
    #[error("the file is not a JSON object")]
    NotAJsonObject,
    #[error("{0:?} is not an object")]
    KeyNotAnObject(String),
    #[error("entry {0:?} is not an object")]
    EntryNotAnObject(String),
    #[error("no command")]
    NoCommand,
    #[error("\"env\" is not an object")]
    EnvNotAnObject,
    #[error("entry {0:?} has no value")]
    NoValue(String),
    #[error("no table {0:?}")]
    NoTable(String),
    #[error("the servers key is not a table")]
    ServersNotATable,
    #[error("no entry {0:?}")]
    NoEntry(String),
    #[error("entry {0:?} is not a table")]
    EntryNotATable(String),
    /// The repaired text would not parse (the parser's error, debug-printed).
    #[error("the repair would not parse: {0}")]
    WouldNotParse(String),
}
