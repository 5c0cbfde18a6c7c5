//! The repair as a unified diff, one per changed file, with the file's path on
//! both sides so `patch -p0` could apply it.

/// The unified diff of `old` → `new`, three lines of context.
pub fn unified(path: &str, old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new).unified_diff().context_radius(3).header(path, path).to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_one_line_change_with_context() {
        let d = super::unified("/f", "a\nb\nc\n", "a\nB\nc\n");
        assert_eq!(d, "--- /f\n+++ /f\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n");
        assert_eq!(super::unified("/f", "same\n", "same\n"), "");
    }
}
