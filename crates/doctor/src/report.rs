//! The doctor's report in words: each client's verdict, finding and unreadable file as the
//! readable reply shows them, every quoted value [`shown`] (a hostile project's file may hold
//! escape sequences or newlines in its key names and values).

use crate::findings::{ClientReport, Finding};
use fleetgate_core::text::shown;
use serde_json::{Value, json};

/// Every file that could not be read, as the JSON `errors` list.
pub fn file_errors<'a>(reports: impl Iterator<Item = &'a ClientReport>) -> Vec<Value> {
    reports
        .flat_map(|r| &r.files)
        .filter_map(|f| {
            let e = f.error.as_ref()?;
            Some(json!({ "file": f.path, "line": e.line, "column": e.column, "message": e.message }))
        })
        .collect()
}

/// One of [`file_errors`] as a line: `file:line:column: message`.
pub fn error_line(e: &Value) -> String {
    match (e["line"].as_u64(), e["column"].as_u64()) {
        (Some(l), Some(c)) => {
            format!("{}:{l}:{c}: {}", e["file"].as_str().unwrap_or(""), e["message"].as_str().unwrap_or(""))
        }
        _ => format!("{}: {}", e["file"].as_str().unwrap_or(""), e["message"].as_str().unwrap_or("")),
    }
}

/// One finding, its message [`shown`]: it quotes a file's key names and values, which a
/// hostile project may fill with escape sequences or newlines.
pub fn finding_line(f: &Finding) -> String {
    let message = shown(&f.message, usize::MAX);
    format!("  - {}: {message}{}", json!(f.kind).as_str().unwrap_or(""), if f.fixable { " [fixable]" } else { "" })
}

/// One client's verdict, its files, members and findings.
pub fn client_text(r: &ClientReport) -> String {
    let present: Vec<&str> = r.files.iter().filter(|f| f.exists).map(|f| f.path.as_str()).collect();
    let mut out = vec![format!(
        "{}: {}",
        r.client,
        if present.is_empty() { "no configuration file".to_owned() } else { shown(&present.join(", "), usize::MAX) }
    )];
    for f in r.files.iter().filter_map(|f| f.error.as_ref().map(|e| (f, e))) {
        let line = format!("{}:{}:{}: {}", f.0.path, f.1.line, f.1.column, f.1.message);
        out.push(format!("  error: {}", shown(&line, usize::MAX)));
    }
    if !r.adopted && r.findings.is_empty() {
        if r.files.iter().any(|f| f.error.is_some()) {
            out.push("  members unknown until the file above can be read".to_owned());
        } else if !present.is_empty() {
            out.push(format!("  none of the roster's members ({} other servers)", r.unrelated_servers.len()));
        }
        return out.join("\n");
    }
    for m in &r.members {
        let defs: Vec<String> = m
            .definitions
            .iter()
            .map(|d| shown(&format!("{} {}:{} {:?}", d.launch, d.file, d.line, d.entry), usize::MAX))
            .collect();
        let shown = if defs.is_empty() { m.status.to_owned() } else { defs.join("; ") };
        out.push(format!("  {:<20} {shown}", m.profile));
    }
    out.extend(r.findings.iter().map(finding_line));
    out.join("\n")
}
