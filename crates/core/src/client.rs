//! Client-name normalisation: aliases of one application are one client,
//! separate applications stay distinct.

/// Fold case and `-`/`_`/spaces, then map known aliases of one application to
/// its canonical name. Unknown names are kept (folded), never merged.
pub fn normalize_client_name(raw: &str) -> String {
    let folded: String = raw
        .trim()
        .chars()
        .map(|c| match c {
            '-' | ' ' | '.' => '_',
            c => c.to_ascii_lowercase(),
        })
        .collect();
    let canonical = match folded.as_str() {
        "claude" | "claude_code" | "claudecode" | "claude_desktop" | "claude_ai" => "claude_code",
        "gemini" | "gemini_cli" => "gemini",
        "codex" | "codex_cli" | "openai_codex" => "codex",
        "cursor" | "cursor_agent" | "cursor_ide" => "cursor",
        _ => return folded,
    };
    canonical.to_owned()
}

#[cfg(test)]
mod tests {
    use super::normalize_client_name as n;

    #[test]
    fn aliases_of_one_application_map_to_one_name() {
        for alias in ["claude", "claude_desktop", "claude-code", "claude_code", "Claude-Code"] {
            assert_eq!(n(alias), "claude_code", "{alias}");
        }
    }

    #[test]
    fn separate_applications_stay_distinct() {
        let names: Vec<String> = ["claude", "gemini", "codex", "cursor", "grok"].iter().map(|s| n(s)).collect();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        assert_eq!(n("Gemini-CLI"), "gemini");
        assert_eq!(n("Some_New-Client"), "some_new_client");
    }
}
