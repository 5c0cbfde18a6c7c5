//! Text as a terminal or the dashboard's page may show it: a stored name, a client's
//! configuration, a call's arguments or another user's command line is quoted in readable
//! replies, and none of it may move the cursor, set the title, forge a line, hide a character
//! or turn what follows around. What an operator approves must read as what is forwarded.

use unicode_general_category::{GeneralCategory, get_general_category};

/// Whether `c` must be shown escaped: a control character (ESC starts a CSI or OSC sequence,
/// CR and newline forge lines) or an invisible or direction-changing one ([`invisible`]).
pub fn needs_escape(c: char) -> bool {
    c.is_control() || invisible(c)
}

/// A character that shows as nothing, as a blank or as something else, or changes the
/// direction of what follows — decided by Unicode property, not by a list of known tricks:
/// the default-ignorable code points (variation selectors, the combining grapheme joiner,
/// Hangul fillers, tag characters, the reserved ranges kept for more of them), every format
/// character (Cf: zero-width characters, bidi marks, embeddings, overrides and isolates, the
/// byte order mark), line and paragraph separators (Zl, Zp, which end a line), every space
/// but U+0020 (Zs: a no-break space reads as a space), private use (Co: a font may draw
/// anything there) and the blank Braille pattern.
pub fn invisible(c: char) -> bool {
    use GeneralCategory as G;
    if c.is_ascii() {
        return false;
    }
    default_ignorable(c)
        || c == '\u{2800}'
        || matches!(
            get_general_category(c),
            G::Format | G::LineSeparator | G::ParagraphSeparator | G::SpaceSeparator | G::PrivateUse | G::Surrogate
        )
}

/// Unicode's `Default_Ignorable_Code_Point` (DerivedCoreProperties.txt): shown as nothing by
/// a renderer that does not support them, and reserved so for future assignments. Those of
/// category Cf are [`invisible`] by category too; the rest are marks, letters and unassigned.
fn default_ignorable(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'..='\u{1160}'
            | '\u{17B4}'..='\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFF8}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
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
        if needs_escape(c) {
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
        if needs_escape(c) && c != '\n' && c != '\t' {
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

    /// Issue 43 (7): every character that shows as nothing, as a space or as something else,
    /// or turns what follows around, is escaped wherever it stands: by category (format
    /// characters, default-ignorable code points, private use, separators), not a list.
    #[test]
    fn every_invisible_or_direction_changing_character_is_made_visible() {
        let payloads = [
            ('\u{fe0f}', "variation selector 16"),
            ('\u{fe00}', "variation selector 1"),
            ('\u{e0100}', "variation selector 17"),
            ('\u{034f}', "combining grapheme joiner"),
            ('\u{3164}', "Hangul filler"),
            ('\u{115f}', "Hangul choseong filler"),
            ('\u{1160}', "Hangul jungseong filler"),
            ('\u{ffa0}', "halfwidth Hangul filler"),
            ('\u{17b4}', "Khmer inherent vowel"),
            ('\u{180b}', "Mongolian free variation selector"),
            ('\u{180e}', "Mongolian vowel separator"),
            ('\u{2065}', "reserved default-ignorable"),
            ('\u{fff0}', "reserved default-ignorable"),
            ('\u{e0041}', "tag A"),
            ('\u{e007f}', "cancel tag"),
            ('\u{200b}', "zero width space"),
            ('\u{200d}', "zero width joiner"),
            ('\u{2060}', "word joiner"),
            ('\u{feff}', "byte order mark"),
            ('\u{00ad}', "soft hyphen"),
            ('\u{061c}', "Arabic letter mark"),
            ('\u{200f}', "right-to-left mark"),
            ('\u{202e}', "right-to-left override"),
            ('\u{2067}', "right-to-left isolate"),
            ('\u{2069}', "pop directional isolate"),
            ('\u{2028}', "line separator"),
            ('\u{2029}', "paragraph separator"),
            ('\u{00a0}', "no-break space"),
            ('\u{3000}', "ideographic space"),
            ('\u{2800}', "braille blank"),
            ('\u{e000}', "private use"),
            ('\u{f0000}', "supplementary private use"),
            ('\u{1d173}', "musical format control"),
            ('\u{0085}', "next line"),
            ('\u{001b}', "escape"),
        ];
        for (c, what) in payloads {
            let value = format!("ma{c}in");
            let escaped = format!("ma{}in", c.escape_unicode());
            assert_eq!(shown(&value, usize::MAX), escaped, "{what} U+{:04X}", c as u32);
            assert_eq!(terminal_text(&value), escaped, "{what} U+{:04X}", c as u32);
            assert!(needs_escape(c), "{what}");
        }
        // What reads as itself stays: letters of every script, marks, emoji, spaces, tabs.
        for plain in ["main", "café", "中文", "مرحبا", "שלום", "e\u{301}", "😀", "a b", "Ω≠∞"] {
            assert_eq!(shown(plain, usize::MAX), plain);
        }
        assert_eq!(terminal_text("a\tb\nc"), "a\tb\nc");
    }

    #[test]
    fn the_last_guard_keeps_the_layout_and_escapes_every_sequence() {
        let text = "a\tb\n\u{1b}]0;title\u{7}\u{1b}[2J\r\u{202E}x";
        let shown = terminal_text(text);
        assert_eq!(shown, "a\tb\n\\u{1b}]0;title\\u{7}\\u{1b}[2J\\r\\u{202e}x");
        assert!(!shown.contains(['\u{1b}', '\u{7}', '\r', '\u{202E}']));
    }
}
