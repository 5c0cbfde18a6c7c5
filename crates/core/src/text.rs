//! Text as a terminal may show it: a stored name, a client's configuration or another user's
//! command line is quoted in readable replies, and none of it may move the cursor, set the
//! title or forge a line.

/// Whether a terminal must be shown `c` escaped: a control character (ESC starts a CSI or
/// OSC sequence, CR and newline forge lines) or an invisible or direction-changing one.
fn unsafe_char(c: char) -> bool {
    c.is_control() || crate::worker::is_invisible_or_bidi(c)
}

/// A value as a terminal may show it: control, invisible and direction-changing characters
/// escaped (a stored name or another user's command line cannot move the cursor, set the
/// title or forge a line), cut to `max` characters with an ellipsis (`usize::MAX`: uncut).
pub fn shown(value: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in value.chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        if unsafe_char(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// A whole readable reply, as the last guard before the terminal: every character [`shown`]
/// escapes, except the newlines and tabs the reply is laid out with. Values are escaped where
/// they are interpolated too (so a newline in one cannot forge a line); this catches any
/// escape sequence a reply's builder missed.
pub fn terminal_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if unsafe_char(c) && c != '\n' && c != '\t' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// The longest cell a table prints, in characters: a stored value may be anything.
pub const MAX_CELL_CHARS: usize = 120;

/// A fixed-width table for the readable forms. Cells are [`shown`]: escaped and bounded, so
/// no stored value can break the layout or the formatter.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows.iter().map(|r| r.iter().map(|c| shown(c, MAX_CELL_CHARS)).collect()).collect();
    let rows = &rows;
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  "));
            }
        }
        out.trim_end().to_owned()
    };
    let mut out = vec![line(headers.to_vec())];
    out.extend(rows.iter().map(|r| line(r.iter().map(String::as_str).collect())));
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_value_cannot_break_a_table_or_forge_a_line() {
        let huge = "x".repeat(70_000);
        let forged = "author\n5 of 5 members running: mutation gate open\u{1b}[2K";
        let t = table(&["NAME", "PID"], &[vec![huge, "1".into()], vec![forged.into(), "2".into()]]);
        assert_eq!(t.lines().count(), 3, "one line per row: {t}");
        assert!(t.lines().all(|l| l.chars().count() < 200), "{t}");
        assert!(t.contains("author\\n5 of 5") && t.contains("\\u{1b}"), "{t}");
    }

    #[test]
    fn the_last_guard_keeps_the_layout_and_escapes_every_sequence() {
        let text = "a\tb\n\u{1b}]0;title\u{7}\u{1b}[2J\r\u{202E}x";
        let shown = terminal_text(text);
        assert_eq!(shown, "a\tb\n\\u{1b}]0;title\\u{7}\\u{1b}[2J\\r\\u{202e}x");
        assert!(!shown.contains(['\u{1b}', '\u{7}', '\r', '\u{202E}']));
    }
}
